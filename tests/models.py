"""Small models shared by the tests. Module paths in traces come from the class name: "MLP.fc1"."""

from torch import nn


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))
