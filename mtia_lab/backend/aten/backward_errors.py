"""Exceptions raised during backward on the device reach the caller, instead of aborting.

Why this exists: PyTorch 2.13's Python device guard (torch/csrc/acc/Module.cpp,
`PythonDeviceGuard`, the only guard a pure-Python backend can register) answers every call by
calling back into Python, `exchangeStream` included, which is `noexcept`. The autograd engine
holds a stream guard for the device while it runs each backward node. When a Python exception
leaves a backward op (our `__torch_dispatch__`: an OOM, a strict-mode refusal, a kernel error) or
a tensor hook, PyTorch throws it as a C++ `python_error` *with the Python error indicator still
set*; unwinding runs the stream guard's destructor, the guard calls into Python with that error
set, the call fails inside a `noexcept` function, and the process aborts (SIGABRT: a Jupyter
kernel dies). Nothing in Python can make that guard safe, and registration is first-wins.

So the Python exception must not leave our code as a Python exception while the engine runs a
node. It is *deferred*: kept here, and the engine is handed a value it refuses in C++ (a plain
C++ exception, no Python error set), which unwinds safely to `run_backward`. There, our engine
subclass re-raises the kept exception, so `loss.backward()` raises the original
`torch.OutOfMemoryError` (or StrictModeError, or the hook's error), with its traceback.
Exceptions raised by `torch.autograd.Function.backward` need none of this (PyTorch clears the
error indicator for those itself).

Covered: our ops in backward, tensor hooks (`register_hook`, post-accumulate-grad hooks),
hooks on autograd Nodes (`y.grad_fn.register_hook(fn)` / `register_prehook`, and so nn.Module
full backward (pre) hooks), saved-tensor unpack hooks (and checkpoint recomputation).
Node types are immutable C types, but every Node hook is stored through one Python function,
`torch.autograd.Function._register_hook`, which is wrapped; a Node hook's error is deferred only
when the node runs for the device (under its guard): on CPU it propagates as PyTorch's own.
"""

from __future__ import annotations

import itertools
import re

import torch

from ... import _compat

_KEPT: dict[int, BaseException] = {}  # id -> the exception a backward node raised
_IDS = itertools.count(1)
_MARK = "mtia_sim_deferred_backward_error_"
_FOUND = re.compile(_MARK + r"(\d+)")
_NOTE = ("(raised during backward on mtia_sim; mtia_lab carried it across PyTorch's device "
         "guard, which aborts the process on a Python exception)")


def defer(error: BaseException) -> object:
    """Keep `error`; return what the engine refuses in C++: an object of a class whose name
    carries the error's id (PyTorch's messages name the type, or the object)."""
    if len(_KEPT) > 64:  # errors whose backward never returned through run_backward
        _KEPT.clear()
    match = _FOUND.search(str(error)) if isinstance(error, (RuntimeError, TypeError)) else None
    if match and int(match.group(1)) in _KEPT:  # PyTorch's refusal of a marker: the original
        error = _KEPT.pop(int(match.group(1)))
    number = next(_IDS)
    _KEPT[number] = error
    kind = type(f"{_MARK}{number}", (), {"__repr__": lambda self: f"<{_MARK}{number}>"})
    return kind()


def in_backward() -> bool:
    """True while the autograd engine runs a node on this thread."""
    return _compat.current_autograd_node() is not None


def surfacing(torch_dispatch):
    """`torch_dispatch`, with exceptions raised in backward deferred (see the module doc)."""

    def dispatch(cls, func, types, args=(), kwargs=None):
        try:
            return torch_dispatch(cls, func, types, args, kwargs)
        except BaseException as error:
            if _compat.current_autograd_node() is None:
                raise
            return defer(error)

    dispatch.__wrapped__ = torch_dispatch
    return dispatch


def surfacing_hook(hook):
    """A tensor hook whose exceptions are deferred like those of backward ops (only the
    engine calls tensor hooks, not always inside a node: a leaf's hooks run before it).

    PyTorch refuses a hook's bad result by setting a Python error (the abort again), except
    for a gradient of another dtype: that is a C++ error naming the hook by its `__name__`.
    So a failed hook renames itself after the kept error and returns such a gradient."""

    def run(*args):
        try:
            result = hook(*args)
            if result is not None and not isinstance(result, torch.Tensor) and args:
                # PyTorch's own check of this raises a Python error: the abort again.
                raise TypeError(f"expected Tensor or None (got {type(result).__name__}) from "
                                f"hook {getattr(hook, '__name__', hook)!r}")
            return result
        except BaseException as error:
            marker = defer(error)
            run.__name__ = type(marker).__name__
            grad = args[0] if args else None
            if isinstance(grad, torch.Tensor):
                other = torch.bool if grad.dtype != torch.bool else torch.uint8
                return torch.empty(0, dtype=other)
            return marker

    run.__wrapped__ = hook
    return run


def surfacing_node_hook(hook):
    """A hook on an autograd Node whose exceptions are deferred when the node runs for the
    device: its result is then a tuple of the wrong length, which PyTorch refuses in C++
    naming the hook. PyTorch refuses a result that is not a tuple of tensors or None with a
    Python error (the abort again), so that check is made here first."""
    if getattr(hook, _SURFACING, False):
        return hook
    name = getattr(hook, "__name__", repr(hook))

    def run(*args):
        run.__name__ = name  # PyTorch names the hook by it in its own refusals
        try:
            return _checked_node_hook_result(hook(*args), name)
        except BaseException as error:
            if not _node_on_device(args):
                raise
            run.__name__ = type(defer(error)).__name__
            grads = args[0] if args else ()
            return (*grads, None)

    run.__wrapped__ = hook
    setattr(run, _SURFACING, True)
    return run


def _checked_node_hook_result(result, name: str):
    """`result` if PyTorch would take it from a Node hook (None, or a tuple of tensors or None);
    else the TypeError PyTorch would raise (python_hook.cpp `check_result`)."""
    if result is None:
        return result
    if not isinstance(result, tuple):
        raise TypeError(f"expected tuple, but hook {name!r} returned {type(result).__name__!r}")
    for item in result:
        if item is not None and not isinstance(item, torch.Tensor):
            raise TypeError(f"expected Tensor or None, but hook {name!r} returned "
                            f"{type(item).__name__!r} in its tuple")
    return result


_SURFACING = "_mtia_sim_surfacing"


def _node_on_device(args) -> bool:
    """Whether the Node whose hook got `args` runs under the device's guard: it is running on
    the device's inputs, or its gradients are on the device."""
    node = _compat.current_autograd_node()
    if node is None:
        return False
    if any(device.type == _compat.DEVICE_NAME for device in _compat.autograd_node_devices(node)):
        return True
    grads = [g for group in args if isinstance(group, tuple) for g in group]
    return any(isinstance(g, torch.Tensor) and g.device.type == _compat.DEVICE_NAME for g in grads)


def surfacing_unpack(unpack):
    """A saved-tensor unpack hook (`saved_tensors_hooks`, non-reentrant checkpointing, whose
    unpack recomputes the forward) whose exceptions in backward are deferred: PyTorch refuses
    a non-tensor result in C++, naming its type."""

    def run(packed):
        try:
            return unpack(packed)
        except BaseException as error:
            if _compat.current_autograd_node() is None:
                raise
            return defer(error)

    run.__wrapped__ = unpack
    return run


def kept_error(error: Exception) -> BaseException | None:
    """The deferred exception a RuntimeError from the engine stands for, if any."""
    match = _FOUND.search(str(error))
    if match:
        return _KEPT.pop(int(match.group(1)), None)
    # A refusal that names nobody (a post-accumulate-grad hook's result): the latest one.
    return _KEPT.pop(max(_KEPT)) if _KEPT else None


def _reraise(error: Exception):
    original = kept_error(error)
    if original is None:
        raise error
    if _NOTE not in getattr(original, "__notes__", ()):
        original.add_note(_NOTE)
    raise original.with_traceback(original.__traceback__) from None


class _Engine(_compat.autograd_engine_class()):
    """PyTorch's autograd engine; a deferred exception comes back out of run_backward."""

    def run_backward(self, *args, **kwargs):
        try:
            return super().run_backward(*args, **kwargs)
        except (RuntimeError, TypeError) as error:  # C++ refusals of our markers are these
            _reraise(error)


def _register_hook(self, hook):
    return _TENSOR.register_hook(self, surfacing_hook(hook))


def _register_post_accumulate_grad_hook(self, hook):
    return _TENSOR.register_post_accumulate_grad_hook(self, surfacing_hook(hook))


_TENSOR = None


def install(tensor_class) -> None:
    """Wrap the device's __torch_dispatch__ and tensor hooks, and install the engine.
    Idempotent."""
    global _TENSOR
    _TENSOR = tensor_class.__mro__[1]  # torch.Tensor
    dispatch = tensor_class.__dict__["__torch_dispatch__"].__func__
    if getattr(dispatch, "__wrapped__", None) is None:
        tensor_class.__torch_dispatch__ = classmethod(surfacing(dispatch))
    tensor_class.register_hook = _register_hook
    tensor_class.register_post_accumulate_grad_hook = _register_post_accumulate_grad_hook
    _compat.wrap_node_hook_registration(surfacing_node_hook)
    _compat.wrap_saved_tensor_unpack_hooks(surfacing_unpack)
    _compat.set_autograd_engine(_Engine)
