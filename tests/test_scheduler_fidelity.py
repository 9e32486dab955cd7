"""Our scheduler against Inductor's real plan for the device, on thirteen suites of graphs.

TUNING (tests/fidelity_graphs.py, fidelity_tuning_hf.py): the project's seven families,
nineteen from real model code and four built from `transformers` modules, the graphs the rules
were changed against. HELD-OUT (tests/fidelity_heldout.py): blocks built from `transformers`
module code, looked at once the first rules were in. HELD-OUT-2 (tests/fidelity_heldout2.py):
eleven blocks of families in neither, written before any rule was changed against them and
never tuned on: its figure is the honest one. HELD-OUT-3 (tests/fidelity_heldout3.py): fifteen
blocks, heads and losses of families in none of them, written blind while the rules were tuned
elsewhere; its figure was measured once the rules were in (blind), then it was tuned on.
HELD-OUT-4 (tests/fidelity_heldout4.py): fourteen more families (SAM's block compared since
the attribution places SDPA's `_safe_softmax` launches), written blind and measured
once, after held-out-3's tuning round, by nobody who tuned (307/341 = 90%). HELD-OUT-5
(tests/fidelity_heldout5.py): sixteen more families, a training step among them, written
blind while the others were tuned on, measured once (236/282 = 84%), then tuned on.
HELD-OUT-6 (tests/fidelity_heldout6.py): sixteen more families, a training step among them,
written blind while held-out-4 and held-out-5 were tuned on, measured once after that round
(302/325 = 93%), then tuned on. HELD-OUT-7 (tests/fidelity_heldout7.py): fourteen graphs of
thirteen more families, a training step among them, written blind while held-out-6 was tuned
on, measured once after that round (330/355 = 93%), then tuned on. HELD-OUT-8
(tests/fidelity_heldout8.py): fifteen graphs of fifteen more families, a training step among
them, written blind while the others were tuned on, measured blind on the tree it was written
against (436/480 = 91%) and once after that round was merged (443/480 = 92%), then tuned on.
HELD-OUT-9 (tests/fidelity_heldout9.py): fifteen more families, two training steps among them,
written blind, measured blind (632/722 = 88%, then 641/722 after that round), then tuned on;
it is here, with the suites tuned on, as is held-out-10 (tuned on since); held-out-11 (tuned
on since) and held-out-12 (the blind figure now) are in test_scheduler_fidelity_blind.py, so
that the test runner's two workers share the suites.
Each graph is compiled by our backend (the plan that
ran) and by Inductor for mtia_sim (mtia_lab.inductor); Inductor's launches are attributed to
our aten nodes from Inductor's own records (compare/launches.py) and audited against the
launches of Inductor's generated wrapper (`Comparison.check`).
`scripts/fidelity_report.py` prints the same comparison as tables.

Two tiers, for the test run's time (Inductor's compile is three quarters of a comparison):
every suite's compiled code is checked against eager in every run (`eager_rows`), while the
comparison with Inductor (audit, floor) runs in every run for the tuning suite and the
newest blind suite (test_scheduler_fidelity_blind.py), and for the suites tuned on long
ago under the `slow` marker: `make test PYTEST_ARGS="-m slow"` runs them, as does
`scripts/fidelity_report.py`, which whoever changes a rule runs on all suites.
"""

import pytest
from fidelity_checks import assert_aligned, assert_floor, assert_matches_eager
from fidelity_graphs import GRAPHS, INDUCTOR_CONFIG, TUNING
from fidelity_heldout import heldout_graphs
from fidelity_heldout2 import heldout2_graphs
from fidelity_heldout3 import heldout3_graphs
from fidelity_heldout4 import heldout4_graphs
from fidelity_heldout9 import heldout9_graphs
from fidelity_heldout10 import heldout10_graphs
from fidelity_tuning_hf import tuning_hf_graphs

import mtia_lab  # noqa: F401
from mtia_lab.compare.fidelity import eager_rows, fidelity_rows, fidelity_table, suite_totals

# The suites compared with Inductor under the `slow` marker only (tuned on long ago); their
# compiled code is checked against eager in every run.
LONG_TUNED = {"heldout": heldout_graphs, "heldout2": heldout2_graphs,
              "heldout3": heldout3_graphs, "heldout4": heldout4_graphs,
              "heldout9": heldout9_graphs, "heldout10": heldout10_graphs}
SLOW = pytest.mark.slow


@pytest.fixture(scope="module")
def tuning():
    return fidelity_rows({**GRAPHS, **TUNING, **tuning_hf_graphs()}, INDUCTOR_CONFIG)


@pytest.fixture(scope="module")
def heldout():
    return fidelity_rows(heldout_graphs())


@pytest.fixture(scope="module")
def heldout2():
    return fidelity_rows(heldout2_graphs())


@pytest.fixture(scope="module")
def heldout3():
    return fidelity_rows(heldout3_graphs())


@pytest.fixture(scope="module")
def heldout4():
    return fidelity_rows(heldout4_graphs())


@pytest.fixture(scope="module")
def heldout9():
    return fidelity_rows(heldout9_graphs())


@pytest.fixture(scope="module")
def heldout10():
    return fidelity_rows(heldout10_graphs())


COMPARED = ["tuning"] + [pytest.param(name, marks=SLOW) for name in LONG_TUNED]


@pytest.mark.parametrize("suite", COMPARED)
def test_every_launch_of_inductors_wrapper_is_counted_and_every_node_placed_once(suite, request):
    assert_aligned(request.getfixturevalue(suite))


def test_a_convolution_is_held_by_inductors_extern_launch_not_by_its_input_copies(tuning):
    for row in tuning:
        launches = row.default.placed.launches
        for launch in launches:
            for name in launch.nodes:
                if name.startswith("convolution"):
                    assert launch.kind == "extern", (row.name, launch)
    conv = next(r for r in tuning if r.name == "depthwise_conv_bn").default
    own = [d for d in conv.differences if not d.inductor]  # a launch holding none of ours
    assert own and all(d.rules == ("extern_in_triton",) for d in own), [str(d) for d in own]


def test_every_difference_names_a_rule_and_few_are_unexplained(tuning):
    for row in tuning:
        for comparison in (row.default, row.inductor_like):
            for difference in comparison.differences:
                assert difference.rules, (row.name, str(difference))
    rules = {r for row in tuning for d in row.default.differences for r in d.rules}
    assert {"template_epilogue", "extern_in_triton"} <= rules
    # What no rule of ours explains yet (see the report): at most 5% of the tuning suite.
    totals = suite_totals(tuning)
    assert totals["unexplained"] <= 0.05 * totals["launches"], fidelity_table(tuning)


@SLOW
def test_held_out_differences_name_a_rule_and_few_are_unexplained(heldout, heldout2):
    """At most 2% of held-out and held-out-2 unexplained (held-out: clip_loss, 2 of 122).
    Held-out-3 had 13 of 248 unexplained (5%) when this was written: no cap."""
    for rows in (heldout, heldout2):
        for row in rows:
            for comparison in (row.default, row.inductor_like):
                for difference in comparison.differences:
                    assert difference.rules, (row.name, str(difference))
        totals = suite_totals(rows)
        assert totals["unexplained"] <= 0.02 * totals["launches"], fidelity_table(rows)


# Floors just under the measured fidelity: a regression guard, not the goal (95% on graphs
# not tuned on). Their history is the long-tuned suites' test's docstring.
FLOORS = {"tuning": 0.92, "heldout": 0.89, "heldout2": 0.95, "heldout3": 0.93, "heldout4": 0.98,
          "heldout9": 0.92, "heldout10": 0.92}


def test_the_tuning_suites_groups_are_reproduced_once_our_departures_are_off(tuning):
    assert_floor(tuning, FLOORS["tuning"])


@SLOW
@pytest.mark.parametrize("suite", list(LONG_TUNED))
def test_inductors_groups_are_reproduced_once_our_departures_are_off(suite, request):
    """The long-tuned suites' floors, just under the measured fidelity (tuning 207/222 = 93%,
    held-out 110/122 = 90%, held-out-2 143/147 = 97%, held-out-3 203/248 = 82%, never tuned on,
    when this was written; held-out-3 225/248 = 90% once tuned on, its vision blocks and the
    others; with Inductor's layout copies of convolution operands modelled
    (extern_in_triton=False): tuning 218/222, held-out 115/122, held-out-2 145/147, held-out-3
    232/248 = 93%; and, measured blind after that round, held-out-4 307/341 = 90%; held-out-4
    371/393 = 94% once tuned on, SAM's block in it; 380/393 = 97% with its upsample/cat and
    residual-sum realizations; 383/393 with a pattern-made copy matched by its inputs and a
    layout copy fused through a permute; held-out-5, measured blind at 236/282 = 84%, then
    tuned on: 244/282 = 87%, 249/282 = 88% with an unrolled max counted as an argmax; held-
    out-6, measured blind after that round, 302/325 = 93%, then tuned on: 305/325 = 94% with
    grid_sampler_2d decomposed; held-out-7, measured blind after that round, 330/355 = 93%;
    after the next round (reads through a permute matched as score_fusion_memory does, split
    reductions, ConcatKernels kept as buffers, an fp32 addmm's bias unfused into pointwise
    readers, scans never unrolled): held-out-4 387/393, held-out-5 256/282, held-out-6 306/325,
    held-out-7 336/355 = 95% (tuned on), and held-out-8, measured blind, 443/480 = 92%; after
    the round tuned on held-out-8 (one-hot scatters as selects, GroupNorm and arange counted,
    the loop-order vote for a convolution's input, pool inputs realized, indexed reads told
    apart by view): held-out-3 234/248, held-out-6 309/325, held-out-8 455/480 = 95%, and held-
    out-9, written blind, 632/722 = 88% before the round and 641/722 = 89% after it; after the
    round tuned on held-out-9 (convolution backward's operands channels-last, reused unrolled
    reductions stored, a pad's mask counted, gathered reads compared by their indirect index,
    padded attention maps copied for their bmm): held-out-9 670/722 = 93%, held-out-6 312/325,
    held-out-7 339/355, and held-out-10, measured blind, 559/621 = 90% before the round and
    564/621 = 91% after it; after the round tuned on held-out-9 and held-out-10 (a
    slice_scatter's source read through its own slice, a bmm remade by a pattern paired by
    operands, an addmm over an inner dim of 1 as an outer product, full reductions that
    misread, Triton's tiling kept out of a reduction, cat with a channels-last piece): held-
    out-9 674/722 = 93%, held-out-10 575/621 = 93% (tuned on), and held-out-11, measured blind,
    794/889 = 89% before the round and 796/889 = 90% after it): a regression guard, not the
    goal (95% on graphs not tuned on)."""
    assert_floor(request.getfixturevalue(suite), FLOORS[suite])


def test_our_compiled_code_gives_eagers_results_with_departures_on_and_off(tuning):
    assert_matches_eager(tuning)


@pytest.mark.parametrize("suite", list(LONG_TUNED))
def test_long_tuned_suites_compiled_code_gives_eagers_results(suite):
    """Without Inductor's compile (eager_rows): the silent-wrong-value check in every run."""
    differing = {name: what for name, what in eager_rows(LONG_TUNED[suite]()).items() if what}
    assert not differing, differing


def test_our_plans_never_move_more_bytes_than_inductors(tuning):
    for row in tuning[:7]:  # the project's own families; both sides priced by our cost model
        assert row.default.ours.bytes_moved <= row.default.priced.bytes_moved, row.name


def test_the_loss_tail_is_as_few_kernels_as_inductors(tuning):
    loss = next(row for row in tuning if row.name == "linear_cross_entropy")
    assert loss.default.ours.kernel_count == loss.default.inductor.kernel_count == 3
    assert loss.default.identical == 3


@SLOW
def test_a_bmm_a_pattern_remade_is_paired_with_ours_by_its_operands(heldout9):
    """DAB-DETR's attention is rewritten by Inductor's pattern pass, whose bmms remember no
    node of ours and come in another order than ours: order alone gave one layer's bmm the
    launch of another's and left a bmm launch holding nothing. Each of Inductor's bmm
    launches holds one bmm of ours, the one reading the same values."""
    row = next(r for r in heldout9 if r.name == "dab_detr_detection")
    for comparison in (row.default, row.inductor_like):
        for launch in comparison.placed.launches:
            if launch.kind == "extern" and launch.name.endswith("bmm"):
                held = [n for n in launch.nodes if n.startswith("bmm")]
                assert len(held) == 1, launch
