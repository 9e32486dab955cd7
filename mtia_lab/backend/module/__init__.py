"""The Python device module: `torch.mtia_sim`, shaped like `torch.cuda` and `torch.mtia`.

The top layer of the backend (like torch_openreg's Python package): a thin PyTorch-shaped API
over runtime/ (device state, allocator, streams) and the graph capture of aten/. Reading order:

- device_module.py      `torch.mtia_sim`: devices, memory statistics, streams, graphs;
- memory.py             `torch.mtia_sim.memory`: snapshots, memory history, OOM observers, MemPool;
- graphed_callables.py  `make_graphed_callables`, CUDA's helper, for inference;
- accelerator.py        `torch.accelerator.*` answered by torch.mtia_sim.
"""
