/*
 * pprof/decode.c — the protobuf wire decoder for perftools.profiles.Profile.
 *
 * Wire format (https://protobuf.dev/programming-guides/encoding/): a message
 * is a sequence of (tag varint = field << 3 | wire type, payload). Wire types
 * 0 varint, 1 fixed 8 bytes, 2 length-delimited (varint length + bytes),
 * 5 fixed 4 bytes; 3/4 (groups) are not used by profile.proto and are
 * rejected. Repeated scalars (Sample.location_id, Sample.value,
 * Profile.comment) may arrive packed (one wire-type-2 field holding
 * concatenated varints) or unpacked (one varint field per element), or both
 * mixed: every form is accepted, in order. Unknown fields, and known fields
 * with an unexpected wire type (as protobuf-go does), are skipped. Scalars
 * that repeat take the last value; a repeated embedded message
 * (period_type) merges.
 *
 * Algorithm, linear in the input: pass 1 walks the top-level fields and
 * counts each repeated field; the caps are checked on these counts before
 * anything is allocated; the arrays are then allocated from the profile's
 * arena and pass 2 fills them. A sample or location is read in one pass
 * into scratch arrays owned by the decoder (reused across messages, caps
 * checked as they grow), then copied into exactly sized arena arrays. So
 * every byte is read at most three times and nothing in the arena is
 * reallocated. No text is formatted unless there is an error to report.
 *
 * Every length is checked against the bytes that remain in the enclosing
 * message before use; nothing here asserts on input. Errors name the byte
 * offset in the (decompressed) protobuf and the field.
 */
#include "pprof/pprof_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/varint.h"

typedef struct dec {
    pd_profile *p;
    pd_pprof_limits lim;
    pd_err *err;
    size_t n_lines;   /* Line entries so far, over all locations */
    const char *kind; /* message being decoded when `what` is NULL ... */
    size_t idx;       /* ... and its index: named only in error messages */
    /* scratch for one sample or location, reused (malloc'd, freed at the end) */
    uint64_t *s_loc, *s_val;
    size_t cap_loc, cap_val;
    pd_pprof_label *s_lab;
    size_t cap_lab;
    pd_pprof_line *s_line;
    size_t cap_line;
} dec;

/* Room for `need` elements in a scratch array (need is within a cap). */
static int scratch(dec *d, void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : 64;
    while (nc < need)
        nc *= 2;
    void *n = realloc(*arr, nc * elem);
    if (!n)
        return pd_err_set(d->err, PD_ENOMEM, "pprof: out of memory decoding %s %zu", d->kind,
                          d->idx);
    *arr = n;
    *cap = nc;
    return 0;
}

static void dec_release(dec *d)
{
    free(d->s_loc);
    free(d->s_val);
    free(d->s_lab);
    free(d->s_line);
}

/* A view of one message's bytes; off is the absolute offset of p[0]. */
typedef struct rd {
    const uint8_t *p;
    size_t len;
    size_t pos;
    size_t off;
} rd;

/* The name of what is being decoded: `what`, or when NULL "kind idx" (so
 * that no name is formatted unless an error needs it). */
static const char *what_name(const dec *d, const char *what, char *buf, size_t cap)
{
    if (what)
        return what;
    snprintf(buf, cap, "%s %zu", d->kind ? d->kind : "message", d->idx);
    return buf;
}

static int perr(dec *d, const rd *r, const char *what, const char *why)
{
    char buf[48];
    return pd_err_set(d->err, PD_EPARSE, "pprof protobuf: byte %zu (%s): %s", r->off + r->pos,
                      what_name(d, what, buf, sizeof buf), why);
}

/* Varints are read inline, 1-2 byte ones (tags, ids, most values) first. */
static inline int rd_varint(dec *d, rd *r, const char *what, uint64_t *v)
{
    const uint8_t *p = r->p + r->pos;
    size_t left = r->len - r->pos;
    if (left >= 2) {
        if (p[0] < 0x80) {
            *v = p[0];
            r->pos++;
            return 0;
        }
        if (p[1] < 0x80) {
            *v = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
            r->pos += 2;
            return 0;
        }
    }
    size_t n = 0, lim = left < 10 ? left : 10; /* pd_varint_get's rules, inline */
    uint64_t x = 0;
    for (size_t i = 0; i < lim; i++) {
        if (i == 9 && p[i] > 1)
            break; /* a 10th byte may carry only bit 63 */
        x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            *v = x;
            n = i + 1;
            break;
        }
    }
    if (n == 0) {
        perr(d, r, what, r->len - r->pos < 10 ? "truncated varint" : "varint longer than 10 bytes");
        return PD_EPARSE; /* a constant: the compiler sees *v set whenever 0 is returned */
    }
    r->pos += n;
    return 0;
}

static inline int rd_tag(dec *d, rd *r, const char *what, uint32_t *field, int *wt)
{
    uint64_t v;
    *field = 0;
    *wt = 0;
    int rc = rd_varint(d, r, what, &v);
    if (rc)
        return rc;
    if ((v >> 3) == 0 || (v >> 3) > 0x1fffffff) {
        r->pos--; /* point at the tag, roughly */
        return perr(d, r, what, "field number 0 or above 2^29-1");
    }
    *field = (uint32_t)(v >> 3);
    *wt = (int)(v & 7);
    return 0;
}

/* Reads a length-delimited payload into *sub, checked against what remains. */
static int past_end(dec *d, rd *r, const char *what, uint64_t n)
{
    char why[96];
    snprintf(why, sizeof why, "length %llu runs past the end (%zu bytes left)",
             (unsigned long long)n, r->len - r->pos);
    return perr(d, r, what, why);
}

static inline int rd_bytes(dec *d, rd *r, const char *what, rd *sub)
{
    uint64_t n;
    int rc = rd_varint(d, r, what, &n);
    if (rc)
        return rc;
    if (n > r->len - r->pos)
        return past_end(d, r, what, n);
    sub->p = r->p + r->pos;
    sub->len = (size_t)n;
    sub->pos = 0;
    sub->off = r->off + r->pos;
    r->pos += (size_t)n;
    return 0;
}

static int rd_skip(dec *d, rd *r, const char *what, int wt)
{
    uint64_t v;
    rd sub;
    switch (wt) {
    case WT_VARINT:
        return rd_varint(d, r, what, &v);
    case WT_LEN:
        return rd_bytes(d, r, what, &sub);
    case WT_I64:
    case WT_I32: {
        size_t n = wt == WT_I64 ? 8 : 4;
        if (r->len - r->pos < n)
            return perr(d, r, what, "truncated fixed-width field");
        r->pos += n;
        return 0;
    }
    default:
        return perr(d, r, what, "unsupported wire type (group or invalid)");
    }
}

/* Number of complete-looking varints in a packed payload (bytes without the
 * continuation bit). The fill pass checks that each one is well formed. */
static size_t count_packed(const rd *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->len; i++)
        n += !(s->p[i] & 0x80);
    return n;
}

/* Decodes a packed payload into dst[*n..]; room is known to suffice. One-
 * and two-byte varints (ids, small values) take a tight loop of their own. */
static inline int fill_packed(dec *d, rd *s, const char *what, uint64_t *dst, size_t *n, size_t cap)
{
    const uint8_t *p = s->p;
    size_t len = s->len, i = s->pos, k = *n;
    int rc = 0;
    while (i < len) {
        uint8_t b = p[i];
        if (k < cap && b < 0x80) {
            dst[k++] = b;
            i++;
            continue;
        }
        if (k < cap && i + 1 < len && p[i + 1] < 0x80) {
            dst[k++] = (uint64_t)(b & 0x7f) | (uint64_t)p[i + 1] << 7;
            i += 2;
            continue;
        }
        uint64_t v;
        s->pos = i;
        if ((rc = rd_varint(d, s, what, &v)))
            break;
        if (k >= cap) { /* cannot happen: count_packed counted every terminator */
            rc = perr(d, s, what, "packed field longer than counted");
            break;
        }
        dst[k++] = v;
        i = s->pos;
    }
    if (!rc)
        s->pos = i;
    *n = k;
    return rc;
}

static int too_big(dec *d, const char *what, size_t n, const char *cap, size_t limit)
{
    char buf[48];
    return pd_err_set(d->err, PD_ETOOBIG, "pprof: %s: %zu exceeds the cap %s=%zu",
                      what_name(d, what, buf, sizeof buf), n, cap, limit);
}

static int dec_value_type(dec *d, rd *r, const char *what, pd_pprof_value_type *vt)
{
    while (r->pos < r->len) {
        uint32_t f;
        int wt, rc;
        uint64_t v;
        if ((rc = rd_tag(d, r, what, &f, &wt)))
            return rc;
        if ((f == 1 || f == 2) && wt == WT_VARINT) {
            if ((rc = rd_varint(d, r, what, &v)))
                return rc;
            if (f == 1)
                vt->type = (int64_t)v;
            else
                vt->unit = (int64_t)v;
        } else if ((rc = rd_skip(d, r, what, wt))) {
            return rc;
        }
    }
    return 0;
}

static int dec_label(dec *d, rd *r, const char *what, pd_pprof_label *l)
{
    while (r->pos < r->len) {
        uint32_t f;
        int wt, rc;
        uint64_t v;
        if ((rc = rd_tag(d, r, what, &f, &wt)))
            return rc;
        if (f >= 1 && f <= 4 && wt == WT_VARINT) {
            if ((rc = rd_varint(d, r, what, &v)))
                return rc;
            switch (f) {
            case 1:
                l->key = (int64_t)v;
                break;
            case 2:
                l->str = (int64_t)v;
                break;
            case 3:
                l->num = (int64_t)v;
                break;
            default:
                l->num_unit = (int64_t)v;
                break;
            }
        } else if ((rc = rd_skip(d, r, what, wt))) {
            return rc;
        }
    }
    return 0;
}

/* One pass over the sample's fields into the scratch arrays (caps checked
 * as they grow), then one exact allocation of each array from the arena. */
static int dec_sample(dec *d, rd *r, size_t idx, pd_pprof_sample *s)
{
    const char *what = NULL; /* "sample idx" in errors */
    d->kind = "sample";
    d->idx = idx;
    size_t n_loc = 0, n_val = 0, n_lab = 0;
    uint32_t f;
    int wt, rc;
    rd sub;
    uint64_t v;

    while (r->pos < r->len) {
        if ((rc = rd_tag(d, r, what, &f, &wt)))
            return rc;
        if ((f == 1 || f == 2) && (wt == WT_VARINT || wt == WT_LEN)) {
            uint64_t **dst = f == 1 ? &d->s_loc : &d->s_val;
            v = 0;
            size_t *cap = f == 1 ? &d->cap_loc : &d->cap_val;
            size_t *n = f == 1 ? &n_loc : &n_val;
            size_t k = 1;
            if (wt == WT_VARINT) {
                if ((rc = rd_varint(d, r, what, &v)))
                    return rc;
            } else {
                if ((rc = rd_bytes(d, r, what, &sub)))
                    return rc;
                k = count_packed(&sub);
            }
            if (f == 1 && *n + k > d->lim.max_stack_depth)
                return too_big(d, what, *n + k, "max_stack_depth (locations per sample)",
                               d->lim.max_stack_depth);
            if (f == 2 && *n + k > d->lim.max_sample_types)
                return too_big(d, what, *n + k, "max_sample_types (values per sample)",
                               d->lim.max_sample_types);
            if ((rc = scratch(d, (void **)dst, cap, *n + k, sizeof **dst)))
                return rc;
            if (wt == WT_VARINT)
                (*dst)[(*n)++] = v;
            else if ((rc = fill_packed(d, &sub, what, *dst, n, *n + k)))
                return rc;
        } else if (f == 3 && wt == WT_LEN) {
            if ((rc = rd_bytes(d, r, what, &sub)))
                return rc;
            if (n_lab + 1 > d->lim.max_labels_per_sample)
                return too_big(d, what, n_lab + 1, "max_labels_per_sample",
                               d->lim.max_labels_per_sample);
            if ((rc = scratch(d, (void **)&d->s_lab, &d->cap_lab, n_lab + 1, sizeof *d->s_lab)))
                return rc;
            pd_pprof_label *l = &d->s_lab[n_lab++];
            memset(l, 0, sizeof *l);
            if ((rc = dec_label(d, &sub, what, l)))
                return rc;
        } else if ((rc = rd_skip(d, r, what, wt))) {
            return rc;
        }
    }

    pd_arena *a = &d->p->arena;
    s->location_id = n_loc ? pd_arena_alloc(a, n_loc * sizeof *s->location_id) : NULL;
    s->value = n_val ? pd_arena_alloc(a, n_val * sizeof *s->value) : NULL;
    s->label = n_lab ? pd_arena_alloc(a, n_lab * sizeof *s->label) : NULL;
    if ((n_loc && !s->location_id) || (n_val && !s->value) || (n_lab && !s->label))
        return pd_err_set(d->err, PD_ENOMEM, "pprof: out of memory decoding %s %zu", d->kind,
                          d->idx);
    if (n_loc)
        memcpy(s->location_id, d->s_loc, n_loc * sizeof *s->location_id);
    if (n_val)
        memcpy(s->value, d->s_val, n_val * sizeof *s->value);
    if (n_lab)
        memcpy(s->label, d->s_lab, n_lab * sizeof *s->label);
    s->n_location = n_loc;
    s->n_value = n_val;
    s->n_label = n_lab;
    return 0;
}

static int dec_mapping(dec *d, rd *r, size_t idx, pd_pprof_mapping *m)
{
    const char *what = NULL; /* "mapping idx" in errors */
    d->kind = "mapping";
    d->idx = idx;
    while (r->pos < r->len) {
        uint32_t f;
        int wt, rc;
        uint64_t v;
        if ((rc = rd_tag(d, r, what, &f, &wt)))
            return rc;
        if (f >= 1 && f <= 10 && wt == WT_VARINT) {
            if ((rc = rd_varint(d, r, what, &v)))
                return rc;
            switch (f) {
            case 1:
                m->id = v;
                break;
            case 2:
                m->memory_start = v;
                break;
            case 3:
                m->memory_limit = v;
                break;
            case 4:
                m->file_offset = v;
                break;
            case 5:
                m->filename = (int64_t)v;
                break;
            case 6:
                m->build_id = (int64_t)v;
                break;
            case 7:
                m->has_functions = v != 0;
                break;
            case 8:
                m->has_filenames = v != 0;
                break;
            case 9:
                m->has_line_numbers = v != 0;
                break;
            default:
                m->has_inline_frames = v != 0;
                break;
            }
        } else if ((rc = rd_skip(d, r, what, wt))) {
            return rc;
        }
    }
    return 0;
}

static int dec_line(dec *d, rd *r, const char *what, pd_pprof_line *l)
{
    while (r->pos < r->len) {
        uint32_t f;
        int wt, rc;
        uint64_t v;
        if ((rc = rd_tag(d, r, what, &f, &wt)))
            return rc;
        if (f >= 1 && f <= 3 && wt == WT_VARINT) {
            if ((rc = rd_varint(d, r, what, &v)))
                return rc;
            if (f == 1)
                l->function_id = v;
            else if (f == 2)
                l->line = (int64_t)v;
            else
                l->column = (int64_t)v;
        } else if ((rc = rd_skip(d, r, what, wt))) {
            return rc;
        }
    }
    return 0;
}

static int dec_location(dec *d, rd *r, size_t idx, pd_pprof_location *l)
{
    const char *what = NULL; /* "location idx" in errors */
    d->kind = "location";
    d->idx = idx;
    size_t n_line = 0;
    uint32_t f;
    int wt, rc;
    uint64_t v;
    rd sub;

    while (r->pos < r->len) {
        if ((rc = rd_tag(d, r, what, &f, &wt)))
            return rc;
        if (f == 4 && wt == WT_LEN) {
            if ((rc = rd_bytes(d, r, what, &sub)))
                return rc;
            if (++d->n_lines > d->lim.max_lines)
                return too_big(d, "line entries of all locations", d->n_lines, "max_lines",
                               d->lim.max_lines);
            if ((rc = scratch(d, (void **)&d->s_line, &d->cap_line, n_line + 1, sizeof *d->s_line)))
                return rc;
            pd_pprof_line *ln = &d->s_line[n_line++];
            memset(ln, 0, sizeof *ln);
            if ((rc = dec_line(d, &sub, what, ln)))
                return rc;
        } else if (f >= 1 && f <= 5 && f != 4 && wt == WT_VARINT) {
            if ((rc = rd_varint(d, r, what, &v)))
                return rc;
            if (f == 1)
                l->id = v;
            else if (f == 2)
                l->mapping_id = v;
            else if (f == 3)
                l->address = v;
            else
                l->is_folded = v != 0;
        } else if ((rc = rd_skip(d, r, what, wt))) {
            return rc;
        }
    }
    l->line = n_line ? pd_arena_alloc(&d->p->arena, n_line * sizeof *l->line) : NULL;
    if (n_line && !l->line)
        return pd_err_set(d->err, PD_ENOMEM, "pprof: out of memory decoding %s %zu", d->kind,
                          d->idx);
    if (n_line)
        memcpy(l->line, d->s_line, n_line * sizeof *l->line);
    l->n_line = n_line;
    return 0;
}

static int dec_function(dec *d, rd *r, size_t idx, pd_pprof_function *fn)
{
    const char *what = NULL; /* "function idx" in errors */
    d->kind = "function";
    d->idx = idx;
    while (r->pos < r->len) {
        uint32_t f;
        int wt, rc;
        uint64_t v;
        if ((rc = rd_tag(d, r, what, &f, &wt)))
            return rc;
        if (f >= 1 && f <= 5 && wt == WT_VARINT) {
            if ((rc = rd_varint(d, r, what, &v)))
                return rc;
            switch (f) {
            case 1:
                fn->id = v;
                break;
            case 2:
                fn->name = (int64_t)v;
                break;
            case 3:
                fn->system_name = (int64_t)v;
                break;
            case 4:
                fn->filename = (int64_t)v;
                break;
            default:
                fn->start_line = (int64_t)v;
                break;
            }
        } else if ((rc = rd_skip(d, r, what, wt))) {
            return rc;
        }
    }
    return 0;
}

int pd__pprof_decode_raw(pd_profile *p, const uint8_t *data, size_t len, const pd_pprof_limits *lim,
                         pd_err *err)
{
    dec d = {.p = p, .lim = pd__pprof_limits_effective(lim), .err = err};
    size_t n_st = 0, n_s = 0, n_m = 0, n_l = 0, n_f = 0, n_str = 0, n_c = 0;
    rd r = {.p = data, .len = len}, sub;
    uint32_t f;
    int wt, rc;
    uint64_t v;
    const char *what = "profile";

    memset(p, 0, sizeof *p);
    pd_arena_init(&p->arena);
    pd_u64map_init(&p->loc_by_id);
    pd_u64map_init(&p->fn_by_id);
    pd_u64map_init(&p->map_by_id);

    /* pass 1: count the repeated fields, check the wire structure */
    while (r.pos < r.len) {
        if ((rc = rd_tag(&d, &r, what, &f, &wt)))
            goto fail;
        if (wt == WT_LEN && f >= PF_SAMPLE_TYPE && f <= PF_STRING_TABLE) {
            if ((rc = rd_bytes(&d, &r, what, &sub)))
                goto fail;
            switch (f) {
            case PF_SAMPLE_TYPE:
                n_st++;
                break;
            case PF_SAMPLE:
                n_s++;
                break;
            case PF_MAPPING:
                n_m++;
                break;
            case PF_LOCATION:
                n_l++;
                break;
            case PF_FUNCTION:
                n_f++;
                break;
            default:
                n_str++;
                break;
            }
        } else if (f == PF_COMMENT && wt == WT_LEN) {
            if ((rc = rd_bytes(&d, &r, what, &sub)))
                goto fail;
            n_c += count_packed(&sub);
        } else if (f == PF_COMMENT && wt == WT_VARINT) {
            if ((rc = rd_varint(&d, &r, what, &v)))
                goto fail;
            n_c++;
        } else if ((rc = rd_skip(&d, &r, what, wt))) {
            goto fail;
        }
    }
    rc = 0;
    if (n_st > d.lim.max_sample_types)
        rc = too_big(&d, "sample types", n_st, "max_sample_types", d.lim.max_sample_types);
    else if (n_s > d.lim.max_samples)
        rc = too_big(&d, "samples", n_s, "max_samples", d.lim.max_samples);
    else if (n_m > d.lim.max_mappings)
        rc = too_big(&d, "mappings", n_m, "max_mappings", d.lim.max_mappings);
    else if (n_l > d.lim.max_locations)
        rc = too_big(&d, "locations", n_l, "max_locations", d.lim.max_locations);
    else if (n_f > d.lim.max_functions)
        rc = too_big(&d, "functions", n_f, "max_functions", d.lim.max_functions);
    else if (n_str > d.lim.max_strings)
        rc = too_big(&d, "strings", n_str, "max_strings", d.lim.max_strings);
    else if (n_c > d.lim.max_strings)
        rc = too_big(&d, "comments", n_c, "max_strings", d.lim.max_strings);
    if (rc)
        goto fail;

    pd_arena *a = &p->arena;
    rc = PD_ENOMEM;
#define ALLOC(field, n)                                                                            \
    do {                                                                                           \
        if ((n) && !(p->field = pd_arena_calloc(a, (n), sizeof *p->field))) {                      \
            pd_err_set(err, PD_ENOMEM, "pprof: out of memory (%zu %s)", (size_t)(n), #field);      \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)
    ALLOC(sample_type, n_st);
    ALLOC(sample, n_s);
    ALLOC(mapping, n_m);
    ALLOC(location, n_l);
    ALLOC(function, n_f);
    ALLOC(string_table, n_str);
    ALLOC(string_len, n_str);
    ALLOC(comment, n_c);
#undef ALLOC

    /* pass 2: fill */
    r.pos = 0;
    while (r.pos < r.len) {
        if ((rc = rd_tag(&d, &r, what, &f, &wt)))
            goto fail;
        if (wt == WT_LEN && f >= PF_SAMPLE_TYPE && f <= PF_PERIOD_TYPE) {
            if ((rc = rd_bytes(&d, &r, what, &sub)))
                goto fail;
            switch (f) {
            case PF_SAMPLE_TYPE:
                rc = dec_value_type(&d, &sub, "sample_type", &p->sample_type[p->n_sample_type++]);
                break;
            case PF_SAMPLE:
                rc = dec_sample(&d, &sub, p->n_sample, &p->sample[p->n_sample]);
                p->n_sample++;
                break;
            case PF_MAPPING:
                rc = dec_mapping(&d, &sub, p->n_mapping, &p->mapping[p->n_mapping]);
                p->n_mapping++;
                break;
            case PF_LOCATION:
                rc = dec_location(&d, &sub, p->n_location, &p->location[p->n_location]);
                p->n_location++;
                break;
            case PF_FUNCTION:
                rc = dec_function(&d, &sub, p->n_function, &p->function[p->n_function]);
                p->n_function++;
                break;
            case PF_STRING_TABLE: {
                char *s = pd_arena_strndup(a, (const char *)sub.p, sub.len);
                if (!s) {
                    rc = pd_err_set(err, PD_ENOMEM, "pprof: out of memory (string of %zu bytes)",
                                    sub.len);
                    break;
                }
                p->string_table[p->n_string] = s;
                p->string_len[p->n_string++] = sub.len;
                break;
            }
            case PF_PERIOD_TYPE:
                rc = dec_value_type(&d, &sub, "period_type", &p->period_type);
                break;
            default: /* 7..10 with a wrong wire type: skipped */
                break;
            }
            if (rc)
                goto fail;
        } else if (f == PF_COMMENT && wt == WT_LEN) {
            if ((rc = rd_bytes(&d, &r, what, &sub)))
                goto fail;
            if ((rc = fill_packed(&d, &sub, "comment", (uint64_t *)p->comment, &p->n_comment, n_c)))
                goto fail;
        } else if (wt == WT_VARINT && f >= PF_DROP_FRAMES && f <= PF_DOC_URL &&
                   f != PF_PERIOD_TYPE) {
            if ((rc = rd_varint(&d, &r, what, &v)))
                goto fail;
            switch (f) {
            case PF_DROP_FRAMES:
                p->drop_frames = (int64_t)v;
                break;
            case PF_KEEP_FRAMES:
                p->keep_frames = (int64_t)v;
                break;
            case PF_TIME_NANOS:
                p->time_nanos = (int64_t)v;
                break;
            case PF_DURATION_NANOS:
                p->duration_nanos = (int64_t)v;
                break;
            case PF_PERIOD:
                p->period = (int64_t)v;
                break;
            case PF_COMMENT:
                p->comment[p->n_comment++] = (int64_t)v;
                break;
            case PF_DEFAULT_SAMPLE_TYPE:
                p->default_sample_type = (int64_t)v;
                break;
            default:
                p->doc_url = (int64_t)v;
                break;
            }
        } else if ((rc = rd_skip(&d, &r, what, wt))) {
            goto fail;
        }
    }
    dec_release(&d);
    return 0;

fail:
    dec_release(&d);
    pd_profile_release(p);
    return rc;
}
