#!/usr/bin/env python3
"""Normalizes `go tool pprof -raw` output for comparison (bench/merge_pushdown):
each sample becomes one line "values | frames | labels", its location ids
replaced by what they name (address, function, file:line of every inlined
line; the mapping id dropped); equal lines summed; lines sorted. Header
lines (period, time, duration) are left out: ids and order carry no meaning."""
import sys, re, collections

text = sys.stdin.read().split('\n')
sec = None
locs = {}
cur = None
samples = []
for ln in text:
    if ln.startswith('Samples:'):
        sec = 'S'; continue
    if ln.startswith('Locations'):
        sec = 'L'; continue
    if ln.startswith('Mappings'):
        sec = 'M'; continue
    if sec == 'S':
        m = re.match(r'^\s*([-\d\s]+):\s*([\d\s]*)$', ln)
        if m and ln.strip() and not ln.strip().endswith(']'):
            samples.append([m.group(1).split(), m.group(2).split(), []])
        elif ln.strip() and samples and re.match(r'^\s+\S+:\[', ln):
            samples[-1][2].append(ln.strip())
    elif sec == 'L':
        m = re.match(r'^\s*(\d+): (\S+) M=\d+ (.*)$', ln)
        if m:
            cur = m.group(1)
            locs[cur] = [m.group(2), m.group(3)]
        elif ln.strip() and cur:
            locs[cur].append(ln.strip())
agg = collections.OrderedDict()
for vals, ids, labs in samples:
    key = ' ; '.join(' '.join(locs.get(i, ['?' + i])) for i in ids) + ' | ' + ' '.join(sorted(labs))
    if key in agg:
        agg[key] = [a + int(b) for a, b in zip(agg[key], vals)]
    else:
        agg[key] = [int(v) for v in vals]
out = sorted(' '.join(str(v) for v in vals) + ' | ' + k for k, vals in agg.items() if any(vals))
sys.stdout.write('\n'.join(out) + '\n')
