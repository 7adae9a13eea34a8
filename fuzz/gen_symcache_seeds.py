#!/usr/bin/env python3
# Writes the seed corpus of fuzz_symcache (fuzz/corpus/symcache): results
# cache files (docs/format/symbol_cache.md) for the build ID the target
# expects. Usage: fuzz/gen_symcache_seeds.py fuzz/corpus/symcache
import os, struct, sys

BID = b"0123456789abcdef0123456789abcdef01234567"

def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF

def uv(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)

def s(x):
    return uv(len(x)) + x

def header(version=1, kind=1, path=b"/var/lib/profd/debuginfo/x/debuginfo"):
    h = b"PDSC" + bytes([version, kind]) + b"\0\0"
    h += struct.pack("<QqQQ", 581504, 1764300000123456789, 2049, 131)
    h += struct.pack("<H", len(path)) + path + bytes([len(BID)]) + BID
    return h + struct.pack("<I", crc32c(h))

def record(off, lines):
    p = uv(off) + uv(len(lines))
    for name, fn, line in lines:
        p += s(name) + s(name) + s(fn) + uv(line)
    return struct.pack("<II", len(p), crc32c(p)) + p

good = header() + record(0x1130, [(b"pd_test_inline_inner", b"/src/t.c", 47),
                                  (b"pd_test_inline_outer", b"/src/t.c", 55)]) \
    + record(0x1200, [(b"main", b"", 0)]) \
    + record(0x1130, [(b"later_wins", b"/src/u.c", 3)])
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
seeds = {
    "good": good,
    "header_only": header(),
    "torn_tail": good[:-7],
    "bad_crc": good[:len(header()) + 9] + bytes([good[len(header()) + 9] ^ 0x40]) + good[len(header()) + 10:],
    "wrong_version": header(version=2) + record(1, [(b"f", b"", 1)]),
    "mapped_file": header(kind=3, path=b"/usr/bin/prog") + record(0x40, [(b"hot_spin", b"/h.c", 9)]),
}
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
