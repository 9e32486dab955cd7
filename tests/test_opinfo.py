"""The device against the CPU on PyTorch's own OpInfo samples: a representative subset for CI.

Each op runs its float32 `sample_inputs` on the CPU and on mtia_sim (mtia_lab.testing.opinfo);
a test fails if the device gives a different value, dtype or shape ("wrong") or raises where the
CPU does not ("error"). The full op_db sweep is `scripts/opinfo_sweep.py`.
"""

from __future__ import annotations

import pytest
import torch

import mtia_lab
from mtia_lab.backend.aten.registry import KERNELS
from mtia_lab.testing.opinfo import check_op, supported_ops

# Ops the issue names as native families: every aten op they reach must have a device kernel.
NATIVE = [
    # factories (device="cpu" in a sample becomes device="mtia_sim")
    "zeros", "ones", "full", "arange", "linspace", "eye", "empty", "zeros_like", "ones_like",
    "full_like", "new_zeros", "new_full", "new_empty", "randn", "rand_like", "normal",
    "bernoulli",
    # copies
    "clone", "contiguous", "to",
    # views
    "view", "view_as", "reshape", "as_strided", "as_strided.partial_views", "expand", "permute",
    "transpose", "t", "narrow", "select", "squeeze", "squeeze.multiple", "unsqueeze", "unfold",
    "diagonal", "flatten", "movedim", "split", "chunk", "unbind", "__getitem__", "mT",
    # clamp with Tensor and Scalar bounds
    "clamp", "clamp_min", "clamp_max",
    # pointwise and activations
    "add", "sub", "mul", "div.no_rounding_mode", "div.floor_rounding", "abs", "neg", "exp",
    "log", "sqrt", "rsqrt", "sigmoid", "tanh", "pow", "lerp", "addcmul", "addcdiv", "remainder",
    "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu", "nn.functional.leaky_relu",
    "nn.functional.elu", "nn.functional.hardtanh", "nn.functional.softplus", "nn.functional.mish",
    # comparisons and where
    "eq", "ne", "lt", "gt", "where", "isnan", "masked_fill", "logical_and",
    # reductions
    "sum", "mean", "amax", "amin", "argmax", "argmin", "var", "std", "prod",
    "max.reduction_with_dim", "logsumexp",
    # matrix products
    "mm", "addmm", "bmm", "baddbmm", "matmul", "dot", "mv", "addmv", "outer",
    "nn.functional.linear",
    # nn
    "softmax", "log_softmax", "nn.functional.layer_norm", "nn.functional.embedding",
    "index_select", "gather", "scatter", "scatter_add", "cat", "stack", "index_put", "index_add",
    "tril", "triu", "flip", "roll", "repeat", "sort", "topk", "nn.functional.pad.constant",
    "nn.functional.nll_loss", "nn.functional.mse_loss", "nn.functional.cross_entropy",
]
# Ops with no device kernel for some aten op they reach: the CPU fallback serves it (named here),
# and must give the CPU's answer.
FALLBACK = {
    "cumsum": "aten::cumsum",
    "cumprod": "aten::cumprod",
    "nn.functional.interpolate.bilinear": "aten::upsample_bilinear2d",
    "nn.functional.grid_sample": "aten::grid_sampler_2d",
    "median": "aten::median.dim",
    "kthvalue": "aten::kthvalue",
    "nonzero": "aten::nonzero",
    "masked_select": "aten::masked_select",
    "fft.hfft2": "aten::_fft_c2r",  # complex intermediates with a lazy conjugate view
}
INPLACE = [
    "clamp", "clamp_min", "add", "mul", "div.no_rounding_mode", "sqrt", "sigmoid", "addcmul",
    "lerp", "nn.functional.silu", "nn.functional.leaky_relu", "eq", "masked_fill", "addmm",
    "baddbmm", "scatter", "index_put", "index_add", "tril", "transpose", "t", "squeeze",
    "unsqueeze", "as_strided", "cumsum",
]
OUT = [
    "clamp", "add", "mul", "exp", "where", "mean", "amax", "argmax", "var", "std",
    "max.reduction_with_dim", "mm", "addmm", "bmm", "baddbmm", "matmul", "softmax",
    "index_select", "gather", "cat", "stack", "sort", "topk", "zeros", "arange", "cumsum",
    "linalg.matrix_rank", "split_with_sizes_copy", "unbind_copy",
]


@pytest.fixture(scope="module")
def ops() -> dict:
    names = set(NATIVE) | set(FALLBACK) | set(INPLACE) | set(OUT) | {"jiterator_unary"}
    return {op.full_name: op for op in supported_ops(sorted(names))}


def _explain(result) -> str:
    return f"{result.name} is {result.klass!r}: {result.problem or sorted(result.fallbacks)}"


@pytest.mark.parametrize("name", NATIVE)
def test_native_ops_match_cpu_without_fallback(ops, name):
    result = check_op(ops[name])
    assert result.samples > 0, _explain(result)
    assert result.klass == "native", _explain(result)


@pytest.mark.parametrize("name", sorted(FALLBACK))
def test_fallback_ops_match_cpu(ops, name):
    result = check_op(ops[name])
    assert result.klass == "fallback", _explain(result)
    # If this op gained a native kernel, pick another example that still uses the fallback.
    assert FALLBACK[name] in result.fallbacks, _explain(result)


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_variants_write_their_input_like_cpu(ops, name):
    result = check_op(ops[name], variant="inplace")
    assert result.samples > 0, _explain(result)
    assert result.klass in ("native", "fallback"), _explain(result)


@pytest.mark.parametrize("name", OUT)
def test_out_variants_fill_device_out_tensors_like_cpu(ops, name):
    result = check_op(ops[name], variant="out")
    assert result.samples > 0, _explain(result)
    assert result.klass in ("native", "fallback"), _explain(result)


# Regressions from sweeps at other dtypes (scripts/opinfo_sweep.py --dtype ...): complex ops whose
# host composites make conjugate views, lazy conjugates on the device, factories that reach the
# PrivateUse1 boxed fallback.
OTHER_DTYPES = [
    ("linalg.pinv", torch.complex64), ("linalg.lstsq", torch.complex64),
    ("mul", torch.complex64), ("matmul", torch.complex64), ("tril_indices", torch.int64),
]


@pytest.mark.parametrize("name,dtype", OTHER_DTYPES, ids=[f"{n}-{d}" for n, d in OTHER_DTYPES])
def test_other_dtypes_match_cpu(name, dtype):
    result = check_op(supported_ops([name], dtype)[0], dtype=dtype)
    assert result.samples > 0, _explain(result)
    assert result.klass in ("native", "fallback"), _explain(result)


@pytest.mark.parametrize("name", ["add", "clamp", "mm", "sum", "transpose", "cat", "cumsum"])
def test_noncontiguous_samples_match_cpu(ops, name):
    result = check_op(ops[name], noncontiguous=True)
    assert result.samples > 0, _explain(result)
    assert result.klass in ("native", "fallback"), _explain(result)


def test_lazy_conjugate_views_compute_like_cpu():
    x = torch.randn(4, dtype=torch.complex64)
    y = torch.randn(4, dtype=torch.complex64)
    dx, dy = x.to("mtia_sim"), y.to("mtia_sim")
    assert dx.conj().is_conj()
    torch.testing.assert_close((dx.conj() * dy).cpu(), x.conj() * y)
    torch.testing.assert_close(dx.conj().imag.cpu(), x.conj().imag)


def test_inplace_view_ops_keep_the_base_intact():
    base = torch.arange(10.0)
    device_base = base.to("mtia_sim")
    view, device_view = base.as_strided((1, 5), (5, 2)), device_base.as_strided((1, 5), (5, 2))
    view.squeeze_(0).unsqueeze_(1).t_()
    device_view.squeeze_(0).unsqueeze_(1).t_()
    assert device_view.shape == view.shape and device_view.stride() == view.stride()
    torch.testing.assert_close(device_base.cpu(), base)
    torch.testing.assert_close(device_view.cpu(), view)


# The oracle itself: it must catch a device that is wrong or raises, and skip what the CPU cannot
# compute. A broken kernel is registered for the length of one test.


@pytest.fixture
def replace_kernel():
    saved = {}

    def replace(op: str, fn) -> None:
        packet, _, name = op.partition(".")
        overload = getattr(getattr(torch.ops.aten, packet), name)
        saved.setdefault(overload, KERNELS.get(overload))
        mtia_lab.register_kernel(overload)(fn)

    yield replace
    for overload, kernel in saved.items():
        if kernel is None:
            KERNELS.pop(overload, None)
        else:
            KERNELS[overload] = kernel


def test_oracle_reports_a_wrong_kernel(ops, replace_kernel):
    replace_kernel("neg.default", lambda func, args, kwargs, device: args[0].clone())
    result = check_op(ops["neg"])
    assert result.klass == "wrong"
    assert "not close" in result.problem or "not equal" in result.problem


def test_oracle_reports_a_wrong_shape(ops, replace_kernel):
    replace_kernel("mm.default", lambda func, args, kwargs, device: func(*args)[:, :1])
    result = check_op(ops["mm"])
    assert result.klass == "wrong"
    assert result.problem.endswith("cpu torch.float32[5, 5] vs device torch.float32[5, 1]")


def test_oracle_reports_a_kernel_that_raises(ops, replace_kernel):
    def broken(func, args, kwargs, device):
        raise RuntimeError("kernel exploded")

    replace_kernel("exp.default", broken)
    result = check_op(ops["exp"])
    assert result.klass == "error"
    assert result.problem == "RuntimeError: kernel exploded"


def test_oracle_skips_ops_the_cpu_cannot_run(ops):
    result = check_op(ops["jiterator_unary"])  # CUDA-only: every CPU sample raises
    assert result.klass == "cpu-fails"
    assert result.samples == 0 and result.cpu_failures > 0


def test_unknown_names_and_variants_are_refused_with_the_fix(ops):
    with pytest.raises(ValueError, match="nn.functional.gelu"):
        supported_ops(["gelu_typo"])
    with pytest.raises(ValueError, match="op.inplace_variant"):
        check_op(ops["mm"], variant="inplace")


def test_compressed_sparse_results_fail_with_a_clear_error():
    x = torch.eye(3, device="mtia_sim")
    with pytest.raises(NotImplementedError, match="strided .dense. tensors and sparse COO"):
        x.to_sparse_csr()


def test_oracle_reports_a_view_that_copies(ops, replace_kernel):
    replace_kernel("t.default", lambda func, args, kwargs, device: func(*args).clone())
    result = check_op(ops["t"])
    assert result.klass == "wrong"
    assert "view of an input on the CPU but not on mtia_sim" in result.problem
