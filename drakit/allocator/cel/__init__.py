"""Kubernetes CEL for DRA device selectors (see :mod:`drakit.allocator.cel.engine`)."""

from drakit.allocator.cel.engine import (
    MAX_COST,
    CELCancelledError,
    CELCompileError,
    CELCostError,
    CELError,
    CELRuntimeError,
    Selector,
    compile_selector,
)
from drakit.allocator.cel.variables import DeviceVariables, device_context, qualify

__all__ = [
    "MAX_COST",
    "CELCancelledError",
    "CELCompileError",
    "CELCostError",
    "CELError",
    "CELRuntimeError",
    "DeviceVariables",
    "Selector",
    "compile_selector",
    "device_context",
    "qualify",
]
