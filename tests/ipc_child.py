"""Helper for test_ipc_device.py: what a spawned process receives through a queue."""


def describe_received(queue, results) -> None:
    tensor = queue.get()
    results.put((str(tensor.device), tensor.cpu().tolist(), tuple(tensor.shape),
                 tuple(tensor.stride()), tensor.requires_grad))
