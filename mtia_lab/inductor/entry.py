"""Where a graph with mtia_sim tensors enters TorchInductor, and how it keeps its device.

Dynamo hands a backend fake tensors shaped like the user's: fake `MTIATensor`s, wrapper
subclasses whose `__tensor_flatten__` lets AOTAutograd *desugar* them into their inner CPU
tensors. That is what `backend="mtia_lab"` wants (its kernels run on the inner tensors), but
Inductor would then see a CPU graph and compile it for the CPU: C++ kernels, CPU heuristics.

So for Inductor the example inputs are re-made as plain fake tensors *on mtia_sim* (same fake
mode, sizes, strides, dtype, requires_grad): AOTAutograd has no subclass to desugar, the
forward and backward graphs it traces carry `mtia_sim:0` on every value, and Inductor compiles
them for that device -- Triton kernels through the registrations of device.py. Under dynamic
shapes the sizes and strides are Dynamo's SymInts (same shape env), so Inductor compiles one
graph of symbolic sizes, as for a GPU; SymInt inputs pass through. At run time the
compiled code receives the real device tensors: buffers it allocates are device tensors,
extern kernels (mm, convolution, the keep-list) are eager ATen calls on the device, and each
Triton launch is unwrapped to host memory by triton_launch.py.

The entry is Inductor's own `compile_fx`, wrapped once (the default backend "inductor" looks
it up at each compile); a graph that only makes device tensors from host inputs gets the
device's hooks and compiles as it is; graphs without device tensors pass through untouched.
The wrapper is installed when `torch._inductor.compile_fx` is first imported (see
mtia_lab/inductor/__init__.py), so `import mtia_lab` loads neither Dynamo nor Inductor.
"""

from __future__ import annotations

import contextlib
import functools
import traceback
from collections.abc import Callable

import torch

from ..backend.aten.tensor import MTIATensor
from ..records.keep import keep_ops
from . import _compat, errors, modes

aten = torch.ops.aten
_STATE = {"keep_list": True}


@contextlib.contextmanager
def keep_list(enabled: bool):
    """Compile with (True, the default) or without MTIA's keep-list of undecomposed ops."""
    previous, _STATE["keep_list"] = _STATE["keep_list"], enabled
    try:
        yield
    finally:
        _STATE["keep_list"] = previous


def decompositions(table: dict | None) -> dict:
    """Inductor's decomposition table (or the caller's), minus the keep-list when it is on."""
    table = dict(table) if table is not None else _compat.inductor_decompositions()
    if not _STATE["keep_list"]:
        return table
    keep = keep_ops()
    return {op: fn for op, fn in table.items() if op not in keep}


@contextlib.contextmanager
def _keep_as_fallbacks():
    """Lower kept ops that Inductor has no lowering for (layer norm, which it decomposes) as
    ATen calls, for the length of one compilation; kept ops with a lowering of their own
    (mm's `tuned_mm`, convolution) need only stay out of the decomposition table. Inductor's
    tables are restored exactly afterwards: other devices' compiles see no trace of it."""
    with contextlib.ExitStack() as stack:
        if _STATE["keep_list"]:
            for op in keep_ops():
                stack.enter_context(_compat.temporary_fallback(op))
        yield


def has_device_inputs(example_inputs) -> bool:
    """Is any input -- or any tensor of an input list -- a device tensor?"""
    return any(isinstance(x, MTIATensor)
               or (isinstance(x, (list, tuple)) and has_device_inputs(x))
               for x in example_inputs)


def makes_device_values(gm: torch.fx.GraphModule) -> bool:
    """Does the graph create device tensors from host inputs (`x.to("mtia_sim")` inside the
    compiled function, a training step that moves its batch)? Its values on the device are
    plain fake tensors already, as compile_for_device makes them; Inductor needs the device's
    hooks to compile them."""
    return any(isinstance(v := node.meta.get("val", node.meta.get("example_value")),
                          torch.Tensor) and v.device.type == _compat.DEVICE
               for node in gm.graph.nodes)


def _bumpy(example_inputs) -> bool:
    """Does the graph take a list as one input? Compiled autograd's graph does: its tensors
    come as one list, `inputs`, which Dynamo leaves whole (and steals, to free each tensor as
    soon as the backward is done with it). Dynamo pre-flattens every other graph's inputs."""
    return any(isinstance(x, (list, tuple)) for x in example_inputs)


def _flat_nodes(gm: torch.fx.GraphModule, example_inputs) -> list:
    """The FX node that holds Dynamo's fake of each input once list inputs are flattened
    (Dynamo's order: a list's elements in place of the list): a plain input's placeholder,
    a list element's `inputs[k]` node (None where the graph never reads that element)."""
    import operator

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    nodes: list = []
    for node, value in zip(placeholders, example_inputs, strict=False):
        if not isinstance(value, (list, tuple)):
            nodes.append(node)
            continue
        reads = {user.args[1]: user for user in node.users
                 if user.op == "call_function" and user.target is operator.getitem}
        nodes.extend(reads.get(k) for k in range(len(value)))
    return nodes


def compile_flattened(original, gm: torch.fx.GraphModule, example_inputs, *args, **kwargs):
    """A graph with a list input (compiled autograd's backward), for the device: Dynamo's own
    `flatten_graph_inputs` wraps it to take flat inputs -- as Inductor does for every device
    -- and the flat graph compiles for the device as below, each element's fake read from the
    node that took it out of the list. (Left to Inductor, the fakes of the list's MTIATensors
    would be desugared to their inner host tensors: a graph compiled for the CPU.)"""
    nodes = _flat_nodes(gm, example_inputs)

    def compile_flat(wrapper, flat: list):
        compiled = compile_for_device(original, wrapper, flat, *args, nodes=nodes, **kwargs)
        return _numbers_as_tensors(compiled, [i for i, x in enumerate(flat)
                                              if _host_scalar(x)])

    return _compat.flatten_graph_inputs(gm, example_inputs, compile_flat)


def _host_scalar(x) -> bool:
    return type(x) is torch.Tensor and x.device.type == "cpu" and x.dim() == 0


def _numbers_as_tensors(compiled, indices: list[int]):
    """Autograd saves a Python number of the forward (`loss / n`) as a 0-d host tensor
    flagged as a *wrapped number*; compiled autograd hands it over as is. Inductor reads a
    host scalar in a device graph with `.item()`, and on a compiled graph's first call
    AOTAutograd watches every op through a dispatch mode -- where PyTorch turns a wrapped number
    back into a Python int, and `.item()` of an int fails. A copy of the scalar is an
    ordinary tensor (same value, same dtype). `compiled` takes its inputs as one list."""
    if not indices:
        return compiled

    def call(args: list):
        for i in indices:
            if _host_scalar(args[i]):
                args[i] = args[i].clone()
        return compiled(args)

    return call


def device_fakes(gm: torch.fx.Module, example_inputs, nodes: list | None = None) -> list:
    """Plain fake tensors on mtia_sim in place of the fake MTIATensors (see module docstring).

    Dynamo hands the backend the *real* inputs; their fakes, with symbolic sizes and strides
    under dynamic shapes (`s0`, `s1*s0`), are the placeholders' example values (`nodes`, when
    given: the nodes that hold them, one per input). The device fakes take those SymInts, in
    the same fake mode and shape env, so Inductor compiles one graph for every size; SymInt
    inputs (the sizes themselves) pass through."""
    mode = _compat.detect_fake_mode([x for x in example_inputs if x is not None])
    if nodes is None:
        nodes = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out = []
    with mode:
        for i, x in enumerate(example_inputs):
            if isinstance(x, MTIATensor):
                like = _traced(nodes[i] if i < len(nodes) else None, x)
                fake = torch.empty_strided(like.shape, like.stride(), dtype=x.dtype,
                                           device=x.device)
                if x.requires_grad:
                    fake.requires_grad_(True)
                out.append(fake)
            else:
                out.append(x)
    for node, value in zip(nodes, out, strict=False):
        for key in ("example_value", "val"):
            if node is not None and isinstance(node.meta.get(key), MTIATensor):
                node.meta[key] = value
    if isinstance(gm, torch.fx.GraphModule):
        _without_inner(gm)
    return out


def _without_inner(gm: torch.fx.GraphModule) -> None:
    """Dynamo reads a data-dependent size (nonzero's `u0`) through the MTIATensor's inner
    tensor: a `getattr(idx, "_inner")` node, and a binding `_inner.size(0)`. The device graph
    has no inner tensor, and a wrapper's sizes are its inner tensor's: read them from the
    value itself."""
    changed = False
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is getattr and node.args[1:] == ("_inner",):
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
            changed = True
        elif node.meta.get("unbacked_bindings"):
            node.meta["unbacked_bindings"] = {
                symbol: _compat.without_inner_key(path, "_inner")
                for symbol, path in node.meta["unbacked_bindings"].items()}
    if changed:
        gm.recompile()


def _traced(node: torch.fx.Node | None, x: MTIATensor) -> torch.Tensor:
    """Dynamo's fake of input `x` (its placeholder's example value), else `x` itself."""
    fake = node.meta.get("example_value") if node is not None else None
    if isinstance(fake, MTIATensor) and fake.dim() == x.dim():
        return fake
    return x


def compile_for_device(original, gm, example_inputs, *args, nodes: list | None = None,
                       **kwargs):
    """Inductor's compile_fx on a graph of mtia_sim tensors, for the device (the hooks of
    `install_entry`'s `prepare` installed). `nodes`: where Dynamo's fakes of the inputs are,
    for a graph whose own placeholders do not hold them (see `compile_flattened`)."""
    inputs = device_fakes(gm, example_inputs, nodes)
    kwargs["decompositions"] = decompositions(kwargs.get("decompositions"))
    kwargs["inner_compile"] = _inner(kwargs.get("inner_compile"), _STATE["keep_list"])
    patches = dict(kwargs.get("config_patches") or {})
    # Inductor's FX graph cache would skip its scheduler on a hit: no decisions to collect.
    patches.setdefault("fx_graph_cache", False)
    kwargs["config_patches"] = patches
    mode = _compat.detect_fake_mode(example_inputs)
    with _explained(), _compat.constants_made_on_host(mode):
        return original(gm, inputs, *args, **kwargs)


@contextlib.contextmanager
def _explained():
    try:
        yield
    except errors.InductorDeviceError:
        raise
    except Exception as error:  # name the op and the fix; Inductor's error is the cause
        clear = _explain(error)
        if clear is None:
            raise
        raise clear from error


def _inner(inner_compile, keep: bool):
    """Inductor's inner compile (forward, and backward when autograd first needs it) with the
    keep-list's fallbacks in place, errors explained, and the compile mode applied to what it
    returns (modes.py: graph capture for reduce-overhead)."""
    if inner_compile is None:
        inner_compile = _compat.compile_fx_module().compile_fx_inner
    if getattr(inner_compile, "_mtia_lab", False):
        return inner_compile

    @functools.wraps(inner_compile)
    def compile_inner(*args, **kwargs):
        modes.note_autotuning()
        with keep_list(keep), _keep_as_fallbacks(), _explained():
            compiled = inner_compile(*args, **kwargs)
        modes.apply_graph_capture(compiled)
        return _frees_on_error(compiled)

    compile_inner._mtia_lab = True
    return compile_inner


def _frees_on_error(output):
    """A compiled graph's buffers are locals of its wrapper's `call`: when a call fails (an
    out-of-memory on the device, a kernel error), the traceback would keep them alive -- in a
    notebook for as long as it shows the error. Clear those finished frames, so the device's
    memory is back where it was before the call."""
    call = getattr(output, "current_callable", None)
    if call is None or getattr(call, "_mtia_lab", False):
        return output

    def current_callable(args):
        try:
            return call(args)
        except BaseException as error:
            traceback.clear_frames(error.__traceback__)
            raise

    current_callable._mtia_lab = True
    output.current_callable = current_callable
    return output


def _explain(error: BaseException) -> errors.InductorDeviceError | None:
    seen = error
    while seen is not None:
        inner = getattr(seen, "inner_exception", None) or seen.__cause__
        name = type(seen).__name__
        if name in ("MissingOperatorWithoutDecomp", "MissingOperatorWithDecomp",
                    "LoweringException"):
            target = str(seen).splitlines()
            op = next((line.split("target:", 1)[1].strip() for line in target
                       if "target:" in line), "an op")
            return errors.unsupported_op(op, seen)
        seen = inner if inner is not seen else None
    return None


def install_entry(prepare: Callable[[], None]) -> None:
    """Wrap Inductor's compile_fx (idempotent). `prepare`: installs the rest of the device's
    hooks before the first graph compiles for it (the package's `install_hooks`, passed in so
    this module never imports its package)."""
    module = _compat.compile_fx_module()
    original = module.compile_fx
    if getattr(original, "_mtia_lab", False):
        return

    @functools.wraps(original)
    def compile_fx(model_, example_inputs_, *args, **kwargs):
        if isinstance(model_, torch.fx.GraphModule) and has_device_inputs(example_inputs_):
            prepare()
            if _bumpy(example_inputs_):
                return compile_flattened(original, model_, example_inputs_, *args, **kwargs)
            return compile_for_device(original, model_, example_inputs_, *args, **kwargs)
        if isinstance(model_, torch.fx.GraphModule) and makes_device_values(model_):
            prepare()
        return original(model_, example_inputs_, *args, **kwargs)

    compile_fx._mtia_lab = True
    module.compile_fx = compile_fx
