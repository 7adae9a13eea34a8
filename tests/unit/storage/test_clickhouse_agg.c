/* Unit tests of the ClickHouse backend's pre-summed merges (aggs_v1,
 * schema 5: src/storage/clickhouse/ch_agg.c) against a real clickhouse-server
 * (ch_fixture.h; skipped where it is not installed) and the embedded store
 * (the TSDB) fed the same appends of real heap profiles:
 *  - merges over ranges that cover hours whole, cut them, hold none, and
 *    all time, per series and grouped, are equal to the TSDB's (every
 *    part's profile pd_profile_equal, its counts and times), both through
 *    aggs_v1 (profd_clickhouse_merge_hours_total{path="aggregate"} grows)
 *    and with aggs_v1 emptied (every hour raw);
 *  - a batch whose profiles_v4 INSERT fails (the table renamed away: its
 *    aggs_v1 rows land, its commit row does not) and a batch whose aggs_v1
 *    INSERT fails: the answers stay equal to the TSDB's, the hour is read
 *    raw; the same after a restart (close, open);
 *  - merges fold the profiles' headers from per-bucket summaries only
 *    where exact: real, uniform, with times of their own, and changed
 *    (a zero time or period, a doc_url or comments on some, another
 *    default sample type, a second sample-type set) — equal to the TSDB;
 *  - the sample-type runs a merge checks first come from the select's own
 *    query where a series' sets do not interleave (equal to the TSDB's);
 *  - retention drops aggs_v1's old days with the other tables';
 *  - a version-5 database (samples in samples_v3) upgraded to 6: merges and
 *    single reads equal to the TSDB's over old rows, new rows and both;
 *  - a version-6 database (location rows in stacks_v3) upgraded to 7: the
 *    same;
 *  - a version-7 database (profiles rows in profiles_v3) upgraded to 8: the
 *    same, a profile stored before refused again, and reads name
 *    profiles_v4 alone once profiles_v3 is empty;
 *  - deferred sums (--clickhouse.agg-flush-idle, ch_aggw.c; the test's
 *    clock drives the idle time): nothing in aggs_v1 before a series-bucket
 *    is idle and merges exact (raw) meanwhile; once idle one
 *    reconciliation row per series-bucket with n = its profiles, merges
 *    equal to the TSDB's from aggs_v1; close writes what is pending; a
 *    crash (the pending sums dropped) keeps merges exact (raw), also for a
 *    bucket written in part before; the pending cap writes at once; idle
 *    0 writes per profile beside every batch, as before; on the real
 *    clock the writer writes an idle bucket by itself.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "../pd_test.h"

#include "base/metrics.h"
#include "storage/clickhouse/ch_cache.h"
#include "base/time.h"
#include "storage/clickhouse/ch_int.h"
#include "ch_fixture.h"

static const int64_t HOUR = 3600000, DAY_MS = 86400000, B = PD_CH_AGG_BUCKET_MS;

/* The profiles appended to ClickHouse (acknowledged): series, ts. */
static struct {
    int s;
    int64_t ts;
} g_put[1024];
static size_t g_n_put;

/* Series-buckets wholly inside [a, z] that hold a stored profile: what
 * a merge of every series over [a, z] may read from aggs_v1. */
static size_t whole_buckets(int64_t a, int64_t z)
{
    size_t n = 0;
    for (size_t i = 0; i < g_n_put; i++) {
        int64_t b = g_put[i].ts / B;
        if (b * B < a || (b + 1) * B - 1 > z)
            continue;
        bool first = true; /* count each (series, bucket) once */
        for (size_t j = 0; j < i && first; j++)
            first = !(g_put[j].s == g_put[i].s && g_put[j].ts / B == b);
        n += first;
    }
    return n;
}

/* What a merge handed its fn: each part's info and profile (encoded). */
typedef struct got {
    size_t n;
    pd_storage_agg_part info[8];
    pd_buf prof[8];
} got;

static int collect(void *ctx, const pd_storage_agg_part *part, const pd_profile *p, pd_err *err)
{
    (void)err;
    got *g = ctx;
    assert_true(g->n < 8);
    g->info[g->n] = *part;
    pd_buf_init(&g->prof[g->n], 0);
    assert_int_equal(pd_profile_encode(p, false, &g->prof[g->n]), 0);
    g->n++;
    return 0;
}

static void got_release(got *g)
{
    for (size_t i = 0; i < g->n; i++)
        pd_buf_release(&g->prof[i]);
    g->n = 0;
}

static void merge(pd_storage *s, const uint64_t *refs, const uint32_t *group, size_t n, int64_t a,
                  int64_t z, got *g)
{
    pd_err err;
    memset(g, 0, sizeof *g);
    PD_ASSERT_OK(pd_storage_aggregate(s, refs, group, n, a, z, collect, NULL, g, NULL, &err), &err);
}

/* The TSDB counts every series of a group in each of its parts (n_series),
 * ClickHouse those with profiles in the part: the two differ when a group
 * holds two sample-type sets (test_headers_exact's H_TYPES), where this is
 * set to leave n_series out. */
static bool g_any_n_series;

/* Fails the test unless the two merges handed the same parts. */
static void same(const got *ch, const got *ts, const char *what)
{
    if (ch->n != ts->n)
        fail_msg("%s: ClickHouse %zu parts, TSDB %zu", what, ch->n, ts->n);
    for (size_t i = 0; i < ch->n; i++) {
        const pd_storage_agg_part *a = &ch->info[i], *b = &ts->info[i];
        if (a->n_profiles != b->n_profiles || (a->n_series != b->n_series && !g_any_n_series) ||
            a->min_ts != b->min_ts || a->max_ts != b->max_ts || a->series != b->series)
            fail_msg("%s part %zu: ClickHouse %zu profiles %zu series [%lld, %lld] ref %zu, "
                     "TSDB %zu %zu [%lld, %lld] %zu",
                     what, i, (size_t)a->n_profiles, (size_t)a->n_series, (long long)a->min_ts,
                     (long long)a->max_ts, (size_t)a->series, (size_t)b->n_profiles,
                     (size_t)b->n_series, (long long)b->min_ts, (long long)b->max_ts,
                     (size_t)b->series);
        pd_profile pa, pb;
        pd_err err;
        PD_ASSERT_OK(
            pd_profile_decode(&pa, (const uint8_t *)ch->prof[i].data, ch->prof[i].len, NULL, &err),
            &err);
        PD_ASSERT_OK(
            pd_profile_decode(&pb, (const uint8_t *)ts->prof[i].data, ts->prof[i].len, NULL, &err),
            &err);
        pd_err why;
        pd_err_clear(&why);
        bool eq = pd_profile_equal(&pa, &pb, &why);
        pd_profile_release(&pa);
        pd_profile_release(&pb);
        if (!eq)
            fail_msg("%s part %zu: ClickHouse and TSDB differ: %s", what, i, why.msg);
    }
}

static pd_ch *open_sql(const char *db)
{
    const char *urls[] = {g_url};
    pd_storage_options o = ch_opts(urls, 1, db);
    o.maintenance_ms = -1;
    pd_ch *c;
    pd_err err;
    PD_ASSERT_OK(pd__ch_open(&o, &c, &err), &err);
    return c;
}

static void ch_do(pd_ch *c, const char *sql)
{
    pd_err err;
    PD_ASSERT_OK(pd__ch_exec(c, sql, NULL, 0, NULL, NULL, NULL, &err), &err);
}

static double hours_metric(const char *path)
{
    char l[32];
    snprintf(l, sizeof l, "path=\"%s\"", path);
    return pd_metrics_get("profd_clickhouse_merge_buckets_total", l);
}

/* The refs of series instance a, b, c (in that order) of store s. */
static void refs_of(pd_storage *s, uint64_t ref[3])
{
    pd_err err;
    for (int k = 0; k < 3; k++) {
        char inst[2] = {(char)('a' + k), 0};
        pd_matcher m;
        PD_ASSERT_OK(pd_matcher_init(&m, PD_MATCH_EQ, "instance", inst, &err), &err);
        pd_series_set set;
        PD_ASSERT_OK(pd_storage_select(s, &m, 1, INT64_MIN, INT64_MAX, &set, &err), &err);
        pd_matcher_release(&m);
        assert_int_equal(set.n, 1);
        ref[k] = set.v[0].ref;
        pd_series_set_release(&set);
    }
}

/* Appends heap profile k % 4 of series instance inst at ts to both stores
 * (ts may be NULL). */
static void put(pd_storage *ch, pd_storage *ts, char inst, int64_t t, size_t k)
{
    pd_labels ls;
    char name[2] = {inst, 0};
    labels(&ls, "heap", name, NULL);
    const tprof *p = &g_prof[k % 4];
    pd_err err;
    PD_ASSERT_OK(pd_storage_append(ch, &ls, t, p->body, p->len, &p->p, &err), &err);
    if (ts)
        PD_ASSERT_OK(pd_storage_append(ts, &ls, t, p->body, p->len, &p->p, &err), &err);
    pd_labels_release(&ls);
    assert_true(g_n_put < 1024);
    g_put[g_n_put].s = inst - 'a';
    g_put[g_n_put++].ts = t;
}

/* Every range kind, per series and grouped: ClickHouse == TSDB. Returns
 * the series-buckets the merges read from aggs_v1; *whole: those wholly in
 * their ranges (whole_buckets). */
static double check_ranges(pd_storage *ch, pd_storage *ts, int64_t h0, const char *when,
                           size_t *whole)
{
    uint64_t rc[3], rt[3];
    refs_of(ch, rc);
    refs_of(ts, rt);
    static const uint32_t one[3] = {0, 0, 0};
    const int64_t ranges[][2] = {
        {h0, h0 + 4 * HOUR - 1},                   /* four hours whole */
        {h0 + 25 * 60000, h0 + 3 * HOUR + 420000}, /* cut at both ends */
        {h0 + HOUR, h0 + 2 * HOUR - 1},            /* one hour */
        {h0 + HOUR - 1, h0 + 2 * HOUR},            /* one hour and a ms each side */
        {h0 + 600000, h0 + 2400000},               /* buckets 1-3 whole */
        {h0 + 60000, h0 + 500000},                 /* inside one bucket */
        /* cut at both ends, the end after its bucket's last stored profile
           (aggs_v1 serves it; not where a failed commit left aggs rows) */
        {h0 + 25 * 60000, h0 + 3 * HOUR + 59 * 60000 + 30000},
        {0, INT64_MAX}, /* all time */
    };
    double before = hours_metric("aggregate");
    *whole = 0;
    for (size_t r = 0; r < sizeof ranges / sizeof *ranges; r++)
        for (int grouped = 0; grouped < 2; grouped++) {
            *whole += whole_buckets(ranges[r][0], ranges[r][1]);
            got a, b;
            merge(ch, rc, grouped ? one : NULL, 3, ranges[r][0], ranges[r][1], &a);
            merge(ts, rt, grouped ? one : NULL, 3, ranges[r][0], ranges[r][1], &b);
            char what[96];
            snprintf(what, sizeof what, "%s, range %zu%s", when, r, grouped ? " grouped" : "");
            same(&a, &b, what);
            got_release(&a);
            got_release(&b);
        }
    return hours_metric("aggregate") - before;
}

static void test_merges_equal_embedded(void **state)
{
    (void)state;
    need_server();
    const int64_t h0 = 1795708800000; /* an hour's start */
    g_now = h0 + 5 * HOUR;
    g_n_put = 0;
    pd_storage *ch = open_store("agg_equal");
    char dir[] = "/tmp/pd_ch_agg_XXXXXX";
    pd_storage *ts = open_tsdb(dir);
    /* 3 series, a profile every 10 minutes for 4 hours (a and c), every
       20 (b), each series a little apart */
    for (size_t k = 0; k < 24; k++)
        for (int s = 0; s < 3; s++)
            if (s != 1 || k % 2 == 0)
                put(ch, ts, (char)('a' + s), h0 + (int64_t)k * 600000 + s * 1000, k + (size_t)s);
    size_t whole;
    double cut = hours_metric("aggregate_cut");
    double via = check_ranges(ch, ts, h0, "aggs_v1", &whole);
    assert_true(whole > 100); /* the ranges hold whole buckets */
    assert_int_equal((long long)via, (long long)whole);
    /* and the cut buckets whose profiles all lie inside their ranges */
    assert_true(hours_metric("aggregate_cut") > cut);

    /* aggs_v1 emptied: every bucket raw, the same answers */
    pd_ch *c = open_sql("agg_equal");
    ch_do(c, "TRUNCATE TABLE aggs_v1");
    double raw = hours_metric("raw");
    cut = hours_metric("aggregate_cut");
    assert_int_equal((long long)check_ranges(ch, ts, h0, "raw", &whole), 0);
    assert_int_equal((long long)(hours_metric("raw") - raw), (long long)whole);
    assert_true(hours_metric("aggregate_cut") == cut);
    pd__ch_close(c);
    pd_storage_close(ch);
    rm_tsdb(ts, dir);
}

static double cache_metric(const char *cache, const char *result)
{
    char l[64];
    snprintf(l, sizeof l, "cache=\"%s\",result=\"%s\"", cache, result);
    return pd_metrics_get("profd_clickhouse_cache_lookups_total", l);
}

/* A ClickHouse store with the read cache on (its default size). */
static pd_storage *open_cached(const char *db)
{
    const char *urls[] = {g_url};
    pd_storage_options o = ch_opts(urls, 1, db);
    o.clickhouse.cache_bytes = 0;
    pd_storage *s;
    pd_err err;
    PD_ASSERT_OK(pd_storage_open(&o, &s, &err), &err);
    return s;
}

/* The read cache (ch_cache.h): merges asked again are served the whole
 * buckets' sums and the stack, location and sample-type rows from it, and
 * stay equal to the TSDB's — also after a late write into a bucket a
 * cached merge summed (the snapshot found stale by the fresh headers); a
 * merge whose last whole bucket ended less than CH_SEALED_MS ago is not
 * kept. */
static void test_merges_cached(void **state)
{
    (void)state;
    need_server();
    const int64_t h0 = 1795708800000;
    g_now = h0 + 5 * HOUR;
    g_n_put = 0;
    pd_storage *ch = open_cached("agg_cache");
    char dir[] = "/tmp/pd_ch_agg_XXXXXX";
    pd_storage *ts = open_tsdb(dir);
    for (size_t k = 0; k < 24; k++)
        for (int s = 0; s < 3; s++)
            if (s != 1 || k % 2 == 0)
                put(ch, ts, (char)('a' + s), h0 + (int64_t)k * 600000 + s * 1000, k + (size_t)s);
    size_t whole;
    double mh = cache_metric("merge", "hit"), rh = cache_metric("rows", "hit");
    check_ranges(ch, ts, h0, "cold", &whole);
    double mh1 = cache_metric("merge", "hit"), rh1 = cache_metric("rows", "hit");
    /* each range's merges once per series and once grouped: the second
       of a kind hits already (rows: stacks shared across ranges) */
    assert_true(rh1 > rh);
    double via = check_ranges(ch, ts, h0, "warm", &whole);
    assert_int_equal((long long)via, (long long)whole); /* still summed, from the cache */
    double mh2 = cache_metric("merge", "hit");
    /* every warm merge with a sealed whole bucket hits: the ranges but
       "all time" and "inside one bucket", each per series and grouped */
    assert_true(mh2 - mh1 >= 6 * 4);
    (void)mh;

    /* a late write into a bucket the cached merges summed: seen */
    put(ch, ts, 'a', h0 + HOUR + 5 * 60000 + 500, 3);
    put(ch, ts, 'c', h0 + 2 * HOUR + 7 * 60000 + 500, 1);
    check_ranges(ch, ts, h0, "after late writes", &whole);
    check_ranges(ch, ts, h0, "after late writes, again", &whole);

    /* a merge whose last whole bucket just ended: not kept */
    g_now = h0 + 6 * HOUR + 30000;
    uint64_t rc[3], rt[3];
    refs_of(ch, rc);
    refs_of(ts, rt);
    const int64_t a = h0 + 5 * HOUR, z = h0 + 6 * HOUR - 1;
    put(ch, ts, 'b', a + 1000, 2);
    put(ch, ts, 'b', z - 1000, 3);
    double before = cache_metric("merge", "hit");
    for (int i = 0; i < 3; i++) {
        got x, y;
        merge(ch, rc, NULL, 3, a, z, &x);
        merge(ts, rt, NULL, 3, a, z, &y);
        same(&x, &y, "last bucket just ended");
        got_release(&x);
        got_release(&y);
    }
    assert_true(cache_metric("merge", "hit") == before);
    g_now = h0 + 6 * HOUR + CH_SEALED_MS;
    for (int i = 0; i < 3; i++) {
        got x, y;
        merge(ch, rc, NULL, 3, a, z, &x);
        merge(ts, rt, NULL, 3, a, z, &y);
        same(&x, &y, "last bucket sealed");
        got_release(&x);
        got_release(&y);
    }
    assert_true(cache_metric("merge", "hit") == before + 2);

    /* selected, then merged (as the query layer does): the cut buckets the
       selection has no profile in are not read; a profile another profd
       writes there in between is still in the answer */
    g_now = h0 + 8 * HOUR;
    pd_storage *other = open_cached("agg_cache");
    const int64_t a2 = h0 - 300000, z2 = h0 + 6 * HOUR + 300000;
    for (int round = 0; round < 3; round++) {
        pd_err err;
        pd_matcher m;
        PD_ASSERT_OK(pd_matcher_init(&m, PD_MATCH_EQ, "__name__", "heap", &err), &err);
        pd_series_set set;
        PD_ASSERT_OK(pd_storage_select(ch, &m, 1, a2, z2, &set, &err), &err);
        pd_matcher_release(&m);
        assert_int_equal(set.n, 3);
        uint64_t refs[3];
        for (size_t i = 0; i < 3; i++)
            refs[i] = set.v[i].ref;
        pd_series_set_release(&set);
        if (round == 2) /* after the select: this store's answer does not know */
            put(other, ts, 'c', h0 + 6 * HOUR + 60000, 2);
        got x, y;
        merge(ch, refs, (const uint32_t[]){0, 0, 0}, 3, a2, z2, &x);
        merge(ts, rt, (const uint32_t[]){0, 0, 0}, 3, a2, z2, &y);
        same(&x, &y, round == 2 ? "a write by another profd in a cut bucket" : "selected, merged");
        got_release(&x);
        got_release(&y);
    }
    pd_storage_close(other);
    pd_storage_close(ch);
    rm_tsdb(ts, dir);
}

static void test_failed_writes_stay_exact(void **state)
{
    (void)state;
    need_server();
    const int64_t h0 = 1795708800000 + 10 * HOUR;
    g_now = h0 + 5 * HOUR;
    g_n_put = 0;
    pd_storage *ch = open_store("agg_fail");
    char dir[] = "/tmp/pd_ch_aggf_XXXXXX";
    pd_storage *ts = open_tsdb(dir);
    for (size_t k = 0; k < 24; k++)
        for (int s = 0; s < 3; s++)
            put(ch, ts, (char)('a' + s), h0 + (int64_t)k * 600000 + s * 1000, k);
    pd_ch *c = open_sql("agg_fail");

    /* hour 3: a batch whose commit row fails (its samples and aggs rows land;
       newer than the series' last profile: no duplicate check reads the
       table before) */
    ch_do(c, "RENAME TABLE profiles_v4 TO profiles_v4_off");
    pd_labels ls;
    labels(&ls, "heap", "a", NULL);
    pd_err err;
    int64_t t_fail = h0 + 3 * HOUR + 59 * 60000 + 1000;
    int rc = pd_storage_append(ch, &ls, t_fail, g_prof[1].body, g_prof[1].len, &g_prof[1].p, &err);
    assert_true(rc < 0);
    /* and one in a bucket of no stored profile (its aggs rows alone there) */
    pd_labels lc;
    labels(&lc, "heap", "c", NULL);
    rc = pd_storage_append(ch, &lc, h0 + 4 * HOUR + 300000, g_prof[2].body, g_prof[2].len,
                           &g_prof[2].p, &err);
    assert_true(rc < 0);
    pd_labels_release(&lc);
    ch_do(c, "RENAME TABLE profiles_v4_off TO profiles_v4");
    /* the injection did what it says: aggs_v1 counts 2 profiles there */
    uint64_t fp = ch_u64(c,
                         "SELECT any(fingerprint) FROM stack_samples_v1 WHERE ts = %lld FORMAT "
                         "RowBinary",
                         (long long)t_fail);
    assert_int_equal(ch_u64(c,
                            "SELECT sum(n) FROM aggs_v1 WHERE fingerprint = %llu AND bucket = "
                            "%lld AND types_hash = 0 AND stack_hash = 0 FORMAT RowBinary",
                            (unsigned long long)fp, (long long)(t_fail / B)),
                     2);
    /* hour 2: a batch whose aggs rows fail (its profiles commit) */
    ch_do(c, "RENAME TABLE aggs_v1 TO aggs_v1_off");
    double errs = pd_metrics_get("profd_clickhouse_agg_write_errors_total", NULL);
    put(ch, ts, 'b', h0 + 2 * HOUR + 77000, 2);
    assert_true(pd_metrics_get("profd_clickhouse_agg_write_errors_total", NULL) > errs);
    ch_do(c, "RENAME TABLE aggs_v1_off TO aggs_v1");
    pd_labels_release(&ls);

    double raw = hours_metric("raw");
    size_t whole;
    double via = check_ranges(ch, ts, h0, "after failed writes", &whole);
    /* the two buckets of the failed writes are read raw where whole */
    double raw_n = hours_metric("raw") - raw;
    assert_true(raw_n >= 2);
    assert_int_equal((long long)(via + raw_n), (long long)whole);

    /* a restart: the same */
    pd_storage_close(ch);
    ch = open_store("agg_fail");
    double via2 = check_ranges(ch, ts, h0, "after a restart", &whole);
    assert_int_equal((long long)via2, (long long)via);
    /* a later append to a raw bucket leaves it raw, and exact */
    put(ch, ts, 'a', h0 + 3 * HOUR + 55 * 60000, 3);
    check_ranges(ch, ts, h0, "after a later append", &whole);
    pd__ch_close(c);
    pd_storage_close(ch);
    rm_tsdb(ts, dir);
}

/* Profiles per series in test_headers_exact. */
#define HK 36

/* Header changes put_hdr makes (test_headers_exact). */
enum {
    H_NONE,         /* real profiles, as produced */
    H_TIME_ZERO,    /* the last profile (c's) with time_nanos 0 */
    H_PERIOD_ZERO,  /* every period -5, the last profile's (c's) 0 */
    H_DOC_ONE,      /* one profile of b (not its bucket's first) with a doc_url */
    H_COMMENTS,     /* b's profiles of one bucket commented "x", a later one "y" */
    H_DEFAULT_TYPE, /* c's profiles with another default_sample_type than a's and b's */
    H_TYPES,        /* a's profiles of other sample types (a second part, first) */
    H_TIMES,        /* every time_nanos and duration_nanos its own (no zero) */
    H_N,
    H_RUNS /* b: other sample types in the middle; c: in its second half */
};

/* Appends profile k of series inst (a, b, c) at t — heap profile (k +
 * series) % 4 with its header changed as `how` says — to both stores.
 * (Across series, the stores fold in different orders — the TSDB series by
 * series, ClickHouse's rows in time order — so a change whose answer
 * depends on the order stays within one series or is the last profile.) */
static void put_hdr(pd_storage *ch, pd_storage *ts, char inst, int64_t t, size_t k, int how)
{
    const tprof *src = &g_prof[(k + (size_t)(inst - 'a')) % 4];
    pd_profile p;
    pd_err err;
    PD_ASSERT_OK(pd_profile_decode(&p, src->body, src->len, NULL, &err), &err);
    assert_true(p.n_sample_type >= 2);
    int64_t s0 = p.sample_type[0].type, s1 = p.sample_type[1].type;
    bool b = inst == 'b', c = inst == 'c';
    switch (how) {
    case H_TIME_ZERO:
        if (c && k == HK - 1)
            p.time_nanos = 0;
        break;
    case H_PERIOD_ZERO:
        p.period = c && k == HK - 1 ? 0 : -5;
        break;
    case H_DOC_ONE:
        if (b && k == 21)
            p.doc_url = s0;
        break;
    case H_COMMENTS:
        if (b && ((k >= 20 && k <= 22) || k == 27)) {
            p.comment = pd_arena_calloc(&p.arena, 1, sizeof *p.comment);
            p.comment[0] = k == 27 ? s1 : s0;
            p.n_comment = 1;
        }
        break;
    case H_DEFAULT_TYPE:
        p.default_sample_type = c ? s1 : s0;
        break;
    case H_TYPES:
        if (inst == 'a') {
            p.sample_type[0].type = s1;
            p.sample_type[1].type = s0;
        }
        break;
    case H_RUNS:
        if ((b && k >= 20 && k < 30) || (c && k >= 30)) {
            p.sample_type[0].type = s1;
            p.sample_type[1].type = s0;
        }
        break;
    case H_TIMES:
        p.time_nanos = t * 1000000 + (int64_t)(k * 7 % 13) * 1000;
        p.duration_nanos = (int64_t)(k + 1) * 1000003;
        break;
    }
    pd_buf body;
    pd_buf_init(&body, 0);
    assert_int_equal(pd_profile_encode(&p, true, &body), 0);
    pd_profile_release(&p);
    PD_ASSERT_OK(pd_profile_decode(&p, (const uint8_t *)body.data, body.len, NULL, &err), &err);
    pd_labels ls;
    char name[2] = {inst, 0};
    labels(&ls, "heap", name, NULL);
    PD_ASSERT_OK(pd_storage_append(ch, &ls, t, (const uint8_t *)body.data, body.len, &p, &err),
                 &err);
    PD_ASSERT_OK(pd_storage_append(ts, &ls, t, (const uint8_t *)body.data, body.len, &p, &err),
                 &err);
    pd_labels_release(&ls);
    pd_profile_release(&p);
    pd_buf_release(&body);
}

static double header_metric(const char *path)
{
    char l[32];
    snprintf(l, sizeof l, "path=\"%s\"", path);
    return pd_metrics_get("profd_clickhouse_merge_header_profiles_total", l);
}

/* Merges fold the profiles' headers from one summary per series-bucket
 * only where that is exact (uniform invariants, no zero period or time):
 * every header change below gives the TSDB's answers, read from the
 * summaries (real profiles, their times and durations each their own,
 * a second sample-type set) or from the rows (the others). */
static void test_headers_exact(void **state)
{
    (void)state;
    need_server();
    const int64_t h0 = 1795708800000 + 30 * HOUR;
    for (int how = 0; how < H_N; how++) {
        g_now = h0 + 5 * HOUR;
        g_n_put = 0;
        char db[32], when[48];
        snprintf(db, sizeof db, "agg_hdr_%d", how);
        pd_storage *ch = open_store(db);
        char dir[] = "/tmp/pd_ch_aggh_XXXXXX";
        pd_storage *ts = open_tsdb(dir);
        /* 3 series, a profile every 4 minutes for 2.4 hours (2-3 a bucket) */
        for (size_t k = 0; k < HK; k++)
            for (int s = 0; s < 3; s++)
                put_hdr(ch, ts, (char)('a' + s), h0 + (int64_t)k * 240000 + s * 1000, k, how);
        double sums = header_metric("summary"), rows = header_metric("rows");
        size_t whole;
        snprintf(when, sizeof when, "headers %d", how);
        g_any_n_series = how == H_TYPES;
        check_ranges(ch, ts, h0, when, &whole);
        g_any_n_series = false;
        double d_sums = header_metric("summary") - sums, d_rows = header_metric("rows") - rows;
        if (how == H_NONE || how == H_TYPES || how == H_TIMES) {
            assert_true(d_sums > 0);
            if (d_rows != 0)
                fail_msg("%s: %.0f profiles' headers read as rows", when, d_rows);
        } else if (d_rows == 0) {
            fail_msg("%s: no profile's header read as rows", when);
        }
        pd_storage_close(ch);
        rm_tsdb(ts, dir);
    }
}

/* pd_storage_read_type_runs after a select: equal to the TSDB's for a
 * series of one sample-type set (a), of two interleaved (b: A, B, A) and
 * of two one after the other (c: A, B); a's and c's are served by what
 * the select's own query answered (profiles_v4, the table reads name
 * where profiles_v3 is empty, renamed away meanwhile),
 * b's read its points. */
static void test_type_runs_from_select(void **state)
{
    (void)state;
    need_server();
    const int64_t h0 = 1795708800000 + 40 * HOUR;
    g_now = h0 + 5 * HOUR;
    pd_storage *ch = open_store("agg_runs");
    char dir[] = "/tmp/pd_ch_aggr_XXXXXX";
    pd_storage *ts = open_tsdb(dir);
    for (size_t k = 0; k < 60; k++)
        for (int s = 0; s < 3; s++)
            put_hdr(ch, ts, (char)('a' + s), h0 + (int64_t)k * 240000 + s * 1000, k, H_RUNS);
    const int64_t a = h0 + 600000, z = h0 + 3 * HOUR; /* from inside, a few runs each */
    pd_matcher m;
    pd_err err;
    PD_ASSERT_OK(pd_matcher_init(&m, PD_MATCH_EQ, "__name__", "heap", &err), &err);
    uint64_t rc_[3], rt[3];
    refs_of(ch, rc_);
    refs_of(ts, rt);
    pd_points pt[3];
    size_t nt[3];
    for (int k = 0; k < 3; k++) {
        memset(&pt[k], 0, sizeof pt[k]);
        PD_ASSERT_OK(pd_storage_read_type_runs(ts, rt[k], a, z, &pt[k], &nt[k], &err), &err);
    }
    pd_series_set set;
    PD_ASSERT_OK(pd_storage_select(ch, &m, 1, a, z, &set, &err), &err);
    assert_int_equal(set.n, 3);
    pd_ch *c = open_sql("agg_runs");
    ch_do(c, "RENAME TABLE profiles_v4 TO profiles_v4_off");
    for (int k = 0; k < 3; k++) {
        pd_points pc = {0};
        size_t nc = 0;
        int r = pd_storage_read_type_runs(ch, rc_[k], a, z, &pc, &nc, &err);
        if (k == 1) { /* interleaved: its points are read (the table is away) */
            assert_true(r < 0);
            continue;
        }
        PD_ASSERT_OK(r, &err);
        assert_int_equal(nc, nt[k]);
        assert_int_equal(pc.n, pt[k].n);
        assert_int_equal(pc.n, k == 0 ? 1 : 2);
        for (size_t i = 0; i < pc.n; i++) {
            assert_int_equal(pc.v[i].ts_ms, pt[k].v[i].ts_ms);
            assert_int_equal(pc.v[i].n_types, pt[k].v[i].n_types);
            for (size_t t = 0; t < pc.v[i].n_types; t++) {
                assert_string_equal(pc.v[i].types[t].type, pt[k].v[i].types[t].type);
                assert_string_equal(pc.v[i].types[t].unit, pt[k].v[i].types[t].unit);
            }
        }
        pd_points_release(&pc);
    }
    ch_do(c, "RENAME TABLE profiles_v4_off TO profiles_v4");
    /* b, read: the TSDB's three runs */
    pd_points pb = {0};
    size_t nb = 0;
    PD_ASSERT_OK(pd_storage_read_type_runs(ch, rc_[1], a, z, &pb, &nb, &err), &err);
    assert_int_equal(nb, nt[1]);
    assert_int_equal(pb.n, 3);
    assert_int_equal(pt[1].n, 3);
    for (size_t i = 0; i < pb.n; i++)
        assert_int_equal(pb.v[i].ts_ms, pt[1].v[i].ts_ms);
    pd_points_release(&pb);
    for (int k = 0; k < 3; k++)
        pd_points_release(&pt[k]);
    pd_series_set_release(&set);
    pd_matcher_release(&m);
    pd__ch_close(c);
    pd_storage_close(ch);
    rm_tsdb(ts, dir);
}

static void test_retention_drops_aggs(void **state)
{
    (void)state;
    need_server();
    const int64_t now = 1795708800000 + 20 * HOUR;
    g_now = now - 5 * DAY_MS;
    pd_storage *ch = open_store("agg_ret");
    for (size_t k = 0; k < 6; k++)
        put(ch, NULL, 'a', g_now - HOUR + (int64_t)k * 60000, k);
    g_now = now;
    for (size_t k = 0; k < 6; k++)
        put(ch, NULL, 'a', now - HOUR + (int64_t)k * 60000, k);
    pd_ch *c = open_sql("agg_ret");
    int64_t old_day = (now - 5 * DAY_MS) / DAY_MS;
    assert_true(ch_u64(c, "SELECT count() FROM aggs_v1 WHERE day = toDate(%lld) FORMAT RowBinary",
                       (long long)old_day) > 0);
    pd_err err;
    PD_ASSERT_OK(pd_storage_maintain(ch, &err), &err); /* retention: 3 days (ch_opts) */
    assert_int_equal(ch_u64(c,
                            "SELECT count() FROM aggs_v1 WHERE day <= toDate(%lld) FORMAT "
                            "RowBinary",
                            (long long)old_day),
                     0);
    assert_true(ch_u64(c, "SELECT count() FROM aggs_v1 WHERE day = toDate(%lld) FORMAT RowBinary",
                       (long long)(now / DAY_MS)) > 0);
    pd__ch_close(c);
    pd_storage_close(ch);
}

/* Every stored profile read alone from both stores: equal (the profiles
 * pushed by put, g_put). */
static void check_singles(pd_storage *ch, pd_storage *ts, const char *when)
{
    uint64_t rc[3], rt[3];
    refs_of(ch, rc);
    refs_of(ts, rt);
    pd_err err, why;
    for (size_t i = 0; i < g_n_put; i++) {
        pd_profile a, b;
        PD_ASSERT_OK(pd_storage_read_profile(ch, rc[g_put[i].s], g_put[i].ts, &a, NULL, &err),
                     &err);
        PD_ASSERT_OK(pd_storage_read_profile(ts, rt[g_put[i].s], g_put[i].ts, &b, NULL, &err),
                     &err);
        pd_err_clear(&why);
        bool eq = pd_profile_equal(&a, &b, &why);
        pd_profile_release(&a);
        pd_profile_release(&b);
        if (!eq)
            fail_msg("%s: profile %zu (series %d at %lld) differs: %s", when, i, g_put[i].s,
                     (long long)g_put[i].ts, why.msg);
    }
}

/* Schema 6 (stack_samples_v1): a version-5 database — its samples rows in
 * samples_v3, no stack_samples_v1 — opened by this profd is migrated to 6
 * and every merge (check_ranges: whole, cut, one-bucket and all-time
 * ranges, per series and grouped) and every single read equals the TSDB's,
 * from the old rows alone, then with new appends (stack_samples_v1) beside
 * them — also in buckets holding rows of both tables — through aggs_v1 and
 * raw. Once samples_v3 is empty (retention dropped its days) a maintenance
 * pass stops reading it. */
static void test_upgrade_from_v5(void **state)
{
    (void)state;
    need_server();
    const int64_t h0 = 1795708800000 + 30 * HOUR;
    g_now = h0 + 5 * HOUR;
    g_n_put = 0;
    pd_storage *ch = open_store("agg_v5");
    char dir[] = "/tmp/pd_ch_agg5_XXXXXX";
    pd_storage *ts = open_tsdb(dir);
    for (size_t k = 0; k < 12; k++) /* hours 0-1 */
        for (int s = 0; s < 3; s++)
            put(ch, ts, (char)('a' + s), h0 + (int64_t)k * 600000 + s * 1000, k + (size_t)s);
    pd_storage_close(ch);

    /* the database as a version-5 profd left it */
    pd_ch *c = open_sql("agg_v5");
    uint64_t n_old = ch_u64(c, "SELECT count() FROM stack_samples_v1 FORMAT RowBinary");
    assert_true(n_old > 0);
    ch_do(c, "INSERT INTO samples_v3 SELECT * FROM stack_samples_v1");
    ch_do(c, "DROP TABLE stack_samples_v1");
    ch_do(c, "TRUNCATE TABLE schema_version");
    ch_do(c, "INSERT INTO schema_version VALUES (1, 0), (2, 0), (3, 0), (4, 0), (5, 0)");

    ch = open_store("agg_v5");
    assert_int_equal(
        ch_u64(c, "SELECT toUInt64(max(version)) FROM schema_version FORMAT RowBinary"),
        PD_CH_SCHEMA_VERSION);
    assert_int_equal(ch_u64(c, "SELECT count() FROM stack_samples_v1 FORMAT RowBinary"), 0);
    size_t whole;
    check_ranges(ch, ts, h0, "version-5 rows", &whole);
    check_singles(ch, ts, "version-5 rows");

    /* new appends: hours 2-3, and into buckets of hours 0-1 (rows of both
       tables in one bucket, its aggs rows adding up) */
    for (size_t k = 12; k < 24; k++)
        for (int s = 0; s < 3; s++)
            put(ch, ts, (char)('a' + s), h0 + (int64_t)k * 600000 + s * 1000, k + (size_t)s);
    put(ch, ts, 'a', h0 + 5 * 60000, 1);
    put(ch, ts, 'b', h0 + HOUR + 7 * 60000, 2);
    assert_int_equal(ch_u64(c, "SELECT count() FROM samples_v3 FORMAT RowBinary"), n_old);
    assert_true(ch_u64(c, "SELECT count() FROM stack_samples_v1 FORMAT RowBinary") > 0);
    double via = check_ranges(ch, ts, h0, "version-5 and -6 rows", &whole);
    assert_true(via > 0);
    check_singles(ch, ts, "version-5 and -6 rows");
    ch_do(c, "TRUNCATE TABLE aggs_v1");
    assert_int_equal((long long)check_ranges(ch, ts, h0, "both, raw", &whole), 0);

    /* samples_v3 emptied (as retention leaves it): not read any more */
    pd_ch *c2 = open_sql("agg_v5");
    assert_true(pd__ch_legacy_samples(c2));
    ch_do(c, "TRUNCATE TABLE samples_v3");
    pd_err err;
    PD_ASSERT_OK(pd__ch_maintain(c2, &err), &err);
    assert_false(pd__ch_legacy_samples(c2));
    pd__ch_close(c2);
    pd__ch_close(c);
    pd_storage_close(ch);
    rm_tsdb(ts, dir);
}

/* Appends heap profile k % 4 of series inst at t as a version-6 profd
 * did: through c, whose location rows are schema 4's (into stacks_v3). */
static void put_v6(pd_ch *c, pd_storage *ts, char inst, int64_t t, size_t k)
{
    pd_labels ls;
    char name[2] = {inst, 0};
    labels(&ls, "heap", name, NULL);
    const tprof *p = &g_prof[k % 4];
    pd_err err;
    PD_ASSERT_OK(pd__ch_append(c, &ls, t, p->body, p->len, &p->p, &err), &err);
    PD_ASSERT_OK(pd_storage_append(ts, &ls, t, p->body, p->len, &p->p, &err), &err);
    pd_labels_release(&ls);
    assert_true(g_n_put < 1024);
    g_put[g_n_put].s = inst - 'a';
    g_put[g_n_put++].ts = t;
}

/* Schema 7 (locations_v1): a version-6 database — its location rows in
 * stacks_v3, in schema 4's format, no locations_v1 — opened by this profd
 * is migrated to 7, and every merge and single read equals the TSDB's: from
 * the old rows alone (their locations looked up in stacks_v3), then with
 * new appends of the same stacks beside them (stack rows of one key
 * naming either kind of location, before and after ClickHouse merges them
 * into one), through aggs_v1 and raw. */
static void test_upgrade_from_v6(void **state)
{
    (void)state;
    need_server();
    const int64_t h0 = 1795708800000 + 30 * HOUR;
    g_now = h0 + 5 * HOUR;
    g_n_put = 0;
    char dir[] = "/tmp/pd_ch_agg6_XXXXXX";
    pd_storage *ts = open_tsdb(dir);
    pd_ch *c = open_sql("agg_v6");
    c->loc_version = 4;
    for (size_t k = 0; k < 12; k++) /* hours 0-1 */
        for (int s = 0; s < 3; s++)
            put_v6(c, ts, (char)('a' + s), h0 + (int64_t)k * 600000 + s * 1000, k + (size_t)s);
    pd__ch_close(c);

    /* the database as a version-6 profd left it */
    c = open_sql("agg_v6");
    assert_int_equal(ch_u64(c, "SELECT count() FROM locations_v1 FORMAT RowBinary"), 0);
    uint64_t n_old = ch_u64(c, "SELECT countIf(substring(stack, 1, 3) = unhex('800002')) FROM "
                               "stacks_v3 FORMAT RowBinary");
    assert_true(n_old > 0);
    ch_do(c, "DROP TABLE locations_v1");
    ch_do(c, "TRUNCATE TABLE schema_version");
    ch_do(c, "INSERT INTO schema_version VALUES (1, 0), (2, 0), (3, 0), (4, 0), (5, 0), (6, 0)");

    pd_storage *ch = open_store("agg_v6");
    assert_int_equal(
        ch_u64(c, "SELECT toUInt64(max(version)) FROM schema_version FORMAT RowBinary"),
        PD_CH_SCHEMA_VERSION);
    assert_int_equal(ch_u64(c, "SELECT count() FROM locations_v1 FORMAT RowBinary"), 0);
    size_t whole;
    check_ranges(ch, ts, h0, "version-6 rows", &whole);
    check_singles(ch, ts, "version-6 rows");

    /* new appends: hours 2-3, and into buckets of hours 0-1 — the same
       stacks (same day), their rows now naming schema-7 locations */
    for (size_t k = 12; k < 24; k++)
        for (int s = 0; s < 3; s++)
            put(ch, ts, (char)('a' + s), h0 + (int64_t)k * 600000 + s * 1000, k + (size_t)s);
    put(ch, ts, 'a', h0 + 5 * 60000, 1);
    put(ch, ts, 'b', h0 + HOUR + 7 * 60000, 2);
    assert_true(ch_u64(c, "SELECT count() FROM locations_v1 FORMAT RowBinary") > 0);
    assert_int_equal(ch_u64(c, "SELECT countIf(substring(stack, 1, 3) = unhex('800002')) FROM "
                               "stacks_v3 FORMAT RowBinary"),
                     n_old);
    double via = check_ranges(ch, ts, h0, "version-6 and -7 rows", &whole);
    assert_true(via > 0);
    check_singles(ch, ts, "version-6 and -7 rows");
    ch_do(c, "OPTIMIZE TABLE stacks_v3 FINAL");
    check_singles(ch, ts, "version-6 and -7 rows, stacks merged");
    ch_do(c, "TRUNCATE TABLE aggs_v1");
    assert_int_equal((long long)check_ranges(ch, ts, h0, "both, raw", &whole), 0);
    pd__ch_close(c);
    pd_storage_close(ch);
    rm_tsdb(ts, dir);
}

/* Schema 8 (profiles_v4, read through the Merge table profiles_all): a
 * version-7 database — its profiles rows in profiles_v3, no profiles_v4 —
 * opened by this profd is migrated to 8, and every merge and single read
 * equals the TSDB's: from the old rows alone, then with new appends beside
 * them (into buckets the old rows have too), through aggs_v1 and raw; a
 * profile already stored in profiles_v3 is refused again (PD_EEXIST), and
 * new rows go to profiles_v4 alone. */
static void test_upgrade_from_v7(void **state)
{
    (void)state;
    need_server();
    const int64_t h0 = 1795708800000 + 80 * HOUR;
    g_now = h0 + 5 * HOUR;
    g_n_put = 0;
    char dir[] = "/tmp/pd_ch_agg7_XXXXXX";
    pd_storage *ts = open_tsdb(dir);
    pd_ch *c = open_sql("agg_v7");
    c->profiles_table = "profiles_v3";
    for (size_t k = 0; k < 12; k++) /* hours 0-1 */
        for (int s = 0; s < 3; s++)
            put_v6(c, ts, (char)('a' + s), h0 + (int64_t)k * 600000 + s * 1000, k + (size_t)s);
    pd__ch_close(c);

    /* the database as a version-7 profd left it */
    c = open_sql("agg_v7");
    assert_int_equal(ch_u64(c, "SELECT count() FROM profiles_v4 FORMAT RowBinary"), 0);
    assert_int_equal(ch_u64(c, "SELECT count() FROM profiles_v3 FORMAT RowBinary"), 36);
    ch_do(c, "DROP TABLE profiles_all");
    ch_do(c, "DROP TABLE profiles_v4");
    ch_do(c, "TRUNCATE TABLE schema_version");
    ch_do(c, "INSERT INTO schema_version VALUES (1, 0), (2, 0), (3, 0), (4, 0), (5, 0), (6, 0), "
             "(7, 0)");

    pd_storage *ch = open_store("agg_v7");
    assert_int_equal(
        ch_u64(c, "SELECT toUInt64(max(version)) FROM schema_version FORMAT RowBinary"),
        PD_CH_SCHEMA_VERSION);
    assert_int_equal(ch_u64(c, "SELECT count() FROM profiles_all FORMAT RowBinary"), 36);
    size_t whole;
    check_ranges(ch, ts, h0, "version-7 rows", &whole);
    check_singles(ch, ts, "version-7 rows");

    /* stored before the upgrade: refused again, nothing written */
    {
        pd_labels ls;
        labels(&ls, "heap", "b", NULL);
        const tprof *p = &g_prof[0];
        pd_err err;
        PD_ASSERT_RC(pd_storage_append(ch, &ls, h0 + 1000, p->body, p->len, &p->p, &err), PD_EEXIST,
                     &err);
        pd_labels_release(&ls);
        assert_int_equal(ch_u64(c, "SELECT count() FROM profiles_v4 FORMAT RowBinary"), 0);
    }

    /* new appends: hours 2-3, and into buckets of hours 0-1 */
    for (size_t k = 12; k < 24; k++)
        for (int s = 0; s < 3; s++)
            put(ch, ts, (char)('a' + s), h0 + (int64_t)k * 600000 + s * 1000, k + (size_t)s);
    put(ch, ts, 'a', h0 + 5 * 60000, 1);
    put(ch, ts, 'b', h0 + HOUR + 7 * 60000, 2);
    assert_int_equal(ch_u64(c, "SELECT count() FROM profiles_v4 FORMAT RowBinary"), 38);
    assert_int_equal(ch_u64(c, "SELECT count() FROM profiles_v3 FORMAT RowBinary"), 36);
    double via = check_ranges(ch, ts, h0, "version-7 and -8 rows", &whole);
    assert_true(via > 0);
    check_singles(ch, ts, "version-7 and -8 rows");
    ch_do(c, "TRUNCATE TABLE aggs_v1");
    assert_int_equal((long long)check_ranges(ch, ts, h0, "both, raw", &whole), 0);

    /* once profiles_v3 is empty (as retention leaves it), the next
       maintenance switches reads to profiles_v4 alone: with the Merge table
       renamed away a read fails before and succeeds after */
    uint64_t rc_[3], rt[3];
    refs_of(ch, rc_);
    refs_of(ts, rt);
    ch_do(c, "TRUNCATE TABLE profiles_v3");
    ch_do(c, "RENAME TABLE profiles_all TO profiles_all_off");
    const int64_t t_new = h0 + 12 * 600000;
    pd_profile a, b;
    pd_err err, why;
    assert_true(pd_storage_read_profile(ch, rc_[0], t_new, &a, NULL, &err) < 0);
    PD_ASSERT_OK(pd_storage_maintain(ch, &err), &err);
    PD_ASSERT_OK(pd_storage_read_profile(ch, rc_[0], t_new, &a, NULL, &err), &err);
    PD_ASSERT_OK(pd_storage_read_profile(ts, rt[0], t_new, &b, NULL, &err), &err);
    pd_err_clear(&why);
    assert_true(pd_profile_equal(&a, &b, &why));
    pd_profile_release(&a);
    pd_profile_release(&b);
    ch_do(c, "RENAME TABLE profiles_all_off TO profiles_all");
    pd__ch_close(c);
    pd_storage_close(ch);
    rm_tsdb(ts, dir);
}

/* A writer with deferred aggs_v1 sums: idle_ms (< 0: per batch) on the
 * test's clock (g_now), pending cap (0: default). */
static pd_ch *open_w(const char *db, int64_t idle_ms, size_t cap)
{
    const char *urls[] = {g_url};
    pd_storage_options o = ch_opts(urls, 1, db);
    o.clickhouse.agg_flush_idle_ms = idle_ms;
    o.clickhouse.agg_pending_bytes = cap;
    pd_ch *c;
    pd_err err;
    PD_ASSERT_OK(pd__ch_open(&o, &c, &err), &err);
    return c;
}

/* aggs_v1's reconciliation rows in buckets [b0, b1]: their count, their
 * summed n. */
static uint64_t recon_rows(pd_ch *c, int64_t b0, int64_t b1)
{
    return ch_u64(c,
                  "SELECT count() FROM aggs_v1 WHERE types_hash = 0 AND stack_hash = 0 AND "
                  "bucket BETWEEN %lld AND %lld FORMAT RowBinary",
                  (long long)b0, (long long)b1);
}

static uint64_t recon_sum_n(pd_ch *c, int64_t b0, int64_t b1)
{
    return ch_u64(c,
                  "SELECT sum(n) FROM aggs_v1 WHERE types_hash = 0 AND stack_hash = 0 AND "
                  "bucket BETWEEN %lld AND %lld FORMAT RowBinary",
                  (long long)b0, (long long)b1);
}

static double pending_buckets(void)
{
    return pd_metrics_get("profd_clickhouse_agg_pending_buckets", NULL);
}

/* Pushes series a, b, c every 2 minutes over [t0, t0 + 60 min): 5
 * profiles a series-bucket, 18 series-buckets. */
static void push_hour(pd_ch *w, pd_storage *ts, int64_t t0)
{
    for (size_t k = 0; k < 30; k++)
        for (int s = 0; s < 3; s++)
            put_v6(w, ts, (char)('a' + s), t0 + (int64_t)k * 120000 + s * 1000, k + (size_t)s);
}

static void test_deferred_sums(void **state)
{
    (void)state;
    need_server();
    const int64_t h0 = 1795708800000 + 50 * HOUR;
    g_now = h0 + 5 * HOUR;
    g_n_put = 0;
    char dir[] = "/tmp/pd_ch_aggw_XXXXXX";
    pd_storage *ts = open_tsdb(dir);
    pd_storage *ch = open_store("aggw"); /* a reader: another profd (waits for the server) */
    pd_ch *w = open_w("aggw", 60000, 0);
    const int64_t b0 = h0 / B;

    /* (a) hour 0: nothing written while the buckets are not idle */
    double pend = pending_buckets();
    push_hour(w, ts, h0);
    assert_int_equal(ch_u64(w, "SELECT count() FROM aggs_v1 FORMAT RowBinary"), 0);
    assert_int_equal((long long)(pending_buckets() - pend), 18);
    /* (b) merges meanwhile: exact, every whole bucket raw */
    size_t whole;
    double raw = hours_metric("raw");
    assert_int_equal((long long)check_ranges(ch, ts, h0, "pending", &whole), 0);
    assert_true(whole > 0);
    assert_int_equal((long long)(hours_metric("raw") - raw), (long long)whole);
    /* not idle yet (59.999 s): still nothing */
    g_now += 59999;
    pd_err err;
    PD_ASSERT_OK(pd__ch_maintain(w, &err), &err);
    assert_int_equal(ch_u64(w, "SELECT count() FROM aggs_v1 FORMAT RowBinary"), 0);
    /* idle: one reconciliation row per series-bucket, n = its 5 profiles */
    g_now += 1;
    PD_ASSERT_OK(pd__ch_maintain(w, &err), &err);
    assert_int_equal(recon_rows(w, b0, b0 + 5), 18);
    assert_int_equal(recon_sum_n(w, b0, b0 + 5), 90);
    assert_int_equal(ch_u64(w,
                            "SELECT count() FROM aggs_v1 WHERE types_hash = 0 AND stack_hash = 0 "
                            "AND n != 5 FORMAT RowBinary"),
                     0);
    assert_int_equal((long long)(pending_buckets() - pend), 0);
    double via = check_ranges(ch, ts, h0, "idle, written", &whole);
    assert_int_equal((long long)via, (long long)whole);

    /* (c) hour 1: close writes what is pending */
    push_hour(w, ts, h0 + HOUR);
    assert_int_equal(recon_rows(w, b0 + 6, b0 + 11), 0);
    pd__ch_close(w);
    pd_ch *q = open_sql("aggw");
    assert_int_equal(recon_rows(q, b0 + 6, b0 + 11), 18);
    assert_int_equal(recon_sum_n(q, b0 + 6, b0 + 11), 90);
    via = check_ranges(ch, ts, h0, "closed", &whole);
    assert_int_equal((long long)via, (long long)whole);

    /* (d) hour 2, and 2 more profiles of a's first bucket of hour 1 (written
       in part before): a crash loses them; merges exact, those raw */
    w = open_w("aggw", 60000, 0);
    push_hour(w, ts, h0 + 2 * HOUR);
    put_v6(w, ts, 'a', h0 + HOUR + 30000, 1);
    put_v6(w, ts, 'a', h0 + HOUR + 90000, 2);
    pd__ch_aggw_drop(w); /* the crash: pending sums gone unwritten */
    pd__ch_close(w);
    assert_int_equal(recon_rows(q, b0 + 12, b0 + 17), 0);
    assert_int_equal(recon_sum_n(q, b0 + 6, b0 + 6), 15); /* 3 series x 5, not a's 2 more */
    raw = hours_metric("raw");
    via = check_ranges(ch, ts, h0, "after a crash", &whole);
    double raw_n = hours_metric("raw") - raw;
    assert_true(raw_n > 0);
    assert_int_equal((long long)(via + raw_n), (long long)whole);
    assert_true(via > 0);

    /* the pending cap: written at once, oldest first (hour 3, a 1-byte cap) */
    double mem = pd_metrics_get("profd_clickhouse_agg_flushed_buckets_total", "reason=\"memory\"");
    w = open_w("aggw", 60000, 1);
    put_v6(w, ts, 'b', h0 + 3 * HOUR + 1000, 1);
    put_v6(w, ts, 'b', h0 + 3 * HOUR + 700000, 2);
    PD_ASSERT_OK(pd__ch_maintain(w, &err), &err); /* after the writer's flush */
    assert_int_equal(recon_rows(q, b0 + 18, b0 + 19), 2);
    assert_true(pd_metrics_get("profd_clickhouse_agg_flushed_buckets_total", "reason=\"memory\"") >=
                mem + 2);
    pd__ch_close(w);

    /* (e) idle 0: per profile beside every batch, at once, as before */
    w = open_w("aggw", -1, 0);
    for (int k = 0; k < 3; k++)
        put_v6(w, ts, 'c', h0 + 3 * HOUR + 1200000 + k * 1000, (size_t)k);
    /* (rows of one key may be merged already: their n summed) */
    assert_int_equal(recon_sum_n(w, b0 + 20, b0 + 20), 3);
    assert_int_equal(pd_metrics_get("profd_clickhouse_agg_pending_buckets", NULL), 0);
    pd__ch_close(w);
    raw = hours_metric("raw");
    via = check_ranges(ch, ts, h0, "at the end", &whole);
    assert_int_equal((long long)(via + hours_metric("raw") - raw), (long long)whole);
    pd__ch_close(q);
    pd_storage_close(ch);
    rm_tsdb(ts, dir);
}

/* The writer writes an idle series-bucket by itself (its own timed wake-up,
 * no maintenance pass): the monotonic clock, idle 200 ms; polled until the
 * reconciliation row is there (a liveness check, no duration asserted). */
static void test_deferred_sums_writer_wakes(void **state)
{
    (void)state;
    need_server();
    const char *urls[] = {g_url};
    pd_storage_options o = ch_opts(urls, 1, "aggw_wake");
    o.clock_ms = NULL;                         /* the real clocks: pushes dated now */
    o.clickhouse.agg_flush_idle_ms = 200;      /* past the batch: the wake-up writes it */
    pd_storage_close(open_store("aggw_wake")); /* waits for the server */
    pd_ch *w;
    pd_err err;
    PD_ASSERT_OK(pd__ch_open(&o, &w, &err), &err);
    pd_labels ls;
    labels(&ls, "heap", "a", NULL);
    int64_t now = pd_now_ms();
    for (int k = 0; k < 2; k++)
        PD_ASSERT_OK(pd__ch_append(w, &ls, now - 1000 + k, g_prof[k].body, g_prof[k].len,
                                   &g_prof[k].p, &err),
                     &err);
    pd_labels_release(&ls);
    uint64_t n = 0;
    for (int i = 0; i < 600 && n < 2; i++) { /* up to a minute */
        n = ch_u64(w, "SELECT sum(n) FROM aggs_v1 WHERE types_hash = 0 AND stack_hash = 0 "
                      "FORMAT RowBinary");
        if (n < 2)
            usleep(100000);
    }
    assert_int_equal(n, 2);
    pd__ch_close(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merges_equal_embedded),
        cmocka_unit_test(test_merges_cached),
        cmocka_unit_test(test_failed_writes_stay_exact),
        cmocka_unit_test(test_headers_exact),
        cmocka_unit_test(test_type_runs_from_select),
        cmocka_unit_test(test_retention_drops_aggs),
        cmocka_unit_test(test_upgrade_from_v5),
        cmocka_unit_test(test_upgrade_from_v6),
        cmocka_unit_test(test_upgrade_from_v7),
        cmocka_unit_test(test_deferred_sums),
        cmocka_unit_test(test_deferred_sums_writer_wakes),
    };
    if (getenv("PD_TEST_FILTER")) /* e.g. PD_TEST_FILTER=test_deferred_sums */
        cmocka_set_test_filter(getenv("PD_TEST_FILTER"));
    int rc = load_all(NULL);
    if (rc == 0)
        rc = start_server(NULL);
    if (rc != 0)
        return 1;
    return cmocka_run_group_tests(tests, NULL, stop_server);
}
