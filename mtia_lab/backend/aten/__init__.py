"""Op registrations and kernels: how an aten op on a device tensor is served.

The middle layer of the backend (like torch_openreg's csrc/aten/): it builds on runtime/ and
knows nothing of module/. Reading order:

- tensor.py          MTIATensor: a wrapper whose bytes live in an inner CPU tensor, and the
                     DeviceStorage that ties those bytes to an allocator block;
- registration.py    the PrivateUse1 backend: factories and host-to-device copies;
- dispatch.py        `MTIATensor.__torch_dispatch__`: unwrap, choose a kernel, run, wrap;
- schema.py          what an op's schema says about aliasing;
- registry.py        the op -> kernel table; kernels.py, kernels_nn.py the native kernels;
- fallback.py        the CPU fallback for ops with no kernel;
- layouts.py         results strided as PyTorch's fake kernels promise;
- host_indices.py    host index tensors, taken as CUDA takes them;
- amp.py             autocast policy and GradScaler kernels;
- attention.py       fused attention: SDPA's OVERRIDEABLE backend and its two ops;
- mtia_graph.py      MTIAGraph and `graph`: capture a region once, replay it without dispatch;
  graph_capture.py   the capture's hooks into the dispatcher and the allocator, and what they
                     refuse; graph_replay_nodes.py the prepared calls a replay runs;
- the CUDA-parity pieces registered by `backend.register()`: rebind.py (`set_`), resize.py,
  serialization.py (torch.save/load), storages.py, storage_methods.py, pinned_memory.py,
  dlpack.py, backward_errors.py (exceptions in backward reach the caller).
"""
