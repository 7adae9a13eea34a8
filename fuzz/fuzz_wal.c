/*
 * fuzz_wal — libFuzzer target for the store's on-disk reader: WAL replay
 * (src/storage/tsdb/wal.c) and record payload parsing and the index
 * (src/storage/tsdb/head.c), through the public storage.h API.
 *
 * Input layout: byte 0 is a flags byte, the rest is the content of the WAL
 * segment file(s):
 *   bit 0  fix CRCs: walk the records of each segment and write the right
 *          CRC-32C into every whole record, so mutations reach the payload
 *          parsers instead of dying at the checksum
 *   bit 1  prepend the 8-byte segment header "PDWAL" 1 0 0 to each segment
 *   bit 2  two segments: the text is split at the first "PDSEG2"; the part
 *          before is wal/00000001, the part after wal/00000002
 *   bit 3  segment_bytes = 64, so the append target is usually a new segment
 *   bit 4  after the reads, append one small profile and check that it is
 *          read back after a reopen
 * The files go into a private directory under /dev/shm (tmpfs), fsync=never.
 * Per input: pd_storage_open (must succeed: corruption is skipped, never an
 * error), select every series over all time, read every series' points and
 * every profile, check the stats agree, close; open again and check the
 * replay gives the same series and points (the first open may have cut a
 * bad tail; the second must accept what is left as is); then run a
 * maintenance round (it decomposes the replayed profiles into the head and
 * drops those whose body does not decode) and check again, now with every
 * profile readable; close. No maintenance thread (maintenance_ms -1): the
 * store changes only between the checks; no retention (fuzzed times).
 * Seed corpus: fuzz/corpus/wal — segments written by the store itself
 * (fuzz/gen_wal_seeds.c), each behind a flags byte.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/crc32c.h"
#include "base/labels.h"
#include "base/log.h"
#include "pprof/pprof.h"
#include "storage/storage.h"

#define SEG_HDR 8
#define REC_HDR 9

static char g_root[256];
static char g_wal[300];
static pd_buf g_body; /* a small valid pprof for bit 4 */
static pd_profile g_prof;

static void die(const char *what, const pd_err *err)
{
    fprintf(stderr, "fuzz_wal: %s%s%s\n", what, err ? ": " : "", err ? err->msg : "");
    abort();
}

static void clean_wal(void)
{
    DIR *d = opendir(g_wal);
    if (!d)
        return;
    struct dirent *de;
    char p[600];
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", g_wal, de->d_name);
        unlink(p);
    }
    closedir(d);
}

static int build_body(void)
{
    pd_profile_builder *b;
    pd_err err = {{0}};
    uint64_t fn, loc;
    int64_t v = 42;
    pd_pprof_line ln;
    if (pd_profile_builder_new(NULL, &b) != 0)
        return -1;
    if (pd_profile_builder_sample_type(b, "samples", "count", &err) < 0 ||
        pd_profile_builder_function(b, "main", NULL, "main.c", 1, &fn, &err) != 0)
        return -1;
    ln = (pd_pprof_line){.function_id = fn, .line = 3};
    if (pd_profile_builder_location(b, 0, 0x1000, &ln, 1, &loc, &err) != 0 ||
        pd_profile_builder_sample(b, &loc, 1, &v, NULL, 0, &err) != 0 ||
        pd_profile_builder_finish(b, &g_prof, &err) != 0)
        return -1;
    pd_profile_builder_free(b);
    pd_buf_init(&g_body, 0);
    return pd_profile_encode(&g_prof, true, &g_body);
}

/* Removes the work directory at exit (libFuzzer exits normally at the end of
 * a run; after a crash the directory stays for a look). */
static void remove_root(void)
{
    char p[600];
    clean_wal();
    rmdir(g_wal);
    snprintf(p, sizeof p, "%s/lock", g_root);
    unlink(p);
    rmdir(g_root);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    pd_log_set_level(getenv("FUZZ_WAL_LOG") ? getenv("FUZZ_WAL_LOG")
                                            : "error"); /* replay warns about every bad record */
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(g_root, sizeof g_root, "%s/pd_fuzz_wal.%d", base, (int)getpid());
    snprintf(g_wal, sizeof g_wal, "%s/wal", g_root);
    if ((mkdir(g_root, 0755) < 0 && errno != EEXIST) || (mkdir(g_wal, 0755) < 0 && errno != EEXIST))
        die("cannot create the work directory", NULL);
    if (build_body() != 0)
        die("cannot build the test profile", NULL);
    atexit(remove_root);
    return 0;
}

/* Writes one segment file from text[0..len), applying flags bits 0-1. */
static void write_segment(uint32_t num, const uint8_t *text, size_t len, uint8_t flags)
{
    size_t hdr = (flags & 2) ? SEG_HDR : 0;
    uint8_t *buf = malloc(hdr + len + 1);
    if (!buf)
        abort();
    if (hdr)
        memcpy(buf, "PDWAL\x01\x00\x00", SEG_HDR);
    if (len)
        memcpy(buf + hdr, text, len);
    size_t n = hdr + len;
    if (flags & 1) {
        size_t off = SEG_HDR;
        while (off + REC_HDR <= n) {
            uint32_t plen = (uint32_t)buf[off + 1] | (uint32_t)buf[off + 2] << 8 |
                            (uint32_t)buf[off + 3] << 16 | (uint32_t)buf[off + 4] << 24;
            if (plen > n - off - REC_HDR)
                break;
            uint32_t crc = pd_crc32c(pd_crc32c(0, &buf[off], 1), buf + off + REC_HDR, plen);
            for (int i = 0; i < 4; i++)
                buf[off + 5 + i] = (uint8_t)(crc >> (8 * i));
            off += REC_HDR + plen;
        }
    }
    char path[600];
    snprintf(path, sizeof path, "%s/%08u", g_wal, num);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(buf, 1, n, f) != n) || fclose(f) != 0)
        die("cannot write a segment", NULL);
    free(buf);
}

/* What a replay gives, to compare two opens. */
typedef struct summary {
    size_t n_series, n_points;
    uint64_t hash; /* over refs, labels, timestamps, totals */
} summary;

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
}

static pd_storage *open_store(uint8_t flags)
{
    pd_storage_options o = pd_storage_options_default();
    pd_storage *s = NULL;
    pd_err err = {{0}};
    o.path = g_root;
    o.fsync = PD_FSYNC_NEVER;
    o.segment_bytes = (flags & 8) ? 64 : 0;
    o.maintenance_ms = -1; /* no thread: the store changes only when this harness says */
    o.retention_ms = -1;   /* fuzzed timestamps span centuries: keep every block */
    o.limits.max_body_bytes = 1u << 20;
    o.limits.max_decompressed_bytes = 4u << 20;
    o.limits.max_samples = o.limits.max_locations = o.limits.max_functions = 100000;
    o.limits.max_strings = 100000;
    o.limits.max_lines = 200000;
    int rc = pd_storage_open(&o, &s, &err);
    if (rc != 0) {
        fprintf(stderr, "open failed with %d\n", rc);
        die("pd_storage_open failed on a corrupt log (it must skip corruption)", &err);
    }
    return s;
}

/* Selects everything, reads every point and profile; checks consistency.
 * decomposed: after pd_storage_maintain, which decomposes the replayed
 * profiles into the head and drops those whose body does not decode, so
 * every profile left must read. */
static summary read_all(pd_storage *s, bool decomposed)
{
    summary sm = {0, 0, 0};
    pd_series_set set;
    pd_err err = {{0}};
    if (pd_storage_select(s, NULL, 0, INT64_MIN, INT64_MAX, &set, &err) != 0)
        die("select failed", &err);
    for (size_t i = 0; i < set.n; i++) {
        const pd_series_info *si = &set.v[i];
        if (i && pd_labels_cmp(&set.v[i - 1].labels, &si->labels) >= 0)
            die("series not sorted by labels or repeated", NULL);
        if (!pd_labels_get(&si->labels, "__name__"))
            die("series without __name__", NULL);
        sm.hash = mix(sm.hash, si->ref);
        sm.hash = mix(sm.hash, pd_labels_hash(&si->labels));
        pd_points pts;
        if (pd_storage_read_points(s, si->ref, INT64_MIN, INT64_MAX, &pts, &err) != 0)
            die("read_points of a selected series failed", &err);
        if (pts.n != si->n_profiles || pts.n == 0 || pts.v[0].ts_ms != si->min_ts ||
            pts.v[pts.n - 1].ts_ms != si->max_ts)
            die("points disagree with the series info", NULL);
        for (size_t k = 0; k < pts.n; k++) {
            const pd_point *pt = &pts.v[k];
            if (k && pts.v[k - 1].ts_ms >= pt->ts_ms)
                die("points not strictly ascending", NULL);
            sm.hash = mix(sm.hash, (uint64_t)pt->ts_ms);
            for (size_t t = 0; t < pt->n_types; t++)
                sm.hash = mix(sm.hash, (uint64_t)pt->totals[t]);
            pd_profile p;
            pd_buf raw;
            pd_buf_init(&raw, 0);
            int rc = pd_storage_read_profile(s, si->ref, pt->ts_ms, &p, &raw, &err);
            if (rc == 0) {
                pd_profile_release(&p);
            } else if (decomposed && rc == PD_ECORRUPT) {
                die("a profile left after the replayed ones were decomposed does not read", &err);
            } else if (rc != PD_ECORRUPT && rc != PD_ETOOBIG) {
                fprintf(stderr, "read_profile returned %d\n", rc);
                die("read_profile of an indexed point failed other than by a bad body", &err);
            }
            pd_buf_release(&raw);
        }
        sm.n_points += pts.n;
        pd_points_release(&pts);
    }
    sm.n_series = set.n;
    pd_series_set_release(&set);
    pd_storage_stats st;
    pd_storage_stats_get(s, &st);
    if (st.n_profiles != sm.n_points || st.n_series < sm.n_series)
        die("stats disagree with what select and read_points give", NULL);
    return sm;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (1u << 20))
        return 0;
    uint8_t flags = data[0];
    const uint8_t *text = data + 1;
    size_t len = size - 1;
    clean_wal();
    const uint8_t *second = NULL;
    size_t len1 = len, len2 = 0;
    if (flags & 4) {
        const uint8_t *m = len >= 6 ? memmem(text, len, "PDSEG2", 6) : NULL;
        if (m) {
            len1 = (size_t)(m - text);
            second = m + 6;
            len2 = len - len1 - 6;
        }
    }
    write_segment(1, text, len1, flags);
    if (second)
        write_segment(2, second, len2, flags);

    pd_storage *s = open_store(flags);
    summary a = read_all(s, false);
    bool appended = false;
    int64_t app_ts = 1700000000000LL;
    if (flags & 16) {
        pd_labels ls;
        pd_err err = {{0}};
        pd_labels_init(&ls);
        if (pd_labels_set(&ls, "__name__", "fuzz", NULL) || pd_labels_set(&ls, "job", "wal", NULL))
            abort();
        int rc = pd_storage_append(s, &ls, app_ts, (const uint8_t *)g_body.data, g_body.len,
                                   &g_prof, &err);
        if (rc == 0)
            appended = true;
        else if (rc != PD_EEXIST && rc != PD_EINVAL) {
            fprintf(stderr, "append returned %d\n", rc);
            die("append after replay failed", &err);
        }
        if (appended)
            a = read_all(s, false);
        pd_labels_release(&ls);
    }
    pd_storage_close(s);

    s = open_store(flags);
    summary b = read_all(s, false);
    if (a.n_series != b.n_series || a.n_points != b.n_points || a.hash != b.hash) {
        fprintf(stderr, "first open: %zu series %zu points; second: %zu series %zu points\n",
                a.n_series, a.n_points, b.n_series, b.n_points);
        die("a second replay of the same log gives another store", NULL);
    }
    /* the maintenance round decomposes the replayed profiles (the thread's
       work after an open; a cut it makes takes them from the WAL): every
       profile left must read */
    pd_err merr = {{0}};
    pd_storage_maintain(s, &merr);
    (void)read_all(s, true);
    if (appended) {
        pd_matcher m;
        pd_series_set set;
        pd_err err = {{0}};
        if (pd_matcher_init(&m, PD_MATCH_EQ, "__name__", "fuzz", NULL) != 0)
            abort();
        if (pd_storage_select(s, &m, 1, app_ts, app_ts, &set, &err) != 0)
            die("select failed", &err);
        bool found = false;
        for (size_t i = 0; i < set.n; i++) {
            const char *job = pd_labels_get(&set.v[i].labels, "job");
            if (set.v[i].labels.n != 2 || !job || strcmp(job, "wal") != 0)
                continue;
            pd_profile p;
            if (pd_storage_read_profile(s, set.v[i].ref, app_ts, &p, NULL, &err) != 0)
                die("appended profile does not read back after reopen", &err);
            if (!pd_profile_equal(&p, &g_prof, &err))
                die("appended profile reads back different", &err);
            pd_profile_release(&p);
            found = true;
        }
        if (!found)
            die("appended profile lost after reopen", NULL);
        pd_series_set_release(&set);
        pd_matcher_release(&m);
    }
    pd_storage_close(s);
    return 0;
}
