"""The engine switch: the Dynamo backend registered as "mtia_lab".

`torch.compile(model, backend="mtia_lab")` runs the teaching scheduler (mtia_lab/compiler/
aot.py); `options={"engine": "inductor", ...}` hands the graph to real TorchInductor for the
device instead (mtia_lab/inductor), the other options being Inductor config patches. It stands
above both compilers, which know nothing of each other. Dynamo finds it through the package's
`torch_dynamo_backends` entry point (pyproject.toml), or `register()`.
"""

from __future__ import annotations

from .. import _compat
from .._after_import import call_after_import
from ..compiler import aot
from ..inductor import compile_graph as inductor_compile

ENGINES = ("mtia_lab", "inductor")


def mtia_lab_backend(gm, example_inputs, options: dict | None = None):
    """The Dynamo backend registered as "mtia_lab". `options={"engine": "inductor"}` hands the
    graph to real TorchInductor for the device instead (mtia_lab/inductor)."""
    engine = (options or {}).get("engine", "mtia_lab")
    if engine == "inductor":
        return inductor_compile(gm, example_inputs, options)
    if engine != "mtia_lab" or set(options or {}) - {"engine"}:
        raise ValueError(f"backend='mtia_lab' takes options={{'engine': 'mtia_lab' | "
                         f"'inductor', ...}} (Inductor config only with 'inductor'), "
                         f"got {options!r}")
    return aot.mtia_lab_backend(gm, example_inputs)


def register(only_if_dynamo_loaded: bool = False) -> None:
    """Register the backend with Dynamo now. Not needed after `pip install`: the package's
    `torch_dynamo_backends` entry point (pyproject.toml) lets Dynamo load `mtia_lab_backend`
    the first time `backend="mtia_lab"` is asked for. `only_if_dynamo_loaded`: do nothing
    unless torch._dynamo is imported already (what `import mtia_lab` does: no import cost),
    but still have Dynamo skip the device internals as soon as it is imported, whatever the
    backend (`skip_device_internals`)."""
    if only_if_dynamo_loaded and not _compat.dynamo_loaded():
        call_after_import(_compat.DYNAMO_MODULE, skip_device_internals)
        return
    skip_device_internals()
    _compat.register_dynamo_backend("mtia_lab", mtia_lab_backend)


def skip_device_internals() -> None:
    """Tell Dynamo not to trace mtia_lab.backend. A graph break (`loss.backward()`, a global
    store) runs its code eagerly with Dynamo still watching every new Python frame: the device's
    own kernels, called back from C++, would be traced too, and `MTIATensor.__new__` sets
    Python attributes on a tensor Dynamo cannot model. They are the device, not the model."""
    _compat.dynamo_skip_package("mtia_lab.backend")
