"""The OpInfo oracle: does an op give the same answer on `mtia_sim` as on the CPU?

PyTorch describes every public op in `op_db` (torch.testing._internal.common_methods_invocations):
an `OpInfo` knows how to call the op and yields `sample_inputs` that cover its overloads, shapes,
broadcasting and keyword arguments. CPU is the reference. For one op, `check_op` runs each
sample (float32 unless asked) on the CPU, then the same values moved to the device, compares the
two results and sorts the op into one class:

- "native": every aten op the device ran had a native (or view) kernel;
- "fallback": right answers, but some aten op went through the CPU fallback;
- "cpu-fails": the CPU reference itself raised on every sample (nothing to compare against);
- "wrong": the device returned a different value, dtype, shape or device than the CPU;
- "error": the device raised where the CPU did not.

"wrong" and "error" are bugs of the device. Ops whose outputs are random (or uninitialised, like
`empty`) are compared on dtype and shape only. What "the same answer" means is compare.py.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .. import DEVICE
from .._compat import opinfo_db, pytree
from ..backend import MTIATensor, fallback_counts
from ..backend.aten import dispatch, layouts
from ..backend.aten.schema import facts
from .compare import check_aliasing, compare, to_cpu, to_device, tolerance_for

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


def _on_device(inputs) -> bool:
    """Whether the device run involves the device at all: `torch.arange(3)` does not."""
    value, args, kwargs = inputs
    return kwargs.get("device") == DEVICE or any(
        isinstance(v, MTIATensor) for v in pytree.tree_leaves((value, args, kwargs))
    )


def _names_a_device(sample) -> bool:
    """Samples like `x.to("cpu")` ask for a device themselves: results need not be on ours."""
    kwargs = {k: v for k, v in sample.kwargs.items() if k != "device"}
    leaves = pytree.tree_leaves((sample.args, kwargs))
    return any(isinstance(v, (torch.device, str)) and "cpu" in str(v) for v in leaves)


def first_line(error: BaseException) -> str:
    """One line about an error; assert_close's detail lines (mismatch counts) are kept."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    text = "; ".join(lines[:4]) if isinstance(error, AssertionError) else (lines or [""])[0]
    return f"{type(error).__name__}: {text}"


def has_variant(op, variant: str) -> bool:
    """Whether the OpInfo has this variant: op, method, inplace or out."""
    return {"op": True, "method": op.method_variant is not None, "out": op.supports_out,
            "inplace": op.inplace_variant is not None}[variant]


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
        move_error = f"moving the inputs to {DEVICE}: {first_line(error)}"
    try:
        expected, cpu_out, functional = _call(fn, (sample.input, sample.args, sample.kwargs),
                                              variant, "cpu")
        if cpu_out is not None:  # some out= overloads ignore `out` on the CPU too
            compare(functional, cpu_out, check_values=not random, check_device=False)
    except Exception as error:  # noqa: BLE001 -- any CPU failure means "no reference"
        return SampleRun(cpu_error=first_line(error))
    if variant in ("op", "out"):
        expected = in_device_conventions(op_name, sample, expected)
        if cpu_out is not None:
            cpu_out = in_device_conventions(op_name, sample, cpu_out)
    if move_error:
        return SampleRun(problem=move_error, klass="error")
    previous = recorder.previous = dispatch.set_observer(recorder)
    try:
        actual, out, _ = _call(fn, dev_inputs, variant, DEVICE)
    except Exception as error:  # noqa: BLE001 -- the device raised where the CPU did not
        return SampleRun(problem=first_line(error), klass="error")
    finally:
        dispatch.set_observer(previous)
    try:
        check_values = not (random or recorder.random)
        check_device = _on_device(dev_inputs) and not _names_a_device(sample)
        compare(to_cpu(expected), actual, check_values=check_values, check_device=check_device,
                tolerance=tolerance)
        check_aliasing(expected, actual, (sample.input, sample.args, sample.kwargs), dev_inputs)
        _compare_arguments((sample.input, sample.args, sample.kwargs), dev_inputs,
                           check_values, tolerance)
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
        return SampleRun(problem=first_line(error), klass="wrong")
    return SampleRun()


def in_device_conventions(op_name: str, sample, expected):
    """The CPU's answer put in the device's conventions where the device departs from the CPU
    on purpose, to give what PyTorch's fake kernel promises for it (backend/aten/layouts.py: e.g.
    BatchNorm's eval statistics per channel, as on CUDA, where the CPU's are empty)."""
    overload = SIZE_CONVENTIONS.get(op_name)
    if overload is None:
        return expected
    args = (sample.input, *sample.args)
    return layouts.RULES[overload](overload, args, dict(sample.kwargs), expected)


# OpInfos that are one aten op whose results differ in size from the CPU's on the device.
SIZE_CONVENTIONS = {
    "native_batch_norm": torch.ops.aten.native_batch_norm.default,
    "_native_batch_norm_legit": torch.ops.aten._native_batch_norm_legit.default,
}


def _compare_arguments(cpu_inputs, dev_inputs, check_values: bool, tolerance) -> None:
    """Every tensor argument ends as on the CPU: an op that writes to arguments besides its
    result (BatchNorm's running statistics, optimizer state, `out` lists) must write them all."""
    cpu_leaves, dev_leaves = pytree.tree_leaves(cpu_inputs), pytree.tree_leaves(dev_inputs)
    for i, (cpu, dev) in enumerate(zip(cpu_leaves, dev_leaves, strict=True)):
        if isinstance(cpu, torch.Tensor) and isinstance(dev, MTIATensor):
            try:
                compare(cpu, dev, check_values=check_values, check_device=False,
                        tolerance=tolerance)
            except AssertionError as error:
                raise AssertionError(f"argument {i} after the op: {error}") from None


def samples_of(op, *, max_samples: int = MAX_SAMPLES, seed: int = 0,
               dtype: torch.dtype = torch.float32, noncontiguous: bool = False,
               requires_grad: bool = False) -> list:
    """The op's first CPU samples, made reproducibly. `noncontiguous` turns every tensor into a
    strided view of a bigger buffer (same values), the layouts where wrapper bugs hide;
    `requires_grad` asks the OpInfo for inputs to differentiate (its floating tensors)."""
    torch.manual_seed(seed)
    made = op.sample_inputs("cpu", dtype, requires_grad=requires_grad)
    samples = list(itertools.islice(made, max_samples))
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
            result.klass, result.problem = "cpu-fails", first_line(error)
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
    op_db = opinfo_db()

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
