"""Real TorchInductor and Triton on the simulated MTIA: the second compile path.

`torch.compile(model)` (Inductor, the default backend) on mtia_sim tensors compiles *for the
device*, as Inductor compiles for MTIA: Triton kernels for pointwise and reduction work, fused
by Inductor's own scheduler, matmuls and convolutions as extern ATen calls; Triton's
interpreter runs each kernel on the device's host memory. `torch.compile(model,
backend="mtia_lab", options={"engine": "inductor"})` is the same path by our backend's name.

Reading order, as a graph flows:
    entry.py      Inductor's compile_fx, wrapped: the graph keeps its device (no desugaring)
                  and MTIA's keep-list of undecomposed ops
    device.py     the device interface, op overrides, TritonScheduling + Python wrapper
    _compat.py    every private Inductor / Triton API used, the interpreter switch and the
                  driver stand-in
    fusion_observer.py  Inductor's scheduler, observed: every pair it asked about and its
                  reason
    kernels.py    the Triton kernels it defined (name, source, aten nodes)
    plan.py       those facts as the project's FusionPlan record
    triton_launch.py  each kernel launch: host memory, roofline price, stream clock,
                  listeners
    whole_grid/   how a launch runs: the whole grid as one NumPy program (builder.py,
                  reduce.py), recorded once and replayed (tape.py) as one generated
                  function of NumPy calls (codegen.py)
    trace_events.py   launches in `mtia_lab.trace()` as "compiled" events
    modes.py      mode="reduce-overhead" (device graphs) and "max-autotune" (what is skipped)
    errors.py     one clear error for what cannot compile on the device

Shares with the teaching scheduler (mtia_lab/compiler), which it never imports, only the
records of mtia_lab/records (FusionPlan, KernelGroup, FusionDecision, the KEEP list, the guardrail
registry); nothing here is loaded by `import mtia_lab`. `backend="mtia_lab"` reaches it through
the engine switch (mtia_lab/compare/engine.py).
"""

from __future__ import annotations

import functools
import os

import torch

from .._after_import import call_after_import
from ..backend.aten.tensor import MTIATensor
from ..records.guardrails import GUARDRAILS, inductor_values
from ..records.plan import FusionSplitError, explain_split
from . import _compat, device
from .entry import install_entry
from .entry import keep_list as _keep_list
from .errors import InductorDeviceError

__all__ = ["GUARDRAILS", "InductorDeviceError", "PLANS", "assert_single_kernel", "compile_graph",
           "guardrail_settings", "inductor_plan", "inductor_plans", "install_hooks", "keep_list"]

PLANS: list = []  # FusionPlan of every graph Inductor compiled for mtia_sim, newest last
_INSTALLED: list[bool] = []


def install_hooks() -> None:
    """Everything Inductor needs to compile for mtia_sim, once, the first time it is asked to.

    Refuses (InductorDeviceError) a Triton that is missing or not the pinned version, and a
    CUDA build with a GPU, whose Triton must not be switched to the interpreter."""
    if _INSTALLED:
        return
    from . import (  # Inductor and Triton load here, when a graph first compiles for mtia_sim
        device,
        errors,
        fusion_observer,
        kernels,
        libdevice,
        trace_events,
        triton_launch,
    )

    errors.check_triton()
    _compat.interpreter_env()
    if _compat.triton_made_before_switch():  # `import triton` came before `import mtia_lab`
        _compat.interpret_triton_library()
        if _compat.triton_made_before_switch():
            raise errors.triton_imported_too_early()
    _compat.activate_host_driver()
    _compat.faster_nested_calls()
    _compat.round_bfloat16_to_nearest_even()
    _compat.pinned_host_buffers()
    libdevice.install(_compat.interpreted_helpers())  # before trust_triton_for patches it
    _compat.trust_triton_for(_compat.DEVICE)
    device.register()
    _compat.accept_device_tangents(MTIATensor)
    _compat.add_kernel_estimates()
    install_entry(install_hooks)
    fusion_observer.install()
    kernels.install()
    triton_launch.install()
    trace_events.install()
    fusion_observer.LISTENERS.append(_keep_plan)
    _INSTALLED.append(True)


def _keep_plan(collector) -> None:
    from .plan import build_plan

    collector.plan = build_plan(collector)
    PLANS.append(collector.plan)


def install_entry_when_imported() -> None:
    """What `import mtia_lab` arranges: wrap Inductor's compile_fx once Inductor is imported
    (by whoever imports it), so that the default backend compiles mtia_sim graphs for the
    device. Importing mtia_lab loads neither Dynamo, Inductor nor Triton."""
    if _compat.cpu_only_build() and "TRITON_INTERPRET" not in os.environ:
        _compat.interpreter_env()
    call_after_import(_compat.COMPILE_FX_MODULE, functools.partial(install_entry, install_hooks))
    call_after_import(_compat.DEVICE_INTERFACE_MODULE, device.register_interface)


def guardrail_settings() -> dict:
    """Inductor's own values of the guardrails its scheduler reads (its config module),
    by guardrail name (the registry: mtia_lab/records/guardrails.py)."""
    return inductor_values(_compat.inductor_config())


def keep_list(enabled: bool = True):
    """`with keep_list(False):` compile without MTIA's keep-list (layer norm decomposed)."""
    return _keep_list(enabled)


def compile_graph(gm, example_inputs, options: dict | None = None):
    """`backend="mtia_lab", options={"engine": "inductor", ...}`: Inductor's compile_fx, with
    the other options as Inductor config patches ("keep_list": False drops the keep-list)."""
    install_hooks()
    options = dict(options or {})
    options.pop("engine", None)
    keep = options.pop("keep_list", True)
    with keep_list(keep):
        return _compat.compile_fx_module().compile_fx(gm, example_inputs,
                                                      config_patches=options or None)


def _on_device(args):
    return [a.to("mtia_sim") if isinstance(a, torch.Tensor) and a.device.type == "cpu" else a
            for a in args]


def inductor_plans(fn, *example_inputs, keep: bool = True, config: dict | None = None,
                   dynamic: bool | None = False, **kwargs) -> tuple[object, list]:
    """Compile `fn` afresh with Inductor for mtia_sim and run it once: (result, its plans).

    Host tensors among the inputs are moved to mtia_sim first. `config`: Inductor config values
    for this compile (`{"max_fusion_unique_io_buffers": 4}`); `keep=False`: without the
    keep-list; `dynamic`: torch.compile's (True: symbolic sizes, which the plan keeps as
    `FusionPlan.symbols`; None: only the dims given to `torch._dynamo.mark_dynamic`).
    `torch.compiler.reset()` runs first, so no cached compile hides the plan."""
    install_hooks()
    torch.compiler.reset()
    start = len(PLANS)
    args = _on_device(example_inputs)
    with _compat.inductor_config().patch(**(config or {})), keep_list(keep):
        result = torch.compile(fn, fullgraph=True, dynamic=dynamic)(*args, **kwargs)
    return result, PLANS[start:]


def inductor_plan(fn, *example_inputs, keep: bool = True, config: dict | None = None,
                  dynamic: bool | None = False, **kwargs):
    """Inductor's FusionPlan of `fn(*example_inputs)` on mtia_sim (the forward graph when `fn`
    also needs gradients). See `inductor_plans`."""
    _, plans = inductor_plans(fn, *example_inputs, keep=keep, config=config, dynamic=dynamic,
                              **kwargs)
    if not plans:
        raise InductorDeviceError("Inductor compiled no graph for mtia_sim: does fn use device "
                                  "tensors (or host tensors among example_inputs)?")
    return plans[0]


def assert_single_kernel(fn, *example_inputs, config: dict | None = None, **kwargs):
    """As mtia_lab.compiler.assert_single_kernel, with Inductor's plan; returns fn's result."""
    result, plans = inductor_plans(fn, *example_inputs, config=config, **kwargs)
    count = sum(p.kernel_count for p in plans)
    if count != 1:
        raise FusionSplitError(f"expected one kernel, Inductor made {count}:\n"
                               + explain_split(plans))
    return result
