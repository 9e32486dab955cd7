"""What compiling a deeply nested module costs, phase by phase, from Dynamo's own metrics.

`compile_cost(depth, engine)` compiles one training step of `Nest(depth)` (a linear layer
inside `depth` levels of modules) and splits the wall time the way Dynamo's
`compilation_metrics` / `bwd_compilation_metrics` records do:

- dynamo: bytecode tracing and guard building (entire frame compile - backend compile);
- aot_autograd: the joint trace and partition (AOTAutograd's cumulative time minus the
  scheduler's share inside it);
- scheduler: Inductor's own cumulative time (engine "inductor"); for the teaching scheduler
  (engine "mtia_lab") the build_ir + schedule + generate of the graph, timed again on the
  recorded graph (Dynamo has no metric for a custom backend's inner steps);
- backward: the backward graph's compile at the first .backward().

It also records the guard count and the longest guard on a parameter: the dotted path
Dynamo checks (`L['self']._modules['child']._modules['child']...`).
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass

import torch

from . import _compat
from .examples import Nest
from .guards import watch
from .records import short_guard

_METRICS = frozenset({"compilation_metrics", "bwd_compilation_metrics"})
PHASES = ("dynamo", "aot_autograd", "scheduler", "backward")


@dataclass(frozen=True)
class CompileCost:
    depth: int
    engine: str
    dynamo_s: float
    aot_autograd_s: float
    scheduler_s: float
    backward_s: float
    guards: int  # Dynamo's guard count for the frame
    graph_ops: int  # ops in Dynamo's graph (the nesting adds none)
    cpu_s: float = 0.0  # this process's CPU time for the whole compile and step: unlike the
    # wall-clock phases, it does not grow when other processes share the cores

    @property
    def total_s(self) -> float:
        return self.dynamo_s + self.aot_autograd_s + self.scheduler_s + self.backward_s


def _ours_scheduler_s(first: int) -> float:
    """build_ir + schedule + generate of the forward graphs compiled since COMPILED[first]."""
    from ..compiler import COMPILED
    from ..compiler.codegen import generate
    from ..compiler.ir import build_ir
    from ..compiler.scheduler import schedule

    total = 0.0
    for graph in COMPILED[first:]:
        if graph.name.startswith("forward"):
            start = time.perf_counter()
            ir = build_ir(graph.gm)
            generate(schedule(ir, graph.name), ir)
            total += time.perf_counter() - start
    return total


def compile_cost(depth: int, engine: str = "mtia_lab", width: int = 8) -> CompileCost:
    """Compile and run one step of Nest(depth) afresh; its cost split by phase (seconds)."""
    if engine not in ("mtia_lab", "inductor"):
        raise ValueError(f"engine={engine!r}: choose 'mtia_lab' or 'inductor'")
    from ..compiler import COMPILED

    torch.compiler.reset()
    model = Nest(depth, width).to("mtia_sim:0")
    x = torch.randn(4, width, device="mtia_sim:0")
    first = len(COMPILED)
    no_cache = _compat.inductor_without_cache() if engine == "inductor" else nullcontext()
    cpu = time.process_time()
    with no_cache, _compat.structured_trace(_METRICS) as records:
        torch.compile(model, backend=engine)(x).sum().backward()
    cpu = time.process_time() - cpu
    forward = next(m["compilation_metrics"] for n, m, _ in records if n == "compilation_metrics")
    backward = next((m["bwd_compilation_metrics"] for n, m, _ in records
                     if n == "bwd_compilation_metrics"), {})
    backend_s = forward["backend_compile_time_s"] or 0.0
    aot_s = (forward["aot_autograd_cumulative_compile_time_us"] or 0) / 1e6
    if engine == "inductor":
        scheduler_s = (forward["inductor_cumulative_compile_time_us"] or 0) / 1e6
    else:
        scheduler_s = _ours_scheduler_s(first)
    return CompileCost(
        depth, engine,
        dynamo_s=forward["entire_frame_compile_time_s"] - backend_s,
        aot_autograd_s=max(aot_s - scheduler_s, 0.0),
        scheduler_s=scheduler_s,
        backward_s=(backward.get("backward_cumulative_compile_time_us") or 0) / 1e6,
        guards=forward["guard_count"], graph_ops=forward["graph_op_count"], cpu_s=cpu)


def deepest_guard(depth: int, width: int = 8) -> str:
    """The longest guard Dynamo states for Nest(depth) (teaching backend): the dotted path
    down to the innermost linear layer's weight."""
    torch.compiler.reset()
    model = Nest(depth, width).to("mtia_sim:0")
    watched = watch(model)
    watched(torch.randn(4, width, device="mtia_sim:0"))
    entry = next(iter(watched.log.entries.values()))
    return max((short_guard(g) for g in entry.user_guards()), key=len)


def per_level(depths: list[int], seconds: list[float]) -> float:
    """Seconds each added level costs: the slope of a least-squares line through the points."""
    mx, my = sum(depths) / len(depths), sum(seconds) / len(seconds)
    return (sum((d - mx) * (s - my) for d, s in zip(depths, seconds, strict=True))
            / sum((d - mx) ** 2 for d in depths))


def growth_rate(depths: list[int], seconds: list[float]) -> float:
    """The exponent k of seconds ~ depth**k, by least squares on log-log (1: linear)."""
    import math

    if len(set(depths)) < 2 or min(depths) < 1:
        raise ValueError(f"growth_rate: depths {list(depths)}: give at least two different "
                         "depths of 1 or more (a line needs two points)")

    xs = [math.log(d) for d in depths]
    ys = [math.log(max(s, 1e-9)) for s in seconds]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return (sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
            / sum((x - mx) ** 2 for x in xs))
