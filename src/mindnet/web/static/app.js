// The page of `mindnet serve`: search as you type, the status strip, the note view's graph.
// It only calls the JSON API (/api/notes, /api/status, /api/graph) and builds the DOM with
// textContent, so nothing a note or a query contains is ever parsed as HTML.
"use strict";

const DEBOUNCE_MS = 150;
const STATUS_EVERY_MS = 3000;
const SNIPPET_CHARS = 260;
const SVG = "http://www.w3.org/2000/svg";

// Times (ms) from the last keystroke to the results of that query on screen; read by the browser test.
window.mindnetTimings = [];

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  for (const child of children) node.append(child);
  return node;
}

// ---------------------------------------------------------------------------------------------
// Status strip
// ---------------------------------------------------------------------------------------------

function ago(seconds) {
  const s = Math.max(0, Math.round(Date.now() / 1000 - seconds));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  return `${Math.round(s / 3600)} h ago`;
}

function showStatus(info) {
  const strip = document.getElementById("status");
  const set = (field, text) => { strip.querySelector(`[data-field="${field}"]`).textContent = text; };
  const resident = info.resident || {};
  const e5 = resident.e5 || {};
  set("notes", `${info.notes} notes`);
  set("chunks", `${info.chunks} chunks`);
  if (!e5.enabled) set("e5", "e5 off");
  else if (e5.complete) set("e5", "e5 complete");
  else set("e5", `e5 ${e5.done}/${e5.total || "?"}`);
  let event = resident.watching ? "watching, no change yet" : "not watching";
  if (resident.importing) event = "importing…";
  else if (resident.last_event) event = `last change: ${resident.last_event} (${ago(resident.last_event_at)})`;
  set("event", event);
  strip.dataset.ready = "true";
}

async function pollStatus() {
  try {
    const response = await fetch("/api/status");
    if (response.ok) showStatus(await response.json());
  } catch (err) {
    document.querySelector('#status [data-field="event"]').textContent = "server not reachable";
  }
  setTimeout(pollStatus, STATUS_EVERY_MS);
}

// ---------------------------------------------------------------------------------------------
// Search
// ---------------------------------------------------------------------------------------------

function queryWords(query) {
  const all = query.toLowerCase().match(/[\p{L}\p{N}]{2,}/gu) || [];
  const long = all.filter((w) => w.length > 2);  // "to", "of", "im" would light up every line
  return [...new Set(long.length ? long : all)].sort((a, b) => b.length - a.length);
}

function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

// Chunk text as a reader sees it: link labels instead of link syntax, no heading marks.
function plain(text) {
  return text
    .replace(/!?\[\[([^\]|]*)\|([^\]]*)\]\]/g, "$2")
    .replace(/!?\[\[([^\]]*)\]\]/g, "$1")
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/^#{1,6}\s+/gm, "");
}

// The part of a chunk around its first matched word, cut at word boundaries.
function snippetOf(text, words) {
  const flat = plain(text).replace(/\s+/g, " ").trim();
  if (flat.length <= SNIPPET_CHARS) return flat;
  const lower = flat.toLowerCase();
  const found = words.map((w) => lower.indexOf(w)).filter((i) => i >= 0);
  const at = found.length ? Math.min(...found) : 0;
  let start = Math.max(0, at - SNIPPET_CHARS / 3);
  if (start > 0) start = flat.indexOf(" ", start) + 1 || start;
  let end = Math.min(flat.length, start + SNIPPET_CHARS);
  if (end < flat.length) end = flat.lastIndexOf(" ", end) > start ? flat.lastIndexOf(" ", end) : end;
  return (start > 0 ? "… " : "") + flat.slice(start, end) + (end < flat.length ? " …" : "");
}

// Text nodes and <mark> elements: the text is never parsed as HTML, so it needs no escaping.
function highlighted(text, words) {
  const out = document.createDocumentFragment();
  if (!words.length) { out.append(text); return out; }
  const pattern = new RegExp(`(${words.map(escapeRegExp).join("|")})`, "giu");
  let last = 0;
  for (const m of text.matchAll(pattern)) {
    out.append(text.slice(last, m.index), el("mark", {}, m[0]));
    last = m.index + m[0].length;
  }
  out.append(text.slice(last));
  return out;
}

function noteUrl(hit, query) {
  const params = new URLSearchParams({ ref: hit.note_id, chunk: hit.chunk_id });
  if (query) params.set("q", query);
  return `/note?${params}`;
}

function where(hit) {
  return hit.section_path === "/" ? hit.path : `${hit.path} › ${hit.section_path}`;
}

// A note once (from /api/notes): its best passage as the result's link, its next best passages below it.
function resultItem(note, index, words, query) {
  const [best, ...more] = note.sections;
  const link = el("a", { href: noteUrl(best, query), class: "result-link", id: `result-${index}` },
    el("span", { class: "result-title" }, note.title),
    el("span", { class: "result-section" }, where(best)),
    el("span", { class: "result-snippet" }, highlighted(snippetOf(best.text, words), words)),
    el("span", { class: "result-meta" },
      `score ${note.score.toFixed(4)} · ${best.via} · lines ${best.line_start}–${best.line_end}`));
  const item = el("li", { class: "result" }, link);
  if (more.length) {
    item.append(el("ul", { class: "result-sections" }, ...more.map((hit) => el("li", {},
      el("a", { href: noteUrl(hit, query), class: "section-link" },
        el("span", { class: "result-section" }, hit.section_path === "/" ? "(top)" : hit.section_path),
        el("span", { class: "result-snippet" }, highlighted(snippetOf(hit.text, words), words)))))));
  }
  return item;
}

class Search {
  constructor(form) {
    this.form = form;
    this.box = form.querySelector("#q");
    this.results = document.getElementById("results");
    this.summary = document.getElementById("summary");
    this.timer = null;
    this.latest = 0;        // the number of the newest request; older answers are dropped
    this.lastKey = null;    // performance.now() of the last input event
    this.selected = -1;
    form.addEventListener("input", () => this.changed());
    form.addEventListener("change", () => this.changed());
    form.addEventListener("submit", (event) => { event.preventDefault(); this.run(); });
    document.addEventListener("keydown", (event) => this.key(event));
    if (this.box.value.trim()) this.run();
  }

  params() {
    const params = new URLSearchParams();
    const q = this.box.value.trim();
    if (q) params.set("q", q);
    for (const name of ["type", "tag", "lang"]) {
      const value = this.form.querySelector(`#${name}`).value.trim();
      if (value) params.set(name, value);
    }
    return params;
  }

  changed() {
    this.lastKey = performance.now();
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.run(), DEBOUNCE_MS);
  }

  async run() {
    const params = this.params();
    const query = params.get("q") || "";
    history.replaceState(null, "", params.toString() ? `/?${params}` : "/");
    document.title = query ? `${query} – mindnet` : "mindnet";
    const number = ++this.latest;
    const typedAt = this.lastKey;
    if (!query) { this.show([], "", number); return; }
    params.set("k", "15");
    params.set("sections", "3");
    let hits;
    try {
      const response = await fetch(`/api/notes?${params}`);
      const body = await response.json();
      if (!response.ok) { this.fail(body.error || `error ${response.status}`, number); return; }
      hits = body;
    } catch (err) {
      this.fail("The server did not answer.", number);
      return;
    }
    if (this.show(hits, query, number) && typedAt !== null) {
      window.mindnetTimings.push(performance.now() - typedAt);
      this.results.dataset.timed = String(window.mindnetTimings.length);
      this.results.dataset.timedQuery = query;
    }
  }

  fail(message, number) {
    if (number !== this.latest) return;
    this.results.replaceChildren();
    this.summary.textContent = message;
    this.summary.classList.add("problem");
  }

  show(hits, query, number) {
    if (number !== this.latest) return false;
    const words = queryWords(query);
    this.summary.classList.remove("problem");
    this.summary.textContent = this.describe(hits.length, query);
    this.results.replaceChildren(...hits.map((hit, i) => resultItem(hit, i, words, query)));
    this.results.dataset.query = query;
    this.selected = -1;
    return true;
  }

  describe(count, query) {
    if (!query) return "";
    const filtered = ["type", "tag", "lang"].some((name) => this.form.querySelector(`#${name}`).value.trim());
    if (!count) return `No results for “${query}”${filtered ? " with these filters" : ""}.`;
    return `${count} note${count === 1 ? "" : "s"} for “${query}”${filtered ? " (filtered)" : ""}`;
  }

  key(event) {
    const links = [...this.results.querySelectorAll(".result-link")];
    if (!links.length) return;
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      const step = event.key === "ArrowDown" ? 1 : -1;
      this.select(Math.min(links.length - 1, Math.max(-1, this.selected + step)), links);
    } else if (event.key === "Enter" && document.activeElement === this.box && this.selected >= 0) {
      event.preventDefault();
      links[this.selected].click();
    }
  }

  select(index, links) {
    links.forEach((link, i) => {
      if (i === index) link.setAttribute("aria-current", "true");
      else link.removeAttribute("aria-current");
    });
    this.selected = index;
    if (index < 0) { this.box.focus(); return; }
    links[index].focus();
    links[index].scrollIntoView({ block: "nearest" });
  }
}

// ---------------------------------------------------------------------------------------------
// The note's neighbourhood: the note in the middle, its links on a ring, their links outside
// ---------------------------------------------------------------------------------------------

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

// The note in the middle, its links on a ring, each second-hop note just outside the note it came through.
function layout(rows, center) {
  const nodes = new Map([[center, { id: center, depth: 0, x: 0, y: 0, angle: 0 }]]);
  for (const row of rows) {
    if (!nodes.has(row.note_id)) nodes.set(row.note_id, { id: row.note_id, depth: row.depth || 1, row });
  }
  const place = (node, angle, radius) => {
    node.angle = angle;
    node.x = Math.cos(angle) * radius;
    node.y = Math.sin(angle) * radius * 0.75;
  };
  const first = [...nodes.values()].filter((n) => n.depth === 1);
  first.forEach((node, i) => place(node, (2 * Math.PI * i) / first.length - Math.PI / 2, 90));
  const spread = Math.min(Math.PI / 2.5, (2 * Math.PI) / Math.max(first.length, 1)) * 0.8;
  const children = new Map();
  for (const node of nodes.values()) {
    if (node.depth !== 2) continue;
    const parent = nodes.get(node.row.via);
    const key = parent && parent.depth === 1 ? parent.id : center;
    if (!children.has(key)) children.set(key, []);
    children.get(key).push(node);
  }
  for (const [parentId, kids] of children) {
    const base = nodes.get(parentId).angle;
    kids.forEach((node, j) => {
      const offset = kids.length === 1 ? 0 : spread * (j / (kids.length - 1) - 0.5);
      place(node, base + offset, 165);
    });
  }
  return nodes;
}

const LABEL_CHARS = 22;
const LABEL_PX = 11; // on screen, whatever the picture's scale
const FRAME_X = 64; // room for labels beside the outermost notes, in picture units
const FRAME_Y = 26;
const LABEL_GAP = 3;
const LABEL_HALO = 3.5; // the white outline (style.css: stroke-width 3px); the browser counts all of it on each side
const SIDES = [[0, -1], [1, 0], [-1, 0], [0, 1]]; // above, right, left, below

function box(x, y, width, height) { return { x, y, width, height }; }

// A long title cut in the middle, on spaces where it can: titles of one series share their start
// ("Meeting notes 2024-01-03"), so the end is what tells two labels apart.
function shortLabel(name) {
  if (name.length <= LABEL_CHARS) return name;
  let head = name.slice(0, 13);
  let tail = name.slice(-8);
  const space = head.lastIndexOf(" ");
  if (space > 6) head = head.slice(0, space);
  const cut = tail.indexOf(" ");
  if (cut >= 0 && cut < tail.length - 2) tail = tail.slice(cut + 1);
  return `${head.trimEnd()}…${tail.trimStart()}`;
}

function overlaps(a, b) {
  return a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
}

function within(inner, outer) {
  return inner.x >= outer.x && inner.y >= outer.y && inner.x + inner.width <= outer.x + outer.width
    && inner.y + inner.height <= outer.y + outer.height;
}

function radius(node) { return node.depth === 0 ? 9 : 6; }

function dot(node) { return box(node.x - radius(node), node.y - radius(node), 2 * radius(node), 2 * radius(node)); }

// Where a label of size (w, h) sits on one side of its node: its box in the picture's units.
function labelBox(node, side, w, h) {
  const r = radius(node) + LABEL_GAP;
  const [dx, dy] = side;
  const x = dx === 0 ? node.x - w / 2 : dx > 0 ? node.x + r : node.x - r - w;
  const y = dy === 0 ? node.y - h / 2 : dy > 0 ? node.y + r : node.y - r - h;
  return box(x, y, w, h);
}

// The note itself first, then its links by how many shown notes they lead on to, then the second hop.
function byImportance(nodes, rows) {
  const degree = new Map();
  for (const row of rows) degree.set(row.via, (degree.get(row.via) || 0) + 1);
  return [...nodes.values()].map((node, order) => ({ node, order }))
    .sort((a, b) => a.node.depth - b.node.depth || (degree.get(b.node.id) || 0) - (degree.get(a.node.id) || 0)
      || a.order - b.order)
    .map((item) => item.node);
}

// Labels around a hub note overlapped into one unreadable blob (issue 28). Each label takes the first
// free side of its node (outward first), most important notes first; a label with no free side is
// hidden and shows on hover or focus, and every node keeps its full title as a tooltip.
function placeLabels(nodes, rows, measured, frame) {
  const taken = [...nodes.values()].map((n) => ({ ...dot(n), owner: n.id }));
  const placed = new Map();
  for (const node of byImportance(nodes, rows)) {
    const { width, height } = measured.get(node.id);
    const out = node.depth === 0 ? [0, -1] : [Math.cos(node.angle), Math.sin(node.angle)];
    const sides = [...SIDES].sort((a, b) => (b[0] * out[0] + b[1] * out[1]) - (a[0] * out[0] + a[1] * out[1]));
    const boxes = sides.map((side) => labelBox(node, side, width, height));
    const free = boxes.find((candidate) => within(inked(candidate), frame)
      && !taken.some((other) => other.owner !== node.id && overlaps(inked(candidate), other)));
    placed.set(node.id, { box: free || boxes[0], shown: Boolean(free) });
    if (free) taken.push(inked(free));
  }
  return placed;
}

// A label's box with its outline: what must not touch another label or a node.
function inked(b) { return box(b.x - LABEL_HALO, b.y - LABEL_HALO, b.width + 2 * LABEL_HALO, b.height + 2 * LABEL_HALO); }

function drawGraph(container, rows, center, title, query) {
  const nodes = layout(rows, center);
  const picture = svg("svg", { class: "graph-svg" });
  picture.append(svg("title", {}, `Neighbourhood of ${title}`));
  container.replaceChildren(picture); // in the document, so its labels can be measured
  for (const row of rows) {
    const from = nodes.get(row.via || center);
    const to = nodes.get(row.note_id);
    if (!from || !to) continue;
    picture.append(svg("line", { x1: from.x, y1: from.y, x2: to.x, y2: to.y,
      class: `edge ${row.direction} ${row.status}` }));
  }
  const labels = new Map();
  for (const node of nodes.values()) {
    const row = node.row;
    const resolved = node.depth === 0 || row.status === "resolved";
    const name = node.depth === 0 ? title : row.title;
    const group = svg("g", { class: `node depth-${node.depth} ${resolved ? "resolved" : "unresolved"}` });
    group.append(svg("title", {}, name));
    group.append(svg("circle", { cx: node.x, cy: node.y, r: radius(node) }));
    const label = svg("text", { x: 0, y: 0, class: "label" }, shortLabel(name));
    group.append(label);
    labels.set(node.id, label);
    if (node.depth > 0 && resolved) {
      const params = new URLSearchParams({ ref: node.id });
      if (query) params.set("q", query);
      const link = svg("a", { href: `/note?${params}` });
      link.append(group);
      picture.append(link);
    } else {
      picture.append(group);
    }
  }
  // The frame is the notes' extent and a margin for labels, fixed before any label is placed: labels
  // that widened it shrank the whole picture, text included. Labels are sized to read as the
  // page's small print at the picture's scale, and a label that leaves the frame is not shown.
  const dots = [...nodes.values()].map(dot);
  const left = Math.min(...dots.map((b) => b.x)) - FRAME_X;
  const top = Math.min(...dots.map((b) => b.y)) - FRAME_Y;
  const right = Math.max(...dots.map((b) => b.x + b.width)) + FRAME_X;
  const bottom = Math.max(...dots.map((b) => b.y + b.height)) + FRAME_Y;
  picture.setAttribute("viewBox", `${left} ${top} ${right - left} ${bottom - top}`);
  const scale = pictureScale(picture);
  const size = scale > 0 && Number.isFinite(scale) ? LABEL_PX / scale : LABEL_PX;
  const shown = arrangeLabels(picture, nodes, rows, labels, size, box(left, top, right - left, bottom - top));
  container.dataset.nodes = String(nodes.size);
  container.dataset.labels = String(shown);
}

// Measure and place every label at `size` (picture units) inside `frame`; the number shown.
function arrangeLabels(picture, nodes, rows, labels, size, frame) {
  picture.style.fontSize = `${size}px`;
  const measured = new Map();
  const ascents = new Map();
  for (const [id, label] of labels) {
    const bbox = label.getBBox();
    measured.set(id, { width: bbox.width, height: bbox.height });
    ascents.set(id, bbox.y - Number(label.getAttribute("y")));
  }
  const placed = placeLabels(nodes, rows, measured, frame);
  for (const [id, { box: where, shown }] of placed) {
    const label = labels.get(id);
    label.setAttribute("x", String(where.x));
    label.setAttribute("y", String(where.y - ascents.get(id)));
    if (!shown) label.classList.add("on-hover");
  }
  return [...placed.values()].filter((p) => p.shown).length;
}

// Screen pixels per picture unit (the svg keeps its aspect ratio inside its width and max-height).
function pictureScale(picture) {
  const view = picture.viewBox.baseVal;
  const shown = picture.getBoundingClientRect();
  return Math.min(shown.width / view.width, shown.height / view.height);
}

async function loadGraph(box) {
  const ref = box.dataset.ref;
  try {
    const response = await fetch(`/api/graph?${new URLSearchParams({ ref, view: "neighbors", depth: "2" })}`);
    if (!response.ok) throw new Error(`error ${response.status}`);
    const rows = (await response.json()).slice(0, 40);
    const title = document.getElementById("note-title").textContent;
    if (!rows.length) { box.textContent = "No linked notes."; box.dataset.nodes = "1"; return; }
    drawGraph(box, rows, ref, title, box.dataset.q);
  } catch (err) {
    box.textContent = "The graph could not be loaded.";
  }
}

document.addEventListener("DOMContentLoaded", () => {
  pollStatus();
  const form = document.getElementById("search");
  if (form) window.mindnetSearch = new Search(form);
  const graph = document.getElementById("graph");
  if (graph) loadGraph(graph);
  const hit = document.getElementById("hit");
  if (hit) hit.scrollIntoView({ block: "center" });
});
