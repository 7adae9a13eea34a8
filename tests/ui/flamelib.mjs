// Helpers for the canvas flame graph (src/ui/assets/flame.js): its model is
// #flamegraph's .flame (a FlameCanvas); .rects are what was painted, with
// {name, node, kind, x, y, w, value, match, color} in CSS px of the canvas.
// A "frame" here is a rect whose node is a tree node (not "…").

// Waits until a frame (named `name`, when given) is painted.
export async function waitFrame(page, name = null) {
  await page.waitForFunction((nm) => {
    const f = document.getElementById('flamegraph').flame;
    return !!f && !document.getElementById('flamegraph').hidden && f.rects.some((r) => r.node && (nm === null || r.name === nm));
  }, name);
}

// The first painted frame named `name` (layout order: ancestors, then depth
// first; opts.notAncestor: not one of the zoom's ancestors; opts.widest: the
// widest of them), scrolled into view; its box in viewport px: {x, y, w, h}.
export async function frameBox(page, name, opts = {}) {
  const b = await page.evaluate(([nm, notAncestor, widest]) => {
    const box = document.getElementById('flamegraph'), f = box.flame;
    const all = f.rects.filter((q) => q.node && q.name === nm && (!notAncestor || q.kind !== 'ancestor'));
    const r = widest ? all.reduce((a, q) => (!a || q.w > a.w ? q : a), null) : all[0];
    if (!r) return null;
    const c = f.canvas.getBoundingClientRect();
    window.scrollTo(0, Math.max(0, c.top + window.scrollY + r.y - window.innerHeight / 2));
    const c2 = f.canvas.getBoundingClientRect();
    return { x: c2.left + r.x, y: c2.top + r.y, w: r.w, h: 17 };
  }, [name, !!opts.notAncestor, !!opts.widest]);
  if (!b) throw new Error(`no frame "${name}" is painted`);
  return b;
}

// Clicks (opts: {button: 'right'}) or hovers a frame at its middle.
export async function clickFrame(page, name, opts = {}) {
  const b = await frameBox(page, name, opts);
  await page.mouse.click(b.x + Math.min(b.w / 2, 40), b.y + b.h / 2, { button: opts.button || 'left' });
}
export async function hoverFrame(page, name) {
  const b = await frameBox(page, name);
  await page.mouse.move(b.x + Math.min(b.w / 2, 40), b.y + b.h / 2);
}

// What the model says: the zoomed frame, the keyboard's frame, the frames
// the search matched, the frames' names (in layout order), the model itself.
export const zoomName = (page) => page.evaluate(() => document.getElementById('flamegraph').flame.zoom.name);
export const kbdName = (page) => page.evaluate(() => { const c = document.getElementById('flamegraph').flame.cur; return c ? c.name : null; });
export const matchCount = (page) => page.evaluate(() => document.getElementById('flamegraph').flame.rects.filter((r) => r.match).length);
export const waitMatches = (page) => page.waitForFunction(() => {
  const f = document.getElementById('flamegraph').flame;
  return f && f.rects.some((r) => r.match);
});
export const frameNames = (page) => page.evaluate(() => document.getElementById('flamegraph').flame.rects.filter((r) => r.node).map((r) => r.name));

// The colour painted at the middle of the first frame of the given kind
// predicate's choice, read back from the canvas pixels: [r, g, b].
export async function pixelOf(page, name) {
  return page.evaluate((nm) => {
    const f = document.getElementById('flamegraph').flame;
    const r = f.rects.find((q) => q.node && q.name === nm && q.w >= 3);
    const dpr = window.devicePixelRatio || 1;
    const d = f.ctx.getImageData(Math.floor((r.x + 1) * dpr), Math.floor((r.y + 2) * dpr), 1, 1).data;
    return [d[0], d[1], d[2]];
  }, name);
}

// The box (viewport px, scrolled into view) and the painted colour of the
// i-th rect of the model.
export async function rectBox(page, i) {
  return page.evaluate((k) => {
    const f = document.getElementById('flamegraph').flame, r = f.rects[k];
    const c = f.canvas.getBoundingClientRect();
    window.scrollTo(0, Math.max(0, c.top + window.scrollY + r.y - window.innerHeight / 2));
    const c2 = f.canvas.getBoundingClientRect();
    return { x: c2.left + r.x, y: c2.top + r.y, w: r.w, h: 17 };
  }, i);
}
export async function pixelAt(page, i) {
  return page.evaluate((k) => {
    const f = document.getElementById('flamegraph').flame, r = f.rects[k];
    const dpr = window.devicePixelRatio || 1;
    const d = f.ctx.getImageData(Math.floor((r.x + 1) * dpr), Math.floor((r.y + 2) * dpr), 1, 1).data;
    return [d[0], d[1], d[2]];
  }, i);
}
