"""Registering `mtia_ccl` with torch.distributed (done by `import mtia_lab`).

`Backend.register_backend(name, creator, extended_api=True, devices=["mtia_sim"])` adds the
name to `Backend.backend_list` and maps the device type mtia_sim to it, so that
`init_process_group("cpu:gloo,mtia_sim:mtia_ccl")`, `init_process_group("mtia_ccl")` and -- with
mtia_sim as the accelerator torch detects -- plain `init_process_group()` all create an
`MTIAProcessGroup`. The creator gets the extended options: the group's global ranks name the
ranks in error messages and traces.
"""

from __future__ import annotations

import torch.distributed as dist

from .. import _compat
from .._compat import DEVICE_NAME
from . import functional
from .process_group import BACKEND_NAME, MTIAProcessGroup

_registered = False


def _create(options, backend_options=None):
    functional.register()  # the functional collectives' kernels, once a group exists
    return MTIAProcessGroup(options.store, options.group_rank, options.group_size,
                            options.timeout, list(options.global_ranks_in_group or []))


def register() -> None:
    """Register mtia_ccl for the mtia_sim device type (idempotent)."""
    global _registered
    if _registered:
        return
    if BACKEND_NAME not in dist.Backend.backend_list:
        dist.Backend.register_backend(BACKEND_NAME, _create, extended_api=True,
                                      devices=[DEVICE_NAME])
    _compat.allow_device_mesh_for(DEVICE_NAME)  # init_device_mesh("mtia_sim", ...)
    _registered = True
