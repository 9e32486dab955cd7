"""A device tensor sent to another process (torch.multiprocessing queues, DataLoader workers)
arrives on the same device, with its values, sizes and strides, as CUDA's does; it used to
arrive as a CPU tensor (the storage went through PyTorch's host sharing and lost its device)."""

from __future__ import annotations

import multiprocessing
from multiprocessing.reduction import ForkingPickler

import pytest
import torch
from ipc_child import describe_received

DEVICE = "mtia_sim"


def test_a_device_tensor_pickled_for_a_process_stays_on_its_device():
    base = torch.arange(12.0, device=f"{DEVICE}:1")
    strided = base[2::3]  # an offset and a stride of 3
    received = ForkingPickler.loads(bytes(ForkingPickler.dumps(strided)))
    assert received.device == strided.device
    assert (received.shape, received.stride()) == (strided.shape, strided.stride())
    assert received.cpu().tolist() == [2.0, 5.0, 8.0, 11.0]


def test_a_spawned_process_receives_the_tensor_on_the_device():
    context = multiprocessing.get_context("spawn")
    queue, results = context.Queue(), context.Queue()
    child = context.Process(target=describe_received, args=(queue, results))
    child.start()
    try:
        queue.put(torch.arange(8.0, device=DEVICE)[::2].requires_grad_())
        got = results.get(timeout=120)
    finally:
        child.join(timeout=60)
    assert got == (f"{DEVICE}:0", [0.0, 2.0, 4.0, 6.0], (4,), (2,), True)
    assert child.exitcode == 0


def test_sharing_a_device_storage_by_handle_is_refused_clearly():
    """CUDA's `_share_device_` hands out an IPC handle; simulated memory has none to give."""
    storage = torch.arange(4.0, device=DEVICE).untyped_storage()
    with pytest.raises(RuntimeError, match="cannot be mapped into another process.*as a copy"):
        storage._share_device_()


def test_a_received_tensor_cannot_be_sent_on_as_with_cuda():
    """CUDA refuses to share a tensor received from another process again ("Consider cloning
    before sending"): by handle, through a queue, or as a view of it. Its clone can be sent."""
    sent = torch.arange(4.0, device=DEVICE)
    received = ForkingPickler.loads(bytes(ForkingPickler.dumps(sent)))
    words = (f"Attempted to send {DEVICE} tensor received from another process; this is not "
             "currently supported. Consider cloning before sending.")
    for share in (lambda: received.untyped_storage()._share_device_(),
                  lambda: ForkingPickler.dumps(received),
                  lambda: ForkingPickler.dumps(received[1:])):
        with pytest.raises(RuntimeError) as error:
            share()
        assert str(error.value) == words
    again = ForkingPickler.loads(bytes(ForkingPickler.dumps(received.clone())))
    assert again.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
    ForkingPickler.dumps(sent)  # the sender's own tensor can still be sent
