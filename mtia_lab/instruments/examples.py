"""Small models the compile instruments are shown on (notebook 09, tests, benchmarks)."""

from __future__ import annotations

import torch
from torch import nn


class MLPBlock(nn.Module):
    """x + W2 gelu(W1 x): the feed-forward half of a transformer layer (4x wide inside)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(nn.functional.gelu(self.up(x)))


class Stack(nn.Module):
    """`depth` MLP blocks; `wrap` (e.g. checkpointed) is applied to each block."""

    def __init__(self, width: int = 32, depth: int = 3, wrap=None) -> None:
        super().__init__()
        blocks = [MLPBlock(width) for _ in range(depth)]
        self.blocks = nn.Sequential(*(wrap(b) if wrap else b for b in blocks))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


class Nest(nn.Module):
    """A linear layer inside `depth` levels of modules: the parameter of the innermost one is
    `child.child. ... .linear.weight` (the deep-nesting case of the compile benchmark)."""

    def __init__(self, depth: int, width: int = 8) -> None:
        super().__init__()
        if depth < 1:
            raise ValueError(f"depth={depth}: a nest has at least one level")
        if depth == 1:
            self.linear = nn.Linear(width, width)
        else:
            self.child = Nest(depth - 1, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if hasattr(self, "linear"):
            return self.linear(x).relu()
        return self.child(x)


def copy_of(model: nn.Module, device: str = "mtia_sim:0") -> nn.Module:
    """A fresh copy of `model` on `device`, with the same weights (a variant to compare)."""
    import copy

    return copy.deepcopy(model).to(device)
