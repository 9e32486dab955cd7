"""Guards and recompiles as data: every outcome and reason read from Dynamo's own records."""

import pytest
import torch

from mtia_lab.instruments.guards import DynamicDimError, mark_dynamic, watch
from mtia_lab.instruments.records import reason_kind
from mtia_lab.viz.guard_views import compile_log_view

DEV = "mtia_sim:0"


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/conftest.py


def scale(x, n):
    return (x * n).relu().sum()


def total(x):
    return (x * 2).sum()


def outcomes(watched):
    return [(c.outcome, c.entry) for c in watched.log.calls]


def test_python_value_recompiles_and_cache_hits_are_recorded_with_dynamos_reason():
    watched = watch(scale, dynamic=False)
    x = torch.randn(4, device=DEV)
    for n in (2, 3, 2):
        assert torch.allclose(watched(x, n).cpu(), scale(x, n).cpu())
    assert outcomes(watched) == [("compiled", "0/0"), ("compiled", "0/1"), ("cache hit", "0/0")]
    assert watched.log.calls[1].reasons == ("0/0: n == 2",)
    assert reason_kind(watched.log.calls[1].reasons[0]) == "Python value"
    assert watched.log.calls[2].cache == ("0/0", "0/1")  # the hit moved its entry to the front
    guards = [g.text for g in watched.log.entries["0/1"].user_guards()]
    assert "L['n'] == 3" in guards


def test_shape_change_recompiles_once_then_automatic_dynamic_serves_every_size():
    watched = watch(total)
    for size in (4, 5, 6, 7):
        x = torch.randn(size, device=DEV)
        assert torch.allclose(watched(x).cpu(), total(x).cpu())
    assert [c.outcome for c in watched.log.calls] == [
        "compiled", "compiled", "cache hit", "cache hit"]
    assert watched.log.calls[1].reasons == (
        "0/0: tensor 'x' size mismatch at index 0. expected 4, actual 5",)
    assert reason_kind(watched.log.calls[1].reasons[0]) == "shape"
    assert not watched.log.entries["0/0"].dynamic
    assert watched.log.entries["0/1"].dynamic


def test_mark_dynamic_turns_a_storm_into_one_symbolic_graph():
    storm = watch(total, dynamic=False, name="static")
    for size in (4, 5, 6, 7):
        storm(torch.randn(size, device=DEV))
    assert storm.log.compiles == 4 and storm.log.storm
    torch.compiler.reset()
    one = watch(total, name="marked")
    for size in (4, 5, 6, 7):
        x = mark_dynamic(torch.randn(size, device=DEV), 0, name="x")
        assert torch.allclose(one(x).cpu(), total(x).cpu())
    assert one.log.compiles == 1 and not one.log.storm
    assert one.log.entries["0/0"].dynamic
    assert one.log.calls[0].args == "x: float32[*4]"


def test_dtype_change_is_named_as_such():
    watched = watch(total)
    watched(torch.randn(4, device=DEV))
    watched(torch.randn(4, device=DEV, dtype=torch.float64))
    (reason,) = watched.log.calls[1].reasons
    assert reason_kind(reason) == "dtype", reason


def test_module_attribute_recompile():
    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.factor = 2.0

        def forward(self, x):
            return x * self.factor

    model = Scaled()
    watched = watch(model)
    x = torch.randn(3, device=DEV)
    watched(x)
    model.factor = 3.0
    assert torch.allclose(watched(x).cpu(), (x * 3.0).cpu())
    (reason,) = watched.log.calls[1].reasons
    assert "factor == 2.0" in reason
    assert reason_kind(reason) == "module attribute"


def test_recompile_limit_hit_runs_eagerly_and_the_view_calls_it_a_storm():
    watched = watch(scale, dynamic=False, recompile_limit=2)
    x = torch.randn(4, device=DEV)
    for n in (1, 2, 3, 4):
        assert torch.allclose(watched(x, n).cpu(), scale(x, n).cpu())  # eager: still right
    assert [c.outcome for c in watched.log.calls] == [
        "compiled", "compiled", "eager (recompile limit)", "eager (recompile limit)"]
    assert watched.log.limit_hit and watched.log.storm
    text = compile_log_view(watched).to_text()
    assert "RECOMPILE STORM" in text
    assert ("the recompile limit (2) was hit: calls 2, 3 ran eagerly, uncompiled "
            "(Dynamo counted 1 limit hit)") in text


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "4"])
def test_a_recompile_limit_below_one_or_not_a_whole_number_is_refused_by_name(bad):
    with pytest.raises(ValueError, match=f"recompile_limit={bad!r}: it must be a whole number"):
        watch(scale, recompile_limit=bad)


def test_mark_dynamic_on_a_missing_dim_names_the_argument():
    with pytest.raises(IndexError, match=r"mark_dynamic\(x, 2\): x has 1 dims"):
        mark_dynamic(torch.randn(4, device=DEV), 2, name="x")


def test_mark_dynamic_on_a_dim_the_code_needs_static_names_the_argument():
    def branchy(x):
        return x.sum() if x.shape[0] == 4 else x.mean()

    watched = watch(branchy)
    x = mark_dynamic(torch.randn(4, device=DEV), 0, name="x")
    with pytest.raises(DynamicDimError, match=r"x \(dim 0\) was marked dynamic"):
        watched(x)


def test_the_stepper_shows_which_entry_served_each_call():
    watched = watch(scale, dynamic=False)
    x = torch.randn(4, device=DEV)
    for n in (2, 3, 2):
        watched(x, n)
    stepper = compile_log_view(watched).widget()
    stepper.slider.value = 1
    assert stepper.to_text().splitlines()[:3] == [
        "call 1 of 3: scale(x: float32[4], n=3)",
        "  compiled -> entry 0/1",
        "  failed guard (Python value): 0/0: n == 2",
    ]
    stepper.slider.value = 2
    assert "  cache hit -> entry 0/0" in stepper.to_text()
    bundle = stepper._repr_mimebundle_()
    assert "call 2 of 3" in bundle["text/plain"] and "<img" in bundle["text/html"]


def test_real_inductor_path_records_the_same_reasons():
    watched = watch(total, backend="inductor", dynamic=False)
    for size in (4, 5):
        x = torch.randn(size, device=DEV)
        assert torch.allclose(watched(x).cpu(), total(x).cpu())
    assert watched.log.calls[1].reasons == (
        "0/0: tensor 'x' size mismatch at index 0. expected 4, actual 5",)


def test_a_later_watch_supersedes_an_earlier_one_clearly():
    first = watch(total)
    first(torch.randn(3, device=DEV))
    watch(total)  # resets Dynamo: the first watcher's cache is gone
    with pytest.raises(RuntimeError, match="superseded by a later watch"):
        first(torch.randn(3, device=DEV))
    assert len(first.log.calls) == 1
