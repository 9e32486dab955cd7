"""Stride layouts: the data model against PyTorch's own indexing, and every rendering of it."""

from __future__ import annotations

import base64
import io
import xml.etree.ElementTree as ET

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from mtia_lab.inspect import LayoutError, layout_of, strided_layout
from mtia_lab.viz import LayoutExplorer, layout_view, layout_view_from
from mtia_lab.viz.layout_render import MAX_CELLS, cell_colour

SVG = "{http://www.w3.org/2000/svg}"


def _views() -> dict[str, torch.Tensor]:
    base = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)
    return {
        "contiguous": base,
        "transposed": base.transpose(1, 3),
        "sliced_offset": base[1, 1:, ::2, 1:4],
        "expanded": torch.arange(5.0).expand(3, 4, 5),
        "as_strided_overlap": torch.arange(30.0).as_strided((3, 4), (2, 1), 3),
        "channels_last": base.contiguous(memory_format=torch.channels_last),
        "channels_last_3d": torch.zeros(2, 3, 2, 2, 2).contiguous(
            memory_format=torch.channels_last_3d
        ),
        "scalar_view": base[1, 2, 3, 4],
        "empty": base[:, :0],
        "row_of_column_major": torch.zeros(4, 6).t()[2],
    }


def _oracle_cells(t: torch.Tensor, storage_len: int) -> torch.Tensor:
    """The cell of every element, by PyTorch itself: as_strided over a storage of indices."""
    return torch.arange(storage_len).as_strided(t.size(), t.stride(), t.storage_offset())


def _check_against_torch(t: torch.Tensor, storage_len: int, record) -> None:
    assert record.size == tuple(t.shape) and record.stride == t.stride()
    assert record.storage_len == storage_len
    expected = _oracle_cells(t, storage_len)
    assert torch.equal(record.cells.view(t.shape), expected)
    expected_reads = torch.bincount(expected.flatten(), minlength=storage_len)
    assert record.overlaps == (expected_reads > 1).nonzero().flatten().tolist()
    assert record.unread == (expected_reads == 0).nonzero().flatten().tolist()
    assert record.is_contiguous == t.is_contiguous()
    assert record.is_channels_last == t.is_contiguous(memory_format=torch.channels_last)
    assert record.is_channels_last_3d == t.is_contiguous(memory_format=torch.channels_last_3d)
    # Non-overlapping and dense: every element its own cell, and no cell skipped in between.
    flat = expected.flatten()
    dense = flat.numel() == 0 or (
        flat.unique().numel() == flat.numel() == int(flat.max() - flat.min()) + 1
    )
    assert record.is_non_overlapping_and_dense == dense


@pytest.mark.parametrize("name", list(_views()))
def test_cpu_layout_matches_pytorch(name):
    t = _views()[name]
    record = layout_of(t, name)
    _check_against_torch(t, t.untyped_storage().nbytes() // t.element_size(), record)


@pytest.mark.parametrize("name", list(_views()))
def test_device_layout_matches_the_same_view_on_cpu(name):
    host = _views()[name]
    # The same storage on the device, then the same view of it.
    storage_len = host.untyped_storage().nbytes() // host.element_size()
    flat = torch.arange(storage_len, dtype=host.dtype).to("mtia_sim")
    view = flat.as_strided(host.shape, host.stride(), host.storage_offset())
    record = layout_of(view, name)
    assert record.device == "mtia_sim:0"
    _check_against_torch(host, storage_len, record)
    # The cells say where each element's bytes are: reading them gives the view's values.
    assert torch.equal(flat.cpu()[record.cells].view(host.shape), view.cpu())


def test_the_named_features_of_each_view():
    views = _views()
    # base[1, 1:, ::2, 1:4] starts at index (1, 1, 0, 1) of strides (60, 20, 5, 1)
    assert layout_of(views["sliced_offset"]).storage_offset == 60 + 20 + 1
    assert layout_of(views["sliced_offset"]).gaps  # ::2 and 1:4 skip cells
    assert layout_of(views["expanded"]).broadcast_dims == [0, 1]
    assert layout_of(views["expanded"]).overlaps == [0, 1, 2, 3, 4]
    overlap = layout_of(views["as_strided_overlap"])
    assert overlap.overlaps and overlap.broadcast_dims == []
    assert overlap.readers(5) == [(0, 2), (1, 0)]  # 3 + 0*2 + 2*1 == 3 + 1*2 + 0*1
    assert layout_of(views["channels_last"]).memory_format == "channels_last"
    assert layout_of(views["transposed"]).memory_format == "strided"
    assert layout_of(views["contiguous"]).memory_format == "contiguous"
    both = torch.zeros(2, 1, 3, 1)  # C == W == 1: both orders agree
    assert layout_of(both).memory_format == "contiguous and channels_last"


def test_shared_storage_is_found_on_cpu_and_on_device():
    for device in ("cpu", "mtia_sim"):
        x = torch.arange(12.0, device=device).reshape(3, 4)
        unrelated = torch.arange(12.0, device=device).reshape(3, 4)
        row = x[1]
        record = layout_of(x.t(), "xt", {"x": x, "row": row, "unrelated": unrelated})
        assert record.shares_with == ["x", "row"], device
        assert [record.shared_cells(o) for o in record.others] == [12, 4]
    # Empty storages have no address; two of them are not one storage.
    assert layout_of(torch.zeros(0), others={"other": torch.zeros(0)}).shares_with == []


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 7)), min_size=0, max_size=4),
    st.integers(0, 6),
    st.integers(0, 5),
)
def test_numbers_layout_matches_as_strided(dims, offset, spare):
    size, stride = [d[0] for d in dims], [d[1] for d in dims]
    record = strided_layout(size, stride, offset)
    storage_len = record.storage_len + spare
    record = strided_layout(size, stride, offset, storage_len)
    t = torch.empty(max(storage_len, 1)).as_strided(size, stride, offset)
    _check_against_torch(t, storage_len, record)


def test_out_of_bounds_names_the_element_the_cell_and_the_fix():
    with pytest.raises(RuntimeError):  # PyTorch refuses it too
        torch.empty(12).as_strided((3, 4), (4, 1), 3)
    with pytest.raises(LayoutError) as info:
        strided_layout((3, 4), (4, 1), 3, 12, name="w")
    assert str(info.value) == (
        "w: element (2, 3) would read storage cell 14, but the storage has 12 cells (0..11). "
        "Size (3, 4), stride (4, 1) and storage offset 3 need at least 15 cells. Fix: lower "
        "the offset, a size or a stride, or use a storage of at least 15 cells."
    )
    # The element named is the one that reads past the end; a stride-0 dim stays at index 0.
    with pytest.raises(LayoutError, match=r"element \(0, 4\) would read storage cell 4,"):
        strided_layout((3, 5), (0, 1), 0, 4)


@pytest.mark.parametrize(
    "args, message",
    [
        (((3, 4), (1,)), "has 2 dims but stride (1,) has 1: give one stride per dimension"),
        (((3,), (-1,)), "stride[0] is -1; PyTorch strides are 0 or more"),
        (((3,), (1,), -2), "storage offset is -2; it must be 0 or more"),
        (((-3,), (1,)), "size[0] is -3; sizes must be 0 or more"),
    ],
)
def test_bad_numbers_say_what_is_wrong(args, message):
    with pytest.raises(LayoutError) as info:
        strided_layout(*args)
    assert message in str(info.value)


def test_exact_text_of_a_sliced_view():
    x = torch.arange(12.0).reshape(3, 4)
    text = layout_view(x[:, 1:3], "cols", x=x).to_text()
    assert text == (
        "cols: size (3, 2), stride (4, 1), storage offset 1, float32 on cpu\n"
        "memory format: strided; not dense\n"
        "storage: 12 cells; read once: 6; read by several: 0; never read: 6\n"
        "cells read: 1..10; gaps inside that span: 4\n"
        "broadcast (stride 0) dims: none\n"
        "shares storage with: x (6 cells in common)\n"
        "\n"
        "storage cell read by each element (rows: index of dim -2, columns: dim -1):\n"
        "         0  1\n"
        "    0 |  1  2\n"
        "    1 |  5  6\n"
        "    2 |  9 10\n"
        "\n"
        "reads per storage cell (. = never read):\n"
        "  cell   0  1  2  3  4  5  6  7  8  9 10 11\n"
        " reads   .  1  1  .  .  1  1  .  .  1  1  ."
    )


def test_exact_text_of_an_expanded_vector():
    text = layout_view(torch.arange(3.0).expand(2, 3), "e").to_text()
    assert text.splitlines()[4] == "broadcast (stride 0) dims: 0"
    assert text.splitlines()[-3:] == [
        "reads per storage cell (. = never read):",
        "  cell   0  1  2",
        " reads   2  2  2",
    ]


def test_text_of_a_long_storage_shows_a_window_around_the_cells_read():
    storage = torch.zeros(1000)
    view = storage[600:620]
    text = layout_view(view).to_text()
    assert "  ... cells 0..591 not shown" in text  # window starts at the row holding cell 600
    assert text.endswith("  ... cells 848..999 not shown")


def _svg_tree(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # raises if the SVG is not well-formed XML


def _rects(root: ET.Element, cls: str) -> list[ET.Element]:
    return [r for r in root.iter(f"{SVG}rect") if r.get("class") == cls]


@pytest.mark.parametrize("name", list(_views()))
def test_svg_has_one_box_per_storage_cell_and_per_element(name):
    t = _views()[name]
    record = layout_of(t, name)
    root = _svg_tree(layout_view(t, name).to_svg())
    cells = _rects(root, "storage-cell")
    assert len(cells) == min(record.storage_len, MAX_CELLS)
    if t.numel() <= 16 * 16 and t.dim() <= 2:
        assert len(_rects(root, "element")) == t.numel()


def test_svg_colours_each_element_like_the_cell_it_reads():
    t = torch.arange(30.0).as_strided((3, 4), (2, 1), 3)  # overlapping rows: cells read twice
    record = layout_of(t)
    root = _svg_tree(layout_view(t).to_svg())
    cells = _rects(root, "storage-cell")
    for cell, rect in enumerate(cells):
        readers = record.readers(cell)
        if not readers:
            assert rect.get("fill") == "#ffffff" and rect.get("stroke-dasharray")
            continue
        assert rect.get("fill") == cell_colour(cell)
        assert (rect.get("stroke-width") == "2.5") == (len(readers) > 1)
    fills = {cell: rect.get("fill") for cell, rect in enumerate(cells)}
    for flat, rect in enumerate(_rects(root, "element")):  # every element, several per cell
        assert rect.get("fill") == fills[int(record.cells[flat])]
    assert len(cells[0].get("fill")) == 7  # 6-digit hex colours


def test_two_views_of_one_storage_colour_the_same_cells_alike():
    base = torch.arange(12.0).reshape(3, 4)
    views = {"base": base, "col": base[:, 1], "wide": base[1:2].expand(3, 4)}
    for name, v in views.items():
        record = layout_of(v, name)
        for flat, rect in enumerate(_rects(_svg_tree(layout_view(v, name).to_svg()), "element")):
            assert rect.get("fill") == cell_colour(int(record.cells[flat])), name


def test_svg_of_a_large_storage_is_truncated():
    t = torch.zeros(1000, 1000)[::3, 10:500]
    svg = layout_view(t).to_svg()
    root = _svg_tree(svg)
    assert len(_rects(root, "storage-cell")) == MAX_CELLS
    assert "cells 256..999999 not shown" in svg
    assert len(_rects(root, "element")) == 15 * 15  # 16 x 16 grid with one elided row/column


def test_mimebundle_and_rich():
    x = torch.arange(6.0).reshape(2, 3)
    view = layout_view(x.t(), "xt", x=x)
    bundle = view._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "image/svg+xml", "text/html"}
    assert bundle["text/plain"] == view.to_text() == repr(view)
    assert "0x" not in bundle["text/plain"]
    prefix = '<img src="data:image/svg+xml;base64,'
    assert bundle["text/html"].startswith(prefix)
    encoded = bundle["text/html"][len(prefix) :].split('"', 1)[0]
    assert base64.b64decode(encoded).decode() == bundle["image/svg+xml"]
    assert set(view._repr_mimebundle_(include={"text/plain"})) == {"text/plain"}
    assert set(view._repr_mimebundle_(exclude={"image/svg+xml"})) == {"text/plain", "text/html"}
    # What IPython (and so a notebook) asks for gives the same bundle.
    from IPython.core.formatters import DisplayFormatter

    data, _ = DisplayFormatter().format(view)
    assert data["text/html"] == bundle["text/html"]
    assert data["text/plain"] == bundle["text/plain"]
    console = Console(width=100, record=True, color_system="truecolor", file=io.StringIO())
    console.print(view)
    exported = console.export_text(styles=False, clear=False)
    assert [line.rstrip() for line in exported.splitlines()] == view.to_text().splitlines()
    assert cell_colour(0)[1:].lower() in console.export_html().lower()


def test_view_from_numbers_and_widget_opens_from_a_view():
    view = layout_view_from((2, 2), (1, 1), 1, 5)
    assert view.record.overlaps == [2]
    explorer = view.widget()
    assert (explorer.size.value, explorer.stride.value) == ("2, 2", "1, 1")
    assert explorer.offset.value == 1 and explorer.storage_len.value == 5


def test_explorer_names_the_tensor_and_its_device_and_keeps_a_static_form():
    x = torch.arange(12.0, device="mtia_sim").reshape(3, 4)
    explorer = layout_view(x.t(), "xt", x=x).widget()
    assert explorer.record.name == "xt" and explorer.record.device == "mtia_sim:0"
    assert [o.name for o in explorer.record.others] == ["x"]
    text = explorer.to_text()
    assert text.splitlines()[0].startswith("xt: size (4, 3), stride (1, 4)")
    assert "float32 on mtia_sim:0" in text.splitlines()[0] and "shares storage with: x" in text
    bundle = explorer._repr_mimebundle_()
    assert set(bundle) == {"application/vnd.jupyter.widget-view+json", "text/plain",
                           "text/html"}
    assert bundle["text/plain"] == text and "children=" not in bundle["text/plain"]
    assert bundle["text/html"].startswith('<img src="data:image/svg+xml;base64,')
    explorer.stride.value = "9, 9"  # refused: the static form says why
    bundle = explorer._repr_mimebundle_()
    assert bundle["text/plain"].startswith("layout explorer: ") and "<pre>" in bundle["text/html"]


def test_explorer_reacts_to_every_input():
    explorer = LayoutExplorer((3, 4), (4, 1), 0, 12)
    assert explorer.record.is_contiguous and explorer.error == ""
    assert explorer.picture.value.startswith('<img src="data:image/svg+xml;base64,')

    explorer.stride.value = "1, 3"  # column-major: still 12 cells, now a transpose-like layout
    assert explorer.record.stride == (1, 3) and not explorer.record.is_contiguous
    assert explorer.message.value == ""  # the summary is in the picture, not said twice
    assert "stride (1, 3)" in base64.b64decode(explorer.picture.value.split(",", 1)[1]
                                               .split('"', 1)[0]).decode()

    explorer.offset.value = 1  # now reads cell 12 of a 12-cell storage
    assert explorer.record is None
    assert "element (2, 3) would read storage cell 12" in explorer.error
    assert explorer.picture.value == "" and "would read storage cell 12" in explorer.message.value

    explorer.storage_len.value = 13  # the fix the message suggests
    assert explorer.error == "" and explorer.record.storage_offset == 1
    assert explorer.record.unread == [0]

    explorer.size.value = "3, x"
    assert "is not a list of whole numbers" in explorer.error

    explorer.size.value = "2, 2, 2"  # a third dim with no stride
    assert "has 3 dims but stride (1, 3) has 2" in explorer.error
    explorer.stride.value = "4, 2, 1"
    assert explorer.record.size == (2, 2, 2) and explorer.record.storage_len == 13


def test_layout_of_a_recorded_tensor_matches_the_live_one():
    trace = pytest.importorskip("mtia_lab.trace")
    x = torch.arange(12.0, device="mtia_sim").reshape(3, 4)
    with trace.trace() as t:
        y = x.t()[1:]
    views = [e for e in t if e.outputs and tuple(e.outputs[0].shape) == (3, 3)]
    assert views, "the trace should hold the slice that produced y"
    from mtia_lab.inspect import layout_from_record

    recorded, live = layout_from_record(views[-1].outputs[0], "y"), layout_of(y, "y")
    assert (recorded.size, recorded.stride, recorded.storage_offset) == (
        live.size, live.stride, live.storage_offset)
    assert recorded.storage_len == live.storage_len
    assert torch.equal(recorded.cells, live.cells)
    assert recorded.storage_id == live.storage_id  # same simulated block address
