"""Every private TorchInductor / Triton API the Inductor room touches, in one place.

Every function and constant here was checked on torch 2.13.0 with triton 3.9.0
(`SUPPORTED_TRITON`). When either moves, this is the file to read again: tests/test_compat.py
pins each name here against the private API it wraps (and fails naming both), and
tests/test_inductor_*.py say whether the hooks still behave. A module of its own (beside
mtia_lab/_compat.py, PyTorch core) because only the Inductor engine and the comparison above it
read Inductor's internals, and Triton must not be imported before the engine sets its
interpreter switch (`interpreter_env`): nothing here imports Triton or Inductor at module level.
Each hook is installed once, by `install_hooks()`, the first time a graph with `mtia_sim` tensors
reaches Inductor, and every patch leaves Inductor's own behaviour unchanged for other devices.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os

import torch

SUPPORTED_TRITON = "3.9.0"
DEVICE = "mtia_sim"


# --- Triton ------------------------------------------------------------------------------------
def triton_interpreter():
    """Triton's interpreter module (`triton.runtime.interpreter`), which the whole-grid launcher
    (mtia_lab/inductor/whole_grid/) and libdevice.py build on: TensorHandle, InterpreterBuilder,
    interpreter_semantic, ReduceOps, ScanOps and its private helpers (`_patch_lang`,
    `_get_np_dtype`, `_implicit_cvt`...): tests/test_compat.py checks every `tri.<name>` read."""
    from triton.runtime import interpreter

    return interpreter


def triton_type_name(annotation) -> str:
    """The type name Triton's jit gives a kernel parameter's annotation ("constexpr", "i32")."""
    from triton.runtime.jit import _normalize_ty

    return _normalize_ty(annotation)


def triton_arg_type(value) -> str:
    """The type Triton's launcher names an argument by (`*fp32` for a float32 tensor)."""
    from triton.runtime.jit import mangle_type

    return mangle_type(value)


def triton_version() -> str | None:
    """The installed Triton's version, or None when it is not installed (without importing it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("triton")
    except PackageNotFoundError:
        return None


def cpu_only_build() -> bool:
    """A torch built without CUDA or ROCm: no Triton kernel can run here except interpreted."""
    return torch.version.cuda is None and torch.version.hip is None


def interpreter_env() -> None:
    """Triton's interpreter runs each kernel with NumPy on host memory. Triton reads the switch
    from the environment as each `@triton.jit` function is made (knobs are live) and Inductor
    reads it too, so the process environment is the one place to set it -- before Inductor's
    own jit helpers (runtime/triton_helpers.py) are made, hence at `import mtia_lab` on a
    CPU-only torch (an environment variable: nothing is imported). The FP-fusion knob is set
    to Triton's default explicitly, which keeps Triton 3.9 from warning about it on first use."""
    os.environ["TRITON_INTERPRET"] = "1"
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")


def triton_made_before_switch() -> bool:
    """Was Triton imported before the interpreter switch was on? Its own library functions
    (`tl.sum`'s combine function...) are then compiled-mode jit functions, which interpreted
    kernels cannot call (`interpret_triton_library` rebuilds them)."""
    import sys

    standard = sys.modules.get("triton.language.standard")
    if standard is None:
        return False
    from triton.runtime.interpreter import InterpretedFunction

    return not isinstance(standard.sum, InterpretedFunction)


def interpret_triton_library() -> int:
    """Triton imported before the switch (`import triton` or `torch._inductor` first): rebuild
    what it made in compiled mode, so that the process is as if the switch had come first.

    Triton reads the switch at run time everywhere but in `@triton.jit` itself, which made a
    compiled-mode `JITFunction` (not an `InterpretedFunction`) of each library function then:
    `triton.language.standard` (`sum`, `max`, their combine functions...) and
    `triton.language.random`. Those modules hold nothing else that depends on the switch, so
    each is re-executed (`importlib.reload`: its jit functions are remade interpreted, and
    `tl.tensor`'s member functions re-attached), then every module-level name elsewhere that
    still points to an old function (`triton.language.sum`...) is rebound to the new one.
    Inductor's own helpers are reloaded by `interpreted_helpers`. Returns the number of
    functions rebuilt."""
    import importlib
    import sys

    from triton.runtime.jit import JITFunction

    renewed: dict[int, tuple[object, object]] = {}  # id(old) -> (old, new)
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith("triton."):
            continue
        own = {key: value for key, value in vars(module).items()
               if isinstance(value, JITFunction) and value.fn.__module__ == name}
        if own:
            importlib.reload(module)
            renewed.update({id(old): (old, getattr(module, key)) for key, old in own.items()})
    for module in list(sys.modules.values()):
        names = getattr(module, "__dict__", None)
        if not isinstance(names, dict):
            continue
        for key, value in list(names.items()):
            pair = renewed.get(id(value))  # by id first: touching some objects warns
            if pair is not None and pair[0] is value:
                names[key] = pair[1]
    return len(renewed)


def interpreted_helpers():
    """Inductor's Triton helpers module (`triton_helpers.maximum`...), whose jit functions the
    interpreter can call: they are made when the module is imported, and made before the
    switch the interpreter cannot call them, so the module is re-imported then (the generated
    kernels import it afresh). Call it before patching the module (`trust_triton_for`)."""
    import importlib

    import torch._inductor.runtime.triton_helpers as module
    from triton.runtime.interpreter import InterpretedFunction

    if not isinstance(module.maximum, InterpretedFunction):
        importlib.reload(module)
    return module


class _HostDriver:
    """The active-driver stand-in Inductor asks questions of (target, device, stream). The
    interpreter never launches on a GPU: the target only selects Inductor's GPU code path
    (CUDA-shaped: warps of 32), as the real MTIA's Triton backend does with its own target."""

    def __init__(self) -> None:
        from triton.backends.compiler import GPUTarget

        self.target = GPUTarget("cuda", 80, 32)

    def get_current_target(self):
        return self.target

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device=None) -> int:
        return 0

    def get_active_torch_device(self) -> torch.device:
        return torch.device(DEVICE, 0)

    def is_active(self) -> bool:
        return True

    def get_device_interface(self):
        return getattr(torch, DEVICE)


_DRIVER: list = []


def activate_host_driver() -> None:
    """Make the host stand-in Triton's active driver (Inductor asks it for target and device)."""
    import triton

    if not _DRIVER:
        _DRIVER.append(_HostDriver())
    triton.runtime.driver.set_active(_DRIVER[0])


def host_driver_active() -> bool:
    """Is the host stand-in Triton's active driver?"""
    import triton

    return bool(_DRIVER) and triton.runtime.driver.active is _DRIVER[0]


# --- Inductor: the device -------------------------------------------------------------------------
def add_gpu_type(device: str) -> None:
    """Inductor takes its GPU decisions (Triton kernels, GPU fusion and tiling heuristics,
    device normalisation) for the device types in `utils.GPU_TYPES`; "mtia" is one of them."""
    from torch._inductor import utils

    if device not in utils.GPU_TYPES:
        utils.GPU_TYPES.append(device)


def register_device_interface(device: str, interface: type) -> None:
    """Tell Dynamo and Inductor how to ask `device` about streams, devices and events."""
    from torch._dynamo.device_interface import register_interface_for_device

    register_interface_for_device(device, interface)


def device_interface_base() -> type:
    """Dynamo's DeviceInterface: the base class of a device's interface."""
    from torch._dynamo.device_interface import DeviceInterface

    return DeviceInterface


def device_op_overrides_base() -> type:
    """Inductor's DeviceOpOverrides: the base class of a device's wrapper-code snippets."""
    from torch._inductor.codegen.common import DeviceOpOverrides

    return DeviceOpOverrides


def register_device_codegen(device: str, op_overrides, wrapper_codegen: type) -> None:
    """Triton scheduling (Inductor's GPU backend) and a Python wrapper for `device`."""
    from torch._inductor.codegen.common import (
        register_backend_for_device,
        register_device_op_overrides,
    )
    from torch._inductor.codegen.triton import TritonScheduling

    register_device_op_overrides(device, op_overrides)
    register_backend_for_device(device, TritonScheduling, wrapper_codegen)


def python_wrapper_codegen() -> type:
    """Inductor's Python wrapper code generator (the host code around the kernels)."""
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen

    return PythonWrapperCodegen


def mtia_config_heuristics(device: str) -> None:
    """Inductor picks template configs by device type; give `device` MTIA's."""
    from torch._inductor import choices
    from torch._inductor.template_heuristics.triton import MTIAConfigHeuristic

    original = choices.InductorChoices.get_config_heuristics
    if getattr(original, "_mtia_lab", False):
        return

    def get_config_heuristics(self, device_type="cuda"):
        if device_type == device:
            return MTIAConfigHeuristic()
        return original(self, device_type)

    get_config_heuristics._mtia_lab = True
    choices.InductorChoices.get_config_heuristics = get_config_heuristics


def trust_triton_for(device: str) -> None:
    """`has_triton()` asks CUDA/XPU/MTIA/CPU drivers whether Triton can run; on this host none
    can, but the interpreter can. Inductor's scheduler refuses GPU devices without it, and its
    generated kernel modules ask for an active GPU driver: answer both for the stand-in."""
    from torch._inductor import scheduler
    from torch._inductor.runtime import triton_helpers

    if not getattr(scheduler.has_triton, "_mtia_lab", False):
        original = scheduler.has_triton

        def has_triton() -> bool:
            return host_driver_active() or original()

        has_triton._mtia_lab = True
        scheduler.has_triton = has_triton
    if not getattr(triton_helpers.set_driver_to_gpu, "_mtia_lab", False):
        set_gpu = triton_helpers.set_driver_to_gpu

        def set_driver_to_gpu() -> None:
            if not host_driver_active():
                set_gpu()

        set_driver_to_gpu._mtia_lab = True
        triton_helpers.set_driver_to_gpu = set_driver_to_gpu


# --- Inductor: entry, decompositions, lowering --------------------------------------------------
# The module whose first import installs the device's entry (`import mtia_lab` waits for it).
COMPILE_FX_MODULE = "torch._inductor.compile_fx"
DEVICE_INTERFACE_MODULE = "torch._dynamo.device_interface"  # Dynamo's registry of devices


def inductor_triton_compat():
    """Inductor's own Triton compat module if it is imported yet (it holds a `libdevice` the
    generated kernels may read), else None; never imports it."""
    import sys

    return sys.modules.get("torch._inductor.runtime.triton_compat")


def compile_fx_module():
    """Inductor's compile_fx module (`compile_fx`, `compile_fx_inner`), imported now."""
    import torch._inductor.compile_fx as module

    return module


def flatten_graph_inputs(gm, inputs, compile_flat):
    """Dynamo's own handling of a graph whose inputs are not flat (compiled autograd's graph
    takes its tensors as one list, `inputs`, which it steals): `compile_flat(wrapper, flat)`
    compiles for the flat inputs; the function returned flattens each call's arguments the
    same way (and clears the stolen list) before calling what `compile_flat` returned."""
    from torch._dynamo.utils import flatten_graph_inputs as flatten

    return flatten(gm, inputs, compile_flat)


def detect_fake_mode(inputs):
    """The FakeTensorMode that `inputs` were traced in (None if none)."""
    from torch._guards import detect_fake_mode as detect

    return detect(inputs)


@contextlib.contextmanager
def constants_made_on_host(mode):
    """While Inductor's AOTAutograd traces a graph for mtia_sim on `mode`, make
    `torch.tensor(data, device="mtia_sim")` a plain fake tensor on the device, as FakeTensorMode
    does for a GPU it must not initialize (`avoid_device_init`): the data is lifted on the host
    and the fake moves. Left to itself, with our device available, it makes a real device
    tensor -- an MTIATensor -- whose fake is the wrapper subclass, and AOTAutograd would then
    wrap the graph's outputs as subclasses of the inner tensors of a graph that has none."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    prop = FakeTensorMode.__dict__["avoid_device_init"]
    if not getattr(prop.fget, "_mtia_lab", False):
        original = prop.fget

        def avoid_device_init(self) -> bool:
            return getattr(self, "_mtia_lab_host_constants", False) or original(self)

        avoid_device_init._mtia_lab = True
        FakeTensorMode.avoid_device_init = property(avoid_device_init)
    if mode is None:  # nothing traced on fake tensors
        yield
        return
    previous = getattr(mode, "_mtia_lab_host_constants", False)
    mode._mtia_lab_host_constants = True
    try:
        yield
    finally:
        mode._mtia_lab_host_constants = previous


def without_inner_key(keypath: tuple, inner: str) -> tuple:
    """A size binding's key path (`unbacked_bindings` of an FX node: where a data-dependent
    size such as nonzero's `u0` is read from its result) without the step into a wrapper
    subclass's inner tensor `inner`: `_inner.size(0)` -> `.size(0)`."""
    from torch.fx.experimental.symbolic_shapes import InnerTensorKey

    return tuple(k for k in keypath
                 if not (isinstance(k, InnerTensorKey) and k.inner_name == inner))


def inductor_decompositions() -> dict:
    """A copy of the decomposition table Inductor lowers with."""
    from torch._inductor.decomposition import select_decomp_table

    return dict(select_decomp_table())


@contextlib.contextmanager
def temporary_fallback(op):
    """Lower `op` as an ATen call (an extern kernel) while the block runs, when Inductor has no
    lowering of its own for it (layer norm: Inductor decomposes it). An op that has one (mm's
    `tuned_mm`) is left alone: kept out of the decomposition table, it reaches that lowering.
    On exit every structure `make_fallback` writes -- `lowerings`, `fallbacks`,
    `needs_realized_inputs`, `_maybe_layout_constraints` -- is put back exactly as it was, so
    compiles for other devices never see the fallback. Yields whether one was added."""
    from torch._inductor import lowering

    if op in lowering.lowerings:
        yield False
        return
    saved = _fallback_state(lowering, op)
    try:
        lowering.make_fallback(op, warn=False, override_decomp=True)
        yield True
    finally:
        _restore_fallback_state(lowering, saved)


_ABSENT = object()


def _fallback_state(lowering, op) -> dict:
    ops = lowering.get_overloads(op)
    return {"ops": ops,
            "lowerings": {o: lowering.lowerings.get(o, _ABSENT) for o in ops},
            "constraints": {o: lowering._maybe_layout_constraints.get(o, _ABSENT) for o in ops},
            "fallbacks": {o for o in ops if o in lowering.fallbacks},
            "realized": {o for o in ops if o in lowering.needs_realized_inputs}}


def _restore_fallback_state(lowering, saved: dict) -> None:
    for table, key in ((lowering.lowerings, "lowerings"),
                       (lowering._maybe_layout_constraints, "constraints")):
        for o, value in saved[key].items():
            if value is _ABSENT:
                table.pop(o, None)
            else:
                table[o] = value
    for members, key in ((lowering.fallbacks, "fallbacks"),
                         (lowering.needs_realized_inputs, "realized")):
        for o in saved["ops"]:
            if o not in saved[key]:
                members.discard(o)


def lowering_tables() -> dict:
    """Copies of Inductor's global lowering tables, to check that nothing changed them."""
    from torch._inductor import lowering

    return {"lowerings": dict(lowering.lowerings), "fallbacks": list(lowering.fallbacks),
            "user_lowerings": dict(lowering.user_lowerings),
            "needs_realized_inputs": list(lowering.needs_realized_inputs),
            "layout_constraints": dict(lowering._maybe_layout_constraints),
            "decompositions": dict(lowering.decompositions),
            "selected_decompositions": inductor_decompositions()}


def inductor_config():
    """Inductor's config module (`torch._inductor.config`), imported now."""
    import torch._inductor.config as config

    return config


# --- Inductor: compile modes (read by mtia_lab/inductor/modes.py) ------------------------------
def cudagraphs_requested() -> bool:
    """mode="reduce-overhead" / "max-autotune" (or the config set by hand), inside a compile."""
    return bool(inductor_config().triton.cudagraphs)


def autotuning_requested() -> bool:
    """mode="max-autotune" (or its config set by hand), inside a compile."""
    config = inductor_config()
    return bool(config.max_autotune or config.max_autotune_gemm or config.max_autotune_pointwise
                or config.coordinate_descent_tuning)


def rerecord_limit() -> int:
    """How many times Inductor re-records a graph's capture before giving up."""
    return int(inductor_config().triton.cudagraph_unexpected_rerecord_limit)


@dataclasses.dataclass(frozen=True)
class GraphCaptureFacts:
    """What Inductor decided about capturing one compiled graph in a (CUDA) graph."""

    static_inputs: frozenset[int]  # parameters and buffers: used in place by a replay
    mutated_inputs: frozenset[int]
    reasons: tuple[str, ...]  # why Inductor would not capture it, the device type aside


def graph_capture_facts(compiled) -> GraphCaptureFacts:
    """Read from Inductor's CompiledFxGraph. Inductor gives every graph whose device is not
    "cuda" the reason "multiple devices: device(type='mtia_sim', ...)"; that one is dropped
    (the device has its own graphs), every other reason is kept."""
    from torch._inductor.cudagraph_utils import format_default_skip_message
    from torch._inductor.output_code import CompiledFxGraph

    if not isinstance(compiled, CompiledFxGraph):
        return GraphCaptureFacts(frozenset(), frozenset(),
                                 (f"Inductor made a {type(compiled).__name__}",))
    static = frozenset(compiled.fx_kwargs.get("static_input_idxs") or ())
    mutated = set(compiled.mutated_input_idxs or ())
    info = compiled.cudagraph_info
    reasons = [r for r in (info.cudagraph_fail_reasons if info else []) if r]
    if mutated - static and "mutated inputs" not in reasons:
        reasons.append("mutated inputs")
    ours = {format_default_skip_message(f"multiple devices: {torch.device(DEVICE, i)!r}")
            for i in compiled.device_idxs}
    disabled = compiled.disabled_cudagraphs_reason
    if disabled and disabled not in ours:
        reasons.append(disabled)
    others = set(compiled.device_types) - {DEVICE}
    if others:
        reasons.append(f"the graph also runs on {', '.join(sorted(others))}")
    return GraphCaptureFacts(static, frozenset(mutated), tuple(dict.fromkeys(reasons)))


def static_input(x: torch.Tensor) -> torch.Tensor:
    """Inductor's graph placeholder for a copied-in input (same size and strides)."""
    from torch._inductor.compile_fx import static_input as make

    return make(x)


def copy_into_static(dst: torch.Tensor, src: torch.Tensor) -> None:
    """Inductor's copy of an input into its placeholder (expanded dimensions indexed first)."""
    from torch._inductor.compile_fx import index_expanded_dims_and_copy_
    from torch._inductor.output_code import get_expanded_dims

    index_expanded_dims_and_copy_(dst, src, get_expanded_dims(src))


def no_gemm_templates_for(device: str) -> None:
    """Inductor offers Triton matmul/convolution templates only on a "big GPU", and asks
    before checking max-autotune, warning "Not enough SMs" on every first matmul of a small
    one. On `device` templates are never offered (they are chosen by timing, which the
    simulator has no honest figure for: see modes.py): answer False, quietly."""
    from torch._inductor import utils

    original = utils.is_big_gpu
    if getattr(original, "_mtia_lab", False):
        return

    @functools.wraps(original)
    def is_big_gpu(index_or_device=0) -> bool:
        if isinstance(index_or_device, torch.device) and index_or_device.type == device:
            return False
        return original(index_or_device)

    is_big_gpu._mtia_lab = True
    utils.is_big_gpu = is_big_gpu


def size_stride_check():
    """The check Inductor's generated wrapper runs on each extern kernel's result:
    assert_size_stride(tensor, size, stride, op_name) raises AssertionError on a mismatch."""
    return torch._C._dynamo.guards.assert_size_stride


# --- Inductor: runtime (each Triton launch) -------------------------------------------------------
def caching_autotuner() -> type:
    """Inductor's CachingAutotuner: the launcher of each generated Triton kernel."""
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    return CachingAutotuner


def written_arg_names(autotuner) -> frozenset:
    """The arguments a launch writes. Inductor lists only the buffers it updates in place
    (`mutated_arg_names`: in_out_ptr0, a mutated input); the outputs it writes fresh are the
    arguments it names `out_ptr*`."""
    names = getattr(autotuner, "_mtia_lab_written", None)
    if names is None:
        names = autotuner._mtia_lab_written = frozenset(
            [*autotuner.mutated_arg_names,
             *(n for n in autotuner.fn.arg_names if n.startswith("out_ptr"))])
    return names


def whole_grid_refusal(autotuner) -> str | None:
    """Why a launch cannot run as one NumPy program for its whole grid (None: it can)."""
    from triton.runtime.interpreter import InterpretedFunction

    if not isinstance(autotuner.fn, InterpretedFunction):
        return "not an interpreted Triton function"
    return None


def interpreter_launch(autotuner, args) -> tuple[tuple, tuple[int, ...], dict]:
    """(arguments, grid, constexpr block sizes) of a launch, as Inductor's interpreted launch
    computes them (CachingAutotuner.run with TRITON_INTERPRET=1: its first config)."""
    config = autotuner.configs[0]
    # the grid depends on the scalar arguments (sizes) alone: computed once per set of them
    key = tuple(a for a in args if isinstance(a, (int, float, bool)))
    cache = autotuner.__dict__.setdefault("_mtia_lab_grids", {})
    known = cache.get(key)
    if known is None:
        trimmed, grid = autotuner._interpret_args_grid(tuple(args), config)
        known = cache[key] = (len(trimmed), tuple(int(g) for g in grid), dict(config.kwargs))
    count, grid, constexprs = known
    return tuple(args[:count]), grid, constexprs


def kernel_source(autotuner) -> str:
    """The Triton source of a launcher's kernel ("" when none can be found)."""
    fn = getattr(autotuner.fn, "fn", autotuner.fn)
    src = getattr(autotuner.fn, "src", None) or getattr(fn, "src", None)
    if src:
        return src
    import inspect

    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return ""


def reduction_hint(autotuner) -> str:
    """The reduction hint Inductor gave a kernel ("INNER", "OUTER", "OUTER_TINY", "DEFAULT"),
    from the heuristics' inductor_meta; "" for a pointwise kernel."""
    hint = autotuner.inductor_meta.get("reduction_hint")
    return getattr(hint, "name", str(hint or ""))


def kernel_name_of(autotuner) -> str:
    """The kernel's name as Inductor wrote it in the wrapper (`triton_poi_fused_add_0`)."""
    return autotuner.inductor_meta.get("kernel_name") or getattr(autotuner.fn, "__name__", "")


def add_kernel_estimates() -> None:
    """Have Inductor put its own per-kernel estimates (`kernel_num_gb`, `kernel_flop`) in the
    metadata of every Triton kernel it generates for this device (it does so for CUDA only
    when benchmarking); the launch hook prices kernels from them. Not for kernels of symbolic
    sizes: Inductor's estimates are numbers at one size."""
    from torch._inductor.codegen.triton import TritonKernel

    original = TritonKernel.inductor_meta_per_kernel
    if getattr(original, "_mtia_lab", False):
        return

    @functools.wraps(original)
    def inductor_meta_per_kernel(self):
        out = original(self)
        try:
            from torch._inductor.virtualized import V

            if V.graph.get_current_device_or_throw().type != DEVICE or _symbolic_sizes(self):
                return out  # symbolic sizes: the launch hook prices the runtime arguments
            if "kernel_num_gb" not in out:
                out["kernel_num_gb"] = self.estimate_kernel_num_bytes() / 1e9
            if "kernel_flop" not in out:
                flops = self.estimate_flops()
                if flops:
                    out["kernel_flop"] = flops
        except Exception:  # an estimate is optional: the launch hook falls back to arg bytes
            pass
        return out

    inductor_meta_per_kernel._mtia_lab = True
    TritonKernel.inductor_meta_per_kernel = inductor_meta_per_kernel


def _symbolic_sizes(kernel) -> bool:
    """Whether a Triton kernel's sizes are symbolic (dynamic shapes): its estimates, made at
    the sizes Dynamo traced, would not hold for the next call's sizes."""
    numels = getattr(kernel, "numels", {}) or {}
    return bool(getattr(kernel.args, "sizevars", None)) or any(
        getattr(n, "free_symbols", None) for n in numels.values())


# --- Inductor: the scheduler's fusion decisions (read by mtia_lab/inductor/fusion_observer.py) ---
def scheduler_module():
    """Inductor's scheduler module (the fusion decisions are its methods), imported now."""
    import torch._inductor.scheduler as module

    return module


def current_graph():
    """The GraphLowering Inductor is working on (its `V.graph`)."""
    from torch._inductor.virtualized import V

    return V.graph


def size_symbols(exprs) -> dict[str, tuple[list[str], int | None]]:
    """The size symbols in Inductor's sympy sizes `exprs`, each with where Dynamo read it (the
    names of its sources, "L['x'].size()[0]") and the value it had when traced (None for a
    data-dependent size, nonzero's `u0`), from the shape env of the graph being compiled."""
    from torch._inductor.virtualized import V

    shape_env = V.graph.sizevars.shape_env
    hints = shape_env.backed_var_to_val  # data-dependent sizes (unbacked) have none
    symbols = set().union(*(getattr(e, "free_symbols", set()) for e in exprs))
    out = {}
    for symbol in sorted(symbols, key=str):
        names = [s.name() if callable(s.name) else s.name
                 for s in shape_env.var_to_sources.get(symbol) or ()]
        hint = hints.get(symbol)
        out[str(symbol)] = (names, int(hint) if hint is not None else None)
    return out


def combo_kernel_class() -> type:
    """Inductor's ComboKernel (several kernels launched as one)."""
    from torch._inductor.codegen.triton_combo_kernel import ComboKernel

    return ComboKernel


def triton_scheduling() -> type:
    """Inductor's TritonScheduling: the GPU backend that codegens Triton kernels."""
    from torch._inductor.codegen.triton import TritonScheduling

    return TritonScheduling


def cpp_scheduling() -> type:
    """Inductor's CppScheduling: the host backend that codegens C++ kernels."""
    from torch._inductor.codegen.cpp import CppScheduling

    return CppScheduling


def run_and_get_code(fn, *args, **kwargs):
    """Run `fn` and return (its result, the source of every module Inductor wrote)."""
    from torch._inductor.utils import run_and_get_code as run

    return run(fn, *args, **kwargs)


def fresh_inductor_cache():
    """A context with an empty Inductor cache (every graph compiled afresh)."""
    from torch._inductor.utils import fresh_cache

    return fresh_cache()


# --- AOTAutograd: gradients arriving at a graph compiled for the device --------------------------
def accept_device_tangents(tensor_type: type) -> None:
    """A graph compiled for mtia_sim was traced on plain fake tensors *on the device* (entry.py),
    so AOTAutograd expects each incoming gradient to be a plain tensor; at run time it is a
    device tensor (`tensor_type`, a wrapper subclass), which it would try to flatten. For such
    a graph, pass the device tensor through unflattened, as the plain device tensor it stands
    for. Graphs that did desugar the subclass (backend="mtia_lab") are untouched."""
    from torch._functorch._aot_autograd import runtime_wrappers as rw
    from torch._functorch._aot_autograd.schemas import SubclassCreationMeta

    cls = rw.AOTDispatchAutograd
    original = cls.__dict__["process_runtime_tangent"].__func__
    if getattr(original, "_mtia_lab", False):
        return

    def process_runtime_tangent(x, meta, *args, **kwargs):
        if isinstance(x, tensor_type) and not isinstance(meta, SubclassCreationMeta):
            if meta.memory_format:
                x = rw.coerce_to_expected_memory_format(x, meta.memory_format)
            return x, [x]
        return original(x, meta, *args, **kwargs)

    process_runtime_tangent._mtia_lab = True
    cls.process_runtime_tangent = staticmethod(process_runtime_tangent)


# --- Triton's interpreter: nested device-function calls ------------------------------------
def faster_nested_calls() -> None:
    """Each call of a jit *device* function inside an interpreted kernel (a reduction's
    combine function runs once per reduction step: `tl.sum`, `tl.max`...) re-patches Triton's
    language modules for the interpreter, walking every attribute with `inspect.getmembers`:
    ~90% of a training step's host time here. Those patches are applied together and, for
    nested calls, never undone, so when the function's language modules are patched already
    (their builtin `program_id` is the interpreter's) the walk finds nothing to do: skip it.
    Results are unchanged; only the redundant walk goes."""
    import inspect

    import triton.language as tl
    from triton.runtime import interpreter

    cls = interpreter.InterpretedFunction
    original = cls.__call__
    if getattr(original, "_mtia_lab", False):
        return
    langs_of: dict[int, list] = {}

    def __call__(self, *args, **kwargs):
        langs = langs_of.get(id(self.fn))
        if langs is None:
            langs = langs_of[id(self.fn)] = [
                v for v in self.fn.__globals__.values()
                if inspect.ismodule(v) and v in (tl, tl.core)]
        if langs and not any(tl.core.is_builtin(getattr(lang, "program_id", None))
                             for lang in langs):
            fn = self.rewrite()
            try:
                return fn(*args, **kwargs)
            except Exception as e:
                raise interpreter.InterpreterError(repr(e)) from e
        return original(self, *args, **kwargs)

    __call__._mtia_lab = True
    cls.__call__ = __call__


def round_bfloat16_to_nearest_even() -> None:
    """Triton's interpreter converts float32 to bfloat16 by cutting the low 16 bits (its
    `create_fp_trunc` passes no rounding mode to `_convert_float`), and its explicit
    round-to-nearest-even adds the cut-off bit without carrying into the exponent. A GPU's
    `fptrunc` (what `x.to(tl.bfloat16)` compiles to) and PyTorch's own conversion round to
    nearest even: -8.4999 becomes -8.5, not -8.4375. Every bfloat16 value an interpreted kernel
    stores went through it, so a compiled bf16 model drifted from eager by an ulp at a time.
    Here a float downcast to bfloat16, by `fptrunc` or `fp_to_fp` with RTNE (the default), is
    PyTorch's conversion; toward zero (`fp_downcast_rounding="rtz"`) stays the interpreter's."""
    import numpy as np
    import triton.language as tl
    from triton._C.libtriton import ir
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    if getattr(builder.create_fp_trunc, "_mtia_lab", False):
        return
    trunc, fp_to_fp = builder.create_fp_trunc, builder.create_fp_to_fp

    def to_bfloat16(src):
        bits = torch.from_numpy(np.ascontiguousarray(src.data)).to(torch.bfloat16)
        return interpreter.TensorHandle(bits.view(torch.int16).numpy().view(np.uint16),
                                        tl.bfloat16)

    def floating(src) -> bool:
        return src.dtype.scalar in (tl.float32, tl.float64, tl.float16)

    def create_fp_trunc(self, src, dst_type):
        if dst_type.scalar == tl.bfloat16 and floating(src):
            return to_bfloat16(src)
        return trunc(self, src, dst_type)

    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        if dst_type.scalar == tl.bfloat16 and floating(src) and \
                rounding_mode in (None, ir.ROUNDING_MODE.RTNE):
            return to_bfloat16(src)
        return fp_to_fp(self, src, dst_type, rounding_mode)

    create_fp_trunc._mtia_lab = True
    builder.create_fp_trunc, builder.create_fp_to_fp = create_fp_trunc, create_fp_to_fp


def pinned_host_buffers() -> None:
    """Inductor's wrapper allocates the host side of a `non_blocking` device-to-host copy with
    `torch._C._dynamo.guards._empty_strided_cpu_pinned`, which asks PrivateUse1's hooks for a
    pinned-memory allocator: C++ only, so `t.to("cpu", non_blocking=True)` in a compiled
    function failed. Here the buffer is allocated plainly and pinned by `pin_memory()`, which
    the device serves (backend/aten/pinned_memory.py: a host buffer marked pinned)."""
    guards = torch._C._dynamo.guards
    if getattr(guards._empty_strided_cpu_pinned, "_mtia_lab", False):
        return

    def empty_strided_cpu_pinned(size, stride, dtype):
        return torch.empty_strided(size, stride, dtype=dtype, device="cpu").pin_memory()

    empty_strided_cpu_pinned._mtia_lab = True
    guards._empty_strided_cpu_pinned = empty_strided_cpu_pinned
