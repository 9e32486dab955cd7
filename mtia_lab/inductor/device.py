"""What Inductor must know about `mtia_sim` to compile for it as it compiles for MTIA.

Three registrations, the same three a real out-of-tree accelerator makes:
  - a Dynamo *device interface* (streams, device guard, properties: what the generated wrapper
    and Inductor's heuristics ask of the device);
  - *device op overrides*: the lines the wrapper writes to guard the device and get a stream;
  - the *backend for the device*: Inductor's `TritonScheduling` (its GPU backend: pointwise and
    reduction kernels in Triton, matmuls and convolutions as extern ATen calls) and a Python
    wrapper (`PythonWrapperMtiaSim`, like Inductor's own `PythonWrapperMtia`).
And the device joins Inductor's GPU types, with MTIA's template heuristics, so every decision
Inductor takes by device type is the one it takes for "mtia".
"""

from __future__ import annotations

import functools

import torch

from . import _compat

DEVICE = _compat.DEVICE


def get_raw_stream(index: int) -> int:
    """The wrapper passes this to each launch; the interpreter needs no stream handle. The
    launch hook charges the *current* stream of the simulated device (torch.mtia_sim)."""
    return 0


def reinterpret_tensor(base: torch.Tensor, size, stride, offset_increment: int = 0):
    """Inductor's `reinterpret_tensor` (a C++ helper that builds a new TensorImpl over the same
    storage) would drop the device tensor's Python subclass; this is the same view made with
    `as_strided`, which the device serves as a view of the same DeviceStorage."""
    return torch.as_strided(base, size, stride, base.storage_offset() + offset_increment)


def assert_size_stride(tensor: torch.Tensor, size, stride, op_name: str | None = None) -> None:
    """Inductor's run-time check of an extern kernel's result (or a graph input) against its
    plan, whose failure is named as what it is: the device's kernel broke its fake kernel's
    promise (errors.layout_mismatch), not a bare AssertionError from the generated code."""
    try:
        _CHECK(tensor, size, stride, op_name)
    except AssertionError as error:
        from .errors import layout_mismatch

        raise layout_mismatch(op_name, error) from error


_CHECK = _compat.size_stride_check()


@functools.cache  # one class, whichever registration comes first
def _interface() -> type:
    module = getattr(torch, DEVICE)

    class MtiaSimInterface(_compat.device_interface_base()):
        """torch._dynamo's view of torch.mtia_sim (cf. its MtiaInterface for torch.mtia)."""

        device = module.device
        Event = module.Event
        Stream = module.Stream

        class Worker:  # what compile workers may ask without touching the device
            @staticmethod
            def set_device(device: int) -> None:
                module.set_device(device)

            @staticmethod
            def current_device() -> int:
                return module.current_device()

            @staticmethod
            def get_device_properties(device=None):
                return module.get_device_properties(device)

        current_device = staticmethod(module.current_device)
        set_device = staticmethod(module.set_device)
        device_count = staticmethod(module.device_count)
        stream = staticmethod(module.stream)
        current_stream = staticmethod(module.current_stream)
        set_stream = staticmethod(module.set_stream)
        synchronize = staticmethod(module.synchronize)
        get_device_properties = staticmethod(module.get_device_properties)
        get_raw_stream = staticmethod(get_raw_stream)
        memory_allocated = staticmethod(module.memory_allocated)
        is_bf16_supported = staticmethod(module.is_bf16_supported)

        @staticmethod
        def is_available() -> bool:
            return True

        @staticmethod
        def get_compute_capability(device=None):
            major, minor = module.get_device_capability(device)
            return major * 10 + minor

        @staticmethod
        def is_triton_capable(device=None) -> bool:
            return True

        @staticmethod
        def raise_if_triton_unavailable(device=None) -> None:
            from .errors import check_triton

            check_triton()

    return MtiaSimInterface


def _op_overrides():
    class MtiaSimDeviceOpOverrides(_compat.device_op_overrides_base()):
        def import_get_raw_stream_as(self, name: str) -> str:
            return f"from mtia_lab.inductor.device import get_raw_stream as {name}"

        def set_device(self, device_idx: int) -> str:
            return f"torch.{DEVICE}.set_device({device_idx})"

        def synchronize(self) -> str:
            return f"torch.{DEVICE}.synchronize()"

        def device_guard(self, device_idx: int) -> str:
            return f"torch.{DEVICE}.device({device_idx})"

        def current_stream(self) -> str:
            return f"torch.{DEVICE}.current_stream()"

    return MtiaSimDeviceOpOverrides()


def _wrapper_codegen() -> type:
    base = _compat.python_wrapper_codegen()

    class PythonWrapperMtiaSim(base):
        """Inductor's Python wrapper, as for MTIA; buffers come from torch.empty_strided on the
        device (the simulated caching allocator), Triton kernels launch through the hook of
        mtia_lab/inductor/triton_launch.py, extern kernels are ATen calls on device tensors."""

        def write_header(self) -> None:
            super().write_header()
            self.imports.splice("import mtia_lab.inductor.device\n"
                                "import mtia_lab.inductor.triton_launch")
            self.header.splice(
                "reinterpret_tensor = mtia_lab.inductor.device.reinterpret_tensor  # keeps the "
                "device tensor (mtia_lab)\n"
                "assert_size_stride = mtia_lab.inductor.device.assert_size_stride  # names a "
                "device kernel's layout bug (mtia_lab)")

        @staticmethod
        def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
            if is_subgraph:
                return base.create(is_subgraph, subgraph_name, parent_wrapper,
                                   partition_signatures)
            return PythonWrapperMtiaSim()

    return PythonWrapperMtiaSim


_done: list[bool] = []


def register_interface() -> None:
    """Dynamo's device interface, registered as soon as Dynamo's registry is imported (as
    CUDA's is): `get_interface_for_device("mtia_sim")` answers without Inductor loaded."""
    _compat.register_device_interface(DEVICE, _interface())


def register() -> None:
    """Teach Inductor the device (idempotent)."""
    if _done:
        return
    _compat.add_gpu_type(DEVICE)
    register_interface()
    _compat.register_device_codegen(DEVICE, _op_overrides(), _wrapper_codegen())
    _compat.mtia_config_heuristics(DEVICE)
    _compat.no_gemm_templates_for(DEVICE)
    _done.append(True)
