/* Unit tests of src/storage/clickhouse/ (the ClickHouse backend of
 * storage.h) with the real profiles of PD_TESTDATA/pprof.
 *
 * Without a server: the stack codec (ch_stack.c) — every sample of every
 * real profile encoded and rebuilt gives a profile pd_profile_equal to the
 * original; a truncated or altered blob is PD_ECORRUPT, never a crash; SQL
 * literals and days.
 *
 * With a server (a clickhouse-server this test starts on free loopback
 * ports, own temp data dir; skipped with a message where it is not
 * installed): storage.h through pd_storage_open with backend
 * PD_STORAGE_CLICKHOUSE and a clock the test sets — appends from 8 threads
 * at once (batched), PD_EEXIST in one batch and across batches, select with
 * each matcher type and label values that need SQL escaping, points =
 * pd_profile_totals, profiles = the bytes, aggregate sums = the totals,
 * retention dropping day partitions, a newer schema refused, a dead URL
 * named in the error, failover to the second URL.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include "../pd_test.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/labels.h"
#include "base/time.h"
#include "pprof/pprof.h"
#include "storage/clickhouse/ch_int.h"
#include "base/metrics.h"
#include "storage/storage.h"
#include "span_fixture.h"

#ifndef PD_TESTDATA
#error "PD_TESTDATA must be defined"
#endif

#include "ch_fixture.h"

/* ---- the stack codec ---- */

/* Rebuilds p from its samples' blobs (the header copied as strings). */
/* Sample i's stacks row into blob: the schema-3 layout (ver 3), or the
 * schema-4 one, its location rows (schema 4's or, ver 7, 7's) added to
 * blobs (RowBinary Strings, as a read fetches them) under their keys in
 * blob_at. */
static const int VERS[3] = {3, 4, 7};

static void encode_sample(const pd_profile *p, size_t i, int ver, pd_buf *blob, pd_u64map *blob_at,
                          pd_buf *blobs)
{
    if (ver == 3) {
        assert_int_equal(pd__ch_stack_encode_v3(p, i, blob), 0);
        return;
    }
    uint64_t keys[512];
    const pd_pprof_sample *sm = &p->sample[i];
    assert_true(sm->n_location <= 512);
    pd_buf loc;
    pd_buf_init(&loc, 0);
    for (size_t k = 0; k < sm->n_location; k++) {
        pd_buf_reset(&loc);
        assert_int_equal(pd__ch_loc_encode(p, sm->location_id[k], ver, &loc), 0);
        assert_int_equal(pd__ch_row_is_location_v7((const uint8_t *)loc.data, loc.len), ver == 7);
        keys[k] = XXH3_64bits(loc.data, loc.len);
        if (!pd_u64map_get(blob_at, keys[k], NULL)) {
            assert_int_equal(pd_u64map_put(blob_at, keys[k], blobs->len), 0);
            assert_int_equal(pd__ch_put_str(blobs, (const char *)loc.data, loc.len), 0);
        }
    }
    pd_buf_release(&loc);
    assert_int_equal(pd__ch_stack_encode(p, i, keys, blob), 0);
}

/* p rebuilt from its samples' stacks rows (schema 3, 4 or 7) */
static void rebuild(const pd_profile *p, int ver, pd_profile *out)
{
    pd_profile_builder *b;
    pd_err err;
    assert_int_equal(pd_profile_builder_new(NULL, &b), 0);
    for (size_t i = 0; i < p->n_sample_type; i++)
        PD_ASSERT_OK(pd_profile_builder_sample_type(b, pd_profile_str(p, p->sample_type[i].type),
                                                    pd_profile_str(p, p->sample_type[i].unit),
                                                    &err) < 0,
                     &err);
    PD_ASSERT_OK(pd_profile_builder_period(b, pd_profile_str(p, p->period_type.type),
                                           pd_profile_str(p, p->period_type.unit), p->period, &err),
                 &err);
    for (size_t i = 0; i < p->n_comment; i++)
        PD_ASSERT_OK(pd_profile_builder_comment(b, pd_profile_str(p, p->comment[i]), &err), &err);
    pd_profile *h = pd_profile_builder_profile(b);
    h->time_nanos = p->time_nanos;
    h->duration_nanos = p->duration_nanos;
    h->drop_frames = pd_profile_builder_string(b, pd_profile_str(p, p->drop_frames), &err);
    h->keep_frames = pd_profile_builder_string(b, pd_profile_str(p, p->keep_frames), &err);
    h->default_sample_type =
        pd_profile_builder_string(b, pd_profile_str(p, p->default_sample_type), &err);
    h->doc_url = pd_profile_builder_string(b, pd_profile_str(p, p->doc_url), &err);
    pd_buf blob, blobs;
    pd_buf_init(&blob, 0);
    pd_buf_init(&blobs, 0);
    pd_u64map blob_at;
    pd_u64map_init(&blob_at);
    ch_locs L = {&blob_at, &blobs, {0}};
    pd_u64map_init(&L.built);
    for (size_t i = 0; i < p->n_sample; i++) {
        pd_buf_reset(&blob);
        encode_sample(p, i, ver, &blob, &blob_at, &blobs);
        PD_ASSERT_OK(
            pd__ch_stack_add(b, (const uint8_t *)blob.data, blob.len, p->sample[i].value, &L, &err),
            &err);
    }
    pd_buf_release(&blob);
    pd_buf_release(&blobs);
    pd_u64map_release(&blob_at);
    pd_u64map_release(&L.built);
    PD_ASSERT_OK(pd_profile_builder_finish(b, out, &err), &err);
    pd_profile_builder_free(b);
}

/* The writer keys a stack from its profile's locations encoded once each
 * (ch_loc_cache): every key equals XXH3-64 of pd__ch_stack_encode_v3's blob
 * (the key every schema's rows carry), and every location's entry its row
 * and that row's hash, on every real profile; an id the profile does not
 * resolve (UINT64_MAX included) too. */
static void test_stack_key_from_cache(void **state)
{
    (void)state;
    assert_true(g_n >= N_GO);
    pd_buf blob;
    pd_buf_init(&blob, 0);
    size_t keys = 0;
    for (size_t k = 0; k < 2 * g_n; k++) {
        const pd_profile *p = &g_prof[k % g_n].p;
        int ver = k < g_n ? PD_CH_SCHEMA_VERSION : 4; /* rows as written, and as 4-6 wrote them */
        ch_loc_cache lc;
        pd__ch_loc_cache_init(&lc, p, ver);
        for (size_t i = 0; i < p->n_sample; i++) {
            uint64_t h = 0;
            assert_int_equal(pd__ch_stack_key(&lc, i, &h), 0);
            pd_buf_reset(&blob);
            assert_int_equal(pd__ch_stack_encode_v3(p, i, &blob), 0);
            if (h != XXH3_64bits(blob.data, blob.len))
                fail_msg("%s sample %zu (rows of schema %d): cached key differs from the blob's",
                         g_prof[k % g_n].path, i, ver);
            keys++;
        }
        uint64_t ids[] = {p->n_location ? p->location[0].id : 1, UINT64_MAX, 987654321};
        for (size_t j = 0; j < 3; j++) {
            size_t at, again;
            assert_int_equal(pd__ch_loc_cache_get(&lc, ids[j], &at), 0);
            assert_int_equal(pd__ch_loc_cache_get(&lc, ids[j], &again), 0);
            assert_int_equal(at, again);
            pd_buf_reset(&blob);
            assert_int_equal(pd__ch_loc_encode(p, ids[j], ver, &blob), 0);
            assert_int_equal(lc.ent[at].len, blob.len);
            assert_memory_equal(lc.bytes.data + lc.ent[at].off, blob.data, blob.len);
            assert_true(lc.ent[at].key == XXH3_64bits(blob.data, blob.len));
        }
        pd__ch_loc_cache_release(&lc);
    }
    print_message("%zu stack keys of %zu profiles, twice\n", keys, g_n);
    assert_true(keys > 100);
    pd_buf_release(&blob);
}

static void test_stack_roundtrip_real_profiles(void **state)
{
    (void)state;
    assert_true(g_n >= N_GO);
    size_t with_dups = 0;
    for (size_t k = 0; k < g_n; k++) {
        const pd_profile *p = &g_prof[k].p;
        /* samples with equal blobs (equal frames and labels: Go's heap
           profiles have a few) are one sample rebuilt, values added */
        pd_u64map distinct;
        pd_u64map_init(&distinct);
        pd_buf blob;
        pd_buf_init(&blob, 0);
        for (size_t i = 0; i < p->n_sample; i++) {
            pd_buf_reset(&blob);
            assert_int_equal(pd__ch_stack_encode_v3(p, i, &blob), 0);
            pd_u64map_put(&distinct, XXH3_64bits(blob.data, blob.len), 1);
        }
        pd_buf_release(&blob);
        for (int f = 0; f < 3; f++) {
            pd_profile q;
            rebuild(p, VERS[f], &q);
            pd_err why;
            if (distinct.len == p->n_sample) {
                if (!pd_profile_equal(p, &q, &why))
                    fail_msg("%s rebuilt from its stack blobs (schema %d) differs: %s",
                             g_prof[k].path, VERS[f], why.msg);
            } else {
                with_dups += f == 0;
                assert_int_equal(q.n_sample, distinct.len);
                int64_t a[8], b[8];
                pd_profile_totals(p, a);
                pd_profile_totals(&q, b);
                assert_memory_equal(a, b, p->n_sample_type * sizeof a[0]);
            }
            pd_profile_release(&q);
        }
        pd_u64map_release(&distinct);
    }
    assert_true(with_dups < g_n); /* most compared sample by sample */
}

/* Schema 7's location rows store a function's system name only where it
 * differs from its name: functions whose system name differs (a C++
 * mangled name), equals the name (Go) or is empty all come back as they
 * were, in every layout; and a Go profile's location rows are shorter than
 * schema 4's. */
static void test_location_system_names(void **state)
{
    (void)state;
    /* a profile whose samples' blobs all differ (compared sample by sample) */
    pd_profile *p = NULL;
    for (size_t k = 0; k < g_n && !p; k++) {
        pd_u64map distinct;
        pd_u64map_init(&distinct);
        pd_buf blob;
        pd_buf_init(&blob, 0);
        for (size_t i = 0; i < g_prof[k].p.n_sample; i++) {
            pd_buf_reset(&blob);
            assert_int_equal(pd__ch_stack_encode_v3(&g_prof[k].p, i, &blob), 0);
            pd_u64map_put(&distinct, XXH3_64bits(blob.data, blob.len), 1);
        }
        if (distinct.len == g_prof[k].p.n_sample && g_prof[k].p.n_function >= 3)
            p = &g_prof[k].p; /* restored below */
        pd_buf_release(&blob);
        pd_u64map_release(&distinct);
    }
    assert_non_null(p);
    size_t len[2] = {0, 0};
    for (int f = 1; f < 3; f++)
        for (size_t l = 1; l <= p->n_location; l++) {
            pd_buf loc;
            pd_buf_init(&loc, 0);
            assert_int_equal(pd__ch_loc_encode(p, l, VERS[f], &loc), 0);
            len[f - 1] += loc.len;
            pd_buf_release(&loc);
        }
    assert_true(len[1] < len[0]);
    int64_t *was = calloc(p->n_function, sizeof *was);
    assert_non_null(was);
    for (size_t i = 0; i < p->n_function; i++) {
        was[i] = p->function[i].system_name;
        if (i % 3 == 1) /* another string: the file's */
            p->function[i].system_name = p->function[i].filename;
        else if (i % 3 == 2)
            p->function[i].system_name = 0;
    }
    for (int f = 0; f < 3; f++) {
        pd_profile q;
        rebuild(p, VERS[f], &q);
        pd_err why;
        if (!pd_profile_equal(p, &q, &why))
            fail_msg("system names (schema %d) differ: %s", VERS[f], why.msg);
        pd_profile_release(&q);
    }
    for (size_t i = 0; i < p->n_function; i++)
        p->function[i].system_name = was[i];
    free(was);
}

static void test_stack_blob_damage(void **state)
{
    (void)state;
    const pd_profile *p = &g_prof[0].p;
    size_t i = 0;
    while (i < p->n_sample && p->sample[i].n_location < 3)
        i++;
    assert_true(i < p->n_sample);
    for (int f = 0; f < 3; f++) {
        int ver = VERS[f];
        pd_buf blob, blobs;
        pd_buf_init(&blob, 0);
        pd_buf_init(&blobs, 0);
        pd_u64map blob_at;
        pd_u64map_init(&blob_at);
        encode_sample(p, i, ver, &blob, &blob_at, &blobs);
        int64_t v[8] = {1, 1, 1, 1, 1, 1, 1, 1};
        size_t bad = 0;
        /* every truncation and every single-byte change of the stack row
           (and, schema 4, of its location rows): an error or a sample,
           never a crash */
        pd_buf *target[2] = {&blob, &blobs};
        for (int tg = 0; tg < 1 + (ver > 3); tg++) {
            pd_buf *t = target[tg];
            for (size_t cut = 0; tg == 0 && cut < blob.len; cut++) {
                pd_profile_builder *b;
                pd_err err;
                ch_locs L = {&blob_at, &blobs, {0}};
                pd_u64map_init(&L.built);
                assert_int_equal(pd_profile_builder_new(NULL, &b), 0);
                for (size_t k = 0; k < p->n_sample_type; k++)
                    pd_profile_builder_sample_type(b, "t", "u", &err);
                int rc = pd__ch_stack_add(b, (const uint8_t *)blob.data, cut, v, &L, &err);
                assert_int_equal(rc, PD_ECORRUPT);
                pd_profile_builder_free(b);
                pd_u64map_release(&L.built);
            }
            for (size_t pos = 0; pos < t->len; pos++) {
                for (int x = 1; x < 256; x += 37) {
                    pd_profile_builder *b;
                    pd_err err;
                    ch_locs L = {&blob_at, &blobs, {0}};
                    pd_u64map_init(&L.built);
                    assert_int_equal(pd_profile_builder_new(NULL, &b), 0);
                    for (size_t k = 0; k < p->n_sample_type; k++)
                        pd_profile_builder_sample_type(b, "t", "u", &err);
                    t->data[pos] ^= (char)x;
                    int rc = pd__ch_stack_add(b, (const uint8_t *)blob.data, blob.len, v, &L, &err);
                    t->data[pos] ^= (char)x;
                    assert_true(rc == 0 || rc < 0);
                    bad += rc < 0;
                    pd_profile_builder_free(b);
                    pd_u64map_release(&L.built);
                }
            }
        }
        assert_true(bad > 0);
        pd_buf_release(&blob);
        pd_buf_release(&blobs);
        pd_u64map_release(&blob_at);
    }
}

static void test_sql_literals(void **state)
{
    (void)state;
    pd_buf b;
    pd_buf_init(&b, 0);
    assert_int_equal(pd__ch_put_sql_string(&b, "it's a \\ path", 13), 0);
    pd_buf_putc(&b, 0);
    assert_string_equal(b.data, "'it\\'s a \\\\ path'");
    pd_buf_reset(&b);
    pd__ch_put_sql_day(&b, pd__ch_day(INT64_MIN));
    pd_buf_putc(&b, 0);
    assert_string_equal(b.data, "'1970-01-01'");
    pd_buf_reset(&b);
    pd__ch_put_sql_day(&b, pd__ch_day(INT64_MAX));
    pd_buf_putc(&b, 0);
    assert_string_equal(b.data, "'2105-12-31'");
    pd_buf_reset(&b);
    pd__ch_put_sql_day(&b, pd__ch_day(1795710738924)); /* 2026-11-26T... */
    pd_buf_putc(&b, 0);
    assert_string_equal(b.data, "'2026-11-26'");
    pd_buf_release(&b);
}

typedef struct writer_arg {
    pd_storage *s;
    int id;
    int fails;
} writer_arg;

static const int64_t DAY = 86400000;

static void *writer(void *a)
{
    writer_arg *w = a;
    char inst[32];
    snprintf(inst, sizeof inst, "w%d", w->id);
    pd_labels ls;
    labels(&ls, "heap", inst, NULL);
    for (int i = 0; i < 10; i++) {
        const tprof *t = &g_prof[i % 4];
        pd_err err;
        if (pd_storage_append(w->s, &ls, g_now - 3600000 + i * 1000, t->body, t->len, &t->p,
                              &err) != 0) {
            fprintf(stderr, "writer %d: %s\n", w->id, err.msg);
            w->fails++;
        }
    }
    pd_labels_release(&ls);
    return NULL;
}

/* The largest read_rows (system.query_log) of the queries starting with
 * `prefix` that finished after the call to `since` (server seconds). */
static uint64_t queries_since(pd_ch *c, uint64_t since, const char *prefix, uint64_t *n_queries);

/* The most rows one SELECT starting with prefix read since the mark. */
static uint64_t rows_read_since(pd_ch *c, uint64_t since, const char *prefix)
{
    uint64_t n;
    return queries_since(c, since, prefix, &n);
}

/* The same, and *n_queries: how many ran (at least one). */
static uint64_t queries_since(pd_ch *c, uint64_t since, const char *prefix, uint64_t *n_queries)
{
    pd_err err;
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT count(), max(read_rows) FROM system.query_log WHERE type = 2 AND "
             "toUInt64(event_time) >= %llu AND startsWith(query, '%s') FORMAT RowBinary",
             (unsigned long long)since, prefix);
    for (int i = 0; i < 100; i++) { /* the log is written asynchronously */
        PD_ASSERT_OK(pd__ch_exec(c, "SYSTEM FLUSH LOGS", NULL, 0, NULL, NULL, NULL, &err), &err);
        pd_buf resp;
        pd_buf_init(&resp, 0);
        PD_ASSERT_OK(pd__ch_exec(c, sql, NULL, 0, NULL, &resp, NULL, &err), &err);
        ch_rd r = {(const uint8_t *)resp.data, resp.len, 0, false};
        uint64_t n = pd__ch_rd_u64(&r), v = pd__ch_rd_u64(&r);
        assert_false(r.bad);
        pd_buf_release(&resp);
        *n_queries = n;
        if (n > 0)
            return v;
        usleep(100000);
    }
    fail_msg("no query starting with %s in system.query_log", prefix);
    return 0;
}

typedef struct sum_ctx {
    int64_t sums[8];
    size_t n_types, parts, profiles, polls;
} sum_ctx;

static int sum_part(void *ctx, const pd_storage_agg_part *part, const pd_profile *p, pd_err *err)
{
    (void)err;
    sum_ctx *c = ctx;
    c->parts++;
    c->profiles += part->n_profiles;
    c->n_types = p->n_sample_type;
    int64_t t[8] = {0};
    pd_profile_totals(p, t);
    for (size_t i = 0; i < p->n_sample_type && i < 8; i++)
        c->sums[i] += t[i];
    return 0;
}

/* A poll that checks it gets the caller's ctx (regression: the ClickHouse
 * deltas handed poll their own wrapper's ctx: the query layer's poll read
 * garbage). */
static int poll_sum(void *ctx, pd_err *err)
{
    (void)err;
    ((sum_ctx *)ctx)->polls++;
    return 0;
}

static void test_backend(void **state)
{
    (void)state;
    need_server();
    g_now = 1795710738924; /* 2026-11-26 */
    pd_storage *s = open_store("unit");
    pd_err err;

    /* 8 writers at once: 80 profiles, batched, all acknowledged */
    pthread_t th[8];
    writer_arg wa[8];
    for (int i = 0; i < 8; i++) {
        wa[i] = (writer_arg){s, i, 0};
        pthread_create(&th[i], NULL, writer, &wa[i]);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(wa[i].fails, 0);
    }
    /* a label value that needs escaping; an old day (for retention) */
    pd_labels odd, old;
    labels(&odd, "cpu", "it's a \\ \"quoted\" ünï", "x'); DROP TABLE samples; --");
    labels(&old, "cpu", "old", NULL);
    PD_ASSERT_OK(
        pd_storage_append(s, &odd, g_now - 1000, g_prof[4].body, g_prof[4].len, &g_prof[4].p, &err),
        &err);
    PD_ASSERT_OK(pd_storage_append(s, &old, g_now - 2 * DAY - 5000, g_prof[5].body, g_prof[5].len,
                                   &g_prof[5].p, &err),
                 &err);
    /* the same series and time again: refused */
    PD_ASSERT_RC(
        pd_storage_append(s, &odd, g_now - 1000, g_prof[4].body, g_prof[4].len, &g_prof[4].p, &err),
        PD_EEXIST, &err);
    /* out of the accepted window */
    PD_ASSERT_RC(pd_storage_append(s, &odd, g_now - 4 * DAY, g_prof[4].body, g_prof[4].len,
                                   &g_prof[4].p, &err),
                 PD_EOUTOFBOUNDS, &err);
    PD_ASSERT_RC(
        pd_storage_append(s, &odd, g_now + DAY, g_prof[4].body, g_prof[4].len, &g_prof[4].p, &err),
        PD_EOUTOFBOUNDS, &err);

    /* select: every matcher type */
    pd_matcher m[2];
    pd_series_set set;
    PD_ASSERT_OK(pd_matcher_init(&m[0], PD_MATCH_EQ, "__name__", "heap", &err), &err);
    PD_ASSERT_OK(pd_storage_select(s, m, 1, INT64_MIN, INT64_MAX, &set, &err), &err);
    assert_int_equal(set.n, 8);
    for (size_t i = 0; i < set.n; i++)
        assert_int_equal(set.v[i].n_profiles, 10);
    assert_string_equal(pd_labels_get(&set.v[0].labels, "instance"), "w0");
    uint64_t w0 = set.v[0].ref;
    pd_series_set_release(&set);
    PD_ASSERT_OK(pd_matcher_init(&m[1], PD_MATCH_RE, "instance", "w[0-3]", &err), &err);
    PD_ASSERT_OK(pd_storage_select(s, m, 2, INT64_MIN, INT64_MAX, &set, &err), &err);
    assert_int_equal(set.n, 4);
    pd_series_set_release(&set);
    pd_matcher_release(&m[1]);
    PD_ASSERT_OK(pd_matcher_init(&m[1], PD_MATCH_NRE, "instance", "w[0-3]", &err), &err);
    PD_ASSERT_OK(pd_storage_select(s, m, 2, INT64_MIN, INT64_MAX, &set, &err), &err);
    assert_int_equal(set.n, 4);
    pd_series_set_release(&set);
    pd_matcher_release(&m[1]);
    pd_matcher_release(&m[0]);
    PD_ASSERT_OK(pd_matcher_init(&m[0], PD_MATCH_EQ, "instance", "it's a \\ \"quoted\" ünï", &err),
                 &err);
    PD_ASSERT_OK(pd_matcher_init(&m[1], PD_MATCH_NEQ, "note", "", &err), &err);
    PD_ASSERT_OK(pd_storage_select(s, m, 2, INT64_MIN, INT64_MAX, &set, &err), &err);
    assert_int_equal(set.n, 1);
    assert_string_equal(pd_labels_get(&set.v[0].labels, "note"), "x'); DROP TABLE samples; --");
    uint64_t odd_ref = set.v[0].ref;
    pd_series_set_release(&set);
    pd_matcher_release(&m[0]);
    pd_matcher_release(&m[1]);
    /* a time range selects by the profiles in it */
    PD_ASSERT_OK(pd_storage_select(s, NULL, 0, g_now - 10000, g_now, &set, &err), &err);
    assert_int_equal(set.n, 1);
    pd_series_set_release(&set);

    /* points: the totals of the originals */
    pd_points pts;
    PD_ASSERT_OK(pd_storage_read_points(s, w0, INT64_MIN, INT64_MAX, &pts, &err), &err);
    assert_int_equal(pts.n, 10);
    for (size_t i = 0; i < pts.n; i++) {
        const pd_profile *p = &g_prof[i % 4].p;
        int64_t t[8];
        pd_profile_totals(p, t);
        assert_int_equal(pts.v[i].ts_ms, g_now - 3600000 + (int64_t)i * 1000);
        assert_int_equal(pts.v[i].n_types, p->n_sample_type);
        for (size_t k = 0; k < p->n_sample_type; k++) {
            assert_int_equal(pts.v[i].totals[k], t[k]);
            assert_string_equal(pts.v[i].types[k].type, pd_profile_str(p, p->sample_type[k].type));
        }
    }
    pd_points_release(&pts);
    PD_ASSERT_RC(pd_storage_read_points(s, 12345, INT64_MIN, INT64_MAX, &pts, &err), PD_ENOTFOUND,
                 &err);

    /* a profile: the bytes pushed */
    pd_profile q;
    pd_buf raw;
    pd_buf_init(&raw, 0);
    PD_ASSERT_OK(pd_storage_read_profile(s, odd_ref, g_now - 1000, &q, &raw, &err), &err);
    pd_err why;
    assert_true(pd_profile_equal(&q, &g_prof[4].p, &why));
    pd_profile_release(&q);
    /* raw: the rebuilt profile re-encoded (schema v2 keeps no body) */
    PD_ASSERT_OK(pd_profile_decode(&q, (const uint8_t *)raw.data, raw.len, NULL, &err), &err);
    assert_true(pd_profile_equal(&q, &g_prof[4].p, &why));
    pd_profile_release(&q);
    pd_buf_release(&raw);
    PD_ASSERT_RC(pd_storage_read_profile(s, odd_ref, g_now - 999, &q, NULL, &err), PD_ENOTFOUND,
                 &err);

    /* aggregate: one group of the 8 heap series sums to their totals */
    PD_ASSERT_OK(pd_matcher_init(&m[0], PD_MATCH_EQ, "__name__", "heap", &err), &err);
    PD_ASSERT_OK(pd_storage_select(s, m, 1, INT64_MIN, INT64_MAX, &set, &err), &err);
    pd_matcher_release(&m[0]);
    uint64_t refs[8];
    uint32_t group[8] = {0};
    for (size_t i = 0; i < 8; i++)
        refs[i] = set.v[i].ref;
    pd_series_set_release(&set);
    sum_ctx sc;
    memset(&sc, 0, sizeof sc);
    size_t n_series = 0;
    PD_ASSERT_OK(pd_storage_aggregate(s, refs, group, 8, INT64_MIN, INT64_MAX, sum_part, NULL, &sc,
                                      &n_series, &err),
                 &err);
    assert_int_equal(n_series, 8);
    assert_int_equal(sc.parts, 1);
    assert_int_equal(sc.profiles, 80);
    int64_t want[8] = {0};
    for (int i = 0; i < 10; i++) {
        int64_t t[8];
        pd_profile_totals(&g_prof[i % 4].p, t);
        for (size_t k = 0; k < g_prof[0].p.n_sample_type; k++)
            want[k] += 8 * t[k];
    }
    for (size_t k = 0; k < sc.n_types; k++)
        assert_int_equal(sc.sums[k], want[k]);
    /* each ref alone: 8 parts */
    memset(&sc, 0, sizeof sc);
    PD_ASSERT_OK(pd_storage_aggregate(s, refs, NULL, 8, INT64_MIN, INT64_MAX, sum_part, NULL, &sc,
                                      NULL, &err),
                 &err);
    assert_int_equal(sc.parts, 8);

    /* stacks gone (a damaged or truncated table): the merge leaves them out
       and says so in the request's warnings, never a crash */
    {
        const char *urls[] = {g_url};
        pd_storage_options o = ch_opts(urls, 1, "unit");
        pd_ch *c;
        PD_ASSERT_OK(pd__ch_open(&o, &c, &err), &err);
        PD_ASSERT_OK(pd__ch_exec(c, "TRUNCATE TABLE stacks_v3", NULL, 0, NULL, NULL, NULL, &err),
                     &err);
        pd__ch_close(c);
        pd_storage_warnings w;
        pd_storage_warnings_begin(&w);
        memset(&sc, 0, sizeof sc);
        PD_ASSERT_OK(pd_storage_aggregate(s, refs, group, 8, INT64_MIN, INT64_MAX, sum_part, NULL,
                                          &sc, NULL, &err),
                     &err);
        pd_storage_warnings_end();
        assert_true(w.n > 0);
        assert_non_null(strstr(w.v[0], "missing from table stacks_v3"));
        for (size_t k = 0; k < sc.n_types; k++)
            assert_int_equal(sc.sums[k], 0);
        pd_storage_warnings_release(&w);
        /* and the store writes the stacks of its next appends again: a new
           series with the same profile merges whole */
        pd_labels again;
        labels(&again, "heap", "again", NULL);
        PD_ASSERT_OK(pd_storage_append(s, &again, g_now - 500, g_prof[0].body, g_prof[0].len,
                                       &g_prof[0].p, &err),
                     &err);
        pd_matcher ma;
        PD_ASSERT_OK(pd_matcher_init(&ma, PD_MATCH_EQ, "instance", "again", &err), &err);
        PD_ASSERT_OK(pd_storage_select(s, &ma, 1, INT64_MIN, INT64_MAX, &set, &err), &err);
        pd_matcher_release(&ma);
        assert_int_equal(set.n, 1);
        uint64_t ra = set.v[0].ref;
        pd_series_set_release(&set);
        memset(&sc, 0, sizeof sc);
        pd_storage_warnings_begin(&w);
        PD_ASSERT_OK(pd_storage_aggregate(s, &ra, NULL, 1, INT64_MIN, INT64_MAX, sum_part, NULL,
                                          &sc, NULL, &err),
                     &err);
        pd_storage_warnings_end();
        assert_int_equal(w.n, 0);
        pd_storage_warnings_release(&w);
        int64_t t0[8];
        pd_profile_totals(&g_prof[0].p, t0);
        for (size_t k = 0; k < sc.n_types; k++)
            assert_int_equal(sc.sums[k], t0[k]);
        pd_labels_release(&again);
    }

    /* stats */
    pd_storage_stats st;
    pd_storage_stats_get(s, &st);
    assert_int_equal(st.n_profiles, 83);
    assert_int_equal(st.n_series, 11);
    assert_true(st.bytes_on_disk > 0);

    /* retention: 2 days later the old day's partitions go, the rest stays */
    __atomic_store_n(&g_now, g_now + 2 * DAY, __ATOMIC_RELAXED);
    PD_ASSERT_OK(pd_storage_maintain(s, &err), &err);
    PD_ASSERT_OK(pd_storage_select(s, NULL, 0, INT64_MIN, INT64_MAX, &set, &err), &err);
    assert_int_equal(set.n, 10);
    for (size_t i = 0; i < set.n; i++)
        assert_string_not_equal(pd_labels_get(&set.v[i].labels, "instance"), "old");
    pd_series_set_release(&set);
    {
        /* schema v3: stacks and series are trimmed with the profiles (their
           rows of the old day gone), and what stays still resolves: the
           series written after the truncation above merges whole */
        const char *urls[] = {g_url};
        pd_storage_options o = ch_opts(urls, 1, "unit");
        pd_ch *c;
        PD_ASSERT_OK(pd__ch_open(&o, &c, &err), &err);
        char sql[512];
        int64_t old_day = (g_now - 4 * DAY - 5000) / DAY;
        snprintf(sql, sizeof sql,
                 "SELECT (SELECT count() FROM stacks_v3 WHERE day <= toDate(%lld)) + (SELECT "
                 "count() FROM series_v3 WHERE day <= toDate(%lld)) + (SELECT count() FROM "
                 "locations_v1 WHERE day <= toDate(%lld)) + (SELECT count() FROM "
                 "profiles_all WHERE day <= toDate(%lld)) FORMAT RowBinary",
                 (long long)old_day, (long long)old_day, (long long)old_day, (long long)old_day);
        assert_int_equal(ch_u64(c, "%s", sql), 0);
        assert_true(ch_u64(c, "SELECT count() FROM stacks_v3 FORMAT RowBinary") > 0);
        assert_true(ch_u64(c, "SELECT count() FROM locations_v1 FORMAT RowBinary") > 0);
        pd__ch_close(c);
        pd_labels again;
        labels(&again, "heap", "again", NULL);
        uint64_t ro = pd_labels_hash(&again);
        pd_labels_release(&again);
        sum_ctx s4;
        memset(&s4, 0, sizeof s4);
        pd_storage_warnings w4;
        pd_storage_warnings_begin(&w4);
        PD_ASSERT_OK(pd_storage_aggregate(s, &ro, NULL, 1, INT64_MIN, INT64_MAX, sum_part, NULL,
                                          &s4, NULL, &err),
                     &err);
        pd_storage_warnings_end();
        assert_int_equal(w4.n, 0);
        pd_storage_warnings_release(&w4);
        int64_t t4[8];
        pd_profile_totals(&g_prof[0].p, t4);
        for (size_t k = 0; k < s4.n_types; k++)
            assert_int_equal(s4.sums[k], t4[k]);
    }

    pd_labels_release(&odd);
    pd_labels_release(&old);
    pd_storage_close(s);
}

/* Issue 35 item 4: retention is the database's, set once: the first profd
 * records its flag (table retention); a profd with a shorter flag keeps
 * the database's (accepts what it accepts, drops nothing more); one INSERT
 * into retention changes it for every profd at its next maintenance. */
static void test_retention_owned_by_database(void **state)
{
    (void)state;
    need_server();
    g_now = 1795710738924;
    pd_storage *s = open_store("owner"); /* 3 days, recorded */
    const char *urls[] = {g_url};
    pd_storage_options o = ch_opts(urls, 1, "owner");
    o.retention_ms = DAY; /* a shorter flag: not the database's */
    pd_storage *s2;
    pd_err err;
    PD_ASSERT_OK(pd_storage_open(&o, &s2, &err), &err);
    pd_labels ls;
    labels(&ls, "cpu", "r", NULL);
    PD_ASSERT_OK(pd_storage_append(s2, &ls, g_now - 2 * DAY, g_prof[4].body, g_prof[4].len,
                                   &g_prof[4].p, &err),
                 &err);
    PD_ASSERT_OK(pd_storage_maintain(s2, &err), &err);
    pd_series_set set;
    PD_ASSERT_OK(pd_storage_select(s, NULL, 0, INT64_MIN, INT64_MAX, &set, &err), &err);
    assert_int_equal(set.n, 1);
    pd_series_set_release(&set);
    /* changed once, in the database: both profds follow */
    pd_ch *c;
    PD_ASSERT_OK(pd__ch_open(&o, &c, &err), &err);
    char sql[200];
    snprintf(sql, sizeof sql, "INSERT INTO retention VALUES (%lld, %lld)",
             (long long)pd_now_ms() + 1000, (long long)DAY);
    PD_ASSERT_OK(pd__ch_exec(c, sql, NULL, 0, NULL, NULL, NULL, &err), &err);
    pd__ch_close(c);
    PD_ASSERT_OK(pd_storage_maintain(s, &err), &err);
    PD_ASSERT_OK(pd_storage_select(s2, NULL, 0, INT64_MIN, INT64_MAX, &set, &err), &err);
    assert_int_equal(set.n, 0);
    pd_series_set_release(&set);
    PD_ASSERT_OK(pd_storage_maintain(s2, &err), &err);
    PD_ASSERT_RC(pd_storage_append(s2, &ls, g_now - 2 * DAY + 1000, g_prof[4].body, g_prof[4].len,
                                   &g_prof[4].p, &err),
                 PD_EOUTOFBOUNDS, &err);
    pd_labels_release(&ls);
    pd_storage_close(s2);
    pd_storage_close(s);
}

/* The deltas of a cumulative series (storage.h pd_storage_aggregate_delta,
 * pd_storage_read_point_before), made in storage.c from ClickHouse's
 * primitives, equal the TSDB's own on the same profiles: heap profiles
 * whose alloc_* totals go up, then down (a restart), then up again. */
typedef struct shift_arg {
    pd_storage *s;
    const pd_labels *ls;
    int which;
    int64_t got[4];
    int rc;
} shift_arg;

static void *shifter(void *arg)
{
    shift_arg *a = arg;
    pd_err err;
    for (int i = 0; i < 4 && a->rc == 0; i++)
        a->rc =
            pd_storage_append_shift(a->s, a->ls, g_now - 3000, g_prof[a->which].body,
                                    g_prof[a->which].len, &g_prof[a->which].p, &a->got[i], &err);
    return NULL;
}

/* issue 26 item 1 on ClickHouse: the push duplicate rule as the TSDB's
 * (storage.h) — a taken ms in the table or in the same batch moves the
 * profile to the next free one; two writers racing for one ms, 8 profiles,
 * 8 distinct ms; a merge over the second holds all of them. */
static void test_push_duplicates(void **state)
{
    (void)state;
    need_server();
    g_now = 1795710738924;
    pd_storage *s = open_store("dups");
    pd_labels ls;
    labels(&ls, "heap", "replica", NULL);
    shift_arg a[2] = {{s, &ls, 0, {0}, 0}, {s, &ls, 1, {0}, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, shifter, &a[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(a[0].rc, 0);
    assert_int_equal(a[1].rc, 0);
    char seen[8] = {0};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 4; k++) {
            int64_t d = a[i].got[k] - (g_now - 3000);
            assert_true(d >= 0 && d < 8);
            assert_int_equal(seen[d], 0);
            seen[d] = 1;
        }
    pd_err err;
    pd_series_set set;
    PD_ASSERT_OK(pd_storage_select(s, NULL, 0, INT64_MIN, INT64_MAX, &set, &err), &err);
    assert_int_equal(set.n, 1);
    assert_int_equal(set.v[0].n_profiles, 8);
    uint64_t ref = set.v[0].ref;
    pd_series_set_release(&set);
    int64_t want[8] = {0}, got[8] = {0};
    for (int k = 0; k < 2; k++) {
        int64_t t[64];
        assert_true(g_prof[k].p.n_sample_type <= 8);
        pd_profile_totals(&g_prof[k].p, t);
        for (size_t v = 0; v < g_prof[k].p.n_sample_type; v++)
            want[v] += 4 * t[v];
    }
    pd_points pts;
    PD_ASSERT_OK(pd_storage_read_points(s, ref, g_now - 3000, g_now - 2001, &pts, &err), &err);
    assert_int_equal(pts.n, 8);
    for (size_t i = 0; i < pts.n; i++)
        for (size_t v = 0; v < pts.v[i].n_types && v < 8; v++)
            got[v] += pts.v[i].totals[v];
    pd_points_release(&pts);
    for (size_t v = 0; v < 8; v++)
        assert_int_equal(got[v], want[v]);
    pd_labels_release(&ls);
    pd_storage_close(s);
}

/* pd_storage_append_many on ClickHouse: the profiles of one call go into
 * one batch (one acknowledgement, not one per series); a second item of a
 * series and ms in the call is PD_EEXIST, or with shift stored 1 ms later;
 * items whose ms is taken in the store move on with shift. */
static void test_append_many(void **state)
{
    (void)state;
    need_server();
    g_now = 1795710738924;
    pd_storage *s = open_store("many");
    pd_labels ls[4];
    const char *inst[4] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++)
        labels(&ls[i], "heap", inst[i], NULL);
    int64_t ts = g_now - 5000;
    pd_storage_item it[5];
    for (int i = 0; i < 5; i++)
        it[i] = (pd_storage_item){.labels = &ls[i % 4],
                                  .ts_ms = ts,
                                  .body = g_prof[i % 4].body,
                                  .len = g_prof[i % 4].len,
                                  .profile = &g_prof[i % 4].p};
    double b0 = pd_metrics_get("profd_clickhouse_batches_total", NULL);
    assert_int_equal(pd_storage_append_many(s, it, 5, false), 4);
    assert_true(pd_metrics_get("profd_clickhouse_batches_total", NULL) == b0 + 1);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(it[i].rc, 0);
        assert_true(it[i].ts_ms == ts);
    }
    assert_int_equal(it[4].rc, PD_EEXIST); /* series a twice at ts */
    assert_non_null(strstr(it[4].err.msg, "already stored"));
    assert_true(it[4].ts_ms == ts);

    /* again at the same ms, with shift: a..d are taken (found by the batch's
       check) and go 1 ms later; the second a once more after that */
    for (int i = 0; i < 5; i++)
        it[i].ts_ms = ts;
    assert_int_equal(pd_storage_append_many(s, it, 5, true), 5);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(it[i].rc, 0);
        assert_true(it[i].ts_ms == ts + 1);
    }
    assert_int_equal(it[4].rc, 0);
    assert_true(it[4].ts_ms == ts + 2);

    pd_err err;
    pd_series_set set;
    PD_ASSERT_OK(pd_storage_select(s, NULL, 0, INT64_MIN, INT64_MAX, &set, &err), &err);
    assert_int_equal(set.n, 4);
    size_t total = 0;
    for (size_t i = 0; i < set.n; i++)
        total += set.v[i].n_profiles;
    assert_int_equal(total, 4 + 5);
    pd_series_set_release(&set);
    for (int i = 0; i < 4; i++)
        pd_labels_release(&ls[i]);
    pd_storage_close(s);
}

static void test_deltas_as_tsdb(void **state)
{
    (void)state;
    need_server();
    g_now = 1795710738924;
    pd_storage *ch = open_store("deltas");
    char dir[] = "/tmp/pd_ch_deltas_XXXXXX";
    pd_storage *ts = open_tsdb(dir);
    pd_err err;
    static const int seq[] = {0, 1, 2, 3, 1, 2, 3, 0, 3, 3};
    const size_t n = sizeof seq / sizeof *seq;
    const int64_t t0 = g_now - 3600000, step = 10000;
    pd_labels ls;
    labels(&ls, "heap", "d", NULL);
    for (size_t k = 0; k < n; k++) {
        const tprof *t = &g_prof[seq[k]];
        PD_ASSERT_OK(
            pd_storage_append(ch, &ls, t0 + (int64_t)k * step, t->body, t->len, &t->p, &err), &err);
        PD_ASSERT_OK(
            pd_storage_append(ts, &ls, t0 + (int64_t)k * step, t->body, t->len, &t->p, &err), &err);
    }
    pd_labels_release(&ls);
    pd_storage *st[2] = {ts, ch};
    uint64_t ref[2];
    for (int b = 0; b < 2; b++) {
        pd_series_set set;
        PD_ASSERT_OK(pd_storage_select(st[b], NULL, 0, INT64_MIN, INT64_MAX, &set, &err), &err);
        assert_int_equal(set.n, 1);
        ref[b] = set.v[0].ref;
        pd_series_set_release(&set);
    }
    const uint64_t mask = 3; /* alloc_objects, alloc_space */
    const int64_t ranges[][2] = {{0, 9}, {2, 6}, {4, 8}, {5, 5}, {0, 0}, {7, 9}};
    for (size_t r = 0; r < sizeof ranges / sizeof *ranges; r++) {
        int64_t a = t0 + ranges[r][0] * step, z = t0 + ranges[r][1] * step;
        sum_ctx sc[2];
        size_t nd[2], ns[2];
        int rc[2];
        for (int b = 0; b < 2; b++) {
            memset(&sc[b], 0, sizeof sc[b]);
            rc[b] = pd_storage_aggregate_delta(st[b], &ref[b], NULL, &mask, 1, a, z, sum_part,
                                               poll_sum, &sc[b], &ns[b], &nd[b], &err);
            assert_int_equal(rc[b], 0);
            if (sc[b].parts)
                assert_true(sc[b].polls > 0); /* on this ctx */
        }
        assert_int_equal(nd[1], nd[0]);
        assert_int_equal(ns[1], ns[0]);
        for (int k = 0; k < 4; k++)
            if (sc[1].sums[k] != sc[0].sums[k])
                fail_msg("range %zu, type %d: ClickHouse %lld, TSDB %lld", r, k,
                         (long long)sc[1].sums[k], (long long)sc[0].sums[k]);
        /* the previous point */
        pd_points pb[2];
        for (int b = 0; b < 2; b++)
            PD_ASSERT_OK(pd_storage_read_point_before(st[b], ref[b], a, &pb[b], &err), &err);
        assert_int_equal(pb[1].n, pb[0].n);
        if (pb[0].n) {
            assert_int_equal(pb[1].v[0].ts_ms, pb[0].v[0].ts_ms);
            assert_int_equal(pb[1].v[0].totals[1], pb[0].v[0].totals[1]);
        }
        pd_points_release(&pb[0]);
        pd_points_release(&pb[1]);
    }
    pd_storage_close(ch);
    rm_tsdb(ts, dir);
}

static void test_schema_newer_refused_and_dead_url(void **state)
{
    (void)state;
    need_server();
    pd_storage *s = open_store("newer");
    pd_storage_close(s);
    /* a newer profd wrote version 99 */
    const char *urls[] = {g_url};
    pd_storage_options o = ch_opts(urls, 1, "newer");
    pd_ch *c;
    pd_err err;
    PD_ASSERT_OK(pd__ch_open(&o, &c, &err), &err);
    PD_ASSERT_OK(pd__ch_exec(c, "INSERT INTO schema_version VALUES (99, 0)", NULL, 0, NULL, NULL,
                             NULL, &err),
                 &err);
    pd__ch_close(c);
    PD_ASSERT_RC(pd_storage_open(&o, &s, &err), PD_ECORRUPT, &err);
    assert_non_null(strstr(err.msg, "99"));

    /* a URL nobody listens on: -EIO naming it */
    char dead[64];
    snprintf(dead, sizeof dead, "http://127.0.0.1:%d", free_port());
    const char *d1[] = {dead};
    o = ch_opts(d1, 1, "unit");
    PD_ASSERT_RC(pd_storage_open(&o, &s, &err), -EIO, &err);
    assert_non_null(strstr(err.msg, dead));
    /* failover: the dead URL first, the live one second */
    const char *d2[] = {dead, g_url};
    o = ch_opts(d2, 2, "unit");
    PD_ASSERT_OK(pd_storage_open(&o, &s, &err), &err);
    pd_labels ls;
    labels(&ls, "heap", "failover", NULL);
    g_now = 1795710738924;
    PD_ASSERT_OK(
        pd_storage_append(s, &ls, g_now, g_prof[0].body, g_prof[0].len, &g_prof[0].p, &err), &err);
    pd_labels_release(&ls);
    pd_storage_close(s);
}

/* --clickhouse.replicated (issue 35 item 4): without a cluster it is
 * refused before any request; on a server whose config defines no
 * {shard}/{replica} macros it is refused naming them (ReplicatedMergeTree's
 * path could not be filled in) before any table of profiles is created. */
static void test_replicated_layout_checks(void **state)
{
    (void)state;
    const char *urls[] = {"http://127.0.0.1:1"};
    pd_storage_options o = ch_opts(urls, 1, "rep");
    o.clickhouse.replicated = true;
    pd_storage *s;
    pd_err err;
    PD_ASSERT_RC(pd_storage_open(&o, &s, &err), PD_EINVAL, &err);
    assert_non_null(strstr(err.msg, "--clickhouse.cluster"));

    need_server();
    const char *live[] = {g_url};
    o = ch_opts(live, 1, "rep");
    o.clickhouse.replicated = true;
    o.clickhouse.cluster = "nope";
    PD_ASSERT_RC(pd_storage_open(&o, &s, &err), PD_EINVAL, &err);
    assert_non_null(strstr(err.msg, "<macros>"));
    assert_non_null(strstr(err.msg, g_url));
}

/* Schema v2 keeps no body: every real profile read back alone is rebuilt
 * from its samples rows and stacks and equals the original as DESIGN.md §1
 * says (the same multiset of samples: Go heap profiles repeat stacks), the
 * raw bytes decode to it too; profiles.body is empty; a stack gone is
 * PD_ECORRUPT, never a partial profile. A database at v1 is migrated to v2
 * and its rows (the body kept) still read byte for byte. */
static void test_single_profile_rebuilt(void **state)
{
    (void)state;
    need_server();
    g_now = 1795710738924;
    pd_storage *s = open_store("single");
    pd_err err, why;
    size_t with_repeats = 0;
    uint64_t refs[16];
    for (size_t k = 0; k < g_n; k++) {
        const pd_profile *p = &g_prof[k].p;
        char inst[32];
        snprintf(inst, sizeof inst, "p%zu", k);
        pd_labels ls;
        labels(&ls, "any", inst, NULL);
        refs[k] = pd_labels_hash(&ls);
        PD_ASSERT_OK(pd_storage_append(s, &ls, g_now - 1000, g_prof[k].body, g_prof[k].len,
                                       (pd_profile *)p, &err),
                     &err);
        pd_labels_release(&ls);
        /* repeated stacks (equal blobs) in the original? */
        pd_u64map distinct;
        pd_u64map_init(&distinct);
        pd_buf blob;
        pd_buf_init(&blob, 0);
        for (size_t i = 0; i < p->n_sample; i++) {
            pd_buf_reset(&blob);
            assert_int_equal(pd__ch_stack_encode_v3(p, i, &blob), 0);
            pd_u64map_put(&distinct, XXH3_64bits(blob.data, blob.len), 1);
        }
        with_repeats += distinct.len < p->n_sample;
        pd_buf_release(&blob);
        pd_u64map_release(&distinct);

        pd_profile q;
        pd_buf raw;
        pd_buf_init(&raw, 0);
        PD_ASSERT_OK(pd_storage_read_profile(s, refs[k], g_now - 1000, &q, &raw, &err), &err);
        if (!pd_profile_equal(p, &q, &why))
            fail_msg("%s read back from ClickHouse differs: %s", g_prof[k].path, why.msg);
        assert_int_equal(q.n_sample, p->n_sample);
        pd_profile_release(&q);
        PD_ASSERT_OK(pd_profile_decode(&q, (const uint8_t *)raw.data, raw.len, NULL, &err), &err);
        if (!pd_profile_equal(p, &q, &why))
            fail_msg("%s: raw bytes from ClickHouse differ: %s", g_prof[k].path, why.msg);
        pd_profile_release(&q);
        pd_buf_release(&raw);
    }
    assert_true(with_repeats > 0); /* the multiset case is exercised */

    const char *urls[] = {g_url};
    pd_storage_options o = ch_opts(urls, 1, "single");
    pd_ch *c;
    PD_ASSERT_OK(pd__ch_open(&o, &c, &err), &err);
    pd_buf resp;
    pd_buf_init(&resp, 0);
    PD_ASSERT_OK(pd__ch_exec(c,
                             "SELECT sum(length(body)), count() FROM profiles_v4 FORMAT RowBinary",
                             NULL, 0, NULL, &resp, NULL, &err),
                 &err);
    ch_rd r = {(const uint8_t *)resp.data, resp.len, 0, false};
    assert_int_equal(pd__ch_rd_u64(&r), 0);
    assert_int_equal(pd__ch_rd_u64(&r), g_n);

    /* back to a v1 database: version 1 recorded, a v1 row (body kept) */
    PD_ASSERT_OK(pd__ch_exec(c, "TRUNCATE TABLE schema_version", NULL, 0, NULL, NULL, NULL, &err),
                 &err);
    PD_ASSERT_OK(
        pd__ch_exec(c, "INSERT INTO schema_version VALUES (1, 0)", NULL, 0, NULL, NULL, NULL, &err),
        &err);
    pd_buf sql;
    pd_buf_init(&sql, 0);
    assert_int_equal(
        pd_buf_printf(
            &sql, "INSERT INTO profiles_v3 SELECT day, ts + 1, fingerprint, write_id, types_hash, "
                  "sample_types, sample_units, totals, period_type, period_unit, period, "
                  "time_nanos, duration_nanos, comments, drop_frames, keep_frames, "
                  "default_sample_type, doc_url, unhex('"),
        0);
    for (size_t i = 0; i < g_prof[0].len; i++)
        assert_int_equal(pd_buf_printf(&sql, "%02x", g_prof[0].body[i]), 0);
    assert_int_equal(pd_buf_printf(&sql, "') FROM profiles_v4 WHERE fingerprint = %llu",
                                   (unsigned long long)refs[0]),
                     0);
    assert_int_equal(pd_buf_putc(&sql, 0), 0);
    PD_ASSERT_OK(pd__ch_exec(c, (const char *)sql.data, NULL, 0, NULL, NULL, NULL, &err), &err);
    pd_buf_release(&sql);
    pd_storage_close(s);
    /* reopened: migrated to v2, the v1 row read from its body */
    s = open_store("single");
    pd_buf_reset(&resp);
    PD_ASSERT_OK(pd__ch_exec(c, "SELECT max(version) FROM schema_version FORMAT RowBinary", NULL, 0,
                             NULL, &resp, NULL, &err),
                 &err);
    r = (ch_rd){(const uint8_t *)resp.data, resp.len, 0, false};
    assert_int_equal(pd__ch_rd_u32(&r), PD_CH_SCHEMA_VERSION);
    pd_profile q;
    pd_buf raw;
    pd_buf_init(&raw, 0);
    PD_ASSERT_OK(pd_storage_read_profile(s, refs[0], g_now - 999, &q, &raw, &err), &err);
    assert_int_equal(raw.len, g_prof[0].len);
    assert_memory_equal(raw.data, g_prof[0].body, raw.len);
    assert_true(pd_profile_equal(&q, &g_prof[0].p, &why));
    pd_profile_release(&q);
    pd_buf_release(&raw);

    /* a schema-3 database (stacks as schema-3 blobs, every location
       inline) opened by this profd: migrated to 4, every profile still read
       back equal (a stack's key is the same in both layouts) */
    PD_ASSERT_OK(pd__ch_exec(c, "TRUNCATE TABLE stacks_v3", NULL, 0, NULL, NULL, NULL, &err), &err);
    PD_ASSERT_OK(pd__ch_exec(c, "TRUNCATE TABLE schema_version", NULL, 0, NULL, NULL, NULL, &err),
                 &err);
    PD_ASSERT_OK(
        pd__ch_exec(c, "INSERT INTO schema_version VALUES (3, 0)", NULL, 0, NULL, NULL, NULL, &err),
        &err);
    pd_buf rows, blob;
    pd_buf_init(&rows, 0);
    pd_buf_init(&blob, 0);
    for (size_t k = 0; k < g_n; k++)
        for (size_t i = 0; i < g_prof[k].p.n_sample; i++) {
            pd_buf_reset(&blob);
            assert_int_equal(pd__ch_stack_encode_v3(&g_prof[k].p, i, &blob), 0);
            assert_int_equal(pd__ch_put_u16(&rows, (uint16_t)pd__ch_day(g_now - 1000)), 0);
            assert_int_equal(pd__ch_put_u64(&rows, XXH3_64bits(blob.data, blob.len)), 0);
            assert_int_equal(pd__ch_put_str(&rows, (const char *)blob.data, blob.len), 0);
        }
    PD_ASSERT_OK(pd__ch_exec(c, "INSERT INTO stacks_v3 FORMAT RowBinary",
                             (const uint8_t *)rows.data, rows.len, NULL, NULL, NULL, &err),
                 &err);
    pd_buf_release(&rows);
    pd_buf_release(&blob);
    pd_storage_close(s);
    s = open_store("single");
    assert_int_equal(
        ch_u64(c, "SELECT toUInt64(max(version)) FROM schema_version FORMAT RowBinary"),
        PD_CH_SCHEMA_VERSION);
    assert_int_equal(ch_u64(c, "SELECT countIf(substring(stack, 1, 2) = unhex('8000')) FROM "
                               "stacks_v3 FORMAT RowBinary"),
                     0);
    for (size_t k = 0; k < g_n; k++) {
        PD_ASSERT_OK(pd_storage_read_profile(s, refs[k], g_now - 1000, &q, NULL, &err), &err);
        if (!pd_profile_equal(&g_prof[k].p, &q, &why))
            fail_msg("%s read back from schema-3 stacks rows differs: %s", g_prof[k].path, why.msg);
        pd_profile_release(&q);
    }

    /* a stack gone: the v2 profile is refused as corrupt, not served partial */
    PD_ASSERT_OK(pd__ch_exec(c, "TRUNCATE TABLE stacks_v3", NULL, 0, NULL, NULL, NULL, &err), &err);
    PD_ASSERT_RC(pd_storage_read_profile(s, refs[1], g_now - 1000, &q, NULL, &err), PD_ECORRUPT,
                 &err);
    assert_non_null(strstr(err.msg, "missing from table stacks_v3"));
    pd__ch_close(c);
    pd_buf_release(&resp);
    pd_storage_close(s);
}

/* A mark for rows_read_since: every query logged before it finished in an
 * earlier second. */
static uint64_t log_mark(pd_ch *c)
{
    pd_err err;
    PD_ASSERT_OK(pd__ch_exec(c, "SYSTEM FLUSH LOGS", NULL, 0, NULL, NULL, NULL, &err), &err);
    usleep(1100000);
    return ch_u64(c, "SELECT toUInt64(now()) FORMAT RowBinary");
}

/* Issue 35 item 4: a single-profile read and its stack lookup read rows in
 * proportion to the profile, not to the tables (schema v3: stacks_v3 in
 * granules of 64 rows; `stack_hash IN (...)` read most of stacks before).
 * Since schema 6 the samples rows are stack_samples_v1's, ordered by
 * (series, 10-minute bucket, stack, ts): a single read reads its series'
 * bucket — every profile of that series in those 10 minutes — in granules of
 * 4,096. The tables are then grown 400,000 rows each (other series, other
 * buckets of the same series, other stacks; and 5,000 rows of the same
 * series' bucket) and the same read reads no more than the granules its
 * series' bucket (its own stacks) is in (system.query_log). The merge's
 * stack lookup is the same query. Since schema 7 the location rows are
 * locations_v1's (granules of 64 too), grown the same. */
#define BUCKET_ROWS 5000

static void test_reads_bounded_by_granules(void **state)
{
    (void)state;
    need_server();
    g_now = 1795710738924;
    pd_storage *s = open_store("granules");
    const char *urls[] = {g_url};
    pd_storage_options o = ch_opts(urls, 1, "granules");
    pd_ch *c;
    pd_err err;
    PD_ASSERT_OK(pd__ch_open(&o, &c, &err), &err);
    const tprof *t = &g_prof[0]; /* a real heap profile: ~100s of samples and stacks */
    pd_u64map distinct;
    pd_u64map_init(&distinct);
    pd_buf blob;
    pd_buf_init(&blob, 0);
    for (size_t i = 0; i < t->p.n_sample; i++) {
        pd_buf_reset(&blob);
        assert_int_equal(pd__ch_stack_encode_v3(&t->p, i, &blob), 0);
        pd_u64map_put(&distinct, XXH3_64bits(blob.data, blob.len), 1);
    }
    size_t n_stacks = distinct.len, n_samples = t->p.n_sample;
    /* schema 4: and its distinct locations, each a row of its own (schema 7:
       in locations_v1) */
    pd_u64map locs;
    pd_u64map_init(&locs);
    for (size_t i = 0; i < t->p.n_sample; i++)
        for (size_t k = 0; k < t->p.sample[i].n_location; k++)
            pd_u64map_put(&locs, t->p.sample[i].location_id[k], 1);
    size_t n_rows = n_stacks + locs.len;
    pd_u64map_release(&locs);
    pd_buf_release(&blob);
    pd_u64map_release(&distinct);
    pd_labels ls;
    labels(&ls, "heap", "g", NULL);
    uint64_t ref = pd_labels_hash(&ls);
    int64_t ts = g_now - 1000;
    PD_ASSERT_OK(pd_storage_append(s, &ls, ts, t->body, t->len, &t->p, &err), &err);
    pd_labels_release(&ls);

    uint64_t rows_stacks[2], rows_samples[2], rows_locs[2];
    for (int round = 0; round < 2; round++) {
        if (round == 1) { /* grow every table the read touches */
            char sql[1024];
            snprintf(sql, sizeof sql,
                     "INSERT INTO stacks_v3 SELECT toDate(%lld), cityHash64(number, 7), "
                     "toString(number) FROM system.numbers LIMIT 400000",
                     (long long)(ts / 86400000));
            PD_ASSERT_OK(pd__ch_exec(c, sql, NULL, 0, NULL, NULL, NULL, &err), &err);
            snprintf(sql, sizeof sql,
                     "INSERT INTO locations_v1 SELECT toDate(%lld), cityHash64(number, 8), "
                     "toString(number) FROM system.numbers LIMIT 400000",
                     (long long)(ts / 86400000));
            PD_ASSERT_OK(pd__ch_exec(c, sql, NULL, 0, NULL, NULL, NULL, &err), &err);
            /* other series around ts, the same series in the buckets before
               its own (same day), and BUCKET_ROWS rows in its own bucket */
            long long b0 = (long long)(ts - ts % 600000), day0 = (long long)(ts / 86400000);
            snprintf(sql, sizeof sql,
                     "INSERT INTO stack_samples_v1 SELECT toDate(%lld), if(number < 200000, "
                     "%lld - 1 - number %% 200000, %lld - number %% 200000), if(number < 200000, "
                     "%llu, cityHash64(number)), 1, 1, cityHash64(number, 9), [toInt64(1)] FROM "
                     "system.numbers LIMIT 400000",
                     day0, b0, (long long)ts, (unsigned long long)ref);
            assert_true(b0 - 200000 >= day0 * 86400000);
            PD_ASSERT_OK(pd__ch_exec(c, sql, NULL, 0, NULL, NULL, NULL, &err), &err);
            snprintf(sql, sizeof sql,
                     "INSERT INTO stack_samples_v1 SELECT toDate(%lld), %lld + number %% 599000, "
                     "%llu, 1, 1, cityHash64(number, 11), [toInt64(1)] FROM system.numbers "
                     "LIMIT %d",
                     day0, b0, (unsigned long long)ref, BUCKET_ROWS);
            PD_ASSERT_OK(pd__ch_exec(c, sql, NULL, 0, NULL, NULL, NULL, &err), &err);
            PD_ASSERT_OK(
                pd__ch_exec(c, "OPTIMIZE TABLE stacks_v3 FINAL", NULL, 0, NULL, NULL, NULL, &err),
                &err);
            PD_ASSERT_OK(pd__ch_exec(c, "OPTIMIZE TABLE stack_samples_v1 FINAL", NULL, 0, NULL,
                                     NULL, NULL, &err),
                         &err);
            PD_ASSERT_OK(pd__ch_exec(c, "OPTIMIZE TABLE locations_v1 FINAL", NULL, 0, NULL, NULL,
                                     NULL, &err),
                         &err);
            assert_true(ch_u64(c, "SELECT count() FROM locations_v1 FORMAT RowBinary") >= 400000);
            assert_true(ch_u64(c, "SELECT count() FROM stacks_v3 FORMAT RowBinary") >= 400000);
            assert_true(ch_u64(c, "SELECT count() FROM stack_samples_v1 FORMAT RowBinary") >=
                        400000);
        }
        uint64_t mark = log_mark(c);
        pd_profile q;
        pd_err why;
        PD_ASSERT_OK(pd_storage_read_profile(s, ref, ts, &q, NULL, &err), &err);
        if (!pd_profile_equal(&t->p, &q, &why))
            fail_msg("read back differs: %s", why.msg);
        pd_profile_release(&q);
        /* one query each: the stacks, then their locations (schema 7: all
           in locations_v1, none looked for in stacks_v3) */
        uint64_t n_q;
        rows_stacks[round] =
            queries_since(c, mark, "SELECT stack_hash, any(stack) FROM stacks_v3", &n_q);
        assert_int_equal(n_q, 1);
        rows_locs[round] =
            queries_since(c, mark, "SELECT loc_key, any(loc) FROM locations_v1", &n_q);
        assert_int_equal(n_q, 1);
        rows_samples[round] =
            rows_read_since(c, mark, "SELECT stack_hash, values FROM stack_samples_v1");
        print_message("round %d: %zu samples, %zu stacks, %zu locations: read %llu rows of "
                      "stack_samples_v1, %llu of stacks_v3, %llu of locations_v1\n",
                      round, n_samples, n_stacks, n_rows - n_stacks,
                      (unsigned long long)rows_samples[round],
                      (unsigned long long)rows_stacks[round], (unsigned long long)rows_locs[round]);
    }
    /* at most the granules holding the profile's rows: each stack (and
       location) in its own granule of 64 (and the granule next to it), the
       samples (one series, one bucket: contiguous) in whole granules of
       4,096 — the profile's alone, then with the rows added to its bucket */
    for (int round = 0; round < 2; round++) {
        size_t bucket_rows = n_samples + (round ? BUCKET_ROWS : 0);
        assert_true(rows_stacks[round] > 0 && rows_samples[round] >= n_samples);
        assert_true(rows_stacks[round] <= 2 * 64 * n_stacks);
        assert_true(rows_locs[round] > 0 && rows_locs[round] <= 2 * 64 * (n_rows - n_stacks));
        assert_true(rows_samples[round] <= (bucket_rows / 4096 + 2) * 4096);
    }
    /* and far less than the 400,000 rows each table grew by */
    assert_true(rows_stacks[1] * 10 < 400000);
    assert_true(rows_locs[1] * 10 < 400000);
    assert_true(rows_samples[1] * 10 < 400000);
    pd__ch_close(c);
    pd_storage_close(s);
}

/* What the parts of an aggregation were: per part its side, series index,
 * counts, range, and the profile's totals and sample count. */
typedef struct part_log {
    struct {
        pd_storage_agg_part info;
        int64_t totals[8];
        size_t n_sample;
    } v[64];
    size_t n;
} part_log;

static int log_part(void *ctx, const pd_storage_agg_part *part, const pd_profile *p, pd_err *err)
{
    (void)err;
    part_log *l = ctx;
    if (l->n == 64)
        return 0;
    l->v[l->n].info = *part;
    memset(l->v[l->n].totals, 0, sizeof l->v[l->n].totals);
    pd_profile_totals(p, l->v[l->n].totals);
    l->v[l->n].n_sample = p->n_sample;
    l->n++;
    return 0;
}

static uint64_t select_queries(pd_ch *c)
{
    pd_buf resp;
    pd_buf_init(&resp, 0);
    pd_err err;
    PD_ASSERT_OK(pd__ch_exec(c,
                             "SELECT value FROM system.events WHERE event = 'SelectQuery' "
                             "FORMAT RowBinary",
                             NULL, 0, NULL, &resp, NULL, &err),
                 &err);
    ch_rd r = {(const uint8_t *)resp.data, resp.len, 0, false};
    uint64_t v = pd__ch_rd_u64(&r);
    pd_buf_release(&resp);
    return v;
}

/* A diff in one pass (pd_storage_aggregate_diff) hands over exactly the
 * parts of two pd_storage_aggregate calls (side 0, then side 1), also when
 * a series is on both sides with overlapping ranges, in 3 SELECTs where
 * the two calls take 6; the TSDB (two walks) gives the same parts. */
static void test_diff_one_pass(void **state)
{
    (void)state;
    need_server();
    g_now = 1795710738924;
    pd_storage *ch = open_store("diff");
    char dir[] = "/tmp/pd_ch_diff_XXXXXX";
    pd_storage *ts = open_tsdb(dir);
    pd_err err;
    const int64_t t0 = g_now - 3600000;
    uint64_t ref[2];
    for (int s = 0; s < 2; s++) {
        pd_labels ls;
        labels(&ls, "heap", s ? "b" : "a", NULL);
        ref[s] = pd_labels_hash(&ls);
        for (int k = 0; k < 4; k++) {
            const tprof *t = &g_prof[(k + s) % 4];
            int64_t at = t0 + k * 1000 + s;
            PD_ASSERT_OK(pd_storage_append(ch, &ls, at, t->body, t->len, &t->p, &err), &err);
            PD_ASSERT_OK(pd_storage_append(ts, &ls, at, t->body, t->len, &t->p, &err), &err);
        }
        pd_labels_release(&ls);
    }
    /* new side: a and b over the first 2.5 s; base: b over the last 3 s */
    uint64_t r0[2] = {ref[0], ref[1]}, r1[1] = {ref[1]};
    uint32_t g0[2] = {7, 7};
    pd_storage_agg_side sd[2] = {{r0, g0, 2, t0, t0 + 2500, 0},
                                 {r1, NULL, 1, t0 + 1000, t0 + 4000, 0}};

    const char *urls[] = {g_url};
    pd_storage_options co = ch_opts(urls, 1, "diff");
    pd_ch *c;
    PD_ASSERT_OK(pd__ch_open(&co, &c, &err), &err);
    static part_log one, two, tsdb;
    memset(&one, 0, sizeof one);
    memset(&two, 0, sizeof two);
    memset(&tsdb, 0, sizeof tsdb);
    uint64_t q0 = select_queries(c);
    PD_ASSERT_OK(pd_storage_aggregate_diff(ch, sd, log_part, NULL, &one, &err), &err);
    uint64_t q1 = select_queries(c);
    size_t ns[2] = {sd[0].n_series, sd[1].n_series};
    assert_int_equal(ns[0], 2);
    assert_int_equal(ns[1], 1);
    for (int k = 0; k < 2; k++) {
        size_t before = two.n;
        PD_ASSERT_OK(pd_storage_aggregate(ch, sd[k].refs, sd[k].group, sd[k].n, sd[k].mint,
                                          sd[k].maxt, log_part, NULL, &two, NULL, &err),
                     &err);
        for (size_t i = before; i < two.n; i++)
            two.v[i].info.side = k;
    }
    uint64_t q2 = select_queries(c);
    /* the counter read counts itself the same way each time; a pass is 4
       SELECTs (headers, sums, stacks, their locations), an aggregation 5
       (its headers summed per bucket, then the sample types read once per
       set): two aggregations 10, the one pass 4 */
    assert_int_equal((q2 - q1) - (q1 - q0), 6);
    /* the TSDB's refs are its own: a and b selected */
    pd_series_set set;
    PD_ASSERT_OK(pd_storage_select(ts, NULL, 0, INT64_MIN, INT64_MAX, &set, &err), &err);
    assert_int_equal(set.n, 2);
    assert_string_equal(pd_labels_get(&set.v[0].labels, "instance"), "a");
    uint64_t tr0[2] = {set.v[0].ref, set.v[1].ref}, tr1[1] = {set.v[1].ref};
    pd_series_set_release(&set);
    sd[0].refs = tr0;
    sd[1].refs = tr1;
    PD_ASSERT_OK(pd_storage_aggregate_diff(ts, sd, log_part, NULL, &tsdb, &err), &err);
    assert_int_equal(sd[0].n_series, 2);
    assert_int_equal(sd[1].n_series, 1);

    assert_true(one.n >= 2);
    assert_int_equal(one.n, two.n);
    int64_t side_tot[2][8] = {{0}}, tsdb_tot[2][8] = {{0}};
    for (size_t i = 0; i < one.n; i++) {
        assert_int_equal(one.v[i].info.side, two.v[i].info.side);
        assert_int_equal(one.v[i].info.series, two.v[i].info.series);
        assert_int_equal(one.v[i].info.n_series, two.v[i].info.n_series);
        assert_int_equal(one.v[i].info.n_profiles, two.v[i].info.n_profiles);
        assert_int_equal(one.v[i].info.min_ts, two.v[i].info.min_ts);
        assert_int_equal(one.v[i].info.max_ts, two.v[i].info.max_ts);
        assert_int_equal(one.v[i].n_sample, two.v[i].n_sample);
        assert_memory_equal(one.v[i].totals, two.v[i].totals, sizeof one.v[i].totals);
        for (int k = 0; k < 8; k++)
            side_tot[one.v[i].info.side][k] += one.v[i].totals[k];
    }
    assert_int_equal(one.v[0].info.side, 0);
    assert_int_equal(one.v[one.n - 1].info.side, 1);
    /* the profiles on each side: a at 0, 1000, 2000 and b at 1, 1001, 2001;
       b at 1001 .. 3001 */
    size_t prof[2] = {0, 0};
    for (size_t i = 0; i < one.n; i++)
        prof[one.v[i].info.side] += one.v[i].info.n_profiles;
    assert_int_equal(prof[0], 6);
    assert_int_equal(prof[1], 3);
    for (size_t i = 0; i < tsdb.n; i++)
        for (int k = 0; k < 8; k++)
            tsdb_tot[tsdb.v[i].info.side][k] += tsdb.v[i].totals[k];
    assert_memory_equal(side_tot, tsdb_tot, sizeof side_tot);
    assert_int_not_equal(side_tot[0][0], side_tot[1][0]);

    /* 20,000 refs (unknown ones add nothing): the IN lists pass
       ClickHouse's default max_query_size of 256 KiB (regression: a merge
       of ~6,000 series was refused "Max query size exceeded") */
    size_t nbig = 20000;
    uint64_t *big = malloc(nbig * sizeof *big);
    uint32_t *bg = calloc(nbig, sizeof *bg);
    assert_non_null(big);
    assert_non_null(bg);
    for (size_t i = 0; i < nbig; i++)
        big[i] = i < 2 ? ref[i] : 1000000000000000000ull + i;
    static part_log bigl;
    memset(&bigl, 0, sizeof bigl);
    pd_storage_agg_side bd[2] = {{big, bg, nbig, t0, t0 + 2500, 0},
                                 {big + 1, bg, nbig - 1, t0 + 1000, t0 + 4000, 0}};
    PD_ASSERT_OK(pd_storage_aggregate_diff(ch, bd, log_part, NULL, &bigl, &err), &err);
    assert_int_equal(bigl.n, one.n);
    for (size_t i = 0; i < one.n; i++)
        assert_memory_equal(bigl.v[i].totals, one.v[i].totals, sizeof one.v[i].totals);
    free(big);
    free(bg);

    pd__ch_close(c);
    pd_storage_close(ch);
    rm_tsdb(ts, dir);
}

/* The span filter (storage.h, pd_storage_sample_filter) on ClickHouse:
 * every case of span_fixture.h as the TSDB answers it (each stack that
 * survives the GROUP BY checked on its blob's labels), for plain series,
 * one group, and a cumulative series (storage.c's weighted profiles). */
static void test_span_filter(void **state)
{
    (void)state;
    need_server();
    g_now = 1795710738924;
    pd_storage *ch = open_store("spans");
    enum { NP = 4, NS = 2 };
    pd_err err;
    for (int j = 0; j < NP; j++)
        for (int i = 0; i < NS; i++) {
            for (int cum = 0; cum < 2; cum++) {
                pd_profile p;
                span_build(j, &p);
                for (size_t k = 0; cum && k < p.n_sample; k++)
                    p.sample[k].value[0] *= j + 1; /* a counter: profile j holds (j+1) x */
                pd_buf body;
                pd_buf_init(&body, 0);
                assert_int_equal(pd_profile_encode(&p, true, &body), 0);
                pd_labels ls;
                labels(&ls, cum ? "allocs" : "cpu", i ? "i1" : "i0", NULL);
                PD_ASSERT_OK(pd_storage_append(ch, &ls, g_now - 3600000 + j * 1000,
                                               (const uint8_t *)body.data, body.len, &p, &err),
                             &err);
                pd_labels_release(&ls);
                pd_buf_release(&body);
                pd_profile_release(&p);
            }
        }
    uint64_t refs[NS], crefs[NS];
    for (int cum = 0; cum < 2; cum++) {
        pd_matcher m;
        PD_ASSERT_OK(pd_matcher_init(&m, PD_MATCH_EQ, "__name__", cum ? "allocs" : "cpu", &err),
                     &err);
        pd_series_set set;
        PD_ASSERT_OK(pd_storage_select(ch, &m, 1, INT64_MIN, INT64_MAX, &set, &err), &err);
        pd_matcher_release(&m);
        assert_int_equal(set.n, NS);
        for (size_t i = 0; i < set.n; i++)
            (cum ? crefs : refs)[i] = set.v[i].ref;
        pd_series_set_release(&set);
    }
    static const uint32_t one_group[NS] = {0, 0};
    span_check_cases(ch, refs, NULL, NS, NP, "ClickHouse");
    span_check_cases(ch, refs, one_group, NS, NP, "ClickHouse, one group");
    uint64_t ids[] = {SB}, mask[NS] = {1, 1};
    pd_storage_sample_filter f = {.span_ids = ids, .n_span_ids = 1};
    sum s = {0};
    size_t n_deltas = 0;
    PD_ASSERT_OK(pd_storage_aggregate_filtered(ch, &f, crefs, NULL, mask, NS, INT64_MIN, INT64_MAX,
                                               sum_fn, NULL, &s, NULL, &n_deltas, &err),
                 &err);
    assert_int_equal(n_deltas, (NP - 1) * NS);
    assert_int_equal(s.value, (int64_t)V_B * (NP - 1) * NS);
    assert_int_equal(s.names, V_B);
    /* the blob check alone: a malformed blob passes nothing */
    static const uint8_t junk[] = {0xff, 0xff, 0xff};
    assert_false(pd__ch_stack_passes(junk, sizeof junk, &f));
    pd_storage_close(ch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stack_roundtrip_real_profiles),
        cmocka_unit_test(test_stack_key_from_cache),
        cmocka_unit_test(test_location_system_names),
        cmocka_unit_test(test_stack_blob_damage),
        cmocka_unit_test(test_sql_literals),
        cmocka_unit_test(test_backend),
        cmocka_unit_test(test_single_profile_rebuilt),
        cmocka_unit_test(test_deltas_as_tsdb),
        cmocka_unit_test(test_push_duplicates),
        cmocka_unit_test(test_append_many),
        cmocka_unit_test(test_diff_one_pass),
        cmocka_unit_test(test_span_filter),
        cmocka_unit_test(test_reads_bounded_by_granules),
        cmocka_unit_test(test_retention_owned_by_database),
        cmocka_unit_test(test_schema_newer_refused_and_dead_url),
        cmocka_unit_test(test_replicated_layout_checks),
    };
    int rc = load_all(NULL);
    if (rc == 0)
        rc = start_server(NULL);
    if (rc != 0)
        return 1;
    rc = cmocka_run_group_tests(tests, NULL, stop_server);
    return rc;
}
