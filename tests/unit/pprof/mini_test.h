/*
 * tests/unit/pprof/mini_test.h — a small profile written by hand in
 * protobuf bytes, with switches for the wire-format variants under test.
 *
 * strings: 0 "", 1 samples, 2 count, 3 cpu, 4 nanoseconds, 5 main,
 *   6 main.go, 7 foo, 8 /bin/x, 9 key, 10 val, 11 a comment, 12 bytes
 * sample_type samples/count, cpu/nanoseconds; period_type cpu/nanoseconds,
 * period 10, time 1234, duration 5678, comment [11], default_sample_type 3
 * mapping 1 [0x1000, 0x9000) /bin/x
 * function 1 main (main.go, start 3), function 2 foo
 * location 1 @0x1010 main:10; location 2 @0x2020 foo:20 inlined in main:11
 * sample [2 1] values [1 100] labels key=val, bytes=64 (num, unit bytes)
 * sample [1]   values [2 200]
 */
#ifndef PD_TESTS_MINI_TEST_H
#define PD_TESTS_MINI_TEST_H

#include "pb_test.h"

typedef struct mini_opts {
    int unpacked;       /* location_id/value/comment as one varint field each */
    int unknown_fields; /* sprinkle unknown fields of every wire type */
    int bad_loc;        /* sample 1 refers to location id 99 */
    int n_labels;       /* extra labels on sample 0 (beyond the two) */
    int extra_mapping;  /* a second mapping (id 2) */
} mini_opts;

static inline void mini_unknown(pd_buf *b)
{
    pb_u(b, 100, 7);                  /* varint */
    pb_tag(b, 101, 1);                /* fixed64 */
    pd_buf_append(b, "12345678", 8);
    pb_tag(b, 102, 5);                /* fixed32 */
    pd_buf_append(b, "1234", 4);
    pb_str(b, 103, "unknown bytes"); /* length-delimited */
}

static inline void mini_build(pd_buf *out, const mini_opts *o)
{
    static const char *strs[] = {"", "samples", "count", "cpu", "nanoseconds", "main", "main.go",
                                 "foo", "/bin/x", "key", "val", "a comment", "bytes"};
    pd_buf m, s;
    pd_buf_init(&m, 0);
    pd_buf_init(&s, 0);

    pb_u(&m, 1, 1), pb_u(&m, 2, 2);
    if (o->unknown_fields)
        mini_unknown(&m);
    pb_msg(out, 1, &m);
    pb_u(&m, 1, 3), pb_u(&m, 2, 4);
    pb_msg(out, 1, &m);

    /* samples */
    uint64_t loc0[] = {2, 1}, val0[] = {1, 100}, loc1[] = {o->bad_loc ? 99 : 1}, val1[] = {2, 200};
    const uint64_t *locs[] = {loc0, loc1}, *vals[] = {val0, val1};
    size_t nlocs[] = {2, 1};
    for (int i = 0; i < 2; i++) {
        if (o->unpacked) {
            for (size_t j = 0; j < nlocs[i]; j++)
                pb_u(&m, 1, locs[i][j]);
            for (size_t j = 0; j < 2; j++)
                pb_u(&m, 2, vals[i][j]);
        } else {
            pb_packed(&m, 1, locs[i], nlocs[i]);
            pb_packed(&m, 2, vals[i], 2);
        }
        if (o->unknown_fields)
            mini_unknown(&m);
        if (i == 0) {
            pb_u(&s, 1, 9), pb_u(&s, 2, 10);
            if (o->unknown_fields)
                mini_unknown(&s);
            pb_msg(&m, 3, &s);
            pb_u(&s, 1, 12), pb_u(&s, 3, 64), pb_u(&s, 4, 12);
            pb_msg(&m, 3, &s);
            for (int k = 0; k < o->n_labels; k++) {
                pb_u(&s, 1, 9), pb_u(&s, 3, (uint64_t)k);
                pb_msg(&m, 3, &s);
            }
        }
        pb_msg(out, 2, &m);
    }
    if (o->unknown_fields)
        mini_unknown(out);

    /* mappings */
    pb_u(&m, 1, 1), pb_u(&m, 2, 0x1000), pb_u(&m, 3, 0x9000), pb_u(&m, 5, 8), pb_u(&m, 7, 1);
    if (o->unknown_fields)
        mini_unknown(&m);
    pb_msg(out, 3, &m);
    if (o->extra_mapping) {
        pb_u(&m, 1, 2), pb_u(&m, 2, 0x10000), pb_u(&m, 3, 0x20000);
        pb_msg(out, 3, &m);
    }

    /* locations */
    pb_u(&m, 1, 1), pb_u(&m, 2, 1), pb_u(&m, 3, 0x1010);
    pb_u(&s, 1, 1), pb_u(&s, 2, 10);
    if (o->unknown_fields)
        mini_unknown(&s);
    pb_msg(&m, 4, &s);
    pb_msg(out, 4, &m);
    pb_u(&m, 1, 2), pb_u(&m, 2, 1), pb_u(&m, 3, 0x2020);
    pb_u(&s, 1, 2), pb_u(&s, 2, 20);
    pb_msg(&m, 4, &s);
    pb_u(&s, 1, 1), pb_u(&s, 2, 11);
    pb_msg(&m, 4, &s);
    if (o->unknown_fields)
        mini_unknown(&m);
    pb_msg(out, 4, &m);

    /* functions */
    pb_u(&m, 1, 1), pb_u(&m, 2, 5), pb_u(&m, 3, 5), pb_u(&m, 4, 6), pb_u(&m, 5, 3);
    if (o->unknown_fields)
        mini_unknown(&m);
    pb_msg(out, 5, &m);
    pb_u(&m, 1, 2), pb_u(&m, 2, 7), pb_u(&m, 4, 6);
    pb_msg(out, 5, &m);

    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        pb_str(out, 6, strs[i]);

    pb_u(out, 9, 1234);
    pb_u(out, 10, 5678);
    pb_u(&m, 1, 3), pb_u(&m, 2, 4);
    pb_msg(out, 11, &m);
    pb_u(out, 12, 10);
    if (o->unpacked) {
        pb_u(out, 13, 11);
    } else {
        uint64_t c[] = {11};
        pb_packed(out, 13, c, 1);
    }
    pb_u(out, 14, 3);
    if (o->unknown_fields)
        pb_str(out, 9, "time_nanos with the wrong wire type: skipped");
    pd_buf_release(&m);
    pd_buf_release(&s);
}

#endif
