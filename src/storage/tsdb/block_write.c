/*
 * storage/tsdb/block_write.c — writing immutable blocks (API: block_int.h;
 * the reader and check are block.c). Formats: the top of block.c and
 * docs/format/{index,symbols,chunks}.md.
 *
 * Writer: profiles are decomposed on add (symbols interned into one
 * pd_symbols, samples kept as sorted id/value arrays); write sorts series by
 * labels and each series by time, and streams the chunk file.
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

/* ---- writer ---- */

/* A closed value group of a streamed series, compressed. */
typedef struct zgroup {
    uint8_t *z;
    size_t len;
    uint32_t first; /* its first profile */
} zgroup;

/* A series of the writer. Streamed (the default, while its profiles come in
 * ascending time): each profile is encoded into the open value group as it
 * is added and only its time-chunk fields stay in p[] (ts, sample types,
 * totals: the samples are freed); full groups are compressed at once. So a
 * head cut or a compaction holds the block compressed, not decoded.
 * Buffered (after a profile older than the last one: imports, overlapping
 * compaction sources): the groups are decoded back into p[] and the series
 * is sorted and encoded by pd__block_writer_write, as every series was
 * before. Both give the same bytes. */
typedef struct wseries {
    pd_labels labels;
    pd_dprof *p;
    size_t n, cap;
    pd_u64map ts; /* ts -> 1, duplicates */
    uint64_t tref, tbytes, vbytes;
    int64_t min_t, max_t;
    bool buffered;
    pd_vgroup_enc enc; /* streamed: the open group's encoder */
    pd_buf raw;        /* streamed: the open group's encoding */
    size_t g_a;        /* streamed: first profile of the open group */
    zgroup *zg;        /* streamed: the closed groups */
    size_t n_zg, cap_zg;
} wseries;

struct pd_block_writer {
    pd_block_writer_opts o;
    pd_symbols sym;
    wseries *s;
    size_t n, cap;
    pd_u64map by_hash; /* labels hash -> index of first series */
    uint32_t *next;    /* collision chain */
    size_t n_prof;
    uint64_t n_samples;
    int failed; /* an encoder ran out of memory: its group is unusable; write fails */
};

int pd__block_writer_new(const pd_block_writer_opts *opts, pd_block_writer **out)
{
    pd_block_writer *w = calloc(1, sizeof *w);
    *out = NULL;
    if (!w)
        return PD_ENOMEM;
    if (opts)
        w->o = *opts;
    if (!w->o.group)
        w->o.group = PD_BLOCK_DEFAULT_GROUP;
    if (!w->o.group_bytes)
        w->o.group_bytes = PD_BLOCK_DEFAULT_GROUP_BYTES;
    if (!w->o.zstd_level)
        w->o.zstd_level = PD_BLOCK_DEFAULT_LEVEL;
    if (!w->o.stack_format)
        w->o.stack_format = PD_STACKS_TREE;
    if (w->o.version != 1)
        w->o.version = PD_BLOCK_VERSION;
    pd_u64map_init(&w->by_hash);
    if (pd__symbols_init(&w->sym, w->o.stack_format, true)) {
        free(w);
        return PD_ENOMEM;
    }
    *out = w;
    return 0;
}

void pd__block_writer_free(pd_block_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n; i++) {
        wseries *s = &w->s[i];
        pd_labels_release(&s->labels);
        for (size_t j = 0; j < s->n; j++)
            pd__dprof_release(&s->p[j]);
        free(s->p);
        pd_u64map_release(&s->ts);
        pd__vgroup_enc_release(&s->enc);
        pd_buf_release(&s->raw);
        for (size_t j = 0; j < s->n_zg; j++)
            free(s->zg[j].z);
        free(s->zg);
    }
    free(w->s);
    free(w->next);
    pd_u64map_release(&w->by_hash);
    pd__symbols_release(&w->sym);
    free(w);
}

size_t pd__block_writer_count(const pd_block_writer *w)
{
    return w->n_prof;
}

static int find_series(pd_block_writer *w, const pd_labels *l, wseries **out)
{
    uint64_t h = pd_labels_hash(l), first;
    if (h == UINT64_MAX)
        h = 0;
    bool have = pd_u64map_get(&w->by_hash, h, &first);
    if (have)
        for (uint32_t j = (uint32_t)first; j != UINT32_MAX; j = w->next[j])
            if (!pd_labels_cmp(&w->s[j].labels, l)) {
                *out = &w->s[j];
                return 0;
            }
    if (w->n == w->cap) {
        size_t nc = w->cap ? 2 * w->cap : 16;
        wseries *ns = realloc(w->s, nc * sizeof *ns);
        if (ns)
            w->s = ns;
        uint32_t *nx = realloc(w->next, nc * sizeof *nx);
        if (nx)
            w->next = nx;
        if (!ns || !nx)
            return PD_ENOMEM;
        w->cap = nc;
    }
    wseries *s = &w->s[w->n];
    memset(s, 0, sizeof *s);
    pd_u64map_init(&s->ts);
    pd__vgroup_enc_init(&s->enc);
    s->enc.derive = true; /* the time chunk holds the totals */
    pd_buf_init(&s->raw, 0);
    if (pd_labels_copy(&s->labels, l))
        return PD_ENOMEM;
    if (pd_u64map_put(&w->by_hash, h, w->n)) {
        pd_labels_release(&s->labels);
        return PD_ENOMEM;
    }
    w->next[w->n] = have ? (uint32_t)first : UINT32_MAX;
    w->n++;
    *out = s;
    return 0;
}

static int zstd_into(pd_buf *out, const void *src, size_t len, int level);

/* Streamed series: compresses the open group into s->zg. */
static int close_group(pd_block_writer *w, wseries *s)
{
    if (s->n == s->g_a)
        return 0;
    if (s->n_zg == s->cap_zg) {
        size_t nc = s->cap_zg ? 2 * s->cap_zg : 4;
        zgroup *v = realloc(s->zg, nc * sizeof *v);
        if (!v)
            return PD_ENOMEM;
        s->zg = v;
        s->cap_zg = nc;
    }
    pd_buf z;
    pd_buf_init(&z, 0);
    int rc = zstd_into(&z, s->raw.data, s->raw.len, w->o.zstd_level);
    if (rc) {
        pd_buf_release(&z);
        return rc;
    }
    size_t len = z.len;
    uint8_t *b = (uint8_t *)pd_buf_detach(&z, NULL);
    if (!b)
        return PD_ENOMEM;
    s->zg[s->n_zg++] = (zgroup){b, len, (uint32_t)s->g_a};
    pd__vgroup_enc_reset(&s->enc);
    pd_buf_reset(&s->raw);
    s->g_a = s->n;
    return 0;
}

/* Streamed series: encodes d (the profile at index s->n) into the open
 * group, closing the group first where pd__block_writer_write would end it
 * (G profiles, group_bytes of raw encoding, PD_VGROUP_GROUP_VALUES values),
 * then frees d's samples (the time chunk needs only its ts, types, totals). */
static int stream_append(pd_block_writer *w, wseries *s, pd_dprof *d)
{
    uint64_t dv = (uint64_t)d->n_sample * d->n_types;
    size_t in_group = s->n - s->g_a;
    int rc;
    if (in_group &&
        (in_group >= w->o.group || s->raw.len >= w->o.group_bytes ||
         s->enc.n_values + dv > PD_VGROUP_GROUP_VALUES) &&
        (rc = close_group(w, s)))
        return rc;
    size_t len0 = s->raw.len;
    if ((rc = pd__vgroup_enc_append(&s->enc, d, &s->raw))) {
        s->raw.len = len0;
        return rc;
    }
    free(d->stack);
    free(d->lset);
    free(d->value);
    d->stack = d->lset = NULL;
    d->value = NULL;
    return 0;
}

/* Turns streamed series s into a buffered one: its groups are decoded back
 * into s->p[0 .. s->n) (the profile at s->n, just added, is whole). */
static int to_buffered(pd_block_writer *w, wseries *s, pd_err *err)
{
    int rc = close_group(w, s);
    if (rc)
        return pd_err_set(err, rc, "out of memory");
    pd_buf raw;
    pd_buf_init(&raw, 0);
    for (size_t k = 0; k < s->n_zg && !rc; k++) {
        const zgroup *g = &s->zg[k];
        size_t first = g->first, n = (k + 1 < s->n_zg ? s->zg[k + 1].first : s->n) - first;
        unsigned long long fc = ZSTD_getFrameContentSize(g->z, g->len);
        pd_dprof *tmp = calloc(n + 1, sizeof *tmp);
        if (!tmp || fc == ZSTD_CONTENTSIZE_UNKNOWN || fc == ZSTD_CONTENTSIZE_ERROR ||
            pd_buf_reserve(&raw, (size_t)fc + 1)) {
            free(tmp);
            rc = pd_err_set(err, PD_ENOMEM, "out of memory");
            break;
        }
        size_t got = ZSTD_decompress(raw.data, (size_t)fc + 1, g->z, g->len);
        /* what the time chunk will hold: ts, totals, time (chunks_int.h) */
        for (size_t j = 0; j < n && !rc; j++) {
            const pd_dprof *o = &s->p[first + j];
            tmp[j].ts = o->ts;
            tmp[j].n_types = o->n_types;
            tmp[j].time_nanos = o->time_nanos;
            if (!(tmp[j].totals = malloc((o->n_types + 1) * sizeof *tmp[j].totals)))
                rc = pd_err_set(err, PD_ENOMEM, "out of memory");
            else
                memcpy(tmp[j].totals, o->totals, o->n_types * sizeof *tmp[j].totals);
        }
        if (!rc && (ZSTD_isError(got) || got != fc))
            rc = pd_err_set(err, PD_ECORRUPT, "a value group the writer made does not decompress");
        if (!rc)
            rc = pd__vgroup_decode(&w->sym, (const uint8_t *)raw.data, got, n, tmp, err);
        for (size_t j = 0; j < n; j++) {
            if (rc == 0) {
                pd__dprof_release(&s->p[first + j]);
                s->p[first + j] = tmp[j];
            } else
                pd__dprof_release(&tmp[j]);
        }
        free(tmp);
    }
    pd_buf_release(&raw);
    if (rc)
        return rc; /* (groups decoded so far are whole in p[]; the rest stay
                      streamed: the caller gives up on this writer) */
    for (size_t k = 0; k < s->n_zg; k++)
        free(s->zg[k].z);
    free(s->zg);
    s->zg = NULL;
    s->n_zg = s->cap_zg = 0;
    pd__vgroup_enc_release(&s->enc);
    pd_buf_release(&s->raw);
    pd_buf_init(&s->raw, 0);
    s->buffered = true;
    return 0;
}

int pd__block_writer_add(pd_block_writer *w, const pd_labels *labels, int64_t ts_ms,
                         const pd_profile *p, pd_err *err)
{
    int rc;
    wseries *s;
    if (!pd_labels_get(labels, "__name__"))
        return pd_err_set(err, PD_EINVAL, "labels have no __name__ (the profile type)");
    if ((rc = find_series(w, labels, &s)))
        return rc;
    uint64_t key = (uint64_t)ts_ms == UINT64_MAX ? 0x7fffffffffffffffULL : (uint64_t)ts_ms;
    uint64_t seen = 0;
    if (pd_u64map_get(&s->ts, key, &seen) && seen)
        return pd_err_set(err, PD_EEXIST, "a profile of this series at %lld ms was already added",
                          (long long)ts_ms);
    if (s->n == s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 16;
        pd_dprof *np = realloc(s->p, nc * sizeof *np);
        if (!np)
            return PD_ENOMEM;
        s->p = np;
        s->cap = nc;
    }
    if ((rc = pd__dprof_from_profile(&w->sym, p, ts_ms, &s->p[s->n], err)))
        return rc;
    if ((rc = pd_u64map_put(&s->ts, key, 1))) {
        pd__dprof_release(&s->p[s->n]);
        return rc;
    }
    if (!s->buffered && s->n && ts_ms < s->p[s->n - 1].ts && (rc = to_buffered(w, s, err)) < 0)
        goto undo;
    uint64_t n_samples = s->p[s->n].n_sample;
    if (!s->buffered && (rc = stream_append(w, s, &s->p[s->n])) < 0) {
        if (rc != PD_ETOOBIG) /* (too big: nothing was appended, the group is fine) */
            w->failed = rc;
        pd_err_set(err, rc, "%s",
                   rc == PD_ETOOBIG ? "the profile has too many values for a "
                                      "value group"
                                    : "out of memory");
        goto undo;
    }
    w->n_samples += n_samples;
    s->n++;
    w->n_prof++;
    return 0;
undo:
    pd__dprof_release(&s->p[s->n]);
    pd_u64map_put(&s->ts, key, 0); /* (a value of 0: no longer a duplicate) */
    return rc;
}

static int dprof_ts_cmp(const void *a, const void *b)
{
    const pd_dprof *x = a, *y = b;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static const pd_block_writer *g_sort_w; /* qsort has no context argument in C11 */
static int series_cmp(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return pd_labels_cmp(&g_sort_w->s[*x].labels, &g_sort_w->s[*y].labels);
}

/* write(2) all of it */
static int write_all(int fd, const void *p, size_t len)
{
    const uint8_t *b = p;
    while (len) {
        ssize_t k = write(fd, b, len);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        b += k;
        len -= (size_t)k;
    }
    return 0;
}

/* Writes a frame (kind, data) at the end of fd (whose size is *off). */
static int write_frame(int fd, uint64_t *off, uint8_t kind, const void *data, size_t len)
{
    uint8_t h[FRAME_HDR], t[4];
    if (len > UINT32_MAX)
        return PD_ETOOBIG;
    put_u32(h, (uint32_t)len);
    h[4] = kind;
    put_u32(t, pd_crc32c(pd_crc32c(0, &kind, 1), data, len));
    int rc;
    if ((rc = write_all(fd, h, FRAME_HDR)) || (rc = write_all(fd, data, len)) ||
        (rc = write_all(fd, t, 4)))
        return rc;
    *off += FRAME_HDR + len + 4;
    return 0;
}

static int zstd_into(pd_buf *out, const void *src, size_t len, int level)
{
    size_t bound = ZSTD_compressBound(len);
    pd_buf_reset(out);
    int rc = pd_buf_reserve(out, bound);
    if (rc)
        return rc;
    size_t z = ZSTD_compress(out->data, bound, src, len, level);
    if (ZSTD_isError(z))
        return PD_ENOMEM;
    out->len = z;
    return 0;
}

int pd__block_fsync_path(const char *path, bool dir)
{
    int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) ? -errno : 0;
    close(fd);
    return rc;
}

int pd__block_write_file(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    int rc = write_all(fd, data, len);
    if (!rc && fsync(fd))
        rc = -errno;
    close(fd);
    return rc;
}

static void make_ulid(char id[27])
{
    static const char A[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    uint8_t b[16];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t ms = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
    for (int i = 0; i < 6; i++)
        b[i] = (uint8_t)(ms >> (8 * (5 - i)));
    if (getrandom(b + 6, 10, 0) != 10)
        for (int i = 6; i < 16; i++)
            b[i] = (uint8_t)(rand() & 0xff);
    /* 128 bits -> 26 base32 digits, most significant first (2 leading pad bits) */
    for (int c = 0; c < 26; c++) {
        int v = 0;
        for (int k = 0; k < 5; k++) {
            int bit = c * 5 + k - 2; /* bit index from the top of the 128 */
            int x = bit < 0 ? 0 : (b[bit / 8] >> (7 - bit % 8)) & 1;
            v = v << 1 | x;
        }
        id[c] = A[v];
    }
    id[26] = 0;
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The index file of w's series in `order` (block_index.c). */
static int index_bytes(pd_block_writer *w, const uint32_t *order, pd_buf *out)
{
    pd_ixw_series *v = calloc(w->n + 1, sizeof *v);
    uint32_t **ids = calloc(w->n + 1, sizeof *ids);
    int rc = v && ids ? 0 : PD_ENOMEM;
    for (size_t k = 0; !rc && k < w->n; k++) {
        const wseries *s = &w->s[order[k]];
        v[k] = (pd_ixw_series){&s->labels, s->min_t,  s->max_t, s->n, s->tref,
                               s->tbytes,  s->vbytes, NULL,     0};
        if (w->o.version == 1)
            continue;
        /* the distinct strings its time chunk names (sample types and units) */
        size_t m = 0;
        for (size_t j = 0; j < s->n; j++)
            m += 2 * (size_t)s->p[j].n_types;
        if (!(ids[k] = malloc((m + 1) * sizeof **ids))) {
            rc = PD_ENOMEM;
            break;
        }
        m = 0;
        for (size_t j = 0; j < s->n; j++)
            for (uint32_t t = 0; t < 2 * s->p[j].n_types; t++)
                ids[k][m++] = s->p[j].types[t];
        qsort(ids[k], m, sizeof **ids, u32_cmp);
        size_t u = 0;
        for (size_t j = 0; j < m; j++)
            if (!u || ids[k][u - 1] != ids[k][j])
                ids[k][u++] = ids[k][j];
        v[k].tstr = ids[k];
        v[k].n_tstr = u;
    }
    if (!rc)
        rc = pd__index_encode(w->o.version, v, w->n, &w->sym, out);
    for (size_t k = 0; ids && k < w->n; k++)
        free(ids[k]);
    free(ids);
    free(v);
    return rc;
}

int pd__block_writer_write(pd_block_writer *w, const char *parent, char id[27], pd_err *err)
{
    int rc = 0, fd = -1;
    char tmp[4096], fin[4096], path[4200];
    pd_buf raw, z, idx;
    pd_vgroup_enc venc;
    uint32_t *order = NULL, *g_first = NULL;
    uint64_t *g_off = NULL;
    const pd_dprof **ptrs = NULL;
    json_t *meta = NULL;
    char *js = NULL;
    pd_buf_init(&raw, 0);
    pd_buf_init(&z, 0);
    pd_buf_init(&idx, 0);
    pd__vgroup_enc_init(&venc);
    venc.derive = true; /* the time chunk holds the totals */
    if (w->failed)
        return pd_err_set(err, w->failed, "the block writer ran out of memory earlier");
    if (!w->n_prof)
        return pd_err_set(err, PD_EINVAL, "no profiles to write into a block");
    make_ulid(id);
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", parent, id);
    snprintf(fin, sizeof fin, "%s/%s", parent, id);
    if (mkdir(tmp, 0755)) {
        rc = pd_err_set(err, -errno, "mkdir %s: %s", tmp, strerror(errno));
        goto out;
    }
    snprintf(path, sizeof path, "%s/chunks", tmp);
    if (mkdir(path, 0755)) {
        rc = pd_err_set(err, -errno, "mkdir %s: %s", path, strerror(errno));
        goto out;
    }

    /* chunks */
    snprintf(path, sizeof path, "%s/" CHUNKS_NAME, tmp);
    if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
        rc = pd_err_set(err, -errno, "open %s: %s", path, strerror(errno));
        goto out;
    }
    uint8_t ch[HDR] = {'P', 'D', 'C', 'H', PD_CHUNKS_VERSION, 0, 0, 0};
    uint64_t off = HDR;
    if ((rc = write_all(fd, ch, HDR)))
        goto werr;
    rc = PD_ENOMEM;
    if (!(order = malloc(w->n * sizeof *order)))
        goto out;
    for (size_t i = 0; i < w->n; i++)
        order[i] = (uint32_t)i;
    g_sort_w = w;
    qsort(order, w->n, sizeof *order, series_cmp);
    int64_t min_t = INT64_MAX, max_t = INT64_MIN;
    uint64_t time_bytes = 0, value_bytes = 0;
    for (size_t k = 0; k < w->n; k++) {
        wseries *s = &w->s[order[k]];
        if (!s->buffered && (rc = close_group(w, s)))
            goto out;
        if (s->buffered)
            qsort(s->p, s->n, sizeof *s->p, dprof_ts_cmp);
        s->min_t = s->p[0].ts;
        s->max_t = s->p[s->n - 1].ts;
        if (s->min_t < min_t)
            min_t = s->min_t;
        if (s->max_t > max_t)
            max_t = s->max_t;
        size_t G = w->o.group, ng = 0;
        free(ptrs);
        free(g_first);
        free(g_off);
        ptrs = malloc(s->n * sizeof *ptrs);
        g_first = malloc((s->n + 1) * sizeof *g_first);
        g_off = malloc((s->n + 1) * sizeof *g_off);
        if (!ptrs || !g_first || !g_off) {
            rc = PD_ENOMEM;
            goto out;
        }
        for (size_t i = 0; i < s->n; i++)
            ptrs[i] = &s->p[i];
        uint64_t before = off;
        /* a group ends after G profiles, once its raw encoding reaches
           group_bytes, or before its decoded values would pass
           PD_VGROUP_GROUP_VALUES (unchanged samples cost no raw byte),
           whichever comes first */
        pd_buf_reset(&raw);
        pd__vgroup_enc_reset(&venc);
        for (size_t j = 0; !s->buffered && j < s->n_zg; j++) { /* encoded while added */
            g_first[ng] = s->zg[j].first;
            g_off[ng] = off;
            ng++;
            if ((rc = write_frame(fd, &off, K_VALUE, s->zg[j].z, s->zg[j].len)))
                goto werr;
        }
        for (size_t i = 0, a = 0; s->buffered && i < s->n; i++) {
            if ((rc = pd__vgroup_enc_append(&venc, ptrs[i], &raw))) {
                if (rc == PD_ETOOBIG)
                    pd_err_set(err, rc,
                               "writing block %s: the profile at %lld ms (%u samples x %u "
                               "types) does not fit a value group (at most %llu values)",
                               tmp, (long long)ptrs[i]->ts, ptrs[i]->n_sample, ptrs[i]->n_types,
                               (unsigned long long)PD_VGROUP_MAX_VALUES);
                goto out;
            }
            if (i + 1 < s->n && i + 1 - a < G && raw.len < w->o.group_bytes &&
                venc.n_values + (uint64_t)ptrs[i + 1]->n_sample * ptrs[i + 1]->n_types <=
                    PD_VGROUP_GROUP_VALUES)
                continue;
            pd__vgroup_enc_reset(&venc);
            g_first[ng] = (uint32_t)a;
            g_off[ng] = off;
            ng++;
            if ((rc = zstd_into(&z, raw.data, raw.len, w->o.zstd_level)))
                goto out;
            if ((rc = write_frame(fd, &off, K_VALUE, z.data, z.len)))
                goto werr;
            pd_buf_reset(&raw);
            a = i + 1;
        }
        g_first[ng] = (uint32_t)s->n;
        s->vbytes = off - before;
        pd_buf_reset(&raw);
        if ((rc = pd__tchunk_encode(ptrs, s->n, g_first, g_off, ng, &raw)) ||
            (rc = zstd_into(&z, raw.data, raw.len, w->o.zstd_level)))
            goto out;
        s->tref = off;
        bool zz = z.len < raw.len;
        if ((rc = write_frame(fd, &off, zz ? K_TIME_ZSTD : K_TIME, zz ? z.data : raw.data,
                              zz ? z.len : raw.len)))
            goto werr;
        s->tbytes = off - s->tref;
        time_bytes += s->tbytes;
        value_bytes += s->vbytes;
    }
    if (fsync(fd))
        rc = -errno;
    close(fd);
    fd = -1;
    if (rc)
        goto werr;
    uint64_t chunks_bytes = off;

    /* symbols */
    {
        int ver = w->o.version == 1 ? 1 : w->o.sym_version == 2 ? 2 : PD_SYMBOLS_FILE_VERSION;
        pd_buf_reset(&raw);
        if ((rc = pd__symbols_file_encode(&w->sym, ver, w->o.zstd_level, w->o.sym_frame_bytes,
                                          &raw)))
            goto out;
        snprintf(path, sizeof path, "%s/symbols", tmp);
        if ((rc = pd__block_write_file(path, raw.data, raw.len)))
            goto werr;
        size_t sl = raw.len;
        /* index */
        if ((rc = index_bytes(w, order, &idx)))
            goto out;
        snprintf(path, sizeof path, "%s/index", tmp);
        if ((rc = pd__block_write_file(path, idx.data, idx.len)))
            goto werr;
        /* meta.json */
        const char *sf = w->sym.stack_format == PD_STACKS_TREE ? "tree" : "list";
        /* compaction.sources only when there are some (docs/format/index.md:
           optional; `"sources":[]` was 13 of the ~390 bytes a block of one
           tiny series pays alone) */
        json_t *srcs = w->o.n_sources ? json_array() : NULL;
        for (size_t i = 0; srcs && i < w->o.n_sources; i++)
            if (json_array_append_new(srcs, json_string(w->o.sources[i]))) {
                json_decref(srcs);
                srcs = NULL;
            }
        if (w->o.n_sources && !srcs) {
            rc = PD_ENOMEM;
            goto out;
        }
        meta = json_pack(
            "{s:s, s:i, s:I, s:I, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}, s:s, s:I, "
            "s:{s:I, s:I, s:I}, s:{s:i, s:o*}}",
            "ulid", id, "version", w->o.version, "minTime", (json_int_t)min_t, "maxTime",
            (json_int_t)max_t, "stats", "numSeries", (json_int_t)w->n, "numProfiles",
            (json_int_t)w->n_prof, "numSamples", (json_int_t)w->n_samples, "numStrings",
            (json_int_t)w->sym.n_str, "numMappings", (json_int_t)w->sym.n_map, "numFunctions",
            (json_int_t)w->sym.n_fn, "numLocations", (json_int_t)w->sym.n_loc, "numStacks",
            (json_int_t)w->sym.n_stack, "numLabelSets", (json_int_t)w->sym.n_lset, "stackFormat",
            sf, "groupSize", (json_int_t)w->o.group, "files", "index", (json_int_t)idx.len,
            "symbols", (json_int_t)sl, CHUNKS_NAME, (json_int_t)chunks_bytes, "compaction", "level",
            w->o.level > 0 ? w->o.level : 1, "sources", srcs);
        srcs = NULL; /* stolen by json_pack ("o"), even on failure */
        (void)time_bytes;
        (void)value_bytes;
        if (!meta || !(js = json_dumps(meta, JSON_COMPACT | JSON_PRESERVE_ORDER))) {
            rc = PD_ENOMEM;
            goto out;
        }
        snprintf(path, sizeof path, "%s/meta.json", tmp);
        if ((rc = pd__block_write_file(path, js, strlen(js))))
            goto werr;
    }
    snprintf(path, sizeof path, "%s/chunks", tmp);
    if ((rc = pd__block_fsync_path(path, true)) || (rc = pd__block_fsync_path(tmp, true)))
        goto werr;
    if (rename(tmp, fin)) {
        rc = -errno;
        snprintf(path, sizeof path, "%s", fin);
        goto werr;
    }
    if ((rc = pd__block_fsync_path(parent, true))) {
        snprintf(path, sizeof path, "%s", parent);
        goto werr;
    }
    rc = 0;
    goto out;
werr:
    if (rc < 0 && rc > -1000)
        pd_err_set(err, rc, "writing %s: %s", path, strerror(-rc));
    else
        pd_err_set(err, rc, "writing %s: %s", path, pd_strerror(rc));
out:
    if (rc == PD_ENOMEM)
        pd_err_set(err, rc, "out of memory writing block %s", tmp);
    if (fd >= 0)
        close(fd);
    if (rc && tmp[0]) { /* leave no half-written block: remove tmp */
        char p2[4200];
        snprintf(p2, sizeof p2, "%s/" CHUNKS_NAME, tmp);
        unlink(p2);
        snprintf(p2, sizeof p2, "%s/chunks", tmp);
        rmdir(p2);
        const char *fs[] = {"index", "symbols", "meta.json"};
        for (int i = 0; i < 3; i++) {
            snprintf(p2, sizeof p2, "%s/%s", tmp, fs[i]);
            unlink(p2);
        }
        rmdir(tmp);
    }
    json_decref(meta);
    free(js);
    free(order);
    free(ptrs);
    free(g_first);
    free(g_off);
    pd_buf_release(&raw);
    pd_buf_release(&z);
    pd_buf_release(&idx);
    pd__vgroup_enc_release(&venc);
    return rc;
}
