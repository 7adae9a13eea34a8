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

int pd__ch_stack_encode(const pd_profile *p, size_t i, pd_buf *out)
{
    const pd_pprof_sample *sm = &p->sample[i];
    int rc = pd_buf_put_varint(out, sm->n_location);
    for (size_t k = 0; rc == 0 && k < sm->n_location; k++) {
        const pd_pprof_location *loc = pd_profile_location(p, sm->location_id[k]);
        if (!loc) { /* validated profiles resolve every id */
            rc = pd_buf_put_varint(out, 0);
            rc = rc ? rc : pd_buf_put_varint(out, 0);
            rc = rc ? rc : pd_buf_put_varint(out, 0);
            continue;
        }
        const pd_pprof_mapping *m = loc->mapping_id ? pd_profile_mapping(p, loc->mapping_id) : NULL;
        rc = pd_buf_put_varint(out, m != NULL);
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
            rc = pd_buf_put_varint(out, f != NULL);
            if (rc == 0 && f) {
                rc = put_pstr(out, p, f->name);
                rc = rc ? rc : put_pstr(out, p, f->system_name);
                rc = rc ? rc : put_pstr(out, p, f->filename);
                rc = rc ? rc : put_s(out, f->start_line);
            }
            rc = rc ? rc : put_s(out, ln->line);
            rc = rc ? rc : put_s(out, ln->column);
        }
    }
    rc = rc ? rc : pd_buf_put_varint(out, sm->n_label);
    for (size_t k = 0; rc == 0 && k < sm->n_label; k++) {
        const pd_pprof_label *lb = &sm->label[k];
        rc = put_pstr(out, p, lb->key);
        rc = rc ? rc : put_pstr(out, p, lb->str);
        rc = rc ? rc : put_s(out, lb->num);
        rc = rc ? rc : put_pstr(out, p, lb->num_unit);
    }
    return rc;
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

int pd__ch_stack_add(pd_profile_builder *b, const uint8_t *s, size_t n, const int64_t *value,
                     pd_err *err)
{
    ch_rd r = {s, n, 0, false};
    scratch sc = {malloc(n + 1), 0, n + 1};
    uint64_t *locs = NULL;
    pd_pprof_line *lines = NULL;
    pd_pprof_label *labels = NULL;
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
    for (uint64_t k = 0; k < n_loc && !r.bad; k++) {
        uint64_t mid = 0;
        if (pd__ch_rd_varint(&r)) {
            pd_pprof_mapping m;
            memset(&m, 0, sizeof m);
            m.memory_start = pd__ch_rd_varint(&r);
            m.memory_limit = pd__ch_rd_varint(&r);
            m.file_offset = pd__ch_rd_varint(&r);
            const char *file = rd_cstr(&r, &sc), *bid = rd_cstr(&r, &sc);
            uint64_t fl = pd__ch_rd_varint(&r);
            m.has_functions = fl & 1;
            m.has_filenames = fl >> 1 & 1;
            m.has_line_numbers = fl >> 2 & 1;
            m.has_inline_frames = fl >> 3 & 1;
            if (r.bad)
                break;
            rc = pd_profile_builder_mapping(b, &m, file, bid, &mid, err);
            if (rc < 0)
                goto out;
        }
        uint64_t addr = pd__ch_rd_varint(&r);
        uint64_t n_line = pd__ch_rd_varint(&r);
        if (r.bad || n_line > n)
            break;
        for (uint64_t l = 0; l < n_line && !r.bad; l++) {
            uint64_t fid = 0;
            if (pd__ch_rd_varint(&r)) {
                const char *name = rd_cstr(&r, &sc), *sys = rd_cstr(&r, &sc),
                           *file = rd_cstr(&r, &sc);
                int64_t start = rd_s(&r);
                if (r.bad)
                    break;
                rc = pd_profile_builder_function(b, name, sys, file, start, &fid, err);
                if (rc < 0)
                    goto out;
            }
            lines[l].function_id = fid;
            lines[l].line = rd_s(&r);
            lines[l].column = rd_s(&r);
        }
        if (r.bad)
            break;
        rc = pd_profile_builder_location(b, mid, addr, lines, (size_t)n_line, &locs[k], err);
        if (rc < 0)
            goto out;
    }
    uint64_t n_label = pd__ch_rd_varint(&r);
    if (r.bad || n_label > n) {
        rc = pd_err_set(err, PD_ECORRUPT, "stacks row: truncated or malformed (%zu bytes)", n);
        goto out;
    }
    labels = calloc(n_label ? n_label : 1, sizeof *labels);
    if (!labels) {
        rc = pd_err_set(err, PD_ENOMEM, "out of memory rebuilding a stack");
        goto out;
    }
    for (uint64_t k = 0; k < n_label && !r.bad; k++) {
        const char *key = rd_cstr(&r, &sc), *str = rd_cstr(&r, &sc);
        int64_t num = rd_s(&r);
        const char *unit = rd_cstr(&r, &sc);
        if (r.bad)
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
    if (r.bad || r.pos != r.len) {
        rc = pd_err_set(err, PD_ECORRUPT, "stacks row: truncated or malformed (%zu bytes)", n);
        goto out;
    }
    rc = pd_profile_builder_sample(b, locs, (size_t)n_loc, value, labels, (size_t)n_label, err);
out:
    free(sc.buf);
    free(locs);
    free(lines);
    free(labels);
    return rc;
}

bool pd__ch_stack_passes(const uint8_t *s, size_t n, const pd_storage_sample_filter *f)
{
    ch_rd r = {s, n, 0, false};
    const uint8_t *x;
    size_t xn;
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
        if (!r.bad && pd__storage_span_label_passes(f, (const char *)key, kn, (const char *)str, sn))
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
