/*
 * profd web UI — the timeline's chart: uPlot (vendor/uplot, v1.6.32 from npm,
 * MIT; loaded by index.html as window.uPlot) draws the axes, grid and the
 * series on a canvas; an SVG overlay of the same size carries what the page
 * draws over it, layer by layer (issue 15).
 *
 * Modes (chart= in the URL):
 *   lines    one line per series through its stored profiles (a point each
 *            while there are at most 3,000 points)
 *   stacked  the series stacked: the window cut into buckets (at least the
 *            series' usual interval between profiles), each series' mean in a
 *            bucket, each band drawn on the ones below it; the top edge is
 *            the sum
 *   sum      one line: the sum over the series, bucket by bucket
 *
 * Layers (the extension point for what is drawn over the timeline: the
 * merge/compare selections, the brushes, event markers): addLayer(name, fn)
 * registers fn(ctx) → an SVG fragment (string), called at each draw in the
 * order registered, inside <g class="layer-NAME">; ctx has x(ms) → px,
 * y(value) → px, plot {l, r, t, b} (px in the box), from, to (ms), W, H.
 * redrawLayer(name) repaints one layer alone (e.g. when markers arrive).
 */

// #rrggbb mixed 55 % with white, opaque
function tint(hex) {
  const v = parseInt(hex.slice(1), 16), mix = (c) => Math.round(c + (255 - c) * 0.55);
  return 'rgb(' + mix(v >> 16) + ',' + mix((v >> 8) & 255) + ',' + mix(v & 255) + ')';
}

// buckets of a stacked or summed chart: [from, to) ms each
function buckets(series, from, to) {
  const gaps = [];
  for (const s of series) for (let j = 1; j < s.ts.length; j++) gaps.push(s.ts[j] - s.ts[j - 1]);
  gaps.sort((a, b) => a - b);
  const usual = gaps.length ? gaps[gaps.length >> 1] : (to - from) / 60;
  const step = Math.max(usual, (to - from) / 400, 1000);
  const out = [];
  for (let t = from; t < to; t += step) out.push(t);
  return { starts: out, step };
}

// Per bucket: each series' mean over its points in the bucket (null: none).
export function bucketMeans(series, from, to) {
  const { starts, step } = buckets(series, from, to);
  const means = series.map((s) => {
    const sum = new Float64Array(starts.length), n = new Uint32Array(starts.length);
    s.ts.forEach((ts, j) => {
      const b = Math.floor((ts - from) / step);
      if (b >= 0 && b < starts.length) { sum[b] += s.vs[j]; n[b]++; }
    });
    return Array.from(sum, (v, b) => (n[b] ? v / n[b] : null));
  });
  return { starts, step, means };
}

export class TimelineChart {
  constructor(box) {
    this.box = box;
    this.u = null;
    this.layers = [];
    this.svg = null;
    box.timeline = this; // the model, for tools and tests
  }

  addLayer(name, fn) { this.layers.push({ name, fn }); }

  // m: {from, to (ms), W, H, unit, mode ('lines'|'stacked'|'sum'),
  //     series: [{color, label, ts: [ms], vs: [value]}] (the ones shown),
  //     yTicks(max) → {ticks, fmt}, xTicks(from, to) → {ticks, step}, xFmt(ms, step),
  //     empty: text when there is nothing to draw}
  // Returns {x, y, inv, plot, points: [{px, py, si, j}]} (points: lines mode only).
  draw(m) {
    const U = window.uPlot;
    if (this.u) { this.u.destroy(); this.u = null; }
    this.box.textContent = '';
    this.mode = m.mode;
    const xs = new Set();
    let data, max = 0, series = m.series;
    const uSeries = [{}];
    if (m.mode === 'lines' || !series.length) {
      for (const s of series) for (const t of s.ts) xs.add(t);
      const xv = [...xs].sort((a, b) => a - b);
      const at = new Map(xv.map((t, i) => [t, i]));
      data = [xv];
      for (const s of series) {
        const ys = new Array(xv.length).fill(null);
        s.ts.forEach((t, j) => { ys[at.get(t)] = s.vs[j]; if (s.vs[j] > max) max = s.vs[j]; });
        data.push(ys);
      }
      const npts = series.reduce((k, s) => k + s.ts.length, 0);
      series.forEach((s) => uSeries.push({
        label: s.label, stroke: s.color, width: 1.5, spanGaps: true,
        points: { show: npts <= 3000, size: 6.5, fill: s.color, stroke: s.color, width: 0 },
      }));
    } else {
      const bm = bucketMeans(series, m.from, m.to);
      const xv = bm.starts.map((t) => t + bm.step / 2);
      this.buckets = bm;
      if (m.mode === 'sum') {
        const tot = xv.map((_, b) => { let v = null; for (const mm of bm.means) if (mm[b] !== null) v = (v || 0) + mm[b]; return v; });
        for (const v of tot) if (v > max) max = v;
        data = [xv, tot];
        uSeries.push({ label: 'sum', stroke: '#2563eb', width: 2, spanGaps: true, fill: 'rgba(37,99,235,.12)', points: { show: false } });
        this.stack = [tot];
      } else {
        // cumulative bands: series i drawn from the top of i-1; a bucket where
        // no series has a profile stays empty
        const cum = [];
        bm.means.forEach((mm, i) => {
          const below = i ? cum[i - 1] : null;
          cum.push(mm.map((v, b) => {
            const any = bm.means.some((q) => q[b] !== null);
            if (!any) return null;
            return (below ? below[b] || 0 : 0) + (v || 0);
          }));
        });
        for (const v of cum.length ? cum[cum.length - 1] : []) if (v > max) max = v;
        // uPlot paints the series in order: the top band first, so each lower band covers it
        data = [xv];
        for (let i = cum.length - 1; i >= 0; i--) {
          data.push(cum[i]);
          // an opaque tint: each band fills down to 0 and the lower ones paint over it
          uSeries.push({ label: series[i].label, stroke: series[i].color, width: 1, fill: tint(series[i].color), spanGaps: false, points: { show: false } });
        }
        this.stack = cum;
      }
    }
    const vt = m.yTicks(max || 1);
    // the text written on the axes (for tools and tests; uPlot writes the same
    // strings from the same ticks when it paints, which may be a frame later)
    const xt = m.xTicks(m.from, m.to);
    this.axisLabels = { x: xt.ticks.map((t) => m.xFmt(t, xt.step)), y: vt.ticks.map((v) => vt.fmt(v)) };
    const ymax = vt.ticks[vt.ticks.length - 1] || 1;
    const css = getComputedStyle(this.box);
    const fg = css.getPropertyValue('--muted').trim() || '#6b7280', grid = css.getPropertyValue('--grid').trim() || '#e5e7eb';
    const axisFont = '11px ' + (css.getPropertyValue('--sans').trim() || 'sans-serif');
    const opts = {
      width: m.W, height: m.H, ms: 1, legend: { show: false }, cursor: { show: false }, select: { show: false },
      padding: [10, 16, 0, 0],
      scales: { x: { time: false, range: () => [m.from, m.to] }, y: { range: () => [0, ymax] } },
      axes: [
        { stroke: fg, font: axisFont, grid: { show: false }, ticks: { show: false }, size: 26,
          splits: () => m.xTicks(m.from, m.to).ticks,
          values: (u, sp) => { const st = m.xTicks(m.from, m.to).step; return sp.map((t) => m.xFmt(t, st)); } },
        { stroke: fg, font: axisFont, grid: { stroke: grid, width: 1 }, ticks: { show: false }, size: 64,
          splits: () => vt.ticks, values: (u, sp) => sp.map((v) => vt.fmt(v)) },
      ],
      series: uSeries,
    };
    this.u = new U(opts, data, this.box);
    this.data = data;
    // the plotting area in the box's CSS px (uPlot's bbox is in canvas px,
    // known at once; its overlay div is sized only when it commits)
    const pr = window.uPlot.pxRatio || window.devicePixelRatio || 1, bbox = this.u.bbox;
    const ol = this.u.root.offsetLeft + bbox.left / pr, ot = this.u.root.offsetTop + bbox.top / pr;
    const pw = bbox.width / pr, ph = bbox.height / pr;
    const x = (t) => ol + ((t - m.from) / (m.to - m.from)) * pw;
    const y = (v) => ot + ph - (v / ymax) * ph;
    const inv = (px) => m.from + ((px - ol) / pw) * (m.to - m.from);
    const plot = { l: ol, r: ol + pw, t: ot, b: ot + ph };
    this.ctx = { x, y, inv, plot, from: m.from, to: m.to, W: m.W, H: m.H };
    // the overlay: one SVG over the whole box, in the box's pixels
    const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    svg.setAttribute('viewBox', '0 0 ' + m.W + ' ' + m.H);
    svg.setAttribute('width', m.W); svg.setAttribute('height', m.H);
    svg.setAttribute('class', 'tl-overlay');
    svg.setAttribute('aria-hidden', 'true');
    this.box.appendChild(svg);
    this.svg = svg;
    let html = '';
    for (const l of this.layers) html += '<g class="layer-' + l.name + '">' + (l.fn(this.ctx) || '') + '</g>';
    if (m.empty) html += '<text class="empty" x="' + (m.W / 2) + '" y="' + (m.H / 2) + '" text-anchor="middle">' + m.empty + '</text>';
    svg.innerHTML = html;
    const points = [];
    if (m.mode === 'lines') series.forEach((s, si) => s.ts.forEach((t, j) => points.push({ px: x(t), py: y(s.vs[j]), si, j })));
    this.points = points;
    this.ymax = ymax;
    return { x, y, inv, plot, points };
  }

  redrawLayer(name) {
    const l = this.layers.find((q) => q.name === name);
    const g = this.svg && this.svg.querySelector('g.layer-' + name);
    if (l && g) g.innerHTML = l.fn(this.ctx) || '';
  }
}
