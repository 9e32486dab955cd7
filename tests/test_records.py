"""The records both compilers share (mtia_lab/records): one keep-list, one guardrail registry,
and the two compilers side by side, neither importing the other."""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

import mtia_lab  # noqa: F401
from mtia_lab.compare import device_plan
from mtia_lab.compiler import COMPILED, config, plans_for
from mtia_lab.compiler.aot import decompositions
from mtia_lab.inductor import _compat as inductor_compat
from mtia_lab.inductor import entry
from mtia_lab.records.guardrails import GUARDRAILS, ConfigError, inductor_guardrails
from mtia_lab.records.keep import keep_ops

ROOT = Path(__file__).resolve().parents[1]


def _import_graph():
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts/import_graph.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("import_graph", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_two_compilers_never_import_each_other_and_records_import_neither():
    _, edges = _import_graph().load()

    def room(module: str) -> str:
        return module.split(".")[1] if module.count(".") else ""

    crossing = [f"{e.source} -> {e.target} (line {e.line})" for e in edges
                if {room(e.source), room(e.target)} == {"compiler", "inductor"}
                or (room(e.source) == "records"
                    and room(e.target) in ("compiler", "inductor", "compare"))]
    assert crossing == []


@pytest.mark.parametrize("guardrail", inductor_guardrails(), ids=lambda g: g.name)
def test_each_inductor_guardrail_defaults_to_inductors_own_value(guardrail):
    """The registry's defaults are torch 2.13's: an upgrade that moves one fails here, by name."""
    assert getattr(inductor_compat.inductor_config(), guardrail.inductor_key) == \
        guardrail.default, guardrail.name


def test_a_bad_guardrail_value_names_the_value_and_what_is_valid():
    with pytest.raises(ConfigError, match=r"max_fusion_size = 0 is invalid: expected an int >= 1"):
        GUARDRAILS["max_fusion_size"].check(0)
    assert GUARDRAILS["on_chip_memory_budget"].ours and not GUARDRAILS["max_fusion_size"].ours
    assert set(config.SETTINGS) == {g.name for g in GUARDRAILS.values() if g.scheduler}


def test_both_compilers_keep_the_same_ops_undecomposed():
    kept = keep_ops()
    assert torch.ops.aten.mm.default in kept and torch.ops.aten.native_layer_norm.default in kept
    assert not kept & set(decompositions())  # the teaching scheduler's AOTAutograd table
    assert not kept & set(entry.decompositions(None))  # Inductor's table, keep-list on


def test_the_comparison_runs_inductor_under_our_guardrail_values():
    def f(x):
        return (x * 2).relu() + 1

    x = torch.randn(8, 16, device="mtia_sim")
    with config.patch(max_fusion_size=2, combo_kernels=True):
        start = len(COMPILED)
        plans_for(f, x)
        theirs = device_plan(COMPILED[start].gm)
    assert theirs.settings["max_fusion_size"] == 2 and theirs.settings["combo_kernels"] is True
    assert "on_chip_memory_budget" not in theirs.settings  # ours only: Inductor has none
