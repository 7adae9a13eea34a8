/*
 * storage/tsdb/head.c — the head: the series index and the append path
 * (as Prometheus' tsdb/head.go and head_append.go), and the WAL record
 * payloads the append writes and the replay (replay.c) and readers
 * (querier.c) parse. Locking: top of db.c.
 *
 * Record payloads (integers: u64/i64 fixed little endian; varint = unsigned
 * LEB128; str = varint length + bytes, no NUL inside):
 *
 *   SERIES  (type 1), written the first time a series is appended:
 *     +---------+--------------+---------------------------------+
 *     | ref u64 | n varint     | n x (name str, value str)       |
 *     +---------+--------------+---------------------------------+
 *   PROFILE (type 2):
 *     +---------+-----------+---------+----------------------------+
 *     | ref u64 | ts_ms i64 | k varint| k x (type str, unit str)   |
 *     +---------+-----------+---------+----------------------------+
 *     | k x total (zigzag varint)     | body_len varint | body     |
 *     +-------------------------------+-----------------+----------+
 *
 * A new series' SERIES and PROFILE records go out in the same write(2).
 * Refs are assigned 1, 2, 3, ... in append order and persisted by SERIES
 * records, so they are stable across restarts.
 *
 * Index: series live in by_ref (sorted by ref; binary search), in a
 * chained hash table on pd_labels_hash (compared with pd_labels_cmp), and in
 * postings (postings.c: label pair -> ascending refs) that select intersects
 * before testing the matchers on the candidates only. Each
 * series keeps its points sorted by ts: (ts, sample-type set, totals, head
 * group and position of the decomposed profile, where its WAL record is).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/crc32c.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/time.h"
#include "base/varint.h"
#include "storage/storage.h"
#include "storage/tsdb/block_int.h"
#include "storage/tsdb/head_int.h"
#include "storage/tsdb/headmem_int.h"
#include "storage/tsdb/postings_int.h"
#include "storage/tsdb/wal_int.h"
#include "storage/tsdb/warnings_int.h"
#include "storage/tsdb/db_int.h"

/* ---- series and index ---- */

void pd__tsdb_series_free(pd_tsdb *s, series *se)
{
    if (!se)
        return;
    pd__hchunks_release(&s->hm, &se->hc);
    pd_labels_release(&se->labels);
    free(se->brefs);
    free(se->cpts);
    for (size_t i = 0; i < se->n_tsets; i++) {
        for (size_t j = 0; j < se->tsets[i].n; j++) {
            free(se->tsets[i].d[j].type);
            free(se->tsets[i].d[j].unit);
        }
        free(se->tsets[i].d);
    }
    free(se->tsets);
    free(se->pts);
    free(se->totals);
    free(se);
}

series *pd__tsdb_find_by_ref(const pd_tsdb *s, uint64_t ref)
{
    size_t lo = 0, hi = s->n_series;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->by_ref[mid]->ref < ref)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->n_series && s->by_ref[lo]->ref == ref ? s->by_ref[lo] : NULL;
}

series *pd__tsdb_find_by_labels(const pd_tsdb *s, const pd_labels *ls, uint64_t hash)
{
    if (!s->n_buckets)
        return NULL;
    for (series *se = s->buckets[hash & (s->n_buckets - 1)]; se; se = se->hnext)
        if (se->hash == hash && pd_labels_cmp(&se->labels, ls) == 0)
            return se;
    return NULL;
}

/* Makes room for one more series (by_ref and the hash table). Call under the
 * idx write lock (it moves memory readers use). 0 or PD_ENOMEM. */
int pd__tsdb_reserve_series(pd_tsdb *s)
{
    if (s->n_series == s->cap_series) {
        size_t nc = s->cap_series ? s->cap_series * 2 : 64;
        series **nr = realloc(s->by_ref, nc * sizeof *nr);
        if (!nr)
            return PD_ENOMEM;
        s->by_ref = nr;
        s->cap_series = nc;
    }
    if ((s->n_series + 1) * 4 > s->n_buckets * 3) {
        size_t nb = s->n_buckets ? s->n_buckets * 2 : 64;
        series **b = calloc(nb, sizeof *b);
        if (!b)
            return PD_ENOMEM;
        for (size_t i = 0; i < s->n_series; i++) {
            series *se = s->by_ref[i];
            se->hnext = b[se->hash & (nb - 1)];
            b[se->hash & (nb - 1)] = se;
        }
        free(s->buckets);
        s->buckets = b;
        s->n_buckets = nb;
    }
    return 0;
}

/* Inserts se (pd__tsdb_reserve_series done). Keeps by_ref sorted. Cannot fail. */
void pd__tsdb_insert_series(pd_tsdb *s, series *se)
{
    size_t i = s->n_series;
    while (i > 0 && s->by_ref[i - 1]->ref > se->ref)
        i--;
    memmove(s->by_ref + i + 1, s->by_ref + i, (s->n_series - i) * sizeof *s->by_ref);
    s->by_ref[i] = se;
    s->n_series++;
    series **b = &s->buckets[se->hash & (s->n_buckets - 1)];
    se->hnext = *b;
    *b = se;
    if (se->ref >= s->next_ref)
        s->next_ref = se->ref + 1;
    if (!s->post_broken && pd__postings_add(&s->post, &se->labels, se->ref) < 0) {
        pd_log_warn("storage: out of memory indexing series labels; selects scan every series",
                    "%s", "");
        s->post_broken = true;
    }
}

/* First point index with ts >= t. */
size_t pd__tsdb_lower_bound(const series *se, int64_t t)
{
    size_t lo = 0, hi = se->n_pts;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (se->pts[mid].ts < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

bool pd__tsdb_has_ts(const series *se, int64_t ts)
{
    size_t i = pd__tsdb_lower_bound(se, ts);
    return i < se->n_pts && se->pts[i].ts == ts;
}

/* Finds or adds the sample-type set (types[k], units[k]) of se; *idx is its
 * index. Strings are (ptr, len) pairs. Call under the idx write lock (or
 * during replay). 0 or PD_ENOMEM. */
int pd__tsdb_find_tset(const series *se, size_t k, const char *const *types, const size_t *tlen,
                       const char *const *units, const size_t *ulen)
{
    /* newest first: a series' type set rarely changes */
    for (size_t i = se->n_tsets; i-- > 0;) {
        const typeset *t = &se->tsets[i];
        if (t->n != k)
            continue;
        size_t j = 0;
        for (; j < k; j++)
            if (strlen(t->d[j].type) != tlen[j] || memcmp(t->d[j].type, types[j], tlen[j]) ||
                strlen(t->d[j].unit) != ulen[j] || memcmp(t->d[j].unit, units[j], ulen[j]))
                break;
        if (j == k)
            return i > INT32_MAX ? -1 : (int)i;
    }
    return -1;
}

int pd__tsdb_intern_tset(series *se, size_t k, const char *const *types, const size_t *tlen,
                         const char *const *units, const size_t *ulen, uint32_t *idx /* OUT */)
{
    int found = pd__tsdb_find_tset(se, k, types, tlen, units, ulen);
    if (found >= 0) {
        *idx = (uint32_t)found;
        return 0;
    }
    if (se->n_tsets >= UINT32_MAX)
        return PD_ENOMEM;
    if (se->n_tsets == se->cap_tsets) {
        size_t nc = se->cap_tsets ? se->cap_tsets * 2 : 2;
        typeset *nt = realloc(se->tsets, nc * sizeof *nt);
        if (!nt)
            return PD_ENOMEM;
        se->tsets = nt;
        se->cap_tsets = nc;
    }
    typeset t = {.n = k, .d = calloc(k ? k : 1, sizeof *t.d)};
    if (!t.d)
        return PD_ENOMEM;
    for (size_t j = 0; j < k; j++) {
        t.d[j].type = strndup(types[j], tlen[j]);
        t.d[j].unit = strndup(units[j], ulen[j]);
        if (!t.d[j].type || !t.d[j].unit) {
            for (size_t q = 0; q <= j; q++) {
                free(t.d[q].type);
                free(t.d[q].unit);
            }
            free(t.d);
            return PD_ENOMEM;
        }
    }
    se->tsets[se->n_tsets] = t;
    *idx = (uint32_t)se->n_tsets++;
    return 0;
}

/* Makes room for one more point with k totals. Under the idx write lock. */
int pd__tsdb_reserve_point(series *se, size_t k)
{
    if (se->n_pts == se->cap_pts) {
        size_t nc = se->cap_pts ? se->cap_pts * 2 : 16;
        point *np = realloc(se->pts, nc * sizeof *np);
        if (!np)
            return PD_ENOMEM;
        se->pts = np;
        se->cap_pts = nc;
    }
    if (se->n_tot + k > UINT32_MAX)
        return PD_ENOMEM;
    if (se->n_tot + k > se->cap_tot) {
        size_t nc = se->cap_tot ? se->cap_tot : 16;
        while (nc < se->n_tot + k)
            nc *= 2;
        int64_t *nt = realloc(se->totals, nc * sizeof *nt);
        if (!nt)
            return PD_ENOMEM;
        se->totals = nt;
        se->cap_tot = nc;
    }
    return 0;
}

bool pd__tsdb_has_room(const series *se, size_t k)
{
    return se->n_pts < se->cap_pts && se->n_tot + k <= se->cap_tot;
}

/* Inserts p (ts not present; pd__tsdb_reserve_point done) with its k totals. */
void pd__tsdb_insert_point(series *se, point p, const int64_t *totals, size_t k)
{
    p.tot = (uint32_t)se->n_tot;
    if (k)
        memcpy(se->totals + se->n_tot, totals, k * sizeof *totals);
    se->n_tot += k;
    size_t i =
        se->n_pts && se->pts[se->n_pts - 1].ts < p.ts ? se->n_pts : pd__tsdb_lower_bound(se, p.ts);
    memmove(se->pts + i + 1, se->pts + i, (se->n_pts - i) * sizeof *se->pts);
    se->pts[i] = p;
    se->n_pts++;
}

/* ---- record payloads ---- */

static void put_u64le(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

int pd__tsdb_buf_put_u64le(pd_buf *b, uint64_t v)
{
    uint8_t t[8];
    put_u64le(t, v);
    return pd_buf_append(b, t, 8);
}

int pd__tsdb_buf_put_str(pd_buf *b, const char *s, size_t len)
{
    int rc = pd_buf_put_varint(b, len);
    return rc < 0 ? rc : pd_buf_append(b, s, len);
}

uint64_t pd__tsdb_rd_u64le(reader *r)
{
    if (r->bad || r->len - r->pos < 8) {
        r->bad = true;
        return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)r->p[r->pos + i] << (8 * i);
    r->pos += 8;
    return v;
}

uint64_t pd__tsdb_rd_varint(reader *r)
{
    uint64_t v = 0;
    size_t n = r->bad ? 0 : pd_varint_get(r->p + r->pos, r->len - r->pos, &v);
    if (n == 0) {
        r->bad = true;
        return 0;
    }
    r->pos += n;
    return v;
}

/* A string: (pointer into the payload, length); no NUL inside, <= MAX_STR. */
const char *pd__tsdb_rd_str(reader *r, size_t *len)
{
    uint64_t n = pd__tsdb_rd_varint(r);
    if (r->bad || n > MAX_STR || n > r->len - r->pos ||
        memchr(r->p + r->pos, 0, (size_t)n) != NULL) {
        r->bad = true;
        *len = 0;
        return "";
    }
    const char *s = (const char *)r->p + r->pos;
    r->pos += (size_t)n;
    *len = (size_t)n;
    return s;
}

void pd__profile_rec_release(profile_rec *pr)
{
    free(pr->types);
    free(pr->units);
    free(pr->tlen);
    free(pr->ulen);
    free(pr->totals);
    memset(pr, 0, sizeof *pr);
}

static int profile_rec_alloc(profile_rec *pr, size_t k)
{
    size_t n = k ? k : 1;
    pr->k = k;
    pr->types = calloc(n, sizeof *pr->types);
    pr->units = calloc(n, sizeof *pr->units);
    pr->tlen = calloc(n, sizeof *pr->tlen);
    pr->ulen = calloc(n, sizeof *pr->ulen);
    pr->totals = calloc(n, sizeof *pr->totals);
    if (!pr->types || !pr->units || !pr->tlen || !pr->ulen || !pr->totals) {
        pd__profile_rec_release(pr);
        return PD_ENOMEM;
    }
    return 0;
}

int pd__profile_rec_parse(const uint8_t *p, size_t len, profile_rec *pr /* OUT */, const char **why)
{
    memset(pr, 0, sizeof *pr);
    reader r = {.p = p, .len = len};
    uint64_t ref = pd__tsdb_rd_u64le(&r);
    int64_t ts = (int64_t)pd__tsdb_rd_u64le(&r);
    uint64_t k = pd__tsdb_rd_varint(&r);
    if (r.bad)
        return *why = "truncated profile record header", PD_ECORRUPT;
    if (k > MAX_SAMPLE_TYPES)
        return *why = "too many sample types", PD_ECORRUPT;
    if (profile_rec_alloc(pr, (size_t)k) < 0)
        return PD_ENOMEM;
    pr->ref = ref;
    pr->ts = ts;
    for (size_t i = 0; i < k; i++) {
        pr->types[i] = pd__tsdb_rd_str(&r, &pr->tlen[i]);
        pr->units[i] = pd__tsdb_rd_str(&r, &pr->ulen[i]);
    }
    for (size_t i = 0; i < k; i++)
        pr->totals[i] = pd_zigzag_dec(pd__tsdb_rd_varint(&r));
    uint64_t blen = pd__tsdb_rd_varint(&r);
    if (r.bad || blen != r.len - r.pos) {
        pd__profile_rec_release(pr);
        return *why = r.bad ? "malformed profile record" : "profile body length mismatch",
               PD_ECORRUPT;
    }
    pr->body_off = (uint32_t)r.pos;
    pr->body_len = (uint32_t)blen;
    return 0;
}

/* ---- append ---- */

/* The append of both storage.h entry points: max_shift 0 is
 * pd_tsdb_append's rule (a taken (series, ms) is PD_EEXIST); > 0 is
 * pd_tsdb_append_shift's (the next free ms up to ts_ms + max_shift,
 * looked for under app_mu so that two appends racing for one ms both find
 * theirs; *stored_ts receives the ms used). */
static int append_at(pd_tsdb *s, const pd_labels *labels, int64_t ts_ms, const uint8_t *body,
                     size_t len, const pd_profile *profile, int64_t max_shift, int64_t *stored_ts,
                     pd_err *err);

int pd_tsdb_append(pd_tsdb *s, const pd_labels *labels, int64_t ts_ms, const uint8_t *body,
                   size_t len, const pd_profile *profile, pd_err *err)
{
    return append_at(s, labels, ts_ms, body, len, profile, 0, NULL, err);
}

int pd_tsdb_append_shift(pd_tsdb *s, const pd_labels *labels, int64_t ts_ms, const uint8_t *body,
                         size_t len, const pd_profile *profile, int64_t *stored_ts, pd_err *err)
{
    return append_at(s, labels, ts_ms, body, len, profile, PD_STORAGE_MAX_SHIFT_MS, stored_ts, err);
}

/* --storage.retention.size bounds the WAL too (issue 27): past wal_hard (a
 * quarter of the limit + one segment) while the maintenance thread cuts the
 * head, an append waits (app_mu released) for the cut's checkpoint to free
 * segments, at most WAL_BOUND_WAIT_MS; then it is refused, nothing stored.
 * With app_mu held. 0, or PD_ETIMEOUT (the HTTP layers answer 503 with
 * Retry-After). */
#define WAL_BOUND_WAIT_MS 10000
static int wait_wal_bound(pd_tsdb *s, pd_err *err)
{
    if (!s->wal_hard || !s->maint_running || pd__wal_bytes(s->wal) <= s->wal_hard)
        return 0;
    int64_t until = pd__tsdb_now_mono_ms() + WAL_BOUND_WAIT_MS;
    while (pd__wal_bytes(s->wal) > s->wal_hard) {
        pd__tsdb_kick_maintenance(s); /* (takes stop_mu only) */
        int64_t now = pd__tsdb_now_mono_ms();
        if (now >= until || __atomic_load_n(&s->stopping, __ATOMIC_ACQUIRE)) {
            pd_metrics_add("profd_storage_wal_bound_waits_total", "result=\"refused\"", 1);
            return pd_err_set(err, PD_ETIMEOUT,
                              "append: the WAL is at its bound under --storage.retention.size "
                              "(%llu of %llu bytes) and the head cut freeing it did not finish "
                              "within %d s: nothing was stored, retry",
                              (unsigned long long)pd__wal_bytes(s->wal),
                              (unsigned long long)s->wal_hard, WAL_BOUND_WAIT_MS / 1000);
        }
        /* slices of at most 200 ms: a kick lost to a round in progress is
           sent again */
        int64_t next = until - now < 200 ? until : now + 200;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t ns = (int64_t)ts.tv_nsec + (next - now) * 1000000;
        ts.tv_sec += ns / 1000000000;
        ts.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&s->wal_cv, &s->app_mu, &ts);
    }
    pd_metrics_add("profd_storage_wal_bound_waits_total", "result=\"stored\"", 1);
    return 0;
}

static bool ts_taken(const series *se, int64_t ts)
{
    return pd__tsdb_has_ts(se, ts) || pd__tsdb_blocks_have(se, ts);
}

static int append_at(pd_tsdb *s, const pd_labels *labels, int64_t ts_ms, const uint8_t *body,
                     size_t len, const pd_profile *profile, int64_t max_shift, int64_t *stored_ts,
                     pd_err *err)
{
    const char *name = pd_labels_get(labels, "__name__");
    if (!name || !name[0])
        return pd_err_set(err, PD_EINVAL, "append: the series has no __name__ label");
    if (!profile)
        return pd_err_set(err, PD_EINVAL, "append: no decoded profile given");
    size_t k = profile->n_sample_type;
    if (k > MAX_SAMPLE_TYPES)
        return pd_err_set(err, PD_EINVAL, "append: %zu sample types, over the cap of %d", k,
                          MAX_SAMPLE_TYPES);
    if (len > PD_WAL_MAX_RECORD - 65536)
        return pd_err_set(err, PD_ETOOBIG, "append: body of %zu bytes over the cap of %u", len,
                          PD_WAL_MAX_RECORD - 65536);
    int rc0 = pd__tsdb_check_time(s->retention_ms, s->grace_ms, s->clock(), ts_ms, err);
    if (rc0 < 0)
        return rc0;

    int rc;
    pd_buf payload, recs;
    pd_buf_init(&payload, 0);
    pd_buf_init(&recs, 0);
    series *fresh = NULL;
    profile_rec pr;
    memset(&pr, 0, sizeof pr);
    if (profile_rec_alloc(&pr, k) < 0)
        return pd_err_set(err, PD_ENOMEM, "append: out of memory");
    pd_profile_totals(profile, pr.totals);
    for (size_t i = 0; i < k; i++) {
        pr.types[i] = pd_profile_str(profile, profile->sample_type[i].type);
        pr.units[i] = pd_profile_str(profile, profile->sample_type[i].unit);
        pr.tlen[i] = strlen(pr.types[i]);
        pr.ulen[i] = strlen(pr.units[i]);
        if (pr.tlen[i] > MAX_STR || pr.ulen[i] > MAX_STR) {
            pd__profile_rec_release(&pr);
            return pd_err_set(err, PD_EINVAL,
                              "append: sample type %zu has a name or unit over %u bytes", i,
                              MAX_STR);
        }
    }
    uint64_t hash = pd_labels_hash(labels);
    /* the profile's symbols looked up before app_mu: appends do that part
       in parallel (headmem_int.h) */
    pd_hmem_dec dec;
    pd_err herr;
    pd_err_clear(&herr);
    if ((rc = pd__hmem_decompose(&s->hm, profile, ts_ms, &dec, &herr)) < 0) {
        pd__profile_rec_release(&pr);
        return rc == PD_ENOMEM ? pd_err_set(err, rc, "append: out of memory")
                               : pd_err_set(err, rc, "append: %s", herr.msg);
    }

    pthread_mutex_lock(&s->app_mu);
    if ((rc = wait_wal_bound(s, err)) < 0)
        goto out;
    /* appends are serialised by app_mu, the only writer: no idx lock to read */
    series *se = pd__tsdb_find_by_labels(s, labels, hash);
    if (se && max_shift > 0 && ts_taken(se, ts_ms)) { /* the push rule: the next free ms */
        int64_t t = ts_ms + 1;
        while (t - ts_ms < max_shift && ts_taken(se, t))
            t++;
        if (!ts_taken(se, t)) {
            if ((rc = pd__tsdb_check_time(s->retention_ms, s->grace_ms, s->clock(), t, err)) < 0)
                goto out;
            ts_ms = t;
            if (dec.found)
                dec.d.ts = t;
        }
    }
    if (se && ts_taken(se, ts_ms)) {
        pd_buf fmt;
        pd_buf_init(&fmt, 4096);
        pd_labels_format(labels, &fmt);
        rc = pd_err_set(err, PD_EEXIST, "a profile of %s at %lld ms is already stored%s",
                        fmt.data ? fmt.data : name, (long long)ts_ms,
                        max_shift > 0 ? " (as is every ms of the next 999)" : "");
        pd_buf_release(&fmt);
        goto out;
    }
    /* a series' SERIES record is in every segment that holds its profiles:
       a damaged `series` file or SERIES record costs no profile (issue 27) */
    bool relog = se && se->series_seg != pd__wal_current(s->wal);
    if (!se) {
        if (s->next_ref == UINT64_MAX) {
            rc = pd_err_set(err, PD_EINVAL, "append: series refs exhausted");
            goto out;
        }
        if (!(fresh = calloc(1, sizeof *fresh)) || pd_labels_copy(&fresh->labels, labels) < 0) {
            rc = PD_ENOMEM;
            goto nomem;
        }
        fresh->ref = s->next_ref;
        fresh->hash = hash;
        se = fresh;
        relog = true;
    }
    if (relog) {
        /* SERIES record */
        if ((rc = pd__tsdb_buf_put_u64le(&payload, se->ref)) < 0 ||
            (rc = pd_buf_put_varint(&payload, labels->n)) < 0)
            goto nomem;
        for (size_t i = 0; i < labels->n; i++)
            if ((rc = pd__tsdb_buf_put_str(&payload, labels->v[i].name,
                                           strlen(labels->v[i].name))) < 0 ||
                (rc = pd__tsdb_buf_put_str(&payload, labels->v[i].value,
                                           strlen(labels->v[i].value))) < 0)
                goto nomem;
        if ((rc = pd__wal_frame(&recs, PD_WAL_REC_SERIES, (const uint8_t *)payload.data,
                                payload.len)) < 0)
            goto nomem;
        pd_buf_reset(&payload);
    }
    /* PROFILE record */
    if ((rc = pd__tsdb_buf_put_u64le(&payload, se->ref)) < 0 ||
        (rc = pd__tsdb_buf_put_u64le(&payload, (uint64_t)ts_ms)) < 0 ||
        (rc = pd_buf_put_varint(&payload, k)) < 0)
        goto nomem;
    for (size_t i = 0; i < k; i++)
        if ((rc = pd__tsdb_buf_put_str(&payload, pr.types[i], pr.tlen[i])) < 0 ||
            (rc = pd__tsdb_buf_put_str(&payload, pr.units[i], pr.ulen[i])) < 0)
            goto nomem;
    for (size_t i = 0; i < k; i++)
        if ((rc = pd_buf_put_varint(&payload, pd_zigzag_enc(pr.totals[i]))) < 0)
            goto nomem;
    if ((rc = pd_buf_put_varint(&payload, len)) < 0)
        goto nomem;
    point pt = {.ts = ts_ms,
                .len = (uint32_t)(payload.len + len),
                .body_off = (uint32_t)payload.len,
                .body_len = (uint32_t)len};
    if ((rc = pd_buf_append(&payload, body, len)) < 0)
        goto nomem;
    size_t profile_at = recs.len;
    if ((rc = pd__wal_frame(&recs, PD_WAL_REC_PROFILE, (const uint8_t *)payload.data,
                            payload.len)) < 0)
        goto nomem;

    /* everything that can fail, before the WAL write; the profile is
       decomposed and encoded with readers going on (headmem_int.h: what
       readers see changes only under the idx write lock, taken here when a
       series, a type set, a symbol or more room is new), and published
       after the write in one short hold of the write lock */
    pd_hmem_prep hp;
    if ((rc = pd__hmem_prepare(&s->hm, &se->hc, profile, ts_ms, &s->idx, &dec, &hp, &herr)) < 0) {
        if (rc == PD_ENOMEM)
            goto nomem;
        pd_err_set(err, rc, "append: %s", herr.msg);
        goto out;
    }
    int tset = pd__tsdb_find_tset(se, k, pr.types, pr.tlen, pr.units, pr.ulen);
    if (fresh || tset < 0 || !pd__tsdb_has_room(se, k)) {
        pthread_rwlock_wrlock(&s->idx);
        rc = 0;
        if (fresh)
            rc = pd__tsdb_reserve_series(s);
        if (rc == 0)
            rc = pd__tsdb_intern_tset(se, k, pr.types, pr.tlen, pr.units, pr.ulen, &pt.tset);
        if (rc == 0)
            rc = pd__tsdb_reserve_point(se, k);
        pthread_rwlock_unlock(&s->idx);
        if (rc < 0) {
            pd__hmem_abandon(&s->hm, &se->hc, &hp);
            goto nomem;
        }
    } else
        pt.tset = (uint32_t)tset;

    uint32_t seg;
    uint64_t off;
    if ((rc = pd__wal_append(s->wal, (const uint8_t *)recs.data, recs.len, &seg, &off, err)) < 0) {
        pd__hmem_abandon(&s->hm, &se->hc, &hp);
        goto out;
    }
    pt.seg = seg;
    pt.off = off + profile_at;
    if (relog)
        se->series_seg = seg;

    pthread_rwlock_wrlock(&s->idx);
    pd__hmem_publish(&s->hm, &se->hc, &hp, ts_ms, &pt.gid, &pt.gpos);
    if (fresh) {
        pd__tsdb_insert_series(s, fresh);
        fresh = NULL;
    }
    pd__tsdb_insert_point(se, pt, pr.totals, k);
    pd__tsdb_head_range_add(s, ts_ms);
    s->n_profiles++;
    pthread_rwlock_unlock(&s->idx);
    pd__tsdb_compress_sealed(s, se);
    int64_t cut_from;
    if (s->maint_ms <= 0) { /* no maintenance thread: cut here, appends wait */
        /* (unless a pd_tsdb_maintain round runs: it cuts) */
        if (pthread_mutex_trylock(&s->maint_mu) == 0) {
            pd__tsdb_maybe_cut(s, true);
            pthread_mutex_unlock(&s->maint_mu);
        }
    } else if (pd__tsdb_cut_due(s, &cut_from)) /* wake the thread: it cuts while appends go on */
        pd__tsdb_kick_maintenance(s);
    pd__tsdb_update_gauges(s);
    if (stored_ts)
        *stored_ts = ts_ms;
    rc = 0;
    goto out;
nomem:
    if (rc == PD_ETOOBIG)
        pd_err_set(err, rc, "append: record over the cap of %u bytes", PD_WAL_MAX_RECORD);
    else
        rc = pd_err_set(err, PD_ENOMEM, "append: out of memory");
out:
    pthread_mutex_unlock(&s->app_mu);
    pd__hmem_dec_release(&dec); /* (taken over by a prepare) */
    pd__tsdb_series_free(s, fresh);
    pd_buf_release(&payload);
    pd_buf_release(&recs);
    /* pr's strings are borrowed from profile: only its arrays are freed */
    pd__profile_rec_release(&pr);
    return rc;
}
