/*
 * ingest/jfr.c — JFR recordings into pprof (see jfr.h for the format and
 * the mapping). One pass per chunk: the header, the metadata event (class
 * and field descriptors), the constant-pool chain (only indexed: entry id ->
 * offset of its value, decoded on demand), then the events in order.
 * Values are decoded generically from the metadata, so fields the JDK or
 * async-profiler add are skipped as their descriptors say.
 */
#include "ingest/jfr.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/u64map.h"

#define HEADER_BYTES 68

enum prim {
    P_NONE = 0,
    P_BOOL,
    P_BYTE,
    P_CHAR,
    P_SHORT,
    P_INT,
    P_LONG,
    P_FLOAT,
    P_DOUBLE,
    P_STRING
};

enum ev {
    EV_NONE = 0,
    EV_CPU,
    EV_WALL,
    EV_TLAB,
    EV_OUTSIDE,
    EV_ASAMPLE,
    EV_LOCK,
    EV_PARK,
    EV_LIVE
};

typedef struct jfield {
    const char *name;
    int64_t cls_id;
    uint32_t cls; /* index into classes, resolved after the metadata */
    bool cp, array;
} jfield;

typedef struct jclass {
    int64_t id;
    const char *name;
    uint8_t prim;
    uint8_t ev;
    bool has_pool;
    uint32_t f0, nf;
    pd_u64map pool; /* entry id -> offset in the chunk */
} jclass;

typedef struct jval {
    int64_t i;     /* integer value, pool id, array length */
    size_t pos;    /* where the value starts (arrays: after the count) */
    const char *s; /* strings (NUL-terminated, arena or "") */
} jval;

typedef struct jframe {
    const char *name;
    int64_t line;
} jframe;

typedef struct jstack {
    uint32_t n;
    jframe *f;
    uint64_t *locs[PD_JFR_N_KINDS];
} jstack;

typedef struct jctx {
    const uint8_t *c; /* chunk start */
    size_t len;       /* chunk size */
    size_t base;      /* offset of the chunk in the input */
    size_t chunk_no;  /* 1-based */
    bool compressed;
    int64_t tps, start_ticks, start_nanos;
    pd_arena arena; /* per chunk */
    jclass *cls;
    size_t n_cls;
    jfield *fld;
    size_t n_fld;
    pd_u64map cls_by_id;
    size_t n_pool;
    pd_u64map stacks; /* stack trace id -> index into st */
    jstack *st;
    size_t n_st, cap_st;
    pd_u64map methods; /* method id -> index into names */
    const char **names;
    size_t n_names, cap_names;
    uint32_t k_string, k_stack, k_frame, k_method, k_class, k_symbol;
    /* all chunks */
    const pd_jfr_limits *lim;
    const pd_jfr_opts *opts;
    pd_profile_builder *b[PD_JFR_N_KINDS];
    size_t n_events;
    uint64_t steps, max_steps;   /* values decoded, against nesting blow-ups */
    uint64_t copied, max_copied; /* string bytes copied, against re-reading one huge string */
    int64_t t_min, t_max;        /* nanos */
    pd_err *err;
} jctx;

#define NOCLS UINT32_MAX

pd_jfr_limits pd_jfr_limits_default(void)
{
    pd_jfr_limits l;
    memset(&l, 0, sizeof l);
    l.max_input_bytes = (size_t)512 << 20;
    l.max_chunks = 4096;
    l.max_classes = 100000;
    l.max_fields = 1000000;
    l.max_meta_strings = 1000000;
    l.max_pool_entries = 20000000;
    l.max_events = 50000000;
    l.max_depth = 32;
    l.max_stack_depth = 4096;
    l.pprof = pd_pprof_limits_default();
    return l;
}

static const char *const KIND_NAMES[PD_JFR_N_KINDS] = {
    "cpu",   "wall", "alloc_in_new_tlab", "alloc_outside_tlab", "alloc_sample", "mutex",
    "block", "live",
};

const char *pd_jfr_kind_name(pd_jfr_kind k)
{
    return (unsigned)k < PD_JFR_N_KINDS ? KIND_NAMES[k] : "unknown";
}

bool pd_jfr_is_jfr(const uint8_t *data, size_t len)
{
    return len >= 4 && !memcmp(data, "FLR\0", 4);
}

void pd_jfr_result_release(pd_jfr_result *r)
{
    for (int k = 0; k < PD_JFR_N_KINDS; k++)
        if (r->have[k])
            pd_profile_release(&r->profile[k]);
    memset(r, 0, sizeof *r);
}

/* ---- errors and primitive reads ---- */

static int bad(jctx *x, size_t pos, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int bad(jctx *x, size_t pos, int code, const char *fmt, ...)
{
    char m[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    return pd_err_set(x->err, code, "chunk %zu at offset %zu: %s", x->chunk_no, x->base + pos, m);
}

static uint64_t be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* A compressed (or, without the feature, fixed nfix-byte) integer at *pos < end. */
static int rd_int(jctx *x, size_t *pos, size_t end, int nfix, uint64_t *v)
{
    size_t p = *pos;
    if (!x->compressed) {
        if (end - p < (size_t)nfix)
            return bad(x, p, PD_EPARSE, "integer runs past the end of its event");
        *v = be(x->c + p, nfix);
        *pos = p + (size_t)nfix;
        return 0;
    }
    uint64_t r = 0;
    for (int i = 0; i < 9; i++) {
        if (p >= end)
            return bad(x, *pos, PD_EPARSE, "integer runs past the end of its event");
        uint8_t b = x->c[p++];
        if (i == 8) {
            r |= (uint64_t)b << 56;
            break;
        }
        r |= (uint64_t)(b & 0x7f) << (7 * i);
        if (b < 0x80)
            break;
    }
    *v = r;
    *pos = p;
    return 0;
}

static int rd_u8(jctx *x, size_t *pos, size_t end, uint8_t *v)
{
    if (*pos >= end)
        return bad(x, *pos, PD_EPARSE, "byte runs past the end of its event");
    *v = x->c[(*pos)++];
    return 0;
}

/* A count (array length, string length) that must fit in what is left when
 * each element takes at least `min` bytes. */
static int rd_count(jctx *x, size_t *pos, size_t end, size_t min, const char *what, size_t *n)
{
    size_t at = *pos;
    uint64_t v;
    int rc = rd_int(x, pos, end, 4, &v);
    if (rc < 0)
        return rc;
    if (!x->compressed)
        v = (uint32_t)v;
    if (min && v > (end - *pos) / min)
        return bad(x, at, PD_EPARSE, "%s count %llu is more than the %zu bytes left can hold", what,
                   (unsigned long long)v, end - *pos);
    *n = (size_t)v;
    return 0;
}

static int lookup_pool(jctx *x, uint32_t k, int64_t id, size_t *off)
{
    uint64_t v;
    if (k == NOCLS || !x->cls[k].has_pool || !pd_u64map_get(&x->cls[k].pool, (uint64_t)id + 1, &v))
        return -1;
    *off = (size_t)v;
    return 0;
}

static int rd_value(jctx *x, size_t *pos, size_t end, uint32_t k, bool cp, bool array, size_t depth,
                    jval *out);

/* A tagged string into out->s (arena copy; "" for null/empty). */
static int rd_string(jctx *x, size_t *pos, size_t end, size_t depth, jval *out)
{
    uint8_t tag = 0;
    size_t at = *pos, n;
    int rc = rd_u8(x, pos, end, &tag);
    out->s = "";
    if (rc < 0)
        return rc;
    switch (tag) {
    case 0:
    case 1:
        return 0;
    case 2: {
        uint64_t id;
        size_t off;
        if ((rc = rd_int(x, pos, end, 8, &id)) < 0)
            return rc;
        if (depth > x->lim->max_depth)
            return bad(x, at, PD_ETOOBIG, "string references nest deeper than %zu",
                       x->lim->max_depth);
        if (lookup_pool(x, x->k_string, (int64_t)id, &off) < 0)
            return bad(x, at, PD_EPARSE, "string pool id %llu not found", (unsigned long long)id);
        jval v;
        if ((rc = rd_string(x, &off, x->len, depth + 1, &v)) < 0)
            return rc;
        out->s = v.s;
        return 0;
    }
    case 3:
    case 5:
        if ((rc = rd_count(x, pos, end, 1, "string byte", &n)) < 0)
            return rc;
        if ((x->copied += n) > x->max_copied)
            return bad(x, at, PD_ETOOBIG, "more than %llu bytes of strings decoded",
                       (unsigned long long)x->max_copied);
        if (!(out->s = pd_arena_strndup(&x->arena, (const char *)x->c + *pos, n)))
            return pd_err_set(x->err, PD_ENOMEM, "out of memory");
        *pos += n;
        return 0;
    case 4: {
        if ((rc = rd_count(x, pos, end, 1, "string char", &n)) < 0)
            return rc;
        if ((x->copied += n * 4) > x->max_copied)
            return bad(x, at, PD_ETOOBIG, "more than %llu bytes of strings decoded",
                       (unsigned long long)x->max_copied);
        char *s = pd_arena_alloc(&x->arena, n * 4 + 1);
        if (!s)
            return pd_err_set(x->err, PD_ENOMEM, "out of memory");
        size_t o = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t c;
            if ((rc = rd_int(x, pos, end, 2, &c)) < 0)
                return rc;
            c &= 0xffff;
            if (c < 0x80) {
                s[o++] = (char)c;
            } else if (c < 0x800) {
                s[o++] = (char)(0xc0 | c >> 6);
                s[o++] = (char)(0x80 | (c & 0x3f));
            } else {
                s[o++] = (char)(0xe0 | c >> 12);
                s[o++] = (char)(0x80 | (c >> 6 & 0x3f));
                s[o++] = (char)(0x80 | (c & 0x3f));
            }
        }
        s[o] = 0;
        out->s = s;
        return 0;
    }
    default:
        return bad(x, at, PD_EPARSE, "unknown string encoding %u", tag);
    }
}

/* Reads (or skips) one value of class k; integers, ids and array lengths
 * land in out->i, strings in out->s. */
static int rd_value(jctx *x, size_t *pos, size_t end, uint32_t k, bool cp, bool array, size_t depth,
                    jval *out)
{
    int rc;
    uint64_t v;
    out->i = 0;
    out->s = "";
    if (depth > x->lim->max_depth)
        return bad(x, *pos, PD_ETOOBIG, "values nest deeper than %zu", x->lim->max_depth);
    /* classes whose fields are classes without fields read no bytes: a
     * tree of them would take exponential time without this budget */
    if (++x->steps > x->max_steps)
        return bad(x, *pos, PD_ETOOBIG, "more than %llu values decoded (metadata nesting blow-up?)",
                   (unsigned long long)x->max_steps);
    if (array) {
        size_t n;
        if ((rc = rd_count(x, pos, end, 1, "array element", &n)) < 0)
            return rc;
        out->pos = *pos;
        for (size_t i = 0; i < n; i++) {
            jval e;
            if ((rc = rd_value(x, pos, end, k, cp, false, depth + 1, &e)) < 0)
                return rc;
        }
        out->i = (int64_t)n;
        return 0;
    }
    out->pos = *pos;
    if (cp) {
        if ((rc = rd_int(x, pos, end, 8, &v)) < 0)
            return rc;
        out->i = (int64_t)v;
        return 0;
    }
    const jclass *c = &x->cls[k];
    switch (c->prim) {
    case P_BOOL:
    case P_BYTE: {
        uint8_t b = 0;
        if ((rc = rd_u8(x, pos, end, &b)) < 0)
            return rc;
        out->i = c->prim == P_BYTE ? (int8_t)b : b;
        return 0;
    }
    case P_CHAR:
    case P_SHORT:
        if ((rc = rd_int(x, pos, end, 2, &v)) < 0)
            return rc;
        out->i = c->prim == P_SHORT ? (int16_t)v : (int64_t)(uint16_t)v;
        return 0;
    case P_INT:
        if ((rc = rd_int(x, pos, end, 4, &v)) < 0)
            return rc;
        out->i = (int32_t)v;
        return 0;
    case P_LONG:
        if ((rc = rd_int(x, pos, end, 8, &v)) < 0)
            return rc;
        out->i = (int64_t)v;
        return 0;
    case P_FLOAT:
    case P_DOUBLE: {
        size_t n = c->prim == P_FLOAT ? 4 : 8;
        if (end - *pos < n)
            return bad(x, *pos, PD_EPARSE, "floating-point value runs past the end of its event");
        *pos += n;
        return 0;
    }
    case P_STRING:
        return rd_string(x, pos, end, depth, out);
    default:
        for (uint32_t f = c->f0; f < c->f0 + c->nf; f++) {
            const jfield *fd = &x->fld[f];
            jval ign;
            if ((rc = rd_value(x, pos, end, fd->cls, fd->cp, fd->array, depth + 1, &ign)) < 0)
                return rc;
        }
        return 0;
    }
}

/* Reads a compound value of class k at *pos, keeping the fields named in
 * names[0..n) in vals (untouched when absent: callers preset them). */
static int rd_fields(jctx *x, size_t *pos, size_t end, uint32_t k, const char *const *names,
                     size_t n, jval *vals)
{
    const jclass *c = &x->cls[k];
    for (uint32_t f = c->f0; f < c->f0 + c->nf; f++) {
        const jfield *fd = &x->fld[f];
        jval v;
        int rc = rd_value(x, pos, end, fd->cls, fd->cp, fd->array, 1, &v);
        if (rc < 0)
            return rc;
        for (size_t i = 0; i < n; i++)
            if (!strcmp(fd->name, names[i]))
                vals[i] = v;
    }
    return 0;
}

/* ---- metadata ---- */

typedef struct mstr {
    const char **s;
    size_t n;
} mstr;

static const char *ms(const mstr *t, uint64_t i)
{
    return i < t->n ? t->s[i] : NULL;
}

static int add_class(jctx *x, size_t at)
{
    if (x->n_cls >= x->lim->max_classes)
        return bad(x, at, PD_ETOOBIG, "more than %zu metadata classes", x->lim->max_classes);
    if (x->n_cls % 256 == 0) {
        jclass *n = realloc(x->cls, (x->n_cls + 256) * sizeof *n);
        if (!n)
            return pd_err_set(x->err, PD_ENOMEM, "out of memory");
        x->cls = n;
    }
    memset(&x->cls[x->n_cls], 0, sizeof x->cls[0]);
    x->n_cls++;
    return 0;
}

static int add_field(jctx *x, size_t at)
{
    if (x->n_fld >= x->lim->max_fields)
        return bad(x, at, PD_ETOOBIG, "more than %zu metadata fields", x->lim->max_fields);
    if (x->n_fld % 1024 == 0) {
        jfield *n = realloc(x->fld, (x->n_fld + 1024) * sizeof *n);
        if (!n)
            return pd_err_set(x->err, PD_ENOMEM, "out of memory");
        x->fld = n;
    }
    memset(&x->fld[x->n_fld], 0, sizeof x->fld[0]);
    x->n_fld++;
    return 0;
}

/* One element of the metadata tree. parent: 0 other, 1 "metadata" (its
 * "class" children are classes), 2 a class (its "field" children). */
static int rd_element(jctx *x, size_t *pos, size_t end, const mstr *t, int parent, size_t depth)
{
    size_t at = *pos, na, nc;
    uint64_t iname;
    int rc;
    if (depth > x->lim->max_depth)
        return bad(x, at, PD_ETOOBIG, "metadata elements nest deeper than %zu", x->lim->max_depth);
    if ((rc = rd_int(x, pos, end, 4, &iname)) < 0)
        return rc;
    const char *name = ms(t, iname);
    if (!name)
        return bad(x, at, PD_EPARSE, "metadata element name %llu is not in the string table",
                   (unsigned long long)iname);
    int kind = 0;
    if (parent == 1 && !strcmp(name, "class")) {
        if ((rc = add_class(x, at)) < 0)
            return rc;
        kind = 2;
    } else if (parent == 2 && !strcmp(name, "field")) {
        if ((rc = add_field(x, at)) < 0)
            return rc;
        kind = 3;
    }
    if ((rc = rd_count(x, pos, end, 2, "metadata attribute", &na)) < 0)
        return rc;
    bool have_id = false;
    for (size_t i = 0; i < na; i++) {
        uint64_t k, v;
        if ((rc = rd_int(x, pos, end, 4, &k)) < 0 || (rc = rd_int(x, pos, end, 4, &v)) < 0)
            return rc;
        const char *ks = ms(t, k), *vs = ms(t, v);
        if (!ks || !vs)
            return bad(x, at, PD_EPARSE,
                       "metadata attribute string %llu/%llu is not in the string table",
                       (unsigned long long)k, (unsigned long long)v);
        if (kind == 2) {
            jclass *c = &x->cls[x->n_cls - 1];
            if (!strcmp(ks, "id")) {
                c->id = strtoll(vs, NULL, 10);
                have_id = true;
            } else if (!strcmp(ks, "name")) {
                c->name = vs;
            }
        } else if (kind == 3) {
            jfield *f = &x->fld[x->n_fld - 1];
            if (!strcmp(ks, "name"))
                f->name = vs;
            else if (!strcmp(ks, "class")) {
                f->cls_id = strtoll(vs, NULL, 10);
                have_id = true;
            } else if (!strcmp(ks, "constantPool"))
                f->cp = !strcmp(vs, "true");
            else if (!strcmp(ks, "dimension"))
                f->array = strcmp(vs, "0") != 0;
        }
    }
    if (kind == 2) {
        jclass *c = &x->cls[x->n_cls - 1];
        if (!have_id || !c->name)
            return bad(x, at, PD_EPARSE, "metadata class without id or name");
        c->f0 = (uint32_t)x->n_fld;
    }
    if (kind == 3) {
        jfield *f = &x->fld[x->n_fld - 1];
        if (!have_id || !f->name)
            return bad(x, at, PD_EPARSE, "metadata field without name or class");
    }
    if ((rc = rd_count(x, pos, end, 3, "metadata child element", &nc)) < 0)
        return rc;
    int child_parent = kind == 2 ? 2 : !strcmp(name, "metadata") ? 1 : 0;
    size_t my_cls = x->n_cls - 1;
    for (size_t i = 0; i < nc; i++)
        if ((rc = rd_element(x, pos, end, t, child_parent, depth + 1)) < 0)
            return rc;
    if (kind == 2) {
        jclass *c = &x->cls[my_cls];
        c->nf = (uint32_t)(x->n_fld - c->f0);
    }
    return 0;
}

static const struct {
    const char *name;
    uint8_t prim;
} PRIMS[] = {
    {"boolean", P_BOOL}, {"byte", P_BYTE},     {"char", P_CHAR},
    {"short", P_SHORT},  {"int", P_INT},       {"long", P_LONG},
    {"float", P_FLOAT},  {"double", P_DOUBLE}, {"java.lang.String", P_STRING},
};

static const struct {
    const char *name;
    uint8_t ev;
} EVENTS[] = {
    {"jdk.ExecutionSample", EV_CPU},
    {"jdk.NativeMethodSample", EV_WALL},
    {"profiler.WallClockSample", EV_WALL},
    {"jdk.ObjectAllocationInNewTLAB", EV_TLAB},
    {"jdk.ObjectAllocationOutsideTLAB", EV_OUTSIDE},
    {"jdk.ObjectAllocationSample", EV_ASAMPLE},
    {"jdk.JavaMonitorEnter", EV_LOCK},
    {"jdk.ThreadPark", EV_PARK},
    {"profiler.LiveObject", EV_LIVE},
};

static uint32_t cls_named(const jctx *x, const char *name)
{
    for (size_t i = 0; i < x->n_cls; i++)
        if (!strcmp(x->cls[i].name, name))
            return (uint32_t)i;
    return NOCLS;
}

static int rd_metadata(jctx *x, size_t off)
{
    size_t pos = off, end, n;
    uint64_t size, v;
    int rc;
    if ((rc = rd_int(x, &pos, x->len, 4, &size)) < 0)
        return rc;
    if (size < 2 || size > x->len - off)
        return bad(x, off, PD_EPARSE, "metadata event size %llu does not fit in the chunk",
                   (unsigned long long)size);
    end = off + (size_t)size;
    if ((rc = rd_int(x, &pos, end, 8, &v)) < 0)
        return rc;
    if (v != 0)
        return bad(x, off, PD_EPARSE, "metadata offset points at an event of type %llu, not 0",
                   (unsigned long long)v);
    for (int i = 0; i < 3; i++) /* start, duration, metadata id */
        if ((rc = rd_int(x, &pos, end, 8, &v)) < 0)
            return rc;
    if ((rc = rd_count(x, &pos, end, 1, "metadata string", &n)) < 0)
        return rc;
    if (n > x->lim->max_meta_strings)
        return bad(x, off, PD_ETOOBIG, "%zu metadata strings, over %zu", n,
                   x->lim->max_meta_strings);
    mstr t = {pd_arena_calloc(&x->arena, n ? n : 1, sizeof(char *)), n};
    if (!t.s)
        return pd_err_set(x->err, PD_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        jval s;
        uint8_t tag = pos < end ? x->c[pos] : 0;
        if (tag == 2)
            return bad(x, pos, PD_EPARSE, "metadata string %zu refers to a constant pool", i);
        if ((rc = rd_string(x, &pos, end, 0, &s)) < 0)
            return rc;
        t.s[i] = s.s;
    }
    if ((rc = rd_element(x, &pos, end, &t, 0, 0)) < 0)
        return rc;
    /* resolve */
    for (size_t i = 0; i < x->n_cls; i++) {
        jclass *c = &x->cls[i];
        if ((rc = pd_u64map_put(&x->cls_by_id, (uint64_t)c->id, i)) < 0)
            return rc == PD_ENOMEM
                       ? pd_err_set(x->err, PD_ENOMEM, "out of memory")
                       : bad(x, off, PD_EPARSE, "class id %lld is reserved", (long long)c->id);
        for (size_t p = 0; p < sizeof PRIMS / sizeof *PRIMS; p++)
            if (!strcmp(c->name, PRIMS[p].name))
                c->prim = PRIMS[p].prim;
        for (size_t e = 0; e < sizeof EVENTS / sizeof *EVENTS; e++)
            if (!strcmp(c->name, EVENTS[e].name))
                c->ev = EVENTS[e].ev;
    }
    for (size_t i = 0; i < x->n_fld; i++) {
        uint64_t ci;
        if (!pd_u64map_get(&x->cls_by_id, (uint64_t)x->fld[i].cls_id, &ci))
            return bad(x, off, PD_EPARSE,
                       "field \"%s\" has class id %lld, which is not in the metadata",
                       x->fld[i].name, (long long)x->fld[i].cls_id);
        x->fld[i].cls = (uint32_t)ci;
    }
    /* a compound class with no fields cannot be read inline; one whose
     * inline fields contain itself would recurse: both are caught by
     * max_depth when read */
    x->k_string = cls_named(x, "java.lang.String");
    x->k_stack = cls_named(x, "jdk.types.StackTrace");
    x->k_frame = cls_named(x, "jdk.types.StackFrame");
    x->k_method = cls_named(x, "jdk.types.Method");
    x->k_class = cls_named(x, "java.lang.Class");
    x->k_symbol = cls_named(x, "jdk.types.Symbol");
    return 0;
}

/* ---- constant pools ---- */

static int rd_pools(jctx *x, size_t off)
{
    size_t hops = 0;
    for (;;) {
        size_t pos = off, end, n;
        uint64_t size, v, delta;
        int rc;
        if (++hops > 1000000)
            return bad(x, off, PD_ETOOBIG, "constant pool chain longer than 1000000 events");
        if ((rc = rd_int(x, &pos, x->len, 4, &size)) < 0)
            return rc;
        if (size < 2 || size > x->len - off)
            return bad(x, off, PD_EPARSE, "constant pool event size %llu does not fit in the chunk",
                       (unsigned long long)size);
        end = off + (size_t)size;
        if ((rc = rd_int(x, &pos, end, 8, &v)) < 0)
            return rc;
        if (v != 1)
            return bad(x, off, PD_EPARSE,
                       "constant pool offset points at an event of type %llu, not 1",
                       (unsigned long long)v);
        if ((rc = rd_int(x, &pos, end, 8, &v)) < 0 || (rc = rd_int(x, &pos, end, 8, &v)) < 0 ||
            (rc = rd_int(x, &pos, end, 8, &delta)) < 0 || (rc = rd_int(x, &pos, end, 1, &v)) < 0)
            return rc;
        if ((rc = rd_count(x, &pos, end, 2, "constant pool", &n)) < 0)
            return rc;
        for (size_t i = 0; i < n; i++) {
            size_t at = pos, ne;
            uint64_t ci;
            if ((rc = rd_int(x, &pos, end, 8, &v)) < 0)
                return rc;
            if (!pd_u64map_get(&x->cls_by_id, v, &ci))
                return bad(x, at, PD_EPARSE,
                           "constant pool of class id %llu, which is not in the metadata",
                           (unsigned long long)v);
            jclass *c = &x->cls[ci];
            if (!strcmp(c->name, "jdk.types.ChunkHeader")) {
                if (end - pos < HEADER_BYTES)
                    return bad(x, pos, PD_EPARSE, "chunk header pool runs past its event");
                pos += HEADER_BYTES;
                continue;
            }
            if ((rc = rd_count(x, &pos, end, 1, "constant pool entry", &ne)) < 0)
                return rc;
            if (!c->has_pool) {
                pd_u64map_init(&c->pool);
                c->has_pool = true;
            }
            for (size_t e = 0; e < ne; e++) {
                uint64_t id;
                jval ign;
                if (++x->n_pool > x->lim->max_pool_entries)
                    return bad(x, pos, PD_ETOOBIG, "more than %zu constant pool entries",
                               x->lim->max_pool_entries);
                if ((rc = rd_int(x, &pos, end, 8, &id)) < 0)
                    return rc;
                /* ids are stored +1: the JDK uses -1, the map reserves UINT64_MAX */
                if ((rc = pd_u64map_put(&c->pool, id + 1, pos)) < 0)
                    return rc == PD_ENOMEM
                               ? pd_err_set(x->err, PD_ENOMEM, "out of memory")
                               : bad(x, pos, PD_EPARSE, "constant pool id %llu of %s is reserved",
                                     (unsigned long long)id, c->name);
                if ((rc = rd_value(x, &pos, end, (uint32_t)ci, false, false, 1, &ign)) < 0)
                    return rc;
            }
        }
        if (delta == 0)
            return 0;
        int64_t d = (int64_t)delta;
        if (d > 0 || (uint64_t)-d > off || off - (uint64_t)-d < HEADER_BYTES)
            return bad(x, off, PD_EPARSE, "constant pool delta %lld leaves the chunk",
                       (long long)d);
        off -= (size_t)-d;
    }
}

/* ---- stacks ---- */

static int method_name(jctx *x, int64_t mid, const char **out)
{
    uint64_t idx;
    if (pd_u64map_get(&x->methods, (uint64_t)mid + 1, &idx)) {
        *out = x->names[idx];
        return 0;
    }
    size_t off;
    int rc;
    const char *cname = "", *mname = "";
    if (x->k_method != NOCLS && lookup_pool(x, x->k_method, mid, &off) == 0) {
        static const char *const MF[] = {"type", "name"};
        jval mv[2] = {{-1, 0, ""}, {-1, 0, ""}};
        if ((rc = rd_fields(x, &off, x->len, x->k_method, MF, 2, mv)) < 0)
            return rc;
        size_t o2;
        jval sv = {0, 0, ""};
        static const char *const SF[] = {"string"};
        if (x->k_symbol != NOCLS && lookup_pool(x, x->k_symbol, mv[1].i, &o2) == 0 &&
            (rc = rd_fields(x, &o2, x->len, x->k_symbol, SF, 1, &sv)) < 0)
            return rc;
        mname = sv.s;
        static const char *const CF[] = {"name"};
        jval cv = {-1, 0, ""};
        if (x->k_class != NOCLS && lookup_pool(x, x->k_class, mv[0].i, &o2) == 0) {
            if ((rc = rd_fields(x, &o2, x->len, x->k_class, CF, 1, &cv)) < 0)
                return rc;
            jval cs = {0, 0, ""};
            if (x->k_symbol != NOCLS && lookup_pool(x, x->k_symbol, cv.i, &o2) == 0 &&
                (rc = rd_fields(x, &o2, x->len, x->k_symbol, SF, 1, &cs)) < 0)
                return rc;
            cname = cs.s;
        }
    }
    size_t ln = strlen(cname) + strlen(mname) + 2;
    char *s = pd_arena_alloc(&x->arena, ln + 16);
    if (!s)
        return pd_err_set(x->err, PD_ENOMEM, "out of memory");
    if (*cname && *mname)
        snprintf(s, ln, "%s.%s", cname, mname);
    else if (*mname)
        snprintf(s, ln, "%s", mname);
    else
        snprintf(s, ln + 16, "[unknown method %lld]", (long long)mid);
    if (x->n_names == x->cap_names) {
        size_t nc = x->cap_names ? x->cap_names * 2 : 256;
        const char **n = realloc(x->names, nc * sizeof *n);
        if (!n)
            return pd_err_set(x->err, PD_ENOMEM, "out of memory");
        x->names = n;
        x->cap_names = nc;
    }
    x->names[x->n_names] = s;
    if (mid != -2 && pd_u64map_put(&x->methods, (uint64_t)mid + 1, x->n_names) < 0)
        return pd_err_set(x->err, PD_ENOMEM, "out of memory");
    x->n_names++;
    *out = s;
    return 0;
}

/* The resolved stack trace `sid` (NULL *out: unknown id, sample dropped). */
static int get_stack(jctx *x, int64_t sid, jstack **out)
{
    uint64_t idx;
    *out = NULL;
    if (pd_u64map_get(&x->stacks, (uint64_t)sid + 1, &idx)) {
        *out = &x->st[idx];
        return 0;
    }
    size_t off;
    if (x->k_stack == NOCLS || x->k_frame == NOCLS || lookup_pool(x, x->k_stack, sid, &off) < 0)
        return 0;
    static const char *const TF[] = {"truncated", "frames"};
    jval tv[2] = {{0, 0, ""}, {0, 0, ""}};
    tv[1].pos = SIZE_MAX;
    int rc;
    if ((rc = rd_fields(x, &off, x->len, x->k_stack, TF, 2, tv)) < 0)
        return rc;
    size_t n = tv[1].pos == SIZE_MAX ? 0 : (size_t)tv[1].i;
    size_t keep = n < x->lim->max_stack_depth ? n : x->lim->max_stack_depth;
    bool trunc = tv[0].i != 0 || keep < n;
    jframe *f = pd_arena_calloc(&x->arena, keep + 1, sizeof *f);
    if (!f)
        return pd_err_set(x->err, PD_ENOMEM, "out of memory");
    size_t pos = tv[1].pos;
    for (size_t i = 0; i < keep; i++) {
        static const char *const FF[] = {"method", "lineNumber"};
        jval fv[2] = {{0, 0, ""}, {0, 0, ""}};
        if ((rc = rd_fields(x, &pos, x->len, x->k_frame, FF, 2, fv)) < 0)
            return rc;
        if ((rc = method_name(x, fv[0].i, &f[i].name)) < 0)
            return rc;
        f[i].line = fv[1].i > 0 ? fv[1].i : 0;
    }
    if (trunc)
        f[keep++] = (jframe){"[truncated]", 0};
    if (x->n_st == x->cap_st) {
        size_t nc = x->cap_st ? x->cap_st * 2 : 256;
        jstack *ns = realloc(x->st, nc * sizeof *ns);
        if (!ns)
            return pd_err_set(x->err, PD_ENOMEM, "out of memory");
        x->st = ns;
        x->cap_st = nc;
    }
    jstack *s = &x->st[x->n_st];
    memset(s, 0, sizeof *s);
    s->n = (uint32_t)keep;
    s->f = f;
    if (sid != -2 && pd_u64map_put(&x->stacks, (uint64_t)sid + 1, x->n_st) < 0)
        return pd_err_set(x->err, PD_ENOMEM, "out of memory");
    x->n_st++;
    *out = s;
    return 0;
}

/* ---- profiles ---- */

static int builder_for(jctx *x, pd_jfr_kind k, pd_profile_builder **out)
{
    static const char *const T[PD_JFR_N_KINDS][4] = {
        {"cpu", "nanoseconds", NULL, NULL},
        {"wall", "nanoseconds", NULL, NULL},
        {"alloc_in_new_tlab_objects", "count", "alloc_in_new_tlab_bytes", "bytes"},
        {"alloc_outside_tlab_objects", "count", "alloc_outside_tlab_bytes", "bytes"},
        {"alloc_sample_objects", "count", "alloc_sample_bytes", "bytes"},
        {"contentions", "count", "delay", "nanoseconds"},
        {"contentions", "count", "delay", "nanoseconds"},
        {"live", "count", NULL, NULL},
    };
    static const char *const PT[PD_JFR_N_KINDS][2] = {
        {"cpu", "nanoseconds"}, {"wall", "nanoseconds"}, {"space", "bytes"}, {"space", "bytes"},
        {"space", "bytes"},     {"mutex", "count"},      {"block", "count"}, {"objects", "count"},
    };
    int rc;
    if (!x->b[k]) {
        if ((rc = pd_profile_builder_new(&x->lim->pprof, &x->b[k])) < 0)
            return pd_err_set(x->err, rc, "out of memory");
        for (int i = 0; i < 4; i += 2)
            if (T[k][i] &&
                (rc = pd_profile_builder_sample_type(x->b[k], T[k][i], T[k][i + 1], x->err)) < 0)
                return rc;
        int64_t period = k <= PD_JFR_WALL ? x->opts->period_nanos : 1;
        if ((rc = pd_profile_builder_period(x->b[k], PT[k][0], PT[k][1], period, x->err)) < 0)
            return rc;
    }
    *out = x->b[k];
    return 0;
}

static int64_t ticks_ns(const jctx *x, int64_t t)
{
    if (x->tps <= 0 || t <= 0)
        return 0;
    __int128 v = (__int128)t * 1000000000 / x->tps;
    return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

static int add_sample(jctx *x, pd_jfr_kind k, jstack *s, const int64_t *val, int64_t ctx_id)
{
    pd_profile_builder *b = NULL;
    int rc;
    if ((rc = builder_for(x, k, &b)) < 0)
        return rc;
    if (!s->locs[k]) {
        uint64_t *l = pd_arena_calloc(&x->arena, s->n ? s->n : 1, sizeof *l);
        if (!l)
            return pd_err_set(x->err, PD_ENOMEM, "out of memory");
        for (uint32_t i = 0; i < s->n; i++) {
            uint64_t fid;
            if ((rc = pd_profile_builder_function(b, s->f[i].name, s->f[i].name, NULL, 0, &fid,
                                                  x->err)) < 0)
                return rc;
            pd_pprof_line ln = {.function_id = fid, .line = s->f[i].line};
            if ((rc = pd_profile_builder_location(b, 0, 0, &ln, 1, &l[i], x->err)) < 0)
                return rc;
        }
        s->locs[k] = l;
    }
    pd_pprof_label lab[64];
    size_t nl = 0;
    if (ctx_id != 0 && x->opts->context) {
        const char *const *kv = NULL;
        size_t np = x->opts->context(x->opts->context_arg, ctx_id, &kv);
        for (size_t i = 0; i < np && nl < 64; i++) {
            int64_t ks = pd_profile_builder_string(b, kv[2 * i], x->err);
            int64_t vs = ks < 0 ? ks : pd_profile_builder_string(b, kv[2 * i + 1], x->err);
            if (ks < 0 || vs < 0)
                return (int)(ks < 0 ? ks : vs);
            memset(&lab[nl], 0, sizeof lab[nl]);
            lab[nl].key = ks;
            lab[nl].str = vs;
            nl++;
        }
    }
    return pd_profile_builder_sample(b, s->locs[k], s->n, val, lab, nl, x->err);
}

static int rd_events(jctx *x)
{
    size_t pos = HEADER_BYTES;
    static const char *const EF[] = {"startTime",      "duration", "stackTrace", "tlabSize",
                                     "allocationSize", "weight",   "contextId"};
    enum { F_START, F_DUR, F_STACK, F_TLAB, F_ASIZE, F_WEIGHT, F_CTX, F_N };
    while (pos < x->len) {
        size_t at = pos, p = pos;
        uint64_t size, type, ci;
        int rc;
        if ((rc = rd_int(x, &p, x->len, 4, &size)) < 0)
            return rc;
        if (size == 0 || size > x->len - at)
            return bad(x, at, PD_EPARSE,
                       "event size %llu does not fit in the chunk (%zu bytes left)",
                       (unsigned long long)size, x->len - at);
        size_t end = at + (size_t)size;
        pos = end;
        if ((rc = rd_int(x, &p, end, 8, &type)) < 0)
            return rc;
        if (type <= 1 || !pd_u64map_get(&x->cls_by_id, type, &ci))
            continue;
        const jclass *c = &x->cls[ci];
        if (c->ev == EV_NONE)
            continue;
        if (++x->n_events > x->lim->max_events)
            return bad(x, at, PD_ETOOBIG, "more than %zu events", x->lim->max_events);
        jval v[F_N];
        memset(v, 0, sizeof v);
        for (int i = 0; i < F_N; i++)
            v[i].s = "";
        if ((rc = rd_fields(x, &p, end, (uint32_t)ci, EF, F_N, v)) < 0)
            return rc;
        jstack *s;
        if ((rc = get_stack(x, v[F_STACK].i, &s)) < 0)
            return rc;
        if (!s)
            continue;
        int64_t t = x->start_nanos + ticks_ns(x, v[F_START].i - x->start_ticks);
        if (v[F_START].i > 0) {
            if (!x->t_min || t < x->t_min)
                x->t_min = t;
            if (t > x->t_max)
                x->t_max = t;
        }
        int64_t val[2] = {1, 0};
        pd_jfr_kind k;
        switch (c->ev) {
        case EV_CPU:
            k = PD_JFR_CPU;
            val[0] = x->opts->period_nanos;
            break;
        case EV_WALL:
            k = PD_JFR_WALL;
            val[0] = x->opts->period_nanos;
            break;
        case EV_TLAB:
            k = PD_JFR_ALLOC_TLAB;
            val[1] = v[F_TLAB].i;
            break;
        case EV_OUTSIDE:
            k = PD_JFR_ALLOC_OUTSIDE;
            val[1] = v[F_ASIZE].i;
            break;
        case EV_ASAMPLE:
            k = PD_JFR_ALLOC_SAMPLE;
            val[1] = v[F_WEIGHT].i;
            break;
        case EV_LOCK:
            k = PD_JFR_MUTEX;
            val[1] = ticks_ns(x, v[F_DUR].i);
            break;
        case EV_PARK:
            k = PD_JFR_BLOCK;
            val[1] = ticks_ns(x, v[F_DUR].i);
            break;
        default:
            k = PD_JFR_LIVE;
            break;
        }
        if (val[1] < 0)
            val[1] = 0;
        if ((rc = add_sample(x, k, s, val, v[F_CTX].i)) < 0) {
            if (rc != PD_ENOMEM)
                pd_err_prefix(x->err, "chunk %zu at offset %zu", x->chunk_no, x->base + at);
            return rc;
        }
    }
    return 0;
}

/* ---- chunks ---- */

static void chunk_free(jctx *x)
{
    for (size_t i = 0; i < x->n_cls; i++)
        if (x->cls[i].has_pool)
            pd_u64map_release(&x->cls[i].pool);
    free(x->cls);
    free(x->fld);
    free(x->st);
    free(x->names);
    pd_u64map_release(&x->cls_by_id);
    pd_u64map_release(&x->stacks);
    pd_u64map_release(&x->methods);
    pd_arena_release(&x->arena);
    x->cls = NULL;
    x->fld = NULL;
    x->st = NULL;
    x->names = NULL;
    x->n_cls = x->n_fld = x->n_st = x->cap_st = x->n_names = x->cap_names = x->n_pool = 0;
}

static int rd_chunk(jctx *x, const uint8_t *data, size_t len, size_t base, size_t *size_out)
{
    x->base = base;
    x->c = data;
    x->len = len;
    if (len < HEADER_BYTES)
        return bad(x, 0, PD_EPARSE, "truncated chunk header: %zu bytes, want %d", len,
                   HEADER_BYTES);
    if (memcmp(data, "FLR\0", 4) != 0)
        return bad(x, 0, PD_EPARSE, "no chunk magic \"FLR\\0\"");
    unsigned major = (unsigned)be(data + 4, 2);
    if (major != 2 && major != 1)
        return bad(x, 4, PD_EPARSE, "unsupported JFR version %u", major);
    uint64_t size = be(data + 8, 8), cpo = be(data + 16, 8), mo = be(data + 24, 8);
    if (size < HEADER_BYTES || size > len)
        return bad(x, 8, PD_EPARSE, "chunk size %llu does not fit in the %zu bytes left",
                   (unsigned long long)size, len);
    x->len = (size_t)size;
    *size_out = (size_t)size;
    if (cpo < HEADER_BYTES || cpo >= size)
        return bad(x, 16, PD_EPARSE, "constant pool offset %llu is outside the chunk (size %llu)",
                   (unsigned long long)cpo, (unsigned long long)size);
    if (mo < HEADER_BYTES || mo >= size)
        return bad(x, 24, PD_EPARSE, "metadata offset %llu is outside the chunk (size %llu)",
                   (unsigned long long)mo, (unsigned long long)size);
    x->start_nanos = (int64_t)be(data + 32, 8);
    x->start_ticks = (int64_t)be(data + 48, 8);
    x->tps = (int64_t)be(data + 56, 8);
    x->compressed = major == 1 ? false : (be(data + 64, 4) & 1) != 0;
    pd_arena_init(&x->arena);
    pd_u64map_init(&x->cls_by_id);
    pd_u64map_init(&x->stacks);
    pd_u64map_init(&x->methods);
    int rc = rd_metadata(x, (size_t)mo);
    if (rc == 0)
        rc = rd_pools(x, (size_t)cpo);
    if (rc == 0)
        rc = rd_events(x);
    int64_t dur = (int64_t)be(data + 40, 8);
    if (rc == 0 && x->start_nanos > 0) {
        if (!x->t_min || x->start_nanos < x->t_min)
            x->t_min = x->start_nanos;
        if (dur > 0 && x->start_nanos + dur > x->t_max)
            x->t_max = x->start_nanos + dur;
    }
    chunk_free(x);
    return rc;
}

int pd_jfr_to_pprof(const uint8_t *data, size_t len, const pd_jfr_opts *opts, pd_jfr_result *out,
                    pd_err *err)
{
    pd_jfr_opts o;
    if (opts)
        o = *opts;
    else
        memset(&o, 0, sizeof o);
    pd_jfr_limits d = pd_jfr_limits_default();
#define DEF(f)                                                                                     \
    if (!o.lim.f)                                                                                  \
        o.lim.f = d.f;
    DEF(max_input_bytes)
    DEF(max_chunks)
    DEF(max_classes)
    DEF(max_fields)
    DEF(max_meta_strings)
    DEF(max_pool_entries)
    DEF(max_events)
    DEF(max_depth)
    DEF(max_stack_depth)
#undef DEF
    if (o.period_nanos <= 0)
        o.period_nanos = 10000000;
    memset(out, 0, sizeof *out);
    if (len > o.lim.max_input_bytes)
        return pd_err_set(err, PD_ETOOBIG, "JFR recording of %zu bytes, over %zu", len,
                          o.lim.max_input_bytes);
    if (len == 0)
        return pd_err_set(err, PD_EPARSE, "empty JFR recording");
    jctx x;
    memset(&x, 0, sizeof x);
    x.lim = &o.lim;
    x.opts = &o;
    /* real recordings decode each byte a few times at most (pool values on
     * demand, nesting levels) */
    x.max_steps = (uint64_t)len * 64 + 10000000;
    x.max_copied = (uint64_t)len * 4 + ((uint64_t)64 << 20);
    x.err = err;
    int rc = 0;
    size_t off = 0;
    while (off < len) {
        size_t sz = 0;
        if (x.chunk_no >= o.lim.max_chunks) {
            rc = pd_err_set(err, PD_ETOOBIG, "more than %zu chunks", o.lim.max_chunks);
            break;
        }
        x.chunk_no++;
        if ((rc = rd_chunk(&x, data + off, len - off, off, &sz)) < 0)
            break;
        off += sz;
    }
    if (rc == 0) {
        for (int k = 0; k < PD_JFR_N_KINDS && rc == 0; k++) {
            if (!x.b[k])
                continue;
            pd_profile *bp = pd_profile_builder_profile(x.b[k]);
            bp->time_nanos = x.t_min;
            bp->duration_nanos = x.t_max > x.t_min ? x.t_max - x.t_min : 0;
            if ((rc = pd_profile_builder_finish(x.b[k], &out->profile[k], err)) == 0)
                out->have[k] = true;
        }
        out->n_chunks = x.chunk_no;
        out->n_events = x.n_events;
    }
    for (int k = 0; k < PD_JFR_N_KINDS; k++)
        pd_profile_builder_free(x.b[k]);
    if (rc < 0)
        pd_jfr_result_release(out);
    return rc;
}
