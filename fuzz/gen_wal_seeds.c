/*
 * gen_wal_seeds — writes the seed corpus of fuzz_wal (fuzz/corpus/wal) from
 * WAL segments made by the store itself (pd_storage_append), so the seeds are
 * real logs: SERIES and PROFILE records with real pprof bodies.
 *
 *   gen_wal_seeds OUTDIR PPROF_DIR
 *
 * PPROF_DIR is ../shared/testdata/pprof/go-demo-once (small real profiles).
 * Each seed is fuzz_wal's flags byte followed by segment bytes (see the top
 * of fuzz_wal.c for the flags). Exit code 0 on success, 1 on failure.
 */
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/labels.h"
#include "base/log.h"
#include "pprof/pprof.h"
#include "storage/storage.h"

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int read_file(const char *path, uint8_t **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t cap = 1 << 16, n = 0;
    uint8_t *b = malloc(cap);
    for (;;) {
        if (n == cap)
            b = realloc(b, cap *= 2);
        size_t r = fread(b + n, 1, cap - n, f);
        if (r == 0)
            break;
        n += r;
    }
    fclose(f);
    *data = b;
    *len = n;
    return 0;
}

/* Appends PPROF_DIR/file as series {__name__=name, job=job} at ts. */
static int add(pd_storage *st, const char *dir, const char *file, const char *name, const char *job,
               int64_t ts)
{
    char path[1024];
    uint8_t *body;
    size_t len;
    pd_profile p;
    pd_labels ls;
    pd_err err = {{0}};
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (read_file(path, &body, &len) != 0) {
        fprintf(stderr, "cannot read %s\n", path);
        return -1;
    }
    if (pd_profile_decode(&p, body, len, NULL, &err) != 0) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return -1;
    }
    pd_labels_init(&ls);
    pd_labels_set(&ls, "__name__", name, NULL);
    pd_labels_set(&ls, "job", job, NULL);
    pd_labels_set(&ls, "instance", "127.0.0.1:6060", NULL);
    int rc = pd_storage_append(st, &ls, ts, body, len, &p, &err);
    if (rc != 0)
        fprintf(stderr, "append %s: %s\n", path, err.msg);
    pd_labels_release(&ls);
    pd_profile_release(&p);
    free(body);
    return rc;
}

/* Writes flags + the given segments (joined with "PDSEG2") to OUTDIR/name. */
static int emit(const char *outdir, const char *name, uint8_t flags, const char *store, int nseg,
                size_t skip_hdr)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", outdir, name);
    FILE *out = fopen(path, "wb");
    if (!out)
        return -1;
    fputc(flags, out);
    for (int i = 1; i <= nseg; i++) {
        char seg[1024];
        uint8_t *d;
        size_t n;
        snprintf(seg, sizeof seg, "%s/wal/%08d", store, i);
        if (read_file(seg, &d, &n) != 0) {
            fclose(out);
            return -1;
        }
        if (i > 1)
            fwrite("PDSEG2", 1, 6, out);
        fwrite(d + skip_hdr, 1, n - skip_hdr, out);
        free(d);
    }
    return fclose(out);
}

static pd_storage *open_at(const char *path, size_t seg_bytes)
{
    pd_storage_options o = pd_storage_options_default();
    pd_storage *st;
    pd_err err = {{0}};
    o.path = path;
    o.fsync = PD_FSYNC_NEVER;
    o.segment_bytes = seg_bytes;
    o.retention_ms = -1; /* fixed times from 2023: no lower time bound, no retention */
    if (pd_storage_open(&o, &st, &err) != 0) {
        fprintf(stderr, "open %s: %s\n", path, err.msg);
        return NULL;
    }
    return st;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: gen_wal_seeds OUTDIR PPROF_DIR\n");
        return 2;
    }
    const char *out = argv[1], *dir = argv[2];
    char tmpl[] = "/tmp/pd_wal_seeds.XXXXXX";
    if (!mkdtemp(tmpl))
        return 1;
    pd_log_set_level("error");
    char one[600], many[600], two[600];
    snprintf(one, sizeof one, "%s/one", tmpl);
    snprintf(many, sizeof many, "%s/many", tmpl);
    snprintf(two, sizeof two, "%s/two", tmpl);
    int rc = 0;

    /* one series, one profile */
    pd_storage *st = open_at(one, 0);
    rc |= !st || add(st, dir, "mutex.pb.gz", "mutex", "demo", 1700000000000LL);
    pd_storage_close(st);
    /* three series, two profiles each, one segment */
    st = open_at(many, 0);
    rc |= !st;
    for (int i = 0; i < 2 && st; i++) {
        rc |= add(st, dir, "mutex.pb.gz", "mutex", "demo", 1700000000000LL + i * 10000);
        rc |=
            add(st, dir, "threadcreate.pb.gz", "threadcreate", "demo", 1700000000000LL + i * 10000);
        rc |= add(st, dir, "block.pb.gz", "block", "api", 1700000000000LL + i * 10000);
    }
    pd_storage_close(st);
    /* two segments (segment_bytes 64: every append rolls) */
    st = open_at(two, 64);
    rc |= !st || add(st, dir, "mutex.pb.gz", "mutex", "demo", 1700000000000LL) ||
          add(st, dir, "threadcreate.pb.gz", "mutex", "demo", 1700000010000LL);
    pd_storage_close(st);
    if (rc) {
        fprintf(stderr, "building the stores failed\n");
        nftw(tmpl, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
        return 1;
    }
    mkdir(out, 0755);
    rc |= emit(out, "one-raw", 0x00, one, 1, 0);
    rc |= emit(out, "one-fixcrc", 0x01, one, 1, 0);
    rc |= emit(out, "one-append", 0x11, one, 1, 0);
    rc |= emit(out, "many-raw", 0x00, many, 1, 0);
    rc |= emit(out, "many-hdr-fixcrc", 0x03, many, 1, 8);
    rc |= emit(out, "many-small-segments-append", 0x19, many, 1, 0);
    rc |= emit(out, "two-segments", 0x05, two, 2, 0);
    rc |= emit(out, "two-segments-hdr-append", 0x17, two, 2, 8);
    nftw(tmpl, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    if (rc)
        fprintf(stderr, "writing the seeds failed\n");
    return rc ? 1 : 0;
}
