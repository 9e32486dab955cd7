"""Functional collectives on device tensors: `torch.distributed._functional_collectives`.

DTensor and compiled code call the `_c10d_functional` ops (all_reduce, all_gather_into_tensor,
reduce_scatter_tensor, all_to_all_single, broadcast, wait_tensor, ...). On a device tensor they
reach `MTIATensor.__torch_dispatch__` like any aten op. Without a kernel they would take the
CPU fallback: gloo would still move the bytes, but the process group would see host tensors,
charge no simulated time and record nothing. So each gets a registry kernel of kind
"collective": it runs PyTorch's own C++ op on the inner host tensors while `device_context`
tells mtia_ccl that those host tensors are this device's memory. The dispatcher charges no
kernel time for kind "collective": the process group charges the interconnect's.
"""

from __future__ import annotations

import torch

from .. import _compat
from ..backend.aten.registry import register_kernel
from .collective_steps import device_context

NAMESPACES = ("_c10d_functional::", "_c10d_functional_autograd::")
KIND = "collective"


def _collective_kernel(func, args, kwargs, device):
    with device_context(device.index):
        return func(*args, **kwargs)


def _wrap_kernel(func, args, kwargs, device):
    """`_wrap_tensor_autograd` makes an AsyncCollectiveTensor that waits on first use. Made here
    it would wrap the inner host tensor, and the dispatcher would rewrap that as a plain device
    tensor that never waits. So the wait happens now: functional collectives on mtia_sim are
    synchronous on the host (the simulated clock was charged when the collective was issued)."""
    (tensor,) = args
    with device_context(device.index):
        torch.ops._c10d_functional.wait_tensor(tensor)
    return tensor


def op_names() -> list[str]:
    return sorted(n for n in _compat.all_op_names() if n.startswith(NAMESPACES))


_done = False


def register() -> None:
    """Give every functional collective a device kernel (idempotent). Called when the first
    mtia_ccl group is made: the Python-defined ops appear when _functional_collectives is
    imported (60 ms, which `import mtia_lab` does not pay)."""
    global _done
    if _done:
        return
    _compat.load_functional_collectives()  # defines _wrap_tensor_autograd

    for name in op_names():
        wrap = name == "_c10d_functional::_wrap_tensor_autograd"
        register_kernel(name, kind=KIND)(_wrap_kernel if wrap else _collective_kernel)
    _done = True
