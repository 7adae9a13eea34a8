// Event markers on the timeline (issue 18): when app.js has drawn the
// timeline it sends 'pd:timeline' on #timeline with the window (from, to),
// the x scale, the plot area and the labels of the series drawn. The
// target_down events of /api/v1/events in that window whose target labels
// all appear in one of the series are drawn as a vertical marker at the time
// the target went down, and a dot at its last stored profile, both titled
// with the event's message ("last profile 0.9 s before api-7 went down").
(function () {
  'use strict';
  const box = document.getElementById('timeline');
  if (!box) return;
  const NS = 'http://www.w3.org/2000/svg';
  let seq = 0;

  function el(name, attrs, text) {
    const e = document.createElementNS(NS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text) e.textContent = text;
    return e;
  }

  box.addEventListener('pd:timeline', async (ev) => {
    const d = ev.detail;
    const my = ++seq;
    let events;
    try {
      const r = await fetch('/api/v1/events?kind=target_down&start=' + (d.from / 1000) + '&end=' + (d.to / 1000));
      if (!r.ok) return;
      events = (await r.json()).data || [];
    } catch (e) {
      return;
    }
    const svg = box.querySelector('svg');
    if (my !== seq || !svg) return; // drawn again meanwhile
    const shown = events.filter((e) => d.series.some((ls) =>
      Object.entries(e.labels).every(([k, v]) => ls[k] === v)));
    if (!shown.length) return;
    const g = el('g', { class: 'event-markers' });
    for (const e of shown) {
      const x = d.x(e.time);
      if (x < d.plot.l || x > d.plot.r) continue;
      const m = el('g', { class: 'event-marker', 'data-kind': e.kind, 'data-time': e.time });
      m.appendChild(el('title', {}, e.message));
      m.appendChild(el('line', { x1: x, x2: x, y1: d.plot.t, y2: d.plot.b, stroke: '#c0392b', 'stroke-width': 2, 'stroke-dasharray': '4 3' }));
      m.appendChild(el('text', { x: x - 4, y: d.plot.t + 12, 'text-anchor': 'end', fill: '#c0392b', 'font-size': 11 }, '✕ ' + e.message));
      if (e.lastProfile) {
        const lx = d.x(e.lastProfile);
        m.appendChild(el('circle', { class: 'event-last', cx: lx, cy: d.plot.b - 4, r: 4, fill: '#c0392b' }));
      }
      g.appendChild(m);
    }
    svg.appendChild(g);
  });
})();
