"""Our scheduler against Inductor's real plan for the device on eleven held-out suites, each
written blind (its list committed before any comparison, by someone who tuned nothing) and
measured once before it was tuned on: held-out-5 .. held-out-8 and held-out-11 .. held-out-13,
all tuned on since, held-out-14, measured blind and after a round that did not look at it,
tuned on in the round after (floor 0.95), held-out-15, measured blind and after a round
that did not look at it, then tuned on (floor 0.95), held-out-16, measured blind and after
a round that did not look at it, then tuned on (floor 0.98), and held-out-17, measured blind
and after a round that did not look at it (floor 0.97, a regression guard: nobody tunes on it)
(held-out-9 and held-out-10 are in test_scheduler_fidelity.py with the suites' history).
The checks are the same (fidelity_checks.py), in a file of their own so that the test
runner's two workers share the suites. The newest suite (held-out-17, which nobody has tuned
on) is compared with Inductor in every run, the others under the `slow` marker (`make test
PYTEST_ARGS="-m slow"`; whoever changes a rule runs them all through
`scripts/fidelity_report.py`), and every suite's compiled code is checked against eager in
every run. One suite, not two: a comparison of a suite of 1,100 launches is minutes of
Inductor's compile, and CI's time went from 1143 s to 1651 s when a second one joined.
"""

import pytest
from fidelity_checks import assert_aligned, assert_floor, assert_matches_eager
from fidelity_heldout5 import heldout5_graphs
from fidelity_heldout6 import heldout6_graphs
from fidelity_heldout7 import heldout7_graphs
from fidelity_heldout8 import heldout8_graphs
from fidelity_heldout11 import NOT_ALIGNED as HELDOUT11_NOT_ALIGNED
from fidelity_heldout11 import heldout11_graphs
from fidelity_heldout12 import NOT_ALIGNED as HELDOUT12_NOT_ALIGNED
from fidelity_heldout12 import heldout12_graphs
from fidelity_heldout13 import NOT_ALIGNED as HELDOUT13_NOT_ALIGNED
from fidelity_heldout13 import heldout13_graphs
from fidelity_heldout14 import NOT_ALIGNED as HELDOUT14_NOT_ALIGNED
from fidelity_heldout14 import heldout14_graphs
from fidelity_heldout15 import NOT_ALIGNED as HELDOUT15_NOT_ALIGNED
from fidelity_heldout15 import heldout15_graphs
from fidelity_heldout16 import NOT_ALIGNED as HELDOUT16_NOT_ALIGNED
from fidelity_heldout16 import heldout16_graphs
from fidelity_heldout17 import NOT_ALIGNED as HELDOUT17_NOT_ALIGNED
from fidelity_heldout17 import heldout17_graphs

import mtia_lab  # noqa: F401
from mtia_lab.compare.fidelity import eager_rows, fidelity_rows

SUITES = {"heldout5": heldout5_graphs, "heldout6": heldout6_graphs,
          "heldout7": heldout7_graphs, "heldout8": heldout8_graphs,
          "heldout11": heldout11_graphs,
          "heldout12": heldout12_graphs, "heldout13": heldout13_graphs,
          "heldout14": heldout14_graphs, "heldout15": heldout15_graphs,
          "heldout16": heldout16_graphs, "heldout17": heldout17_graphs}
# Floors just under the figures measured (departures off), see test_scheduler_fidelity.py's
# floor test for their history: held-out-5 256/282, held-out-6 312/325, held-out-7 339/355,
# held-out-8 458/480 (tuned on). Held-out-11, measured blind at 794/889 (89%) on the tree it
# was written against (cc3d491), 796/889 after the round that did not look at it, then tuned
# on: 837/889 (94%) on 0a3c8b9. Held-out-12, measured blind at 900/1020 (88%) on the tree it
# was written against (0f9b1d2), 902/1020 after the round that did not look at it, then tuned
# on: 915/1020, 932/1020, 942/1020 (92%) on 0a3c8b9. Held-out-13, measured blind at 767/809
# on 2f7bedb with two graphs misaligned, 763/809 (94%) once the comparison aligned them,
# 763/809 after the round that did not look at it, then tuned on: 782/809 (97%) on 0a3c8b9.
# Held-out-14, measured blind at 727/781 (93%) on 1df4d87, no graph misaligned, 739/781
# (95%; 94.6% unrounded) on 0a3c8b9, after the round that did not look at it (not tuned on).
# Held-out-14, tuned on from e2e3d40: 749/781 (96%) on b594c81. Held-out-15, measured blind at
# 881/954 (92%) on e2e3d40, no graph misaligned, 878/954 (92%) on b594c81 after the round that
# did not look at it (its m2m_100 training step 137 -> 134; not tuned on). Held-out-15, tuned
# on from 3e3aeb9: 906/954 (95%). Held-out-16, measured blind at 1090/1130 (96%) on 3e3aeb9,
# 1106/1130 (98%) after the round that did not look at its graphs (not tuned on).
# Held-out-17, measured blind at 1071/1101 (97%) on 05e5946, no graph misaligned; 1077/1101
# (98%) after the round that did not look at its graphs (not tuned on). Held-out-16, tuned on
# from 05e5946: 1110/1130 (98%); held-out-15 910/954 (95%).
# A regression guard, not the goal (95% on graphs not tuned on).
FLOORS = {"heldout5": 0.90, "heldout6": 0.95, "heldout7": 0.95, "heldout8": 0.94,
          "heldout11": 0.94, "heldout12": 0.92, "heldout13": 0.96, "heldout14": 0.95,
          "heldout15": 0.95, "heldout16": 0.98, "heldout17": 0.97}


# Compared with Inductor in every run: the newest blind suite. The others, tuned on since,
# under the `slow` marker.
NEWEST = ("heldout17",)
LONG_TUNED = [name for name in SUITES if name not in NEWEST]


@pytest.fixture(scope="module", params=[name if name in NEWEST else
                                        pytest.param(name, marks=pytest.mark.slow)
                                        for name in SUITES])
def suite(request):
    return fidelity_rows(SUITES[request.param]()), request.param


# Graphs whose comparison is known not to align (a bug of the comparison, in the suite's
# NOT_ALIGNED with what fails): the others are checked, and the test xfails while these fail.
NOT_ALIGNED = {"heldout11": HELDOUT11_NOT_ALIGNED, "heldout12": HELDOUT12_NOT_ALIGNED,
               "heldout13": HELDOUT13_NOT_ALIGNED, "heldout14": HELDOUT14_NOT_ALIGNED,
               "heldout15": HELDOUT15_NOT_ALIGNED, "heldout16": HELDOUT16_NOT_ALIGNED,
               "heldout17": HELDOUT17_NOT_ALIGNED}


def test_every_launch_of_inductors_wrapper_is_counted_and_every_node_placed_once(suite):
    rows, name = suite
    known = NOT_ALIGNED.get(name, {})
    assert_aligned([row for row in rows if row.name not in known])
    for row in rows:
        if row.name in known and row.audit != "ok":
            pytest.xfail(f"{name}: {row.name} is known misaligned: {known[row.name]}")


def test_inductors_groups_are_reproduced_once_our_departures_are_off(suite):
    rows, name = suite
    if name not in FLOORS:
        pytest.skip(f"{name} has no floor yet: measured blind once, not tuned on")
    assert_floor(rows, FLOORS[name])


def test_our_compiled_code_gives_eagers_results_with_departures_on_and_off(suite):
    assert_matches_eager(suite[0])


@pytest.mark.parametrize("name", LONG_TUNED)
def test_long_tuned_suites_compiled_code_gives_eagers_results(name):
    """Without Inductor's compile (eager_rows): the silent-wrong-value check in every run."""
    differing = {graph: what for graph, what in eager_rows(SUITES[name]()).items() if what}
    assert not differing, differing
