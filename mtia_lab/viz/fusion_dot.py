"""The DOT of a fusion plan, and what a click on it shows (FusionGraph's picture).

Drawn to be read at the notebook's own text size (10 pt Graphviz text is 13 px, like the
notebook's prose) and to grow downwards, not sideways: kernels follow the graph's order top to
bottom, the title is two short lines, and a refusal's long reason goes to the legend under a
short tag (R1, R2...) instead of a label across the picture.

- a kernel is a cluster filled by its kind (the legend shows exactly the kinds used), labelled
  with its number, kind, cost and the module its ops came from;
- an op is a box with one spelling, its aten name without namespace or overload (`addmm`,
  `native_layer_norm`), and the shape it writes;
- a thin edge is dataflow inside a kernel (stays on chip); a thick edge is a buffer written to
  memory by one kernel and read by another; both run from the op that writes to the op that
  reads (the plan's "detail", see compiler/plan_detail.py). A plan saved without its detail
  (older JSON) draws kernel-to-kernel edges only;
- graph inputs are boxes named as the user names them (`x`, `fc1.weight`, `grad of output 0`);
- `collapse=d`: the kernels of each module `d` levels deep (`model.block` for d=2) are one box
  (kernels, bytes, time), unless the module is in `expanded`; then its own sub-modules are boxes
  one level deeper. A big model is an overview first, opened one module at a time (a click in
  `explore()` opens a box).
"""

from __future__ import annotations

import textwrap

from ..backend.runtime.allocator import format_bytes
from ..records.guardrails import GUARDRAILS
from ..records.plan import symbols_text
from . import palette
from .fusion_data import (
    KIND_BORDER,
    KIND_FILL,
    MODULE_BOX,
    REFUSED,
    RULE_REFUSED,
    buffer_name,
    fmt_us,
    over,
    reason_of,
    refusals,
    side,
)
from .graphviz_render import digraph, html_text, quote

KIND_MEANING = {
    "template": "matmul template (GEMM engine), may take a pointwise epilogue",
    "reduction": "reduction (sum, max, softmax's parts)",
    "pointwise": "pointwise (one element from the same element of each input)",
    "extern": "extern: runs as its ATen kernel, never fused",
}
MEMORY_EDGE = "#333333"
# a collapsed module's box
MODULE_FILL, MODULE_BORDER = palette.MODULE_FILL.hex, palette.MODULE_BORDER.hex
INPUT_FILL = "#f7f7f7"
LEGEND_WRAP = 80  # characters per legend line: the legend must not widen the picture


def op_of(target: str) -> str:
    """'aten.addmm.default' -> 'addmm', 'aten.add.Tensor' -> 'add': one spelling per op."""
    parts = target.split(".")
    return parts[1] if len(parts) >= 3 and parts[0] == "aten" else target


def shape_text(buf: dict) -> str:
    dtype = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "int64": "i64",
             "bool": "bool", "int32": "i32"}.get(buf.get("dtype", ""), buf.get("dtype", ""))
    return f"{dtype}[{', '.join(str(d) for d in buf.get('shape', []))}]"


def common_module(modules: list[str]) -> str:
    """The longest dotted prefix all (non-empty) module paths share: 'block.attn.qkv' and
    'block.attn.proj' -> 'block.attn'."""
    paths = [m.split(".") for m in modules if m]
    if not paths:
        return ""
    prefix = paths[0]
    for p in paths[1:]:
        n = 0
        while n < min(len(prefix), len(p)) and prefix[n] == p[n]:
            n += 1
        prefix = prefix[:n]
    return ".".join(prefix)


def input_label(name: str, info: dict) -> str:
    """A graph input: its name over two short lines when long ('model.block.attn.qkv' over
    '.weight  f32[96, 32]'), so a row of inputs does not widen the picture."""
    head, dot, last = name.rpartition(".")
    shape = html_text(shape_text(info)) if info else ""
    if len(name) <= 16 or not head:
        return f'<{html_text(name)}<br/><font point-size="8">{shape}</font>>'
    return (f'<{html_text(head)}<br/><font point-size="8">{dot}{html_text(last)}  '
            f"{shape}</font>>")


class FusionDot:
    """One FusionGraph's DOT text (see the module doc)."""

    def __init__(self, view) -> None:
        self.view = view
        self.data = view.data
        detail = self.data.get("detail") or {}
        self.nodes: dict = detail.get("nodes", {})
        self.buffers: dict = detail.get("buffers", {})
        self.groups = self.data["groups"][:view.max_kernels]
        self.shown = {g["index"] for g in self.groups}
        self.node_id: dict[str, str] = {}  # scheduler node -> the DOT node that shows it
        # A value recomputed in each reader's kernel (computed_once=False) is drawn in each:
        # (node, kernel index) -> its DOT node there.
        self.again = set(self.data.get("recomputed") or ())
        self.kernel_ids: dict[tuple[str, int], str] = {}
        self.home: dict[str, int] = {n: g["index"] for g in self.data["groups"] for n in g["nodes"]}
        self.anchor: dict[int, str] = {}
        self.tags: list[tuple[str, dict]] = []  # (R1, decision) in legend order
        self.box_of = self._collapsed()  # kernel index -> DOT id of its module's box
        self.box_inputs: dict[str, set[str]] = {}  # box -> inputs only collapsed kernels read
        self.last_drawn: str | None = None  # the legend goes under it

    def kernel_module(self, g: dict) -> str:
        return common_module([self.nodes.get(n, {}).get("module", "") for n in g["nodes"]])

    def _collapsed(self) -> dict[int, str]:
        depth = self.view.collapse
        if not depth or not self.nodes:
            return {}
        key_of = {}
        for g in self.groups:
            parts = self.kernel_module(g).split(".")
            for n in range(depth, len(parts) + 1):
                prefix = ".".join(parts[:n])
                if prefix not in self.view.expanded:
                    key_of[g["index"]] = MODULE_BOX + prefix
                    break
        sizes: dict[str, int] = {}
        for key in key_of.values():
            sizes[key] = sizes.get(key, 0) + 1
        return {k: key for k, key in key_of.items() if sizes[key] > 1}  # one kernel: drawn

    def _boxes(self) -> list[str]:
        lines = []
        for box in dict.fromkeys(self.box_of.values()):
            members = [g for g in self.groups if self.box_of.get(g["index"]) == box]
            kinds: dict[str, int] = {}
            for g in members:
                kinds[g["kind"]] = kinds.get(g["kind"], 0) + 1
            moved = sum(g["cost"]["bytes_read"] + g["cost"]["bytes_written"] for g in members)
            us = sum(g["duration_us"] for g in members)
            first, last = members[0]["index"], members[-1]["index"]
            reads = len(self.box_inputs.get(box, ()))
            rows = [f"<b>{html_text(box.removeprefix(MODULE_BOX))}</b>",
                    f"kernels {first}..{last}: "
                    + ", ".join(f"{n} {kind}" for kind, n in kinds.items()),
                    f"{html_text(format_bytes(moved))} moved, {html_text(fmt_us(us))}"]
            if reads:
                rows.append(f"reads {reads} input{'s' * (reads != 1)} (weights, ...)")
            rows.append('<font point-size="8">collapsed: explore() and click to open</font>')
            label = ('<<table border="0" cellborder="0" cellspacing="0">'
                     + "".join(f"<tr><td>{row}</td></tr>" for row in rows) + "</table>>")
            lines.append(f'{quote(box)} [shape="box", style="filled,rounded,bold", '
                         f'fillcolor="{MODULE_FILL}", color="{MODULE_BORDER}", label={label}];')
        return lines

    def dot(self) -> str:
        data = self.data
        body = ['compound="true";', 'ranksep="0.3";', 'nodesep="0.25";',
                'node [shape="plaintext"];']
        for g in self.groups:  # a collapsed kernel's ops are its module's box
            if g["index"] in self.box_of:
                for node in g["nodes"]:
                    self.node_id[node] = self.box_of[g["index"]]
                self.anchor[g["index"]] = self.box_of[g["index"]]
        clusters = {g["index"]: self._cluster(g) for g in self.groups
                    if g["index"] not in self.box_of}
        in_combo = {g: i for i, combo in enumerate(data["combos"]) for g in combo}
        for index, lines in clusters.items():
            if index not in in_combo:
                body += lines
        for i, combo in enumerate(data["combos"]):
            members = [clusters[g] for g in combo if g in clusters]
            if not members:
                continue
            body.append(f"subgraph cluster_combo_{i} {{")
            body += [f'  label={quote(f"combo launch {i}: {len(combo)} kernels")};',
                     '  style="dashed"; color="#555555";']
            for lines in members:
                body += ["  " + line for line in lines]
            body.append("}")
        edges = self._inputs_and_edges()
        body += self._boxes() + edges + self._spine()
        body += self._refused_edges()
        hidden = len(data["groups"]) - len(self.groups)
        if hidden:
            body.append(f'more [shape="note", label={quote(f"... {hidden} more kernels")}];')
        body += self._legend()
        b, a = data["before"], data["after"]
        symbolic = (f"<br/>{html_text(symbols_text(data['symbols']))}"
                    if data.get("symbols") else "")
        title = (f"<<b>fusion plan {html_text(repr(data['name']))}</b>: {b['kernels']} -&gt; "
                 f"{a['kernels']} kernels<br/>{b['bytes_moved']:,} -&gt; {a['bytes_moved']:,} "
                 f"bytes moved, {html_text(fmt_us(b['time_us']))} -&gt; "
                 f"{html_text(fmt_us(a['time_us']))} simulated{symbolic}>")
        dot = digraph(body, name=data["name"], label="TITLE", labelloc="t")
        return dot.replace('label="TITLE";', f"label={title};", 1)

    # -- kernels and their ops --------------------------------------------------------------------
    def _cluster(self, g: dict) -> list[str]:
        index, kind = g["index"], g["kind"]
        fill, border = KIND_FILL.get(kind, "#f2f2f2"), KIND_BORDER.get(kind, "#555555")
        cost = g["cost"]
        moved = cost["bytes_read"] + cost["bytes_written"]
        module = common_module([self.nodes.get(n, {}).get("module", "") for n in g["nodes"]])
        where = f"<tr><td>{html_text(module)}</td></tr>" if module else ""
        label = (f'<<table border="0" cellborder="0" cellspacing="0">'
                 f'<tr><td><b>kernel {index}</b> ({html_text(kind + over(g, self.data))})'
                 '</td></tr>'
                 f'<tr><td>{html_text(format_bytes(moved))} moved, '
                 f'{html_text(fmt_us(g["duration_us"]))}</td></tr>{where}</table>>')
        lines = [f"subgraph cluster_k{index} {{",
                 f'  label={label}; style="filled,rounded"; fillcolor="{fill}"; '
                 f'color="{border}"; tooltip={quote(f"kernel {index}")};']
        labels = list(g["aten_nodes"] or g["nodes"])
        if not self.nodes:  # a plan without node detail (Inductor's): one list per kernel
            return lines + self._ops_list(g, labels, border) + ["}"]
        drawn = []
        max_nodes = self.view.max_nodes
        for node, text in list(zip(g["nodes"], labels, strict=True))[:max_nodes]:
            nid = f"n_{node}_k{index}" if node in self.again else f"n_{node}"
            self.kernel_ids[(node, index)] = nid
            self.node_id.setdefault(node, nid)
            drawn.append(nid)
            info = self.nodes.get(node, {})
            op = op_of(info.get("target") or text.split(": ", 1)[-1].removesuffix(
                " (recomputed here)")) + (" (recomputed)" if node in self.again else "")
            writes = info.get("writes") or []
            shape = shape_text(self.buffers[writes[0]]) if writes and writes[0] in \
                self.buffers else ""
            second = f'<tr><td><font point-size="8">{html_text(shape)}</font></td></tr>' \
                if shape else ""
            row = (f'<<table border="1" cellborder="0" cellspacing="0" bgcolor="#ffffff" '
                   f'color="{border}"><tr><td><b>{html_text(op)}</b></td></tr>{second}'
                   '</table>>')
            lines.append(f"  {quote(nid)} [label={row}, tooltip={quote(node)}];")
        extra = len(labels) - max_nodes
        if extra > 0:
            nid = f"more_k{index}"
            drawn.append(nid)
            for node in g["nodes"][max_nodes:]:
                self.node_id[node] = nid
            lines.append(f'  {quote(nid)} [label={quote(f"... {extra} more nodes")}];')
        self.anchor[index] = drawn[0]
        self.last_drawn = drawn[-1]
        linked = self._linked_inside(g)
        for a, b in zip(drawn, drawn[1:], strict=False):  # keep graph order, top to bottom
            if (a, b) not in linked:
                lines.append(f'  {quote(a)} -> {quote(b)} [style="invis"];')
        lines.append("}")
        return lines

    def _ops_list(self, g: dict, labels: list[str], border: str) -> list[str]:
        """A kernel's ops as one node, listed in graph order, for a plan that records no
        dataflow between them (TorchInductor's): separate boxes with no edges between them
        would look like unrelated ops."""
        index = g["index"]
        nid = self.anchor[index] = self.last_drawn = ops_list_id(index)
        for node in g["nodes"]:
            self.node_id[node] = nid
        ops = [op_of(text.split(": ", 1)[-1]) for text in labels]
        shown = ops[:self.view.max_nodes]
        rows = "".join(f'<tr><td align="left"><b>{html_text(op)}</b></td></tr>' for op in shown)
        if len(ops) > len(shown):
            rows += f'<tr><td align="left">... {len(ops) - len(shown)} more</td></tr>'
        if len(ops) > 1:
            rows += ('<tr><td align="left"><font point-size="8">in graph order</font>'
                     '</td></tr>')
        label = (f'<<table border="1" cellborder="0" cellspacing="0" bgcolor="#ffffff" '
                 f'color="{border}">{rows}</table>>')
        tip = f"kernel {index}: " + ", ".join(ops)
        return [f"  {quote(nid)} [label={label}, tooltip={quote(tip)}];"]

    def _nid(self, node: str, index: int) -> str:
        """The DOT node showing `node` in kernel `index` (a recomputed value has one there)."""
        return self.kernel_ids.get((node, index)) or self.node_id.get(node, "")

    def _linked_inside(self, g: dict) -> set[tuple[str, str]]:
        pairs = set()
        for node in g["nodes"]:
            for buf in self.nodes.get(node, {}).get("reads", []):
                producer = self.buffers.get(buf, {}).get("producer")
                if producer in g["nodes"]:
                    pairs.add((self._nid(producer, g["index"]), self._nid(node, g["index"])))
        return pairs

    # -- inputs and dataflow ---------------------------------------------------------------------
    def _inputs_and_edges(self) -> list[str]:
        if not self.nodes:  # a plan without detail: kernel-level edges, as the plan says
            return self._kernel_edges()
        lines, edges, inputs = [], {}, {}
        self.box_inputs = {box: set() for box in self.box_of.values()}
        for g in self.groups:
            border = KIND_BORDER.get(g["kind"], "#555555")
            for node in g["nodes"]:
                dst = self._nid(node, g["index"])
                for buf in self.nodes.get(node, {}).get("reads", []):
                    producer = self.buffers.get(buf, {}).get("producer")
                    if producer is None and dst in self.box_inputs:
                        self.box_inputs[dst].add(buf)
                        continue
                    if producer is None:
                        src = inputs.setdefault(buf, f"in_{buf}")
                        style = f'color="{MEMORY_EDGE}", penwidth="1.2"'
                    elif producer in self.again and producer in g["nodes"]:
                        src = self._nid(producer, g["index"])  # computed in this kernel
                        style = f'color="{border}", arrowsize="0.6"'
                    elif producer in self.node_id:
                        src = self.node_id[producer]
                        inside = self.home.get(producer) == g["index"]
                        style = (f'color="{border}", arrowsize="0.6"' if inside else
                                 f'color="{MEMORY_EDGE}", penwidth="1.8"')
                    else:  # written by a kernel not drawn
                        continue
                    if src != dst:
                        edges.setdefault((src, dst), (style, buf))
        for buf, nid in inputs.items():
            info = self.buffers.get(buf, {})
            lines.append(f'{quote(nid)} [shape="box", style="rounded,filled", '
                         f'fillcolor="{INPUT_FILL}", color="#999999", '
                         f"label={input_label(buffer_name(self.data, buf), info)}, "
                         f"tooltip={quote(buf)}];")
        for (src, dst), (style, buf) in edges.items():
            lines.append(f"{quote(src)} -> {quote(dst)} [{style}, tooltip={quote(buf)}];")
        return lines

    def _kernel_edges(self) -> list[str]:
        lines, writer = [], {}
        for g in self.groups:
            for buf in g["outputs"]:
                writer[buf] = self.anchor[g["index"]]
        inputs = [b for g in self.groups for b in g["inputs"] if b not in writer]
        for buf in dict.fromkeys(inputs):
            lines.append(f'{quote("in_" + buf)} [shape="ellipse", style="filled", '
                         f'fillcolor="{INPUT_FILL}", color="#999999", '
                         f"label={quote(buffer_name(self.data, buf))}];")
        for g in self.groups:
            for buf in g["inputs"]:
                src = writer.get(buf, "in_" + buf)
                lines.append(f'{quote(src)} -> {quote(self.anchor[g["index"]])} '
                             f'[lhead="cluster_k{g["index"]}", color="{MEMORY_EDGE}", '
                             f"penwidth=\"1.8\", tooltip={quote(buf)}];")
        return lines

    def _spine(self) -> list[str]:
        """Kernels one under the other in graph order, on one vertical line (Graphviz `group`):
        without it each side input nudges the next kernel sideways and a long plan drifts
        across the page, twice as wide as it needs to be."""
        spine = list(dict.fromkeys(self.anchor[g["index"]] for g in self.groups))
        lines = [f'{quote(node)} [group="spine"];' for node in spine]
        lines += [f'{quote(a)} -> {quote(b)} [style="invis", weight="4"];'
                  for a, b in zip(spine, spine[1:], strict=False)]
        return lines

    # -- refusals and the legend -----------------------------------------------------------------
    def _refused_edges(self) -> list[str]:
        latest: dict[tuple[int, int], dict] = {}  # one edge per pair: the latest refusal
        for d in refusals(self.data):
            pair = (self.home[d["first"][0]], self.home[d["second"][0]])
            wanted = d["rule"] in GUARDRAILS or self.view.rule_edges
            drawn = all(k in self.shown and k not in self.box_of for k in pair)
            if wanted and drawn:
                latest[pair] = d
        lines = []
        for (a, b), d in list(latest.items())[:self.view.max_refusals]:
            guardrail = d["rule"] in GUARDRAILS
            colour = REFUSED if guardrail else RULE_REFUSED
            tag = f"R{len(self.tags) + 1}"
            self.tags.append((tag, d | {"pair": (a, b)}))
            why = "refused: " + (reason_of(d) if guardrail else d["rule"])
            lines.append(
                f'{quote(self.anchor[a])} -> {quote(self.anchor[b])} [ltail="cluster_k{a}", '
                f'lhead="cluster_k{b}", style="{"dashed" if guardrail else "dotted"}", '
                f'color="{colour}", fontcolor="{colour}", constraint="false", dir="none", '
                f'label={quote(tag)}, tooltip={quote(why)}];')
        return lines

    def _legend(self) -> list[str]:
        kinds = list(dict.fromkeys(g["kind"] for g in self.groups
                                   if g["index"] not in self.box_of))
        rows = []
        if self.box_of:
            rows.append(f'<tr><td bgcolor="{MODULE_FILL}" color="{MODULE_BORDER}" border="1">'
                        '  module  </td><td align="left">a module\'s kernels, collapsed</td></tr>')
        for kind in kinds:
            rows.append(f'<tr><td bgcolor="{KIND_FILL.get(kind, "#f2f2f2")}" '
                        f'color="{KIND_BORDER.get(kind, "#555555")}" border="1">  {kind}  </td>'
                        f'<td align="left">{html_text(KIND_MEANING.get(kind, kind))}</td></tr>')
        rows.append(f'<tr><td><font color="{MEMORY_EDGE}"><b>&#8212;&#8212;&gt;</b></font></td>'
                    '<td align="left">thick: written to memory, read by another kernel</td></tr>')
        if self.nodes:  # edges inside a kernel are drawn only when the plan records them
            rows.append('<tr><td><font color="#777777">&#8212;&gt;</font></td>'
                        '<td align="left">thin: stays on chip, inside one kernel</td></tr>')
        if self.tags:
            rows.append(f'<tr><td><font color="{REFUSED}">- - R1</font></td>'
                        '<td align="left">a fusion refused, and why:</td></tr>')
        for tag, d in self.tags:
            a, b = d["pair"]
            why = reason_of(d) if d["rule"] in GUARDRAILS else d["rule"]
            text = f"kernel {a} x kernel {b}: {why}"
            wrapped = '<br align="left"/>'.join(
                html_text(line) for line in textwrap.wrap(text, LEGEND_WRAP))
            rows.append(f'<tr><td align="right"><font color="{REFUSED}">{tag}</font></td>'
                        f'<td align="left">{wrapped}<br align="left"/></td></tr>')
        table = ('<<table border="0" cellborder="0" cellspacing="2" cellpadding="2">'
                 + "".join(rows) + "</table>>")
        # Under the last kernel drawn: below the picture, not beside it (no width added).
        last = self.last_drawn
        lines = [f'legend [shape="plaintext", label={table}];']
        if last:
            lines.append(f'{quote(last)} -> legend [style="invis", weight="10"];')
        return lines


def ops_list_id(index: int) -> str:
    """DOT name of the node listing a kernel's ops, in a plan without node detail."""
    return f"ops_k{index}"


def fusion_details(data: dict, max_kernels: int, max_nodes: int,
                   box_of: dict[int, str] | None = None) -> dict[str, dict]:
    """DOT name -> what explore() shows on a click: kernels, ops, inputs, collapsed modules
    (`box_of`: kernel index -> its module's box, see FusionDot)."""
    box_of = box_of or {}
    detail = data.get("detail") or {}
    nodes, buffers = detail.get("nodes", {}), detail.get("buffers", {})
    home = {n: g["index"] for g in data["groups"] for n in g["nodes"]}

    def describe(buf: str) -> str:
        info = buffers.get(buf)
        if not info:
            return buf
        named = buffer_name(data, buf)
        alias = f" ({buf})" if named != buf else ""
        stride = ", ".join(map(str, info["stride"]))
        size = format_bytes(info["nbytes"])
        return f"{named}{alias}: {shape_text(info)}, stride ({stride}), {size}"

    def decisions_of(members: set[str]) -> list[str]:
        out = []
        for d in data["decisions"]:
            if members & set(d["first"] + d["second"]):
                verdict = "fused" if d["fused"] else "NOT fused"
                out.append(f"{verdict} [{side(d['first'], 3)}] x [{side(d['second'], 3)}]: "
                           f"{reason_of(d)}")
        return out

    out: dict[str, dict] = {}
    readers: dict[str, set[int]] = {}
    for g in data["groups"][:max_kernels]:
        box = box_of.get(g["index"])
        if box is not None:
            entry = out.setdefault(box, {"title": f"{box.removeprefix(MODULE_BOX)} (collapsed)",
                                         "rows": [["click", "opens the module: its kernels"]]})
            entry["rows"].append([f"kernel {g['index']}", f"{g['kind']}: " + ", ".join(
                op_of(nodes.get(n, {}).get("target", n)) for n in g["nodes"])
                + f"; {fmt_us(g['duration_us'])}"])
            continue
        members = set(g["nodes"])
        cost = g["cost"]
        rows = [["ops", ", ".join(op_of(nodes.get(n, {}).get("target", n)) for n in g["nodes"])],
                ["module", common_module([nodes.get(n, {}).get("module", "")
                                          for n in g["nodes"]]) or "-"],
                ["reads", "\n".join(describe(b) for b in g["inputs"]) or "-"],
                ["writes", "\n".join(describe(b) for b in g["outputs"]) or "-"],
                ["memory", f"{cost['bytes_read']:,} B read, {cost['bytes_written']:,} B written"],
                ["simulated", fmt_us(g["duration_us"])],
                ["source", "\n".join(g.get("source") or []) or (
                    "-" if nodes else "not recorded in this plan")],
                ["decisions", "\n".join(decisions_of(members)) or "-"]]
        if over(g, data):  # a plan of symbolic sizes
            rows.insert(4, ["runs over", over(g, data).removeprefix(" over ")])
        shown = [f"n_{n}" for n in g["nodes"][:max_nodes]]
        if len(g["nodes"]) > max_nodes:
            shown.append(f"more_k{g['index']}")
        title = f"kernel {g['index']} ({g['kind']})"
        if not nodes:  # one node lists the kernel's ops (see FusionDot._ops_list)
            shown = [ops_list_id(g["index"])]
            out[shown[0]] = {"title": title, "rows": rows}
        out[f"cluster_k{g['index']}"] = {"title": title, "rows": rows, "members": shown}
        for b in g["inputs"]:
            readers.setdefault(b, set()).add(g["index"])
        if not nodes:
            continue
        for node in g["nodes"][:max_nodes]:
            info = nodes.get(node, {})
            target = info.get("target", "")
            fused = [d for d in data["decisions"] if d["fused"] and node in d["second"]]
            brought = (f"{reason_of(fused[0])} (with [{side(fused[0]['first'], 3)}])" if fused
                       else "starts its kernel")
            rows = [["op", target or node], ["node", node],
                    ["kernel", f"{g['index']} ({g['kind']})"],
                    ["module", info.get("module") or "-"],
                    ["writes", "\n".join(describe(b) for b in info.get("writes", [])) or "-"],
                    ["reads", "\n".join(describe(b) for b in info.get("reads", [])) or "-"],
                    ["source", "\n".join(info.get("source", [])) or "-"],
                    ["decision", brought]]
            op = op_of(target) if target else node
            out[f"n_{node}"] = {"title": op if op == node else f"{op} ({node})", "rows": rows}
    for buf, kernels in readers.items():
        info = buffers.get(buf)
        if info is None or info.get("producer") is not None and info["producer"] in home:
            continue
        out[f"in_{buf}"] = {"title": buffer_name(data, buf),
                            "rows": [["input", describe(buf)],
                                     ["read by", ", ".join(f"kernel {k}"
                                                           for k in sorted(kernels))]]}
    return out
