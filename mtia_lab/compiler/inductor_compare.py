"""What would TorchInductor fuse? Its own scheduler on the same aten graph, priced by our model.

Steps, for one aten graph:
  1. decompose the ops Inductor has no lowering for (its `select_decomp_table`), except our
     KEEP list, which both schedulers treat as ATen kernels (externs): one graph for both;
  2. lower it with Inductor's GraphLowering on CPU fake tensors and build Inductor's
     `Scheduler`, which fuses in its constructor -- no kernel is generated or compiled;
  3. read each fused node's FX origins and map them back to our scheduler nodes;
  4. price both plans with OUR roofline model, so the bytes and times are comparable.

This module exists to read Inductor's internals (GraphLowering, Scheduler, lowering tables,
V handlers), which are private and move between releases: checked on torch 2.13 only.
On CPU, Inductor runs matmuls as ATen calls (extern_kernels.mm) unless max-autotune builds
C++ GEMM templates, so its matmuls take no epilogue here.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch
import torch.fx

from ..backend.runtime import RUNTIME
from . import config
from .backend import COMPILED, KEEP, CompiledGraph
from .decisions import FusionPlan
from .ir import FusedSchedulerNode, GraphIR, build_ir
from .pricing import kernel_cost
from .scheduler import schedule

_GUARDRAILS = ("max_fusion_size", "max_fusion_unique_io_buffers", "combo_kernels",
               "combo_kernel_max_num_args", "score_fusion_memory_threshold",
               "max_fusion_buffer_group_pairwise_attempts")


@dataclass
class InductorKernel:
    name: str  # Inductor's node name (op3_op4...)
    node_type: str  # SchedulerNode, FusedSchedulerNode, ExternKernelSchedulerNode...
    nodes: tuple[str, ...]  # our scheduler nodes it covers
    bytes_moved: int = 0
    duration_us: float = 0.0


@dataclass
class InductorPlan:
    kernels: list[InductorKernel]
    bytes_moved: int
    time_us: float

    @property
    def kernel_count(self) -> int:
        return len(self.kernels)

    @property
    def groups(self) -> list[tuple[str, ...]]:
        return [k.nodes for k in self.kernels]


@dataclass
class Comparison:
    """Our plan and Inductor's for one graph, priced by one cost model."""

    name: str
    ours: FusionPlan
    inductor: InductorPlan
    gm: torch.fx.GraphModule = field(repr=False)

    def table(self) -> str:
        o, i = self.ours.after, self.inductor
        rows = [("", "mtia_lab", "Inductor"),
                ("kernels", str(o.kernels), str(i.kernel_count)),
                ("bytes moved", f"{o.bytes_moved:,}", f"{i.bytes_moved:,}"),
                ("simulated us", f"{o.time_us:.2f}", f"{i.time_us:.2f}")]
        return "\n".join(f"{a:<14}{b:>14}{c:>14}" for a, b, c in rows)

    def __str__(self) -> str:
        lines = [f"{self.name}:", self.table(), "  mtia_lab groups:"]
        lines += [f"    {', '.join(g.nodes)}" for g in self.ours.groups]
        lines.append("  Inductor groups:")
        lines += [f"    {', '.join(k.nodes)}  [{k.node_type}]" for k in self.inductor.kernels]
        return "\n".join(lines)


def _keep_ops() -> set:
    return {getattr(p, o) for p in KEEP for o in p.overloads()}


def _example_args(gm: torch.fx.GraphModule) -> list:
    args = []
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            val = node.meta.get("val")
            if not isinstance(val, torch.Tensor):
                raise ValueError(f"placeholder {node.name} has no tensor meta['val']")
            args.append(torch.empty_strided(val.shape, val.stride(), dtype=val.dtype).zero_())
    return args


def common_graph(gm: torch.fx.GraphModule) -> tuple[torch.fx.GraphModule, list]:
    """Re-trace `gm` with Inductor's decompositions minus KEEP: the graph both schedule."""
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    keep = _keep_ops()
    table = {op: fn for op, fn in select_decomp_table().items() if op not in keep}
    args = _example_args(gm)

    def flat(*flat_args):  # placeholders in order, whatever pytree structure gm was traced with
        return torch.fx.Interpreter(gm).run(*flat_args, enable_io_processing=False)

    return make_fx(flat, decomposition_table=table, tracing_mode="fake")(*args), args


@contextlib.contextmanager
def _keep_as_fallbacks():
    """Lower the KEEP ops as ATen fallbacks for the duration (Inductor would decompose them)."""
    from torch._inductor import lowering

    added = []
    for op in _keep_ops():
        if op not in lowering.lowerings:
            lowering.make_fallback(op, warn=False, override_decomp=True)
            added.append(op)
    try:
        yield
    finally:
        for op in added:
            lowering.lowerings.pop(op, None)
            lowering.fallbacks.discard(op)


def inductor_groups(gm: torch.fx.GraphModule, args: list) -> list[tuple[str, str, set[str]]]:
    """Run Inductor's lowering and Scheduler; (name, node type, FX origins) per kernel."""
    import torch._inductor.config as inductor_config
    from torch._inductor import ir as inductor_ir
    from torch._inductor.debug import DebugContext
    from torch._inductor.graph import GraphLowering
    from torch._inductor.scheduler import NopKernelSchedulerNode, Scheduler
    from torch._inductor.virtualized import V
    from torch._subclasses.fake_tensor import FakeTensorMode

    fake_mode = FakeTensorMode()
    fake = [fake_mode.from_tensor(a) for a in args]
    settings = {name: getattr(config, name) for name in _GUARDRAILS}
    out = []
    with V.set_fake_mode(fake_mode), inductor_config.patch(compile_threads=1, **settings), \
            _keep_as_fallbacks():
        graph = GraphLowering(gm, example_inputs=fake)
        with V.set_graph_handler(graph):
            graph.run(*fake)
            with DebugContext(), V.set_debug_handler(DebugContext()):
                scheduler = Scheduler(graph.operations)
            for node in scheduler.nodes:
                if isinstance(node, NopKernelSchedulerNode) or isinstance(
                    getattr(node, "node", None), inductor_ir.MultiOutput
                ):
                    continue  # no launch: a tuple element or a no-op
                origins: set[str] = set()
                for sub in node.get_nodes():
                    origins |= {o.name for o in getattr(sub.node, "origins", ()) or ()}
                out.append((node.get_name(), type(node).__name__, origins))
    return out


def _assign(ir: GraphIR, groups: list[tuple[str, str, set[str]]]) -> list[list[str]]:
    """Each of our nodes goes to the most specific Inductor kernel naming it in its origins
    (the one with the fewest origins: externs also list the inputs they realized)."""
    members: list[list[str]] = [[] for _ in groups]
    for node in ir.nodes:
        hits = [(len(g[2]), i) for i, g in enumerate(groups) if node.name in g[2]]
        if hits:
            members[min(hits)[1]].append(node.name)
    return members


def compare_graph(gm: torch.fx.GraphModule, name: str = "graph") -> Comparison:
    """Both schedulers on one graph; bytes and time by our cost model."""
    common, args = common_graph(gm)
    ir = build_ir(common)
    ours = schedule(ir, name)
    groups = inductor_groups(common, args)
    kernels = []
    for (kname, ktype, _), names in zip(groups, _assign(ir, groups), strict=True):
        if not names:
            kernels.append(InductorKernel(kname, ktype, ()))
            continue
        cost = kernel_cost(FusedSchedulerNode([ir.by_name[n] for n in names]), ir)
        kernels.append(InductorKernel(kname, ktype, tuple(names),
                                      cost.bytes_read + cost.bytes_written,
                                      cost.duration_us(RUNTIME.device().profile)))
    plan = InductorPlan(kernels, sum(k.bytes_moved for k in kernels),
                        sum(k.duration_us for k in kernels))
    return Comparison(name, ours, plan, common)


def compare_compiled(compiled: CompiledGraph | None = None) -> Comparison:
    """Compare the plan of a graph the mtia_lab backend compiled (default: the newest)."""
    compiled = compiled or COMPILED[-1]
    return compare_graph(compiled.gm, compiled.name)


def compare(fn, *args) -> list[Comparison]:
    """Compile `fn(*args)` with the mtia_lab backend and compare each forward graph."""
    from . import plans_for

    start = len(COMPILED)
    plans_for(fn, *args)
    return [compare_compiled(c) for c in COMPILED[start:]]
