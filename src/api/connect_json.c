/*
 * api/connect_json.c — proto3's canonical JSON mapping over protobuf-c
 * descriptors (connect.h documents the rules). Reflection, not generated
 * code: a field is found by its descriptor (name, type, label, offset,
 * quantifier_offset) and read or written at those offsets.
 *
 * Decoding allocates every part of the message with malloc in the layout
 * protobuf_c_message_free_unpacked(msg, NULL) frees: strings, bytes,
 * repeated arrays and sub-messages. Scalars of proto3 (LABEL_NONE) are
 * written in place; LABEL_OPTIONAL also sets has_<field>.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "api/connect.h"

#define MAX_DEPTH 64

/* Encoder output: the first append error sticks. */
typedef struct enc {
    pd_buf *b;
    int rc;
} enc;

static void e_append(enc *e, const void *d, size_t n)
{
    if (!e->rc)
        e->rc = pd_buf_append(e->b, d, n);
}
static void e_puts(enc *e, const char *s)
{
    e_append(e, s, strlen(s));
}
static void e_putc(enc *e, char c)
{
    e_append(e, &c, 1);
}
static void e_put_json_string(enc *e, const char *s, size_t n)
{
    if (!e->rc)
        e->rc = pd_buf_put_json_string(e->b, s, n);
}
static void e_printf(enc *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void e_printf(enc *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (!e->rc)
        e->rc = pd_buf_vprintf(e->b, fmt, ap);
    va_end(ap);
}

/* ---- base64 ---- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void b64_encode(const uint8_t *in, size_t n, enc *out)
{
    char q[4];
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        q[0] = b64[(v >> 18) & 63];
        q[1] = b64[(v >> 12) & 63];
        q[2] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
        q[3] = i + 2 < n ? b64[v & 63] : '=';
        e_append(out, q, 4);
    }
}

static int b64_val(char c)
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

/* Standard or URL-safe, padding optional. 0, or -1 for a bad character. */
static int b64_decode(const char *s, size_t n, uint8_t **out, size_t *outlen)
{
    while (n && s[n - 1] == '=')
        n--;
    uint8_t *o = malloc(n / 4 * 3 + 3 + 1);
    if (!o)
        return -2;
    size_t k = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_val(s[i]);
        if (v < 0) {
            free(o);
            return -1;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            o[k++] = (uint8_t)(acc >> bits);
        }
    }
    *out = o;
    *outlen = k;
    return 0;
}

/* ---- names ---- */

/* proto name -> lowerCamelCase (protoc's json_name rule). */
static void json_name(const char *name, char *out, size_t cap)
{
    size_t k = 0;
    bool up = false;
    for (const char *p = name; *p && k + 1 < cap; p++) {
        if (*p == '_') {
            up = true;
            continue;
        }
        out[k++] = up && *p >= 'a' && *p <= 'z' ? (char)(*p - 32) : *p;
        up = false;
    }
    out[k] = 0;
}

static const ProtobufCFieldDescriptor *find_field(const ProtobufCMessageDescriptor *d,
                                                  const char *key)
{
    char jn[128];
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (strcmp(f->name, key) == 0)
            return f;
        json_name(f->name, jn, sizeof jn);
        if (strcmp(jn, key) == 0)
            return f;
    }
    return NULL;
}

/* ---- encode ---- */

static size_t elem_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_ENUM:
        return 4;
    case PROTOBUF_C_TYPE_FLOAT:
        return sizeof(float);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return 8;
    case PROTOBUF_C_TYPE_DOUBLE:
        return sizeof(double);
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
        return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(ProtobufCMessage *);
    }
    return 0;
}

static void put_double(enc *out, double v)
{
    if (isnan(v))
        e_puts(out, "\"NaN\"");
    else if (isinf(v))
        e_puts(out, v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    else
        e_printf(out, "%.17g", v);
}

static void enc_msg(const ProtobufCMessage *m, enc *out);

/* One value of field f at p. */
static void enc_value(const ProtobufCFieldDescriptor *f, const void *p, enc *out)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        e_printf(out, "%d", (int)*(const int32_t *)p);
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        e_printf(out, "%u", (unsigned)*(const uint32_t *)p);
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        e_printf(out, "\"%lld\"", (long long)*(const int64_t *)p);
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        e_printf(out, "\"%llu\"", (unsigned long long)*(const uint64_t *)p);
        break;
    case PROTOBUF_C_TYPE_FLOAT:
        put_double(out, *(const float *)p);
        break;
    case PROTOBUF_C_TYPE_DOUBLE:
        put_double(out, *(const double *)p);
        break;
    case PROTOBUF_C_TYPE_BOOL:
        e_puts(out, *(const protobuf_c_boolean *)p ? "true" : "false");
        break;
    case PROTOBUF_C_TYPE_ENUM: {
        int v = *(const int *)p;
        const ProtobufCEnumValue *ev =
            protobuf_c_enum_descriptor_get_value((const ProtobufCEnumDescriptor *)f->descriptor, v);
        if (ev)
            e_put_json_string(out, ev->name, strlen(ev->name));
        else
            e_printf(out, "%d", v);
        break;
    }
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        s = s ? s : "";
        e_put_json_string(out, s, strlen(s));
        break;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = p;
        e_putc(out, '"');
        b64_encode(b->data, b->len, out);
        e_putc(out, '"');
        break;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *sm = *(ProtobufCMessage *const *)p;
        if (sm)
            enc_msg(sm, out);
        else
            e_puts(out, "{}");
        break;
    }
    }
}

/* True when a LABEL_NONE value is proto3's default (left out). */
static bool is_default(const ProtobufCFieldDescriptor *f, const void *p)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        return !s || !*s;
    }
    case PROTOBUF_C_TYPE_BYTES:
        return ((const ProtobufCBinaryData *)p)->len == 0;
    case PROTOBUF_C_TYPE_MESSAGE:
        return *(ProtobufCMessage *const *)p == NULL;
    default: { /* by bytes, as protobuf-c decides what to pack (-0.0 is packed) */
        size_t sz = elem_size(f->type);
        static const uint8_t zero[8];
        return memcmp(p, zero, sz) == 0;
    }
    }
}

static void enc_msg(const ProtobufCMessage *m, enc *out)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    const char *base = (const char *)m;
    bool first = true;
    char jn[128];
    e_putc(out, '{');
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const void *p = base + f->offset;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            if (!n)
                continue;
            json_name(f->name, jn, sizeof jn);
            e_printf(out, "%s\"%s\":[", first ? "" : ",", jn);
            first = false;
            const char *arr = *(char *const *)p;
            size_t sz = elem_size(f->type);
            for (size_t k = 0; k < n; k++) {
                if (k)
                    e_putc(out, ',');
                enc_value(f, arr + k * sz, out);
            }
            e_putc(out, ']');
            continue;
        }
        if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset &&
            f->type != PROTOBUF_C_TYPE_MESSAGE && f->type != PROTOBUF_C_TYPE_STRING) {
            if (!*(const protobuf_c_boolean *)(base + f->quantifier_offset))
                continue;
        } else if (is_default(f, p)) {
            continue;
        }
        json_name(f->name, jn, sizeof jn);
        e_printf(out, "%s\"%s\":", first ? "" : ",", jn);
        first = false;
        enc_value(f, p, out);
    }
    e_putc(out, '}');
}

int pd_connect_json_encode(const ProtobufCMessage *msg, pd_buf *out)
{
    size_t len0 = out->len;
    enc e = {out, 0};
    enc_msg(msg, &e);
    if (e.rc < 0 && out->data) {
        out->len = len0;
        out->data[len0] = 0;
    }
    return e.rc;
}

/* ---- decode ---- */

static int dec_msg(json_t *j, const ProtobufCMessageDescriptor *d, ProtobufCMessage **out,
                   int depth, pd_err *err);

static int num_i64(json_t *v, const char *name, int64_t *o, pd_err *err)
{
    if (json_is_integer(v)) {
        *o = (int64_t)json_integer_value(v);
        return 0;
    }
    if (json_is_real(v)) {
        double x = json_real_value(v);
        if (x != floor(x) || x < -9.2e18 || x > 9.2e18)
            return pd_err_set(err, PD_EINVAL, "field %s: %g is not an integer", name, x);
        *o = (int64_t)x;
        return 0;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *e;
        errno = 0;
        long long x = strtoll(s, &e, 10);
        if (!*s || *e || errno)
            return pd_err_set(err, PD_EINVAL, "field %s: \"%.40s\" is not an integer", name, s);
        *o = x;
        return 0;
    }
    return pd_err_set(err, PD_EINVAL, "field %s: expected a number", name);
}

static int num_u64(json_t *v, const char *name, uint64_t *o, pd_err *err)
{
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *e;
        errno = 0;
        unsigned long long x = strtoull(s, &e, 10);
        if (!*s || *e || errno || *s == '-')
            return pd_err_set(err, PD_EINVAL, "field %s: \"%.40s\" is not an unsigned integer",
                              name, s);
        *o = x;
        return 0;
    }
    int64_t x;
    int rc = num_i64(v, name, &x, err);
    if (rc < 0)
        return rc;
    if (x < 0)
        return pd_err_set(err, PD_EINVAL, "field %s: negative value for an unsigned field", name);
    *o = (uint64_t)x;
    return 0;
}

static int num_double(json_t *v, const char *name, double *o, pd_err *err)
{
    if (json_is_number(v)) {
        *o = json_number_value(v);
        return 0;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (!strcmp(s, "NaN")) {
            *o = NAN;
            return 0;
        }
        if (!strcmp(s, "Infinity") || !strcmp(s, "-Infinity")) {
            *o = *s == '-' ? -INFINITY : INFINITY;
            return 0;
        }
        char *e;
        double x = strtod(s, &e);
        if (*s && !*e) {
            *o = x;
            return 0;
        }
    }
    return pd_err_set(err, PD_EINVAL, "field %s: expected a number", name);
}

/* Decodes one value of f from v into p (an element slot). */
static int dec_value(const ProtobufCFieldDescriptor *f, json_t *v, void *p, int depth, pd_err *err)
{
    int64_t i;
    uint64_t u;
    double x;
    int rc = 0;
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        if ((rc = num_i64(v, f->name, &i, err)) < 0)
            return rc;
        if (i < INT32_MIN || i > INT32_MAX)
            return pd_err_set(err, PD_EINVAL, "field %s: out of range for int32", f->name);
        *(int32_t *)p = (int32_t)i;
        return 0;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        if ((rc = num_u64(v, f->name, &u, err)) < 0)
            return rc;
        if (u > UINT32_MAX)
            return pd_err_set(err, PD_EINVAL, "field %s: out of range for uint32", f->name);
        *(uint32_t *)p = (uint32_t)u;
        return 0;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        if ((rc = num_i64(v, f->name, &i, err)) < 0)
            return rc;
        *(int64_t *)p = i;
        return 0;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        if ((rc = num_u64(v, f->name, &u, err)) < 0)
            return rc;
        *(uint64_t *)p = u;
        return 0;
    case PROTOBUF_C_TYPE_FLOAT:
        if ((rc = num_double(v, f->name, &x, err)) < 0)
            return rc;
        *(float *)p = (float)x;
        return 0;
    case PROTOBUF_C_TYPE_DOUBLE:
        if ((rc = num_double(v, f->name, &x, err)) < 0)
            return rc;
        *(double *)p = x;
        return 0;
    case PROTOBUF_C_TYPE_BOOL:
        if (!json_is_boolean(v))
            return pd_err_set(err, PD_EINVAL, "field %s: expected true or false", f->name);
        *(protobuf_c_boolean *)p = json_is_true(v);
        return 0;
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumDescriptor *ed = f->descriptor;
        if (json_is_string(v)) {
            const ProtobufCEnumValue *ev =
                protobuf_c_enum_descriptor_get_value_by_name(ed, json_string_value(v));
            if (!ev)
                return pd_err_set(err, PD_EINVAL, "field %s: unknown value \"%.60s\" of %s",
                                  f->name, json_string_value(v), ed->name);
            *(int *)p = ev->value;
            return 0;
        }
        if ((rc = num_i64(v, f->name, &i, err)) < 0)
            return rc;
        if (i < INT32_MIN || i > INT32_MAX)
            return pd_err_set(err, PD_EINVAL, "field %s: out of range", f->name);
        *(int *)p = (int)i;
        return 0;
    }
    case PROTOBUF_C_TYPE_STRING: {
        if (!json_is_string(v))
            return pd_err_set(err, PD_EINVAL, "field %s: expected a string", f->name);
        char *s = strndup(json_string_value(v), json_string_length(v));
        if (!s)
            return PD_ENOMEM;
        *(char **)p = s;
        return 0;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        if (!json_is_string(v))
            return pd_err_set(err, PD_EINVAL, "field %s: expected a base64 string", f->name);
        ProtobufCBinaryData *b = p;
        uint8_t *data;
        size_t n;
        int r = b64_decode(json_string_value(v), json_string_length(v), &data, &n);
        if (r == -2)
            return PD_ENOMEM;
        if (r < 0)
            return pd_err_set(err, PD_EINVAL, "field %s: not base64", f->name);
        b->data = data;
        b->len = n;
        return 0;
    }
    case PROTOBUF_C_TYPE_MESSAGE:
        return dec_msg(v, f->descriptor, (ProtobufCMessage **)p, depth + 1, err);
    }
    return pd_err_set(err, PD_EINVAL, "field %s: unsupported type", f->name);
}

static int dec_msg(json_t *j, const ProtobufCMessageDescriptor *d, ProtobufCMessage **out,
                   int depth, pd_err *err)
{
    if (depth > MAX_DEPTH)
        return pd_err_set(err, PD_EINVAL, "JSON nested deeper than %d", MAX_DEPTH);
    if (!json_is_object(j))
        return pd_err_set(err, PD_EINVAL, "expected a JSON object for %s", d->name);
    ProtobufCMessage *m = malloc(d->sizeof_message);
    if (!m)
        return PD_ENOMEM;
    d->message_init(m);
    *out = m; /* freed by the caller's free_unpacked on error too */
    char *base = (char *)m;
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v)
    {
        const ProtobufCFieldDescriptor *f = find_field(d, key);
        if (!f)
            return pd_err_set(err, PD_EINVAL, "unknown field \"%.60s\" in %s", key, d->name);
        if (json_is_null(v))
            continue;
        void *p = base + f->offset;
        int rc;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            if (!json_is_array(v))
                return pd_err_set(err, PD_EINVAL, "field %s: expected an array", f->name);
            size_t *np = (size_t *)(base + f->quantifier_offset);
            if (*np)
                return pd_err_set(err, PD_EINVAL, "field %s given twice", f->name);
            size_t n = json_array_size(v), sz = elem_size(f->type);
            if (!n)
                continue;
            char *arr = calloc(n, sz);
            if (!arr)
                return PD_ENOMEM;
            *(char **)p = arr;
            *np = n; /* zeroed slots: free_unpacked frees what is filled */
            for (size_t k = 0; k < n; k++)
                if ((rc = dec_value(f, json_array_get(v, k), arr + k * sz, depth, err)) < 0)
                    return rc;
            continue;
        }
        /* a field given twice (proto and JSON name): keep the first */
        if (f->type == PROTOBUF_C_TYPE_MESSAGE && *(ProtobufCMessage **)p)
            return pd_err_set(err, PD_EINVAL, "field %s given twice", f->name);
        if (f->type == PROTOBUF_C_TYPE_STRING) {
            char *old = *(char **)p;
            if (old && old != (char *)protobuf_c_empty_string && old != f->default_value)
                return pd_err_set(err, PD_EINVAL, "field %s given twice", f->name);
        }
        if (f->type == PROTOBUF_C_TYPE_BYTES && ((ProtobufCBinaryData *)p)->data)
            return pd_err_set(err, PD_EINVAL, "field %s given twice", f->name);
        if ((rc = dec_value(f, v, p, depth, err)) < 0)
            return rc;
        if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset &&
            f->type != PROTOBUF_C_TYPE_MESSAGE && f->type != PROTOBUF_C_TYPE_STRING)
            *(protobuf_c_boolean *)(base + f->quantifier_offset) = 1;
    }
    return 0;
}

int pd_connect_json_decode(const char *text, size_t len, const ProtobufCMessageDescriptor *d,
                           ProtobufCMessage **out, pd_err *err)
{
    json_error_t je;
    *out = NULL;
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        return pd_err_set(err, PD_EPARSE, "bad JSON at line %d column %d: %s", je.line, je.column,
                          je.text);
    ProtobufCMessage *m = NULL;
    int rc = dec_msg(j, d, &m, 0, err);
    json_decref(j);
    if (rc < 0) {
        if (rc == PD_ENOMEM)
            pd_err_set(err, PD_ENOMEM, "out of memory decoding JSON");
        if (m)
            protobuf_c_message_free_unpacked(m, NULL);
        return rc;
    }
    *out = m;
    return 0;
}

/* ---- both codecs ---- */

int pd_connect_unpack(pd_connect_codec codec, const uint8_t *body, size_t len,
                      const ProtobufCMessageDescriptor *d, ProtobufCMessage **out, pd_err *err)
{
    *out = NULL;
    if (codec == PD_CONNECT_JSON) {
        if (len == 0) /* an empty body is the empty message */
            return pd_connect_json_decode("{}", 2, d, out, err);
        return pd_connect_json_decode((const char *)body, len, d, out, err);
    }
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, body);
    if (!m)
        return pd_err_set(err, PD_EPARSE,
                          "request body is not a valid %s protobuf message (%zu bytes)", d->name,
                          len);
    *out = m;
    return 0;
}
