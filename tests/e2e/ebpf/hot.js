// The Node target of tests/e2e/ebpf_agent.test.mjs, run with
// --perf-basic-prof (V8 writes /tmp/perf-PID.map): spins in profdJsHot.
'use strict';
let sink = 0;
function profdJsHot(n) {
  let s = 0;
  for (let i = 0; i < n; i++) s += (i * 7) % 13;
  return s;
}
function profdJsCaller() {
  sink += profdJsHot(5e7);
}
setInterval(() => {}, 1 << 30);
for (;;) profdJsCaller();
