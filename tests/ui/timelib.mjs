// Helpers for the timeline (src/ui/assets/chart.js: uPlot on a canvas under
// an SVG overlay): #timeline's .timeline is the TimelineChart; .profiles are
// the stored profiles drawn as points ({ts, px, py, v, series}, px/py in the
// box's CSS pixels, series by series in time order); .axisLabels the text
// uPlot wrote on its axes ({x: [...], y: [...]}).

export const profiles = (page) => page.evaluate(() => {
  const t = document.getElementById('timeline').timeline;
  return t && t.profiles ? t.profiles : [];
});
export const pointCount = async (page) => (await profiles(page)).length;
// Waits for points (n of them, when given).
export const waitPoints = (page, n = null) => page.waitForFunction((k) => {
  const t = document.getElementById('timeline').timeline;
  return !!t && !!t.profiles && (k === null ? t.profiles.length > 0 : t.profiles.length === k);
}, n);
export const axisLabels = (page) => page.evaluate(() => document.getElementById('timeline').timeline.axisLabels);

// Viewport centre of the point at time ts (the first one, or the index-th of
// all points when ts is {index}).
export async function pointXY(page, ts) {
  const b = await page.evaluate((want) => {
    const box = document.getElementById('timeline'), t = box.timeline;
    const p = typeof want === 'object' ? t.profiles[want.index < 0 ? t.profiles.length + want.index : want.index] : t.profiles.find((q) => q.ts === want);
    if (!p) return null;
    box.scrollIntoView({ block: 'nearest' });
    const r = box.getBoundingClientRect();
    return { x: r.left + box.clientLeft + p.px, y: r.top + box.clientTop + p.py };
  }, ts);
  if (!b) throw new Error(`no timeline point ${JSON.stringify(ts)}`);
  return b;
}
export async function clickPoint(page, ts, opts = {}) {
  const p = await pointXY(page, ts);
  await page.mouse.click(p.x, p.y, opts);
}
