/*
 * storage/tsdb/block.c — opening, reading and checking immutable blocks
 * (API: block_int.h; the writer is block_write.c, the index file
 * block_index.c, the symbols file symbols.c). Formats:
 * docs/format/{index,symbols,chunks}.md.
 *
 * Files (all integers little endian; varint/zz as protobuf):
 *
 *   index:          version 2 (written): one CRC'd section per series entry
 *                   (labels and sample-type strings inline), the postings under
 *                   their own CRC, a toc and a footer; version 1 (read): one body,
 *                   one CRC. Both: block_index_int.h, code block_index.c.
 *   symbols:        version 2 (written): a CRC'd directory, then each table cut
 *                   into zstd frames of ~16 KiB raw, each with its own CRC;
 *                   version 1 (read): one zstd frame, one CRC. Both:
 *                   symbols_int.h, code symbols.c (pd__symbols_file_*).
 *   chunks/000001:  "PDCH" | u8 version 4 (PD_CHUNKS_VERSION; 2-3 read) | 3 x 0 | frames...
 *     frame: u32 data length | u8 kind | data | u32 crc32c(kind + data)
 *     kind 1: time chunk (raw payload), 2: time chunk (zstd), 3: value group (zstd)
 *     For each series (in index order): its value groups, then its time chunk.
 *   meta.json:      jansson; cross-checked against the other files on open.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "base/arena.h"
#include "base/crc32c.h"
#include "base/varint.h"
#include "storage/tsdb/block_file_int.h"
#include "storage/tsdb/block_index_int.h"
#include "storage/tsdb/block_int.h"
#include "storage/tsdb/chunks_int.h"
#include "storage/tsdb/warnings_int.h"

/* ---- reader ---- */

typedef pd_ix_series rseries;

struct pd_block {
    char *dir;
    char chunks_path[4200];
    int fd;
    uint64_t chunks_size;
    int chunks_version; /* PD_CHUNKS_VERSION_MIN .. PD_CHUNKS_VERSION */
    pd_block_meta meta;
    pd_symbols sym;
    pd_index ix;         /* series and postings */
    char (*sources)[27]; /* meta.json compaction.sources */
    size_t n_sources;
    uint64_t gen;        /* open generation, for the group cache */
    bool meta_rebuilt;   /* meta.json did not read: meta derived from the other files */
    char ch_damage[512]; /* "" or the chunks file header's damage (issue 27: reported, the
                            frames still read; check/repair see it in sect_damage) */
    char *sect_damage;   /* malloc'ed; NULL when index and symbols verify: what did not
                            (file and offset), what it costs */
    char damage[sizeof(((pd_err *)0)->msg)]; /* why meta.json did not read; "" = intact */
};

/* ---- decoded value groups, cached ----
 *
 * A value group is delta-encoded from its first profile, so reading one
 * profile decodes its whole group (up to PD_BLOCK_DEFAULT_GROUP profiles).
 * Reads of consecutive profiles of a series (a merge over a range, the
 * timeline's clicks) would decode the same group again and again; the last
 * GCACHE groups decoded, of any block, are kept. Entries are refcounted so
 * that the conversion to a pd_profile runs outside the lock; an entry whose
 * block is closed is dropped (pd__block_close). Memory: a heap group of 256
 * busy-Go profiles decodes to ~7 MB, so GCACHE is small. */
#define GCACHE 4

typedef struct gentry {
    const pd_block *b; /* NULL: free slot */
    uint32_t id;
    size_t g;
    uint64_t gen; /* the block's open generation: a pointer can be reused */
    pd_dprof *d;
    size_t n;
    int refs;      /* readers converting from it */
    bool dead;     /* evicted while in use: freed by the last reader */
    uint64_t used; /* LRU clock */
} gentry;

static pthread_mutex_t g_cache_mu = PTHREAD_MUTEX_INITIALIZER;
static gentry *g_cache[GCACHE];
static uint64_t g_clock, g_gen;

static void gentry_free(gentry *e)
{
    for (size_t i = 0; i < e->n; i++)
        pd__dprof_release(&e->d[i]);
    free(e->d);
    free(e);
}

/* Under g_cache_mu: drops slot i (freed now, or by its last reader). */
static void gcache_drop(size_t i)
{
    gentry *e = g_cache[i];
    g_cache[i] = NULL;
    if (!e)
        return;
    if (e->refs)
        e->dead = true;
    else
        gentry_free(e);
}

/* The cached group (b, id, g) with a reference taken, or NULL. */
static gentry *gcache_get(const pd_block *b, uint64_t gen, uint32_t id, size_t g)
{
    gentry *hit = NULL;
    pthread_mutex_lock(&g_cache_mu);
    for (size_t i = 0; i < GCACHE && !hit; i++) {
        gentry *e = g_cache[i];
        if (e && e->b == b && e->gen == gen && e->id == id && e->g == g) {
            e->refs++;
            e->used = ++g_clock;
            hit = e;
        }
    }
    pthread_mutex_unlock(&g_cache_mu);
    return hit;
}

/* Puts a freshly decoded group in the cache (evicting the least recently
 * used) and returns it with a reference taken. Takes ownership of d. */
static gentry *gcache_put(const pd_block *b, uint64_t gen, uint32_t id, size_t g, pd_dprof *d,
                          size_t n)
{
    gentry *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    *e = (gentry){.b = b, .id = id, .g = g, .gen = gen, .d = d, .n = n, .refs = 1};
    pthread_mutex_lock(&g_cache_mu);
    size_t slot = 0;
    for (size_t i = 0; i < GCACHE; i++) {
        if (!g_cache[i]) {
            slot = i;
            break;
        }
        if (g_cache[i]->used < g_cache[slot]->used)
            slot = i;
    }
    gcache_drop(slot);
    e->used = ++g_clock;
    g_cache[slot] = e;
    pthread_mutex_unlock(&g_cache_mu);
    return e;
}

static void gcache_release(gentry *e)
{
    pthread_mutex_lock(&g_cache_mu);
    bool free_it = --e->refs == 0 && e->dead;
    pthread_mutex_unlock(&g_cache_mu);
    if (free_it)
        gentry_free(e);
}

/* Drops every cached group of b (it is being closed). */
static void gcache_forget(const pd_block *b)
{
    pthread_mutex_lock(&g_cache_mu);
    for (size_t i = 0; i < GCACHE; i++)
        if (g_cache[i] && g_cache[i]->b == b)
            gcache_drop(i);
    pthread_mutex_unlock(&g_cache_mu);
}

static int read_whole(const char *path, uint64_t cap, uint8_t **out, size_t *len, pd_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    *out = NULL;
    if (fd < 0)
        return pd_err_set(err, -errno, "%s: %s", path, strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st)) {
        rc = pd_err_set(err, -errno, "%s: %s", path, strerror(errno));
        goto out;
    }
    if ((uint64_t)st.st_size > cap) {
        rc = pd_err_set(err, PD_ECORRUPT, "%s: %lld bytes exceed the cap of %llu", path,
                        (long long)st.st_size, (unsigned long long)cap);
        goto out;
    }
    uint8_t *b = malloc((size_t)st.st_size + 1);
    if (!b) {
        rc = PD_ENOMEM;
        goto out;
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t k = pread(fd, b + got, (size_t)st.st_size - got, (off_t)got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            rc = k < 0 ? pd_err_set(err, -errno, "%s: %s", path, strerror(errno))
                       : pd_err_set(err, PD_ECORRUPT, "%s: shorter than its size", path);
            free(b);
            goto out;
        }
        got += (size_t)k;
    }
    b[got] = 0;
    *out = b;
    *len = got;
out:
    close(fd);
    return rc;
}

static int parse_meta(pd_block *b, const char *path, const char *base, pd_err *err)
{
    json_error_t je;
    json_t *m = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!m)
        return pd_err_set(err, errno == ENOENT ? -ENOENT : PD_ECORRUPT, "%s offset %d: %s", path,
                          je.position, je.text);
    const char *ulid = NULL, *sf = NULL;
    json_int_t ver = 0, mint = 0, maxt = 0, ns, np, nsa, nstr, nmap, nfn, nloc, nst, nls, gs, fi,
               fsy, fch, lvl;
    json_t *srcs = NULL;
    int rc = 0, failed = 0;
    if (json_unpack_ex(m, &je, JSON_STRICT,
                       "{s:s, s:I, s:I, s:I, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}, s:s, "
                       "s:I, s:{s:I, s:I, s:I}, s:{s:I, s?o, s?b}}",
                       "ulid", &ulid, "version", &ver, "minTime", &mint, "maxTime", &maxt, "stats",
                       "numSeries", &ns, "numProfiles", &np, "numSamples", &nsa, "numStrings",
                       &nstr, "numMappings", &nmap, "numFunctions", &nfn, "numLocations", &nloc,
                       "numStacks", &nst, "numLabelSets", &nls, "stackFormat", &sf, "groupSize",
                       &gs, "files", "index", &fi, "symbols", &fsy, CHUNKS_NAME, &fch, "compaction",
                       "level", &lvl, "sources", &srcs, "failed", &failed)) {
        rc = pd_err_set(err, PD_ECORRUPT, "%s offset %d: %s", path, je.position, je.text);
        goto out;
    }
    pd_block_meta *M = &b->meta;
    if (strlen(ulid) != 26 || strcmp(ulid, base)) {
        rc = pd_err_set(err, PD_ECORRUPT, "%s: ulid %s does not name the directory %s", path, ulid,
                        base);
        goto out;
    }
    if (ver < 1 || ver > PD_BLOCK_VERSION || gs < 1 || lvl < 1 ||
        (strcmp(sf, "tree") && strcmp(sf, "list"))) {
        rc = pd_err_set(err, PD_ECORRUPT,
                        "%s: unsupported version, group size, level or stack format", path);
        goto out;
    }
    if (srcs) {
        size_t nsrc = json_is_array(srcs) ? json_array_size(srcs) : 0;
        if (!json_is_array(srcs) || nsrc > 1000000) {
            rc =
                pd_err_set(err, PD_ECORRUPT, "%s: compaction.sources is not a list of ULIDs", path);
            goto out;
        }
        if (nsrc && !(b->sources = calloc(nsrc, sizeof *b->sources))) {
            rc = PD_ENOMEM;
            goto out;
        }
        for (size_t i = 0; i < nsrc; i++) {
            const char *u = json_string_value(json_array_get(srcs, i));
            if (!u || strlen(u) != 26) {
                rc = pd_err_set(err, PD_ECORRUPT, "%s: compaction.sources[%zu] is not a ULID", path,
                                i);
                goto out;
            }
            memcpy(b->sources[i], u, 27);
            b->n_sources++;
        }
    }
    M->level = lvl > 1000 ? 1000 : (int)lvl;
    M->compaction_failed = failed != 0;
    memcpy(M->ulid, ulid, 27);
    M->version = (int)ver;
    M->min_t = mint;
    M->max_t = maxt;
    M->n_series = (uint64_t)ns;
    M->n_profiles = (uint64_t)np;
    M->n_samples = (uint64_t)nsa;
    M->n_strings = (uint64_t)nstr;
    M->n_mappings = (uint64_t)nmap;
    M->n_functions = (uint64_t)nfn;
    M->n_locations = (uint64_t)nloc;
    M->n_stacks = (uint64_t)nst;
    M->n_label_sets = (uint64_t)nls;
    M->stack_format = strcmp(sf, "tree") ? PD_STACKS_LIST : PD_STACKS_TREE;
    M->group = (uint64_t)gs;
    M->index_bytes = (uint64_t)fi;
    M->symbols_bytes = (uint64_t)fsy;
    M->chunks_bytes = (uint64_t)fch;
out:
    json_decref(m);
    return rc;
}

static int stat_size(const char *path, uint64_t want, uint64_t *got, pd_err *err)
{
    struct stat st;
    if (stat(path, &st))
        return pd_err_set(err, errno == ENOENT ? PD_ECORRUPT : -errno, "%s: %s", path,
                          strerror(errno));
    *got = (uint64_t)st.st_size;
    if (*got != want)
        return pd_err_set(err, PD_ECORRUPT, "%s offset %llu: size %llu, meta.json says %llu", path,
                          (unsigned long long)(*got < want ? *got : want), (unsigned long long)*got,
                          (unsigned long long)want);
    return 0;
}

static int load_tchunk(pd_block *b, uint32_t id, pd_tchunk *t, pd_err *err);

/* The chunks version when its header byte was damaged: the first series
 * whose time chunk reads as one version (newest first) sets it. 0, or
 * PD_ECORRUPT when none reads (err names the file). */
static int probe_chunks_version(pd_block *b, pd_err *err)
{
    for (int v = PD_CHUNKS_VERSION; v >= PD_CHUNKS_VERSION_MIN; v--) {
        b->chunks_version = v;
        for (uint32_t id = 0; id < b->ix.n_series && id < 8; id++) {
            pd_tchunk t;
            pd_err e;
            pd_err_clear(&e);
            int rc = load_tchunk(b, id, &t, &e);
            if (rc == PD_ENOMEM)
                return rc;
            if (rc == 0) {
                pd__tchunk_release(&t);
                return 0;
            }
        }
    }
    b->chunks_version = 0;
    return pd_err_set(err, PD_ECORRUPT, "%s", b->ch_damage);
}

/* After index and symbols are read: strings of damaged symbols frames that
 * an index entry holds inline are restored, the damage is propagated
 * (symbols_int.h) and b->sect_damage says what is lost. 0 or PD_ENOMEM. */
static int settle_damage(pd_block *b)
{
    pd_symbols *S = &b->sym;
    for (size_t i = 0; S->n_bad_frames && i < b->ix.n_series; i++) {
        const rseries *r = &b->ix.s[i];
        for (size_t j = 0; j < r->n_tstr; j++)
            pd__symbols_restore_string(S, r->tstr_id[j], r->tstr[j], r->tstr_len[j]);
    }
    size_t lost = pd__symbols_settle_damage(S);
    if (!S->damage && !b->ix.damage && !b->ch_damage[0])
        return 0;
    char m[1400];
    int k = 0;
    if (b->ch_damage[0])
        k = snprintf(m, sizeof m, "%.500s%s", b->ch_damage, S->damage || b->ix.damage ? "; " : "");
    if (b->ix.damage)
        k += snprintf(m + k, sizeof m - (size_t)k, "%.500s (%zu series lost%s)", b->ix.damage,
                      b->ix.n_lost, b->ix.postings_rebuilt ? ", postings rebuilt" : "");
    if (S->damage)
        snprintf(m + k, sizeof m - (size_t)k,
                 "%s%.600s (%zu of %zu frames lost: %zu stacks and "
                 "label sets, and the profiles that use them)",
                 k ? "; " : "", S->damage, S->n_bad_frames, S->n_frames, lost);
    return (b->sect_damage = strdup(m)) ? 0 : PD_ENOMEM;
}

/* Whether profile d references a symbol of a damaged symbols frame. */
static bool dprof_lost(const pd_symbols *S, const pd_dprof *d)
{
    if (!S->n_bad_frames)
        return false;
    const uint8_t *sb = S->str_bad;
#define SB(x) ((x) < S->n_str && sb[(x)])
    for (uint32_t t = 0; t < 2 * d->n_types; t++)
        if (SB(d->types[t]))
            return true;
    if (SB(d->period_type) || SB(d->period_unit) || SB(d->drop_frames) || SB(d->keep_frames) ||
        SB(d->default_sample_type) || SB(d->doc_url))
        return true;
    for (uint32_t c = 0; c < d->n_comment; c++)
        if (SB(d->comment[c]))
            return true;
#undef SB
    for (uint32_t i = 0; i < d->n_sample; i++)
        if (S->stack_bad[d->stack[i]] || S->lset_bad[d->lset[i]])
            return true;
    return false;
}

/* PD_ECORRUPT for the profile at ts of b that dprof_lost. */
static int lost_err(const pd_block *b, int64_t ts, pd_err *err)
{
    return pd_err_set(err, PD_ECORRUPT, "profile at %lld ms " PD_BLOCK_LOST_PROFILE ": %s",
                      (long long)ts, b->sym.damage ? b->sym.damage : "?");
}

/* pd__block_open. why != NULL: meta.json read but disagreed with the other
 * files (why: the first disagreement): rebuild it from them. *mismatch is
 * set when a check of meta.json against the other files failed (the caller
 * then retries with why). */
static int block_open(const char *dir, const char *why, pd_block **out, pd_err *err, bool *mismatch)
{
    int rc;
    char path[4200];
    uint8_t *buf = NULL;
    size_t len;
    *out = NULL;
    pd_block *b = calloc(1, sizeof *b);
    if (!b)
        return PD_ENOMEM;
    b->fd = -1;
    pthread_mutex_lock(&g_cache_mu);
    b->gen = ++g_gen;
    pthread_mutex_unlock(&g_cache_mu);
    if (!(b->dir = strdup(dir))) {
        free(b);
        return PD_ENOMEM;
    }
    size_t dl = strlen(b->dir);
    while (dl > 1 && b->dir[dl - 1] == '/')
        b->dir[--dl] = 0;
    const char *base = strrchr(b->dir, '/');
    base = base ? base + 1 : b->dir;

    snprintf(path, sizeof path, "%s/meta.json", b->dir);
    pd_err merr;
    pd_err_clear(&merr);
    if (why)
        snprintf(merr.msg, sizeof merr.msg, "%s", why);
    if (why || (rc = parse_meta(b, path, base, &merr))) {
        if (why)
            rc = PD_ECORRUPT;
        /* what the other files verify is still served: meta rebuilt from them */
        if (rc == PD_ENOMEM || strlen(base) != 26)
            goto fail_meta;
        if (merr.msg[0])
            memcpy(b->damage, merr.msg, sizeof b->damage); /* same size, NUL-terminated */
        else
            snprintf(b->damage, sizeof b->damage, "%.400s: unreadable", path);
        b->meta_rebuilt = true;
        free(b->sources);
        b->sources = NULL;
        b->n_sources = 0;
        memset(&b->meta, 0, sizeof b->meta);
        memcpy(b->meta.ulid, base, 27);
        b->meta.version = PD_BLOCK_VERSION;
        b->meta.level = 1;
        b->meta.group = UINT32_MAX; /* unknown: the time chunks' groups are not capped */
        rc = 0;
    }
    struct stat st;
    if (!stat(path, &st))
        b->meta.meta_bytes = (uint64_t)st.st_size;

    snprintf(b->chunks_path, sizeof b->chunks_path, "%s/" CHUNKS_NAME, b->dir);
    if (b->meta_rebuilt) {
        if (stat(b->chunks_path, &st) < 0) {
            rc = pd_err_set(err, errno == ENOENT ? PD_ECORRUPT : -errno, "%s: %s", b->chunks_path,
                            strerror(errno));
            goto fail;
        }
        b->meta.chunks_bytes = b->chunks_size = (uint64_t)st.st_size;
    } else if ((rc = stat_size(b->chunks_path, b->meta.chunks_bytes, &b->chunks_size, err))) {
        *mismatch = rc == PD_ECORRUPT && access(b->chunks_path, F_OK) == 0;
        goto fail;
    }
    if ((b->fd = open(b->chunks_path, O_RDONLY | O_CLOEXEC)) < 0) {
        rc = pd_err_set(err, -errno, "%s: %s", b->chunks_path, strerror(errno));
        goto fail;
    }
    uint8_t ch[HDR];
    if (b->chunks_size < HDR || pread(b->fd, ch, HDR, 0) != HDR) {
        rc = pd_err_set(err, PD_ECORRUPT, "%s offset 0: file too short", b->chunks_path);
        goto fail;
    }
    /* issue 27: the header is redundant — the magic and the reserved bytes
       are constants and every frame carries its own CRC, so a damaged one
       is reported, not fatal; a version byte that is neither one this build
       reads nor a real other one (1, or up to 8 past ours: refused below)
       is damage too, and the version is found again by reading the first
       time chunk (probe_chunks_version) */
    bool ch_bad = memcmp(ch, "PDCH", 4) || ch[5] || ch[6] || ch[7];
    bool ver_ok = ch[4] >= PD_CHUNKS_VERSION_MIN && ch[4] <= PD_CHUNKS_VERSION;
    bool ver_other = ch[4] == 1 || (ch[4] > PD_CHUNKS_VERSION && ch[4] <= PD_CHUNKS_VERSION + 8);
    if (ch_bad || (!ver_ok && !ver_other)) {
        int at = memcmp(ch, "PDCH", 4) ? 0 : !ver_ok ? 4 : 5;
        snprintf(b->ch_damage, sizeof b->ch_damage,
                 "%.400s offset %d: bad header (the frames verify on their own)", b->chunks_path,
                 at);
        if (!ver_ok)
            ch[4] = 0; /* probed once the index is read */
    } else if (!ver_ok) {
        rc = pd_err_set(err, PD_ECORRUPT,
                        "%s offset 4: chunks version %u, this build reads versions %u to %u "
                        "(value groups of version 1 are not read any more)",
                        b->chunks_path, ch[4], PD_CHUNKS_VERSION_MIN, PD_CHUNKS_VERSION);
        goto fail;
    }
    b->chunks_version = ch[4];

    snprintf(path, sizeof path, "%s/symbols", b->dir);
    uint64_t sz;
    if (b->meta_rebuilt && !stat(path, &st))
        b->meta.symbols_bytes = (uint64_t)st.st_size;
    if ((rc = stat_size(path, b->meta.symbols_bytes, &sz, err))) {
        *mismatch = rc == PD_ECORRUPT && access(path, F_OK) == 0;
        goto fail;
    }
    int sym_version = 0;
    if ((rc = read_whole(path, MAX_FILE, &buf, &len, err)) ||
        (rc = pd__symbols_file_decode(&b->sym, path, buf, len, &sym_version, err)))
        goto fail;
    free(buf);
    buf = NULL;
    const pd_symbols *S = &b->sym;
    if (b->meta_rebuilt) {
        b->meta.n_strings = S->n_str;
        b->meta.n_mappings = S->n_map;
        b->meta.n_functions = S->n_fn;
        b->meta.n_locations = S->n_loc;
        b->meta.n_stacks = S->n_stack;
        b->meta.n_label_sets = S->n_lset;
        b->meta.stack_format = S->stack_format;
    }
    if (S->n_str != b->meta.n_strings || S->n_map != b->meta.n_mappings ||
        S->n_fn != b->meta.n_functions || S->n_loc != b->meta.n_locations ||
        S->n_stack != b->meta.n_stacks || S->n_lset != b->meta.n_label_sets ||
        S->stack_format != b->meta.stack_format) {
        rc = pd_err_set(err, PD_ECORRUPT, "%s/meta.json: stats do not match the symbols file",
                        b->dir);
        *mismatch = true;
        goto fail;
    }

    snprintf(path, sizeof path, "%s/index", b->dir);
    if (b->meta_rebuilt && !stat(path, &st))
        b->meta.index_bytes = (uint64_t)st.st_size;
    if ((rc = stat_size(path, b->meta.index_bytes, &sz, err))) {
        *mismatch = rc == PD_ECORRUPT && access(path, F_OK) == 0;
        goto fail;
    }
    if ((rc = read_whole(path, MAX_FILE, &buf, &len, err)) ||
        (rc = pd__index_decode(&b->ix, path, buf, len, b->chunks_size, err)))
        goto fail;
    free(buf);
    buf = NULL;
    if (!b->chunks_version && (rc = probe_chunks_version(b, err)))
        goto fail;
    if ((rc = settle_damage(b)))
        goto fail;
    bool ix_lost = b->ix.n_lost > 0;
    uint64_t np = 0;
    int64_t mint = INT64_MAX, maxt = INT64_MIN;
    for (size_t i = 0; i < b->ix.n_series; i++) {
        np += b->ix.s[i].n;
        b->meta.time_bytes += b->ix.s[i].tbytes;
        b->meta.value_bytes += b->ix.s[i].vbytes;
        if (b->ix.s[i].min_t < mint)
            mint = b->ix.s[i].min_t;
        if (b->ix.s[i].max_t > maxt)
            maxt = b->ix.s[i].max_t;
    }
    if (b->meta_rebuilt) {
        b->meta.n_series = b->ix.n_series;
        b->meta.n_profiles = np;
        b->meta.min_t = mint;
        b->meta.max_t = maxt;
        b->meta.version = b->ix.version;
    }
    /* entries of the index that did not verify are not counted here: meta.json
       keeps the block's numbers (a v2 index loses only those series) */
    if (!ix_lost && (b->ix.n_series != b->meta.n_series || np != b->meta.n_profiles ||
                     !b->ix.n_series || mint != b->meta.min_t || maxt != b->meta.max_t)) {
        rc = pd_err_set(err, PD_ECORRUPT,
                        "%s/meta.json: series, profile counts or time range do not match the index",
                        b->dir);
        *mismatch = true;
        goto fail;
    }
    *out = b;
    return 0;
fail_meta:
    if (err)
        *err = merr;
fail:
    if (rc == PD_ENOMEM)
        pd_err_set(err, rc, "out of memory opening block %s", dir);
    free(buf);
    pd__block_close(b);
    return rc;
}

int pd__block_open(const char *dir, pd_block **out, pd_err *err)
{
    bool mismatch = false;
    pd_err e1;
    pd_err_clear(&e1);
    int rc = block_open(dir, NULL, out, &e1, &mismatch);
    if (rc == PD_ECORRUPT && mismatch) {
        /* meta.json disagrees with files that may be intact: serve what they hold */
        bool m2 = false;
        char why[sizeof e1.msg];
        memcpy(why, e1.msg, sizeof why);
        pd_err e2;
        pd_err_clear(&e2);
        rc = block_open(dir, why, out, &e2, &m2);
        if (rc < 0 && err) /* the first disagreement says most */
            *err = rc == PD_ENOMEM ? e2 : e1;
        return rc;
    }
    if (err && rc)
        *err = e1;
    return rc;
}

void pd__block_close(pd_block *b)
{
    if (!b)
        return;
    gcache_forget(b);
    if (b->fd >= 0)
        close(b->fd);
    pd__symbols_release(&b->sym);
    pd__index_release(&b->ix);
    free(b->sect_damage);
    free(b->sources);
    free(b->dir);
    free(b);
}

const pd_block_meta *pd__block_meta(const pd_block *b)
{
    return &b->meta;
}
const char *pd__block_damage(const pd_block *b)
{
    return b->meta_rebuilt ? b->damage : NULL;
}
const char *pd__block_section_damage(const pd_block *b)
{
    return b->sect_damage;
}

int pd__block_mark_failed(pd_block *b, pd_err *err)
{
    b->meta.compaction_failed = true;
    if (b->meta_rebuilt)
        return 0; /* no meta.json to edit: `profd tsdb repair` writes one */
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/meta.json", b->dir);
    snprintf(tmp, sizeof tmp, "%s/meta.json.tmp", b->dir);
    json_error_t je;
    json_t *m = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    json_t *c = m ? json_object_get(m, "compaction") : NULL;
    if (!m || !json_is_object(c)) {
        json_decref(m);
        return pd_err_set(err, PD_ECORRUPT, "%s offset %d: %s", path, je.position,
                          m ? "no compaction object" : je.text);
    }
    char *js = NULL;
    int rc = json_object_set_new(c, "failed", json_true()) ||
                     !(js = json_dumps(m, JSON_COMPACT | JSON_PRESERVE_ORDER))
                 ? PD_ENOMEM
                 : 0;
    json_decref(m);
    if (!rc)
        rc = pd__block_write_file(tmp, js, strlen(js));
    free(js);
    if (!rc && rename(tmp, path) < 0)
        rc = -errno;
    if (!rc)
        rc = pd__block_fsync_path(b->dir, true);
    if (rc) {
        unlink(tmp);
        return pd_err_set(err, rc, "mark %s failed: %s", path, pd_strerror(rc));
    }
    /* meta.json's size changed: files.* does not list it, nothing else to do */
    return 0;
}
int pd__block_series_crc(const pd_block *b, uint32_t id, uint32_t *crc)
{
    uint64_t start, end;
    pd__block_series_extent(b, id, &start, &end);
    uint8_t buf[65536];
    uint32_t c = 0;
    while (start < end) {
        size_t want = end - start < sizeof buf ? (size_t)(end - start) : sizeof buf;
        ssize_t k = pread(b->fd, buf, want, (off_t)start);
        if (k <= 0)
            return k < 0 ? -errno : PD_ECORRUPT;
        c = pd_crc32c(c, buf, (size_t)k);
        start += (uint64_t)k;
    }
    *crc = c;
    return 0;
}
void pd__block_series_extent(const pd_block *b, uint32_t id, uint64_t *start, uint64_t *end)
{
    const rseries *r = &b->ix.s[id];
    *start = r->tref >= r->vbytes ? r->tref - r->vbytes : 0;
    *end = r->tref + r->tbytes;
}
const char (*pd__block_sources(const pd_block *b, size_t *n))[27]
{
    *n = b->n_sources;
    return (const char(*)[27])b->sources;
}
const char *pd__block_dir(const pd_block *b)
{
    return b->dir;
}
const pd_symbols *pd__block_symbols(const pd_block *b)
{
    return &b->sym;
}
size_t pd__block_n_series(const pd_block *b)
{
    return b->ix.n_series;
}
const pd_labels *pd__block_series_labels(const pd_block *b, uint32_t id)
{
    return id < b->ix.n_series ? &b->ix.s[id].labels : NULL;
}
void pd__block_series_info(const pd_block *b, uint32_t id, int64_t *min_t, int64_t *max_t,
                           uint64_t *n, uint64_t *tb, uint64_t *vb)
{
    const rseries *s = &b->ix.s[id];
    *min_t = s->min_t;
    *max_t = s->max_t;
    *n = s->n;
    *tb = s->tbytes;
    *vb = s->vbytes;
}

int pd__block_select(const pd_block *b, const pd_matcher *ms, size_t n, uint32_t **ids,
                     size_t *n_ids, pd_err *err)
{
    uint8_t *acc = malloc(b->ix.n_series + 1), *in = malloc(b->ix.n_series + 1);
    *ids = NULL;
    *n_ids = 0;
    if (!acc || !in) {
        free(acc);
        free(in);
        return pd_err_set(err, PD_ENOMEM, "out of memory selecting series");
    }
    memset(acc, 1, b->ix.n_series);
    for (size_t k = 0; k < n; k++) {
        const pd_matcher *m = &ms[k];
        /* A matcher that matches "" also selects series without the label:
           start from all and remove the postings of values it rejects. */
        bool empty = pd_matcher_matches(m, "");
        memset(in, empty, b->ix.n_series);
        for (size_t i = 0; i < b->ix.n_post; i++) {
            const pd_ix_post *q = &b->ix.post[i];
            if (strcmp(b->ix.lsym[q->name], m->name))
                continue;
            bool mv = pd_matcher_matches(m, b->ix.lsym[q->value]);
            if (mv == empty)
                continue;
            for (size_t j = 0; j < q->n; j++)
                in[q->ids[j]] = mv;
        }
        for (size_t i = 0; i < b->ix.n_series; i++)
            acc[i] &= in[i];
    }
    size_t c = 0;
    for (size_t i = 0; i < b->ix.n_series; i++)
        c += acc[i];
    uint32_t *v = malloc((c + 1) * sizeof *v);
    if (!v) {
        free(acc);
        free(in);
        return pd_err_set(err, PD_ENOMEM, "out of memory selecting series");
    }
    c = 0;
    for (size_t i = 0; i < b->ix.n_series; i++)
        if (acc[i])
            v[c++] = (uint32_t)i;
    free(acc);
    free(in);
    *ids = v;
    *n_ids = c;
    return 0;
}

/* Reads and checks the frame at off; *kind, and its data into out. */
static int read_frame(pd_block *b, uint64_t off, uint8_t *kind, pd_buf *out, pd_err *err)
{
    uint8_t h[FRAME_HDR];
    pd_buf_reset(out);
    if (off < HDR || off > b->chunks_size || b->chunks_size - off < FRAME_HDR + 4)
        return pd_err_set(err, PD_ECORRUPT, "%s offset %llu: chunk reference past the end",
                          b->chunks_path, (unsigned long long)off);
    if (pread(b->fd, h, FRAME_HDR, (off_t)off) != FRAME_HDR)
        return pd_err_set(err, errno ? -errno : PD_ECORRUPT, "%s offset %llu: short read",
                          b->chunks_path, (unsigned long long)off);
    uint32_t len = get_u32(h);
    *kind = h[4];
    if ((uint64_t)len > b->chunks_size - off - FRAME_HDR - 4 || !*kind || *kind > K_VALUE)
        return pd_err_set(err, PD_ECORRUPT, "%s offset %llu: bad chunk header (kind %u, length %u)",
                          b->chunks_path, (unsigned long long)off, *kind, len);
    int rc = pd_buf_reserve(out, (size_t)len + 4);
    if (rc)
        return rc;
    size_t got = 0;
    while (got < len + 4u) {
        ssize_t k = pread(b->fd, out->data + got, len + 4 - got, (off_t)(off + FRAME_HDR + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return pd_err_set(err, k < 0 ? -errno : PD_ECORRUPT, "%s offset %llu: short read",
                              b->chunks_path, (unsigned long long)off);
        got += (size_t)k;
    }
    uint32_t want = get_u32((uint8_t *)out->data + len);
    uint32_t crc = pd_crc32c(pd_crc32c(0, kind, 1), out->data, len);
    if (want != crc)
        return pd_err_set(err, PD_ECORRUPT, "%s offset %llu: chunk crc32c mismatch", b->chunks_path,
                          (unsigned long long)off);
    out->len = len;
    return 0;
}

static int unzstd(const char *path, uint64_t off, const pd_buf *in, pd_buf *out, pd_err *err)
{
    unsigned long long fc = ZSTD_getFrameContentSize(in->data, in->len);
    if (fc == ZSTD_CONTENTSIZE_UNKNOWN || fc == ZSTD_CONTENTSIZE_ERROR || fc > MAX_GROUP_RAW)
        return pd_err_set(err, PD_ECORRUPT, "%s offset %llu: bad zstd frame", path,
                          (unsigned long long)off);
    pd_buf_reset(out);
    int rc = pd_buf_reserve(out, (size_t)fc + 1);
    if (rc)
        return rc;
    size_t got = ZSTD_decompress(out->data, (size_t)fc + 1, in->data, in->len);
    if (ZSTD_isError(got) || got != fc)
        return pd_err_set(err, PD_ECORRUPT, "%s offset %llu: zstd: %s", path,
                          (unsigned long long)off,
                          ZSTD_isError(got) ? ZSTD_getErrorName(got) : "size mismatch");
    out->len = got;
    return 0;
}

static int load_tchunk(pd_block *b, uint32_t id, pd_tchunk *t, pd_err *err)
{
    pd_buf f, raw;
    uint8_t kind;
    const rseries *s = &b->ix.s[id];
    pd_buf_init(&f, 0);
    pd_buf_init(&raw, 0);
    int rc = read_frame(b, s->tref, &kind, &f, err);
    if (!rc && kind != K_TIME && kind != K_TIME_ZSTD)
        rc = pd_err_set(err, PD_ECORRUPT, "%s offset %llu: not a time chunk (kind %u)",
                        b->chunks_path, (unsigned long long)s->tref, kind);
    if (!rc && kind == K_TIME_ZSTD)
        rc = unzstd(b->chunks_path, s->tref, &f, &raw, err);
    const pd_buf *p = kind == K_TIME_ZSTD ? &raw : &f;
    if (!rc && (rc = pd__tchunk_decode((const uint8_t *)p->data, p->len, b->sym.n_str,
                                       b->chunks_version, t, err)))
        pd_err_prefix(err, "%s offset %llu", b->chunks_path, (unsigned long long)s->tref);
    if (!rc && (t->n != s->n || t->ts[0] != s->min_t || t->ts[t->n - 1] != s->max_t)) {
        rc = pd_err_set(err, PD_ECORRUPT, "%s offset %llu: time chunk disagrees with the index",
                        b->chunks_path, (unsigned long long)s->tref);
        pd__tchunk_release(t);
    }
    if (!rc)
        for (size_t g = 0; g < t->n_group && !rc; g++)
            if (t->g_off[g] < HDR || t->g_off[g] >= s->tref ||
                t->g_first[g + 1] - t->g_first[g] > (b->meta.group > PD_BLOCK_DEFAULT_GROUP
                                                         ? b->meta.group
                                                         : PD_BLOCK_DEFAULT_GROUP)) {
                rc = pd_err_set(err, PD_ECORRUPT, "%s offset %llu: bad value group %zu reference",
                                b->chunks_path, (unsigned long long)s->tref, g);
                pd__tchunk_release(t);
            }
    pd_buf_release(&f);
    pd_buf_release(&raw);
    if (rc == PD_ENOMEM)
        pd_err_set(err, rc, "out of memory reading %s", b->chunks_path);
    return rc;
}

static int load_group(pd_block *b, uint32_t id, const pd_tchunk *t, size_t g, pd_dprof **out,
                      size_t *n, pd_err *err);

int pd__block_read_points(pd_block *b, uint32_t id, int64_t mint, int64_t maxt, pd_points *out,
                          pd_err *err)
{
    memset(out, 0, sizeof *out);
    if (id >= b->ix.n_series)
        return pd_err_set(err, PD_ENOTFOUND, "no series %u in block %s", id, b->meta.ulid);
    pd_tchunk t;
    int rc = load_tchunk(b, id, &t, err);
    if (rc)
        return rc;
    pd_arena *a = malloc(sizeof *a);
    if (!a) {
        pd__tchunk_release(&t);
        return PD_ENOMEM;
    }
    pd_arena_init_small(a, 1024); /* one per series a query holds */
    out->priv = a;
    size_t n = 0;
    for (size_t i = 0; i < t.n; i++)
        n += t.ts[i] >= mint && t.ts[i] <= maxt;
    pd_sample_type_desc **sets = pd_arena_calloc(a, t.n_tset + 1, sizeof *sets);
    if (!(out->v = pd_arena_calloc(a, n + 1, sizeof *out->v)) || !sets)
        goto nomem;
    for (size_t k = 0; k < t.n_tset; k++) {
        size_t m = (size_t)(t.tset_off[k + 1] - t.tset_off[k]);
        if (!(sets[k] = pd_arena_calloc(a, m + 1, sizeof **sets)))
            goto nomem;
        for (size_t x = 0; x < m; x++) {
            uint32_t ty = t.tset_str[2 * (t.tset_off[k] + x)],
                     un = t.tset_str[2 * (t.tset_off[k] + x) + 1];
            if (!(sets[k][x].type = pd_arena_strndup(a, b->sym.str[ty], b->sym.str_len[ty])) ||
                !(sets[k][x].unit = pd_arena_strndup(a, b->sym.str[un], b->sym.str_len[un])))
                goto nomem;
        }
    }
    /* the totals of the points in range, in one piece (no allocation per point) */
    size_t lo = 0, hi = t.n;
    while (lo < t.n && t.ts[lo] < mint)
        lo++;
    while (hi > lo && t.ts[hi - 1] > maxt)
        hi--;
    size_t n_tot = (size_t)(t.tot_off[hi] - t.tot_off[lo]);
    int64_t *tot = pd_arena_alloc(a, (n_tot + 1) * sizeof *tot);
    if (!tot)
        goto nomem;
    memcpy(tot, t.totals + t.tot_off[lo], n_tot * sizeof *tot);
    /* a block with damaged symbols frames: a profile that references one
       cannot be read, so it is not a point either (issue 27: a timeline
       point that 404s when clicked); only then are the groups decoded */
    uint8_t *lost = NULL;
    if (b->sym.n_bad_frames && hi > lo) {
        if (!(lost = calloc(hi - lo, 1)))
            goto nomem;
        size_t n_lost = 0;
        for (size_t g = 0; g < t.n_group; g++) {
            size_t f = t.g_first[g], l = t.g_first[g + 1];
            if (l <= lo || f >= hi)
                continue;
            pd_dprof *d = NULL;
            size_t nd = 0;
            pd_err ge;
            pd_err_clear(&ge);
            int grc = load_group(b, id, &t, g, &d, &nd, &ge);
            if (grc == PD_ENOMEM) {
                free(lost);
                goto nomem;
            }
            for (size_t i = f; i < l; i++) {
                if (i < lo || i >= hi)
                    continue;
                bool bad = grc < 0 || i - f >= nd || dprof_lost(&b->sym, &d[i - f]);
                if (bad && !lost[i - lo]) {
                    lost[i - lo] = 1;
                    n_lost++;
                }
            }
            if (grc == 0) {
                for (size_t i = 0; i < nd; i++)
                    pd__dprof_release(&d[i]);
                free(d);
            }
        }
        if (n_lost)
            pd__storage_warn("block %s: %zu profiles " PD_BLOCK_LOST_PROFILE " (%s); left out",
                             b->meta.ulid, n_lost, b->sym.damage ? b->sym.damage : "?");
    }
    for (size_t i = lo; i < hi; i++) { /* ts ascending: [lo, hi) is the range */
        if (lost && lost[i - lo])
            continue;
        pd_point *pt = &out->v[out->n++];
        pt->ts_ms = t.ts[i];
        pt->n_types = (size_t)(t.tot_off[i + 1] - t.tot_off[i]);
        pt->types = sets[t.tset[i]];
        pt->totals = tot + (t.tot_off[i] - t.tot_off[lo]);
    }
    free(lost);
    pd__tchunk_release(&t);
    return 0;
nomem:
    pd__tchunk_release(&t);
    pd_points_release(out);
    return pd_err_set(err, PD_ENOMEM, "out of memory reading points");
}

/* Reads group g of series id and decodes its profiles into *out (n of them). */
static int load_group(pd_block *b, uint32_t id, const pd_tchunk *t, size_t g, pd_dprof **out,
                      size_t *n, pd_err *err)
{
    pd_buf f, raw;
    uint8_t kind;
    pd_buf_init(&f, 0);
    pd_buf_init(&raw, 0);
    *n = t->g_first[g + 1] - t->g_first[g];
    *out = calloc(*n + 1, sizeof **out);
    if (!*out)
        return PD_ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < *n; i++) { /* ts, totals, time: the reader needs them (chunks_int.h) */
        size_t p = t->g_first[g] + i, m = (size_t)(t->tot_off[p + 1] - t->tot_off[p]);
        (*out)[i].ts = t->ts[p];
        if (!((*out)[i].totals = malloc((m + 1) * sizeof *(*out)[i].totals))) {
            rc = pd_err_set(err, PD_ENOMEM, "out of memory reading a value group");
            break;
        }
        memcpy((*out)[i].totals, t->totals + t->tot_off[p], m * sizeof *(*out)[i].totals);
        (*out)[i].n_types = (uint32_t)m;
        if (t->time_nanos)
            (*out)[i].time_nanos = t->time_nanos[p];
    }
    if (!rc)
        rc = read_frame(b, t->g_off[g], &kind, &f, err);
    if (!rc && kind != K_VALUE)
        rc = pd_err_set(err, PD_ECORRUPT, "%s offset %llu: not a value chunk (kind %u)",
                        b->chunks_path, (unsigned long long)t->g_off[g], kind);
    if (!rc)
        rc = unzstd(b->chunks_path, t->g_off[g], &f, &raw, err);
    if (!rc && (rc = pd__vgroup_decode(&b->sym, (const uint8_t *)raw.data, raw.len, *n, *out, err)))
        pd_err_prefix(err, "%s offset %llu", b->chunks_path, (unsigned long long)t->g_off[g]);
    for (size_t i = 0; !rc && i < *n; i++) {
        pd_dprof *d = &(*out)[i];
        size_t p = t->g_first[g] + i;
        d->ts = t->ts[p];
        size_t m = (size_t)(t->tot_off[p + 1] - t->tot_off[p]);
        if (m != d->n_types || memcmp(d->totals, t->totals + t->tot_off[p], m * sizeof *d->totals))
            rc = pd_err_set(err, PD_ECORRUPT,
                            "%s offset %llu: profile %zu: totals disagree with the time chunk",
                            b->chunks_path, (unsigned long long)t->g_off[g], i);
    }
    if (rc) {
        for (size_t i = 0; i < *n; i++)
            pd__dprof_release(&(*out)[i]);
        free(*out);
        *out = NULL;
    }
    pd_buf_release(&f);
    pd_buf_release(&raw);
    return rc;
}

/* The time chunk of the series last read by this thread, kept decoded: a
 * merge reads the profiles of one series in a row, and decoding its time
 * chunk (every timestamp and total of the series in the block) for each of
 * them was 30% of a 10,000-profile merge. Keyed by the block's open
 * generation (a closed block's entry is never matched again); per thread, so
 * no lock; freed when the thread exits or the entry is replaced. */
typedef struct tcache {
    uint64_t gen;
    uint32_t id;
    bool valid;
    pd_tchunk t;
} tcache;

static pthread_key_t tcache_key;
static pthread_once_t tcache_once = PTHREAD_ONCE_INIT;

static void tcache_free(void *p)
{
    tcache *c = p;
    if (c && c->valid)
        pd__tchunk_release(&c->t);
    free(c);
}

static void tcache_init_key(void)
{
    pthread_key_create(&tcache_key, tcache_free);
}

/* The decoded time chunk of series id of b, owned by this thread's cache
 * (valid until this thread's next call). Errors as load_tchunk. */
static int tcache_get(pd_block *b, uint32_t id, pd_tchunk **out, pd_err *err)
{
    pthread_once(&tcache_once, tcache_init_key);
    tcache *c = pthread_getspecific(tcache_key);
    if (!c) {
        if (!(c = calloc(1, sizeof *c)))
            return pd_err_set(err, PD_ENOMEM, "out of memory reading a time chunk");
        if (pthread_setspecific(tcache_key, c)) {
            free(c);
            return pd_err_set(err, PD_ENOMEM, "out of memory reading a time chunk");
        }
    }
    if (c->valid && c->gen == b->gen && c->id == id) {
        *out = &c->t;
        return 0;
    }
    if (c->valid) {
        pd__tchunk_release(&c->t);
        c->valid = false;
    }
    int rc = load_tchunk(b, id, &c->t, err);
    if (rc)
        return rc;
    c->valid = true;
    c->gen = b->gen;
    c->id = id;
    *out = &c->t;
    return 0;
}

int pd__block_read_profile(pd_block *b, uint32_t id, int64_t ts_ms, pd_profile *out, pd_err *err)
{
    memset(out, 0, sizeof *out);
    if (id >= b->ix.n_series)
        return pd_err_set(err, PD_ENOTFOUND, "no series %u in block %s", id, b->meta.ulid);
    if (ts_ms < b->ix.s[id].min_t || ts_ms > b->ix.s[id].max_t)
        return pd_err_set(err, PD_ENOTFOUND, "no profile at %lld ms", (long long)ts_ms);
    pd_tchunk *tp = NULL;
    int rc = tcache_get(b, id, &tp, err);
    if (rc || !tp)
        return rc ? rc : PD_ENOMEM;
    pd_tchunk t = *tp; /* borrowed from this thread's cache: not released here */
    size_t lo = 0, hi = t.n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t.ts[mid] < ts_ms)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == t.n || t.ts[lo] != ts_ms)
        return pd_err_set(err, PD_ENOTFOUND, "no profile at %lld ms", (long long)ts_ms);
    size_t g = 0;
    while (g + 1 < t.n_group && t.g_first[g + 1] <= lo)
        g++;
    pd_dprof *d;
    size_t n;
    gentry *e = gcache_get(b, b->gen, id, g);
    if (!e && !(rc = load_group(b, id, &t, g, &d, &n, err))) {
        if (!(e = gcache_put(b, b->gen, id, g, d, n))) {
            for (size_t i = 0; i < n; i++)
                pd__dprof_release(&d[i]);
            free(d);
            rc = pd_err_set(err, PD_ENOMEM, "out of memory reading a value group");
        }
    }
    if (e) {
        size_t k = lo - t.g_first[g];
        if (k >= e->n)
            rc = pd_err_set(err, PD_ECORRUPT, "%s offset %llu: group holds %zu profiles",
                            b->chunks_path, (unsigned long long)t.g_off[g], e->n);
        else if (dprof_lost(&b->sym, &e->d[k]))
            rc = lost_err(b, e->d[k].ts, err);
        else if ((rc = pd__dprof_to_profile(&b->sym, &e->d[k], out, err)) == PD_ECORRUPT)
            pd_err_prefix(err, "%s offset %llu", b->chunks_path, (unsigned long long)t.g_off[g]);
        gcache_release(e);
    }
    return rc;
}

int pd__block_series_foreach(pd_block *b, uint32_t id,
                             int (*fn)(void *ctx, int64_t ts_ms, const pd_profile *p), void *ctx,
                             pd_err *err)
{
    if (id >= b->ix.n_series)
        return pd_err_set(err, PD_ENOTFOUND, "no series %u in block %s", id, b->meta.ulid);
    pd_tchunk t;
    int rc = load_tchunk(b, id, &t, err);
    if (rc)
        return rc;
    for (size_t g = 0; g < t.n_group && !rc; g++) {
        pd_dprof *d;
        size_t n;
        if ((rc = load_group(b, id, &t, g, &d, &n, err)))
            break;
        for (size_t i = 0; i < n; i++) {
            pd_profile p;
            if (!rc && dprof_lost(&b->sym, &d[i]))
                rc = lost_err(b, d[i].ts, err);
            if (!rc) {
                rc = pd__dprof_to_profile(&b->sym, &d[i], &p, err);
                if (rc == PD_ECORRUPT)
                    pd_err_prefix(err, "%s offset %llu", b->chunks_path,
                                  (unsigned long long)t.g_off[g]);
                if (!rc) {
                    rc = fn(ctx, d[i].ts, &p);
                    pd_profile_release(&p);
                }
            }
            pd__dprof_release(&d[i]);
        }
        free(d);
    }
    pd__tchunk_release(&t);
    return rc;
}

int pd__block_series_foreach_dprof(pd_block *b, uint32_t id, int64_t mint, int64_t maxt,
                                   int (*fn)(void *ctx, const pd_dprof *d), void *ctx, pd_err *err)
{
    if (id >= b->ix.n_series)
        return pd_err_set(err, PD_ENOTFOUND, "no series %u in block %s", id, b->meta.ulid);
    pd_tchunk t;
    int rc = load_tchunk(b, id, &t, err), bad = 0;
    if (rc)
        return rc;
    for (size_t g = 0; g < t.n_group && !rc; g++) {
        size_t f = t.g_first[g], l = t.g_first[g + 1]; /* profiles [f, l) */
        if (l == f || t.ts[f] > maxt || t.ts[l - 1] < mint)
            continue;
        pd_dprof *d;
        size_t n;
        pd_err ge;
        pd_err_clear(&ge);
        if ((rc = load_group(b, id, &t, g, &d, &n, &ge))) {
            if (rc != PD_ECORRUPT) {
                if (err)
                    *err = ge;
                break;
            }
            if (!bad && err) /* the first damage is reported; the other groups are read */
                *err = ge;
            bad = rc;
            rc = 0;
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            if (!rc && d[i].ts >= mint && d[i].ts <= maxt && dprof_lost(&b->sym, &d[i])) {
                if (!bad && err) /* reported once; the other profiles are read */
                    lost_err(b, d[i].ts, err);
                bad = PD_ECORRUPT;
            } else if (!rc && d[i].ts >= mint && d[i].ts <= maxt)
                rc = fn(ctx, &d[i]);
            pd__dprof_release(&d[i]);
        }
        free(d);
    }
    pd__tchunk_release(&t);
    return rc ? rc : bad;
}

int pd__block_check(const char *dir, pd_block_meta *meta, pd_err *err)
{
    pd_block *b;
    int rc = pd__block_open(dir, &b, err);
    if (rc)
        return rc;
    if (meta)
        *meta = b->meta;
    if (b->meta_rebuilt || b->sect_damage) {
        rc = pd_err_set(err, PD_ECORRUPT, "%s", b->meta_rebuilt ? b->damage : b->sect_damage);
        pd__block_close(b);
        return rc;
    }
    uint64_t samples = 0;
    for (uint32_t id = 0; id < b->ix.n_series && !rc; id++) {
        pd_tchunk t;
        if ((rc = load_tchunk(b, id, &t, err)))
            break;
        for (size_t g = 0; g < t.n_group && !rc; g++) {
            pd_dprof *d;
            size_t n;
            if ((rc = load_group(b, id, &t, g, &d, &n, err)))
                break;
            for (size_t i = 0; i < n; i++) {
                samples += d[i].n_sample;
                pd_profile p;
                if (!rc && (rc = pd__dprof_to_profile(&b->sym, &d[i], &p, err)) == 0)
                    pd_profile_release(&p);
                else if (rc == PD_ECORRUPT)
                    pd_err_prefix(err, "%s offset %llu", b->chunks_path,
                                  (unsigned long long)t.g_off[g]);
                pd__dprof_release(&d[i]);
            }
            free(d);
        }
        pd__tchunk_release(&t);
    }
    if (!rc && samples != b->meta.n_samples)
        rc = pd_err_set(err, PD_ECORRUPT, "%s/meta.json: numSamples %llu, the chunks hold %llu",
                        b->dir, (unsigned long long)b->meta.n_samples, (unsigned long long)samples);
    pd__block_close(b);
    return rc;
}
