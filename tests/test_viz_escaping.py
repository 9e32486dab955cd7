"""User text in views is data, never markup: trace labels, error text, module and op names,
allocation sources and tensor names reach rich, HTML and SVG escaped (no crash on "[/]", no
`javascript:` link, no injected element)."""

import copy
import xml.etree.ElementTree as ET

import torch

import mtia_lab
from mtia_lab.inspect.memory import MemorySnapshot
from mtia_lab.trace.io import trace_from_json, trace_to_json
from mtia_lab.viz import layout_view, trace_summary, trace_tree
from mtia_lab.viz.memory import render_rich
from mtia_lab.viz.trace_format import rich_html, rich_text

LINK = "[link=javascript:alert(1)]click me[/link]"
TAG = '</title><script>alert("x")</script>'


def _hostile_trace():
    model = torch.nn.Sequential()
    model.add_module("[/]", torch.nn.Linear(2, 2))
    model.add_module("[bold red]x", torch.nn.ReLU())
    model = model.to("mtia_sim")
    with mtia_lab.trace(LINK) as t:
        model(torch.ones(1, 2, device="mtia_sim"))
    data = copy.deepcopy(trace_to_json(t))
    data["metadata"]["error"] = "RuntimeError: [/] " + LINK
    data["events"][0][1] = "aten::[/]odd.default"  # an op name from a file
    return trace_from_json(data)


def _check(view_text: str, view_html: str) -> None:
    assert "click me" in view_text and "[/]" in view_text
    assert "javascript:" not in view_html.replace("[link=javascript:", "")
    assert "<a " not in view_html


def test_trace_tree_and_summary_show_markup_as_text():
    trace = _hostile_trace()
    for view in (trace_tree(trace), trace_summary(trace)):
        text = view.to_text()  # "[/]" used to raise rich.errors.MarkupError
        html = view._repr_mimebundle_()["text/html"]
        _check(text, html)
        assert LINK in text.replace("\n", "")
    assert "[bold red]x" in trace_tree(trace).to_text()
    assert "[/]odd" in trace_summary(trace).to_text()


def test_memory_table_shows_ops_and_sources_as_text():
    snapshot = [{
        "device": 0, "address": 4096, "total_size": 2 << 20, "allocated_size": 512,
        "active_size": 512, "requested_size": 100, "segment_type": "small",
        "segment_pool_id": (0, 0),
        "blocks": [
            {"address": 4096, "size": 512, "requested_size": 100, "state": "active_allocated",
             "op": "[/]" + LINK, "source": "<ipython-input-[/]>:3"},
            {"address": 4608, "size": (2 << 20) - 512, "requested_size": 0,
             "state": "inactive", "op": "", "source": ""},
        ],
    }]
    table = render_rich(MemorySnapshot.from_snapshot(snapshot))
    text, html = rich_text(table, 160), rich_html(table, 160)
    _check(text, html)


def test_layout_svg_escapes_the_tensor_name():
    x = torch.arange(6.0).reshape(2, 3)
    svg = layout_view(x.t(), TAG, base=x).to_svg()
    ET.fromstring(svg)  # still well-formed XML
    assert "<script>" not in svg and "&lt;script&gt;" in svg
