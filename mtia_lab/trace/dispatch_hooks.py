"""The dispatcher's side of the recorder: three PyTorch hooks turn every op that reaches the
device into an OpEvent, and each answers one question about an op:

- the dispatcher's observer (`dispatch.set_observer`): *what ran* -- the aten overload, how it
  was served, its tensors, memory, host and simulated time. It is called from
  `MTIATensor.__torch_dispatch__`, so it sees aten ops after autograd has had its turn;
- a `TorchFunctionMode`: *which call of the user's* produced it -- the top-level torch function
  (`torch.matmul`, `F.layer_norm`, `Tensor.add`), so the aten ops of a composite stay grouped;
- global nn.Module forward hooks: *under which module* it ran. For backward, the mode notes
  which module created each autograd node; during `.backward()` the running node
  (`torch._C._current_autograd_node`) names the module its ops belong to.

A mixin of the `Recorder` (recorder.py), which installs these hooks while any trace is open and
writes each event into every open trace. Whatever observer was installed before keeps being
told about every op. This is the hot path (benchmarks/bench_trace.py): its events are built
positionally (see `_new_event`); every other writer goes through `Recorder.emit`.

torch.compile: while Dynamo traces, the mode and the module hooks step aside, so compiled code
is the same inside and outside a trace. Dynamo guards on the TorchFunctionMode stack, though, so
a compiled function or module compiles once more the first time it runs inside a trace (the mode
is on the stack then); both versions stay cached, and later traces reuse the second.
"""

from __future__ import annotations

import functools
import threading
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
from ..source import user_source
from .events import OpEvent
from .paths import call_name, explain
from .tensor_records import tensors_in

current_autograd_node = _compat.current_autograd_node
# Dynamo folds these two to True in code it traces (the mode, the module hooks); the observer
# runs below __torch_dispatch__, outside Dynamo, and reads torch.compile's session flag instead.
is_compiling = torch.compiler.is_compiling
is_dynamo_compiling = torch.compiler.is_dynamo_compiling  # False, unless Dynamo is tracing
compile_session = _compat.compile_session  # ._is_compiling_flag: see _compat
is_grad_enabled = torch.is_grad_enabled
# OpEvent(...) minus its Python __new__: one event per recorded op, so built positionally, in
# OpEvent's field order; the fields after `host_issue_us` take their defaults (_EVENT_DEFAULTS).
_new_event = functools.partial(tuple.__new__, OpEvent)
_EVENT_DEFAULTS = tuple(OpEvent._field_defaults[name]
                        for name in OpEvent._fields[OpEvent._fields.index("host_issue_us") + 1:])
_BACKWARD_CALLS = frozenset({"Tensor.backward", "torch.autograd.backward", "torch.autograd.grad"})
_NO_NODE_SEQ = 1 << 63  # AccumulateGrad and other graph roots have sequence number 2**64-1


class _CallMode(TorchFunctionMode):
    """Notes the top-level torch function the user called; nested calls do not reach a mode
    (it is popped while it handles a call), which is exactly the grouping we want.

    It runs for every torch function, most of which never reach the device (`x.shape`,
    `x.dim()`), so it only opens a call: the recorder fills in the name and source when, and
    if, a device op of the call arrives."""

    def __init__(self, recorder: DispatchHooks) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if is_dynamo_compiling():  # Dynamo traces this mode: let it see only the call itself
            return func(*args, **kwargs) if kwargs else func(*args)
        rec = self.recorder
        rec.next_call += 1
        # [what was called, call_id, where it was called, grad, phase]: the first device op of
        # the call (see DispatchHooks._open) turns the function into its name, the frame into
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


class DispatchHooks:
    """The hooks' methods; their state (pending, modules, call, caches) is the Recorder's."""

    wants_prices = False  # True while an earlier observer, which may read prices, is chained
    pending = property(lambda self: self.local.pending)
    modules = property(lambda self: self.local.modules)
    call = property(lambda self: self.local.call,
                    lambda self, call: setattr(self.local, "call", call))

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
        todo = [t.grad_fn for t in tensors_in((out,), []) if t.grad_fn is not None]
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
            self._emit_op(pending.pop(), end, result, span, "")
        if self.previous is not None:
            self.previous.after_op(func, kind, result, price, span)

    def _emit_op(self, facts_, end: int, result, span, failure: str) -> None:
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
                self._output_record(t, is_view, new) for t in tensors_in((result,), [])
            ])
        else:  # a Python number (item(), _local_scalar_dense) or None
            outputs = ()
        reason = failure or (reason_for(name) if kind == "fallback" else "")
        if span is not None:
            stream, sim_start, sim_end = span[0].stream_id, span[1], span[2]
            issue = (span[3], span[4]) if span[4] > span[3] else None  # backend.streams.Charge
        else:
            stream = sim_start = sim_end = issue = None
        allocated, freed = stat.allocated - allocated, stat.freed - freed
        for trace, trace_start in self.traces:
            events = trace.events
            events.append(_new_event((
                len(events), name, kind, phase, reason, path, inputs, outputs, allocated, freed,
                stat.current, start - trace_start, end - start, sim_start, sim_end, stream,
                device, source, module, call_name, call_id, issue, *_EVENT_DEFAULTS,
            )))

    def _open(self, call: list) -> None:
        """Name a call, say where it was called, and in which phase, at its first device op."""
        what = call[0]
        if isinstance(what, _compat.OpOverload):  # no torch function led to the op
            name = facts(what).name
        else:
            name = self.call_names.get(what) or self.call_names.setdefault(what, call_name(what))
        call[0] = name
        # The walk starts where the user's call entered torch (see _CallMode), not at the
        # dispatcher: stepping through `f_back` makes a Python object of every frame it passes.
        call[2] = user_source(call[2], cache=self.sources)
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
        for t in tensors_in(values, []):
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
