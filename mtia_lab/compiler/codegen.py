"""Turn a FusionPlan into Python source, one function per kernel, and compile it with exec.

Each kernel is a function over its input buffers that calls the aten ops of its nodes in graph
order on CPU tensors (the device's memory) and returns the buffers other kernels need. Views
a kernel needs are recomputed inside it (they move no data). The source is kept on the
kernel (`kernel.source`): it is exactly the code that runs.

    def kernel_1(addmm):
        \"\"\"pointwise kernel 1: gelu, mul ...\"\"\"
        gelu = torch.ops.aten.gelu.default(addmm)
        ...
        return (gelu,)

A real backend would emit Triton or C++ here; the plan it reads would be the same. The runner
(runner.py) executes a Program; this module only writes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.fx

from ..backend.runtime.cost import KernelCost
from ..progress import progress
from ..records.plan import FusionPlan, KernelGroup
from .ir import LIKE_FACTORIES, GraphIR


@dataclass
class Kernel:
    """One launch: its generated source, the compiled function and its price."""

    name: str
    group: KernelGroup
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    source: str
    fn: object = field(repr=False)

    @property
    def cost(self) -> KernelCost:
        return self.group.cost

    @property
    def aten_nodes(self) -> tuple[str, ...]:
        return self.group.aten_nodes


@dataclass
class Program:
    """What the runner executes: kernels in order, then the graph's outputs."""

    name: str
    plan: FusionPlan
    inputs: tuple[str, ...]  # graph placeholders, in order
    kernels: list[Kernel]
    outputs: Kernel  # a kernel with no nodes: computes output views from buffers

    @property
    def source(self) -> str:
        return "\n\n".join([k.source for k in self.kernels] + [self.outputs.source])


class _SubgraphBuilder:
    """Copies FX nodes into a new graph, turning outside values into placeholders."""

    def __init__(self, ir: GraphIR, members: set[str]) -> None:
        self.ir = ir
        self.graph = torch.fx.Graph()
        self.env: dict[str, torch.fx.Node] = {}
        self.members = members
        self.inputs: list[str] = []
        self.fx = {n.name: n for n in ir.gm.graph.nodes}

    def value(self, node: torch.fx.Node) -> torch.fx.Node:
        if node.name in self.env:
            return self.env[node.name]
        base = self.ir.base_of.get(node.name)
        # Inputs: buffers from outside, and every graph input (sizes such as `s0` too, when
        # the shapes are symbolic: the kernel gets them as arguments).
        if node.op == "placeholder" or (base == node.name and node.name not in self.members):
            if node.name not in self.inputs:
                self.inputs.append(node.name)
            copy = self.graph.placeholder(node.name)
            copy.meta = dict(node.meta)
        else:  # a view (or getitem of a view): recompute it from its base here
            copy = self.graph.node_copy(node, self.value)
        self.env[node.name] = copy
        return copy

    def bind(self, fx_name: str, buffer: str) -> None:
        """Read FX value `fx_name` from buffer `buffer` (a layout copy of it: layout.py)."""
        self.inputs.append(buffer)
        self.env[fx_name] = self.graph.placeholder(buffer)
        self.env[fx_name].meta = dict(self.fx[fx_name].meta)

    def layout_copy(self, name: str, fx_name: str, channels_last: bool) -> None:
        """Inductor's copy of a convolution's operand into the order it wants (layout.py)."""
        self.env[name] = self.graph.call_function(
            torch.ops.aten.clone.default, (self.value(self.fx[fx_name]),),
            {"memory_format": torch.channels_last if channels_last
             else torch.contiguous_format})

    def call_without_bias(self, fx_name: str, buffer: str) -> None:
        """A convolution's call without its bias, into `buffer`: Inductor adds the bias it
        peeled off in Triton (layout.py `peeled_biases`)."""
        node = self.fx[fx_name]
        args = [None if i == 2 else torch.fx.map_arg(a, self.value)
                for i, a in enumerate(node.args)]
        self.env[buffer] = self.graph.call_function(node.target, tuple(args),
                                                    dict(node.kwargs))
        self.env[buffer].meta = dict(node.meta)

    def bias_add(self, fx_name: str, buffer: str) -> None:
        """The convolution's value: its call's output (`buffer`) plus the bias viewed per
        channel."""
        node = self.fx[fx_name]
        if buffer not in self.env:
            self.inputs.append(buffer)
            self.env[buffer] = self.graph.placeholder(buffer)
            self.env[buffer].meta = dict(node.meta)
        val = node.meta["val"]
        bias = self.graph.call_function(
            torch.ops.aten.view.default,
            (self.value(node.args[2]), [-1] + [1] * (val.dim() - 2)))
        self.env[fx_name] = self.graph.call_function(
            torch.ops.aten.add.Tensor, (self.env[buffer], bias))

    def graph_layout(self, fx_name: str, buffer: str | None = None) -> None:
        """The device's convolution writes its output in the graph's layout, whatever its
        operands' (as Inductor's wrapper asserts); the host's would follow the inputs."""
        val = self.fx[fx_name].meta.get("val")
        buffer = buffer or fx_name
        if isinstance(val, torch.Tensor) and val.is_contiguous():
            self.env[buffer] = self.graph.call_function(
                torch.ops.aten.clone.default, (self.env[buffer],),
                {"memory_format": torch.contiguous_format})

    def copy_member(self, fx_name: str) -> None:
        node = self.fx[fx_name]
        template = self._outside_template(node)
        if template is None:
            self.env[fx_name] = self.graph.node_copy(node, self.value)
            return
        # `zeros_like(x)` takes x's sizes, strides and dtype, never its data, so no kernel
        # stores x for it (ir.py LIKE_FACTORIES): a stand-in with x's metadata takes its place.
        stand_in = self.graph.call_function(
            torch.ops.aten.empty_strided.default,
            (tuple(template.shape), tuple(template.stride())),
            {"dtype": template.dtype, "device": template.device})
        self.env[fx_name] = self.graph.node_copy(
            node, lambda arg: stand_in if arg is node.args[0] else self.value(arg))

    def _outside_template(self, node: torch.fx.Node) -> torch.Tensor | None:
        """The metadata of a like-factory's template when no buffer holds it for this kernel:
        computed by another kernel that does not store it (static sizes only)."""
        if getattr(node.target, "__name__", "").split(".")[0] not in LIKE_FACTORIES:
            return None
        arg = node.args[0] if node.args else None
        if not isinstance(arg, torch.fx.Node) or arg.op == "placeholder":
            return None
        if arg.name in self.env or self.ir.base_of.get(arg.name) in self.members:
            return None
        val = arg.meta.get("val")
        if not isinstance(val, torch.Tensor) or any(
                not isinstance(d, int) for d in (*val.shape, *val.stride())):
            return None
        return val

    def source(self, name: str, docstring: str, outputs: list) -> tuple[str, list[str]]:
        self.graph.output(tuple(outputs))
        code = self.graph.python_code(root_module="self")
        src = code.src.replace("def forward(self, ", f"def {name}(", 1)
        src = src.replace("def forward(self)", f"def {name}()", 1)
        header, body = src.split(":\n", 1)
        src = f'{header.strip()}:\n    """{docstring}"""\n{body.rstrip()}\n'
        return src, code.globals


def _compile(name: str, src: str, globs: dict, gm: torch.fx.GraphModule):
    namespace = dict(globs)
    namespace.setdefault("torch", torch)
    # Constants the graph keeps as attributes (`self._opaque_obj0`: the device's generator,
    # which random ops draw from) are read from the graph module, as its own code would.
    namespace["self"] = gm
    exec(compile(src, f"<mtia_lab kernel {name}>", "exec"), namespace)
    return namespace[name]


def _docstring(group: KernelGroup) -> str:
    ops = ", ".join(a.split(": ")[1].removeprefix("aten.") for a in group.aten_nodes)
    lines = [f"{group.kind} kernel {group.index}: {ops}.",
             f"    reads {group.cost.bytes_read:,} B, writes {group.cost.bytes_written:,} B"
             + (f" (DRAM), {group.cost.sram_bytes:,} B on chip (SRAM)"
                if group.cost.sram_bytes else "")
             + f", {group.duration_us:.2f} us simulated."]
    lines += [f"    from {s}" for s in group.source[:4]]
    # a source line may end in a line continuation or hold quotes: escaped, it stays text
    return "\n".join(lines).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def generate_kernel(group: KernelGroup, ir: GraphIR) -> Kernel:
    members = {fx for n in group.nodes for fx in ir.by_name[n].fx_nodes}
    builder = _SubgraphBuilder(ir, members)
    bound = set()
    for copy in ir.nodes:  # a convolution reads the layout copies of its operands
        readers = {n for n in group.nodes if copy.name in ir.by_name[n].reads}
        if copy.layout_of and readers:  # one matmul copy may serve several (layout.py)
            builder.bind(copy.layout_of[1], copy.name)
            bound |= readers
        if copy.scatter_copy and copy.scatter_copy[0] in group.nodes:  # scatter.py
            builder.bind(copy.scatter_copy[1], copy.name)
    calls = {n.bias_of[0]: n.bias_of[1] for n in ir.nodes if n.bias_of}
    for node_name in group.nodes:
        node = ir.by_name[node_name]
        if node.layout_of:
            builder.layout_copy(node.name, node.layout_of[1], node.channels_last)
        if node.bias_of:
            builder.bias_add(*node.bias_of)
        if node.scatter_copy:
            builder.layout_copy(node.name, node.scatter_copy[1], False)
        for fx_name in node.fx_nodes:
            if fx_name in calls:  # the bias is added by its own node
                builder.call_without_bias(fx_name, calls[fx_name])
                if fx_name in bound:
                    builder.graph_layout(fx_name, calls[fx_name])
                continue
            builder.copy_member(fx_name)
            if fx_name in bound:
                builder.graph_layout(fx_name)
    outputs = [builder.env[b] for b in group.outputs]
    name = f"kernel_{group.index}"
    src, globs = builder.source(name, _docstring(group), outputs)
    inputs = tuple(builder.inputs)
    fn = _compile(name, src, globs, ir.gm)
    return Kernel(name, group, inputs, tuple(group.outputs), src, fn)


def generate_outputs(ir: GraphIR, plan: FusionPlan) -> Kernel:
    """The graph's return values, as views of (or exactly) buffers that kernels produced."""
    builder = _SubgraphBuilder(ir, set())
    out_node = next(n for n in ir.gm.graph.nodes if n.op == "output")
    values = torch.fx.map_arg(out_node.args[0], builder.value)
    builder.graph.output(values)
    code = builder.graph.python_code(root_module="self")
    src = code.src.replace("def forward(self, ", "def graph_outputs(", 1)
    src = src.replace("def forward(self)", "def graph_outputs()", 1)
    group = KernelGroup(-1, (), "view", (), (), KernelCost(), 0.0)
    fn = _compile("graph_outputs", src, code.globals, ir.gm)
    return Kernel("graph_outputs", group, tuple(builder.inputs), (), src, fn)


PROGRESS_FROM = 200  # kernels: a graph this big shows a progress bar while its code is made


def generate(plan: FusionPlan, ir: GraphIR) -> Program:
    groups = progress(plan.groups, desc=f"generating {plan.name}", min_total=PROGRESS_FROM)
    kernels = [generate_kernel(group, ir) for group in groups]
    placeholders = tuple(n.name for n in ir.gm.graph.nodes if n.op == "placeholder")
    return Program(plan.name, plan, placeholders, kernels, generate_outputs(ir, plan))

