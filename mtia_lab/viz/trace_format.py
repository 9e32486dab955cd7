"""Small text pieces every trace renderer shares: tensors, times, bytes, sources.

One formatter per fact, so the summary, the tree, the graph and the explorer say the same
thing the same way (and a test of one pins the wording of all).
"""

from __future__ import annotations

from ..backend.runtime.allocator import format_bytes
from ..source import cell_number, short_source  # noqa: F401  (re-exported)
from ..trace.events import TensorRecord

_DTYPES = {
    "float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int64": "i64",
    "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "b8",
    "complex64": "c64", "complex128": "c128",
}


def short_sources(sources: list[str]) -> str:
    """Several source lines, those of one cell together: 'In [9], lines 5 and 3; model.py:12'."""
    groups: dict[str, list[str]] = {}
    for text in map(short_source, sources):
        where, sep, line = text.rpartition(", line ")
        groups.setdefault(where if sep else text, []).append(line if sep else "")
    parts = []
    for where, lines in groups.items():
        lines = [n for n in lines if n]
        if not lines:
            parts.append(where)
        else:
            joined = lines[0] if len(lines) == 1 else ", ".join(lines[:-1]) + " and " + lines[-1]
            parts.append(f"{where}, line{'s' if len(lines) > 1 else ''} {joined}")
    return "; ".join(parts)


def op_short(op: str) -> str:
    """'aten::addmm.default' -> 'addmm', 'aten::add.Tensor' -> 'add.Tensor'."""
    return op.removeprefix("aten::").removesuffix(".default")


def fmt_host(ns: int) -> str:
    """Host wall time, always with a unit (sanitizers match `[0-9.]+ (ns|us|ms|s)`)."""
    if ns < 1_000:
        return f"{ns} ns"
    if ns < 1_000_000:
        return f"{ns / 1e3:.1f} us"
    if ns < 1_000_000_000:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.2f} s"


def fmt_sim(us: float | None) -> str:
    """Simulated device time (deterministic: the cost model, not the host clock)."""
    if us is None:
        return "-"
    if us < 1_000:
        return f"{us:.2f} us"
    return f"{us / 1e3:.3f} ms"


def fmt_bytes(nbytes: int) -> str:
    """Bytes in a narrow column: '640 B', '1.5 KiB', '12.0 MiB'."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} B"


def tensor_brief(t: TensorRecord) -> str:
    """'f32[3, 8]', with ' view' for views: the label of a tensor in tables and diagrams."""
    dtype = _DTYPES.get(t.dtype, t.dtype)
    return f"{dtype}[{', '.join(map(str, t.shape))}]" + (" view" if t.is_view else "")


def tensor_detail(t: TensorRecord, storage_name: str) -> str:
    """Everything a record says, with the storage by a stable name rather than its address."""
    view = f", view of {storage_name}" if t.is_view else ""
    return (
        f"{t.dtype}{list(t.shape)} stride={list(t.strides)} offset={t.storage_offset} "
        f"storage={storage_name} ({format_bytes(t.storage_nbytes)}) on {t.device}{view}"
    )


class StorageNames:
    """Names storages 's0', 's1', ... in order of first appearance: addresses change from run
    to run, these do not (so text and SVG stay stable)."""

    def __init__(self) -> None:
        self.names: dict[tuple[str, int], str] = {}

    def __call__(self, t: TensorRecord) -> str:
        key = (t.device, t.storage)
        name = self.names.get(key)
        if name is None:
            name = self.names[key] = f"s{len(self.names)}"
        return name


# -- rich renderables as text and HTML ------------------------------------------------------
TEXT_WIDTH = 100  # the text twin's console width: fixed, so tests compare exact text


def rich_text(renderable, width: int = TEXT_WIDTH) -> str:
    """A rich renderable as plain text on a fixed-width console without colour."""
    import io

    from rich.console import Console

    console = Console(file=io.StringIO(), width=width, color_system=None, force_terminal=False,
                      force_jupyter=False, legacy_windows=False, emoji=False, highlight=False)
    console.print(renderable)
    return "\n".join(line.rstrip() for line in console.file.getvalue().splitlines())


def rich_html(renderable, width: int = TEXT_WIDTH) -> str:
    """A rich renderable as a `<pre>` block with inline styles (no CSS classes, no script):
    what a notebook shows, saved or not."""
    import io

    from rich.console import Console

    console = Console(file=io.StringIO(), width=width, record=True, color_system="truecolor",
                      force_terminal=True, force_jupyter=False, legacy_windows=False,
                      emoji=False, highlight=False)
    console.print(renderable)
    return console.export_html(
        inline_styles=True,
        code_format='<pre style="font-family:Menlo,\'DejaVu Sans Mono\',consolas,monospace;'
                    'font-size:12px;line-height:1.3">{code}</pre>',
    )
