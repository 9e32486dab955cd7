"""Testing helpers: the OpInfo oracle that compares the device against the CPU, op by op.

    from mtia_lab.testing import check_op, supported_ops
    check_op(supported_ops(["clamp"])[0]).klass          # "native"

`scripts/opinfo_sweep.py` runs it over the whole op_db. The meta-stride oracle checks that
the device lays results out as PyTorch's fake kernels promise (what TorchInductor plans with):

    from mtia_lab.testing import check_op_strides
    check_op_strides(supported_ops(["nn.functional.conv2d"])[0], "channels_last").klass  # "match"

`scripts/meta_strides_sweep.py` runs that one over the whole op_db.
"""

from __future__ import annotations

from .compare import compare, to_device
from .meta_strides import LAYOUTS, StrideResult, check_op_strides
from .opinfo import CLASSES, VARIANTS, OpResult, check_op, has_variant, supported_ops

__all__ = [
    "CLASSES", "LAYOUTS", "VARIANTS", "OpResult", "StrideResult", "check_op", "check_op_strides",
    "compare", "has_variant", "supported_ops", "to_device",
]
