"""What the dispatcher's fast path must not change: it caches per-op plans, keeps weak
references to live storages in a plain dict, and prices unobserved ops without a KernelCost."""

import gc

import pytest
import torch

import mtia_lab
from mtia_lab.backend import RUNTIME
from mtia_lab.backend.aten.dispatch import set_observer
from mtia_lab.backend.aten.tensor import _LIVE_STORAGES
from mtia_lab.backend.runtime import cost, streams

aten = torch.ops.aten


def test_a_kernel_registered_after_the_first_call_takes_over_and_leaves_cleanly():
    x = torch.randn(6)
    xd = x.to("mtia_sim")
    mtia_lab.reset_fallback_counts()
    torch.cumprod(xd, 0)  # no kernel yet: the fallback serves it (and its plan is cached)
    assert mtia_lab.fallback_counts() == {"aten::cumprod": 1}
    calls = []

    @mtia_lab.register_kernel("aten::cumprod")
    def cumprod(func, args, kwargs, device):
        calls.append(func)
        return func(*args, **kwargs)

    try:
        with mtia_lab.strict():
            result = torch.cumprod(xd, 0)
        torch.testing.assert_close(result.cpu(), torch.cumprod(x, 0))
        assert calls == [aten.cumprod.default]
        assert mtia_lab.fallback_counts() == {"aten::cumprod": 1}
    finally:
        mtia_lab.unregister_kernel("aten::cumprod")
    torch.cumprod(xd, 0)
    assert mtia_lab.fallback_counts() == {"aten::cumprod": 2}
    with mtia_lab.strict(), pytest.raises(mtia_lab.StrictModeError):
        torch.cumprod(xd, 0)


class _Prices:
    def __init__(self):
        self.prices, self.spans = [], []

    def before_op(self, func, kind, args, kwargs, device):
        pass

    def after_op(self, func, kind, result, price, span):
        self.prices.append(price)
        self.spans.append(span)


PICOSECOND_US = 1e-6


def _charged_us(fn) -> float:
    stream = streams.current_stream(0)
    before = stream.clock_us
    fn()
    return stream.clock_us - before


@pytest.mark.parametrize(
    "make, op, func",
    [
        (lambda: (torch.randn(64), torch.randn(64)), lambda a, b: a + b, aten.add.Tensor),
        (lambda: (torch.randn(8, 16), torch.randn(16, 4)), lambda a, b: a @ b, aten.mm.default),
        (
            lambda: (torch.randn(64, dtype=torch.bfloat16), torch.randn(64)),
            lambda a, b: a.relu(),
            aten.relu.default,
        ),
    ],
)
def test_observed_and_unobserved_ops_charge_the_same_simulated_time(make, op, func):
    a, b = make()
    ad, bd = a.to("mtia_sim"), b.to("mtia_sim")
    unobserved = _charged_us(lambda: op(ad, bd))
    recorder = _Prices()
    previous = set_observer(recorder)
    try:
        observed = _charged_us(lambda: op(ad, bd))
    finally:
        set_observer(previous)
    (price,) = recorder.prices
    expected = cost.estimate(func, (a, b) if func is not aten.relu.default else (a,), op(a, b))
    assert price == expected
    profile = RUNTIME.devices[0].profile
    # The charge is the difference of two readings of a float clock, and how far that clock
    # has run depends on the tests that ran before in this process: equal to a picosecond.
    assert observed == pytest.approx(price.duration_us(profile), rel=0, abs=PICOSECOND_US)
    assert unobserved == pytest.approx(observed, rel=0, abs=PICOSECOND_US)
    if func is aten.mm.default:
        assert price.gemm_flops == 2 * 8 * 16 * 4


def test_views_share_one_storage_and_its_memory_returns_with_the_last_view(clean_memory):
    base = torch.mtia_sim.memory_allocated()
    x = torch.randn(64, device="mtia_sim")
    view = x[2:10]
    view2 = view.view(2, 4)
    storage = mtia_lab.storage_of(x)
    assert mtia_lab.storage_of(view) is storage and mtia_lab.storage_of(view2) is storage
    host_ptr = storage.host_ptr
    assert _LIVE_STORAGES[host_ptr]() is storage
    allocated = torch.mtia_sim.memory_allocated()
    assert allocated > base
    del x, storage
    gc.collect()
    assert torch.mtia_sim.memory_allocated() == allocated  # the views keep the block
    view2.add_(1)  # in place through a view: same storage, no new block
    assert torch.mtia_sim.memory_allocated() == allocated
    del view, view2
    gc.collect()
    assert torch.mtia_sim.memory_allocated() == base
    assert host_ptr not in _LIVE_STORAGES
