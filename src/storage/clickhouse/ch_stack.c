/*
 * storage/clickhouse/ch_stack.c — a sample's key (its stack resolved to
 * frames, and its labels) as one self-contained blob: what the stacks
 * table holds under stack_hash = XXH3-64 of the blob. The layout is in
 * ch_int.h. Frames carry every field DESIGN.md §1 compares (mapping file,
 * build id, start, limit, offset; address; per line the function's name,
 * system name, file and start line, the line and column), so a profile
 * rebuilt from blobs is equal to the input in that sense. Ids are not
 * stored: two producers' identical frames give identical blobs and share
 * one stacks row.
 */
#include <stdlib.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "base/varint.h"
#include "pprof/pprof.h"
#include "storage/clickhouse/ch_int.h"
#include "storage/delta_int.h"

static int put_s(pd_buf *b, int64_t v)
{
    return pd_buf_put_varint(b, pd_zigzag_enc(v));
}

static int put_pstr(pd_buf *b, const pd_profile *p, int64_t idx)
{
    const char *s = pd_profile_str(p, idx);
    size_t n = idx > 0 && (size_t)idx < p->n_string ? p->string_len[idx] : 0;
    return pd__ch_put_str(b, s, n);
}

/* Whether p's strings a and b are equal, byte for byte (as put_pstr writes them). */
static bool pstr_eq(const pd_profile *p, int64_t a, int64_t b)
{
    size_t na = a > 0 && (size_t)a < p->n_string ? p->string_len[a] : 0;
    size_t nb = b > 0 && (size_t)b < p->n_string ? p->string_len[b] : 0;
    return na == nb && (na == 0 || memcmp(pd_profile_str(p, a), pd_profile_str(p, b), na) == 0);
}

/* One location's fields (ch_int.h): mapping, address, lines; v7: a
 * function's system name only where it differs from its name. An id the
 * profile does not resolve (validated profiles resolve every one) is an
 * empty location. */
static int put_location(pd_buf *out, const pd_profile *p, uint64_t lid, bool v7)
{
    const pd_pprof_location *loc = pd_profile_location(p, lid);
    if (!loc) {
        int rc = pd_buf_put_varint(out, 0);
        rc = rc ? rc : pd_buf_put_varint(out, 0);
        return rc ? rc : pd_buf_put_varint(out, 0);
    }
    const pd_pprof_mapping *m = loc->mapping_id ? pd_profile_mapping(p, loc->mapping_id) : NULL;
    int rc = pd_buf_put_varint(out, m != NULL);
    if (rc == 0 && m) {
        unsigned fl = (unsigned)m->has_functions | (unsigned)m->has_filenames << 1 |
                      (unsigned)m->has_line_numbers << 2 | (unsigned)m->has_inline_frames << 3;
        rc = pd_buf_put_varint(out, m->memory_start);
        rc = rc ? rc : pd_buf_put_varint(out, m->memory_limit);
        rc = rc ? rc : pd_buf_put_varint(out, m->file_offset);
        rc = rc ? rc : put_pstr(out, p, m->filename);
        rc = rc ? rc : put_pstr(out, p, m->build_id);
        rc = rc ? rc : pd_buf_put_varint(out, fl);
    }
    rc = rc ? rc : pd_buf_put_varint(out, loc->address);
    rc = rc ? rc : pd_buf_put_varint(out, loc->n_line);
    for (size_t l = 0; rc == 0 && l < loc->n_line; l++) {
        const pd_pprof_line *ln = &loc->line[l];
        const pd_pprof_function *f =
            ln->function_id ? pd_profile_function(p, ln->function_id) : NULL;
        bool own_sys = f && (!v7 || !pstr_eq(p, f->name, f->system_name));
        rc = pd_buf_put_varint(out, f == NULL ? 0 : own_sys && v7 ? 2 : 1);
        if (rc == 0 && f) {
            rc = put_pstr(out, p, f->name);
            rc = rc || !own_sys ? rc : put_pstr(out, p, f->system_name);
            rc = rc ? rc : put_pstr(out, p, f->filename);
            rc = rc ? rc : put_s(out, f->start_line);
        }
        rc = rc ? rc : put_s(out, ln->line);
        rc = rc ? rc : put_s(out, ln->column);
    }
    return rc;
}

static int put_labels(pd_buf *out, const pd_profile *p, const pd_pprof_sample *sm)
{
    int rc = pd_buf_put_varint(out, sm->n_label);
    for (size_t k = 0; rc == 0 && k < sm->n_label; k++) {
        const pd_pprof_label *lb = &sm->label[k];
        rc = put_pstr(out, p, lb->key);
        rc = rc ? rc : put_pstr(out, p, lb->str);
        rc = rc ? rc : put_s(out, lb->num);
        rc = rc ? rc : put_pstr(out, p, lb->num_unit);
    }
    return rc;
}

int pd__ch_stack_encode_v3(const pd_profile *p, size_t i, pd_buf *out)
{
    const pd_pprof_sample *sm = &p->sample[i];
    int rc = pd_buf_put_varint(out, sm->n_location);
    for (size_t k = 0; rc == 0 && k < sm->n_location; k++)
        rc = put_location(out, p, sm->location_id[k], false);
    return rc ? rc : put_labels(out, p, sm);
}

/* the first bytes of schema-4 rows: a varint 0 in two bytes (never what a
   schema-3 blob starts with), then the kind */
static const uint8_t MARK_STACK[3] = {0x80, 0x00, 0x01}, MARK_LOC[3] = {0x80, 0x00, 0x02},
                     MARK_LOC7[3] = {0x80, 0x00, 0x03};

int pd__ch_loc_encode(const pd_profile *p, uint64_t loc_id, int version, pd_buf *out)
{
    int rc = pd_buf_append(out, version >= 7 ? MARK_LOC7 : MARK_LOC, 3);
    return rc ? rc : put_location(out, p, loc_id, version >= 7);
}

bool pd__ch_row_is_location_v7(const uint8_t *s, size_t n)
{
    return n >= 3 && memcmp(s, MARK_LOC7, 3) == 0;
}

void pd__ch_loc_cache_init(ch_loc_cache *lc, const pd_profile *p, int version)
{
    memset(lc, 0, sizeof *lc);
    lc->p = p;
    lc->version = version;
    lc->max_id_at = SIZE_MAX;
    pd_u64map_init(&lc->idx);
    pd_buf_init(&lc->bytes, 0);
    pd_buf_init(&lc->blob, 0);
}

void pd__ch_loc_cache_release(ch_loc_cache *lc)
{
    pd_u64map_release(&lc->idx);
    pd_buf_release(&lc->bytes);
    pd_buf_release(&lc->blob);
    free(lc->ent);
    lc->ent = NULL;
    lc->n = lc->cap = 0;
}

int pd__ch_loc_cache_get(ch_loc_cache *lc, uint64_t loc_id, size_t *at)
{
    uint64_t v;
    if (loc_id == UINT64_MAX ? (v = lc->max_id_at) != SIZE_MAX
                             : pd_u64map_get(&lc->idx, loc_id, &v)) {
        *at = (size_t)v;
        return 0;
    }
    if (lc->n == lc->cap) {
        size_t nc = lc->cap ? 2 * lc->cap : 64;
        ch_loc_ent *ne = realloc(lc->ent, nc * sizeof *ne);
        if (!ne)
            return PD_ENOMEM;
        lc->ent = ne;
        lc->cap = nc;
    }
    size_t off = lc->bytes.len;
    int rc = pd__ch_loc_encode(lc->p, loc_id, lc->version, &lc->bytes);
    if (rc < 0)
        return rc;
    size_t len = lc->bytes.len - off, off3 = off + sizeof MARK_LOC;
    /* schema 7 leaves out a system name equal to the name: the key's
       schema-3 fields are encoded apart (schema 4's are the row's) */
    if (lc->version >= 7 &&
        (off3 = lc->bytes.len, rc = put_location(&lc->bytes, lc->p, loc_id, false)) < 0)
        return rc;
    if (loc_id == UINT64_MAX)
        lc->max_id_at = lc->n;
    else if (pd_u64map_put(&lc->idx, loc_id, lc->n) < 0)
        return PD_ENOMEM;
    ch_loc_ent *e = &lc->ent[lc->n];
    e->off = off;
    e->len = len;
    e->off3 = off3;
    e->len3 = lc->version >= 7 ? lc->bytes.len - off3 : len - sizeof MARK_LOC;
    e->key = XXH3_64bits(lc->bytes.data + off, e->len);
    e->rowed = false;
    *at = lc->n++;
    return 0;
}

int pd__ch_stack_key(ch_loc_cache *lc, size_t i, uint64_t *out)
{
    const pd_pprof_sample *sm = &lc->p->sample[i];
    pd_buf *b = &lc->blob;
    pd_buf_reset(b);
    int rc = pd_buf_put_varint(b, sm->n_location);
    for (size_t k = 0; rc == 0 && k < sm->n_location; k++) {
        size_t at;
        rc = pd__ch_loc_cache_get(lc, sm->location_id[k], &at);
        if (rc == 0)
            rc = pd_buf_append(b, lc->bytes.data + lc->ent[at].off3, lc->ent[at].len3);
    }
    rc = rc ? rc : put_labels(b, lc->p, sm);
    if (rc == 0)
        *out = XXH3_64bits(b->data, b->len);
    return rc;
}

int pd__ch_stack_encode(const pd_profile *p, size_t i, const uint64_t *loc_key, pd_buf *out)
{
    const pd_pprof_sample *sm = &p->sample[i];
    int rc = pd_buf_append(out, MARK_STACK, sizeof MARK_STACK);
    rc = rc ? rc : pd_buf_put_varint(out, sm->n_location);
    for (size_t k = 0; rc == 0 && k < sm->n_location; k++) {
        uint8_t le[8];
        for (int j = 0; j < 8; j++)
            le[j] = (uint8_t)(loc_key[k] >> (8 * j));
        rc = pd_buf_append(out, le, 8);
    }
    return rc ? rc : put_labels(out, p, sm);
}

/* Reads a string into the scratch area (NUL-terminated); never moves it:
 * the scratch holds n + 1 bytes for a blob of n bytes, and each string of
 * k bytes costs at least k + 1 blob bytes. */
typedef struct scratch {
    char *buf;
    size_t used, cap;
} scratch;

static const char *rd_cstr(ch_rd *r, scratch *sc)
{
    const uint8_t *s;
    size_t n;
    pd__ch_rd_str(r, &s, &n);
    if (r->bad || sc->used + n + 1 > sc->cap) {
        r->bad = true;
        return "";
    }
    char *d = sc->buf + sc->used;
    memcpy(d, s, n);
    d[n] = 0;
    sc->used += n + 1;
    return d;
}

static int64_t rd_s(ch_rd *r)
{
    return pd_zigzag_dec(pd__ch_rd_varint(r));
}

/* Reads one location's fields from r (strings into sc) and adds it to b:
 * *id. lines: room for r->len lines. 0, r->bad set (malformed), or the
 * builder's error. */
static int rd_location(ch_rd *r, scratch *sc, pd_pprof_line *lines, pd_profile_builder *b, bool v7,
                       uint64_t *id, pd_err *err)
{
    uint64_t mid = 0;
    int rc;
    if (pd__ch_rd_varint(r)) {
        pd_pprof_mapping m;
        memset(&m, 0, sizeof m);
        m.memory_start = pd__ch_rd_varint(r);
        m.memory_limit = pd__ch_rd_varint(r);
        m.file_offset = pd__ch_rd_varint(r);
        const char *file = rd_cstr(r, sc), *bid = rd_cstr(r, sc);
        uint64_t fl = pd__ch_rd_varint(r);
        m.has_functions = fl & 1;
        m.has_filenames = fl >> 1 & 1;
        m.has_line_numbers = fl >> 2 & 1;
        m.has_inline_frames = fl >> 3 & 1;
        if (r->bad)
            return 0;
        if ((rc = pd_profile_builder_mapping(b, &m, file, bid, &mid, err)) < 0)
            return rc;
    }
    uint64_t addr = pd__ch_rd_varint(r);
    uint64_t n_line = pd__ch_rd_varint(r);
    if (r->bad || n_line > r->len) {
        r->bad = true;
        return 0;
    }
    for (uint64_t l = 0; l < n_line && !r->bad; l++) {
        uint64_t fid = 0;
        uint64_t fn = pd__ch_rd_varint(r);
        if (v7 && fn > 2)
            r->bad = true;
        else if (fn) {
            const char *name = rd_cstr(r, sc);
            const char *sys = v7 && fn == 1 ? name : rd_cstr(r, sc), *file = rd_cstr(r, sc);
            int64_t start = rd_s(r);
            if (r->bad)
                return 0;
            if ((rc = pd_profile_builder_function(b, name, sys, file, start, &fid, err)) < 0)
                return rc;
        }
        lines[l].function_id = fid;
        lines[l].line = rd_s(r);
        lines[l].column = rd_s(r);
    }
    if (r->bad)
        return 0;
    return pd_profile_builder_location(b, mid, addr, lines, (size_t)n_line, id, err);
}

/* Reads the labels at the end of a blob of n bytes and adds the sample
 * (locs[0..n_loc), value) to b. 0, PD_ECORRUPT, or the builder's errors. */
static int rd_labels_add(ch_rd *r, size_t n, scratch *sc, pd_profile_builder *b,
                         const uint64_t *locs, size_t n_loc, const int64_t *value, pd_err *err)
{
    uint64_t n_label = pd__ch_rd_varint(r);
    if (r->bad || n_label > n)
        return pd_err_set(err, PD_ECORRUPT, "stacks row: truncated or malformed (%zu bytes)", n);
    pd_pprof_label *labels = calloc(n_label ? n_label : 1, sizeof *labels);
    if (!labels)
        return pd_err_set(err, PD_ENOMEM, "out of memory rebuilding a stack");
    int rc = 0;
    for (uint64_t k = 0; k < n_label && !r->bad; k++) {
        const char *key = rd_cstr(r, sc), *str = rd_cstr(r, sc);
        int64_t num = rd_s(r);
        const char *unit = rd_cstr(r, sc);
        if (r->bad)
            break;
        int64_t ki = pd_profile_builder_string(b, key, err);
        int64_t si = ki < 0 ? ki : *str ? pd_profile_builder_string(b, str, err) : 0;
        int64_t ui = si < 0 ? si : *unit ? pd_profile_builder_string(b, unit, err) : 0;
        if (ui < 0) {
            rc = (int)ui;
            goto out;
        }
        labels[k] = (pd_pprof_label){ki, si, num, ui};
    }
    if (r->bad || r->pos != r->len) {
        rc = pd_err_set(err, PD_ECORRUPT, "stacks row: truncated or malformed (%zu bytes)", n);
        goto out;
    }
    rc = pd_profile_builder_sample(b, locs, n_loc, value, labels, (size_t)n_label, err);
out:
    free(labels);
    return rc;
}

/* A schema-3 blob: every location inline. */
static int add_v3(pd_profile_builder *b, const uint8_t *s, size_t n, const int64_t *value,
                  pd_err *err)
{
    ch_rd r = {s, n, 0, false};
    scratch sc = {malloc(n + 1), 0, n + 1};
    uint64_t *locs = NULL;
    pd_pprof_line *lines = NULL;
    int rc = 0;
    if (!sc.buf) {
        rc = pd_err_set(err, PD_ENOMEM, "out of memory rebuilding a stack");
        goto out;
    }
    uint64_t n_loc = pd__ch_rd_varint(&r);
    if (r.bad || n_loc > n) {
        rc = pd_err_set(err, PD_ECORRUPT, "stacks row: bad location count");
        goto out;
    }
    locs = calloc(n_loc ? n_loc : 1, sizeof *locs);
    lines = calloc(n ? n : 1, sizeof *lines);
    if (!locs || !lines) {
        rc = pd_err_set(err, PD_ENOMEM, "out of memory rebuilding a stack");
        goto out;
    }
    for (uint64_t k = 0; k < n_loc && !r.bad; k++)
        if ((rc = rd_location(&r, &sc, lines, b, false, &locs[k], err)) < 0)
            goto out;
    rc = rd_labels_add(&r, n, &sc, b, locs, (size_t)n_loc, value, err);
out:
    free(sc.buf);
    free(locs);
    free(lines);
    return rc;
}

static bool has_mark(const uint8_t *s, size_t n, const uint8_t mark[3])
{
    return n >= 3 && memcmp(s, mark, 3) == 0;
}

static uint64_t rd_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int j = 7; j >= 0; j--)
        v = v << 8 | p[j];
    return v;
}

size_t pd__ch_stack_locs(const uint8_t *s, size_t n, const uint8_t **keys)
{
    if (!has_mark(s, n, MARK_STACK))
        return 0;
    ch_rd r = {s, n, 3, false};
    uint64_t n_loc = pd__ch_rd_varint(&r);
    if (r.bad || n_loc > (n - r.pos) / 8)
        return 0;
    *keys = s + r.pos;
    return (size_t)n_loc;
}

uint64_t pd__ch_stack_loc_key(const uint8_t *keys, size_t k)
{
    return rd_le64(keys + 8 * k);
}

/* The builder's id of location row `key` (decoded once per L). 0,
 * PD_ENOTFOUND (no row fetched), PD_ECORRUPT, or the builder's errors. */
static int loc_id(pd_profile_builder *b, ch_locs *L, uint64_t key, uint64_t *id, pd_err *err)
{
    uint64_t at;
    if (L && pd_u64map_get(&L->built, key, id))
        return 0;
    if (!L || !L->blob_at || !pd_u64map_get(L->blob_at, key, &at))
        return pd_err_set(err, PD_ENOTFOUND,
                          "location %llu is missing from tables locations_v1 and stacks_v3",
                          (unsigned long long)key);
    ch_rd w = {(const uint8_t *)L->blobs->data, L->blobs->len, (size_t)at, false};
    const uint8_t *s;
    size_t n;
    pd__ch_rd_str(&w, &s, &n);
    bool v7 = has_mark(s, n, MARK_LOC7);
    if (w.bad || !(v7 || has_mark(s, n, MARK_LOC)))
        return pd_err_set(err, PD_ECORRUPT, "stacks row %llu: not a location",
                          (unsigned long long)key);
    ch_rd r = {s, n, 3, false};
    scratch sc = {malloc(n + 1), 0, n + 1};
    pd_pprof_line *lines = calloc(n + 1, sizeof *lines);
    int rc = 0;
    if (!sc.buf || !lines)
        rc = pd_err_set(err, PD_ENOMEM, "out of memory rebuilding a stack");
    else if ((rc = rd_location(&r, &sc, lines, b, v7, id, err)) == 0 && (r.bad || r.pos != r.len))
        rc = pd_err_set(err, PD_ECORRUPT, "location row %llu: truncated or malformed (%zu bytes)",
                        (unsigned long long)key, n);
    free(sc.buf);
    free(lines);
    if (rc == 0 && pd_u64map_put(&L->built, key, *id) < 0)
        rc = pd_err_set(err, PD_ENOMEM, "out of memory rebuilding a stack");
    return rc;
}

int pd__ch_stack_add(pd_profile_builder *b, const uint8_t *s, size_t n, const int64_t *value,
                     ch_locs *L, pd_err *err)
{
    if (!has_mark(s, n, MARK_STACK))
        return add_v3(b, s, n, value, err);
    const uint8_t *keys;
    size_t n_loc = pd__ch_stack_locs(s, n, &keys);
    if (n_loc == 0 && (n < 4 || s[3] != 0)) /* a count of 0 is one byte 0 */
        return pd_err_set(err, PD_ECORRUPT, "stacks row: bad location count");
    uint64_t *locs = calloc(n_loc ? n_loc : 1, sizeof *locs);
    scratch sc = {malloc(n + 1), 0, n + 1};
    int rc = 0;
    if (!locs || !sc.buf) {
        rc = pd_err_set(err, PD_ENOMEM, "out of memory rebuilding a stack");
        goto out;
    }
    for (size_t k = 0; k < n_loc; k++)
        if ((rc = loc_id(b, L, rd_le64(keys + 8 * k), &locs[k], err)) < 0)
            goto out;
    ch_rd r = {s, n, (size_t)(keys - s) + 8 * n_loc, false};
    if (n_loc == 0)
        r.pos = 4;
    rc = rd_labels_add(&r, n, &sc, b, locs, n_loc, value, err);
out:
    free(locs);
    free(sc.buf);
    return rc;
}

bool pd__ch_stack_passes(const uint8_t *s, size_t n, const pd_storage_sample_filter *f)
{
    ch_rd r = {s, n, 0, false};
    const uint8_t *x;
    size_t xn;
    if (has_mark(s, n, MARK_STACK)) {
        const uint8_t *keys;
        size_t n_loc = pd__ch_stack_locs(s, n, &keys);
        if (n_loc == 0 && (n < 4 || s[3] != 0))
            return false;
        r.pos = n_loc ? (size_t)(keys - s) + 8 * n_loc : 4;
        goto labels;
    }
    uint64_t n_loc = pd__ch_rd_varint(&r);
    if (r.bad || n_loc > n)
        return false;
    for (uint64_t k = 0; k < n_loc && !r.bad; k++) {
        if (pd__ch_rd_varint(&r)) { /* the mapping */
            for (int i = 0; i < 3; i++)
                (void)pd__ch_rd_varint(&r);
            pd__ch_rd_str(&r, &x, &xn);
            pd__ch_rd_str(&r, &x, &xn);
            (void)pd__ch_rd_varint(&r);
        }
        (void)pd__ch_rd_varint(&r); /* address */
        uint64_t n_line = pd__ch_rd_varint(&r);
        if (r.bad || n_line > n)
            return false;
        for (uint64_t l = 0; l < n_line && !r.bad; l++) {
            if (pd__ch_rd_varint(&r)) { /* the function */
                for (int i = 0; i < 3; i++)
                    pd__ch_rd_str(&r, &x, &xn);
                (void)pd__ch_rd_varint(&r);
            }
            (void)pd__ch_rd_varint(&r);
            (void)pd__ch_rd_varint(&r);
        }
    }
labels:;
    uint64_t n_label = pd__ch_rd_varint(&r);
    if (r.bad || n_label > n)
        return false;
    for (uint64_t k = 0; k < n_label && !r.bad; k++) {
        const uint8_t *key, *str, *unit;
        size_t kn, sn, un;
        pd__ch_rd_str(&r, &key, &kn);
        pd__ch_rd_str(&r, &str, &sn);
        (void)pd__ch_rd_varint(&r);
        pd__ch_rd_str(&r, &unit, &un);
        if (!r.bad &&
            pd__storage_span_label_passes(f, (const char *)key, kn, (const char *)str, sn))
            return true;
    }
    return false;
}

uint64_t pd__ch_types_hash(const pd_profile *p)
{
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    for (size_t i = 0; i < p->n_sample_type; i++) {
        const char *t = pd_profile_str(p, p->sample_type[i].type);
        const char *u = pd_profile_str(p, p->sample_type[i].unit);
        XXH3_64bits_update(&st, t, strlen(t) + 1);
        XXH3_64bits_update(&st, u, strlen(u) + 1);
    }
    XXH3_64bits_update(&st, "|", 1);
    const char *t = pd_profile_str(p, p->period_type.type);
    const char *u = pd_profile_str(p, p->period_type.unit);
    XXH3_64bits_update(&st, t, strlen(t) + 1);
    XXH3_64bits_update(&st, u, strlen(u) + 1);
    return XXH3_64bits_digest(&st);
}
