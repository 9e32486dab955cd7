"""mtia_lab: learn how an accelerator plugs into PyTorch, on a simulated MTIA device.

`import mtia_lab` registers the `mtia_sim` device: `torch.randn(3, device="mtia_sim")` works.
"""

from __future__ import annotations

from . import trace  # a callable package: `with mtia_lab.trace() as t:`
from ._version import __version__  # noqa: F401  (the package's version, as `mtia_lab.__version__`)
from .backend import (
    MTIATensor,
    StrictModeError,
    configure,
    fallback_counts,
    register,
    register_kernel,
    reset_fallback_counts,
    set_strict,
    storage_of,
    strict,
    unregister_kernel,
)
from .backend.runtime.profile import MTIA_V1, MTIA_V2, ChipProfile
from .trace import Trace, load_trace

DEVICE = "mtia_sim"

__all__ = [
    "DEVICE", "MTIA_V1", "MTIA_V2", "ChipProfile", "MTIATensor", "StrictModeError", "configure",
    "fallback_counts", "register", "register_kernel", "reset_fallback_counts", "set_strict",
    "storage_of", "strict", "unregister_kernel",
    "Trace", "load_trace", "trace",
]

register()

# torch.compile(model, backend="mtia_lab"): Dynamo finds the backend through the
# `torch_dynamo_backends` entry point (pyproject.toml), so importing mtia_lab need not import
# torch._dynamo (about a second); if Dynamo is loaded already, registering costs nothing.
from .compare.engine import register as _register_backend  # noqa: E402  (needs the device first)

_register_backend(only_if_dynamo_loaded=True)  # the engine switch (compare/engine.py)

from .compiler import trace_listener as _compiled_trace  # noqa: E402

_compiled_trace.install()  # compiled kernels show in `mtia_lab.trace()`

from .distributed import registration as _distributed  # noqa: E402

_distributed.register()  # torch.distributed: the mtia_ccl backend for mtia_sim (distributed/)
from .inductor import install_entry_when_imported as _inductor_entry  # noqa: E402

_inductor_entry()  # torch.compile (Inductor) compiles mtia_sim graphs for the device (inductor/)


def load_ipython_extension(ipython) -> None:
    """`%load_ext mtia_lab`: registers the `%mtia_trace` / `%%mtia_trace` magics (magics.py)."""
    from .magics import load_ipython_extension as load

    load(ipython)
