/*
 * profd web UI — the view's state: what the URL holds (app.js readURL/writeURL
 * read and write it; every view reads it).
 */
export const state = {
  query: '', range: '1h', type: '', refresh: 0, series: '', t: 0,
  fromText: '', toText: '', // from=/to= of the URL ('' = the relative range)
  focus: '', ignore: '',    // pprof's -focus/-ignore regexps on the profile shown (the API's filters)
  flameUp: false,           // flame (root at the bottom) instead of icicle
  cb: false,                // colour-blind-safe diff palette (blue grew / orange shrank)
  utc: false,               // times shown (and typed in the picker) in UTC, not the browser's zone
  agg: '',                  // merges and diffs: 'sum' or 'avg' (the API's agg=); '' = auto: avg for a
                            // gauge type (inuse_*, goroutine), else sum (issue 12)
  raw: false,               // cumulative types (Go's allocs/block/mutex) as stored counters, not deltas (delta=false)
  view: '',                 // 'callgraph': the call graph tab instead of the flame graph
  chart: '',                // the timeline: '' one line per series, 'stacked' or 'sum' (chart.js)
  zoomPath: '',             // the zoomed frame: names from the root, joined by "\n"
  search: '',               // the flame graph search
  sel: null,          // {from, to} ms: the merged range
  cmp: false,         // compare mode
  a: null, b: null,   // {from, to} ms: compare's base (A) and new (B) selections
};

// What the views share besides the URL's state: the last query_range of the
// timeline ({from, to, series: [...]}) and the legend entries switched off.
// ui.sides: a comparison of two selectors (query_a/query_b): each side's
// query_range ({qa, qb, a: [...], b: [...]}), drawn as a line per side.
export const ui = { lastRange: null, hidden: new Set(), sides: null };
