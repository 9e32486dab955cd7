"""Our scheduler against Inductor's real plan for the device, on seven held-out graphs.

The graphs (tests/fidelity_graphs.py) were written for this test, not for tuning the scheduler.
Each is compiled by our backend (the plan that ran) and by Inductor for mtia_sim
(mtia_lab.inductor); Inductor's kernels are mapped onto our aten nodes by node identity.
`scripts/fidelity_report.py` prints the same comparison as a table.
"""

import pytest
from fidelity_graphs import GRAPHS, INDUCTOR_CONFIG

import mtia_lab  # noqa: F401
from mtia_lab.compiler.fidelity import fidelity_rows, fidelity_table
from mtia_lab.compiler.rules import DEPARTURES


@pytest.fixture(scope="module")
def rows():
    return fidelity_rows(GRAPHS, INDUCTOR_CONFIG)


def test_every_aten_node_is_computed_by_one_inductor_kernel(rows):
    for row in rows:
        ours = sorted(n for g in row.default.ours.groups for n in g.nodes)
        theirs = sorted(n for g in row.default.groups for n in g)
        assert theirs == ours, row.name


def test_no_difference_is_unexplained_and_each_names_a_rule_of_ours(rows):
    for row in rows:
        for comparison in (row.default, row.inductor_like):
            assert not comparison.unexplained, (row.name, [str(d) for d in
                                                           comparison.unexplained])
            for difference in comparison.differences:
                assert difference.rules and set(difference.rules) <= set(DEPARTURES)
    # Our matmul epilogues are the one departure the plans that ran show.
    rules = {r for row in rows for d in row.default.differences for r in d.rules}
    assert "template_epilogue" in rules


def test_inductors_groups_are_reproduced_once_our_departures_are_off(rows):
    same = sum(row.inductor_like.identical for row in rows)
    total = sum(row.inductor_like.inductor_kernels for row in rows)
    assert total >= 35
    assert same / total >= 0.9, fidelity_table(rows)


def test_our_plans_never_move_more_bytes_than_inductors(rows):
    for row in rows:  # both sides priced by our cost model
        assert row.default.ours.bytes_moved <= row.default.priced.bytes_moved, row.name


def test_the_loss_tail_is_as_few_kernels_as_inductors(rows):
    loss = next(row for row in rows if row.name == "linear_cross_entropy")
    assert loss.default.ours.kernel_count == loss.default.inductor.kernel_count == 3
    assert loss.default.identical == 3
