// The real program profiled by node --cpu-prof in speedscope.test.mjs: a
// hot function (profdSpeedscopeBusy) and a cooler one, for DURATION_MS.
'use strict';
function profdSpeedscopeBusy(n) {
  let x = 0;
  for (let i = 0; i < n; i++) x += Math.sqrt(i) * Math.sin(i);
  return x;
}
function profdSpeedscopeCool(n) {
  let s = '';
  for (let i = 0; i < n; i++) s += i;
  return s.length;
}
const end = Date.now() + Number(process.env.DURATION_MS || 1500);
let t = 0;
while (Date.now() < end) {
  t += profdSpeedscopeBusy(200000);
  t += profdSpeedscopeCool(2000);
}
console.log(t > 0 ? 'done' : 'odd');
