"""The meta-stride oracle: does the device lay its results out as PyTorch's fake kernel says?

TorchInductor plans every buffer from fake (meta) tensors on the device and checks the results
of extern kernels against that plan at run time (`assert_size_stride` in its generated wrapper);
`torch.export` and graph capture trust the same metadata. So the device must return, op by op,
the sizes and strides that FakeTensorMode reports for a `mtia_sim` tensor -- which is not always
what the CPU kernel returns (a PrivateUse1 convolution is contiguous, the CPU's follows a
channels-last input).

For one OpInfo and one input layout, `check_op_strides` runs each sample on the device (the
value oracle's device inputs, opinfo.device_sample), recording every aten op that reached the
device with the metadata of its arguments and results; with `backward=True` it also
differentiates the outputs, so backward kernels (convolution_backward, pooling backward) are
recorded too. Then, under FakeTensorMode, on fake tensors on `mtia_sim` with the same sizes,
strides, offsets and shared storages, it runs the sample's function once more (its results
must match) and replays each recorded aten op (each result must match its fake).

"Match" is Inductor's `assert_size_stride` (and `_prims_common.check_significant_strides`):
sizes equal, strides equal in every dimension longer than 1, tensors with no element not
checked; the storage offset must agree too (a view must land where its fake says).

Layouts: "contiguous" (the sample as given), "channels_last" (every 4-D / 5-D tensor in
channels-last order; samples without one do not apply), "noncontiguous" (OpInfo's transform:
each tensor a strided view of a bigger buffer) and "transposed" (the last two dimensions of
each matrix stored column-major). With `backward`, the output gradients are in the layout too.

A sample is skipped, with its reason, when the device raises (the value oracle's business);
an op is not compared when its fake kernel cannot say (data-dependent output, a fake kernel
that refuses the arguments).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections import Counter
from dataclasses import dataclass, field

import torch

from .. import DEVICE
from .._compat import OpOverload, fake_tensor_mode, noncontiguous_like, pytree
from ..backend import MTIATensor, storage_of
from ..backend.aten import dispatch
from .compare import plain
from .opinfo import MAX_SAMPLES, device_sample, samples_of

LAYOUTS = ("contiguous", "channels_last", "noncontiguous", "transposed")
STRIDE_CLASSES = ("match", "mismatch", "skipped")
RESULT = "<result>"  # where a mismatch of the sample's own results is filed


@dataclass
class StrideResult:
    """What the oracle found for one OpInfo in one input layout."""

    name: str  # OpInfo full name
    layout: str  # one of LAYOUTS
    klass: str = "match"  # "match", "mismatch", or "skipped" (nothing could be compared)
    samples: int = 0  # samples run on both sides
    calls: int = 0  # aten calls compared with their fake
    skipped: Counter = field(default_factory=Counter)  # reason -> samples or calls
    # aten op (or RESULT) -> the first mismatch: which output, device and fake metadata
    mismatches: dict[str, str] = field(default_factory=dict)

    @property
    def problem(self) -> str:
        return "; ".join(f"{op}: {what}" for op, what in self.mismatches.items())

    def to_json(self) -> dict:
        return {"name": self.name, "layout": self.layout, "class": self.klass,
                "samples": self.samples, "calls": self.calls, "skipped": dict(self.skipped),
                "mismatches": self.mismatches}


# --- input layouts --------------------------------------------------------------------------


def _channels_last(t: torch.Tensor) -> torch.Tensor:
    formats = {4: torch.channels_last, 5: torch.channels_last_3d}
    if t.dim() not in formats or t.layout != torch.strided:
        return t
    return t.detach().contiguous(memory_format=formats[t.dim()]).requires_grad_(t.requires_grad)


def _transposed(t: torch.Tensor) -> torch.Tensor:
    if t.dim() < 2 or t.layout != torch.strided or t.shape[-1] == 1 or t.shape[-2] == 1:
        return t
    column_major = t.detach().transpose(-1, -2).contiguous().transpose(-1, -2)
    return column_major.requires_grad_(t.requires_grad)


def _noncontiguous(t: torch.Tensor) -> torch.Tensor:
    return noncontiguous_like(t) if t.layout == torch.strided else t


_CONVERT = {"channels_last": _channels_last, "transposed": _transposed,
            "noncontiguous": _noncontiguous}


def in_layout(t: torch.Tensor, layout: str) -> torch.Tensor:
    """One tensor in `layout` (the same tensor when the layout does not apply to it)."""
    return t if layout == "contiguous" else _CONVERT[layout](t)


def sample_in_layout(sample, layout: str):
    """The sample with its tensors in `layout`; None when the layout changes none of them."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; use one of {', '.join(LAYOUTS)}")
    if layout == "contiguous":
        return sample
    changed = []

    def convert(t):
        if not isinstance(t, torch.Tensor):
            return t
        out = _CONVERT[layout](t)
        changed.append(out is not t)
        return out

    out = sample.transform(convert)
    return out if any(changed) else None


# --- what an aten call saw: metadata only, and its replay on fake tensors -----------------


@dataclass(frozen=True)
class TensorSpec:
    """A tensor's metadata; `storage` identifies its memory (tensors sharing it alias)."""

    shape: tuple
    stride: tuple
    offset: int
    dtype: torch.dtype
    device: torch.device
    storage: tuple  # ("device", id of its DeviceStorage) or ("host", data pointer)
    nbytes: int


def spec_of(value):
    """Every tensor in a nested structure replaced by its TensorSpec."""
    def spec(t):
        if not isinstance(t, torch.Tensor) or t.layout != torch.strided:
            return t
        # Keys are compared among the tensors of one call only, all alive at once: unique.
        if isinstance(t, MTIATensor):
            storage = ("device", id(storage_of(t)))
            nbytes = t._inner.untyped_storage().nbytes()
        else:
            storage = ("host", t.untyped_storage().data_ptr())
            nbytes = t.untyped_storage().nbytes()
        return TensorSpec(tuple(t.shape), t.stride(), t.storage_offset(), t.dtype, t.device,
                          storage, nbytes)
    return pytree.tree_map(spec, value)


def fakes_of(specs, mode):
    """Fake tensors (call inside `mode`) with each spec's metadata; specs of one storage get
    views of one fake storage."""
    bases: dict[tuple, torch.Tensor] = {}

    def fake(s):
        if isinstance(s, torch.Tensor):  # sparse and other layouts: no strides to mirror
            return mode.from_tensor(s)
        if not isinstance(s, TensorSpec):
            return s
        base = bases.get(s.storage)
        if base is None:
            base = bases[s.storage] = torch.empty(s.nbytes, dtype=torch.uint8, device=s.device)
        return base.view(s.dtype).as_strided(s.shape, s.stride, s.offset)

    return pytree.tree_map(fake, specs, is_leaf=lambda v: isinstance(v, TensorSpec))


@dataclass
class AtenCall:
    """One aten op that reached the device: its arguments' and results' metadata."""

    func: OpOverload
    args: tuple
    kwargs: dict
    result: object = None


class CallRecorder:
    """Observer for dispatch.py: records every aten call served on the device."""

    def __init__(self) -> None:
        self.calls: list[AtenCall] = []
        self.previous = None

    def __enter__(self) -> CallRecorder:
        self.previous = dispatch.set_observer(self)
        return self

    def __exit__(self, *exc) -> None:
        dispatch.set_observer(self.previous)

    def before_op(self, func, kind, args, kwargs, device_state) -> None:
        self.calls.append(AtenCall(func, spec_of(args), spec_of(kwargs or {})))
        if self.previous is not None:
            self.previous.before_op(func, kind, args, kwargs, device_state)

    def after_op(self, func, kind, result, price, span) -> None:
        if self.calls and self.calls[-1].func is func:
            self.calls[-1].result = spec_of(result)
        if self.previous is not None:
            self.previous.after_op(func, kind, result, price, span)


def _leaves(value) -> list:
    return pytree.tree_leaves(plain(value), is_leaf=lambda v: isinstance(v, TensorSpec))


def layout_difference(actual, expected, inputs=()) -> str:
    """"" if every tensor (or TensorSpec) in `actual` has the layout of its fake in `expected`;
    else one line about the first that has not (Inductor's rule: sizes, then strides of
    dimensions longer than 1, tensors with no element passing; and the dtype). The storage
    offset is compared for results that view an input (`inputs`: the call's arguments): a
    fresh result's offset says nothing, and PyTorch's fake-tensor cache re-creates cached
    fresh results at offset 0 (the uncached first call of `slice_scatter` on a view at
    offset 1 says 1)."""
    viewed = {s.storage for s in _leaves(inputs) if isinstance(s, TensorSpec)}
    act_leaves, exp_leaves = _leaves(actual), _leaves(expected)
    if len(act_leaves) != len(exp_leaves):
        return f"{len(act_leaves)} results on the device vs {len(exp_leaves)} from the fake"
    for i, (act, exp) in enumerate(zip(act_leaves, exp_leaves, strict=True)):
        if not isinstance(exp, torch.Tensor) or not isinstance(act, (torch.Tensor, TensorSpec)):
            continue
        act = act if isinstance(act, TensorSpec) else spec_of(act)
        where = f"output {i}" if len(act_leaves) > 1 else "output"
        if act.shape != tuple(exp.shape):
            return f"{where}: device size {act.shape} vs fake {tuple(exp.shape)}"
        if act.dtype != exp.dtype:
            return f"{where}: device dtype {act.dtype} vs fake {exp.dtype}"
        if 0 in act.shape:
            continue
        differ = [d for d, n in enumerate(act.shape) if n > 1 and act.stride[d] != exp.stride(d)]
        offset_differs = act.storage in viewed and act.offset != exp.storage_offset()
        if differ or offset_differs:
            return (f"{where} {list(act.shape)}: device stride {act.stride} offset {act.offset}"
                    f" vs fake stride {exp.stride()} offset {exp.storage_offset()}")
    return ""


def _on_host(specs):
    """The same specs with every device tensor on the CPU."""
    def host(s):
        if isinstance(s, TensorSpec) and s.device.type != "cpu":
            return dataclasses.replace(s, device=torch.device("cpu"))
        if isinstance(s, torch.device) and s.type != "cpu" or s == DEVICE:
            return torch.device("cpu")
        return s
    return pytree.tree_map(host, specs, is_leaf=lambda v: isinstance(v, TensorSpec))


def _run_fake(func, args, kwargs):
    mode = fake_tensor_mode()
    with mode:
        args, kwargs = fakes_of((args, kwargs), mode)
        return func(*args, **kwargs)


def replay(call: AtenCall) -> tuple[str, str]:
    """Run one recorded call on fakes -> (mismatch, skip reason); both "" when it matches.

    A mismatch says whether it is the device's own: the fake kernel promises this device
    another layout than it promises the CPU ("device-specific"), or it differs from the CPU
    kernel on the CPU too ("also on cpu": the meta kernel departs from eager everywhere)."""
    try:
        expected = _run_fake(call.func, call.args, call.kwargs)
    except Exception as error:  # noqa: BLE001 -- the fake kernel cannot say: not compared
        return "", f"fake {call.func} raised {type(error).__name__}"
    inputs = (call.args, call.kwargs)
    problem = layout_difference(call.result, expected, inputs)
    if not problem:
        return "", ""
    try:
        on_cpu = _run_fake(call.func, *_on_host(inputs))
        also = "also on cpu" if layout_difference(call.result, on_cpu, inputs) else \
            "device-specific"
    except Exception:  # noqa: BLE001 -- no CPU fake to compare with
        also = "no cpu fake"
    return f"{problem} [{also}]", ""


# --- one sample -----------------------------------------------------------------------------


@dataclass
class StrideRun:
    """One sample: `skip` says why it was not run, `mismatches` what differed, by aten op."""

    skip: str = ""
    calls: int = 0
    skipped: Counter = field(default_factory=Counter)
    mismatches: dict[str, str] = field(default_factory=dict)


def _differentiable(sample, inputs) -> tuple:
    """The device inputs, those the CPU sample wants gradients for made leaves that require
    them (views of the same memory: same layout) -> (inputs, leaves)."""
    cpu_leaves = pytree.tree_leaves((sample.input, sample.args, sample.kwargs))
    dev_leaves, spec = pytree.tree_flatten(inputs)
    leaves = []
    for i, (cpu, dev) in enumerate(zip(cpu_leaves, dev_leaves, strict=True)):
        if isinstance(cpu, torch.Tensor) and cpu.requires_grad and isinstance(dev, MTIATensor):
            dev_leaves[i] = dev.detach().requires_grad_(True)
            leaves.append(dev_leaves[i])
    return pytree.tree_unflatten(dev_leaves, spec), leaves


def _backward(outputs, leaves: list, layout: str) -> None:
    """Differentiate the floating outputs with output gradients in `layout`."""
    outs = [o for o in pytree.tree_leaves(plain(outputs))
            if isinstance(o, torch.Tensor) and o.requires_grad and o.grad_fn is not None]
    if not outs or not leaves:
        return
    grads = [in_layout(torch.randn(o.shape, dtype=o.dtype).to(o.device), layout) for o in outs]
    torch.autograd.grad(outs, leaves, grads, allow_unused=True)


def run_sample_strides(fn, sample, op_name: str = "", *, layout: str = "contiguous",
                       backward: bool = False) -> StrideRun:
    """Run `fn` on one CPU sample moved to the device, recording its aten calls (and those of
    its backward); then compare the results, and each call's, with the fake kernels'."""
    run = StrideRun()
    try:
        inputs = device_sample(sample, op_name)
    except Exception as error:  # noqa: BLE001 -- the value oracle reports it
        return StrideRun(skip=f"moving to the device raised {type(error).__name__}")
    leaves: list = []
    if backward:
        inputs, leaves = _differentiable(sample, inputs)
    with CallRecorder() as recorder:
        try:
            value, args, kwargs = inputs
            actual = fn(value, *args, **kwargs)
            if backward:
                _backward(actual, leaves, layout)
        except Exception as error:  # noqa: BLE001 -- the value oracle reports it
            return StrideRun(skip=f"device raised {type(error).__name__}")
    mode = fake_tensor_mode()
    try:
        with mode, torch.no_grad():
            value, args, kwargs = fakes_of(spec_of(inputs), mode)
            expected = fn(value, *args, **kwargs)
        problem = layout_difference(actual, expected, spec_of(inputs))
        if problem:
            run.mismatches[RESULT] = problem
    except Exception as error:  # noqa: BLE001 -- the fake cannot say; the calls still can
        run.skipped[f"fake {op_name or 'function'} raised {type(error).__name__}"] += 1
    for call in recorder.calls:
        problem, skip = replay(call)
        if skip:
            run.skipped[skip] += 1
            continue
        run.calls += 1
        if problem:
            run.mismatches.setdefault(str(call.func), problem)
    return run


def check_op_strides(op, layout: str = "contiguous", *, max_samples: int = MAX_SAMPLES,
                     dtype: torch.dtype = torch.float32, backward: bool = False) -> StrideResult:
    """Compare the device's output layouts with the fake kernels' on the op's samples (its
    functional variant) in one input layout; with `backward`, the backward's calls too."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; use one of {', '.join(LAYOUTS)}")
    result = StrideResult(name=op.full_name, layout=layout)
    backward = backward and op.supports_autograd and dtype.is_floating_point
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            samples = samples_of(op, max_samples=max_samples, dtype=dtype,
                                 requires_grad=backward)
        except Exception as error:  # noqa: BLE001 -- a broken sample generator is CPU-side
            result.klass = "skipped"
            result.skipped[f"samples raised {type(error).__name__}"] += 1
            return result
        for sample in samples:
            try:
                sample = sample_in_layout(sample, layout)
            except RuntimeError as error:  # e.g. sparse tensors: no strides to rearrange
                result.skipped[f"{layout} sample raised {type(error).__name__}"] += 1
                continue
            if sample is None:
                result.skipped[f"no tensor to put in {layout}"] += 1
                continue
            run = run_sample_strides(op.op, sample, op.full_name, layout=layout,
                                     backward=backward)
            if run.skip:
                result.skipped[run.skip] += 1
                continue
            result.samples += 1
            result.calls += run.calls
            result.skipped.update(run.skipped)
            for where, problem in run.mismatches.items():
                result.mismatches.setdefault(where, problem)
    if result.mismatches:
        result.klass = "mismatch"
    elif result.samples == 0:
        result.klass = "skipped"
    return result


__all__ = [
    "LAYOUTS", "RESULT", "STRIDE_CLASSES", "AtenCall", "CallRecorder", "StrideResult",
    "TensorSpec", "check_op_strides", "fakes_of", "in_layout", "layout_difference", "replay",
    "run_sample_strides", "sample_in_layout", "spec_of",
]
