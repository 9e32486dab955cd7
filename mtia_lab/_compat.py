"""Every private or experimental PyTorch core API mtia_lab touches, in one place.

The Python backend path of PyTorch is young: the names below are private and may move between
releases. Every function and constant here was checked on torch 2.13.0 (`SUPPORTED_TORCH`);
mtia_lab pins torch (see pyproject.toml). When upgrading, this is the file to read again, and
tests/test_compat.py pins each name here against the private API it wraps: it fails naming both.

Three compat modules, split by what they reach into and who may import them:
- this one (floor 0, imported by everything): the dispatcher, autograd, tensor subclasses,
  storages, FakeTensor, Dynamo's registration hooks, torch.testing's OpInfo database;
  `import mtia_lab` loads none of Dynamo, Inductor or Triton through it (imports inside
  functions);
- mtia_lab/inductor/_compat.py: TorchInductor's and Triton's internals, read by the Inductor
  engine and the comparison above it only (Triton must not be imported before the engine sets
  its interpreter switch);
- mtia_lab/instruments/_compat.py: Dynamo's introspection records (structured trace, guard
  cache, compiled autograd), read by the compile instruments only.
"""

from __future__ import annotations

import contextlib
import functools
import sys

import torch
import torch.utils._pytree
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
    """The name PrivateUse1 has now ("privateuseone" until a backend renames it)."""
    return torch._C._get_privateuse1_backend_name()


def setup_python_backend(name: str, device_module: object) -> None:
    """Rename PrivateUse1, generate `Tensor.<name>()` methods, register the device module,
    the hooks and the (one-device) Python device guard."""
    _backend_registration._setup_privateuseone_for_python_backend(
        rename=name, backend_module=device_module
    )


# -- names bound directly: types, and callables on the dispatcher's hot path ----------------------
# An op overload (`torch.ops.aten.add.Tensor`) and its packet (`torch.ops.aten.add`): the keys of
# the kernel registry and the types of `func` in __torch_dispatch__.
OpOverload = torch._ops.OpOverload
OpOverloadPacket = torch._ops.OpOverloadPacket

# Wrapper subclasses: metadata of their own, data elsewhere (MTIATensor.__new__).
make_wrapper_subclass = torch.Tensor._make_wrapper_subclass

# `__torch_function__ = disabled_torch_function`: results of torch functions keep their own class
# (a host `.cpu()` result is not made an MTIATensor); only __torch_dispatch__ sees the ops.
disabled_torch_function = torch._C._disabled_torch_function_impl

# The C++ getter/setter of `Tensor.data` and `Tensor._backward_hooks`, and the C++
# `Tensor.untyped_storage`, for a subclass that overrides the Python-level names.
TensorBase = torch._C.TensorBase
tensor_data_descriptor = torch._C.TensorBase.data
tensor_backward_hooks_descriptor = torch._C.TensorBase._backward_hooks
tensor_base_untyped_storage = torch._C.TensorBase.untyped_storage

# PyTorch's printer of a tensor's values (what `repr(tensor)` shows before its suffix).
tensor_str = torch._tensor_str._str

# Where torch's Tensor methods and nn.functional functions report they come from (their
# `__module__`): how the trace names a call "Tensor.add" or "F.linear".
TENSOR_METHOD_MODULE = "torch._tensor"
NN_FUNCTIONAL_MODULES = ("torch.nn.functional", "torch._C._nn")

# The C++ stream and event types torch.Stream / torch.Event are (subclassable), and the
# DeviceType value they report as `device_type` for the PrivateUse1 device.
NativeStream = torch._C.Stream
NativeEvent = torch._C.Event
PRIVATEUSE1_DEVICE_TYPE = int(torch._C._autograd.DeviceType.PrivateUse1)

# PyTorch's pytree (flatten / map over nested args), which torch's own dispatch code uses.
pytree = torch.utils._pytree

# Exclude a set of dispatch keys while a block runs (`with ExcludeDispatchKeys(keyset):`).
ExcludeDispatchKeys = torch._C._ExcludeDispatchKeyGuard

# Run below the Autograd key (an op's result gets no grad_fn: the composite's own autograd).
below_autograd = torch._C._AutoDispatchBelowAutograd

# What torch.save writes for a tensor (torch.load calls them back: the same objects).
rebuild_tensor = torch._utils._rebuild_tensor_v2
rebuild_parameter = torch._utils._rebuild_parameter
rebuild_sparse_tensor = torch._utils._rebuild_sparse_tensor  # (layout, (indices, values, ...))
rebuild_qtensor = torch._utils._rebuild_qtensor  # (storage, offset, size, stride, qparams, ...)
# Quantized tensors with a given quantizer and no data yet (backend/aten/quantized.py).
empty_affine_quantized = torch._empty_affine_quantized
empty_per_channel_affine_quantized = torch._empty_per_channel_affine_quantized
tensor_metadata = torch._utils.get_tensor_metadata


def op_schema(op: OpOverload):
    """An op overload's FunctionSchema (arguments, returns, alias info): what the dispatcher
    checks a call against. `op._schema` is private; there is no public spelling."""
    return op._schema


def overload_name(op: OpOverload) -> str:
    """An op overload's name within its packet: "Tensor" for aten.add.Tensor, "default"."""
    return op._overloadname


def dispatch_key_set(*names: str):
    """A DispatchKeySet of the named keys ("Python", "AutocastPrivateUse1"), for
    `ExcludeDispatchKeys`. Made once, outside the hot path."""
    keys = [getattr(torch._C.DispatchKey, name) for name in names]
    keyset = torch._C.DispatchKeySet(keys[0])
    for key in keys[1:]:
        keyset = keyset.add(key)
    return keyset


def composite_implicit(op: OpOverload, *args, **kwargs):
    """Run `op`'s CompositeImplicitAutograd kernel (ATen's own decomposition), for a device that
    overrides the op at its autograd key and still wants PyTorch's version for some inputs."""
    return op.decompose(*args, **kwargs)


def has_composite_implicit(op: OpOverload) -> bool:
    """Whether ATen writes `op` out of other ops (a CompositeImplicitAutograd kernel): the
    kernel `composite_implicit` runs. False for an op the C++ dispatcher does not know
    (`aten::sym_stride` is Python's own)."""
    try:
        return op.has_kernel_for_dispatch_key(torch._C.DispatchKey.CompositeImplicitAutograd)
    except RuntimeError:
        return False


def sdp_backends_enabled() -> tuple[bool, bool]:
    """(overrideable, math): what `torch.nn.attention.sdpa_kernel` allows now. torch.backends
    has no public reader for the OVERRIDEABLE flag."""
    return torch._C._get_overrideable_sdp_enabled(), torch._C._get_math_sdp_enabled()


def current_accelerator():
    """The accelerator torch.accelerator reports now (a torch.device), or None."""
    return torch._C._accelerator_getAccelerator()


def all_op_schemas() -> list:
    """Every operator schema the dispatcher knows (`.name` "aten::_foreach_add"...)."""
    return torch._C._jit_get_all_schemas()


def all_op_names() -> list[str]:
    """Every operator name the dispatcher knows ("_c10d_functional::all_reduce"...)."""
    return torch._C._dispatch_get_all_op_names()


def set_storage_method(name: str, fn) -> None:
    """`storage.<name>()` on untyped storages (the base class PyTorch generates PrivateUse1
    storage methods on)."""
    setattr(torch.storage._StorageBase, name, fn)


def load_functional_collectives() -> None:
    """Import torch's functional collectives: the Python-defined `_c10d_functional` ops
    (`_wrap_tensor_autograd`) exist from then on (60 ms, not paid by `import mtia_lab`)."""
    import torch.distributed._functional_collectives  # noqa: F401


def gloo_process_group() -> type:
    """The C++ Gloo process group, which the simulated ranks move host bytes with."""
    from torch._C._distributed_c10d import ProcessGroupGloo

    return ProcessGroupGloo


# The module whose import means Dynamo is loaded (`import mtia_lab` must not load it).
DYNAMO_MODULE = "torch._dynamo"


def dynamo_loaded() -> bool:
    """Has anyone imported Dynamo yet? (Nothing is imported to find out.)"""
    return DYNAMO_MODULE in sys.modules


def dynamo_backend(name: str):
    """The compiler function Dynamo registered under `name` ("inductor", "mtia_lab")."""
    from torch._dynamo import lookup_backend

    return lookup_backend(name)


@contextlib.contextmanager
def plain_graph_modules():
    """`torch.fx.GraphModule(...)` made inside is a plain one, not a lazily recompiled one
    (Dynamo traces a plain GraphModule's forward)."""
    from torch.fx._lazy_graph_module import _force_skip_lazy_graph_module

    with _force_skip_lazy_graph_module():
        yield


# --- torch.testing's OpInfo database (used by mtia_lab/testing) ---


def opinfo_db() -> list:
    """PyTorch's OpInfo database (`op_db`): every op with sample inputs and its own tolerances."""
    from torch.testing._internal.common_methods_invocations import op_db

    return op_db


def tolerance_override_type() -> type:
    """The decorator type an OpInfo uses to set its own comparison tolerances."""
    from torch.testing._internal.common_device_type import toleranceOverride

    return toleranceOverride


def noncontiguous_like(t: torch.Tensor) -> torch.Tensor:
    """PyTorch's non-contiguous copy of `t` (same values, strided memory), as its tests use."""
    from torch.testing._internal.common_utils import noncontiguous_like as make

    return make(t)


def map_functorch_wrapped(value: torch.Tensor, convert) -> torch.Tensor:
    """`convert(plain)` for the plain tensor inside functorch's wrappers (a TensorWrapper of
    grad/vjp/jvp, a BatchedTensor of vmap, nested), wrapped again at the same levels and
    batch dims; `convert(value)` for a tensor no transform wrapped."""
    functorch = torch._C._functorch
    if not functorch.is_functorch_wrapped_tensor(value):
        return convert(value)
    level = functorch.maybe_get_level(value)
    inner = map_functorch_wrapped(functorch.get_unwrapped(value), convert)
    if functorch.is_batchedtensor(value):
        return functorch._add_batch_dim(inner, functorch.maybe_get_bdim(value), level)
    return functorch._wrap_for_grad(inner, level)


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
    """Does `op` have a kernel registered at `dispatch_key` ("PrivateUse1", "CPU")?"""
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


# --- torch.compile (used by mtia_lab/compiler and mtia_lab/compare; Inductor's own scheduler
# is reached only through mtia_lab/inductor/_compat.py) ---


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


def aot_autograd_backend(fw_compiler, bw_compiler, inference_compiler, decompositions):
    """A Dynamo backend that lowers to aten with AOTAutograd (forward and backward graphs, or
    one inference graph when no gradient is needed)."""
    from torch._dynamo.backends.common import aot_autograd

    return aot_autograd(
        fw_compiler=fw_compiler, bw_compiler=bw_compiler,
        inference_compiler=inference_compiler, decompositions=decompositions
    )


def dynamo_input_sources(gm: torch.fx.GraphModule) -> list[str]:
    """Where each input of a Dynamo graph came from, in the order AOTAutograd numbers them
    (`primals_1`, `arg0_1`, ...): the graph module's own parameters and buffers, then its
    placeholders. A placeholder's source is Dynamo's `meta["grapharg"].source.name`, e.g.
    "L['self']._modules['fc1']._parameters['weight']"; "" when Dynamo did not record one."""
    names = [name for name, _ in gm.named_parameters()]
    names += [name for name, _ in gm.named_buffers()]
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        grapharg = node.meta.get("grapharg")
        source = getattr(grapharg, "source", None)
        name = getattr(source, "name", "") if source is not None else ""
        names.append((name() if callable(name) else name) or "")
    return names


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


# --- exceptions in backward (mtia_lab/backend/aten/backward_errors.py) ---
# The Python device guard of torch 2.13 (torch/csrc/acc/Module.cpp) calls into Python from
# noexcept methods: a Python exception unwinding through the engine's stream guard aborts.


def autograd_engine_class() -> type:
    """The C++ autograd engine's Python type (subclassable)."""
    return torch._C._ImperativeEngine


def set_autograd_engine(engine_class: type) -> None:
    """Make `torch.autograd` run backward through an instance of `engine_class` (a subclass
    of the engine's type); `Variable._execution_engine` is read at each backward call."""
    from torch.autograd.variable import Variable

    if type(Variable._execution_engine) is not engine_class:
        Variable._execution_engine = engine_class()


def wrap_node_hook_registration(wrap) -> None:
    """Hooks registered on an autograd Node (`grad_fn.register_hook` / `register_prehook`, and
    nn.Module full backward hooks, which torch.utils.hooks.BackwardHook registers that way) are
    stored by C++ `callRegisterFn` (python_cpp_function.cpp) calling
    `torch.autograd.Function._register_hook(hooks_dict, hook)`: store `wrap(hook)`, once."""
    from torch.autograd import Function

    original = Function._register_hook
    if getattr(original, "__wrapped__", None) is not None:
        return

    def _register_hook(backward_hooks, hook):
        return original(backward_hooks, wrap(hook))

    _register_hook.__wrapped__ = original
    Function._register_hook = staticmethod(_register_hook)


def autograd_node_devices(node) -> list[torch.device]:
    """The devices of an autograd Node's inputs (the gradients it receives): the engine runs
    the node under a stream guard of the first non-CPU one."""
    return [meta.device for meta in node._input_metadata]


def wrap_storage_new(wrap) -> None:
    """`torch.UntypedStorage.__new__` (C++ `THPStorage_pynew`, inherited from StorageBase)
    becomes `wrap(original)` once: it segfaults for a device without a C++ allocator."""
    current = torch.UntypedStorage.__new__
    if getattr(current, "__wrapped__", None) is None:
        torch.UntypedStorage.__new__ = staticmethod(wrap(current))


def make_fx_watching() -> bool:
    """Is make_fx's proxy mode (`ProxyTorchDispatchMode`) on this thread's dispatch-mode stack?
    It is there, while a device op runs, only when make_fx declined the op (an argument it does
    not track); the dispatch-mode stack length is a C call, so the usual answer costs ~nothing."""
    if not torch._C._len_torch_dispatch_stack():
        return False
    from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return any(isinstance(m, ProxyTorchDispatchMode) for m in _get_current_dispatch_mode_stack())


def torch_function_mode_on_top(mode) -> bool:
    """Is `mode` the innermost TorchFunctionMode of this thread (so exiting it is right)?"""
    from torch.overrides import _get_current_function_mode

    return _get_current_function_mode() is mode


def remove_global_module_hooks_of(owner) -> None:
    """Remove every global nn.Module forward (pre-)hook that is a method of `owner`: what
    `register_module_forward_(pre_)hook` installed even if its handle was lost (an interrupt)."""
    from torch.nn.modules import module

    for hooks in (module._global_forward_pre_hooks, module._global_forward_hooks):
        for key, hook in list(hooks.items()):
            if getattr(hook, "__self__", None) is owner:
                del hooks[key]
                module._global_forward_hooks_always_called.pop(key, None)


def wrap_saved_tensor_unpack_hooks(wrap) -> None:
    """`torch.autograd.graph.saved_tensors_hooks` (and its subclasses: checkpointing,
    save_on_cpu) push `wrap(unpack_hook)` instead of the unpack hook, once."""
    from torch.autograd.graph import saved_tensors_hooks

    enter = saved_tensors_hooks.__enter__
    if getattr(enter, "__wrapped__", None) is not None:
        return

    def __enter__(self) -> None:
        torch._C._autograd._push_saved_tensors_default_hooks(
            self.pack_hook, wrap(self.unpack_hook)
        )

    __enter__.__wrapped__ = enter
    saved_tensors_hooks.__enter__ = __enter__

def enable_foreach_for(tensor_type: type) -> None:
    """Let torch.optim (its foreach and fused defaults) and torch.nn.utils (clip_grad_norm_)
    take their multi-tensor paths on tensors of `tensor_type`: they check `type(p)` against
    these lists besides the device type. PyTorch adds DTensor the same way
    (torch/distributed/tensor/__init__.py). Idempotent."""
    from torch.optim import optimizer
    from torch.utils import _foreach_utils

    for supported in (optimizer._foreach_supported_types, _foreach_utils._foreach_supported_types):
        if tensor_type not in supported:
            supported.append(tensor_type)


def keep_device_tensors_out_of_fake_constants() -> None:
    """While torch.compile traces, FakeTensorMode computes ops whose inputs are all small
    constants for real ("constant propagation", FakeTensorMode._dispatch_impl) and makes their
    results constant fakes. `torch.tensor(c).to(x.device)` so runs the host->device copy for
    real and gets a device tensor back: a wrapper subclass, which cannot be a fake's constant
    (AssertionError "fake_tensor must be a FakeTensor with a constant", every backend).
    A result on the simulated device is therefore never made a constant: tracing goes on with an
    ordinary fake, as it does for CUDA tensors when CUDA is not initialised. Idempotent."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    original = FakeTensorMode.may_turn_const
    if getattr(original, "_mtia_lab", False):
        return

    def may_turn_const(self, t: torch.Tensor) -> bool:
        return t.device.type != DEVICE_NAME and original(self, t)

    may_turn_const._mtia_lab = True
    FakeTensorMode.may_turn_const = may_turn_const


def non_overlapping_and_dense(t: torch.Tensor) -> bool:
    """Do the tensor's strides cover its storage once, without holes (any order of dims)?
    False where symbolic sizes leave it undecided."""
    return torch._prims_common.is_non_overlapping_and_dense_or_false(t)


def reorder_for_locality(graph: torch.fx.Graph) -> None:
    """Inductor's post-grad pass that moves each op to just before its first user
    (`torch._inductor.fx_passes.post_grad.reorder_for_locality`), run on `graph` in place."""
    from torch._inductor.fx_passes.post_grad import reorder_for_locality as reorder

    reorder(graph)


def run_fake_fallbacks_on_host() -> None:
    """An op with no meta kernel (geqrf, histogram, histogramdd) is traced by running it for
    real on zeros of its inputs' device (fake_tensor.run_fallback_kernel) under `no_dispatch()`,
    which turns the Python key off: a Python device has no kernel left there (INTERNAL ASSERT
    "func != nullptr" under Inductor, whose graphs carry plain fake device tensors; the
    device's own subclass fakes of the other backends dispatch in Python). The device's plain
    fakes run it on the host instead -- the
    device computes with the host's kernels, so sizes, strides and dtypes are the same -- and
    the results are reported on the device. Idempotent."""
    from torch._subclasses import fake_tensor

    original = fake_tensor.run_fallback_kernel
    if getattr(original, "_mtia_lab", False):
        return

    def run_fallback_kernel(fake_mode, func, flat_args, args_spec, orig_not_implemented):
        ours = [a for a in flat_args if isinstance(a, fake_tensor.FakeTensor)
                and a.fake_device.type == DEVICE_NAME]
        if not ours:
            return original(fake_mode, func, flat_args, args_spec, orig_not_implemented)
        device, host = ours[0].fake_device, torch.device("cpu")
        for a in ours:
            a.fake_device = host
        try:
            out = original(fake_mode, func, flat_args, args_spec, orig_not_implemented)
        finally:
            for a in ours:
                a.fake_device = device
        for o in pytree.tree_leaves(out):
            if isinstance(o, fake_tensor.FakeTensor) and o.fake_device == host:
                o.fake_device = device
        return out

    run_fallback_kernel._mtia_lab = True
    fake_tensor.run_fallback_kernel = run_fallback_kernel


def generate_storage_methods(name: str) -> None:
    """`storage.is_<name>` and `storage.<name>()` (PyTorch's generated PrivateUse1 methods; the
    Python-backend setup generates those of tensors and modules only). Idempotent."""
    if not hasattr(torch.storage._StorageBase, f"is_{name}"):
        _backend_registration._generate_storage_methods_for_privateuse1_backend(name)

# --- torch.distributed (used by mtia_lab/distributed) ---


class _MeshDeviceName(str):
    """A device type name that passes init_device_mesh's letters-only check (see below)."""

    __slots__ = ()

    def isalpha(self) -> bool:
        return True


def allow_device_mesh_for(device_type: str) -> None:
    """Let `init_device_mesh(device_type, ...)` accept `device_type` (idempotent).

    torch 2.13's init_device_mesh rejects a device type that is not all letters, to catch
    "cuda:0"; "mtia_sim" has an underscore (PrivateUse1 names may) and is refused with a
    message about device indices. The wrapper hands torch's own function the same name as a
    str subclass whose isalpha() is True, so everything else is PyTorch's code. It replaces
    `torch.distributed.device_mesh.init_device_mesh` and `torch.distributed.init_device_mesh`;
    a name imported from there before `import mtia_lab` keeps the original."""
    import torch.distributed as dist
    import torch.distributed.device_mesh as device_mesh

    original = device_mesh.init_device_mesh
    if getattr(original, "_allows", None) is not None:
        original._allows.add(device_type)
        return
    allows = {device_type}

    @functools.wraps(original)
    def init_device_mesh(device_type, mesh_shape, *args, **kwargs):
        if isinstance(device_type, str) and device_type in allows:
            device_type = _MeshDeviceName(device_type)
        return original(device_type, mesh_shape, *args, **kwargs)

    init_device_mesh._allows = allows
    device_mesh.init_device_mesh = init_device_mesh
    if getattr(dist, "init_device_mesh", None) is original:
        dist.init_device_mesh = init_device_mesh


def fake_tensor_mode():
    """A fresh FakeTensorMode: ops on its tensors run their fake (meta) kernels only, giving the
    sizes and strides TorchInductor plans with (mtia_lab/testing/meta_strides.py)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode()


def no_fake_mode():
    """A context without the active FakeTensorMode (torch.compile's, while it traces): a fresh
    fake mode can run inside it (mtia_lab/backend/aten/layouts.py)."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    return unset_fake_temporarily()


def storage_identity(tensor: torch.Tensor) -> int:
    """Which storage a tensor uses, for real and fake tensors alike (no data pointer asked)."""
    return tensor.untyped_storage()._cdata


class _NativeInstanceCheck(type):
    """isinstance / issubclass against the class a replacement stands for (torch._C.Stream):
    CUDA's streams and events stay `torch.Stream` / `torch.Event` instances."""

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, cls._native)

    def __subclasscheck__(cls, sub) -> bool:
        return issubclass(sub, cls._native)


def route_device_generic_class(name: str, route) -> None:
    """Replace `torch.<name>` (torch.Stream, torch.Event) by a class whose constructor asks
    `route(*args, **kwargs)` first: PyTorch 2.13 builds these through the C++ device guard,
    which a Python backend cannot fill (pytorch issue 195458), so a Python device answers them
    itself. `route` returns None for devices it does not serve: PyTorch's constructor runs."""
    native = getattr(torch, name)
    native = getattr(native, "_native", native)

    def __new__(cls, *args, **kwargs):
        made = route(*args, **kwargs)
        return made if made is not None else native(*args, **kwargs)

    replacement = _NativeInstanceCheck(name, (native,), {
        "__new__": __new__, "_native": native, "__module__": "torch",
        "__doc__": native.__doc__,
    })
    setattr(torch, name, replacement)
