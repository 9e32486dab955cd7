"""Several simulated chips under torch.distributed: ranks launched on this machine, compared with
what one device computes (collectives, DTensor, local_map, tensor- and data-parallel training),
traces merged across ranks, and failures reported by rank without leaving processes behind.

Starting a rank costs seconds (torch is imported in each), so each world size runs all its
checks in ONE launch (dist_ranks.world_checks) and the tests below read its results."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import dist_ranks
import pytest
import torch

import mtia_lab
from mtia_lab.distributed import (
    LaunchError,
    collective_cost,
    examples,
    launch,
    merge_traces,
    to_chrome_trace,
)
from mtia_lab.distributed.agreement import Call, CollectiveMismatchError, check
from mtia_lab.viz.timeline import timeline_of
from mtia_lab.viz.timeline_views import timeline_view
from mtia_lab.viz.trace_explorer import TraceExplorer

N = dist_ranks.N


def _inputs(world: int, n: int = N) -> list[torch.Tensor]:
    return [dist_ranks.rank_input(r, n) for r in range(world)]


@pytest.fixture(scope="module", params=[2, 4], ids=["2 ranks", "4 ranks"])
def world(request):
    size = request.param
    result = launch(dist_ranks.world_checks, nprocs=size, timeout=60, echo=False)
    return size, result.values


# -- collectives against what one device computes ------------------------------------------------
def test_all_reduce_sum_avg_max(world):
    size, values = world
    stacked = torch.stack(_inputs(size))
    for rank, out in enumerate(values):
        torch.testing.assert_close(out["all_reduce_sum"], stacked.sum(0))
        torch.testing.assert_close(out["all_reduce_avg"], stacked.mean(0))
        torch.testing.assert_close(out["all_reduce_max"], stacked.max(0).values)
        torch.testing.assert_close(out["async_all_reduce"], stacked.sum(0))
        torch.testing.assert_close(out["all_reduce_host"], stacked.sum(0))
        torch.testing.assert_close(out["fc_all_reduce"], stacked.sum(0))
        squares = torch.stack([t.view(4, 4).t() for t in _inputs(size, 16)])
        torch.testing.assert_close(out["all_reduce_transposed"], squares.sum(0))
        assert out["async_completed_before_wait"] in (True, False), rank


def test_all_gather_reduce_scatter_all_to_all_broadcast(world):
    size, values = world
    gathered = torch.cat(_inputs(size))
    bigs = _inputs(size, size * N)
    reduced = torch.stack(bigs).sum(0)
    for rank, out in enumerate(values):
        torch.testing.assert_close(out["all_gather_into_tensor"], gathered)
        torch.testing.assert_close(out["fc_all_gather"], gathered)
        torch.testing.assert_close(out["all_gather"], torch.stack(_inputs(size)))
        mine = reduced[rank * N:(rank + 1) * N]
        torch.testing.assert_close(out["reduce_scatter_tensor"], mine)
        torch.testing.assert_close(out["reduce_scatter"], mine)
        torch.testing.assert_close(out["fc_reduce_scatter"], mine)
        swapped = torch.cat([b[rank * N:(rank + 1) * N] for b in bigs])
        torch.testing.assert_close(out["all_to_all_single"], swapped)
        torch.testing.assert_close(out["all_to_all"], swapped)
        torch.testing.assert_close(out["fc_all_to_all"], swapped)
        torch.testing.assert_close(out["broadcast"], _inputs(size)[-1])
        torch.testing.assert_close(out["fc_broadcast"], _inputs(size)[0])
        torch.testing.assert_close(out["recv"], 2 * _inputs(size)[(rank - 1) % size])


def test_gather_scatter_reduce_objects_and_other_dtypes(world):
    size, values = world
    inputs = _inputs(size)
    torch.testing.assert_close(values[0]["gather"], torch.stack(inputs))
    for rank, out in enumerate(values):
        torch.testing.assert_close(out["scatter"], inputs[rank])
        expected = torch.stack(inputs).mean(0) if rank == size - 1 else inputs[rank]
        torch.testing.assert_close(out["reduce_avg"], expected)  # only the root is reduced
        assert out["all_gather_object"] == [{"rank": r} for r in range(size)]
        torch.testing.assert_close(out["all_reduce_bf16"],
                                   torch.full((N,), float(size), dtype=torch.bfloat16))
        # integer AVG floors the mean, as torch.div(rounding_mode="floor") does
        ints = torch.stack([torch.full((N,), 3 + r, dtype=torch.int64) for r in range(size)])
        torch.testing.assert_close(out["all_reduce_avg_int64"], ints.sum(0) // size)


def test_each_rank_owns_one_chip_and_clocks_agree_after_a_collective(world):
    size, values = world
    assert [out["visible"] for out in values] == [str(r) for r in range(size)]
    assert {out["device"] for out in values} == {"mtia_sim:0"}
    assert len({out["clock_us"] for out in values}) == 1
    assert values[0]["clock_us"] > 0


def test_mismatched_calls_raise_on_every_rank_naming_each_call(world):
    size, values = world
    for out in values:
        errors = out["mismatch"]
        assert "rank 0: allreduce(sum) #" in errors["shape"]
        assert "float32[4]" in errors["shape"] and "float32[8]" in errors["shape"]
        assert "float64[4]" in errors["dtype"]
        assert "broadcast root=0" in errors["collective"]
        torch.testing.assert_close(out["after_mismatch"], torch.full((4,), float(size)))
    assert len({str(out["mismatch"]) for out in values}) == 1  # the same message everywhere


# -- DTensor and local_map ----------------------------------------------------------------------
def _dtensor_inputs(size):
    torch.manual_seed(0)
    return torch.randn(8, 4 * size), torch.randn(4 * size, 3)


def test_dtensor_shard_replicate_partial_redistribute(world):
    size, values = world
    x, w = _dtensor_inputs(size)
    for rank, out in enumerate(values):
        torch.testing.assert_close(out["dt_local"], x.chunk(size)[rank])
        torch.testing.assert_close(out["dt_full"], x)
        torch.testing.assert_close(out["dt_replicate"], x)
        torch.testing.assert_close(out["dt_shard1_local"], x.chunk(size, dim=1)[rank])
        torch.testing.assert_close(out["dt_matmul"], x @ w)
        assert out["dt_partial_placement"] == "P(sum)"  # a Partial(sum) result
        torch.testing.assert_close(out["dt_partial_full"], x @ w)
        torch.testing.assert_close(out["dt_from_partial"],
                                   torch.full((3,), size * (size + 1) / 2))
        torch.testing.assert_close(out["dt_sum"], x.sum())
        uneven = torch.arange(7 * 3, dtype=torch.float32).view(7, 3)
        assert out["dt_uneven_local_rows"] == len(uneven.chunk(size)[rank])  # torch.chunk's
        torch.testing.assert_close(out["dt_uneven_full"], uneven * 2)


def test_dtensor_on_a_2d_mesh(world):
    size, values = world
    if size != 4:
        pytest.skip("a 2 x 2 mesh needs 4 ranks")
    x, _ = _dtensor_inputs(size)
    for out in values:
        i, j = out["coordinate"]
        torch.testing.assert_close(out["dt2_local"], x.chunk(2, 0)[i].chunk(2, 1)[j])
        torch.testing.assert_close(out["dt2_full"], x)
        torch.testing.assert_close(out["dt2_redistributed_local"], x.chunk(2, 0)[j])
        torch.testing.assert_close(out["dt2_partial_full"], torch.full((3,), 3.0))


def test_local_map_runs_on_shards_and_names_the_mismatched_argument(world):
    size, values = world
    x, _ = _dtensor_inputs(size)
    for out in values:
        torch.testing.assert_close(out["local_map"], x * 3)
        errors = out["local_map_errors"]
        assert "argument 'x' is placed [Replicate()]" in errors["replicated_x"]
        assert "declares [Shard(dim=0)]" in errors["replicated_x"]
        assert "argument 'scale' is a plain torch.Tensor" in errors["plain_scale"]


# -- training: tensor parallel and data parallel against one device -----------------------------
@pytest.fixture(scope="module")
def one_device():
    return {size: examples.one_device_reference(size, device="mtia_sim") for size in (2, 4)}


def test_a_device_mesh_made_first_thing_keeps_the_ranks_own_chip():
    result = launch(dist_ranks.mesh_first, nprocs=2, timeout=60, echo=False)
    assert result.values == [("mtia_sim", 0, 2)] * 2


def test_tensor_parallel_block_matches_one_device(world, one_device):
    size, values = world
    ref = one_device[size]
    for out in values:
        tp = out["tp"]
        torch.testing.assert_close(tp["out"], ref["out"], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(tp["q_grad"], ref["q_grad"], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(tp["down_grad"], ref["down_grad"], atol=1e-5, rtol=1e-5)


def test_data_parallel_steps_match_one_device(world, one_device):
    size, values = world
    ref = one_device[size]
    for out in values:
        dp = out["dp"]
        assert dp["losses"] == pytest.approx(ref["losses"], rel=1e-5)
        torch.testing.assert_close(dp["q"], ref["q"], atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(dp["down"], ref["down"], atol=1e-6, rtol=1e-5)


def test_fsdp2_training_steps_match_one_device(world, one_device):
    """FSDP2 frees each unsharded parameter by resizing its storage to zero and regathers it
    into the same storage: on the device as on CUDA, and the steps match one device's."""
    size, values = world
    ref = one_device[size]
    for out in values:
        fsdp = out["fsdp2"]
        assert fsdp["losses"] == pytest.approx(ref["losses"], rel=1e-5)
        torch.testing.assert_close(fsdp["q"], ref["q"], atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(fsdp["down"], ref["down"], atol=1e-6, rtol=1e-5)


# -- traces across ranks --------------------------------------------------------------------------
def test_merged_trace_joins_collectives_and_shows_the_slow_ranks_wait(world):
    size, values = world
    merged = merge_traces([out["trace"] for out in values])
    assert merged.ranks() == list(range(size))
    collectives = merged.collectives()
    assert [c.op for c in collectives] == ["c10d::allreduce", "c10d::allgather"]
    for c in collectives:
        assert c.ranks == tuple(range(size))
        assert len({p.start_us for p in c.parts}) == 1  # they start together
        assert len({p.end_us for p in c.parts}) == 1
    first = collectives[0]
    assert first.slowest == 1  # rank 1 did three more matmuls
    for part in first.parts:
        assert (part.waited_us > 0) == (part.rank != 1)
    waits = merged.filter(kind="wait")
    assert sorted({e.rank for e in waits}) == [r for r in range(size) if r != 1]
    split = {row.rank: row for row in merged.time_split()}
    assert split[1].wait_us == 0 and split[0].wait_us > 0
    assert split[1].compute_us > split[0].compute_us
    # one timeline row per rank (and stream); the text names the waiting
    lanes = timeline_of(merged).lanes
    assert [(ln.rank, ln.device, ln.stream) for ln in lanes] == [(r, 0, 0) for r in range(size)]
    text = timeline_view(merged).to_text()
    assert "rank 0 mtia_sim:0 stream 0" in text and "waiting for other ranks" in text
    assert "waiting for a rank" in timeline_view(merged).to_svg()
    # the explorer filters by rank
    explorer = TraceExplorer(merged)
    explorer.set_filters(rank=1)
    assert explorer.rows and {e.rank for e in explorer.rows} == {1}
    explorer.set_filters(rank=None, kind="collective")
    assert {e.rank for e in explorer.rows} == set(range(size))
    # Chrome / Perfetto: one process per rank, a flow joining each collective's parts
    chrome = to_chrome_trace(merged)["traceEvents"]
    assert {e["pid"] for e in chrome} == set(range(size))
    flows = [e for e in chrome if e["ph"] in "stf" and e.get("cat") == "collective"]
    assert len(flows) == 2 * size


def test_launch_with_trace_returns_values_outputs_and_the_merged_trace(capsys):
    result = launch(dist_ranks.small_traced, nprocs=2, trace=True)
    assert result.values == [0, 10]
    assert capsys.readouterr().out.splitlines() == ["[rank 0] hello from rank 0",
                                                    "[rank 1] hello from rank 1"]
    merged = result.trace
    assert [t.metadata["label"] for t in result.traces] == ["rank 0", "rank 1"]
    assert merged.ranks() == [0, 1]
    assert [c.id for c in merged.collectives()] == ["allreduce #1 (group 0)"]
    for rank in (0, 1):  # each rank's own ops, then the collective, from the user's line
        ops = [e.op for e in merged.filter(rank=rank) if e.sim_start_us is not None]
        assert "aten::relu_" in ops and ops[-1] == "c10d::allreduce"
    assert {e.source.rsplit(":", 1)[0].rsplit("/", 1)[-1]
            for e in merged.filter(kind="collective")} == {"dist_ranks.py"}


def test_ranked_trace_saves_and_loads(world, tmp_path):
    from mtia_lab.distributed import load_ranked_trace, save_ranked_trace

    _, values = world
    merged = merge_traces([out["trace"] for out in values])
    save_ranked_trace(merged, tmp_path / "ranks.json")
    again = load_ranked_trace(tmp_path / "ranks.json")
    assert again.events == merged.events
    assert [c.id for c in again.collectives()] == [c.id for c in merged.collectives()]
    # the generic save and Chrome export keep the ranks too
    mtia_lab.trace.io.save_trace(merged, tmp_path / "generic.json")
    assert load_ranked_trace(tmp_path / "generic.json").events == merged.events
    plain = mtia_lab.load_trace(tmp_path / "generic.json")
    assert plain.metadata["event_ranks"] == [e.rank for e in merged.events]
    chrome = mtia_lab.trace.io.to_chrome_trace(merged)["traceEvents"]
    assert {e["pid"] for e in chrome} == set(merged.ranks())


# -- the interconnect model and the agreement, without launching ---------------------------------
def test_interconnect_formulas():
    profile = mtia_lab.MTIA_V2
    a, b = profile.link_latency_us, 1e6 / profile.link_bandwidth
    big = collective_cost("allreduce", 4 << 20, 4, profile)
    assert big.algorithm == "ring"
    assert big.duration_us == pytest.approx(2 * 3 * a + 2 * 3 / 4 * (4 << 20) * b)
    small = collective_cost("allreduce", 64, 4, profile)
    assert small.algorithm == "tree"
    assert small.duration_us == pytest.approx(2 * 2 * (a + 64 * b))
    assert collective_cost("allgather", 1024, 2, profile).duration_us == pytest.approx(
        a + 512 * b)
    assert collective_cost("barrier", 0, 8, profile).duration_us == pytest.approx(3 * a)
    assert collective_cost("allreduce", 1024, 1, profile).duration_us == 0.0


def test_agreement_names_every_rank_call():
    calls = [Call(3, "allreduce", torch.float32, "sum", -1, (4,), 4),
             Call(3, "allreduce", torch.float32, "max", -1, (4,), 4)]
    with pytest.raises(CollectiveMismatchError, match=r"rank 1: allreduce\(max\) #3"):
        check(calls, "0")
    check(calls[:1] * 2, "0")


def test_launch_refuses_functions_the_ranks_cannot_import():
    def local_step():
        return 1

    for fn in (local_step, lambda: 1):
        with pytest.raises(ValueError, match="%%writefile"):
            launch(fn, nprocs=2)


# -- failures: the launcher names the rank, peers fail fast, no process is left -------------------
def _no_ranks_left(before: set[int]) -> None:
    """No rank process started by this test process is still running (other test sessions on
    the machine may run ranks of their own: only our children count)."""
    alive = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    leftovers = []
    for pid in alive - before:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read()
            with open(f"/proc/{pid}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"mtia_lab.distributed._worker" in command and parent == os.getpid():
            leftovers.append(pid)
    assert not leftovers


@pytest.mark.parametrize("fn, culprit, why", [
    (dist_ranks.raises_on_rank_1, "ValueError: rank 1 broke on purpose", "a peer rank failed"),
    (dist_ranks.dies_on_rank_1, "died (killed by signal SIGKILL)", "a peer rank failed"),
    (dist_ranks.rank_1_stuck, "stopped by the launcher", "timed out after 3 s"),
], ids=["raises", "dies", "stuck"])
def test_a_failed_rank_is_named_and_its_peers_get_a_clear_error(fn, culprit, why):
    before = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    start = time.monotonic()
    with pytest.raises(LaunchError) as info:
        launch(fn, nprocs=2, timeout=3, grace=2, echo=False)
    assert time.monotonic() - start < 60
    error = info.value
    assert error.rank == 1
    assert culprit in str(error).splitlines()[0] or culprit in str(error)
    rank0 = error.outcomes[0]
    assert rank0.status == "raised" and rank0.error_type == "CollectiveError"
    assert why in rank0.message and "allreduce(sum) #1 on float32[4]" in rank0.message
    _no_ranks_left(before)


def test_command_line_runs_a_script_on_n_ranks_with_torchrun_variables(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        import os, sys
        import torch, torch.distributed as dist
        import mtia_lab
        dist.init_process_group()  # plain: mtia_sim is the accelerator, mtia_ccl its backend
        t = torch.ones(2, device="mtia_sim") * (dist.get_rank() + 1)
        dist.all_reduce(t)
        # One write of the whole line: the ranks share the launcher's stdout, and print()'s
        # separate write of the newline can interleave with the other rank's line.
        sys.stdout.write(f"rank={os.environ['RANK']} local={os.environ['LOCAL_RANK']} "
                         f"world={dist.get_world_size()} backend={dist.group.WORLD.name()} "
                         f"chip={os.environ['MTIA_SIM_VISIBLE_DEVICES']} "
                         f"sum={t.cpu().tolist()}\\n")
        sys.stdout.flush()
        dist.destroy_process_group()
        if sys.argv[1:] == ["fail"] and os.environ["RANK"] == "1":
            sys.exit(3)
    """))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    done = subprocess.run([sys.executable, "-m", "mtia_lab.distributed", "--nproc", "2",
                           str(script), "fail"], capture_output=True, text=True, env=env,
                          timeout=120)
    lines = sorted(line for line in done.stdout.splitlines() if line.startswith("rank="))
    assert lines == [
        "rank=0 local=0 world=2 backend=mtia_ccl chip=0 sum=[3.0, 3.0]",
        "rank=1 local=1 world=2 backend=mtia_ccl chip=1 sum=[3.0, 3.0]",
    ]
    assert done.returncode == 1
    assert "rank 1 of 2 failed first (exit code 3" in done.stderr


# -- without launching: local_map's checks, the launcher's verdict --------------------------------
def test_local_map_checks_need_no_process_group():
    from torch.distributed.tensor import Replicate, Shard

    from mtia_lab.distributed import PlacementMismatchError, local_map

    def body(x, pair):
        return x

    mapped = local_map(body, out_placements=[Replicate()],
                       in_placements=([Shard(0)], [Replicate()], None))
    with pytest.raises(PlacementMismatchError, match=r"argument 'x' is a plain torch.Tensor"):
        mapped(torch.ones(2), (torch.ones(2), 3))
    with pytest.raises(PlacementMismatchError,
                       match=r"3 entries but the call passed 2 inputs \(argument 'x', "
                             r"argument 'pair'\)"):
        mapped(torch.ones(2), torch.ones(2))
    with pytest.raises(PlacementMismatchError, match=r"argument 'pair' item 1 is int"):
        local_map(body, out_placements=[Replicate()],
                  in_placements=(None, None, [Replicate()]))(torch.ones(2), (torch.ones(2), 3))


def test_launch_error_names_the_rank_that_failed_first():
    from mtia_lab.distributed import RankOutcome

    peer = "mtia_ccl (group 0, rank 0 of 3): allreduce(sum) #1 on float32[4] failed: a peer " \
           "rank failed or exited (the launcher names it)"
    outcomes = [RankOutcome(0, "raised", 1, "CollectiveError", peer, "tb0", ended_s=1.0),
                RankOutcome(1, "died", -9, ended_s=2.0),
                RankOutcome(2, "stopped", None, ended_s=9.0)]
    error = LaunchError(outcomes, 3)
    assert error.rank == 1  # it died; rank 0 only saw it go, rank 2 was stopped afterwards
    lines = str(error).splitlines()
    assert lines[0] == "rank 1 of 3 failed first: died (killed by signal SIGKILL) without a " \
                       "Python error"
    assert "  rank 2: still running after the others failed; stopped by the launcher" in lines
    stuck = [RankOutcome(0, "raised", 1, "CollectiveError", "... it timed out after 3 s ...",
                         ended_s=3.0), RankOutcome(1, "stopped", None, ended_s=5.0)]
    assert LaunchError(stuck, 2).rank == 1  # its peer timed out waiting for it


def test_compiled_collectives_match_eager_in_values_trace_and_clock():
    """Both compile paths run the graph's all_reduce through mtia_ccl, as eager does."""
    result = launch(dist_ranks.compiled_collectives, nprocs=2, timeout=300, echo=False)
    inputs = [dist_ranks.rank_input(r, 8) for r in range(2)]
    expected = sum(x * 2 for x in inputs) + 1
    for rank, out in enumerate(result.values):
        eager = out["eager"]
        for name in ("eager", "mtia_lab", "inductor"):
            torch.testing.assert_close(out[name]["result"], expected, msg=f"{name} rank {rank}")
        for name in ("mtia_lab", "inductor"):
            compiled = out[name]
            assert len(compiled["collectives"]) == 1, name
            (op, reason, inputs_, duration), = compiled["collectives"]
            (e_op, e_reason, e_inputs, e_duration), = eager["collectives"]
            assert (op, reason, inputs_) == (e_op, e_reason, e_inputs), name
            assert duration == pytest.approx(e_duration, abs=1e-3), name
            assert compiled["clock_us"] == pytest.approx(eager["clock_us"], abs=1e-2), name
            # the same collective id on both ranks: the merged trace joins them
            assert compiled["ids"] == result.values[1 - rank][name]["ids"], name
            error = out[f"{name} mismatch"]
            assert error is not None and "allreduce" in error and "shape" in error, (name, error)


def test_compiled_gathers_scatters_and_backward_collectives_match_eager():
    """all_gather / reduce_scatter in compiled forward, and collectives in compiled backward
    (a DDP-like gradient all_reduce; all_gather's autograd reduce_scatter), on both compile
    paths: eager's values, gradients and collective events; the clock moves by the compiled
    kernels plus the collectives' interconnect time; a mismatch raises on every rank."""
    result = launch(dist_ranks.compiled_collectives_gather_scatter_backward, nprocs=2,
                    timeout=300, echo=False)
    cases = ("all_gather", "reduce_scatter", "ddp_like backward", "all_gather autograd")
    for rank, out in enumerate(result.values):
        peer = result.values[1 - rank]
        for case in cases:
            eager = out[(case, "eager")]
            assert eager["collectives"], case
            for path in ("mtia_lab", "inductor"):
                compiled, where = out[(case, path)], f"{case}, {path}, rank {rank}"
                torch.testing.assert_close(compiled["result"], eager["result"], msg=where)
                if eager["grad"] is not None:
                    torch.testing.assert_close(compiled["grad"], eager["grad"], msg=where)
                assert len(compiled["collectives"]) == len(eager["collectives"]), where
                for mine, theirs in zip(compiled["collectives"], eager["collectives"],
                                        strict=True):
                    assert mine[:3] == theirs[:3], where
                    assert mine[3] == pytest.approx(theirs[3], abs=1e-3), where
                on_wire = sum(c[3] for c in compiled["collectives"])
                assert compiled["clock_us"] == pytest.approx(
                    compiled["compute_us"] + on_wire, abs=1e-2), where
                assert compiled["ids"] == peer[(case, path)]["ids"], where
        for path in ("mtia_lab", "inductor"):
            for case, op in (("backward", "allreduce"), ("all_gather", "allgather"),
                             ("reduce_scatter", "reduce_scatter")):
                error = out[(f"mismatch in {case}", path)]
                assert error is not None and op in error and "float32[4]" in error, (path, error)
            after = out[("after the mismatches", path)]
            torch.testing.assert_close(after["grad"], out[("ddp_like backward", "eager")]["grad"])
    # the DDP-like gradient is the sum over ranks: both ranks hold the same one
    torch.testing.assert_close(result.values[0][("ddp_like backward", "eager")]["grad"],
                               result.values[1][("ddp_like backward", "eager")]["grad"])
