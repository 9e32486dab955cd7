// mtia_lab's diagram explorer: an anywidget ES module (plain JavaScript, no build step, no CDN).
//
// It takes the SVG the kernel already rendered with Graphviz and attaches behaviour to it:
// Graphviz marks every node <g class="node">, edge <g class="edge"> and cluster
// <g class="cluster">, each with a <title> (the node's DOT name; an edge's "tail->head").
//   - pan: drag; zoom: the buttons, or Ctrl/Cmd + wheel (a plain wheel still scrolls the page);
//   - hover a node or cluster: its inputs and outputs (edges and neighbours) are highlighted,
//     the rest dimmed;
//   - click: the details the kernel sent for that name (model "details") are shown under the
//     picture, and the name goes back to Python (model "selected").
// Model: svg (str), details ({name: {title, rows: [[key, value]], members: [names]}}),
// selected (str), message (str, set by Python when a click arrived), height (px).

const MIN_SCALE = 0.1;
const MAX_SCALE = 8;
const READABLE_PX = 9;  // "fit" never draws text smaller than this

function titleOf(g) {
  const t = g.querySelector(":scope > title");
  return t ? t.textContent : "";
}

function endpoint(text) {
  // "n_mm:p0" -> "n_mm" (a port); Graphviz escapes nothing else in titles we write.
  return text.split(":")[0];
}

function graphOf(svg, details) {
  // name -> {el, kind, edges: Set(edge el), neighbours: Set(name)}
  const items = new Map();
  for (const g of svg.querySelectorAll("g.node, g.cluster")) {
    const name = titleOf(g);
    if (name) items.set(name, { el: g, kind: g.classList.contains("node") ? "node" : "cluster",
                                edges: new Set(), neighbours: new Set() });
  }
  const memberOf = new Map();  // node -> cluster names that hold it
  for (const [name, info] of Object.entries(details || {})) {
    for (const m of info.members || []) {
      if (!memberOf.has(m)) memberOf.set(m, []);
      memberOf.get(m).push(name);
    }
  }
  const touch = (name, edge, other) => {
    const names = [name, ...(memberOf.get(name) || [])];
    for (const n of names) {
      const item = items.get(n);
      if (!item) continue;
      item.edges.add(edge);
      item.neighbours.add(other);
    }
  };
  for (const edge of svg.querySelectorAll("g.edge")) {
    const parts = titleOf(edge).split("->");
    if (parts.length !== 2) continue;
    const [a, b] = parts.map(endpoint);
    touch(a, edge, b);
    touch(b, edge, a);
  }
  return items;
}

function table(rows) {
  const t = document.createElement("table");
  for (const [key, value] of rows) {
    const tr = t.insertRow();
    const th = document.createElement("th");
    th.textContent = key;
    tr.appendChild(th);
    const td = tr.insertCell();
    td.textContent = value;
  }
  return t;
}

function button(label, title, onclick) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  b.title = title;
  b.addEventListener("click", onclick);
  return b;
}

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "mtia-diagram";
  const bar = document.createElement("div");
  bar.className = "mtia-diagram-bar";
  const view = document.createElement("div");
  view.className = "mtia-diagram-view";
  const stage = document.createElement("div");
  stage.className = "mtia-diagram-stage";
  view.appendChild(stage);
  const info = document.createElement("div");
  info.className = "mtia-diagram-details";
  const body = document.createElement("div");
  body.className = "mtia-diagram-body";  // the view, and the details beside it (or below)
  body.append(view, info);
  root.append(bar, body);
  el.appendChild(root);

  let svg = null, items = new Map(), natural = { w: 1, h: 1 };
  let scale = 1, x = 0, y = 0, selectedEl = null;

  const apply = () => {
    if (!svg) return;
    svg.style.width = `${natural.w * scale}px`;
    svg.style.height = `${natural.h * scale}px`;
    stage.style.transform = `translate(${x}px, ${y}px)`;
    zoomLabel.textContent = `${Math.round(scale * 100)}%`;
  };
  const zoomAt = (factor, cx, cy) => {
    const next = Math.min(MAX_SCALE, Math.max(MIN_SCALE, scale * factor));
    x = cx - (cx - x) * (next / scale);
    y = cy - (cy - y) * (next / scale);
    scale = next;
    apply();
  };
  const centre = () => [view.clientWidth / 2, view.clientHeight / 2];
  // The smallest text as drawn now, in screen px (the browser's transform included).
  const smallestTextPx = () => {
    let min = Infinity;
    for (const t of svg.querySelectorAll("text")) {
      const m = t.textContent.trim() && t.getScreenCTM();
      if (m) min = Math.min(min, parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b));
    }
    return min;
  };
  // "fit": the width of the view, but never so small that text goes below READABLE_PX: a
  // wider diagram still pans; "-" zooms out further on request.
  const fit = () => {
    if (!svg) return;
    const atOne = smallestTextPx() / scale;  // the smallest text's size at 100%
    const floor = Number.isFinite(atOne) && atOne > 0 ? READABLE_PX / atOne : 1;
    scale = Math.min(1, Math.max(floor, view.clientWidth / natural.w));
    x = Math.max(0, (view.clientWidth - natural.w * scale) / 2);
    y = 0;
    apply();
  };
  const actual = () => { scale = 1; x = 0; y = 0; apply(); };
  const zoomLabel = document.createElement("span");
  zoomLabel.className = "mtia-diagram-zoom";
  const hint = document.createElement("span");
  hint.className = "mtia-diagram-hint";
  hint.textContent = "drag to pan, Ctrl + wheel to zoom, hover for inputs and outputs, click for details";
  bar.append(
    button("+", "zoom in", () => zoomAt(1.25, ...centre())),
    button("\u2212", "zoom out", () => zoomAt(0.8, ...centre())),
    button("fit", "fit the width of the view (text stays readable)", fit),
    button("1:1", "actual size (text at its drawn size)", actual),
    zoomLabel, hint,
  );

  const showDetails = (name) => {
    info.replaceChildren();
    if (!name) return;
    const d = (model.get("details") || {})[name];
    const item = items.get(name);
    const head = document.createElement("div");
    head.className = "mtia-diagram-details-title";
    head.textContent = d ? d.title : name;
    info.appendChild(head);
    if (d && d.rows && d.rows.length) {
      info.appendChild(table(d.rows));
    } else if (item) {  // no details from the kernel: the node's own tooltip, if any
      const a = item.el.querySelector("a[title], a");
      const tip = a && (a.getAttribute("xlink:title") || a.getAttribute("title"));
      if (tip) info.appendChild(table([["tooltip", tip]]));
    }
    const msg = document.createElement("div");
    msg.className = "mtia-diagram-message";
    msg.textContent = model.get("message") || "";
    info.appendChild(msg);
    // Beside the view when the output is wide enough (CSS); else below it: bring it in sight.
    if (info.scrollIntoView) info.scrollIntoView({ block: "nearest" });
  };

  const select = (name) => {
    if (selectedEl) selectedEl.classList.remove("mtia-selected");
    const item = items.get(name);
    selectedEl = item ? item.el : null;
    if (selectedEl) selectedEl.classList.add("mtia-selected");
    showDetails(name);
    model.set("selected", name);
    model.save_changes();
  };

  const highlight = (name) => {
    if (!svg) return;
    for (const e of svg.querySelectorAll(".mtia-hl")) e.classList.remove("mtia-hl");
    const item = name && items.get(name);
    svg.classList.toggle("mtia-dim", Boolean(item));
    if (!item) return;
    item.el.classList.add("mtia-hl");
    for (const e of item.edges) e.classList.add("mtia-hl");
    for (const n of item.neighbours) {
      const other = items.get(n);
      if (other) other.el.classList.add("mtia-hl");
    }
  };

  const draw = () => {
    stage.innerHTML = model.get("svg");
    svg = stage.querySelector("svg");
    if (!svg) return;
    const box = svg.viewBox && svg.viewBox.baseVal;
    const w = parseFloat(svg.getAttribute("width")), h = parseFloat(svg.getAttribute("height"));
    // Graphviz writes width="1317pt": 1 pt is 4/3 px. Our own SVGs are in px.
    const unit = (v) => (String(svg.getAttribute(v)).endsWith("pt") ? 4 / 3 : 1);
    natural = { w: (w || (box && box.width) || 100) * unit("width"),
                h: (h || (box && box.height) || 100) * unit("height") };
    svg.removeAttribute("width");
    svg.removeAttribute("height");
    svg.classList.add("mtia-diagram-svg");
    items = graphOf(svg, model.get("details"));
    for (const [name, item] of items) {
      // Clusters: only their outline and label answer, so a node inside stays clickable.
      const target = item.el;
      target.classList.add("mtia-item");
      target.addEventListener("mouseenter", () => highlight(name));
      target.addEventListener("mouseleave", () => highlight(null));
      target.addEventListener("click", (ev) => { ev.stopPropagation(); select(name); });
    }
    const tall = Math.min(natural.h, model.get("height") || 600);
    view.style.height = `${Math.max(120, tall + 8)}px`;
    info.style.maxHeight = view.style.height;  // beside the view, it scrolls within its height
    actual();
    if (model.get("selected")) select(model.get("selected"));
  };

  // Pan by dragging (not when the press was on a node: that is a click).
  let drag = null;
  view.addEventListener("pointerdown", (ev) => {
    if (ev.button !== 0) return;
    drag = { sx: ev.clientX, sy: ev.clientY, x, y, moved: false };
  });
  view.addEventListener("pointermove", (ev) => {
    if (!drag) return;
    const dx = ev.clientX - drag.sx, dy = ev.clientY - drag.sy;
    if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
    if (!drag.moved) view.setPointerCapture(ev.pointerId);
    drag.moved = true;
    x = drag.x + dx;
    y = drag.y + dy;
    apply();
  });
  const endDrag = (ev) => {
    if (drag && drag.moved) {
      view.releasePointerCapture(ev.pointerId);
      // The click that ends a drag must not select what is under the pointer.
      view.addEventListener("click", (e) => e.stopPropagation(), { capture: true, once: true });
    }
    drag = null;
  };
  view.addEventListener("pointerup", endDrag);
  view.addEventListener("pointercancel", endDrag);
  view.addEventListener("wheel", (ev) => {
    if (!(ev.ctrlKey || ev.metaKey)) return;  // a plain wheel scrolls the notebook
    ev.preventDefault();
    const r = view.getBoundingClientRect();
    zoomAt(ev.deltaY < 0 ? 1.1 : 1 / 1.1, ev.clientX - r.left, ev.clientY - r.top);
  }, { passive: false });

  model.on("change:svg", draw);
  model.on("change:details", draw);
  model.on("change:message", () => showDetails(model.get("selected")));
  draw();
  return () => el.replaceChildren();
}

export default { render };
