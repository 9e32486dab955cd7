"""The teaching scheduler behind Dynamo: Dynamo -> AOTAutograd -> our scheduler.

`torch.compile(model, backend="mtia_lab")` comes here through the engine switch
(mtia_lab/compare/engine.py), for the default engine. Dynamo captures the Python; AOTAutograd
traces it to aten (forward and backward graphs), applying PyTorch's core-aten decompositions
except MTIA's keep-list (records/keep.py); MTIATensor's
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
from ..records.input_names import INPUT_NAMES, input_names
from ..records.keep import keep_ops
from ..records.plan import FusionPlan
from .codegen import Program, generate
from .factories import host_devices, host_factories
from .ir import TRAINING, build_ir
from .runner import Runner
from .scheduler import schedule

aten = torch.ops.aten

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
    """PyTorch's core-aten decompositions and EXTRA, except the keep-list's ops."""
    table = _compat.core_aten_decompositions(EXTRA)
    keep = keep_ops()
    return {op: fn for op, fn in table.items() if op not in keep}


@dataclass
class CompiledGraph:
    """One graph the backend compiled: the aten graph, its plan and its program."""

    name: str
    gm: torch.fx.GraphModule
    plan: FusionPlan
    program: Program
    runner: Runner  # what the compiled function calls (Runner.running swaps its program)


COMPILED: list[CompiledGraph] = []  # every graph compiled in this process, newest last
_counter = [0]


def compile_graph(gm: torch.fx.GraphModule, example_inputs, phase: str = "forward",
                  sources: list[str] | None = None, training: bool = False):
    """fw/bw compiler for AOTAutograd: schedule the graph, generate its code, run it.
    `sources`: where Dynamo's inputs came from, to name the graph's inputs as the user does.
    `training`: a forward or backward graph of a training compile (gm.meta[TRAINING]), which
    Inductor compiles with is_inference=False (no post-grad reorder_for_locality)."""
    if training:
        gm.meta[TRAINING] = True
    if sources is not None:
        gm.meta[INPUT_NAMES] = input_names(gm, sources)
    _counter[0] += 1
    name = f"{phase}_{_counter[0]}"
    host_devices(gm)  # the graph runs on host tensors: so do the buffers it creates
    ir = build_ir(gm)
    plan = schedule(ir, name)
    program = generate(plan, plan.ir)  # with the layout copies it planned (layout.py)
    runner = Runner(program, gm)
    COMPILED.append(CompiledGraph(name, gm, plan, program, runner))
    return runner


def _compilers(sources: list[str]):
    """AOTAutograd's forward, backward and inference compilers for one Dynamo graph: all know
    where its inputs came from (the backward is compiled later, at the first `.backward()`)."""

    def forward(gm, example_inputs):
        return compile_graph(gm, example_inputs, "forward", sources, training=True)

    def backward(gm, example_inputs):
        return compile_graph(gm, example_inputs, "backward", sources, training=True)

    def inference(gm, example_inputs):  # no gradient needed: Inductor's inference_compiler
        return compile_graph(gm, example_inputs, "forward", sources)

    return forward, backward, inference


_DECOMPOSITIONS: dict | None = None


def mtia_lab_backend(gm, example_inputs, options: dict | None = None):
    """The teaching scheduler as a Dynamo backend: what `backend="mtia_lab"` runs for its
    default engine. The "mtia_lab" name Dynamo knows is the engine switch
    (mtia_lab.compare.mtia_lab_backend), which also hands graphs to real Inductor."""
    global _DECOMPOSITIONS
    if options and options != {"engine": "mtia_lab"}:
        raise ValueError(f"the teaching scheduler's backend takes no options, got {options!r}; "
                         "for options={'engine': 'inductor', ...} use backend='mtia_lab' (or "
                         "mtia_lab.compare.mtia_lab_backend), the engine switch")
    if _DECOMPOSITIONS is None:
        _DECOMPOSITIONS = decompositions()
    sources = _compat.dynamo_input_sources(gm)
    host_factories(gm)  # `torch.ones(n, device=x.device)`: a host buffer, wrapped (factories.py)
    backend = _compat.aot_autograd_backend(*_compilers(sources), _DECOMPOSITIONS)
    return backend(gm, example_inputs)
