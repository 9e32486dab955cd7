"""One clear error, naming the problem and the fix, for what Inductor cannot do on mtia_sim.

Inductor's own failures arrive wrapped in several layers (Dynamo's BackendCompilerFailed, then
Inductor's InductorError, then a lowering or codegen exception) behind a long traceback. The
entry point (entry.py) turns the ones a learner can meet into `InductorDeviceError`, whose
message says what failed and what to do, and chains Inductor's own error as its cause.
"""

from __future__ import annotations

import os

import torch

from . import _compat


class InductorDeviceError(RuntimeError):
    """TorchInductor cannot compile this for mtia_sim; the message says why and what to do."""


def check_triton() -> None:
    """Triton must be the pinned version, and the host must be one we may switch to the
    interpreter (a CUDA build with a GPU keeps real Triton: we leave it alone)."""
    found = _compat.triton_version()
    want = _compat.SUPPORTED_TRITON
    if found is None:
        raise InductorDeviceError(
            "TorchInductor on mtia_sim runs its Triton kernels in Triton's interpreter, but "
            f"triton is not installed. Install the pinned version: pip install triton=={want}")
    if found.split("+")[0] != want:
        raise InductorDeviceError(
            f"mtia_lab's Inductor hooks were checked with triton {want} but triton {found} is "
            f"installed. Install the pinned version: pip install triton=={want} (or compile "
            "with backend='mtia_lab', which does not use Triton)")
    if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
        raise InductorDeviceError(
            "this torch has a working CUDA GPU, whose Triton kernels must stay compiled: mtia_lab "
            "does not switch the process to Triton's interpreter here. Compile mtia_sim code "
            "with backend='mtia_lab', or start Python with TRITON_INTERPRET=1 yourself (every "
            "Triton kernel then runs interpreted, CUDA's included)")


def triton_imported_too_early() -> InductorDeviceError:
    return InductorDeviceError(
        "Triton was imported before mtia_lab could switch it to its interpreter (by importing "
        "torch._inductor or triton before mtia_lab), and its library functions (tl.sum...) "
        "could not be rebuilt for the interpreter afterwards: its kernels cannot run on "
        "mtia_sim in this process. Restart Python and `import mtia_lab` before "
        "torch._inductor / triton (or start it with TRITON_INTERPRET=1).")


def unsupported_op(op: str, cause: BaseException) -> InductorDeviceError:
    return InductorDeviceError(
        f"TorchInductor cannot lower {op} for mtia_sim (no lowering, decomposition or ATen "
        f"fallback it can use on this device). Run that part eagerly (torch.compiler.disable, or "
        f"a graph break), or compile with backend='mtia_lab'. Inductor said: "
        f"{_first_line(cause)}")


def kernel_failed(kernel: str, nodes: str, cause: BaseException) -> InductorDeviceError:
    inner = cause.__cause__ if isinstance(cause.__cause__, InductorDeviceError) else None
    if inner is not None:
        return InductorDeviceError(f"{inner} (in Triton kernel {kernel}: {nodes})")
    return InductorDeviceError(
        f"Triton's interpreter could not run Inductor's kernel {kernel} ({nodes}) on mtia_sim: "
        f"{_first_line(cause)}. Run that part eagerly (torch.compiler.disable) or compile with "
        "backend='mtia_lab'.")


class DeviceLayoutError(InductorDeviceError):
    """A device kernel's result is not laid out as the op's fake (meta) kernel said: the
    device's bug (mtia_lab/backend/aten/layouts.py), found by Inductor's run-time check."""


def layout_mismatch(op_name: str, cause: AssertionError) -> DeviceLayoutError:
    """Inductor's assert_size_stride failed on the result of `op_name` (or on an input)."""
    said = "; ".join(line.strip() for line in str(cause).splitlines()[:1])
    if op_name in ("input", "", None):
        return DeviceLayoutError(
            "a compiled graph's input on mtia_sim has other sizes or strides than the graph "
            "was compiled for, which Dynamo's guards should have prevented: a bug of mtia_lab's "
            "Inductor path. Workaround: torch.compiler.reset() and compile again, or compile "
            f"with backend='mtia_lab'. Inductor's check said: {said}")
    return DeviceLayoutError(
        f"mtia_sim's kernel for {op_name} returned a result with other sizes or strides than "
        "the op's fake (meta) kernel promised, which TorchInductor planned the compiled code "
        "with. This is a bug of the mtia_sim device, not of your model: each device kernel "
        "must lay its results out as PyTorch's fake kernel says for the device "
        "(mtia_lab/backend/aten/layouts.py; mtia_lab.testing.meta_strides checks it). Please "
        "report it with the op's name. Workaround: "
        "torch._inductor.config.layout_optimization = False "
        f"(for convolutions), or compile with backend='mtia_lab'. Inductor's check said: {said}")


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
