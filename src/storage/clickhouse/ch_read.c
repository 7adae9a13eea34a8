/*
 * storage/clickhouse/ch_read.c — the profile side of the ClickHouse
 * querier, pushed down as clickhouse.h describes: aggregations (merges as
 * GROUP BY stack hash with sumForEach, the surviving stacks fetched with
 * IN), a single profile rebuilt from its samples rows and stacks, and a
 * diff's two sides in one pass. The headers these fold (the parts'
 * pprof header fields, a merge's per-bucket summaries) are in
 * ch_read_hdr.c, shared through ch_read_int.h; series and points are in
 * ch_select.c.
 *
 * What reads keep between merges (rows by key, a merge's whole buckets) is
 * ch_cache.c's; every hit is exact or checked (ch_cache.h).
 *
 * Every query filters on day (the partition key) as well as ts, so
 * ClickHouse reads only the days in range. Queries name the plain tables:
 * on a cluster those are the Distributed ones, and subqueries use GLOBAL IN
 * (allowed on plain tables too) so one text works in both modes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "base/log.h"
#include "storage/clickhouse/ch_agg.h"
#include "storage/clickhouse/ch_cache.h"
#include "storage/clickhouse/ch_int.h"
#include "storage/clickhouse/ch_read_int.h"
#include "storage/tsdb/warnings_int.h"

#define CH_MAX_PART_STACKS (4u << 20)

/* ---- aggregation ---- */

/* Room for one more stack of nv values in p's sums (capped at
 * CH_MAX_PART_STACKS: PD_ETOOBIG naming `subject` and `unit`). 0,
 * PD_ETOOBIG, PD_ENOMEM. */
static int part_room(ch_part *p, size_t nv, const char *subject, const char *unit, pd_err *err)
{
    if (p->n_stacks < p->cap_stacks)
        return 0;
    size_t nc = p->cap_stacks ? 2 * p->cap_stacks : 256;
    if (nc > CH_MAX_PART_STACKS)
        return pd_err_set(err, PD_ETOOBIG, "%s has more than %u %s", subject, CH_MAX_PART_STACKS,
                          unit);
    uint64_t *s = realloc(p->stack, nc * sizeof *s);
    if (s)
        p->stack = s;
    int64_t *v = s ? realloc(p->values, nc * (nv ? nv : 1) * sizeof *v) : NULL;
    if (!v)
        return pd__ch_nomem(err);
    p->values = v;
    p->cap_stacks = nc;
    return 0;
}

static void parts_release(ch_parts *g)
{
    for (size_t i = 0; i < g->n_parts; i++) {
        pd_u64map_release(&g->parts[i].fps);
        pd_u64map_release(&g->parts[i].at);
        free(g->parts[i].stack);
        free(g->parts[i].values);
    }
    free(g->parts);
    g->parts = NULL;
    g->n_parts = 0;
    pd_arena_release(&g->a);
    pd_arena_init(&g->a);
}

/* Whether every location of the stack row whose String is at blobs[at]
 * was fetched (a schema-3 row has none to fetch). */
static bool locs_present(const pd_u64map *blob_at, const pd_buf *blobs, uint64_t at)
{
    ch_rd r = {(const uint8_t *)blobs->data, blobs->len, (size_t)at, false};
    const uint8_t *s, *keys;
    size_t n;
    pd__ch_rd_str(&r, &s, &n);
    size_t n_loc = r.bad ? 0 : pd__ch_stack_locs(s, n, &keys);
    for (size_t k = 0; k < n_loc; k++)
        if (!pd_u64map_get(blob_at, pd__ch_stack_loc_key(keys, k), NULL))
            return false;
    return true;
}

/* Builds part p's profile from its sums (or, single, one stored profile's
 * samples rows: repeats kept) and the stack blobs into *out. A stack
 * missing from the blobs: in a merge, a warning and its samples left out;
 * for a single profile PD_ECORRUPT (the profile would not be whole). */
static int build(ch_parts *g, ch_part *p, const pd_u64map *blob_at, const pd_buf *blobs,
                 bool single, pd_profile *out, pd_err *err)
{
    pd_profile_builder *b = NULL;
    int rc = pd_profile_builder_new(&g->c->limits, &b);
    if (rc < 0)
        return pd__ch_nomem(err);
    if (single)
        pd_profile_builder_keep_repeats(b);
    for (size_t i = 0; i < p->n_types; i++) {
        int r = pd_profile_builder_sample_type(b, p->types[i], p->units[i], err);
        if (r < 0) {
            rc = r;
            goto out;
        }
    }
    if ((rc = pd_profile_builder_period(b, p->period_type, p->period_unit, p->period, err)) < 0)
        goto out;
    for (size_t i = 0; i < p->n_comments; i++)
        if ((rc = pd_profile_builder_comment(b, p->comments[i], err)) < 0)
            goto out;
    pd_profile *hp = pd_profile_builder_profile(b);
    int64_t s1 = p->drop[0] ? pd_profile_builder_string(b, p->drop, err) : 0;
    int64_t s2 = p->keep[0] ? pd_profile_builder_string(b, p->keep, err) : 0;
    int64_t s3 = p->dst[0] ? pd_profile_builder_string(b, p->dst, err) : 0;
    int64_t s4 = p->doc[0] ? pd_profile_builder_string(b, p->doc, err) : 0;
    if (s1 < 0 || s2 < 0 || s3 < 0 || s4 < 0) {
        rc = (int)(s1 < 0 ? s1 : s2 < 0 ? s2 : s3 < 0 ? s3 : s4);
        goto out;
    }
    hp->drop_frames = s1;
    hp->keep_frames = s2;
    hp->default_sample_type = s3;
    hp->doc_url = s4;
    hp->time_nanos = p->time_nanos;
    hp->duration_nanos = p->duration_nanos;
    ch_locs L = {blob_at, blobs, {0}};
    pd_u64map_init(&L.built);
    for (size_t i = 0; i < p->n_stacks; i++) {
        uint64_t at;
        if (pd_u64map_get(blob_at, p->stack[i], &at) && !locs_present(blob_at, blobs, at)) {
            if (single) {
                __atomic_store_n(&g->c->forget_known, true, __ATOMIC_RELAXED);
                rc = pd_err_set(err, PD_ECORRUPT,
                                "ClickHouse: a location of stack %llu of the profile is missing "
                                "from tables locations_v1 and stacks_v3",
                                (unsigned long long)p->stack[i]);
                goto out;
            }
            pd_log(PD_LOG_WARN, "clickhouse location missing", "stack_hash=%llu",
                   (unsigned long long)p->stack[i]);
            pd__storage_warn("ClickHouse: a location of stack %llu is missing from tables "
                             "locations_v1 and stacks_v3: its samples are left out of the merge",
                             (unsigned long long)p->stack[i]);
            __atomic_store_n(&g->c->forget_known, true, __ATOMIC_RELAXED);
            continue;
        }
        if (!pd_u64map_get(blob_at, p->stack[i], &at) && single) {
            __atomic_store_n(&g->c->forget_known, true, __ATOMIC_RELAXED);
            rc = pd_err_set(err, PD_ECORRUPT,
                            "ClickHouse: stack %llu of the profile is missing from table stacks_v3",
                            (unsigned long long)p->stack[i]);
            goto out;
        }
        if (!pd_u64map_get(blob_at, p->stack[i], &at)) {
            pd_log(PD_LOG_WARN, "clickhouse stack missing", "stack_hash=%llu",
                   (unsigned long long)p->stack[i]);
            pd__storage_warn("ClickHouse: stack %llu is missing from table stacks_v3: its "
                             "samples are left out of the merge",
                             (unsigned long long)p->stack[i]);
            /* the writer's "already written" caches are wrong: new appends
               write their stacks again */
            __atomic_store_n(&g->c->forget_known, true, __ATOMIC_RELAXED);
            continue;
        }
        ch_rd r = {(const uint8_t *)blobs->data, blobs->len, (size_t)at, false};
        const uint8_t *s;
        size_t n;
        pd__ch_rd_str(&r, &s, &n);
        if (g->flt && !pd__ch_stack_passes(s, n, g->flt))
            continue; /* a sample of another span (or of none) */
        if ((rc = pd__ch_stack_add(b, s, n, &p->values[i * p->n_types], &L, err)) < 0)
            goto out;
    }
    rc = pd_profile_builder_finish(b, out, err);
out:
    pd_u64map_release(&L.built);
    pd_profile_builder_free(b);
    return rc;
}

/* Builds part p's profile (build) and hands it to fn. */
static int emit(ch_parts *g, ch_part *p, const pd_u64map *blob_at, const pd_buf *blobs,
                pd_storage_agg_fn fn, void *ctx, pd_err *err)
{
    pd_profile prof;
    memset(&prof, 0, sizeof prof);
    int rc = build(g, p, blob_at, blobs, false, &prof, err);
    if (rc < 0)
        return rc;
    p->info.series = p->first_ref;
    rc = fn(ctx, &p->info, &prof, err);
    pd_profile_release(&prof);
    return rc;
}

/* Fetches the rows want[0..n_want) of stacks_v3 (loc: of locations_v1)
 * with `key IN (...)` (20,000 per query): blob_at maps each key found to
 * its String's offset in blobs. */
static int fetch_rows(pd_ch *c, bool loc, const uint64_t *want, size_t n_want, pd_u64map *blob_at,
                      pd_buf *blobs, int (*poll)(void *ctx, pd_err *err), void *ctx, pd_err *err)
{
    const char *head = loc ? "SELECT loc_key, any(loc) FROM locations_v1 WHERE loc_key IN ("
                           : "SELECT stack_hash, any(stack) FROM stacks_v3 WHERE stack_hash IN (";
    pd_buf sql, resp;
    pd_buf_init(&sql, 0);
    pd_buf_init(&resp, CH_MAX_ANSWER);
    int rc = 0;
    /* the rows the cache holds (a key names its bytes forever) */
    uint64_t *miss = malloc((n_want ? n_want : 1) * sizeof *miss);
    size_t n_miss = 0;
    if (!miss) {
        rc = pd__ch_nomem(err);
        goto out;
    }
    for (size_t i = 0; i < n_want; i++) {
        size_t at;
        if (!pd__ch_cache_get(c->cache, CH_CACHE_ROWS, want[i], blobs, &at))
            miss[n_miss++] = want[i];
        else if (pd_u64map_put(blob_at, want[i], at) < 0) {
            rc = pd__ch_nomem(err);
            goto out;
        }
    }
    want = miss;
    n_want = n_miss;
    for (size_t off = 0; off < n_want; off += 20000) {
        size_t k = n_want - off < 20000 ? n_want - off : 20000;
        pd_buf_reset(&sql);
        pd_buf_reset(&resp);
        rc = pd_buf_puts(&sql, head);
        for (size_t i = 0; rc == 0 && i < k; i++)
            rc = pd_buf_printf(&sql, "%s%llu", i ? "," : "", (unsigned long long)want[off + i]);
        rc = rc ? rc
                : pd_buf_printf(&sql, ") GROUP BY %s FORMAT RowBinary",
                                loc ? "loc_key" : "stack_hash");
        if ((rc = pd__ch_query_built(c, rc, &sql, &resp, err)) < 0)
            goto out;
        ch_rd r = {(const uint8_t *)resp.data, resp.len, 0, false};
        while (pd__ch_rd_more(&r)) {
            uint64_t sh = pd__ch_rd_u64(&r);
            size_t at = r.pos;
            const uint8_t *s;
            size_t sn;
            pd__ch_rd_str(&r, &s, &sn);
            if (r.bad) {
                rc = pd__ch_bad_answer(c, err, "the stacks");
                goto out;
            }
            if (pd_u64map_put(blob_at, sh, blobs->len) < 0 ||
                pd_buf_append(blobs, resp.data + at, r.pos - at) < 0) {
                rc = pd__ch_nomem(err);
                goto out;
            }
            pd__ch_cache_put(c->cache, CH_CACHE_ROWS, sh, resp.data + at, r.pos - at);
        }
        if (poll && (rc = poll(ctx, err)) < 0)
            goto out;
    }
out:
    free(miss);
    pd_buf_release(&sql);
    pd_buf_release(&resp);
    return rc;
}

/* Fetches the stacks want[0..n_want) and then (schema 4) the location rows
 * they name — from locations_v1 (schema 7), then those it lacks from
 * stacks_v3 (written before): blob_at maps each key found to its String's
 * offset in blobs. A location shared by many stacks is fetched and decoded
 * once. */
static int resolve_stacks(pd_ch *c, const uint64_t *want, size_t n_want, pd_u64map *blob_at,
                          pd_buf *blobs, int (*poll)(void *ctx, pd_err *err), void *ctx,
                          pd_err *err)
{
    size_t from = blobs->len;
    int rc = fetch_rows(c, false, want, n_want, blob_at, blobs, poll, ctx, err);
    if (rc < 0)
        return rc;
    uint64_t *locs = NULL;
    size_t n_locs = 0, cap = 0;
    pd_u64map asked;
    pd_u64map_init(&asked);
    ch_rd r = {(const uint8_t *)blobs->data, blobs->len, from, false};
    while (pd__ch_rd_more(&r)) {
        const uint8_t *s, *keys;
        size_t n;
        pd__ch_rd_str(&r, &s, &n);
        size_t n_loc = r.bad ? 0 : pd__ch_stack_locs(s, n, &keys);
        for (size_t k = 0; k < n_loc; k++) {
            uint64_t key = pd__ch_stack_loc_key(keys, k);
            if (key == UINT64_MAX || pd_u64map_get(blob_at, key, NULL) ||
                pd_u64map_get(&asked, key, NULL))
                continue;
            if (n_locs == cap) {
                size_t nc = cap ? 2 * cap : 256;
                uint64_t *v = realloc(locs, nc * sizeof *v);
                if (!v) {
                    rc = pd__ch_nomem(err);
                    goto out;
                }
                locs = v;
                cap = nc;
            }
            if (pd_u64map_put(&asked, key, 1) < 0) {
                rc = pd__ch_nomem(err);
                goto out;
            }
            locs[n_locs++] = key;
        }
    }
    if (n_locs)
        rc = fetch_rows(c, true, locs, n_locs, blob_at, blobs, poll, ctx, err);
    size_t n_old = 0; /* not in locations_v1: rows of schema 4-6, in stacks_v3 */
    for (size_t i = 0; rc == 0 && i < n_locs; i++)
        if (!pd_u64map_get(blob_at, locs[i], NULL))
            locs[n_old++] = locs[i];
    if (rc == 0 && n_old)
        rc = fetch_rows(c, false, locs, n_old, blob_at, blobs, poll, ctx, err);
out:
    free(locs);
    pd_u64map_release(&asked);
    return rc;
}

/* Adds the sums of one answer (RowBinary rows: types_hash, stack_hash,
 * then Array(Int64) values — samples_v3's sumForEach — or, map, a
 * Tuple(Array(UInt16) type indexes, Array(Int64)) — aggs_v1's sumMap) to
 * the parts (a stack's values of every answer added; wrapping, as
 * ClickHouse's sums). Rows of a sample-type set without part (profiles
 * gone meanwhile) are skipped. 0, -EIO (malformed), PD_ETOOBIG, PD_ENOMEM. */
static int add_sums(ch_parts *g, const pd_buf *resp, bool map, pd_err *err)
{
    ch_rd r = {(const uint8_t *)resp->data, resp->len, 0, false};
    while (pd__ch_rd_more(&r)) {
        uint64_t th = pd__ch_rd_u64(&r), sh = pd__ch_rd_u64(&r);
        uint64_t nk = pd__ch_rd_varint(&r);
        if (r.bad || nk > r.len)
            return pd__ch_bad_answer(g->c, err, "the sums per stack");
        ch_part *p = pd__ch_find_part(g, th);
        size_t keys_at = r.pos;
        uint64_t nv = nk;
        if (map) {
            r.pos += 2 * nk;
            nv = pd__ch_rd_varint(&r);
            if (r.bad || r.pos > r.len || nv != nk)
                return pd__ch_bad_answer(g->c, err, "the sums per stack");
        }
        if (!p) {
            for (uint64_t k = 0; k < nv; k++)
                (void)pd__ch_rd_u64(&r);
            continue;
        }
        if (!map && nv != p->n_types)
            return pd__ch_bad_answer(g->c, err, "the sums per stack");
        uint64_t i;
        if (!pd_u64map_get(&p->at, sh, &i)) {
            int rc = part_room(p, p->n_types, "the merge", "distinct stacks", err);
            if (rc < 0)
                return rc;
            i = p->n_stacks++;
            p->stack[i] = sh;
            memset(&p->values[i * p->n_types], 0, p->n_types * sizeof *p->values);
            if (pd_u64map_put(&p->at, sh, i) < 0)
                return pd__ch_nomem(err);
        }
        int64_t *v = &p->values[i * p->n_types];
        for (uint64_t k = 0; k < nv; k++) {
            uint64_t t = k;
            if (map) {
                ch_rd kr = {r.p, r.len, keys_at + 2 * k, false};
                t = pd__ch_rd_u16(&kr);
            }
            uint64_t x = pd__ch_rd_u64(&r);
            if (t >= p->n_types)
                return pd__ch_bad_answer(g->c, err, "the sums per stack");
            v[t] = (int64_t)((uint64_t)v[t] + x);
        }
        if (r.bad)
            return pd__ch_bad_answer(g->c, err, "the sums per stack");
    }
    return 0;
}

/* Drops the parts' stacks whose sums are all zero (a merge leaves them
 * out) and lists the others' hashes in *want (n_want). 0 or PD_ENOMEM. */
static int keep_nonzero(ch_parts *g, uint64_t **want, size_t *n_want, pd_err *err)
{
    size_t total = 0;
    for (size_t i = 0; i < g->n_parts; i++)
        total += g->parts[i].n_stacks;
    uint64_t *w = malloc((total ? total : 1) * sizeof *w);
    if (!w)
        return pd__ch_nomem(err);
    size_t nw = 0;
    for (size_t i = 0; i < g->n_parts; i++) {
        ch_part *p = &g->parts[i];
        size_t nt = p->n_types, j = 0;
        for (size_t s = 0; s < p->n_stacks; s++) {
            bool zero = true;
            for (size_t k = 0; k < nt && zero; k++)
                zero = p->values[s * nt + k] == 0;
            if (zero)
                continue;
            if (j != s) {
                p->stack[j] = p->stack[s];
                memmove(&p->values[j * nt], &p->values[s * nt], nt * sizeof *p->values);
            }
            w[nw++] = p->stack[j++];
        }
        p->n_stacks = j;
        pd_u64map_release(&p->at); /* indexes moved; not used after */
        pd_u64map_init(&p->at);
    }
    *want = w;
    *n_want = nw;
    return 0;
}

/* Appends the sums SELECT of the series fps[0..n) over [mint, maxt] to
 * sql: over PD_CH_SAMPLES (its bucket condition naming the key) and, while
 * samples_v3 may hold rows written before schema 6, UNION ALL the same over
 * samples_v3 (a stack may then have a row from each: add_sums adds them).
 * Counting only rows of stored profiles (write_id is unique per append, and
 * a profile's samples rows have its fingerprint and ts: `write_id IN` alone
 * selects the same rows as the tuple, ~25% faster on 18.16,
 * bench/clickhouse/RESULTS.md), restricted by only(H) (NULL: all of the
 * range). Stacks whose sums are all zero are left out by ClickHouse (the
 * merge drops them, and since schema v2 zero-valued samples have rows). */
static int put_raw_sums(pd_ch *c, pd_buf *sql, const uint64_t *fps, size_t n, int64_t mint,
                        int64_t maxt, const ch_buckets *H,
                        int (*only)(const ch_buckets *, pd_buf *))
{
    int rc = 0;
    int tables = pd__ch_legacy_samples(c) ? 2 : 1;
    for (int k = 0; rc == 0 && k < tables; k++) {
        rc = pd_buf_printf(sql, "%sSELECT types_hash, stack_hash, sumForEach(values) FROM %s WHERE",
                           k ? " UNION ALL " : "", k ? "samples_v3" : PD_CH_SAMPLES);
        rc = rc ? rc : pd__ch_put_fp_range(sql, fps, n, mint, maxt);
        rc = rc ? rc : k ? 0 : pd__ch_put_sample_buckets(sql, mint, maxt);
        rc = rc ? rc : only ? only(H, sql) : 0;
        rc = rc ? rc
                : pd_buf_printf(sql, " AND write_id GLOBAL IN (SELECT write_id FROM %s WHERE",
                                pd__ch_profiles_read(c));
        rc = rc ? rc : pd__ch_put_fp_range(sql, fps, n, mint, maxt);
        rc = rc ? rc
                : pd_buf_puts(sql, ") GROUP BY types_hash, stack_hash HAVING arrayExists(x -> x "
                                   "!= 0, sumForEach(values))");
    }
    return rc ? rc : pd_buf_puts(sql, " FORMAT RowBinary");
}

/* One group: its refs fps[0..n) (indexes idx[] into the caller's refs).
 *
 * a) the profiles' headers (pd__ch_fold_headers, ch_read_hdr.c: summed per
 * series-bucket where exact, else rows in time order; counted in their
 * series-buckets), beside (one round trip of latency) b) the sums from the
 * samples rows when no 10-minute bucket lies wholly inside the range; else
 * one read of aggs_v1 (ch_agg.h): the sums of every bucket the range
 * touches by class (whole, cut at the start, cut at the end) and the
 * reconciliation rows. A class is summed from aggs_v1 when every bucket of
 * it matched — for a cut bucket: every profile aggs_v1 counted there lies
 * inside the range (a range ending after the newest profile, or starting
 * at a series' first). A second round trip only for what did not: the
 * cut ends' samples rows (a range starting amid a series' profiles), a
 * whole bucket whose reconciliation differs. With the read cache
 * (ch_cache.h), b)'s whole-bucket class comes from an earlier answer to the
 * same read when kept (checked by the same rule, dropped when stale) and
 * only the cut ends are read. c) the stacks that survived, resolved with
 * IN (those the cache holds not asked); d) one part per sample-type set. */
static int agg_group(ch_parts *g, const uint64_t *fps, size_t n, const pd_u64map *ref_idx,
                     int64_t mint, int64_t maxt, pd_storage_agg_fn fn,
                     int (*poll)(void *ctx, pd_err *err), void *ctx, pd_u64map *all_fps,
                     pd_err *err)
{
    pd_ch *c = g->c;
    pd_buf blobs;
    pd_buf_init(&blobs, CH_MAX_ANSWER);
    pd_u64map blob_at;
    pd_u64map_init(&blob_at);
    ch_buckets H;
    pd__ch_buckets_init(&H, mint, maxt);
    bool buckets = pd__ch_buckets_any(&H);
    uint64_t *want = NULL;
    size_t n_want = 0;
    int rc;

    /* beside the headers: the sums of the range from the samples rows (no whole
       bucket), or aggs_v1 read once: the sums of every bucket the range
       touches, by class (whole, cut at either end), and the reconciliation
       rows */
    ch_bg bq[3];
    pd_buf bsql[3], bresp[3], cls[3];
    for (int k = 0; k < 3; k++) {
        pd_buf_init(&bsql[k], 0);
        pd_buf_init(&bresp[k], CH_MAX_ANSWER);
        pd_buf_init(&cls[k], CH_MAX_ANSWER);
        bq[k] = (ch_bg){.c = c, .sql = &bsql[k], .resp = &bresp[k]};
    }
    /* the whole buckets' part of an earlier answer to the same read, when
       the cache holds one: then only the cut ends are read (the snapshot
       is checked against the fresh headers below, as a fresh answer) */
    pd_buf snap;
    pd_buf_init(&snap, CH_MAX_ANSWER);
    uint64_t mkey = UINT64_MAX;
    bool mhit = false;
    if (!buckets)
        rc = put_raw_sums(c, &bsql[0], fps, n, mint, maxt, NULL, NULL);
    else
        rc = pd__ch_buckets_put_merge_sql(&H, fps, n, &bsql[0]);
    if (rc == 0 && buckets && c->cache) {
        mkey = XXH3_64bits(bsql[0].data, bsql[0].len);
        mhit = pd__ch_cache_get(c->cache, CH_CACHE_MERGE, mkey, &snap, NULL);
        if (mhit) {
            /* the cut ends, unless the selection (just read) holds no
               profile there: e.g. a range from before the first profile to
               after the last (a profile another profd wrote since shows in
               the headers, and its bucket is then read raw) */
            int64_t first, last;
            ch_buckets E = H;
            if (pd__ch_select_span(c, mint, maxt, &first, &last)) {
                E.cut_lo = H.cut_lo && first < H.lo * PD_CH_AGG_BUCKET_MS;
                E.cut_hi = H.cut_hi && last >= (H.hi + 1) * PD_CH_AGG_BUCKET_MS;
            }
            pd_buf_reset(&bsql[0]);
            rc = pd__ch_buckets_put_ends_sql(&E, fps, n, &bsql[0]);
        }
    }
    if (rc < 0) {
        rc = pd__ch_nomem(err);
        goto out_q;
    }
    bool sent = bsql[0].len > 0;
    if (sent)
        pd__ch_bg_start(&bq[0]);

    /* a) the profiles' headers, summed per bucket where exact */
    rc = pd__ch_fold_headers(g, fps, n, ref_idx, mint, maxt, buckets ? &H : NULL, err);
    int qrc = sent ? pd__ch_bg_join(&bq[0], rc == 0 ? err : NULL) : 0;
    rc = rc ? rc : qrc;
    if (rc < 0)
        goto out_q;
    if (g->n_parts == 0)
        goto out_q;
    for (size_t i = 0; i < g->n_parts; i++)
        for (size_t k = 0; k < g->parts[i].fps.cap; k++) {
            uint64_t key = g->parts[i].fps.kv[2 * k];
            if (key != UINT64_MAX && pd_u64map_get(&g->parts[i].fps, key, NULL))
                (void)pd_u64map_put(all_fps, key, 1);
        }
    if (poll && (rc = poll(ctx, err)) < 0)
        goto out_q;
    if (!buckets) { /* b) the sums, all from the samples rows */
        rc = add_sums(g, &bresp[0], false, err);
        goto out_q;
    }
    /* b) from aggs_v1 the sums of each class whose buckets all matched; the
       others in a second round trip: the whole buckets' from aggs_v1 again
       without those that did not match (their rows and the odd ones'
       left out) and theirs from the samples rows, and the cut ends aggs_v1
       does not serve from the samples rows */
    if (mhit && pd_buf_append(&snap, bresp[0].data, bresp[0].len) < 0) {
        rc = pd__ch_nomem(err);
        goto out_q;
    }
    if ((rc = pd__ch_buckets_take(&H, mhit ? &snap : &bresp[0], cls)) != 0) {
        rc = rc == PD_ENOMEM ? pd__ch_nomem(err) : pd__ch_bad_answer(c, err, "the aggs_v1 sums");
        goto out_q;
    }
    if (mhit && !H.use[0]) /* stale: written to since (or dropped) */
        pd__ch_cache_drop(c->cache, CH_CACHE_MERGE, mkey);
    else if (!mhit && H.use[0] && mkey != UINT64_MAX &&
             (H.hi + 1) * PD_CH_AGG_BUCKET_MS + CH_SEALED_MS <= c->clock()) {
        /* every whole bucket matched and no push is due in any: keep them */
        pd_buf_reset(&snap);
        if (pd__ch_buckets_class_rows(&bresp[0], 0, &snap) == 0)
            pd__ch_cache_put(c->cache, CH_CACHE_MERGE, mkey, snap.data, snap.len);
    }
    for (int k = 0; k < 3; k++)
        if (H.use[k] && (rc = add_sums(g, &cls[k], true, err)) < 0)
            goto out_q;
    bool again = !H.use[0] && H.n_match > 0, unmatched = false;
    bool ends = (H.cut_lo && !H.use[1]) || (H.cut_hi && !H.use[2]);
    for (int k = 0; k < 3; k++) {
        pd_buf_reset(&bsql[k]);
        pd_buf_reset(&bresp[k]);
        bq[k] = (ch_bg){.c = c, .sql = &bsql[k], .resp = &bresp[k]};
    }
    if (!H.use[0]) /* any whole bucket not matched? (else only odd rows) */
        for (size_t i = 0; i < H.n && !unmatched; i++)
            unmatched = !H.v[i].match && H.v[i].bucket >= H.lo && H.v[i].bucket <= H.hi;
    if ((again && pd__ch_buckets_put_agg_sql(&H, fps, n, true, &bsql[0]) < 0) ||
        (unmatched &&
         put_raw_sums(c, &bsql[1], fps, n, mint, maxt, &H, pd__ch_buckets_put_raw_unmatched) < 0) ||
        (ends &&
         put_raw_sums(c, &bsql[2], fps, n, mint, maxt, &H, pd__ch_buckets_put_raw_ends) < 0)) {
        rc = pd__ch_nomem(err);
        goto out_q;
    }
    bool want_q[3] = {again, unmatched, ends};
    for (int k = 0; k < 3; k++)
        if (want_q[k])
            pd__ch_bg_start(&bq[k]);
    for (int k = 0; k < 3; k++) {
        qrc = pd__ch_bg_join(&bq[k], rc == 0 ? err : NULL);
        rc = rc ? rc : qrc;
    }
    if (rc < 0)
        goto out_q;
    for (int k = 0; k < 3 && rc == 0; k++)
        if (want_q[k])
            rc = add_sums(g, &bresp[k], k == 0, err);
out_q:
    pd_buf_release(&snap);
    for (int k = 0; k < 3; k++) {
        pd_buf_release(&bsql[k]);
        pd_buf_release(&bresp[k]);
        pd_buf_release(&cls[k]);
    }
    if (rc < 0 || g->n_parts == 0)
        goto out;
    if ((rc = keep_nonzero(g, &want, &n_want, err)) < 0)
        goto out;
    if (poll && (rc = poll(ctx, err)) < 0)
        goto out;

    /* c) the stacks that survived, resolved with IN */
    if ((rc = resolve_stacks(c, want, n_want, &blob_at, &blobs, poll, ctx, err)) < 0)
        goto out;

    /* d) one part per sample-type set */
    for (size_t i = 0; i < g->n_parts; i++)
        if ((rc = emit(g, &g->parts[i], &blob_at, &blobs, fn, ctx, err)) < 0)
            goto out;
    rc = 0;
out:
    free(want);
    pd__ch_buckets_release(&H);
    pd_u64map_release(&blob_at);
    pd_buf_release(&blobs);
    return rc;
}

int pd__ch_aggregate(pd_ch *c, const uint64_t *refs, const uint32_t *group, size_t n, int64_t mint,
                     int64_t maxt, pd_storage_agg_fn fn, int (*poll)(void *ctx, pd_err *err),
                     void *ctx, size_t *n_series, pd_err *err)
{
    return pd__ch_aggregate_filtered(c, NULL, refs, group, n, mint, maxt, fn, poll, ctx, n_series,
                                     err);
}

int pd__ch_aggregate_filtered(pd_ch *c, const pd_storage_sample_filter *f, const uint64_t *refs,
                              const uint32_t *group, size_t n, int64_t mint, int64_t maxt,
                              pd_storage_agg_fn fn, int (*poll)(void *ctx, pd_err *err), void *ctx,
                              size_t *n_series, pd_err *err)
{
    if (n_series)
        *n_series = 0;
    int rc = 0;
    ch_parts g;
    memset(&g, 0, sizeof g);
    g.c = c;
    g.flt = f;
    pd_arena_init(&g.a);
    pd_u64map ref_idx, all_fps;
    pd_u64map_init(&ref_idx);
    pd_u64map_init(&all_fps);
    uint64_t *fps = malloc((n ? n : 1) * sizeof *fps);
    if (!fps) {
        rc = pd__ch_nomem(err);
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        if (!pd_u64map_get(&ref_idx, refs[i], NULL) && pd_u64map_put(&ref_idx, refs[i], i) < 0) {
            rc = pd__ch_nomem(err);
            goto out;
        }
    if (poll && (rc = poll(ctx, err)) < 0)
        goto out;
    /* groups in the order of their first ref: ordinal per group value, then
       the refs of each ordinal in their order (linear) */
    size_t *ord = malloc((n ? n : 1) * sizeof *ord), *start = calloc(n + 1, sizeof *start);
    size_t n_groups = 0;
    pd_u64map gmap;
    pd_u64map_init(&gmap);
    if (!ord || !start) {
        free(ord);
        free(start);
        rc = pd__ch_nomem(err);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t o;
        if (!group) {
            o = n_groups++;
        } else if (!pd_u64map_get(&gmap, group[i], &o)) {
            o = n_groups++;
            if (pd_u64map_put(&gmap, group[i], o) < 0) {
                rc = pd__ch_nomem(err);
                break;
            }
        }
        ord[i] = (size_t)o;
        start[o + 1]++;
    }
    pd_u64map_release(&gmap);
    for (size_t k = 0; k < n_groups; k++)
        start[k + 1] += start[k];
    for (size_t i = 0; rc == 0 && i < n; i++) /* stable: fps grouped, refs in order */
        fps[start[ord[i]]++] = refs[i];
    for (size_t k = n_groups; k > 0; k--) /* start[k] is now the end of group k */
        start[k] = start[k - 1];
    start[0] = 0;
    for (size_t k = 0; rc == 0 && k < n_groups; k++) {
        rc = agg_group(&g, fps + start[k], start[k + 1] - start[k], &ref_idx, mint, maxt, fn, poll,
                       ctx, &all_fps, err);
        parts_release(&g);
    }
    free(ord);
    free(start);
    if (rc < 0)
        goto out;
    if (n_series)
        *n_series = all_fps.len;
    if (poll && (rc = poll(ctx, err)) < 0)
        goto out;
out:
    parts_release(&g);
    pd_arena_release(&g.a);
    free(fps);
    pd_u64map_release(&ref_idx);
    pd_u64map_release(&all_fps);
    return rc;
}

/* ---- one profile ----
 *
 * A row written by schema v1 holds the producer's body: it is decoded (and
 * is the raw bytes). A v2 row has an empty body: the profile is rebuilt from
 * its header (this row), its samples rows (one per sample of the producer's,
 * of this row's write_id) and their stacks, every sample kept as its own
 * (DESIGN.md §1's multiset); raw is then that profile re-encoded (gzip), as
 * the TSDB serves a profile from a block. */
int pd__ch_read_profile(pd_ch *c, uint64_t ref, int64_t ts_ms, pd_profile *out, pd_buf *raw,
                        pd_err *err)
{
    pd_buf sql, resp, blobs;
    pd_buf_init(&sql, 0);
    pd_buf_init(&resp, c->limits.max_body_bytes ? c->limits.max_body_bytes + 4096 : 0);
    pd_buf_init(&blobs, CH_MAX_ANSWER);
    pd_u64map blob_at, none;
    pd_u64map_init(&blob_at);
    pd_u64map_init(&none);
    ch_parts g;
    memset(&g, 0, sizeof g);
    g.c = c;
    pd_arena_init(&g.a);
    bool built = false;
    int rc = pd_buf_printf(&sql,
                           "SELECT types_hash, fingerprint, ts, sample_types, sample_units, "
                           "period_type, period_unit, period, time_nanos, duration_nanos, "
                           "comments, drop_frames, keep_frames, default_sample_type, doc_url, "
                           "write_id, body FROM %s WHERE fingerprint = %llu AND day = ",
                           pd__ch_profiles_read(c), (unsigned long long)ref);
    rc = rc ? rc : pd__ch_put_sql_day(&sql, pd__ch_day(ts_ms));
    rc = rc ? rc : pd_buf_printf(&sql, " AND ts = %lld LIMIT 1 FORMAT RowBinary", (long long)ts_ms);
    if ((rc = pd__ch_query_built(c, rc, &sql, &resp, err)) < 0)
        goto out;
    if (resp.len == 0) {
        rc = pd_err_set(err, PD_ENOTFOUND, "no profile of series %llu at %lld",
                        (unsigned long long)ref, (long long)ts_ms);
        goto out;
    }
    ch_rd r = {(const uint8_t *)resp.data, resp.len, 0, false};
    if ((rc = pd__ch_fold_row(&g, &r, &none, err)) < 0)
        goto out;
    uint64_t write_id = pd__ch_rd_u64(&r);
    const uint8_t *body;
    size_t len;
    pd__ch_rd_str(&r, &body, &len);
    if (rc > 0 || r.bad || g.n_parts != 1) {
        rc = pd__ch_bad_answer(c, err, "a profile's row");
        goto out;
    }
    if (len) { /* schema v1: the producer's body */
        rc = pd_profile_decode(out, body, len, &c->limits, err);
        if (rc < 0) {
            pd_err_prefix(err,
                          "ClickHouse profile of series %llu at %lld: ", (unsigned long long)ref,
                          (long long)ts_ms);
            rc = PD_ECORRUPT;
            goto out;
        }
        built = true;
        if (raw && pd_buf_append(raw, body, len) < 0)
            rc = pd__ch_nomem(err);
        goto out;
    }

    /* schema v2: its samples rows, then their stacks */
    ch_part *p = &g.parts[0];
    pd_buf_reset(&sql);
    pd_buf_release(&resp); /* the rows may outgrow the body's cap */
    pd_buf_init(&resp, CH_MAX_ANSWER);
    /* from PD_CH_SAMPLES, its series' bucket (the key's prefix: a read of
       the rows the series wrote in those 10 minutes); a profile written
       before schema 6 is in samples_v3 */
    rc = 0;
    for (int k = 0; rc == 0 && k < (pd__ch_legacy_samples(c) ? 2 : 1); k++) {
        rc = pd_buf_printf(&sql, "%sSELECT stack_hash, values FROM %s WHERE fingerprint = %llu",
                           k ? " UNION ALL " : "", k ? "samples_v3" : PD_CH_SAMPLES,
                           (unsigned long long)ref);
        rc = rc  ? rc
             : k ? 0
                 : pd_buf_printf(&sql, " AND intDiv(ts, %lld) = %lld",
                                 (long long)PD_CH_AGG_BUCKET_MS,
                                 (long long)(ts_ms / PD_CH_AGG_BUCKET_MS));
        rc = rc ? rc : pd_buf_puts(&sql, " AND day = ");
        rc = rc ? rc : pd__ch_put_sql_day(&sql, pd__ch_day(ts_ms));
        rc = rc ? rc
                : pd_buf_printf(&sql, " AND ts = %lld AND write_id = %llu", (long long)ts_ms,
                                (unsigned long long)write_id);
    }
    rc = rc ? rc : pd_buf_puts(&sql, " FORMAT RowBinary");
    if ((rc = pd__ch_query_built(c, rc, &sql, &resp, err)) < 0)
        goto out;
    r = (ch_rd){(const uint8_t *)resp.data, resp.len, 0, false};
    size_t nt = p->n_types;
    while (pd__ch_rd_more(&r)) {
        uint64_t sh = pd__ch_rd_u64(&r);
        uint64_t nv = pd__ch_rd_varint(&r);
        if (r.bad || nv != nt) {
            rc = pd__ch_bad_answer(c, err, "a profile's samples");
            goto out;
        }
        if ((rc = part_room(p, nt, "the profile", "samples", err)) < 0)
            goto out;
        for (size_t k = 0; k < nt; k++)
            p->values[p->n_stacks * nt + k] = (int64_t)pd__ch_rd_u64(&r);
        if (r.bad) {
            rc = pd__ch_bad_answer(c, err, "a profile's samples");
            goto out;
        }
        p->stack[p->n_stacks++] = sh;
    }
    if ((rc = resolve_stacks(c, p->stack, p->n_stacks, &blob_at, &blobs, NULL, NULL, err)) < 0)
        goto out;
    if ((rc = build(&g, p, &blob_at, &blobs, true, out, err)) < 0) {
        pd_err_prefix(err, "ClickHouse profile of series %llu at %lld: ", (unsigned long long)ref,
                      (long long)ts_ms);
        goto out;
    }
    built = true;
    if (raw && (rc = pd_profile_encode(out, true, raw)) < 0)
        rc = pd_err_set(err, rc, "ClickHouse profile of series %llu at %lld: re-encoding: %s",
                        (unsigned long long)ref, (long long)ts_ms, pd_strerror(rc));
out:
    if (rc < 0 && built)
        pd_profile_release(out);
    parts_release(&g);
    pd_arena_release(&g.a);
    pd_u64map_release(&blob_at);
    pd_u64map_release(&none);
    pd_buf_release(&sql);
    pd_buf_release(&resp);
    pd_buf_release(&blobs);
    return rc;
}

/* ---- a diff in one pass ---- */

/* Appends one stack's sums (nv values read from r) to part p when they are
 * not all zero; *want gets the stack hash the first time any side wants it
 * (seen). nv == 0 is a side without rows for the stack (sumForEachIf of
 * nothing is []). 0, 1 (malformed), or PD_ETOOBIG/PD_ENOMEM. */
static int part_push(ch_part *p, uint64_t sh, ch_rd *r, uint64_t nv, pd_u64map *seen,
                     uint64_t **want, size_t *n_want, size_t *cap_want, pd_err *err)
{
    if (nv == 0)
        return 0;
    if (nv != p->n_types)
        return 1;
    int rc = part_room(p, nv, "the merge", "distinct stacks", err);
    if (rc < 0)
        return rc;
    bool zero = true;
    for (size_t k = 0; k < nv; k++) {
        int64_t x = (int64_t)pd__ch_rd_u64(r);
        p->values[p->n_stacks * nv + k] = x;
        zero = zero && x == 0;
    }
    if (r->bad)
        return 1;
    if (zero)
        return 0;
    p->stack[p->n_stacks++] = sh;
    if (pd_u64map_get(seen, sh, NULL))
        return 0;
    if (pd_u64map_put(seen, sh, 1) < 0)
        return pd__ch_nomem(err);
    if (*n_want == *cap_want) {
        size_t nc = *cap_want ? 2 * *cap_want : 256;
        uint64_t *w = realloc(*want, nc * sizeof *w);
        if (!w)
            return pd__ch_nomem(err);
        *want = w;
        *cap_want = nc;
    }
    (*want)[(*n_want)++] = sh;
    return 0;
}

int pd__ch_aggregate_diff(pd_ch *c, pd_storage_agg_side side[2], pd_storage_agg_fn fn,
                          int (*poll)(void *ctx, pd_err *err), void *ctx, pd_err *err)
{
    ch_parts g[2];
    pd_u64map ref_idx[2], all_fps[2], seen, blob_at;
    pd_buf cond[2], sql, resp, blobs;
    for (int k = 0; k < 2; k++) {
        memset(&g[k], 0, sizeof g[k]);
        g[k].c = c;
        pd_arena_init(&g[k].a);
        pd_u64map_init(&ref_idx[k]);
        pd_u64map_init(&all_fps[k]);
        pd_buf_init(&cond[k], 0);
        side[k].n_series = 0;
    }
    pd_u64map_init(&seen);
    pd_u64map_init(&blob_at);
    pd_buf_init(&sql, 0);
    pd_buf_init(&resp, CH_MAX_ANSWER);
    pd_buf_init(&blobs, CH_MAX_ANSWER);
    uint64_t *want = NULL;
    size_t n_want = 0, cap_want = 0;
    int rc = 0;

    /* The filter: an envelope the primary key serves (every fingerprint of
       either side, the time from the first side's start to the last one's
       end), and per row its side flags s0/s1 from one transform() of the
       fingerprint (bit k: on side k) and the side's time range — an
       `fingerprint IN (...)` per side evaluated per row made the pass
       slower than two. */
    uint64_t *fps = NULL;
    size_t n_fps = 0;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    bool on_side[2];
    for (int k = 0; k < 2 && rc == 0; k++) {
        on_side[k] = side[k].n && side[k].mint <= side[k].maxt;
        for (size_t i = 0; i < side[k].n && rc == 0; i++) {
            uint64_t fp = side[k].refs[i], flags = 0;
            if (!pd_u64map_get(&ref_idx[k], fp, NULL) && pd_u64map_put(&ref_idx[k], fp, i) < 0)
                rc = PD_ENOMEM;
            if (!on_side[k])
                continue;
            if (!pd_u64map_get(&seen, fp, &flags)) {
                uint64_t *v = n_fps % 1024 ? fps : realloc(fps, (n_fps + 1024) * sizeof *v);
                if (!v) {
                    rc = PD_ENOMEM;
                    break;
                }
                fps = v;
                fps[n_fps++] = fp;
            }
            if (rc == 0 && pd_u64map_put(&seen, fp, flags | (1u << k)) < 0)
                rc = PD_ENOMEM;
        }
        if (on_side[k]) {
            lo = side[k].mint < lo ? side[k].mint : lo;
            hi = side[k].maxt > hi ? side[k].maxt : hi;
        }
    }
    if (rc == 0 && n_fps == 0) { /* no side has a series and a range */
        free(fps);
        goto done;
    }
    /* cond[0]: the envelope; cond[1]: the columns pd_f, s0, s1 */
    rc = rc ? rc : pd__ch_put_fp_range(&cond[0], fps, n_fps, lo, hi);
    rc = rc ? rc : pd_buf_puts(&cond[1], "transform(fingerprint, CAST([");
    for (size_t i = 0; rc == 0 && i < n_fps; i++)
        rc = pd_buf_printf(&cond[1], "%s%llu", i ? "," : "", (unsigned long long)fps[i]);
    rc = rc ? rc : pd_buf_puts(&cond[1], "] AS Array(UInt64)), [");
    for (size_t i = 0; rc == 0 && i < n_fps; i++) {
        uint64_t flags = 0;
        (void)pd_u64map_get(&seen, fps[i], &flags);
        rc = pd_buf_printf(&cond[1], "%s%u", i ? "," : "", (unsigned)flags);
    }
    rc = rc ? rc : pd_buf_puts(&cond[1], "], 0) AS pd_f");
    for (int k = 0; k < 2 && rc == 0; k++)
        rc = on_side[k]
                 ? pd_buf_printf(&cond[1],
                                 ", (bitAnd(pd_f, %d) != 0 AND ts BETWEEN %lld AND %lld) AS s%d",
                                 1 << k, (long long)side[k].mint, (long long)side[k].maxt, k)
                 : pd_buf_printf(&cond[1], ", 0 AS s%d", k);
    for (int k = 0; k < 2 && rc == 0; k++)
        rc = pd_buf_putc(&cond[k], 0);
    free(fps);
    pd_u64map_release(&seen);
    pd_u64map_init(&seen);
    if (rc < 0) {
        rc = pd__ch_nomem(err);
        goto out;
    }
    if (poll && (rc = poll(ctx, err)) < 0)
        goto out;
    const char *env = (const char *)cond[0].data, *flags_cols = (const char *)cond[1].data;

    /* a) both sides' headers in one query, in time order; a row may be on
       both sides */
    rc = pd_buf_printf(&sql,
                       "SELECT s0, s1, types_hash, fingerprint, ts, sample_types, "
                       "sample_units, period_type, period_unit, period, time_nanos, "
                       "duration_nanos, comments, drop_frames, keep_frames, default_sample_type, "
                       "doc_url FROM (SELECT *, %s FROM %s WHERE%s) WHERE s0 OR s1 "
                       "ORDER BY ts, fingerprint FORMAT RowBinary",
                       flags_cols, pd__ch_profiles_read(c), env);
    if ((rc = pd__ch_query_built(c, rc, &sql, &resp, err)) < 0)
        goto out;
    ch_rd r = {(const uint8_t *)resp.data, resp.len, 0, false};
    while (pd__ch_rd_more(&r)) {
        if (r.len - r.pos < 2) {
            rc = pd__ch_bad_answer(c, err, "the profiles' headers");
            goto out;
        }
        bool on[2] = {r.p[r.pos] != 0, r.p[r.pos + 1] != 0};
        r.pos += 2;
        size_t at = r.pos, end = at;
        if (!on[0] && !on[1]) { /* the WHERE is s0 OR s1 */
            rc = pd__ch_bad_answer(c, err, "the profiles' headers");
            goto out;
        }
        for (int k = 0; k < 2; k++) {
            if (!on[k])
                continue;
            r.pos = at;
            if ((rc = pd__ch_fold_row(&g[k], &r, &ref_idx[k], err)) < 0)
                goto out;
            if (rc > 0 || r.bad) {
                rc = pd__ch_bad_answer(c, err, "the profiles' headers");
                goto out;
            }
            end = r.pos;
        }
        r.pos = end;
    }
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < g[k].n_parts; i++)
            for (size_t j = 0; j < g[k].parts[i].fps.cap; j++) {
                uint64_t key = g[k].parts[i].fps.kv[2 * j];
                if (key != UINT64_MAX && pd_u64map_get(&g[k].parts[i].fps, key, NULL) &&
                    pd_u64map_put(&all_fps[k], key, 1) < 0) {
                    rc = pd__ch_nomem(err);
                    goto out;
                }
            }
    if (g[0].n_parts == 0 && g[1].n_parts == 0)
        goto done;
    if (poll && (rc = poll(ctx, err)) < 0)
        goto out;

    /* b) one GROUP BY over samples: the sums of each side */
    pd_buf_reset(&sql);
    pd_buf_reset(&resp);
    /* (the rows of PD_CH_SAMPLES in the envelope's buckets, and while it
       may hold rows, UNION ALL those of samples_v3) */
    rc = pd_buf_puts(&sql, "SELECT types_hash, stack_hash, sumForEachIf(values, s0) AS v0, "
                           "sumForEachIf(values, s1) AS v1 FROM (");
    for (int k = 0; rc == 0 && k < (pd__ch_legacy_samples(c) ? 2 : 1); k++) {
        rc = pd_buf_printf(&sql, "%sSELECT types_hash, stack_hash, values, ts, %s FROM %s WHERE%s",
                           k ? " UNION ALL " : "", flags_cols, k ? "samples_v3" : PD_CH_SAMPLES,
                           env);
        rc = rc ? rc : k ? 0 : pd__ch_put_sample_buckets(&sql, lo, hi);
        rc = rc ? rc
                : pd_buf_printf(&sql,
                                " AND (fingerprint, ts, write_id) GLOBAL IN (SELECT fingerprint, "
                                "ts, write_id FROM %s WHERE%s)",
                                pd__ch_profiles_read(c), env);
    }
    rc = rc ? rc
            : pd_buf_puts(&sql, ") GROUP BY types_hash, stack_hash HAVING arrayExists(x -> x != "
                                "0, v0) OR arrayExists(x -> x != 0, v1) FORMAT RowBinary");
    if ((rc = pd__ch_query_built(c, rc, &sql, &resp, err)) < 0)
        goto out;
    r = (ch_rd){(const uint8_t *)resp.data, resp.len, 0, false};
    while (pd__ch_rd_more(&r)) {
        uint64_t th = pd__ch_rd_u64(&r), sh = pd__ch_rd_u64(&r);
        for (int k = 0; k < 2; k++) {
            uint64_t nv = pd__ch_rd_varint(&r);
            ch_part *p = r.bad ? NULL : pd__ch_find_part(&g[k], th);
            if (r.bad || nv > r.len) {
                rc = pd__ch_bad_answer(c, err, "the sums per stack");
                goto out;
            }
            if (!p) { /* no profile of this side with these types (or gone meanwhile) */
                for (uint64_t v = 0; v < nv; v++)
                    (void)pd__ch_rd_u64(&r);
                continue;
            }
            rc = part_push(p, sh, &r, nv, &seen, &want, &n_want, &cap_want, err);
            if (rc < 0)
                goto out;
            if (rc > 0) {
                rc = pd__ch_bad_answer(c, err, "the sums per stack");
                goto out;
            }
        }
    }
    if (poll && (rc = poll(ctx, err)) < 0)
        goto out;

    /* c) the stacks of both sides, once */
    if ((rc = resolve_stacks(c, want, n_want, &blob_at, &blobs, poll, ctx, err)) < 0)
        goto out;

    /* d) the new side's parts, then the base's */
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < g[k].n_parts; i++) {
            g[k].parts[i].info.side = k;
            if ((rc = emit(&g[k], &g[k].parts[i], &blob_at, &blobs, fn, ctx, err)) < 0)
                goto out;
        }
done:
    side[0].n_series = all_fps[0].len;
    side[1].n_series = all_fps[1].len;
    rc = poll ? poll(ctx, err) : 0;
out:
    for (int k = 0; k < 2; k++) {
        parts_release(&g[k]);
        pd_arena_release(&g[k].a);
        pd_u64map_release(&ref_idx[k]);
        pd_u64map_release(&all_fps[k]);
        pd_buf_release(&cond[k]);
    }
    free(want);
    pd_u64map_release(&seen);
    pd_u64map_release(&blob_at);
    pd_buf_release(&sql);
    pd_buf_release(&resp);
    pd_buf_release(&blobs);
    return rc;
}
