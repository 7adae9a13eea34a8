/*
 * ingest/otlp.c — OTLP profiles into pprof (see otlp.h). The request is
 * first walked on the wire to bound message nesting (protobuf-c's unpack
 * recurses; AnyValue nests without limit), then unpacked by the code
 * protoc-c generates from the vendored .proto files (the walk also checks
 * Sample's wire types, which tell a request of an older release apart),
 * then the profiles of each scope are grouped (same time, duration and
 * period: one pprof with several sample types) and each group is rebuilt
 * with the pprof builder, every index checked against its table (otlp.h).
 */
#include "ingest/otlp.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest Req;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary Dict;
typedef Opentelemetry__Proto__Profiles__V1development__Profile Prof;
typedef Opentelemetry__Proto__Common__V1__AnyValue AnyValue;
typedef Opentelemetry__Proto__Common__V1__KeyValue KeyValue;

pd_otlp_limits pd_otlp_limits_default(void)
{
    pd_otlp_limits l;
    memset(&l, 0, sizeof l);
    l.max_nesting = 16;
    l.max_table = 1000000;
    l.max_profiles = 10000;
    l.max_attributes = 10000;
    l.pprof = pd_pprof_limits_default();
    return l;
}

void pd_otlp_result_release(pd_otlp_result *r)
{
    for (size_t i = 0; i < r->n; i++) {
        pd_labels_release(&r->p[i].labels);
        pd_profile_release(&r->p[i].profile);
    }
    free(r->p);
    memset(r, 0, sizeof *r);
}

/* ---- nesting walk over the wire ---- */

enum {
    T_NONE,
    T_REQ,
    T_RP,
    T_RES,
    T_SP,
    T_SCOPE,
    T_KV,
    T_AV,
    T_ARR,
    T_KVL,
    T_DICT,
    T_KVU,
    T_PROF,
    T_SAMPLE
};

/* The message type of field f of a message of type t (T_NONE: not a
 * message that can nest). */
static int child(int t, uint64_t f)
{
    switch (t) {
    case T_REQ:
        return f == 1 ? T_RP : f == 2 ? T_DICT : T_NONE;
    case T_RP:
        return f == 1 ? T_RES : f == 2 ? T_SP : T_NONE;
    case T_RES:
        return f == 1 ? T_KV : T_NONE;
    case T_SP:
        return f == 1 ? T_SCOPE : f == 2 ? T_PROF : T_NONE;
    case T_PROF:
        return f == 2 ? T_SAMPLE : T_NONE;
    case T_SCOPE:
        return f == 3 ? T_KV : T_NONE;
    case T_KV:
        return f == 2 ? T_AV : T_NONE;
    case T_AV:
        return f == 5 ? T_ARR : f == 6 ? T_KVL : T_NONE;
    case T_ARR:
        return f == 1 ? T_AV : T_NONE;
    case T_KVL:
        return f == 1 ? T_KV : T_NONE;
    case T_DICT:
        return f == 6 ? T_KVU : T_NONE;
    case T_KVU:
        return f == 2 ? T_AV : T_NONE;
    default:
        return T_NONE;
    }
}

static int varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *v)
{
    uint64_t r = 0;
    for (int s = 0; s < 64; s += 7) {
        if (*pos >= len)
            return -1;
        uint8_t b = p[(*pos)++];
        r |= (uint64_t)(b & 0x7f) << s;
        if (b < 0x80) {
            *v = r;
            return 0;
        }
    }
    return -1;
}

/* Whether wire type wt is what v1.11.0's Sample declares for field f
 * (1 stack_index int32, 2 attribute_indices repeated int32, 3 link_index
 * int32, 4 values repeated int64, 5 timestamps_unix_nano repeated fixed64;
 * repeated scalars packed or not). Releases before v1.10 numbered them
 * differently (v1.9.0: 2 values, 3 attribute_indices, 4 link_index), so a
 * packed field 3 is the mark of an older request, which v1.11.0's decoder
 * would otherwise misread (its values taken for attribute indices). */
static bool sample_wire_ok(uint64_t f, unsigned wt)
{
    switch (f) {
    case 1:
    case 3:
        return wt == 0;
    case 2:
    case 4:
        return wt == 0 || wt == 2;
    case 5:
        return wt == 1 || wt == 2;
    default:
        return true; /* unknown fields are skipped, as protobuf says */
    }
}

/* 0, PD_EPARSE (malformed wire data at *at), PD_ETOOBIG (too deep),
 * W_RELEASE (a Sample field of the wrong wire type at *at: a request of
 * another release of opentelemetry-proto). */
enum { W_RELEASE = -2 };
static int walk(const uint8_t *p, size_t len, int t, size_t depth, size_t max, size_t base,
                size_t *at)
{
    size_t pos = 0;
    if (depth > max) {
        *at = base;
        return PD_ETOOBIG;
    }
    while (pos < len) {
        uint64_t key, v;
        size_t start = pos;
        if (varint(p, len, &pos, &key) < 0) {
            *at = base + start;
            return PD_EPARSE;
        }
        if (t == T_SAMPLE && !sample_wire_ok(key >> 3, (unsigned)(key & 7))) {
            *at = base + start;
            return W_RELEASE;
        }
        switch (key & 7) {
        case 0:
            if (varint(p, len, &pos, &v) < 0) {
                *at = base + start;
                return PD_EPARSE;
            }
            break;
        case 1:
        case 5: {
            size_t n = (key & 7) == 1 ? 8 : 4;
            if (len - pos < n) {
                *at = base + start;
                return PD_EPARSE;
            }
            pos += n;
            break;
        }
        case 2: {
            if (varint(p, len, &pos, &v) < 0 || v > len - pos) {
                *at = base + start;
                return PD_EPARSE;
            }
            int c = child(t, key >> 3);
            if (c != T_NONE) {
                int rc = walk(p + pos, (size_t)v, c, depth + 1, max, base + pos, at);
                if (rc < 0)
                    return rc;
            }
            pos += (size_t)v;
            break;
        }
        default:
            *at = base + start;
            return PD_EPARSE;
        }
    }
    return 0;
}

/* ---- conversion ---- */

static const char *dstr(const Dict *d, int64_t i)
{
    if (!d || i <= 0 || (size_t)i >= d->n_string_table)
        return i == 0 ? "" : NULL;
    return d->string_table[i];
}

/* Text of a scalar AnyValue into buf; NULL for arrays/maps/none. */
static const char *any_text(const Dict *d, const AnyValue *v, char *buf, size_t cap)
{
    if (!v)
        return NULL;
    switch (v->value_case) {
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE:
        return v->string_value;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX:
        return dstr(d, v->string_value_strindex);
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE:
        return v->bool_value ? "true" : "false";
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE:
        snprintf(buf, cap, "%" PRId64, v->int_value);
        return buf;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE:
        snprintf(buf, cap, "%.17g", v->double_value);
        return buf;
    default:
        return NULL;
    }
}

/* A profile type as a classic metric name (__name__): service.name becomes
 * service_name, other characters outside [a-zA-Z0-9_] become '_'. */
static void label_name(const char *key, char *out, size_t cap)
{
    if (!strcmp(key, "service.name")) {
        snprintf(out, cap, "service_name");
        return;
    }
    size_t n = 0;
    for (const char *k = key; *k && n + 1 < cap; k++) {
        char c = *k;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                  (c >= '0' && c <= '9' && n > 0);
        out[n++] = ok ? c : '_';
    }
    out[n] = 0;
}

typedef struct conv {
    const Dict *d;
    const size_t *ix; /* the group's profiles' indexes in their scope, for messages */
    const pd_otlp_limits *lim;
    char msg[400];
} conv;

static int cfail(conv *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int cfail(conv *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
    return code;
}

#define IDX_OK(i, n) ((i) >= 0 && (size_t)(i) < (n))

typedef Opentelemetry__Proto__Profiles__V1development__Sample Sample;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit KVU;

/* The attribute at index ax of the dictionary with its key, or NULL with
 * c->msg set (index or key string out of range, or an empty key: index 0
 * is the table's zero value and names nothing). */
static const KVU *attr_at(conv *c, int32_t ax, const char *what, const char **key)
{
    const Dict *d = c->d;
    if (!IDX_OK(ax, d->n_attribute_table)) {
        cfail(c, PD_EINVAL, "%s: attribute index %d out of range (%zu attributes)", what, ax,
              d->n_attribute_table);
        return NULL;
    }
    const KVU *kv = d->attribute_table[ax];
    *key = dstr(d, kv->key_strindex);
    if (!*key || !dstr(d, kv->unit_strindex)) {
        cfail(c, PD_EINVAL, "%s: attribute %d: string index out of range", what, ax);
        return NULL;
    }
    if (!**key) {
        cfail(
            c, PD_EINVAL,
            "%s: attribute %d has no key (attribute_table[0] is the zero value, not an attribute)",
            what, ax);
        return NULL;
    }
    return kv;
}

static bool any_true(const AnyValue *v)
{
    return v && v->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE &&
           v->bool_value;
}

/* The value of a sample (OTLP's three shapes, profiles.proto "Sample"): the
 * sum of values when given (one aggregated value, or one per timestamp, in
 * which case there must be as many as timestamps), else the number of
 * timestamps (each worth 1). Neither is refused: the spec says a Sample MUST
 * have one of them. */
static int sample_value(conv *c, size_t k, size_t si, const Sample *s, int64_t *v)
{
    if (!s->n_values && !s->n_timestamps_unix_nano)
        return cfail(c, PD_EINVAL,
                     "profile %zu sample %zu has neither values nor timestamps_unix_nano (a Sample "
                     "MUST have at "
                     "least one of them; a request of opentelemetry-proto v1.9.0 or older carries "
                     "its values in "
                     "field 2, which v1.11.0 reads as attribute_indices)",
                     k, si);
    if (s->n_values && s->n_timestamps_unix_nano && s->n_values != s->n_timestamps_unix_nano)
        return cfail(c, PD_EINVAL,
                     "profile %zu sample %zu has %zu values and %zu timestamps_unix_nano (when "
                     "both are given "
                     "they MUST have the same number of elements)",
                     k, si, s->n_values, s->n_timestamps_unix_nano);
    if (!s->n_values) {
        *v = (int64_t)s->n_timestamps_unix_nano;
        return 0;
    }
    int64_t sum = 0;
    for (size_t i = 0; i < s->n_values; i++)
        if (__builtin_add_overflow(sum, s->values[i], &sum))
            return cfail(c, PD_EINVAL,
                         "profile %zu sample %zu: the sum of its values overflows int64", k, si);
    *v = sum;
    return 0;
}

/* The pprof mapping of m: its has_* flags and build id come from its
 * attributes as the OpenTelemetry pprof conversion writes them
 * (pprof.mapping.has_functions, .has_filenames, .has_line_numbers,
 * .has_inline_frames: bool true; process.executable.build_id.gnu,
 * .build_id.htlhash, .build_id.go: the build id string). */
static int mapping_of(conv *c, pd_profile_builder *b, int32_t mi, uint64_t *mid, pd_err *err)
{
    const Dict *d = c->d;
    if (!IDX_OK(mi, d->n_mapping_table))
        return cfail(c, PD_EINVAL, "mapping index %d out of range (%zu mappings)", mi,
                     d->n_mapping_table);
    const Opentelemetry__Proto__Profiles__V1development__Mapping *m = d->mapping_table[mi];
    const char *fn = dstr(d, m->filename_strindex);
    if (!fn)
        return cfail(c, PD_EINVAL, "mapping %d: filename index out of range", mi);
    pd_pprof_mapping pm;
    memset(&pm, 0, sizeof pm);
    pm.memory_start = m->memory_start;
    pm.memory_limit = m->memory_limit;
    pm.file_offset = m->file_offset;
    const char *build_id = NULL;
    char what[64];
    snprintf(what, sizeof what, "mapping %d", mi);
    for (size_t i = 0; i < m->n_attribute_indices; i++) {
        const char *key;
        const KVU *kv = attr_at(c, m->attribute_indices[i], what, &key);
        if (!kv)
            return PD_EINVAL;
        if (!strcmp(key, "pprof.mapping.has_functions"))
            pm.has_functions = any_true(kv->value);
        else if (!strcmp(key, "pprof.mapping.has_filenames"))
            pm.has_filenames = any_true(kv->value);
        else if (!strcmp(key, "pprof.mapping.has_line_numbers"))
            pm.has_line_numbers = any_true(kv->value);
        else if (!strcmp(key, "pprof.mapping.has_inline_frames"))
            pm.has_inline_frames = any_true(kv->value);
        else if (!strncmp(key, "process.executable.build_id.", 28) && !build_id) {
            char tb[64];
            const char *t = any_text(d, kv->value, tb, sizeof tb);
            if (t && *t && t != tb)
                build_id = t;
        }
    }
    return pd_profile_builder_mapping(b, &pm, fn, build_id, mid, err);
}

/* Profile-level attributes of the pprof conversion back into pprof's
 * fields: pprof.profile.comment, doc_url / pprof.profile.doc_url,
 * drop_frames / keep_frames (and their pprof.profile. names). Others are
 * left out. */
static int profile_attrs(conv *c, const Prof *pr, pd_profile_builder *b, pd_err *err)
{
    pd_profile *bp = pd_profile_builder_profile(b);
    for (size_t i = 0; i < pr->n_attribute_indices; i++) {
        const char *key;
        const KVU *kv = attr_at(c, pr->attribute_indices[i], "profile", &key);
        if (!kv)
            return PD_EINVAL;
        char tb[64];
        const char *t = any_text(c->d, kv->value, tb, sizeof tb);
        if (!t || !*t)
            continue;
        if (!strncmp(key, "pprof.profile.", 14))
            key += 14;
        int64_t *field = !strcmp(key, "doc_url")       ? &bp->doc_url
                         : !strcmp(key, "drop_frames") ? &bp->drop_frames
                         : !strcmp(key, "keep_frames") ? &bp->keep_frames
                                                       : NULL;
        if (field) {
            int64_t si = pd_profile_builder_string(b, t, err);
            if (si < 0)
                return (int)si;
            *field = si;
        } else if (!strcmp(key, "comment")) {
            int rc = pd_profile_builder_comment(b, t, err);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

static bool vt_eq(const Opentelemetry__Proto__Profiles__V1development__ValueType *a,
                  const Opentelemetry__Proto__Profiles__V1development__ValueType *b)
{
    int32_t at = a ? a->type_strindex : 0, au = a ? a->unit_strindex : 0;
    int32_t bt = b ? b->type_strindex : 0, bu = b ? b->unit_strindex : 0;
    return at == bt && au == bu;
}

/* Whether profile q joins the group led by profile k (grp[0..n) so far):
 * same time, duration, period type and period, and a sample type the
 * group does not have yet. */
static bool same_group(const Prof *k, const Prof *q, const Prof *const *grp, size_t n)
{
    if (k->time_unix_nano != q->time_unix_nano || k->duration_nano != q->duration_nano ||
        k->period != q->period || !vt_eq(k->period_type, q->period_type))
        return false;
    for (size_t i = 0; i < n; i++)
        if (vt_eq(grp[i]->sample_type, q->sample_type))
            return false;
    return true;
}

/* Converts the n profiles pr[0..n) of one scope, which share time,
 * duration and period (the standard conversion of one pprof with n sample
 * types), into one pprof profile with n sample types in their order. A
 * sample of profile k has value k set and the others 0; samples with the
 * same stack and attributes are joined into one (values added). */
static int one_group(conv *c, const Prof *const *pr, size_t n, pd_profile *out)
{
    const Dict *d = c->d;
    pd_profile_builder *b = NULL;
    pd_err err = {{0}};
    uint64_t *locs = NULL;
    int64_t *vals = NULL;
    size_t nloc_cap = 0, cur = c->ix[0];
    int rc = pd_profile_builder_new(&c->lim->pprof, &b);
    if (rc < 0)
        return cfail(c, rc, "out of memory");
    vals = calloc(n, sizeof *vals);
    if (!vals) {
        rc = cfail(c, PD_ENOMEM, "out of memory");
        goto fail;
    }
    const Prof *p0 = pr[0];
    const char *pt = p0->period_type ? dstr(d, p0->period_type->type_strindex) : "";
    const char *pu = p0->period_type ? dstr(d, p0->period_type->unit_strindex) : "";
    if (!pt || !pu) {
        rc = cfail(c, PD_EINVAL, "period type string index out of range");
        goto fail;
    }
    for (size_t k = 0; k < n; k++) {
        const char *st = pr[k]->sample_type ? dstr(d, pr[k]->sample_type->type_strindex) : "";
        const char *su = pr[k]->sample_type ? dstr(d, pr[k]->sample_type->unit_strindex) : "";
        if (!st || !su) {
            rc =
                cfail(c, PD_EINVAL, "profile %zu: sample type string index out of range", c->ix[k]);
            goto fail;
        }
        if ((rc = pd_profile_builder_sample_type(b, st, su, &err)) < 0)
            goto failerr;
    }
    if ((rc = pd_profile_builder_period(b, pt, pu, p0->period, &err)) < 0 ||
        (rc = profile_attrs(c, p0, b, &err)) < 0)
        goto failerr;
    pd_profile *bp = pd_profile_builder_profile(b);
    bp->time_nanos = (int64_t)p0->time_unix_nano;
    bp->duration_nanos = (int64_t)p0->duration_nano;
    for (size_t k = 0; k < n; k++) {
        cur = c->ix[k];
        for (size_t si = 0; si < pr[k]->n_samples; si++) {
            const Sample *s = pr[k]->samples[si];
            if ((rc = sample_value(c, c->ix[k], si, s, &vals[k])) < 0)
                goto fail;
            if (!IDX_OK(s->stack_index, d->n_stack_table)) {
                rc = cfail(c, PD_EINVAL,
                           "profile %zu sample %zu: stack_index %d out of range (%zu stacks)",
                           c->ix[k], si, s->stack_index, d->n_stack_table);
                goto fail;
            }
            const Opentelemetry__Proto__Profiles__V1development__Stack *stk =
                d->stack_table[s->stack_index];
            if (stk->n_location_indices > nloc_cap) {
                uint64_t *nl = realloc(locs, stk->n_location_indices * sizeof *nl);
                if (!nl) {
                    rc = cfail(c, PD_ENOMEM, "out of memory");
                    goto fail;
                }
                locs = nl;
                nloc_cap = stk->n_location_indices;
            }
            for (size_t li = 0; li < stk->n_location_indices; li++) {
                int32_t lx = stk->location_indices[li];
                if (!IDX_OK(lx, d->n_location_table)) {
                    rc = cfail(
                        c, PD_EINVAL,
                        "profile %zu sample %zu: location index %d out of range (%zu locations)",
                        c->ix[k], si, lx, d->n_location_table);
                    goto fail;
                }
                const Opentelemetry__Proto__Profiles__V1development__Location *l =
                    d->location_table[lx];
                uint64_t mid = 0;
                if (l->mapping_index != 0 &&
                    (rc = mapping_of(c, b, l->mapping_index, &mid, &err)) < 0) {
                    if (rc == PD_EINVAL && c->msg[0])
                        goto fail;
                    goto failerr;
                }
                pd_pprof_line lines[64];
                size_t nl = l->n_lines < 64 ? l->n_lines : 64;
                for (size_t q = 0; q < nl; q++) {
                    const Opentelemetry__Proto__Profiles__V1development__Line *ln = l->lines[q];
                    if (!IDX_OK(ln->function_index, d->n_function_table)) {
                        rc = cfail(c, PD_EINVAL, "location %d: function index %d out of range", lx,
                                   ln->function_index);
                        goto fail;
                    }
                    const Opentelemetry__Proto__Profiles__V1development__Function *f =
                        d->function_table[ln->function_index];
                    const char *nm = dstr(d, f->name_strindex),
                               *sn = dstr(d, f->system_name_strindex),
                               *fl = dstr(d, f->filename_strindex);
                    if (!nm || !sn || !fl) {
                        rc = cfail(c, PD_EINVAL, "function %d: string index out of range",
                                   ln->function_index);
                        goto fail;
                    }
                    memset(&lines[q], 0, sizeof lines[q]);
                    if ((rc = pd_profile_builder_function(b, nm, sn, fl, f->start_line,
                                                          &lines[q].function_id, &err)) < 0)
                        goto failerr;
                    lines[q].line = ln->line;
                    lines[q].column = ln->column;
                }
                if ((rc = pd_profile_builder_location(b, mid, l->address, lines, nl, &locs[li],
                                                      &err)) < 0)
                    goto failerr;
            }
            /* sample attributes -> pprof labels */
            pd_pprof_label lab[64];
            size_t nlab = 0;
            char what[64];
            snprintf(what, sizeof what, "profile %zu sample %zu", c->ix[k], si);
            for (size_t ai = 0; ai < s->n_attribute_indices && nlab < 64; ai++) {
                const char *key;
                const KVU *kv = attr_at(c, s->attribute_indices[ai], what, &key);
                if (!kv) {
                    rc = PD_EINVAL;
                    goto fail;
                }
                const char *unit = dstr(d, kv->unit_strindex);
                memset(&lab[nlab], 0, sizeof lab[nlab]);
                if ((lab[nlab].key = pd_profile_builder_string(b, key, &err)) < 0) {
                    rc = (int)lab[nlab].key;
                    goto failerr;
                }
                if (kv->value && kv->value->value_case ==
                                     OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE) {
                    lab[nlab].num = kv->value->int_value;
                    if (*unit &&
                        (lab[nlab].num_unit = pd_profile_builder_string(b, unit, &err)) < 0) {
                        rc = (int)lab[nlab].num_unit;
                        goto failerr;
                    }
                } else {
                    char tb[64];
                    const char *t = any_text(d, kv->value, tb, sizeof tb);
                    if (!t) {
                        rc = cfail(c, PD_EINVAL, "%s: attribute %d (%s): value is not a scalar",
                                   what, s->attribute_indices[ai], key);
                        goto fail;
                    }
                    if ((lab[nlab].str = pd_profile_builder_string(b, t, &err)) < 0) {
                        rc = (int)lab[nlab].str;
                        goto failerr;
                    }
                }
                nlab++;
            }
            rc = pd_profile_builder_sample(b, locs, stk->n_location_indices, vals, lab, nlab, &err);
            vals[k] = 0;
            if (rc < 0)
                goto failerr;
        }
    }
    free(locs);
    free(vals);
    rc = pd_profile_builder_finish(b, out, &err);
    pd_profile_builder_free(b);
    if (rc < 0)
        return cfail(c, rc, "%s", err.msg);
    return 0;
failerr:
    cfail(c, rc, "profile %zu: %s", cur, err.msg[0] ? err.msg : pd_strerror(rc));
fail:
    free(locs);
    free(vals);
    pd_profile_builder_free(b);
    return rc;
}

/* Series labels of a resource (+ __name__ from the types of the group's n
 * profiles pr[0..n), otlp.h). */
static int series_labels(conv *c, const Opentelemetry__Proto__Resource__V1__Resource *res,
                         const Prof *const *pr, size_t n, pd_labels *ls)
{
    pd_err err = {{0}};
    pd_labels_init(ls);
    if (res) {
        for (size_t i = 0; i < res->n_attributes; i++) {
            const KeyValue *kv = res->attributes[i];
            const char *key = kv->key && *kv->key ? kv->key : dstr(c->d, kv->key_strindex);
            char tb[64], name[PD_LABEL_MAX_NAME + 1];
            const char *t = any_text(c->d, kv->value, tb, sizeof tb);
            if (!key || !*key || !t || !*t)
                continue;
            /* as given (Prometheus 3's UTF-8 label names: "host.name", "k8s.pod.name"),
               but service.name is Pyroscope's service_name */
            snprintf(name, sizeof name, "%s", strcmp(key, "service.name") ? key : "service_name");
            if (!strncmp(name, "__", 2) || !pd_label_name_valid(name))
                continue;
            if (pd_labels_set(ls, name, t, &err) < 0) {
                pd_labels_release(ls);
                return cfail(c, PD_EINVAL, "resource attribute %s: %s", key, err.msg);
            }
        }
    }
    const char *st = pr[0]->sample_type ? dstr(c->d, pr[0]->sample_type->type_strindex) : NULL;
    const char *pt = pr[0]->period_type ? dstr(c->d, pr[0]->period_type->type_strindex) : NULL;
    const char *nm = st && *st && strcmp(st, "samples") ? st
                     : pt && *pt                        ? pt
                     : st && *st                        ? st
                                                        : "unknown";
    if (n > 1 && pt && *pt) /* one pprof with several types: named by its period type */
        nm = strcmp(pt, "space") ? pt : "memory";
    char name[PD_LABEL_MAX_NAME + 1];
    label_name(nm, name, sizeof name);
    if (!*name || pd_labels_set(ls, "__name__", name, &err) < 0) {
        pd_labels_release(ls);
        return cfail(c, PD_EINVAL, "profile type \"%s\" is not a valid metric name", nm);
    }
    return 0;
}

int pd_otlp_convert(const uint8_t *body, size_t len, const pd_otlp_limits *lim_in,
                    pd_otlp_result *out, pd_err *err)
{
    pd_otlp_limits lim = lim_in ? *lim_in : pd_otlp_limits_default();
    pd_otlp_limits d = pd_otlp_limits_default();
    if (!lim.max_nesting)
        lim.max_nesting = d.max_nesting;
    if (!lim.max_table)
        lim.max_table = d.max_table;
    if (!lim.max_profiles)
        lim.max_profiles = d.max_profiles;
    if (!lim.max_attributes)
        lim.max_attributes = d.max_attributes;
    memset(out, 0, sizeof *out);
    size_t at = 0;
    int rc = walk(body, len, T_REQ, 0, lim.max_nesting, 0, &at);
    if (rc == PD_ETOOBIG)
        return pd_err_set(err, rc, "messages nest deeper than %zu at byte %zu", lim.max_nesting,
                          at);
    if (rc == W_RELEASE)
        return pd_err_set(
            err, PD_EPARSE,
            "not an opentelemetry-proto v1.11.0 ExportProfilesServiceRequest: a Sample field at "
            "byte %zu has the wire type of another release (v1.9.0 and older number Sample's "
            "values 2, attribute_indices 3, link_index 4; v1.11.0 numbers them 4, 2, 3); "
            "re-encode the request with v1.11.0's profiles.proto",
            at);
    if (rc < 0)
        return pd_err_set(err, PD_EPARSE,
                          "not an ExportProfilesServiceRequest: bad protobuf at byte %zu", at);
    Req *req =
        opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(
            NULL, len, body);
    if (!req)
        return pd_err_set(
            err, PD_EPARSE,
            "not an ExportProfilesServiceRequest: protobuf does not decode (%zu bytes)", len);
    static const Dict empty =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILES_DICTIONARY__INIT;
    const Dict *dict = req->dictionary ? req->dictionary : &empty;
    size_t nprof = 0;
    for (size_t i = 0; i < req->n_resource_profiles; i++) {
        const Opentelemetry__Proto__Profiles__V1development__ResourceProfiles *rp =
            req->resource_profiles[i];
        if (rp->resource && rp->resource->n_attributes > lim.max_attributes) {
            rc = pd_err_set(err, PD_ETOOBIG, "resource %zu: %zu attributes, over %zu", i,
                            rp->resource->n_attributes, lim.max_attributes);
            goto done;
        }
        for (size_t j = 0; j < rp->n_scope_profiles; j++)
            nprof += rp->scope_profiles[j]->n_profiles;
    }
    if (nprof > lim.max_profiles) {
        rc = pd_err_set(err, PD_ETOOBIG, "%zu profiles, over %zu", nprof, lim.max_profiles);
        goto done;
    }
    if (dict->n_attribute_table > lim.max_attributes) {
        rc = pd_err_set(err, PD_ETOOBIG, "dictionary attribute_table of %zu entries, over %zu",
                        dict->n_attribute_table, lim.max_attributes);
        goto done;
    }
    size_t tabs[] = {dict->n_mapping_table, dict->n_location_table, dict->n_function_table,
                     dict->n_string_table,  dict->n_stack_table,    dict->n_link_table};
    for (size_t t = 0; t < sizeof tabs / sizeof *tabs; t++)
        if (tabs[t] > lim.max_table) {
            rc = pd_err_set(err, PD_ETOOBIG, "a dictionary table of %zu entries, over %zu", tabs[t],
                            lim.max_table);
            goto done;
        }
    out->p = calloc(nprof ? nprof : 1, sizeof *out->p);
    if (!out->p) {
        rc = pd_err_set(err, PD_ENOMEM, "out of memory");
        goto done;
    }
    conv c = {.d = dict, .lim = &lim};
    const Prof **grp = calloc(nprof ? nprof : 1, sizeof *grp);
    size_t *gix = calloc(nprof ? nprof : 1, sizeof *gix);
    bool *used = calloc(nprof ? nprof : 1, sizeof *used);
    if (!grp || !gix || !used) {
        free(grp);
        free(gix);
        free(used);
        rc = pd_err_set(err, PD_ENOMEM, "out of memory");
        pd_otlp_result_release(out);
        goto done;
    }
    for (size_t i = 0; i < req->n_resource_profiles; i++) {
        const Opentelemetry__Proto__Profiles__V1development__ResourceProfiles *rp =
            req->resource_profiles[i];
        for (size_t j = 0; j < rp->n_scope_profiles; j++) {
            const Opentelemetry__Proto__Profiles__V1development__ScopeProfiles *sp =
                rp->scope_profiles[j];
            memset(used, 0, sp->n_profiles * sizeof *used);
            for (size_t k = 0; k < sp->n_profiles; k++) {
                if (used[k])
                    continue;
                size_t n = 0;
                for (size_t q = k; q < sp->n_profiles; q++)
                    if (!used[q] &&
                        (q == k || same_group(sp->profiles[k], sp->profiles[q], grp, n))) {
                        used[q] = true;
                        grp[n] = sp->profiles[q];
                        gix[n++] = q;
                    }
                pd_otlp_profile *o = &out->p[out->n];
                c.msg[0] = 0;
                c.ix = gix;
                int r2 = series_labels(&c, rp->resource, grp, n, &o->labels);
                if (r2 == 0) {
                    r2 = one_group(&c, grp, n, &o->profile);
                    if (r2 < 0)
                        pd_labels_release(&o->labels);
                }
                if (r2 == PD_ENOMEM) {
                    free(grp);
                    free(gix);
                    free(used);
                    rc = pd_err_set(err, PD_ENOMEM, "out of memory");
                    pd_otlp_result_release(out);
                    goto done;
                }
                if (r2 < 0) {
                    if (!out->rejected)
                        snprintf(out->first_error, sizeof out->first_error,
                                 "resource %zu scope %zu: %s%s", i, j,
                                 n > 1 ? "profiles joined with it refused too: " : "", c.msg);
                    out->rejected += n;
                    continue;
                }
                o->time_ms = (int64_t)(grp[0]->time_unix_nano / 1000000);
                o->n_joined = n;
                out->n++;
            }
        }
    }
    free(grp);
    free(gix);
    free(used);
    rc = 0;
done:
    opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
        req, NULL);
    return rc;
}

int pd_otlp_response(int64_t rejected, const char *msg, pd_buf *out)
{
    Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse r =
        OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_RESPONSE__INIT;
    Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesPartialSuccess ps =
        OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_PARTIAL_SUCCESS__INIT;
    if (rejected || (msg && *msg)) {
        ps.rejected_profiles = rejected;
        ps.error_message = (char *)(msg ? msg : "");
        r.partial_success = &ps;
    }
    size_t n =
        opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__get_packed_size(
            &r);
    if (pd_buf_reserve(out, n) < 0)
        return PD_ENOMEM;
    opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__pack(
        &r, (uint8_t *)out->data + out->len);
    out->len += n;
    return 0;
}

/* google.rpc.Status on the wire (googleapis google/rpc/status.proto):
 * 1 code (int32, varint), 2 message (string). Two fields, so written here
 * rather than vendoring googleapis and google/protobuf/any.proto for it. */
static int put_varint(pd_buf *out, uint64_t v)
{
    uint8_t b[10];
    size_t n = 0;
    do {
        b[n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return pd_buf_append(out, b, n);
}

int pd_otlp_status(int code, const char *msg, bool json, pd_buf *out)
{
    msg = msg ? msg : "";
    size_t n = strlen(msg);
    int rc;
    if (json) {
        rc = pd_buf_printf(out, "{\"code\":%d,\"message\":", code);
        if (rc == 0)
            rc = pd_buf_put_json_string(out, msg, n);
        if (rc == 0)
            rc = pd_buf_puts(out, "}");
        return rc;
    }
    if (code && ((rc = put_varint(out, 1 << 3 | 0)) < 0 ||
                 (rc = put_varint(out, (uint64_t)(int64_t)code)) < 0))
        return rc;
    if (n && ((rc = put_varint(out, 2 << 3 | 2)) < 0 || (rc = put_varint(out, n)) < 0 ||
              (rc = pd_buf_append(out, msg, n)) < 0))
        return rc;
    return 0;
}
