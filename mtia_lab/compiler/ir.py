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
import functools
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.fx

from .._compat import (
    OpOverload,
    non_overlapping_and_dense,
    op_schema,
    size_hint,
    symbolic_size_at,
)
from ..source import node_source
from . import loops
from .plan_detail import plan_detail

aten = torch.ops.aten


class Kind(str, enum.Enum):
    POINTWISE = "pointwise"  # one output element from the same element of each input
    REDUCTION = "reduction"  # sum/amax/var...: a loop over rnumel elements per output element
    TEMPLATE = "template"  # matmul-like: a tiled GEMM that can take a pointwise epilogue
    EXTERN = "extern"  # runs as its ATen kernel (convolution, layer norm...): never fused
    VIEW = "view"  # metadata only: no kernel at all
    ALLOC = "allocation"  # empty, empty_permuted...: memory is reserved, no byte moves


TEMPLATES = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default}
REDUCTIONS = {
    "sum", "mean", "amax", "amin", "max", "min", "prod", "var", "var_mean", "std", "argmax",
    "argmin", "any", "all", "logsumexp", "linalg_vector_norm",
}
# Ops Inductor lowers to a reduction-shaped loop nest (its own decomposition or lowering, not
# an ATen call): a scan runs over rows of the scanned dim; GroupNorm reduces each (sample,
# group) and normalizes in the same kernel. Their loop space is not their output's shape
# (`_loop_space`).
SCANS = {"cumsum", "cumprod", "logcumsumexp"}
LOWERED_NORMS = {"native_group_norm"}
# A sort along a dim of at most MAX_TRITON_SORT elements is a persistent Triton kernel over
# rows of that dim (Inductor's sort lowering, `ir.Sort.create`: max_rblock 512); a longer one
# calls aten.sort.
SORTS = {"sort"}
MAX_TRITON_SORT = 512
# Not tagged pointwise in the schema, but elementwise all the same (factories read nothing;
# random ops are pointwise too: Inductor draws from a seed buffer inside the kernel, which is
# how dropout's mask math fuses).
POINTWISE_EXTRA = {
    "clone", "_to_copy", "copy", "copy_", "where", "masked_fill", "full", "full_like",
    "scalar_tensor", "zeros", "ones", "zeros_like", "ones_like", "fill", "lift_fresh_copy",
    "iota", "arange", "rand", "rand_like", "randn", "randn_like", "bernoulli", "uniform",
    "normal", "randint", "randint_like", "native_dropout", "bernoulli_", "uniform_", "normal_",
    "triu_indices", "tril_indices",
}
# Ops Inductor lowers to fusible (pointwise) code whose loads go through an index or a window:
# the output is computed element by element, but the inputs are not read at the output's
# positions. A producer joins such a kernel only by being inlined into it while lowering.
# grid_sampler_2d is one: Inductor's decomposition.py turns it (every mode) into pointwise code
# loading the input at the grid's positions.
INDEXED = {
    "embedding", "gather", "index", "index_select", "cat", "constant_pad_nd", "slice_scatter",
    "select_scatter", "diagonal_scatter", "as_strided_scatter", "avg_pool2d", "avg_pool3d",
    "max_pool2d_with_indices", "max_pool3d_with_indices", "_adaptive_avg_pool2d",
    "adaptive_max_pool2d", "avg_pool2d_backward", "max_pool2d_with_indices_backward",
    "flip", "roll", "repeat", "upsample_nearest2d", "upsample_bilinear2d", "reflection_pad2d",
    "replication_pad2d", "pad", "grid_sampler_2d",
}
# Ops that store through an index (Inductor: a copy of `self`, then an indexed store): their
# output is complete only once every store has landed, so no consumer joins their loop.
SCATTER = {
    "scatter", "scatter_add", "scatter_reduce", "index_put", "index_add", "masked_scatter",
    "embedding_dense_backward", "_unsafe_index_put",
}
# Allocations: Inductor plans them as buffers (no kernel, no bytes moved).
ALLOC = {"empty", "empty_like", "empty_permuted", "empty_strided", "new_empty",
         "new_empty_strided"}
VIEW_EXTRA = {"detach", "alias", "lift_fresh", "_unsafe_view"}
# Factories shaped like a tensor: they take its sizes, dtype and device, never its data
# (Inductor lowers `full_like(x, v)` to a constant loop over x's size, reading no buffer).
LIKE_FACTORIES = {"full_like", "zeros_like", "ones_like", "rand_like", "randn_like",
                  "randint_like"}


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
    int8: bool = False  # integer GEMM: priced at the chip's INT8 peak
    indexed: bool = False  # reads through an index or window (gather, embedding, cat, pool)
    scatter: bool = False  # writes through an index (scatter, index_put)
    loads: int = 0  # values loaded per output element (a 3x3 pool: 9), for realize_acc_reads
    channels_last: bool = False  # writes a convolution's input (laid out channels-last)
    # A layout copy (extern_in_triton=False, layout.py): (the convolution, its FX argument)
    layout_of: tuple[str, str] | None = None
    # The add of a bias Inductor peeled off a convolution and stores (extern_in_triton=False,
    # layout.py `peeled_biases`): (the convolution, the buffer its call writes)
    bias_of: tuple[str, str] | None = None
    # A scatter's copy of its input (scatter_in_one_kernel=False, scatter.py): (the scatter,
    # its FX argument `self`)
    scatter_copy: tuple[str, str] | None = None
    rorder: tuple = ()  # a reduction over outer dims: (input shape, reduced dims); see inner
    # A reduction whose rows Inductor loops in its input's memory order, not its output's
    # (it reads a permuted view): its output is stored in that order (_rows_permuted)
    rows_permuted: bool = False
    unrolled: bool = False  # a reduction small enough to run as pointwise (set by the scheduler)
    splits: int = 1  # a reduction Inductor splits in two: partial results per output (scheduler)
    large_body: int = 0  # ops of a body Inductor stores for its size (opcount.py; scheduler)
    stored: bool = False  # pointwise, but Inductor's lowering stores it (opcount.py; scheduler)
    order: int = -1  # position among the nodes Inductor would realize (set by the scheduler)
    access: dict = field(default_factory=dict)  # buffer -> how it is read ("full" or a view)
    loops: dict = field(default_factory=dict)  # buffer -> loop signatures of whole accesses
    # a reduction's store as pointwise code, the loops it has once unrolled (the scheduler
    # makes them its `loops` then: `mark_unrolled`)
    unrolled_loops: dict = field(default_factory=dict)
    fx_nodes: tuple[str, ...] = ()  # FX names it stands for (itself + getitems)
    source: tuple[str, ...] = ()  # user source lines (file:line: code)

    @property
    def op(self) -> str:
        """The aten op's name ("cumsum" for "aten.cumsum.default"); other targets whole."""
        return self.target.split(".")[1] if self.target.startswith("aten.") else self.target

    @property
    def inner(self) -> bool:
        """A reduction over the innermost dims: its (numel, rnumel) split is in memory order."""
        return not self.rorder

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
    # A clone of a value Inductor recomputes in each reader (recompute.py) -> the node whose
    # kernel computes it; empty unless the scheduler ran with computed_once=False.
    home: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_name = {n.name: n for n in self.nodes}

    @functools.cached_property
    def _fx_by_name(self) -> dict[str, torch.fx.Node]:
        return {n.name: n for n in self.gm.graph.nodes}

    def fx_node(self, name: str) -> torch.fx.Node | None:
        """The FX node of that name (one dict for the graph, not a scan per question; built
        again if the graph gained nodes since)."""
        node = self._fx_by_name.get(name)
        if node is None:
            self.__dict__.pop("_fx_by_name", None)
            node = self._fx_by_name.get(name)
        return node

    def fx_original(self, name: str) -> torch.fx.Node | None:
        """The FX node a scheduler node computes. A value recomputed for one reader is a
        clone named "value@reader" (recompute.py) that computes its original's op."""
        return self.fx_node(origin(name))

    def nbytes(self, buffers) -> int:
        return sum(self.buffers[b].nbytes for b in buffers)

    def plan_detail(self) -> dict:
        """Dataflow inside kernels, shapes, users' names: what `FusionPlan.to_dict()` carries
        as "detail" for views (plan_detail.py)."""
        return plan_detail(self)

    def node_users(self) -> dict[str, set[str]]:
        """Scheduler node -> the scheduler nodes that read what it writes (graph inputs, which
        no node produces, are left out)."""
        users: dict[str, set[str]] = {}
        for node in self.nodes:
            for buf in node.reads:
                producer = self.buffers[buf].producer
                if producer is not None:
                    users.setdefault(producer, set()).add(node.name)
        return users


class FusedSchedulerNode:
    """A group of scheduler nodes that runs as one kernel (Inductor's name for it)."""

    __slots__ = ("nodes", "names", "reads", "writes", "kind", "numel", "rnumel", "index", "cache",
                 "size", "indexed", "scatter", "inner", "rorders", "min_order",
                 "max_order")

    def __init__(self, nodes: list[SchedulerNode], size: int | None = None) -> None:
        self.nodes = sorted(nodes, key=lambda n: n.index)
        self.names = frozenset(n.name for n in self.nodes)
        writes: set[str] = set()
        reads: set[str] = set()
        for node in self.nodes:
            writes.update(node.writes)
            reads.update(node.reads)
        self.writes = writes
        self.reads = reads - writes  # what it reads from outside
        kinds = {node_kind(n) for n in self.nodes}
        # A group is as constrained as its most constrained member (its "anchor"); a pointwise
        # group loops over its largest member (an inlined broadcast producer is recomputed).
        self.kind = next((k for k in (Kind.EXTERN, Kind.TEMPLATE, Kind.REDUCTION) if k in kinds),
                         Kind.POINTWISE)
        members = [n for n in self.nodes if node_kind(n) is self.kind]
        anchor = members[0]
        self.numel, self.rnumel = anchor.numel, (1 if anchor.unrolled else anchor.rnumel)
        self.inner = all(n.inner for n in members)
        self.rorders = frozenset(n.rorder for n in members if node_kind(n) is Kind.REDUCTION)
        self.indexed = any(n.indexed for n in self.nodes)
        self.scatter = any(n.scatter for n in self.nodes)
        self.index = self.nodes[0].index
        orders = [n.order if n.order >= 0 else n.index for n in self.nodes]
        self.min_order, self.max_order = min(orders), max(orders)
        # Scheduler nodes as Inductor counts them (max_fusion_size): an op inlined into its
        # consumer while lowering is no node of its own.
        self.size = len(self.nodes) if size is None else size
        self.cache: dict = {}  # the scheduler's per-group memo (outside edges, labels)

    @classmethod
    def fuse(cls, a: FusedSchedulerNode, b: FusedSchedulerNode,
             inline: bool = False) -> FusedSchedulerNode:
        """`inline`: `a` is inlined into `b` (Inductor's lowering): the group loops over b's
        space (a broadcast or gathered producer is recomputed there) and counts as b's nodes."""
        fused = cls(a.nodes + b.nodes, b.size if inline else a.size + b.size)
        if inline or (fused.kind is Kind.POINTWISE and b.numel > a.numel):
            fused.numel, fused.rnumel = b.numel, b.rnumel
        elif fused.kind is Kind.POINTWISE or fused.kind is a.kind:
            fused.numel, fused.rnumel = a.numel, a.rnumel
        else:
            fused.numel, fused.rnumel = b.numel, b.rnumel
        return fused

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


def node_kind(node: SchedulerNode) -> Kind:
    """The kind that decides fusion: a reduction unrolled into pointwise code is pointwise."""
    return Kind.POINTWISE if node.unrolled else node.kind


def classify(target) -> Kind:
    """What kind of kernel an aten op is: the first question every fusion rule asks."""
    if target is operator.getitem:
        return Kind.VIEW
    if not isinstance(target, OpOverload):
        return Kind.EXTERN
    if target in TEMPLATES:
        return Kind.TEMPLATE
    name = target.overloadpacket.__name__
    returns = op_schema(target).returns
    if name in VIEW_EXTRA or (returns and returns[0].alias_info is not None
                              and not returns[0].alias_info.is_write):
        return Kind.VIEW
    if name in ALLOC:
        return Kind.ALLOC
    if name in REDUCTIONS or name in SCANS or name in LOWERED_NORMS:
        return Kind.REDUCTION
    if torch.Tag.pointwise in target.tags or name in POINTWISE_EXTRA or name in INDEXED \
            or name in SCATTER:
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
    """The user's line that made the node (source.node_source), as a tuple of one or none."""
    best = node_source(node)
    return (best,) if best else ()


def _fx_args(node: torch.fx.Node) -> list[torch.fx.Node]:
    found: list[torch.fx.Node] = []
    torch.fx.map_arg((node.args, node.kwargs), lambda a: found.append(a))
    return found


SEP = "@"  # a clone of value `v` recomputed for reader `r` is named "v@r" (recompute.py)


def origin(name: str) -> str:
    """The node a clone was copied from (a node's own name otherwise)."""
    return name.split(SEP, 1)[0]


# gm.meta key: set by our AOTAutograd compilers on a graph of a training compile (its forward
# or backward), which Inductor compiles with is_inference=False: no reorder_for_locality.
TRAINING = "mtia_lab_training"


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

    dead = dead_nodes(gm)
    for fx_node in gm.graph.nodes:
        val = fx_node.meta.get("val")
        if fx_node.name in dead:
            continue  # not computed (Inductor's dead-code elimination)
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
        if _noop_copy(fx_node):  # Inductor's remove_noop_ops: the copy is its input
            kind = Kind.VIEW
        kind = _lowered_kind(fx_node, kind, size)
        args = [a for a in _fx_args(fx_node) if a.name in base_of]
        if _op_name(fx_node) in LIKE_FACTORIES:
            args = []  # reads only the metadata of its tensor argument
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
        if kind is Kind.ALLOC:  # no kernel: whoever fills it allocates it (codegen recomputes)
            views.append(fx_node.name)
            continue
        if kind is Kind.VIEW:
            if args:
                source = noop_source(fx_node) if _noop_copy(fx_node) else args[0]
                base_of[fx_node.name] = base_of[source.name]
                views.append(fx_node.name)
            continue
        outs = _tensors(val)
        if not outs:  # sym ints and other scalars: nothing in device memory
            continue
        reads = tuple(dict.fromkeys(base_of[a.name] for a in args if base_of[a.name] in buffers))
        access: dict[str, set] = {}
        op = getattr(fx_node.target, "overloadpacket", None)
        op_name = op.__name__ if op is not None else ""
        if _scatter_upon_const_tensor(fx_node, size):
            op_name = "where"  # Inductor's joint-graph pattern: a pointwise select, no scatter
        through_index = _indexed_args(fx_node, op_name)
        skipped = cat_skipped(fx_node) if op_name == "cat" else set()
        one_piece = op_name == "cat" and len(cat_kept(fx_node)) == 1  # Inductor's clone
        through_index = set() if one_piece else through_index - skipped
        indexed_how = _indexed_access(fx_node, op_name, val) if through_index else None
        whole: list[tuple[str, torch.Tensor]] = []  # (buffer, view) of each whole read
        for a in args:
            if base_of[a.name] in buffers:
                how = (*indexed_how, _access(a.meta.get("val"), buffers[base_of[a.name]], size)) \
                    if a.name in through_index else SHAPE_ONLY \
                    if _shape_only(fx_node, a) or a.name in skipped else \
                    _access(a.meta.get("val"), buffers[base_of[a.name]], size)
                access.setdefault(base_of[a.name], set()).add(how)
                if how == "full" and isinstance(a.meta.get("val"), torch.Tensor):
                    whole.append((base_of[a.name], a.meta["val"]))
        first = outs[0]
        numel, rnumel = _numel(first, size), 1
        if kind is Kind.REDUCTION and args:  # rnumel: input elements per output element
            source_val = _tensors(args[0].meta.get("val"))
            rnumel = max(1, _numel(source_val[0], size) // max(numel, 1)) if source_val else 1
            numel, rnumel = _loop_space(fx_node, op_name, numel, rnumel, size)
        node = SchedulerNode(
            name=fx_node.name, index=len(nodes), kind=kind, target=str(fx_node.target),
            reads=reads, writes=(), numel=numel, rnumel=rnumel,
            low_precision=first.dtype in (torch.bfloat16, torch.float16),
            int8=kind is Kind.TEMPLATE and any(
                getattr(a.meta.get("val"), "dtype", None) in (torch.int8, torch.uint8)
                for a in args),
            indexed=op_name in INDEXED and not one_piece,
            scatter=op_name in SCATTER and kind is not Kind.EXTERN,
            loads=_loads(fx_node, op_name, len(reads)),
            rorder=() if kind is not Kind.REDUCTION or op_name in LOWERED_NORMS
            else _outer_order(fx_node),
            rows_permuted=kind is Kind.REDUCTION and op_name in REDUCTIONS
            and _rows_permuted(fx_node, size),
            access=access, fx_nodes=(fx_node.name,), source=user_source(fx_node),
        )
        node.loops = _loop_signatures(fx_node, kind, whole, size)
        if kind is Kind.REDUCTION and isinstance(val, torch.Tensor):
            node.unrolled_loops = {fx_node.name: {loops.signatures(val, [], size)[1]}}
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
    _mark_conv_inputs(gm, nodes, buffers, base_of)
    return GraphIR(gm, nodes, buffers, users, base_of, inputs, views)


DEAD = "mtia_lab_dead"  # FX meta: a node `dead_nodes` found no live reader for


def dead_nodes(gm: torch.fx.GraphModule) -> set[str]:
    """Inductor's dead-code elimination (the FX graph's `eliminate_dead_code` in its passes,
    `Scheduler.dead_node_elimination`): an op whose value no live op reads and no output
    returns is not computed, unless it has side effects. A like-factory reads nothing:
    Inductor decomposes `full_like(x, v)` into `full` of x's shape (decomposition.py), so a
    value read only for its shape is dead -- a training step's loss, computed only for
    `full_like(loss, 1)`, the gradient's seed, when the step returns the gradients alone.
    Its producers then have a reader fewer (the log-softmax, read by the loss's gather and
    by its backward, is inlined into the backward). Kept: a random op (it advances the
    generator), and a value a like-factory reads through symbolic sizes (our kernel takes
    the factory's metadata from it: codegen's stand-in needs static sizes). Each node's
    `meta[DEAD]` says so (`live_users`)."""
    dead: set[str] = set()
    for fx_node in reversed(gm.graph.nodes):
        fx_node.meta[DEAD] = False
        if fx_node.op != "call_function" or fx_node.is_impure() or \
                torch.Tag.nondeterministic_seeded in getattr(fx_node.target, "tags", ()):
            continue
        if all(u.name in dead or _op_name(u) in LIKE_FACTORIES and u.args and
               u.args[0] is fx_node and fx_node not in _fx_args_after_first(u) and
               _static_meta(fx_node) or _dropped_by_cat(u, fx_node)
               for u in fx_node.users):
            dead.add(fx_node.name)
            fx_node.meta[DEAD] = True
    return dead


def _dropped_by_cat(user: torch.fx.Node, piece: torch.fx.Node) -> bool:
    """Is `piece` only an empty piece of the cat `user`, which Inductor's decomposition drops
    (`cat_skipped`)? The empty KV cache `torch.tensor([])` is then read by nothing."""
    return user.target is aten.cat.default and piece.name in cat_skipped(user) and \
        piece not in _fx_args_after_first(user)


def _fx_args_after_first(fx_node: torch.fx.Node) -> list:
    return [a for a in (*fx_node.args[1:], *fx_node.kwargs.values())
            if isinstance(a, torch.fx.Node)]


def live_users(fx_node: torch.fx.Node) -> list[torch.fx.Node]:
    """The FX users of a node that are computed (`dead_nodes`: not dead)."""
    return [u for u in fx_node.users if not u.meta.get(DEAD)]


def _static_meta(fx_node: torch.fx.Node) -> bool:
    val = fx_node.meta.get("val")
    return isinstance(val, torch.Tensor) and all(
        isinstance(d, int) for d in (*val.shape, *val.stride()))


def _mark_conv_inputs(gm: torch.fx.GraphModule, nodes: list[SchedulerNode],
                      buffers: dict[str, Buffer], base_of: dict[str, str]) -> None:
    """Inductor lays a 4-d convolution's input out channels-last (its layout optimization):
    the op that writes it loops in that order (`SchedulerNode.channels_last`). An input of
    one pixel (a squeeze-excite's pooled vector) or one channel is laid out the same either
    way: its writer keeps the graph's order (Inductor's memory deps are equal). So is the
    output's gradient of a convolution backward; a value whose layout a user fixed
    (`fixed_by_a_user`) is written in the graph's order, and copied (layout.py)."""
    by_name = {n.name: n for n in nodes}
    fx = {n.name: n for n in gm.graph.nodes}
    for _, role, source in conv_operands(gm):
        if role not in ("input", "grad_output"):
            continue
        buf = buffers.get(base_of.get(getattr(source, "name", ""), ""))
        if buf is not None and buf.producer in by_name and _layouts_differ(buf.shape) \
                and not (buf.name in fx and fixed_by_a_user(fx[buf.name])):
            by_name[buf.producer].channels_last = True


def conv_operands(gm: torch.fx.GraphModule):
    """(convolution, role, FX argument) of each convolution and convolution backward, in
    graph order and, per convolution, in the order Inductor's lowering asks for their
    layout (`kernel/conv.py: convolution`: `require_channels_last(x)`, then the weight;
    `convolution_backward_lowering`: for the weight's gradient the input, then the output's
    gradient; for the input's gradient the output's gradient, again, then the weight)."""
    for fx_node in gm.graph.nodes:
        if fx_node.target is aten.convolution.default:
            pairs = zip(("input", "weight"), fx_node.args[:2], strict=False)
        elif fx_node.target is aten.convolution_backward.default:
            pairs = _conv_backward_operands(fx_node)
        else:
            continue
        for role, arg in pairs:
            if isinstance(arg, torch.fx.Node):
                yield fx_node, role, arg


def _conv_backward_operands(fx_node: torch.fx.Node) -> list[tuple[str, object]]:
    """The operands a convolution backward asks a layout of, each once, for the gradients
    its output mask asks for (`convolution_backward_lowering`, torch/_inductor/kernel/conv.py)."""
    grad_out, inp, weight = fx_node.args[:3]
    mask = fx_node.args[10] if len(fx_node.args) > 10 else (True, True, True)
    roles: list[tuple[str, object]] = []
    if mask[1]:
        roles += [("input", inp), ("grad_output", grad_out)]
    if mask[0]:
        roles += [("grad_output", grad_out), ("weight", weight)]
    return list(dict.fromkeys(roles))


# Users that fix the layout of a value with several users to its FX strides when it is
# lowered (`GraphLowering.run_node`: need_fixed_layout): a copy is made for any other order.
NEED_FIXED_LAYOUT = {aten.convolution_backward.default, aten.mm.default, aten._int_mm.default}


def fixed_by_a_user(fx_node: torch.fx.Node) -> bool:
    """Is the value's layout fixed when Inductor lowers it (`GraphLowering.run_node`): it has
    several users, one of which needs a fixed layout (a convolution backward, a matmul)? A
    convolution's operand in another order is then copied (`require_channels_last` on a
    FixedLayout: `copy_input`), however its producer loops."""
    users = live_users(fx_node)
    return len(set(users)) > 1 and any(u.target in NEED_FIXED_LAYOUT for u in users)


def _layouts_differ(shape: tuple[int, ...]) -> bool:
    """Are channels-last and contiguous strides different orders of memory for `shape`?"""
    return len(shape) == 4 and shape[1] > 1 and shape[2] * shape[3] > 1


def _op_name(fx_node: torch.fx.Node) -> str:
    op = getattr(fx_node.target, "overloadpacket", None)
    return op.__name__ if op is not None else ""


def _indexed_args(fx_node: torch.fx.Node, op_name: str) -> set[str]:
    """FX names of the inputs an indexed op reads through an index, offset or window: the
    data (gather's `self`, embedding's weight, every piece of a cat, a scatter's `src`), not
    the indices, which are read at the output's own positions."""
    if op_name not in INDEXED and op_name not in SCATTER:
        return set()
    position = 1 if op_name.endswith("_scatter") or op_name in SCATTER else 0
    if position >= len(fx_node.args):
        return set()
    found: set[str] = set()
    torch.fx.map_arg(fx_node.args[position], lambda a: found.add(a.name))
    return found


def cat_skipped(fx_node: torch.fx.Node) -> set[str]:
    """The pieces of a cat that Inductor's `cat` lowering leaves out, as ATen's cat does
    (`_cat_should_skip`: a 1-D empty tensor, the empty KV cache `torch.tensor([])` a decoder
    concatenates its first keys to): never loaded, only their sizes are looked at."""
    return {p.name for p in _cat_args(fx_node)} - {p.name for p in cat_kept(fx_node)}


def cat_kept(fx_node: torch.fx.Node) -> list[torch.fx.Node]:
    """The pieces Inductor's cat joins: all but the skipped ones (or the first, if all are).
    One piece left: the decomposition returns `clone(piece)`, plain pointwise code, no cat
    (and no copy at all when the clone keeps the piece's strides: `_noop_copy`)."""
    pieces = _cat_args(fx_node)
    dim = fx_node.args[1] if len(fx_node.args) > 1 else fx_node.kwargs.get("dim", 0)
    return [p for p in pieces if not _empty_1d(p) and not _empty_along(p, dim)] or pieces[:1]


def _cat_args(fx_node: torch.fx.Node) -> list[torch.fx.Node]:
    pieces = fx_node.args[0] if fx_node.args else ()
    return [p for p in pieces if isinstance(p, torch.fx.Node)] \
        if isinstance(pieces, (list, tuple)) else []


def _empty_1d(piece: torch.fx.Node) -> bool:
    val = piece.meta.get("val")
    return isinstance(val, torch.Tensor) and val.dim() == 1 and \
        isinstance(val.shape[0], int) and val.shape[0] == 0


def _empty_along(piece: torch.fx.Node, dim) -> bool:
    """Empty along the cat's dim: Inductor's `cat` decomposition drops it too."""
    val = piece.meta.get("val")
    return isinstance(val, torch.Tensor) and isinstance(dim, int) and \
        -val.dim() <= dim < val.dim() and isinstance(val.shape[dim], int) and \
        val.shape[dim] == 0


def noop_source(fx_node: torch.fx.Node) -> torch.fx.Node | None:
    """The value a copy that copies nothing (`_noop_copy`) stands for: a clone's input, the
    one piece a cat keeps."""
    if fx_node.target is aten.cat.default:
        return cat_kept(fx_node)[0]
    return fx_node.args[0]


def _noop_copy(fx_node: torch.fx.Node) -> bool:
    """A clone whose result has its input's sizes, strides and dtype is no copy at all:
    Inductor's post-grad pass `remove_noop_ops` replaces it by its input (unless it is a
    graph output, which must not alias an input). So is a cat of one piece and empty ones
    (a DynamicCache's first keys after its empty `torch.tensor([])`): Inductor's `cat`
    decomposition (decomposition.py) drops the empty pieces and returns `piece.clone()`, a
    clone that keeps the strides of a dense piece (preserve_format) -- a permuted view of
    the key projection's output too -- and `remove_noop_ops` replaces it by the piece:
    nothing is copied, its readers read the piece where it is. (A piece that is not dense,
    a slice, is cloned into a contiguous buffer: a copy, `clone(piece)` lowered as pointwise
    code, `lowering.pointwise_cat`.)"""
    if fx_node.target is aten.cat.default:
        return _noop_cat(fx_node)
    if fx_node.target not in (aten.clone.default, aten.alias.default) or not fx_node.args:
        return False
    src, out = fx_node.args[0], fx_node.meta.get("val")
    val = src.meta.get("val") if isinstance(src, torch.fx.Node) else None
    if not (isinstance(val, torch.Tensor) and isinstance(out, torch.Tensor)):
        return False
    if any(user.op == "output" for user in fx_node.users):
        return False
    return (val.shape == out.shape and val.dtype == out.dtype
            and (out.numel() <= 1 or val.stride() == out.stride()))


def _noop_cat(fx_node: torch.fx.Node) -> bool:
    kept, out = cat_kept(fx_node), fx_node.meta.get("val")
    if len(kept) != 1 or len(_cat_args(fx_node)) < 2 or not isinstance(out, torch.Tensor):
        return False
    val = kept[0].meta.get("val")
    if not isinstance(val, torch.Tensor) or val.dtype != out.dtype or val.shape != out.shape:
        return False
    if any(user.op == "output" for user in fx_node.users):
        return False
    return all(isinstance(d, int) for d in (*val.shape, *val.stride())) and \
        non_overlapping_and_dense(val)


POOLS = {"max_pool2d_with_indices", "avg_pool2d", "max_pool3d_with_indices", "avg_pool3d"}


def _indexed_access(fx_node: torch.fx.Node, op_name: str, val) -> tuple:
    """How an indexed op reads its data: two reads are the same when the same windows or the
    same index tensors pick the same elements (Inductor's memory deps are then equal: a max
    pool and an avg pool over one input share it) in the same view of the buffer (the caller
    adds the view: a repeat of each half of a split reads other addresses)."""
    family = "pool" if op_name in POOLS else op_name
    rest = tuple(a.name if isinstance(a, torch.fx.Node) else repr(a) for a in fx_node.args[1:])
    out = _tensors(val)
    return ("indexed", family, rest, tuple(out[0].shape) if out else ())


def _access(val, buffer: Buffer, size: Size = size_hint) -> object:
    """How a kernel reads a buffer, as Inductor's MemoryDep would tell reads apart: "full" when
    it reads every element once (the buffer, a reshape or a permutation of it), else the view
    (shape, strides, offset): a slice or a broadcast reads other addresses in another order."""
    if not isinstance(val, torch.Tensor):
        return "full"
    strides = tuple(size(s) for s in val.stride())
    shape = tuple(size(d) for d in val.shape)
    numel = 1
    for d in shape:
        numel *= d
    if numel * val.element_size() == buffer.nbytes and all(
            s != 0 or d == 1 for s, d in zip(strides, shape, strict=True)):
        return "full"
    return (shape, strides, size(val.storage_offset()))


def _loop_signatures(fx_node: torch.fx.Node, kind: Kind,
                     whole: list[tuple[str, torch.Tensor]], size: Size) -> dict:
    """Buffer -> the loop signatures (loops.py) of a pointwise node's whole reads and of its
    write: which kernels touch a buffer at one index (scheduler.score_fusion_memory). None
    for a reduction: its reads and writes match any loop order, as before (Inductor matches
    a reduction's store to a permuted reader by other means: `fusable_read_and_write`,
    nested reductions; not modelled)."""
    val = fx_node.meta.get("val")
    if not isinstance(val, torch.Tensor) or kind is not Kind.POINTWISE:
        return {}
    if fx_node.target is aten.index.Tensor:
        whole = _index_tensors_over(fx_node, val, whole, size)
    found, write = loops.signatures(val, whole, size)
    found.setdefault(fx_node.name, set()).add(write)
    return found


def _index_tensors_over(fx_node: torch.fx.Node, out: torch.Tensor,
                        whole: list[tuple[str, torch.Tensor]], size: Size) -> list:
    """`x[i, j]` (aten.index.Tensor) reads its index tensors, broadcast together, over the
    output dims the indexed dims become (where the first one was when they are adjacent, else
    in front), not aligned to the output's last dims as a pointwise operand is: a strided
    stand-in of each over the output, for its loop signature (`index` loads `i[x0]` in each
    of the row's elements)."""
    indices = fx_node.args[1] if len(fx_node.args) > 1 else ()
    dims = [d for d, t in enumerate(indices) if t is not None]
    tensors = [t.meta.get("val") for t in indices if isinstance(t, torch.fx.Node)]
    if not dims or not all(isinstance(t, torch.Tensor) for t in tensors):
        return whole
    block = torch.broadcast_shapes(*(t.shape for t in tensors))
    start = dims[0] if dims == list(range(dims[0], dims[-1] + 1)) else 0
    out_shape = [size(d) for d in out.shape]
    if start + len(block) > len(out_shape):
        return whole
    stand_in = {}
    for t in tensors:
        lead = len(block) - t.dim()
        inner = [0] * lead + [size(st) if size(d) != 1 else 0
                              for d, st in zip(t.shape, t.stride(), strict=True)]
        strides = [0] * start + inner + [0] * (len(out_shape) - start - len(block))
        stand_in[id(t)] = torch.empty_strided(out_shape, strides, dtype=t.dtype, device="meta")
    return [(buf, stand_in.get(id(v), v)) for buf, v in whole]


def _loads(fx_node: torch.fx.Node, op_name: str, reads: int) -> int:
    """Values a node loads per output element: one per buffer it reads, a whole window for a
    pool (Inductor's `num_reads` of the op's loop body)."""
    if op_name in POOLS and len(fx_node.args) > 1:
        window = 1
        for k in fx_node.args[1]:
            window *= int(k)
        return window * reads
    return reads


def _loop_space(fx_node: torch.fx.Node, op_name: str, numel: int, rnumel: int,
                size: Size) -> tuple[int, int]:
    """(numel, rnumel) of the loop nest Inductor makes for a scan (rows x scanned dim) or a
    GroupNorm (samples*groups x elements per group); other reductions: as given."""
    source = fx_node.args[0].meta.get("val") if fx_node.args else None
    if not isinstance(source, torch.Tensor) or source.dim() == 0:
        return numel, rnumel
    total = _numel(source, size)
    if op_name in SCANS or op_name in SORTS:
        length = size(source.shape[_scanned_dim(fx_node) % source.dim()])
        return total // max(length, 1), length
    if op_name in LOWERED_NORMS:  # native_group_norm(input, weight, bias, N, C, HxW, group, eps)
        groups = size(fx_node.args[1 + 5])
        outer = size(source.shape[0]) * groups
        return outer, total // max(outer, 1)
    return numel, rnumel


SHAPE_ONLY = "shape"  # an argument whose sizes and dtype an op takes, never its values


def _shape_only(fx_node: torch.fx.Node, arg: torch.fx.Node) -> bool:
    """copy(self, src) is src in self's shape and dtype: Inductor's copy lowering never loads
    self (the generated code still passes it, for its sizes). No load: no shared data, and
    no read at other positions (`x[..., -1:] = 0` copies a zero into a slice of x)."""
    return fx_node.target is aten.copy.default and arg is fx_node.args[0] and \
        arg is not (fx_node.args[1] if len(fx_node.args) > 1 else None)


def _scanned_dim(fx_node: torch.fx.Node) -> int:
    """The dim a scan or a sort runs along (cumsum(x, dim); sort(x, dim=-1); sort.stable's
    dim is keyword-only)."""
    if fx_node.target is not aten.sort.stable and len(fx_node.args) > 1:
        return int(fx_node.args[1])
    return int(fx_node.kwargs.get("dim", -1))


def _lowered_kind(fx_node: torch.fx.Node, kind: Kind, size: Size) -> Kind:
    """Where Inductor's lowering of an op depends on its sizes or dtypes: a short sort is a
    Triton kernel (a reduction-shaped loop, SORTS); a scatter of int64 or bool values, or a
    scatter_reduce other than a sum, calls ATen (`use_scatter_fallback`: Triton has no atomic
    store of those dtypes). A tensor constant of the host copied into a device tensor
    (`t[0] = n - 1` in a model that made `t` without a device: `copy(t[0], lift_fresh_copy(
    constant))`) is a launch of its own that moves it (`codegen_device_copy`: ir.DeviceCopy
    is an extern kernel); the lifted constant itself is that launch's input, not a kernel.
    An index by a mask or by such a constant calls aten.index (`_index_falls_back`)."""
    op_name = _op_name(fx_node)
    if op_name == "lift_fresh_copy" and _host_constant(fx_node) and all(
            _op_name(u) == "copy" and u.args[1] is fx_node
            or _op_name(u) == "index" and _index_falls_back(u) for u in fx_node.users):
        return Kind.VIEW
    if op_name == "index" and _index_falls_back(fx_node):
        return Kind.EXTERN
    if op_name == "copy" and len(fx_node.args) > 1 and isinstance(
            fx_node.args[1], torch.fx.Node) and _op_name(fx_node.args[1]) == "lift_fresh_copy" \
            and _host_constant(fx_node.args[1]):
        return Kind.EXTERN
    if kind is Kind.TEMPLATE and outer_product(fx_node, size):
        return Kind.POINTWISE
    source = fx_node.args[0].meta.get("val") if fx_node.args and isinstance(
        fx_node.args[0], torch.fx.Node) else None
    if op_name in SORTS and isinstance(source, torch.Tensor) and source.dim() > 0:
        length = size(source.shape[_scanned_dim(fx_node) % source.dim()])
        return Kind.REDUCTION if length <= MAX_TRITON_SORT else Kind.EXTERN
    if op_name in ("scatter", "scatter_add", "scatter_reduce") and len(fx_node.args) > 3:
        src = fx_node.args[3]
        if not isinstance(src, torch.fx.Node):
            return kind
        reduce = fx_node.args[4] if len(fx_node.args) > 4 else fx_node.kwargs.get("reduce")
        if op_name == "scatter_reduce" and reduce != "sum":
            return Kind.EXTERN
        if src.meta.get("val") is not None and src.meta["val"].dtype in (torch.int64,
                                                                          torch.bool):
            return Kind.EXTERN
    return kind


def outer_product(fx_node: torch.fx.Node, size: Size = size_hint) -> bool:
    """An addmm over an inner dim of 1 that Inductor unfuses: pointwise code. Its post-grad
    pass `unfuse_bias_add_to_pointwise` (fx_passes/post_grad.py, `should_prefer_unfused_addmm`:
    every reader a pointwise op, a bias neither bf16 nor fp16) replaces the addmm by
    `bias + x1 @ x2`, traced with Inductor's whole decomposition table (`replace_by_example`),
    whose `mm` (decomposition.py, off the CPU) rewrites a matmul over an inner dim of 1, M and
    N not 1, as the broadcast multiply `x1 * x2`: no ATen call, inlined into its readers like
    any pointwise op (Decision Transformer's return-to-go embedding, a linear of one
    feature). An mm or bmm itself stays a call: MTIA's keep-list holds them out of the
    table the graph is traced with (records/keep.py)."""
    if fx_node.target is not aten.addmm.default or len(fx_node.args) < 3:
        return False
    bias, mat1, mat2 = (a.meta.get("val") if isinstance(a, torch.fx.Node) else None
                        for a in fx_node.args[:3])
    if not all(isinstance(t, torch.Tensor) for t in (bias, mat1, mat2)) or \
            bias.dtype in (torch.bfloat16, torch.float16):
        return False
    return size(mat1.shape[-1]) == 1 and size(mat1.shape[0]) != 1 and \
        size(mat2.shape[1]) != 1 and bool(live_users(fx_node)) and \
        all(is_pointwise_use(u) for u in live_users(fx_node))


def is_pointwise_use(node: torch.fx.Node) -> bool:
    """Inductor's is_pointwise_use (torch/_inductor/utils.py): an op tagged
    `torch.Tag.pointwise`, or a view (or getitem) all of whose uses are. The tag, not the
    lowering: an adaptive average pool, lowered as pointwise code, is no pointwise use."""
    if node.op != "call_function":
        return False
    if node.target is operator.getitem or classify(node.target) is Kind.VIEW:
        return all(is_pointwise_use(u) for u in live_users(node))
    return torch.Tag.pointwise in getattr(node.target, "tags", ())  # an OpOverload's tags


CONST_FILLS = ("full", "full_like", "zeros", "zeros_like", "ones", "ones_like", "new_full",
               "new_zeros", "new_ones")


def _scatter_upon_const_tensor(fx_node: torch.fx.Node, size: Size) -> bool:
    """A scatter of one scalar into a constant fill (`zeros_like(x).scatter_(dim, index,
    1.0)`: a one-hot), its index one element along `dim` and whole along the others:
    Inductor's joint-graph pattern `scatter_upon_const_tensor` (fx_passes/joint_graph.py,
    `optimize_scatter_upon_const_tensor`, on by default) rewrites it as the pointwise
    `where(index == arange(dim's size), value, fill)`: no store through an index, and its
    readers fuse with it. Inductor's patterns match a fill read by the scatter only."""
    if fx_node.target is not aten.scatter.value or len(fx_node.args) < 4:
        return False
    fill, dim, index = fx_node.args[0], fx_node.args[1], fx_node.args[2]
    if not isinstance(fill, torch.fx.Node) or _op_name(fill) not in CONST_FILLS or \
            len(live_users(fill)) != 1 or not isinstance(index, torch.fx.Node):
        return False
    out, selector = fx_node.meta.get("val"), index.meta.get("val")
    if not isinstance(out, torch.Tensor) or not isinstance(selector, torch.Tensor) or \
            selector.dim() != out.dim() or out.dim() == 0:
        return False
    dim = int(dim) % out.dim()
    return size(selector.shape[dim]) == 1 and all(
        size(s) >= size(o) for i, (s, o) in enumerate(zip(selector.shape, out.shape,
                                                           strict=True)) if i != dim)


def _index_falls_back(fx_node: torch.fx.Node) -> bool:
    """Inductor's `index` lowering calls aten.index when an index is a mask (bool or uint8:
    its output size depends on the data) or lives on another device than the data: a
    tensor the model code made without a device (`torch.tensor([-2])`), which the graph
    holds as a lifted host constant (`check_and_broadcast_indices`: "Fallback when indices
    is on a different device"); the constant is then the call's input, no kernel copies it."""
    indices = fx_node.args[1] if len(fx_node.args) > 1 else ()
    for index in indices if isinstance(indices, (list, tuple)) else ():
        if not isinstance(index, torch.fx.Node):
            continue
        val = index.meta.get("val")
        if isinstance(val, torch.Tensor) and val.dtype in (torch.bool, torch.uint8):
            return True
        if _op_name(index) == "lift_fresh_copy" and _host_constant(index):
            return True
    return False


def _host_constant(lifted: torch.fx.Node) -> bool:
    """Does a lift_fresh_copy lift a tensor constant of the graph (a get_attr)?"""
    return bool(lifted.args) and getattr(lifted.args[0], "op", None) == "get_attr"


def on_host(fx_node: torch.fx.Node) -> bool:
    """Is this 0-dim value computed on the host in Inductor's copy of the graph? That copy
    (compare/plans.py `_device_graph`) leaves a 0-dim tensor constant on the host (a model's
    `torch.tensor(3.0)` made without a device, which eager lets meet device tensors); a
    pointwise op's result is on the device of its first operand (lowering.py
    `make_pointwise`: no operand is on a GPU type, mtia_sim not being one to `is_gpu`), so
    `torch.log(torch.tensor(c))` is host code -- a CPU kernel of its own once realized."""
    val = fx_node.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.dim() != 0:
        return False
    if fx_node.op == "get_attr":
        return True
    if fx_node.op != "call_function" or "device" in fx_node.kwargs or \
            classify(fx_node.target) is not Kind.POINTWISE:
        return False
    first = next((a for a in fx_node.args if isinstance(a, torch.fx.Node)), None)
    return first is not None and on_host(first)


def _reduces_inner(fx_node: torch.fx.Node) -> bool:
    """Does the reduction run over the innermost dims of its input (sum(-1), not sum(1) of a
    3-d tensor)? Only then can one loop nest serve it and a pointwise over its whole input: the
    (numel, rnumel) split of Inductor's SIMD kernels is in memory order."""
    return not _outer_order(fx_node)


def _outer_order(fx_node: torch.fx.Node) -> tuple:
    """() for a reduction over the innermost dims of its input; else (input shape, reduced
    dims): the order in which it reads its input, which two reductions must share to share
    a loop (Inductor reorders a pointwise kernel's loops to fit, never a reduction's)."""
    source = fx_node.args[0].meta.get("val") if fx_node.args else None
    if not isinstance(source, torch.Tensor) or source.dim() == 0:
        return ()
    at = 2 if "linalg_vector_norm" in str(fx_node.target) else 1  # (input, ord, dim)
    dims = fx_node.args[at] if len(fx_node.args) > at else fx_node.kwargs.get("dim")
    if dims is None or dims == []:
        return ()
    dims = [dims] if isinstance(dims, int) else list(dims)
    ndim = source.dim()
    reduced = {d % ndim for d in dims if isinstance(d, int)}
    if not reduced:
        return ()
    kept_after = [d for d in range(min(reduced), ndim) if d not in reduced]
    if all(size_hint(source.shape[d]) == 1 for d in kept_after):
        return ()
    return tuple(size_hint(d) for d in source.shape), tuple(sorted(reduced))


def _rows_permuted(fx_node: torch.fx.Node, size: Size = size_hint) -> bool:
    """Does Inductor loop over the reduction's rows in another order than its output's dims?
    Its loop order follows the strides of what it reads (`pick_loop_order`), and its output,
    laid out flexibly, is stored in that order (`ComputedBuffer.get_fill_order`): a mean over
    the last dim of `x.permute(0, 2, 1, 3)` loops (and stores) dims 0, 2, 1."""
    source = fx_node.args[0].meta.get("val") if fx_node.args and isinstance(
        fx_node.args[0], torch.fx.Node) else None
    if not isinstance(source, torch.Tensor) or source.dim() < 2:
        return False
    at = 2 if "linalg_vector_norm" in str(fx_node.target) else 1
    dims = fx_node.args[at] if len(fx_node.args) > at else fx_node.kwargs.get("dim")
    if dims is None or dims == []:
        return False
    dims = [dims] if isinstance(dims, int) else list(dims)
    reduced = {d % source.dim() for d in dims if isinstance(d, int)}
    strides = [size(source.stride(d)) for d in range(source.dim())
               if d not in reduced and size(source.shape[d]) > 1]
    return any(a < b for a, b in zip(strides, strides[1:], strict=False))


def _gemm_flops(fx_node: torch.fx.Node, size: Size = size_hint) -> float:
    """2*M*N*K for the matmul templates, from the output shape and the inner dimension."""
    if fx_node.target not in TEMPLATES or outer_product(fx_node, size):
        return 0.0
    out = fx_node.meta["val"]
    a = fx_node.args[1] if fx_node.target in (aten.addmm.default, aten.baddbmm.default) \
        else fx_node.args[0]
    k = size(a.meta["val"].shape[-1])
    return 2.0 * _numel(out, size) * k


def scatter_placement(fx_node: torch.fx.Node) -> frozenset | None:
    """The slice a slice_scatter's source fills in its output, described as a read of a
    buffer shaped like the output is ({(sizes, strides, offset)}, contiguous strides); None
    for a strided one (step > 1), whose source positions do not line up with a slice's.
    Inductor's lowering (`slice_scatter`) loads the source at `idx - start` there."""
    out = fx_node.meta.get("val")
    args = list(fx_node.args) + [None] * (6 - len(fx_node.args))
    dim, start, end = args[2] or 0, args[3] or 0, args[4]
    step = args[5] if args[5] is not None else fx_node.kwargs.get("step", 1)
    if not isinstance(out, torch.Tensor) or step != 1 or out.dim() == 0:
        return None
    shape = list(out.shape)
    dim %= len(shape)
    size = shape[dim]
    start = min(size, max(0, start + size if start < 0 else start))
    end = size if end is None else min(size, max(start, end + size if end < 0 else end))
    strides = tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))
    sizes = tuple(shape[:dim] + [end - start] + shape[dim + 1:])
    return frozenset({(sizes, strides, start * strides[dim])})
