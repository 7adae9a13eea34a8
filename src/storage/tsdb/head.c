/*
 * storage/tsdb/head.c — the embedded store of storage.h: the WAL (wal.c)
 * makes recent profiles durable; the "head" holds them in memory, decomposed
 * as in blocks (headmem.c: a symbol table and per-series value groups encoded
 * by chunks.c, so head and block reads decode the same structures), and is
 * rebuilt from the WAL on open; older data lives in immutable blocks
 * (block.c) cut from the head or written by `profd tsdb import`. Reads merge
 * head and blocks.
 *
 * Directory:
 *   PATH/lock          flock(LOCK_EX|LOCK_NB) while open (PD_EEXIST if held)
 *   PATH/wal/NNNNNNNN  WAL segments (wal.c, docs/format/wal.md)
 *   PATH/<ULID>/       blocks (block_int.h); PATH/<ULID>.tmp/ is a block being
 *                      written (or garbage of a crash): never loaded, logged
 *   PATH/series        series checkpoint: the 8-byte WAL segment header then
 *                      one framed SERIES record (below) per series known to
 *                      the store; written tmp + fsync + rename + fsync dir
 *
 * Series refs: one ref per label set, for the head and the blocks alike.
 * Refs are assigned 1, 2, 3, ... by the head (SERIES records); a block series
 * whose labels the head does not know gets the next ref at open. Refs are
 * persisted by SERIES records in the WAL and by PATH/series, which is
 * rewritten (with every series) at open when refs were added and at every
 * checkpoint before WAL segments are removed; it is read before the WAL is
 * replayed. So refs are stable across restarts (unless PATH/series is lost
 * after a checkpoint).
 *
 * Head cut (cut_head): after an append (and at open), with d =
 * block_duration_ms and a = floor(head min ts / d) * d, when the head's max
 * ts >= a + 1.5 d, every head profile in [a, a + d) is rebuilt from the
 * head's value groups and written as a block (tmp dir, fsync, rename:
 * block.c, which re-interns the symbols and recompresses at zstd 19); the
 * block is opened, its series mapped onto the head's refs and the cut
 * points dropped from the head (a head group is freed with its last
 * profile); the head starts a new symbol generation (the old one is freed
 * with its last group: nothing is re-encoded); then PATH/series is
 * rewritten and WAL segments below the oldest segment any head point still
 * uses are removed. Points keep their WAL location, and cut points are kept
 * per series in cpts until the checkpoint removes their segment, so
 * read_profile's raw is the producer's bytes while the record exists;
 * afterwards (or if the record is damaged) raw is the profile re-encoded.
 * A crash at any point leaves either no block (tmp dir ignored) and the
 * whole WAL, or the block and (part of) the WAL: on open, head points whose
 * (series, ts) is in a block are dropped (no duplicates). A cut that fails
 * is logged and retried no earlier than 60 s later; the head keeps the data.
 * With the maintenance thread (the default), an append that finds a cut due
 * wakes the thread, which copies the points to cut under app_mu, reads,
 * decodes and writes them with app_mu released (appends go on; points
 * appended into the range meanwhile stay for the next cut), then swaps the
 * block in under app_mu + the idx write lock. Without the thread
 * (maintenance_ms < 0) the append itself cuts, under app_mu.
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
 * Sample-type sets are interned per series (a series' profiles nearly always
 * share one), totals live in a per-series pool. Replay only indexes the WAL
 * (a point's gid is WAL_ONLY: it is read from its record meanwhile); the
 * maintenance thread, kicked by the open, then decomposes those profiles
 * into the head in 2 s slices (decompose_replayed); a body that does not
 * decode is reported (file, offset), counted and dropped from the head then.
 * A head cut takes WAL-only points straight from the WAL.
 *
 * Locking: app_mu serialises appends (duplicate check, ref assignment, WAL
 * write, index insert), so appenders read the index without idx. Every change
 * to the index and to the head's symbols and groups is made under the idx
 * write lock, and everything that can fail (allocation, decomposing the
 * profile into the head) is done before the WAL write and taken back if the
 * write fails, so a record written is always indexed. A group that fills up
 * is zstd-compressed by its appender outside the idx lock and swapped in
 * under it. Readers take idx for reading and rebuild a head profile under it
 * (CPU only); block reads and the WAL read of raw bytes run after releasing
 * it.
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
    uint32_t gid, gpos; /* the decomposed profile: group and position (headmem_int.h);
                           gid WAL_ONLY: replayed, not decomposed yet (read from the WAL) */
} point;

#define WAL_ONLY UINT32_MAX

/* An open block of the store. refs: 1 for the store's list (s->blocks) plus
 * one per reader doing I/O on it outside the idx lock (hb_get/hb_put); the
 * last put closes it. A block removed by compaction or retention leaves the
 * list (and every bref) under app_mu + the idx write lock; its directory is
 * deleted at once (an open fd keeps its chunks readable) and the pd_block
 * closed when its last reader is done. */
typedef struct hblock {
    pd_block *b;
    int refs; /* __atomic */
    unsigned char *bad; /* per series id: non-zero once a read found its data
                           damaged (__atomic; reported once, then skipped by
                           select and read_points); 2 while why[id] is set, then 1 */
    char **why;         /* per series id: the first error (file and offset) */
} hblock;

/* A series' part in one block. */
typedef struct bref {
    hblock *hb;
    uint32_t id;          /* series id in b */
    int64_t mint, maxt;   /* of the series in b */
    uint64_t n;           /* profiles of the series in b */
} bref;

typedef struct series {
    uint64_t ref, hash;
    bref *brefs; /* ascending mint; changed under the idx write lock */
    size_t n_brefs, cap_brefs;
    point *cpts; /* ascending ts: profiles already in a block whose WAL record still
                    exists (raw bytes of read_profile); pruned at checkpoints */
    size_t n_cpts, cap_cpts;
    pd_labels labels;
    struct series *hnext;
    point *pts;
    size_t n_pts, cap_pts;
    typeset *tsets;
    size_t n_tsets, cap_tsets;
    int64_t *totals;
    size_t n_tot, cap_tot;
    pd_hchunks hc; /* the head profiles, decomposed */
    size_t n_wal_only; /* points with gid WAL_ONLY */
} series;

struct pd_storage {
    char *path;
    char waldir[4096];
    pd_pprof_limits limits;
    int lock_fd;
    pd_wal *wal;

    pthread_mutex_t app_mu;
    pthread_rwlock_t idx;
    pd_hmem hm; /* symbols and value groups of the head (headmem_int.h) */
    pd_postings post; /* label pair -> refs of every series (postings_int.h) */
    uint64_t n_wal_only; /* head points not decomposed yet (replayed) */
    bool post_broken; /* out of memory adding to post: select scans every series */
    series **by_ref; /* ascending ref */
    size_t n_series, cap_series;
    series **buckets; /* n_buckets, power of two */
    size_t n_buckets;
    uint64_t next_ref;
    uint64_t n_profiles;
    uint64_t replay_corrupt; /* malformed payloads met on replay */

    hblock **blocks; /* changed under app_mu + idx write lock */
    size_t n_blocks, cap_blocks;
    int64_t block_ms;          /* <= 0: no head cut */
    int64_t cut_retry_after;   /* monotonic ms: no cut attempt before */
    uint64_t n_cuts; /* __atomic: stats read it under the idx read lock only */
    const char *replay_file; /* set while PATH/series is replayed */
    bool hr_valid, hr_any;     /* head_range's cache (under app_mu) */
    int64_t hr_min, hr_max;

    /* maintenance (compaction, retention): rounds serialised by maint_mu */
    pthread_mutex_t maint_mu;
    int64_t retention_ms;      /* <= 0: no time retention (nor lower bound on appends) */
    int64_t grace_ms;          /* <= 0: no upper bound on appends */
    int64_t (*clock)(void);    /* wall clock, Unix ms */
    uint64_t retention_bytes;  /* 0: no size retention */
    int64_t maint_ms;          /* <= 0: no thread */
    uint64_t n_compactions, n_ret_deletes; /* __atomic */
    int64_t compact_retry_after; /* monotonic ms */
    pthread_t maint_thread;
    bool maint_running;
    pthread_mutex_t stop_mu;
    pthread_cond_t stop_cv;
    bool stopping;
    bool kicked; /* a head cut is due: run now (under stop_mu) */
};

static uint64_t blocks_profiles(const pd_storage *s);
static uint64_t blocks_bytes(const pd_storage *s);
static void kick_maintenance(pd_storage *s);

pd_storage_options pd_storage_options_default(void)
{
    pd_storage_options o;
    memset(&o, 0, sizeof o);
    o.path = "./data";
    o.segment_bytes = 32u << 20;
    o.fsync = PD_FSYNC_BATCH;
    o.fsync_batch_ms = 1000;
    o.limits = pd_pprof_limits_default();
    o.block_duration_ms = 2 * 3600 * 1000;
    o.retention_ms = 15ll * 24 * 3600 * 1000;
    o.future_grace_ms = 10 * 60 * 1000;
    o.retention_bytes = 0;
    o.maintenance_ms = 60 * 1000;
    return o;
}

/* ---- time bounds ---- */

/* The window of accepted profile times (pd_storage_append): with retention r
 * > 0, ts >= now - r; with grace g > 0, ts <= now + g. */
static int check_time(int64_t retention_ms, int64_t grace_ms, int64_t now, int64_t ts,
                      pd_err *err)
{
    char t[32], bound[32], dur[32];
    if (grace_ms > 0 && now < INT64_MAX - grace_ms && ts > now + grace_ms) {
        pd_format_rfc3339(ts, t, sizeof t);
        pd_format_rfc3339(now + grace_ms, bound, sizeof bound);
        pd_format_duration(grace_ms, dur, sizeof dur);
        return pd_err_set(err, PD_EOUTOFBOUNDS,
                          "profile time %s (%lld ms) is out of bounds: more than "
                          "--storage.future-grace=%s in the future (newest accepted now: %s)",
                          t, (long long)ts, dur, bound);
    }
    if (retention_ms > 0 && now > INT64_MIN + retention_ms && ts < now - retention_ms) {
        pd_format_rfc3339(ts, t, sizeof t);
        pd_format_rfc3339(now - retention_ms, bound, sizeof bound);
        pd_format_duration(retention_ms, dur, sizeof dur);
        return pd_err_set(err, PD_EOUTOFBOUNDS,
                          "profile time %s (%lld ms) is out of bounds: older than "
                          "--storage.retention.time=%s keeps (oldest accepted now: %s)",
                          t, (long long)ts, dur, bound);
    }
    return 0;
}

int pd_storage_check_time(pd_storage *s, int64_t ts_ms, pd_err *err)
{
    return check_time(s->retention_ms, s->grace_ms, s->clock(), ts_ms, err);
}

int pd_storage_options_check_time(const pd_storage_options *o, int64_t now_ms, int64_t ts_ms,
                                  pd_err *err)
{
    int64_t r = o->retention_ms ? o->retention_ms : 15ll * 24 * 3600 * 1000;
    int64_t g = o->future_grace_ms ? o->future_grace_ms : 10 * 60 * 1000;
    return check_time(r, g, now_ms, ts_ms, err);
}

/* ---- series and index ---- */

static void series_free(pd_storage *s, series *se)
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
    if (!s->post_broken && pd__postings_add(&s->post, &se->labels, se->ref) < 0) {
        pd_log_warn("storage: out of memory indexing series labels; selects scan every series",
                    "%s", "");
        s->post_broken = true;
    }
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

typedef pd_profile_rec profile_rec;

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

int pd__profile_rec_parse(const uint8_t *p, size_t len, profile_rec *pr /* OUT */,
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
        pd__profile_rec_release(pr);
        return *why = r.bad ? "malformed profile record" : "profile body length mismatch",
               PD_ECORRUPT;
    }
    pr->body_off = (uint32_t)r.pos;
    pr->body_len = (uint32_t)blen;
    return 0;
}

/* ---- replay ---- */

/* "PATH/wal/NNNNNNNN" (usable during replay, before s->wal is set) */
/* Compresses se's sealed raw head groups (appenders only: app_mu held). The
 * raw encoding stays readable while zstd runs outside the idx lock; the swap
 * is under it. Without memory the group simply stays raw. */
static void compress_sealed(pd_storage *s, series *se)
{
    pd_hgroup *gs[8];
    size_t n = pd__hchunks_raw_sealed(&se->hc, gs, 8);
    for (size_t i = 0; i < n; i++) {
        uint8_t *z;
        size_t zl;
        if (pd__hgroup_compress(gs[i], &z, &zl) < 0)
            continue;
        pthread_rwlock_wrlock(&s->idx);
        pd__hgroup_install(&s->hm, gs[i], z, zl);
        pthread_rwlock_unlock(&s->idx);
    }
}

static int wal_profile(pd_storage *s, uint64_t ref, const point *pt, pd_profile *out,
                       pd_buf *raw, pd_err *err);

static void seg_name(const pd_storage *s, uint32_t seg, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%08u", s->waldir, seg);
}

static void replay_bad(pd_storage *s, uint32_t seg, uint64_t off, const char *why)
{
    char name[4200];
    if (s->replay_file)
        snprintf(name, sizeof name, "%s", s->replay_file);
    else
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
    int rc = pd__profile_rec_parse(p, len, &pr, &why);
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
    /* indexed only: the maintenance thread decomposes it into the head
       afterwards (decompose_replayed), so opening costs a walk of the WAL,
       not a decode of every body */
    pt.gid = WAL_ONLY;
    se->n_wal_only++;
    s->n_wal_only++;
    insert_point(se, pt, pr.totals, pr.k);
    s->n_profiles++;
out:
    pd__profile_rec_release(&pr);
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
    pd_metrics_set("profd_storage_blocks", NULL, (double)s->n_blocks);
    pd_metrics_set("profd_storage_profiles", NULL, (double)(s->n_profiles + blocks_profiles(s)));
    pd_metrics_set("profd_storage_bytes", NULL,
                   (double)(pd__wal_bytes(s->wal) + blocks_bytes(s)));
    pd_metrics_set("profd_storage_head_chunk_bytes", NULL, (double)s->hm.bytes);
    pd_metrics_set("profd_storage_head_wal_only_profiles", NULL, (double)s->n_wal_only);
    pd_metrics_set("profd_storage_head_symbols", NULL, (double)pd__hmem_symbols_count(&s->hm));
    pd_metrics_set("profd_storage_head_symbol_generations", NULL, (double)pd__hmem_generations());
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    if (remove(path) < 0)
        pd_log_warn("storage: cannot remove", "path=%s err=\"%s\"", path, strerror(errno));
    return 0;
}

/* rm -r path (no symlinks followed). Errors are logged. */
static void rm_tree(const char *path) { nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

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

/* ---- blocks ---- */

static int64_t now_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t blocks_profiles(const pd_storage *s)
{
    uint64_t n = 0;
    for (size_t i = 0; i < s->n_blocks; i++)
        n += pd__block_meta(s->blocks[i]->b)->n_profiles;
    return n;
}

static uint64_t blocks_bytes(const pd_storage *s)
{
    uint64_t n = 0;
    for (size_t i = 0; i < s->n_blocks; i++) {
        const pd_block_meta *m = pd__block_meta(s->blocks[i]->b);
        n += m->meta_bytes + m->index_bytes + m->symbols_bytes + m->chunks_bytes;
    }
    return n;
}

static void hb_get(hblock *hb) { __atomic_add_fetch(&hb->refs, 1, __ATOMIC_ACQ_REL); }

static void hb_put(hblock *hb)
{
    if (hb && __atomic_sub_fetch(&hb->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        if (hb->why)
            for (size_t i = 0; i < pd__block_n_series(hb->b); i++)
                free(hb->why[i]);
        pd__block_close(hb->b);
        free(hb->bad);
        free(hb->why);
        free(hb);
    }
}

/* Whether series id of hb is known damaged. */
static bool hb_bad(const hblock *hb, uint32_t id)
{
    return __atomic_load_n(&hb->bad[id], __ATOMIC_ACQUIRE) != 0;
}

/* A read of series id of hb failed with PD_ECORRUPT (e: file and offset):
 * the first time, logged and counted in profd_storage_corruptions_total;
 * every time, a warning for the calling thread's answer (storage.h). From
 * then on select and read_points skip this block part. */
static void hb_damaged(hblock *hb, uint32_t id, const pd_err *e)
{
    const char *ulid = pd__block_meta(hb->b)->ulid;
    const char *msg = e && e->msg[0] ? e->msg : "damaged";
    if (!__atomic_exchange_n(&hb->bad[id], 2, __ATOMIC_ACQ_REL)) {
        hb->why[id] = strdup(msg); /* NULL: the generic warning below */
        __atomic_store_n(&hb->bad[id], 1, __ATOMIC_RELEASE);
        pd_buf lb;
        pd_buf_init(&lb, 1024);
        pd_labels_format(pd__block_series_labels(hb->b, id), &lb);
        pd_log_error("storage: damaged block series skipped", "block=%s series=%s err=\"%s\"",
                     ulid, lb.data ? lb.data : "", msg);
        pd_buf_release(&lb);
        pd_metrics_add("profd_storage_corruptions_total", NULL, 1);
    }
    pd__storage_warn("block %s: %s; its series' profiles there are left out", ulid, msg);
}

/* The warning for a block part already known damaged. */
static void hb_warn_known(const hblock *hb, uint32_t id, uint64_t ref)
{
    const char *why = __atomic_load_n(&hb->bad[id], __ATOMIC_ACQUIRE) == 1 ? hb->why[id] : NULL;
    if (why)
        pd__storage_warn("block %s: %s; its series' profiles there are left out",
                         pd__block_meta(hb->b)->ulid, why);
    else
        pd__storage_warn("block %s holds damaged data of series %llu; its profiles there are "
                         "left out",
                         pd__block_meta(hb->b)->ulid, (unsigned long long)ref);
}

/* A read error of block part (hb, id): PD_ECORRUPT marks it damaged (above);
 * other errors are logged. */
static void hb_read_failed(hblock *hb, uint32_t id, int rc, const pd_err *e)
{
    if (rc == PD_ECORRUPT) {
        hb_damaged(hb, id, e);
        return;
    }
    pd_log_warn("storage: cannot read a block series", "block=%s err=\"%s\"",
                pd__block_meta(hb->b)->ulid, e && e->msg[0] ? e->msg : pd_strerror(rc));
    pd__storage_warn("block %s: %s; its series' profiles there are left out",
                     pd__block_meta(hb->b)->ulid, e && e->msg[0] ? e->msg : pd_strerror(rc));
}

/* Adds the part (hb, id) to se, keeping brefs by ascending mint. Under the
 * idx write lock (or during open). 0 or PD_ENOMEM. */
static int add_bref(series *se, hblock *hb, uint32_t id)
{
    if (se->n_brefs == se->cap_brefs) {
        size_t nc = se->cap_brefs ? se->cap_brefs * 2 : 4;
        bref *nb = realloc(se->brefs, nc * sizeof *nb);
        if (!nb)
            return PD_ENOMEM;
        se->brefs = nb;
        se->cap_brefs = nc;
    }
    bref r = {.hb = hb, .id = id};
    uint64_t tb, vb;
    pd__block_series_info(hb->b, id, &r.mint, &r.maxt, &r.n, &tb, &vb);
    size_t i = se->n_brefs;
    while (i > 0 && se->brefs[i - 1].mint > r.mint)
        i--;
    memmove(se->brefs + i + 1, se->brefs + i, (se->n_brefs - i) * sizeof *se->brefs);
    se->brefs[i] = r;
    se->n_brefs++;
    return 0;
}

/* Takes ownership of b (closed once it leaves the store and its last reader
 * is done) and maps its series onto head series by labels, creating series
 * with new refs (*added = true) for label sets the head does not know. Under
 * the idx write lock (or during open), with app_mu held. 0 or PD_ENOMEM (b is
 * owned by s even then). */
static int add_block(pd_storage *s, pd_block *b, bool *added)
{
    hblock *hb = calloc(1, sizeof *hb);
    if (!hb) {
        pd__block_close(b);
        return PD_ENOMEM;
    }
    hb->b = b;
    hb->refs = 1;
    if (!(hb->bad = calloc(pd__block_n_series(b) + 1, 1)) ||
        !(hb->why = calloc(pd__block_n_series(b) + 1, sizeof *hb->why))) {
        pd__block_close(b);
        free(hb->bad);
        free(hb);
        return PD_ENOMEM;
    }
    if (s->n_blocks == s->cap_blocks) {
        size_t nc = s->cap_blocks ? s->cap_blocks * 2 : 8;
        hblock **nb = realloc(s->blocks, nc * sizeof *nb);
        if (!nb) {
            hb_put(hb);
            return PD_ENOMEM;
        }
        s->blocks = nb;
        s->cap_blocks = nc;
    }
    s->blocks[s->n_blocks++] = hb;
    size_t n = pd__block_n_series(b);
    for (uint32_t id = 0; id < n; id++) {
        const pd_labels *ls = pd__block_series_labels(b, id);
        uint64_t hash = pd_labels_hash(ls);
        series *se = find_by_labels(s, ls, hash);
        if (!se) {
            if (s->next_ref == UINT64_MAX)
                return PD_ENOMEM;
            se = calloc(1, sizeof *se);
            if (!se || reserve_series(s) < 0 || pd_labels_copy(&se->labels, ls) < 0) {
                series_free(s, se);
                return PD_ENOMEM;
            }
            se->ref = s->next_ref;
            se->hash = hash;
            insert_series(s, se);
            *added = true;
        }
        if (add_bref(se, hb, id) < 0)
            return PD_ENOMEM;
    }
    return 0;
}

/* Takes hb out of the store: out of s->blocks and every series' brefs. The
 * store's reference passes to the caller (hb_put it). Under app_mu + the idx
 * write lock (or during open). */
static void unlink_block(pd_storage *s, hblock *hb)
{
    size_t w = 0;
    for (size_t i = 0; i < s->n_blocks; i++)
        if (s->blocks[i] != hb)
            s->blocks[w++] = s->blocks[i];
    s->n_blocks = w;
    for (size_t i = 0; i < s->n_series; i++) {
        series *se = s->by_ref[i];
        size_t k = 0;
        for (size_t j = 0; j < se->n_brefs; j++)
            if (se->brefs[j].hb != hb)
                se->brefs[k++] = se->brefs[j];
        se->n_brefs = k;
    }
}

/* rm -r of a block directory (its files and chunks/), first renamed to
 * DIR.tmp so that a crash halfway leaves garbage that open removes, never a
 * half block. Errors are logged. */
static int fsync_path(const char *path);

static void remove_block_dir(const char *dir)
{
    char tmp[4500];
    snprintf(tmp, sizeof tmp, "%s.tmp", dir);
    if (rename(dir, tmp) < 0) {
        pd_log_error("storage: cannot remove a block", "dir=%s err=\"%s\"", dir, strerror(errno));
        return;
    }
    char *slash = strrchr(tmp, '/');
    if (slash) { /* the rename is durable before the files go */
        *slash = 0;
        fsync_path(tmp);
        *slash = '/';
    }
    rm_tree(tmp);
}

/* Whether a block holds a profile of se at ts. I/O; call with app_mu held
 * (brefs only change under it) or under the idx lock. Errors of the block
 * read are logged and count as "not there". */
static bool blocks_have(const series *se, int64_t ts)
{
    for (size_t i = 0; i < se->n_brefs; i++) {
        const bref *r = &se->brefs[i];
        if (ts < r->mint || ts > r->maxt)
            continue;
        pd_points pts;
        pd_err e;
        pd_err_clear(&e);
        if (hb_bad(r->hb, r->id))
            continue;
        int rc = pd__block_read_points(r->hb->b, r->id, ts, ts, &pts, &e);
        if (rc < 0) {
            hb_read_failed(r->hb, r->id, rc, &e);
            continue;
        }
        bool found = pts.n > 0;
        pd_points_release(&pts);
        if (found)
            return true;
    }
    return false;
}

static int cmp_point_rec(const void *a, const void *b)
{
    int64_t x = ((const point *)a)->ts, y = ((const point *)b)->ts;
    return x < y ? -1 : x > y;
}

/* Keeps p[0..n) (points moved into a block) in se->cpts, so that their WAL
 * records still serve the producer's bytes until the checkpoint. Best
 * effort: without memory they are forgotten (reads then re-encode). */
static void stash_points(series *se, const point *p, size_t n)
{
    if (!n)
        return;
    if (se->n_cpts + n > se->cap_cpts) {
        size_t nc = se->cap_cpts ? se->cap_cpts : 16;
        while (nc < se->n_cpts + n)
            nc *= 2;
        point *np = realloc(se->cpts, nc * sizeof *np);
        if (!np)
            return;
        se->cpts = np;
        se->cap_cpts = nc;
    }
    bool sorted = !se->n_cpts || se->cpts[se->n_cpts - 1].ts < p[0].ts;
    memcpy(se->cpts + se->n_cpts, p, n * sizeof *p);
    se->n_cpts += n;
    if (!sorted)
        qsort(se->cpts, se->n_cpts, sizeof *se->cpts, cmp_point_rec);
}

/* Forgets the stashed points whose WAL segment is below keep. */
static void prune_stash(series *se, uint32_t keep)
{
    size_t w = 0;
    for (size_t i = 0; i < se->n_cpts; i++)
        if (se->cpts[i].seg >= keep)
            se->cpts[w++] = se->cpts[i];
    se->n_cpts = w;
}

/* Removes the points of se whose ts is in the ascending list ts[0..n).
 * Returns how many. Under the idx write lock (or during open). */
static size_t drop_points(pd_storage *s, series *se, const int64_t *ts, size_t n)
{
    size_t w = 0, j = 0;
    for (size_t i = 0; i < se->n_pts; i++) {
        while (j < n && ts[j] < se->pts[i].ts)
            j++;
        if (j < n && ts[j] == se->pts[i].ts) {
            stash_points(se, &se->pts[i], 1);
            if (se->pts[i].gid == WAL_ONLY) {
                se->n_wal_only--;
                s->n_wal_only--;
            } else
                pd__hmem_drop(&s->hm, &se->hc, se->pts[i].gid);
            continue;
        }
        se->pts[w++] = se->pts[i];
    }
    size_t dropped = se->n_pts - w;
    se->n_pts = w;
    return dropped;
}


/* Open: drops head points (replayed from the WAL) already in a block — a
 * crash between a block's rename and the WAL checkpoint leaves both. */
static int dedupe_head(pd_storage *s)
{
    size_t dropped = 0;
    for (size_t i = 0; i < s->n_series; i++) {
        series *se = s->by_ref[i];
        for (size_t k = 0; k < se->n_brefs && se->n_pts; k++) {
            const bref *r = &se->brefs[k];
            int64_t lo = se->pts[0].ts, hi = se->pts[se->n_pts - 1].ts;
            if (r->maxt < lo || r->mint > hi)
                continue;
            pd_points pts;
            pd_err e;
            pd_err_clear(&e);
            int rc = pd__block_read_points(r->hb->b, r->id, lo > r->mint ? lo : r->mint,
                                           hi < r->maxt ? hi : r->maxt, &pts, &e);
            if (rc == PD_ENOMEM)
                return rc;
            if (rc < 0) {
                pd_log_warn("storage: cannot read a block's points", "block=%s err=\"%s\"",
                            pd__block_meta(r->hb->b)->ulid, e.msg);
                continue;
            }
            int64_t *ts = malloc((pts.n ? pts.n : 1) * sizeof *ts);
            if (!ts) {
                pd_points_release(&pts);
                return PD_ENOMEM;
            }
            for (size_t j = 0; j < pts.n; j++)
                ts[j] = pts.v[j].ts_ms;
            size_t d = drop_points(s, se, ts, pts.n);
            s->hr_valid = false;
            free(ts);
            pd_points_release(&pts);
            dropped += d;
            s->n_profiles -= d;
        }
    }
    if (dropped)
        pd_log_info("storage: wal profiles already in blocks dropped from the head",
                    "profiles=%zu", dropped);
    return 0;
}

/* ---- series checkpoint (PATH/series) ---- */

static int write_full_fd(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

/* Writes every series (ref, labels) to PATH/series: tmp file, fsync,
 * rename, fsync PATH. With app_mu held (or during open). */
static int write_series_file(pd_storage *s, pd_err *err)
{
    char name[4200], tmp[4200];
    snprintf(name, sizeof name, "%s/series", s->path);
    snprintf(tmp, sizeof tmp, "%s/series.tmp", s->path);
    pd_buf out, payload;
    pd_buf_init(&out, 0);
    pd_buf_init(&payload, 0);
    uint8_t hdr[PD_WAL_SEG_HDR] = {0};
    memcpy(hdr, PD_WAL_MAGIC, 5);
    hdr[5] = PD_WAL_VERSION;
    int rc = pd_buf_append(&out, hdr, sizeof hdr);
    for (size_t i = 0; rc == 0 && i < s->n_series; i++) {
        const series *se = s->by_ref[i];
        pd_buf_reset(&payload);
        if ((rc = buf_put_u64le(&payload, se->ref)) < 0 ||
            (rc = pd_buf_put_varint(&payload, se->labels.n)) < 0)
            break;
        for (size_t j = 0; rc == 0 && j < se->labels.n; j++)
            if ((rc = buf_put_str(&payload, se->labels.v[j].name,
                                  strlen(se->labels.v[j].name))) == 0)
                rc = buf_put_str(&payload, se->labels.v[j].value, strlen(se->labels.v[j].value));
        if (rc == 0)
            rc = pd__wal_frame(&out, PD_WAL_REC_SERIES, (const uint8_t *)payload.data,
                               payload.len);
    }
    if (rc < 0) {
        rc = pd_err_set(err, PD_ENOMEM, "write %s: out of memory", name);
        goto out;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = -errno;
        pd_err_set(err, rc, "create %s: %s", tmp, strerror(-rc));
        goto out;
    }
    rc = write_full_fd(fd, (const uint8_t *)out.data, out.len);
    if (rc == 0 && fsync(fd) < 0)
        rc = -errno;
    close(fd);
    if (rc == 0 && rename(tmp, name) < 0)
        rc = -errno;
    if (rc == 0)
        rc = fsync_path(s->path);
    if (rc < 0) {
        pd_err_set(err, rc, "write %s: %s", name, strerror(-rc));
        unlink(tmp);
    }
out:
    pd_buf_release(&out);
    pd_buf_release(&payload);
    return rc;
}

#define MAX_SERIES_FILE (1ull << 32)

/* Replays PATH/series (if any) through replay_series. A bad header or a bad
 * record ends it (logged with the offset, counted). 0, -errno or PD_ENOMEM. */
/* Lowest segment number in waldir (8-digit names), 0 when none. */
static uint32_t first_wal_segment(const char *waldir)
{
    DIR *d = opendir(waldir);
    if (!d)
        return 0;
    uint32_t first = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strlen(e->d_name) != 8 || strspn(e->d_name, "0123456789") != 8)
            continue;
        uint32_t v = (uint32_t)strtoul(e->d_name, NULL, 10);
        if (v && (!first || v < first))
            first = v;
    }
    closedir(d);
    return first;
}

static int read_series_file(pd_storage *s)
{
    char name[4200];
    snprintf(name, sizeof name, "%s/series", s->path);
    int fd = open(name, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        /* needed once a checkpoint removed segment 1 (the SERIES records of
           removed segments live only here) */
        uint32_t first = first_wal_segment(s->waldir);
        if (first > 1) {
            pd_log_error("storage: series file missing while the WAL starts past segment 1; "
                         "head profiles of series first seen in removed segments are lost",
                         "file=%s first_segment=%08u", name, first);
            pd_metrics_add("profd_storage_corruptions_total", NULL, 1);
        }
        return 0;
    }
    if (fd < 0)
        return -errno;
    struct stat st;
    int rc = 0;
    uint8_t *data = NULL;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        goto out;
    }
    size_t size = (size_t)st.st_size;
    if ((uint64_t)st.st_size > MAX_SERIES_FILE) {
        pd_log_warn("storage: series file over its cap; ignored", "file=%s bytes=%lld", name,
                    (long long)st.st_size);
        pd_metrics_add("profd_storage_corruptions_total", NULL, 1);
        goto out;
    }
    if (!(data = malloc(size ? size : 1))) {
        rc = PD_ENOMEM;
        goto out;
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = pread(fd, data + got, size - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    size = got;
    s->replay_file = name;
    if (size < PD_WAL_SEG_HDR || memcmp(data, PD_WAL_MAGIC, 5) || data[5] != PD_WAL_VERSION) {
        replay_bad(s, 0, 0, "bad series file header");
        goto out;
    }
    size_t off = PD_WAL_SEG_HDR;
    while (off < size) {
        if (size - off < PD_WAL_REC_HDR) {
            replay_bad(s, 0, off, "short record header");
            break;
        }
        const uint8_t *h = data + off;
        uint32_t len = (uint32_t)h[1] | (uint32_t)h[2] << 8 | (uint32_t)h[3] << 16 |
                       (uint32_t)h[4] << 24;
        uint32_t crc = (uint32_t)h[5] | (uint32_t)h[6] << 8 | (uint32_t)h[7] << 16 |
                       (uint32_t)h[8] << 24;
        if (h[0] != PD_WAL_REC_SERIES || len > size - off - PD_WAL_REC_HDR ||
            pd_crc32c(pd_crc32c(0, h, 1), h + PD_WAL_REC_HDR, len) != crc) {
            replay_bad(s, 0, off, "bad series record");
            break;
        }
        if ((rc = replay_series(s, 0, off, h + PD_WAL_REC_HDR, len)) < 0)
            break;
        off += PD_WAL_REC_HDR + (size_t)len;
    }
out:
    s->replay_file = NULL;
    free(data);
    close(fd);
    return rc;
}

/* ---- loading blocks ---- */

/* Opens every block directory under PATH. PATH/<x>.tmp directories (a block
 * being written, or being deleted, when a crash came) are removed. A block
 * named in another block's compaction.sources was compacted into it (a
 * crash came before it was deleted): it is deleted now, not loaded, so
 * nothing is seen twice. A block that does not open is logged, counted and
 * left on disk for `profd tsdb check`. */
static int load_blocks(pd_storage *s, bool *added, pd_err *err)
{
    struct dirent **names = NULL;
    int n = scandir(s->path, &names, NULL, alphasort);
    if (n < 0) {
        int e = -errno;
        return pd_err_set(err, e, "list storage directory %s: %s", s->path, strerror(-e));
    }
    int rc = 0;
    pd_block **opened = calloc((size_t)n + 1, sizeof *opened);
    size_t n_opened = 0;
    if (!opened)
        rc = pd_err_set(err, PD_ENOMEM, "open blocks: out of memory");
    for (int i = 0; i < n; i++) {
        const char *nm = names[i]->d_name;
        char dir[4400], meta[4500];
        if (rc < 0 || nm[0] == '.' || !strcmp(nm, "wal"))
            continue;
        snprintf(dir, sizeof dir, "%s/%s", s->path, nm);
        struct stat st;
        if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
            continue;
        size_t l = strlen(nm);
        if (l > 4 && !strcmp(nm + l - 4, ".tmp")) {
            pd_log_warn("storage: removing an unfinished block directory", "dir=%s", dir);
            rm_tree(dir);
            continue;
        }
        snprintf(meta, sizeof meta, "%s/meta.json", dir);
        if (l != 26 && access(meta, F_OK) < 0) {
            /* not named as a block (e.g. repair-<time>/ of `profd tsdb repair`) */
            pd_log_info("storage: ignoring a directory that is not a block", "dir=%s", dir);
            continue;
        }
        pd_block *b = NULL;
        pd_err e;
        pd_err_clear(&e);
        int brc = pd__block_open(dir, &b, &e);
        if (brc == PD_ENOMEM) {
            rc = pd_err_set(err, brc, "open block %s: out of memory", dir);
            continue;
        }
        if (brc < 0) {
            pd_log_error("storage: skipping a block that does not open", "dir=%s err=\"%s\"",
                         dir, e.msg[0] ? e.msg : pd_strerror(brc));
            pd_metrics_add("profd_storage_corruptions_total", NULL, 1);
            continue;
        }
        if (pd__block_damage(b)) { /* served from its other files */
            pd_log_error("storage: block meta.json damaged; rebuilt from its other files "
                         "(`profd tsdb repair` rewrites it)",
                         "dir=%s err=\"%s\"", dir, pd__block_damage(b));
            pd_metrics_add("profd_storage_corruptions_total", NULL, 1);
        }
        opened[n_opened++] = b;
    }
    bool *repl = calloc(n_opened + 1, sizeof *repl);
    if (!repl && rc == 0)
        rc = pd_err_set(err, PD_ENOMEM, "open blocks: out of memory");
    for (size_t i = 0; repl && i < n_opened; i++) {
        const char *id = pd__block_meta(opened[i])->ulid;
        for (size_t j = 0; j < n_opened && !repl[i]; j++) {
            size_t ns;
            const char(*src)[27] = pd__block_sources(opened[j], &ns);
            for (size_t k = 0; k < ns && !repl[i]; k++)
                repl[i] = j != i && !strcmp(src[k], id);
        }
    }
    for (size_t i = 0; i < n_opened; i++) {
        bool replaced = repl && repl[i];
        if (replaced) {
            pd_log_info("storage: removing a block already compacted into another", "dir=%s",
                        pd__block_dir(opened[i]));
            remove_block_dir(pd__block_dir(opened[i]));
        }
        if (replaced || rc < 0) {
            pd__block_close(opened[i]);
            continue;
        }
        int brc = add_block(s, opened[i], added);
        if (brc < 0)
            rc = pd_err_set(err, brc, "open block %s: out of memory", pd__block_dir(opened[i]));
    }
    free(repl);
    free(opened);
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

/* ---- head cut ---- */

/* Start of the range to cut, when one is due (see the top of the file). */
/* The head's min and max time, cached: cut_due runs after every append, and
 * a scan of every series there cost O(series) per append. Appends widen the
 * cached range; removing head points (cut, open) invalidates it, and the
 * next call scans once. With app_mu held (or during open). */
static bool head_range(pd_storage *s, int64_t *mn, int64_t *mx)
{
    if (!s->hr_valid) {
        bool any = false;
        for (size_t i = 0; i < s->n_series; i++) {
            const series *se = s->by_ref[i];
            if (!se->n_pts)
                continue;
            if (!any || se->pts[0].ts < s->hr_min)
                s->hr_min = se->pts[0].ts;
            if (!any || se->pts[se->n_pts - 1].ts > s->hr_max)
                s->hr_max = se->pts[se->n_pts - 1].ts;
            any = true;
        }
        s->hr_any = any;
        s->hr_valid = true;
    }
    *mn = s->hr_min;
    *mx = s->hr_max;
    return s->hr_any;
}

/* After an append of ts (app_mu held): widens the cached head range. */
static void head_range_add(pd_storage *s, int64_t ts)
{
    if (!s->hr_valid)
        return;
    if (!s->hr_any || ts < s->hr_min)
        s->hr_min = ts;
    if (!s->hr_any || ts > s->hr_max)
        s->hr_max = ts;
    s->hr_any = true;
}

static bool cut_due(pd_storage *s, int64_t *start /* OUT */)
{
    if (s->block_ms <= 0 || !s->n_profiles)
        return false;
    int64_t mn = 0, mx = 0;
    if (!head_range(s, &mn, &mx))
        return false;
    int64_t d = s->block_ms;
    int64_t a = mn / d * d;
    if (mn < 0 && a != mn)
        a -= d;
    if (mx - a < d + d / 2 || a > INT64_MAX - 2 * d)
        return false;
    *start = a;
    return true;
}

/* A head series' points in the range being cut, copied. */
typedef struct cut_part {
    series *se; /* series are never freed while the store is open */
    point *pts;
    int64_t *ts;
    size_t n;
} cut_part;

static void cut_parts_free(cut_part *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].pts);
        free(v[i].ts);
    }
    free(v);
}

/* Cuts the head's profiles in [a, a + block_ms) into a block, then
 * checkpoints the WAL. With `locked`, the caller holds app_mu throughout
 * (appends wait for the whole cut: the store without a maintenance thread).
 * Else (the maintenance thread, maint_mu held) app_mu is taken only to copy
 * the points to cut, to swap the block in, and for the checkpoint: the WAL
 * reads, decodes and the block write run while appends go on. Points
 * appended into the range meanwhile stay in the head (the next cut takes
 * them). On failure the head is unchanged (the data stays in the WAL). */
static int cut_head(pd_storage *s, int64_t a, bool locked, pd_err *err)
{
    int64_t b_end = a + s->block_ms;
    pd_block_writer *w = NULL;
    pd_block *blk = NULL;
    cut_part *parts = NULL;
    size_t n_parts = 0;
    char id[27] = {0}, dir[4400], name[4200];
    pd_log_info("storage: head cut starts", "mint=%lld maxt=%lld", (long long)a,
                (long long)(b_end - 1));
    int rc = pd__block_writer_new(NULL, &w);
    if (rc < 0) {
        rc = pd_err_set(err, rc, "head cut: out of memory");
        goto out;
    }
    /* 1. the points to cut */
    if (!locked)
        pthread_mutex_lock(&s->app_mu);
    parts = calloc(s->n_series + 1, sizeof *parts);
    for (size_t i = 0; parts && i < s->n_series; i++) {
        series *se = s->by_ref[i];
        size_t lo = lower_bound(se, a), hi = lower_bound(se, b_end);
        if (hi == lo)
            continue;
        cut_part *cp = &parts[n_parts++];
        cp->se = se;
        cp->n = hi - lo;
        cp->pts = malloc(cp->n * sizeof *cp->pts);
        cp->ts = malloc(cp->n * sizeof *cp->ts);
        if (!cp->pts || !cp->ts) {
            rc = PD_ENOMEM;
            break;
        }
        memcpy(cp->pts, se->pts + lo, cp->n * sizeof *cp->pts);
        for (size_t j = 0; j < cp->n; j++)
            cp->ts[j] = cp->pts[j].ts;
    }
    if (!locked)
        pthread_mutex_unlock(&s->app_mu);
    if (!parts || rc < 0) {
        rc = pd_err_set(err, PD_ENOMEM, "head cut: out of memory");
        goto out;
    }
    /* 2. rebuild them from the head's decomposed form and add them (only this
       cut drops head points, so their groups stay while it runs) */
    size_t skipped = 0;
    int64_t t0 = now_mono_ms();
    for (size_t i = 0; i < n_parts; i++) {
        series *se = parts[i].se;
        for (size_t j = 0; j < parts[i].n; j++) {
            point pt = parts[i].pts[j];
            pd_err e;
            pd_err_clear(&e);
            pd_profile p;
            if (pt.gid == WAL_ONLY) /* replayed, not decomposed yet */
                rc = wal_profile(s, se->ref, &pt, &p, NULL, &e);
            else {
                pthread_rwlock_rdlock(&s->idx);
                rc = pd__hmem_read(&se->hc, pt.gid, pt.gpos, pt.ts, &p, &e);
                pthread_rwlock_unlock(&s->idx);
            }
            if (rc == 0) {
                rc = pd__block_writer_add(w, &se->labels, pt.ts, &p, &e);
                pd_profile_release(&p);
            }
            if (rc == PD_ENOMEM) {
                rc = pd_err_set(err, rc, "head cut: out of memory");
                goto out;
            }
            if (rc < 0) {
                seg_name(s, pt.seg, name, sizeof name);
                pd_log_warn("storage: head cut skips an unreadable profile",
                            "file=%s offset=%llu ts_ms=%lld err=\"%s\"", name,
                            (unsigned long long)pt.off, (long long)pt.ts, e.msg);
                pd_metrics_add("profd_storage_corruptions_total", NULL, 1);
                skipped++;
            }
            rc = 0;
        }
    }
    size_t n = pd__block_writer_count(w);
    if (n) {
        if ((rc = pd__block_writer_write(w, s->path, id, err)) < 0)
            goto out;
        snprintf(dir, sizeof dir, "%s/%s", s->path, id);
        if ((rc = pd__block_open(dir, &blk, err)) < 0) {
            /* never leave a block behind that the head also keeps */
            remove_block_dir(dir);
            goto out;
        }
    }
    /* 3. swap: the block in, its points out of the head */
    if (!locked)
        pthread_mutex_lock(&s->app_mu);
    bool added = false;
    pthread_rwlock_wrlock(&s->idx);
    if (blk) {
        rc = add_block(s, blk, &added);
        blk = NULL;
    }
    for (size_t i = 0; i < n_parts; i++)
        s->n_profiles -= drop_points(s, parts[i].se, parts[i].ts, parts[i].n);
    s->hr_valid = false;
    /* new appends intern into fresh symbols: the old generation goes with
       its last group (no re-encoding) */
    if (n && pd__hmem_new_generation(&s->hm) < 0)
        pd_log_warn("storage: out of memory starting a new head symbol generation", "%s", "");
    pthread_rwlock_unlock(&s->idx);
    if (rc < 0) {
        /* the block is on disk and complete; the next open maps it fully */
        pd_log_error("storage: out of memory mapping a new block", "block=%s", id);
        rc = 0;
    }
    __atomic_add_fetch(&s->n_cuts, 1, __ATOMIC_RELAXED);
    pd_metrics_add("profd_storage_head_cuts_total", NULL, 1);
    /* 4. checkpoint: segments below the oldest one a head point uses */
    uint32_t keep = pd__wal_current(s->wal);
    for (size_t i = 0; i < s->n_series; i++) {
        const series *se = s->by_ref[i];
        for (size_t j = 0; j < se->n_pts; j++)
            if (se->pts[j].seg < keep)
                keep = se->pts[j].seg;
    }
    pthread_rwlock_wrlock(&s->idx);
    for (size_t i = 0; i < s->n_series; i++)
        prune_stash(s->by_ref[i], keep);
    pthread_rwlock_unlock(&s->idx);
    if ((rc = write_series_file(s, err)) < 0 ||
        (rc = pd__wal_remove_before(s->wal, keep, err)) < 0) {
        pd_log_warn("storage: wal checkpoint failed (retried at the next cut)", "err=\"%s\"",
                    err->msg);
        rc = 0;
    }
    update_gauges(s);
    if (!locked)
        pthread_mutex_unlock(&s->app_mu);
    pd_log_info("storage: head cut", "block=%s mint=%lld maxt=%lld profiles=%zu skipped=%zu ms=%lld",
                n ? id : "-", (long long)a, (long long)(b_end - 1), n, skipped,
                (long long)(now_mono_ms() - t0));
out:
    cut_parts_free(parts, n_parts);
    pd__block_close(blk);
    pd__block_writer_free(w);
    return rc;
}

/* Cuts every due range. With `locked`, the caller holds app_mu (appends of
 * a store without a maintenance thread, and open); else maint_mu is held
 * and app_mu is taken per step. */
static void maybe_cut(pd_storage *s, bool locked)
{
    if (s->block_ms <= 0 || now_mono_ms() < s->cut_retry_after)
        return;
    int64_t a;
    for (int i = 0; i < 64; i++) {
        if (!locked)
            pthread_mutex_lock(&s->app_mu);
        bool due = cut_due(s, &a);
        if (!locked)
            pthread_mutex_unlock(&s->app_mu);
        if (!due)
            break;
        pd_err e;
        pd_err_clear(&e);
        if (cut_head(s, a, locked, &e) < 0) {
            pd_log_error("storage: head cut failed; retrying in 60 s", "err=\"%s\"", e.msg);
            s->cut_retry_after = now_mono_ms() + 60000;
            break;
        }
    }
}

/* ---- compaction and retention ----
 *
 * Compaction (as Prometheus' leveled compactor): ranges R_k = d * 3^k for
 * k >= 1 (d = block duration), the largest at most 10% of the retention
 * time (at least R_1). For the smallest R first, blocks are grouped by the
 * aligned range [j*R, (j+1)*R) that holds them whole; a group of two or
 * more blocks whose range lies wholly before the store's newest profile
 * (no more data can arrive there from a head cut) is compacted: every
 * profile of every source is read (one value group decompressed at a time),
 * re-added to a new block writer (symbols interned anew, so re-mapped; a
 * (series, ts) met twice, as overlapping imports can have, is kept once),
 * written with compaction.level = 1 + max source level and
 * compaction.sources = the sources' ULIDs. Only after the new block is
 * durable (rename + fsync of PATH) and loaded are the sources unlinked and
 * deleted; a crash in between leaves both, and open deletes the sources
 * (load_blocks). Blocks straddling a range boundary (imports) are left as
 * they are.
 *
 * Retention: blocks whose max time is older than the wall clock minus
 * retention_ms are deleted (never measured against the newest profile: one
 * profile dated in the future would age out every other); then, while blocks + WAL exceed
 * retention_bytes, the oldest block (by min time) is deleted. Whole blocks
 * only; the head is never touched by retention.
 *
 * The work (reading, writing) runs under maint_mu only, so appends and
 * reads go on; the swap runs under app_mu + the idx write lock.
 */

/* The store's newest profile time over head and blocks; false if empty. */
static bool newest_ts(pd_storage *s, int64_t *out)
{
    bool any = false;
    pthread_rwlock_rdlock(&s->idx);
    for (size_t i = 0; i < s->n_blocks; i++) {
        int64_t t = pd__block_meta(s->blocks[i]->b)->max_t;
        if (!any || t > *out)
            *out = t;
        any = true;
    }
    for (size_t i = 0; i < s->n_series; i++) {
        const series *se = s->by_ref[i];
        if (se->n_pts && (!any || se->pts[se->n_pts - 1].ts > *out)) {
            *out = se->pts[se->n_pts - 1].ts;
            any = true;
        }
    }
    pthread_rwlock_unlock(&s->idx);
    return any;
}

/* A snapshot of the store's blocks with a reference each (hb_put them). */
static int snapshot_blocks(pd_storage *s, hblock ***out, size_t *n)
{
    pthread_rwlock_rdlock(&s->idx);
    *n = s->n_blocks;
    *out = malloc((*n ? *n : 1) * sizeof **out);
    if (*out)
        for (size_t i = 0; i < *n; i++) {
            (*out)[i] = s->blocks[i];
            hb_get(s->blocks[i]);
        }
    pthread_rwlock_unlock(&s->idx);
    return *out ? 0 : PD_ENOMEM;
}

static void put_blocks(hblock **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        hb_put(v[i]);
    free(v);
}

static int cmp_hb_mint(const void *a, const void *b)
{
    const pd_block_meta *x = pd__block_meta((*(hblock *const *)a)->b);
    const pd_block_meta *y = pd__block_meta((*(hblock *const *)b)->b);
    if (x->min_t != y->min_t)
        return x->min_t < y->min_t ? -1 : 1;
    return strcmp(x->ulid, y->ulid);
}

static int64_t floor_div(int64_t a, int64_t d) { return a / d - (a % d != 0 && a < 0); }

/* Picks the next group to compact from v (sorted by min time): its first
 * index and size, or false. */
static bool plan_compaction(const pd_storage *s, hblock **v, size_t n, int64_t newest,
                            size_t *first, size_t *count)
{
    int64_t d = s->block_ms > 0 ? s->block_ms : 2 * 3600 * 1000;
    /* as Prometheus: 10% of the retention time, else 31 days */
    int64_t max_r = s->retention_ms > 0 ? s->retention_ms / 10 : 31ll * 24 * 3600 * 1000;
    for (int64_t r = d * 3; r > 0; r *= 3) {
        if (r > max_r)
            break;
        size_t i = 0;
        while (i < n) {
            const pd_block_meta *m = pd__block_meta(v[i]->b);
            int64_t j = floor_div(m->min_t, r);
            if (j > INT64_MAX / r - 1) {
                i++;
                continue;
            }
            int64_t end = (j + 1) * r; /* exclusive */
            size_t k = i;
            bool whole = true;
            while (k < n && pd__block_meta(v[k]->b)->min_t < end) {
                if (pd__block_meta(v[k]->b)->max_t >= end)
                    whole = false;
                k++;
            }
            if (whole && k - i >= 2 && newest >= end) {
                *first = i;
                *count = k - i;
                return true;
            }
            i = k > i ? k : i + 1;
        }
        if (r > INT64_MAX / 3 / 4)
            break;
    }
    return false;
}

typedef struct compact_ctx {
    pd_block_writer *w;
    const pd_labels *labels;
    uint64_t dups;
    pd_err *err;
} compact_ctx;

static int compact_add(void *ctx, int64_t ts_ms, const pd_profile *p)
{
    compact_ctx *c = ctx;
    int rc = pd__block_writer_add(c->w, c->labels, ts_ms, p, c->err);
    if (rc == PD_EEXIST) {
        c->dups++;
        return 0;
    }
    return rc;
}

/* Compacts v[0..n) into one block and swaps it in. With maint_mu held.
 * A source that does not read (*bad_src = its index, else n) fails the
 * compaction; the caller marks it failed. */
static int compact_blocks(pd_storage *s, hblock **v, size_t n, size_t *bad_src, pd_err *err)
{
    *bad_src = n;
    int64_t t0 = now_mono_ms();
    pd_block_writer *w = NULL;
    pd_block *blk = NULL;
    char id[27] = {0}, dir[4400];
    char(*srcs)[27] = calloc(n, sizeof *srcs);
    int level = 1;
    if (!srcs)
        return pd_err_set(err, PD_ENOMEM, "compaction: out of memory");
    for (size_t i = 0; i < n; i++) {
        const pd_block_meta *m = pd__block_meta(v[i]->b);
        memcpy(srcs[i], m->ulid, 27);
        if (m->level + 1 > level)
            level = m->level + 1;
    }
    pd_block_writer_opts o = {.level = level, .sources = (const char(*)[27])srcs, .n_sources = n};
    int rc = pd__block_writer_new(&o, &w);
    if (rc < 0) {
        rc = pd_err_set(err, rc, "compaction: out of memory");
        goto out;
    }
    compact_ctx c = {.w = w, .err = err};
    for (size_t i = 0; i < n; i++) {
        pd_block *b = v[i]->b;
        size_t ns = pd__block_n_series(b);
        for (uint32_t id2 = 0; id2 < ns; id2++) {
            c.labels = pd__block_series_labels(b, id2);
            if ((rc = pd__block_series_foreach(b, id2, compact_add, &c, err)) < 0) {
                pd_err_prefix(err, "compaction of block %s", pd__block_meta(b)->ulid);
                if (rc != PD_ENOMEM && !(rc < 0 && rc > -1000 && rc != -EIO))
                    *bad_src = i; /* damaged data, not a resource problem */
                goto out;
            }
        }
    }
    if ((rc = pd__block_writer_write(w, s->path, id, err)) < 0)
        goto out;
    snprintf(dir, sizeof dir, "%s/%s", s->path, id);
    if ((rc = pd__block_open(dir, &blk, err)) < 0) {
        remove_block_dir(dir); /* the sources stay */
        goto out;
    }
    bool added = false;
    pthread_mutex_lock(&s->app_mu);
    pthread_rwlock_wrlock(&s->idx);
    rc = add_block(s, blk, &added);
    blk = NULL;
    if (rc == 0)
        for (size_t i = 0; i < n; i++)
            unlink_block(s, v[i]); /* the store's reference is now ours */
    pthread_rwlock_unlock(&s->idx);
    pthread_mutex_unlock(&s->app_mu);
    if (rc < 0) {
        /* the new block is on disk and lists its sources: the next open
           keeps it and drops them; this run goes on with the sources */
        rc = pd_err_set(err, rc, "compaction: out of memory adding block %s", id);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        remove_block_dir(pd__block_dir(v[i]->b));
        hb_put(v[i]); /* the store's reference */
    }
    __atomic_add_fetch(&s->n_compactions, 1, __ATOMIC_RELAXED);
    pd_metrics_add("profd_storage_compactions_total", NULL, 1);
    pd_log_info("storage: compacted blocks", "block=%s sources=%zu level=%d profiles=%zu dups=%llu ms=%lld",
                id, n, level, pd__block_writer_count(w), (unsigned long long)c.dups,
                (long long)(now_mono_ms() - t0));
out:
    pd__block_close(blk);
    pd__block_writer_free(w);
    free(srcs);
    return rc;
}

/* Deletes block hb (retention). With maint_mu held; hb has a snapshot ref. */
static void delete_block(pd_storage *s, hblock *hb, const char *why)
{
    const pd_block_meta *m = pd__block_meta(hb->b);
    pd_log_info("storage: retention deletes a block", "block=%s mint=%lld maxt=%lld reason=%s",
                m->ulid, (long long)m->min_t, (long long)m->max_t, why);
    pthread_mutex_lock(&s->app_mu);
    pthread_rwlock_wrlock(&s->idx);
    unlink_block(s, hb);
    pthread_rwlock_unlock(&s->idx);
    pthread_mutex_unlock(&s->app_mu);
    remove_block_dir(pd__block_dir(hb->b));
    hb_put(hb); /* the store's reference */
    __atomic_add_fetch(&s->n_ret_deletes, 1, __ATOMIC_RELAXED);
    pd_metrics_add("profd_storage_retention_deletes_total", NULL, 1);
}

static void apply_retention(pd_storage *s)
{
    hblock **v;
    size_t n;
    if ((!s->retention_ms || s->retention_ms < 0) && !s->retention_bytes)
        return;
    /* the wall clock, never the newest profile: one profile dated in the
       future must not age every other one out (issue 19) */
    int64_t now = s->clock();
    if (snapshot_blocks(s, &v, &n) < 0)
        return;
    qsort(v, n, sizeof *v, cmp_hb_mint);
    bool *gone = calloc(n ? n : 1, sizeof *gone);
    if (!gone) {
        put_blocks(v, n);
        return;
    }
    if (s->retention_ms > 0 && now > INT64_MIN + s->retention_ms)
        for (size_t i = 0; i < n; i++)
            if (pd__block_meta(v[i]->b)->max_t < now - s->retention_ms) {
                delete_block(s, v[i], "time");
                gone[i] = true;
            }
    if (s->retention_bytes) {
        pd_storage_stats st;
        pd_storage_stats_get(s, &st);
        uint64_t total = st.bytes_on_disk;
        for (size_t i = 0; i < n && total > s->retention_bytes; i++) {
            if (gone[i])
                continue;
            const pd_block_meta *m = pd__block_meta(v[i]->b);
            uint64_t b = m->meta_bytes + m->index_bytes + m->symbols_bytes + m->chunks_bytes;
            delete_block(s, v[i], "size");
            gone[i] = true;
            total = total > b ? total - b : 0;
        }
    }
    free(gone);
    put_blocks(v, n);
}

/* Decomposes replayed (WAL-only) head points into the head's groups, series
 * by series, for about budget_ms: each body is read and decoded with no lock
 * held, then appended to the series' groups under app_mu + the idx write
 * lock, as an append would. A body that does not decode is reported (file,
 * offset), counted in profd_storage_corruptions_total and dropped from the
 * head, as the replay did when it decoded every body. maint_mu held (no cut
 * runs meanwhile). Returns true when some remain. */
static bool decompose_replayed(pd_storage *s, int64_t budget_ms)
{
    int64_t t0 = now_mono_ms();
    size_t done = 0, bad = 0;
    bool stop = false;
    for (size_t i = 0; !stop; i++) {
        pthread_mutex_lock(&s->app_mu);
        if (!s->n_wal_only || i >= s->n_series) {
            pthread_mutex_unlock(&s->app_mu);
            break;
        }
        series *se = s->by_ref[i]; /* (new series take larger refs: i stays put) */
        size_t n = 0;
        point *v = se->n_wal_only ? malloc(se->n_wal_only * sizeof *v) : NULL;
        for (size_t j = 0; v && j < se->n_pts && n < se->n_wal_only; j++)
            if (se->pts[j].gid == WAL_ONLY)
                v[n++] = se->pts[j];
        pthread_mutex_unlock(&s->app_mu);
        if (se->n_wal_only && !v)
            break; /* out of memory: later */
        for (size_t j = 0; j < n && !stop; j++) {
            pd_profile p;
            pd_err e;
            pd_err_clear(&e);
            int rc = wal_profile(s, se->ref, &v[j], &p, NULL, &e);
            pthread_mutex_lock(&s->app_mu);
            size_t k = lower_bound(se, v[j].ts);
            bool still = k < se->n_pts && se->pts[k].ts == v[j].ts && se->pts[k].gid == WAL_ONLY;
            int hrc = rc;
            if (still && rc == 0) {
                pd_hmem_undo u;
                uint32_t gid, gpos;
                pthread_rwlock_wrlock(&s->idx);
                hrc = pd__hmem_append(&s->hm, &se->hc, &p, v[j].ts, &gid, &gpos, &u, &e);
                if (hrc == 0) {
                    se->pts[k].gid = gid;
                    se->pts[k].gpos = gpos;
                    se->n_wal_only--;
                    s->n_wal_only--;
                }
                pthread_rwlock_unlock(&s->idx);
                if (hrc == 0) {
                    pd__hmem_commit(&se->hc, &u);
                    compress_sealed(s, se);
                    done++;
                }
            }
            if (still && hrc < 0 && hrc != PD_ENOMEM) {
                char name[4200];
                seg_name(s, v[j].seg, name, sizeof name);
                pd_log_warn("storage: a replayed profile cannot be read; dropped from the head",
                            "file=%s offset=%llu ts_ms=%lld err=\"%s\"", name,
                            (unsigned long long)v[j].off, (long long)v[j].ts, e.msg);
                pd_metrics_add("profd_storage_corruptions_total", NULL, 1);
                pthread_rwlock_wrlock(&s->idx);
                memmove(se->pts + k, se->pts + k + 1, (se->n_pts - k - 1) * sizeof *se->pts);
                se->n_pts--;
                se->n_wal_only--;
                s->n_wal_only--;
                s->n_profiles--;
                s->hr_valid = false;
                pthread_rwlock_unlock(&s->idx);
                bad++;
            }
            if (hrc == PD_ENOMEM)
                stop = true;
            pthread_mutex_unlock(&s->app_mu);
            if (rc == 0)
                pd_profile_release(&p);
            if (now_mono_ms() - t0 > budget_ms)
                stop = true;
        }
        free(v);
    }
    pthread_mutex_lock(&s->app_mu);
    uint64_t left = s->n_wal_only;
    update_gauges(s);
    pthread_mutex_unlock(&s->app_mu);
    if (done || bad)
        pd_log_info("storage: replayed profiles decomposed into the head",
                    "profiles=%zu dropped=%zu left=%llu ms=%lld", done, bad,
                    (unsigned long long)left, (long long)(now_mono_ms() - t0));
    return left > 0;
}

int pd_storage_maintain(pd_storage *s, pd_err *err)
{
    pd_err_clear(err);
    int rc = 0;
    pthread_mutex_lock(&s->maint_mu);
    maybe_cut(s, false);
    for (int round = 0; round < 64 && now_mono_ms() >= s->compact_retry_after; round++) {
        int64_t newest = 0;
        hblock **v;
        size_t n, first, count;
        if (!newest_ts(s, &newest))
            break;
        if ((rc = snapshot_blocks(s, &v, &n)) < 0) {
            pd_err_set(err, rc, "compaction: out of memory");
            break;
        }
        qsort(v, n, sizeof *v, cmp_hb_mint);
        /* blocks a compaction could not read are left out of the plans */
        size_t nok = 0;
        for (size_t i = 0; i < n; i++)
            if (!pd__block_meta(v[i]->b)->compaction_failed)
                v[nok++] = v[i];
            else
                hb_put(v[i]);
        n = nok;
        bool due = plan_compaction(s, v, n, newest, &first, &count);
        size_t bad = count;
        if (due && (rc = compact_blocks(s, v + first, count, &bad, err)) < 0) {
            if (bad < count) {
                /* as Prometheus: mark the source failed and plan around it */
                pd_block *fb = v[first + bad]->b;
                pd_err me;
                pd_err_clear(&me);
                int mrc = pd__block_mark_failed(fb, &me);
                pd_log_error("storage: compaction cannot read a block; marked failed "
                             "(compaction.failed in its meta.json), left out of later "
                             "compactions, still served for what reads",
                             "block=%s err=\"%s\" persisted=%s", pd__block_meta(fb)->ulid,
                             err->msg, mrc < 0 ? me.msg : "yes");
                pd_metrics_add("profd_storage_corruptions_total", NULL, 1);
                pd_metrics_add("profd_storage_compactions_failed_total", NULL, 1);
                rc = 0; /* the next round plans without it */
                pd_err_clear(err);
            } else {
                pd_log_error("storage: compaction failed; its sources are kept, retrying in "
                             "5 min",
                             "err=\"%s\"", err->msg);
                pd_metrics_add("profd_storage_compactions_failed_total", NULL, 1);
                s->compact_retry_after = now_mono_ms() + 5 * 60 * 1000;
            }
        }
        put_blocks(v, n);
        if (due && rc == 0) { /* the gauges follow each compaction, not each round */
            pthread_mutex_lock(&s->app_mu);
            update_gauges(s);
            pthread_mutex_unlock(&s->app_mu);
        }
        if (!due || rc < 0)
            break;
    }
    apply_retention(s);
    /* replayed profiles: after the cut (which reads those it takes from the
       WAL), in slices of 2 s so that a due cut is not held up long */
    bool more = decompose_replayed(s, 2000);
    pthread_mutex_lock(&s->app_mu);
    update_gauges(s);
    pthread_mutex_unlock(&s->app_mu);
    pthread_mutex_unlock(&s->maint_mu);
    if (more && s->maint_running)
        kick_maintenance(s);
    return rc;
}

/* Wakes the maintenance thread for a round now (a head cut is due). */
static void kick_maintenance(pd_storage *s)
{
    pthread_mutex_lock(&s->stop_mu);
    if (!s->kicked) {
        s->kicked = true;
        pthread_cond_signal(&s->stop_cv);
    }
    pthread_mutex_unlock(&s->stop_mu);
}

static void *maint_main(void *arg)
{
    pd_storage *s = arg;
    pthread_mutex_lock(&s->stop_mu);
    while (!s->stopping) {
        if (s->kicked) {
            s->kicked = false;
            pthread_mutex_unlock(&s->stop_mu);
            pd_err e;
            pd_storage_maintain(s, &e);
            pthread_mutex_lock(&s->stop_mu);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += s->maint_ms / 1000;
        ts.tv_nsec += (s->maint_ms % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&s->stop_cv, &s->stop_mu, &ts);
        if (s->stopping)
            break;
        if (s->kicked)
            continue;
        pthread_mutex_unlock(&s->stop_mu);
        pd_err e;
        pd_storage_maintain(s, &e);
        pthread_mutex_lock(&s->stop_mu);
    }
    pthread_mutex_unlock(&s->stop_mu);
    return NULL;
}

int pd_storage_open(const pd_storage_options *opts, pd_storage **out, pd_err *err)
{
    *out = NULL;
    pd_err_clear(err);
    pd_metrics_describe("profd_storage_series", PD_METRIC_GAUGE, "Series in the store.");
    pd_metrics_describe("profd_storage_profiles", PD_METRIC_GAUGE, "Profiles in the store.");
    pd_metrics_describe("profd_storage_bytes", PD_METRIC_GAUGE,
                        "Bytes of the store's files on disk (WAL segments and blocks).");
    pd_metrics_describe("profd_storage_corruptions_total", PD_METRIC_COUNTER,
                        "Corrupt records or segments met in the store's files (skipped or cut "
                        "off).");
    pd_metrics_add("profd_storage_corruptions_total", NULL, 0); /* exposed from 0 */
    pd_metrics_describe("profd_storage_blocks", PD_METRIC_GAUGE, "Immutable blocks open.");
    pd_metrics_describe("profd_storage_head_chunk_bytes", PD_METRIC_GAUGE,
                        "Bytes of value groups held in memory by the head (raw and "
                        "zstd-compressed).");
    pd_metrics_describe("profd_storage_head_symbols", PD_METRIC_GAUGE,
                        "Strings, functions, locations and stacks of the head's current symbol "
                        "generation.");
    pd_metrics_describe("profd_storage_head_wal_only_profiles", PD_METRIC_GAUGE,
                        "Head profiles replayed from the WAL and not yet decomposed into the "
                        "head's value groups (read from the WAL meanwhile).");
    pd_metrics_describe("profd_storage_head_symbol_generations", PD_METRIC_GAUGE,
                        "Symbol tables of the head alive: the current one plus those still "
                        "used by head profiles from before the last head cut.");
    pd_metrics_describe("profd_storage_head_cuts_total", PD_METRIC_COUNTER,
                        "Blocks cut from the head.");
    pd_metrics_describe("profd_storage_compactions_total", PD_METRIC_COUNTER,
                        "Compactions of blocks into a larger block.");
    pd_metrics_describe("profd_storage_retention_deletes_total", PD_METRIC_COUNTER,
                        "Blocks deleted by retention (time or size).");
    pd_metrics_add("profd_storage_head_cuts_total", NULL, 0);
    pd_metrics_describe("profd_storage_compactions_failed_total", PD_METRIC_COUNTER,
                        "Compactions that failed; one that could not read a source block "
                        "marked it failed (compaction.failed in its meta.json).");
    pd_metrics_add("profd_storage_compactions_total", NULL, 0);
    pd_metrics_add("profd_storage_compactions_failed_total", NULL, 0);
    pd_metrics_add("profd_storage_retention_deletes_total", NULL, 0);
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
    s->block_ms = opts->block_duration_ms ? opts->block_duration_ms : 2 * 3600 * 1000;
    pthread_mutex_init(&s->app_mu, NULL);
    {
        /* issue 20: writers first — glibc's default prefers readers, so
           back-to-back merges (each a stream of short read holds) kept a
           push's write lock waiting for seconds. No thread takes s->idx for
           reading twice (the non-recursive kind would deadlock then). */
        pthread_rwlockattr_t ra;
        pthread_rwlockattr_init(&ra);
        pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
        pthread_rwlock_init(&s->idx, &ra);
        pthread_rwlockattr_destroy(&ra);
    }
    pthread_mutex_init(&s->maint_mu, NULL);
    pthread_mutex_init(&s->stop_mu, NULL);
    pthread_cond_init(&s->stop_cv, NULL);
    s->retention_ms = opts->retention_ms ? opts->retention_ms : 15ll * 24 * 3600 * 1000;
    s->grace_ms = opts->future_grace_ms ? opts->future_grace_ms : 10 * 60 * 1000;
    s->clock = opts->clock_ms ? opts->clock_ms : pd_now_ms;
    s->retention_bytes = opts->retention_bytes;
    s->maint_ms = opts->maintenance_ms ? opts->maintenance_ms : 60 * 1000;
    if (!(s->path = strdup(path)) || pd__hmem_init(&s->hm) < 0) {
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
        .segment_bytes = opts->segment_bytes ? opts->segment_bytes : 32u << 20,
        .fsync = opts->fsync,
        .batch_ms = opts->fsync_batch_ms > 0 ? opts->fsync_batch_ms : 1000,
    };
    if ((rc = read_series_file(s)) < 0) {
        pd_err_set(err, rc, "read %s/series: %s", path, pd_strerror(rc));
        goto fail;
    }
    if ((rc = pd__wal_open(&wo, replay_fn, s, &s->wal, err)) < 0)
        goto fail;
    bool added = false;
    if ((rc = load_blocks(s, &added, err)) < 0)
        goto fail;
    if ((rc = dedupe_head(s)) < 0) {
        pd_err_set(err, rc, "open storage %s: out of memory", path);
        goto fail;
    }
    if (added) {
        pd_err e;
        pd_err_clear(&e);
        if (write_series_file(s, &e) < 0) /* refs hold for this run anyway */
            pd_log_warn("storage: cannot persist the refs of block series", "err=\"%s\"", e.msg);
    }
    /* A head cut due at open (the WAL spans more than 1.5 block durations,
       e.g. after a crash during a cut) runs on the maintenance thread, so the
       open returns as soon as the WAL is indexed: a busy head's cut takes
       minutes (issue 19, "offline while it starts"). Without the thread,
       here. */
    if (s->maint_ms <= 0)
        maybe_cut(s, true);
    update_gauges(s);
    if (s->maint_ms > 0) {
        if ((rc = pthread_create(&s->maint_thread, NULL, maint_main, s)) != 0) {
            rc = pd_err_set(err, -rc, "open storage %s: cannot start the maintenance thread",
                            path);
            goto fail;
        }
        s->maint_running = true;
        int64_t cut_from;
        pthread_mutex_lock(&s->app_mu);
        bool due = cut_due(s, &cut_from);
        pthread_mutex_unlock(&s->app_mu);
        if (s->n_wal_only || due)
            kick_maintenance(s); /* cut, then decompose the replayed profiles, now */
    }
    pd_log_info("storage opened",
                "path=%s series=%zu profiles=%llu blocks=%zu segments=%zu bytes=%llu", path,
                s->n_series, (unsigned long long)(s->n_profiles + blocks_profiles(s)),
                s->n_blocks, pd__wal_segments(s->wal),
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
    if (s->maint_running) {
        pthread_mutex_lock(&s->stop_mu);
        s->stopping = true;
        pthread_cond_signal(&s->stop_cv);
        pthread_mutex_unlock(&s->stop_mu);
        pthread_join(s->maint_thread, NULL);
    }
    pd__wal_close(s->wal);
    for (size_t i = 0; i < s->n_series; i++)
        series_free(s, s->by_ref[i]);
    free(s->by_ref);
    free(s->buckets);
    pd__hmem_release(&s->hm);
    pd__postings_release(&s->post);
    for (size_t i = 0; i < s->n_blocks; i++)
        hb_put(s->blocks[i]);
    free(s->blocks);
    if (s->lock_fd >= 0)
        close(s->lock_fd); /* releases the flock */
    free(s->path);
    pthread_rwlock_destroy(&s->idx);
    pthread_mutex_destroy(&s->app_mu);
    pthread_mutex_destroy(&s->maint_mu);
    pthread_mutex_destroy(&s->stop_mu);
    pthread_cond_destroy(&s->stop_cv);
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
    int rc0 = check_time(s->retention_ms, s->grace_ms, s->clock(), ts_ms, err);
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

    pthread_mutex_lock(&s->app_mu);
    /* appends are serialised by app_mu, the only writer: no idx lock to read */
    series *se = find_by_labels(s, labels, hash);
    if (se && (has_ts(se, ts_ms) || blocks_have(se, ts_ms))) {
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

    /* everything that can fail in the index, before the write; the profile
       is decomposed into the head here (its symbols interned: the idx write
       lock), and taken back if the WAL write fails */
    pd_hmem_undo hu;
    memset(&hu, 0, sizeof hu);
    pthread_rwlock_wrlock(&s->idx);
    rc = 0;
    if (fresh)
        rc = reserve_series(s);
    if (rc == 0)
        rc = intern_tset(se, k, pr.types, pr.tlen, pr.units, pr.ulen, &pt.tset);
    if (rc == 0)
        rc = reserve_point(se, k);
    pd_err herr;
    pd_err_clear(&herr);
    if (rc == 0 && (rc = pd__hmem_append(&s->hm, &se->hc, profile, ts_ms, &pt.gid, &pt.gpos, &hu,
                                         &herr)) < 0 && rc != PD_ENOMEM) {
        pthread_rwlock_unlock(&s->idx);
        pd_err_set(err, rc, "append: %s", herr.msg);
        goto out;
    }
    pthread_rwlock_unlock(&s->idx);
    if (rc < 0)
        goto nomem;

    uint32_t seg;
    uint64_t off;
    if ((rc = pd__wal_append(s->wal, (const uint8_t *)recs.data, recs.len, &seg, &off, err)) < 0) {
        pthread_rwlock_wrlock(&s->idx);
        pd__hmem_undo(&s->hm, &se->hc, &hu);
        pthread_rwlock_unlock(&s->idx);
        goto out;
    }
    pt.seg = seg;
    pt.off = off + profile_at;

    pthread_rwlock_wrlock(&s->idx);
    if (fresh) {
        insert_series(s, fresh);
        fresh = NULL;
    }
    insert_point(se, pt, pr.totals, k);
    head_range_add(s, ts_ms);
    s->n_profiles++;
    pthread_rwlock_unlock(&s->idx);
    pd__hmem_commit(&se->hc, &hu);
    compress_sealed(s, se);
    int64_t cut_from;
    if (s->maint_ms <= 0) { /* no maintenance thread: cut here, appends wait */
        /* (unless a pd_storage_maintain round runs: it cuts) */
        if (pthread_mutex_trylock(&s->maint_mu) == 0) {
            maybe_cut(s, true);
            pthread_mutex_unlock(&s->maint_mu);
        }
    }
    else if (cut_due(s, &cut_from)) /* wake the thread: it cuts while appends go on */
        kick_maintenance(s);
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
    series_free(s, fresh);
    pd_buf_release(&payload);
    pd_buf_release(&recs);
    /* pr's strings are borrowed from profile: only its arrays are freed */
    pd__profile_rec_release(&pr);
    return rc;
}

/* ---- querier ---- */

static int cmp_series_info(const void *a, const void *b)
{
    return pd_labels_cmp(&((const pd_series_info *)a)->labels,
                         &((const pd_series_info *)b)->labels);
}

/* select's test of one series: appends it to out (capacity *cap) when it has
 * profiles in [mint, maxt] and matches. 0 or PD_ENOMEM. idx read lock. */
static int select_one(const series *se, const pd_matcher *ms, size_t n, int64_t mint,
                      int64_t maxt, pd_series_set *out, size_t *cap)
{
    bool matched = false;
    size_t cnt = 0;
    int64_t mn = 0, mx = 0;
    if (se->n_pts) {
        size_t lo = lower_bound(se, mint);
        if (lo < se->n_pts && se->pts[lo].ts <= maxt) {
            size_t hi = lo;
            if (se->pts[se->n_pts - 1].ts <= maxt) {
                hi = se->n_pts;
            } else {
                hi = lower_bound(se, maxt);
                if (hi < se->n_pts && se->pts[hi].ts == maxt)
                    hi++;
            }
            cnt = hi - lo;
            mn = se->pts[lo].ts;
            mx = se->pts[hi - 1].ts;
        }
    }
    for (size_t k = 0; k < se->n_brefs; k++) {
        const bref *r = &se->brefs[k];
        if (r->maxt < mint || r->mint > maxt || !r->n)
            continue;
        if (!matched) { /* matchers before any block I/O */
            if (!pd_matchers_match(ms, n, &se->labels))
                return 0;
            matched = true;
        }
        if (hb_bad(r->hb, r->id)) {
            hb_warn_known(r->hb, r->id, se->ref);
            continue;
        }
        int64_t bmn = r->mint, bmx = r->maxt;
        size_t bn = (size_t)r->n;
        if (r->mint < mint || r->maxt > maxt) {
            pd_points pts;
            pd_err e;
            pd_err_clear(&e);
            int brc = pd__block_read_points(r->hb->b, r->id, mint, maxt, &pts, &e);
            if (brc == PD_ENOMEM)
                return brc;
            if (brc < 0) {
                hb_read_failed(r->hb, r->id, brc, &e);
                continue;
            }
            bn = pts.n;
            if (pts.n) {
                bmn = pts.v[0].ts_ms;
                bmx = pts.v[pts.n - 1].ts_ms;
            }
            pd_points_release(&pts);
        }
        if (!bn)
            continue;
        if (!cnt || bmn < mn)
            mn = bmn;
        if (!cnt || bmx > mx)
            mx = bmx;
        cnt += bn;
    }
    if (!cnt)
        return 0;
    if (!matched && !pd_matchers_match(ms, n, &se->labels))
        return 0;
    if (out->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        pd_series_info *nv = realloc(out->v, nc * sizeof *nv);
        if (!nv)
            return PD_ENOMEM;
        out->v = nv;
        *cap = nc;
    }
    pd_series_info *si = &out->v[out->n];
    if (pd_labels_copy(&si->labels, &se->labels) < 0)
        return PD_ENOMEM;
    si->ref = se->ref;
    si->n_profiles = cnt;
    si->min_ts = mn;
    si->max_ts = mx;
    out->n++;
    return 0;
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
    /* candidates from the postings (a superset: select_one applies every matcher) */
    uint64_t *refs = NULL;
    size_t n_refs = 0;
    bool all = true;
    if (!s->post_broken)
        rc = pd__postings_select(&s->post, ms, n, &refs, &n_refs, &all);
    if (rc == 0 && all) {
        for (size_t i = 0; i < s->n_series && rc == 0; i++)
            rc = select_one(s->by_ref[i], ms, n, mint, maxt, out, &cap);
    } else {
        for (size_t i = 0; i < n_refs && rc == 0; i++) {
            const series *se = find_by_ref(s, refs[i]);
            if (se)
                rc = select_one(se, ms, n, mint, maxt, out, &cap);
        }
    }
    free(refs);
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

static int cmp_point_ts(const void *a, const void *b)
{
    int64_t x = ((const pd_point *)a)->ts_ms, y = ((const pd_point *)b)->ts_ms;
    return x < y ? -1 : x > y;
}

/* Appends copies (into arena a) of the points of bp to *v. 0 or PD_ENOMEM. */
static int copy_block_points(pd_arena *a, const pd_points *bp, pd_point **v, size_t *n,
                             size_t *cap)
{
    const pd_sample_type_desc *src = NULL;
    pd_sample_type_desc *dst = NULL;
    size_t src_n = 0;
    for (size_t i = 0; i < bp->n; i++) {
        const pd_point *p = &bp->v[i];
        if (*n == *cap) {
            size_t nc = *cap ? *cap * 2 : 64;
            pd_point *nv = realloc(*v, nc * sizeof *nv);
            if (!nv)
                return PD_ENOMEM;
            *v = nv;
            *cap = nc;
        }
        pd_point *q = &(*v)[*n];
        q->ts_ms = p->ts_ms;
        q->n_types = p->n_types;
        q->types = NULL;
        q->totals = NULL;
        if (p->n_types) {
            if (p->types != src || p->n_types != src_n) {
                dst = pd_arena_calloc(a, p->n_types, sizeof *dst);
                if (!dst)
                    return PD_ENOMEM;
                for (size_t j = 0; j < p->n_types; j++) {
                    dst[j].type = pd_arena_strdup(a, p->types[j].type ? p->types[j].type : "");
                    dst[j].unit = pd_arena_strdup(a, p->types[j].unit ? p->types[j].unit : "");
                    if (!dst[j].type || !dst[j].unit)
                        return PD_ENOMEM;
                }
                src = p->types;
                src_n = p->n_types;
            }
            q->types = dst;
            q->totals = pd_arena_alloc(a, p->n_types * sizeof *q->totals);
            if (!q->totals)
                return PD_ENOMEM;
            memcpy(q->totals, p->totals, p->n_types * sizeof *q->totals);
        }
        (*n)++;
    }
    return 0;
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
    pd_point *v = NULL;
    size_t nv = 0, cap = 0;
    bref *brs = NULL;
    size_t n_brs = 0;
    pthread_rwlock_rdlock(&s->idx);
    const series *se = find_by_ref(s, ref);
    if (!se) {
        pthread_rwlock_unlock(&s->idx);
        rc = pd_err_set(err, PD_ENOTFOUND, "no series with ref %llu", (unsigned long long)ref);
        goto out;
    }
    if (mint > maxt) {
        pthread_rwlock_unlock(&s->idx);
        goto out;
    }
    /* the blocks' parts to read after the lock (blocks stay open until close) */
    if (se->n_brefs && !(brs = malloc(se->n_brefs * sizeof *brs))) {
        pthread_rwlock_unlock(&s->idx);
        rc = PD_ENOMEM;
        goto out;
    }
    for (size_t k = 0; k < se->n_brefs; k++)
        if (se->brefs[k].maxt >= mint && se->brefs[k].mint <= maxt) {
            hb_get(se->brefs[k].hb);
            brs[n_brs++] = se->brefs[k];
        }
    size_t lo = lower_bound(se, mint), hi = lo;
    while (hi < se->n_pts && se->pts[hi].ts <= maxt)
        hi++;
    if (hi > lo) {
        /* each sample-type set is copied once and shared by its points */
        copied = calloc(se->n_tsets, sizeof *copied);
        cap = hi - lo;
        v = malloc(cap * sizeof *v);
        if (!copied || !v) {
            rc = PD_ENOMEM;
            goto unlock;
        }
        for (size_t i = lo; i < hi; i++) {
            const point *p = &se->pts[i];
            const typeset *t = &se->tsets[p->tset];
            pd_point *q = &v[nv++];
            memset(q, 0, sizeof *q);
            q->ts_ms = p->ts;
            q->n_types = t->n;
            if (!copied[p->tset] && t->n) {
                pd_sample_type_desc *d = pd_arena_calloc(a, t->n, sizeof *d);
                if (!d) {
                    rc = PD_ENOMEM;
                    goto unlock;
                }
                for (size_t j = 0; j < t->n; j++) {
                    d[j].type = pd_arena_strdup(a, t->d[j].type);
                    d[j].unit = pd_arena_strdup(a, t->d[j].unit);
                    if (!d[j].type || !d[j].unit) {
                        rc = PD_ENOMEM;
                        goto unlock;
                    }
                }
                copied[p->tset] = d;
            }
            q->types = copied[p->tset];
            if (t->n) {
                q->totals = pd_arena_alloc(a, t->n * sizeof *q->totals);
                if (!q->totals) {
                    rc = PD_ENOMEM;
                    goto unlock;
                }
                memcpy(q->totals, se->totals + p->tot, t->n * sizeof *q->totals);
            }
        }
    }
unlock:
    pthread_rwlock_unlock(&s->idx);
    if (rc < 0)
        goto out;
    for (size_t k = 0; k < n_brs; k++) {
        pd_points bp;
        if (hb_bad(brs[k].hb, brs[k].id)) {
            hb_warn_known(brs[k].hb, brs[k].id, ref);
            continue;
        }
        pd_err be;
        pd_err_clear(&be);
        if ((rc = pd__block_read_points(brs[k].hb->b, brs[k].id, mint, maxt, &bp, &be)) < 0) {
            if (rc == PD_ENOMEM) {
                if (err)
                    *err = be;
                goto out;
            }
            hb_read_failed(brs[k].hb, brs[k].id, rc, &be); /* the rest is served */
            rc = 0;
            continue;
        }
        rc = copy_block_points(a, &bp, &v, &nv, &cap);
        pd_points_release(&bp);
        if (rc < 0)
            goto out;
    }
    if (nv == 0)
        goto out;
    bool sorted = true;
    for (size_t i = 1; i < nv && sorted; i++)
        sorted = v[i - 1].ts_ms < v[i].ts_ms;
    if (!sorted) {
        qsort(v, nv, sizeof *v, cmp_point_ts);
        size_t w = 1; /* (series, ts) is unique; drop a duplicate defensively */
        for (size_t i = 1; i < nv; i++)
            if (v[i].ts_ms != v[w - 1].ts_ms)
                v[w++] = v[i];
        nv = w;
    }
    out->v = pd_arena_alloc(a, nv * sizeof *out->v);
    if (!out->v) {
        rc = PD_ENOMEM;
        goto out;
    }
    memcpy(out->v, v, nv * sizeof *v);
    out->n = nv;
out:
    free(copied);
    free(v);
    for (size_t k = 0; k < n_brs; k++)
        hb_put(brs[k].hb);
    free(brs);
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

/* Appends the body of the WAL record of pt (series ref at ts_ms) to raw:
 * the producer's bytes. PD_ENOTFOUND when its segment is gone (checkpointed
 * meanwhile), PD_ECORRUPT (err: file and offset), -errno, PD_ENOMEM. */
static int wal_body(pd_storage *s, uint64_t ref, int64_t ts_ms, const point *pt, pd_buf *raw,
                    pd_err *err)
{
    pd_buf rec;
    pd_buf_init(&rec, (size_t)PD_WAL_MAX_RECORD + 1);
    int rc = pd__wal_read(s->wal, pt->seg, pt->off, PD_WAL_REC_PROFILE, pt->len, &rec, err);
    if (rc < 0)
        goto out;
    char name[4200];
    seg_name(s, pt->seg, name, sizeof name);
    /* the record passed its CRC; still check it is the one the index means */
    profile_rec pr;
    const char *why = NULL;
    rc = pd__profile_rec_parse((const uint8_t *)rec.data, rec.len, &pr, &why);
    if (rc == PD_ECORRUPT ||
        (rc == 0 && (pr.ref != ref || pr.ts != ts_ms || pr.body_off != pt->body_off ||
                     pr.body_len != pt->body_len))) {
        if (rc == 0)
            pd__profile_rec_release(&pr);
        rc = pd_err_set(err, PD_ECORRUPT, "%s offset %llu: %s", name, (unsigned long long)pt->off,
                        why ? why : "record is not the indexed profile");
        goto out;
    }
    if (rc < 0) {
        pd_err_set(err, rc, "read profile: out of memory");
        goto out;
    }
    pd__profile_rec_release(&pr);
    if ((rc = pd_buf_append(raw, (const uint8_t *)rec.data + pt->body_off, pt->body_len)) < 0)
        pd_err_set(err, rc, "read profile: no room for the %u-byte body", pt->body_len);
out:
    pd_buf_release(&rec);
    return rc;
}

/* The profile of WAL-only head point pt of series ref, decoded from its
 * record into out (and its body appended to raw if not NULL). Errors as
 * wal_body, and PD_ECORRUPT when the body does not decode (err: file,
 * offset). */
static int wal_profile(pd_storage *s, uint64_t ref, const point *pt, pd_profile *out,
                       pd_buf *raw, pd_err *err)
{
    memset(out, 0, sizeof *out);
    pd_buf body;
    pd_buf_init(&body, 0);
    int rc = wal_body(s, ref, pt->ts, pt, &body, err);
    if (rc == 0) {
        pd_err derr;
        pd_err_clear(&derr);
        rc = pd_profile_decode(out, (const uint8_t *)body.data, body.len, &s->limits, &derr);
        if (rc < 0) {
            memset(out, 0, sizeof *out);
            if (rc == PD_EPARSE || rc == PD_EINVAL)
                rc = PD_ECORRUPT;
            char name[4200];
            seg_name(s, pt->seg, name, sizeof name);
            pd_err_set(err, rc, "%s offset %llu: stored profile does not decode: %s", name,
                       (unsigned long long)pt->off, derr.msg);
        } else if (raw && (rc = pd_buf_append(raw, body.data, body.len)) < 0) {
            pd_profile_release(out);
            memset(out, 0, sizeof *out);
            pd_err_set(err, rc, "read profile: out of memory");
        }
    }
    pd_buf_release(&body);
    return rc;
}

/* raw for a profile read into out: the producer's bytes from the WAL while
 * its record exists (pt != NULL), else out re-encoded. */
static int read_raw(pd_storage *s, uint64_t ref, int64_t ts_ms, const point *pt,
                    const pd_profile *out, pd_buf *raw, pd_err *err)
{
    size_t len0 = raw->len;
    if (pt) {
        pd_err e;
        pd_err_clear(&e);
        int rc = wal_body(s, ref, ts_ms, pt, raw, &e);
        if (rc == 0)
            return 0;
        raw->len = len0;
        if (rc != PD_ENOTFOUND) { /* the record is damaged: the profile itself is not */
            pd_log_warn("storage: cannot read a profile's original bytes; re-encoding it",
                        "err=\"%s\"", e.msg);
            pd_metrics_add("profd_storage_corruptions_total", NULL, 1);
        }
    }
    int rc = pd_profile_encode(out, true, raw);
    if (rc < 0) {
        raw->len = len0;
        return pd_err_set(err, rc, "read profile: cannot re-encode the profile");
    }
    return 0;
}

#define RETRY_READ (-99999) /* read_profile_once: a WAL-only point's segment vanished */

/* One lookup and read for pd_storage_read_profile. */
static int read_profile_once(pd_storage *s, uint64_t ref, int64_t ts_ms, pd_profile *out,
                             pd_buf *raw, pd_err *err)
{
    memset(out, 0, sizeof *out);
    pthread_rwlock_rdlock(&s->idx);
    series *se = find_by_ref(s, ref);
    point pt, cpt;
    bool in_head = false, has_cpt = false;
    bref brs[8];
    size_t n_brs = 0;
    int rc = PD_ENOTFOUND;
    if (se) {
        size_t i = lower_bound(se, ts_ms);
        if (i < se->n_pts && se->pts[i].ts == ts_ms) {
            pt = se->pts[i];
            in_head = true;
            /* decoded from the head's groups, under the read lock (a replayed
               point not decomposed yet is read from the WAL below) */
            if (pt.gid != WAL_ONLY)
                rc = pd__hmem_read(&se->hc, pt.gid, pt.gpos, ts_ms, out, err);
        }
        /* moved into a block, but its WAL record is still there: raw can be
           the producer's bytes */
        size_t lo = 0, hi = se->n_cpts;
        while (!in_head && raw && lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (se->cpts[mid].ts < ts_ms)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (!in_head && raw && lo < se->n_cpts && se->cpts[lo].ts == ts_ms) {
            cpt = se->cpts[lo];
            has_cpt = true;
        }
        for (size_t k = 0; !in_head && k < se->n_brefs && n_brs < 8; k++)
            if (se->brefs[k].mint <= ts_ms && ts_ms <= se->brefs[k].maxt) {
                hb_get(se->brefs[k].hb);
                brs[n_brs++] = se->brefs[k];
            }
    }
    pthread_rwlock_unlock(&s->idx);
    if (!se)
        return pd_err_set(err, PD_ENOTFOUND, "no series with ref %llu", (unsigned long long)ref);
    if (in_head && pt.gid == WAL_ONLY) {
        /* a head cut may have moved it into a block and removed its segment
           since the lookup: look again */
        int wrc = wal_profile(s, ref, &pt, out, raw, err);
        return wrc == PD_ENOTFOUND ? RETRY_READ : wrc;
    }
    if (in_head) {
        if (rc < 0) {
            memset(out, 0, sizeof *out);
            return rc;
        }
        if (raw && (rc = read_raw(s, ref, ts_ms, &pt, out, raw, err)) < 0) {
            pd_profile_release(out);
            memset(out, 0, sizeof *out);
        }
        return rc;
    }
    for (size_t k = 0; k < n_brs && rc == PD_ENOTFOUND; k++) {
        rc = pd__block_read_profile(brs[k].hb->b, brs[k].id, ts_ms, out, err);
        if (rc < 0 && rc != PD_ENOTFOUND)
            memset(out, 0, sizeof *out);
        if (rc == PD_ECORRUPT)
            hb_damaged(brs[k].hb, brs[k].id, err);
    }
    for (size_t k = 0; k < n_brs; k++)
        hb_put(brs[k].hb);
    if (rc == PD_ENOTFOUND)
        return pd_err_set(err, PD_ENOTFOUND, "series %llu has no profile at %lld ms",
                          (unsigned long long)ref, (long long)ts_ms);
    if (rc == 0 && raw && (rc = read_raw(s, ref, ts_ms, has_cpt ? &cpt : NULL, out, raw, err)) < 0) {
        pd_profile_release(out);
        memset(out, 0, sizeof *out);
    }
    return rc;
}

int pd_storage_read_profile(pd_storage *s, uint64_t ref, int64_t ts_ms, pd_profile *out,
                            pd_buf *raw, pd_err *err)
{
    size_t len0 = raw ? raw->len : 0;
    int rc = read_profile_once(s, ref, ts_ms, out, raw, err);
    if (rc == RETRY_READ) {
        if (raw)
            raw->len = len0;
        rc = read_profile_once(s, ref, ts_ms, out, raw, err);
        if (rc == RETRY_READ)
            rc = pd_err_set(err, PD_ENOTFOUND, "series %llu: the profile at %lld ms moved twice",
                            (unsigned long long)ref, (long long)ts_ms);
    }
    return rc;
}

void pd_storage_stats_get(pd_storage *s, pd_storage_stats *out)
{
    memset(out, 0, sizeof *out);
    pthread_rwlock_rdlock(&s->idx);
    out->n_series = s->n_series;
    out->n_profiles = s->n_profiles + blocks_profiles(s);
    bool any = false;
    for (size_t i = 0; i < s->n_blocks; i++) {
        const pd_block_meta *m = pd__block_meta(s->blocks[i]->b);
        if (!m->n_profiles)
            continue;
        if (!any || m->min_t < out->min_ts)
            out->min_ts = m->min_t;
        if (!any || m->max_t > out->max_ts)
            out->max_ts = m->max_t;
        any = true;
    }
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
    out->bytes_on_disk = pd__wal_bytes(s->wal) + blocks_bytes(s);
    out->n_blocks = s->n_blocks;
    out->n_head_profiles = s->n_profiles;
    out->n_cuts = __atomic_load_n(&s->n_cuts, __ATOMIC_RELAXED);
    out->n_compactions = __atomic_load_n(&s->n_compactions, __ATOMIC_RELAXED);
    out->n_retention_deletes = __atomic_load_n(&s->n_ret_deletes, __ATOMIC_RELAXED);
    pthread_rwlock_unlock(&s->idx);
}
