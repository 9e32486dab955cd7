"""torch.compile's modes on mtia_sim: what each does for a GPU-like device, and what it does here.

`mode="reduce-overhead"` (Inductor config `triton.cudagraphs`) captures each compiled graph in a
CUDA graph and replays it: one launch per call instead of one per kernel. Inductor's graph trees
are CUDA's own (CUDA streams, pools, `torch.cuda.graph`) and skip, without a word, every graph
whose device is not "cuda". Here the same idea runs on the device's graph API,
`torch.mtia_sim.MTIAGraph` (`DeviceGraphed`), with the rules of Inductor's CUDA-graph wrappers:
  - the first call runs as compiled (a warm-up), the second is captured (a capture runs the
    kernels here, so it is also that call's work), later calls replay;
  - static inputs (parameters and buffers: Inductor's `static_input_idxs`) are used in place;
    other inputs are copied into the graph's own placeholders before each replay. Inductor
    also marks backward's saved activations static (graph trees keep the forward's outputs in
    place); a static input found elsewhere at a later call is copied in from then on (one
    more capture), unless the graph writes it: then it is captured again, up to Inductor's
    `triton.cudagraph_unexpected_rerecord_limit`;
  - graphs Inductor would not capture (mutated non-static inputs, non-tensor inputs, ops it
    names as incompatible) and graphs whose warm-up needed the CPU fallback run uncaptured,
    with a warning naming the reason.
Unlike graph trees, outputs the graph made are handed out as copies (one device copy per output
and call): a replay rewrites the graph's buffers, and nothing here can tell, as graph trees do,
that a caller still holds the previous call's outputs. Replays are charged to the simulated
clock as one launch plus the kernels' time; `mtia_lab.trace()` shows the copies, not the
replayed kernels (as for any MTIAGraph replay).

`mode="max-autotune"` (`max_autotune`, `coordinate_descent_tuning`, and graph capture as above)
on a GPU times candidate kernels on the device and keeps the fastest: Triton matmul and
convolution templates against the ATen kernel, and each Triton kernel's block-size configs.
Neither timing exists here: Triton's interpreter times the host, and the roofline prices every
block configuration of a kernel the same. So no template is offered (`no_gemm_templates_for`,
_compat.py) and each kernel runs its first config (as Inductor does under Triton's interpreter);
a warning says so once.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable

import torch

from ..backend.aten.fallback import fallback_counts
from ..backend.aten.graph_capture import GraphCaptureError
from ..backend.aten.mtia_graph import MTIAGraph, graph
from ..backend.aten.tensor import MTIATensor
from . import _compat

_WARNED: set[str] = set()


class CompileModeWarning(UserWarning):
    """A torch.compile mode, or part of one, that does not apply on mtia_sim (said once)."""


def warn_once(key: str, message: str) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(message, CompileModeWarning, stacklevel=2)


def note_autotuning() -> None:
    """Called inside each device compile, with the mode's config in place."""
    if _compat.autotuning_requested():
        warn_once("max-autotune", (
            'mode="max-autotune" (max_autotune, coordinate_descent_tuning) on mtia_sim: '
            "autotuning is skipped. Inductor chooses Triton "
            "matmul/convolution templates and each kernel's block sizes by timing every "
            "candidate on the device, and neither timing exists here (Triton's interpreter "
            "times the host; the roofline prices every block size the same): matmuls and "
            "convolutions stay ATen calls and each Triton kernel runs its first config, as in "
            "the default mode. Its graph capture (reduce-overhead) does apply."))


def apply_graph_capture(compiled) -> None:
    """With `triton.cudagraphs` on (reduce-overhead, max-autotune), replay `compiled` (an
    Inductor CompiledFxGraph for the device) through a device graph; or say why not."""
    if not _compat.cudagraphs_requested():
        return
    facts = _compat.graph_capture_facts(compiled)
    if facts.reasons:
        warn_once(f"skip:{facts.reasons[0]}", (
            "mode=\"reduce-overhead\" on mtia_sim: a compiled graph runs without graph capture, "
            f"for Inductor's reason: {'; '.join(facts.reasons)}"))
        return
    compiled.current_callable = DeviceGraphed(
        compiled.current_callable, facts.static_inputs, facts.mutated_inputs,
        _compat.rerecord_limit())
    GRAPHED.append(weakref.ref(compiled.current_callable))


# Every DeviceGraphed made in this process, weakly (torch.compiler.reset() frees their graphs).
GRAPHED: list[weakref.ref] = []


def device_graphs(since: int = 0) -> list[DeviceGraphed]:
    """The reduce-overhead graphs still alive among those made since `len(GRAPHED)` was
    `since`, oldest first: their captures, replays, `skipped` reason and MTIAGraph."""
    return [g for g in (ref() for ref in GRAPHED[since:]) if g is not None]


def _key(x) -> tuple | None:
    """Where a static input's bytes are: what a replay reads."""
    if not isinstance(x, MTIATensor):
        return None
    return (x._inner.data_ptr(), tuple(x.shape), x.stride(), x.dtype)


class DeviceGraphed:
    """One compiled graph, run through torch.mtia_sim.MTIAGraph (see the module docstring).

    `run` is Inductor's compiled callable: it takes a list of inputs and clears it."""

    def __init__(self, run: Callable, static_inputs: frozenset[int], mutated_inputs: frozenset[int],
                 rerecord_limit: int) -> None:
        self.run = run
        self.static_inputs = set(static_inputs)
        self.mutated_inputs = mutated_inputs
        self.rerecord_limit = rerecord_limit
        self.warmed_up = False
        self.captures = 0
        self.replays = 0
        self.skipped: str | None = None  # why this graph runs uncaptured
        self.graph: MTIAGraph | None = None
        self._placeholders: list = []
        self._static_keys: list = []
        self._outputs: tuple = ()
        self._sources: tuple[int | None, ...] = ()  # per output: see _source

    def __call__(self, inputs: list):
        if self.skipped is not None:
            return self.run(inputs)
        if not self.warmed_up:
            return self._warm_up(inputs)
        if self.graph is None:
            return self._capture(inputs)
        moved = self._static_moved(inputs)
        if moved:
            # Inductor marks backward's saved activations static (CUDA graph trees keep the
            # forward's outputs in place); here they are fresh copies each call: copy them in
            # too. A mutated static input stays static: a replay must write the caller's tensor.
            self.static_inputs -= moved - self.mutated_inputs
            return self._capture(inputs)
        return self._replay(inputs)

    # -- the three phases --------------------------------------------------------------------
    def _warm_up(self, inputs: list):
        before = fallback_counts()
        out = self.run(inputs)
        self.warmed_up = True
        host = sorted(op for op, n in fallback_counts().items() if n > before.get(op, 0))
        if host:
            self._skip(f"{', '.join(host)} ran on the host (the CPU fallback), which a device "
                       "graph cannot replay")
        return out

    def _capture(self, inputs: list):
        if self.captures > self.rerecord_limit:
            self._skip(f"its static inputs changed more than {self.rerecord_limit} times "
                       "(triton.cudagraph_unexpected_rerecord_limit)")
            return self.run(inputs)
        self._drop()
        real = list(inputs)
        self._placeholders = [self._placeholder(i, x) for i, x in enumerate(inputs)]
        self._static_keys = [_key(x) if i in self.static_inputs else None
                             for i, x in enumerate(inputs)]
        inputs.clear()
        g = MTIAGraph()
        try:
            with graph(g):
                outputs = self.run(list(self._placeholders))
        except GraphCaptureError as error:
            if self.mutated_inputs:  # part of the work ran, and it wrote inputs: no rerun
                raise
            self._skip(str(error).splitlines()[0])
            return self.run(real)
        self.graph, self.captures = g, self.captures + 1
        self._outputs = tuple(outputs)
        self._sources = tuple(self._source(o) for o in outputs)
        return self._handed_out(real)

    def _replay(self, inputs: list):
        real = list(inputs)
        for i, (slot, x) in enumerate(zip(self._placeholders, inputs, strict=True)):
            if i not in self.static_inputs and isinstance(x, torch.Tensor):
                _compat.copy_into_static(slot, x)
        inputs.clear()
        self.graph.replay()
        self.replays += 1
        return self._handed_out(real)

    # -- helpers -----------------------------------------------------------------------------
    def _placeholder(self, i: int, x):
        if i in self.static_inputs or not isinstance(x, torch.Tensor):
            return x
        slot = _compat.static_input(x)
        _compat.copy_into_static(slot, x)
        return slot

    def _static_moved(self, inputs: list) -> set[int]:
        """The static inputs that are not where the graph read them any more."""
        return {i for i, (x, key) in enumerate(zip(inputs, self._static_keys, strict=True))
                if key is not None and _key(x) != key}

    def _source(self, out) -> int | None:
        """Where a graph output's memory is: the index of the input it is a view of (its
        placeholder's memory is the graph's copy of that input), or None (the graph's own)."""
        if not isinstance(out, MTIATensor):
            return -1
        for i, slot in enumerate(self._placeholders):
            if isinstance(slot, MTIATensor) and slot._storage is out._storage:
                return i
        return None

    def _handed_out(self, real: list) -> list:
        """The graph's outputs as the caller's own tensors: a copy of what the graph made (the
        next replay rewrites it); a view of an input, on the caller's tensor (Inductor returns
        inputs that backward needs: the graph holds only its copy)."""
        made = [k for k, source in enumerate(self._sources) if source is None]
        handed = list(self._outputs)
        for k, copy in zip(made, _copied([self._outputs[k] for k in made]), strict=True):
            handed[k] = copy
        for k, (out, source) in enumerate(zip(self._outputs, self._sources, strict=True)):
            if source is not None and source >= 0 and source not in self.static_inputs:
                slot, x = self._placeholders[source], real[source]
                offset = out.storage_offset() - slot.storage_offset() + x.storage_offset()
                handed[k] = x.as_strided(out.size(), out.stride(), offset)
        return handed

    def _skip(self, reason: str) -> None:
        self.skipped = reason
        self._drop()
        warn_once(f"skip:{reason}", "mode=\"reduce-overhead\" on mtia_sim: a compiled graph "
                  f"runs without graph capture: {reason}")

    def _drop(self) -> None:
        if self.graph is not None:
            self.graph.destroy()
        self.graph, self._outputs, self._placeholders = None, (), []

    def __repr__(self) -> str:
        state = (f"uncaptured: {self.skipped}" if self.skipped else
                 f"{self.captures} capture(s), {self.replays} replay(s), {self.graph}")
        return f"DeviceGraphed({state})"


def _extent(t: torch.Tensor) -> int:
    """How many elements of its storage a tensor reaches (offset included)."""
    if t.numel() == 0:
        return t.storage_offset()
    return t.storage_offset() + 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride(),
                                                                         strict=True))


def _copied(outputs: list) -> list:
    """Fresh device copies of graph-made outputs that keep each one's size, strides and storage
    offset, and which of them share memory (AOTAutograd rebuilds views of outputs from those
    numbers): one copy per shared buffer, of the extent they reach."""
    copies = list(outputs)
    groups: dict[int, list[int]] = {}
    for k, out in enumerate(outputs):
        groups.setdefault(id(out._storage), []).append(k)
    for members in groups.values():
        first = outputs[members[0]]
        if any(outputs[k].dtype != first.dtype for k in members):  # views of other dtypes
            for k in members:
                copies[k] = outputs[k].clone()
            continue
        extent = max(_extent(outputs[k]) for k in members)
        flat = torch.empty(extent, dtype=first.dtype, device=first.device)
        flat.copy_(first.as_strided((extent,), (1,), 0))
        for k in members:
            out = outputs[k]
            copies[k] = flat.as_strided(out.size(), out.stride(), out.storage_offset())
    return copies
