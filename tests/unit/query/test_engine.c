/* Unit tests of src/query/engine.c against a real store in a temp directory.
 *
 * Four series of real profiles (PD_TESTDATA/pprof):
 *   A heap{instance="a:1", job="api"}        heap-0001..0003 at 1000, 2000, 3000
 *   B heap{instance="b:2", job="apiserver"}  heap-0004..0005 at 1500, 2500
 *   C cpu{instance="a:1", job="api"}         cpu-0001..0002  at 1000, 2000
 *   D goroutine{job="db", zone="eu"}         goroutine       at 4000
 * Expected answers follow from these by hand (which series each matcher
 * selects) and from pd_profile_totals of the files (the totals).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "query/query.h"

#ifndef PD_TESTDATA
#error "PD_TESTDATA must be defined"
#endif

typedef struct stored {
    const char *file;
    int series; /* 0..3 = A..D */
    int64_t ts;
} stored;

static const stored STORED[] = {
    {"go-demo-series/heap-0001.pb.gz", 0, 1000}, {"go-demo-series/heap-0002.pb.gz", 0, 2000},
    {"go-demo-series/heap-0003.pb.gz", 0, 3000}, {"go-demo-series/heap-0004.pb.gz", 1, 1500},
    {"go-demo-series/heap-0005.pb.gz", 1, 2500}, {"go-demo-series/cpu-0001.pb.gz", 2, 1000},
    {"go-demo-series/cpu-0002.pb.gz", 2, 2000},  {"go-demo-once/goroutine.pb.gz", 3, 4000},
};
#define NSTORED (sizeof STORED / sizeof STORED[0])

static const char *SERIES[4][4][2] = {
    {{"__name__", "heap"}, {"instance", "a:1"}, {"job", "api"}},
    {{"__name__", "heap"}, {"instance", "b:2"}, {"job", "apiserver"}},
    {{"__name__", "cpu"}, {"instance", "a:1"}, {"job", "api"}},
    {{"__name__", "goroutine"}, {"job", "db"}, {"zone", "eu"}},
};

typedef struct fixture {
    char dir[256];
    pd_storage *st;
    pd_profile prof[NSTORED];
} fixture;

static void read_file(const char *path, pd_buf *b)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    char tmp[65536];
    size_t r;
    while ((r = fread(tmp, 1, sizeof tmp, f)) > 0)
        assert_int_equal(pd_buf_append(b, tmp, r), 0);
    fclose(f);
}

static void series_labels(int s, pd_labels *ls)
{
    pd_labels_init(ls);
    for (int i = 0; i < 4 && SERIES[s][i][0]; i++)
        assert_int_equal(pd_labels_set(ls, SERIES[s][i][0], SERIES[s][i][1], NULL), 0);
}

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    snprintf(fx->dir, sizeof fx->dir, "/tmp/pd_query_engine_XXXXXX");
    if (!mkdtemp(fx->dir))
        return -1;
    pd_storage_options o = pd_storage_options_default();
    o.path = fx->dir;
    o.fsync = PD_FSYNC_NEVER;
    o.retention_ms = -1; /* synthetic times from 1970: no lower time bound */
    pd_err err = {{0}};
    if (pd_storage_open(&o, &fx->st, &err)) {
        fprintf(stderr, "open %s: %s\n", fx->dir, err.msg);
        return -1;
    }
    for (size_t i = 0; i < NSTORED; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/pprof/%s", PD_TESTDATA, STORED[i].file);
        pd_buf b;
        pd_buf_init(&b, 0);
        read_file(path, &b);
        if (pd_profile_decode(&fx->prof[i], (const uint8_t *)b.data, b.len, NULL, &err)) {
            fprintf(stderr, "decode %s: %s\n", path, err.msg);
            return -1;
        }
        pd_labels ls;
        series_labels(STORED[i].series, &ls);
        int rc = pd_storage_append(fx->st, &ls, STORED[i].ts, (const uint8_t *)b.data, b.len,
                                   &fx->prof[i], &err);
        pd_labels_release(&ls);
        pd_buf_release(&b);
        if (rc) {
            fprintf(stderr, "append %s: %s\n", path, err.msg);
            return -1;
        }
    }
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    pd_storage_close(fx->st);
    for (size_t i = 0; i < NSTORED; i++)
        pd_profile_release(&fx->prof[i]);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx->dir);
    int rc = system(cmd);
    free(fx);
    return rc == 0 ? 0 : -1;
}

static json_t *parse_json(const pd_buf *b)
{
    json_error_t je;
    json_t *j = json_loadb(b->data, b->len, 0, &je);
    if (!j)
        fail_msg("invalid JSON (%s): %.300s", je.text, b->data);
    return j;
}

/* The series index (0..3) whose labels equal the JSON object, or -1. */
static int which_series(json_t *labels)
{
    for (int s = 0; s < 4; s++) {
        size_t n = 0;
        bool ok = true;
        for (int i = 0; i < 4 && SERIES[s][i][0]; i++, n++) {
            json_t *v = json_object_get(labels, SERIES[s][i][0]);
            if (!v || strcmp(json_string_value(v), SERIES[s][i][1]))
                ok = false;
        }
        if (ok && json_object_size(labels) == n)
            return s;
    }
    return -1;
}

/* Runs query_range and checks it returns exactly the series `want` (in
 * order, -1 terminated), each with its stored timestamps in [from, to]
 * ascending and totals equal to pd_profile_totals of the stored file. */
static void check_range(fixture *fx, const char *sel, int64_t from, int64_t to, const int *want)
{
    pd_buf out;
    pd_buf_init(&out, 0);
    pd_err err = {{0}};
    int rc = pd_query_range(fx->st, sel, from, to, &out, &err);
    if (rc)
        fail_msg("query_range %s: %d %s", sel, rc, err.msg);
    json_t *j = parse_json(&out);
    assert_true(json_is_array(j));
    size_t nwant = 0;
    while (want[nwant] >= 0)
        nwant++;
    if (json_array_size(j) != nwant)
        fail_msg("query_range %s: %zu series, want %zu: %s", sel, json_array_size(j), nwant,
                 out.data);
    for (size_t k = 0; k < nwant; k++) {
        json_t *e = json_array_get(j, k);
        int s = which_series(json_object_get(e, "labels"));
        if (s != want[k])
            fail_msg("query_range %s: element %zu is series %d, want %d", sel, k, s, want[k]);
        json_t *ts = json_object_get(e, "timestamps"), *tot = json_object_get(e, "totals");
        json_t *types = json_object_get(e, "sample_types");
        size_t np = 0;
        int64_t prev = INT64_MIN;
        for (size_t i = 0; i < NSTORED; i++) {
            if (STORED[i].series != s || STORED[i].ts < from || STORED[i].ts > to)
                continue;
            /* STORED lists each series' profiles in ascending time */
            json_t *t = json_array_get(ts, np);
            if (!t || json_integer_value(t) != STORED[i].ts)
                fail_msg("query_range %s: series %d point %zu: wrong timestamp", sel, s, np);
            assert_true(STORED[i].ts > prev);
            prev = STORED[i].ts;
            const pd_profile *p = &fx->prof[i];
            int64_t totals[16];
            assert_true(p->n_sample_type <= 16);
            pd_profile_totals(p, totals);
            json_t *pt = json_array_get(tot, np);
            assert_int_equal(json_array_size(pt), p->n_sample_type);
            for (size_t t2 = 0; t2 < p->n_sample_type; t2++)
                assert_int_equal(json_integer_value(json_array_get(pt, t2)), totals[t2]);
            assert_int_equal(json_array_size(types), p->n_sample_type);
            for (size_t t2 = 0; t2 < p->n_sample_type; t2++) {
                json_t *ty = json_array_get(types, t2);
                assert_string_equal(json_string_value(json_object_get(ty, "type")),
                                    pd_profile_str(p, p->sample_type[t2].type));
                assert_string_equal(json_string_value(json_object_get(ty, "unit")),
                                    pd_profile_str(p, p->sample_type[t2].unit));
            }
            np++;
        }
        assert_int_equal(json_array_size(ts), np);
        assert_int_equal(json_array_size(tot), np);
    }
    json_decref(j);
    pd_buf_release(&out);
}

static void test_range(void **state)
{
    fixture *fx = *state;
    check_range(fx, "heap", 0, 10000, (int[]){0, 1, -1});
    check_range(fx, "{job=\"api\"}", 0, 10000, (int[]){2, 0, -1}); /* cpu < heap */
    check_range(fx, "heap{job!=\"api\"}", 0, 10000, (int[]){1, -1});
    check_range(fx, "heap{job=~\"api\"}", 0, 10000, (int[]){0, -1}); /* anchored */
    check_range(fx, "heap{job=~\"api.*\"}", 0, 10000, (int[]){0, 1, -1});
    check_range(fx, "{job!~\"api.*\", job=~\".+\"}", 0, 10000, (int[]){3, -1});
    check_range(fx, "{instance=\"a:1\"}", 0, 10000, (int[]){2, 0, -1});
    check_range(fx, "{zone=\"\", job=~\"d.\"}", 0, 10000, (int[]){-1});
    check_range(fx, "heap", 1500, 2000, (int[]){0, 1, -1});
    check_range(fx, "heap", 2600, 3000, (int[]){0, -1});
    check_range(fx, "heap", 5000, 6000, (int[]){-1});
    check_range(fx, "nosuch", 0, 10000, (int[]){-1});

    /* a bad selector leaves the buffer as it was */
    pd_buf out;
    pd_buf_init(&out, 0);
    assert_int_equal(pd_buf_puts(&out, "keep"), 0);
    pd_err err = {{0}};
    assert_int_equal(pd_query_range(fx->st, "heap{", 0, 10000, &out, &err), PD_EPARSE);
    assert_string_equal(out.data, "keep");
    assert_non_null(strstr(err.msg, "at character 6"));
    assert_int_equal(pd_query_range(fx->st, "{a=~\".*\"}", 0, 10000, &out, &err), PD_EINVAL);
    assert_string_equal(out.data, "keep");
    pd_buf_release(&out);
}

/* The answer's numbers are reserved for in one piece (an overestimate):
 * a response cap exactly the answer's size still gives the whole answer
 * (the exact path), one byte less gives PD_ETOOBIG and an empty buffer. */
static void test_range_cap(void **state)
{
    fixture *fx = *state;
    pd_buf full, capped;
    pd_err err = {{0}};
    pd_buf_init(&full, 0);
    assert_int_equal(pd_query_range(fx->st, "{job=~\".+\"}", 0, 10000, &full, &err), 0);
    assert_true(full.len > 100);
    pd_buf_init(&capped, full.len);
    assert_int_equal(pd_query_range(fx->st, "{job=~\".+\"}", 0, 10000, &capped, &err), 0);
    assert_int_equal(capped.len, full.len);
    assert_memory_equal(capped.data, full.data, full.len);
    pd_buf_release(&capped);
    pd_buf_init(&capped, full.len - 1);
    assert_int_equal(pd_query_range(fx->st, "{job=~\".+\"}", 0, 10000, &capped, &err), PD_ETOOBIG);
    assert_int_equal(capped.len, 0);
    pd_buf_release(&capped);
    pd_buf_release(&full);
}

/* query_range spread over threads (a share of the series each, appended in
 * order): the same bytes as one thread, in a store of 300 series (every
 * third served cumulative, so with deltas) partly cut into blocks, for
 * 1 worker and 4 (reopened), with and without deltas, and the response cap
 * still exact. */
static pd_storage *open_many(const char *dir, int workers)
{
    pd_storage_options o = pd_storage_options_default();
    o.path = dir;
    o.fsync = PD_FSYNC_NEVER;
    o.retention_ms = -1;
    o.maintenance_ms = -1;
    o.block_duration_ms = 2000;
    o.aggregate_workers = workers;
    pd_storage *st;
    pd_err err = {{0}};
    if (pd_storage_open(&o, &st, &err))
        fail_msg("open %s: %s", dir, err.msg);
    return st;
}

static void range_text(pd_storage *st, bool delta, pd_buf *out)
{
    pd_err err = {{0}};
    pd_buf_init(out, 0);
    assert_int_equal(pd_query_range_ex(st, "{job=\"many\"}", 0, 100000, delta, out, &err), 0);
}

static void test_range_shares(void **state)
{
    (void)state;
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/pd_query_shares_XXXXXX");
    assert_non_null(mkdtemp(dir));
    pd_storage *st = open_many(dir, 1);
    pd_buf body[4];
    pd_profile p[4];
    pd_err err = {{0}};
    for (int k = 0; k < 4; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/pprof/%s", PD_TESTDATA, STORED[k].file);
        pd_buf_init(&body[k], 0);
        read_file(path, &body[k]);
        assert_int_equal(
            pd_profile_decode(&p[k], (const uint8_t *)body[k].data, body[k].len, NULL, &err), 0);
    }
    for (int k = 0; k < 8; k++) /* 2 s blocks: 2 profiles per series and block */
        for (int j = 0; j < 300; j++) {
            pd_labels ls;
            char inst[16];
            snprintf(inst, sizeof inst, "i%03d", j);
            pd_labels_init(&ls);
            pd_labels_set(&ls, "__name__", "heap", NULL);
            pd_labels_set(&ls, "job", "many", NULL);
            pd_labels_set(&ls, "instance", inst, NULL);
            if (j % 3 == 0)
                pd_labels_set(&ls, PD_LABEL_DELTA, "false", NULL);
            int kk = (k + j) % 4; /* totals going up and down: resets too */
            if (pd_storage_append(st, &ls, 1000 * (k + 1) + j, (const uint8_t *)body[kk].data,
                                  body[kk].len, &p[kk], &err))
                fail_msg("append: %s", err.msg);
            pd_labels_release(&ls);
        }
    for (int k = 0; k < 4; k++) /* a cut per round */
        assert_int_equal(pd_storage_maintain(st, &err), 0);
    pd_storage_stats ss;
    pd_storage_stats_get(st, &ss);
    printf("shares store: %llu blocks, %llu head profiles\n", (unsigned long long)ss.n_blocks,
           (unsigned long long)ss.n_head_profiles);
    assert_true(ss.n_blocks >= 1 && ss.n_head_profiles > 0);
    pd_buf one[2], four[2];
    for (int d = 0; d < 2; d++)
        range_text(st, d, &one[d]);
    pd_storage_close(st);
    st = open_many(dir, 4);
    for (int d = 0; d < 2; d++) {
        range_text(st, d, &four[d]);
        assert_int_equal(four[d].len, one[d].len);
        assert_memory_equal(four[d].data, one[d].data, one[d].len);
        json_t *j = parse_json(&four[d]);
        assert_int_equal(json_array_size(j), 300);
        json_decref(j);
    }
    assert_true(strstr(one[1].data, "\"delta\":true") != NULL);
    /* ranges cutting the blocks (the select takes an overlapping block part
       unread): the series listed and their points are exactly those of the
       exact select and read_points; a range in a gap lists none */
    static const int64_t R[][2] = {{1500, 2600}, {2100, 2100}, {2400, 2999},
                                   {3150, 3299}, {2500, 5100}, {0, 100000}};
    for (size_t r = 0; r < sizeof R / sizeof *R; r++) {
        pd_buf got;
        pd_buf_init(&got, 0);
        assert_int_equal(
            pd_query_range_ex(st, "{job=\"many\"}", R[r][0], R[r][1], false, &got, &err), 0);
        json_t *j = parse_json(&got);
        pd_matcher *ms;
        size_t nm;
        pd_series_set set;
        assert_int_equal(pd_selector_parse("{job=\"many\"}", &ms, &nm, &err), 0);
        assert_int_equal(pd_storage_select(st, ms, nm, R[r][0], R[r][1], &set, &err), 0);
        if (json_array_size(j) != set.n)
            fail_msg("range [%lld, %lld]: %zu series, the exact select %zu", (long long)R[r][0],
                     (long long)R[r][1], json_array_size(j), set.n);
        for (size_t i = 0; i < set.n; i++) {
            json_t *e = json_array_get(j, i);
            assert_string_equal(
                json_string_value(json_object_get(json_object_get(e, "labels"), "instance")),
                pd_labels_get(&set.v[i].labels, "instance"));
            pd_points pts;
            assert_int_equal(pd_storage_read_points(st, set.v[i].ref, R[r][0], R[r][1], &pts, &err),
                             0);
            assert_int_equal(json_array_size(json_object_get(e, "timestamps")), pts.n);
            assert_int_equal(pts.n, set.v[i].n_profiles);
            pd_points_release(&pts);
        }
        if (R[r][0] == 2400) /* between two profiles of every series, inside its block part */
            assert_int_equal(set.n, 0);
        json_decref(j);
        pd_series_set_release(&set);
        pd_matchers_free(ms, nm);
        pd_buf_release(&got);
    }
    /* the cap: exactly the answer's size fits, a byte less fails whole */
    pd_buf capped;
    pd_buf_init(&capped, one[1].len);
    assert_int_equal(pd_query_range_ex(st, "{job=\"many\"}", 0, 100000, true, &capped, &err), 0);
    assert_int_equal(capped.len, one[1].len);
    pd_buf_release(&capped);
    pd_buf_init(&capped, one[1].len - 1);
    assert_int_equal(pd_query_range_ex(st, "{job=\"many\"}", 0, 100000, true, &capped, &err),
                     PD_ETOOBIG);
    assert_int_equal(capped.len, 0);
    pd_buf_release(&capped);
    pd_storage_close(st);
    for (int d = 0; d < 2; d++) {
        pd_buf_release(&one[d]);
        pd_buf_release(&four[d]);
    }
    for (int k = 0; k < 4; k++) {
        pd_buf_release(&body[k]);
        pd_profile_release(&p[k]);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* The warnings a share's thread collected reach the request's collector
 * (pd_storage_warnings_add): once each, under the cap, dropped ones counted;
 * without an active collector nothing happens. */
static void test_warnings_add(void **state)
{
    (void)state;
    char *msgs[3] = {strdup("block X offset 1: bad"), strdup("block X offset 2: bad"),
                     strdup("block X offset 1: bad")};
    pd_storage_warnings from = {.v = msgs, .n = 3, .dropped = 2};
    pd_storage_warnings_add(&from); /* no collector: a no-op */
    pd_storage_warnings w;
    pd_storage_warnings_begin(&w);
    pd_storage_warnings_add(&from);
    pd_storage_warnings_add(&from); /* again: no repeats, dropped counts add */
    pd_storage_warnings_end();
    assert_int_equal(w.n, 2);
    assert_string_equal(w.v[0], "block X offset 1: bad");
    assert_string_equal(w.v[1], "block X offset 2: bad");
    assert_int_equal(w.dropped, 4);
    pd_storage_warnings_release(&w);
    for (int i = 0; i < 3; i++)
        free(msgs[i]);
}

static void check_single(fixture *fx, const char *sel, int64_t t, size_t want_idx)
{
    pd_profile p;
    pd_labels ls;
    pd_labels_init(&ls);
    int64_t ts = -1;
    pd_err err = {{0}};
    int rc = pd_query_single(fx->st, sel, t, &p, &ls, &ts, &err);
    if (rc)
        fail_msg("single %s at %lld: %d %s", sel, (long long)t, rc, err.msg);
    assert_int_equal(ts, STORED[want_idx].ts);
    pd_labels want;
    series_labels(STORED[want_idx].series, &want);
    assert_int_equal(pd_labels_cmp(&ls, &want), 0);
    pd_err why = {{0}};
    if (!pd_profile_equal(&p, &fx->prof[want_idx], &why))
        fail_msg("single %s at %lld: profile differs: %s", sel, (long long)t, why.msg);
    pd_labels_release(&want);
    pd_labels_release(&ls);
    pd_profile_release(&p);
}

static void test_single(void **state)
{
    fixture *fx = *state;
    check_single(fx, "cpu", 1999, 5);  /* latest at or before */
    check_single(fx, "cpu", 2000, 6);  /* exactly at */
    check_single(fx, "cpu", 99999, 6); /* after the last */
    check_single(fx, "cpu", 0, 5);     /* before the first: earliest after */
    check_single(fx, "heap{job=\"apiserver\"}", 2499, 3);
    check_single(fx, "heap{instance=~\"a.*\"}", 2500, 1);

    pd_profile p;
    pd_labels ls;
    pd_labels_init(&ls);
    int64_t ts;
    pd_err err = {{0}};
    assert_int_equal(pd_query_single(fx->st, "heap", 2000, &p, &ls, &ts, &err), PD_EAMBIGUOUS);
    if (!strstr(err.msg, "heap{instance=\"a:1\", job=\"api\"}") ||
        !strstr(err.msg, "heap{instance=\"b:2\", job=\"apiserver\"}"))
        fail_msg("ambiguity message does not name both series: %s", err.msg);
    assert_int_equal(pd_query_single(fx->st, "{job=~\"api.*\"}", 2000, &p, &ls, &ts, &err),
                     PD_EAMBIGUOUS);
    assert_non_null(strstr(err.msg, "3 series"));
    assert_int_equal(pd_query_single(fx->st, "nosuch", 2000, &p, &ls, &ts, &err), PD_ENOTFOUND);
    assert_int_equal(pd_query_single(fx->st, "heap{", 2000, &p, &ls, &ts, &err), PD_EPARSE);
    assert_int_equal(ls.n, 0);
}

static char *run_list(fixture *fx, int what, const char *name, const char *const *sels, size_t n,
                      int64_t start, int64_t end)
{
    pd_buf out;
    pd_buf_init(&out, 0);
    pd_err err = {{0}};
    int rc = what == 0   ? pd_query_series(fx->st, sels, n, start, end, &out, &err)
             : what == 1 ? pd_query_label_names(fx->st, sels, n, start, end, &out, &err)
                         : pd_query_label_values(fx->st, name, sels, n, start, end, &out, &err);
    if (rc)
        fail_msg("listing %d: %d %s", what, rc, err.msg);
    json_decref(parse_json(&out));
    return pd_buf_detach(&out, NULL);
}

static void expect_list(fixture *fx, int what, const char *name, const char *const *sels, size_t n,
                        int64_t start, int64_t end, const char *want)
{
    char *got = run_list(fx, what, name, sels, n, start, end);
    if (strcmp(got, want))
        fail_msg("listing %d %s: got %s, want %s", what, name ? name : "", got, want);
    free(got);
}

static void test_series(void **state)
{
    fixture *fx = *state;
    const char *all = "[{\"__name__\":\"cpu\",\"instance\":\"a:1\",\"job\":\"api\"},"
                      "{\"__name__\":\"goroutine\",\"job\":\"db\",\"zone\":\"eu\"},"
                      "{\"__name__\":\"heap\",\"instance\":\"a:1\",\"job\":\"api\"},"
                      "{\"__name__\":\"heap\",\"instance\":\"b:2\",\"job\":\"apiserver\"}]";
    expect_list(fx, 0, NULL, NULL, 0, INT64_MIN, INT64_MAX, all);
    /* union of overlapping selectors, each series once */
    const char *u[] = {"cpu", "{job=\"api\"}", "heap{instance=\"a:1\"}"};
    expect_list(fx, 0, NULL, u, 3, INT64_MIN, INT64_MAX,
                "[{\"__name__\":\"cpu\",\"instance\":\"a:1\",\"job\":\"api\"},"
                "{\"__name__\":\"heap\",\"instance\":\"a:1\",\"job\":\"api\"}]");
    /* time range: only D has a profile in [3500, 5000] */
    expect_list(fx, 0, NULL, NULL, 0, 3500, 5000,
                "[{\"__name__\":\"goroutine\",\"job\":\"db\",\"zone\":\"eu\"}]");
    expect_list(fx, 0, NULL, NULL, 0, 90000, 99999, "[]");

    const char *bad[] = {"cpu", "heap{x"};
    pd_buf out;
    pd_buf_init(&out, 0);
    pd_err err = {{0}};
    assert_int_equal(pd_query_series(fx->st, bad, 2, INT64_MIN, INT64_MAX, &out, &err), PD_EPARSE);
    assert_int_equal(out.len, 0);
    pd_buf_release(&out);
}

static void test_labels(void **state)
{
    fixture *fx = *state;
    expect_list(fx, 1, NULL, NULL, 0, INT64_MIN, INT64_MAX,
                "[\"__name__\",\"instance\",\"job\",\"zone\"]");
    const char *api[] = {"{job=\"api\"}"};
    expect_list(fx, 1, NULL, api, 1, INT64_MIN, INT64_MAX, "[\"__name__\",\"instance\",\"job\"]");
    expect_list(fx, 1, NULL, NULL, 0, 3500, 5000, "[\"__name__\",\"job\",\"zone\"]");

    expect_list(fx, 2, "job", NULL, 0, INT64_MIN, INT64_MAX, "[\"api\",\"apiserver\",\"db\"]");
    const char *heap[] = {"heap"};
    expect_list(fx, 2, "job", heap, 1, INT64_MIN, INT64_MAX, "[\"api\",\"apiserver\"]");
    expect_list(fx, 2, "__name__", NULL, 0, INT64_MIN, INT64_MAX,
                "[\"cpu\",\"goroutine\",\"heap\"]");
    const char *two[] = {"cpu", "goroutine"};
    expect_list(fx, 2, "__name__", two, 2, INT64_MIN, INT64_MAX, "[\"cpu\",\"goroutine\"]");
    expect_list(fx, 2, "instance", NULL, 0, INT64_MIN, INT64_MAX, "[\"a:1\",\"b:2\"]");
    expect_list(fx, 2, "nosuch", NULL, 0, INT64_MIN, INT64_MAX, "[]");
    expect_list(fx, 2, "job", NULL, 0, 2100, 2600, "[\"apiserver\"]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_range),        cmocka_unit_test(test_range_cap),
        cmocka_unit_test(test_range_shares), cmocka_unit_test(test_warnings_add),
        cmocka_unit_test(test_single),       cmocka_unit_test(test_series),
        cmocka_unit_test(test_labels),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
