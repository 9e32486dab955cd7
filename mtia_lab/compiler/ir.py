"""The scheduler's IR: what each aten node of an FX graph does to memory.

`build_ir(gm)` turns an aten-level FX graph (from AOTAutograd, with FakeTensor `meta["val"]`)
into one `SchedulerNode` per node that would be a kernel, and one `Buffer` per tensor that
would live in device memory. View ops (permute, view, expand, getitem of a view...) move no
data: they become no kernel, and whoever reads a view reads its *base* buffer.

Each node knows its kind (what it can fuse with), the buffers it reads and writes (with sizes:
the traffic a fusion can save), its iteration space (numel, and rnumel for reductions: which
kernels can share one loop nest) and where it came from (aten node names, user source lines).
A `FusedSchedulerNode` is a group of them that runs as one kernel.

Shapes may be symbolic (Dynamo makes a dimension dynamic when it sees a second size): sizes
are then read from the shape environment's hints, the sizes of the call that compiled the
graph, without adding guards -- as Inductor plans with size hints. The plan (fusion decisions)
is made at those sizes and the generated code runs at any size; the runner re-prices the plan's
kernels at each new size it meets (`build_ir(gm, size=sizes_at(...))`).
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.fx

from .._compat import size_hint, symbolic_size_at

aten = torch.ops.aten


class Kind(str, enum.Enum):
    POINTWISE = "pointwise"  # one output element from the same element of each input
    REDUCTION = "reduction"  # sum/amax/var...: a loop over rnumel elements per output element
    TEMPLATE = "template"  # matmul-like: a tiled GEMM that can take a pointwise epilogue
    EXTERN = "extern"  # runs as its ATen kernel (convolution, layer norm...): never fused
    VIEW = "view"  # metadata only: no kernel at all


TEMPLATES = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default}
REDUCTIONS = {
    "sum", "mean", "amax", "amin", "max", "min", "prod", "var", "var_mean", "std", "argmax",
    "argmin", "any", "all", "logsumexp",
}
# Not tagged pointwise in the schema, but elementwise all the same (factories read nothing).
POINTWISE_EXTRA = {
    "clone", "_to_copy", "copy", "where", "masked_fill", "full", "full_like", "scalar_tensor",
    "zeros", "ones", "zeros_like", "ones_like", "empty", "empty_like", "fill", "lift_fresh_copy",
}
VIEW_EXTRA = {"detach", "alias", "lift_fresh", "_unsafe_view"}


@dataclass
class Buffer:
    """A tensor in device memory: a graph input or the output of one scheduler node."""

    name: str
    nbytes: int
    shape: tuple[int, ...]
    dtype: torch.dtype
    producer: str | None  # the SchedulerNode that writes it; None for graph inputs
    is_output: bool = False  # returned by the graph (possibly through a view)


@dataclass(eq=False)
class SchedulerNode:
    """One aten op that would be one kernel if nothing were fused."""

    name: str
    index: int  # position in graph order: groups keep their nodes sorted by it
    kind: Kind
    target: str  # e.g. "aten.addmm.default"
    reads: tuple[str, ...]  # base buffers it reads
    writes: tuple[str, ...]  # buffers it produces (several for native_layer_norm...)
    numel: int  # iteration space: output elements (reduction: outputs per reduction)
    rnumel: int = 1  # reduced elements per output (1 unless a reduction)
    gemm_flops: float = 0.0
    vector_flops: float = 0.0
    low_precision: bool = False
    fx_nodes: tuple[str, ...] = ()  # FX names it stands for (itself + getitems)
    source: tuple[str, ...] = ()  # user source lines (file:line: code)

    def get_nodes(self) -> list[SchedulerNode]:
        return [self]

    def __repr__(self) -> str:
        space = f"{self.numel}x{self.rnumel}" if self.rnumel > 1 else f"{self.numel}"
        return f"SchedulerNode({self.name}: {self.kind.value} {self.target} [{space}])"


@dataclass
class GraphIR:
    """All scheduler nodes and buffers of one FX graph, plus the maps the scheduler needs."""

    gm: torch.fx.GraphModule
    nodes: list[SchedulerNode]
    buffers: dict[str, Buffer]
    users: dict[str, list[str]]  # buffer -> scheduler nodes that read it
    base_of: dict[str, str]  # FX value name -> base buffer (itself unless a view)
    inputs: list[str]
    views: list[str] = field(default_factory=list)  # FX nodes that are views (no kernel)
    by_name: dict[str, SchedulerNode] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_name = {n.name: n for n in self.nodes}

    def nbytes(self, buffers) -> int:
        return sum(self.buffers[b].nbytes for b in buffers)


class FusedSchedulerNode:
    """A group of scheduler nodes that runs as one kernel (Inductor's name for it)."""

    __slots__ = ("nodes", "names", "reads", "writes", "kind", "numel", "rnumel", "index", "cache")

    def __init__(self, nodes: list[SchedulerNode]) -> None:
        self.nodes = sorted(nodes, key=lambda n: n.index)
        self.names = frozenset(n.name for n in self.nodes)
        writes: set[str] = set()
        reads: set[str] = set()
        for node in self.nodes:
            writes.update(node.writes)
            reads.update(node.reads)
        self.writes = writes
        self.reads = reads - writes  # what it reads from outside
        kinds = {n.kind for n in self.nodes}
        # A group is as constrained as its most constrained member (its "anchor").
        self.kind = next((k for k in (Kind.EXTERN, Kind.TEMPLATE, Kind.REDUCTION) if k in kinds),
                         Kind.POINTWISE)
        anchor = next((n for n in self.nodes if n.kind is self.kind), self.nodes[0])
        self.numel, self.rnumel = anchor.numel, anchor.rnumel
        self.index = self.nodes[0].index
        self.cache: dict = {}  # the scheduler's per-group memo (outside edges, labels)

    @classmethod
    def fuse(cls, a: FusedSchedulerNode, b: FusedSchedulerNode) -> FusedSchedulerNode:
        return cls(a.nodes + b.nodes)

    def get_nodes(self) -> list[SchedulerNode]:
        return self.nodes

    @property
    def name(self) -> str:
        return "+".join(n.name for n in self.nodes)

    def outputs(self, ir: GraphIR) -> set[str]:
        """Buffers it must write to memory: read by another kernel or returned by the graph."""
        return {b for b in self.writes if ir.buffers[b].is_output
                or any(u not in self.names for u in ir.users.get(b, ()))}

    def __len__(self) -> int:
        return len(self.nodes)

    def __repr__(self) -> str:
        return f"FusedSchedulerNode({self.kind.value}: {self.name})"


def classify(target) -> Kind:
    """What kind of kernel an aten op is: the first question every fusion rule asks."""
    if target is operator.getitem:
        return Kind.VIEW
    if not isinstance(target, torch._ops.OpOverload):
        return Kind.EXTERN
    if target in TEMPLATES:
        return Kind.TEMPLATE
    name = target.overloadpacket.__name__
    returns = target._schema.returns
    if name in VIEW_EXTRA or (returns and returns[0].alias_info is not None
                              and not returns[0].alias_info.is_write):
        return Kind.VIEW
    if name in REDUCTIONS:
        return Kind.REDUCTION
    if torch.Tag.pointwise in target.tags or name in POINTWISE_EXTRA:
        return Kind.POINTWISE
    return Kind.EXTERN


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


Size = Callable[[object], int]  # an int for an int or a SymInt (size_hint, or sizes_at(...))


def sizes_at(values: dict) -> Size:
    """Sizes of a symbolic graph when its size symbols take `values` ({sympy symbol: int})."""
    return lambda value: symbolic_size_at(value, values)


def _numel(t: torch.Tensor, size: Size = size_hint) -> int:
    """Elements of a (possibly symbolic) tensor."""
    return size(t.numel())


def _nbytes(t: torch.Tensor, size: Size = size_hint) -> int:
    return _numel(t, size) * t.element_size()


def user_source(node: torch.fx.Node) -> tuple[str, ...]:
    """The innermost frame of the node's stack trace that is the user's code, not torch's."""
    trace = node.meta.get("stack_trace") or ""
    lines = trace.strip().splitlines()
    best = innermost = ""
    for i, line in enumerate(lines):
        line = line.strip()
        if line.startswith("File ") and ", line " in line:
            parts = line.split(", ")
            where = parts[0][6:-1].rsplit("/", 1)[-1] + ":" + parts[1].removeprefix("line ")
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            innermost = f"{where}: {code}" if code else where
            if "/torch/" not in line:
                best = innermost
    # A model made only of torch.nn modules has no user frame: name torch's line instead.
    best = best or innermost
    return (best,) if best else ()


def _fx_args(node: torch.fx.Node) -> list[torch.fx.Node]:
    found: list[torch.fx.Node] = []
    torch.fx.map_arg((node.args, node.kwargs), lambda a: found.append(a))
    return found


def build_ir(gm: torch.fx.GraphModule, size: Size = size_hint) -> GraphIR:
    """One pass over the graph in order: buffers for inputs, nodes for ops, bases for views.

    `size` turns a symbolic size into an int: its hint by default (see the module docstring)."""
    buffers: dict[str, Buffer] = {}
    base_of: dict[str, str] = {}
    nodes: list[SchedulerNode] = []
    views: list[str] = []
    inputs: list[str] = []
    owner: dict[str, SchedulerNode] = {}  # multi-output producer -> its node (for getitems)

    def add_buffer(name: str, val, producer: str | None) -> None:
        shape = tuple(size(d) for d in val.shape)
        buffers[name] = Buffer(name, _nbytes(val, size), shape, val.dtype, producer)
        base_of[name] = name

    for fx_node in gm.graph.nodes:
        val = fx_node.meta.get("val")
        if fx_node.op == "placeholder":
            if isinstance(val, torch.Tensor):
                add_buffer(fx_node.name, val, None)
                inputs.append(fx_node.name)
            continue
        if fx_node.op == "output":
            for out in _fx_args(fx_node):
                if out.name in base_of:
                    buffers[base_of[out.name]].is_output = True
            continue
        if fx_node.op != "call_function":
            continue
        kind = classify(fx_node.target)
        args = [a for a in _fx_args(fx_node) if a.name in base_of]
        if fx_node.target is operator.getitem:
            parent = fx_node.args[0]
            if parent.name in owner and isinstance(val, torch.Tensor):  # output i of a kernel
                node = owner[parent.name]
                add_buffer(fx_node.name, val, node.name)
                node.writes += (fx_node.name,)
                node.fx_nodes += (fx_node.name,)
            elif parent.name in base_of:  # an element of split/unbind: a view of the input
                base_of[fx_node.name] = base_of[parent.name]
                views.append(fx_node.name)
            continue
        if kind is Kind.VIEW:
            if args:
                base_of[fx_node.name] = base_of[args[0].name]
                views.append(fx_node.name)
            continue
        outs = _tensors(val)
        if not outs:  # sym ints and other scalars: nothing in device memory
            continue
        reads = tuple(dict.fromkeys(base_of[a.name] for a in args if base_of[a.name] in buffers))
        first = outs[0]
        numel, rnumel = _numel(first, size), 1
        if kind is Kind.REDUCTION and args:  # rnumel: input elements per output element
            source_val = _tensors(args[0].meta.get("val"))
            rnumel = max(1, _numel(source_val[0], size) // max(numel, 1)) if source_val else 1
        node = SchedulerNode(
            name=fx_node.name, index=len(nodes), kind=kind, target=str(fx_node.target),
            reads=reads, writes=(), numel=numel, rnumel=rnumel,
            low_precision=first.dtype in (torch.bfloat16, torch.float16),
            fx_nodes=(fx_node.name,), source=user_source(fx_node),
        )
        node.gemm_flops = _gemm_flops(fx_node, size)
        if kind in (Kind.POINTWISE, Kind.REDUCTION):
            node.vector_flops = float(numel * rnumel)
        elif kind is Kind.EXTERN:
            node.vector_flops = float(sum(_numel(t, size) for t in outs))
        if isinstance(val, torch.Tensor):
            add_buffer(fx_node.name, val, fx_node.name)
            node.writes = (fx_node.name,)
        else:
            owner[fx_node.name] = node
            base_of[fx_node.name] = fx_node.name  # only its getitems are real buffers
        nodes.append(node)
    users: dict[str, list[str]] = {}
    for node in nodes:
        for buf in node.reads:
            users.setdefault(buf, []).append(node.name)
    return GraphIR(gm, nodes, buffers, users, base_of, inputs, views)


def _gemm_flops(fx_node: torch.fx.Node, size: Size = size_hint) -> float:
    """2*M*N*K for the matmul templates, from the output shape and the inner dimension."""
    if fx_node.target not in TEMPLATES:
        return 0.0
    out = fx_node.meta["val"]
    a = fx_node.args[1] if fx_node.target in (aten.addmm.default, aten.baddbmm.default) \
        else fx_node.args[0]
    k = size(a.meta["val"].shape[-1])
    return 2.0 * _numel(out, size) * k
