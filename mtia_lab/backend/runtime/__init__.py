"""The device's runtime: what a driver owns, and nothing about ops or PyTorch's device API.

The bottom layer of the backend (like torch_openreg's csrc/runtime/): it imports nothing from
aten/ or module/. Reading order:

- device_state.py  RUNTIME: one DeviceState per device (memory, RNG, chip profile, clock) and
                   `configure()`, the only mutable global state of the backend;
- profile.py       chip profiles: the published figures of the chip being imitated;
- cost.py          the roofline cost model: how long a kernel takes on that chip;
- streams.py       streams and events on each device's simulated clock;
- allocator/       the caching allocator (blocks and segments, caching policy, statistics,
                   interrupt repair);
- oom.py           out of memory as CUDA reports it, checked before the host allocates.
"""
