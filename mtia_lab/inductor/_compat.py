"""Every private TorchInductor / Triton API the Inductor room touches, in one place.

Checked on torch 2.13.0 with triton 3.9.0 (`SUPPORTED_TRITON`). When either moves, this is the
file to read again; tests/test_inductor_*.py say whether the hooks still behave. Each hook is
installed once, by `install_hooks()`, the first time a graph with `mtia_sim` tensors reaches
Inductor, and every patch leaves Inductor's own behaviour unchanged for other devices.
"""

from __future__ import annotations

import functools
import os

import torch

SUPPORTED_TRITON = "3.9.0"
DEVICE = "mtia_sim"


# --- Triton ------------------------------------------------------------------------------------
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
    kernels cannot call; only a fresh process can fix that."""
    import sys

    standard = sys.modules.get("triton.language.standard")
    if standard is None:
        return False
    from triton.runtime.interpreter import InterpretedFunction

    return not isinstance(standard.sum, InterpretedFunction)


def interpreted_helpers() -> None:
    """Inductor's Triton helpers (`triton_helpers.maximum`...) are jit functions made when the
    module is imported; made before the switch, the interpreter cannot call them. Re-import
    the module then (the generated kernels import it afresh)."""
    import importlib

    import torch._inductor.runtime.triton_helpers as module
    from triton.runtime.interpreter import InterpretedFunction

    if not isinstance(module.maximum, InterpretedFunction):
        importlib.reload(module)
    from .libdevice import install

    install(module)


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
    import triton

    if not _DRIVER:
        _DRIVER.append(_HostDriver())
    triton.runtime.driver.set_active(_DRIVER[0])


def host_driver_active() -> bool:
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
    from torch._dynamo.device_interface import register_interface_for_device

    register_interface_for_device(device, interface)


def device_interface_base() -> type:
    from torch._dynamo.device_interface import DeviceInterface

    return DeviceInterface


def device_op_overrides_base() -> type:
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
    interpreted_helpers()
    if not getattr(triton_helpers.set_driver_to_gpu, "_mtia_lab", False):
        set_gpu = triton_helpers.set_driver_to_gpu

        def set_driver_to_gpu() -> None:
            if not host_driver_active():
                set_gpu()

        set_driver_to_gpu._mtia_lab = True
        triton_helpers.set_driver_to_gpu = set_driver_to_gpu


# --- Inductor: entry, decompositions, lowering --------------------------------------------------
def compile_fx_module():
    import torch._inductor.compile_fx as module

    return module


def detect_fake_mode(inputs):
    from torch._guards import detect_fake_mode as detect

    return detect(inputs)


def inductor_decompositions() -> dict:
    from torch._inductor.decomposition import select_decomp_table

    return dict(select_decomp_table())


def ensure_fallback(op) -> bool:
    """Lower `op` as an ATen call (an extern kernel) instead of decomposing it; True if added."""
    from torch._inductor import lowering

    if op in lowering.lowerings and op not in lowering.decompositions:
        return False
    lowering.make_fallback(op, warn=False, override_decomp=True)
    return True


def remove_fallback(op) -> None:
    from torch._inductor import lowering

    lowering.lowerings.pop(op, None)
    lowering.fallbacks.discard(op)


def has_lowering(op) -> bool:
    from torch._inductor import lowering

    return op in lowering.lowerings


def inductor_config():
    import torch._inductor.config as config

    return config


def size_stride_check():
    """The check Inductor's generated wrapper runs on each extern kernel's result:
    assert_size_stride(tensor, size, stride, op_name) raises AssertionError on a mismatch."""
    return torch._C._dynamo.guards.assert_size_stride


# --- Inductor: runtime (each Triton launch) -------------------------------------------------------
def caching_autotuner() -> type:
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    return CachingAutotuner


def launch_grid(autotuner, args) -> tuple[int, ...]:
    """The grid the interpreter launches `args` on (Inductor's own computation)."""
    _, grid = autotuner._interpret_args_grid(tuple(args), autotuner.configs[0])
    return tuple(int(g) for g in grid)


def kernel_source(autotuner) -> str:
    fn = getattr(autotuner.fn, "fn", autotuner.fn)
    src = getattr(autotuner.fn, "src", None) or getattr(fn, "src", None)
    if src:
        return src
    import inspect

    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return ""


def kernel_name_of(autotuner) -> str:
    return autotuner.inductor_meta.get("kernel_name") or getattr(autotuner.fn, "__name__", "")


def add_kernel_estimates() -> None:
    """Have Inductor put its own per-kernel estimates (`kernel_num_gb`, `kernel_flop`) in the
    metadata of every Triton kernel it generates for this device (it does so for CUDA only
    when benchmarking); the launch hook prices kernels from them."""
    from torch._inductor.codegen.triton import TritonKernel

    original = TritonKernel.inductor_meta_per_kernel
    if getattr(original, "_mtia_lab", False):
        return

    @functools.wraps(original)
    def inductor_meta_per_kernel(self):
        out = original(self)
        try:
            from torch._inductor.virtualized import V

            if V.graph.get_current_device_or_throw().type != DEVICE:
                return out
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


# --- Inductor: the scheduler's fusion decisions (read by mtia_lab/inductor/decisions.py) ----------
def scheduler_module():
    import torch._inductor.scheduler as module

    return module


def current_graph():
    """The GraphLowering Inductor is working on (its `V.graph`)."""
    from torch._inductor.virtualized import V

    return V.graph


def combo_kernel_class() -> type:
    from torch._inductor.codegen.triton_combo_kernel import ComboKernel

    return ComboKernel


def triton_scheduling() -> type:
    from torch._inductor.codegen.triton import TritonScheduling

    return TritonScheduling


def run_and_get_code(fn, *args, **kwargs):
    from torch._inductor.utils import run_and_get_code as run

    return run(fn, *args, **kwargs)


def fresh_inductor_cache():
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
