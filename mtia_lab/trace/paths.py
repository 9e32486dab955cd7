"""Why an op went where it went: the dispatch path a trace event records, and call names.

PyTorch users have long asked the dispatcher to explain itself (pytorch issues 26207, 81703).
For an op on the device, the answer is a walk over the merged dispatch key set, highest priority
first, saying what each key did, and then what `MTIATensor.__torch_dispatch__` chose and why.
The same (op, key sets, autograd state) always has the same answer, so the recorder builds each
`DispatchPath` once and shares it.
"""

from __future__ import annotations

from .. import _compat
from ..backend.aten.fallback import reason_for
from ..backend.aten.registry import kernel_for
from ..backend.aten.schema import facts
from .events import DispatchPath


def call_name(func) -> str:
    """A readable name for what the user called: torch.add, F.linear, Tensor.add, Tensor.shape."""
    module = getattr(func, "__module__", None)
    name = getattr(func, "__name__", None) or repr(func)
    if name == "__get__" and hasattr(func, "__self__"):  # a property, e.g. Tensor.shape
        return f"Tensor.{getattr(func.__self__, '__name__', '?')}"
    if getattr(func, "__objclass__", None) is _compat.TensorBase or (
        module == _compat.TENSOR_METHOD_MODULE
    ):
        return f"Tensor.{name}"
    if module in _compat.NN_FUNCTIONAL_MODULES:
        return f"F.{name}"
    if module == "torch":
        return f"torch.{name}"
    return f"{module}.{getattr(func, '__qualname__', name)}" if module else name


def explain_key(key: str, view: bool, writes: bool, grad: bool, rule, name: str) -> str:
    """What one dispatch key did with op `name` (keys are visited highest priority first).

    `rule` is the autocast rule that produced the op, (op, policy), or None: inside
    `__torch_dispatch__` PyTorch reports autocast as off, so the recorder asks amp.py which rule's
    kernel is running (`amp.active_rule()`) instead."""
    if key == "PythonTLSSnapshot":
        return "PythonTLSSnapshot: snapshot the Python mode stack for the Python key, go on"
    if key.startswith("Autocast"):
        if rule is None:
            return f"{key}: no autocast rule acted (autocast off, or none for the op): fall through"
        op, policy = rule
        if name == "aten::_to_copy" and not op.startswith("_to_copy"):
            return f"{key}: a cast made by autocast's {policy} rule for aten::{op}, before that op"
        return f"{key}: autocast's {policy} rule for aten::{op} cast the inputs, then called " \
            "the op below autocast"
    if key.startswith("Autograd"):
        if grad:
            return f"{key}: an input requires grad: record a backward node (grad_fn), go below"
        return f"{key}: no input requires grad (or grad mode is off): fall through"
    if key == "ADInplaceOrView":
        if view:
            return "ADInplaceOrView: a view op: remember its base so autograd tracks the alias"
        if writes:
            return "ADInplaceOrView: writes a tensor: bump its version counter"
        return "ADInplaceOrView: neither a view nor in-place: fall through"
    if key == "Python":
        return "Python: a tensor subclass holds the op: call MTIATensor.__torch_dispatch__"
    if key == "PrivateUse1":
        return "PrivateUse1 (mtia_sim): not reached, __torch_dispatch__ served the op above it"
    return f"{key}: fall through"


# What registration.py's PrivateUse1 kernels do, for ops that reach that key directly.
_AT_PRIVATEUSE1 = {
    "aten::empty.memory_format": "allocate a block of device memory for the new tensor",
    "aten::empty_strided": "allocate a block of device memory for the new strided tensor",
    "aten::_to_copy": "copy the host tensor to the device over the host link (strides kept)",
}


def _served_at_privateuse1(op_name: str, kind: str) -> str:
    if kind == "fallback":
        return ("no PrivateUse1 kernel -> the boxed fallback (registration.py) computes the op "
                "on the host and moves the result to the device")
    what = _AT_PRIVATEUSE1.get(op_name, "run the op")
    return f"registration.py's PrivateUse1 kernel: {what}"


def explain(func, kind: str, grad: bool, rule, bits: tuple[int, ...]) -> DispatchPath:
    """Build the DispatchPath of one (op, key sets, autograd state, autocast rule): see
    DispatchPath and `explain_key`.

    An op with a device tensor among its arguments meets the Python key and goes to
    `MTIATensor.__torch_dispatch__`. One without (a factory called with device="mtia_sim", or
    `cpu_tensor.to("mtia_sim")`) has only host keys, if any: BackendSelect reads its `device=`
    argument and sends it to the PrivateUse1 kernels of registration.py."""
    op = facts(func)
    merged_bits = 0
    for b in bits:
        merged_bits |= b
    merged = tuple(_compat.dispatch_key_names(merged_bits))  # highest priority first
    arg_keys = tuple(tuple(_compat.dispatch_key_names(b)) for b in bits)
    if "Python" not in merged:
        chosen = _served_at_privateuse1(op.name, kind)
        steps = [
            explain_key(key, op.is_view, bool(op.mutated), grad, rule, op.name)
            for key in merged
            if not _is_host_backend(key)
        ]
        steps.append("BackendSelect: no device tensor among the arguments; the device= argument "
                     "names mtia_sim, so the op goes to the PrivateUse1 key")
        steps.append(f"PrivateUse1 (mtia_sim): {chosen}")
        return DispatchPath(arg_keys, merged, tuple(steps), chosen)
    kernel = kernel_for(func)
    if kind == "fallback":
        chosen = f"no registry entry -> CPU fallback ({reason_for(op.name)})"
    elif kind == "view" and kernel is None:
        chosen = "no registry entry, but a view op -> view kernel: the result aliases its input"
    else:
        fn = getattr(kernel.fn, "__qualname__", repr(kernel.fn)) if kernel else "?"
        chosen = f"registry: {kind} kernel {fn}"
    steps = []
    for key in merged:
        steps.append(explain_key(key, op.is_view, bool(op.mutated), grad, rule, op.name))
        if key == "Python":  # the subclass's __torch_dispatch__ picks the kernel
            steps.append(f"__torch_dispatch__: {chosen}")
    return DispatchPath(arg_keys, merged, tuple(steps), chosen)


def _is_host_backend(key: str) -> bool:
    """The host tensor's own backend key (CPU and its kin): not where a copy to mtia_sim runs."""
    return key in ("CPU", "Dense", "BackendSelect") or key.endswith("CPU") and not (
        key.startswith(("Autograd", "Autocast"))
    )
