/*
 * pprof/encode.c — the protobuf wire encoder for perftools.profiles.Profile.
 *
 * Output layout follows Go's runtime/pprof and google/pprof encoders:
 * sample_type, sample, mapping, location, function, string_table, then the
 * scalars (drop/keep frames, time, duration, period_type, period), comment,
 * default_sample_type, doc_url. Repeated scalars (location_id, value,
 * comment) are packed; scalar fields equal to 0 are omitted (proto3);
 * period_type is omitted when both its strings are index 0. Every string of
 * the table is written, including string_table[0] = "". Ids are written as
 * they are: decode → encode keeps ids and string indexes.
 *
 * A sub-message is encoded into a scratch buffer first so its length can be
 * written before it (two scratch levels: sample/location, label/line).
 * Errors are sticky: the first one is kept and later writes are skipped.
 */
#include "pprof/pprof_int.h"

#include "base/varint.h"

typedef struct enc {
    int rc;
} enc;

static size_t varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static void put_raw(enc *e, pd_buf *b, const void *data, size_t len)
{
    if (!e->rc)
        e->rc = pd_buf_append(b, data, len);
}

static void put_varint(enc *e, pd_buf *b, uint64_t v)
{
    if (!e->rc)
        e->rc = pd_buf_put_varint(b, v);
}

static void put_tag(enc *e, pd_buf *b, uint32_t field, int wt)
{
    put_varint(e, b, (uint64_t)field << 3 | (uint64_t)wt);
}

/* A varint field, omitted when 0 (proto3 default). */
static void put_u64(enc *e, pd_buf *b, uint32_t field, uint64_t v)
{
    if (!v)
        return;
    put_tag(e, b, field, WT_VARINT);
    put_varint(e, b, v);
}

static void put_bytes(enc *e, pd_buf *b, uint32_t field, const void *data, size_t len)
{
    put_tag(e, b, field, WT_LEN);
    put_varint(e, b, len);
    put_raw(e, b, data, len);
}

static void put_packed(enc *e, pd_buf *b, uint32_t field, const uint64_t *v, size_t n)
{
    if (!n)
        return;
    size_t sz = 0;
    for (size_t i = 0; i < n; i++)
        sz += varint_size(v[i]);
    put_tag(e, b, field, WT_LEN);
    put_varint(e, b, sz);
    for (size_t i = 0; i < n; i++)
        put_varint(e, b, v[i]);
}

static void put_value_type(enc *e, pd_buf *b, pd_buf *tmp, uint32_t field,
                           const pd_pprof_value_type *vt)
{
    pd_buf_reset(tmp);
    put_u64(e, tmp, 1, (uint64_t)vt->type);
    put_u64(e, tmp, 2, (uint64_t)vt->unit);
    if (!e->rc)
        put_bytes(e, b, field, tmp->data, tmp->len);
}

static int encode_raw(const pd_profile *p, pd_buf *out)
{
    enc e = {0};
    pd_buf m, sub;
    pd_buf_init(&m, 0);
    pd_buf_init(&sub, 0);

    for (size_t i = 0; i < p->n_sample_type; i++)
        put_value_type(&e, out, &m, PF_SAMPLE_TYPE, &p->sample_type[i]);

    for (size_t i = 0; i < p->n_sample && !e.rc; i++) {
        const pd_pprof_sample *s = &p->sample[i];
        pd_buf_reset(&m);
        put_packed(&e, &m, 1, s->location_id, s->n_location);
        put_packed(&e, &m, 2, (const uint64_t *)s->value, s->n_value);
        for (size_t j = 0; j < s->n_label; j++) {
            const pd_pprof_label *l = &s->label[j];
            pd_buf_reset(&sub);
            put_u64(&e, &sub, 1, (uint64_t)l->key);
            put_u64(&e, &sub, 2, (uint64_t)l->str);
            put_u64(&e, &sub, 3, (uint64_t)l->num);
            put_u64(&e, &sub, 4, (uint64_t)l->num_unit);
            if (!e.rc)
                put_bytes(&e, &m, 3, sub.data, sub.len);
        }
        if (!e.rc)
            put_bytes(&e, out, PF_SAMPLE, m.data, m.len);
    }

    for (size_t i = 0; i < p->n_mapping && !e.rc; i++) {
        const pd_pprof_mapping *mp = &p->mapping[i];
        pd_buf_reset(&m);
        put_u64(&e, &m, 1, mp->id);
        put_u64(&e, &m, 2, mp->memory_start);
        put_u64(&e, &m, 3, mp->memory_limit);
        put_u64(&e, &m, 4, mp->file_offset);
        put_u64(&e, &m, 5, (uint64_t)mp->filename);
        put_u64(&e, &m, 6, (uint64_t)mp->build_id);
        put_u64(&e, &m, 7, mp->has_functions);
        put_u64(&e, &m, 8, mp->has_filenames);
        put_u64(&e, &m, 9, mp->has_line_numbers);
        put_u64(&e, &m, 10, mp->has_inline_frames);
        if (!e.rc)
            put_bytes(&e, out, PF_MAPPING, m.data, m.len);
    }

    for (size_t i = 0; i < p->n_location && !e.rc; i++) {
        const pd_pprof_location *l = &p->location[i];
        pd_buf_reset(&m);
        put_u64(&e, &m, 1, l->id);
        put_u64(&e, &m, 2, l->mapping_id);
        put_u64(&e, &m, 3, l->address);
        for (size_t j = 0; j < l->n_line; j++) {
            pd_buf_reset(&sub);
            put_u64(&e, &sub, 1, l->line[j].function_id);
            put_u64(&e, &sub, 2, (uint64_t)l->line[j].line);
            put_u64(&e, &sub, 3, (uint64_t)l->line[j].column);
            if (!e.rc)
                put_bytes(&e, &m, 4, sub.data, sub.len);
        }
        put_u64(&e, &m, 5, l->is_folded);
        if (!e.rc)
            put_bytes(&e, out, PF_LOCATION, m.data, m.len);
    }

    for (size_t i = 0; i < p->n_function && !e.rc; i++) {
        const pd_pprof_function *f = &p->function[i];
        pd_buf_reset(&m);
        put_u64(&e, &m, 1, f->id);
        put_u64(&e, &m, 2, (uint64_t)f->name);
        put_u64(&e, &m, 3, (uint64_t)f->system_name);
        put_u64(&e, &m, 4, (uint64_t)f->filename);
        put_u64(&e, &m, 5, (uint64_t)f->start_line);
        if (!e.rc)
            put_bytes(&e, out, PF_FUNCTION, m.data, m.len);
    }

    for (size_t i = 0; i < p->n_string && !e.rc; i++)
        put_bytes(&e, out, PF_STRING_TABLE, p->string_table[i], p->string_len[i]);

    put_u64(&e, out, PF_DROP_FRAMES, (uint64_t)p->drop_frames);
    put_u64(&e, out, PF_KEEP_FRAMES, (uint64_t)p->keep_frames);
    put_u64(&e, out, PF_TIME_NANOS, (uint64_t)p->time_nanos);
    put_u64(&e, out, PF_DURATION_NANOS, (uint64_t)p->duration_nanos);
    if (p->period_type.type || p->period_type.unit)
        put_value_type(&e, out, &m, PF_PERIOD_TYPE, &p->period_type);
    put_u64(&e, out, PF_PERIOD, (uint64_t)p->period);
    put_packed(&e, out, PF_COMMENT, (const uint64_t *)p->comment, p->n_comment);
    put_u64(&e, out, PF_DEFAULT_SAMPLE_TYPE, (uint64_t)p->default_sample_type);
    put_u64(&e, out, PF_DOC_URL, (uint64_t)p->doc_url);

    pd_buf_release(&m);
    pd_buf_release(&sub);
    return e.rc;
}

int pd_profile_encode(const pd_profile *p, bool gzip, pd_buf *out)
{
    size_t start = out->len;
    int rc;
    if (!gzip) {
        rc = encode_raw(p, out);
    } else {
        pd_buf raw;
        pd_buf_init(&raw, 0);
        rc = encode_raw(p, &raw);
        if (!rc)
            rc = pd_gzip((const uint8_t *)raw.data, raw.len, out);
        pd_buf_release(&raw);
    }
    if (rc && out->data) {
        out->len = start;
        out->data[start] = '\0';
    }
    return rc;
}
