/*
 * storage/tsdb/block_index.c — encoding and decoding the `index` file of a
 * block, versions 1 and 2 (layouts: block_index_int.h,
 * docs/format/index.md). Everything read is checked: a bad byte gives
 * PD_ECORRUPT or (version 2) a lost entry, never a crash.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/varint.h"
#include "storage/tsdb/block_index_int.h"

#define HDR 8
#define CHUNKS_HDR 8
enum { S_SERIES = 1, S_POSTINGS = 2 };

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* ---- label symbols and postings (both versions) ---- */

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Index of s in the sorted syms (present by construction). */
static uint32_t sym_find(char *const *syms, size_t n, const char *s)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(syms[mid], s);
        if (!c)
            return (uint32_t)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

typedef struct pair {
    uint32_t name, value, series;
} pair;

static int pair_cmp(const void *a, const void *b)
{
    const pair *x = a, *y = b;
    if (x->name != y->name)
        return x->name < y->name ? -1 : 1;
    if (x->value != y->value)
        return x->value < y->value ? -1 : 1;
    return x->series < y->series ? -1 : x->series > y->series;
}

/* The sorted distinct label strings of ls[0..n) (borrowed pointers) and
 * their (name, value, series) pairs sorted. */
static int label_pairs(const pd_labels *const *ls, size_t n, char ***syms_out, size_t *ns_out,
                       pair **pairs_out, size_t *np_out)
{
    size_t n_lab = 0;
    for (size_t i = 0; i < n; i++)
        n_lab += ls[i]->n;
    char **syms = malloc((2 * n_lab + 1) * sizeof *syms);
    pair *pairs = malloc((n_lab + 1) * sizeof *pairs);
    if (!syms || !pairs) {
        free(syms);
        free(pairs);
        return PD_ENOMEM;
    }
    size_t ns = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < ls[i]->n; j++) {
            syms[ns++] = ls[i]->v[j].name;
            syms[ns++] = ls[i]->v[j].value;
        }
    qsort(syms, ns, sizeof *syms, str_cmp);
    size_t u = 0;
    for (size_t i = 0; i < ns; i++)
        if (!u || strcmp(syms[u - 1], syms[i]))
            syms[u++] = syms[i];
    ns = u;
    size_t np = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < ls[i]->n; j++)
            pairs[np++] = (pair){sym_find(syms, ns, ls[i]->v[j].name),
                                 sym_find(syms, ns, ls[i]->v[j].value), (uint32_t)i};
    qsort(pairs, np, sizeof *pairs, pair_cmp);
    *syms_out = syms;
    *ns_out = ns;
    *pairs_out = pairs;
    *np_out = np;
    return 0;
}

#define PUT(o, v)                                                                                  \
    do {                                                                                           \
        if ((rc = pd_buf_put_varint((o), (uint64_t)(v))))                                          \
            goto out;                                                                              \
    } while (0)

/* Appends (with_syms) label symbols and the postings of ls[0..n) (series
 * ids = positions). */
static int put_postings(const pd_labels *const *ls, size_t n, bool with_syms, pd_buf *o)
{
    char **syms = NULL;
    pair *pairs = NULL;
    size_t ns, np;
    int rc = label_pairs(ls, n, &syms, &ns, &pairs, &np);
    if (rc)
        return rc;
    if (with_syms) {
        PUT(o, ns);
        for (size_t i = 0; i < ns; i++) {
            size_t l = strlen(syms[i]);
            PUT(o, l);
            if ((rc = pd_buf_append(o, syms[i], l)))
                goto out;
        }
    }
    size_t n_post = 0;
    for (size_t i = 0; i < np; i++)
        if (!i || pairs[i].name != pairs[i - 1].name || pairs[i].value != pairs[i - 1].value)
            n_post++;
    PUT(o, n_post);
    for (size_t i = 0; i < np;) {
        size_t j = i;
        while (j < np && pairs[j].name == pairs[i].name && pairs[j].value == pairs[i].value)
            j++;
        PUT(o, pairs[i].name);
        PUT(o, pairs[i].value);
        PUT(o, j - i);
        for (size_t x = i; x < j; x++)
            PUT(o, pairs[x].series - (x > i ? pairs[x - 1].series : 0));
        i = j;
    }
out:
    free(syms);
    free(pairs);
    return rc;
}

static int encode_v1(const pd_ixw_series *s, size_t n, pd_buf *out)
{
    int rc;
    size_t start = out->len;
    const pd_labels **ls = malloc((n + 1) * sizeof *ls);
    char **syms = NULL;
    pair *pairs = NULL;
    size_t ns, np;
    if (!ls)
        return PD_ENOMEM;
    for (size_t i = 0; i < n; i++)
        ls[i] = s[i].labels;
    uint8_t hdr[HDR] = {'P', 'D', 'I', 'X', 1, 0, 0, 0};
    if ((rc = pd_buf_append(out, hdr, HDR)) || (rc = label_pairs(ls, n, &syms, &ns, &pairs, &np)))
        goto out;
    PUT(out, ns);
    for (size_t i = 0; i < ns; i++) {
        size_t l = strlen(syms[i]);
        PUT(out, l);
        if ((rc = pd_buf_append(out, syms[i], l)))
            goto out;
    }
    PUT(out, n);
    for (size_t k = 0; k < n; k++) {
        PUT(out, s[k].labels->n);
        for (size_t j = 0; j < s[k].labels->n; j++) {
            PUT(out, sym_find(syms, ns, s[k].labels->v[j].name));
            PUT(out, sym_find(syms, ns, s[k].labels->v[j].value));
        }
        PUT(out, pd_zigzag_enc(s[k].min_t));
        PUT(out, pd_zigzag_enc(s[k].max_t));
        PUT(out, s[k].n);
        PUT(out, s[k].tref);
        PUT(out, s[k].tbytes);
        PUT(out, s[k].vbytes);
    }
    if ((rc = put_postings(ls, n, false, out)))
        goto out;
    uint8_t crc[4];
    put_u32(crc, pd_crc32c(0, out->data + start, out->len - start));
    rc = pd_buf_append(out, crc, 4);
out:
    free(ls);
    free(syms);
    free(pairs);
    return rc;
}

/* Appends section kind with body b: u32 L | kind | body | crc32c. */
static int put_section(pd_buf *out, uint8_t kind, const pd_buf *b)
{
    uint8_t h[5];
    put_u32(h, (uint32_t)(b->len + 1));
    h[4] = kind;
    size_t at = out->len;
    int rc;
    if ((rc = pd_buf_append(out, h, 5)) || (rc = pd_buf_append(out, b->data, b->len)))
        return rc;
    uint8_t crc[4];
    put_u32(crc, pd_crc32c(0, out->data + at, out->len - at));
    return pd_buf_append(out, crc, 4);
}

static int encode_v2(const pd_ixw_series *s, size_t n, const pd_symbols *sym, pd_buf *out)
{
    int rc;
    size_t start = out->len;
    pd_buf e;
    pd_buf_init(&e, 0);
    uint64_t *offs = malloc((n + 1) * sizeof *offs);
    const pd_labels **ls = malloc((n + 1) * sizeof *ls);
    if (!offs || !ls) {
        rc = PD_ENOMEM;
        goto out;
    }
    uint8_t hdr[HDR] = {'P', 'D', 'I', 'X', 2, 0, 0, 0};
    if ((rc = pd_buf_append(out, hdr, HDR)))
        goto out;
    for (size_t k = 0; k < n; k++) {
        const pd_ixw_series *x = &s[k];
        ls[k] = x->labels;
        pd_buf_reset(&e);
        PUT(&e, x->labels->n);
        for (size_t j = 0; j < x->labels->n; j++) {
            const char *nm = x->labels->v[j].name, *v = x->labels->v[j].value;
            size_t a = strlen(nm), b = strlen(v);
            PUT(&e, a);
            if ((rc = pd_buf_append(&e, nm, a)))
                goto out;
            PUT(&e, b);
            if ((rc = pd_buf_append(&e, v, b)))
                goto out;
        }
        PUT(&e, pd_zigzag_enc(x->min_t));
        PUT(&e, pd_zigzag_enc(x->max_t));
        PUT(&e, x->n);
        PUT(&e, x->tref);
        PUT(&e, x->tbytes);
        PUT(&e, x->vbytes);
        PUT(&e, x->n_tstr);
        for (size_t j = 0; j < x->n_tstr; j++) {
            uint32_t id = x->tstr[j];
            PUT(&e, id);
            PUT(&e, sym->str_len[id]);
            if ((rc = pd_buf_append(&e, sym->str[id], sym->str_len[id])))
                goto out;
        }
        offs[k] = out->len - start;
        if ((rc = put_section(out, S_SERIES, &e)))
            goto out;
    }
    pd_buf_reset(&e);
    uint64_t post_off = out->len - start;
    if ((rc = put_postings(ls, n, true, &e)) || (rc = put_section(out, S_POSTINGS, &e)))
        goto out;
    size_t toc = out->len;
    uint8_t b8[8];
    put_u32(b8, (uint32_t)n);
    if ((rc = pd_buf_append(out, b8, 4)))
        goto out;
    for (size_t k = 0; k < n; k++) {
        put_u64(b8, offs[k]);
        if ((rc = pd_buf_append(out, b8, 8)))
            goto out;
    }
    put_u64(b8, post_off);
    if ((rc = pd_buf_append(out, b8, 8)))
        goto out;
    put_u32(b8, pd_crc32c(0, out->data + toc, out->len - toc));
    if ((rc = pd_buf_append(out, b8, 4)))
        goto out;
    uint8_t ft[12];
    put_u64(ft, toc - start);
    put_u32(ft + 8, pd_crc32c(0, ft, 8));
    rc = pd_buf_append(out, ft, 12);
out:
    pd_buf_release(&e);
    free(offs);
    free(ls);
    return rc;
}
#undef PUT

int pd__index_encode(int version, const pd_ixw_series *s, size_t n, const pd_symbols *sym,
                     pd_buf *out)
{
    return version == 1 ? encode_v1(s, n, out) : encode_v2(s, n, sym, out);
}

/* ---- decoding ---- */

typedef struct ird {
    const uint8_t *p;
    size_t len, off;
    const char *path;
    size_t base; /* file offset of p[0], for messages */
    pd_err *err;
    int bad;
} ird;

static uint64_t iget(ird *r, const char *what)
{
    uint64_t v = 0;
    if (r->bad)
        return 0;
    size_t k = pd_varint_get(r->p + r->off, r->len - r->off, &v);
    if (!k)
        r->bad = pd_err_set(r->err, PD_ECORRUPT, "%s offset %zu: bad varint (%s)", r->path,
                            r->base + r->off, what);
    r->off += k;
    return v;
}

static uint64_t iref(ird *r, uint64_t lim, const char *what)
{
    size_t at = r->off;
    uint64_t v = iget(r, what);
    if (!r->bad && v >= lim)
        r->bad = pd_err_set(r->err, PD_ECORRUPT, "%s offset %zu: %s %llu out of range", r->path,
                            r->base + at, what, (unsigned long long)v);
    return r->bad ? 0 : v;
}

/* A string (len, bytes) of at most the rest, malloc'ed NUL-terminated. */
static char *istr(ird *r, uint32_t *len_out, const char *what)
{
    uint64_t l = iref(r, r->len - r->off + 1, what);
    if (r->bad)
        return NULL;
    char *s = malloc(l + 1);
    if (!s) {
        r->bad = PD_ENOMEM;
        return NULL;
    }
    memcpy(s, r->p + r->off, l);
    s[l] = 0;
    r->off += l;
    if (len_out)
        *len_out = (uint32_t)l;
    if (memchr(s, 0, l))
        r->bad = pd_err_set(r->err, PD_ECORRUPT, "%s offset %zu: NUL in a %s", r->path,
                            r->base + r->off, what);
    return s;
}

static void series_release(pd_ix_series *s)
{
    pd_labels_release(&s->labels);
    for (size_t j = 0; j < s->n_tstr; j++)
        free(s->tstr[j]);
    free(s->tstr);
    free(s->tstr_id);
    free(s->tstr_len);
    memset(s, 0, sizeof *s);
}

void pd__index_release(pd_index *ix)
{
    for (size_t i = 0; i < ix->n_lsym; i++)
        free(ix->lsym[i]);
    free(ix->lsym);
    for (size_t i = 0; i < ix->n_series; i++)
        series_release(&ix->s[i]);
    free(ix->s);
    for (size_t i = 0; i < ix->n_post; i++)
        free(ix->post[i].ids);
    free(ix->post);
    free(ix->damage);
    memset(ix, 0, sizeof *ix);
}

/* The fields after the labels of a series entry, checked. */
static void series_tail(ird *r, pd_ix_series *s, uint64_t chunks_size, size_t i)
{
    s->min_t = pd_zigzag_dec(iget(r, "min time"));
    s->max_t = pd_zigzag_dec(iget(r, "max time"));
    s->n = iget(r, "profile count");
    s->tref = iget(r, "time chunk offset");
    s->tbytes = iget(r, "time chunk bytes");
    s->vbytes = iget(r, "value chunk bytes");
    if (!r->bad && (s->min_t > s->max_t || !s->n || s->tref < CHUNKS_HDR || s->tref > chunks_size ||
                    s->tbytes > chunks_size - s->tref || s->vbytes > chunks_size))
        r->bad = pd_err_set(r->err, PD_ECORRUPT,
                            "%s offset %zu: series %zu: bad time range or chunk ref", r->path,
                            r->base + r->off, i);
}

/* Label symbols then postings of n_series series. */
static int parse_postings(ird *r, pd_index *ix)
{
    ix->n_lsym = iref(r, r->len - r->off + 1, "symbol count");
    if (r->bad)
        return r->bad;
    if (!(ix->lsym = calloc(ix->n_lsym + 1, sizeof *ix->lsym)))
        return PD_ENOMEM;
    for (size_t i = 0; i < ix->n_lsym && !r->bad; i++)
        ix->lsym[i] = istr(r, NULL, "label symbol");
    if (r->bad)
        return r->bad;
    ix->n_post = iref(r, r->len - r->off + 1, "postings count");
    if (r->bad)
        return r->bad;
    if (!(ix->post = calloc(ix->n_post + 1, sizeof *ix->post)))
        return PD_ENOMEM;
    for (size_t i = 0; i < ix->n_post && !r->bad; i++) {
        pd_ix_post *q = &ix->post[i];
        q->name = (uint32_t)iref(r, ix->n_lsym, "postings name");
        q->value = (uint32_t)iref(r, ix->n_lsym, "postings value");
        q->n = iref(r, ix->n_series + 1, "postings length");
        if (r->bad)
            break;
        if (!(q->ids = malloc((q->n + 1) * sizeof *q->ids)))
            return PD_ENOMEM;
        uint64_t prev = 0;
        for (size_t j = 0; j < q->n && !r->bad; j++) {
            uint64_t d = iget(r, "postings id");
            uint64_t v = prev + d;
            if (!r->bad && (v >= ix->n_series || (j && d == 0) || v < prev))
                r->bad = pd_err_set(r->err, PD_ECORRUPT, "%s offset %zu: postings id out of range",
                                    r->path, r->base + r->off);
            q->ids[j] = (uint32_t)v;
            prev = v;
        }
    }
    return r->bad;
}

static void drop_postings(pd_index *ix)
{
    for (size_t i = 0; i < ix->n_lsym; i++)
        free(ix->lsym[i]);
    free(ix->lsym);
    for (size_t i = 0; i < ix->n_post; i++)
        free(ix->post[i].ids);
    free(ix->post);
    ix->lsym = NULL;
    ix->post = NULL;
    ix->n_lsym = ix->n_post = 0;
}

static int decode_v1(pd_index *ix, const char *path, const uint8_t *p, size_t len,
                     uint64_t chunks_size, pd_err *err)
{
    if (len < HDR + 4)
        return pd_err_set(err, PD_ECORRUPT, "%s offset 0: file too short (%zu bytes)", path, len);
    uint32_t want = get_u32(p + len - 4), got = pd_crc32c(0, p, len - 4);
    if (want != got)
        return pd_err_set(err, PD_ECORRUPT,
                          "%s offset %zu: crc32c mismatch (stored %08x, computed %08x)", path,
                          len - 4, want, got);
    ird r = {p, len - 4, HDR, path, 0, err, 0};
    /* symbols, series (by symbol), postings: the symbols are parsed first */
    size_t n_lsym = iref(&r, len, "symbol count");
    if (r.bad)
        return r.bad;
    char **lsym = calloc(n_lsym + 1, sizeof *lsym);
    if (!lsym)
        return PD_ENOMEM;
    ix->lsym = lsym;
    ix->n_lsym = n_lsym;
    for (size_t i = 0; i < n_lsym && !r.bad; i++)
        lsym[i] = istr(&r, NULL, "label symbol");
    ix->n_series = iref(&r, r.len - r.off + 1, "series count");
    if (r.bad)
        return r.bad;
    if (!(ix->s = calloc(ix->n_series + 1, sizeof *ix->s)))
        return PD_ENOMEM;
    pd_err e2;
    for (size_t i = 0; i < ix->n_series && !r.bad; i++) {
        pd_ix_series *s = &ix->s[i];
        size_t nl = iref(&r, PD_LABEL_MAX_COUNT + 1, "label count");
        for (size_t j = 0; j < nl && !r.bad; j++) {
            size_t at = r.off;
            uint64_t a = iref(&r, n_lsym, "label name"), v = iref(&r, n_lsym, "label value");
            if (r.bad)
                break;
            int rc = pd_labels_set(&s->labels, lsym[a], lsym[v], &e2);
            if (rc == PD_ENOMEM)
                return rc;
            if (rc || s->labels.n != j + 1)
                r.bad = pd_err_set(err, PD_ECORRUPT, "%s offset %zu: series %zu: bad label (%s)",
                                   path, at, i, rc ? e2.msg : "duplicate or empty");
        }
        series_tail(&r, s, chunks_size, i);
        if (!r.bad && i && pd_labels_cmp(&ix->s[i - 1].labels, &s->labels) >= 0)
            r.bad = pd_err_set(err, PD_ECORRUPT, "%s offset %zu: series %zu out of order", path,
                               r.off, i);
    }
    if (r.bad)
        return r.bad;
    /* postings (the symbols are already there) */
    ix->n_post = iref(&r, r.len - r.off + 1, "postings count");
    if (r.bad)
        return r.bad;
    if (!(ix->post = calloc(ix->n_post + 1, sizeof *ix->post)))
        return PD_ENOMEM;
    for (size_t i = 0; i < ix->n_post && !r.bad; i++) {
        pd_ix_post *q = &ix->post[i];
        q->name = (uint32_t)iref(&r, n_lsym, "postings name");
        q->value = (uint32_t)iref(&r, n_lsym, "postings value");
        q->n = iref(&r, ix->n_series + 1, "postings length");
        if (r.bad)
            break;
        if (!(q->ids = malloc((q->n + 1) * sizeof *q->ids)))
            return PD_ENOMEM;
        uint64_t prev = 0;
        for (size_t j = 0; j < q->n && !r.bad; j++) {
            uint64_t d = iget(&r, "postings id");
            uint64_t v = prev + d;
            if (!r.bad && (v >= ix->n_series || (j && d == 0) || v < prev))
                r.bad = pd_err_set(err, PD_ECORRUPT, "%s offset %zu: postings id out of range",
                                   path, r.off);
            q->ids[j] = (uint32_t)v;
            prev = v;
        }
    }
    if (!r.bad && r.off != r.len)
        r.bad = pd_err_set(err, PD_ECORRUPT, "%s offset %zu: trailing bytes", path, r.off);
    return r.bad;
}

static void set_damage(pd_index *ix, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_damage(pd_index *ix, const char *fmt, ...)
{
    if (ix->damage)
        return;
    char m[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    ix->damage = strdup(m);
}

/* The section at off: 0 and *kind, *body, *blen, *end when it verifies;
 * PD_ECORRUPT (err) otherwise. */
static int section_at(const char *path, const uint8_t *p, size_t lim, uint64_t off, uint8_t *kind,
                      const uint8_t **body, size_t *blen, uint64_t *end, pd_err *err)
{
    if (off < HDR || off > lim || lim - off < 9)
        return pd_err_set(err, PD_ECORRUPT, "%s offset %llu: section past the end", path,
                          (unsigned long long)off);
    uint32_t L = get_u32(p + off);
    if (!L || (uint64_t)L > lim - off - 8)
        return pd_err_set(err, PD_ECORRUPT, "%s offset %llu: section length %u past the end", path,
                          (unsigned long long)off, L);
    uint32_t want = get_u32(p + off + 4 + L), got = pd_crc32c(0, p + off, 4 + (size_t)L);
    if (want != got)
        return pd_err_set(err, PD_ECORRUPT,
                          "%s offset %llu: section crc32c mismatch (stored %08x, computed %08x)",
                          path, (unsigned long long)off, want, got);
    *kind = p[off + 4];
    *body = p + off + 5;
    *blen = L - 1;
    *end = off + 4 + L + 4;
    return 0;
}

/* Parses a verified series entry into s. */
static int parse_entry(const char *path, const uint8_t *b, size_t blen, uint64_t at,
                       uint64_t chunks_size, size_t i, pd_ix_series *s, pd_err *err)
{
    ird r = {b, blen, 0, path, (size_t)at + 5, err, 0};
    pd_err e2;
    size_t nl = iref(&r, PD_LABEL_MAX_COUNT + 1, "label count");
    for (size_t j = 0; j < nl && !r.bad; j++) {
        size_t lat = r.off;
        char *nm = istr(&r, NULL, "label name");
        char *v = r.bad ? NULL : istr(&r, NULL, "label value");
        if (!r.bad) {
            int rc = pd_labels_set(&s->labels, nm, v, &e2);
            if (rc == PD_ENOMEM)
                r.bad = rc;
            else if (rc || s->labels.n != j + 1)
                r.bad = pd_err_set(err, PD_ECORRUPT, "%s offset %zu: series %zu: bad label (%s)",
                                   path, r.base + lat, i, rc ? e2.msg : "duplicate or empty");
        }
        free(nm);
        free(v);
    }
    series_tail(&r, s, chunks_size, i);
    size_t nt = iref(&r, r.len - r.off + 1, "sample type string count");
    if (r.bad)
        return r.bad;
    if (!(s->tstr = calloc(nt + 1, sizeof *s->tstr)) ||
        !(s->tstr_id = calloc(nt + 1, sizeof *s->tstr_id)) ||
        !(s->tstr_len = calloc(nt + 1, sizeof *s->tstr_len)))
        return PD_ENOMEM;
    for (size_t j = 0; j < nt && !r.bad; j++) {
        s->tstr_id[j] = (uint32_t)iref(&r, UINT32_MAX, "sample type string id");
        s->tstr[j] = istr(&r, &s->tstr_len[j], "sample type string");
        s->n_tstr = j + 1;
    }
    if (!r.bad && r.off != r.len)
        r.bad = pd_err_set(err, PD_ECORRUPT, "%s offset %zu: series %zu: trailing bytes", path,
                           r.base + r.off, i);
    if (!r.bad && !s->labels.n)
        r.bad = pd_err_set(err, PD_ECORRUPT, "%s offset %zu: series %zu has no labels", path,
                           (size_t)at, i);
    return r.bad;
}

/* Rebuilds lsym and postings from the entries. */
static int rebuild_postings(pd_index *ix)
{
    drop_postings(ix);
    const pd_labels **ls = malloc((ix->n_series + 1) * sizeof *ls);
    if (!ls)
        return PD_ENOMEM;
    for (size_t i = 0; i < ix->n_series; i++)
        ls[i] = &ix->s[i].labels;
    char **syms;
    pair *pairs;
    size_t ns, np;
    int rc = label_pairs(ls, ix->n_series, &syms, &ns, &pairs, &np);
    free(ls);
    if (rc)
        return rc;
    size_t n_post = 0;
    for (size_t i = 0; i < np; i++)
        if (!i || pairs[i].name != pairs[i - 1].name || pairs[i].value != pairs[i - 1].value)
            n_post++;
    ix->lsym = calloc(ns + 1, sizeof *ix->lsym);
    ix->post = calloc(n_post + 1, sizeof *ix->post);
    rc = ix->lsym && ix->post ? 0 : PD_ENOMEM;
    for (size_t i = 0; !rc && i < ns; i++, ix->n_lsym++)
        if (!(ix->lsym[i] = strdup(syms[i])))
            rc = PD_ENOMEM;
    for (size_t i = 0; !rc && i < np;) {
        size_t j = i;
        while (j < np && pairs[j].name == pairs[i].name && pairs[j].value == pairs[i].value)
            j++;
        pd_ix_post *q = &ix->post[ix->n_post];
        q->name = pairs[i].name;
        q->value = pairs[i].value;
        if (!(q->ids = malloc((j - i + 1) * sizeof *q->ids))) {
            rc = PD_ENOMEM;
            break;
        }
        q->n = j - i;
        for (size_t x = i; x < j; x++)
            q->ids[x - i] = pairs[x].series;
        ix->n_post++;
        i = j;
    }
    free(syms);
    free(pairs);
    ix->postings_rebuilt = true;
    return rc;
}

static int decode_v2(pd_index *ix, const char *path, const uint8_t *p, size_t len,
                     uint64_t chunks_size, pd_err *err)
{
    /* the toc, through the footer */
    uint64_t *offs = NULL, post_off = 0;
    size_t n_toc = 0;
    bool have_toc = false;
    pd_err e;
    pd_err_clear(&e);
    size_t lim = len; /* sections end before the toc when it is known */
    if (len >= HDR + 12 && pd_crc32c(0, p + len - 12, 8) == get_u32(p + len - 4)) {
        uint64_t toc = get_u64(p + len - 12);
        if (toc >= HDR && toc <= len - 12 && len - 12 - toc >= 16) {
            uint32_t n = get_u32(p + toc);
            uint64_t tl = 4 + (uint64_t)n * 8 + 8;
            if (tl + 4 == len - 12 - toc &&
                pd_crc32c(0, p + toc, (size_t)tl) == get_u32(p + toc + tl)) {
                if (!(offs = malloc(((size_t)n + 1) * sizeof *offs)))
                    return PD_ENOMEM;
                for (uint32_t i = 0; i < n; i++)
                    offs[i] = get_u64(p + toc + 4 + 8 * (uint64_t)i);
                post_off = get_u64(p + toc + 4 + 8 * (uint64_t)n);
                n_toc = n;
                have_toc = true;
                lim = (size_t)toc;
            }
        }
    }
    if (!have_toc)
        set_damage(ix, "%s offset %zu: toc or footer does not verify (entries found by a walk)",
                   path, len >= 12 ? len - 12 : 0);
    size_t cap = have_toc ? n_toc : 16;
    if (!(ix->s = calloc(cap + 1, sizeof *ix->s))) {
        free(offs);
        return PD_ENOMEM;
    }
    int rc = 0;
    bool post_ok = false;
    const uint8_t *pb = NULL;
    size_t pbl = 0;
    uint64_t pat = 0;
    uint64_t off = HDR;
    for (size_t k = 0; have_toc ? k < n_toc : true; k++) {
        uint8_t kind;
        const uint8_t *body;
        size_t blen;
        uint64_t end, at = have_toc ? offs[k] : off;
        pd_err_clear(&e);
        if (!have_toc && at == lim)
            break;
        rc = section_at(path, p, lim, at, &kind, &body, &blen, &end, &e);
        if (!rc && kind == S_POSTINGS && !have_toc) {
            pb = body;
            pbl = blen;
            pat = at;
            break; /* the postings follow the last entry */
        }
        if (!rc && kind != S_SERIES)
            rc = pd_err_set(&e, PD_ECORRUPT, "%s offset %llu: not a series entry (kind %u)", path,
                            (unsigned long long)at, kind);
        if (!rc) {
            if (ix->n_series == cap) {
                pd_ix_series *ns = realloc(ix->s, (2 * cap + 1) * sizeof *ns);
                if (!ns) {
                    rc = PD_ENOMEM;
                    break;
                }
                ix->s = ns;
                cap = 2 * cap;
            }
            pd_ix_series *s = &ix->s[ix->n_series];
            memset(s, 0, sizeof *s);
            rc = parse_entry(path, body, blen, at, chunks_size, k, s, &e);
            if (!rc && ix->n_series &&
                pd_labels_cmp(&ix->s[ix->n_series - 1].labels, &s->labels) >= 0)
                rc = pd_err_set(&e, PD_ECORRUPT, "%s offset %llu: series %zu out of order", path,
                                (unsigned long long)at, k);
            if (rc == PD_ENOMEM) {
                series_release(s);
                break;
            }
            if (rc)
                series_release(s);
            else
                ix->n_series++;
        }
        if (rc == PD_ENOMEM)
            break;
        if (rc) {
            ix->n_lost++;
            set_damage(ix, "%s", e.msg);
            rc = 0;
            if (!have_toc)
                break; /* where the next section starts is unknown */
        } else if (!have_toc)
            off = end;
    }
    free(offs);
    if (rc)
        return rc == PD_ENOMEM ? pd_err_set(err, rc, "out of memory reading %s", path) : rc;
    if (have_toc) {
        uint8_t kind;
        uint64_t end;
        pd_err_clear(&e);
        int prc = section_at(path, p, lim, post_off, &kind, &pb, &pbl, &end, &e);
        if (!prc && kind != S_POSTINGS)
            prc = pd_err_set(&e, PD_ECORRUPT, "%s offset %llu: not the postings (kind %u)", path,
                             (unsigned long long)post_off, kind);
        if (prc) {
            pb = NULL;
            set_damage(ix, "%s", e.msg);
        }
        pat = post_off;
    }
    if (pb && !ix->n_lost) {
        size_t n_series = ix->n_series;
        pd_err_clear(&e);
        ird r = {pb, pbl, 0, path, (size_t)pat + 5, &e, 0};
        int prc = parse_postings(&r, ix);
        if (prc == PD_ENOMEM)
            return pd_err_set(err, prc, "out of memory reading %s", path);
        if (!prc && r.off != r.len)
            prc =
                pd_err_set(&e, PD_ECORRUPT, "%s offset %zu: trailing bytes", path, r.base + r.off);
        if (prc)
            set_damage(ix, "%s", e.msg);
        post_ok = !prc && ix->n_series == n_series;
    }
    if (!post_ok && (rc = rebuild_postings(ix)))
        return pd_err_set(err, rc, "out of memory reading %s", path);
    if (!ix->n_series && ix->damage)
        return pd_err_set(err, PD_ECORRUPT, "%s", ix->damage);
    return 0;
}

int pd__index_decode(pd_index *ix, const char *path, const uint8_t *p, size_t len,
                     uint64_t chunks_size, pd_err *err)
{
    memset(ix, 0, sizeof *ix);
    if (len < HDR)
        return pd_err_set(err, PD_ECORRUPT, "%s offset 0: file too short (%zu bytes)", path, len);
    if (memcmp(p, "PDIX", 4) || p[5] || p[6] || (p[4] != 1 && p[4] != 2) || p[7]) {
        /* issue 27: the header is constant; version 1 is covered by its file
           CRC (so a damaged one never reads), version 2 by its footer, toc
           and entries: read as version 2, the header reported as damaged */
        size_t at = memcmp(p, "PDIX", 4) ? 0 : p[4] != 1 && p[4] != 2 ? 4 : 5;
        int rc = decode_v2(ix, path, p, len, chunks_size, err);
        if (rc == 0) {
            ix->version = 2;
            if (!ix->damage)
                set_damage(ix, "%s offset %zu: bad header (read as version 2: the entries verify)",
                           path, at);
            return 0;
        }
        if (rc == PD_ENOMEM)
            return rc;
        return pd_err_set(err, PD_ECORRUPT, "%s offset %zu: bad header (%s)", path, at,
                          at == 4 ? "unknown version" : "bad magic");
    }
    ix->version = p[4];
    if (p[4] == 1)
        return decode_v1(ix, path, p, len, chunks_size, err);
    if (p[4] == 2)
        return decode_v2(ix, path, p, len, chunks_size, err);
    return pd_err_set(err, PD_ECORRUPT, "%s offset 4: unknown version %u", path, p[4]);
}
