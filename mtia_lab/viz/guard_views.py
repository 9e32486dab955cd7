"""A CompileLog drawn: calls, the cache entries that served them, the guards that failed.

Reads only the log (instruments/records.py), the mtia_lab view protocol (display.py):

- text twin: a headline (a recompile storm says so in capitals), one row per call, then each
  cache entry with the guards a learner cares about and what made Dynamo compile it;
- picture (Graphviz): calls left, cache entries right; an edge per call, orange "compiled",
  green "hit"; a call that ran eagerly points at a grey "eager" box;
- `CacheStepper` (`view.widget()`): a slider over the calls, showing one call at a time with
  the entry that served it, its guards and the cache order after it; its static form is the
  view's text and picture.
"""

from __future__ import annotations

import html

import ipywidgets as widgets

from ..instruments.records import CompileEntry, CompileLog, reason_kind, short_guard
from .display import View, svg_img_html, text_html, widget_bundle
from .graphviz_render import digraph, dot_to_svg, quote

MAX_GUARDS = 8  # per entry, in text and picture
COLORS = {"compiled": "#e07b00", "cache hit": "#3c8c3c", "eager (recompile limit)": "#999999"}


def headline(log: CompileLog) -> str:
    calls = len(log.calls)
    head = (f"compile log of {log.name} (backend {log.backend}, dynamic={log.dynamic}, "
            f"recompile limit {log.recompile_limit}): {calls} call{'s' * (calls != 1)}, "
            f"{log.compiles} compile{'s' * (log.compiles != 1)}, "
            f"{log.eager_calls} ran eagerly")
    if not log.storm:
        return head
    kinds = ", ".join(f"{k} x{n}" for k, n in sorted(log.reason_kinds().items()))
    eager = [str(c.index) for c in log.calls if c.outcome.startswith("eager")]
    storm = f"RECOMPILE STORM: {log.recompiles} recompiles ({kinds or 'no reason recorded'})"
    if eager:
        storm += (f"; the recompile limit ({log.recompile_limit}) was hit: call"
                  f"{'s' * (len(eager) != 1)} {', '.join(eager)} ran eagerly, uncompiled "
                  f"(Dynamo counted {log.dynamo_limit_hits} limit hit"
                  f"{'s' * (log.dynamo_limit_hits != 1)})")
    return f"{head}\n{storm}"


def entry_lines(entry: CompileEntry, limit: int = MAX_GUARDS) -> list[str]:
    shape = "dynamic shapes" if entry.dynamic else "static shapes"
    ops = f"{entry.graph_ops} ops, " if entry.graph_ops is not None else ""
    lines = [f"entry {entry.compile_id}: {ops}{shape}, "
             f"{len(entry.guards)} guards ({len(entry.user_guards())} on your values)"]
    why = "; ".join(entry.reasons) if entry.reasons else "first call"
    lines.append(f"  compiled because: {why}")
    guards = entry.user_guards()
    lines += [f"  guard {g.kind:<13} {short_guard(g)}" for g in guards[:limit]]
    if len(guards) > limit:
        lines.append(f"  ... {len(guards) - limit} more")
    return lines


def render_text(log: CompileLog) -> str:
    lines = [headline(log), "",
             f"  {'call':>4}  {'arguments':<32}  {'outcome':<24}  {'entry':<5}  cache (MRU first)"]
    for c in log.calls:
        lines.append(f"  {c.index:>4}  {c.args[:32]:<32}  {c.outcome:<24}  "
                     f"{c.entry or '-':<5}  {' '.join(c.cache)}")
        if c.outcome == "compiled" and c.reasons:
            lines += [f"  {'':>4}  failed guard ({reason_kind(r)}): {r}" for r in c.reasons]
    for entry in log.entries.values():
        lines += [""] + entry_lines(entry)
    return "\n".join(lines)


def step_text(log: CompileLog, index: int) -> str:
    """One call, as the stepper shows it: what served it and the guards that decided."""
    c = log.calls[index]
    lines = [f"call {c.index} of {len(log.calls)}: {log.function or log.name}({c.args})",
             f"  {c.outcome}" + (f" -> entry {c.entry}" if c.entry else "")]
    if c.outcome == "compiled":
        lines += [f"  failed guard ({reason_kind(r)}): {r}" for r in c.reasons]
    else:
        lines += [f"  why: {r}" for r in c.reasons]
    if c.entry:
        lines += entry_lines(log.entries[c.entry])
    lines.append(f"  cache after the call (most recently used first): {' '.join(c.cache)}")
    return "\n".join(lines)


def render_dot(log: CompileLog, highlight: int | None = None) -> str:
    title = headline(log).replace(": ", ":\n", 1).replace("; ", ";\n")
    body = ["rankdir=LR;", f"label={quote(title)}; labelloc=t;",
            "node [shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\"];"]
    if log.storm:
        body.append('fontcolor="#cc2222";')
    calls = []
    for c in log.calls:
        width = "3" if c.index == highlight else "1"
        calls.append(f"call{c.index} [label={quote(f'call {c.index}: {c.args}')}, "
                     f"penwidth={width}];")
    # the calls in one column, in order from the top (invisible edges fix the order)
    order = " -> ".join(f"call{c.index}" for c in log.calls)
    body.append("{ rank=same; " + " ".join(calls)
                + (f" {order} [style=invis];" if len(log.calls) > 1 else "") + " }")
    for entry in log.entries.values():
        guards = [short_guard(g) for g in entry.user_guards()[:4]]
        label = "\n".join([f"entry {entry.compile_id} "
                           f"({'dynamic' if entry.dynamic else 'static'})"] + guards)
        body.append(f"e{_dot_id(entry.compile_id)} [label={quote(label)}, "
                    'fillcolor="#dbe9f6"];')
    if log.eager_calls:
        body.append('eager [label="ran eagerly\\n(recompile limit hit)", fillcolor="#e6e6e6"];')
    for c in log.calls:
        target = f"e{_dot_id(c.entry)}" if c.entry else "eager"
        color = COLORS[c.outcome]
        label = "hit" if c.outcome == "cache hit" else c.outcome.split(" ")[0]
        if c.outcome == "compiled" and c.reasons:
            label += f" ({reason_kind(c.reasons[0])})"
        width = "3" if c.index == highlight else "1.2"
        body.append(f"call{c.index} -> {target} [color={quote(color)}, "
                    f"fontcolor={quote(color)}, label={quote(label)}, penwidth={width}];")
    return digraph(body, name="compile_log")


def _dot_id(compile_id: str) -> str:
    return compile_id.replace("/", "_").replace("!", "ca")


class CompileLogView(View):
    """A CompileLog as text, picture and rich; `.widget()` steps through the calls."""

    def __init__(self, log: CompileLog) -> None:
        self.log = log

    def to_text(self) -> str:
        return render_text(self.log)

    def to_dot(self, highlight: int | None = None) -> str:
        return render_dot(self.log, highlight)

    def to_svg(self) -> str:
        return dot_to_svg(self.to_dot())

    def widget(self) -> CacheStepper:
        return CacheStepper(self.log)


def compile_log_view(watched_or_log) -> CompileLogView:
    """The view of a `watch(...)`ed function's log (or of a CompileLog)."""
    log = getattr(watched_or_log, "log", watched_or_log)
    if not isinstance(log, CompileLog):
        raise TypeError(f"expected a watched function or a CompileLog, got "
                        f"{type(watched_or_log).__name__}; make one with watch(fn)")
    return CompileLogView(log)


class CacheStepper(widgets.VBox):
    """Step through the calls: which cache entry served each, and why. `step` is the index
    shown; `to_text()` is that step's text twin."""

    def __init__(self, log: CompileLog) -> None:
        if not log.calls:
            raise ValueError(f"{log.name} has no recorded calls yet: call the watched function")
        self.compile_log = log  # not `log`: ipywidgets' Widget has a `log` trait
        self.slider = widgets.IntSlider(0, min=0, max=len(log.calls) - 1, description="call")
        self.play = widgets.Play(0, min=0, max=len(log.calls) - 1, interval=900)
        widgets.jslink((self.play, "value"), (self.slider, "value"))
        self.text = widgets.HTML()
        self.picture = widgets.HTML()
        self.slider.observe(self._update, names="value")
        super().__init__([widgets.HBox([self.play, self.slider]), self.text, self.picture])
        self._update()

    @property
    def step(self) -> int:
        return self.slider.value

    def _update(self, change=None) -> None:
        self.text.value = text_html(step_text(self.compile_log, self.step))
        self.picture.value = svg_img_html(dot_to_svg(render_dot(self.compile_log, self.step)),
                                          f"call {self.step}")

    def to_text(self) -> str:
        return step_text(self.compile_log, self.step)

    def _repr_mimebundle_(self, include=None, exclude=None, **kwargs) -> dict:
        """The widget, and its static form: every step's text, then the whole picture."""
        steps = "\n\n".join(step_text(self.compile_log, i)
                              for i in range(len(self.compile_log.calls)))
        static = f"<pre>{html.escape(steps)}</pre>" + svg_img_html(
            dot_to_svg(render_dot(self.compile_log)), "compile log")
        return widget_bundle(self, steps, static, include, exclude)
