"""Testing helpers: the OpInfo oracle that compares the device against the CPU, op by op."""

from __future__ import annotations

from .opinfo import (
    CLASSES,
    VARIANTS,
    OpResult,
    check_op,
    compare,
    has_variant,
    supported_ops,
    to_device,
)

__all__ = ["CLASSES", "VARIANTS", "OpResult", "check_op", "compare", "supported_ops", "has_variant",
    "to_device",]
