"""The tape: the builder calls of one whole-grid run, recorded, optimized and replayed."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import _compat
from .builder import GridBuilder
from .codegen import Memory, compile_tape
from .simplify import simplify
from .slots import SLOT, is_slot

tri = _compat.triton_interpreter()  # Triton's interpreter: what the whole-grid launch builds on


# --- the tape: the builder calls of one whole-grid run, replayed -------------------------------
_RECORDED = tuple(sorted(
    name for name in dir(GridBuilder)
    if (name.startswith("create_") or name in ("check_uniform", "get_null_value",
                                              "get_all_ones_value") or
        (name.startswith("get_") and not name.endswith("_ty") and name not in
         ("get_cache_policy", "get_element_ty"))) and callable(getattr(GridBuilder, name))))


@dataclass
class Tape:
    """Builder calls in order; each reads slots (earlier results, arguments, constants) and
    fills slots. `guards` are calls whose Python value the kernel acted on."""

    inputs: dict = field(default_factory=dict)  # kernel argument name -> slot
    constants: dict = field(default_factory=dict)  # slot -> handle made outside the builder
    steps: list = field(default_factory=list)  # (method name, args, kwargs, out slots, guard)
    slots: int = 0
    run: Callable | None = None  # the steps as one function (codegen.py), once optimized


class Recorder:
    """Watches one whole-grid run and writes its tape (see GridBuilder: RecordingBuilder)."""

    def __init__(self) -> None:
        self.tape = Tape()
        self.slot_of: dict[int, int] = {}
        self.alive: list = []  # keeps recorded handles alive: their ids stay theirs
        self.valid = True
        self.depth = 0

    def slot(self, handle) -> int:
        slot = self.slot_of.get(id(handle))
        if slot is None:  # made outside the builder: a constant of the kernel
            slot = self._new(handle)
            self.tape.constants[slot] = handle
        return slot

    def _new(self, handle) -> int:
        slot = self.tape.slots
        self.tape.slots += 1
        self.slot_of[id(handle)] = slot
        self.alive.append(handle)
        return slot

    def _arg(self, value):
        if isinstance(value, tri.TensorHandle):
            return (SLOT, self.slot(value))
        if isinstance(value, (list, tuple)) and any(isinstance(v, tri.TensorHandle)
                                                    for v in value):
            self.valid = False  # handles inside containers: not recorded
        return value

    def add(self, name: str, args: tuple, kwargs: dict, result) -> None:
        spec = tuple(self._arg(a) for a in args)
        kw = {k: self._arg(v) for k, v in kwargs.items()}
        results = result if isinstance(result, tuple) else (result,)
        outs = tuple(self._new(r) for r in results if isinstance(r, tri.TensorHandle))
        guard = result if name == "check_uniform" else None
        self.tape.steps.append((name, spec, kw, outs, guard))


def _recorded(name: str):
    """The builder's method `name`, recorded. Looked up at each call, not once here: a method
    patched after this module is imported (inductor/_compat.py's bfloat16 rounding) must
    record what a replay computes."""

    @functools.wraps(getattr(GridBuilder, name))
    def call(self, *args, **kwargs):
        recorder = self.recorder
        recorder.depth += 1
        try:
            result = getattr(GridBuilder, name)(self, *args, **kwargs)
        finally:
            recorder.depth -= 1
        if recorder.depth == 0:  # nested calls (get_bf16 -> create_fp_trunc) replay inside
            recorder.add(name, args, kwargs, result)
        return result

    return call


RecordingBuilder = type("RecordingBuilder", (GridBuilder,),
                        {name: _recorded(name) for name in _RECORDED})


_EFFECTS = ("create_masked_store", "create_store", "create_atomic", "create_assert",
            "create_assume", "create_print", "check_uniform", "create_barrier",
            "create_descriptor_store", "create_descriptor_scatter")
_PER_LAUNCH = ("create_get_program_id", "create_get_num_programs")


def _reads(step) -> list[int]:
    _, spec, kw, _, _ = step
    return [a[1] for a in (*spec, *kw.values()) if is_slot(a)]


def optimize(tape: Tape, recorded: list) -> Tape:
    """Fold what no launch changes (steps reading only constants: ranges, constant blocks,
    their casts and broadcasts) into constants, with the values of the recording run
    (`recorded`: slot -> handle), drop steps that repeat or pass on another slot's value
    (simplify.py), drop steps whose results nothing uses, and write the rest as
    one function (codegen.py)."""
    launch_slots = set(tape.inputs.values())
    kept = []
    for step in tape.steps:
        name, _, _, outs, _ = step
        if (name.startswith(_EFFECTS) or name in _PER_LAUNCH
                or any(s in launch_slots for s in _reads(step))):
            launch_slots.update(outs)
            kept.append(step)
        else:
            for slot in outs:
                tape.constants[slot] = recorded[slot]
    kept = simplify(kept, tape.constants, recorded)
    needed: set[int] = set()
    live = []
    for step in reversed(kept):
        if step[0].startswith(_EFFECTS) or any(s in needed for s in step[3]):
            live.append(step)
            needed.update(_reads(step))
    tape.constants = {s: h for s, h in tape.constants.items() if s in needed}
    tape.steps = live[::-1]
    tape.run = compile_tape(tape.steps, tape.inputs, tape.constants, recorded)
    return tape


def replay(tape: Tape, builder: GridBuilder, arguments: dict, memory: Memory) -> None:
    """Run the tape's builder calls on new arguments (name -> handle) and program ids: the
    function codegen.py wrote for it (TapeMiss when a guard reads another value)."""
    tape.run(arguments, builder, memory)
