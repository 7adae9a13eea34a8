/*
 * pprof/equal.c — semantic equality of two profiles (DESIGN.md §1).
 *
 * Ids and string-table order are producer's choices, so nothing is compared
 * by id or index. The scalar parts (sample types, period type/period, time,
 * duration, comments, drop/keep frames, default sample type, doc URL) are
 * compared as resolved strings and numbers. Samples are a multiset:
 *
 *   1. each location is canonicalized once into bytes — its mapping
 *      (filename, build id, start, limit, offset, or a "none" marker), its
 *      address, and per line the function (name, system name, filename,
 *      start line, or "none"), line and column; strings are length-prefixed
 *      so no two different frames give the same bytes — and hashed with
 *      XXH3-128;
 *   2. each sample is canonicalized into its values, the hashes of its
 *      locations in stack order, and the sorted hashes of its labels (label
 *      order is not significant), and hashed with XXH3-128;
 *   3. both lists of sample hashes are sorted and walked in step; the first
 *      hash present on one side only is the reported difference.
 *
 * Cost: O(bytes + n log n). A false "equal" needs a 128-bit collision.
 */
#include "pprof/pprof_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

typedef struct item {
    XXH128_hash_t h;
    size_t idx;
} item;

static void str_of(const pd_profile *p, int64_t i, const char **s, size_t *len)
{
    if (i >= 0 && (uint64_t)i < (uint64_t)p->n_string) {
        *s = p->string_table[i];
        *len = p->string_len[i];
    } else {
        *s = "";
        *len = 0;
    }
}

static bool str_eq(const pd_profile *a, int64_t ia, const pd_profile *b, int64_t ib)
{
    const char *sa, *sb;
    size_t la, lb;
    str_of(a, ia, &sa, &la);
    str_of(b, ib, &sb, &lb);
    return la == lb && !memcmp(sa, sb, la);
}

static int put_u64(pd_buf *b, uint64_t v)
{
    return pd_buf_append(b, &v, sizeof v);
}

static int put_str(pd_buf *b, const pd_profile *p, int64_t i)
{
    const char *s;
    size_t len;
    str_of(p, i, &s, &len);
    int rc = put_u64(b, len);
    return rc ? rc : pd_buf_append(b, s, len);
}

static int put_hash(pd_buf *b, XXH128_hash_t h)
{
    int rc = put_u64(b, h.high64);
    return rc ? rc : put_u64(b, h.low64);
}

static XXH128_hash_t buf_hash(const pd_buf *b)
{
    return XXH3_128bits(b->data ? b->data : "", b->len);
}

static int cmp_hash(XXH128_hash_t x, XXH128_hash_t y)
{
    if (x.high64 != y.high64)
        return x.high64 < y.high64 ? -1 : 1;
    if (x.low64 != y.low64)
        return x.low64 < y.low64 ? -1 : 1;
    return 0;
}

static int cmp_item(const void *x, const void *y)
{
    return cmp_hash(((const item *)x)->h, ((const item *)y)->h);
}

static int cmp_h(const void *x, const void *y)
{
    return cmp_hash(*(const XXH128_hash_t *)x, *(const XXH128_hash_t *)y);
}

static int location_hash(const pd_profile *p, const pd_pprof_location *l, pd_buf *b,
                         XXH128_hash_t *h)
{
    int rc = 0;
    pd_buf_reset(b);
    const pd_pprof_mapping *m = l->mapping_id ? pd_profile_mapping(p, l->mapping_id) : NULL;
    if (m) {
        rc |= put_u64(b, 1);
        rc |= put_str(b, p, m->filename);
        rc |= put_str(b, p, m->build_id);
        rc |= put_u64(b, m->memory_start);
        rc |= put_u64(b, m->memory_limit);
        rc |= put_u64(b, m->file_offset);
    } else {
        rc |= put_u64(b, l->mapping_id ? 2 : 0); /* 2: dangling mapping id */
    }
    rc |= put_u64(b, l->address);
    rc |= put_u64(b, l->n_line);
    for (size_t i = 0; i < l->n_line; i++) {
        const pd_pprof_line *ln = &l->line[i];
        const pd_pprof_function *f =
            ln->function_id ? pd_profile_function(p, ln->function_id) : NULL;
        if (f) {
            rc |= put_u64(b, 1);
            rc |= put_str(b, p, f->name);
            rc |= put_str(b, p, f->system_name);
            rc |= put_str(b, p, f->filename);
            rc |= put_u64(b, (uint64_t)f->start_line);
        } else {
            rc |= put_u64(b, ln->function_id ? 2 : 0);
        }
        rc |= put_u64(b, (uint64_t)ln->line);
        rc |= put_u64(b, (uint64_t)ln->column);
    }
    if (rc)
        return PD_ENOMEM;
    *h = buf_hash(b);
    return 0;
}

/* Hashes every sample of p into items[0..n_sample), sorted. */
static int sample_hashes(const pd_profile *p, item **out)
{
    int rc = PD_ENOMEM;
    XXH128_hash_t *loc = NULL, *lab = NULL;
    item *it = NULL;
    size_t max_lab = 0;
    pd_buf b;
    pd_buf_init(&b, 0);

    for (size_t i = 0; i < p->n_sample; i++)
        if (p->sample[i].n_label > max_lab)
            max_lab = p->sample[i].n_label;
    loc = malloc((p->n_location ? p->n_location : 1) * sizeof *loc);
    lab = malloc((max_lab ? max_lab : 1) * sizeof *lab);
    it = malloc((p->n_sample ? p->n_sample : 1) * sizeof *it);
    if (!loc || !lab || !it)
        goto out;
    for (size_t i = 0; i < p->n_location; i++)
        if (location_hash(p, &p->location[i], &b, &loc[i]))
            goto out;

    for (size_t i = 0; i < p->n_sample; i++) {
        const pd_pprof_sample *s = &p->sample[i];
        int e = 0;
        for (size_t j = 0; j < s->n_label; j++) {
            const pd_pprof_label *l = &s->label[j];
            pd_buf_reset(&b);
            e |= put_str(&b, p, l->key);
            e |= put_str(&b, p, l->str);
            e |= put_u64(&b, (uint64_t)l->num);
            e |= put_str(&b, p, l->num_unit);
            lab[j] = buf_hash(&b);
        }
        qsort(lab, s->n_label, sizeof *lab, cmp_h);
        pd_buf_reset(&b);
        e |= put_u64(&b, s->n_value);
        for (size_t j = 0; j < s->n_value; j++)
            e |= put_u64(&b, (uint64_t)s->value[j]);
        e |= put_u64(&b, s->n_location);
        for (size_t j = 0; j < s->n_location; j++) {
            const pd_pprof_location *pl = pd_profile_location(p, s->location_id[j]);
            if (pl) {
                e |= put_hash(&b, loc[pl - p->location]);
            } else { /* dangling id: compare by the id itself */
                e |= put_u64(&b, UINT64_MAX);
                e |= put_u64(&b, s->location_id[j]);
            }
        }
        e |= put_u64(&b, s->n_label);
        for (size_t j = 0; j < s->n_label; j++)
            e |= put_hash(&b, lab[j]);
        if (e)
            goto out;
        it[i].h = buf_hash(&b);
        it[i].idx = i;
    }
    qsort(it, p->n_sample, sizeof *it, cmp_item);
    *out = it;
    it = NULL;
    rc = 0;
out:
    free(loc);
    free(lab);
    free(it);
    pd_buf_release(&b);
    return rc;
}

static void describe_sample(const pd_profile *p, size_t i, char *out, size_t cap)
{
    const pd_pprof_sample *s = &p->sample[i];
    size_t n = 0;
    int w = snprintf(out, cap, "values [");
    n = w > 0 ? (size_t)w : 0;
    for (size_t j = 0; j < s->n_value && n < cap; j++) {
        w = snprintf(out + n, cap - n, "%s%" PRId64, j ? " " : "", s->value[j]);
        n += w > 0 ? (size_t)w : 0;
    }
    const char *leaf = "?";
    if (s->n_location) {
        const pd_pprof_location *l = pd_profile_location(p, s->location_id[0]);
        if (l && l->n_line) {
            const pd_pprof_function *f = pd_profile_function(p, l->line[0].function_id);
            if (f)
                leaf = pd_profile_str(p, f->name);
        }
    }
    if (n < cap)
        snprintf(out + n, cap - n, "], %zu frames, %zu labels, leaf %.80s", s->n_location,
                 s->n_label, leaf);
}

static bool differ(pd_err *why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool differ(pd_err *why, const char *fmt, ...)
{
    if (why) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why->msg, sizeof why->msg, fmt, ap);
        va_end(ap);
    }
    return false;
}

#define SA(i) pd_profile_str(a, i)
#define SB(i) pd_profile_str(b, i)

bool pd_profile_equal(const pd_profile *a, const pd_profile *b, pd_err *why)
{
    if (a->n_sample_type != b->n_sample_type)
        return differ(why, "%zu sample types vs %zu", a->n_sample_type, b->n_sample_type);
    for (size_t i = 0; i < a->n_sample_type; i++) {
        const pd_pprof_value_type *x = &a->sample_type[i], *y = &b->sample_type[i];
        if (!str_eq(a, x->type, b, y->type) || !str_eq(a, x->unit, b, y->unit))
            return differ(why, "sample_type %zu: %.100s/%.100s vs %.100s/%.100s", i, SA(x->type),
                          SA(x->unit), SB(y->type), SB(y->unit));
    }
    if (!str_eq(a, a->period_type.type, b, b->period_type.type) ||
        !str_eq(a, a->period_type.unit, b, b->period_type.unit))
        return differ(why, "period_type: %.100s/%.100s vs %.100s/%.100s", SA(a->period_type.type),
                      SA(a->period_type.unit), SB(b->period_type.type), SB(b->period_type.unit));
    if (a->period != b->period)
        return differ(why, "period: %" PRId64 " vs %" PRId64, a->period, b->period);
    if (a->time_nanos != b->time_nanos)
        return differ(why, "time_nanos: %" PRId64 " vs %" PRId64, a->time_nanos, b->time_nanos);
    if (a->duration_nanos != b->duration_nanos)
        return differ(why, "duration_nanos: %" PRId64 " vs %" PRId64, a->duration_nanos,
                      b->duration_nanos);
    struct {
        const char *name;
        int64_t x, y;
    } strs[] = {
        {"drop_frames", a->drop_frames, b->drop_frames},
        {"keep_frames", a->keep_frames, b->keep_frames},
        {"default_sample_type", a->default_sample_type, b->default_sample_type},
        {"doc_url", a->doc_url, b->doc_url},
    };
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        if (!str_eq(a, strs[i].x, b, strs[i].y))
            return differ(why, "%s: \"%.150s\" vs \"%.150s\"", strs[i].name, SA(strs[i].x),
                          SB(strs[i].y));
    if (a->n_comment != b->n_comment)
        return differ(why, "%zu comments vs %zu", a->n_comment, b->n_comment);
    for (size_t i = 0; i < a->n_comment; i++)
        if (!str_eq(a, a->comment[i], b, b->comment[i]))
            return differ(why, "comment %zu: \"%.150s\" vs \"%.150s\"", i, SA(a->comment[i]),
                          SB(b->comment[i]));
    if (a->n_sample != b->n_sample)
        return differ(why, "%zu samples vs %zu", a->n_sample, b->n_sample);

    item *ha = NULL, *hb = NULL;
    if (sample_hashes(a, &ha) || sample_hashes(b, &hb)) {
        free(ha);
        free(hb);
        return differ(why, "out of memory comparing samples");
    }
    bool eq = true;
    for (size_t i = 0; i < a->n_sample; i++) {
        int c = cmp_hash(ha[i].h, hb[i].h);
        if (c == 0)
            continue;
        char d[300];
        /* the smaller hash of the two is missing from the other side */
        if (c < 0)
            describe_sample(a, ha[i].idx, d, sizeof d);
        else
            describe_sample(b, hb[i].idx, d, sizeof d);
        eq = differ(why, "sample %zu of the %s profile (%s) has no equal in the other",
                    c < 0 ? ha[i].idx : hb[i].idx, c < 0 ? "first" : "second", d);
        break;
    }
    free(ha);
    free(hb);
    if (eq && why)
        why->msg[0] = '\0';
    return eq;
}
