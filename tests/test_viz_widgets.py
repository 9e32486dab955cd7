"""Widgets after the kernel is gone: each carries its static form, and progress bars save their
final frame. (Widget behaviour: test_viz_trace.py, test_viz_layout.py, test_viz_fusion.py.)"""

from __future__ import annotations

import pytest
import torch
from IPython.testing import globalipapp
from IPython.utils.capture import capture_output
from tqdm.notebook import tqdm as notebook_tqdm

from mtia_lab import compiler
from mtia_lab.compiler import config
from mtia_lab.progress import progress, saved_class
from mtia_lab.viz import playground
from mtia_lab.viz.playground import field_error

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def mlp(x, w1, b1, w2, b2):
    return torch.relu(x @ w1 + b1) @ w2 + b2


@pytest.fixture(scope="module")
def pg():
    args = [torch.randn(8, 16), torch.randn(16, 32), torch.randn(32), torch.randn(32, 4),
            torch.randn(4)]
    return playground(compiler.trace(mlp, *args))


def test_progress_bar_saves_its_final_frame():
    globalipapp.get_ipython()  # looked up now: a second start_ipython gives None
    with capture_output() as captured:
        for _ in saved_class(notebook_tqdm)(range(30), desc="sweep"):
            pass
    first, last = captured.outputs[0].data, captured.outputs[-1].data
    assert first[WIDGET_VIEW] == last[WIDGET_VIEW]  # one output, updated in place
    assert "0%" in first["text/plain"] and "0/30" in first["text/plain"]
    assert last["text/plain"].startswith("sweep: 100%") and "30/30" in last["text/plain"]
    assert last["text/html"].startswith("<pre>sweep: 100%")


def test_progress_is_quiet_below_its_threshold(capsys):
    assert list(progress(range(5), desc="short", min_total=10)) == list(range(5))
    assert capsys.readouterr().err == ""
    assert list(progress(range(5), desc="long", min_total=2)) == list(range(5))
    assert "long: 100%" in capsys.readouterr().err


def test_playground_notes_a_refused_value_by_its_field(pg):
    pg.reset()
    w = pg.widget(show_graph=False)
    assert all(note.value == "" for note in w.notes.values())
    w.controls["score_fusion_memory_threshold"].value = -1
    assert "needs an int &gt;= 0" in w.notes["score_fusion_memory_threshold"].value
    assert pg.error.startswith("mtia_lab.compiler.config.score_fusion_memory_threshold = -1 ")
    w.controls["on_chip_memory_budget"].value = "lots"
    assert "not a whole number" in w.notes["on_chip_memory_budget"].value
    assert "needs an int" in w.notes["score_fusion_memory_threshold"].value  # both stay noted
    w.controls["score_fusion_memory_threshold"].value = 10
    w.controls["on_chip_memory_budget"].value = ""
    assert all(note.value == "" for note in w.notes.values()) and pg.error == ""
    assert field_error("max_fusion_unique_io_buffers", "None") == ""
    assert field_error("combo_kernel_max_num_args", 0) == "needs " + config.SETTINGS[
        "combo_kernel_max_num_args"].valid_range()


def test_playground_built_from_a_plan_keeps_its_engine(pg):
    pg.reset()
    w = pg.widget(show_graph=False)
    assert not pg.can_switch and w.engine.disabled
    assert "playground(fn, *args)" in w.engine.tooltips[0]
    w.engine.value = "inductor"  # forced past the disabled buttons: refused, and shown so
    assert w.engine.value == "ours" and w.playground.engine == "ours"
    assert "playground(fn, *args)" in w.playground.error
    pg.reset()


def test_playground_controls_keep_their_width(pg):
    w = pg.widget(show_graph=False)
    column = w.children[0].children[0]
    assert column is w.column
    assert column.layout.flex == "0 0 auto" and column.layout.min_width == "560px"
    assert all(row.layout.flex == "0 0 auto" for row in column.children[:-1])
    assert w.error.layout.max_width == "520px"  # a long message wraps in its own box


def test_playground_widget_bundle_has_the_static_playground(pg):
    pg.reset()
    w = pg.widget()
    bundle = w._repr_mimebundle_()
    assert set(bundle) == {WIDGET_VIEW, "text/plain", "text/html"}
    assert bundle["text/plain"] == pg.to_text()
    assert bundle["text/html"] == pg._repr_mimebundle_()["text/html"]
    assert "<img " in bundle["text/html"] and "children=" not in bundle["text/plain"]


def test_sweep_schedules_each_value_and_leaves_the_playground_as_it_was(pg, capsys):
    pg.reset()
    pg.set(score_fusion_memory_threshold=0)
    before = (dict(pg.settings), pg.plan)
    table = pg.sweep("max_fusion_size", [1, 2, "64"])
    assert (dict(pg.settings), pg.plan) == before
    for (value, kernels, moved, _), size in zip(table.rows, (1, 2, 64), strict=True):
        with config.patch(max_fusion_size=size, score_fusion_memory_threshold=0):
            expected = compiler.schedule(pg.ir, pg.name).after
        assert (kernels, moved) == (expected.kernels, expected.bytes_moved), value
    # size 1: no scheduler fusion (ops inlined while lowering stay with their user)
    assert table.rows[0][1] > table.rows[-1][1]
    text = table.to_text().splitlines()
    assert text[0] == f"sweep of max_fusion_size over {pg.name!r} (3 values)" and len(text) == 5
    assert "sweeping max_fusion_size: 100%" in capsys.readouterr().err
    with pytest.raises(config.ConfigError, match="max_fusion_size = 0 is invalid"):
        pg.sweep("max_fusion_size", [0])
    with pytest.raises(ValueError, match="no guardrail 'fusion'"):
        pg.sweep("fusion", [1])
