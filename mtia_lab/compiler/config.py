"""The fusion scheduler's guardrails, in the idiom of `torch._inductor.config`.

Read a setting as an attribute (`config.max_fusion_size`), change it for a block or a function
with `config.patch(...)`, or for good with `config.set(...)`. Every value is checked: a wrong
name, type or range raises a ConfigError that names the setting, the value and what is valid.

Defaults are Inductor's (torch 2.13), plus one guardrail of our own: the on-chip memory budget.
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
from dataclasses import dataclass


class ConfigError(ValueError):
    """A guardrail was given a name, type or value it does not accept."""


@dataclass(frozen=True)
class Setting:
    name: str
    default: object
    kind: type  # bool or int
    minimum: int | None = None
    allow_none: bool = False
    doc: str = ""

    def valid_range(self) -> str:
        if self.kind is bool:
            return "True or False"
        text = f"an int >= {self.minimum}" if self.minimum is not None else "an int"
        return text + (" or None" if self.allow_none else "")

    def check(self, value: object) -> object:
        if value is None and self.allow_none:
            return None
        ok_type = isinstance(value, bool) if self.kind is bool else (
            isinstance(value, int) and not isinstance(value, bool)
        )
        if not ok_type or (self.minimum is not None and value < self.minimum):
            raise ConfigError(
                f"mtia_lab.compiler.config.{self.name} = {value!r} is invalid: "
                f"expected {self.valid_range()}. {self.doc}"
            )
        return value


SETTINGS = {s.name: s for s in [
    Setting("max_fusion_size", 64, int, 1, doc="Most scheduler nodes one fused kernel may hold."),
    Setting("max_fusion_unique_io_buffers", None, int, 1, allow_none=True,
            doc="Most distinct buffers a fused kernel may read or write (None: no limit)."),
    Setting("score_fusion_memory_threshold", 10, int, 0,
            doc="Fewest bytes two kernels must share for a fusion to be worth it."),
    Setting("max_fusion_buffer_group_pairwise_attempts", 64, int, 1,
            doc="How far apart (in graph order) two users of a buffer may be to be paired."),
    Setting("combo_kernels", False, bool,
            doc="Pack independent small kernels into one launch (Inductor: off by default)."),
    Setting("combo_kernel_max_num_args", 250, int, 1,
            doc="Most arguments one combo kernel may take (each member's reads and writes, "
                "summed)."),
    Setting("combo_kernel_max_num_nodes", 8, int, 1,
            doc="Most kernels one combo kernel may pack."),
    Setting("unroll_reductions_threshold", 8, int, 1,
            doc="Reductions over fewer elements than this run as pointwise code."),
    Setting("loop_ordering_after_fusion", True, bool,
            doc="One last round in which a pointwise kernel may take a reduction's loop order "
                "(Inductor's default in open source)."),
    Setting("matmul_templates", True, bool,
            doc="Ours: a matmul is a template that takes its pointwise epilogue (an MTIA-style "
                "GEMM kernel). False: an ATen call nothing fuses with, as Inductor without "
                "max-autotune."),
    Setting("on_chip_memory_budget", None, int, 0, allow_none=True,
            doc="Bytes of intermediates one kernel may keep on chip (None: the chip profile's "
                "local_memory_per_pe * num_pes)."),
]}


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
