/*
 * tests/unit/storage/test_chunks.c — chunks version 4 (chunks.c, tchunk.c,
 * docs/format/chunks.md) on real profiles:
 *   - round trip: every real profile of PD_TESTDATA/pprof, plus (when
 *     PD_TINY_SERIES names a directory of <type>/NNNNNN.pb.gz series, as
 *     bench/storage_size/collect.sh writes them; tests/unit/storage/
 *     tiny_series.sh collects them from the real Go demo, across a restart of
 *     it) every profile of those series, written to blocks with several group
 *     sizes, streamed (ascending) and buffered (an older profile arrives last),
 *     read back pd_profile_equal; the points (ts, totals) equal the
 *     originals'; pd__block_check passes. Series include a restart (counters
 *     drop) and sample-type changes (profiles of different types in one
 *     series);
 *   - old encodings: blocks whose chunks file is version 2 (written by the
 *     code before version 3; tests/unit/storage/data/chunks-v2) and version
 *     3 (before version 4; data/chunks-v3) read back equal to the testdata
 *     profiles they were written from;
 *   - value groups with derive (flag bits 2 and 3: the last listed sample's
 *     values and time_nanos come from the time chunk): equal round trip on
 *     the real series, smaller than without, refused without the time
 *     chunk's totals or with another number of types, every truncation and
 *     byte flip gives an error or a profile — never a crash (ASan);
 *   - time chunks of version 3: round trip of int64 extremes, sample-type set
 *     changes, 1..3 profiles; every truncation and byte flip: an error or a
 *     chunk, never a crash.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>
#include "../pd_test.h"

#include "storage/storage.h"
#include "storage/tsdb/block_int.h"
#include "storage/tsdb/chunks_int.h"

typedef struct tseries {
    char name[128]; /* __name__ label */
    pd_profile *p;  /* profiles in time order */
    int64_t *ts;
    size_t n;
} tseries;

static tseries *g_s;
static size_t g_ns;

static pd_profile load(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    pd_profile p;
    pd_err err;
    if (pd_profile_decode(&p, b, (size_t)n, NULL, &err))
        fail_msg("decode %s: %s", path, err.msg);
    free(b);
    return p;
}

static int cmpstr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.pb.gz files of dir (sorted by name) whose name starts with prefix. */
static size_t list(const char *dir, const char *prefix, char ***out)
{
    DIR *d = opendir(dir);
    if (!d)
        fail_msg("opendir %s", dir);
    char **v = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".pb.gz") || strncmp(e->d_name, prefix, strlen(prefix)))
            continue;
        v = realloc(v, (n + 1) * sizeof *v);
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        v[n] = malloc(len);
        snprintf(v[n], len, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    qsort(v, n, sizeof *v, cmpstr);
    *out = v;
    return n;
}

static tseries *new_series(const char *name)
{
    g_s = realloc(g_s, (g_ns + 1) * sizeof *g_s);
    tseries *s = &g_s[g_ns++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    return s;
}

/* Appends a copy of p (decoded again from its encoding) to s. */
static void push(tseries *s, const char *path)
{
    s->p = realloc(s->p, (s->n + 1) * sizeof *s->p);
    s->ts = realloc(s->ts, (s->n + 1) * sizeof *s->ts);
    s->p[s->n] = load(path);
    /* timestamps: time_nanos in ms, forced strictly ascending (as the bench) */
    int64_t ts = s->p[s->n].time_nanos ? s->p[s->n].time_nanos / 1000000 : 1700000000000;
    if (s->n && ts <= s->ts[s->n - 1])
        ts = s->ts[s->n - 1] + 1;
    s->ts[s->n++] = ts;
}

static void add_dir_series(const char *dir, const char *prefix, const char *name)
{
    char **f;
    size_t n = list(dir, prefix, &f);
    if (!n)
        fail_msg("no profiles %s/%s*", dir, prefix);
    tseries *s = new_series(name);
    for (size_t i = 0; i < n; i++) {
        push(s, f[i]);
        free(f[i]);
    }
    free(f);
}

static int setup(void **state)
{
    (void)state;
    char d[4096], d2[4096];
    snprintf(d, sizeof d, "%s/pprof/go-demo-series", PD_TESTDATA);
    add_dir_series(d, "heap", "heap");
    add_dir_series(d, "cpu", "cpu");
    /* a restart: the heap series again after its end (its counters drop) */
    {
        char **f;
        size_t n = list(d, "heap", &f);
        tseries *s = new_series("heap_restarted");
        for (size_t i = 0; i < n; i++)
            push(s, f[i]);
        for (size_t i = 0; i < n && i < 12; i++)
            push(s, f[i]);
        for (size_t i = 0; i < n; i++)
            free(f[i]);
        free(f);
    }
    /* sample-type changes: every single profile of go-demo-once and node, and
       the heap and cpu series interleaved, in one series */
    {
        tseries *s = new_series("mixed");
        snprintf(d2, sizeof d2, "%s/pprof/go-demo-once", PD_TESTDATA);
        char **f;
        size_t n = list(d2, "", &f);
        for (size_t i = 0; i < n; i++) {
            push(s, f[i]);
            free(f[i]);
        }
        free(f);
        snprintf(d2, sizeof d2, "%s/pprof/node", PD_TESTDATA);
        n = list(d2, "", &f);
        for (size_t i = 0; i < n; i++) {
            push(s, f[i]);
            free(f[i]);
        }
        free(f);
        char **h, **c;
        size_t nh = list(d, "heap", &h), nc = list(d, "cpu", &c);
        for (size_t i = 0; i < nh || i < nc; i++) {
            if (i < nh)
                push(s, h[i]);
            if (i < nc)
                push(s, c[i]);
        }
        for (size_t i = 0; i < nh; i++)
            free(h[i]);
        for (size_t i = 0; i < nc; i++)
            free(c[i]);
        free(h);
        free(c);
    }
    /* the collected tiny series (and the others collect.sh took), each type a
       series, and all of them interleaved in one more */
    const char *tiny = getenv("PD_TINY_SERIES");
    if (tiny && *tiny) {
        const char *types[] = {"mutex", "block",  "threadcreate", "goroutine",
                               "heap",  "allocs", "cpu"};
        size_t first = g_ns;
        for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
            snprintf(d2, sizeof d2, "%s/%s", tiny, types[k]);
            struct stat st;
            if (stat(d2, &st))
                continue;
            char name[64];
            snprintf(name, sizeof name, "live_%s", types[k]);
            add_dir_series(d2, "", name);
        }
        if (g_ns == first)
            fail_msg("PD_TINY_SERIES=%s holds no series", tiny);
        tseries *s = new_series("live_mixed");
        size_t last = g_ns - 1;
        for (size_t i = 0;; i++) {
            bool any = false;
            for (size_t k = first; k < last; k++)
                if (i < g_s[k].n) {
                    any = true;
                    pd_buf b;
                    pd_buf_init(&b, 0);
                    assert_int_equal(pd_profile_encode(&g_s[k].p[i], false, &b), 0);
                    s = &g_s[last];
                    s->p = realloc(s->p, (s->n + 1) * sizeof *s->p);
                    s->ts = realloc(s->ts, (s->n + 1) * sizeof *s->ts);
                    pd_err err;
                    PD_ASSERT_OK(
                        pd_profile_decode(&s->p[s->n], (uint8_t *)b.data, b.len, NULL, &err), &err);
                    s->ts[s->n] = s->n ? s->ts[s->n - 1] + 1 + (int64_t)(k - first) : 1790000000000;
                    s->n++;
                    pd_buf_release(&b);
                }
            if (!any)
                break;
        }
        size_t n = 0;
        for (size_t k = first; k <= last; k++)
            n += g_s[k].n;
        print_message("PD_TINY_SERIES: %zu profiles in %zu series\n", n, last - first + 1);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (size_t k = 0; k < g_ns; k++) {
        for (size_t i = 0; i < g_s[k].n; i++)
            pd_profile_release(&g_s[k].p[i]);
        free(g_s[k].p);
        free(g_s[k].ts);
    }
    free(g_s);
    return 0;
}

static char *mktmp(void)
{
    char *d = strdup("/tmp/pd_test_chunks_XXXXXX");
    assert_non_null(mkdtemp(d));
    return d;
}

static void rm_rf(const char *path)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    assert_int_equal(system(cmd), 0);
}

static void labels(const char *name, pd_labels *l)
{
    pd_err err;
    pd_labels_init(l);
    PD_ASSERT_OK(pd_labels_set(l, "__name__", name, &err), &err);
    PD_ASSERT_OK(pd_labels_set(l, "job", "demo", &err), &err);
    PD_ASSERT_OK(pd_labels_set(l, "instance", "127.0.0.1:6060", &err), &err);
}

static uint32_t find_series(pd_block *b, const char *name)
{
    pd_labels l;
    labels(name, &l);
    for (uint32_t i = 0; i < pd__block_n_series(b); i++)
        if (!pd_labels_cmp(pd__block_series_labels(b, i), &l)) {
            pd_labels_release(&l);
            return i;
        }
    fail_msg("series %s not in the block", name);
    return 0;
}

/* Every profile of s read back from b equals the original, and the points
 * (ts, totals; from the time chunk) equal the originals'. */
static void check_series(pd_block *b, const tseries *s)
{
    pd_err err;
    uint32_t id = find_series(b, s->name);
    for (size_t i = 0; i < s->n; i++) {
        pd_profile p;
        if (pd__block_read_profile(b, id, s->ts[i], &p, &err))
            fail_msg("read %s #%zu: %s", s->name, i, err.msg);
        if (!pd_profile_equal(&s->p[i], &p, &err))
            fail_msg("%s #%zu differs after a block round trip: %s", s->name, i, err.msg);
        pd_profile_release(&p);
    }
    pd_points pts;
    PD_ASSERT_OK(pd__block_read_points(b, id, INT64_MIN, INT64_MAX, &pts, &err), &err);
    assert_int_equal(pts.n, s->n);
    for (size_t i = 0; i < s->n; i++) {
        assert_int_equal(pts.v[i].ts_ms, s->ts[i]);
        assert_int_equal(pts.v[i].n_types, s->p[i].n_sample_type);
        int64_t *tot = calloc(s->p[i].n_sample_type + 1, sizeof *tot);
        pd_profile_totals(&s->p[i], tot);
        for (size_t t = 0; t < s->p[i].n_sample_type; t++)
            if (pts.v[i].totals[t] != tot[t])
                fail_msg("%s #%zu total %zu: %lld, want %lld", s->name, i, t,
                         (long long)pts.v[i].totals[t], (long long)tot[t]);
        free(tot);
    }
    pd_points_release(&pts);
}

/* Writes every series into one block (ascending, or: all but each series'
 * first profile, then the first, which makes the writer buffer the series
 * and decode the groups it had encoded) and reads everything back. */
static void roundtrip(const pd_block_writer_opts *o, bool first_last)
{
    char *tmp = mktmp(), id[27], dir[4200];
    pd_err err;
    pd_block_writer *w;
    assert_int_equal(pd__block_writer_new(o, &w), 0);
    for (size_t k = 0; k < g_ns; k++) {
        pd_labels l;
        labels(g_s[k].name, &l);
        for (size_t j = 0; j < g_s[k].n; j++) {
            size_t i = first_last ? (j + 1) % g_s[k].n : j;
            if (pd__block_writer_add(w, &l, g_s[k].ts[i], &g_s[k].p[i], &err))
                fail_msg("add %s #%zu: %s", g_s[k].name, i, err.msg);
        }
        pd_labels_release(&l);
    }
    PD_ASSERT_OK(pd__block_writer_write(w, tmp, id, &err), &err);
    pd__block_writer_free(w);
    snprintf(dir, sizeof dir, "%s/%s", tmp, id);
    pd_block *b;
    PD_ASSERT_OK(pd__block_open(dir, &b, &err), &err);
    for (size_t k = 0; k < g_ns; k++)
        check_series(b, &g_s[k]);
    pd__block_close(b);
    PD_ASSERT_OK(pd__block_check(dir, NULL, &err), &err);
    rm_rf(tmp);
    free(tmp);
}

static void test_roundtrip_default(void **state)
{
    (void)state;
    pd_block_writer_opts o = {0};
    roundtrip(&o, false);
}

static void test_roundtrip_buffered_groups_of_5(void **state)
{
    (void)state;
    pd_block_writer_opts o = {.group = 5};
    roundtrip(&o, true);
}

static void test_roundtrip_groups_of_1(void **state)
{
    (void)state;
    pd_block_writer_opts o = {.group_bytes = 1, .stack_format = PD_STACKS_LIST};
    roundtrip(&o, false);
}

static void test_roundtrip_format1_groups_of_3(void **state)
{
    (void)state;
    pd_block_writer_opts o = {.version = 1, .group = 3};
    roundtrip(&o, true);
}

/* A block of an older chunks version (data/chunks-vVERSION/ULID) reads back
 * equal to the testdata profiles it was written from (bench_storage_size on
 * go-demo-series' heap and cpu and go-demo-once's single profiles; __name__ =
 * the type). */
static void old_block(const char *ulid, int version)
{
    char *tmp = mktmp(), cmd[8400], dir[4200];
    snprintf(cmd, sizeof cmd, "cp -r '%s/data/chunks-v%d/%s' '%s/'", PD_TEST_SRC, version, ulid,
             tmp);
    assert_int_equal(system(cmd), 0);
    snprintf(dir, sizeof dir, "%s/%s", tmp, ulid);
    char path[4300];
    snprintf(path, sizeof path, "%s/chunks/000001", dir);
    FILE *f = fopen(path, "rb");
    uint8_t hdr[8];
    assert_non_null(f);
    assert_int_equal(fread(hdr, 1, 8, f), 8);
    fclose(f);
    assert_int_equal(hdr[4], version); /* the old encoding indeed */
    pd_err err;
    pd_block *b;
    PD_ASSERT_OK(pd__block_open(dir, &b, &err), &err);
    char d[4096];
    tseries old[7];
    memset(old, 0, sizeof old);
    const char *once[] = {"allocs", "block", "goroutine", "mutex", "threadcreate"};
    snprintf(d, sizeof d, "%s/pprof/go-demo-series", PD_TESTDATA);
    size_t ns = 0;
    {
        tseries *save = g_s;
        size_t save_n = g_ns;
        g_s = NULL;
        g_ns = 0;
        add_dir_series(d, "heap", "heap");
        add_dir_series(d, "cpu", "cpu");
        snprintf(d, sizeof d, "%s/pprof/go-demo-once", PD_TESTDATA);
        for (size_t k = 0; k < 5; k++)
            add_dir_series(d, once[k], once[k]);
        ns = g_ns;
        memcpy(old, g_s, ns * sizeof *old);
        free(g_s);
        g_s = save;
        g_ns = save_n;
    }
    assert_int_equal(pd__block_n_series(b), ns);
    size_t n = 0;
    for (size_t k = 0; k < ns; k++) {
        check_series(b, &old[k]);
        n += old[k].n;
    }
    assert_int_equal(n, 45);
    pd__block_close(b);
    PD_ASSERT_OK(pd__block_check(dir, NULL, &err), &err);
    for (size_t k = 0; k < ns; k++) {
        for (size_t i = 0; i < old[k].n; i++)
            pd_profile_release(&old[k].p[i]);
        free(old[k].p);
        free(old[k].ts);
    }
    rm_rf(tmp);
    free(tmp);
}

/* Written by the code before chunks version 3 (value groups holding
 * time_nanos and every value, time chunks of rows). */
static void test_chunks_v2_block(void **state)
{
    (void)state;
    old_block("01M8CQX3DZN26ECSMDZNYBKYEK", 2);
}

/* Written by the code before chunks version 4 (ts as delta-of-delta, every
 * column of planes zigzag). */
static void test_chunks_v3_block(void **state)
{
    (void)state;
    old_block("01M8FTGAGE59WPJA2NG814YP6A", 3);
}

/* ---- value groups with derive, on the decomposed real series ---- */

static void dprof_equal(const pd_dprof *a, const pd_dprof *b, const char *what, size_t k)
{
    if (a->n_types != b->n_types || a->n_sample != b->n_sample || a->period != b->period ||
        a->period_type != b->period_type || a->period_unit != b->period_unit ||
        a->time_nanos != b->time_nanos || a->duration_nanos != b->duration_nanos ||
        a->n_comment != b->n_comment || a->drop_frames != b->drop_frames ||
        a->keep_frames != b->keep_frames || a->default_sample_type != b->default_sample_type ||
        a->doc_url != b->doc_url)
        fail_msg("%s #%zu: header or counts differ", what, k);
    assert_memory_equal(a->types, b->types, 2 * a->n_types * sizeof *a->types + 0);
    if (a->n_comment)
        assert_memory_equal(a->comment, b->comment, a->n_comment * sizeof *a->comment);
    for (uint32_t x = 0; x < a->n_sample; x++) {
        if (a->stack[x] != b->stack[x] || a->lset[x] != b->lset[x])
            fail_msg("%s #%zu sample %u: key differs", what, k, x);
        for (uint32_t t = 0; t < a->n_types; t++)
            if (a->value[(size_t)x * a->n_types + t] != b->value[(size_t)x * a->n_types + t])
                fail_msg("%s #%zu sample %u type %u: %lld decoded as %lld", what, k, x, t,
                         (long long)a->value[(size_t)x * a->n_types + t],
                         (long long)b->value[(size_t)x * a->n_types + t]);
    }
    for (uint32_t t = 0; t < a->n_types; t++)
        assert_int_equal(a->totals[t], b->totals[t]);
}

/* out[0..n) zeroed, then given ts, and (give) the time chunk's totals and
 * time_nanos, as block.c gives them. */
static pd_dprof *given(const pd_dprof *d, size_t n, bool give)
{
    pd_dprof *out = calloc(n + 1, sizeof *out);
    for (size_t k = 0; k < n; k++) {
        out[k].ts = d[k].ts;
        if (!give)
            continue;
        out[k].n_types = d[k].n_types;
        out[k].totals = malloc((d[k].n_types + 1) * sizeof *out[k].totals);
        memcpy(out[k].totals, d[k].totals, d[k].n_types * sizeof *out[k].totals);
        out[k].time_nanos = d[k].time_nanos;
    }
    return out;
}

static void release_all(pd_dprof *o, size_t n)
{
    for (size_t k = 0; k < n; k++)
        pd__dprof_release(&o[k]);
    free(o);
}

static void test_vgroup_derive(void **state)
{
    (void)state;
    pd_symbols s;
    pd_err err;
    assert_int_equal(pd__symbols_init(&s, PD_STACKS_TREE, true), 0);
    size_t derived_bytes = 0, plain_bytes = 0, flips = 0;
    for (size_t k = 0; k < g_ns; k++) {
        const tseries *ts = &g_s[k];
        pd_dprof *d = calloc(ts->n + 1, sizeof *d);
        for (size_t i = 0; i < ts->n; i++)
            PD_ASSERT_OK(pd__dprof_from_profile(&s, &ts->p[i], ts->ts[i], &d[i], &err), &err);
        pd_vgroup_enc e;
        pd_buf b, plain;
        pd__vgroup_enc_init(&e);
        e.derive = true;
        pd_buf_init(&b, 0);
        pd_buf_init(&plain, 0);
        for (size_t i = 0; i < ts->n; i++)
            assert_int_equal(pd__vgroup_enc_append(&e, &d[i], &b), 0);
        const pd_dprof **ptrs = malloc((ts->n + 1) * sizeof *ptrs);
        for (size_t i = 0; i < ts->n; i++)
            ptrs[i] = &d[i];
        assert_int_equal(pd__vgroup_encode(ptrs, ts->n, &plain), 0);
        free(ptrs);
        derived_bytes += b.len;
        plain_bytes += plain.len;
        /* equal with the time chunk's fields given */
        pd_dprof *o = given(d, ts->n, true);
        if (pd__vgroup_decode(&s, (const uint8_t *)b.data, b.len, ts->n, o, &err))
            fail_msg("%s: decode: %s", ts->name, err.msg);
        for (size_t i = 0; i < ts->n; i++)
            dprof_equal(&d[i], &o[i], ts->name, i);
        release_all(o, ts->n);
        /* refused without them, named */
        o = given(d, ts->n, false);
        assert_int_equal(pd__vgroup_decode(&s, (const uint8_t *)b.data, b.len, ts->n, o, &err),
                         PD_ECORRUPT);
        assert_non_null(strstr(err.msg, "time chunk"));
        release_all(o, ts->n);
        /* and with another number of types than the profile's */
        o = given(d, ts->n, true);
        o[0].n_types++;
        assert_int_equal(pd__vgroup_decode(&s, (const uint8_t *)b.data, b.len, ts->n, o, &err),
                         PD_ECORRUPT);
        release_all(o, ts->n);
        /* every truncation and (on the short series) every byte flip: an
           error or profiles, never a crash */
        size_t step = b.len > 4000 ? b.len / 997 : 1;
        for (size_t cut = 0; cut < b.len; cut += step) {
            o = given(d, ts->n, true);
            assert_int_equal(pd__vgroup_decode(&s, (const uint8_t *)b.data, cut, ts->n, o, &err),
                             PD_ECORRUPT);
            release_all(o, ts->n);
        }
        uint8_t *f = malloc(b.len + 1);
        for (size_t at = 0; at < b.len; at += step)
            for (int bit = 0; bit < 8; bit += 3) {
                memcpy(f, b.data, b.len);
                f[at] ^= (uint8_t)(1u << bit);
                o = given(d, ts->n, true);
                int rc = pd__vgroup_decode(&s, f, b.len, ts->n, o, &err);
                assert_true(rc == 0 || rc == PD_ECORRUPT);
                release_all(o, ts->n);
                flips++;
            }
        free(f);
        pd_buf_release(&b);
        pd_buf_release(&plain);
        pd__vgroup_enc_release(&e);
        for (size_t i = 0; i < ts->n; i++)
            pd__dprof_release(&d[i]);
        free(d);
    }
    print_message("value groups: %zu bytes with derive, %zu without; %zu flips\n", derived_bytes,
                  plain_bytes, flips);
    assert_true(derived_bytes < plain_bytes);
    pd__symbols_release(&s);
}

/* ---- time chunks ---- */

static void tchunk_roundtrip(pd_dprof *d, size_t n)
{
    const pd_dprof **ptrs = malloc((n + 1) * sizeof *ptrs);
    for (size_t i = 0; i < n; i++)
        ptrs[i] = &d[i];
    uint32_t g_first[3] = {0, (uint32_t)(n / 2), (uint32_t)n};
    uint64_t g_off[2] = {8, 1234567};
    size_t ng = n / 2 ? 2 : 1;
    if (ng == 1)
        g_first[1] = (uint32_t)n;
    pd_buf b;
    pd_buf_init(&b, 0);
    assert_int_equal(pd__tchunk_encode(ptrs, n, g_first, g_off, ng, &b), 0);
    pd_tchunk t;
    pd_err err;
    PD_ASSERT_OK(pd__tchunk_decode((const uint8_t *)b.data, b.len, 100, 4, &t, &err), &err);
    assert_int_equal(t.n, n);
    assert_int_equal(t.n_group, ng);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(t.ts[i], d[i].ts);
        assert_int_equal(t.time_nanos[i], d[i].time_nanos);
        size_t k = (size_t)(t.tot_off[i + 1] - t.tot_off[i]);
        assert_int_equal(k, d[i].n_types);
        for (size_t x = 0; x < k; x++)
            assert_int_equal(t.totals[t.tot_off[i] + x], d[i].totals[x]);
        assert_memory_equal(t.tset_str + 2 * t.tset_off[t.tset[i]], d[i].types,
                            2 * k * sizeof *d[i].types);
    }
    for (size_t g = 0; g < ng; g++) {
        assert_int_equal(t.g_first[g], g_first[g]);
        assert_int_equal(t.g_off[g], g_off[g]);
    }
    pd__tchunk_release(&t);
    for (size_t cut = 0; cut < b.len; cut++) {
        int rc = pd__tchunk_decode((const uint8_t *)b.data, cut, 100, 4, &t, &err);
        assert_int_equal(rc, PD_ECORRUPT);
    }
    uint8_t *f = malloc(b.len + 1);
    for (size_t at = 0; at < b.len; at++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(f, b.data, b.len);
            f[at] ^= (uint8_t)(1u << bit);
            int rc = pd__tchunk_decode(f, b.len, 100, 4, &t, &err);
            assert_true(rc == 0 || rc == PD_ECORRUPT);
            if (!rc)
                pd__tchunk_release(&t);
        }
    free(f);
    free(ptrs);
    pd_buf_release(&b);
}

static void test_tchunk_v4(void **state)
{
    (void)state;
    enum { N = 9 };
    static uint32_t types2[] = {1, 2, 3, 4}, types1[] = {5, 6},
                    types4[] = {1, 2, 3, 4, 7, 8, 9, 10};
    int64_t tot[N][4] = {
        {INT64_MIN, INT64_MAX, 0, 0},
        {INT64_MAX, INT64_MIN, 0, 0},
        {-1, 1, 0, 0},
        {0, 0, 0, 0},
        {5, 0, 0, 0},
        {10000000, 30000000, 20000000, INT64_MIN},
        {20000000, 50000000, 20000000, INT64_MIN + 10000000},
        {3, 3000, 0, 0},
        {4, 4000, 0, 0},
    };
    uint32_t nt[N] = {2, 2, 2, 2, 1, 4, 4, 2, 2};
    int64_t ts[N] = {
        -5, 0, 1000, 2003, 3001, 4000, INT64_MAX / 4, INT64_MAX / 2, INT64_MAX / 2 + 1};
    int64_t tn[N] = {INT64_MIN, INT64_MAX, 0, -1, 1, 2003000123, 77, 1000000000, -999999};
    pd_dprof d[N];
    memset(d, 0, sizeof d);
    for (size_t i = 0; i < N; i++) {
        d[i].ts = ts[i];
        d[i].time_nanos = tn[i];
        d[i].n_types = nt[i];
        d[i].types = nt[i] == 1 ? types1 : nt[i] == 2 ? types2 : types4;
        d[i].totals = tot[i];
    }
    for (size_t n = 1; n <= N; n++)
        tchunk_roundtrip(d, n);
}

/* Version 4's ts column (intervals minus their median) and column mode 2
 * (planes of non-negative values without zigzag): a scrape on a fixed
 * schedule with jitter, time_nanos offsets in [0, 1e6) and growing totals
 * round-trip, in fewer bytes than the same profiles with one negative
 * time_nanos offset and totals that fall (zigzag planes); a mode-2 column is
 * refused in a version 3 chunk. */
static void test_tchunk_v4_columns(void **state)
{
    (void)state;
    enum { N = 200 };
    static uint32_t types2[] = {1, 2, 3, 4};
    static int64_t tot[N][2], tot_neg[N][2];
    pd_dprof d[N];
    memset(d, 0, sizeof d);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        d[i].ts = 1700000000000 + (int64_t)i * 10000 + (int64_t)(x % 40);
        d[i].time_nanos = d[i].ts * 1000000 + (int64_t)((x >> 8) % 1000000);
        tot[i][0] = (int64_t)i * 3, tot[i][1] = (int64_t)i * 3000 + (int64_t)(x >> 40 & 255);
        tot_neg[i][0] = -tot[i][0], tot_neg[i][1] = -tot[i][1];
        d[i].n_types = 2;
        d[i].types = types2;
        d[i].totals = tot[i];
    }
    tchunk_roundtrip(d, N);
    const pd_dprof *ptrs[N];
    for (size_t i = 0; i < N; i++)
        ptrs[i] = &d[i];
    uint32_t g_first[2] = {0, N};
    uint64_t g_off[1] = {8};
    pd_buf b, neg;
    pd_buf_init(&b, 0);
    pd_buf_init(&neg, 0);
    assert_int_equal(pd__tchunk_encode(ptrs, N, g_first, g_off, 1, &b), 0);
    for (size_t i = 0; i < N; i++)
        d[i].totals = tot_neg[i];
    d[N - 1].time_nanos = d[N - 1].ts * 1000000 - 1;
    tchunk_roundtrip(d, N);
    assert_int_equal(pd__tchunk_encode(ptrs, N, g_first, g_off, 1, &neg), 0);
    print_message("time chunk: %zu bytes unsigned, %zu zigzag\n", b.len, neg.len);
    /* a bit per value in the top planes of time_nanos and of the second
       totals (the first's deltas are +-3: gcd 3, one bit either way), less
       what rounding a plane to bytes may take */
    assert_true(b.len + N / 4 - 4 <= neg.len);
    /* one profile: no ts column, so version 3 reads up to the first column
       of mode 2 (its totals) */
    for (size_t i = 0; i < N; i++)
        d[i].totals = tot[i];
    uint32_t g1[2] = {0, 1};
    pd_buf_reset(&b);
    assert_int_equal(pd__tchunk_encode(ptrs, 1, g1, g_off, 1, &b), 0);
    pd_tchunk t;
    pd_err err;
    PD_ASSERT_OK(pd__tchunk_decode((const uint8_t *)b.data, b.len, 100, 4, &t, &err), &err);
    pd__tchunk_release(&t);
    assert_int_equal(pd__tchunk_decode((const uint8_t *)b.data, b.len, 100, 3, &t, &err),
                     PD_ECORRUPT);
    assert_non_null(strstr(err.msg, "column mode 2"));
    pd_buf_release(&b);
    pd_buf_release(&neg);
}

/* chunks/000001 of version 1 or of a version after this build's is refused,
 * by name; versions 2 to 4 are read (test_chunks_v2_block, _v3_block, the
 * round trips) */
static void test_chunks_versions(void **state)
{
    (void)state;
    for (int v = 1; v <= 5; v += 4) {
        char *tmp = mktmp(), cmd[8400], dir[4200], path[4300];
        snprintf(cmd, sizeof cmd, "cp -r '%s/data/chunks-v2/01M8CQX3DZN26ECSMDZNYBKYEK' '%s/'",
                 PD_TEST_SRC, tmp);
        assert_int_equal(system(cmd), 0);
        snprintf(dir, sizeof dir, "%s/01M8CQX3DZN26ECSMDZNYBKYEK", tmp);
        snprintf(path, sizeof path, "%s/chunks/000001", dir);
        FILE *f = fopen(path, "r+b");
        assert_non_null(f);
        fseek(f, 4, SEEK_SET);
        fputc(v, f);
        fclose(f);
        pd_block *b;
        pd_err err;
        assert_int_equal(pd__block_open(dir, &b, &err), PD_ECORRUPT);
        assert_non_null(strstr(err.msg, "chunks/000001"));
        char want[32];
        snprintf(want, sizeof want, "chunks version %d", v);
        assert_non_null(strstr(err.msg, want));
        rm_rf(tmp);
        free(tmp);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_default),
        cmocka_unit_test(test_roundtrip_buffered_groups_of_5),
        cmocka_unit_test(test_roundtrip_groups_of_1),
        cmocka_unit_test(test_roundtrip_format1_groups_of_3),
        cmocka_unit_test(test_chunks_v2_block),
        cmocka_unit_test(test_chunks_v3_block),
        cmocka_unit_test(test_vgroup_derive),
        cmocka_unit_test(test_tchunk_v4),
        cmocka_unit_test(test_tchunk_v4_columns),
        cmocka_unit_test(test_chunks_versions),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
