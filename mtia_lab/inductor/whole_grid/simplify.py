"""Peephole rules on a folded tape: steps whose result is another slot's value are dropped.

Inductor writes a reduction over a long axis as a loop of blocks (`for r0_offset in
range(0, r0_numel, R0_BLOCK)`), and the tape holds one copy of the loop body per iteration.
Where the body is guarded by a mask that depends only on the loop index (a padded pooling
window, `constant_pad_nd` folded into a sum), folding (tape.py) turns that mask into a
constant, and for most iterations the constant is all False:

    tmp32 = where(False, tmp30, 0.0)          -> the constant 0.0
    tmp35 = acc + 0.0                         -> acc
    acc   = where(r0_mask & xmask, tmp35, acc) -> acc: the iteration changes nothing

EfficientNet's global pool is such a loop: 50 iterations of a 65-million-lane body, one of
which adds anything. The rules here make the others vanish, bit for bit:

- `where(c, a, b)` with a constant `c` all True is `a`, all False is `b`; `where(c, a, a)` is
  `a`.
- `x + 0` is `x` for integers; for floats when `0` is all -0.0, or when `x` is never -0.0
  (-0.0 + 0.0 is +0.0, so dropping the add could flip a sign). "Never -0.0" is proven along
  the tape: a constant without -0.0, an integer, `a + b` with `a` or `b` never -0.0 (a sum is
  -0.0 only when both terms are), `where` of two such values.
- A pure step repeated with the same arguments (the loop-invariant part of each iteration) is
  the first one's result.
- A step whose arguments all became constants is computed now, as one more constant.

A slot stands for another only where its block shape is the same; the program axis may be 1 in
the stand-in (a constant, the same for every program), as everywhere in a whole-grid run.
"""

from __future__ import annotations

import numpy as np

from .. import _compat
from .builder import GridBuilder
from .codegen import _BINARY, _CASTS, _UNARY

tri = _compat.triton_interpreter()  # Triton's interpreter: what the whole-grid launch builds on

# Steps that read only their arguments: no memory, no program id, nothing the kernel observes.
_PURE = frozenset({*_BINARY, *_UNARY, *_CASTS, "create_select", "create_splat",
                   "create_broadcast", "create_expand_dims", "create_reshape", "create_trans",
                   "create_addptr", "create_bitcast", "create_int_to_ptr", "create_ptr_to_int"})
_ADDS = ("create_add", "create_fadd")


def _slot(value) -> int | None:
    from .tape import _is_slot

    return value[1] if _is_slot(value) else None


def _rename(value, alias: dict):
    slot = _slot(value)
    if slot is None or slot not in alias:
        return value
    return (value[0], alias[slot])


class _Simplifier:
    def __init__(self, constants: dict, recorded: list) -> None:
        self.constants = constants  # slot -> handle; grows as steps fold
        self.recorded = recorded  # slot -> the recording run's handle (shapes, dtypes)
        self.alias: dict[int, int] = {}  # dropped slot -> the slot holding its value
        self.seen: dict = {}  # (name, arguments) of a pure step -> its out slots
        self.no_negative_zero: set[int] = set()

    def constant(self, slot):
        handle = self.constants.get(slot)
        return None if handle is None else handle.data

    def stands_for(self, slot: int, out: int) -> bool:
        """`slot` may replace `out`: the same dtype and block shape (program axis 1 or equal)."""
        have, want = self.recorded[slot], self.recorded[out]
        return (have.dtype == want.dtype and have.data.dtype == want.data.dtype  # Triton's, NumPy's
                and have.data.shape[1:] == want.data.shape[1:]
                and have.data.shape[0] in (1, want.data.shape[0]))

    def never_negative_zero(self, slot: int) -> bool:
        if slot in self.no_negative_zero:
            return True
        data = self.constant(slot)
        if data is None:
            return not np.issubdtype(self.recorded[slot].data.dtype, np.floating)
        return not np.issubdtype(data.dtype, np.floating) or not (
            (data == 0) & np.signbit(data)).any()

    def same_value(self, name: str, slots: list, out: int) -> int | None:
        """The slot whose value step `name` on `slots` computes, or None."""
        if name == "create_select" and None not in slots[:3]:
            cond, a, b = slots[:3]
            mask = self.constant(cond)
            if a == b:
                return a
            if mask is not None and mask.all():
                return a
            if mask is not None and not mask.any():
                return b
        if name in _ADDS and None not in slots[:2]:
            for x, zero in (slots[:2], slots[1::-1]):
                value = self.constant(zero)
                if value is None or value.any():
                    continue
                if name == "create_add" or np.signbit(value).all() or \
                        self.never_negative_zero(x):
                    return x
        return None

    def fold(self, name: str, spec: tuple, kw: dict, outs: tuple) -> bool:
        """Compute a pure step whose arguments are all constants (True when done)."""
        reads = [_slot(a) for a in (*spec, *kw.values()) if _slot(a) is not None]
        if not reads or any(r not in self.constants for r in reads):
            return False

        def value(a):
            slot = _slot(a)
            return a if slot is None else self.constants[slot]

        with np.errstate(all="ignore"):
            result = getattr(GridBuilder, name)(_BUILDER, *[value(a) for a in spec],
                                                **{k: value(v) for k, v in kw.items()})
        results = result if isinstance(result, tuple) else (result,)
        if len(results) != len(outs) or not all(isinstance(r, tri.TensorHandle)
                                                for r in results):
            return False
        for slot, handle in zip(outs, results, strict=True):
            self.constants[slot] = self.recorded[slot] = handle
        return True

    def step(self, step) -> bool:
        """Keep `step` (True), or account for its results otherwise (False)."""
        name, spec, kw, outs, _ = step
        if name not in _PURE or len(outs) != 1:
            return True
        out = outs[0]
        if self.fold(name, spec, kw, outs):
            return False
        slots = [_slot(a) for a in spec]
        same = self.same_value(name, slots, out)
        if same is not None and self.stands_for(same, out):
            self.alias[out] = same
            return False
        try:
            key = (name, spec, tuple(sorted(kw.items())))
            earlier = self.seen.get(key)
        except TypeError:  # an unhashable argument (a list): not deduplicated
            return self.note(name, slots, out)
        if earlier is not None:
            self.alias[out] = earlier
            return False
        self.seen[key] = out
        return self.note(name, slots, out)

    def note(self, name: str, slots: list, out: int) -> bool:
        if name in _ADDS and any(s is not None and self.never_negative_zero(s)
                                 for s in slots[:2]):
            self.no_negative_zero.add(out)
        elif name == "create_select" and None not in slots[1:3] and all(
                self.never_negative_zero(s) for s in slots[1:3]):
            self.no_negative_zero.add(out)
        return True


_BUILDER = GridBuilder()


def simplify(steps: list, constants: dict, recorded: list) -> list:
    """The steps left after the rules above; `constants` gains the steps folded here and
    `recorded` their values."""
    rules = _Simplifier(constants, recorded)
    kept = []
    for name, spec, kw, outs, guard in steps:
        spec = tuple(_rename(a, rules.alias) for a in spec)
        kw = {k: _rename(v, rules.alias) for k, v in kw.items()}
        step = (name, spec, kw, outs, guard)
        if rules.step(step):
            kept.append(step)
    return kept
