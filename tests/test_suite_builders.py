"""The fidelity suites' builders leave no weight uninitialized.

A block built on its own (not through a `PreTrainedModel`) skips `_init_weights`, and some
`transformers` modules leave parameters as `torch.empty` until then: Mamba's and Falcon-Mamba's
mixers build A_log and D so (initialize_mixer_weights=False). Those held host memory's leftovers,
different in every process (values up to 1e38, inf or NaN), which made falcon_mamba_block's
output all NaN in some processes, on the CPU and on mtia_sim alike.
`torch.use_deterministic_algorithms(True)` makes `torch.empty` fill floats with NaN, so a weight
left uninitialized is NaN in every run, and the check below is deterministic.
"""

import importlib

import pytest
import torch

import mtia_lab  # noqa: F401  (registers mtia_sim, where the builders put their modules)


def _modules(obj, seen=None):
    """The nn.Modules a graph's function holds, through nested closures."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    if isinstance(obj, torch.nn.Module):
        return [obj]
    found = []
    for cell in getattr(obj, "__closure__", None) or ():
        try:
            found += _modules(cell.cell_contents, seen)
        except ValueError:  # an empty cell
            pass
    return found


def _uninitialized(suite: str, graph: str) -> list[str]:
    builders = importlib.import_module(f"fidelity_{suite}")._BUILDERS
    deterministic = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        torch.manual_seed(0)
        fn, _ = builders[graph]()
    finally:
        torch.use_deterministic_algorithms(deterministic)
    modules = _modules(fn)
    assert modules, f"{graph}: no module found in its function"
    return [name for m in modules for name, t in [*m.named_parameters(), *m.named_buffers()]
            if t.is_floating_point() and not torch.isfinite(t.detach().cpu()).all()]


@pytest.mark.parametrize("suite, graph", [("heldout3", "mamba_block"),
                                          ("heldout10", "falcon_mamba_block")])
def test_state_space_blocks_initialize_their_mixer(suite, graph):
    assert _uninitialized(suite, graph) == []


def test_uninitialized_weights_are_seen():
    """The check's edge: a block built as transformers leaves it is caught (A_log and D)."""
    from transformers import FalconMambaConfig
    from transformers.models.falcon_mamba.modeling_falcon_mamba import FalconMambaBlock

    torch.use_deterministic_algorithms(True)
    try:
        block = FalconMambaBlock(FalconMambaConfig(hidden_size=8, state_size=4, expand=2,
                                                   num_hidden_layers=1, vocab_size=16), 0)
    finally:
        torch.use_deterministic_algorithms(False)
    bad = [n for n, t in block.named_parameters() if not torch.isfinite(t.detach()).all()]
    assert bad == ["mixer.A_log", "mixer.D"]
