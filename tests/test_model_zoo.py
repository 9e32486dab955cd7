"""Models nobody here wrote, on the device against the CPU (issue 9, "Evidence").

Each zoo model (mtia_lab/testing/zoo.py: transformers architectures from tiny configs, random
weights, no download; why not timm is said there) runs the same steps on the CPU and on mtia_sim:

- eager forward and backward in training mode: logits, every gradient, every buffer (BatchNorm
  running statistics are updated by the forward);
- three AdamW steps: parameters, buffers and the optimizer's state after each run; the default
  AdamW (foreach) for every model, in strict mode (no op may fall back to the CPU), and
  `fused=True` for two;
- `torch.compile(backend="mtia_lab")` and `torch.compile()` (real Inductor for the device, with
  its default config) in eval mode under `no_grad`, and for one training step (forward,
  backward, AdamW step), against CPU eager.

Compiling is what costs time: the compiled tests of the larger models carry the `slow` marker,
which a plain run leaves out (pyproject.toml); `pytest tests/test_model_zoo.py -m slow` runs
them, `-m ""` everything.
"""

from __future__ import annotations

import copy

import pytest
import torch

import mtia_lab
from mtia_lab.testing import to_device
from mtia_lab.testing.zoo import NAMES, build, logits

pytest.importorskip("transformers")

DEVICE = "mtia_sim"
# Compiled code runs decompositions of some ops (and a different summation order): a little
# more than the float32 default. Eager runs the CPU's own kernels, so it must agree closely.
COMPILED = {"rtol": 1e-4, "atol": 1e-5}
# After optimizer steps: the convolutions' CPU kernels (oneDNN) pick their algorithm by the
# buffers' alignment, which differs in the last bits; a step that was lost or wrong moves a
# parameter by about the learning rate (1e-2), a thousand times more.
STEPPED = {"rtol": 1e-4, "atol": 1e-4}
# MobileNetV2 in training mode normalizes its last blocks over 2 values per channel (batch 2,
# 1x1 pixels): ill-conditioned. Against a float64 run, eager float32 logits are 7e-5 off and
# the compiled graph's (decomposed BatchNorm: var_mean, rsqrt) 1e-4 off; its largest gradients
# (about 290) 0.08 and 0.19 off. So this one model is compared tensor by tensor in norm: the
# relative error of the whole tensor, which a wrong kernel moves by far more than 1e-3.
NORMWISE = {"mobilenet_v2": 2e-3}
# Compiling these takes most of the module's time (20-90 s each on a busy 2-core machine): the
# `slow` marker leaves them out of a plain run (pyproject's addopts); `-m slow` runs them.
SLOW_COMPILE = {"efficientnet", "mobilenet_v2", "t5", "llama"}
# Real Inductor's training steps of the two depthwise-convolution models take 40-70 s each
# alone (a third of the module): under `slow` too. ResNet's training step (convolution and
# BatchNorm backward through Inductor) and every model's compiled eval always run.
SLOW_INDUCTOR_TRAINING = {"efficientnet", "mobilenet_v2"}


def _compiled_params(slow_inductor: frozenset = frozenset()):
    """Every model on both compile paths; real Inductor's cases always run but those in
    `slow_inductor`, the teaching scheduler's slowest ones only with `-m slow`."""
    params = []
    for backend in ("mtia_lab", "inductor"):
        for n in NAMES:
            slow = n in (SLOW_COMPILE if backend == "mtia_lab" else slow_inductor)
            params.append(pytest.param(n, backend, marks=[pytest.mark.slow] if slow else [],
                                       id=f"{n}-{backend}"))
    return params


@pytest.fixture
def fresh_dynamo():
    """Each compiled test compiles anew: Dynamo's caches (and its recompile limit, past which it
    silently runs eagerly) are per code object, and the zoo models share their classes' code."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _compile(model, backend: str):
    """backend "mtia_lab" (the teaching scheduler) or "inductor" (real Inductor for the device,
    as a plain `torch.compile(model)` gives)."""
    return torch.compile(model) if backend == "inductor" else torch.compile(model, backend=backend)


def _run_compiled(compiled, batch: dict):
    """compiled(**batch), checking that compiled kernels ran it (not eager Python) and, for
    Inductor, that every Triton launch ran as one NumPy program for its grid."""
    from mtia_lab.inductor import whole_grid

    whole_grid.STATS.reset()
    with mtia_lab.trace() as trace:
        output = compiled(**batch)
    assert trace.kinds().get("compiled", 0) > 0, "no compiled kernel ran: Dynamo fell back"
    assert whole_grid.STATS.per_program == 0, whole_grid.STATS.reasons
    return output


def _pair(name: str, train: bool):
    """(cpu model, device model, cpu batch, device batch): the same weights and inputs."""
    model, batch = build(name)
    model.train(train)
    device_model = copy.deepcopy(model).to(DEVICE)
    return model, device_model, batch, to_device(batch)


def _loss(output) -> torch.Tensor:
    return logits(output).float().square().mean()


def _assert_state_matches(cpu_model, device_model, what: str, **tolerance) -> None:
    """Every parameter and every buffer of the device model equals the CPU model's."""
    device_state = dict(device_model.named_parameters()) | dict(device_model.named_buffers())
    cpu_state = dict(cpu_model.named_parameters()) | dict(cpu_model.named_buffers())
    assert device_state.keys() == cpu_state.keys()
    for key, expected in cpu_state.items():
        got = device_state[key]
        assert got.device.type == DEVICE, f"{what}: {key} left the device"
        torch.testing.assert_close(got.cpu(), expected.detach(), msg=lambda m, k=key: f"{what}, "
                                   f"{k}: {m}", **tolerance)


def _assert_grads_match(cpu_model, device_model, **tolerance) -> None:
    grads = {n: p.grad for n, p in device_model.named_parameters()}
    for key, param in cpu_model.named_parameters():
        if param.grad is None:
            assert grads[key] is None, f"{key}: a gradient on the device only"
            continue
        assert grads[key] is not None, f"{key}: no gradient on the device"
        torch.testing.assert_close(grads[key].cpu(), param.grad, msg=lambda m, k=key: f"grad "
                                   f"of {k}: {m}", **tolerance)


@pytest.mark.parametrize("name", NAMES)
def test_eager_forward_and_backward_match_cpu(name):
    cpu_model, device_model, batch, device_batch = _pair(name, train=True)
    expected = cpu_model(**batch)
    got = device_model(**device_batch)
    assert logits(got).device.type == DEVICE
    torch.testing.assert_close(logits(got).cpu(), logits(expected).detach())
    _loss(expected).backward()
    _loss(got).backward()
    _assert_grads_match(cpu_model, device_model)
    _assert_state_matches(cpu_model, device_model, "after one training forward")


def _adamw_steps(model, batch, steps: int, **options) -> torch.optim.Optimizer:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, **options)
    for _ in range(steps):
        optimizer.zero_grad()
        _loss(model(**batch)).backward()
        optimizer.step()
    return optimizer


def _assert_optimizer_state_matches(cpu_opt, device_opt) -> None:
    for cpu_state, device_state in zip(cpu_opt.state.values(), device_opt.state.values(),
                                       strict=True):
        for key in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(device_state[key].cpu(), cpu_state[key], **STEPPED)


@pytest.mark.parametrize("name", NAMES)
def test_three_adamw_steps_match_cpu(name):
    cpu_model, device_model, batch, device_batch = _pair(name, train=True)
    cpu_opt = _adamw_steps(cpu_model, batch, 3)
    with mtia_lab.strict():  # every op of training, optimizer included, has a native kernel
        device_opt = _adamw_steps(device_model, device_batch, 3)
    _assert_state_matches(cpu_model, device_model, "after 3 AdamW steps", **STEPPED)
    _assert_optimizer_state_matches(cpu_opt, device_opt)


@pytest.mark.parametrize("name", ["resnet", "gpt2"])
def test_fused_adamw_steps_match_cpu(name):
    cpu_model, device_model, batch, device_batch = _pair(name, train=True)
    before = [p.detach().cpu().clone() for p in device_model.parameters()]
    cpu_opt = _adamw_steps(cpu_model, batch, 3, fused=True)
    device_opt = _adamw_steps(device_model, device_batch, 3, fused=True)
    after = [p.detach().cpu() for p in device_model.parameters()]
    assert any(not torch.equal(a, b) for a, b in zip(after, before, strict=True))
    _assert_state_matches(cpu_model, device_model, "after 3 fused AdamW steps", **STEPPED)
    _assert_optimizer_state_matches(cpu_opt, device_opt)


@pytest.mark.parametrize(("name", "backend"), _compiled_params())
def test_compiled_eval_under_no_grad_matches_cpu(name, backend, fresh_dynamo):
    cpu_model, device_model, batch, device_batch = _pair(name, train=False)
    compiled = _compile(device_model, backend)
    with torch.no_grad():
        expected = cpu_model(**batch)
        got = _run_compiled(compiled, device_batch)
    assert logits(got).device.type == DEVICE
    torch.testing.assert_close(logits(got).cpu(), logits(expected), **COMPILED)


@pytest.mark.parametrize(("name", "backend"), _compiled_params(SLOW_INDUCTOR_TRAINING))
def test_compiled_training_step_matches_cpu(name, backend, fresh_dynamo):
    cpu_model, device_model, batch, device_batch = _pair(name, train=True)
    compiled = _compile(device_model, backend)
    cpu_opt = torch.optim.AdamW(cpu_model.parameters(), lr=1e-2)
    device_opt = torch.optim.AdamW(device_model.parameters(), lr=1e-2)
    expected = cpu_model(**batch)
    got = _run_compiled(compiled, device_batch)
    _loss(expected).backward()
    _loss(got).backward()
    if name in NORMWISE:
        _assert_normwise(cpu_model, device_model, logits(got), logits(expected), NORMWISE[name])
        return
    torch.testing.assert_close(logits(got).cpu(), logits(expected).detach(), **COMPILED)
    _assert_grads_match(cpu_model, device_model, **COMPILED)
    cpu_opt.step()
    device_opt.step()
    _assert_state_matches(cpu_model, device_model, "after a compiled training step",
                          **(COMPILED | STEPPED))


def _assert_normwise(cpu_model, device_model, got, expected, bound: float) -> None:
    """Logits, gradients and buffers within `bound` in relative norm (see NORMWISE). A gradient
    that is zero in exact arithmetic (the bias of a layer that a BatchNorm follows) is rounding
    noise on both sides (so is the running mean after it): gradients and buffers are measured
    against the model's largest gradient and buffer too."""
    grads = [(n, q.grad, p.grad) for (n, p), q in
             zip(cpu_model.named_parameters(), device_model.parameters(), strict=True)]
    largest = max(p.double().norm() for _, _, p in grads if p is not None)
    pairs = [("logits", got, expected, 0.0)]
    pairs += [(f"grad of {n}", q, p, 1e-3 * largest) for n, q, p in grads]
    buffers = [(n, q, p) for (n, p), q in zip(cpu_model.named_buffers(), device_model.buffers(),
                                              strict=True) if p.is_floating_point()]
    largest_buffer = max((p.double().norm() for _, _, p in buffers), default=0.0)
    pairs += [(n, q, p, 1e-3 * largest_buffer) for n, q, p in buffers]
    for what, device_value, cpu_value, floor in pairs:
        if cpu_value is None:  # a parameter the loss does not reach
            assert device_value is None, f"{what}: on the device only"
            continue
        assert device_value is not None, f"{what}: missing on the device"
        error = (device_value.detach().cpu().double() - cpu_value.detach().double()).norm()
        scale = max(cpu_value.detach().double().norm(), floor, 1e-12)
        assert error / scale <= bound, f"{what}: relative error {error / scale:.2e} > {bound}"
