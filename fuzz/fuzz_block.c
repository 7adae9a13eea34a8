/*
 * fuzz_block — libFuzzer target for the block readers of the embedded store
 * (src/storage/tsdb/block.c, symbols.c, chunks.c): pd__block_open (meta.json,
 * index, symbols), pd__block_read_points (time chunks), pd__block_read_profile
 * and pd__block_check (value groups, profile rebuild).
 *
 * A valid block is written once at start-up from the real profiles of
 * PD_FUZZ_TESTDATA/go-demo-once and PD_FUZZ_TESTDATA/go-demo-series, two
 * series (PD_FUZZ_TESTDATA: a testdata/pprof folder; default
 * ../shared/testdata/pprof, i.e. run from the repository root). Each input
 * replaces one of its files:
 *   byte 0, bits 0-1: which file — 0 index, 1 symbols, 2 chunks/000001,
 *                     3 meta.json
 *   byte 0, bit 2:    fix checksums — the trailing CRC-32C of index, the
 *                     directory CRCs of symbols (version 3: both copies'),
 *                     or the CRC of every whole frame of the chunks
 *                     file — so that mutations reach the parsers behind them
 *   byte 0, bit 3:    keep meta.json's recorded file size (else it is set to
 *                     the input's size, so the size check does not stop
 *                     every mutation)
 *   byte 0, bit 4:    the input is the block's `aggregates` file instead
 *                     (docs/format/aggregates.md; bits 0-1 and 3 unused, bit
 *                     2 puts this run's block ULID in it and fixes its
 *                     trailing CRC-32C): loaded against the
 *                     valid block (pd__bagg_load), then every series'
 *                     record read (pd__bagg_get, pd__bagg_get_header)
 *   bytes 1..:        the file's new content
 * Every reader must return 0 or an error code (PD_ECORRUPT with a message
 * naming the file): never crash, hang or leak. When the open succeeds, every
 * series' points and every profile are read.
 *
 * Seeds: run with PD_FUZZ_BLOCK_SEEDS=DIR set to write one seed per file
 * kind (the valid files behind their selector byte) into DIR; fuzz/corpus/block
 * holds them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
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
#include "storage/tsdb/block_int.h"
#include "storage/tsdb/blockagg_int.h"

static char g_root[256];  /* /dev/shm/pd_fuzz_block_PID */
static char g_block[400]; /* g_root/<ULID> of the working copy */
static char g_ulid[27];
static const char *NAMES[4] = {"index", "symbols", "chunks/000001", "meta.json"};
static uint8_t *g_orig[4]; /* the valid files */
static size_t g_orig_len[4];
static uint8_t *g_agg; /* the valid aggregates file */
static size_t g_agg_len;

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "fuzz_block: %s%s%s\n", what, msg ? ": " : "", msg ? msg : "");
    abort();
}

static int read_file(const char *path, uint8_t **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *out = malloc((size_t)n + 1);
    if (!*out || fread(*out, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        return -1;
    }
    fclose(f);
    *len = (size_t)n;
    return 0;
}

static void write_file(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n))
        die("cannot write", path);
    fclose(f);
}

static void add_dir(pd_block_writer *w, const char *dir, const char *job)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    int64_t ts = 1000;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 7 || strcmp(de->d_name + l - 6, ".pb.gz"))
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        uint8_t *body;
        size_t len;
        if (read_file(path, &body, &len) < 0)
            continue;
        pd_profile p;
        pd_err err = {{0}};
        if (pd_profile_decode(&p, body, len, NULL, &err) == 0) {
            pd_labels ls;
            pd_labels_init(&ls);
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(strcspn(de->d_name, "-.")), de->d_name);
            pd_labels_set(&ls, "__name__", name, NULL);
            pd_labels_set(&ls, "job", job, NULL);
            pd__block_writer_add(w, &ls, ts, &p, &err);
            ts += 1000;
            pd_labels_release(&ls);
            pd_profile_release(&p);
        }
        free(body);
    }
    closedir(d);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    pd_log_set_level("error"); /* quiet */
    const char *td = getenv("PD_FUZZ_TESTDATA");
    char dir[1024];
    snprintf(g_root, sizeof g_root, "/dev/shm/pd_fuzz_block_%d", (int)getpid());
    mkdir(g_root, 0755);
    pd_block_writer *w;
    if (pd__block_writer_new(NULL, &w) < 0)
        die("writer", NULL);
    snprintf(dir, sizeof dir, "%s/go-demo-once", td ? td : "../shared/testdata/pprof");
    add_dir(w, dir, "once");
    snprintf(dir, sizeof dir, "%s/go-demo-series", td ? td : "../shared/testdata/pprof");
    add_dir(w, dir, "series");
    pd_err err = {{0}};
    if (pd__block_writer_write(w, g_root, g_ulid, &err) < 0)
        die("write the seed block (set PD_FUZZ_TESTDATA to testdata/pprof)", err.msg);
    pd__block_writer_free(w);
    snprintf(g_block, sizeof g_block, "%s/%s", g_root, g_ulid);
    for (int i = 0; i < 4; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", g_block, NAMES[i]);
        if (read_file(path, &g_orig[i], &g_orig_len[i]) < 0)
            die("read back", path);
    }
    { /* the block's valid aggregates file (blockagg.c builds and writes it) */
        pd_block *b = NULL;
        pd_bagg *g = NULL;
        if (pd__block_open(g_block, &b, &err) < 0 || pd__bagg_build(b, NULL, NULL, &g, &err) < 0 ||
            pd__bagg_write(b, g, &err) < 0)
            die("aggregates of the seed block", err.msg);
        pd__bagg_free(g);
        pd__block_close(b);
        char path[600];
        snprintf(path, sizeof path, "%s/" PD_BAGG_FILE, g_block);
        if (read_file(path, &g_agg, &g_agg_len) < 0)
            die("read back", path);
        unlink(path); /* only the inputs that say so have one */
    }
    const char *seeds = getenv("PD_FUZZ_BLOCK_SEEDS");
    if (seeds) {
        mkdir(seeds, 0755);
        static const char *SEED[4] = {"index", "symbols", "chunks", "meta"};
        for (int i = 0; i < 4; i++) {
            char path[1200];
            snprintf(path, sizeof path, "%s/%s", seeds, SEED[i]);
            uint8_t *buf = malloc(g_orig_len[i] + 1);
            buf[0] = (uint8_t)i;
            memcpy(buf + 1, g_orig[i], g_orig_len[i]);
            write_file(path, buf, g_orig_len[i] + 1);
            free(buf);
        }
        char path[1200];
        snprintf(path, sizeof path, "%s/aggregates", seeds);
        uint8_t *buf = malloc(g_agg_len + 1);
        buf[0] = 16 | 4;
        memcpy(buf + 1, g_agg, g_agg_len);
        write_file(path, buf, g_agg_len + 1);
        free(buf);
    }
    return 0;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void fix_crcs(int which, uint8_t *p, size_t n)
{
    if (which == 1 && n >= 16 && (p[4] == 2 || p[4] == 3)) {
        /* symbols v2/v3: the directory's crc32c (over the header as written,
           D and the directory) and, v3, its copy's at the end
           (directory | crc32c | D) */
        uint8_t canon[8] = {'P', 'D', 'S', 'Y', p[4], 0, 0, 0};
        uint32_t dl =
            (uint32_t)p[8] | (uint32_t)p[9] << 8 | (uint32_t)p[10] << 16 | (uint32_t)p[11] << 24;
        if ((uint64_t)dl + 16 <= n)
            put_u32(p + 12 + dl, pd_crc32c(pd_crc32c(0, canon, 8), p + 8, 4 + (size_t)dl));
        uint32_t tl = (uint32_t)p[n - 4] | (uint32_t)p[n - 3] << 8 | (uint32_t)p[n - 2] << 16 |
                      (uint32_t)p[n - 1] << 24;
        if (p[4] == 3 && 2 * (uint64_t)tl + 24 <= n)
            put_u32(p + n - 8,
                    pd_crc32c(pd_crc32c(pd_crc32c(0, canon, 8), p + n - 4, 4), p + n - 8 - tl, tl));
    } else if (which == 0 || which == 1) { /* trailing crc32c of everything before */
        if (n >= 4)
            put_u32(p + n - 4, pd_crc32c(0, p, n - 4));
    } else if (which == 2) { /* frames: u32 len | u8 kind | data | u32 crc(kind+data) */
        size_t off = 8;
        while (off + 9 <= n) {
            uint32_t len = (uint32_t)p[off] | (uint32_t)p[off + 1] << 8 |
                           (uint32_t)p[off + 2] << 16 | (uint32_t)p[off + 3] << 24;
            if ((uint64_t)off + 9 + len > n)
                break;
            put_u32(p + off + 5 + len, pd_crc32c(0, p + off + 4, 1 + (size_t)len));
            off += 9 + len;
        }
    }
}

/* meta.json with files.<name> set to size (the original when it does not parse). */
static void write_meta(int which, size_t size)
{
    char path[600];
    snprintf(path, sizeof path, "%s/meta.json", g_block);
    json_t *m = json_loadb((const char *)g_orig[3], g_orig_len[3], 0, NULL);
    json_t *files = m ? json_object_get(m, "files") : NULL;
    if (!files)
        die("seed meta.json has no files", NULL);
    json_object_set_new(files, NAMES[which], json_integer((json_int_t)size));
    char *s = json_dumps(m, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    write_file(path, (const uint8_t *)s, strlen(s));
    free(s);
    json_decref(m);
}

/* The aggregates file replaced by data[0..n) (fix: its CRC made right). */
static void fuzz_aggregates(const uint8_t *data, size_t n, bool fix)
{
    for (int i = 0; i < 4; i++) { /* the valid block */
        char path[600];
        snprintf(path, sizeof path, "%s/%s", g_block, NAMES[i]);
        write_file(path, g_orig[i], g_orig_len[i]);
    }
    uint8_t *content = malloc(n + 1);
    if (!content)
        return;
    memcpy(content, data, n);
    if (fix && n >= 8 + 26 + 4) /* this run's block ULID (random per process), then the CRC */
        memcpy(content + 8, g_ulid, 26);
    if (fix && n >= 4)
        put_u32(content + n - 4, pd_crc32c(0, content, n - 4));
    char path[600];
    snprintf(path, sizeof path, "%s/" PD_BAGG_FILE, g_block);
    write_file(path, content, n);
    free(content);
    pd_err err = {{0}};
    pd_block *b = NULL;
    if (pd__block_open(g_block, &b, &err) < 0)
        die("the valid block does not open", err.msg);
    pd_bagg *g = NULL;
    int rc = pd__bagg_load(b, &g, &err);
    if (rc == 0) {
        pd_bagg_scratch sc = {0};
        for (uint32_t id = 0; id < pd__block_n_series(b) + 1; id++) {
            pd_bagg_rec r;
            if (pd__bagg_get_header(g, id, &r, &sc) > 0 && r.h.n_sample)
                die("a record header with entries", NULL);
            if (pd__bagg_get(g, id, &r, &sc) < 0)
                die("pd__bagg_get failed on a verified file", NULL);
        }
        pd__bagg_scratch_release(&sc);
        pd__bagg_free(g);
    } else if (rc > 0) {
        die("pd__bagg_load returned a positive code", err.msg);
    }
    pd__block_close(b);
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 16) {
        fuzz_aggregates(data + 1, size - 1, data[0] & 4);
        return 0;
    }
    int which = data[0] & 3;
    bool fix = data[0] & 4, keep_size = data[0] & 8;
    size_t n = size - 1;
    uint8_t *content = malloc(n + 1);
    if (!content)
        return 0;
    memcpy(content, data + 1, n);
    if (fix)
        fix_crcs(which, content, n);
    /* restore the valid block, then put the input in place of one file */
    for (int i = 0; i < 4; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", g_block, NAMES[i]);
        write_file(path, g_orig[i], g_orig_len[i]);
    }
    char path[600];
    snprintf(path, sizeof path, "%s/%s", g_block, NAMES[which]);
    write_file(path, content, n);
    if (which != 3 && !keep_size)
        write_meta(which, n);
    free(content);

    pd_err err = {{0}};
    pd_block *b = NULL;
    int rc = pd__block_open(g_block, &b, &err);
    if (rc == 0) {
        size_t ns = pd__block_n_series(b);
        for (uint32_t id = 0; id < ns; id++) {
            pd_points pts;
            if (pd__block_read_points(b, id, INT64_MIN, INT64_MAX, &pts, &err) < 0)
                continue;
            for (size_t i = 0; i < pts.n; i++) {
                pd_profile p;
                if (pd__block_read_profile(b, id, pts.v[i].ts_ms, &p, &err) == 0) {
                    pd_buf out;
                    pd_buf_init(&out, 0);
                    pd_profile_encode(&p, true, &out); /* a rebuilt profile encodes */
                    pd_buf_release(&out);
                    pd_profile_release(&p);
                }
            }
            pd_points_release(&pts);
        }
        pd__block_close(b);
    } else if (rc != PD_ECORRUPT && rc != PD_ENOMEM && rc > -4096) {
        if (rc >= 0)
            die("open returned a positive code", err.msg);
    }
    rc = pd__block_check(g_block, NULL, &err);
    if (rc > 0)
        die("check returned a positive code", err.msg);
    return 0;
}
