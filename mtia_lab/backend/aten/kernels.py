"""The simulated device's native kernels: which aten ops it runs itself, and how.

Read top to bottom: the op families the device supports natively (each family a list of aten
op packets, every overload of which -- functional, in-place `_` and `out=` -- is native), then the
kernels that need more than running the op on device memory.

Ops that are CompositeImplicitAutograd in PyTorch (`matmul`, `reshape`, `linear`, `layer_norm`,
...) never reach a backend: PyTorch decomposes them above autograd into the ops below, so listing
their parts is what makes them native.
"""

from __future__ import annotations

import torch

from ..._compat import OpOverloadPacket
from . import kernels_rnn, quantized, sparse
from .kernels_nn import NN_FAMILIES
from .kernels_nn import register_prices as _register_nn_prices
from .registry import ask_inner, register_kernel, run_on_device

aten = torch.ops.aten

FACTORIES = [
    "empty_like", "zeros_like", "ones_like", "full_like",
    "fill", "fill_", "zero_", "zero", "arange", "linspace", "new_empty",
    "new_empty_strided", "new_zeros", "new_ones", "new_full", "empty", "empty_strided",
    "scalar_tensor", "eye",
    "_new_zeros_with_same_feature_meta",  # forward-mode AD: a tangent laid out like its primal
]
RANDOM = [
    "normal", "normal_", "uniform", "uniform_", "bernoulli", "bernoulli_", "random_", "random",
    "exponential_", "exponential", "native_dropout_backward", "multinomial",
]
COPIES = ["clone", "_copy_from_and_resize", "lift_fresh_copy"]
CLAMPS = ["clamp", "clamp_", "clamp_min", "clamp_min_", "clamp_max", "clamp_max_"]
POINTWISE = [
    "add", "add_", "sub", "sub_", "rsub", "mul", "mul_", "div", "div_", "neg", "neg_", "abs",
    "abs_", "pow", "pow_", "sqrt", "sqrt_", "rsqrt", "rsqrt_", "exp", "exp_", "exp2", "expm1",
    "log", "log_", "log1p", "log2", "log10", "sin", "cos", "tan", "tanh", "tanh_", "sigmoid",
    "sigmoid_", "erf", "erfinv", "reciprocal", "reciprocal_", "remainder", "fmod", "floor",
    "ceil", "round", "trunc", "frac", "sign", "sgn", "maximum", "minimum", "fmax", "fmin", "lerp",
    "lerp_", "addcmul", "addcmul_", "addcdiv", "addcdiv_", "logical_not", "logical_and",
    "logical_or", "logical_xor", "bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor",
    "masked_fill", "masked_fill_", "atan2", "hypot", "copysign", "nan_to_num", "xlogy",
    "sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "exp_", "square",
    "logit", "heaviside", "nextafter", "float_power", "floor_divide", "true_divide",
]
ACTIVATIONS = [
    "relu", "relu_", "gelu", "gelu_", "silu", "silu_", "leaky_relu", "leaky_relu_", "hardtanh",
    "hardtanh_", "elu", "elu_", "softplus", "mish", "hardsigmoid", "hardswish", "threshold",
    "threshold_", "_prelu_kernel", "glu", "celu", "selu", "relu6", "log_sigmoid_forward",
    # their derivatives, so that backward stays on the device
    "threshold_backward", "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward",
    "leaky_relu_backward", "hardtanh_backward", "elu_backward", "softplus_backward",
    "mish_backward", "hardsigmoid_backward", "hardswish_backward", "glu_backward",
    "log_sigmoid_backward",
]
COMPARISONS = [
    "eq", "eq_", "ne", "ne_", "lt", "lt_", "le", "le_", "gt", "gt_", "ge", "ge_", "where",
    "isnan", "isinf", "isneginf", "isposinf", "signbit",
]
REDUCTIONS = [
    "sum", "mean", "amax", "amin", "argmax", "argmin", "var", "std", "var_mean", "std_mean",
    "max", "min", "prod", "any", "all", "linalg_vector_norm", "aminmax", "logsumexp",
    "count_nonzero", "nansum",
]
LINEAR_ALGEBRA = ["mm", "addmm", "bmm", "baddbmm", "dot", "mv", "addmv", "outer", "addbmm", "vdot"]
NN = [
    "_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data",
    "native_layer_norm", "native_layer_norm_backward", "embedding", "embedding_dense_backward",
    "index_select", "gather", "scatter", "scatter_", "scatter_add", "scatter_add_", "cat",
    "stack", "index", "index_put", "index_put_", "_unsafe_index", "_unsafe_index_put",
    "index_add", "index_add_", "masked_scatter", "tril", "triu", "tril_", "triu_", "flip",
    "roll", "repeat", "constant_pad_nd", "_local_scalar_dense", "sort", "topk", "nll_loss_forward",
    "nll_loss_backward", "nll_loss2d_forward", "nll_loss2d_backward", "mse_loss",
    "mse_loss_backward", "embedding_renorm_",
]
VIEWS = [
    "view", "_unsafe_view", "_reshape_alias", "as_strided", "expand", "permute", "transpose",
    "t", "slice", "select", "squeeze", "unsqueeze", "unfold", "diagonal", "alias", "detach",
    "split", "split_with_sizes", "unbind", "chunk", "narrow", "view_as_real", "view_as_complex",
    "_conj", "_neg_view", "lift_fresh", "unsafe_split", "movedim",
]
# In-place views change a tensor's metadata, never its bytes. Through the fallback they would
# run on a host copy and be written back element by element, into the wrong places of a strided
# view; on the device memory they just restride the inner tensor, which the wrapper follows.
IN_PLACE_VIEWS = [
    "squeeze_", "unsqueeze_", "transpose_", "t_", "as_strided_", "swapdims_", "swapaxes_",
    "detach_",
]
# Metadata questions with no tensor result (`.data =`, and so the in-place views above, ask
# `_has_compatible_shallow_copy_type`): dispatch.py lets PyTorch answer them from the wrappers
# themselves. Kind "query": no device work, so it neither prices nor traces them.
METADATA_QUERIES = ["_has_compatible_shallow_copy_type"]
# Metadata questions about the memory behind two tensors, which forward-mode AD asks of a
# primal and its tangent (`make_dual`, so torch.func.jvp and linearize): answered from the inner
# tensors, which share the device storage's size, as a view is -- no data moved, no price.
# Through the fallback they would copy every storage to the host, in full, to compare two sizes.
STORAGE_QUERIES = ["is_same_size", "_has_same_storage_numel"]
# out= overloads that PyTorch decomposes (CompositeImplicitAutograd) and whose decomposition
# forgets `out` for tensor subclasses (it rebinds the C++ reference instead of writing): a
# PrivateUse1 entry stops the decomposition, so the op reaches the device whole and runs there.
WHOLE_OUT_OPS = [
    "linalg_matrix_rank.out", "linalg_matrix_rank.out_tol_tensor",
    "linalg_matrix_rank.atol_rtol_tensor_out", "linalg_matrix_rank.atol_rtol_float_out",
]
_LIBRARIES: list[torch.library.Library] = []

NATIVE_FAMILIES = {
    "factories": FACTORIES,
    "random": RANDOM,
    "copies": COPIES,
    "clamp": CLAMPS,
    "pointwise": POINTWISE,
    "activations": ACTIVATIONS,
    "comparisons": COMPARISONS,
    "reductions": REDUCTIONS,
    "linear algebra": LINEAR_ALGEBRA,
    "nn": NN,
    **NN_FAMILIES,  # convolution, batch norm, pooling, attention, optimizers: kernels_nn.py
    "sparse": sparse.SPARSE_OPS,
    "quantized": quantized.QUANTIZED_OPS,
}


def _packets(names: list[str]):
    for name in names:
        packet = getattr(aten, name, None)
        if isinstance(packet, OpOverloadPacket):
            yield packet


def register_native_families() -> None:
    for names in NATIVE_FAMILIES.values():
        for packet in _packets(names):
            register_kernel(packet)(run_on_device)
    for packet in _packets(VIEWS + IN_PLACE_VIEWS + STORAGE_QUERIES):
        register_kernel(packet, kind="view")(run_on_device)
    for packet in _packets(METADATA_QUERIES):
        register_kernel(packet, kind="query")(run_on_device)
    for packet in _packets(sparse.QUERIES + quantized.QUERIES):
        register_kernel(packet, kind="query")(ask_inner)
    _register_copies()
    _register_device_random()
    _keep_whole(WHOLE_OUT_OPS)
    _register_nn_prices()
    kernels_rnn.register()  # the fused LSTM / GRU cells PyTorch calls on an accelerator


def _keep_whole(overloads: list[str]) -> None:
    """Give each overload a PrivateUse1 kernel so that PyTorch does not decompose it for the
    device. The Python key comes first, so dispatch.py serves the op; this kernel only runs if
    something calls the op below the Python key, which mtia_lab never does."""

    def unreachable(*args, **kwargs):
        raise RuntimeError("mtia_sim: this op is served by __torch_dispatch__ (dispatch.py)")

    lib = torch.library.Library("aten", "IMPL")
    for overload in overloads:
        packet, _, name = overload.partition(".")
        if hasattr(aten, packet) and name in getattr(aten, packet).overloads():
            lib.impl(overload, unreachable, "PrivateUse1")
    _LIBRARIES.append(lib)


def _same_elements(dst: torch.Tensor, src: torch.Tensor) -> bool:
    # Same shape too: `x.view(2, 3).copy_(x.view(3, 2))` must raise as on the CPU.
    if not (dst.dtype == src.dtype and dst.shape == src.shape and dst.numel() > 0):
        return False
    try:
        same_ptr = dst.data_ptr() == src.data_ptr()
    except RuntimeError:  # fake tensors while torch.compile traces: no memory to compare
        return False
    return (
        same_ptr and dst.is_contiguous() and src.is_contiguous()
        and dst.is_conj() == src.is_conj() and dst.is_neg() == src.is_neg()
    )


def _register_copies() -> None:
    """Copies may cross devices (host<->device, device<->device): the only ops allowed to."""

    @register_kernel(aten._to_copy.default, cross_device=True)
    def to_copy(func, args, kwargs, device):
        # Device placement is the dispatcher's job; here only dtype/layout/format change --
        # and `meta` (no memory: a shape computation, as ZeroTensor kernels make) is kept.
        meta = kwargs.get("device") is not None and torch.device(kwargs["device"]).type == "meta"
        kwargs = {k: v for k, v in kwargs.items()
                  if k not in ("device", "non_blocking") or (meta and k == "device")}
        return func(*args, **kwargs)

    @register_kernel(aten.copy_.default, cross_device=True)
    def copy_(func, args, kwargs, device):
        dst, src = args[0], args[1]
        if _same_elements(dst, src):
            # Views of one wrapper do not share its C++ storage, so PyTorch's own `is_alias_of`
            # checks (matmul(out=) copying its result from a view of `out`) miss the alias: a
            # copy onto the very same elements is a no-op, as it is on the CPU.
            return dst
        return dst.copy_(src)

    @register_kernel(aten.copy.default, cross_device=True)
    def copy(func, args, kwargs, device):
        # copy_ made functional (AOTAutograd writes `buf.copy_(src)` this way): a new tensor on
        # self's device with src's values, src possibly on the host, as copy_ allows.
        return func(*args, **kwargs)

    @register_kernel(aten._copy_from.default, cross_device=True)
    def copy_from(func, args, kwargs, device):
        src, dst = args[0], args[1]
        return dst.copy_(src)


def _register_device_random() -> None:
    """Random ops whose schema has no `generator` argument would draw from the host's global
    generator; these kernels draw from the device's own (seeded by torch.mtia_sim.manual_seed)."""

    def like(x, dtype, memory_format):
        if x.layout == torch.strided:  # a sparse tensor takes no memory format
            memory_format = memory_format or torch.preserve_format
        return torch.empty_like(x, dtype=dtype, memory_format=memory_format)

    @register_kernel(aten.rand_like)
    def rand_like(func, args, kwargs, device):
        out = like(args[0], kwargs.get("dtype"), kwargs.get("memory_format"))
        return out.uniform_(0.0, 1.0, generator=device.generator)

    @register_kernel(aten.randn_like)
    def randn_like(func, args, kwargs, device):
        out = like(args[0], kwargs.get("dtype"), kwargs.get("memory_format"))
        return out.normal_(0.0, 1.0, generator=device.generator)

    @register_kernel(aten.randint_like)
    def randint_like(func, args, kwargs, device):
        low, high = (0, args[1]) if len(args) == 2 else (args[1], args[2])
        out = like(args[0], kwargs.get("dtype"), kwargs.get("memory_format"))
        return out.random_(int(low), int(high), generator=device.generator)

    @register_kernel(aten.native_dropout.default)
    def native_dropout(func, args, kwargs, device):
        """As ATen: keep each element with probability 1-p, scale kept ones by 1/(1-p)."""
        x, p = args[0], args[1]
        train = args[2] if len(args) > 2 else kwargs.get("train")
        if train is False or p == 0:
            return x.clone(), torch.ones_like(x, dtype=torch.bool)
        if p == 1:
            return torch.zeros_like(x), torch.zeros_like(x, dtype=torch.bool)
        mask = torch.empty_like(x).bernoulli_(1 - p, generator=device.generator).bool()
        return x * mask * (1.0 / (1 - p)), mask
