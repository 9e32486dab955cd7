"""Quantized tensors on the device, against the CPU (backend/aten/quantized.py).

What PyTorch's tests use (test_shape_ops' quantized flip, test_view_ops' quantized flatten and
ravel, torch_openreg's quantize_per_tensor): quantizing per tensor and per channel, the quantizer
queries, int_repr / dequantize, views, flip and copies, moving between host and device, the
CPU's errors for ops it refuses, torch.save / load and TestCase.assertEqual; plus the device's
own promises: the integers are one device allocation (shared by views, freed with the tensor),
the kernels are native (priced, traced, no host fallback), graph capture replays them, and
torch.compile runs them eagerly.
"""

from __future__ import annotations

import copy
import io
import warnings

import pytest
import torch

import mtia_lab
from mtia_lab import fallback_counts, reset_fallback_counts, storage_of

DEVICE = "mtia_sim"
QDTYPES = [torch.qint8, torch.quint8, torch.qint32]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():  # "quantized tensor creation functions ... are deprecated"
        warnings.simplefilter("ignore", UserWarning)
        yield


def _x(seed: int = 0, shape=(4, 6)) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _per_tensor(x: torch.Tensor, dtype=torch.qint8) -> torch.Tensor:
    return torch.quantize_per_tensor(x, 0.05, 3, dtype)


def _per_channel(x: torch.Tensor, dtype=torch.quint8) -> torch.Tensor:
    scales = torch.tensor([0.02, 0.05, 0.1, 0.2], dtype=torch.float64, device=x.device)
    zero_points = torch.tensor([0, 5, 10, 20], device=x.device)
    return torch.quantize_per_channel(x, scales, zero_points, 0, dtype)


def _assert_same_quantized(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """`actual` is on the device and holds the CPU result `expected`: the same dtype, scheme,
    quantizer, shape, strides and integers."""
    assert actual.device.type == DEVICE and expected.device.type == "cpu"
    assert actual.is_quantized and actual.dtype == expected.dtype
    assert actual.qscheme() == expected.qscheme()
    assert actual.shape == expected.shape and actual.stride() == expected.stride()
    if expected.qscheme() == torch.per_tensor_affine:
        assert (actual.q_scale(), actual.q_zero_point()) == (
            expected.q_scale(), expected.q_zero_point())
    else:
        assert actual.q_per_channel_axis() == expected.q_per_channel_axis()
        assert torch.equal(actual.q_per_channel_scales().cpu(), expected.q_per_channel_scales())
        assert torch.equal(actual.q_per_channel_zero_points().cpu(),
                           expected.q_per_channel_zero_points())
    assert torch.equal(actual.int_repr().cpu(), expected.int_repr())


def _run(call):
    try:
        return call(), None
    except Exception as error:  # noqa: BLE001  (compared with the CPU's below)
        return None, error


@pytest.mark.parametrize("dtype", QDTYPES, ids=str)
def test_quantize_per_tensor_on_the_device_matches_the_cpu(dtype):
    x = _x(1)
    q = _per_tensor(x.to(DEVICE), dtype)
    _assert_same_quantized(q, _per_tensor(x, dtype))
    dequantized = q.dequantize()
    assert dequantized.device.type == DEVICE and dequantized.dtype == torch.float32
    assert torch.equal(dequantized.cpu(), _per_tensor(x, dtype).dequantize())


def test_quantize_per_channel_with_device_scales_matches_the_cpu():
    x = _x(2)
    q = _per_channel(x.to(DEVICE))
    _assert_same_quantized(q, _per_channel(x))
    assert q.q_per_channel_scales().device.type == DEVICE
    assert torch.equal(q.dequantize().cpu(), _per_channel(x).dequantize())


@pytest.mark.parametrize("view", [
    lambda q: q.flatten(), lambda q: q.ravel(), lambda q: q.view(3, 8), lambda q: q.t(),
    lambda q: q[1], lambda q: q[1:3, ::2], lambda q: q.transpose(0, 1)[2],
    lambda q: q.unsqueeze(0).expand(2, 4, 6),
], ids=["flatten", "ravel", "view", "t", "select", "slice", "transpose_select", "expand"])
@pytest.mark.parametrize("make", [_per_tensor, _per_channel], ids=["per_tensor", "per_channel"])
def test_views_share_the_device_allocation_and_match_the_cpu(view, make):
    """A view shares the integers' allocation; one the CPU refuses (restriding a per-channel
    tensor: `t`, `expand`) fails with the CPU's words."""
    x = _x(3)
    q = make(x.to(DEVICE))
    expected, cpu_error = _run(lambda: view(make(x)))
    v, device_error = _run(lambda: view(q))
    if cpu_error is not None:
        assert type(device_error) is type(cpu_error) and str(device_error) == str(cpu_error)
        return
    _assert_same_quantized(v, expected)
    assert storage_of(v) is storage_of(q)


@pytest.mark.parametrize("op", [
    lambda q: q.flip(0), lambda q: q.flip((0, 1)), lambda q: q.t().contiguous(),
    lambda q: q.clone(), lambda q: torch.cat([q, q]), lambda q: torch.relu(q),
    lambda q: q.reshape(6, 4), lambda q: q.to(DEVICE if q.device.type == DEVICE else "cpu"),
], ids=["flip", "flip2", "contiguous", "clone", "cat", "relu", "reshape", "to_same"])
@pytest.mark.parametrize("dtype", QDTYPES, ids=str)
def test_ops_that_copy_match_the_cpu(op, dtype):
    x = _x(4)
    _assert_same_quantized(op(_per_tensor(x.to(DEVICE), dtype)), op(_per_tensor(x, dtype)))


@pytest.mark.parametrize(("make", "op"), [
    (_per_tensor, lambda q: q + q), (_per_tensor, lambda q: q.sum()),
    (_per_tensor, lambda q: q.to(torch.float32)), (_per_tensor, lambda q: q * 2),
    (_per_tensor, lambda q: torch.empty(4, 6).copy_(q)),
    (_per_tensor, lambda q: torch.zeros_like(q)), (_per_tensor, lambda q: q.q_per_channel_axis()),
    (_per_channel, lambda q: q.q_scale()),
    (_per_tensor, lambda q: torch.zeros(2, dtype=q.dtype, device=q.device)),
    (_per_tensor, lambda q: torch.empty_strided((2, 3), (1, 2), dtype=q.dtype, device=q.device)),
    (_per_tensor, lambda q: torch._empty_affine_quantized([2], device=q.device)),
], ids=["add", "sum", "to_float", "mul", "copy_to_float", "zeros_like", "axis_per_tensor",
        "scale_per_channel", "zeros", "empty_strided", "no_dtype"])
def test_ops_the_cpu_refuses_fail_with_the_cpus_words(make, op):
    x = _x(5)
    _, cpu_error = _run(lambda: op(make(x)))
    _, device_error = _run(lambda: op(make(x.to(DEVICE))))
    assert cpu_error is not None
    assert type(device_error) is type(cpu_error), (cpu_error, device_error)
    assert str(device_error).splitlines()[0] == str(cpu_error).splitlines()[0]


def test_quantizer_queries_move_no_data_and_a_dense_tensor_answers_as_on_the_cpu():
    q = _per_tensor(_x(6).to(DEVICE))
    with mtia_lab.trace() as trace:
        answers = (q.q_scale(), q.q_zero_point(), q.qscheme())
    assert trace.events == [] and answers == (0.05, 3, torch.per_tensor_affine)
    _, cpu_error = _run(lambda: torch.ones(2).q_scale())
    with pytest.raises(type(cpu_error)) as device_error:
        torch.ones(2, device=DEVICE).q_scale()
    assert str(device_error.value).splitlines()[0] == str(cpu_error).splitlines()[0]


@pytest.mark.parametrize("dtype", QDTYPES, ids=str)
def test_moving_between_host_and_device_keeps_the_quantizer(dtype):
    host = _per_tensor(_x(7), dtype)
    on_device = host.to(DEVICE)
    _assert_same_quantized(on_device, host)
    back = on_device.cpu()
    assert back.device.type == "cpu"
    assert torch.equal(back.int_repr(), host.int_repr()) and back.q_scale() == host.q_scale()
    other = on_device.to(f"{DEVICE}:1")
    assert other.device == torch.device(DEVICE, 1)
    assert torch.equal(other.int_repr().cpu(), host.int_repr())
    per_channel = _per_channel(_x(7))
    _assert_same_quantized(per_channel.to(DEVICE), per_channel)
    _assert_same_quantized(per_channel[1:3].to(DEVICE), per_channel[1:3])


def test_factories_on_the_device_match_the_cpu():
    """`_empty_affine_quantized` (test_view_ops' flatten and ravel use it) and
    `_empty_per_channel_affine_quantized` with device="mtia_sim": a device tensor with the
    quantizer asked for."""
    q = torch._empty_affine_quantized([5, 5], scale=2, zero_point=3, dtype=torch.quint8,
                                      device=DEVICE)
    assert q.device.type == DEVICE and q.dtype == torch.quint8 and q.shape == (5, 5)
    assert (q.q_scale(), q.q_zero_point()) == (2.0, 3)
    assert q.flatten().shape == (25,) and q.flatten().is_contiguous()
    empty = torch._empty_affine_quantized([0, 2, 3], scale=2, zero_point=3,
                                          dtype=torch.quint8, device=DEVICE)
    assert empty.ravel().shape == (0,)
    scales = torch.tensor([0.5, 0.25], dtype=torch.float64)
    pc = torch._empty_per_channel_affine_quantized(
        [2, 3], scales=scales, zero_points=torch.tensor([1, 2]), axis=0, dtype=torch.qint8,
        device=DEVICE)
    assert pc.device.type == DEVICE and pc.qscheme() == torch.per_channel_affine
    assert torch.equal(pc.q_per_channel_scales().cpu(), scales)


def test_the_integers_are_one_device_allocation_freed_with_the_tensor(clean_memory):
    allocated = torch.mtia_sim.memory_allocated
    x = _x(8, (256, 256)).to(DEVICE)
    before = allocated()
    for dtype, width in ((torch.qint8, 1), (torch.qint32, 4)):
        q = _per_tensor(x, dtype)
        memory = storage_of(q)
        assert memory.nbytes == 256 * 256 * width
        assert allocated() - before == memory.block.size
        view = q[10:20]
        assert allocated() - before == memory.block.size
        del q, view, memory
        assert allocated() == before


def test_quantized_kernels_are_native_and_traced():
    x = _x(9).to(DEVICE)
    reset_fallback_counts()
    with mtia_lab.trace() as trace:
        q = _per_tensor(x)
        q.int_repr(), q.flip(0).dequantize()
    assert not {op for op in fallback_counts() if "quant" in op or "int_repr" in op}
    by_op = {event.op: event for event in trace.events}
    for op in ("aten::quantize_per_tensor", "aten::int_repr", "aten::flip",
               "aten::dequantize.self"):
        assert by_op[op].kind == "native", op
    assert by_op["aten::quantize_per_tensor"].outputs[0].nbytes == q.numel()


@pytest.mark.parametrize("make", [_per_tensor, _per_channel], ids=["per_tensor", "per_channel"])
def test_save_load_and_deepcopy(make):
    q = make(_x(10).to(DEVICE))
    buffer = io.BytesIO()
    torch.save({"q": q, "t": q[:, 2:]}, buffer)
    for where in (None, "cpu"):
        buffer.seek(0)
        loaded = torch.load(buffer, map_location=where)
        expected_device = DEVICE if where is None else "cpu"
        assert loaded["q"].device.type == expected_device
        assert loaded["t"].stride() == q[:, 2:].stride()
        assert loaded["t"].storage_offset() == 2
        assert torch.equal(loaded["q"].int_repr().cpu(), q.int_repr().cpu())
        assert torch.equal(loaded["q"].dequantize().cpu(), q.dequantize().cpu())
    copied = copy.deepcopy(q)
    assert storage_of(copied) is not storage_of(q)
    _assert_same_quantized(copied, make(_x(10)))


@pytest.mark.parametrize("where", ["cpu", DEVICE])
def test_assert_equal_compares_quantized_tensors_as_on_the_cpu(where):
    from torch.testing._internal.common_utils import TestCase

    case = TestCase()
    q = _per_tensor(_x(11).to(where))
    case.assertEqual(q.flip(0), _per_tensor(_x(11).flip(0)), exact_device=False)
    with pytest.raises(AssertionError, match="Quantized"):
        case.assertEqual(q, _per_tensor(_x(12).to(where)))


def test_graph_capture_replays_quantize_and_dequantize():
    x = _x(13).to(DEVICE)
    graph = torch.mtia_sim.MTIAGraph()
    with torch.mtia_sim.graph(graph):
        out = _per_tensor(x).flip(0).dequantize()
    x.mul_(2)
    graph.replay()
    assert torch.equal(out.cpu(), _per_tensor(_x(13) * 2).flip(0).dequantize())


def test_torch_compile_runs_quantized_ops_eagerly_and_fullgraph_says_why():
    """PyTorch's fake `quantize_per_tensor` says float32: a compiled graph would treat the
    integers as floats (on the CPU, compiling `quantize(x).flip(0)` returns float32). On the
    device each quantized op is a graph break, so the results are eager's."""
    torch._dynamo.reset()
    x = _x(14).to(DEVICE)

    def fn(x):
        return _per_tensor(x * 2).flip(0)

    compiled = torch.compile(fn)(x)
    _assert_same_quantized(compiled, fn(_x(14)))
    torch._dynamo.reset()
    with pytest.raises(Exception, match="torch.compile does not trace quantized mtia_sim"):
        torch.compile(fn, fullgraph=True)(x)
    torch._dynamo.reset()
