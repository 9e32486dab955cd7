"""Fusion scheduler benchmark: scheduling time on generated graphs, and plans next to Inductor's.

    .venv/bin/python benchmarks/bench_scheduler.py            # 1k and 10k nodes, models
    .venv/bin/python benchmarks/bench_scheduler.py --quick    # 1k nodes only, no 10k Inductor
    .venv/bin/python benchmarks/bench_scheduler.py --ours-only  # 1k and 10k, no Inductor, no models

1. Generated graphs: a transformer-like block (matmul, bias, GELU pieces, a row reduction, a
   broadcast epilogue, residual, every 4th block a layer norm) repeated to ~1k and ~10k aten
   nodes. We time `build_ir` + `schedule` (best of a few runs) and Inductor's `Scheduler`
   constructor (its fusion) on the same graph; lowering time is printed apart. Near-linear
   scaling means time(10k)/time(1k) close to 10.
2. Models (MLP, transformer block, conv net), forward and backward graphs from
   torch.compile(backend="mtia_lab") on the device: kernel count and bytes moved by our plan
   and by Inductor's plan for the device (mtia_lab.compare), both priced by our cost model.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _timing import best_of

import mtia_lab  # noqa: E402,F401
from mtia_lab.compare import compare_compiled  # noqa: E402
from mtia_lab.compare.scheduler_timing import common_graph, keep_as_fallbacks  # noqa: E402
from mtia_lab.compiler import COMPILED, build_ir, schedule, trace  # noqa: E402


def generated(blocks: int, shared_weights: bool = False):
    """A function of `blocks` repeated blocks, and its inputs (about 10 aten nodes a block).

    Each block has its own weights, as layers of a deep model do. With shared_weights=True
    every block reads the same two buffers: a stress case for candidate pairing, where each
    reader of a buffer is paired with up to 64 others (max_fusion_buffer_group_pairwise_
    attempts), so the candidates grow faster than the nodes until that window is full."""
    def fn(x, ws, bs):
        for i in range(blocks):
            h = torch.mm(x, ws[i]) + bs[i]
            h = h * 0.5 * (1 + torch.tanh(h * 0.79))
            h = h - h.mean(-1, keepdim=True)
            x = x + h
            if i % 4 == 3:
                x = F.layer_norm(x, (x.shape[-1],))
        return x

    count = 1 if shared_weights else blocks
    ws = [torch.randn(64, 64) * 0.1 for _ in range(count)]
    bs = [torch.randn(64) for _ in range(count)]
    if shared_weights:
        ws, bs = ws * blocks, bs * blocks
    return fn, (torch.randn(32, 64), ws, bs)




def time_inductor(gm) -> tuple[float, float, int]:
    """(lowering s, scheduler s, kernels) of Inductor on `gm` (Inductor decomps applied)."""
    import torch._inductor.config as inductor_config
    from torch._inductor.debug import DebugContext
    from torch._inductor.graph import GraphLowering
    from torch._inductor.scheduler import Scheduler
    from torch._inductor.virtualized import V
    from torch._subclasses.fake_tensor import FakeTensorMode

    common, args = common_graph(gm)
    fake_mode = FakeTensorMode()
    fake = [fake_mode.from_tensor(a) for a in args]
    with V.set_fake_mode(fake_mode), inductor_config.patch(compile_threads=1), \
            keep_as_fallbacks():
        graph = GraphLowering(common, example_inputs=fake)
        with V.set_graph_handler(graph):
            start = time.perf_counter()
            graph.run(*fake)
            lowered = time.perf_counter()
            with DebugContext(), V.set_debug_handler(DebugContext()):
                scheduler = Scheduler(graph.operations)
            done = time.perf_counter()
    return lowered - start, done - lowered, len(scheduler.nodes)


def bench_generated(sizes: list[int], inductor_sizes: list[int], shared: bool) -> None:
    print(f"\n== scheduling time on generated graphs ({'shared' if shared else 'own'} weights) ==")
    print(f"{'aten nodes':>10} {'build_ir':>10} {'schedule':>10} {'kernels':>8} {'decisions':>9}"
          f"{'Inductor sched':>15} {'(lowering)':>11} {'Ind. kernels':>12} {'Ind./ours':>9}")
    ours_times = {}
    for blocks in sizes:
        fn, args = generated(blocks, shared)
        ir = trace(fn, *args)
        n = len(ir.nodes)
        rounds = 3  # best of 3: the first run at 10k pays for growing the heap
        build = best_of(lambda gm=ir.gm: build_ir(gm), rounds)
        plans = []
        sched = best_of(lambda ir=ir, out=plans: out.append(schedule(ir)), rounds)
        plan = plans[-1]
        ours_times[n] = sched
        row = (f"{n:>10} {build * 1e3:>8.1f}ms {sched * 1e3:>8.1f}ms {plan.kernel_count:>8} "
               f"{len(plan.decisions):>9}")
        if blocks in inductor_sizes:
            lower, ind_sched, ind_kernels = time_inductor(ir.gm)
            row += (f" {ind_sched * 1e3:>13.1f}ms {lower:>10.1f}s {ind_kernels:>12} "
                    f"{ind_sched / sched:>6.1f}x")
        print(row, flush=True)
    if len(ours_times) > 1:
        (n1, t1), (n2, t2) = sorted(ours_times.items())[0], sorted(ours_times.items())[-1]
        print(f"scaling: {n2 / n1:.1f}x the nodes took {t2 / t1:.1f}x the time to schedule")


def model_zoo():
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, c=32, heads=4):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(c), nn.LayerNorm(c)
            self.qkv, self.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
            self.fc1, self.fc2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=-1)
            q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
            att = torch.softmax((q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5, -1)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, c))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    mlp = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 256), nn.ReLU(),
                        nn.Linear(256, 10))
    conv = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 8 * 8, 10))
    return [("mlp", mlp, (32, 64)), ("transformer block", Block(), (4, 16, 32)),
            ("conv net", conv, (4, 3, 16, 16))]


def bench_plans() -> None:
    print("\n== plans on models (bytes by our cost model for both) ==")
    print(f"{'graph':<28}{'unfused':>9}{'ours':>7}{'Inductor':>10}"
          f"{'bytes unfused':>15}{'bytes ours':>12}{'bytes Ind.':>12}{'ours/Ind.':>10}")
    for name, model, shape in model_zoo():
        torch.manual_seed(0)
        model = model.to("mtia_sim")
        x = torch.randn(*shape, device="mtia_sim")
        torch.compiler.reset()
        start = len(COMPILED)
        torch.compile(model, backend="mtia_lab")(x).sum().backward()
        for compiled in COMPILED[start:]:
            c = compare_compiled(compiled)  # Inductor's plan for the device
            o, i, priced = c.ours, c.inductor, c.priced
            label = f"{name} {compiled.name.split('_')[0]}"
            print(f"{label:<28}{o.before.kernels:>9}{o.kernel_count:>7}{i.kernel_count:>10}"
                  f"{o.before.bytes_moved:>15,}{o.bytes_moved:>12,}{priced.bytes_moved:>12,}"
                  f"{o.bytes_moved / priced.bytes_moved:>10.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1k nodes only")
    parser.add_argument("--ours-only", action="store_true",
                        help="time only our scheduler (no Inductor, no model plans)")
    opts = parser.parse_args()
    sizes = [90] if opts.quick else [90, 900]  # ~10 aten nodes per block: ~1k and ~10k
    for shared in (False, True):
        bench_generated(sizes, inductor_sizes=[] if opts.ours_only else sizes, shared=shared)
    if not opts.ours_only:
        bench_plans()


if __name__ == "__main__":
    main()
