"""The Triton kernels Inductor defined for mtia_sim: name, source and the aten nodes of each.

Inductor names a kernel when its Triton scheduling defines it (`define_kernel(src_code,
node_schedule, kernel)`); the hook writes down which scheduler nodes it runs, for the plan
(plan.py) and for the launch records (triton_launch.py reads `kernel_info` at a kernel's first
launch).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .. import _compat as core_compat
from . import _compat
from .fusion_observer import current


@dataclass(frozen=True)
class KernelInfo:
    """What codegen knew about a kernel: registered here when Inductor defines it, read by
    triton_launch.py at the kernel's first launch."""

    name: str  # triton_poi_fused_add_relu_0
    graph: str  # the Inductor graph it belongs to ("forward_3")
    aten_nodes: tuple[str, ...]  # "relu: aten.relu.default", graph order
    nodes: tuple[str, ...]  # the FX node names alone
    source: str  # the @triton.jit function


_INFOS: list[KernelInfo] = []  # newest last


def fx_origins(snodes) -> list:
    """The post-grad FX nodes a list of scheduler nodes computes, in graph order."""
    seen: dict = {}
    for snode in snodes:
        for sub in snode.get_nodes():
            for origin in getattr(getattr(sub, "node", None), "origins", ()) or ():
                seen.setdefault(origin, None)
    return sorted(seen, key=_order)


def _order(fx_node) -> tuple:
    graph = fx_node.graph
    order = getattr(graph, "_mtia_lab_order", None)
    if order is None or fx_node not in order:
        order = graph._mtia_lab_order = {n: i for i, n in enumerate(graph.nodes)}
    return (order.get(fx_node, 1 << 30), fx_node.name)


def describe(fx_node) -> str:
    """"relu: aten.relu.default" -- the form our scheduler's records use."""
    target = fx_node.target
    name = getattr(target, "__name__", str(target))
    if hasattr(target, "overloadpacket"):
        name = f"aten.{target.overloadpacket.__name__}.{core_compat.overload_name(target)}"
    return f"{fx_node.name}: {name}"


def _jit_source(src_code: str, name: str) -> str:
    """The @triton.jit function of a kernel module's source (what a learner reads)."""
    src_code = src_code.replace("Placeholder.KERNEL_NAME", name)  # named after definition
    start = src_code.find("@triton.jit")
    if start < 0:
        return src_code
    end = src_code.find("'''", start)
    return src_code[start:end if end > 0 else None].rstrip()


def kernel_info(name: str, source: str) -> KernelInfo:
    """The newest defined kernel of that name whose source matches (names repeat per graph)."""
    for info in reversed(_INFOS):
        if info.name == name and (not source or source.strip() in info.source
                                  or info.source in source):
            return info
    for info in reversed(_INFOS):
        if info.name == name:
            return info
    return KernelInfo(name, "", (), (), source)


def install() -> None:
    _install_triton()
    _install_cpp()


def _install_triton() -> None:
    cls = _compat.triton_scheduling()
    original = cls.define_kernel
    if getattr(original, "_mtia_lab", False):
        return

    @functools.wraps(original)
    def define_kernel(self, src_code, node_schedule, kernel):
        name = original(self, src_code, node_schedule, kernel)
        c = current()
        if c is not None:
            snodes = [n for n in node_schedule if hasattr(n, "get_nodes")]
            c.kernels.append((name, snodes, src_code))
            origins = fx_origins(snodes)
            _INFOS.append(KernelInfo(name, c.name, tuple(describe(o) for o in origins),
                                     tuple(o.name for o in origins), _jit_source(src_code, name)))
        return name

    define_kernel._mtia_lab = True
    cls.define_kernel = define_kernel


def _install_cpp() -> None:
    """C++ kernels too: a graph for mtia_sim may still compute a host tensor it creates
    itself (`torch.tensor(...)` in model code) in a C++ kernel; the plan names that launch
    as the wrapper calls it (`cpp_fused_log_3`)."""
    cls = _compat.cpp_scheduling()
    original = cls.define_kernel
    if getattr(original, "_mtia_lab", False):
        return

    @functools.wraps(original)
    def define_kernel(self, src_code, nodes, *args, **kwargs):
        name = original(self, src_code, nodes, *args, **kwargs)
        c = current()
        if c is not None:
            c.kernels.append((name, [n for n in nodes if hasattr(n, "get_nodes")], src_code))
        return name

    define_kernel._mtia_lab = True
    cls.define_kernel = define_kernel
