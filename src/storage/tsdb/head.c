/*
 * storage/tsdb/head.c — the embedded store of storage.h, first version: the
 * WAL (wal.c) holds every profile; an in-memory index (the "head") is rebuilt
 * from it on open. Blocks and compaction come with the storage-engine issue.
 *
 * Directory:
 *   PATH/lock          flock(LOCK_EX|LOCK_NB) while open (PD_EEXIST if held)
 *   PATH/wal/NNNNNNNN  WAL segments (wal.c, docs/format/wal.md)
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
 * Index: series live in by_ref (sorted by ref; binary search) and in a
 * chained hash table on pd_labels_hash (compared with pd_labels_cmp). Each
 * series keeps its points sorted by ts: (ts, sample-type set, totals, where
 * its record is). Sample-type sets are interned per series (a series'
 * profiles nearly always share one), totals live in a per-series pool.
 *
 * Locking: app_mu serialises appends (duplicate check, ref assignment, WAL
 * write, index insert), so appenders read the index without idx. Every change
 * to the index is made under the idx write lock, and everything that can fail
 * (allocation) is done before the WAL write, so a record written is always
 * indexed. Readers take idx for reading, copy what they need, and do disk I/O
 * (pread of the record) after releasing it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/varint.h"
#include "storage/storage.h"
#include "storage/tsdb/wal_int.h"

#define MAX_SAMPLE_TYPES 1024 /* per profile, at append and replay */
#define MAX_STR (1u << 20)    /* a label or sample type string read back */

typedef struct typeset {
    size_t n;
    pd_sample_type_desc *d; /* n; strings malloc'ed */
} typeset;

typedef struct point {
    int64_t ts;
    uint64_t off;      /* record header offset in the segment */
    uint32_t seg;      /* segment number */
    uint32_t len;      /* record payload length */
    uint32_t body_off; /* body offset inside the payload */
    uint32_t body_len;
    uint32_t tset; /* index into series.tsets */
    uint32_t tot;  /* index into series.totals (tsets[tset].n values) */
} point;

typedef struct series {
    uint64_t ref, hash;
    pd_labels labels;
    struct series *hnext;
    point *pts;
    size_t n_pts, cap_pts;
    typeset *tsets;
    size_t n_tsets, cap_tsets;
    int64_t *totals;
    size_t n_tot, cap_tot;
} series;

struct pd_storage {
    char *path;
    char waldir[4096];
    pd_pprof_limits limits;
    int lock_fd;
    pd_wal *wal;

    pthread_mutex_t app_mu;
    pthread_rwlock_t idx;
    series **by_ref; /* ascending ref */
    size_t n_series, cap_series;
    series **buckets; /* n_buckets, power of two */
    size_t n_buckets;
    uint64_t next_ref;
    uint64_t n_profiles;
    uint64_t replay_corrupt; /* malformed payloads met on replay */
};

pd_storage_options pd_storage_options_default(void)
{
    pd_storage_options o;
    memset(&o, 0, sizeof o);
    o.path = "./data";
    o.segment_bytes = 128u << 20;
    o.fsync = PD_FSYNC_BATCH;
    o.fsync_batch_ms = 1000;
    o.limits = pd_pprof_limits_default();
    return o;
}

/* ---- series and index ---- */

static void series_free(series *se)
{
    if (!se)
        return;
    pd_labels_release(&se->labels);
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

static series *find_by_ref(const pd_storage *s, uint64_t ref)
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

static series *find_by_labels(const pd_storage *s, const pd_labels *ls, uint64_t hash)
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
static int reserve_series(pd_storage *s)
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

/* Inserts se (reserve_series done). Keeps by_ref sorted. Cannot fail. */
static void insert_series(pd_storage *s, series *se)
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
}

/* First point index with ts >= t. */
static size_t lower_bound(const series *se, int64_t t)
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

static bool has_ts(const series *se, int64_t ts)
{
    size_t i = lower_bound(se, ts);
    return i < se->n_pts && se->pts[i].ts == ts;
}

/* Finds or adds the sample-type set (types[k], units[k]) of se; *idx is its
 * index. Strings are (ptr, len) pairs. Call under the idx write lock (or
 * during replay). 0 or PD_ENOMEM. */
static int intern_tset(series *se, size_t k, const char *const *types, const size_t *tlen,
                       const char *const *units, const size_t *ulen, uint32_t *idx /* OUT */)
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
        if (j == k) {
            *idx = (uint32_t)i;
            return 0;
        }
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
static int reserve_point(series *se, size_t k)
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

/* Inserts p (ts not present; reserve_point done) with its k totals. */
static void insert_point(series *se, point p, const int64_t *totals, size_t k)
{
    p.tot = (uint32_t)se->n_tot;
    if (k)
        memcpy(se->totals + se->n_tot, totals, k * sizeof *totals);
    se->n_tot += k;
    size_t i = se->n_pts && se->pts[se->n_pts - 1].ts < p.ts ? se->n_pts : lower_bound(se, p.ts);
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

static int buf_put_u64le(pd_buf *b, uint64_t v)
{
    uint8_t t[8];
    put_u64le(t, v);
    return pd_buf_append(b, t, 8);
}

static int buf_put_str(pd_buf *b, const char *s, size_t len)
{
    int rc = pd_buf_put_varint(b, len);
    return rc < 0 ? rc : pd_buf_append(b, s, len);
}

typedef struct reader {
    const uint8_t *p;
    size_t len, pos;
    bool bad;
} reader;

static uint64_t rd_u64le(reader *r)
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

static uint64_t rd_varint(reader *r)
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
static const char *rd_str(reader *r, size_t *len)
{
    uint64_t n = rd_varint(r);
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

/* A decoded PROFILE payload; strings point into the payload. */
typedef struct profile_rec {
    uint64_t ref;
    int64_t ts;
    size_t k;
    const char **types, **units;
    size_t *tlen, *ulen;
    int64_t *totals;
    uint32_t body_off, body_len;
} profile_rec;

static void profile_rec_release(profile_rec *pr)
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
        profile_rec_release(pr);
        return PD_ENOMEM;
    }
    return 0;
}

/* Parses a PROFILE payload. PD_ECORRUPT (with why) or PD_ENOMEM. */
static int profile_rec_parse(const uint8_t *p, size_t len, profile_rec *pr /* OUT */,
                             const char **why)
{
    memset(pr, 0, sizeof *pr);
    reader r = {.p = p, .len = len};
    uint64_t ref = rd_u64le(&r);
    int64_t ts = (int64_t)rd_u64le(&r);
    uint64_t k = rd_varint(&r);
    if (r.bad)
        return *why = "truncated profile record header", PD_ECORRUPT;
    if (k > MAX_SAMPLE_TYPES)
        return *why = "too many sample types", PD_ECORRUPT;
    if (profile_rec_alloc(pr, (size_t)k) < 0)
        return PD_ENOMEM;
    pr->ref = ref;
    pr->ts = ts;
    for (size_t i = 0; i < k; i++) {
        pr->types[i] = rd_str(&r, &pr->tlen[i]);
        pr->units[i] = rd_str(&r, &pr->ulen[i]);
    }
    for (size_t i = 0; i < k; i++)
        pr->totals[i] = pd_zigzag_dec(rd_varint(&r));
    uint64_t blen = rd_varint(&r);
    if (r.bad || blen != r.len - r.pos) {
        profile_rec_release(pr);
        return *why = r.bad ? "malformed profile record" : "profile body length mismatch",
               PD_ECORRUPT;
    }
    pr->body_off = (uint32_t)r.pos;
    pr->body_len = (uint32_t)blen;
    return 0;
}

/* ---- replay ---- */

/* "PATH/wal/NNNNNNNN" (usable during replay, before s->wal is set) */
static void seg_name(const pd_storage *s, uint32_t seg, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%08u", s->waldir, seg);
}

static void replay_bad(pd_storage *s, uint32_t seg, uint64_t off, const char *why)
{
    char name[4200];
    seg_name(s, seg, name, sizeof name);
    pd_log_warn("storage: skipping a bad wal record", "file=%s offset=%llu reason=\"%s\"", name,
                (unsigned long long)off, why);
    pd_metrics_add("profd_storage_corruptions_total", NULL, 1);
    s->replay_corrupt++;
}

static int replay_series(pd_storage *s, uint32_t seg, uint64_t off, const uint8_t *p, uint32_t len)
{
    reader r = {.p = p, .len = len};
    uint64_t ref = rd_u64le(&r);
    uint64_t n = rd_varint(&r);
    if (r.bad || ref == 0 || ref == UINT64_MAX || n == 0 || n > PD_LABEL_MAX_COUNT) {
        replay_bad(s, seg, off, "malformed series record header");
        return 0;
    }
    pd_labels ls;
    pd_labels_init(&ls);
    int rc = 0;
    for (uint64_t i = 0; i < n; i++) {
        size_t nl, vl;
        const char *nm = rd_str(&r, &nl);
        const char *val = rd_str(&r, &vl);
        if (r.bad || vl == 0) {
            r.bad = true;
            break;
        }
        char *a = strndup(nm, nl), *b = strndup(val, vl);
        if (!a || !b) {
            free(a);
            free(b);
            rc = PD_ENOMEM;
            goto out;
        }
        size_t before = ls.n;
        rc = pd_labels_set(&ls, a, b, NULL);
        free(a);
        free(b);
        if (rc == PD_ENOMEM)
            goto out;
        if (rc < 0 || ls.n != before + 1) { /* invalid or repeated name */
            r.bad = true;
            rc = 0;
            break;
        }
    }
    if (r.bad || r.pos != r.len || !pd_labels_get(&ls, "__name__")) {
        replay_bad(s, seg, off, "malformed series record");
        goto out;
    }
    uint64_t hash = pd_labels_hash(&ls);
    series *old = find_by_ref(s, ref);
    if (old) {
        if (pd_labels_cmp(&old->labels, &ls) != 0)
            replay_bad(s, seg, off, "series ref reused for other labels");
        goto out;
    }
    if (find_by_labels(s, &ls, hash)) {
        replay_bad(s, seg, off, "series labels already have another ref");
        goto out;
    }
    series *se = calloc(1, sizeof *se);
    if (!se || reserve_series(s) < 0) {
        free(se);
        rc = PD_ENOMEM;
        goto out;
    }
    se->ref = ref;
    se->hash = hash;
    se->labels = ls;
    pd_labels_init(&ls);
    insert_series(s, se);
out:
    pd_labels_release(&ls);
    return rc;
}

static int replay_profile(pd_storage *s, uint32_t seg, uint64_t off, const uint8_t *p, uint32_t len)
{
    profile_rec pr;
    const char *why = NULL;
    int rc = profile_rec_parse(p, len, &pr, &why);
    if (rc == PD_ECORRUPT) {
        replay_bad(s, seg, off, why);
        return 0;
    }
    if (rc < 0)
        return rc;
    /* never hand out a ref seen in the log again, even if its SERIES record was lost */
    if (pr.ref >= s->next_ref && pr.ref < UINT64_MAX)
        s->next_ref = pr.ref + 1;
    series *se = find_by_ref(s, pr.ref);
    if (!se) {
        replay_bad(s, seg, off, "profile of an unknown series ref");
        goto out;
    }
    if (has_ts(se, pr.ts)) {
        char name[4200];
        seg_name(s, seg, name, sizeof name);
        pd_log_warn("storage: duplicate profile in the wal, keeping the first",
                    "file=%s offset=%llu ref=%llu ts_ms=%lld", name, (unsigned long long)off,
                    (unsigned long long)pr.ref, (long long)pr.ts);
        goto out;
    }
    point pt = {.ts = pr.ts,
                .off = off,
                .seg = seg,
                .len = len,
                .body_off = pr.body_off,
                .body_len = pr.body_len};
    if ((rc = intern_tset(se, pr.k, pr.types, pr.tlen, pr.units, pr.ulen, &pt.tset)) < 0 ||
        (rc = reserve_point(se, pr.k)) < 0)
        goto out;
    insert_point(se, pt, pr.totals, pr.k);
    s->n_profiles++;
out:
    profile_rec_release(&pr);
    return rc;
}

static int replay_fn(void *ctx, uint32_t seg, uint64_t off, uint8_t type, const uint8_t *payload,
                     uint32_t len)
{
    pd_storage *s = ctx;
    switch (type) {
    case PD_WAL_REC_SERIES:
        return replay_series(s, seg, off, payload, len);
    case PD_WAL_REC_PROFILE:
        return replay_profile(s, seg, off, payload, len);
    default:
        replay_bad(s, seg, off, "unknown record type");
        return 0;
    }
}

/* ---- open / close ---- */

static void update_gauges(pd_storage *s)
{
    pd_metrics_set("profd_storage_series", NULL, (double)s->n_series);
    pd_metrics_set("profd_storage_profiles", NULL, (double)s->n_profiles);
    pd_metrics_set("profd_storage_bytes", NULL, (double)pd__wal_bytes(s->wal));
}

/* mkdir -p */
static int mkdirs(const char *path, pd_err *err)
{
    char tmp[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof tmp)
        return pd_err_set(err, PD_EINVAL, "storage path \"%s\" is empty or too long", path);
    memcpy(tmp, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (tmp[i] != '/' && tmp[i] != '\0')
            continue;
        char c = tmp[i];
        tmp[i] = '\0';
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST) {
            int e = -errno;
            return pd_err_set(err, e, "create storage directory %s: %s", tmp, strerror(-e));
        }
        tmp[i] = c;
    }
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
        return pd_err_set(err, -ENOTDIR, "storage path %s is not a directory", path);
    return 0;
}

int pd_storage_open(const pd_storage_options *opts, pd_storage **out, pd_err *err)
{
    *out = NULL;
    pd_err_clear(err);
    pd_metrics_describe("profd_storage_series", PD_METRIC_GAUGE, "Series in the store.");
    pd_metrics_describe("profd_storage_profiles", PD_METRIC_GAUGE, "Profiles in the store.");
    pd_metrics_describe("profd_storage_bytes", PD_METRIC_GAUGE,
                        "Bytes of the store's files on disk (WAL segments).");
    pd_metrics_describe("profd_storage_corruptions_total", PD_METRIC_COUNTER,
                        "Corrupt records or segments met in the store's files (skipped or cut "
                        "off).");
    pd_metrics_add("profd_storage_corruptions_total", NULL, 0); /* exposed from 0 */
    const char *path = opts->path && opts->path[0] ? opts->path : "./data";
    char s_waldir[4096];
    char lockname[4096];
    if (snprintf(lockname, sizeof lockname, "%s/lock", path) >= (int)sizeof lockname ||
        snprintf(s_waldir, sizeof s_waldir, "%s/wal", path) >= (int)sizeof s_waldir)
        return pd_err_set(err, PD_EINVAL, "storage path \"%s\" is too long", path);
    int rc;
    pd_storage *s = calloc(1, sizeof *s);
    if (!s)
        return pd_err_set(err, PD_ENOMEM, "open storage %s: out of memory", path);
    s->lock_fd = -1;
    memcpy(s->waldir, s_waldir, sizeof s->waldir);
    s->next_ref = 1;
    s->limits = opts->limits;
    pthread_mutex_init(&s->app_mu, NULL);
    pthread_rwlock_init(&s->idx, NULL);
    if (!(s->path = strdup(path))) {
        rc = pd_err_set(err, PD_ENOMEM, "open storage %s: out of memory", path);
        goto fail;
    }
    if ((rc = mkdirs(path, err)) < 0)
        goto fail;
    s->lock_fd = open(lockname, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (s->lock_fd < 0) {
        rc = -errno;
        pd_err_set(err, rc, "open lock file %s: %s", lockname, strerror(-rc));
        goto fail;
    }
    if (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0) {
        rc = -errno;
        if (rc == -EWOULDBLOCK)
            rc = pd_err_set(err, PD_EEXIST,
                            "storage %s is in use by another process (lock file %s is held)", path,
                            lockname);
        else
            pd_err_set(err, rc, "lock %s: %s", lockname, strerror(-rc));
        goto fail;
    }
    if (mkdir(s->waldir, 0755) < 0 && errno != EEXIST) {
        rc = -errno;
        pd_err_set(err, rc, "create wal directory %s: %s", s->waldir, strerror(-rc));
        goto fail;
    }
    pd_wal_options wo = {
        .dir = s->waldir,
        .segment_bytes = opts->segment_bytes ? opts->segment_bytes : 128u << 20,
        .fsync = opts->fsync,
        .batch_ms = opts->fsync_batch_ms > 0 ? opts->fsync_batch_ms : 1000,
    };
    if ((rc = pd__wal_open(&wo, replay_fn, s, &s->wal, err)) < 0)
        goto fail;
    update_gauges(s);
    pd_log_info("storage opened", "path=%s series=%zu profiles=%llu segments=%zu bytes=%llu", path,
                s->n_series, (unsigned long long)s->n_profiles, pd__wal_segments(s->wal),
                (unsigned long long)pd__wal_bytes(s->wal));
    *out = s;
    return 0;
fail:
    pd_storage_close(s);
    return rc;
}

void pd_storage_close(pd_storage *s)
{
    if (!s)
        return;
    pd__wal_close(s->wal);
    for (size_t i = 0; i < s->n_series; i++)
        series_free(s->by_ref[i]);
    free(s->by_ref);
    free(s->buckets);
    if (s->lock_fd >= 0)
        close(s->lock_fd); /* releases the flock */
    free(s->path);
    pthread_rwlock_destroy(&s->idx);
    pthread_mutex_destroy(&s->app_mu);
    free(s);
}

/* ---- append ---- */

int pd_storage_append(pd_storage *s, const pd_labels *labels, int64_t ts_ms, const uint8_t *body,
                      size_t len, const pd_profile *profile, pd_err *err)
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
            profile_rec_release(&pr);
            return pd_err_set(err, PD_EINVAL,
                              "append: sample type %zu has a name or unit over %u bytes", i,
                              MAX_STR);
        }
    }
    uint64_t hash = pd_labels_hash(labels);

    pthread_mutex_lock(&s->app_mu);
    /* appends are serialised by app_mu, the only writer: no idx lock to read */
    series *se = find_by_labels(s, labels, hash);
    if (se && has_ts(se, ts_ms)) {
        pd_buf fmt;
        pd_buf_init(&fmt, 4096);
        pd_labels_format(labels, &fmt);
        rc = pd_err_set(err, PD_EEXIST, "a profile of %s at %lld ms is already stored",
                        fmt.data ? fmt.data : name, (long long)ts_ms);
        pd_buf_release(&fmt);
        goto out;
    }
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
        /* SERIES record */
        if ((rc = buf_put_u64le(&payload, se->ref)) < 0 ||
            (rc = pd_buf_put_varint(&payload, labels->n)) < 0)
            goto nomem;
        for (size_t i = 0; i < labels->n; i++)
            if ((rc = buf_put_str(&payload, labels->v[i].name, strlen(labels->v[i].name))) < 0 ||
                (rc = buf_put_str(&payload, labels->v[i].value, strlen(labels->v[i].value))) < 0)
                goto nomem;
        if ((rc = pd__wal_frame(&recs, PD_WAL_REC_SERIES, (const uint8_t *)payload.data,
                                payload.len)) < 0)
            goto nomem;
        pd_buf_reset(&payload);
    }
    /* PROFILE record */
    if ((rc = buf_put_u64le(&payload, se->ref)) < 0 ||
        (rc = buf_put_u64le(&payload, (uint64_t)ts_ms)) < 0 ||
        (rc = pd_buf_put_varint(&payload, k)) < 0)
        goto nomem;
    for (size_t i = 0; i < k; i++)
        if ((rc = buf_put_str(&payload, pr.types[i], pr.tlen[i])) < 0 ||
            (rc = buf_put_str(&payload, pr.units[i], pr.ulen[i])) < 0)
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

    /* everything that can fail in the index, before the write */
    pthread_rwlock_wrlock(&s->idx);
    rc = 0;
    if (fresh)
        rc = reserve_series(s);
    if (rc == 0)
        rc = intern_tset(se, k, pr.types, pr.tlen, pr.units, pr.ulen, &pt.tset);
    if (rc == 0)
        rc = reserve_point(se, k);
    pthread_rwlock_unlock(&s->idx);
    if (rc < 0)
        goto nomem;

    uint32_t seg;
    uint64_t off;
    if ((rc = pd__wal_append(s->wal, (const uint8_t *)recs.data, recs.len, &seg, &off, err)) < 0)
        goto out;
    pt.seg = seg;
    pt.off = off + profile_at;

    pthread_rwlock_wrlock(&s->idx);
    if (fresh) {
        insert_series(s, fresh);
        fresh = NULL;
    }
    insert_point(se, pt, pr.totals, k);
    s->n_profiles++;
    pthread_rwlock_unlock(&s->idx);
    update_gauges(s);
    rc = 0;
    goto out;
nomem:
    if (rc == PD_ETOOBIG)
        pd_err_set(err, rc, "append: record over the cap of %u bytes", PD_WAL_MAX_RECORD);
    else
        rc = pd_err_set(err, PD_ENOMEM, "append: out of memory");
out:
    pthread_mutex_unlock(&s->app_mu);
    series_free(fresh);
    pd_buf_release(&payload);
    pd_buf_release(&recs);
    /* pr's strings are borrowed from profile: only its arrays are freed */
    profile_rec_release(&pr);
    return rc;
}

/* ---- querier ---- */

static int cmp_series_info(const void *a, const void *b)
{
    return pd_labels_cmp(&((const pd_series_info *)a)->labels,
                         &((const pd_series_info *)b)->labels);
}

int pd_storage_select(pd_storage *s, const pd_matcher *ms, size_t n, int64_t mint, int64_t maxt,
                      pd_series_set *out, pd_err *err)
{
    out->v = NULL;
    out->n = 0;
    if (mint > maxt)
        return 0;
    int rc = 0;
    size_t cap = 0;
    pthread_rwlock_rdlock(&s->idx);
    for (size_t i = 0; i < s->n_series; i++) {
        const series *se = s->by_ref[i];
        size_t lo = lower_bound(se, mint);
        if (lo == se->n_pts || se->pts[lo].ts > maxt)
            continue;
        if (!pd_matchers_match(ms, n, &se->labels))
            continue;
        size_t hi = lo;
        if (se->pts[se->n_pts - 1].ts <= maxt) {
            hi = se->n_pts;
        } else {
            hi = lower_bound(se, maxt);
            if (hi < se->n_pts && se->pts[hi].ts == maxt)
                hi++;
        }
        if (out->n == cap) {
            size_t nc = cap ? cap * 2 : 16;
            pd_series_info *nv = realloc(out->v, nc * sizeof *nv);
            if (!nv) {
                rc = PD_ENOMEM;
                break;
            }
            out->v = nv;
            cap = nc;
        }
        pd_series_info *si = &out->v[out->n];
        if (pd_labels_copy(&si->labels, &se->labels) < 0) {
            rc = PD_ENOMEM;
            break;
        }
        si->ref = se->ref;
        si->n_profiles = hi - lo;
        si->min_ts = se->pts[lo].ts;
        si->max_ts = se->pts[hi - 1].ts;
        out->n++;
    }
    pthread_rwlock_unlock(&s->idx);
    if (rc < 0) {
        pd_series_set_release(out);
        return pd_err_set(err, rc, "select series: out of memory");
    }
    if (out->n > 1)
        qsort(out->v, out->n, sizeof *out->v, cmp_series_info);
    return 0;
}

void pd_series_set_release(pd_series_set *set)
{
    if (!set)
        return;
    for (size_t i = 0; i < set->n; i++)
        pd_labels_release(&set->v[i].labels);
    free(set->v);
    set->v = NULL;
    set->n = 0;
}

int pd_storage_read_points(pd_storage *s, uint64_t ref, int64_t mint, int64_t maxt, pd_points *out,
                           pd_err *err)
{
    out->v = NULL;
    out->n = 0;
    out->priv = NULL;
    pd_arena *a = malloc(sizeof *a);
    if (!a)
        return pd_err_set(err, PD_ENOMEM, "read points: out of memory");
    pd_arena_init(a);
    int rc = 0;
    pd_sample_type_desc **copied = NULL;
    pthread_rwlock_rdlock(&s->idx);
    const series *se = find_by_ref(s, ref);
    if (!se) {
        rc = pd_err_set(err, PD_ENOTFOUND, "no series with ref %llu", (unsigned long long)ref);
        goto out;
    }
    if (mint > maxt)
        goto out;
    size_t lo = lower_bound(se, mint), hi = lo;
    while (hi < se->n_pts && se->pts[hi].ts <= maxt)
        hi++;
    if (hi == lo)
        goto out;
    /* each sample-type set is copied once and shared by its points */
    copied = calloc(se->n_tsets, sizeof *copied);
    pd_point *v = pd_arena_calloc(a, hi - lo, sizeof *v);
    if (!copied || !v) {
        rc = PD_ENOMEM;
        goto out;
    }
    for (size_t i = lo; i < hi; i++) {
        const point *p = &se->pts[i];
        const typeset *t = &se->tsets[p->tset];
        pd_point *q = &v[i - lo];
        q->ts_ms = p->ts;
        q->n_types = t->n;
        if (!copied[p->tset] && t->n) {
            pd_sample_type_desc *d = pd_arena_calloc(a, t->n, sizeof *d);
            if (!d) {
                rc = PD_ENOMEM;
                goto out;
            }
            for (size_t j = 0; j < t->n; j++) {
                d[j].type = pd_arena_strdup(a, t->d[j].type);
                d[j].unit = pd_arena_strdup(a, t->d[j].unit);
                if (!d[j].type || !d[j].unit) {
                    rc = PD_ENOMEM;
                    goto out;
                }
            }
            copied[p->tset] = d;
        }
        q->types = copied[p->tset];
        if (t->n) {
            q->totals = pd_arena_alloc(a, t->n * sizeof *q->totals);
            if (!q->totals) {
                rc = PD_ENOMEM;
                goto out;
            }
            memcpy(q->totals, se->totals + p->tot, t->n * sizeof *q->totals);
        }
    }
    out->v = v;
    out->n = hi - lo;
out:
    pthread_rwlock_unlock(&s->idx);
    free(copied);
    if (rc == PD_ENOMEM)
        pd_err_set(err, rc, "read points of series %llu: out of memory", (unsigned long long)ref);
    if (rc < 0 || out->n == 0) {
        pd_arena_release(a);
        free(a);
        out->v = NULL;
        out->n = 0;
        return rc;
    }
    out->priv = a;
    return 0;
}

void pd_points_release(pd_points *pts)
{
    if (!pts)
        return;
    if (pts->priv) {
        pd_arena_release(pts->priv);
        free(pts->priv);
    }
    pts->v = NULL;
    pts->n = 0;
    pts->priv = NULL;
}

int pd_storage_read_profile(pd_storage *s, uint64_t ref, int64_t ts_ms, pd_profile *out,
                            pd_buf *raw, pd_err *err)
{
    memset(out, 0, sizeof *out);
    pthread_rwlock_rdlock(&s->idx);
    const series *se = find_by_ref(s, ref);
    point pt;
    bool found = false;
    if (se) {
        size_t i = lower_bound(se, ts_ms);
        if (i < se->n_pts && se->pts[i].ts == ts_ms) {
            pt = se->pts[i];
            found = true;
        }
    }
    pthread_rwlock_unlock(&s->idx);
    if (!se)
        return pd_err_set(err, PD_ENOTFOUND, "no series with ref %llu", (unsigned long long)ref);
    if (!found)
        return pd_err_set(err, PD_ENOTFOUND, "series %llu has no profile at %lld ms",
                          (unsigned long long)ref, (long long)ts_ms);

    pd_buf rec;
    pd_buf_init(&rec, (size_t)PD_WAL_MAX_RECORD + 1);
    int rc = pd__wal_read(s->wal, pt.seg, pt.off, PD_WAL_REC_PROFILE, pt.len, &rec, err);
    if (rc < 0)
        goto out;
    char name[4200];
    seg_name(s, pt.seg, name, sizeof name);
    /* the record passed its CRC; still check it is the one the index means */
    profile_rec pr;
    const char *why = NULL;
    rc = profile_rec_parse((const uint8_t *)rec.data, rec.len, &pr, &why);
    if (rc == PD_ECORRUPT ||
        (rc == 0 && (pr.ref != ref || pr.ts != ts_ms || pr.body_off != pt.body_off ||
                     pr.body_len != pt.body_len))) {
        if (rc == 0)
            profile_rec_release(&pr);
        rc = pd_err_set(err, PD_ECORRUPT, "%s offset %llu: %s", name, (unsigned long long)pt.off,
                        why ? why : "record is not the indexed profile");
        goto out;
    }
    if (rc < 0) {
        pd_err_set(err, rc, "read profile: out of memory");
        goto out;
    }
    profile_rec_release(&pr);
    const uint8_t *body = (const uint8_t *)rec.data + pt.body_off;
    pd_err derr;
    pd_err_clear(&derr);
    rc = pd_profile_decode(out, body, pt.body_len, &s->limits, &derr);
    if (rc < 0) {
        memset(out, 0, sizeof *out);
        if (rc == PD_EPARSE || rc == PD_EINVAL)
            rc = PD_ECORRUPT;
        pd_err_set(err, rc, "%s offset %llu: stored profile does not decode: %s", name,
                   (unsigned long long)pt.off, derr.msg);
        goto out;
    }
    if (raw && (rc = pd_buf_append(raw, body, pt.body_len)) < 0) {
        pd_profile_release(out);
        memset(out, 0, sizeof *out);
        pd_err_set(err, rc, "read profile: no room for the %u-byte body", pt.body_len);
        goto out;
    }
out:
    pd_buf_release(&rec);
    return rc;
}

void pd_storage_stats_get(pd_storage *s, pd_storage_stats *out)
{
    memset(out, 0, sizeof *out);
    pthread_rwlock_rdlock(&s->idx);
    out->n_series = s->n_series;
    out->n_profiles = s->n_profiles;
    bool any = false;
    for (size_t i = 0; i < s->n_series; i++) {
        const series *se = s->by_ref[i];
        if (!se->n_pts)
            continue;
        if (!any || se->pts[0].ts < out->min_ts)
            out->min_ts = se->pts[0].ts;
        if (!any || se->pts[se->n_pts - 1].ts > out->max_ts)
            out->max_ts = se->pts[se->n_pts - 1].ts;
        any = true;
    }
    pthread_rwlock_unlock(&s->idx);
    out->bytes_on_disk = pd__wal_bytes(s->wal);
}
