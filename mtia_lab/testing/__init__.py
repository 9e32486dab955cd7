"""Testing helpers: the OpInfo oracle that compares the device against the CPU, op by op.

    from mtia_lab.testing import check_op, supported_ops
    check_op(supported_ops(["clamp"])[0]).klass          # "native"

`scripts/opinfo_sweep.py` runs it over the whole op_db.
"""

from __future__ import annotations

from .compare import compare, to_device
from .opinfo import CLASSES, VARIANTS, OpResult, check_op, has_variant, supported_ops

__all__ = [
    "CLASSES", "VARIANTS", "OpResult", "check_op", "compare", "has_variant", "supported_ops",
    "to_device",
]
