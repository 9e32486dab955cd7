"""A child forked after the parent used the device cannot use it, as with CUDA ("Cannot
re-initialize CUDA in forked subprocess"): DataLoader workers started with fork hit this on real
hardware. A child forked before the first use can use the device."""

from __future__ import annotations

import multiprocessing

import pytest
import torch
from fresh_python import run_python

DEVICE = "mtia_sim"
CUDA_WORDS = ("Cannot re-initialize mtia_sim in forked subprocess. To use mtia_sim with "
              "multiprocessing, you must use the 'spawn' start method")


def _in_child(queue, inherited) -> None:
    """Each use of the device in a bad fork, and what it raised (None: it worked)."""
    module = torch.mtia_sim
    results = {"bad fork": module._is_in_bad_fork(), "initialized": module.is_initialized(),
               "count": module.device_count()}
    torch.manual_seed(0)  # PyTorch skips the device in a bad fork (DataLoader workers seed so)
    uses = {"init": module.init, "factory": lambda: torch.zeros(2, device=DEVICE),
            "copy": lambda: torch.ones(2).to(DEVICE), "op": lambda: inherited + 1}
    for name, use in uses.items():
        try:
            use()
            results[name] = None
        except RuntimeError as error:
            results[name] = str(error)
    queue.put(results)


def test_a_child_forked_after_the_device_was_used_cannot_use_it():
    inherited = torch.ones(2, device=DEVICE)  # the parent uses the device
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_in_child, args=(queue, inherited))
    child.start()
    results = queue.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0
    assert results.pop("bad fork") is True and results.pop("initialized") is False
    assert results.pop("count") == torch.mtia_sim.device_count()
    assert results == dict.fromkeys(["init", "factory", "copy", "op"], CUDA_WORDS)
    assert not torch.mtia_sim._is_in_bad_fork() and torch.mtia_sim.is_initialized()
    torch.testing.assert_close((inherited + 1).cpu(), torch.full((2,), 2.0))


@pytest.mark.parametrize("used_first", [False, True])
def test_a_child_forked_before_the_first_use_can_use_the_device(used_first):
    """As CUDA: importing the device initializes nothing; its first tensor does."""
    code = (
        "import os, torch, mtia_lab\n"
        f"if {used_first}: torch.ones(1, device='mtia_sim')\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    try:\n"
        "        print('child', torch.ones(2, device='mtia_sim').add(1).sum().item())\n"
        "    except RuntimeError as error:\n"
        "        print('child', error)\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "print('parent', torch.ones(2, device='mtia_sim').sum().item())\n"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    child = f"child {CUDA_WORDS}" if used_first else "child 4.0"
    assert done.stdout.splitlines() == [child, "parent 2.0"]
