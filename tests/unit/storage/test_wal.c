/* Unit tests of src/storage/tsdb/wal.c at the record level: framing as
 * docs/format/wal.md describes it, rolling, replay, and what replay does with
 * torn tails, garbage and bad segment headers. Payloads here are synthetic
 * bytes (the WAL does not interpret them); expected layouts are computed from
 * the format document (8-byte segment header, 9-byte record header). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/crc32c.h"
#include "base/metrics.h"
#include "storage/tsdb/wal_int.h"

typedef struct seen {
    uint32_t seg;
    uint64_t off;
    uint8_t type;
    uint32_t len;
    uint8_t first; /* payload[0] */
} seen;

typedef struct replay_log {
    seen v[4096];
    size_t n;
} replay_log;

static int collect(void *ctx, uint32_t seg, uint64_t off, uint8_t type, const uint8_t *p,
                   uint32_t len)
{
    replay_log *l = ctx;
    /* payload i is len bytes all equal to (i & 0xff): check it is intact */
    for (uint32_t i = 1; i < len; i++)
        if (p[i] != p[0])
            return PD_EINVAL;
    if (l->n < 4096)
        l->v[l->n++] = (seen){seg, off, type, len, len ? p[0] : 0};
    return 0;
}

typedef struct fx {
    char root[256];
    char dir[300];
    pd_wal *w;
    replay_log log;
} fx;

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    snprintf(f->root, sizeof f->root, "/tmp/pd_wal_test_XXXXXX");
    if (!mkdtemp(f->root))
        return -1;
    snprintf(f->dir, sizeof f->dir, "%s/wal", f->root);
    if (mkdir(f->dir, 0755) < 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    pd__wal_close(f->w);
    nftw(f->root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

static void wal_open(fx *f, size_t seg_bytes)
{
    pd_wal_options o = {
        .dir = f->dir, .segment_bytes = seg_bytes, .fsync = PD_FSYNC_NEVER, .batch_ms = 1000};
    f->log.n = 0;
    pd_err err = {{0}};
    int rc = pd__wal_open(&o, collect, &f->log, &f->w, &err);
    if (rc < 0)
        fail_msg("wal open: %s", err.msg);
}

static void wal_reopen(fx *f, size_t seg_bytes)
{
    pd__wal_close(f->w);
    f->w = NULL;
    wal_open(f, seg_bytes);
}

/* Appends record i: type 1 + i%2, payload of len bytes of value i&0xff. */
static void append(fx *f, int i, size_t len, uint32_t *seg, uint64_t *off)
{
    uint8_t *payload = malloc(len + 1);
    memset(payload, i & 0xff, len);
    pd_buf rec;
    pd_buf_init(&rec, 0);
    assert_int_equal(pd__wal_frame(&rec, (uint8_t)(1 + i % 2), payload, len), 0);
    assert_int_equal(rec.len, PD_WAL_REC_HDR + len);
    pd_err err = {{0}};
    int rc = pd__wal_append(f->w, (const uint8_t *)rec.data, rec.len, seg, off, &err);
    if (rc < 0)
        fail_msg("append: %s", err.msg);
    pd_buf_release(&rec);
    free(payload);
}

static void seg_path(fx *f, uint32_t num, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%08u", f->dir, num);
}

static off_t fsize(const char *p)
{
    struct stat st;
    if (stat(p, &st) < 0)
        return -1;
    return st.st_size;
}

static void test_frame_layout(void **state)
{
    fx *f = *state;
    wal_open(f, 0);
    uint32_t seg;
    uint64_t off;
    append(f, 7, 5, &seg, &off);
    assert_int_equal(seg, 1);
    assert_int_equal(off, PD_WAL_SEG_HDR);
    pd__wal_close(f->w);
    f->w = NULL;
    /* the bytes on disk, built by hand from docs/format/wal.md */
    uint8_t want[8 + 9 + 5] = {'P', 'D', 'W', 'A', 'L', 2, 0, 0, 2, 5, 0, 0, 0};
    uint8_t type = 2, payload[5] = {7, 7, 7, 7, 7};
    uint32_t crc = pd_crc32c(pd_crc32c(0, &type, 1), payload, 5);
    for (int i = 0; i < 4; i++)
        want[13 + i] = (uint8_t)(crc >> (8 * i));
    memcpy(want + 17, payload, 5);
    char path[512];
    seg_path(f, 1, path, sizeof path);
    uint8_t got[64];
    int fd = open(path, O_RDONLY);
    assert_int_equal(read(fd, got, sizeof got), sizeof want);
    close(fd);
    assert_memory_equal(got, want, sizeof want);
}

static void test_roll_replay_read(void **state)
{
    fx *f = *state;
    wal_open(f, 1000);
    uint32_t segs[60];
    uint64_t offs[60];
    size_t lens[60];
    for (int i = 0; i < 60; i++) {
        lens[i] = (size_t)(i * 37) % 300;
        if (i == 30)
            lens[i] = 2500; /* bigger than a segment: gets one of its own */
        append(f, i, lens[i], &segs[i], &offs[i]);
    }
    /* layout: records follow each other; a segment never passes 1000 bytes
     * unless it holds a single record */
    uint64_t total = 0;
    for (int i = 0; i < 60; i++) {
        if (i > 0 && segs[i] == segs[i - 1])
            assert_int_equal(offs[i], offs[i - 1] + PD_WAL_REC_HDR + lens[i - 1]);
        else
            assert_int_equal(offs[i], PD_WAL_SEG_HDR);
        if (i > 0 && segs[i] != segs[i - 1]) {
            assert_int_equal(segs[i], segs[i - 1] + 1);
            /* rolled because the record would not fit */
            assert_true(offs[i - 1] + PD_WAL_REC_HDR + lens[i - 1] + PD_WAL_REC_HDR + lens[i] >
                        1000);
        }
    }
    assert_true(segs[30] != segs[29] && segs[31] != segs[30]);
    size_t nseg = pd__wal_segments(f->w);
    assert_int_equal(nseg, segs[59]);
    for (uint32_t s = 1; s <= nseg; s++) {
        char path[512];
        seg_path(f, s, path, sizeof path);
        off_t sz = fsize(path);
        assert_true(sz > 0);
        total += (uint64_t)sz;
    }
    assert_int_equal(pd__wal_bytes(f->w), total);

    /* read back each record, checked */
    for (int i = 0; i < 60; i++) {
        pd_buf b;
        pd_buf_init(&b, 0);
        assert_int_equal(
            pd__wal_read(f->w, segs[i], offs[i], (uint8_t)(1 + i % 2), (uint32_t)lens[i], &b, NULL),
            0);
        assert_int_equal(b.len, lens[i]);
        for (size_t j = 0; j < lens[i]; j++)
            assert_int_equal((uint8_t)b.data[j], i & 0xff);
        pd_buf_release(&b);
    }
    pd_buf b;
    pd_buf_init(&b, 0);
    pd_err err = {{0}};
    /* wrong type or length: not the record asked for */
    assert_int_equal(
        pd__wal_read(f->w, segs[5], offs[5], (uint8_t)(2 - 5 % 2), (uint32_t)lens[5], &b, &err),
        PD_ECORRUPT);
    assert_non_null(strstr(err.msg, "00000001"));
    assert_int_equal(
        pd__wal_read(f->w, segs[5], offs[5], (uint8_t)(1 + 5 % 2), (uint32_t)lens[5] + 1, &b, &err),
        PD_ECORRUPT);
    assert_int_equal(pd__wal_read(f->w, 999, 8, 1, 1, &b, &err), PD_ENOTFOUND);
    assert_int_equal(b.len, 0);

    /* a byte flipped on disk after open: the read says corrupt, names the place */
    char path[512];
    seg_path(f, segs[7], path, sizeof path);
    int fd = open(path, O_RDWR);
    uint8_t x;
    off_t at = (off_t)offs[7] + PD_WAL_REC_HDR + (off_t)lens[7] / 2;
    assert_int_equal(pread(fd, &x, 1, at), 1);
    x ^= 1;
    assert_int_equal(pwrite(fd, &x, 1, at), 1);
    assert_int_equal(
        pd__wal_read(f->w, segs[7], offs[7], (uint8_t)(1 + 7 % 2), (uint32_t)lens[7], &b, &err),
        PD_ECORRUPT);
    assert_non_null(strstr(err.msg, "checksum"));
    char offtxt[32];
    snprintf(offtxt, sizeof offtxt, "offset %llu", (unsigned long long)offs[7]);
    assert_non_null(strstr(err.msg, offtxt));
    x ^= 1;
    assert_int_equal(pwrite(fd, &x, 1, at), 1);
    close(fd);
    pd_buf_release(&b);

    /* replay gives every record, in order, at the same places */
    wal_reopen(f, 1000);
    assert_int_equal(f->log.n, 60);
    for (int i = 0; i < 60; i++) {
        assert_int_equal(f->log.v[i].seg, segs[i]);
        assert_int_equal(f->log.v[i].off, offs[i]);
        assert_int_equal(f->log.v[i].type, 1 + i % 2);
        assert_int_equal(f->log.v[i].len, lens[i]);
        if (lens[i])
            assert_int_equal(f->log.v[i].first, i & 0xff);
    }
    /* appends go on at the end of the last segment */
    uint32_t s2;
    uint64_t o2;
    append(f, 60, 10, &s2, &o2);
    assert_int_equal(s2, segs[59]);
    assert_int_equal(o2, offs[59] + PD_WAL_REC_HDR + lens[59]);
}

/* Removes PATH/wal/synced (a crash before the marker recorded the latest
 * appends). */
static void unlink_marker(fx *f)
{
    char p[600];
    seg_path(f, 1, p, sizeof p);
    char *slash = strrchr(p, '/');
    snprintf(slash + 1, sizeof p - (size_t)(slash + 1 - p), "%s", PD_WAL_SYNCED_NAME);
    unlink(p);
}

/* Issue 27: the newest segment cut short — at a record boundary or inside a
 * record — after its bytes were fsync'd (the marker PATH/wal/synced says
 * how many): not a torn append but lost acknowledged records, logged and
 * counted (profd_storage_wal_truncations_total). */
static void test_truncation_against_marker(void **state)
{
    fx *f = *state;
    wal_open(f, 0);
    uint32_t seg;
    uint64_t off[4];
    for (int i = 0; i < 4; i++)
        append(f, i, 40, &seg, &off[i]);
    assert_int_equal(pd__wal_sync(f->w), 0);
    pd__wal_close(f->w);
    f->w = NULL;
    char path[512];
    seg_path(f, 1, path, sizeof path);
    char wd[600];
    snprintf(wd, sizeof wd, "%s", path);
    *strrchr(wd, '/') = 0;
    uint32_t ms;
    uint64_t msz;
    assert_true(pd__wal_synced_read(wd, &ms, &msz));
    assert_int_equal(ms, 1);
    assert_int_equal(msz, (uint64_t)fsize(path));
    /* at a record boundary, then inside a record */
    const off_t cuts[2] = {(off_t)off[2], (off_t)off[1] + 5};
    for (int k = 0; k < 2; k++) {
        pd__wal_synced_read(wd, &ms, &msz);
        assert_int_equal(truncate(path, cuts[k]), 0);
        double c0 = pd_metrics_get("profd_storage_corruptions_total", NULL);
        double t0 = pd_metrics_get("profd_storage_wal_truncations_total", NULL);
        wal_open(f, 0);
        assert_int_equal(f->log.n, k == 0 ? 2 : 1);
        assert_true(pd_metrics_get("profd_storage_corruptions_total", NULL) >= c0 + 1);
        assert_int_equal(pd_metrics_get("profd_storage_wal_truncations_total", NULL), t0 + 1);
        assert_int_equal(pd__wal_gaps(f->w), 1);
        pd__wal_close(f->w);
        f->w = NULL;
        /* reported once: the marker now says what is there */
        wal_open(f, 0);
        assert_int_equal(pd_metrics_get("profd_storage_wal_truncations_total", NULL), t0 + 1);
        pd__wal_close(f->w);
        f->w = NULL;
    }
}

/* Every cut inside the last record, and garbage after it: replay keeps the
 * records before, the file is cut back to the record boundary, appends work. */
static void test_torn_tail_every_offset(void **state)
{
    fx *f = *state;
    wal_open(f, 0);
    uint32_t seg;
    uint64_t off[4];
    for (int i = 0; i < 4; i++)
        append(f, i, 40, &seg, &off[i]);
    pd__wal_close(f->w);
    f->w = NULL;
    char path[512];
    seg_path(f, 1, path, sizeof path);
    off_t full = fsize(path);
    assert_int_equal(full, (off_t)off[3] + PD_WAL_REC_HDR + 40);
    uint8_t orig[512];
    int fd = open(path, O_RDONLY);
    assert_int_equal(read(fd, orig, sizeof orig), full);
    close(fd);
    double c0 = pd_metrics_get("profd_storage_corruptions_total", NULL);
    /* a crash mid-append: the synced marker never saw the torn record */
    unlink_marker(f);
    for (off_t cut = (off_t)off[3] + 1; cut < full; cut++) {
        fd = open(path, O_WRONLY | O_TRUNC);
        assert_int_equal(write(fd, orig, (size_t)cut), cut);
        close(fd);
        wal_open(f, 0);
        assert_int_equal(f->log.n, 3);
        assert_int_equal(fsize(path), (off_t)off[3]);
        pd__wal_close(f->w);
        f->w = NULL;
    }
    /* a torn tail is not counted as corruption */
    assert_int_equal(pd_metrics_get("profd_storage_corruptions_total", NULL), c0);

    /* garbage tails: zeros (type 0), a huge length, a bad checksum */
    const struct {
        uint8_t bytes[16];
        size_t n;
    } tails[] = {
        {{0}, 16},
        {{1, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0, 1, 2, 3}, 12},
        {{1, 3, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef, 1, 1, 1}, 12},
    };
    for (size_t t = 0; t < 3; t++) {
        fd = open(path, O_WRONLY | O_TRUNC);
        assert_int_equal(write(fd, orig, (size_t)full), full);
        assert_int_equal(write(fd, tails[t].bytes, tails[t].n), (ssize_t)tails[t].n);
        close(fd);
        wal_open(f, 0);
        assert_int_equal(f->log.n, 4);
        assert_int_equal(fsize(path), full);
        pd__wal_close(f->w);
        f->w = NULL;
        /* these are corruption, not a torn write */
        assert_int_equal(pd_metrics_get("profd_storage_corruptions_total", NULL), c0 + 1 + t);
    }
    wal_open(f, 0);
    uint64_t o;
    append(f, 9, 3, &seg, &o);
    assert_int_equal(o, (uint64_t)full);
    wal_reopen(f, 0);
    assert_int_equal(f->log.n, 5);
    assert_int_equal(f->log.v[4].first, 9);
}

/* Issue 27: one damaged byte in the middle of the newest segment costs the
 * record it is in, not the rest of the segment: the later records replay,
 * nothing is truncated, the damage is counted, appends go on at the end. At
 * every byte of record 2 (header and payload). */
static void test_last_segment_middle_damage(void **state)
{
    fx *f = *state;
    wal_open(f, 0);
    uint32_t seg[6];
    uint64_t off[6];
    for (int i = 0; i < 6; i++)
        append(f, i, 40 + (size_t)i, &seg[i], &off[i]);
    assert_int_equal(seg[5], 1);
    pd__wal_close(f->w);
    f->w = NULL;
    char path[512];
    seg_path(f, 1, path, sizeof path);
    off_t full = fsize(path);
    uint8_t orig[1024];
    int fd = open(path, O_RDONLY);
    assert_int_equal(read(fd, orig, sizeof orig), full);
    close(fd);
    for (uint64_t at = off[2]; at < off[3]; at++) {
        uint8_t b[1024];
        memcpy(b, orig, (size_t)full);
        b[at] ^= 0x5a;
        fd = open(path, O_WRONLY | O_TRUNC);
        assert_int_equal(write(fd, b, (size_t)full), full);
        close(fd);
        double c0 = pd_metrics_get("profd_storage_corruptions_total", NULL);
        wal_open(f, 0);
        if (f->log.n != 5)
            fail_msg("byte %llu of record 2 flipped: %zu records replayed, want 5",
                     (unsigned long long)at, f->log.n);
        for (size_t k = 0; k < 5; k++)
            assert_int_equal(f->log.v[k].first, k < 2 ? (int)k : (int)k + 1);
        assert_int_equal(fsize(path), full); /* nothing cut off */
        assert_true(pd_metrics_get("profd_storage_corruptions_total", NULL) > c0);
        uint32_t s;
        uint64_t o;
        append(f, 7, 10, &s, &o);
        assert_int_equal(o, (uint64_t)full);
        wal_reopen(f, 0);
        assert_int_equal(f->log.n, 6);
        assert_int_equal(f->log.v[5].first, 7);
        pd__wal_close(f->w);
        f->w = NULL;
    }
}

/* An earlier segment with a corrupt record: that record is skipped, the
 * next valid one found and replayed, later segments replay; one with a bad
 * header is skipped whole. */
static void test_earlier_segment_damage(void **state)
{
    fx *f = *state;
    wal_open(f, 200);
    uint32_t seg[12];
    uint64_t off[12];
    for (int i = 0; i < 12; i++)
        append(f, i, 50, &seg[i], &off[i]); /* 3 records (177 bytes) per segment */
    assert_int_equal(seg[11], 4);
    assert_int_equal(seg[3], 2);
    assert_int_equal(seg[5], 2);
    pd__wal_close(f->w);
    f->w = NULL;
    char path[512];
    seg_path(f, 2, path, sizeof path);
    int fd = open(path, O_RDWR);
    /* the CRC field of record 4 (the middle one of segment 2) */
    uint8_t x = 0x77;
    assert_int_equal(pwrite(fd, &x, 1, (off_t)off[4] + 5), 1);
    close(fd);
    double c0 = pd_metrics_get("profd_storage_corruptions_total", NULL);
    wal_open(f, 200);
    assert_int_equal(pd_metrics_get("profd_storage_corruptions_total", NULL), c0 + 1);
    /* only 4 skipped: 5 is found after it (issue 27: records findable
       after damage by their CRC) */
    assert_int_equal(f->log.n, 11);
    int k = 0;
    for (int i = 0; i < 12; i++) {
        if (i == 4)
            continue;
        assert_int_equal(f->log.v[k].first, i);
        k++;
    }
    /* segment 3 gets a bad version byte: skipped whole */
    pd__wal_close(f->w);
    f->w = NULL;
    seg_path(f, 3, path, sizeof path);
    fd = open(path, O_RDWR);
    x = 9;
    assert_int_equal(pwrite(fd, &x, 1, 5), 1);
    close(fd);
    wal_open(f, 200);
    assert_int_equal(f->log.n, 8);
    /* the last segment with a bad magic: skipped, and appends go to a new one */
    pd__wal_close(f->w);
    f->w = NULL;
    seg_path(f, 4, path, sizeof path);
    fd = open(path, O_RDWR);
    assert_int_equal(pwrite(fd, "pdwal", 5, 0), 5);
    close(fd);
    off_t bad_size = fsize(path);
    wal_open(f, 200);
    assert_int_equal(f->log.n, 5);
    uint32_t s;
    uint64_t o;
    append(f, 42, 10, &s, &o);
    assert_int_equal(s, 5);
    assert_int_equal(o, PD_WAL_SEG_HDR);
    assert_int_equal(fsize(path), bad_size); /* left alone for a person to look at */
    pd_buf b;
    pd_buf_init(&b, 0);
    assert_int_equal(pd__wal_read(f->w, 4, PD_WAL_SEG_HDR, 1, 50, &b, NULL), PD_ENOTFOUND);
    pd_buf_release(&b);
    wal_reopen(f, 200);
    assert_int_equal(f->log.n, 6);
    assert_int_equal(f->log.v[5].first, 42);
}

/* A crash between creating a segment and writing its header. */
static void test_headerless_last_segment(void **state)
{
    fx *f = *state;
    wal_open(f, 0);
    uint32_t s;
    uint64_t o;
    append(f, 1, 10, &s, &o);
    pd__wal_close(f->w);
    f->w = NULL;
    char path[512];
    seg_path(f, 2, path, sizeof path);
    int fd = open(path, O_CREAT | O_WRONLY, 0644);
    assert_int_equal(write(fd, "PDW", 3), 3);
    close(fd);
    wal_open(f, 0);
    assert_int_equal(f->log.n, 1);
    assert_int_equal(fsize(path), PD_WAL_SEG_HDR);
    append(f, 2, 10, &s, &o);
    assert_int_equal(s, 2);
    wal_reopen(f, 0);
    assert_int_equal(f->log.n, 2);
    /* and a replay callback error aborts the open with its code */
    pd__wal_close(f->w);
    f->w = NULL;
    seg_path(f, 2, path, sizeof path);
    fd = open(path, O_RDWR);
    /* make record 2's payload non-uniform but CRC-valid: rewrite it whole */
    uint8_t rec[9 + 10];
    uint8_t payload[10] = {2, 2, 2, 2, 2, 2, 2, 2, 2, 3};
    pd_buf b;
    pd_buf_init(&b, 0);
    assert_int_equal(pd__wal_frame(&b, 1, payload, 10), 0);
    memcpy(rec, b.data, sizeof rec);
    pd_buf_release(&b);
    assert_int_equal(pwrite(fd, rec, sizeof rec, PD_WAL_SEG_HDR), (ssize_t)sizeof rec);
    close(fd);
    pd_wal_options opt = {.dir = f->dir, .fsync = PD_FSYNC_NEVER, .batch_ms = 1000};
    f->log.n = 0;
    pd_err err = {{0}};
    assert_int_equal(pd__wal_open(&opt, collect, &f->log, &f->w, &err), PD_EINVAL);
    assert_null(f->w);
    assert_non_null(strstr(err.msg, "00000002"));
}

static void test_frame_cap(void **state)
{
    (void)state;
    pd_buf b;
    pd_buf_init(&b, 0);
    static const uint8_t one = 1;
    /* the cap is checked before anything is read from payload */
    assert_int_equal(pd__wal_frame(&b, 1, &one, (size_t)PD_WAL_MAX_RECORD + 1), PD_ETOOBIG);
    assert_int_equal(b.len, 0);
    pd_buf_release(&b);
}

/* WAL format 2 continuity: a segment the log rolled from ends with an END
 * record naming the next one. A crash between creating the next segment and
 * writing the END (the roll's window) is not damage: open writes the END,
 * counts nothing, and later opens stay quiet. The same segment without END
 * once the next one holds records is a cut (counted); a newest segment that
 * ends with END means the one after it was deleted (counted, and appends go
 * to a new segment after it, never after the END). */
static void test_end_records(void **state)
{
    fx *f = *state;
    wal_open(f, 200);
    uint32_t seg;
    uint64_t off[4];
    for (int i = 0; i < 4; i++)
        append(f, i, 50, &seg, &off[i]); /* 3 per segment: the 4th rolled to segment 2 */
    assert_int_equal(seg, 2);
    pd__wal_close(f->w);
    f->w = NULL;
    char p1[512], p2[512];
    seg_path(f, 1, p1, sizeof p1);
    seg_path(f, 2, p2, sizeof p2);
    off_t s1 = fsize(p1);
    assert_int_equal(s1, (off_t)(off[2] + PD_WAL_REC_HDR + 50 + PD_WAL_REC_HDR + 4)); /* + END */
    /* the roll's crash window: segment 2 empty, segment 1 without its END
       (the synced marker, written after the END, not there yet) */
    assert_int_equal(truncate(p2, PD_WAL_SEG_HDR), 0);
    assert_int_equal(truncate(p1, s1 - PD_WAL_REC_HDR - 4), 0);
    unlink_marker(f);
    double c0 = pd_metrics_get("profd_storage_corruptions_total", NULL);
    wal_open(f, 200);
    assert_int_equal(f->log.n, 3);
    assert_int_equal(pd_metrics_get("profd_storage_corruptions_total", NULL), c0);
    assert_int_equal(fsize(p1), s1); /* sealed now */
    append(f, 9, 10, &seg, &off[0]);
    assert_int_equal(seg, 2);
    wal_reopen(f, 200);
    assert_int_equal(f->log.n, 4);
    assert_int_equal(pd_metrics_get("profd_storage_corruptions_total", NULL), c0);
    pd__wal_close(f->w);
    f->w = NULL;
    /* segment 1 cut at its last record boundary (its END gone) while segment 2
       holds a record: counted */
    assert_int_equal(truncate(p1, s1 - PD_WAL_REC_HDR - 4), 0);
    wal_open(f, 200);
    assert_int_equal(f->log.n, 4);
    assert_int_equal(pd_metrics_get("profd_storage_corruptions_total", NULL), c0 + 1);
    assert_int_equal(pd__wal_gaps(f->w), 1);
    pd__wal_close(f->w);
    f->w = NULL;
    /* the newest segment deleted: segment 1 (sealed again by hand) ends with
       its END naming segment 2 */
    char p3[512];
    seg_path(f, 3, p3, sizeof p3);
    assert_int_equal(unlink(p2), 0);
    uint8_t end[PD_WAL_REC_HDR + 4] = {PD_WAL_REC_END, 4, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0};
    uint32_t crc = pd_crc32c(pd_crc32c(0, end, 1), end + PD_WAL_REC_HDR, 4);
    for (int i = 0; i < 4; i++)
        end[5 + i] = (uint8_t)(crc >> (8 * i));
    int fd = open(p1, O_WRONLY | O_APPEND);
    assert_int_equal(write(fd, end, sizeof end), (ssize_t)sizeof end);
    close(fd);
    wal_open(f, 200);
    assert_int_equal(f->log.n, 3);
    assert_int_equal(pd_metrics_get("profd_storage_corruptions_total", NULL), c0 + 2);
    append(f, 10, 10, &seg, &off[0]);
    assert_int_equal(seg, 2); /* a new segment 2, not after segment 1's END */
    assert_int_equal(fsize(p1), s1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_frame_layout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roll_replay_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_tail_every_offset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_earlier_segment_damage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_last_segment_middle_damage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncation_against_marker, setup, teardown),
        cmocka_unit_test_setup_teardown(test_headerless_last_segment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_end_records, setup, teardown),
        cmocka_unit_test(test_frame_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
