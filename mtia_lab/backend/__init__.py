"""The simulated MTIA device, in three layers split as PyTorch's reference backend
(torch_openreg) splits its own; each imports only the layers below it:

- runtime/  what a driver owns: device state, caching allocator, streams, cost model, OOM;
- aten/     how ops on device tensors are served: the tensor subclass, the PrivateUse1
            registration, dispatch, kernels, CPU fallback, layouts, autocast, graph capture;
- module/   the Python device module `torch.mtia_sim` and `torch.accelerator` answered by it.

`register()` is all it takes; `import mtia_lab` calls it.
"""

from __future__ import annotations

import sys
import types

from .. import _compat
from .aten import (  # the parts register() below installs
    amp,
    attention,
    backward_errors,
    dispatch,
    dlpack,
    ipc,
    kernels,
    pinned_memory,
    rebind,
    registration,
    resize,
    serialization,
    storage_methods,
    storages,
)
from .aten.dispatch import StrictModeError, set_strict, strict
from .aten.fallback import fallback_counts, reset_fallback_counts
from .aten.registry import KERNELS, register_kernel, unregister_kernel
from .aten.tensor import MTIATensor, storage_of
from .module import accelerator, device_module, profiler
from .runtime.device_state import RUNTIME, configure

__all__ = [
    "KERNELS", "MTIATensor", "RUNTIME", "StrictModeError", "configure", "fallback_counts",
    "register", "register_kernel", "reset_fallback_counts", "set_strict", "storage_of",
    "strict", "unregister_kernel",
]


def _as_module() -> types.ModuleType:
    """torch.mtia_sim is a real module object, so `import torch.mtia_sim`-style access works."""
    module = sys.modules.get("torch.mtia_sim")
    if module is None:
        module = types.ModuleType("torch.mtia_sim", device_module.__doc__)
        for name in device_module.__all__ + ["_is_in_bad_fork", "_lazy_init", "DeviceProperties"]:
            setattr(module, name, getattr(device_module, name))
        sys.modules["torch.mtia_sim"] = module
        sys.modules["torch.mtia_sim.memory"] = device_module.memory
    return module


def register() -> None:
    """Register the mtia_sim device with PyTorch (idempotent)."""
    if not KERNELS:
        kernels.register_native_families()
    resize.register()  # resize_ / resize_as_ keep memory_format (not the fallback)
    registration.register_backend(_as_module())
    amp.register()  # autocast policy + GradScaler kernels (after the backend is named)
    attention.register()  # SDPA's OVERRIDEABLE choice and the fused attention kernels
    serialization.register()  # torch.save / torch.load of device tensors
    ipc.register()  # a device tensor sent to another process stays on the device
    rebind.register()  # set_(tensor): rebind to other memory
    backward_errors.install(MTIATensor)  # exceptions in backward reach the caller
    storages.install()  # torch.UntypedStorage(n, device="mtia_sim"): a clear error
    pinned_memory.register()  # t.pin_memory() / is_pinned(), as with CUDA
    storage_methods.register()  # storage.is_mtia_sim, storage.mtia_sim()
    dlpack.register()  # DLPack export of device tensors: a clear refusal
    accelerator.register()  # torch.accelerator.* answered by torch.mtia_sim
    profiler.register()  # profile(use_device="mtia_sim"): host times, not C++ stubs' garbage
    dispatch  # noqa: B018  (importing dispatch installs MTIATensor.__torch_dispatch__)
    _compat.enable_foreach_for(MTIATensor)  # torch.optim's multi-tensor path (kernels_nn.py)
