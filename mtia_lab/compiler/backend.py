"""`torch.compile(model, backend="mtia_lab")`: Dynamo -> AOTAutograd -> our scheduler.

Dynamo captures the Python; AOTAutograd traces it to aten (forward and backward graphs),
applying PyTorch's core-aten decompositions except the KEEP list; MTIATensor's
`__tensor_flatten__` lets it see the inner CPU tensors. Each graph then goes through
build_ir -> schedule -> generate, and the Runner executes it. Outputs come back as device
tensors through `__tensor_unflatten__`. Tensors the function itself makes on the device
(`torch.ones(n, device=x.device)`) are host buffers in the graphs, like every intermediate
(factories.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import _compat
from .._after_import import call_after_import
from .codegen import Program, generate
from .decisions import FusionPlan
from .factories import host_devices, host_factories
from .ir import build_ir
from .plan_detail import INPUT_NAMES, input_names
from .runner import Runner
from .scheduler import schedule

aten = torch.ops.aten

# Ops left undecomposed on purpose, and why: the scheduler sees them as one node.
KEEP = {
    aten.native_layer_norm: "runs as its ATen kernel (extern): one fused pass on real backends",
    aten.native_layer_norm_backward: "runs as its ATen kernel (extern), like its forward",
    aten.mm: "matmul template (GEMM engine)",
    aten.addmm: "matmul template with its bias",
    aten.bmm: "batched matmul template",
    aten.baddbmm: "batched matmul template with its bias",
    aten.convolution: "runs as its ATen kernel (extern), as in Inductor",
    aten.convolution_backward: "runs as its ATen kernel (extern), as in Inductor",
}
# Not decomposed by the core-aten table, but worth exposing to the scheduler (as Inductor does).
EXTRA = [
    aten._softmax, aten._log_softmax, aten._softmax_backward_data,
    aten._log_softmax_backward_data, aten._native_batch_norm_legit_functional,
    aten._native_batch_norm_legit_no_training, aten.native_batch_norm_backward,
    # BatchNorm in eval: _no_training decomposes to the mutating `_native_batch_norm_legit`
    # (training=False: it writes nothing), which must decompose too or the graph is not functional
    aten._native_batch_norm_legit,
]


def decompositions() -> dict:
    table = _compat.core_aten_decompositions(EXTRA)
    keep = {op for packet in KEEP for op in (getattr(packet, o) for o in packet.overloads())}
    return {op: fn for op, fn in table.items() if op not in keep}


@dataclass
class CompiledGraph:
    """One graph the backend compiled: the aten graph, its plan and its program."""

    name: str
    gm: torch.fx.GraphModule
    plan: FusionPlan
    program: Program


COMPILED: list[CompiledGraph] = []  # every graph compiled in this process, newest last
_counter = [0]


def compile_graph(gm: torch.fx.GraphModule, example_inputs, phase: str = "forward",
                  sources: list[str] | None = None):
    """fw/bw compiler for AOTAutograd: schedule the graph, generate its code, run it.
    `sources`: where Dynamo's inputs came from, to name the graph's inputs as the user does."""
    if sources is not None:
        gm.meta[INPUT_NAMES] = input_names(gm, sources)
    _counter[0] += 1
    name = f"{phase}_{_counter[0]}"
    host_devices(gm)  # the graph runs on host tensors: so do the buffers it creates
    ir = build_ir(gm)
    plan = schedule(ir, name)
    program = generate(plan, ir)
    COMPILED.append(CompiledGraph(name, gm, plan, program))
    return Runner(program, gm)


def _compilers(sources: list[str]):
    """AOTAutograd's forward and backward compilers for one Dynamo graph: both know where its
    inputs came from (the backward is compiled later, at the first `.backward()`)."""

    def forward(gm, example_inputs):
        return compile_graph(gm, example_inputs, "forward", sources)

    def backward(gm, example_inputs):
        return compile_graph(gm, example_inputs, "backward", sources)

    return forward, backward


_DECOMPOSITIONS: dict | None = None


def mtia_lab_backend(gm, example_inputs, options: dict | None = None):
    """The Dynamo backend registered as "mtia_lab". `options={"engine": "inductor"}` hands the
    graph to real TorchInductor for the device instead (mtia_lab/inductor)."""
    global _DECOMPOSITIONS
    engine = (options or {}).get("engine", "mtia_lab")
    if engine == "inductor":
        from ..inductor import compile_graph as inductor_compile

        return inductor_compile(gm, example_inputs, options)
    if engine != "mtia_lab" or set(options or {}) - {"engine"}:
        raise ValueError(f"backend='mtia_lab' takes options={{'engine': 'mtia_lab' | "
                         f"'inductor', ...}} (Inductor config only with 'inductor'), "
                         f"got {options!r}")
    if _DECOMPOSITIONS is None:
        _DECOMPOSITIONS = decompositions()
    sources = _compat.dynamo_input_sources(gm)
    host_factories(gm)  # `torch.ones(n, device=x.device)`: a host buffer, wrapped (factories.py)
    backend = _compat.aot_autograd_backend(*_compilers(sources), _DECOMPOSITIONS)
    return backend(gm, example_inputs)


def register(only_if_dynamo_loaded: bool = False) -> None:
    """Register the backend with Dynamo now. Not needed after `pip install`: the package's
    `torch_dynamo_backends` entry point (pyproject.toml) lets Dynamo load `mtia_lab_backend`
    the first time `backend="mtia_lab"` is asked for. `only_if_dynamo_loaded`: do nothing
    unless torch._dynamo is imported already (what `import mtia_lab` does: no import cost),
    but still have Dynamo skip the device internals as soon as it is imported, whatever the
    backend (`skip_device_internals`)."""
    if only_if_dynamo_loaded and not _compat.dynamo_loaded():
        call_after_import(_compat.DYNAMO_MODULE, skip_device_internals)
        return
    skip_device_internals()
    _compat.register_dynamo_backend("mtia_lab", mtia_lab_backend)


def skip_device_internals() -> None:
    """Tell Dynamo not to trace mtia_lab.backend. A graph break (`loss.backward()`, a global
    store) runs its code eagerly with Dynamo still watching every new Python frame: the device's
    own kernels, called back from C++, would be traced too, and `MTIATensor.__new__` sets
    Python attributes on a tensor Dynamo cannot model. They are the device, not the model."""
    _compat.dynamo_skip_package("mtia_lab.backend")
