"""Renderers of mtia_lab's recorded data: text twins, SVG pictures, rich, widgets.

Every view follows one protocol (display.py): `text/plain`, `image/svg+xml` and an `<img>`
`text/html` for notebooks (saved ones too), `__rich__` for the terminal; widgets are opt-in.
Diagrams go through one pinned renderer (graphviz_render.py), so stored SVG is stable.
"""

from __future__ import annotations

from .activation_views import ActivationView, TradeView, activation_view, trade_view
from .diagram_widget import DiagramExplorer
from .display import View, svg_img_html
from .fusion_graph import FusionGraph, fusion_graph
from .graphviz_render import DotError, GraphvizNotFound, dot_to_svg, find_renderer
from .guard_views import CacheStepper, CompileLogView, compile_log_view
from .layout import LayoutView, layout_view, layout_view_from
from .layout_widget import LayoutExplorer
from .memory import MemoryView, memory_view
from .plan_compare import PlanCompare, plan_compare
from .playground import Playground, PlaygroundWidget, playground
from .timeline import timeline_of
from .timeline_views import TimelineView, timeline_view
from .trace_explorer import TraceExplorer, TraceTable, trace_explorer, trace_table
from .trace_graph import TraceGraph, trace_graph
from .trace_summary import TraceSummary, TraceTree, trace_summary, trace_tree

__all__ = [
    "DiagramExplorer",
    "DotError", "FusionGraph", "GraphvizNotFound", "LayoutExplorer", "LayoutView", "MemoryView",
    "View",
    "dot_to_svg", "find_renderer", "layout_view", "layout_view_from", "memory_view",
    "svg_img_html", "TimelineView", "timeline_of", "timeline_view",
    "TraceExplorer", "TraceGraph", "TraceSummary", "TraceTable", "TraceTree", "trace_explorer",
    "trace_graph", "trace_summary", "trace_table", "trace_tree",
    "PlanCompare", "Playground", "PlaygroundWidget", "fusion_graph", "plan_compare", "playground",
    "ActivationView", "CacheStepper", "CompileLogView", "TradeView", "activation_view",
    "compile_log_view", "trade_view",
]
