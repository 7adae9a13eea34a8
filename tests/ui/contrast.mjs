// WCAG 2.1 contrast of every visible text of the page (1.4.3, AA: 4.5:1, or
// 3:1 for large text — 24 px, or 18.66 px bold): the text's colour (with its
// opacity) over the first opaque background behind it (translucent ones
// blended). Runs in the page; returns the failures [{text, fg, bg, ratio, need}].
export function contrastFailures() {
  const parse = (c) => { const m = c.match(/[\d.]+/g); return m ? m.map(Number) : [0, 0, 0, 0]; };
  const lum = ([r, g, b]) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const blend = (top, a, under) => top.map((v, i) => v * a + under[i] * (1 - a));
  const bgOf = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      const a = c.length > 3 ? c[3] : 1;
      if (a > 0) layers.push([c.slice(0, 3), a]);
      if (a >= 1) break;
    }
    let bg = [255, 255, 255];
    for (let i = layers.length - 1; i >= 0; i--) bg = blend(layers[i][0], layers[i][1], bg);
    return bg;
  };
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const seen = new Set();
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!n.textContent.trim() || !el || seen.has(el)) continue;
    seen.add(el);
    if (el.closest('[hidden], .sr-only, svg, option, script, style, [disabled]')) continue;
    const r = el.getBoundingClientRect();
    if (!r.width || !r.height) continue;
    const cs = getComputedStyle(el);
    if (cs.visibility === 'hidden' || cs.display === 'none') continue;
    let op = 1;
    for (let e = el; e; e = e.parentElement) op *= +getComputedStyle(e).opacity;
    if (op < 0.99) continue; // dimmed on purpose (loading, ancestors): not the resting state
    const c = parse(cs.color), bg = bgOf(el);
    const fg = blend(c.slice(0, 3), c.length > 3 ? c[3] : 1, bg);
    const L1 = lum(fg), L2 = lum(bg);
    const ratio = (Math.max(L1, L2) + 0.05) / (Math.min(L1, L2) + 0.05);
    const px = parseFloat(cs.fontSize), bold = +cs.fontWeight >= 700;
    const need = px >= 24 || (bold && px >= 18.66) ? 3 : 4.5;
    if (ratio < need) out.push({ text: n.textContent.trim().slice(0, 40), sel: el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className && typeof el.className === 'string' ? '.' + el.className.split(' ').join('.') : ''), fg: fg.map(Math.round).join(','), bg: bg.map(Math.round).join(','), ratio: +ratio.toFixed(2), need });
  }
  return out;
}
