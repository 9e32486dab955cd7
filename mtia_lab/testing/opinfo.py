"""The OpInfo oracle: does an op give the same answer on `mtia_sim` as on the CPU?

PyTorch describes every public op in `op_db` (torch.testing._internal.common_methods_invocations):
an `OpInfo` knows how to call the op and yields `sample_inputs` that cover its overloads, shapes,
broadcasting and keyword arguments. CPU is the reference. For one op, `check_op` runs each float32
sample on the CPU, then the same values moved to the device, compares the two results and sorts
the op into one class:

- "native": every aten op the device ran had a native (or view) kernel;
- "fallback": right answers, but some aten op went through the CPU fallback;
- "cpu-fails": the CPU reference itself raised on every sample (nothing to compare against);
- "wrong": the device returned a different value, dtype, shape or device than the CPU;
- "error": the device raised where the CPU did not.

"wrong" and "error" are bugs of the device. Ops whose outputs are random (or uninitialised, like
`empty`) are compared on dtype and shape only.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch.utils import _pytree as pytree

from .. import DEVICE
from ..backend import MTIATensor, dispatch, fallback_counts, storage_of
from ..backend.schema import facts

CLASSES = ("native", "fallback", "cpu-fails", "wrong", "error")
VARIANTS = ("op", "method", "inplace", "out")
MAX_SAMPLES = 8
_RANDOM_ATEN = {"aten::native_dropout.default", "aten::multinomial.default"}
# OpInfo name -> positions in sample.args that the op requires on the host, on every device
# (CUDA too): these stay CPU tensors.
_HOST_ARGS = {"tensor_split": (0,)}


@dataclass
class OpResult:
    """What the oracle found for one OpInfo (or one of its variants)."""

    name: str  # OpInfo full name, e.g. "clamp" or "nn.functional.gelu"
    klass: str  # one of CLASSES
    samples: int = 0  # samples compared (CPU succeeded)
    cpu_failures: int = 0  # samples the CPU reference raised on (skipped)
    random: bool = False  # values not compared
    kinds: dict[str, int] = field(default_factory=dict)  # "native"/"view"/"fallback" -> count
    fallbacks: set[str] = field(default_factory=set)  # aten ops that used the CPU fallback
    problem: str = ""  # first line of the first "wrong"/"error" finding

    def to_json(self) -> dict:
        return {
            "name": self.name, "class": self.klass, "samples": self.samples,
            "cpu_failures": self.cpu_failures, "random": self.random, "kinds": self.kinds,
            "fallbacks": sorted(self.fallbacks), "problem": self.problem,
        }


class _KindRecorder:
    """Observer for dispatch.py: counts how each aten op was served, then passes the call on."""

    def __init__(self, previous) -> None:
        self.previous = previous
        self.kinds: dict[str, int] = {}
        self.fallbacks: set[str] = set()
        self.random = False

    def before_op(self, func, kind, args, kwargs, device_state) -> None:
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        op_facts = facts(func)
        if kind == "fallback":
            self.fallbacks.add(op_facts.name)
        if op_facts.has_generator or op_facts.name in _RANDOM_ATEN:
            self.random = True
        if self.previous is not None:
            self.previous.before_op(func, kind, args, kwargs, device_state)

    def after_op(self, func, kind, result, price, span) -> None:
        if self.previous is not None:
            self.previous.after_op(func, kind, result, price, span)


def to_device(value, device: str = DEVICE):
    """Every tensor in a nested structure moved to `device` with the same values *and layout*:
    each CPU storage is copied once, and every tensor becomes the same view (size, strides,
    offset) of the copy. So a slice keeps the rest of its storage (as_strided reads it), and
    tensors that shared memory on the CPU share it on the device."""
    copies: dict[int, torch.Tensor] = {}

    def move(t):
        if not isinstance(t, torch.Tensor):
            return t
        if t.layout != torch.strided or t.is_conj() or t.is_neg():
            return t.to(device)
        storage = t.untyped_storage()
        if storage.data_ptr() == 0 or storage.nbytes() % t.element_size():
            return t.to(device)
        base = copies.get(storage.data_ptr())
        if base is None:
            host_bytes = torch.empty(0, dtype=torch.uint8).set_(storage)
            base = copies[storage.data_ptr()] = host_bytes.to(device)
        return base.view(t.dtype).as_strided(t.shape, t.stride(), t.storage_offset())

    return pytree.tree_map(move, value)


def device_sample(sample, op_name: str = "") -> tuple:
    """(input, args, kwargs) of a CPU sample, for the device: tensors moved (except the ones the
    op wants on the host) and a factory's `device="cpu"` keyword pointed at the device."""
    keep_on_host = _HOST_ARGS.get(op_name, ())
    moved = to_device((sample.input, sample.args, sample.kwargs))  # one call: aliases survive
    value, args, kwargs = moved
    args = tuple(a if i in keep_on_host else args[i] for i, a in enumerate(sample.args))
    if "device" in kwargs and torch.device(kwargs["device"]).type == "cpu":
        kwargs["device"] = DEVICE
    return value, args, kwargs


def _to_cpu(value):
    return pytree.tree_map(lambda v: v.cpu() if isinstance(v, torch.Tensor) else v, value)


def _plain(value):
    """Named tuples (torch.return_types.max, max_out) and torch.Size compare as tuples."""
    if isinstance(value, tuple) and type(value) is not tuple:
        return tuple(_plain(v) for v in value)
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


def _first_line(error: BaseException) -> str:
    """One line about an error; assert_close's detail lines (mismatch counts) are kept."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    text = "; ".join(lines[:4]) if isinstance(error, AssertionError) else (lines or [""])[0]
    return f"{type(error).__name__}: {text}"


def has_variant(op, variant: str) -> bool:
    """Whether the OpInfo has this variant: op, method, inplace or out."""
    return {"op": True, "method": op.method_variant is not None, "out": op.supports_out,
            "inplace": op.inplace_variant is not None}[variant]


def _on_device(inputs) -> bool:
    """Whether the device run involves the device at all: `torch.arange(3)` does not."""
    value, args, kwargs = inputs
    return kwargs.get("device") == DEVICE or any(
        isinstance(v, MTIATensor) for v in pytree.tree_leaves((value, args, kwargs))
    )


def tolerance_for(op, dtype: torch.dtype) -> dict | None:
    """PyTorch's own tolerance for comparing this op across devices (the toleranceOverride its
    OpInfo gives TestCommon, where test_compare_cpu lives), if it sets one for `dtype`."""
    from torch.testing._internal.common_device_type import toleranceOverride

    for info in op.decorators:
        if getattr(info, "cls_name", None) != "TestCommon" or getattr(info, "device_type", None):
            continue
        if getattr(info, "test_name", None) not in (None, "test_compare_cpu"):
            continue
        for decorator in getattr(info, "decorators", ()):
            if isinstance(decorator, toleranceOverride) and dtype in decorator.d:
                tol = decorator.d[dtype]
                return {"atol": tol.atol, "rtol": tol.rtol}
    return None


def _names_a_device(sample) -> bool:
    """Samples like `x.to("cpu")` ask for a device themselves: results need not be on ours."""
    kwargs = {k: v for k, v in sample.kwargs.items() if k != "device"}
    leaves = pytree.tree_leaves((sample.args, kwargs))
    return any(isinstance(v, (torch.device, str)) and "cpu" in str(v) for v in leaves)


def compare(expected, actual, *, check_values: bool = True, check_device: bool = True,
            tolerance: dict | None = None) -> None:
    """Raise AssertionError if the device result differs from the CPU one: structure, then per
    tensor device, dtype, shape and (unless random) values, NaN == NaN, within assert_close's
    default tolerances for the dtype or `tolerance` (atol, rtol)."""
    exp_leaves, exp_spec = pytree.tree_flatten(_plain(expected))
    act_leaves, act_spec = pytree.tree_flatten(_plain(actual))
    if exp_spec != act_spec:
        raise AssertionError(f"result structure differs: cpu {exp_spec} vs device {act_spec}")
    for i, (exp, act) in enumerate(zip(exp_leaves, act_leaves, strict=True)):
        where = f"result {i}" if len(exp_leaves) > 1 else "result"
        if not isinstance(exp, torch.Tensor):
            if isinstance(act, torch.Tensor) or (check_values and not _same_scalar(exp, act)):
                raise AssertionError(f"{where}: cpu {exp!r} vs device {act!r}")
            continue
        if not isinstance(act, torch.Tensor):
            raise AssertionError(f"{where}: cpu gives a tensor, device {type(act).__name__}")
        if check_device and exp.device.type == "cpu" and act.device.type != DEVICE:
            raise AssertionError(f"{where}: device op returned a tensor on {act.device}")
        if exp.dtype != act.dtype or exp.shape != act.shape:
            raise AssertionError(
                f"{where}: cpu {exp.dtype}{list(exp.shape)} vs device {act.dtype}{list(act.shape)}"
            )
        if check_values:
            torch.testing.assert_close(act.cpu(), exp, equal_nan=True, check_device=False,
                                       msg=lambda m, where=where: f"{where}: {m}",
                                       **(tolerance or {}))


def check_aliasing(expected, actual, cpu_inputs, device_inputs) -> None:
    """A result that is a view of an input on the CPU must be a view of that same input on the
    device: writes through it must reach the input (a copy would silently break that)."""
    owners = {}  # CPU storage pointer -> the device storage its tensor was moved to
    cpu_leaves = pytree.tree_leaves(cpu_inputs)
    dev_leaves = pytree.tree_leaves(device_inputs)
    for cpu, dev in zip(cpu_leaves, dev_leaves, strict=False):
        if isinstance(cpu, torch.Tensor) and isinstance(dev, MTIATensor) and cpu.numel():
            owners[cpu.untyped_storage().data_ptr()] = storage_of(dev)
    exp_leaves = pytree.tree_leaves(_plain(expected))
    act_leaves = pytree.tree_leaves(_plain(actual))
    for i, (exp, act) in enumerate(zip(exp_leaves, act_leaves, strict=True)):
        if not isinstance(exp, torch.Tensor) or not exp.numel() or exp.layout != torch.strided:
            continue
        owner = owners.get(exp.untyped_storage().data_ptr())
        if owner is not None and (not isinstance(act, MTIATensor) or storage_of(act) is not owner):
            raise AssertionError(
                f"result {i} is a view of an input on the CPU but not on {DEVICE} (a copy)"
            )


def _same_scalar(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return a == b


@dataclass
class SampleRun:
    """One sample on both sides; `problem` is set when the device disagrees."""

    cpu_error: str = ""
    problem: str = ""
    klass: str = ""  # "wrong" or "error" when problem is set


def _empty_like(value, device):
    """out= tensors: fresh tensors of the functional result's shapes and dtypes."""
    def empty(t):
        if not isinstance(t, torch.Tensor):
            return t
        return torch.empty(t.shape, dtype=t.dtype, device=device)
    return pytree.tree_map(empty, value)


def _call(fn, inputs: tuple, variant: str, device):
    """Call one variant -> (result, out tensors or None, functional result or None).
    For out=, the functional call gives the shapes of the out tensors."""
    value, args, kwargs = inputs
    if variant != "out":
        return fn(value, *args, **kwargs), None, None
    with torch.no_grad():
        functional = fn(value, *args, **kwargs)
    out = _empty_like(functional, device)
    return fn(value, *args, **kwargs, out=out), out, functional


def run_sample(fn: Callable, sample, recorder: _KindRecorder, *, random: bool,
               variant: str = "op", op_name: str = "", tolerance: dict | None = None,
               ) -> SampleRun:
    """Run `fn` on one sample on the device, then on the CPU, and compare.

    The device copy is made first, so an op that writes to its input cannot change what the
    device sees. In-place variants must return their input, written like the CPU's; `out=`
    variants get fresh tensors of the result's shape on each side, and must fill and return them.
    """
    try:
        dev_inputs = device_sample(sample, op_name)
        move_error = ""
    except Exception as error:  # noqa: BLE001 -- reported below unless the CPU fails too
        move_error = f"moving the inputs to {DEVICE}: {_first_line(error)}"
    try:
        expected, cpu_out, functional = _call(fn, (sample.input, sample.args, sample.kwargs),
                                              variant, "cpu")
        if cpu_out is not None:  # some out= overloads ignore `out` on the CPU too
            compare(functional, cpu_out, check_values=not random, check_device=False)
    except Exception as error:  # noqa: BLE001 -- any CPU failure means "no reference"
        return SampleRun(cpu_error=_first_line(error))
    if move_error:
        return SampleRun(problem=move_error, klass="error")
    previous = recorder.previous = dispatch.set_observer(recorder)
    try:
        actual, out, _ = _call(fn, dev_inputs, variant, DEVICE)
    except Exception as error:  # noqa: BLE001 -- the device raised where the CPU did not
        return SampleRun(problem=_first_line(error), klass="error")
    finally:
        dispatch.set_observer(previous)
    try:
        check_values = not (random or recorder.random)
        check_device = _on_device(dev_inputs) and not _names_a_device(sample)
        compare(_to_cpu(expected), actual, check_values=check_values, check_device=check_device,
                tolerance=tolerance)
        check_aliasing(expected, actual, (sample.input, sample.args, sample.kwargs), dev_inputs)
        if variant == "inplace":
            if actual is not dev_inputs[0]:
                raise AssertionError("in-place variant did not return its input tensor")
            compare(sample.input, dev_inputs[0], check_values=check_values, tolerance=tolerance)
        if variant == "out":
            compare(cpu_out, out, check_values=check_values, tolerance=tolerance)
            returned = pytree.tree_leaves(actual)  # None for ops whose out= returns nothing
            if actual is not None and not all(
                a is b for a, b in zip(returned, pytree.tree_leaves(out), strict=True)
            ):
                raise AssertionError("out= variant did not return the out tensors it was given")
    except AssertionError as error:
        return SampleRun(problem=_first_line(error), klass="wrong")
    return SampleRun()


def samples_of(op, *, max_samples: int = MAX_SAMPLES, seed: int = 0,
               dtype: torch.dtype = torch.float32, noncontiguous: bool = False) -> list:
    """The op's first CPU samples, made reproducibly. `noncontiguous` turns every tensor into a
    strided view of a bigger buffer (same values), the layouts where wrapper bugs hide."""
    torch.manual_seed(seed)
    samples = list(itertools.islice(op.sample_inputs("cpu", dtype), max_samples))
    return [s.noncontiguous() for s in samples] if noncontiguous else samples


def check_op(op, *, max_samples: int = MAX_SAMPLES, variant: str = "op",
             dtype: torch.dtype = torch.float32, noncontiguous: bool = False) -> OpResult:
    """Classify one OpInfo by running its samples (float32 unless `dtype`) on CPU and device.

    variant: "op" (the functional form), "method", "inplace" (`op.inplace_variant`, whose
    written input is compared too) or "out" (`out=` tensors allocated on the device).
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; use one of {', '.join(VARIANTS)}")
    fn = {"op": op.op, "out": op.op if op.supports_out else None,
          "inplace": op.inplace_variant, "method": op.method_variant}[variant]
    name = op.full_name if variant == "op" else f"{op.full_name}[{variant}]"
    result = OpResult(name=name, klass="native", random=op.has_nondeterministic_output)
    if fn is None:
        raise ValueError(
            f"{op.full_name} has no {variant} variant: check op.inplace_variant, "
            "op.method_variant or op.supports_out before asking for it"
        )
    recorder = _KindRecorder(None)
    tolerance = tolerance_for(op, dtype)
    before = fallback_counts()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            samples = samples_of(op, max_samples=max_samples, dtype=dtype,
                                 noncontiguous=noncontiguous)
        except Exception as error:  # noqa: BLE001 -- a broken sample generator is CPU-side
            result.klass, result.problem = "cpu-fails", _first_line(error)
            return result
        for sample in samples:
            run = run_sample(fn, sample, recorder, random=result.random, variant=variant,
                             op_name=op.full_name, tolerance=tolerance)
            if run.cpu_error:
                result.cpu_failures += 1
                result.problem = result.problem or run.cpu_error
                continue
            result.samples += 1
            if run.problem:
                result.klass, result.problem = run.klass, run.problem
                break
    after = fallback_counts()
    result.kinds = dict(recorder.kinds)
    result.random = result.random or recorder.random
    factory_fallbacks = {k for k, n in after.items() if n > before.get(k, 0)}
    result.fallbacks = recorder.fallbacks | factory_fallbacks
    if result.klass in ("wrong", "error"):
        return result
    if result.samples == 0:
        result.klass = "cpu-fails"
        return result
    result.problem = ""
    if result.fallbacks:
        result.klass = "fallback"
    return result


def supported_ops(names: list[str] | None = None, dtype: torch.dtype = torch.float32) -> list:
    """OpInfos from op_db that support `dtype` on CPU; `names` picks by full or short name."""
    from torch.testing._internal.common_methods_invocations import op_db

    ops = [op for op in op_db if dtype in op.supported_dtypes("cpu")]
    if names is None:
        return ops
    wanted = set(names)
    picked = [op for op in ops if op.full_name in wanted or op.name in wanted]
    missing = wanted - {op.full_name for op in picked} - {op.name for op in picked}
    if missing:
        raise ValueError(
            f"not {dtype} OpInfos in op_db: {', '.join(sorted(missing))}. Use OpInfo full names "
            "such as 'nn.functional.gelu' or 'normal.in_place'."
        )
    return picked
