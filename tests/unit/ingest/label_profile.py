#!/usr/bin/env python3
# tests/unit/ingest/label_profile.py N_LABELS VALUE_BYTES OUT — writes a
# gzip pprof with one sample (samples/count = 1, one frame "main") carrying
# N_LABELS string labels k0..kN-1, all with the same value of VALUE_BYTES
# 'v's: the "100,000 labels" and "10 MB label value" inputs of the push
# tests, encoded by hand (profile.proto field numbers) so that no profd code
# is involved in making them.
import gzip
import sys


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def ld(num, payload):  # length-delimited field
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def vi(num, v):  # varint field
    return varint(num << 3) + varint(v)


n, vlen, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
strs = ["", "samples", "count", "main", "v" * vlen] + ["k%d" % i for i in range(n)]
p = bytearray(ld(1, vi(1, 1) + vi(2, 2)))  # sample_type samples/count
s = bytearray(ld(1, varint(1)) + ld(2, varint(1)))  # location_id [1], value [1]
for i in range(n):
    s += ld(3, vi(1, 5 + i) + vi(2, 4))  # label {key, str}
p += ld(2, bytes(s))
p += ld(4, vi(1, 1) + ld(4, vi(1, 1)))  # location 1 -> function 1
p += ld(5, vi(1, 1) + vi(2, 3))  # function 1 "main"
for x in strs:
    p += ld(6, x.encode())
with open(out, "wb") as f:
    f.write(gzip.compress(bytes(p)))
