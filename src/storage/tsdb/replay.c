/*
 * storage/tsdb/replay.c — rebuilding the head at open (as Prometheus'
 * tsdb/head_wal.go): PATH/series (the series checkpoint) is read first,
 * then the WAL is replayed record by record, then the maintenance thread
 * decomposes the replayed profiles into the head. PATH/series is also
 * rewritten here at every checkpoint (compact.c, after a head cut).
 *
 * Sample-type sets are interned per series (a series' profiles nearly always
 * share one), totals live in a per-series pool. Replay only indexes the WAL
 * (a point's gid is WAL_ONLY: it is read from its record meanwhile); the
 * maintenance thread, kicked by the open, then decomposes those profiles
 * into the head in 2 s slices (decompose_replayed); a body that does not
 * decode is reported (file, offset), counted and dropped from the head then.
 * A head cut takes WAL-only points straight from the WAL.
 *
 * A torn or corrupt tail of the WAL is cut off by wal.c; a record whose
 * payload does not parse is reported (file, offset), counted in
 * profd_storage_corruptions_total and skipped.
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

/* ---- replay ---- */

/* Compresses se's sealed raw head groups (appenders only: app_mu held). The
 * raw encoding stays readable while zstd runs outside the idx lock; the swap
 * is under it. Without memory the group simply stays raw. */
void pd__tsdb_compress_sealed(pd_tsdb *s, series *se)
{
    pd_hgroup *gs[8];
    size_t n = pd__hchunks_raw_sealed(&se->hc, gs, 8);
    for (size_t i = 0; i < n; i++) {
        uint8_t *z;
        size_t zl;
        /* (its sum, the head's aggregates, is already there: each append
           folded its profile in, pd__hmem_prepare) */
        if (pd__hgroup_compress(gs[i], &z, &zl) < 0)
            continue;
        pthread_rwlock_wrlock(&s->idx);
        pd__hgroup_install(&s->hm, gs[i], z, zl);
        pthread_rwlock_unlock(&s->idx);
    }
}

/* "PATH/wal/NNNNNNNN" (usable during replay, before s->wal is set) */
void pd__tsdb_seg_name(const pd_tsdb *s, uint32_t seg, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%08u", s->waldir, seg);
}

static void replay_bad(pd_tsdb *s, uint32_t seg, uint64_t off, const char *why)
{
    char name[4200];
    if (s->replay_file)
        snprintf(name, sizeof name, "%s", s->replay_file);
    else
        pd__tsdb_seg_name(s, seg, name, sizeof name);
    pd_log_warn("storage: skipping a bad wal record", "file=%s offset=%llu reason=\"%s\"", name,
                (unsigned long long)off, why);
    pd_metrics_add("profd_storage_corruptions_total", NULL, 1);
    s->replay_corrupt++;
}

static int replay_series(pd_tsdb *s, uint32_t seg, uint64_t off, const uint8_t *p, uint32_t len)
{
    reader r = {.p = p, .len = len};
    uint64_t ref = pd__tsdb_rd_u64le(&r);
    uint64_t n = pd__tsdb_rd_varint(&r);
    if (r.bad || ref == 0 || ref == UINT64_MAX || n == 0 || n > PD_LABEL_MAX_COUNT) {
        replay_bad(s, seg, off, "malformed series record header");
        return 0;
    }
    pd_labels ls;
    pd_labels_init(&ls);
    int rc = 0;
    for (uint64_t i = 0; i < n; i++) {
        size_t nl, vl;
        const char *nm = pd__tsdb_rd_str(&r, &nl);
        const char *val = pd__tsdb_rd_str(&r, &vl);
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
    series *old = pd__tsdb_find_by_ref(s, ref);
    if (old) {
        if (pd_labels_cmp(&old->labels, &ls) != 0)
            replay_bad(s, seg, off, "series ref reused for other labels");
        else if (!s->replay_file)
            old->series_seg = seg;
        goto out;
    }
    if (pd__tsdb_find_by_labels(s, &ls, hash)) {
        replay_bad(s, seg, off, "series labels already have another ref");
        goto out;
    }
    series *se = calloc(1, sizeof *se);
    if (!se || pd__tsdb_reserve_series(s) < 0) {
        free(se);
        rc = PD_ENOMEM;
        goto out;
    }
    se->ref = ref;
    se->hash = hash;
    se->series_seg = s->replay_file ? 0 : seg;
    se->labels = ls;
    pd_labels_init(&ls);
    pd__tsdb_insert_series(s, se);
out:
    pd_labels_release(&ls);
    return rc;
}

static int replay_profile(pd_tsdb *s, uint32_t seg, uint64_t off, const uint8_t *p, uint32_t len)
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
    series *se = pd__tsdb_find_by_ref(s, pr.ref);
    if (!se && !s->replay_final) { /* its SERIES record may come later */
        if (s->n_orphans == s->cap_orphans) {
            size_t nc = s->cap_orphans ? 2 * s->cap_orphans : 64;
            struct orphan *no = realloc(s->orphans, nc * sizeof *no);
            if (!no) {
                rc = PD_ENOMEM;
                goto out;
            }
            s->orphans = no;
            s->cap_orphans = nc;
        }
        s->orphans[s->n_orphans++] = (struct orphan){.seg = seg, .len = len, .off = off};
        goto out;
    }
    if (!se) {
        replay_bad(s, seg, off, "profile of an unknown series ref");
        goto out;
    }
    if (pd__tsdb_has_ts(se, pr.ts)) {
        char name[4200];
        pd__tsdb_seg_name(s, seg, name, sizeof name);
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
    if ((rc = pd__tsdb_intern_tset(se, pr.k, pr.types, pr.tlen, pr.units, pr.ulen, &pt.tset)) < 0 ||
        (rc = pd__tsdb_reserve_point(se, pr.k)) < 0)
        goto out;
    /* indexed only: the maintenance thread decomposes it into the head
       afterwards (pd__tsdb_decompose_replayed), so opening costs a walk of the WAL,
       not a decode of every body */
    pt.gid = WAL_ONLY;
    se->n_wal_only++;
    s->n_wal_only++;
    pd__tsdb_insert_point(se, pt, pr.totals, pr.k);
    s->n_profiles++;
out:
    pd__profile_rec_release(&pr);
    return rc;
}

int pd__tsdb_replay_fn(void *ctx, uint32_t seg, uint64_t off, uint8_t type, const uint8_t *payload,
                       uint32_t len)
{
    pd_tsdb *s = ctx;
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

int pd__tsdb_replay_orphans(pd_tsdb *s)
{
    int rc = 0;
    pd_buf b;
    pd_buf_init(&b, (size_t)PD_WAL_MAX_RECORD + 1);
    s->replay_final = true;
    for (size_t i = 0; i < s->n_orphans && rc == 0; i++) {
        const struct orphan *o = &s->orphans[i];
        pd_err e;
        pd_err_clear(&e);
        pd_buf_reset(&b);
        int r = pd__wal_read(s->wal, o->seg, o->off, PD_WAL_REC_PROFILE, o->len, &b, &e);
        if (r == PD_ENOMEM)
            rc = r;
        else if (r < 0)
            replay_bad(s, o->seg, o->off, "profile record unreadable on a second read");
        else
            rc = replay_profile(s, o->seg, o->off, (const uint8_t *)b.data, o->len);
    }
    s->replay_final = false;
    free(s->orphans);
    s->orphans = NULL;
    s->n_orphans = s->cap_orphans = 0;
    pd_buf_release(&b);
    return rc;
}

/* Writes every series (ref, labels) to PATH/series: tmp file, fsync,
 * rename, fsync PATH. With app_mu held (or during open). */
int pd__tsdb_write_series_file(pd_tsdb *s, uint32_t first_seg, pd_err *err)
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
    if (rc == 0 && first_seg) { /* the first segment the WAL must still have */
        uint8_t f[4] = {(uint8_t)first_seg, (uint8_t)(first_seg >> 8), (uint8_t)(first_seg >> 16),
                        (uint8_t)(first_seg >> 24)};
        rc = pd__wal_frame(&out, PD_WAL_REC_CHECKPOINT, f, 4);
    }
    for (size_t i = 0; rc == 0 && i < s->n_series; i++) {
        const series *se = s->by_ref[i];
        pd_buf_reset(&payload);
        if ((rc = pd__tsdb_buf_put_u64le(&payload, se->ref)) < 0 ||
            (rc = pd_buf_put_varint(&payload, se->labels.n)) < 0)
            break;
        for (size_t j = 0; rc == 0 && j < se->labels.n; j++)
            if ((rc = pd__tsdb_buf_put_str(&payload, se->labels.v[j].name,
                                           strlen(se->labels.v[j].name))) == 0)
                rc = pd__tsdb_buf_put_str(&payload, se->labels.v[j].value,
                                          strlen(se->labels.v[j].value));
        if (rc == 0)
            rc = pd__wal_frame(&out, PD_WAL_REC_SERIES, (const uint8_t *)payload.data, payload.len);
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
    rc = pd__tsdb_write_full_fd(fd, (const uint8_t *)out.data, out.len);
    if (rc == 0 && fsync(fd) < 0)
        rc = -errno;
    close(fd);
    if (rc == 0 && rename(tmp, name) < 0)
        rc = -errno;
    if (rc == 0)
        rc = pd__tsdb_fsync_path(s->path);
    if (rc < 0) {
        pd_err_set(err, rc, "write %s: %s", name, strerror(-rc));
        unlink(tmp);
    } else
        s->series_first_seg = first_seg;
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

int pd__tsdb_read_series_file(pd_tsdb *s)
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
    if (size < PD_WAL_SEG_HDR) {
        replay_bad(s, 0, 0, "bad series file header");
        goto out;
    }
    size_t off = PD_WAL_SEG_HDR;
    if (memcmp(data, PD_WAL_MAGIC, 5) || data[5] < 1 || data[5] > PD_WAL_VERSION) {
        /* the records verify on their own (CRC each): a damaged header
           costs nothing more (issue 27) */
        replay_bad(s, 0, 0, "bad series file header; reading the records that verify");
    }
    while (off < size) {
        if (size - off < PD_WAL_REC_HDR) {
            replay_bad(s, 0, off, "short record header");
            break;
        }
        const uint8_t *h = data + off;
        uint32_t len =
            (uint32_t)h[1] | (uint32_t)h[2] << 8 | (uint32_t)h[3] << 16 | (uint32_t)h[4] << 24;
        uint32_t crc =
            (uint32_t)h[5] | (uint32_t)h[6] << 8 | (uint32_t)h[7] << 16 | (uint32_t)h[8] << 24;
        bool ckpt = off == PD_WAL_SEG_HDR && h[0] == PD_WAL_REC_CHECKPOINT && len == 4;
        if ((h[0] != PD_WAL_REC_SERIES && !ckpt) || len > size - off - PD_WAL_REC_HDR ||
            pd_crc32c(pd_crc32c(0, h, 1), h + PD_WAL_REC_HDR, len) != crc) {
            /* the record is lost, not the ones after it (issue 27) */
            replay_bad(s, 0, off, "bad series record");
            off = pd__wal_resync(data, size, off + 1, true);
            continue;
        }
        if (ckpt) {
            const uint8_t *q = h + PD_WAL_REC_HDR;
            s->series_first_seg =
                (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
            /* the checkpoint removed only the segments before it: the WAL
               starting later means its oldest segments were lost */
            uint32_t first = first_wal_segment(s->waldir);
            if (first > s->series_first_seg || (!first && s->series_first_seg)) {
                pd_log_error("wal: the oldest segments are missing; their records are lost",
                             "first_missing=%s/%08u first_present=%08u (0: none)", s->waldir,
                             s->series_first_seg, first);
                pd_metrics_add("profd_storage_corruptions_total", NULL, 1);
            }
            off += PD_WAL_REC_HDR + 4;
            continue;
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

/* Decomposes replayed (WAL-only) head points into the head's groups, series
 * by series, for about budget_ms: each body is read and decoded with no lock
 * held, then appended to the series' groups under app_mu + the idx write
 * lock, as an append would. A body that does not decode is reported (file,
 * offset), counted in profd_storage_corruptions_total and dropped from the
 * head, as the replay did when it decoded every body. maint_mu held (no cut
 * runs meanwhile). Returns true when some remain. */
bool pd__tsdb_decompose_replayed(pd_tsdb *s, int64_t budget_ms)
{
    int64_t t0 = pd__tsdb_now_mono_ms();
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
            int rc = pd__tsdb_wal_profile(s, se->ref, &v[j], &p, NULL, &e);
            pthread_mutex_lock(&s->app_mu);
            size_t k = pd__tsdb_lower_bound(se, v[j].ts);
            bool still = k < se->n_pts && se->pts[k].ts == v[j].ts && se->pts[k].gid == WAL_ONLY;
            int hrc = rc;
            if (still && rc == 0) {
                uint32_t gid, gpos;
                pthread_rwlock_wrlock(&s->idx);
                hrc = pd__hmem_append(&s->hm, &se->hc, &p, v[j].ts, &gid, &gpos, &e);
                if (hrc == 0) {
                    se->pts[k].gid = gid;
                    se->pts[k].gpos = gpos;
                    se->n_wal_only--;
                    s->n_wal_only--;
                }
                pthread_rwlock_unlock(&s->idx);
                if (hrc == 0) {
                    pd__tsdb_compress_sealed(s, se);
                    done++;
                }
            }
            if (still && hrc < 0 && hrc != PD_ENOMEM) {
                char name[4200];
                pd__tsdb_seg_name(s, v[j].seg, name, sizeof name);
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
            if (pd__tsdb_now_mono_ms() - t0 > budget_ms)
                stop = true;
        }
        free(v);
    }
    pthread_mutex_lock(&s->app_mu);
    uint64_t left = s->n_wal_only;
    if (!left) /* /-/ready (pd_tsdb_ready) */
        __atomic_store_n(&s->head_ready, true, __ATOMIC_RELEASE);
    pd__tsdb_update_gauges(s);
    pthread_mutex_unlock(&s->app_mu);
    if (done || bad)
        pd_log_info("storage: replayed profiles decomposed into the head",
                    "profiles=%zu dropped=%zu left=%llu ms=%lld", done, bad,
                    (unsigned long long)left, (long long)(pd__tsdb_now_mono_ms() - t0));
    return left > 0;
}
