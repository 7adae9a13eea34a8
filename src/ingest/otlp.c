/*
 * ingest/otlp.c — OTLP profiles into pprof (see otlp.h). The request is
 * first walked on the wire to bound message nesting (protobuf-c's unpack
 * recurses; AnyValue nests without limit), then unpacked by the code
 * protoc-c generates from the vendored .proto files, then each profile is
 * rebuilt with the pprof builder, every index checked against its table.
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

enum { T_NONE, T_REQ, T_RP, T_RES, T_SP, T_SCOPE, T_KV, T_AV, T_ARR, T_KVL, T_DICT, T_KVU };

/* The message type of field f of a message of type t (T_NONE: not a
 * message that can nest). */
static int child(int t, uint64_t f)
{
    switch (t) {
    case T_REQ: return f == 1 ? T_RP : f == 2 ? T_DICT : T_NONE;
    case T_RP: return f == 1 ? T_RES : f == 2 ? T_SP : T_NONE;
    case T_RES: return f == 1 ? T_KV : T_NONE;
    case T_SP: return f == 1 ? T_SCOPE : T_NONE;
    case T_SCOPE: return f == 3 ? T_KV : T_NONE;
    case T_KV: return f == 2 ? T_AV : T_NONE;
    case T_AV: return f == 5 ? T_ARR : f == 6 ? T_KVL : T_NONE;
    case T_ARR: return f == 1 ? T_AV : T_NONE;
    case T_KVL: return f == 1 ? T_KV : T_NONE;
    case T_DICT: return f == 6 ? T_KVU : T_NONE;
    case T_KVU: return f == 2 ? T_AV : T_NONE;
    default: return T_NONE;
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

/* 0, PD_EPARSE (malformed wire data at *at), PD_ETOOBIG (too deep). */
static int walk(const uint8_t *p, size_t len, int t, size_t depth, size_t max, size_t base, size_t *at)
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

static int one_profile(conv *c, const Prof *pr, pd_profile *out)
{
    const Dict *d = c->d;
    pd_profile_builder *b = NULL;
    pd_err err = {{0}};
    int rc = pd_profile_builder_new(&c->lim->pprof, &b);
    if (rc < 0)
        return cfail(c, rc, "out of memory");
    const char *st = pr->sample_type ? dstr(d, pr->sample_type->type_strindex) : "";
    const char *su = pr->sample_type ? dstr(d, pr->sample_type->unit_strindex) : "";
    const char *pt = pr->period_type ? dstr(d, pr->period_type->type_strindex) : "";
    const char *pu = pr->period_type ? dstr(d, pr->period_type->unit_strindex) : "";
    if (!st || !su || !pt || !pu) {
        rc = cfail(c, PD_EINVAL, "sample or period type string index out of range");
        goto fail;
    }
    if ((rc = pd_profile_builder_sample_type(b, st, su, &err)) < 0 ||
        (rc = pd_profile_builder_period(b, pt, pu, pr->period, &err)) < 0)
        goto failerr;
    pd_profile *bp = pd_profile_builder_profile(b);
    bp->time_nanos = (int64_t)pr->time_unix_nano;
    bp->duration_nanos = (int64_t)pr->duration_nano;
    size_t nloc_cap = 0;
    uint64_t *locs = NULL;
    for (size_t si = 0; si < pr->n_samples; si++) {
        const Opentelemetry__Proto__Profiles__V1development__Sample *s = pr->samples[si];
        if (!IDX_OK(s->stack_index, d->n_stack_table)) {
            rc = cfail(c, PD_EINVAL, "sample %zu: stack_index %d out of range (%zu stacks)", si,
                       s->stack_index, d->n_stack_table);
            goto fail_locs;
        }
        const Opentelemetry__Proto__Profiles__V1development__Stack *stk = d->stack_table[s->stack_index];
        if (stk->n_location_indices > nloc_cap) {
            uint64_t *nl = realloc(locs, stk->n_location_indices * sizeof *nl);
            if (!nl) {
                rc = cfail(c, PD_ENOMEM, "out of memory");
                goto fail_locs;
            }
            locs = nl;
            nloc_cap = stk->n_location_indices;
        }
        for (size_t li = 0; li < stk->n_location_indices; li++) {
            int32_t lx = stk->location_indices[li];
            if (!IDX_OK(lx, d->n_location_table)) {
                rc = cfail(c, PD_EINVAL, "sample %zu: location index %d out of range (%zu locations)", si,
                           lx, d->n_location_table);
                goto fail_locs;
            }
            const Opentelemetry__Proto__Profiles__V1development__Location *l = d->location_table[lx];
            uint64_t mid = 0;
            if (l->mapping_index != 0) {
                if (!IDX_OK(l->mapping_index, d->n_mapping_table)) {
                    rc = cfail(c, PD_EINVAL, "location %d: mapping index %d out of range", lx, l->mapping_index);
                    goto fail_locs;
                }
                const Opentelemetry__Proto__Profiles__V1development__Mapping *m = d->mapping_table[l->mapping_index];
                const char *fn = dstr(d, m->filename_strindex);
                if (!fn) {
                    rc = cfail(c, PD_EINVAL, "mapping %d: filename index out of range", l->mapping_index);
                    goto fail_locs;
                }
                pd_pprof_mapping pm;
                memset(&pm, 0, sizeof pm);
                pm.memory_start = m->memory_start;
                pm.memory_limit = m->memory_limit;
                pm.file_offset = m->file_offset;
                if ((rc = pd_profile_builder_mapping(b, &pm, fn, NULL, &mid, &err)) < 0)
                    goto failerr_locs;
            }
            pd_pprof_line lines[64];
            size_t nl = l->n_lines < 64 ? l->n_lines : 64;
            for (size_t k = 0; k < nl; k++) {
                const Opentelemetry__Proto__Profiles__V1development__Line *ln = l->lines[k];
                if (!IDX_OK(ln->function_index, d->n_function_table)) {
                    rc = cfail(c, PD_EINVAL, "location %d: function index %d out of range", lx,
                               ln->function_index);
                    goto fail_locs;
                }
                const Opentelemetry__Proto__Profiles__V1development__Function *f = d->function_table[ln->function_index];
                const char *nm = dstr(d, f->name_strindex), *sn = dstr(d, f->system_name_strindex),
                           *fl = dstr(d, f->filename_strindex);
                if (!nm || !sn || !fl) {
                    rc = cfail(c, PD_EINVAL, "function %d: string index out of range", ln->function_index);
                    goto fail_locs;
                }
                memset(&lines[k], 0, sizeof lines[k]);
                if ((rc = pd_profile_builder_function(b, nm, sn, fl, f->start_line, &lines[k].function_id, &err)) < 0)
                    goto failerr_locs;
                lines[k].line = ln->line;
                lines[k].column = ln->column;
            }
            if ((rc = pd_profile_builder_location(b, mid, l->address, lines, nl, &locs[li], &err)) < 0)
                goto failerr_locs;
        }
        /* sample attributes -> labels */
        pd_pprof_label lab[64];
        size_t nlab = 0;
        for (size_t ai = 0; ai < s->n_attribute_indices && nlab < 64; ai++) {
            int32_t ax = s->attribute_indices[ai];
            if (!IDX_OK(ax, d->n_attribute_table)) {
                rc = cfail(c, PD_EINVAL, "sample %zu: attribute index %d out of range", si, ax);
                goto fail_locs;
            }
            const Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit *kv = d->attribute_table[ax];
            const char *key = dstr(d, kv->key_strindex), *unit = dstr(d, kv->unit_strindex);
            if (!key || !unit) {
                rc = cfail(c, PD_EINVAL, "attribute %d: string index out of range", ax);
                goto fail_locs;
            }
            memset(&lab[nlab], 0, sizeof lab[nlab]);
            if ((lab[nlab].key = pd_profile_builder_string(b, key, &err)) < 0) {
                rc = (int)lab[nlab].key;
                goto failerr_locs;
            }
            if (kv->value && kv->value->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE) {
                lab[nlab].num = kv->value->int_value;
                if (*unit && (lab[nlab].num_unit = pd_profile_builder_string(b, unit, &err)) < 0) {
                    rc = (int)lab[nlab].num_unit;
                    goto failerr_locs;
                }
            } else {
                char tb[64];
                const char *t = any_text(d, kv->value, tb, sizeof tb);
                if (!t) {
                    rc = cfail(c, PD_EINVAL, "attribute %d (%s): value is not a scalar", ax, key);
                    goto fail_locs;
                }
                if ((lab[nlab].str = pd_profile_builder_string(b, t, &err)) < 0) {
                    rc = (int)lab[nlab].str;
                    goto failerr_locs;
                }
            }
            nlab++;
        }
        int64_t v = s->n_values ? s->values[0] : (int64_t)s->n_timestamps_unix_nano;
        if ((rc = pd_profile_builder_sample(b, locs, stk->n_location_indices, &v, lab, nlab, &err)) < 0)
            goto failerr_locs;
    }
    free(locs);
    rc = pd_profile_builder_finish(b, out, &err);
    pd_profile_builder_free(b);
    if (rc < 0)
        return cfail(c, rc, "%s", err.msg);
    return 0;
failerr_locs:
    free(locs);
failerr:
    cfail(c, rc, "%s", err.msg[0] ? err.msg : pd_strerror(rc));
    pd_profile_builder_free(b);
    return rc;
fail_locs:
    free(locs);
fail:
    pd_profile_builder_free(b);
    return rc;
}

/* Series labels of a resource (+ __name__ from the profile's types). */
static int series_labels(conv *c, const Opentelemetry__Proto__Resource__V1__Resource *res, const Prof *pr,
                         pd_labels *ls)
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
    const char *st = pr->sample_type ? dstr(c->d, pr->sample_type->type_strindex) : NULL;
    const char *pt = pr->period_type ? dstr(c->d, pr->period_type->type_strindex) : NULL;
    const char *nm = st && *st && strcmp(st, "samples") ? st : pt && *pt ? pt : st && *st ? st : "unknown";
    char name[PD_LABEL_MAX_NAME + 1];
    label_name(nm, name, sizeof name);
    if (!*name || pd_labels_set(ls, "__name__", name, &err) < 0) {
        pd_labels_release(ls);
        return cfail(c, PD_EINVAL, "profile type \"%s\" is not a valid metric name", nm);
    }
    return 0;
}

int pd_otlp_convert(const uint8_t *body, size_t len, const pd_otlp_limits *lim_in, pd_otlp_result *out,
                    pd_err *err)
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
        return pd_err_set(err, rc, "messages nest deeper than %zu at byte %zu", lim.max_nesting, at);
    if (rc < 0)
        return pd_err_set(err, PD_EPARSE, "not an ExportProfilesServiceRequest: bad protobuf at byte %zu", at);
    Req *req = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(
        NULL, len, body);
    if (!req)
        return pd_err_set(err, PD_EPARSE, "not an ExportProfilesServiceRequest: protobuf does not decode (%zu bytes)",
                          len);
    static const Dict empty = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILES_DICTIONARY__INIT;
    const Dict *dict = req->dictionary ? req->dictionary : &empty;
    size_t nprof = 0;
    for (size_t i = 0; i < req->n_resource_profiles; i++) {
        const Opentelemetry__Proto__Profiles__V1development__ResourceProfiles *rp = req->resource_profiles[i];
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
                     dict->n_string_table, dict->n_stack_table, dict->n_link_table};
    for (size_t t = 0; t < sizeof tabs / sizeof *tabs; t++)
        if (tabs[t] > lim.max_table) {
            rc = pd_err_set(err, PD_ETOOBIG, "a dictionary table of %zu entries, over %zu", tabs[t], lim.max_table);
            goto done;
        }
    out->p = calloc(nprof ? nprof : 1, sizeof *out->p);
    if (!out->p) {
        rc = pd_err_set(err, PD_ENOMEM, "out of memory");
        goto done;
    }
    conv c = {.d = dict, .lim = &lim};
    for (size_t i = 0; i < req->n_resource_profiles; i++) {
        const Opentelemetry__Proto__Profiles__V1development__ResourceProfiles *rp = req->resource_profiles[i];
        for (size_t j = 0; j < rp->n_scope_profiles; j++) {
            for (size_t k = 0; k < rp->scope_profiles[j]->n_profiles; k++) {
                const Prof *pr = rp->scope_profiles[j]->profiles[k];
                pd_otlp_profile *o = &out->p[out->n];
                c.msg[0] = 0;
                int r2 = series_labels(&c, rp->resource, pr, &o->labels);
                if (r2 == 0) {
                    r2 = one_profile(&c, pr, &o->profile);
                    if (r2 < 0)
                        pd_labels_release(&o->labels);
                }
                if (r2 == PD_ENOMEM) {
                    rc = pd_err_set(err, PD_ENOMEM, "out of memory");
                    pd_otlp_result_release(out);
                    goto done;
                }
                if (r2 < 0) {
                    if (!out->rejected)
                        snprintf(out->first_error, sizeof out->first_error,
                                 "resource %zu scope %zu profile %zu: %s", i, j, k, c.msg);
                    out->rejected++;
                    continue;
                }
                o->time_ms = (int64_t)(pr->time_unix_nano / 1000000);
                out->n++;
            }
        }
    }
    rc = 0;
done:
    opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(req, NULL);
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
    size_t n = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__get_packed_size(&r);
    if (pd_buf_reserve(out, n) < 0)
        return PD_ENOMEM;
    opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__pack(
        &r, (uint8_t *)out->data + out->len);
    out->len += n;
    return 0;
}
