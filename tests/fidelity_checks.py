"""The checks every fidelity suite gets, shared by test_scheduler_fidelity.py (the tuning suite,
held-out .. held-out-4, held-out-9 and held-out-10) and test_scheduler_fidelity_blind.py
(held-out-5 .. held-out-8, held-out-11 .. held-out-13):
two files, so that the test runner's two workers compare half the suites each. The comparison
with Inductor runs in every test run for the tuning suite and the newest blind suite, and
under the `slow` marker for the others; every suite's check against eager runs every time."""

from mtia_lab.compare.fidelity import fidelity_table, suite_totals


def assert_aligned(rows: list) -> None:
    """Every launch of Inductor's wrapper is counted and every node of ours placed once."""
    for row in rows:
        for comparison in (row.default, row.inductor_like):
            comparison.check()  # raises AlignmentError naming what is unaligned
            placed = comparison.placed
            assert placed.wrapper_launches is not None, row.name  # checked against the wrapper
            # a combo (foreach) kernel's groups are one launch of the wrapper's
            packed = sum(len(combo) - 1 for combo in placed.combos)
            assert len(comparison.groups) - packed == len(placed.wrapper_launches) \
                == comparison.inductor.kernel_count, row.name
        ours = sorted(n for g in row.default.ours.groups for n in g.nodes)
        assert sorted(n for g in row.default.groups for n in g) == ours, row.name


def assert_floor(rows: list, floor: float) -> None:
    """At least `floor` of Inductor's launches identical with our departures off."""
    totals = suite_totals(rows)
    assert totals["launches"] >= 100
    assert totals["same_no_departures"] / totals["launches"] >= floor, fidelity_table(rows)


def assert_matches_eager(rows: list) -> None:
    """Our compiled code gives eager's results, departures on and off."""
    for row in rows:
        assert not row.against_eager, (row.name, row.against_eager)
