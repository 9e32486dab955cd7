"""`mtia_lab.trace()`: record every op that reaches the device into a `Trace`.

Three PyTorch hooks feed one recorder, and each answers one question about an op:

- the dispatcher's observer (`dispatch.set_observer`): *what ran* -- the aten overload, how it
  was served, its tensors, memory, host and simulated time. It is called from
  `MTIATensor.__torch_dispatch__`, so it sees aten ops after autograd has had its turn;
- a `TorchFunctionMode`: *which call of the user's* produced it -- the top-level torch function
  (`torch.matmul`, `F.layer_norm`, `Tensor.add`), so the aten ops of a composite stay grouped;
- global nn.Module forward hooks: *under which module* it ran. For backward, the mode notes
  which module created each autograd node; during `.backward()` the running node
  (`torch._C._current_autograd_node`) names the module its ops belong to.

Several traces may be open at once (nested, or several devices): one recorder is installed while
any trace is open and writes each event into every open trace. Whatever observer was installed
before keeps being told about every op.

torch.compile: while Dynamo traces, the mode and the module hooks step aside, so compiled code
is the same inside and outside a trace. Dynamo guards on the TorchFunctionMode stack, though, so
a compiled function or module compiles once more the first time it runs inside a trace (the mode
is on the stack then); both versions stay cached, and later traces reuse the second.
"""

from __future__ import annotations

import functools
import os
import sysconfig
import threading
import time
import weakref
from sys import _getframe
from time import perf_counter_ns

import torch
from torch.overrides import TorchFunctionMode

from .. import _compat
from ..backend.aten import dispatch
from ..backend.aten.amp import active_rule
from ..backend.aten.fallback import reason_for
from ..backend.aten.schema import facts
from ..backend.aten.tensor import MTIATensor
from ..backend.runtime.device_state import RUNTIME
from .events import DispatchPath, OpEvent, TensorRecord, Trace
from .paths import call_name, explain

dispatch_key_bits = _compat.dispatch_key_bits
current_autograd_node = _compat.current_autograd_node
# Dynamo folds these two to True in code it traces (the mode, the module hooks); the observer
# runs below __torch_dispatch__, outside Dynamo, and reads torch.compile's session flag instead.
is_compiling = torch.compiler.is_compiling
is_dynamo_compiling = torch.compiler.is_dynamo_compiling  # False, unless Dynamo is tracing
compile_session = _compat.compile_session  # ._is_compiling_flag: see _compat
is_grad_enabled = torch.is_grad_enabled
is_inference_mode_enabled = torch.is_inference_mode_enabled
_new_event = functools.partial(tuple.__new__, OpEvent)  # OpEvent(...) minus its Python __new__

_SKIP_DIRS = (
    os.path.dirname(torch.__file__),
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),  # mtia_lab
    sysconfig.get_paths()["stdlib"],
    "<frozen",
)
_BACKWARD_CALLS = frozenset({"Tensor.backward", "torch.autograd.backward", "torch.autograd.grad"})
_NO_NODE_SEQ = 1 << 63  # AccumulateGrad and other graph roots have sequence number 2**64-1


@functools.cache
def _is_user_file(filename: str) -> bool:
    return not filename.startswith(_SKIP_DIRS)


def _user_source(frame, sources: dict) -> str:
    """file:line of `frame` or, if it is in torch, mtia_lab or the standard library, of the
    first frame above it that is not. `sources` caches each instruction's answer:
    (id(code), f_lasti) -> (code, "file:line" or ""), the code kept so that its id stays taken.

    The walk starts where the user's call entered torch (see _CallMode), not at the dispatcher:
    stepping through `f_back` makes a Python object of every short-lived frame it passes."""
    while frame is not None:
        code = frame.f_code
        known = sources.get((id(code), frame.f_lasti))
        if known is None:
            text = f"{code.co_filename}:{frame.f_lineno}" if _is_user_file(code.co_filename) else ""
            known = sources[id(code), frame.f_lasti] = (code, text)
        if known[1]:
            return known[1]
        frame = frame.f_back
    return ""


@functools.cache
def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _tensors(values, out: list) -> list:
    """The tensors among `values` (lists and tuples of tensors flattened), in order."""
    for value in values:
        if isinstance(value, torch.Tensor):
            out.append(value)
        elif isinstance(value, (list, tuple)):
            _tensors(value, out)
    return out


class _CallMode(TorchFunctionMode):
    """Notes the top-level torch function the user called; nested calls do not reach a mode
    (it is popped while it handles a call), which is exactly the grouping we want.

    It runs for every torch function, most of which never reach the device (`x.shape`,
    `x.dim()`), so it only opens a call: the recorder fills in the name and source when, and
    if, a device op of the call arrives."""

    def __init__(self, recorder: _Recorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if is_dynamo_compiling():  # Dynamo traces this mode: let it see only the call itself
            return func(*args, **kwargs) if kwargs else func(*args)
        rec = self.recorder
        rec.next_call += 1
        # [what was called, call_id, where it was called, grad, phase]: the first device op of
        # the call (see _Recorder._open) turns the function into its name, the frame into
        # "file:line" and fills in the phase
        call = [func, rec.next_call, _getframe(1), False, ""]
        outer, rec.call = rec.call, call
        try:
            out = func(*args, **kwargs) if kwargs else func(*args)
        finally:
            rec.call = outer
        if call[3]:  # an op of this call recorded autograd history: note whose nodes they are
            module = rec.modules[-1] if rec.modules else ""
            rec.claim(out, (module, call[2]))  # a device op made call[2] a str
        return out


class _PerThread(threading.local):
    """What one thread's ops are in the middle of: other threads may use the device (and the
    autograd engine its own thread) while a trace is open."""

    def __init__(self) -> None:
        self.pending: list[tuple] = []  # before_op facts waiting for their after_op
        self.modules: list[str] = []  # the nn.Module path stack (forward)
        self.call: list | None = None  # [name, call_id, source] of the user's current call


class _Recorder:
    """The one object installed as dispatch observer while traces are open."""

    wants_prices = False  # True while an earlier observer, which may read prices, is chained
    pending = property(lambda self: self.local.pending)
    modules = property(lambda self: self.local.modules)
    call = property(lambda self: self.local.call,
                    lambda self, call: setattr(self.local, "call", call))

    def __init__(self) -> None:
        self.traces: list[tuple[Trace, int]] = []  # (trace, perf_counter_ns at its start)
        self.previous = None  # the observer installed before us: we keep telling it
        self.local = _PerThread()  # pending, modules, call: per thread
        self.module_names: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.node_info: dict[int, tuple[str, str]] = {}  # node sequence nr -> (module, source)
        self.node_floor = 0  # nodes older than the first trace belong to no traced module
        self.next_call = 0
        self.last_node = (-1, 0)  # (sequence nr, call_id) of the last backward node seen
        self.call_names: dict = {}
        self.op_names: dict = {}
        self.paths: dict[tuple, DispatchPath] = {}
        self.records: dict[tuple, tuple[TensorRecord, int]] = {}
        self.seen: dict[int, tuple] = {}  # id(tensor) -> (weakref, entry), see _input_record
        self.shapes: dict[tuple, tuple] = {}
        self.sources: dict[tuple, tuple] = {}  # see _user_source
        self.device_names = [f"{_compat.DEVICE_NAME}:{i}" for i in range(64)]
        self.mode: _CallMode | None = None
        self.handles: list = []

    # -- opening and closing ---------------------------------------------------------------
    def open(self, trace: Trace) -> None:
        try:
            if not self.traces:
                if self.mode is not None or dispatch._OBSERVER is self:
                    self._uninstall()  # what an interrupted open left behind
                self._install()
            self.traces.append((trace, perf_counter_ns()))
        except BaseException:  # a KeyboardInterrupt half-way: leave nothing installed
            if not self.traces:
                self._uninstall()
            raise

    def close(self, trace: Trace, error: BaseException | None) -> None:
        if self.pending:  # ops that raised: their after_op never came
            reason = f"raised {type(error).__name__}: {error}" if error else "raised an error"
            for facts_ in self.pending:
                self._emit(facts_, perf_counter_ns(), (), None, reason.splitlines()[0][:200])
            self.pending.clear()
        start = next((s for t, s in self.traces if t is trace), None)
        if start is None:  # closed already (`__exit__` twice): nothing left to do
            return
        self.traces = [(t, s) for t, s in self.traces if t is not trace]
        trace.metadata["host_duration_ns"] = perf_counter_ns() - start
        if error is not None:
            trace.metadata["error"] = f"{type(error).__name__}: {error}".splitlines()[0][:500]
        if not self.traces:
            self._uninstall()

    def _install(self) -> None:
        # where autograd's node numbering is now, on this thread (inference_mode makes no node)
        with torch.inference_mode(False), torch.enable_grad():
            probe = torch.zeros((), requires_grad=True).mul(1.0)
        self.node_floor = _compat.autograd_sequence_nr(probe.grad_fn) + 1
        previous = dispatch.set_observer(self)
        self.previous = previous if previous is not self else None  # never chain to itself
        # The recorder reads no KernelCost (see dispatch.set_observer); an observer before it may.
        self.wants_prices = getattr(self.previous, "wants_prices", self.previous is not None)
        hooks = torch.nn.modules.module
        self.handles = [
            hooks.register_module_forward_pre_hook(self._enter_module),
            hooks.register_module_forward_hook(self._exit_module, always_call=True),
        ]
        self.mode = _CallMode(self)
        self.mode.__enter__()

    def _uninstall(self) -> None:
        """Undo `_install`, also when it stopped half-way (an interrupt while entering)."""
        try:
            if self.mode is not None and _compat.torch_function_mode_on_top(self.mode):
                self.mode.__exit__(None, None, None)
        finally:
            for handle in self.handles:
                handle.remove()
            _compat.remove_global_module_hooks_of(self)  # those whose handle never arrived
            if dispatch._OBSERVER is self:
                dispatch.set_observer(self.previous)
            self.__init__()  # drop caches and node maps: they only hold while traces are open

    # -- nn.Module paths -------------------------------------------------------------------
    def _enter_module(self, module, args) -> None:
        if is_compiling():  # Dynamo inlines global hooks: tracing our dicts breaks it
            return
        name = self.module_names.get(module)
        if name is None:
            if self.modules:  # not a registered child (made on the fly): parent.ClassName
                name = f"{self.modules[-1]}.{type(module).__name__}"
            else:  # a root: name it and all its submodules, "MLP", "MLP.fc1", ...
                root = type(module).__name__
                for sub_name, sub in module.named_modules():
                    self.module_names[sub] = f"{root}.{sub_name}" if sub_name else root
                name = root
        self.modules.append(name)

    def _exit_module(self, module, args, output) -> None:
        if self.modules and not is_compiling():
            self.modules.pop()

    def claim(self, out, info: tuple[str, str]) -> None:
        """Note `info` (module, source) for the autograd nodes this call created: the node
        behind each result and, walking back, every newer node not claimed yet."""
        todo = [t.grad_fn for t in _tensors((out,), []) if t.grad_fn is not None]
        node_info, floor = self.node_info, self.node_floor
        while todo:
            node = todo.pop()
            if node is None:
                continue
            seq = _compat.autograd_sequence_nr(node)
            if seq < floor or seq >= _NO_NODE_SEQ or seq in node_info:
                continue
            node_info[seq] = info
            todo.extend(next_node for next_node, _ in node.next_functions)

    # -- the observer protocol (dispatch.py) -----------------------------------------------
    def before_op(self, func, kind, args, kwargs, device) -> None:
        if self.previous is not None:
            self.previous.before_op(func, kind, args, kwargs, device)
        if compile_session._is_compiling_flag:  # torch.compile traces: nothing runs
            return
        node = current_autograd_node()
        if node is not None:  # autograd's engine runs this op inside a node's backward
            call, module = self._backward_call(node)
        else:
            call = self.call
            if call is None:  # an op no torch function led to (rare): a call of its own
                self.next_call += 1
                call = [func, self.next_call, _getframe(2), False, ""]
            if not call[4]:  # the call's first device op
                self._open(call)
            module = self.modules[-1] if self.modules else ""
        # The inputs: each tensor's record and dispatch key bits (see _input_record).
        inputs, bits, grad = [], [], False
        seen = self.seen
        for value in args:
            if isinstance(value, torch.Tensor):
                hit = seen.get(id(value))
                entry = hit[1] if hit is not None and hit[0]() is value else (
                    self._input_record(value))
                inputs.append(entry[0])
                bits.append(entry[1])
                grad = grad or value.requires_grad
            elif isinstance(value, (list, tuple)) and value:
                grad = self._more_inputs(value, inputs, bits) or grad
        if kwargs:
            grad = self._more_inputs(kwargs.values(), inputs, bits) or grad
        if grad:
            grad = is_grad_enabled()
            if grad:
                call[3] = True  # autograd records this op: the call claims the nodes it made
        # One dispatch path per (op, how it was served, autograd, autocast, key sets). `id`:
        # an OpOverload hashes in Python, an int in C; the entry holds the op to check it.
        key = (id(func), kind, grad, active_rule(), *bits)
        known = self.paths.get(key)
        if known is None or known[0] is not func:
            known = self.paths[key] = self._explain(func, key)
        stat = device.allocator._stats["all"].allocated_bytes  # cumulative counters
        self.pending.append((
            func, kind, known, tuple(inputs), stat, stat.allocated, stat.freed, call, module,
            device.index, perf_counter_ns(),
        ))

    def after_op(self, func, kind, result, price, span) -> None:
        end = perf_counter_ns()
        pending = self.pending
        # The top entry is this op's (an op that raised left its entry below; one seen while
        # torch.compile traced left none).
        if pending and pending[-1][0] is func:
            self._emit(pending.pop(), end, result, span, "")
        if self.previous is not None:
            self.previous.after_op(func, kind, result, price, span)

    def _emit(self, facts_, end: int, result, span, failure: str) -> None:
        func, kind, known, inputs, stat, allocated, freed, call, module, device, start = facts_
        call_name, call_id, source, _, phase = call
        _, path, name, is_view, new = known
        if type(result) is MTIATensor:  # the common case, one device tensor: _output_record
            entry = self._record(result, is_view, new)
            seen = self.seen
            if len(seen) > 4096:  # bounded: dead tensors' entries go at once, now and then
                seen.clear()
            seen[id(result)] = (weakref.ref(result), entry)  # see _input_record
            outputs = (entry[0],)
        elif isinstance(result, (torch.Tensor, list, tuple)):
            outputs = tuple([
                self._output_record(t, is_view, new) for t in _tensors((result,), [])
            ])
        else:  # a Python number (item(), _local_scalar_dense) or None
            outputs = ()
        reason = failure or (reason_for(name) if kind == "fallback" else "")
        if span is not None:
            stream, sim_start, sim_end = span[0].stream_id, span[1], span[2]
        else:
            stream = sim_start = sim_end = None
        allocated, freed = stat.allocated - allocated, stat.freed - freed
        for trace, trace_start in self.traces:
            events = trace.events
            events.append(_new_event((
                len(events), name, kind, phase, reason, path, inputs, outputs, allocated, freed,
                stat.current, start - trace_start, end - start, sim_start, sim_end, stream,
                device, source, module, call_name, call_id,
            )))

    def _open(self, call: list) -> None:
        """Name a call, say where it was called, and in which phase, at its first device op."""
        what = call[0]
        if isinstance(what, torch._ops.OpOverload):  # no torch function led to the op
            name = facts(what).name
        else:
            name = self.call_names.get(what) or self.call_names.setdefault(what, call_name(what))
        call[0] = name
        call[2] = _user_source(call[2], self.sources)
        call[4] = "backward" if name in _BACKWARD_CALLS else "forward"

    def _backward_call(self, node) -> tuple[list, str]:
        """The call of an op autograd's engine runs: the node (one call per node run), and the
        module and source noted when the forward made the node (see claim)."""
        seq = _compat.autograd_sequence_nr(node)
        module, source = self.node_info.get(seq, ("", ""))
        if self.last_node[0] != seq:
            self.next_call += 1
            self.last_node = (seq, self.next_call)
        return [node.name(), self.last_node[1], source, False, "backward"], module

    def _more_inputs(self, values, inputs: list, bits: list) -> bool:
        """Add the tensors among `values` (lists flattened) to inputs and bits; any grad?"""
        grad = False
        for t in _tensors(values, []):
            entry = self._input_record(t)
            inputs.append(entry[0])
            bits.append(entry[1])
            grad = grad or t.requires_grad
        return grad

    def _explain(self, func, key: tuple) -> tuple:
        """(op, DispatchPath, op name, is_view, new) for a path key. What the op's schema says
        about its results saves reading it off each one (see _record): `new` ops return new
        tensors (not an argument they wrote to); `is_view` is True for the results of a view
        kernel, False for new results of an op that is no view, None when only `_base` knows."""
        op = facts(func)
        new = not any(op.return_aliases)
        is_view = True if key[1] == "view" else (False if new and not op.is_view else None)
        return func, explain(func, key[1], key[2], key[3], key[4:]), op.name, is_view, new

    # -- records -----------------------------------------------------------------------------
    def _input_record(self, t: torch.Tensor) -> tuple[TensorRecord, int]:
        """An input's entry: remembered from when the tensor was last an op's result, if it
        was. A tensor's metadata changes only through ops (in-place, out=, set_), whose results
        are recorded afresh, so the remembered entry still holds (`.data = ...` bypasses ops)."""
        hit = self.seen.get(id(t))
        if hit is not None and hit[0]() is t:
            return hit[1]
        entry = self._record(t, None, False)
        self._remember(t, entry)
        return entry

    def _output_record(self, t: torch.Tensor, is_view: bool | None, new: bool) -> TensorRecord:
        entry = self._record(t, is_view, new)
        self._remember(t, entry)
        return entry[0]

    def _remember(self, t: torch.Tensor, entry: tuple) -> None:
        seen = self.seen
        if len(seen) > 4096:  # bounded: dead tensors' entries go at once, now and then
            seen.clear()
        seen[id(t)] = (weakref.ref(t), entry)

    def _record(self, t: torch.Tensor, is_view: bool | None, new: bool
                ) -> tuple[TensorRecord, int]:
        """(TensorRecord, dispatch key bits) of a tensor; equal records are made once, shared.

        The key bits are read once per record: they follow from the tensor's kind (device,
        subclass, inference or not, conjugate/negative views), which the cache key holds.
        `is_view` None: read it off `t._base`. `new`: t was just made by the dispatcher (see
        _explain), so it is an inference tensor exactly when inference mode is on (a wrapper
        made there is, whatever its base): one tensor query saved per result."""
        if type(t) is MTIATensor:
            storage = t._storage
            block = storage.block
            address = block.address if block is not None else 0  # DeviceStorage.address
            device = storage.device_index
            inner = t._inner  # same metadata as the wrapper (dispatch keeps them in step)
        else:
            storage = None
            try:
                address = t.untyped_storage().data_ptr()
            except RuntimeError:  # no storage (e.g. a FakeTensor while compiling)
                address = 0
            device = -1
            inner = t
        if is_view is None:  # an input, or an argument the op wrote to (in place, out=)
            is_view = t._base is not None
        view_of = address if is_view else None
        dtype = inner.dtype
        if dtype.is_complex:
            flags = (t.is_inference(), t.is_conj(), t.is_neg())
        else:
            flags = is_inference_mode_enabled() if new else t.is_inference()
        key = (address, inner.shape, inner.stride(), inner.storage_offset(), dtype, view_of,
               device, flags, type(t))
        entry = self.records.get(key)
        if entry is None:
            shape, strides = self._intern(tuple(key[1])), self._intern(key[2])
            if storage is not None:
                storage_nbytes, device_name = storage.nbytes, self.device_names[device]
            else:
                storage_nbytes = t.untyped_storage().nbytes() if address else 0
                device_name = str(t.device)
            entry = self.records[key] = (TensorRecord(
                shape, _dtype_name(dtype), strides, key[3], address, storage_nbytes,
                device_name, view_of, inner.numel() * inner.element_size(),
            ), dispatch_key_bits(t))
        return entry

    def _intern(self, value: tuple) -> tuple:
        return self.shapes.setdefault(value, value)


_RECORDER = _Recorder()


class Tracer:
    """What `mtia_lab.trace()` returns: a context manager, and a decorator.

        with mtia_lab.trace() as t:     # t is the Trace, filled as ops run
            y = model(x)

        @mtia_lab.trace()
        def step(x): ...
        step(x); step.last_trace        # the Trace of the latest call
    """

    def __init__(self, label: str = "") -> None:
        self.label = label
        self.trace: Trace | None = None

    def __enter__(self) -> Trace:
        if self.trace is not None and any(t is self.trace for t, _ in _RECORDER.traces):
            raise RuntimeError(
                "this mtia_lab.trace() is already open; open a new one for a nested trace: "
                "`with mtia_lab.trace() as inner:`"
            )
        self.trace = Trace([], _metadata(self.label))
        try:
            _RECORDER.open(self.trace)
            return self.trace
        except BaseException:  # e.g. a KeyboardInterrupt: `with` will not call __exit__
            _RECORDER.close(self.trace, None)
            raise

    def __exit__(self, exc_type, exc, tb) -> None:
        _RECORDER.close(self.trace, exc)

    def __call__(self, fn):
        @functools.wraps(fn)
        def traced(*args, **kwargs):
            tracer = Tracer(self.label or getattr(fn, "__qualname__", ""))
            with tracer as recorded:
                traced.last_trace = recorded
                return fn(*args, **kwargs)

        traced.last_trace = None
        return traced


def trace(label: str = "") -> Tracer:
    """Record every op that reaches the device: `with mtia_lab.trace() as t:` or
    `@mtia_lab.trace()` (then `fn.last_trace`). See mtia_lab/trace/events.py for what is kept."""
    return Tracer(label)


def _metadata(label: str) -> dict:
    from .. import __version__

    return {
        "label": label,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "torch": torch.__version__,
        "mtia_lab": __version__,
        "profile": getattr(RUNTIME.profile, "name", str(RUNTIME.profile)),
        "device_count": len(RUNTIME.devices),
        # each device's simulated clock when the trace began (streams' latest finish time)
        "sim_start_us": {
            str(d.index): max([d.now_us] + [s.clock_us for s in d.streams]) for d in RUNTIME.devices
        },
    }
