/*
 * storage/tsdb/wal.c — the write-ahead log: numbered segment files of
 * CRC-framed records (docs/format/wal.md).
 *
 * Directory:  PATH/wal/00000001, 00000002, ...   (8 decimal digits,
 *             contiguous: the checkpoint removes the oldest ones only, so a
 *             gap is a lost segment, logged and counted at open and reported
 *             by `profd tsdb check`; other names are ignored)
 *
 * Segment file:
 *
 *   +--------+---------+----------+------------------------------------+
 *   | "PDWAL"| version | reserved |  record | record | ... | record     |
 *   | 5 B    | 1 B (1) | 2 B (0)  |                                    |
 *   +--------+---------+----------+------------------------------------+
 *
 * Record:
 *
 *   +---------+---------------+-----------------+-------------------+
 *   | type u8 | length u32 LE | crc32c u32 LE   | payload           |
 *   |         | (of payload)  | (type+payload)  | (length bytes)    |
 *   +---------+---------------+-----------------+-------------------+
 *
 * Invariants and who does what:
 * - Only pd__wal_append writes, under w->mu, with one write(2) of whole
 *   records at the end of the current (last) segment. A failed write is cut
 *   back with ftruncate, so a segment holds only whole records plus, after a
 *   crash, a torn tail in the last segment.
 * - A segment rolls when the next write would take it past segment_bytes
 *   (unless it is empty: a record bigger than a segment gets its own). The
 *   old segment is fdatasync'ed before the new one is created (policy NEVER
 *   excepted), and the new file and the directory are fsynced, so a torn
 *   tail can only ever be in the last segment.
 * - Segment fds stay open until close; the table of segments is guarded by
 *   w->segs_lock (rwlock) so readers find an fd quickly and pread outside
 *   every lock.
 * - Replay (pd__wal_open) never trusts the disk: at a short header, a short
 *   payload, an unknown type, a length over PD_WAL_MAX_RECORD or a CRC
 *   mismatch it looks for the next record that verifies (pd__wal_resync:
 *   type, length and CRC at each following offset) and goes on there
 *   (logged, counted in profd_storage_corruptions_total): one damaged byte
 *   costs the record it is in (issue 27). With no valid record after it,
 *   it is the tail: in the last segment the file is truncated there
 *   (logged); in an earlier one the rest of the segment is skipped (logged,
 *   counted).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/log.h"
#include "base/metrics.h"
#include "storage/tsdb/wal_int.h"

typedef struct wal_seg {
    uint32_t num;
    int fd;        /* open O_RDWR until close */
    uint64_t size; /* bytes */
    bool bad;      /* bad header: never read, never appended to */
} wal_seg;

struct pd_wal {
    char *dir;
    size_t segment_bytes;
    pd_fsync_policy fsync;
    int64_t batch_ms;

    pthread_mutex_t mu; /* append path: current segment, sync state */
    bool failed;        /* a failed write could not be cut back */
    int64_t last_sync_ms;
    bool dirty; /* written since the last sync */

    pthread_rwlock_t segs_lock; /* segs, n_segs, cap_segs, sizes */
    wal_seg *segs;              /* ascending num; the last one is the append target */
    size_t n_segs, cap_segs;

    pthread_t flusher;
    bool flusher_running;
    bool stopping;
    pthread_cond_t cond;
    size_t n_gaps;             /* gaps in the segment numbers found at open */
    int64_t last_marker_ms;    /* when PATH/wal/synced was last written (marker_mu) */
    pthread_mutex_t marker_mu; /* one writer of PATH/wal/synced at a time */
    bool opened;               /* the open completed: close may write the marker */
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void put_u32le(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void pd__wal_seg_name(const pd_wal *w, uint32_t seg, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%08u", w->dir, seg);
}

static void count_corruption(void)
{
    pd_metrics_add("profd_storage_corruptions_total", NULL, 1);
}

/* Reads exactly n bytes at off; returns bytes read (< n at end of file) or -errno. */
static ssize_t pread_full(int fd, void *buf, size_t n, uint64_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (uint8_t *)buf + got, n - got, (off_t)(off + got));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

static int write_full(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t r = write(fd, p, n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

int pd__wal_frame(pd_buf *buf, uint8_t type, const uint8_t *payload, size_t len)
{
    if (len > PD_WAL_MAX_RECORD)
        return PD_ETOOBIG;
    uint8_t hdr[PD_WAL_REC_HDR];
    hdr[0] = type;
    put_u32le(hdr + 1, (uint32_t)len);
    uint32_t crc = pd_crc32c(0, &type, 1);
    crc = pd_crc32c(crc, payload, len);
    put_u32le(hdr + 5, crc);
    int rc = pd_buf_reserve(buf, sizeof hdr + len);
    if (rc < 0)
        return rc;
    pd_buf_append(buf, hdr, sizeof hdr);
    return pd_buf_append(buf, payload, len);
}

/* ---- segment table ---- */

static int segs_push(pd_wal *w, uint32_t num, int fd, uint64_t size, bool bad)
{
    if (w->n_segs == w->cap_segs) {
        size_t nc = w->cap_segs ? w->cap_segs * 2 : 16;
        wal_seg *ns = realloc(w->segs, nc * sizeof *ns);
        if (!ns)
            return PD_ENOMEM;
        w->segs = ns;
        w->cap_segs = nc;
    }
    w->segs[w->n_segs++] = (wal_seg){.num = num, .fd = fd, .size = size, .bad = bad};
    return 0;
}

static wal_seg *segs_find(pd_wal *w, uint32_t num)
{
    size_t lo = 0, hi = w->n_segs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (w->segs[mid].num < num)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < w->n_segs && w->segs[lo].num == num ? &w->segs[lo] : NULL;
}

/* Creates segment num with its header; pushes it (the new append target). */
static int seg_create(pd_wal *w, uint32_t num, pd_err *err)
{
    char name[4096];
    pd__wal_seg_name(w, num, name, sizeof name);
    int fd = open(name, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = -errno;
        return pd_err_set(err, e, "create wal segment %s: %s", name, strerror(-e));
    }
    uint8_t hdr[PD_WAL_SEG_HDR] = {0};
    memcpy(hdr, PD_WAL_MAGIC, 5);
    hdr[5] = PD_WAL_VERSION;
    int rc = write_full(fd, hdr, sizeof hdr);
    if (rc == 0 && w->fsync != PD_FSYNC_NEVER) {
        if (fdatasync(fd) < 0)
            rc = -errno;
        else
            rc = fsync_dir(w->dir);
    }
    if (rc < 0) {
        pd_err_set(err, rc, "create wal segment %s: %s", name, strerror(-rc));
        goto fail;
    }
    pthread_rwlock_wrlock(&w->segs_lock);
    rc = segs_push(w, num, fd, PD_WAL_SEG_HDR, false);
    pthread_rwlock_unlock(&w->segs_lock);
    if (rc < 0) {
        pd_err_set(err, rc, "create wal segment %s: out of memory", name);
        goto fail;
    }
    return 0;
fail:
    close(fd);
    unlink(name);
    return rc;
}

/* ---- the synced marker (PATH/wal/synced) ---- */

bool pd__wal_synced_read(const char *dir, uint32_t *seg, uint64_t *size)
{
    char name[4200];
    snprintf(name, sizeof name, "%s/%s", dir, PD_WAL_SYNCED_NAME);
    int fd = open(name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    uint8_t b[PD_WAL_SYNCED_BYTES];
    ssize_t r = pread_full(fd, b, sizeof b, 0);
    close(fd);
    if (r != (ssize_t)sizeof b || memcmp(b, "PDWS", 4) != 0 ||
        pd_crc32c(0, b, 16) != get_u32le(b + 16))
        return false;
    *seg = get_u32le(b + 4);
    *size = (uint64_t)get_u32le(b + 8) | (uint64_t)get_u32le(b + 12) << 32;
    return true;
}

/* Records that segment seg durably holds size bytes: tmp file, fsync,
 * rename (policy never: no fsync). Best effort: a failure is logged (the
 * marker then lags, which only weakens the check at open). */
static void synced_write(pd_wal *w, uint32_t seg, uint64_t size)
{
    char name[4200], tmp[4300];
    snprintf(name, sizeof name, "%s/%s", w->dir, PD_WAL_SYNCED_NAME);
    snprintf(tmp, sizeof tmp, "%s.tmp", name);
    uint8_t b[PD_WAL_SYNCED_BYTES];
    memcpy(b, "PDWS", 4);
    put_u32le(b + 4, seg);
    put_u32le(b + 8, (uint32_t)size);
    put_u32le(b + 12, (uint32_t)(size >> 32));
    put_u32le(b + 16, pd_crc32c(0, b, 16));
    pthread_mutex_lock(&w->marker_mu);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = fd < 0 ? -errno : write_full(fd, b, sizeof b);
    if (rc == 0 && w->fsync != PD_FSYNC_NEVER && fdatasync(fd) < 0)
        rc = -errno;
    if (fd >= 0)
        close(fd);
    if (rc == 0 && rename(tmp, name) < 0)
        rc = -errno;
    if (rc < 0)
        pd_log_warn("wal: cannot write the synced marker", "file=%s err=\"%s\"", name,
                    strerror(-rc));
    w->last_marker_ms = mono_ms();
    pthread_mutex_unlock(&w->marker_mu);
}

/* ---- finding records after damage ---- */

size_t pd__wal_resync(const uint8_t *buf, size_t len, size_t from, bool series_file)
{
    for (size_t p = from; p + PD_WAL_REC_HDR <= len; p++) {
        uint8_t type = buf[p];
        if (series_file ? type != PD_WAL_REC_SERIES : (type == 0 || type > PD_WAL_REC_MAX))
            continue;
        uint32_t l = get_u32le(buf + p + 1);
        /* what each type's payload must be at least: cheap filters before the CRC */
        if (l > PD_WAL_MAX_RECORD || l > len - p - PD_WAL_REC_HDR ||
            (type == PD_WAL_REC_END ? l != 4 : l < 9))
            continue;
        if (pd_crc32c(pd_crc32c(0, &type, 1), buf + p + PD_WAL_REC_HDR, l) ==
            get_u32le(buf + p + 5))
            return p;
    }
    return len;
}

/* Reads [off, size) of fd and finds the first valid record after off (not
 * at it); *next = its offset, or size when none. 0 or -errno / PD_ENOMEM. */
static int resync_segment(int fd, uint64_t off, uint64_t size, uint64_t *next)
{
    *next = size;
    if (size - off <= PD_WAL_REC_HDR)
        return 0;
    size_t n = (size_t)(size - off);
    uint8_t *b = malloc(n);
    if (!b)
        return PD_ENOMEM;
    ssize_t r = pread_full(fd, b, n, off);
    if (r < 0) {
        free(b);
        return (int)r;
    }
    size_t at = pd__wal_resync(b, (size_t)r, 1, false);
    if (at < (size_t)r)
        *next = off + at;
    free(b);
    return 0;
}

/* ---- replay ---- */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Lists segment numbers in dir, ascending. */
static int list_segments(const char *dir, uint32_t **nums /* OUT */, size_t *n /* OUT */,
                         pd_err *err)
{
    *nums = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        int e = -errno;
        return pd_err_set(err, e, "open wal directory %s: %s", dir, strerror(-e));
    }
    size_t cap = 0;
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d)) != NULL) {
        const char *nm = de->d_name;
        if (strlen(nm) != 8 || strspn(nm, "0123456789") != 8)
            continue;
        uint32_t num = (uint32_t)strtoul(nm, NULL, 10);
        if (num == 0)
            continue;
        if (*n == cap) {
            size_t nc = cap ? cap * 2 : 16;
            uint32_t *nn = realloc(*nums, nc * sizeof *nn);
            if (!nn) {
                rc = pd_err_set(err, PD_ENOMEM, "list wal directory %s: out of memory", dir);
                break;
            }
            *nums = nn;
            cap = nc;
        }
        (*nums)[(*n)++] = num;
    }
    closedir(d);
    if (rc < 0) {
        free(*nums);
        *nums = NULL;
        *n = 0;
        return rc;
    }
    if (*n)
        qsort(*nums, *n, sizeof **nums, cmp_u32);
    return 0;
}

/* Replays one segment (already open as fd, size bytes). For the last segment,
 * cuts a bad tail off; for an earlier one, skips it. *valid_end is where the
 * intact part ends. */
static int replay_segment(pd_wal *w, uint32_t num, int fd, uint64_t size, bool last,
                          pd_wal_replay_fn fn, void *ctx, pd_buf *payload, uint64_t *valid_end,
                          bool *ended, pd_err *err)
{
    *ended = false;
    char name[4096];
    pd__wal_seg_name(w, num, name, sizeof name);
    uint64_t off = PD_WAL_SEG_HDR;
    const char *why = NULL;
    bool torn = false;
    for (;;) {
        if (why) {
            /* damage, or a torn tail: a valid record after it means damage
               in the middle (issue 27: the records after it are kept) */
            uint64_t next;
            int rrc = resync_segment(fd, off, size, &next);
            if (rrc < 0)
                return pd_err_set(err, rrc, "read wal segment %s at offset %llu: %s", name,
                                  (unsigned long long)off, pd_strerror(rrc));
            if (next >= size)
                break;
            pd_log_warn("wal: corrupt record skipped; replay resumes at the next valid record",
                        "file=%s offset=%llu reason=\"%s\" bytes_skipped=%llu next=%llu", name,
                        (unsigned long long)off, why, (unsigned long long)(next - off),
                        (unsigned long long)next);
            count_corruption();
            why = NULL;
            torn = false;
            off = next;
            *ended = false;
        }
        if (off >= size)
            break;
        uint8_t hdr[PD_WAL_REC_HDR];
        if (size - off < PD_WAL_REC_HDR) {
            why = "short record header";
            torn = true;
            continue;
        }
        ssize_t r = pread_full(fd, hdr, sizeof hdr, off);
        if (r < 0)
            return pd_err_set(err, (int)r, "read wal segment %s at offset %llu: %s", name,
                              (unsigned long long)off, strerror((int)-r));
        if ((size_t)r < sizeof hdr) {
            why = "short record header";
            torn = true;
            continue;
        }
        uint8_t type = hdr[0];
        uint32_t len = get_u32le(hdr + 1), crc = get_u32le(hdr + 5);
        if (type == 0 || type > PD_WAL_REC_MAX) {
            why = "unknown record type";
            continue;
        }
        if (len > PD_WAL_MAX_RECORD) {
            why = "record length over the cap";
            continue;
        }
        if (size - off - PD_WAL_REC_HDR < len) {
            why = "short record payload";
            torn = true;
            continue;
        }
        pd_buf_reset(payload);
        int rc = pd_buf_reserve(payload, len);
        if (rc < 0)
            return pd_err_set(err, rc, "replay %s: out of memory for a %u-byte record", name, len);
        r = pread_full(fd, payload->data, len, off + PD_WAL_REC_HDR);
        if (r < 0)
            return pd_err_set(err, (int)r, "read wal segment %s at offset %llu: %s", name,
                              (unsigned long long)off, strerror((int)-r));
        if ((size_t)r < len) {
            why = "short record payload";
            torn = true;
            continue;
        }
        payload->len = len;
        payload->data[len] = 0;
        uint32_t c = pd_crc32c(pd_crc32c(0, &type, 1), payload->data, len);
        if (c != crc) {
            why = "checksum mismatch";
            continue;
        }
        if (*ended) { /* nothing follows the END record */
            why = "record after the segment's end record";
            continue;
        }
        if (type == PD_WAL_REC_END) {
            if (len != 4 || get_u32le((const uint8_t *)payload->data) != num + 1) {
                why = "bad end record";
                continue;
            }
            *ended = true;
            off += PD_WAL_REC_HDR + (uint64_t)len;
            continue;
        }
        rc = fn(ctx, num, off, type, (const uint8_t *)payload->data, len);
        if (rc < 0) {
            if (err && !err->msg[0])
                pd_err_set(err, rc, "replay %s at offset %llu: %s", name, (unsigned long long)off,
                           pd_strerror(rc));
            return rc;
        }
        off += PD_WAL_REC_HDR + (uint64_t)len;
    }
    *valid_end = off;
    if (!why)
        return 0;
    if (last) {
        pd_log_warn("wal: cutting off the bad tail of the last segment",
                    "file=%s offset=%llu reason=\"%s\" bytes_lost=%llu", name,
                    (unsigned long long)off, why, (unsigned long long)(size - off));
        if (!torn)
            count_corruption();
        if (ftruncate(fd, (off_t)off) < 0 || (w->fsync != PD_FSYNC_NEVER && fdatasync(fd) < 0)) {
            int e = -errno;
            return pd_err_set(err, e, "truncate wal segment %s to %llu: %s", name,
                              (unsigned long long)off, strerror(-e));
        }
    } else {
        *ended = true; /* its END is in the skipped rest: reported here, not again */
        pd_log_warn("wal: corrupt record, skipping the rest of the segment",
                    "file=%s offset=%llu reason=\"%s\" bytes_skipped=%llu", name,
                    (unsigned long long)off, why, (unsigned long long)(size - off));
        count_corruption();
    }
    return 0;
}

/* ---- flusher (policy BATCH) ---- */

static void *flusher_main(void *arg)
{
    pd_wal *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t ns = ts.tv_nsec + (w->batch_ms % 1000) * 1000000;
        ts.tv_sec += w->batch_ms / 1000 + ns / 1000000000;
        ts.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&w->cond, &w->mu, &ts);
        if (w->stopping || !w->dirty || mono_ms() - w->last_sync_ms < w->batch_ms)
            continue;
        pthread_rwlock_rdlock(&w->segs_lock);
        int fd = w->segs[w->n_segs - 1].fd;
        uint32_t num = w->segs[w->n_segs - 1].num;
        uint64_t size = w->segs[w->n_segs - 1].size;
        pthread_rwlock_unlock(&w->segs_lock);
        w->dirty = false;
        w->last_sync_ms = mono_ms();
        pthread_mutex_unlock(&w->mu);
        /* fds stay open until close, which joins this thread first */
        if (fdatasync(fd) < 0)
            pd_log_error("wal: background fsync failed", "dir=%s err=\"%s\"", w->dir,
                         strerror(errno));
        else
            synced_write(w, num, size); /* size: written before the fsync */
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* ---- open / close ---- */

/* Whether segment num of w's dir holds its header only (or less). */
static bool newest_empty(const pd_wal *w, uint32_t num)
{
    char name[4096];
    pd__wal_seg_name(w, num, name, sizeof name);
    struct stat st;
    return stat(name, &st) == 0 && (uint64_t)st.st_size <= PD_WAL_SEG_HDR;
}

/* Appends the END record naming next to segment sg (sealing it), fsynced
 * per policy. A failure is logged (the next open then reports the segment
 * as cut short) but is not an error of the append that rolled. */
static void write_end(pd_wal *w, wal_seg *sg, uint32_t next)
{
    uint8_t rec[PD_WAL_REC_HDR + 4], pl[4];
    put_u32le(pl, next);
    rec[0] = PD_WAL_REC_END;
    put_u32le(rec + 1, 4);
    uint8_t t = PD_WAL_REC_END;
    put_u32le(rec + 5, pd_crc32c(pd_crc32c(0, &t, 1), pl, 4));
    memcpy(rec + PD_WAL_REC_HDR, pl, 4);
    int rc = write_full(sg->fd, rec, sizeof rec);
    if (rc == 0 && w->fsync != PD_FSYNC_NEVER && fdatasync(sg->fd) < 0)
        rc = -errno;
    if (rc < 0) {
        char name[4096];
        pd__wal_seg_name(w, sg->num, name, sizeof name);
        pd_log_error("wal: cannot write a segment's end record", "file=%s err=\"%s\"", name,
                     strerror(-rc));
        return;
    }
    pthread_rwlock_wrlock(&w->segs_lock);
    sg->size += sizeof rec;
    pthread_rwlock_unlock(&w->segs_lock);
}

int pd__wal_open(const pd_wal_options *o, pd_wal_replay_fn fn, void *ctx, pd_wal **out, pd_err *err)
{
    *out = NULL;
    uint32_t *nums = NULL;
    size_t n_nums = 0;
    pd_buf payload;
    pd_buf_init(&payload, (size_t)PD_WAL_MAX_RECORD + 1);
    int rc;
    pd_wal *w = calloc(1, sizeof *w);
    if (!w)
        return pd_err_set(err, PD_ENOMEM, "open wal %s: out of memory", o->dir);
    w->segment_bytes = o->segment_bytes > PD_WAL_SEG_HDR ? o->segment_bytes : 128u << 20;
    w->fsync = o->fsync;
    w->batch_ms = o->batch_ms > 0 ? o->batch_ms : 1000;
    pthread_mutex_init(&w->mu, NULL);
    pthread_mutex_init(&w->marker_mu, NULL);
    pthread_rwlock_init(&w->segs_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cond, &ca);
    pthread_condattr_destroy(&ca);
    if (!(w->dir = strdup(o->dir))) {
        rc = pd_err_set(err, PD_ENOMEM, "open wal %s: out of memory", o->dir);
        goto fail;
    }
    if ((rc = list_segments(w->dir, &nums, &n_nums, err)) < 0)
        goto fail;
    bool sealed = false, end_pending = false;
    uint32_t mk_seg = 0;
    uint64_t mk_size = 0;
    bool mk = pd__wal_synced_read(w->dir, &mk_seg, &mk_size);

    for (size_t i = 0; i < n_nums; i++) {
        bool last = i + 1 == n_nums;
        char name[4096];
        if (i > 0 && nums[i] != nums[i - 1] + 1) {
            /* segment numbers are contiguous: a gap is a lost segment (its
               acknowledged profiles are gone); replay goes on after it */
            char miss[4096];
            pd__wal_seg_name(w, nums[i - 1] + 1, miss, sizeof miss);
            pd_log_error("wal: segments missing; their records are lost",
                         "first_missing=%s missing=%llu before=%08u", miss,
                         (unsigned long long)(nums[i] - nums[i - 1] - 1), nums[i]);
            count_corruption();
            w->n_gaps++;
        }
        pd__wal_seg_name(w, nums[i], name, sizeof name);
        int fd = open(name, O_RDWR | O_APPEND | O_CLOEXEC);
        if (fd < 0) {
            rc = -errno;
            pd_err_set(err, rc, "open wal segment %s: %s", name, strerror(-rc));
            goto fail;
        }
        struct stat st;
        if (fstat(fd, &st) < 0) {
            rc = -errno;
            pd_err_set(err, rc, "stat wal segment %s: %s", name, strerror(-rc));
            close(fd);
            goto fail;
        }
        uint64_t size = (uint64_t)st.st_size;
        uint8_t hdr[PD_WAL_SEG_HDR];
        ssize_t r = size >= PD_WAL_SEG_HDR ? pread_full(fd, hdr, sizeof hdr, 0) : 0;
        if (r < 0) {
            rc = (int)r;
            pd_err_set(err, rc, "read wal segment %s: %s", name, strerror(-rc));
            close(fd);
            goto fail;
        }
        bool bad = false;
        if (r < PD_WAL_SEG_HDR && last) {
            /* a crash while the segment was being created: write its header again */
            pd_log_warn("wal: last segment has no complete header, rewriting it",
                        "file=%s size=%llu", name, (unsigned long long)size);
            memset(hdr, 0, sizeof hdr);
            memcpy(hdr, PD_WAL_MAGIC, 5);
            hdr[5] = PD_WAL_VERSION;
            if (ftruncate(fd, 0) < 0 || write_full(fd, hdr, sizeof hdr) < 0) {
                rc = -errno;
                pd_err_set(err, rc, "rewrite wal segment header %s: %s", name, strerror(-rc));
                close(fd);
                goto fail;
            }
            size = PD_WAL_SEG_HDR;
        } else if (r < PD_WAL_SEG_HDR || memcmp(hdr, PD_WAL_MAGIC, 5) != 0 || hdr[5] < 1 ||
                   hdr[5] > PD_WAL_VERSION) {
            pd_log_warn("wal: segment has a bad header, skipping it",
                        "file=%s offset=0 reason=\"%s\"", name,
                        r < PD_WAL_SEG_HDR                  ? "short header"
                        : memcmp(hdr, PD_WAL_MAGIC, 5) != 0 ? "bad magic"
                                                            : "unknown version");
            count_corruption();
            bad = true;
        }
        bool ended = false;
        if (!bad) {
            uint64_t end = size;
            if ((rc = replay_segment(w, nums[i], fd, size, last, fn, ctx, &payload, &end, &ended,
                                     err)) < 0) {
                close(fd);
                goto fail;
            }
            if (last)
                size = end; /* truncated there */
            if (last && mk && mk_seg == nums[i] && end < mk_size) {
                /* shorter than what was durably written: acknowledged
                   records are gone (a truncation, not a torn append) */
                pd_log_error("wal: the newest segment is shorter than what was fsync'd; "
                             "acknowledged records are lost",
                             "file=%s offset=%llu synced=%llu bytes_lost=%llu", name,
                             (unsigned long long)end, (unsigned long long)mk_size,
                             (unsigned long long)(mk_size - end));
                count_corruption();
                pd_metrics_add("profd_storage_wal_truncations_total", NULL, 1);
                w->n_gaps++;
            }
        }
        /* continuity of version-2 segments (their END records) */
        if (!bad && hdr[5] >= 2 && last && ended) {
            char miss[4096];
            pd__wal_seg_name(w, nums[i] + 1, miss, sizeof miss);
            pd_log_error("wal: the newest segment is missing; its records are lost",
                         "missing=%s ended=%s", miss, name);
            count_corruption();
            w->n_gaps++;
            sealed = true;
        } else if (!bad && hdr[5] >= 2 && !last && !ended) {
            if (i + 2 == n_nums && newest_empty(w, nums[i + 1])) {
                end_pending = true; /* crashed while rolling: ended below */
            } else {
                pd_log_error("wal: segment does not end with its end record: cut at a record "
                             "boundary, the rest of its records are lost",
                             "file=%s offset=%llu", name, (unsigned long long)size);
                count_corruption();
                w->n_gaps++;
            }
        }
        if ((rc = segs_push(w, nums[i], fd, size, bad)) < 0) {
            pd_err_set(err, rc, "open wal %s: out of memory", w->dir);
            close(fd);
            goto fail;
        }
    }

    if (end_pending && w->n_segs >= 2) /* the roll the crash interrupted */
        write_end(w, &w->segs[w->n_segs - 2], w->segs[w->n_segs - 1].num);
    /* the append target (a segment that ends with its END record is sealed) */
    if (w->n_segs == 0 || w->segs[w->n_segs - 1].bad || sealed ||
        w->segs[w->n_segs - 1].size >= w->segment_bytes) {
        uint32_t num = w->n_segs ? w->segs[w->n_segs - 1].num + 1 : 1;
        if (num == 0) {
            rc = pd_err_set(err, PD_EINVAL, "open wal %s: segment numbers exhausted", w->dir);
            goto fail;
        }
        if ((rc = seg_create(w, num, err)) < 0)
            goto fail;
    }
    w->last_sync_ms = mono_ms();
    /* what the newest segment holds now is the base of the next check */
    synced_write(w, w->segs[w->n_segs - 1].num, w->segs[w->n_segs - 1].size);
    w->opened = true;
    if (w->fsync == PD_FSYNC_BATCH) {
        if ((rc = pthread_create(&w->flusher, NULL, flusher_main, w)) != 0) {
            rc = pd_err_set(err, -rc, "open wal %s: cannot start the flusher thread", w->dir);
            goto fail;
        }
        w->flusher_running = true;
    }
    free(nums);
    pd_buf_release(&payload);
    *out = w;
    return 0;
fail:
    free(nums);
    pd_buf_release(&payload);
    pd__wal_close(w);
    return rc;
}

void pd__wal_close(pd_wal *w)
{
    if (!w)
        return;
    if (w->flusher_running) {
        pthread_mutex_lock(&w->mu);
        w->stopping = true;
        pthread_cond_signal(&w->cond);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->flusher, NULL);
    }
    for (size_t i = 0; i < w->n_segs; i++) {
        if (i + 1 == w->n_segs && !w->segs[i].bad) {
            if (fdatasync(w->segs[i].fd) < 0)
                pd_log_error("wal: fsync on close failed", "dir=%s err=\"%s\"", w->dir,
                             strerror(errno));
            else if (w->opened)
                synced_write(w, w->segs[i].num, w->segs[i].size);
        }
        close(w->segs[i].fd);
    }
    free(w->segs);
    free(w->dir);
    pthread_cond_destroy(&w->cond);
    pthread_rwlock_destroy(&w->segs_lock);
    pthread_mutex_destroy(&w->marker_mu);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

/* ---- append / read ---- */

int pd__wal_append(pd_wal *w, const uint8_t *recs, size_t len, uint32_t *seg, uint64_t *off,
                   pd_err *err)
{
    int rc = 0;
    char name[4096];
    pthread_mutex_lock(&w->mu);
    if (w->failed) {
        rc = pd_err_set(err, PD_ECLOSED,
                        "wal %s: an earlier write failed and could not be undone; restart to "
                        "recover",
                        w->dir);
        goto out;
    }
    /* segs only changes under w->mu (seg_create below), so reading it here is safe */
    wal_seg cur = w->segs[w->n_segs - 1];
    if (cur.size > PD_WAL_SEG_HDR && cur.size + len > w->segment_bytes) {
        if (w->fsync != PD_FSYNC_NEVER && fdatasync(cur.fd) < 0) {
            rc = -errno;
            pd__wal_seg_name(w, cur.num, name, sizeof name);
            pd_err_set(err, rc, "fsync wal segment %s: %s", name, strerror(-rc));
            goto out;
        }
        if (cur.num == UINT32_MAX) {
            rc = pd_err_set(err, PD_ECLOSED, "wal %s: segment numbers exhausted", w->dir);
            goto out;
        }
        if ((rc = seg_create(w, cur.num + 1, err)) < 0)
            goto out;
        /* the new segment is durable: seal the old one (a crash before this
           leaves it without END and the new one empty: see pd__wal_open) */
        write_end(w, &w->segs[w->n_segs - 2], cur.num + 1);
        synced_write(w, cur.num + 1, PD_WAL_SEG_HDR);
        w->dirty = false;
        w->last_sync_ms = mono_ms();
        cur = w->segs[w->n_segs - 1];
    }
    pd__wal_seg_name(w, cur.num, name, sizeof name);
    rc = write_full(cur.fd, recs, len);
    if (rc == 0 && w->fsync == PD_FSYNC_ALWAYS && fdatasync(cur.fd) < 0)
        rc = -errno;
    if (rc < 0) {
        pd_err_set(err, rc, "write wal segment %s at offset %llu: %s", name,
                   (unsigned long long)cur.size, strerror(-rc));
        if (ftruncate(cur.fd, (off_t)cur.size) < 0) {
            pd_log_error("wal: cannot cut back a failed write; refusing further appends",
                         "file=%s offset=%llu err=\"%s\"", name, (unsigned long long)cur.size,
                         strerror(errno));
            w->failed = true;
        }
        goto out;
    }
    *seg = cur.num;
    *off = cur.size;
    pthread_rwlock_wrlock(&w->segs_lock);
    w->segs[w->n_segs - 1].size += len;
    pthread_rwlock_unlock(&w->segs_lock);
    if (w->fsync == PD_FSYNC_ALWAYS) {
        w->last_sync_ms = mono_ms();
        if (w->last_sync_ms - w->last_marker_ms >= w->batch_ms)
            synced_write(w, cur.num, cur.size + len);
    } else if (w->fsync == PD_FSYNC_BATCH) {
        /* the flusher syncs, never the append: an fdatasync here holds
           every append behind it (5-23 ms for a second of 75 KB profiles
           at 100/s on the bench's VM) */
        w->dirty = true;
        if (mono_ms() - w->last_sync_ms >= w->batch_ms)
            pthread_cond_signal(&w->cond);
    }
out:
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int pd__wal_read(pd_wal *w, uint32_t seg, uint64_t off, uint8_t type, uint32_t len, pd_buf *out,
                 pd_err *err)
{
    char name[4096];
    pd__wal_seg_name(w, seg, name, sizeof name);
    pthread_rwlock_rdlock(&w->segs_lock);
    wal_seg *s = segs_find(w, seg);
    int fd = s && !s->bad ? s->fd : -1;
    pthread_rwlock_unlock(&w->segs_lock);
    if (fd < 0)
        return pd_err_set(err, PD_ENOTFOUND, "wal segment %s not found", name);
    if (len > PD_WAL_MAX_RECORD)
        return pd_err_set(err, PD_ECORRUPT, "%s offset %llu: record length %u over the cap", name,
                          (unsigned long long)off, len);
    uint8_t hdr[PD_WAL_REC_HDR];
    ssize_t r = pread_full(fd, hdr, sizeof hdr, off);
    if (r < 0)
        return pd_err_set(err, (int)r, "read %s offset %llu: %s", name, (unsigned long long)off,
                          strerror((int)-r));
    if ((size_t)r < sizeof hdr)
        return pd_err_set(err, PD_ECORRUPT, "%s offset %llu: short record header", name,
                          (unsigned long long)off);
    if (hdr[0] != type || get_u32le(hdr + 1) != len)
        return pd_err_set(err, PD_ECORRUPT,
                          "%s offset %llu: record header is type %u length %u, expected type "
                          "%u length %u",
                          name, (unsigned long long)off, hdr[0], get_u32le(hdr + 1), type, len);
    size_t base = out->len;
    int rc = pd_buf_reserve(out, len);
    if (rc < 0)
        return pd_err_set(err, rc, "read %s offset %llu: no room for %u bytes", name,
                          (unsigned long long)off, len);
    r = pread_full(fd, out->data + base, len, off + PD_WAL_REC_HDR);
    if (r < 0 || (size_t)r < len ||
        pd_crc32c(pd_crc32c(0, &type, 1), out->data + base, len) != get_u32le(hdr + 5)) {
        out->data[base] = 0; /* out keeps its old contents */
        if (r < 0)
            return pd_err_set(err, (int)r, "read %s offset %llu: %s", name, (unsigned long long)off,
                              strerror((int)-r));
        return pd_err_set(err, PD_ECORRUPT, "%s offset %llu: %s", name, (unsigned long long)off,
                          (size_t)r < len ? "short record payload" : "record checksum mismatch");
    }
    out->len = base + len;
    out->data[out->len] = 0;
    return 0;
}

size_t pd__wal_gaps(const pd_wal *w)
{
    return w->n_gaps;
}

uint64_t pd__wal_bytes(pd_wal *w)
{
    uint64_t sum = 0;
    pthread_rwlock_rdlock(&w->segs_lock);
    for (size_t i = 0; i < w->n_segs; i++)
        sum += w->segs[i].size;
    pthread_rwlock_unlock(&w->segs_lock);
    return sum;
}

size_t pd__wal_segments(pd_wal *w)
{
    pthread_rwlock_rdlock(&w->segs_lock);
    size_t n = w->n_segs;
    pthread_rwlock_unlock(&w->segs_lock);
    return n;
}

int pd__wal_sync(pd_wal *w)
{
    pthread_mutex_lock(&w->mu);
    int fd = w->segs[w->n_segs - 1].fd;
    int rc = fdatasync(fd) < 0 ? -errno : 0;
    if (rc == 0) {
        w->dirty = false;
        w->last_sync_ms = mono_ms();
        synced_write(w, w->segs[w->n_segs - 1].num, w->segs[w->n_segs - 1].size);
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

uint32_t pd__wal_current(pd_wal *w)
{
    pthread_rwlock_rdlock(&w->segs_lock);
    uint32_t n = w->segs[w->n_segs - 1].num;
    pthread_rwlock_unlock(&w->segs_lock);
    return n;
}

int pd__wal_remove_before(pd_wal *w, uint32_t seg, pd_err *err)
{
    int rc = 0;
    size_t removed = 0;
    char name[4096];
    pthread_mutex_lock(&w->mu); /* no roll meanwhile: the last segment stays the last */
    for (;;) {
        pthread_rwlock_wrlock(&w->segs_lock);
        if (w->n_segs < 2 || w->segs[0].num >= seg) {
            pthread_rwlock_unlock(&w->segs_lock);
            break;
        }
        wal_seg old = w->segs[0];
        memmove(w->segs, w->segs + 1, (w->n_segs - 1) * sizeof *w->segs);
        w->n_segs--;
        pthread_rwlock_unlock(&w->segs_lock);
        pd__wal_seg_name(w, old.num, name, sizeof name);
        close(old.fd);
        if (unlink(name) < 0 && errno != ENOENT) {
            rc = -errno;
            pd_err_set(err, rc, "remove wal segment %s: %s", name, strerror(-rc));
            break;
        }
        removed++;
    }
    pthread_mutex_unlock(&w->mu);
    if (removed && rc == 0 && (rc = fsync_dir(w->dir)) < 0)
        pd_err_set(err, rc, "fsync wal directory %s: %s", w->dir, strerror(-rc));
    return rc;
}
