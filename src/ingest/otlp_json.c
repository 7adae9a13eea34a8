/*
 * ingest/otlp_json.c — OTLP/JSON into the binary protobuf of the same
 * message, so one converter (otlp.c, with its checks) serves both.
 *
 * OTLP/JSON (the OTLP spec's "JSON Protobuf Encoding"): field names in
 * lowerCamelCase (the proto's snake_case names are accepted too), 64-bit
 * integers as decimal strings or numbers, enums as integers, bytes as
 * base64 — except trace_id/span_id, which are hex. Unknown fields are
 * ignored, as the spec asks of receivers. The message is built generically
 * from protobuf-c's descriptors and packed.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/otlp.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

typedef struct jctx {
    size_t max_depth;
    size_t fields; /* fields set, against JSON far larger than the cap allows */
    pd_err *err;
} jctx;

/* key equals the snake_case name, or its lowerCamelCase form. */
static bool name_is(const char *snake, const char *key)
{
    if (!strcmp(snake, key))
        return true;
    const char *s = snake, *k = key;
    while (*s && *k) {
        if (*s == '_' && s[1]) {
            char up = (char)(s[1] >= 'a' && s[1] <= 'z' ? s[1] - 32 : s[1]);
            if (*k != up)
                return false;
            s += 2;
            k++;
            continue;
        }
        if (*s != *k)
            return false;
        s++;
        k++;
    }
    return !*s && !*k;
}

static int get_i64(const json_t *v, int64_t *out)
{
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return 0;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *e;
        errno = 0;
        long long x = strtoll(s, &e, 10);
        if (!*s || *e || errno)
            return -1;
        *out = x;
        return 0;
    }
    return -1;
}

static int get_u64(const json_t *v, uint64_t *out)
{
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0)
            return -1;
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *e;
        errno = 0;
        if (*s == '-')
            return -1;
        unsigned long long x = strtoull(s, &e, 10);
        if (!*s || *e || errno)
            return -1;
        *out = x;
        return 0;
    }
    return -1;
}

static int b64val(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

static int decode_bytes(const char *s, bool hex, ProtobufCBinaryData *out)
{
    size_t n = strlen(s);
    uint8_t *d = malloc(n + 1);
    if (!d)
        return PD_ENOMEM;
    size_t o = 0;
    if (hex) {
        if (n % 2) {
            free(d);
            return -1;
        }
        for (size_t i = 0; i < n; i += 2) {
            int hi = s[i] >= 'a' ? s[i] - 'a' + 10 : s[i] >= 'A' ? s[i] - 'A' + 10 : s[i] - '0';
            int lo = s[i + 1] >= 'a'   ? s[i + 1] - 'a' + 10
                     : s[i + 1] >= 'A' ? s[i + 1] - 'A' + 10
                                       : s[i + 1] - '0';
            if (hi < 0 || hi > 15 || lo < 0 || lo > 15) {
                free(d);
                return -1;
            }
            d[o++] = (uint8_t)(hi << 4 | lo);
        }
    } else {
        uint32_t acc = 0;
        int bits = 0;
        for (size_t i = 0; i < n; i++) {
            if (s[i] == '=')
                break;
            int v = b64val(s[i]);
            if (v < 0) {
                free(d);
                return -1;
            }
            acc = acc << 6 | (uint32_t)v;
            bits += 6;
            if (bits >= 8) {
                bits -= 8;
                d[o++] = (uint8_t)(acc >> bits);
            }
        }
    }
    out->data = d;
    out->len = o;
    return 0;
}

static int fill(jctx *c, const ProtobufCMessageDescriptor *d, const json_t *obj, size_t depth,
                ProtobufCMessage **out);

/* One value of field f from v into the slot at p. */
static int set_one(jctx *c, const ProtobufCFieldDescriptor *f, const json_t *v, void *p,
                   size_t depth)
{
    int64_t i;
    uint64_t u;
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_ENUM:
        if (get_i64(v, &i) < 0 || i < INT32_MIN || i > INT32_MAX)
            return -1;
        *(int32_t *)p = (int32_t)i;
        return 0;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        if (get_u64(v, &u) < 0 || u > UINT32_MAX)
            return -1;
        *(uint32_t *)p = (uint32_t)u;
        return 0;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        if (get_i64(v, &i) < 0)
            return -1;
        *(int64_t *)p = i;
        return 0;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        if (get_u64(v, &u) < 0)
            return -1;
        *(uint64_t *)p = u;
        return 0;
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE: {
        double x;
        if (json_is_number(v))
            x = json_number_value(v);
        else
            return -1;
        if (f->type == PROTOBUF_C_TYPE_FLOAT)
            *(float *)p = (float)x;
        else
            *(double *)p = x;
        return 0;
    }
    case PROTOBUF_C_TYPE_BOOL:
        if (!json_is_boolean(v))
            return -1;
        *(protobuf_c_boolean *)p = json_is_true(v);
        return 0;
    case PROTOBUF_C_TYPE_STRING: {
        if (!json_is_string(v))
            return -1;
        char *s = strndup(json_string_value(v), json_string_length(v));
        if (!s)
            return PD_ENOMEM;
        *(char **)p = s;
        return 0;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        if (!json_is_string(v))
            return -1;
        bool hex = !strcmp(f->name, "trace_id") || !strcmp(f->name, "span_id");
        return decode_bytes(json_string_value(v), hex, (ProtobufCBinaryData *)p);
    }
    case PROTOBUF_C_TYPE_MESSAGE:
        if (!json_is_object(v))
            return -1;
        return fill(c, f->descriptor, v, depth + 1, (ProtobufCMessage **)p);
    default:
        return -1;
    }
}

static size_t slot_size(const ProtobufCFieldDescriptor *f)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    default:
        return 4;
    }
}

static int fill(jctx *c, const ProtobufCMessageDescriptor *d, const json_t *obj, size_t depth,
                ProtobufCMessage **out)
{
    if (depth > c->max_depth)
        return pd_err_set(c->err, PD_ETOOBIG, "JSON messages nest deeper than %zu", c->max_depth);
    ProtobufCMessage *m = calloc(1, d->sizeof_message);
    if (!m)
        return pd_err_set(c->err, PD_ENOMEM, "out of memory");
    d->message_init(m);
    *out = m;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        const ProtobufCFieldDescriptor *f = NULL;
        for (unsigned i = 0; i < d->n_fields && !f; i++)
            if (name_is(d->fields[i].name, key))
                f = &d->fields[i];
        if (!f || json_is_null(v))
            continue; /* unknown fields are ignored */
        if (++c->fields > 50000000)
            return pd_err_set(c->err, PD_ETOOBIG, "more than 50,000,000 JSON fields");
        char *base = (char *)m;
        int rc;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            if (!json_is_array(v))
                return pd_err_set(c->err, PD_EPARSE, "%s.%s: want an array", d->short_name, key);
            size_t n = json_array_size(v), sz = slot_size(f);
            void **arr = (void **)(base + f->offset);
            size_t *cnt = (size_t *)(base + f->quantifier_offset);
            if (*arr || n == 0)
                continue; /* a repeated key: the first wins */
            *arr = calloc(n, sz);
            if (!*arr)
                return pd_err_set(c->err, PD_ENOMEM, "out of memory");
            for (size_t i = 0; i < n; i++) {
                rc = set_one(c, f, json_array_get(v, i), (char *)*arr + i * sz, depth);
                if (rc == 0) {
                    *cnt = i + 1;
                    continue;
                }
                if (rc == -1)
                    return pd_err_set(c->err, PD_EPARSE, "%s.%s[%zu]: not a valid %s value",
                                      d->short_name, key, i,
                                      f->type == PROTOBUF_C_TYPE_MESSAGE ? "message" : "scalar");
                /* sub-message errors: count what was made so it is freed */
                if (f->type == PROTOBUF_C_TYPE_MESSAGE && ((void **)*arr)[i])
                    *cnt = i + 1;
                return rc;
            }
        } else {
            if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
                uint32_t *q = (uint32_t *)(base + f->quantifier_offset);
                if (*q)
                    continue; /* a second member of the oneof: ignored */
                *q = f->id;
            } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset) {
                *(protobuf_c_boolean *)(base + f->quantifier_offset) = 1;
            }
            void *slot = base + f->offset;
            /* the same field twice (e.g. "spanId" and "span_id"): the first wins */
            if ((f->type == PROTOBUF_C_TYPE_MESSAGE && *(void **)slot) ||
                (f->type == PROTOBUF_C_TYPE_BYTES && ((ProtobufCBinaryData *)slot)->data) ||
                (f->type == PROTOBUF_C_TYPE_STRING && *(char **)slot &&
                 *(char **)slot != f->default_value))
                continue;
            if (f->type == PROTOBUF_C_TYPE_STRING)
                *(char **)slot = NULL;
            rc = set_one(c, f, v, slot, depth);
            if (rc == -1) {
                if (f->type == PROTOBUF_C_TYPE_STRING)
                    *(char **)slot = (char *)f->default_value;
                return pd_err_set(c->err, PD_EPARSE, "%s.%s: not a valid value", d->short_name,
                                  key);
            }
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

int pd_otlp_json_to_protobuf(const char *json, size_t len, size_t max_depth, pd_buf *out,
                             pd_err *err)
{
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);
    if (!root)
        return pd_err_set(err, PD_EPARSE, "not JSON: %s at line %d column %d", je.text, je.line,
                          je.column);
    if (!json_is_object(root)) {
        json_decref(root);
        return pd_err_set(err, PD_EPARSE, "not a JSON ExportProfilesServiceRequest object");
    }
    jctx c = {.max_depth = max_depth ? max_depth : 16, .err = err};
    ProtobufCMessage *m = NULL;
    int rc = fill(
        &c,
        &opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor,
        root, 0, &m);
    json_decref(root);
    if (rc == 0) {
        size_t n = protobuf_c_message_get_packed_size(m);
        if ((rc = pd_buf_reserve(out, n)) < 0) {
            rc = pd_err_set(err, rc, "the request as protobuf: %zu bytes: %s", n, pd_strerror(rc));
        } else {
            protobuf_c_message_pack(m, (uint8_t *)out->data + out->len);
            out->len += n;
        }
    }
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

int pd_otlp_json_response(int64_t rejected, const char *msg, pd_buf *out)
{
    if (!rejected && !(msg && *msg))
        return pd_buf_puts(out, "{}");
    int rc = pd_buf_printf(
        out,
        "{\"partialSuccess\":{\"rejectedProfiles\":\"%" PRId64 "\",\"errorMessage\":", rejected);
    if (rc == 0)
        rc = pd_buf_put_json_string(out, msg ? msg : "", msg ? strlen(msg) : 0);
    if (rc == 0)
        rc = pd_buf_puts(out, "}}");
    return rc;
}
