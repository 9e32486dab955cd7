"""Every private or experimental PyTorch API mtia_lab touches, in one place.

The Python backend path of PyTorch is young: the names below are private and may move between
releases. mtia_lab pins torch (see pyproject.toml); when upgrading, this is the file to check,
and tests/test_compat.py is the suite that says whether the hooks still behave.
"""

from __future__ import annotations

import torch
import torch.utils.backend_registration as _backend_registration

SUPPORTED_TORCH = ("2.13",)
DEVICE_NAME = "mtia_sim"


def check_torch_version() -> None:
    """Fail early, with the fix, on a torch whose private hooks were not checked."""
    version = torch.__version__.split("+")[0]
    if not version.startswith(SUPPORTED_TORCH):
        raise ImportError(
            f"mtia_lab was checked on torch {', '.join(SUPPORTED_TORCH)}.x but found {version}. "
            "Install the pinned CPU build: pip install torch==2.13.0"
        )


def privateuse1_name() -> str:
    return torch._C._get_privateuse1_backend_name()


def setup_python_backend(name: str, device_module: object) -> None:
    """Rename PrivateUse1, generate `Tensor.<name>()` methods, register the device module,
    the hooks and the (one-device) Python device guard."""
    _backend_registration._setup_privateuseone_for_python_backend(
        rename=name, backend_module=device_module
    )


def make_wrapper_tensor(
    cls: type, inner: torch.Tensor, device: torch.device, requires_grad: bool = False
) -> torch.Tensor:
    """A tensor whose metadata (size, strides, offset, dtype, device) is its own, data elsewhere."""
    return torch.Tensor._make_wrapper_subclass(
        cls,
        inner.size(),
        strides=inner.stride(),
        storage_offset=inner.storage_offset(),
        dtype=inner.dtype,
        layout=inner.layout,
        device=device,
        requires_grad=requires_grad,
    )


def copy_math_bits(wrapper: torch.Tensor, inner: torch.Tensor) -> None:
    """Give a wrapper tensor the lazy conjugate / negative bits of its inner tensor."""
    torch._C._set_conj(wrapper, inner.is_conj())
    torch._C._set_neg(wrapper, inner.is_neg())


def math_bit_keys_enabled():
    """A context in which the Conjugate and Negative dispatch keys work again.

    Inside `__torch_dispatch__` PyTorch excludes every key above Python, these two included, so a
    composite CPU op run there would read a lazy `x.mH` as if it were not conjugated."""
    include = torch._C._dispatch_tls_local_include_set()
    exclude = torch._C._dispatch_tls_local_exclude_set()
    exclude = exclude.remove(torch._C.DispatchKey.Conjugate).remove(torch._C.DispatchKey.Negative)
    return torch._C._ForceDispatchKeyGuard(include, exclude)


def register_fallback(fn, dispatch_key: str) -> torch.library.Library:
    """A boxed kernel for every op without one at `dispatch_key`: fn(op, keyset, *args, **kw)."""
    lib = torch.library.Library("_", "IMPL")
    lib.fallback(fn, dispatch_key=dispatch_key, with_keyset=True)
    return lib


def register_fallthrough(dispatch_key: str) -> torch.library.Library:
    """Let every op pass through `dispatch_key` (what C++ backends get from makeFallthrough)."""
    lib = torch.library.Library("_", "IMPL")
    lib.fallback(torch.library.fallthrough_kernel, dispatch_key=dispatch_key)
    return lib


def dispatch_keys_of(tensor: torch.Tensor) -> list[str]:
    """The dispatch key set of a tensor, as names, highest priority first: the order in which
    the dispatcher visits them (PyTorch prints a DispatchKeySet the other way round)."""
    return dispatch_key_names(dispatch_key_bits(tensor))


def has_kernel_for(op: torch._ops.OpOverload, dispatch_key: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), dispatch_key)


# -- used by the trace recorder (mtia_lab/trace/recorder.py) ------------------------------------
def dispatch_key_bits(tensor: torch.Tensor) -> int:
    """The dispatch key set of a tensor as one integer: cheap to read, hash and cache."""
    return torch._C._dispatch_keys(tensor).raw_repr()


def dispatch_key_names(bits: int) -> list[str]:
    """The names in a key set read by `dispatch_key_bits`, highest priority first.

    PyTorch prints a DispatchKeySet lowest priority first (the backend, e.g. PrivateUse1, leads),
    so the printed order is reversed here."""
    text = str(torch._C.DispatchKeySet.from_raw_repr(bits))
    inner = text[text.index("(") + 1 : text.rindex(")")]
    return [key.strip() for key in reversed(inner.split(",")) if key.strip()]


# The autograd Node whose backward is running on this thread, or None outside backward (bound
# directly, not wrapped: the trace recorder asks once per op).
current_autograd_node = torch._C._current_autograd_node


def autograd_sequence_nr(node) -> int:
    """The creation order of an autograd Node (per thread); AccumulateGrad nodes have 2**64-1."""
    return node._sequence_nr()


# torch.compile holds `compile_session._is_compiling_flag` True for its whole session: Dynamo's
# fake-tensor tracing and AOTAutograd's, which calls wrapper subclasses' __torch_dispatch__
# (torch 2.13 convert_frame.compile_inner). The dispatcher reads the attribute itself: one load
# per op, no call.
compile_session = torch.compiler


# --- torch.compile (used by mtia_lab/compiler; Inductor's own scheduler is reached only from
# mtia_lab/compiler/inductor_compare.py, which exists to read those internals) ---


def register_dynamo_backend(name: str, compiler_fn) -> None:
    """Make `torch.compile(..., backend=name)` find `compiler_fn` (idempotent)."""
    import torch._dynamo

    if name not in torch._dynamo.list_backends(exclude_tags=()):
        torch._dynamo.register_backend(compiler_fn=compiler_fn, name=name)


def dynamo_skip_package(package: str) -> None:
    """Dynamo neither traces into nor compiles frames from `package`'s files (as for torch's
    own files): they run as plain Python, also when called back from C++ (autograd, dispatch)
    while a compiled function runs its graph-break code. Idempotent. Imports torch._dynamo."""
    from torch._dynamo import trace_rules

    if package not in _DYNAMO_SKIPPED:
        _DYNAMO_SKIPPED.add(package)
        trace_rules.add(package)


_DYNAMO_SKIPPED: set[str] = set()


def size_hint(value) -> int:
    """An int for a size that may be symbolic (a SymInt under dynamic shapes): the value seen
    when Dynamo traced, without adding a guard (meant for estimates, such as memory traffic)."""
    if isinstance(value, int):
        return value
    from torch.fx.experimental.symbolic_shapes import optimization_hint

    return optimization_hint(value)


def size_symbol(value):
    """The sympy symbol a graph input of symbolic size stands for (`s0`), or None."""
    if isinstance(value, torch.SymInt) and value.node.expr.is_Symbol:
        return value.node.expr
    return None


def symbolic_size_at(value, values: dict) -> int:
    """A (possibly symbolic) size as an int when the size symbols take `values`."""
    if isinstance(value, int):
        return value
    return int(value.node.expr.xreplace(values))


def aot_autograd_backend(fw_compiler, bw_compiler, decompositions):
    """A Dynamo backend that lowers to aten with AOTAutograd (forward and backward graphs)."""
    from torch._dynamo.backends.common import aot_autograd

    return aot_autograd(
        fw_compiler=fw_compiler, bw_compiler=bw_compiler, decompositions=decompositions
    )


def core_aten_decompositions(extra_ops) -> dict:
    """PyTorch's core-aten decomposition table plus the decompositions of `extra_ops`."""
    from torch._decomp import core_aten_decompositions as core
    from torch._decomp import get_decompositions

    table = dict(core())
    table.update(get_decompositions(list(extra_ops)))
    return table


def boxed(fn):
    """AOTAutograd calls compiled graphs with one list of arguments it may clear ("boxed")."""
    from functorch.compile import make_boxed_func

    return make_boxed_func(fn)


def storage_alias(host: torch.UntypedStorage, device: torch.device) -> torch.UntypedStorage:
    """A storage that reports `device` but whose bytes are `host`'s (it does not own them)."""
    return torch._C._construct_storage_from_data_pointer(host.data_ptr(), device, host.nbytes())


def is_fake(tensor: torch.Tensor) -> bool:
    """A FakeTensor (metadata only, while torch.compile traces): asking for its data pointer
    warns on torch 2.13 (and will raise later)."""
    from torch._subclasses.fake_tensor import is_fake as fake

    return fake(tensor)
