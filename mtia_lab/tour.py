"""The story of notebook 01 in a terminal: `python -m mtia_lab` (see __main__.py).

Each chapter is a function that prints rich output to a console and returns nothing; they
read the same records and use the same views as the notebooks (the views' `__rich__` forms),
so what the terminal shows is what a notebook shows. Fixed seeds: the simulated numbers are
the same at every run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

DEV = "mtia_sim"
NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"  # in a clone of the repo


def tutorials(folder: Path = NOTEBOOK_DIR) -> list[tuple[str, str]]:
    """(file name, title) of each tutorial, in order: the title is the first line of the
    notebook's first markdown cell ("01 · A tour of mtia_lab")."""
    found = []
    for path in sorted(folder.glob("[0-9][0-9]_*.ipynb")):
        try:
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
            first = next(c for c in cells if c["cell_type"] == "markdown")
            title = "".join(first["source"]).splitlines()[0].lstrip("# ").strip()
        except (OSError, ValueError, KeyError, StopIteration, IndexError):
            title = path.stem
        found.append((path.name, title))
    return found


class MLP(nn.Module):
    """Notebook 01's model: two Linear layers with a LayerNorm and a GELU between them."""

    def __init__(self, d_in: int = 2, hidden: int = 64, d_out: int = 2) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, d_out)

    def forward(self, x):
        return self.fc2(self.act(self.norm(self.fc1(x))))


def _title(console, text: str) -> None:
    console.rule(f"[bold]{text}")


def _setup():
    import mtia_lab  # noqa: F401  (registers the device)

    torch.manual_seed(0)
    torch.mtia_sim.manual_seed(0)
    model = MLP().to(DEV)
    x = torch.randn(512, 2, device=DEV)
    y = torch.randint(0, 2, (512,)).to(DEV)
    return model, x, y


def device(console) -> None:
    """A tensor on the device, checked against the CPU."""
    _title(console, "1. a tensor on the device")
    import mtia_lab  # noqa: F401

    torch.manual_seed(0)
    x = torch.randn(2, 3, device=DEV)
    w = torch.randn(3, 4)
    same = torch.allclose((torch.relu(x @ w.to(DEV)) + 1).cpu(), torch.relu(x.cpu() @ w) + 1)
    console.print(x)
    console.print(f"device {x.device}, {torch.mtia_sim.device_count()} devices, "
                  f"{torch.mtia_sim.get_device_name()}; relu(x @ w) + 1 same as the CPU: {same}")


def trace_step(console) -> None:
    """One training step, traced: the per-op summary and the module tree."""
    import mtia_lab
    from mtia_lab.viz import trace_summary, trace_tree

    model, x, y = _setup()
    _title(console, "2. one training step, traced: what reached the device")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with mtia_lab.trace("one SGD step") as step:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    console.print(trace_summary(step, times="sim", sort="count"))
    _title(console, "3. the same step by nn.Module, forward and backward")
    console.print(trace_tree(step, times="sim"))
    console.print(f"events per kind: {step.kinds()}; per phase: {step.phases()}")


def fusion(console) -> None:
    """torch.compile with the mtia_lab backend: the fusion plan of a hand-written GELU."""
    import mtia_lab
    from mtia_lab.viz import fusion_graph

    _title(console, "4. torch.compile(backend=\"mtia_lab\"): eight ops, one fused kernel")

    def gelu_tanh(x):
        return 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x**3)))

    torch.manual_seed(0)
    h = torch.randn(256, 256, device=DEV)
    with mtia_lab.trace("eager") as eager:
        expected = gelu_tanh(h)
    compiled = torch.compile(gelu_tanh, backend="mtia_lab")
    same = torch.allclose(compiled(h).cpu(), expected.cpu(), atol=1e-6)
    console.print(f"eager: {len(eager)} kernels, simulated {eager.sim_us():.2f} us; "
                  f"compiled matches eager: {same}")
    console.print(fusion_graph(mtia_lab.compiler.COMPILED[-1].plan))


def layout(console) -> None:
    """A transpose drawn over its storage: same cells, other strides."""
    import mtia_lab  # noqa: F401
    from mtia_lab.viz import layout_view

    _title(console, "a view over its storage: x.t() reads the cells of x")
    x = torch.arange(12.0, device=DEV).reshape(3, 4)
    console.print(layout_view(x.t(), "xt", x=x))


def memory(console) -> None:
    """The caching allocator after a forward and backward."""
    from mtia_lab.viz import memory_view

    model, x, y = _setup()
    _title(console, "the device's memory after a forward and backward")
    F.cross_entropy(model(x), y).backward()
    console.print(memory_view())


def next_steps(console) -> None:
    """The tutorials, in order, and how to open them."""
    from rich.table import Table

    _title(console, "where next")
    found = tutorials()
    if found:
        console.print(f"The tutorials in {NOTEBOOK_DIR}, in order (open them with `make lab`):")
        table = Table(box=None, show_header=False, pad_edge=False)
        table.add_column(no_wrap=True)
        table.add_column(style="bold")
        for name, title in found:
            table.add_row(name, title)
        console.print(table)
    else:
        console.print("The tutorials are the notebooks/ of the mtia_lab repository.")
    console.print("`python -m mtia_lab --help` lists the chapters this tour can show alone "
                  "(layout, memory, ...).")


CHAPTERS: dict[str, Callable] = {
    "device": device, "trace": trace_step, "fusion": fusion, "layout": layout,
    "memory": memory, "next": next_steps,
}
TOUR = ("device", "trace", "fusion", "next")  # notebook 01's story
