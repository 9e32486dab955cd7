"""A launch grid run as one NumPy program (mtia_lab/inductor/whole_grid/) against Triton's
own interpreter, program by program: the same results, for hand-written kernels and for the
kernels Inductor writes; what cannot run that way falls back without writing twice."""

import pytest
import torch

import mtia_lab  # noqa: F401  (sets Triton's interpreter switch before triton is imported)
from mtia_lab.inductor import install_hooks, whole_grid

install_hooks()

import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def add_row_id(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * n_cols + cols, x * 2.0 + row, mask=mask)


@triton.jit
def looped_row_sum(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):  # the trip count comes from an argument: a guard
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, 0))


@triton.jit
def bound_from_memory(x_ptr, n_ptr, out_ptr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    n = tl.load(n_ptr)  # the same in every program, but not a launch argument: a guard
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * 32 + cols, mask=cols < n, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, 0))


@triton.jit
def grid_ids(out_ptr, BLOCK: tl.constexpr):
    x = tl.program_id(0)
    y = tl.program_id(1)
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + (y * tl.num_programs(0) + x) * BLOCK + offs, x * 100 + y * 10 + offs)


@triton.jit
def _max_with_index(a, ia, b, ib):
    take_a = (a > b) | ((a == b) & (ia < ib))
    return tl.where(take_a, a, b), tl.where(take_a, ia, ib)


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def own_combines(x_ptr, max_ptr, arg_ptr, scan_ptr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * BLOCK + cols)
    value, index = tl.reduce((x, cols), 0, _max_with_index)
    tl.store(max_ptr + row, value)
    tl.store(arg_ptr + row, index)
    tl.store(scan_ptr + row * BLOCK + cols, tl.associative_scan(x, 0, _add))


@triton.jit
def tiles_2d(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)[:, None]
    cols = tl.program_id(1) * BN + tl.arange(0, BN)[None, :]
    mask = (rows < M) & (cols < N)
    tile = tl.load(x_ptr + rows * N + cols, mask=mask, other=0.0)
    total = tl.sum(tile, 1)[:, None]
    tl.store(out_ptr + cols * M + rows, tile + total, mask=mask)  # a transposed write


@triton.jit
def in_place_then_branch(x_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, x + 1.0)
    if pid == 0:  # differs by program: cannot be one NumPy program
        tl.store(x_ptr + offs, x + 10.0)


@triton.jit
def int_div_mod(x_ptr, q_ptr, r_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(q_ptr + offs, x // 3)  # Triton truncates toward zero: -7 // 3 == -2
    tl.store(r_ptr + offs, x % 3)


def _both(kernel, grid, make_args, constexprs):
    """(Triton's interpreter, program by program; whole_grid) on fresh copies of the args."""
    reference = make_args()
    kernel[grid](*reference, **constexprs)
    ours = make_args()
    whole_grid.run(kernel, grid, tuple(ours), constexprs, {})
    return reference, ours


def _assert_same(reference, ours):
    for expected, got in zip(reference, ours, strict=True):
        if isinstance(expected, torch.Tensor):
            torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_pointwise_rows_with_masks_match_triton():
    x = torch.randn(6, 13)
    reference, ours = _both(add_row_id, (6,), lambda: [x.clone(), torch.zeros(6, 13), 13],
                            {"BLOCK": 16})
    _assert_same(reference, ours)
    assert torch.equal(ours[1], x * 2 + torch.arange(6.0)[:, None])


def test_integer_division_truncates_as_triton_does_when_replayed():
    x = torch.arange(-8, 8, dtype=torch.int32)

    def fresh():
        return [x.clone(), torch.zeros(16, dtype=torch.int32), torch.zeros(16, dtype=torch.int32)]

    reference = fresh()
    int_div_mod[(2,)](*reference, BLOCK=8)
    tapes: dict = {}
    for _ in range(2):  # recorded, then replayed as the generated function
        ours = fresh()
        whole_grid.run(int_div_mod, (2,), tuple(ours), {"BLOCK": 8}, tapes)
        _assert_same(reference, ours)
    assert ours[1][1].item() == -2 and ours[2][1].item() == -1  # -7 // 3, -7 % 3
    assert ") // s" in next(iter(tapes.values())).run.source  # written as NumPy, not a builder call


def test_two_dimensional_grid_gives_each_program_its_ids():
    reference, ours = _both(grid_ids, (3, 4), lambda: [torch.zeros(12 * 8, dtype=torch.int32)],
                            {"BLOCK": 8})
    _assert_same(reference, ours)
    assert ours[0].view(4, 3, 8)[2, 1, 5].item() == 1 * 100 + 2 * 10 + 5


def test_reductions_and_scans_with_their_own_combine_functions():
    x = torch.randn(5, 16)
    x[2, 3] = x[2, 11] = x[2].max() + 1  # a tie: the lower index wins
    reference, ours = _both(own_combines, (5,), lambda: [
        x.clone(), torch.zeros(5), torch.zeros(5, dtype=torch.int32), torch.zeros(5, 16)],
        {"BLOCK": 16})
    torch.testing.assert_close(ours[1], reference[1], rtol=0, atol=0)
    assert torch.equal(ours[2], reference[2]) and ours[2][2].item() == 3
    torch.testing.assert_close(ours[3], reference[3])  # a tree, not a left fold: rounding only
    torch.testing.assert_close(ours[3], x.cumsum(1))


def test_tiles_in_two_dimensions_with_a_transposed_store():
    x = torch.randn(10, 7)
    reference, ours = _both(tiles_2d, (3, 2), lambda: [x.clone(), torch.zeros(7, 10), 10, 7],
                            {"BM": 4, "BN": 4})
    _assert_same(reference, ours)


def test_chunks_of_programs_give_the_same_result(monkeypatch):
    x = torch.randn(7, 16)
    monkeypatch.setattr(whole_grid, "CHUNK_ELEMENTS", 32)  # 2 programs of 16 a chunk: 4 chunks
    reference, ours = _both(add_row_id, (7,), lambda: [x.clone(), torch.zeros(7, 16), 16],
                            {"BLOCK": 16})
    _assert_same(reference, ours)


def test_a_replay_whose_guard_reads_another_value_is_recorded_afresh():
    state: dict = {}
    x = torch.randn(3, 32)
    whole_grid.STATS.reset()
    for n in (8, 8, 24):
        out = torch.zeros(3)
        whole_grid.launch(bound_from_memory, "bound_from_memory", (3,),
                          (x, torch.tensor([n], dtype=torch.int32), out), {"BLOCK": 8}, [out],
                          state, lambda: pytest.fail("per program"))
        torch.testing.assert_close(out, x[:, :n].sum(1))
    # the third launch's replay stopped at the guard (8 != 24), was restored and recorded anew
    assert (whole_grid.STATS.recorded, whole_grid.STATS.replayed) == (2, 1)


def test_a_kernel_launched_at_other_sizes_keeps_a_tape_for_each():
    state: dict = {}
    whole_grid.STATS.reset()
    for cols in (8, 8, 20):
        x = torch.randn(3, cols)
        out = torch.zeros(3)
        whole_grid.launch(looped_row_sum, "looped_row_sum", (3,), (x, out, cols),
                          {"BLOCK": 8}, [out], state, lambda: pytest.fail("per program"))
        torch.testing.assert_close(out, x.sum(1))
    assert (whole_grid.STATS.recorded, whole_grid.STATS.replayed) == (2, 1)


def test_a_branch_by_program_falls_back_without_writing_twice():
    x = torch.arange(32.0)
    state: dict = {}
    whole_grid.STATS.reset()

    def per_program():
        in_place_then_branch[(4,)](x, BLOCK=8)

    whole_grid.launch(in_place_then_branch, "in_place_then_branch", (4,), (x,), {"BLOCK": 8},
                      [x], state, per_program)
    expected = torch.arange(32.0) + 1
    expected[:8] += 9
    assert torch.equal(x, expected)  # restored before the per-program run: not +2 or +11
    assert whole_grid.STATS.per_program == 1
    assert "differs by program" in state["reason"]
    assert any("in_place_then_branch" in k for k in whole_grid.STATS.reasons)


# --- Inductor's own kernels on the device ---------------------------------------------------
def _layer_stats(x, w):
    y = torch.nn.functional.gelu(x @ w)
    var, mean = torch.var_mean(y, dim=-1, keepdim=True)
    return (y - mean) * torch.rsqrt(var + 1e-5), y.softmax(-1), y.argmax(-1)


def _scans(x):
    return x.cumsum(1), torch.cummax(x, 1)[0], x.flip(1).cumsum(1)


def _tiled(x):
    return (x.t() * 2 + 1).contiguous(), x.sum(0), x.amax(1)


def _scatter(x, index):
    return torch.zeros(5, x.shape[1], device=x.device).index_add_(0, index, x)


def _bf16(x):
    return (x.to(torch.bfloat16).exp() * 3).sum(-1)


CASES = {
    "layer_stats": (_layer_stats, lambda: (torch.randn(24, 40), torch.randn(40, 33))),
    "scans": (_scans, lambda: (torch.randn(9, 50),)),
    "tiled": (_tiled, lambda: (torch.randn(70, 33),)),
    "scatter": (_scatter, lambda: (torch.randn(12, 6), torch.randint(0, 5, (12,)))),
    "bf16": (_bf16, lambda: (torch.randn(8, 64),)),
}


@pytest.mark.parametrize("name", CASES)
def test_inductor_kernels_run_whole_and_match_triton_and_eager(name, monkeypatch):
    fn, make = CASES[name]
    torch.manual_seed(0)
    inputs = make()
    expected = fn(*inputs)
    torch.compiler.reset()
    compiled = torch.compile(fn)
    device_inputs = [x.to("mtia_sim") for x in inputs]
    def call():
        out = compiled(*device_inputs)
        return [t.cpu() for t in (out if isinstance(out, tuple) else (out,))]

    whole_grid.STATS.reset()
    ours = call()  # recorded
    assert whole_grid.STATS.per_program == 0, whole_grid.STATS.reasons
    assert whole_grid.STATS.recorded > 0
    replayed = call()  # the recorded tapes, replayed as generated functions (whole_grid/codegen.py)
    assert whole_grid.STATS.replayed == whole_grid.STATS.recorded
    monkeypatch.setattr(whole_grid, "ENABLED", False)
    triton_ = call()
    expected = expected if isinstance(expected, tuple) else (expected,)
    for got, again, per_program, eager in zip(ours, replayed, triton_, expected, strict=True):
        assert torch.equal(again, got)  # a replay computes what the recording run did
        torch.testing.assert_close(got, per_program, rtol=1e-6, atol=1e-6)
        tolerance = {"rtol": 2e-2, "atol": 2e-2} if name == "bf16" else {}
        torch.testing.assert_close(got, eager, **tolerance)


def test_a_combo_kernel_branches_by_program_and_runs_per_program():
    def two_ops(a, b):
        return a.sin() * 2, b.cos() + 1

    a, b = torch.randn(64), torch.randn(40)
    torch.compiler.reset()
    whole_grid.STATS.reset()
    from torch._inductor import config

    with config.patch(combo_kernels=True, combo_kernel_allow_mixed_sizes=2):
        got = torch.compile(two_ops)(a.to("mtia_sim"), b.to("mtia_sim"))
    for g, e in zip(got, two_ops(a, b), strict=True):
        torch.testing.assert_close(g.cpu(), e)
    assert whole_grid.STATS.per_program == 1  # one combo kernel: `if pid < ...` per sub-kernel
    assert any("differs by program" in reason for reason in whole_grid.STATS.reasons)
