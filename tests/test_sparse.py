"""Sparse COO tensors on the device, against the CPU (backend/aten/sparse.py).

What PyTorch's test_type_promotion.py `test_sparse_*` tests use: to_sparse, sparse_coo_tensor,
indices/values, coalescing, to_dense, add/sub/mul/div between sparse, dense and scalars (in place
or not, with promotion and the CPU's errors), moving between host and device; plus the device's
own promises: indices and values are two device allocations, freed with the tensor, shared with
the dense tensors that alias them, and the trace counts their bytes.
"""

from __future__ import annotations

import copy
import io
import itertools
import unittest
import warnings

import pytest
import torch

import mtia_lab
from mtia_lab import _compat, storage_of

DEVICE = "mtia_sim"


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():  # "Sparse invariant checks are implicitly disabled"
        warnings.simplefilter("ignore", UserWarning)
        yield


def _dense(dtype: torch.dtype, seed: int) -> torch.Tensor:
    """A 4x5 CPU tensor of `dtype` with about half its entries zero."""
    g = torch.Generator().manual_seed(seed)
    values = torch.randint(1, 9, (4, 5), generator=g).to(dtype)
    mask = torch.rand(4, 5, generator=g) < 0.5
    return values * mask


def _uncoalesced(dense: torch.Tensor) -> torch.Tensor:
    """The same values as `dense` with every entry stored twice (halved), not coalesced."""
    s = dense.to_sparse()
    indices = torch.cat((s.indices(), s.indices()), 1)
    values = torch.cat((s.values(), s.values()), 0)
    return torch.sparse_coo_tensor(indices, values, s.size())


def _run(call):
    """(result, None) or (None, exception)."""
    try:
        return call(), None
    except Exception as error:  # noqa: BLE001  (compared with the CPU's below)
        return None, error


def _check_same(on_cpu, on_device, values: bool = True) -> None:
    """Two calls, one on CPU tensors and one on the same tensors on the device, do the same:
    the same values, dtype and layout on `mtia_sim`, or the same exception type and words."""
    expected, cpu_error = _run(on_cpu)
    actual, device_error = _run(on_device)
    if cpu_error is not None:
        assert type(device_error) is type(cpu_error), (cpu_error, device_error)
        assert str(device_error) == str(cpu_error)
        return
    assert device_error is None, device_error
    assert actual.device.type == DEVICE
    assert actual.layout == expected.layout and actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    if not values:
        return
    if expected.is_sparse:
        assert actual.is_coalesced() == expected.is_coalesced()
        actual, expected = actual.to_dense(), expected.to_dense()
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True)


def _same_outcome(fn, host_args, device_args) -> None:
    _check_same(lambda: fn(*host_args), lambda: fn(*device_args))


def test_to_sparse_matches_the_cpu():
    dense = _dense(torch.float32, 0)
    s = dense.to(DEVICE).to_sparse()
    expected = dense.to_sparse()
    assert s.layout == torch.sparse_coo and s.is_sparse and s.device.type == DEVICE
    assert (s._nnz(), s.sparse_dim(), s.dense_dim(), s.is_coalesced()) == (
        expected._nnz(), expected.sparse_dim(), expected.dense_dim(), True)
    assert s.indices().device.type == DEVICE and s.values().device.type == DEVICE
    assert torch.equal(s.indices().cpu(), expected.indices())
    assert torch.equal(s.values().cpu(), expected.values())
    assert torch.equal(s.to_dense().cpu(), dense)
    assert s.stride() == expected.stride()  # PyTorch gives a sparse tensor zero strides


def test_sparse_coo_tensor_from_device_indices_and_values_with_dtype():
    dense = _dense(torch.int64, 1)
    host = _uncoalesced(dense)
    s = torch.sparse_coo_tensor(host._indices().to(DEVICE), host._values().to(DEVICE),
                                host.size(), dtype=torch.float64, device=DEVICE)
    assert s.dtype == torch.float64 and not s.is_coalesced()
    assert torch.equal(s.to_dense().cpu(), dense.double() * 2)
    coalesced = s.coalesce()
    assert coalesced.is_coalesced() and coalesced._nnz() == dense.count_nonzero()
    assert torch.equal(coalesced.values().cpu(), host.coalesce().values().double())


def test_sparse_factories_on_the_device():
    empty = torch.sparse_coo_tensor(size=(2, 3), device=DEVICE)
    zeros = torch.zeros(2, 3, layout=torch.sparse_coo, device=DEVICE, dtype=torch.int16)
    for s, dtype in ((empty, torch.float32), (zeros, torch.int16)):
        assert s.is_sparse and s.device.type == DEVICE and s.dtype == dtype
        assert s._nnz() == 0 and torch.equal(s.to_dense().cpu(), torch.zeros(2, 3, dtype=dtype))


_OPS = ("add", "sub", "mul", "div")
_DTYPES = [(torch.int64, torch.float32), (torch.float32, torch.int64),
           (torch.float32, torch.float64), (torch.uint8, torch.int16), (torch.bool, torch.int32)]


@pytest.mark.parametrize("op_name", _OPS)
@pytest.mark.parametrize("dtypes", _DTYPES, ids=lambda d: f"{d[0]}-{d[1]}".replace("torch.", ""))
def test_binary_ops_promote_and_fail_as_on_the_cpu(op_name, dtypes):
    """Every operand pairing test_type_promotion.py tries: sparse with sparse, dense with
    sparse, sparse with dense, sparse with a scalar; in place or not; coalesced or not."""
    first, second = _dense(dtypes[0], 2), _dense(dtypes[1], 3)
    scalar = 3
    for coalesced, inplace in itertools.product((True, False), (False, True)):
        sparse = (lambda d: d.to_sparse()) if coalesced else _uncoalesced
        pairs = [(sparse(first), sparse(second)), (first, sparse(second)),
                 (sparse(first), second), (sparse(first), scalar)]
        name = op_name + ("_" if inplace else "")
        for a, b in pairs:
            on_device = [x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in (a, b)]

            def op(x, y, name=name):
                return getattr(x.clone(), name)(y)
            _same_outcome(op, (a, b), on_device)


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int16, torch.int32,
                                   torch.int64])
def test_division_of_an_integer_sparse_tensor_is_true_division(dtype):
    dense = (torch.randn(5, generator=torch.Generator().manual_seed(4)) * 4).to(dtype)
    for op in (torch.div, torch.true_divide):
        _same_outcome(lambda s, op=op: op(s, 2), (dense.to_sparse(),),
                      (dense.to(DEVICE).to_sparse(),))


def test_moving_between_host_and_device_keeps_the_sparse_tensor():
    host = _uncoalesced(_dense(torch.float32, 5))
    s = host.to(DEVICE)
    assert s.is_sparse and s.device.type == DEVICE and not s.is_coalesced()
    back = s.to("cpu")
    assert back.is_sparse and back.device.type == "cpu" and not back.is_coalesced()
    torch.testing.assert_close(back, host)  # assert_close compares sparse tensors itself
    torch.testing.assert_close(s.cpu().to(DEVICE).cpu(), host)


def test_save_load_and_deepcopy():
    s = _dense(torch.float32, 6).to(DEVICE).to_sparse()
    buffer = io.BytesIO()
    torch.save(s, buffer)
    buffer.seek(0)
    for other in (torch.load(buffer), copy.deepcopy(s)):
        assert other.is_sparse and other.device.type == DEVICE
        assert storage_of(other.values()) is not storage_of(s.values())
        torch.testing.assert_close(other.cpu(), s.cpu())


def test_indices_and_values_are_device_allocations(clean_memory):
    """CUDA keeps a COO tensor as two dense allocations; so does the simulator."""
    allocated = torch.mtia_sim.memory_allocated
    dense = _dense(torch.float32, 7).to(DEVICE)
    before = allocated()
    s = dense.to_sparse()
    indices, values = s._memory
    blocks = indices.block.size + values.block.size
    assert allocated() - before == blocks
    assert indices.nbytes == s._indices().nbytes and values.nbytes == s._values().nbytes
    # the dense tensors that alias them share the allocations (no copy)
    assert storage_of(s.values()) is values and storage_of(s.indices()) is indices
    built = torch.sparse_coo_tensor(s.indices(), s.values(), s.size())
    assert built._memory == s._memory and allocated() - before == blocks
    del s, built, indices, values
    assert allocated() == before


def test_in_place_ops_follow_the_new_memory(clean_memory):
    """`s.add_(t)` gives the inner tensor new indices and values: the wrapper's allocations
    follow them, and the old ones are freed."""
    allocated = torch.mtia_sim.memory_allocated
    first, second = _dense(torch.float32, 8), _dense(torch.float32, 9)
    s, t = first.to(DEVICE).to_sparse(), second.to(DEVICE).to_sparse()
    s.add_(t)
    assert storage_of(s.values()) is s._memory[1]
    assert s._memory[1].nbytes == s._values().untyped_storage().nbytes()  # with capacity
    torch.testing.assert_close(s.to_dense().cpu(), first + second)
    fresh = (first + second).to(DEVICE).to_sparse()
    held = allocated()
    del fresh
    assert held - allocated() == sum(m.block.size for m in s._memory)
    s.sparse_resize_((6, 7), 2, 0)
    assert s.shape == (6, 7) and s.to_dense().shape == (6, 7)


def test_sparse_gradients_train_as_on_the_cpu():
    torch.manual_seed(0)
    host = torch.nn.Embedding(10, 3, sparse=True)
    device = copy.deepcopy(host).to(DEVICE)
    ids = torch.tensor([1, 2, 1, 7])
    for module, where in ((host, "cpu"), (device, DEVICE)):
        module(ids.to(where)).pow(2).sum().backward()
        torch.optim.SGD(module.parameters(), lr=0.1).step()
    assert device.weight.grad.is_sparse and device.weight.grad.device.type == DEVICE
    torch.testing.assert_close(device.weight.grad.cpu(), host.weight.grad)
    torch.testing.assert_close(device.weight.detach().cpu(), host.weight.detach())


def test_trace_counts_the_bytes_of_indices_and_values():
    s = _dense(torch.float32, 10).to(DEVICE).to_sparse()
    with mtia_lab.trace() as trace:
        doubled = s * 2
    (event,) = [e for e in trace.events if e.op == "aten::mul.Tensor"]
    record = event.inputs[0]
    assert record.nbytes == s._indices().nbytes + s._values().nbytes
    assert record.strides == () and record.storage == s._memory[1].address
    assert doubled.is_sparse


@pytest.mark.parametrize("make", [
    lambda x: x.to_sparse_csr(),
    lambda x: x.to_sparse_csc(),
    lambda x: x.to_sparse(layout=torch.sparse_bsr, blocksize=(2, 2)),
    lambda x: torch.empty(2, 2, layout=torch.sparse_csr, device=x.device),
], ids=["csr", "csc", "bsr", "empty_csr"])
def test_other_sparse_layouts_are_refused_with_the_fix(make):
    x = torch.eye(4, device=DEVICE)
    with pytest.raises(NotImplementedError, match=r"sparse_(csr|csc|bsr) tensor.*sparse COO "
                                                  r"tensors only.*to_sparse\(\)"):
        make(x)


def test_metadata_queries_move_no_data():
    s = _dense(torch.float32, 11).to(DEVICE).to_sparse()
    with mtia_lab.trace() as trace:
        s._nnz(), s.sparse_dim(), s.dense_dim(), s.is_coalesced()
    assert trace.events == []
    with pytest.raises(RuntimeError, match="expected sparse coordinate tensor layout"):
        torch.ones(2, device=DEVICE).is_coalesced()


def _sparse_opinfos():
    """PyTorch's OpInfos that support sparse COO inputs (`supports_sparse`), not the _refs."""
    return [op for op in _compat.opinfo_db() if op.supports_sparse and op.variant_test_name == ""]


def _tensor_map(value, fn):
    """fn(value) for a tensor; dtypes (which SampleInput.transform also passes) unchanged."""
    return fn(value) if isinstance(value, torch.Tensor) else value


def _sparse_samples(op, limit: int = 4):
    """The op's own sparse COO samples where it has them (mul, sum, the masked reductions);
    for the unary ops, which have none, their dense samples made sparse."""
    try:
        return list(itertools.islice(op.sample_inputs_sparse(torch.sparse_coo, "cpu",
                                                             torch.float32), limit))
    except (NotImplementedError, unittest.SkipTest):
        dense = op.sample_inputs("cpu", torch.float32)
        return [sample.transform(lambda t: _tensor_map(t, lambda x: x.to_sparse() if x.dim()
                                                        else x))
                for sample in itertools.islice(dense, limit) if sample.input.dim()]


@pytest.mark.parametrize("op", _sparse_opinfos(), ids=lambda op: op.name)
def test_opinfo_sparse_samples_match_the_cpu(op):
    samples = _sparse_samples(op)
    if not samples:
        pytest.skip(f"{op.name} has no sparse COO sample")
    random = op.name.startswith("rand")  # randn_like: compare all but the values
    for sample in samples:
        on_device = sample.transform(lambda t: _tensor_map(t, lambda x: x.to(DEVICE)))
        if on_device.kwargs.get("device") == "cpu":  # zeros_like(..., device="cpu")
            on_device.kwargs["device"] = DEVICE
        _check_same(lambda s=sample: op(s.input, *s.args, **s.kwargs),
                    lambda s=on_device: op(s.input, *s.args, **s.kwargs), values=not random)


def test_graph_capture_refuses_sparse_ops_and_leaves_the_device_usable():
    s = torch.eye(3, device=DEVICE).to_sparse()
    graph = torch.mtia_sim.MTIAGraph()
    with pytest.raises(RuntimeError, match="(?s)sparse COO tensor.*Run the sparse ops before"):
        with torch.mtia_sim.graph(graph):
            s * 2
    assert torch.equal((s * 2).to_dense().cpu(), torch.eye(3) * 2)


def test_a_sparse_tensor_stays_on_its_device_index():
    s = torch.eye(3, device=f"{DEVICE}:1").to_sparse()
    assert s.device == torch.device(DEVICE, 1) == (s * 2).device == s.values().device
    assert s.to(f"{DEVICE}:0").device == torch.device(DEVICE, 0)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(3, 3, device=f"{DEVICE}:0") + s


@pytest.mark.parametrize("where", ["cpu", DEVICE])
def test_assert_equal_compares_sparse_tensors_as_on_the_cpu(where):
    """PyTorch's TestCase.assertEqual on two sparse tensors: equal after coalescing, and a
    mismatch in values or number of entries reported in the CPU's words."""
    from torch.testing._internal.common_utils import TestCase

    case = TestCase()
    s = torch.tensor([[0.0, 1.0], [2.0, 0.0]], device=where).to_sparse()
    doubled = torch.sparse_coo_tensor(torch.cat((s.indices(), s.indices()), 1),
                                      torch.cat((s.values(), s.values())) * 0.5, (2, 2))
    case.assertEqual(s, doubled.coalesce())
    with pytest.raises(AssertionError, match="number of specified values.*2 != 4"):
        case.assertEqual(s, doubled)
    with pytest.raises(AssertionError, match="Sparse COO values are not close"):
        case.assertEqual(s, s * 2)
    case.assertEqual(s.cpu(), s, exact_device=False)
