/*
 * bench/storage_size/storage_size.c — bytes per profile of real profile
 * series, side by side on the same profiles:
 *   (a) gzip bodies as served,
 *   (b) conprof's scheme: raw (gunzipped) profiles in consecutive groups of 12,
 *       each group compressed with zstd level 3 (libzstd),
 *   (c) profd blocks (src/storage/tsdb/block.c): one block per profile type,
 *       and one block holding all types together (as one store would),
 *   (d) "zstd-long": each type's whole series of raw profiles concatenated,
 *       compressed as `zstd -19 --long` does (libzstd: level 19, long-distance
 *       matching, window 2^27) — what a general compressor that sees the whole
 *       series reaches (issue 12 item 6: tiny profiles must not cost more).
 *
 *   bench_storage_size DATA_DIR OUT_DIR [--group N] [--group-bytes B] [--stacks tree|list]
 *                      [--format 1|2]   block format version (default: the one written)
 *                      [--sym-frame B]  format 2: raw bytes per symbols frame
 *                      [--sym-version 2|3] format 2: the symbols file's version
 *                      [--level L] [--sweep] [--verify]
 *
 * DATA_DIR holds one sub-directory per profile type (heap, allocs, goroutine,
 * cpu, ...) of *.pb.gz files in scrape order (bench/storage_size/collect.sh).
 * Timestamps: the profile's time_nanos (ms), forced strictly ascending.
 * --sweep: also writes the all-types block for several group sizes and both
 * stack formats and prints the totals (how PD_BLOCK_DEFAULT_GROUP and the
 * stack format were chosen). --verify: reads every profile back from the
 * blocks and checks pd_profile_equal with the original. --analyze: per type,
 * what the series is made of (samples per profile, how many of them change
 * from one profile to the next, distinct stacks over the series, raw size):
 * the entropy the value chunks and symbols have to hold. Last, what each
 * type's series adds to the all-types block (that block minus the same block
 * without the type): a series' cost where the block's fixed parts are shared.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <zstd.h>

#include "pprof/pprof.h"
#include "storage/tsdb/block_int.h"

typedef struct prof {
    uint8_t *body;
    size_t len;
    pd_profile p;
    int64_t ts;
} prof;

typedef struct ptype {
    char name[64];
    prof *v;
    size_t n;
} ptype;

static int cmpstr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return b;
}

static int load_type(const char *dir, const char *name, ptype *t)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            names = realloc(names, cap * sizeof *names);
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmpstr);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->v = calloc(n + 1, sizeof *t->v);
    int64_t last = INT64_MIN;
    for (size_t i = 0; i < n; i++) {
        char fp[8192];
        snprintf(fp, sizeof fp, "%s/%s", path, names[i]);
        prof *p = &t->v[t->n];
        pd_err err;
        if (!(p->body = slurp(fp, &p->len)) ||
            pd_profile_decode(&p->p, p->body, p->len, NULL, &err)) {
            fprintf(stderr, "skip %s: %s\n", fp, p->body ? err.msg : "unreadable");
            free(p->body);
            free(names[i]);
            continue;
        }
        p->ts = p->p.time_nanos / 1000000;
        if (p->ts <= last)
            p->ts = last + 1;
        last = p->ts;
        t->n++;
        free(names[i]);
    }
    free(names);
    return 0;
}

/* (d) the whole series as one stream: the raw (gunzipped) profiles
 * concatenated in scrape order, compressed as `zstd -19 --long` does (level
 * 19, long-distance matching, window 2^27): the size a general-purpose
 * compressor reaches when it sees every profile of the series at once. */
static uint64_t zstd_long_bytes(const ptype *t)
{
    pd_buf raw;
    pd_buf_init(&raw, 0);
    for (size_t j = 0; j < t->n; j++) {
        pd_err err;
        if (pd_gunzip(t->v[j].body, t->v[j].len, 1u << 30, &raw, &err))
            pd_buf_append(&raw, t->v[j].body, t->v[j].len); /* raw already */
    }
    ZSTD_CCtx *cx = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cx, ZSTD_c_compressionLevel, 19);
    ZSTD_CCtx_setParameter(cx, ZSTD_c_enableLongDistanceMatching, 1);
    ZSTD_CCtx_setParameter(cx, ZSTD_c_windowLog, 27);
    size_t bound = ZSTD_compressBound(raw.len);
    void *z = malloc(bound);
    size_t zl = ZSTD_compress2(cx, z, bound, raw.data, raw.len);
    uint64_t total = ZSTD_isError(zl) ? raw.len : zl;
    free(z);
    ZSTD_freeCCtx(cx);
    pd_buf_release(&raw);
    return total;
}

static uint64_t conprof_bytes(const ptype *t)
{
    uint64_t total = 0;
    for (size_t i = 0; i < t->n; i += 12) {
        pd_buf raw;
        pd_buf_init(&raw, 0);
        for (size_t j = i; j < i + 12 && j < t->n; j++) {
            pd_err err;
            if (pd_gunzip(t->v[j].body, t->v[j].len, 1u << 30, &raw, &err))
                pd_buf_append(&raw, t->v[j].body, t->v[j].len); /* raw already */
        }
        size_t bound = ZSTD_compressBound(raw.len);
        void *z = malloc(bound);
        size_t zl = ZSTD_compress(z, bound, raw.data, raw.len, 3);
        total += ZSTD_isError(zl) ? raw.len : zl;
        free(z);
        pd_buf_release(&raw);
    }
    return total;
}

/* ---- --analyze ---- */

typedef struct skey {
    uint64_t h;   /* stack (location addresses, else function names) + labels */
    size_t i;     /* sample index */
} skey;

static int skey_cmp(const void *a, const void *b)
{
    uint64_t x = ((const skey *)a)->h, y = ((const skey *)b)->h;
    return x < y ? -1 : x > y;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0x100000001b3ull;
}

static uint64_t str_hash(const pd_profile *p, int64_t si)
{
    uint64_t h = 1469598103934665603ull;
    if (si < 0 || (size_t)si >= p->n_string)
        return h;
    for (size_t k = 0; k < p->string_len[si]; k++)
        h = (h ^ (uint8_t)p->string_table[si][k]) * 1099511628211ull;
    return h;
}

static uint64_t stack_hash(const pd_profile *p, const pd_pprof_sample *sm, bool with_labels)
{
    uint64_t h = 7;
    for (size_t k = 0; k < sm->n_location; k++) {
        size_t li;
        if (!pd_u64map_get(&p->loc_by_id, sm->location_id[k], &li))
            continue;
        const pd_pprof_location *l = &p->location[li];
        h = mix(h, l->address);
        for (size_t m = 0; m < l->n_line; m++) {
            size_t fi;
            if (pd_u64map_get(&p->fn_by_id, l->line[m].function_id, &fi))
                h = mix(h, str_hash(p, p->function[fi].name));
            h = mix(h, (uint64_t)l->line[m].line);
        }
    }
    if (with_labels)
        for (size_t k = 0; k < sm->n_label; k++) {
            h = mix(h, str_hash(p, sm->label[k].key));
            h = mix(h, str_hash(p, sm->label[k].str));
            h = mix(h, (uint64_t)sm->label[k].num);
        }
    return h;
}

static size_t zzlen(int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    size_t n = 1;
    while (z >= 0x80)
        z >>= 7, n++;
    return n;
}

static void analyze(const ptype *t)
{
    /* varint bytes of the value deltas of matched samples (as chunks.c writes
     * them before zstd), and the same when a column is predicted from the
     * column before it (space = objects x bytes per object of the previous
     * profile, exact for a fixed-size allocation site) */
    double dbytes = 0, pbytes = 0, nz = 0;
    skey *prev = NULL, *all = NULL;
    size_t nprev = 0, nall = 0;
    double samples = 0, same = 0, changed = 0, added = 0, removed = 0, raw = 0, locs = 0,
           depth = 0;
    for (size_t i = 0; i < t->n; i++) {
        const pd_profile *p = &t->v[i].p;
        skey *k = malloc((p->n_sample + 1) * sizeof *k);
        for (size_t j = 0; j < p->n_sample; j++) {
            k[j] = (skey){stack_hash(p, &p->sample[j], true), j};
            depth += (double)p->sample[j].n_location;
        }
        qsort(k, p->n_sample, sizeof *k, skey_cmp);
        all = realloc(all, (nall + p->n_sample + 1) * sizeof *all);
        for (size_t j = 0; j < p->n_sample; j++)
            all[nall++] = (skey){stack_hash(p, &p->sample[k[j].i], false), 0};
        samples += (double)p->n_sample;
        locs += (double)p->n_location;
        pd_buf b;
        pd_err err;
        pd_buf_init(&b, 0);
        raw += pd_gunzip(t->v[i].body, t->v[i].len, 1u << 30, &b, &err) ? (double)t->v[i].len
                                                                          : (double)b.len;
        pd_buf_release(&b);
        if (i) {
            const pd_profile *q = &t->v[i - 1].p;
            size_t a = 0, c = 0;
            while (a < p->n_sample || c < nprev) {
                if (c == nprev || (a < p->n_sample && k[a].h < prev[c].h)) {
                    added++, a++;
                } else if (a == p->n_sample || prev[c].h < k[a].h) {
                    removed++, c++;
                } else {
                    const pd_pprof_sample *x = &p->sample[k[a].i], *y = &q->sample[prev[c].i];
                    bool eq = x->n_value == y->n_value &&
                              !memcmp(x->value, y->value, x->n_value * sizeof *x->value);
                    if (eq)
                        same++;
                    else
                        changed++;
                    for (size_t v = 0; v < x->n_value && x->n_value == y->n_value; v++) {
                        int64_t dv = x->value[v] - y->value[v], r = dv;
                        if (v % 2 == 1 && y->value[v - 1] > 0 &&
                            y->value[v] % y->value[v - 1] == 0)
                            r = dv - (x->value[v - 1] - y->value[v - 1]) *
                                         (y->value[v] / y->value[v - 1]);
                        dbytes += (double)zzlen(dv);
                        pbytes += (double)zzlen(r);
                        nz += dv != 0;
                    }
                    a++, c++;
                }
            }
        }
        free(prev);
        prev = k;
        nprev = p->n_sample;
    }
    qsort(all, nall, sizeof *all, skey_cmp);
    size_t distinct = 0;
    for (size_t j = 0; j < nall; j++)
        if (!j || all[j].h != all[j - 1].h)
            distinct++;
    double n = (double)t->n, m = n > 1 ? n - 1 : 1;
    printf("%-10s %6zu | %9.0f %8.1f %8.1f | %7.1f %7.1f %7.1f %7.1f | %9zu %8.1f | %8.1f %8.1f "
           "%8.1f\n",
           t->name, t->n, raw / n, samples / n, locs / n, same / m, changed / m, added / m,
           removed / m, distinct, samples ? depth / samples : 0, nz / m, dbytes / m, pbytes / m);
    free(prev);
    free(all);
}

typedef struct result {
    uint64_t total, meta, index, symbols, time, value;
    double write_s;
} result;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int write_block(ptype *types, size_t nt, const pd_block_writer_opts *o, const char *out,
                       bool verify, result *r)
{
    pd_block_writer *w;
    pd_err err;
    char id[27];
    memset(r, 0, sizeof *r);
    double t0 = now_s();
    if (pd__block_writer_new(o, &w))
        return -1;
    for (size_t k = 0; k < nt; k++) {
        pd_labels l;
        pd_labels_init(&l);
        pd_labels_set(&l, "__name__", types[k].name, &err);
        pd_labels_set(&l, "job", "demo", &err);
        pd_labels_set(&l, "instance", "127.0.0.1:6060", &err);
        for (size_t i = 0; i < types[k].n; i++)
            if (pd__block_writer_add(w, &l, types[k].v[i].ts, &types[k].v[i].p, &err)) {
                fprintf(stderr, "add %s %zu: %s\n", types[k].name, i, err.msg);
                return -1;
            }
        pd_labels_release(&l);
    }
    int rc = pd__block_writer_write(w, out, id, &err);
    pd__block_writer_free(w);
    r->write_s = now_s() - t0;
    if (rc) {
        fprintf(stderr, "write: %s\n", err.msg);
        return -1;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", out, id);
    pd_block *b;
    if (pd__block_open(dir, &b, &err)) {
        fprintf(stderr, "open: %s\n", err.msg);
        return -1;
    }
    const pd_block_meta *m = pd__block_meta(b);
    r->meta = m->meta_bytes;
    r->index = m->index_bytes;
    r->symbols = m->symbols_bytes;
    r->time = m->time_bytes;
    r->value = m->value_bytes;
    r->total = m->meta_bytes + m->index_bytes + m->symbols_bytes + m->chunks_bytes;
    if (verify) {
        size_t bad = 0, n = 0;
        for (size_t k = 0; k < nt; k++) {
            pd_matcher mt;
            pd_matcher_init(&mt, PD_MATCH_EQ, "__name__", types[k].name, &err);
            uint32_t *ids;
            size_t nid;
            pd__block_select(b, &mt, 1, &ids, &nid, &err);
            pd_matcher_release(&mt);
            for (size_t i = 0; i < types[k].n && nid == 1; i++) {
                pd_profile p;
                n++;
                if (pd__block_read_profile(b, ids[0], types[k].v[i].ts, &p, &err)) {
                    bad++;
                    fprintf(stderr, "read %s %zu: %s\n", types[k].name, i, err.msg);
                    continue;
                }
                if (!pd_profile_equal(&p, &types[k].v[i].p, &err)) {
                    bad++;
                    fprintf(stderr, "differs %s %zu: %s\n", types[k].name, i, err.msg);
                }
                pd_profile_release(&p);
            }
            if (nid != 1)
                bad += types[k].n;
            free(ids);
        }
        printf("verify: %zu profiles read back, %zu differ\n", n, bad);
        if (bad)
            rc = -1;
    }
    pd__block_close(b);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s DATA_DIR OUT_DIR [--group N] [--stacks tree|list] [--level L] "
                        "[--sweep] [--verify] [--analyze]\n",
                argv[0]);
        return 2;
    }
    const char *data = argv[1], *out = argv[2];
    pd_block_writer_opts o = {0};
    bool sweep = false, verify = false, do_analyze = false;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--group") && i + 1 < argc)
            o.group = (size_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--group-bytes") && i + 1 < argc)
            o.group_bytes = (size_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sym-frame") && i + 1 < argc)
            o.sym_frame_bytes = (size_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sym-version") && i + 1 < argc)
            o.sym_version = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--format") && i + 1 < argc)
            o.version = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--level") && i + 1 < argc)
            o.zstd_level = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--stacks") && i + 1 < argc)
            o.stack_format = !strcmp(argv[++i], "list") ? PD_STACKS_LIST : PD_STACKS_TREE;
        else if (!strcmp(argv[i], "--sweep"))
            sweep = true;
        else if (!strcmp(argv[i], "--verify"))
            verify = true;
        else if (!strcmp(argv[i], "--analyze"))
            do_analyze = true;
        else {
            fprintf(stderr, "unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    mkdir(out, 0755);
    const char *names[] = {"heap", "allocs", "goroutine", "cpu", "block", "mutex", "threadcreate"};
    ptype types[8];
    size_t nt = 0;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        memset(&types[nt], 0, sizeof types[nt]);
        if (!load_type(data, names[i], &types[nt]) && types[nt].n)
            nt++;
    }
    if (!nt) {
        fprintf(stderr, "no profiles under %s\n", data);
        return 1;
    }
    if (do_analyze) {
        printf("%-10s %6s | %9s %8s %8s | %7s %7s %7s %7s | %9s %8s | %8s %8s %8s\n", "type",
               "n", "raw B/p", "samples", "locs", "same", "changed", "added", "removed",
               "stacks", "depth", "values", "delta", "pred");
        printf("%-10s %6s | %9s %8s %8s | %-31s | %9s %8s | %8s %8s %8s\n", "", "", "",
               "/profile", "/profile", "samples/profile vs previous", "distinct", "avg",
               "!=0/p", "B/p", "B/p");
        for (size_t k = 0; k < nt; k++)
            analyze(&types[k]);
        printf("\n");
    }
    printf("%-10s %6s | %10s %10s %10s %10s | %9s %9s | %7s %7s %7s %7s %7s | %8s\n", "type",
           "n", "gzip B/p", "conprof", "zstd-long", "profd B/p", "x gzip", "x conprof", "index",
           "symbols", "time", "values", "meta", "write s");
    uint64_t ag = 0, ac = 0;
    size_t an = 0;
    double own[8] = {0}, zlong[8] = {0}, adds[8] = {0};
    int rc = 0;
    for (size_t k = 0; k < nt; k++) {
        ptype *t = &types[k];
        uint64_t g = 0;
        for (size_t i = 0; i < t->n; i++)
            g += t->v[i].len;
        uint64_t c = conprof_bytes(t), zl = zstd_long_bytes(t);
        ag += g;
        ac += c;
        an += t->n;
        result r;
        if (write_block(t, 1, &o, out, verify, &r))
            rc = 1;
        double n = (double)t->n;
        own[k] = r.total / n;
        zlong[k] = zl / n;
        printf("%-10s %6zu | %10.0f %10.0f %10.1f %10.1f | %9.1f %9.1f | %7.1f %7.1f %7.1f %7.1f "
               "%7.1f | %8.2f\n",
               t->name, t->n, g / n, c / n, zl / n, r.total / n, (double)g / r.total,
               (double)c / r.total, r.index / n, r.symbols / n, r.time / n, r.value / n,
               r.meta / n, r.write_s);
    }
    result r;
    if (write_block(types, nt, &o, out, verify, &r))
        rc = 1;
    double n = (double)an;
    printf("%-10s %6zu | %10.0f %10.0f %10s %10.1f | %9.1f %9.1f | %7.1f %7.1f %7.1f %7.1f "
           "%7.1f | %8.2f\n",
           "ALL(1blk)", an, ag / n, ac / n, "", r.total / n, (double)ag / r.total, (double)ac / r.total,
           r.index / n, r.symbols / n, r.time / n, r.value / n, r.meta / n, r.write_s);
    /* what each type's series adds to the all-types block (as a store keeps
       them: one block of every series, whose meta.json and file frames are
       shared): the block's bytes minus those of the same block without it */
    printf("\nin the all-types block: bytes a type's series adds (all minus all without it)\n");
    uint64_t all_total = r.total;
    for (size_t k = 0; nt > 1 && k < nt; k++) {
        ptype rest[8];
        size_t m = 0;
        for (size_t j = 0; j < nt; j++)
            if (j != k)
                rest[m++] = types[j];
        result rk;
        if (write_block(rest, m, &o, out, false, &rk)) {
            rc = 1;
            continue;
        }
        adds[k] = (double)(all_total - rk.total) / (double)types[k].n;
        printf("%-12s %6zu | %10.1f B/p (%llu bytes), zstd-long %.1f B/p\n", types[k].name,
               types[k].n, (double)(all_total - rk.total) / (double)types[k].n,
               (unsigned long long)(all_total - rk.total),
               (double)zstd_long_bytes(&types[k]) / (double)types[k].n);
    }
    /* issue 27 item 4: each series against zstd -19 --long of the whole
       series; "shared": what it adds to the block of every series here (as a
       store keeps them), "own": a block of that series alone (its meta.json,
       index and symbols headers paid by it alone) */
    printf("\nper series, B/profile: zstd -19 --long | profd in the shared block | profd alone "
           "in a block\n");
    for (size_t k = 0; k < nt; k++)
        printf("SERIES %-12s %6zu | %8.1f | %8.1f %-5s | %8.1f %s\n", types[k].name, types[k].n,
               zlong[k], nt > 1 ? adds[k] : own[k],
               (nt > 1 ? adds[k] : own[k]) <= zlong[k] ? "<=" : "ABOVE", own[k],
               own[k] <= zlong[k] ? "<=" : "ABOVE");
    if (sweep) {
        printf("\nsweep (all types in one block): group size x stack format -> bytes/profile, x conprof\n");
        size_t gs[] = {1, 16, 64, 128, 256, 512, 1024};
        size_t gb[] = {16u << 10, 64u << 10, 256u << 10, 1u << 30};
        for (int sf = PD_STACKS_TREE; sf <= PD_STACKS_LIST; sf++)
            for (size_t i = 0; i < sizeof gs / sizeof *gs; i++)
            for (size_t j = 0; j < sizeof gb / sizeof *gb; j++) {
                pd_block_writer_opts o2 = o;
                o2.group = gs[i];
                o2.group_bytes = gb[j];
                o2.stack_format = (pd_stack_format)sf;
                if (write_block(types, nt, &o2, out, false, &r))
                    continue;
                printf("  stacks=%-4s group=%-4zu group_bytes=%-10zu %8.1f B/p  %6.1fx  (symbols %.1f, values %.1f, "
                       "time %.1f B/p)\n",
                       sf == PD_STACKS_TREE ? "tree" : "list", gs[i], gb[j], r.total / n,
                       (double)ac / r.total, r.symbols / n, r.value / n, r.time / n);
            }
    }
    for (size_t k = 0; k < nt; k++) {
        for (size_t i = 0; i < types[k].n; i++) {
            pd_profile_release(&types[k].v[i].p);
            free(types[k].v[i].body);
        }
        free(types[k].v);
    }
    return rc;
}
