"""The fusion scheduler's guardrails, in the idiom of `torch._inductor.config`.

Read a setting as an attribute (`config.max_fusion_size`), change it for a block or a function
with `config.patch(...)`, or for good with `config.set(...)`. Every value is checked: a wrong
name, type or range raises a ConfigError that names the setting, the value and what is valid.

Each setting is a guardrail of the registry (mtia_lab/records/guardrails.py: name, Inductor
config key, ours or Inductor's, default, valid values). Defaults are Inductor's (torch
2.13), plus three of our own: matmul templates, a value computed once, and the on-chip memory
budget.
Our scheduler nodes are aten ops; Inductor's are the buffers it realized after inlining
single-use pointwise ops while lowering. The scheduler models that inlining (rule
`inlined_while_lowering`), and `max_fusion_size` counts nodes as Inductor does: an inlined op is
part of the node it was inlined into.

    with config.patch(max_fusion_size=8):        # a context manager...
        torch.compile(model, backend="mtia_lab")(x)

    @config.patch(combo_kernels=True)            # ...or a decorator
    def test_combo(): ...
"""

from __future__ import annotations

import contextlib
import sys
import types

from ..records.guardrails import GUARDRAILS, ConfigError

# The teaching scheduler's settings: the guardrails of the registry it models, in its order.
SETTINGS = {name: g for name, g in GUARDRAILS.items() if g.scheduler}


class _Config(types.ModuleType):
    """The module object itself: attribute reads and writes go through the checks."""

    def __getattr__(self, name: str):
        values = self.__dict__.get("_values")
        if values is not None and name in values:
            return values[name]
        raise AttributeError(_unknown(name))

    def __setattr__(self, name: str, value) -> None:
        if name in SETTINGS:
            self._values[name] = SETTINGS[name].check(value)
        elif name in self.__dict__:  # the module's own functions (monkeypatching in tests)
            super().__setattr__(name, value)
        else:
            raise ConfigError(_unknown(name))


def _unknown(name: str) -> str:
    return (f"mtia_lab.compiler.config has no setting {name!r}; valid settings: "
            f"{', '.join(SETTINGS)}")


_values: dict[str, object] = {name: s.default for name, s in SETTINGS.items()}


def set(**changes) -> None:  # noqa: A001  (mirrors config.patch)
    """Change settings for the rest of the process (all checked before any is applied)."""
    checked = _checked(changes)
    _values.update(checked)


def _checked(changes: dict) -> dict:
    for name in changes:
        if name not in SETTINGS:
            raise ConfigError(_unknown(name))
    return {name: SETTINGS[name].check(value) for name, value in changes.items()}


class patch(contextlib.ContextDecorator):
    """Change settings inside a `with` block or a decorated function, then restore them."""

    def __init__(self, changes: dict | None = None, **kwargs) -> None:
        self.changes = _checked({**(changes or {}), **kwargs})
        self._saved: list[dict] = []

    def __enter__(self):
        self._saved.append({name: _values[name] for name in self.changes})
        _values.update(self.changes)
        return self

    def __exit__(self, *exc) -> None:
        _values.update(self._saved.pop())


def snapshot() -> dict[str, object]:
    """The current settings (the scheduler records them in every plan)."""
    return dict(_values)


def on_chip_budget_bytes(profile) -> int:
    """The on-chip budget in bytes: the setting, or the aggregate local memory of the PEs.

    We use `local_memory_per_pe * num_pes` (24 MiB on MTIA v2) rather than the shared SRAM,
    because a fused kernel's intermediates live in the PEs' local memories while it runs."""
    budget = _values["on_chip_memory_budget"]
    return budget if budget is not None else profile.local_memory_per_pe * profile.num_pes


def reset() -> None:
    """Every setting back to its default."""
    _values.update({name: s.default for name, s in SETTINGS.items()})


sys.modules[__name__].__class__ = _Config
