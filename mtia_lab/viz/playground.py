"""The guardrail playground: change a guardrail, see the fusion plan change.

Two layers, as everywhere in viz:
- `Playground`, the model: a scheduler graph (`GraphIR`), the plan at the starting settings
  (the baseline) and the plan at the current ones. `set(**settings)` re-runs only the scheduler
  on the stored graph -- no Dynamo, no AOTAutograd, no codegen -- so a change takes
  milliseconds. A value the config refuses leaves the last good plan in place and keeps the
  config's error (`.error`) to show. It is a View: its text twin, SVG (the current plan's
  FusionGraph) and rich form are the static fallback a saved notebook keeps.
- `PlaygroundWidget` (`playground.widget()`), the live ipywidgets front end: a control per
  guardrail; every edit calls `Playground.set` and redraws the numbers, the groups, the
  decisions that flipped (`decisions.flipped`) and, optionally, the picture.

    pg = playground(mlp, x, w1, b1, w2, b2)     # or playground(plan), playground(ir)
    pg.widget()                                 # live; `pg` alone shows the static view
    pg.set(max_fusion_size=2); pg.plan.kernel_count

`engine="inductor"` (from fn, *args): the same playground over real TorchInductor's scheduler
for mtia_sim (mtia_lab/inductor): the controls are Inductor's own config values, and each
change compiles the function again with Inductor (seconds, not milliseconds: Inductor lowers
and schedules the whole graph). `pg.switch("inductor")` / the widget's engine buttons move
between the two schedulers on the same function.
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets

from ..compiler import config
from ..compiler.config import ConfigError
from ..compiler.ir import GraphIR
from ..compiler.scheduler import schedule
from ..progress import progress
from ..records.guardrails import GUARDRAILS
from ..records.plan import FusionPlan, flipped
from .display import View, text_html, widget_bundle
from .fusion_data import fmt_us
from .fusion_graph import FusionGraph
from .graphviz_render import DotError, GraphvizNotFound
from .svg_html import svg_img_html

# The guardrails the playground offers, in the order shown, with how each is edited.
CONTROLS = {
    "max_fusion_size": "slider",
    "max_fusion_unique_io_buffers": "optional",
    "score_fusion_memory_threshold": "int",
    "max_fusion_buffer_group_pairwise_attempts": "int",
    "combo_kernels": "bool",
    "combo_kernel_max_num_args": "int",
    "combo_kernel_max_num_nodes": "int",
    "matmul_templates": "bool",
    "on_chip_memory_budget": "optional",
}
# Inductor's own guardrails (its config module), for engine="inductor": ours-only ones out,
# and those Inductor declares but never reads (records/guardrails.py).
INDUCTOR_CONTROLS = {name: kind for name, kind in CONTROLS.items()
                     if GUARDRAILS[name].inductor_key is not None
                     and GUARDRAILS[name].inductor_reads}
ENGINES = ("ours", "inductor")
MAX_GROUPS_LISTED = 30
MAX_FLIPS_LISTED = 20


def _ir_of(source, args) -> tuple[GraphIR, str, dict]:
    """(graph, name, starting settings) from a plan, a GraphIR, a CompiledGraph or fn(*args)."""
    if isinstance(source, GraphIR):
        return source, "graph", config.snapshot()
    if isinstance(source, FusionPlan):
        if source.ir is None:
            raise ValueError(f"plan {source.name!r} carries no scheduler graph (a plan loaded "
                             "from to_dict() has none): pass the GraphIR, or compile again")
        return source.ir, source.name, {**config.snapshot(), **source.settings}
    plan = getattr(source, "plan", None)
    if isinstance(plan, FusionPlan):  # a CompiledGraph
        return _ir_of(plan, ())
    if callable(source):
        from ..compiler import trace

        return trace(source, *args), getattr(source, "__name__", "graph"), config.snapshot()
    raise TypeError(f"playground() takes a FusionPlan, a GraphIR, a CompiledGraph or fn, *args; "
                    f"got {type(source).__name__}")


def parse_setting(name: str, text, names=None) -> object:
    """A control's value as the config expects it ("" or "None" -> None in optional fields)."""
    if name not in (config.SETTINGS if names is None else names):
        raise ConfigError(config._unknown(name) if names is None else
                          f"unknown setting {name!r}; settings: {', '.join(names)}")
    if not isinstance(text, str):
        return text
    text = text.strip()
    if text.lower() in ("", "none"):
        return None
    try:
        return int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise ConfigError(f"{name}: {text!r} is not a whole number; type an int, or leave it "
                          "empty for None") from None


class Playground(View):
    """The playground's state: settings, baseline plan, current plan, error, flipped pairs."""

    def __init__(self, source, *args, name: str | None = None, engine: str = "ours") -> None:
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
        self.engine, self.source, self.args = engine, source, args
        if engine == "inductor":
            if not callable(source) or isinstance(source, (FusionPlan, GraphIR)):
                raise TypeError("playground(fn, *args, engine='inductor') needs the function "
                                "and its inputs: Inductor compiles it again at each change")
            from ..inductor import guardrail_settings

            self.ir, default_name, start = None, getattr(source, "__name__", "graph"), \
                guardrail_settings()
            self.controls = INDUCTOR_CONTROLS
        else:
            self.ir, default_name, start = _ir_of(source, args)
            self.controls = CONTROLS
        self.name = name or default_name
        self.start = {k: start[k] for k in self.controls}
        self.settings = dict(self.start)
        self.error = ""
        self.baseline = self._schedule(self.settings)
        self.plan = self.baseline

    def _schedule(self, settings: dict) -> FusionPlan:
        if self.engine == "inductor":
            from ..inductor import inductor_plan

            return inductor_plan(self.source, *self.args, config=settings)
        with config.patch(**settings):  # checks every value before any is applied
            return schedule(self.ir, self.name)

    @property
    def can_switch(self) -> bool:
        """Whether `switch` can build the other engine's playground: Inductor compiles the
        function again, so it needs `playground(fn, *args)`, not a plan or graph."""
        return callable(self.source) and not isinstance(self.source, (FusionPlan, GraphIR))

    def switch(self, engine: str) -> Playground:
        """The same function's playground under the other scheduler (needs fn, *args)."""
        if engine == self.engine:
            return self
        if not self.can_switch:
            raise TypeError("switching engines needs playground(fn, *args): this playground "
                            "was built from a plan or graph, which Inductor cannot compile")
        return Playground(self.source, *self.args, name=self.name, engine=engine)

    def set(self, **changes) -> FusionPlan:
        """Re-schedule with `changes` on top of the current settings; returns the current plan.

        An invalid value raises nothing: the plan stays as it was and `.error` says why."""
        try:
            names = None if self.engine == "ours" else self.controls
            wanted = {**self.settings,
                      **{k: parse_setting(k, v, names) for k, v in changes.items()}}
            plan = self._schedule(wanted)
        except ConfigError as exc:
            self.error = str(exc)
            return self.plan
        self.settings, self.plan, self.error = wanted, plan, ""
        return plan

    def reset(self) -> FusionPlan:
        """Back to the starting settings (the baseline plan)."""
        self.settings, self.plan, self.error = dict(self.start), self.baseline, ""
        return self.plan

    @property
    def flipped(self) -> list[tuple]:
        """(baseline decision, current decision) pairs whose answer changed."""
        return flipped(self.baseline, self.plan)

    def changed_settings(self) -> dict:
        return {k: v for k, v in self.settings.items() if v != self.start[k]}

    # -- views -------------------------------------------------------------------------------
    def rows(self) -> list[tuple[str, str, str]]:
        b, p = self.baseline.after, self.plan.after
        return [("kernels", str(b.kernels), str(p.kernels)),
                ("bytes moved", f"{b.bytes_moved:,}", f"{p.bytes_moved:,}"),
                ("simulated", fmt_us(b.time_us), fmt_us(p.time_us)),
                ("unfused kernels", str(self.plan.before.kernels), str(self.plan.before.kernels))]

    def to_text(self) -> str:
        changed = self.changed_settings()
        size = (f"{len(self.ir.nodes)} scheduler nodes" if self.ir is not None else
                f"TorchInductor's scheduler, {self.plan.before.kernels} nodes before fusion")
        lines = [f"guardrail playground {self.name!r}: {size}",
                 "settings: " + (", ".join(f"{k}={v!r} (was {self.start[k]!r})"
                                           for k, v in changed.items()) or "as started")]
        if self.error:
            lines.append(f"error: {self.error}")
        lines.append(f"{'':<16}{'baseline':>14}{'now':>14}")
        lines += [f"{a:<16}{b:>14}{c:>14}" for a, b, c in self.rows()]
        lines.append("kernels now:")
        for g in self.plan.groups[:MAX_GROUPS_LISTED]:
            lines.append(f"  {g.index} ({g.kind}, {g.bytes_moved:,} B, {fmt_us(g.duration_us)})"
                         f": {', '.join(g.nodes)}")
        if len(self.plan.groups) > MAX_GROUPS_LISTED:
            lines.append(f"  ... {len(self.plan.groups) - MAX_GROUPS_LISTED} more")
        flips = self.flipped
        lines.append(f"decisions that flipped: {len(flips)}")
        for before, after in flips[:MAX_FLIPS_LISTED]:
            was = "fused" if before.fused else "refused"
            now = "fused" if after.fused else "refused"
            lines.append(f"  [{'+'.join(after.first)}] with [{'+'.join(after.second)}]: "
                         f"{was} -> {now} ({after.reason})")
        if len(flips) > MAX_FLIPS_LISTED:
            lines.append(f"  ... {len(flips) - MAX_FLIPS_LISTED} more")
        return "\n".join(lines)

    def to_svg(self) -> str:
        return FusionGraph(self.plan).to_svg()

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        """The static fallback: the numbers, groups and flips as text above the picture."""
        bundle = super()._repr_mimebundle_(include, exclude)
        if bundle.get("text/html", "").startswith("<img "):
            bundle["text/html"] = text_html(self.to_text()) + bundle["text/html"]
        return bundle

    def sweep(self, name: str, values) -> SweepTable:
        """Schedule once per value of guardrail `name`, the other settings as they are now,
        with a progress bar (tqdm.auto); the playground's own settings and plan stay as they
        were. A value the config refuses raises its ConfigError."""
        if name not in CONTROLS:
            raise ValueError(f"no guardrail {name!r} to sweep; choose from {', '.join(CONTROLS)}")
        rows = []
        for value in progress(list(values), desc=f"sweeping {name}"):
            plan = self._schedule({**self.settings, name: parse_setting(name, value)})
            rows.append((value, plan.after.kernels, plan.after.bytes_moved, plan.after.time_us))
        return SweepTable(self.name, name, rows)

    def widget(self, show_graph: bool = True) -> PlaygroundWidget:
        """The live widget over this playground (changes go through `set`)."""
        return PlaygroundWidget(self, show_graph=show_graph)


class SweepTable(View):
    """What one guardrail does to a plan across values: kernels, bytes moved, simulated time."""

    def __init__(self, graph: str, name: str, rows: list[tuple]) -> None:
        self.graph, self.name, self.rows = graph, name, rows

    def to_text(self) -> str:
        lines = [f"sweep of {self.name} over {self.graph!r} ({len(self.rows)} values)",
                 f"{self.name:>{max(len(self.name), 8)}}  {'kernels':>8}  {'bytes moved':>12}"
                 f"  {'simulated':>10}"]
        width = max(len(self.name), 8)
        for value, kernels, moved, time_us in self.rows:
            lines.append(f"{value!s:>{width}}  {kernels:>8}  {moved:>12,}  {fmt_us(time_us):>10}")
        return "\n".join(lines)


def _control(name: str, value, kind: str):
    style = {"description_width": "initial"}
    layout = widgets.Layout(width="340px")
    if kind == "slider":
        return widgets.IntSlider(value=value, min=1, max=max(128, value), description=name,
                                 style=style, layout=layout, continuous_update=False)
    if kind == "bool":
        return widgets.Checkbox(value=value, description=name, style=style, indent=False)
    if kind == "int":
        return widgets.IntText(value=value, description=name, style=style, layout=layout)
    return widgets.Text(value="" if value is None else str(value), description=name,
                        placeholder="None", style=style, layout=layout, continuous_update=False)


def _shown(control, value):
    """A setting as its control holds it: text fields hold strings ("" for None)."""
    if isinstance(control.value, str):
        return "" if value is None else str(value)
    return value


def field_error(name: str, value) -> str:
    """A short note for beside a control: what is wrong with `value`, or ""."""
    try:
        config.SETTINGS[name].check(parse_setting(name, value))
    except ConfigError:
        if isinstance(value, str) and value.strip().lower() not in ("", "none"):
            try:
                int(value.strip().replace("_", "").replace(",", ""))
            except ValueError:
                return "not a whole number"
        return "needs " + config.SETTINGS[name].valid_range()
    return ""


class PlaygroundWidget(widgets.VBox):
    """ipywidgets front end of a Playground: `controls[name]` per guardrail, with `notes[name]`
    beside it (a short message while its value is refused); `numbers`, `error`, `groups`,
    `flips`, `picture` are the HTML outputs it redraws after each edit.

    The controls sit in a column of fixed width that does not shrink (flex 0 0 auto), and the
    full error text goes below the numbers, wrapped: a long message never squeezes the
    controls."""

    def __init__(self, playground: Playground, show_graph: bool = True) -> None:
        self.playground, self.show_graph = playground, show_graph
        self.reset_button = widgets.Button(description="reset")
        self.reset_button.on_click(lambda _: self.reset())
        # Built from a plan, the playground cannot switch: the buttons say so and stay put.
        why = "" if playground.can_switch else \
            "only with playground(fn, *args): Inductor compiles the function again"
        self.engine = widgets.ToggleButtons(options=ENGINES, value=playground.engine,
                                            description="scheduler",
                                            disabled=not playground.can_switch,
                                            tooltips=[why] * len(ENGINES) if why else [])
        self.engine.observe(self._switched, names="value")
        self.error = widgets.HTML(layout=widgets.Layout(max_width="520px"))
        self.numbers = widgets.HTML()
        self.groups = widgets.HTML()
        self.flips = widgets.HTML()
        self.picture = widgets.HTML()
        self.column = widgets.VBox(layout=widgets.Layout(flex="0 0 auto", min_width="560px"))
        self.column.add_class("mtia-playground-controls")
        results = widgets.VBox([self.engine, self.numbers, self.error],
                               layout=widgets.Layout(flex="1 1 auto"))
        super().__init__([widgets.HBox([self.column, results],
                                       layout=widgets.Layout(flex_flow="row wrap")),
                          self.flips, self.groups, self.picture])
        self._build_controls()
        self.refresh()

    def _build_controls(self) -> None:
        pg = self.playground
        self.controls = {name: _control(name, pg.settings[name], kind)
                         for name, kind in pg.controls.items()}
        # A short message by a field when its value is refused (filled in by refresh).
        self.notes = {name: widgets.HTML(layout=widgets.Layout(width="200px"))
                      for name in self.controls}
        for control in self.controls.values():
            control.observe(self._changed, names="value")
        rows = [widgets.HBox([self.controls[name], self.notes[name]],
                             layout=widgets.Layout(flex="0 0 auto"))
                for name in self.controls]
        self.column.children = [*rows, self.reset_button]

    def _switched(self, change) -> None:
        """Our scheduler <-> TorchInductor's, on the same function."""
        try:
            self.playground = self.playground.switch(change["new"])
        except TypeError as exc:
            self.playground.error = str(exc)
            self.engine.unobserve(self._switched, names="value")
            self.engine.value = self.playground.engine  # the buttons show what is drawn
            self.engine.observe(self._switched, names="value")
        self._build_controls()
        self.refresh()

    def _changed(self, change) -> None:
        # All controls at once: a value the config refused keeps its error until it is fixed,
        # even while other controls change.
        self.playground.set(**{name: c.value for name, c in self.controls.items()})
        self.refresh()

    def set(self, **values) -> None:
        """Type values into the controls, as a user would (each edit re-schedules)."""
        for name, value in values.items():
            if name not in self.controls:
                raise KeyError(f"no control {name!r}; controls: {', '.join(self.controls)}")
            self.controls[name].value = _shown(self.controls[name], value)

    def reset(self) -> None:
        pg = self.playground
        pg.reset()
        for name, control in self.controls.items():  # quietly: one refresh at the end
            control.unobserve(self._changed, names="value")
            control.value = _shown(control, pg.settings[name])
            control.observe(self._changed, names="value")
        self.refresh()

    def refresh(self) -> None:
        pg = self.playground
        for name, control in self.controls.items():
            note = field_error(name, control.value)
            self.notes[name].value = (f'<span style="color:#cc2222">{html.escape(note)}</span>'
                                      if note else "")
        self.error.value = (f'<pre style="color:#cc2222;white-space:pre-wrap">'
                            f"{html.escape(pg.error)}</pre>" if pg.error else "")
        rows = "".join(f"<tr><td style='text-align:left'>{html.escape(str(a))}</td>"
                       f"<td style='text-align:right'>"
                       f"{html.escape(str(b))}</td><td style='text-align:right'><b>"
                       f"{html.escape(str(c))}</b></td></tr>" for a, b, c in pg.rows())
        self.numbers.value = (f"<table><tr><th></th><th>baseline</th><th>now</th></tr>{rows}"
                              "</table>")
        # The text twin's sections, under HTML headings.
        text = pg.to_text().split("kernels now:\n", 1)[1]
        groups, _, flips = text.partition("decisions that flipped: ")
        count, _, flips = flips.partition("\n")
        self.groups.value = f"<b>kernels now</b><pre>{html.escape(groups.rstrip())}</pre>"
        self.flips.value = (f"<b>decisions that flipped: {count}</b>"
                            + (f"<pre>{html.escape(flips)}</pre>" if flips else ""))
        if self.show_graph:
            try:
                self.picture.value = svg_img_html(pg.to_svg(), pg.plan.summary())
            except (GraphvizNotFound, DotError) as exc:
                self.picture.value = f"<pre>(diagram not drawn: {html.escape(str(exc))})</pre>"

    def _repr_mimebundle_(self, include=None, exclude=None, **kwargs) -> dict[str, Any]:
        """The widget, and its static form: the playground's numbers, groups, flips and
        picture (the same as the Playground's own output), for wherever widgets do not draw."""
        static = self.playground._repr_mimebundle_(include={"text/html"}).get("text/html", "")
        return widget_bundle(self, self.playground.to_text(), static, include, exclude)


def playground(source, *args, name: str | None = None, engine: str = "ours") -> Playground:
    """A Playground over a plan (with its graph), a GraphIR, a CompiledGraph, or fn(*args);
    `engine="inductor"` (fn, *args only): over TorchInductor's own scheduler for mtia_sim."""
    return Playground(source, *args, name=name, engine=engine)
