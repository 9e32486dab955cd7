"""A whole-grid tape (tape.py) as one Python function of NumPy calls.

Replaying a tape step by step calls the interpreter builder's method for each step: a handle
object per value, a dtype check per result, a Python loop around it all -- a few microseconds a
step, which for kernels of a hundred steps on small blocks is most of a launch. Here the tape
becomes the source of one function: values are plain NumPy arrays in local variables, and the
steps that make most of a kernel (arithmetic, comparisons, casts, `where`, splats and
broadcasts, pointer arithmetic, loads and stores) are written as the NumPy calls the builder
would make, with the result dtypes the recording run saw. Every other step calls the builder's
own method, as replay does. The results are the builder's, bit for bit: the same NumPy
functions on the same arrays.
"""

from __future__ import annotations

import numpy as np
import triton.language as tl

from .. import _compat
from .builder import GridBuilder

tri = _compat.triton_interpreter()  # Triton's interpreter: what the whole-grid launch builds on

_BINARY = {
    "create_add": "add", "create_fadd": "add", "create_sub": "subtract",
    "create_fsub": "subtract", "create_mul": "multiply", "create_fmul": "multiply",
    "create_fdiv": "divide", "create_precise_divf": "divide", "create_approx_divf": "divide",
    "create_frem": "fmod", "create_srem": "fmod", "create_urem": "fmod",
    "create_and": "bitwise_and", "create_or": "bitwise_or", "create_xor": "bitwise_xor",
    "create_minsi": "minimum", "create_minui": "minimum", "create_minimumf": "minimum",
    "create_maxsi": "maximum", "create_maxui": "maximum", "create_maximumf": "maximum",
    "create_minnumf": "fmin", "create_maxnumf": "fmax",
    **{f"create_icmp{c}": f for c, f in (
        ("SLE", "less_equal"), ("SLT", "less"), ("SGE", "greater_equal"), ("SGT", "greater"),
        ("ULE", "less_equal"), ("ULT", "less"), ("UGE", "greater_equal"), ("UGT", "greater"),
        ("EQ", "equal"), ("NE", "not_equal"))},
    **{f"create_fcmp{o}{c}": f for o in "OU" for c, f in (
        ("LT", "less"), ("GT", "greater"), ("LE", "less_equal"), ("GE", "greater_equal"),
        ("EQ", "equal"), ("NE", "not_equal"))},
}
_UNARY = {"create_exp": "exp", "create_exp2": "exp2", "create_cos": "cos", "create_sin": "sin",
          "create_log": "log", "create_log2": "log2", "create_sqrt": "sqrt",
          "create_precise_sqrt": "sqrt", "create_floor": "floor", "create_ceil": "ceil",
          "create_iabs": "abs", "create_fneg": "negative"}
# Triton's integer division truncates toward zero (IEEE remainder semantics): the interpreter
# computes it as (a - fmod(a, b)) // b, and so does the line written for it
_INTEGER_DIVISION = ("create_idiv", "create_sdiv", "create_udiv")
_CASTS = ("create_si_to_fp", "create_ui_to_fp", "create_fp_to_si", "create_fp_to_ui",
          "create_fp_ext", "create_fp_trunc", "create_int_cast")
_SPECIAL_FLOATS = (tl.bfloat16, tl.float8e5, tl.float8e4nv, tl.float8e4b15, tl.float8e4b8,
                   tl.float8e5b16)


class Memory:
    """The host memory of one launch's tensor arguments, as flat NumPy arrays (made when a load
    or store first asks): a load through a pointer that derives from argument `name` is a
    `take` from that argument's memory, what Triton's interpreter does element by element
    through raw addresses (`_interpreter.load`), ten times faster. Masked lanes may point
    anywhere: their indices are clipped, their values discarded, as the interpreter does."""

    def __init__(self, tensors: dict) -> None:
        self.tensors = tensors
        self.arrays: dict = {}

    def flat(self, name: str, dtype) -> np.ndarray:
        key = (name, dtype)
        array = self.arrays.get(key)
        if array is None:
            tensor = self.tensors[name]
            size = (tensor.untyped_storage().nbytes()
                    - tensor.storage_offset() * tensor.element_size())
            array = self.arrays[key] = _memory_view(tensor.data_ptr(), size, dtype)
        return array

    def base(self, name: str) -> np.uint64:
        return np.uint64(self.tensors[name].data_ptr())


_VIEWS: dict = {}  # (address, bytes, dtype) -> a NumPy view of that host memory


def _memory_view(address: int, size: int, dtype) -> np.ndarray:
    """`size` bytes of host memory at `address` as a flat array of `dtype`. Views are kept
    between launches: one is only looked up through a live tensor's own address and size, so
    the memory it shows is that tensor's (the caching allocator hands out the same blocks
    again and again)."""
    key = (address, size, dtype)
    array = _VIEWS.get(key)
    if array is None:
        import ctypes

        if len(_VIEWS) > 4096:  # bounded: views are cheap to make again
            _VIEWS.clear()
        raw = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(address))
        array = _VIEWS[key] = raw[:size - size % dtype.itemsize].view(dtype)
    return array


def _handle(data, dtype):
    """A TensorHandle without its dataclass checks (the recording run checked these dtypes)."""
    handle = object.__new__(tri.TensorHandle)
    handle.data, handle.dtype, handle.attr = data, dtype, {}
    return handle


class _Writer:
    def __init__(self, recorded: list) -> None:
        self.recorded = recorded
        self.names: dict[str, object] = {"np": np, "_H": _handle, "_load": tri._interpreter.load,
                                         "_store": tri._interpreter.store,
                                         "_bc": np.broadcast_arrays}
        self.origin: dict[int, str] = {}  # pointer slot -> the argument it points into

    def constant(self, value) -> str:
        name = f"k{len(self.names)}"
        self.names[name] = value
        return name

    def dtype(self, slot: int):
        return self.recorded[slot].data.dtype

    def tl_dtype(self, slot: int):
        return self.recorded[slot].dtype

    def fix(self, expression: str, natural, slot: int) -> str:
        """`expression` cast to the recorded dtype of `slot` where NumPy would give another."""
        wanted = self.dtype(slot)
        if natural == wanted:
            return expression
        return f"({expression}).astype({self.constant(wanted)})"


def _arg(writer: _Writer, value, slot_of) -> str:
    slot = slot_of(value)
    if slot is not None:
        return f"_H(s{slot}, {writer.constant(writer.tl_dtype(slot))})"
    return writer.constant(value)


def _natural(ufunc: str, *slots, writer: _Writer):
    samples = [np.zeros(1, writer.dtype(s)) for s in slots]
    return getattr(np, ufunc)(*samples).dtype


def _special(writer: _Writer, name: str, spec: tuple, outs: tuple, slot_of) -> str | None:
    """The NumPy line for a step the builder computes in one NumPy call, or None."""
    slots = [slot_of(a) for a in spec]
    out = f"s{outs[0]}" if outs else None
    if name in _BINARY and None not in slots[:2]:
        a, b = slots[:2]
        if writer.dtype(a) == np.bool_ and writer.dtype(b) == np.bool_ and \
                name not in ("create_and", "create_or", "create_xor"):
            return None  # the builder's 1-bit integer arithmetic (and, or, xor: the same bits)
        fn = _BINARY[name]
        natural = _natural(fn, a, b, writer=writer)
        return f"{out} = " + writer.fix(f"np.{fn}(s{a}, s{b})", natural, outs[0])
    if name in _INTEGER_DIVISION and None not in slots[:2]:  # the builder's create_idiv
        a, b = slots[:2]
        if writer.dtype(a) == np.bool_:
            return None
        natural = _natural("floor_divide", a, b, writer=writer)
        return f"{out} = " + writer.fix(f"(s{a} - np.fmod(s{a}, s{b})) // s{b}", natural, outs[0])
    if name in _UNARY and slots[0] is not None:
        fn = _UNARY[name]
        return f"{out} = " + writer.fix(f"np.{fn}(s{slots[0]})",
                                        _natural(fn, slots[0], writer=writer), outs[0])
    if name == "create_select" and None not in slots[:3]:
        c, a, b = slots[:3]
        natural = np.where(np.zeros(1, bool), np.zeros(1, writer.dtype(a)),
                           np.zeros(1, writer.dtype(b))).dtype
        return f"{out} = " + writer.fix(f"np.where(s{c}, s{a}, s{b})", natural, outs[0])
    if name in _CASTS and slots[0] is not None:
        if writer.tl_dtype(slots[0]) in _SPECIAL_FLOATS or writer.tl_dtype(outs[0]) in \
                _SPECIAL_FLOATS:
            return None
        return f"{out} = s{slots[0]}.astype({writer.constant(writer.dtype(outs[0]))})"
    if name == "create_get_program_id":
        return f"{out} = b.program_ids[{int(spec[0])}]"
    if name == "create_splat" and slots[1] is not None:
        shape = tuple(int(s) for s in spec[0].shape)
        a = f"s{slots[1]}"
        return (f"{out} = np.broadcast_to({a}.reshape(({a}.shape[0],) + {(1,) * len(shape)}), "
                f"({a}.shape[0],) + {shape})")
    if name == "create_broadcast" and slots[0] is not None:
        a = f"s{slots[0]}"
        return f"{out} = np.broadcast_to({a}, ({a}.shape[0],) + {tuple(int(s) for s in spec[1])})"
    if name == "create_expand_dims" and slots[0] is not None:
        rank = writer.recorded[slots[0]].data.ndim
        axis = int(spec[1]) if int(spec[1]) >= 0 else int(spec[1]) + rank
        index = (slice(None),) * (axis + 1) + (None,)
        return f"{out} = s{slots[0]}[{writer.constant(index)}]"
    if name == "create_reshape" and slots[0] is not None:
        a = f"s{slots[0]}"
        return f"{out} = {a}.reshape(({a}.shape[0],) + {tuple(int(s) for s in spec[1])})"
    if name == "create_addptr" and None not in slots[:2]:
        element = writer.tl_dtype(slots[0]).element_ty
        width = max(1, element.primitive_bitwidth // 8)
        return f"{out} = s{slots[0]} + {width} * s{slots[1]}.astype(np.uint64)"
    if name in ("create_masked_load", "create_load", "create_masked_store", "create_store"):
        line = _memory_line(writer, name, spec, outs, slots)
        if line is not None:
            return line
    if name == "create_masked_load" and None not in slots[:2]:
        element = writer.tl_dtype(slots[0]).element_ty
        np_dtype = writer.constant(tri._get_np_dtype(element))
        if len(spec) > 2 and slots[2] is not None:
            return (f"_p, _m, _o = _bc(s{slots[0]}, s{slots[1]}, s{slots[2]}); "
                    f"{out} = _load(_p, _m, _o, {np_dtype})")
        if len(spec) > 2 and spec[2] is not None:
            return None
        return (f"_p, _m = _bc(s{slots[0]}, s{slots[1]}); "
                f"{out} = _load(_p, _m, np.zeros_like(_p, dtype={np_dtype}), {np_dtype})")
    if name == "create_masked_store" and None not in slots[:3]:
        return (f"_p, _v, _m = _bc(s{slots[0]}, s{slots[1]}, s{slots[2]}); "
                f"_store(_p, np.ascontiguousarray(_v), _m)")
    return None


_SAME_POINTER = ("create_splat", "create_broadcast", "create_expand_dims", "create_reshape",
                 "create_trans", "create_addptr")


def _follow_pointers(writer: _Writer, name: str, spec: tuple, outs: tuple, slot_of) -> None:
    """A pointer made from a pointer into argument A (splat, broadcast, offset...) points into
    A too."""
    if name not in _SAME_POINTER or not outs:
        return
    source = slot_of(spec[1] if name == "create_splat" else spec[0])
    if source in writer.origin:
        writer.origin[outs[0]] = writer.origin[source]


def _memory_line(writer: _Writer, name: str, spec: tuple, outs: tuple, slots: list):
    """A load or store through a pointer into a known argument, as a take or a put."""
    pointer = slots[0]
    argument = writer.origin.get(pointer)
    if argument is None:
        return None
    element = writer.tl_dtype(pointer).element_ty
    np_dtype = tri._get_np_dtype(element)
    width = np_dtype.itemsize
    flat = f"mem.flat({argument!r}, {writer.constant(np_dtype)})"
    index = f"((_p - mem.base({argument!r})) // {width}).astype(np.intp)"
    if name in ("create_load", "create_masked_load"):
        out = f"s{outs[0]}"
        if name == "create_load":
            return f"_p = s{pointer}; {out} = {flat}.take({index}, mode='clip')"
        if slots[1] is None:
            return None
        other = "0" if spec[2] is None else (f"s{slots[2]}" if slots[2] is not None else None)
        if other is None:
            return None
        return (f"_p, _m = _bc(s{pointer}, s{slots[1]}); "
                f"{out} = np.where(_m, {flat}.take({index}, mode='clip'), "
                f"np.asarray({other}, {writer.constant(np_dtype)}))")
    if name == "create_store":
        if slots[1] is None:
            return None
        return (f"_p, _v = _bc(s{pointer}, s{slots[1]}); "
                f"np.put({flat}, {index}, _v)")
    if None in slots[1:3]:
        return None
    return (f"_p, _v, _m = _bc(s{pointer}, s{slots[1]}, s{slots[2]}); "
            f"np.put({flat}, {index}[_m], _v[_m])")


def compile_tape(steps: list, inputs: dict, constants: dict, recorded: list):
    """`steps`: the tape's (name, spec, kwargs, out slots, guard) in order, with slot references
    as whole_grid writes them; returns `run(arguments, builder, memory)` (memory: a Memory of
    the launch's tensor arguments), which raises whole_grid's TapeMiss when a guard reads
    another value."""
    from .tape import TapeMiss, _is_slot

    def slot_of(value):
        return value[1] if _is_slot(value) else None

    writer = _Writer(recorded)
    writer.names["TapeMiss"] = TapeMiss
    lines = ["def run(arguments, b, mem):"]
    for name, slot in inputs.items():
        lines.append(f"    s{slot} = arguments[{name!r}].data")
        if recorded[slot].dtype.is_ptr():
            writer.origin[slot] = name
    for slot, handle in constants.items():
        lines.append(f"    s{slot} = {writer.constant(handle.data)}")
    for name, spec, kw, outs, guard in steps:
        line = None if kw else _special(writer, name, spec, outs, slot_of)
        _follow_pointers(writer, name, spec, outs, slot_of)
        if line is None:
            method = writer.constant(getattr(GridBuilder, name))
            args = ", ".join(_arg(writer, a, slot_of) for a in spec)
            kwargs = "".join(f", {k}={_arg(writer, v, slot_of)}" for k, v in kw.items())
            call = f"{method}(b, {args}{kwargs})"
            if name == "check_uniform":
                line = (f"_r = {call}\n    if _r != {writer.constant(guard)}: "
                        f"raise TapeMiss(f'the kernel read {{_r!r}}, recorded {guard!r}')")
            elif len(outs) > 1 or name == "create_np":
                line = f"_r = {call}; " + "; ".join(f"s{s} = _r[{i}].data"
                                                    for i, s in enumerate(outs))
            elif outs:
                line = f"s{outs[0]} = {call}.data"
            else:
                line = call
        lines.append("    " + line)
    lines.append("    return None")
    source = "\n".join(lines)
    namespace = dict(writer.names)
    exec(compile(source, "<whole-grid tape>", "exec"), namespace)
    run = namespace["run"]
    run.source = source
    return run

