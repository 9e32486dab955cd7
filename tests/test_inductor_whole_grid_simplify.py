"""Peephole rules on whole-grid tapes (mtia_lab/inductor/whole_grid/simplify.py): loop
iterations that a constant mask turns off vanish from the tape, and what is left computes what
Triton's interpreter computes, bit for bit (signs of zero included)."""

import torch

import mtia_lab  # noqa: F401  (sets Triton's interpreter switch before triton is imported)
from mtia_lab.inductor import install_hooks, whole_grid

install_hooks()

import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def padded_window_sum(x_ptr, out_ptr, r_numel, WINDOW: tl.constexpr, XBLOCK: tl.constexpr,
                      RBLOCK: tl.constexpr):
    """Inductor's shape of a pooling window that padding mostly fills: only r < WINDOW adds."""
    rows = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    x = tl.load(x_ptr + rows)
    acc = tl.full([XBLOCK, RBLOCK], 0, tl.float32)
    for r_offset in range(0, r_numel, RBLOCK):
        r = r_offset + tl.arange(0, RBLOCK)[None, :]
        inside = r < WINDOW
        value = tl.where(inside, tl.exp(-x) + x, 0.0)  # the loop-invariant part repeats
        total = acc + tl.broadcast_to(value, [XBLOCK, RBLOCK])
        acc = tl.where(r < r_numel, total, acc)
    tl.store(out_ptr + rows, tl.sum(acc, 1)[:, None])


@triton.jit
def add_masked_zero(x_ptr, out_ptr, BLOCK: tl.constexpr):
    """x + where(False, 1, 0): the add of +0.0 must stay (it turns -0.0 into +0.0)."""
    lanes = tl.arange(0, BLOCK)
    offs = tl.program_id(0) * BLOCK + lanes
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x + tl.where(lanes < 0, 1.0, 0.0))  # a constant mask, all False


def _tape_of(kernel, grid, args, constexprs, tapes=None):
    tapes = {} if tapes is None else tapes
    whole_grid.run(kernel, grid, args, constexprs, tapes)
    (tape,) = tapes.values()
    return tape


def _count(tape, name: str) -> int:
    return sum(step[0] == name for step in tape.steps)


def test_iterations_a_constant_mask_turns_off_leave_the_tape():
    x = torch.randn(64)
    constexprs = {"WINDOW": 3, "XBLOCK": 16, "RBLOCK": 8}
    expected = torch.zeros(64)
    padded_window_sum[(4,)](x, expected, 80, **constexprs)  # Triton's interpreter

    out, tapes = torch.zeros(64), {}
    tape = _tape_of(padded_window_sum, (4,), (x, out, 80), constexprs, tapes)
    assert torch.equal(out, expected)
    torch.testing.assert_close(out, 3 * (torch.exp(-x) + x))
    # ten iterations were recorded; one adds anything, and its invariant part is computed once
    assert _count(tape, "create_fadd") == 2  # exp(-x) + x, and acc + value
    assert _count(tape, "create_exp") == 1

    again = torch.zeros(64)
    whole_grid.STATS.reset()
    assert _tape_of(padded_window_sum, (4,), (x, again, 80), constexprs, tapes) is tape
    assert whole_grid.STATS.replayed == 1
    assert torch.equal(again, expected)  # the simplified tape, replayed


def test_adding_a_masked_zero_keeps_the_sign_of_zero():
    x = torch.tensor([-0.0, 0.0, -1.5, 2.0] * 4)
    expected = torch.empty(16)
    add_masked_zero[(2,)](x, expected, BLOCK=8)
    out = torch.empty(16)
    tape = _tape_of(add_masked_zero, (2,), (x, out), {"BLOCK": 8})
    assert torch.equal(out.signbit(), expected.signbit())
    assert not out[0].signbit()  # -0.0 + 0.0 is +0.0
    assert _count(tape, "create_fadd") == 1  # x may be -0.0: the add is kept
