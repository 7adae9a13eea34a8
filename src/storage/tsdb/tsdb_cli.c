/*
 * storage/tsdb/tsdb_cli.c — `profd tsdb import|analyze|check|repair` (usage in
 * tsdb_cli_int.h). Works on block directories (block_int.h) directly, with
 * no running store. The commands that write into a store (import, repair)
 * take its lock (DIR/lock, pd__tsdb_lock_store) as the server does, so they
 * refuse a store a running profd has open; analyze and check only read.
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/labels.h"
#include "base/time.h"
#include "base/varint.h"
#include "storage/tsdb/block_int.h"
#include "storage/tsdb/db_int.h"
#include "storage/tsdb/head_int.h"
#include "storage/tsdb/tsdb_cli_int.h"
#include "storage/tsdb/wal_int.h"

#define MAX_FILE_BYTES (64u << 20)

static const char usage_tsdb[] =
    "usage: profd tsdb COMMAND [flags] ...   tools for the embedded store, offline\n"
    "  import   write pprof files into a store as one block\n"
    "  analyze  blocks, series, profiles and bytes by part of a store or block\n"
    "  check    verify every checksum and reference; name each damaged file\n"
    "  repair   rebuild damaged blocks from what verifies\n"
    "Each takes -h/--help: profd tsdb COMMAND --help.\n";

static const char usage_import[] =
    "usage: profd tsdb import --storage.path=DIR [--label k=v ...]\n"
    "                         [--storage.retention.time=15d] [--storage.future-grace=10m]\n"
    "                         FILE|DIR...\n"
    "  Decodes every pprof file (directories: every file below them) and writes\n"
    "  them as one block into the store at DIR. A profile's time is its\n"
    "  time_nanos, else the file's modification time; its type (__name__), unless\n"
    "  --label __name__=T, is guessed as `profd push` guesses it (block and mutex\n"
    "  profiles told apart by the file name). Profiles outside the retention\n"
    "  window the server keeps are refused: give it the server's flags.\n"
    "  The store must not be open: a running profd holds DIR/lock and import\n"
    "  refuses it (exit 1); stop profd, or push the files with `profd push`.\n"
    "  Exit: 0 imported, 1 nothing imported or the store is locked, 2 usage.\n";

static const char usage_analyze[] =
    "usage: profd tsdb analyze DIR\n"
    "  DIR is a storage path or one block directory: blocks, series, profiles,\n"
    "  bytes by part (index, symbols, time chunks, value chunks), bytes per\n"
    "  profile, the largest series. Reads only (a running profd may hold DIR).\n";

static const char usage_check[] =
    "usage: profd tsdb check DIR\n"
    "  Verifies every checksum and reference of every block, every WAL segment\n"
    "  and DIR/series; names the file and offset of each corruption. Reads only.\n"
    "  Exit: 0 no corruption, 1 corruption found, 2 usage.\n";

static const char usage_repair[] =
    "usage: profd tsdb repair DIR\n"
    "  Rewrites every block that fails `profd tsdb check` (or is marked\n"
    "  compaction.failed) from what verifies, moves the originals to\n"
    "  DIR/repair-<UTC time>/ and prints every dropped series and profile.\n"
    "  Takes the store's lock: stop profd first (exit 1 while it runs).\n";

/* A usage error: what was wrong (when given), the command's usage, exit 2. */
static int usage_to(const char *text)
{
    fputs(text, stderr);
    return 2;
}

static int usage(void)
{
    return usage_to(usage_import);
}

static bool is_help(const char *a)
{
    return !strcmp(a, "-h") || !strcmp(a, "--help") || !strcmp(a, "-help");
}

/* ---- import ---- */

typedef struct import_ctx {
    pd_block_writer *w;
    const pd_labels *labels;
    size_t ok, skipped;
    pd_storage_options bounds; /* retention_ms, future_grace_ms (the serve flags) */
    int64_t now_ms;
} import_ctx;

static int import_file(import_ctx *c, const char *path, const struct stat *st)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "skip %s: %s\n", path, strerror(errno));
        c->skipped++;
        return 0;
    }
    if ((uint64_t)st->st_size > MAX_FILE_BYTES) {
        fprintf(stderr, "skip %s: %lld bytes, over the cap of %u\n", path, (long long)st->st_size,
                MAX_FILE_BYTES);
        fclose(f);
        c->skipped++;
        return 0;
    }
    size_t len = (size_t)st->st_size;
    uint8_t *b = malloc(len + 1);
    if (!b) {
        fclose(f);
        return PD_ENOMEM;
    }
    size_t got = fread(b, 1, len, f);
    fclose(f);
    pd_profile p;
    pd_err err;
    if (got != len || pd_profile_decode(&p, b, len, NULL, &err)) {
        fprintf(stderr, "skip %s: %s\n", path, got != len ? "short read" : err.msg);
        free(b);
        c->skipped++;
        return 0;
    }
    free(b);
    int64_t ts = p.time_nanos ? p.time_nanos / 1000000
                              : (int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000;
    if (pd_storage_options_check_time(&c->bounds, c->now_ms, ts, &err) < 0) {
        /* a profile the server would delete at once, or one that would
           age everything else out: refused as the server refuses it */
        fprintf(stderr, "skip %s: %s\n", path, err.msg);
        pd_profile_release(&p);
        c->skipped++;
        return 0;
    }
    pd_labels l;
    int rc = pd_labels_copy(&l, c->labels);
    if (!rc && !pd_labels_get(&l, "__name__"))
        rc = pd_labels_set(&l, "__name__", pd_profile_guess_type(&p, path), &err);
    if (!rc) {
        rc = pd__block_writer_add(c->w, &l, ts, &p, &err);
        if (rc == PD_EEXIST || rc == PD_EINVAL) {
            fprintf(stderr, "skip %s: %s\n", path, err.msg);
            c->skipped++;
            rc = 0;
        } else if (!rc) {
            c->ok++;
        } else {
            fprintf(stderr, "import %s: %s\n", path, err.msg[0] ? err.msg : pd_strerror(rc));
        }
    }
    pd_labels_release(&l);
    pd_profile_release(&p);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int import_path(import_ctx *c, const char *path, int depth)
{
    struct stat st;
    if (stat(path, &st)) {
        fprintf(stderr, "skip %s: %s\n", path, strerror(errno));
        c->skipped++;
        return 0;
    }
    if (!S_ISDIR(st.st_mode))
        return S_ISREG(st.st_mode) ? import_file(c, path, &st) : 0;
    if (depth > 16)
        return 0;
    DIR *d = opendir(path);
    if (!d) {
        fprintf(stderr, "skip %s: %s\n", path, strerror(errno));
        c->skipped++;
        return 0;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn) {
                rc = PD_ENOMEM;
                break;
            }
            names = nn;
        }
        size_t l = strlen(path) + strlen(e->d_name) + 2;
        if (!(names[n] = malloc(l))) {
            rc = PD_ENOMEM;
            break;
        }
        snprintf(names[n++], l, "%s/%s", path, e->d_name);
    }
    closedir(d);
    if (!rc)
        qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        if (!rc)
            rc = import_path(c, names[i], depth + 1);
        free(names[i]);
    }
    free(names);
    return rc;
}

static int cmd_import(int argc, char **argv)
{
    const char *out = NULL;
    pd_labels labels;
    pd_err err;
    int rc = 0, first = -1;
    pd_labels_init(&labels);
    pd_storage_options bounds = pd_storage_options_default();
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        int64_t *dur = !strncmp(a, "--storage.retention.time", 24) ? &bounds.retention_ms
                       : !strncmp(a, "--storage.future-grace", 22) ? &bounds.future_grace_ms
                                                                   : NULL;
        if (dur) {
            const char *eq = strchr(a, '=');
            const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v || pd_parse_duration(v, dur, &err) < 0 || *dur <= 0) {
                fprintf(stderr, "%.*s: \"%s\" is not a duration above 0 (e.g. 15d)\n",
                        eq ? (int)(eq - a) : (int)strlen(a), a, v ? v : "");
                rc = usage();
                goto out;
            }
        } else if (!strncmp(a, "--storage.path=", 15))
            out = a + 15;
        else if (!strcmp(a, "--storage.path") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(a, "--label") || !strncmp(a, "--label=", 8)) {
            const char *kv = a[7] == '=' ? a + 8 : (i + 1 < argc ? argv[++i] : NULL);
            const char *eq = kv ? strchr(kv, '=') : NULL;
            if (!eq) {
                fprintf(stderr, "--label wants k=v\n");
                rc = 2;
                goto out;
            }
            char name[PD_LABEL_MAX_NAME + 1];
            snprintf(name, sizeof name, "%.*s", (int)(eq - kv), kv);
            if (pd_labels_set(&labels, name, eq + 1, &err)) {
                fprintf(stderr, "--label %s: %s\n", kv, err.msg);
                rc = 2;
                goto out;
            }
        } else if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "unknown flag %s\n", a);
            rc = usage();
            goto out;
        } else {
            first = i;
            break;
        }
    }
    if (!out || first < 0) {
        rc = usage();
        goto out;
    }
    if (mkdir(out, 0755) && errno != EEXIST) {
        fprintf(stderr, "mkdir %s: %s\n", out, strerror(errno));
        rc = 1;
        goto out;
    }
    int lock_fd = -1;
    if (pd__tsdb_lock_store(out, &lock_fd, &err) < 0) {
        fprintf(stderr, "profd tsdb import: %s%s\n", err.msg,
                strstr(err.msg, "in use") ? ": stop the profd serving it first, or push the "
                                            "profiles to it with `profd push`"
                                          : "");
        rc = 1;
        goto out;
    }
    import_ctx c = {0};
    c.labels = &labels;
    c.bounds = bounds;
    c.now_ms = pd_now_ms();
    if (pd__block_writer_new(NULL, &c.w)) {
        close(lock_fd);
        rc = 1;
        goto out;
    }
    for (int i = first; i < argc && !rc; i++)
        if (argv[i][0] == '-' && argv[i][1] == '-') {
            fprintf(stderr, "flags go before the files: %s\n", argv[i]);
            rc = PD_EINVAL;
        } else {
            rc = import_path(&c, argv[i], 0);
        }
    char id[27];
    if (!rc && !c.ok) {
        fprintf(stderr, "no profiles imported (%zu skipped)\n", c.skipped);
        rc = 1;
    } else if (!rc && (rc = pd__block_writer_write(c.w, out, id, &err))) {
        fprintf(stderr, "writing the block: %s\n", err.msg);
    } else if (!rc) {
        printf("imported %zu profiles (%zu skipped) into block %s/%s\n", c.ok, c.skipped, out, id);
    }
    pd__block_writer_free(c.w);
    if (rc < 0)
        rc = 1;
    close(lock_fd); /* releases the lock */
out:
    pd_labels_release(&labels);
    return rc;
}

/* ---- block discovery ---- */

static bool is_ulid(const char *s)
{
    if (strlen(s) != 26)
        return false;
    for (; *s; s++)
        if (!strchr("0123456789ABCDEFGHJKMNPQRSTVWXYZ", *s))
            return false;
    return true;
}

/* Block directories under dir (or dir itself when it holds meta.json), sorted. */
static int list_blocks(const char *dir, char ***out, size_t *n)
{
    char p[4200];
    struct stat st;
    *out = NULL;
    *n = 0;
    snprintf(p, sizeof p, "%s/meta.json", dir);
    if (!stat(p, &st)) {
        *out = malloc(sizeof **out);
        if (!*out || !((*out)[0] = strdup(dir)))
            return PD_ENOMEM;
        *n = 1;
        return 0;
    }
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    struct dirent *e;
    size_t cap = 0;
    while ((e = readdir(d))) {
        if (!is_ulid(e->d_name)) {
            if (strstr(e->d_name, ".tmp"))
                fprintf(stderr, "note: %s/%s is an unfinished block (ignored)\n", dir, e->d_name);
            continue;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            char **nn = realloc(*out, cap * sizeof *nn);
            if (!nn) {
                closedir(d);
                return PD_ENOMEM;
            }
            *out = nn;
        }
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (!((*out)[(*n)++] = strdup(p))) {
            closedir(d);
            return PD_ENOMEM;
        }
    }
    closedir(d);
    if (*n > 1)
        qsort(*out, *n, sizeof **out, cmp_str);
    return 0;
}

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* ---- analyze ---- */

typedef struct sz {
    uint64_t bytes, n;
    char *name;
} sz;

static int sz_cmp(const void *a, const void *b)
{
    const sz *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

static double per(uint64_t a, uint64_t n)
{
    return n ? (double)a / (double)n : 0;
}

static int cmd_analyze(int argc, char **argv)
{
    if (argc != 3)
        return usage_to(usage_analyze);
    char **blocks;
    size_t nb;
    int rc = list_blocks(argv[2], &blocks, &nb);
    if (rc) {
        fprintf(stderr, "%s: %s\n", argv[2], pd_strerror(rc));
        return 1;
    }
    uint64_t T[6] = {0}, np = 0, ns = 0;
    sz *top = NULL;
    size_t ntop = 0;
    int bad = 0;
    for (size_t i = 0; i < nb; i++) {
        pd_block *b;
        pd_err err;
        if (pd__block_open(blocks[i], &b, &err)) {
            fprintf(stderr, "block %s: %s\n", blocks[i], err.msg);
            bad = 1;
            continue;
        }
        const pd_block_meta *m = pd__block_meta(b);
        uint64_t total = m->meta_bytes + m->index_bytes + m->symbols_bytes + m->chunks_bytes;
        printf("block %s  [%lld, %lld] ms  series %llu  profiles %llu  samples %llu  stacks %s\n",
               m->ulid, (long long)m->min_t, (long long)m->max_t, (unsigned long long)m->n_series,
               (unsigned long long)m->n_profiles, (unsigned long long)m->n_samples,
               m->stack_format == PD_STACKS_TREE ? "tree" : "list");
        printf("  bytes: total %llu (%.1f/profile) = index %llu + symbols %llu + time chunks %llu "
               "+ value chunks %llu + meta %llu + chunk file header %llu\n",
               (unsigned long long)total, per(total, m->n_profiles),
               (unsigned long long)m->index_bytes, (unsigned long long)m->symbols_bytes,
               (unsigned long long)m->time_bytes, (unsigned long long)m->value_bytes,
               (unsigned long long)m->meta_bytes,
               (unsigned long long)(m->chunks_bytes - m->time_bytes - m->value_bytes));
        printf("  symbols: strings %llu, mappings %llu, functions %llu, locations %llu, stacks "
               "%llu, label sets %llu\n",
               (unsigned long long)m->n_strings, (unsigned long long)m->n_mappings,
               (unsigned long long)m->n_functions, (unsigned long long)m->n_locations,
               (unsigned long long)m->n_stacks, (unsigned long long)m->n_label_sets);
        T[0] += total;
        T[1] += m->index_bytes;
        T[2] += m->symbols_bytes;
        T[3] += m->time_bytes;
        T[4] += m->value_bytes;
        T[5] += m->meta_bytes;
        np += m->n_profiles;
        ns += m->n_series;
        for (uint32_t s = 0; s < pd__block_n_series(b); s++) {
            int64_t a, z;
            uint64_t n, tb, vb;
            pd__block_series_info(b, s, &a, &z, &n, &tb, &vb);
            sz *nt = realloc(top, (ntop + 1) * sizeof *nt);
            if (!nt)
                break;
            top = nt;
            pd_buf lb;
            pd_buf_init(&lb, 0);
            pd_labels_format(pd__block_series_labels(b, s), &lb);
            top[ntop++] = (sz){tb + vb, n, pd_buf_detach(&lb, NULL)};
        }
        pd__block_close(b);
    }
    printf("total: blocks %zu, series %llu, profiles %llu, bytes %llu, %.1f bytes/profile\n", nb,
           (unsigned long long)ns, (unsigned long long)np, (unsigned long long)T[0], per(T[0], np));
    printf("  per profile: index %.1f, symbols %.1f, time chunks %.1f, value chunks %.1f, meta "
           "%.1f\n",
           per(T[1], np), per(T[2], np), per(T[3], np), per(T[4], np), per(T[5], np));
    qsort(top, ntop, sizeof *top, sz_cmp);
    printf("top series by chunk bytes:\n");
    for (size_t i = 0; i < ntop; i++) {
        if (i < 10)
            printf("  %10llu B  %6llu profiles  %8.1f B/profile  %s\n",
                   (unsigned long long)top[i].bytes, (unsigned long long)top[i].n,
                   per(top[i].bytes, top[i].n), top[i].name ? top[i].name : "?");
        free(top[i].name);
    }
    free(top);
    free_list(blocks, nb);
    return bad;
}

/* ---- check ---- */

/* A read-only walk of a file of WAL framing (docs/format/wal.md): the 8-byte
 * segment header, then records type | length | crc32c(type + payload) |
 * payload. PROFILE payloads are parsed (ref, ts, sample types, totals, body)
 * and their pprof body decoded and its totals compared; SERIES payloads are
 * parsed. Prints what it finds; returns 1 on corruption, else 0. A torn last
 * record of the newest segment (a crash while appending; never
 * acknowledged, cut off at open) is reported but is not corruption when
 * `last` is set. *n_prof counts the profile records. */
/* Reads a varint at *p (before end), advancing *p. false when bad. */
static bool vget(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    size_t n = pd_varint_get(*p, (size_t)(end - *p), v);
    *p += n;
    return n > 0;
}

/* wi (may be NULL) receives what continuity needs: the header version, whether
 * the last record is an END (segments) and the CHECKPOINT's first segment
 * (the series file; 0 = none). series_file: the file is PATH/series. */
typedef struct wal_file_info {
    int version;
    bool ended;
    uint32_t first_seg;
    uint64_t size;
} wal_file_info;

/* One damaged record found by check_wal_file. */
typedef struct wal_damage {
    uint64_t off, next;   /* where it is; where the walk resumed (the file's size: nowhere) */
    uint64_t good_before; /* records that verified before it */
    bool content;         /* the record's framing verifies, its payload does not */
    char why[160];
} wal_damage;

static int check_wal_file(const char *path, bool last, bool series_file, uint64_t *n_prof,
                          wal_file_info *wi)
{
    wal_file_info dummy;
    if (!wi)
        wi = &dummy;
    memset(wi, 0, sizeof *wi);
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) < 0) {
        printf("CORRUPT %s: %s\n", path, strerror(errno));
        if (f)
            fclose(f);
        return 1;
    }
    /* the whole file: damage is skipped as replay skips it, to the next
       record that verifies (pd__wal_resync), so every damaged record is
       listed, with the count of good records after it */
    size_t size = (size_t)st.st_size;
    uint8_t *data = malloc(size + 1);
    if (!data || fread(data, 1, size, f) != size) {
        printf("CORRUPT %s: %s\n", path, data ? "short read" : "out of memory reading it");
        free(data);
        fclose(f);
        return 1;
    }
    fclose(f);
    if (size < PD_WAL_SEG_HDR || memcmp(data, PD_WAL_MAGIC, 5) || data[5] < 1 ||
        data[5] > PD_WAL_VERSION) {
        bool torn = last && size < PD_WAL_SEG_HDR;
        printf("%s %s offset 0: bad segment header\n", torn ? "TORN" : "CORRUPT", path);
        free(data);
        return torn ? 0 : 1;
    }
    wi->version = data[5];
    uint64_t off = PD_WAL_SEG_HDR, good = 0, end_ok = off;
    wal_damage *dm = NULL;
    size_t n_dm = 0, cap_dm = 0;
    int bad = 0;
    bool torn_tail = false;
    while (off < size) {
        const uint8_t *rh = data + off;
        uint32_t len = 0, crc = 0;
        const char *why = NULL;
        char whyb[160];
        if (size - off < PD_WAL_REC_HDR) {
            why = "truncated record header";
        } else {
            len = (uint32_t)rh[1] | (uint32_t)rh[2] << 8 | (uint32_t)rh[3] << 16 |
                  (uint32_t)rh[4] << 24;
            crc = (uint32_t)rh[5] | (uint32_t)rh[6] << 8 | (uint32_t)rh[7] << 16 |
                  (uint32_t)rh[8] << 24;
            if (rh[0] == 0 ||
                (series_file ? rh[0] != PD_WAL_REC_SERIES &&
                                   !(rh[0] == PD_WAL_REC_CHECKPOINT && off == PD_WAL_SEG_HDR)
                             : rh[0] > PD_WAL_REC_MAX))
                why = "bad record type";
            else if (wi->ended)
                why = "record after the segment's end record";
            else if (len > PD_WAL_MAX_RECORD)
                why = "record length over the cap";
            else if (len > size - off - PD_WAL_REC_HDR)
                why = "truncated payload";
            else if (pd_crc32c(pd_crc32c(0, rh, 1), rh + PD_WAL_REC_HDR, len) != crc)
                why = "CRC mismatch";
        }
        uint64_t next = 0;
        bool framing = why != NULL;
        if (why) {
            next = pd__wal_resync(data, size, (size_t)off + 1, series_file);
            if (next >= size && last && strstr(why, "truncated")) {
                /* the end of the newest segment: a torn append, cut at open */
                printf("TORN %s offset %llu: %s (never acknowledged; cut off at open)\n", path,
                       (unsigned long long)off, why);
                torn_tail = true;
                break;
            }
        } else {
            /* payload */
            uint8_t *buf = data + off; /* type, then the payload: as the CRC covers it */
            const uint8_t *p = buf + PD_WAL_REC_HDR, *end = p + len;
            uint64_t v = 0, k = 0;
            next = off + PD_WAL_REC_HDR + len;
            if (rh[0] == PD_WAL_REC_END || rh[0] == PD_WAL_REC_CHECKPOINT) {
                uint32_t x = len == 4 ? (uint32_t)p[0] | (uint32_t)p[1] << 8 |
                                            (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
                                      : 0;
                if (!x)
                    why = rh[0] == PD_WAL_REC_END ? "bad end record" : "bad checkpoint record";
                else if (rh[0] == PD_WAL_REC_END)
                    wi->ended = true;
                else
                    wi->first_seg = x;
            } else if (rh[0] == PD_WAL_REC_PROFILE) {
                (*n_prof)++;
                pd_profile_rec pr;
                int prc = pd__profile_rec_parse(p, len, &pr, &why);
                if (prc == PD_ENOMEM)
                    why = "out of memory parsing a PROFILE record";
                if (prc == 0) {
                    pd_profile prof;
                    pd_err e;
                    e.msg[0] = 0;
                    if (pd_profile_decode(&prof, p + pr.body_off, pr.body_len, NULL, &e) < 0) {
                        snprintf(whyb, sizeof whyb, "stored profile does not decode: %.100s",
                                 e.msg);
                        why = whyb;
                    } else {
                        if (prof.n_sample_type != pr.k)
                            why = "sample type count differs from the body";
                        int64_t *t2 = calloc(pr.k + 1, sizeof *t2);
                        if (!why && t2) {
                            pd_profile_totals(&prof, t2);
                            for (size_t i = 0; i < pr.k && !why; i++)
                                if (t2[i] != pr.totals[i])
                                    why = "totals differ from the body";
                        }
                        free(t2);
                        pd_profile_release(&prof);
                    }
                    pd__profile_rec_release(&pr);
                }
            } else { /* SERIES: ref u64, varint n, n x (str, str) */
                if (len < 8)
                    why = "bad SERIES record";
                else
                    p += 8;
                if (!why && !vget(&p, end, &k))
                    why = "bad SERIES record";
                for (uint64_t i = 0; !why && i < 2 * k; i++)
                    if (!vget(&p, end, &v) || v > (uint64_t)(end - p))
                        why = "bad label string in a SERIES record";
                    else
                        p += v;
            }
            if (!why) {
                good++;
                end_ok = next;
            }
        }
        if (why) {
            bad = 1;
            if (n_dm == cap_dm) {
                size_t nc = cap_dm ? 2 * cap_dm : 8;
                wal_damage *nd = realloc(dm, nc * sizeof *nd);
                if (!nd) {
                    printf("CORRUPT %s offset %llu: %s (out of memory listing more)\n", path,
                           (unsigned long long)off, why);
                    break;
                }
                dm = nd;
                cap_dm = nc;
            }
            wal_damage *d = &dm[n_dm++];
            d->off = off;
            d->next = next;
            d->good_before = good;
            d->content = !framing;
            snprintf(d->why, sizeof d->why, "%s", why);
            if (framing && next >= size)
                break;
        }
        off = next;
    }
    /* every damaged record, and what replay keeps after it */
    for (size_t i = 0; i < n_dm; i++) {
        const wal_damage *d = &dm[i];
        if (d->content)
            printf("CORRUPT %s offset %llu: %s (the record verifies but its content does not; "
                   "%llu good records after it)\n",
                   path, (unsigned long long)d->off, d->why,
                   (unsigned long long)(good - d->good_before));
        else if (d->next >= size)
            printf("CORRUPT %s offset %llu: %s (no valid record after it: the rest of the file, "
                   "%llu bytes, is lost)\n",
                   path, (unsigned long long)d->off, d->why, (unsigned long long)(size - d->off));
        else
            printf("CORRUPT %s offset %llu: %s (%llu bytes skipped to the next valid record at "
                   "offset %llu; %llu good records after it)\n",
                   path, (unsigned long long)d->off, d->why, (unsigned long long)(d->next - d->off),
                   (unsigned long long)d->next, (unsigned long long)(good - d->good_before));
    }
    wi->size = torn_tail ? off : end_ok; /* where the intact part ends */
    free(dm);
    free(data);
    return bad;
}

/* Checks DIR/series and every DIR/wal segment. 1 on corruption. */
static int check_wal(const char *dir)
{
    char path[4400];
    int bad = 0;
    uint64_t n_prof = 0;
    snprintf(path, sizeof path, "%s/series", dir);
    struct stat st;
    bool have_series = stat(path, &st) == 0;
    wal_file_info si = {0};
    if (have_series)
        bad |= check_wal_file(path, false, true, &n_prof, &si);
    snprintf(path, sizeof path, "%s/wal", dir);
    DIR *d = opendir(path);
    if (!d)
        return bad;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strlen(de->d_name) != 8 || strspn(de->d_name, "0123456789") != 8)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn)
                break;
            names = nn;
        }
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    if (n > 1)
        qsort(names, n, sizeof *names, cmp_str);
    /* segment numbers are contiguous (the checkpoint removes the oldest
       only); SERIES records of removed segments live in DIR/series */
    unsigned long prev = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned long v = names[i] ? strtoul(names[i], NULL, 10) : 0;
        if (!v)
            continue;
        if (prev && v != prev + 1) {
            printf("CORRUPT %s/wal/%08lu: missing segment (%lu missing between %08lu and "
                   "%08lu); its records are lost\n",
                   dir, prev + 1, v - prev - 1, prev, v);
            bad = 1;
        }
        if (!prev && v > 1 && !have_series) {
            printf("CORRUPT %s/series: missing, while the WAL starts at segment %08lu (the "
                   "series of removed segments are lost)\n",
                   dir, v);
            bad = 1;
        }
        prev = v;
    }
    /* the checkpoint removed only the segments before si.first_seg */
    unsigned long lowest = n && names[0] ? strtoul(names[0], NULL, 10) : 0;
    if (si.first_seg && (!lowest || lowest > si.first_seg)) {
        printf("CORRUPT %s/wal/%08u: missing segment (the oldest %lu segments are gone: "
               "%s/series offset %d says the WAL starts at %08u); their records are lost\n",
               dir, si.first_seg, lowest ? lowest - si.first_seg : 1, dir, PD_WAL_SEG_HDR,
               si.first_seg);
        bad = 1;
    }
    n_prof = 0;
    wal_file_info prev_wi = {0};
    bool prev_ended_or_reported = false;
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/wal/%s", dir, names[i] ? names[i] : "");
        wal_file_info wi = {0};
        int fb = names[i] ? check_wal_file(path, i + 1 == n, false, &n_prof, &wi) : 0;
        bad |= fb;
        /* its damage is reported: no second line about its end (the walk
           goes on past damage, so wi.ended is what the file holds) */
        bool ended_or_reported = wi.ended || fb;
        /* version 2: every segment but the newest ends with its END record */
        if (i > 0 && prev_wi.version >= 2 && !prev_ended_or_reported &&
            !(i + 1 == n && wi.size <= PD_WAL_SEG_HDR)) {
            printf("CORRUPT %s/wal/%s offset %llu: the segment does not end with its end "
                   "record (cut at a record boundary); the rest of its records are lost\n",
                   dir, names[i - 1] ? names[i - 1] : "", (unsigned long long)prev_wi.size);
            bad = 1;
        }
        uint32_t mk_seg;
        uint64_t mk_size;
        char wd[4200];
        snprintf(wd, sizeof wd, "%s/wal", dir);
        if (i + 1 == n && names[i] && !fb && pd__wal_synced_read(wd, &mk_seg, &mk_size) &&
            mk_seg == (uint32_t)strtoul(names[i], NULL, 10) && wi.size < mk_size) {
            /* issue 27: shorter than what was fsync'd: not a torn append */
            printf("CORRUPT %s offset %llu: the newest segment ends here but %llu bytes were "
                   "fsync'd (wal/synced): acknowledged records were cut off\n",
                   path, (unsigned long long)wi.size, (unsigned long long)mk_size);
            bad = 1;
        }
        if (i + 1 == n && wi.version >= 2 && wi.ended) {
            unsigned long v = names[i] ? strtoul(names[i], NULL, 10) : 0;
            printf("CORRUPT %s/wal/%08lu: missing segment (the newest: %s offset %llu ends "
                   "with its end record naming it); its records are lost\n",
                   dir, v + 1, path, (unsigned long long)(wi.size - PD_WAL_REC_HDR - 4));
            bad = 1;
        }
        prev_wi = wi;
        prev_ended_or_reported = ended_or_reported;
        if (i > 0)
            free(names[i - 1]);
    }
    if (n)
        free(names[n - 1]);
    free(names);
    printf("%s %s/wal: %zu segments, %llu profile records\n", bad ? "CORRUPT" : "ok", dir, n,
           (unsigned long long)n_prof);
    return bad;
}

static int cmd_check(int argc, char **argv)
{
    if (argc != 3)
        return usage_to(usage_check);
    char **blocks;
    size_t nb;
    int rc = list_blocks(argv[2], &blocks, &nb);
    if (rc) {
        fprintf(stderr, "%s: %s\n", argv[2], pd_strerror(rc));
        return 1;
    }
    int bad = 0;
    for (size_t i = 0; i < nb; i++) {
        pd_err err;
        pd_block_meta m;
        err.msg[0] = 0;
        rc = pd__block_check(blocks[i], &m, &err);
        if (rc) {
            printf("CORRUPT %s: %s\n", blocks[i], err.msg[0] ? err.msg : pd_strerror(rc));
            bad = 1;
        } else {
            printf("ok %s: %llu series, %llu profiles, %llu samples%s\n", blocks[i],
                   (unsigned long long)m.n_series, (unsigned long long)m.n_profiles,
                   (unsigned long long)m.n_samples,
                   m.compaction_failed ? " (marked compaction.failed: `profd tsdb repair` "
                                         "rewrites it)"
                                       : "");
        }
    }
    bad |= check_wal(argv[2]);
    printf("%zu blocks and the WAL checked, %s\n", nb, bad ? "corruption found" : "no corruption");
    free_list(blocks, nb);
    return bad;
}

int pd_tsdb_cli_main(int argc, char **argv)
{
    if (argc < 2)
        return usage_to(usage_tsdb);
    if (is_help(argv[1])) {
        fputs(usage_tsdb, stdout);
        return 0;
    }
    static const struct {
        const char *name, *usage;
    } cmds[] = {{"import", usage_import},
                {"analyze", usage_analyze},
                {"check", usage_check},
                {"repair", usage_repair}};
    const char *text = NULL;
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++)
        if (!strcmp(argv[1], cmds[i].name))
            text = cmds[i].usage;
    if (!text) {
        fprintf(stderr, "profd tsdb: unknown command \"%s\"; see 'profd tsdb --help'\n", argv[1]);
        return 2;
    }
    /* -h/--help anywhere before "--": the command's usage on stdout */
    for (int i = 2; i < argc && strcmp(argv[i], "--"); i++)
        if (is_help(argv[i])) {
            fputs(text, stdout);
            return 0;
        }
    if (!strcmp(argv[1], "import"))
        return cmd_import(argc, argv);
    if (argc != 3 || argv[2][0] == '-')
        return usage_to(text);
    if (!strcmp(argv[1], "analyze"))
        return cmd_analyze(argc, argv);
    if (!strcmp(argv[1], "check"))
        return cmd_check(argc, argv);
    return pd__tsdb_repair(argv[2]);
}
