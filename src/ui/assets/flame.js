/*
 * profd web UI — the flame graph, painted on a <canvas> (issue 15).
 *
 * app.js owns the data (the API's flame graph tree, prepared by prepareFlame)
 * and the page around it (breadcrumbs, tooltip text, the URL); this module
 * owns the geometry and the pixels:
 *
 *   layout()  the rectangles to draw, in CSS pixels. A frame is exactly as
 *             wide as its value: x and w = size / zoom.size × the canvas width,
 *             never rounded up. Children narrower than one pixel are not drawn
 *             one by one: each run of them becomes one "…" rectangle as wide as
 *             their sum (drawn when that reaches half a pixel), whose own
 *             children are not laid out. The zoomed frame's ancestors span
 *             the whole width, dimmed. The work is bounded by what is drawn,
 *             not by the tree (a run of thin children costs one add each).
 *   paint()   fills each rectangle (the 1 px gap between frames is taken from
 *             inside a frame of 3 px or more, so nothing spills over its
 *             neighbour), writes the name when it fits (monospace: the width
 *             of a character is measured once), dims what the search does not
 *             match, outlines the keyboard's frame.
 *   hit()     the rectangle under a point: a binary search in its row
 *             (a row's rectangles are laid out left to right, disjoint).
 *
 * The model is public for tools and tests: box.flame is the FlameCanvas;
 * .rects are {name, node, kind ('frame'|'ancestor'|'more'), row, x, y, w,
 * value, count, match, color}; .timing holds the last layout and paint times
 * (ms). A layer drawn over the frames (e.g. markers) can use .rects and
 * .paint()'s onPainted hook.
 */

export const ROW = 18;         // CSS px per row (the frame is ROW - 1 high)
const TEXT_MIN = 28;           // a name is written in frames at least this wide (px)

// The package of a function name: the text before its last "." (Go's
// "net/http.(*conn).serve" → "net/http", a closure's "runtime.goready.func1"
// → "runtime"); the name itself when it has none.
export function packageOf(name) {
  name = name.replace(/(\.(func|gowrap)\d+)+(\.\d+)*$/, ''); // Go closures: runtime.goready.func1
  const m = name.match(/^(.*?)\.[^./]*(\(|$)/);
  return m ? m[1].replace(/\(.*$/, '') : name;
}

// Colour by package; runtime frames in blues, the rest in warm hues.
export function frameColor(name) {
  if (name === 'root') return '#c7cbd1';
  const pkg = packageOf(name);
  let h = 2166136261;
  for (let i = 0; i < pkg.length; i++) { h ^= pkg.charCodeAt(i); h = Math.imul(h, 16777619); }
  h >>>= 0;
  if (/^runtime\b|^runtime\./.test(name)) return 'hsl(' + (200 + (h % 30)) + ',35%,' + (72 + (h >> 8) % 10) + '%)';
  return 'hsl(' + (10 + (h % 40)) + ',' + (75 + (h >> 8) % 20) + '%,' + (60 + (h >> 16) % 14) + '%)';
}

// A diff's colour: red grew, green shrank (cb: blue grew, orange shrank — the
// Okabe-Ito pair, for red-green colour blindness); the stronger, the larger
// the change relative to the frame's larger side; grey unchanged.
// A change under 0.05% of the frame (what the table rounds to 0%: a side
// scaled to the other's total moves by a unit) is drawn unchanged.
const SAME = 0.0005;
const relDiff = (n) => Math.abs(n.new - n.base) / Math.max(Math.abs(n.base), Math.abs(n.new), 1);
export function diffColor(n, cb) {
  const d = n.new - n.base;
  if (d === 0 || n.name === 'root' || relDiff(n) < SAME) return n.name === 'root' ? '#c7cbd1' : '#d9dbe0';
  const rel = Math.min(1, relDiff(n));
  const light = Math.round(88 - 36 * Math.sqrt(rel));
  if (cb) return d > 0 ? 'hsl(214,80%,' + light + '%)' : 'hsl(30,90%,' + light + '%)';
  return d > 0 ? 'hsl(2,85%,' + light + '%)' : 'hsl(140,60%,' + light + '%)';
}
export const diffKind = (n) => (n.name === 'root' ? '' : relDiff(n) < SAME ? 'same' : n.new > n.base ? 'grew' : 'shrank');

export class FlameCanvas {
  // box: the element the canvas goes in (its width is the graph's width).
  constructor(box) {
    this.box = box;
    this.canvas = document.createElement('canvas');
    this.canvas.setAttribute('aria-hidden', 'true'); // the box's live region speaks for it
    this.canvas.className = 'flame-canvas';
    this.ctx = this.canvas.getContext('2d');
    this.root = null; this.zoom = null; this.diff = false;
    this.up = false; this.cb = false;
    this.re = null; this.cur = null; this.hover = null;
    this.rects = []; this.rows = []; this.maxRow = 0; this.width = 0;
    this.timing = { layout: 0, paint: 0 };
    this.onPainted = null; // (ctx, fc) => void: a layer over the frames
    box.flame = this;
  }

  // The tree to show (nodes of prepareFlame: name, size, value, children,
  // parent, depth; a diff's also base/new).
  // Each node gets nid, the index of its name in this.names, so that a
  // search tests each distinct name once and then reads a byte per node.
  setTree(root, diff) {
    this.root = root; this.zoom = root; this.diff = diff; this.cur = null; this.hover = null; this.matchCache = null;
    const ids = new Map(), names = [];
    const stack = root ? [root] : [];
    while (stack.length) {
      const n = stack.pop();
      let id = ids.get(n.name);
      if (id === undefined) { id = names.length; names.push(n.name); ids.set(n.name, id); }
      n.nid = id;
      for (let i = 0; i < n.children.length; i++) stack.push(n.children[i]);
    }
    this.names = names;
  }

  // Lays out and paints; returns the number of rectangles drawn.
  draw() {
    if (!this.box.contains(this.canvas)) { this.box.textContent = ''; this.box.appendChild(this.canvas); }
    const t0 = performance.now();
    this.layout();
    const t1 = performance.now();
    this.paint();
    this.timing = { layout: t1 - t0, paint: performance.now() - t1 };
    return this.rects.length;
  }

  layout() {
    const W = this.width = Math.max(1, this.box.clientWidth || 1000);
    const rects = [], rows = [];
    let maxRow = 0;
    const add = (r) => { rects.push(r); (rows[r.row] || (rows[r.row] = [])).push(r); if (r.row > maxRow) maxRow = r.row; };
    const zoom = this.zoom;
    if (!zoom) { this.rects = rects; this.rows = rows; this.maxRow = 0; return; }
    for (let a = zoom.parent; a; a = a.parent) {
      add({ name: a.name, node: a, kind: 'ancestor', row: a.depth, x: 0, w: W, value: a.value, count: 1 });
    }
    const zs = zoom.size || 0;
    const place = (n, x, w) => {
      add({ name: n.name, node: n, kind: n === zoom ? 'frame' : 'frame', row: n.depth, x, w, value: n.value, count: 1 });
      if (!zs || !n.size) return;
      const scale = w / n.size, row = n.depth + 1;
      let cx = x, thinX = -1, thinW = 0, thinN = 0, thinV = 0;
      const flush = () => {
        if (thinN && thinW >= 0.5) add({ name: '…', node: null, kind: 'more', row, x: thinX, w: thinW, value: thinV, count: thinN });
        thinX = -1; thinW = thinN = thinV = 0;
      };
      const ch = n.children;
      for (let i = 0; i < ch.length; i++) {
        const c = ch[i], cw = c.size * scale;
        if (cw < 1) {
          if (thinX < 0) thinX = cx;
          thinW += cw; thinN++; thinV += c.size;
        } else {
          flush();
          place(c, cx, cw);
        }
        cx += cw;
      }
      flush();
    };
    place(zoom, 0, W);
    for (const r of rects) r.y = (this.up ? maxRow - r.row : r.row) * ROW;
    this.rects = rects; this.rows = rows; this.maxRow = maxRow;
    this.markMatches();
  }

  // Sets r.match on the drawn frames for the search regexp (names tested once each).
  markMatches() {
    const re = this.re;
    if (!re) { for (const r of this.rects) r.match = false; return; }
    const hit = this.matchesOf(re);
    for (const r of this.rects) r.match = r.node ? hit[r.node.nid] === 1 : false;
  }

  // Per name id: 1 when re matches the name (each name tested once per regexp).
  matchesOf(re) {
    if (this.matchCache && this.matchCache.re === re) return this.matchCache.hit;
    const hit = new Uint8Array(this.names.length);
    for (let i = 0; i < this.names.length; i++) { re.lastIndex = 0; hit[i] = re.test(this.names[i]) ? 1 : 0; }
    this.matchCache = { re, hit };
    return hit;
  }

  // The search: re (a RegExp or null). Returns the outermost matching frames'
  // value over the whole tree ({sum, base, new, frames}).
  search(re) {
    this.re = re;
    this.markMatches();
    this.paint();
    if (!re || !this.root) return null;
    const hit = this.matchesOf(re);
    let sum = 0, sa = 0, sb = 0, frames = 0;
    const stack = [this.root];
    while (stack.length) {
      const n = stack.pop();
      if (n !== this.root && hit[n.nid] === 1) { sum += n.value; sa += n.base || 0; sb += n.new || 0; frames++; continue; }
      const ch = n.children;
      for (let i = 0; i < ch.length; i++) stack.push(ch[i]);
    }
    return { sum, base: sa, new: sb, frames };
  }

  paint() {
    const c = this.canvas, ctx = this.ctx, W = this.width;
    const dpr = window.devicePixelRatio || 1;
    const H = (this.maxRow + 1) * ROW + 2;
    if (c.width !== Math.round(W * dpr) || c.height !== Math.round(H * dpr)) {
      c.width = Math.round(W * dpr); c.height = Math.round(H * dpr);
      c.style.width = W + 'px'; c.style.height = H + 'px';
    }
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    const font = getComputedStyle(this.box).font || '12px monospace';
    if (font !== this.font) { this.font = font; ctx.font = font; this.charW = ctx.measureText('MMMMMMMMMM').width / 10 || 7; }
    ctx.font = this.font;
    ctx.textBaseline = 'middle';
    const searching = !!this.re;
    for (const r of this.rects) {
      const n = r.node;
      r.color = r.kind === 'more' ? '#c7cbd1' : this.diff ? diffColor(n, this.cb) : frameColor(n.name);
      ctx.globalAlpha = (searching && !r.match) ? 0.3 : r.kind === 'ancestor' ? 0.55 : 1;
      ctx.fillStyle = r.color;
      const w = r.w >= 3 ? r.w - 1 : r.w; // the gap comes out of the frame, not its neighbour
      ctx.fillRect(r.x, r.y, w, ROW - 1);
      if (r === this.hover && r.kind !== 'more') { ctx.fillStyle = 'rgba(0,0,0,.12)'; ctx.fillRect(r.x, r.y, w, ROW - 1); }
      if (r.w >= TEXT_MIN && r.kind !== 'more') {
        const name = r.name === 'root' ? 'all' : r.name, fit = Math.floor((r.w - 6) / this.charW);
        if (fit >= 2) {
          ctx.fillStyle = '#111827';
          ctx.fillText(name.length <= fit ? name : name.slice(0, fit - 1) + '…', r.x + 3, r.y + (ROW - 1) / 2 + 0.5);
        }
      }
    }
    ctx.globalAlpha = 1;
    if (searching) {
      ctx.strokeStyle = '#7c3aed'; ctx.lineWidth = 1;
      for (const r of this.rects) if (r.match && r.w >= 2) ctx.strokeRect(r.x + 0.5, r.y + 0.5, Math.max(0, (r.w >= 3 ? r.w - 1 : r.w) - 1), ROW - 2);
    }
    const cur = this.cur && this.rects.find((r) => r.node === this.cur);
    if (cur) { ctx.strokeStyle = getComputedStyle(this.box).getPropertyValue('--kbd').trim() || '#111827'; ctx.lineWidth = 2; ctx.strokeRect(cur.x + 1, cur.y + 1, Math.max(0, cur.w - 2), ROW - 3); }
    if (this.onPainted) this.onPainted(ctx, this);
  }

  // The packages of the frames drawn, widest first: [{pkg, color, w (px)}]
  // (at most max of them) — the colour legend.
  packages(max) {
    const by = new Map();
    for (const r of this.rects) {
      if (!r.node || r.name === 'root' || r.kind === 'ancestor') continue;
      const pkg = packageOf(r.name);
      const e = by.get(pkg) || { pkg, color: frameColor(r.name), w: 0 };
      e.w += r.w;
      by.set(pkg, e);
    }
    return [...by.values()].sort((a, b) => b.w - a.w).slice(0, max);
  }

  // The rectangle at (x, y), CSS px relative to the canvas, or null.
  hitAt(x, y) {
    if (y < 0 || x < 0) return null;
    let row = Math.floor(y / ROW);
    if (this.up) row = this.maxRow - row;
    const rs = this.rows[row];
    if (!rs || (y % ROW) >= ROW - 1) return null;
    let lo = 0, hi = rs.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1, r = rs[mid];
      if (x < r.x) hi = mid - 1;
      else if (x >= r.x + r.w) lo = mid + 1;
      else return r;
    }
    return null;
  }

  // The rectangle under a mouse event, or null.
  hit(e) {
    const b = this.canvas.getBoundingClientRect();
    return this.hitAt(e.clientX - b.left, e.clientY - b.top);
  }

  setHover(r) { if (r !== this.hover) { this.hover = r; this.paint(); } }

  // The drawn rectangle of node n, or null.
  rectOf(n) { return this.rects.find((r) => r.node === n) || null; }
}
