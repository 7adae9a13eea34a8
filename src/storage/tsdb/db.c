/*
 * storage/tsdb/db.c — the embedded store of storage.h as a whole (as
 * Prometheus' tsdb/db.go): open and close, the set of blocks, the
 * maintenance thread and its rounds, time bounds, stats. The WAL (wal.c)
 * makes recent profiles durable; the "head" (head.c) holds them in memory,
 * decomposed as in blocks (headmem.c: a symbol table and per-series value
 * groups encoded by chunks.c, so head and block reads decode the same
 * structures), and is rebuilt from the WAL on open (replay.c); older data
 * lives in immutable blocks (block.c) cut from the head (compact.c) or
 * written by `profd tsdb import`, compacted (compact.c) and deleted by
 * retention (retention.c). Reads (querier.c) merge head and blocks. The
 * types shared by these files are in db_int.h.
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
 *
 * Blocks of the store: see hblock in db_int.h (reference counts: a block
 * removed by compaction or retention is closed by its last reader).
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
#include "storage/tsdb/blockagg_int.h"
#include "storage/tsdb/head_int.h"
#include "storage/tsdb/headmem_int.h"
#include "storage/tsdb/headsnap_int.h"
#include "storage/tsdb/postings_int.h"
#include "storage/tsdb/wal_int.h"
#include "storage/tsdb/warnings_int.h"
#include "storage/tsdb/db_int.h"

static uint64_t blocks_profiles(const pd_tsdb *s);
static uint64_t blocks_bytes(const pd_tsdb *s);

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

/* The window of accepted profile times (pd_tsdb_append): with retention r
 * > 0, ts >= now - r; with grace g > 0, ts <= now + g. */
int pd__tsdb_check_time(int64_t retention_ms, int64_t grace_ms, int64_t now, int64_t ts,
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

int pd_tsdb_check_time(pd_tsdb *s, int64_t ts_ms, pd_err *err)
{
    return pd__tsdb_check_time(s->retention_ms, s->grace_ms, s->clock(), ts_ms, err);
}

int pd_storage_options_check_time(const pd_storage_options *o, int64_t now_ms, int64_t ts_ms,
                                  pd_err *err)
{
    int64_t r = o->retention_ms ? o->retention_ms : 15ll * 24 * 3600 * 1000;
    int64_t g = o->future_grace_ms ? o->future_grace_ms : 10 * 60 * 1000;
    return pd__tsdb_check_time(r, g, now_ms, ts_ms, err);
}

/* ---- open / close ---- */

void pd__tsdb_update_gauges(pd_tsdb *s)
{
    pd_metrics_set("profd_storage_series", NULL, (double)s->n_series);
    pd_metrics_set("profd_storage_blocks", NULL, (double)s->n_blocks);
    pd_metrics_set("profd_storage_profiles", NULL, (double)(s->n_profiles + blocks_profiles(s)));
    pd_metrics_set("profd_storage_bytes", NULL, (double)(pd__wal_bytes(s->wal) + blocks_bytes(s)));
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
static void rm_tree(const char *path)
{
    nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
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

/* ---- blocks ---- */

int64_t pd__tsdb_now_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t blocks_profiles(const pd_tsdb *s)
{
    uint64_t n = 0;
    for (size_t i = 0; i < s->n_blocks; i++)
        n += pd__block_meta(s->blocks[i]->b)->n_profiles;
    return n;
}

uint64_t pd__tsdb_hb_bytes(const hblock *hb)
{
    const pd_block_meta *m = pd__block_meta(hb->b);
    return m->meta_bytes + m->index_bytes + m->symbols_bytes + m->chunks_bytes +
           __atomic_load_n(&hb->agg_bytes, __ATOMIC_RELAXED);
}

void pd__tsdb_hb_stat_agg(hblock *hb)
{
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", pd__block_dir(hb->b), PD_BAGG_FILE);
    uint64_t n = stat(path, &st) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
    __atomic_store_n(&hb->agg_bytes, n, __ATOMIC_RELAXED);
}

static uint64_t blocks_bytes(const pd_tsdb *s)
{
    uint64_t n = 0;
    for (size_t i = 0; i < s->n_blocks; i++)
        n += pd__tsdb_hb_bytes(s->blocks[i]);
    return n;
}

void pd__tsdb_hb_get(hblock *hb)
{
    __atomic_add_fetch(&hb->refs, 1, __ATOMIC_ACQ_REL);
}

void pd__tsdb_hb_put(hblock *hb)
{
    if (hb && __atomic_sub_fetch(&hb->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        if (hb->why)
            for (size_t i = 0; i < pd__block_n_series(hb->b); i++)
                free(hb->why[i]);
        pd__block_close(hb->b);
        pd__bagg_free(hb->agg);
        free(hb->bad);
        free(hb->why);
        free(hb);
    }
}

/* Whether series id of hb is known damaged. */
bool pd__tsdb_hb_bad(const hblock *hb, uint32_t id)
{
    return __atomic_load_n(&hb->bad[id], __ATOMIC_ACQUIRE) != 0;
}

/* A read of series id of hb failed with PD_ECORRUPT (e: file and offset):
 * the first time, logged and counted in profd_storage_corruptions_total;
 * every time, a warning for the calling thread's answer (storage.h). From
 * then on select and read_points skip this block part. A profile lost to a
 * damaged symbols frame (PD_BLOCK_LOST_PROFILE in e; block_int.h) gives the
 * warning only: the part's other profiles still read. */
void pd__tsdb_hb_damaged(hblock *hb, uint32_t id, const pd_err *e)
{
    const char *ulid = pd__block_meta(hb->b)->ulid;
    const char *msg = e && e->msg[0] ? e->msg : "damaged";
    if (strstr(msg, PD_BLOCK_LOST_PROFILE)) {
        /* one profile lost to a damaged symbols frame (logged and counted when
           the block opened): the series' other profiles there still read */
        pd__storage_warn("block %s: %s; that profile is left out", ulid, msg);
        return;
    }
    if (!__atomic_exchange_n(&hb->bad[id], 2, __ATOMIC_ACQ_REL)) {
        hb->why[id] = strdup(msg); /* NULL: the generic warning below */
        __atomic_store_n(&hb->bad[id], 1, __ATOMIC_RELEASE);
        pd_buf lb;
        pd_buf_init(&lb, 1024);
        pd_labels_format(pd__block_series_labels(hb->b, id), &lb);
        pd_log_error("storage: damaged block series skipped", "block=%s series=%s err=\"%s\"", ulid,
                     lb.data ? lb.data : "", msg);
        pd_buf_release(&lb);
        pd_metrics_add("profd_storage_corruptions_total", NULL, 1);
    }
    pd__storage_warn("block %s: %s; its series' profiles there are left out", ulid, msg);
}

/* The warning for a block part already known damaged. */
void pd__tsdb_hb_warn_known(const hblock *hb, uint32_t id, uint64_t ref)
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
void pd__tsdb_hb_read_failed(hblock *hb, uint32_t id, int rc, const pd_err *e)
{
    if (rc == PD_ECORRUPT) {
        pd__tsdb_hb_damaged(hb, id, e);
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
int pd__tsdb_add_block(pd_tsdb *s, pd_block *b, bool *added)
{
    hblock *hb = calloc(1, sizeof *hb);
    if (!hb) {
        pd__block_close(b);
        return PD_ENOMEM;
    }
    hb->b = b;
    hb->refs = 1;
    pd__tsdb_hb_stat_agg(hb);
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
            pd__tsdb_hb_put(hb);
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
        series *se = pd__tsdb_find_by_labels(s, ls, hash);
        if (!se) {
            if (s->next_ref == UINT64_MAX)
                return PD_ENOMEM;
            se = calloc(1, sizeof *se);
            if (!se || pd__tsdb_reserve_series(s) < 0 || pd_labels_copy(&se->labels, ls) < 0) {
                pd__tsdb_series_free(s, se);
                return PD_ENOMEM;
            }
            se->ref = s->next_ref;
            se->hash = hash;
            pd__tsdb_insert_series(s, se);
            *added = true;
        }
        if (add_bref(se, hb, id) < 0)
            return PD_ENOMEM;
    }
    return 0;
}

/* Takes hb out of the store: out of s->blocks and every series' brefs. The
 * store's reference passes to the caller (pd__tsdb_hb_put it). Under app_mu + the idx
 * write lock (or during open). */
void pd__tsdb_unlink_block(pd_tsdb *s, hblock *hb)
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

void pd__tsdb_remove_block_dir(const char *dir)
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
        pd__tsdb_fsync_path(tmp);
        *slash = '/';
    }
    rm_tree(tmp);
}

/* Whether a block holds a profile of se at ts. I/O; call with app_mu held
 * (brefs only change under it) or under the idx lock. Errors of the block
 * read are logged and count as "not there". */
bool pd__tsdb_blocks_have(const series *se, int64_t ts)
{
    for (size_t i = 0; i < se->n_brefs; i++) {
        const bref *r = &se->brefs[i];
        if (ts < r->mint || ts > r->maxt)
            continue;
        pd_points pts;
        pd_err e;
        pd_err_clear(&e);
        if (pd__tsdb_hb_bad(r->hb, r->id))
            continue;
        int rc = pd__block_read_points(r->hb->b, r->id, ts, ts, &pts, &e);
        if (rc < 0) {
            pd__tsdb_hb_read_failed(r->hb, r->id, rc, &e);
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
void pd__tsdb_prune_stash(series *se, uint32_t keep)
{
    size_t w = 0;
    for (size_t i = 0; i < se->n_cpts; i++)
        if (se->cpts[i].seg >= keep)
            se->cpts[w++] = se->cpts[i];
    se->n_cpts = w;
}

/* Removes the points of se whose ts is in the ascending list ts[0..n).
 * Returns how many. Under the idx write lock (or during open). */
size_t pd__tsdb_drop_points(pd_tsdb *s, series *se, const int64_t *ts, size_t n)
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
static int dedupe_head(pd_tsdb *s)
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
            size_t d = pd__tsdb_drop_points(s, se, ts, pts.n);
            s->hr_valid = false;
            free(ts);
            pd_points_release(&pts);
            dropped += d;
            s->n_profiles -= d;
        }
    }
    if (dropped)
        pd_log_info("storage: wal profiles already in blocks dropped from the head", "profiles=%zu",
                    dropped);
    return 0;
}

/* ---- series checkpoint (PATH/series) ---- */

int pd__tsdb_write_full_fd(int fd, const uint8_t *p, size_t n)
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

int pd__tsdb_fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
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
int pd__tsdb_load_blocks(pd_tsdb *s, bool *added, pd_err *err)
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
            pd_log_error("storage: skipping a block that does not open", "dir=%s err=\"%s\"", dir,
                         e.msg[0] ? e.msg : pd_strerror(brc));
            pd_metrics_add("profd_storage_corruptions_total", NULL, 1);
            continue;
        }
        if (pd__block_damage(b)) { /* served from its other files */
            pd_log_error("storage: block meta.json damaged; rebuilt from its other files "
                         "(`profd tsdb repair` rewrites it)",
                         "dir=%s err=\"%s\"", dir, pd__block_damage(b));
            pd_metrics_add("profd_storage_corruptions_total", NULL, 1);
        }
        if (pd__block_section_damage(b)) { /* format 2: served minus what is lost */
            pd_log_error("storage: block index or symbols damaged; serving what verifies "
                         "(`profd tsdb repair` rewrites it)",
                         "dir=%s err=\"%s\"", dir, pd__block_section_damage(b));
            pd_metrics_add("profd_storage_corruptions_total", NULL, 1);
            /* a compaction would carry only what verifies and delete the rest:
               leave the block out of plans (`profd tsdb repair` rewrites it) */
            pd_err me;
            pd_err_clear(&me);
            if (!pd__block_meta(b)->compaction_failed && pd__block_mark_failed(b, &me) < 0)
                pd_log_warn("storage: cannot mark a damaged block failed", "err=\"%s\"", me.msg);
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
            pd__tsdb_remove_block_dir(pd__block_dir(opened[i]));
        }
        if (replaced || rc < 0) {
            pd__block_close(opened[i]);
            continue;
        }
        int brc = pd__tsdb_add_block(s, opened[i], added);
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

int pd_tsdb_maintain(pd_tsdb *s, pd_err *err)
{
    pd_err_clear(err);
    int rc = 0;
    pthread_mutex_lock(&s->maint_mu);
    pd__tsdb_maybe_cut(s, false);
    for (int round = 0; round < 64 && pd__tsdb_now_mono_ms() >= s->compact_retry_after; round++) {
        int64_t newest = 0;
        hblock **v;
        size_t n, first, count;
        if (!pd__tsdb_newest_ts(s, &newest))
            break;
        if ((rc = pd__tsdb_snapshot_blocks(s, &v, &n)) < 0) {
            pd_err_set(err, rc, "compaction: out of memory");
            break;
        }
        qsort(v, n, sizeof *v, pd__tsdb_cmp_hb_mint);
        /* blocks a compaction could not read are left out of the plans */
        size_t nok = 0;
        for (size_t i = 0; i < n; i++)
            if (!pd__block_meta(v[i]->b)->compaction_failed)
                v[nok++] = v[i];
            else
                pd__tsdb_hb_put(v[i]);
        n = nok;
        bool due = pd__tsdb_plan_compaction(s, v, n, newest, &first, &count);
        if (due && s->retention_bytes) {
            /* the result is written beside its sources: only when both fit
               under --storage.retention.size (issue 27: the store's bound) */
            uint64_t src = 0;
            for (size_t i = first; i < first + count; i++)
                src += pd__tsdb_hb_bytes(v[i]);
            pd_storage_stats st;
            pd_tsdb_stats_get(s, &st);
            due = st.bytes_on_disk + src <= s->retention_bytes;
        }
        size_t bad = count;
        if (due && (rc = pd__tsdb_compact_blocks(s, v + first, count, &bad, err)) < 0) {
            if (bad < count) {
                /* as Prometheus: mark the source failed and plan around it */
                pd_block *fb = v[first + bad]->b;
                pd_err me;
                pd_err_clear(&me);
                int mrc = pd__block_mark_failed(fb, &me);
                pd_log_error("storage: compaction cannot read a block; marked failed "
                             "(compaction.failed in its meta.json), left out of later "
                             "compactions, still served for what reads",
                             "block=%s err=\"%s\" persisted=%s", pd__block_meta(fb)->ulid, err->msg,
                             mrc < 0 ? me.msg : "yes");
                pd_metrics_add("profd_storage_corruptions_total", NULL, 1);
                pd_metrics_add("profd_storage_compactions_failed_total", NULL, 1);
                rc = 0; /* the next round plans without it */
                pd_err_clear(err);
            } else {
                pd_log_error("storage: compaction failed; its sources are kept, retrying in "
                             "5 min",
                             "err=\"%s\"", err->msg);
                pd_metrics_add("profd_storage_compactions_failed_total", NULL, 1);
                s->compact_retry_after = pd__tsdb_now_mono_ms() + 5 * 60 * 1000;
            }
        }
        pd__tsdb_put_blocks(v, n);
        if (due && rc == 0) { /* the gauges follow each compaction, not each round */
            pthread_mutex_lock(&s->app_mu);
            pd__tsdb_update_gauges(s);
            pthread_mutex_unlock(&s->app_mu);
        }
        if (!due || rc < 0)
            break;
    }
    pd__tsdb_apply_retention(s);
    /* replayed profiles: after the cut (which reads those it takes from the
       WAL), in slices of 2 s so that a due cut is not held up long */
    bool more = pd__tsdb_decompose_replayed(s, 2000);
    /* blocks' aggregates (blockagg.c): loaded, or built once per new block */
    uint64_t built = __atomic_load_n(&s->n_agg_built, __ATOMIC_RELAXED);
    more |= pd__bagg_maintain(s, 2000);
    /* a new aggregates file counts under --storage.retention.size like the
       block's own files: the bound holds again once it is written */
    if (s->retention_bytes && __atomic_load_n(&s->n_agg_built, __ATOMIC_RELAXED) != built)
        pd__tsdb_apply_retention(s);
    pthread_mutex_lock(&s->app_mu);
    pd__tsdb_update_gauges(s);
    pthread_mutex_unlock(&s->app_mu);
    pthread_mutex_unlock(&s->maint_mu);
    if (more && s->maint_running)
        pd__tsdb_kick_maintenance(s);
    return rc;
}

/* Wakes the maintenance thread for a round now (a head cut is due). */
void pd__tsdb_kick_maintenance(pd_tsdb *s)
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
    pd_tsdb *s = arg;
    pthread_mutex_lock(&s->stop_mu);
    while (!s->stopping) {
        if (s->kicked) {
            s->kicked = false;
            pthread_mutex_unlock(&s->stop_mu);
            pd_err e;
            pd_tsdb_maintain(s, &e);
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
        pd_tsdb_maintain(s, &e);
        pthread_mutex_lock(&s->stop_mu);
    }
    pthread_mutex_unlock(&s->stop_mu);
    return NULL;
}

int pd__tsdb_lock_store(const char *dir, int *fd_out, pd_err *err)
{
    char lockname[4096];
    *fd_out = -1;
    if (snprintf(lockname, sizeof lockname, "%s/lock", dir) >= (int)sizeof lockname)
        return pd_err_set(err, PD_EINVAL, "storage path \"%s\" is too long", dir);
    int fd = open(lockname, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        int rc = -errno;
        return pd_err_set(err, rc, "open lock file %s: %s", lockname, strerror(-rc));
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int rc = -errno;
        close(fd);
        if (rc == -EWOULDBLOCK)
            return pd_err_set(err, PD_EEXIST,
                              "storage %s is in use by another process (lock file %s is held)", dir,
                              lockname);
        return pd_err_set(err, rc, "lock %s: %s", lockname, strerror(-rc));
    }
    *fd_out = fd;
    return 0;
}

int pd_tsdb_open(const pd_storage_options *opts, pd_tsdb **out, pd_err *err)
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
    pd_metrics_describe("profd_storage_wal_truncations_total", PD_METRIC_COUNTER,
                        "Times the newest WAL segment was found shorter than what was "
                        "fsync'd (PATH/wal/synced): acknowledged records lost to a "
                        "truncation, not a torn append.");
    pd_metrics_add("profd_storage_wal_truncations_total", NULL, 0);
    pd_metrics_describe("profd_storage_wal_bound_waits_total", PD_METRIC_COUNTER,
                        "Appends held because the WAL reached its bound under "
                        "--storage.retention.size (a quarter of the limit + one segment) "
                        "while a head cut ran: result=stored once the checkpoint freed it, "
                        "result=refused when it did not within 10 s (503, retry).");
    pd_metrics_add("profd_storage_wal_bound_waits_total", "result=\"stored\"", 0);
    pd_metrics_add("profd_storage_wal_bound_waits_total", "result=\"refused\"", 0);
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
    pd_metrics_describe("profd_storage_head_snapshot_loads_total", PD_METRIC_COUNTER,
                        "Head snapshots (PATH/head.snapshot, written at a clean stop) met at "
                        "open: result=loaded (its profiles need no WAL read), damaged or stale "
                        "(ignored and removed; the head is rebuilt from the WAL).");
    pd_metrics_add("profd_storage_head_snapshot_loads_total", "result=\"loaded\"", 0);
    pd_metrics_add("profd_storage_head_snapshot_loads_total", "result=\"damaged\"", 0);
    pd_metrics_add("profd_storage_head_snapshot_loads_total", "result=\"stale\"", 0);
    pd_metrics_describe("profd_storage_head_snapshot_writes_total", PD_METRIC_COUNTER,
                        "Head snapshots written at a clean stop: result=written or failed "
                        "(logged; the next start rebuilds the head from the WAL).");
    pd_metrics_add("profd_storage_head_snapshot_writes_total", "result=\"written\"", 0);
    pd_metrics_add("profd_storage_head_snapshot_writes_total", "result=\"failed\"", 0);
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
    if (strlen(path) + sizeof "/lock" > 4096 ||
        snprintf(s_waldir, sizeof s_waldir, "%s/wal", path) >= (int)sizeof s_waldir)
        return pd_err_set(err, PD_EINVAL, "storage path \"%s\" is too long", path);
    int rc;
    pd_headsnap *snap = NULL;
    pd_tsdb *s = calloc(1, sizeof *s);
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
        pthread_rwlock_init(&s->cut_rw, &ra); /* a cut is not starved by merges */
        pthread_rwlockattr_destroy(&ra);
    }
    pthread_mutex_init(&s->maint_mu, NULL);
    pthread_mutex_init(&s->stop_mu, NULL);
    pthread_cond_init(&s->stop_cv, NULL);
    {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&s->wal_cv, &ca);
        pthread_condattr_destroy(&ca);
    }
    s->retention_ms = opts->retention_ms ? opts->retention_ms : 15ll * 24 * 3600 * 1000;
    s->grace_ms = opts->future_grace_ms ? opts->future_grace_ms : 10 * 60 * 1000;
    s->clock = opts->clock_ms ? opts->clock_ms : pd_now_ms;
    s->agg_slice_ns = opts->aggregate_slice_ns > 0 ? opts->aggregate_slice_ns : HEAD_SLICE_NS;
    s->agg_workers = pd_storage_aggregate_workers(opts->aggregate_workers);
    s->retention_bytes = opts->retention_bytes;
    s->maint_ms = opts->maintenance_ms ? opts->maintenance_ms : 60 * 1000;
    if (!(s->path = strdup(path)) || pd__hmem_init(&s->hm) < 0) {
        rc = pd_err_set(err, PD_ENOMEM, "open storage %s: out of memory", path);
        goto fail;
    }
    if ((rc = mkdirs(path, err)) < 0)
        goto fail;
    if ((rc = pd__tsdb_lock_store(path, &s->lock_fd, err)) < 0)
        goto fail;
    if (mkdir(s->waldir, 0755) < 0 && errno != EEXIST) {
        rc = -errno;
        pd_err_set(err, rc, "create wal directory %s: %s", s->waldir, strerror(-rc));
        goto fail;
    }
    size_t seg_bytes = opts->segment_bytes ? opts->segment_bytes : 32u << 20;
    if (s->retention_bytes) {
        /* the size limit covers the WAL (issue 27): the head is cut once the
           WAL passes a quarter of the limit, and segments of at most an
           eighth (64 KiB at least) let the checkpoint free them */
        uint64_t cap = s->retention_bytes / 8 > (64u << 10) ? s->retention_bytes / 8 : 64u << 10;
        if (seg_bytes > cap)
            seg_bytes = (size_t)cap;
        s->wal_budget = s->retention_bytes / 4 > 2 * (uint64_t)seg_bytes ? s->retention_bytes / 4
                                                                         : 2 * (uint64_t)seg_bytes;
        s->wal_hard = s->wal_budget + seg_bytes;
    }
    pd_wal_options wo = {
        .dir = s->waldir,
        .segment_bytes = seg_bytes,
        .fsync = opts->fsync,
        .batch_ms = opts->fsync_batch_ms > 0 ? opts->fsync_batch_ms : 1000,
    };
    if ((rc = pd__tsdb_read_series_file(s)) < 0) {
        pd_err_set(err, rc, "read %s/series: %s", path, pd_strerror(rc));
        goto fail;
    }
    /* the head snapshot of the last clean close (headsnap.c): checked
       against the WAL before the WAL's open may roll or cut it */
    s->snapshot = !opts->no_head_snapshot;
    if (s->snapshot)
        pd__headsnap_read(s, &snap);
    if ((rc = pd__wal_open(&wo, pd__tsdb_replay_fn, s, &s->wal, err)) < 0)
        goto fail;
    if ((rc = pd__tsdb_replay_orphans(s)) < 0) {
        pd_err_set(err, rc, "open storage %s: out of memory", path);
        goto fail;
    }
    bool added = false;
    if ((rc = pd__tsdb_load_blocks(s, &added, err)) < 0)
        goto fail;
    if ((rc = dedupe_head(s)) < 0) {
        pd_err_set(err, rc, "open storage %s: out of memory", path);
        goto fail;
    }
    pd__headsnap_apply(s, snap); /* what it covers is not WAL-only any more */
    snap = NULL;
    if (added) {
        pd_err e;
        pd_err_clear(&e);
        if (pd__tsdb_write_series_file(s, s->series_first_seg, &e) <
            0) /* refs hold for this run anyway */
            pd_log_warn("storage: cannot persist the refs of block series", "err=\"%s\"", e.msg);
    }
    /* A head cut due at open (the WAL spans more than 1.5 block durations,
       e.g. after a crash during a cut) runs on the maintenance thread, so the
       open returns as soon as the WAL is indexed: a busy head's cut takes
       minutes (issue 19, "offline while it starts"). Without the thread,
       here. */
    if (s->maint_ms <= 0)
        pd__tsdb_maybe_cut(s, true);
    pd__tsdb_update_gauges(s);
    /* /-/ready: at once when nothing is WAL-only (a clean close's snapshot
       covered the head) or nothing would decompose it; else once the
       maintenance thread has (pd__tsdb_decompose_replayed). Before the
       thread starts: it changes n_wal_only under app_mu. */
    if (!s->n_wal_only || s->maint_ms <= 0)
        __atomic_store_n(&s->head_ready, true, __ATOMIC_RELEASE);
    if (s->maint_ms > 0) {
        if ((rc = pthread_create(&s->maint_thread, NULL, maint_main, s)) != 0) {
            rc = pd_err_set(err, -rc, "open storage %s: cannot start the maintenance thread", path);
            goto fail;
        }
        s->maint_running = true;
        int64_t cut_from;
        pthread_mutex_lock(&s->app_mu);
        bool due = pd__tsdb_cut_due(s, &cut_from);
        pthread_mutex_unlock(&s->app_mu);
        if (s->n_wal_only || due || s->n_blocks)
            pd__tsdb_kick_maintenance(s); /* cut, then decompose the replayed profiles and
                                             load the blocks' aggregates, now */
    }
    s->opened = true;
    pd_log_info("storage opened",
                "path=%s series=%zu profiles=%llu blocks=%zu segments=%zu bytes=%llu", path,
                s->n_series, (unsigned long long)(s->n_profiles + blocks_profiles(s)), s->n_blocks,
                pd__wal_segments(s->wal), (unsigned long long)pd__wal_bytes(s->wal));
    *out = s;
    return 0;
fail:
    pd__headsnap_free(snap);
    free(s->orphans); /* a replay that failed */
    s->orphans = NULL;
    pd_tsdb_close(s);
    return rc;
}

void pd_tsdb_close(pd_tsdb *s)
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
    s->wal = NULL;
    /* a clean close: the head's decomposed state for the next open (the WAL,
       closed above, still has everything; headsnap.c) */
    if (s->opened && s->snapshot)
        pd__headsnap_write(s);
    for (size_t i = 0; i < s->n_series; i++)
        pd__tsdb_series_free(s, s->by_ref[i]);
    free(s->by_ref);
    free(s->buckets);
    pd__hmem_release(&s->hm);
    pd__postings_release(&s->post);
    for (size_t i = 0; i < s->n_blocks; i++)
        pd__tsdb_hb_put(s->blocks[i]);
    free(s->blocks);
    if (s->lock_fd >= 0)
        close(s->lock_fd); /* releases the flock */
    free(s->path);
    pthread_rwlock_destroy(&s->idx);
    pthread_rwlock_destroy(&s->cut_rw);
    pthread_mutex_destroy(&s->app_mu);
    pthread_mutex_destroy(&s->maint_mu);
    pthread_mutex_destroy(&s->stop_mu);
    pthread_cond_destroy(&s->stop_cv);
    pthread_cond_destroy(&s->wal_cv);
    free(s);
}

void pd_tsdb_stats_get(pd_tsdb *s, pd_storage_stats *out)
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
    out->n_aggregate_slices = __atomic_load_n(&s->n_agg_slices, __ATOMIC_RELAXED);
    out->n_aggregate_parallel = __atomic_load_n(&s->n_agg_parallel, __ATOMIC_RELAXED);
    out->n_aggregates_built = __atomic_load_n(&s->n_agg_built, __ATOMIC_RELAXED);
    out->n_aggregate_records = __atomic_load_n(&s->n_agg_records, __ATOMIC_RELAXED);
    out->n_aggregate_head_groups = __atomic_load_n(&s->n_agg_head_groups, __ATOMIC_RELAXED);
    out->n_aggregate_head_open = __atomic_load_n(&s->n_agg_head_open, __ATOMIC_RELAXED);
    out->n_retention_deletes = __atomic_load_n(&s->n_ret_deletes, __ATOMIC_RELAXED);
    pthread_rwlock_unlock(&s->idx);
}

bool pd_tsdb_ready(pd_tsdb *s)
{
    return __atomic_load_n(&s->head_ready, __ATOMIC_ACQUIRE);
}
