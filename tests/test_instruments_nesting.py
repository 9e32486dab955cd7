"""Compile cost of deep nesting: what grows with depth (no timings asserted)."""

import pytest

from mtia_lab.instruments.examples import Nest
from mtia_lab.instruments.nesting import compile_cost, deepest_guard, growth_rate

pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/conftest.py


def test_deep_nesting_adds_guards_not_graph_ops():
    shallow, deep = compile_cost(1), compile_cost(8)
    assert shallow.graph_ops == deep.graph_ops == 2
    assert deep.guards > shallow.guards
    assert min(deep.dynamo_s, deep.aot_autograd_s, deep.scheduler_s, deep.backward_s) >= 0


def test_the_deepest_guard_walks_the_dotted_path():
    guard = deepest_guard(3)
    assert guard.startswith("L['self']._modules['child']._modules['child']._modules['linear']"
                            "._parameters[")


def test_a_nest_needs_one_level():
    with pytest.raises(ValueError, match="depth=0"):
        Nest(0)


def test_a_growth_rate_needs_two_depths():
    assert growth_rate([1, 2, 4], [0.1, 0.4, 1.6]) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="two different depths"):
        growth_rate([8], [0.1])
    with pytest.raises(ValueError, match="two different depths"):
        growth_rate([4, 4], [0.1, 0.2])
