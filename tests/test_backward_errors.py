"""A Python exception during backward on the device reaches the caller as that exception.

PyTorch 2.13's Python device guard aborts the process when a Python exception unwinds through
it (mtia_lab/backend/aten/backward_errors.py), so each case runs in a fresh process: a regression
shows as a SIGABRT exit code, not as a dead test runner."""

from __future__ import annotations

from fresh_python import run_python

CASES = r'''
import torch, mtia_lab
D = "mtia_sim"

def expect(kind, run):
    try:
        run()
    except kind as error:
        notes = getattr(error, "__notes__", [])
        assert any("backward on mtia_sim" in n for n in notes), notes
        print("OK", kind.__name__, str(error).splitlines()[0][:60])
        return error
    raise AssertionError(f"no {kind.__name__}")

def tensor_hook():
    x = torch.randn(4, device=D, requires_grad=True)
    x.register_hook(lambda g: 1 / 0)
    (x * 2).sum().backward()

def hook_returns_junk():
    x = torch.randn(4, device=D, requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: "junk")
    y.sum().backward()

def module_hooks(pre):
    m = torch.nn.Linear(3, 3).to(D)
    def bad(*args):
        raise KeyError("module hook")
    (m.register_full_backward_pre_hook if pre else m.register_full_backward_hook)(bad)
    m(torch.randn(2, 3, device=D, requires_grad=True)).sum().backward()

def strict_refusal():
    x = torch.randn(8, device=D, requires_grad=True)
    y = torch.cumsum(x, 0).sum()
    with mtia_lab.strict(True):
        y.backward()

def oom():
    x = torch.randn(3 << 20, device=D, requires_grad=True)  # 12 MiB: a segment of its own
    y = (x * x).sum()
    torch.mtia_sim.empty_cache()
    mtia_lab.configure(memory_capacity=torch.mtia_sim.memory_reserved())
    try:
        torch.autograd.grad(y, x)
    finally:
        mtia_lab.configure(memory_capacity=2 << 30)

def saved_tensor_unpack():
    x = torch.randn(4, device=D, requires_grad=True)
    def unpack(t):
        raise IndexError("unpack hook")
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
        y = (x * x).sum()
    y.backward()

def checkpoint_recompute_refused():
    import torch.utils.checkpoint as checkpoint
    x = torch.randn(8, device=D, requires_grad=True)
    y = checkpoint.checkpoint(lambda a: (torch.cumsum(a, 0) * a).sum(), x, use_reentrant=False)
    with mtia_lab.strict(True):  # the recomputation in backward meets cumsum's fallback
        y.backward()

def post_accumulate_hook():
    x = torch.randn(4, device=D, requires_grad=True)
    x.register_post_accumulate_grad_hook(lambda p: {}["missing"])
    (x * 2).sum().backward()

expect(IndexError, saved_tensor_unpack)
expect(mtia_lab.StrictModeError, checkpoint_recompute_refused)
expect(KeyError, post_accumulate_hook)
expect(ZeroDivisionError, tensor_hook)
expect(TypeError, hook_returns_junk)
expect(KeyError, lambda: module_hooks(False))
expect(KeyError, lambda: module_hooks(True))
expect(mtia_lab.StrictModeError, strict_refusal)
error = expect(torch.OutOfMemoryError, oom)
assert "out of memory" in str(error)

# The device and autograd still work afterwards, and the same hooks are fine when they are.
x = torch.randn(5, device=D, requires_grad=True)
seen = []
x.register_hook(lambda g: seen.append(g.cpu()))
(x * 3).sum().backward()
assert torch.equal(x.grad.cpu(), torch.full((5,), 3.0)) and len(seen) == 1
m = torch.nn.Linear(3, 3).to(D)
m.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 2,))
inp = torch.randn(2, 3, device=D, requires_grad=True)
m(inp).sum().backward()
cpu = torch.nn.Linear(3, 3)
cpu.load_state_dict({k: v.cpu() for k, v in m.state_dict().items()})
cpu.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 2,))
inp_cpu = inp.detach().cpu().requires_grad_()
cpu(inp_cpu).sum().backward()
torch.testing.assert_close(inp.grad.cpu(), inp_cpu.grad)

# Errors in autograd.Function.backward were never affected: still the same exception.
class F(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2
    @staticmethod
    def backward(ctx, g):
        raise LookupError("function backward")
try:
    F.apply(torch.randn(3, device=D, requires_grad=True)).sum().backward()
except LookupError:
    print("OK LookupError")
print("ALIVE")
'''


def test_exceptions_in_backward_surface_instead_of_aborting():
    result = run_python(CASES)
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr[-3000:])
    assert result.stdout.count("OK") == 10 and "ALIVE" in result.stdout, result.stdout


NODE_HOOKS = r'''
import gc, torch, mtia_lab
D = "mtia_sim"
NOTE = "backward on mtia_sim"

def outcome(run):
    """(exception type name, whether mtia_lab noted it) of run(), or None."""
    try:
        run()
    except Exception as error:
        return type(error).__name__, any(NOTE in n for n in getattr(error, "__notes__", []))
    return None

def graph(device, prehook, hook, node=lambda y: y.grad_fn):
    x = torch.randn(4, device=device, requires_grad=True)
    y = x.sin() * 2
    target = node(y)
    (target.register_prehook if prehook else target.register_hook)(hook)
    return lambda: y.sum().backward()

def raising(*args):
    raise ZeroDivisionError("node hook")

accumulate = lambda y: y.grad_fn.next_functions[0][0].next_functions[0][0]
base = torch.mtia_sim.memory_allocated()
results = {}
for pre in (False, True):
    for where, node in (("grad_fn", lambda y: y.grad_fn), ("AccumulateGrad", accumulate)):
        for device in ("cpu", D):
            results[(pre, where, device)] = outcome(graph(device, pre, raising, node))
    # a result PyTorch refuses with a Python error: not a tuple, a tuple holding a non-tensor
    for bad in ("junk", ("junk",)):
        results[(pre, repr(bad), D)] = outcome(graph(D, pre, lambda *args, bad=bad: bad))
    x = torch.randn(4, device=D, requires_grad=True)
    y = x * 2
    (y.grad_fn.register_prehook if pre else y.grad_fn.register_hook)(raising).remove()
    results[(pre, "removed", D)] = outcome(lambda: y.sum().backward())

class Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2
    @staticmethod
    def backward(ctx, g):
        return g * 2

x = torch.randn(3, device=D, requires_grad=True)
y = Twice.apply(x)
y.grad_fn.register_hook(raising)
results["Function node, autograd.grad"] = outcome(lambda: torch.autograd.grad(y.sum(), x))
a = torch.randn(3, requires_grad=True)  # a CPU node in a graph that reaches the device
b = a * 2
b.grad_fn.register_hook(raising)
results["CPU node before the device"] = outcome(lambda: (b.to(D) * 3).sum().backward())
del x, y, a, b
gc.collect()
results["bytes left"] = torch.mtia_sim.memory_allocated() - base

# Afterwards: backward on the device works, and a node hook that does not raise still runs
# and replaces the gradient as on CPU.
grads = {}
for device in ("cpu", D):
    x = torch.ones(3, device=device, requires_grad=True)
    y = x * 2
    y.grad_fn.register_hook(lambda gi, go: (gi[0] * 10, gi[1]))
    y.sum().backward()
    grads[device] = x.grad.cpu().tolist()
results["grads"] = grads
print(repr(results))
'''


def test_raising_hooks_on_autograd_nodes_surface_and_leave_the_device_working():
    """`y.grad_fn.register_hook(fn)` / `register_prehook(fn)` whose fn raises (or returns what
    PyTorch refuses): the caller gets the exception, as on CPU; nothing stays allocated."""
    result = run_python(NODE_HOOKS)
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr[-3000:])
    results = eval(result.stdout.strip().splitlines()[-1])
    for pre in (False, True):
        for where in ("grad_fn", "AccumulateGrad"):
            assert results[(pre, where, "cpu")] == ("ZeroDivisionError", False)
            assert results[(pre, where, "mtia_sim")] == ("ZeroDivisionError", True)
        assert results[(pre, "'junk'", "mtia_sim")] == ("TypeError", True)
        assert results[(pre, "('junk',)", "mtia_sim")] == ("TypeError", True)
        assert results[(pre, "removed", "mtia_sim")] is None
    assert results["Function node, autograd.grad"] == ("ZeroDivisionError", True)
    assert results["CPU node before the device"] == ("ZeroDivisionError", False)
    assert results["bytes left"] == 0
    assert results["grads"]["mtia_sim"] == results["grads"]["cpu"] == [20.0] * 3
