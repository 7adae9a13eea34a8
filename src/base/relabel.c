/*
 * base/relabel.c — Prometheus' relabeling (semantics in relabel.h), MD5
 * for hashmod (RFC 1321, written from the RFC), Go's Regexp.Expand.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "base/relabel.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"

static const char *const action_names[] = {
    "replace",  "keep",      "drop",      "keepequal", "dropequal", "hashmod",
    "labelmap", "labeldrop", "labelkeep", "lowercase", "uppercase",
};

int pd_relabel_action_parse(const char *s, pd_relabel_action *out)
{
    for (size_t i = 0; i < sizeof action_names / sizeof *action_names; i++)
        if (!strcasecmp(s, action_names[i])) {
            *out = (pd_relabel_action)i;
            return 0;
        }
    return PD_EINVAL;
}

const char *pd_relabel_action_name(pd_relabel_action a)
{
    return (size_t)a < sizeof action_names / sizeof *action_names ? action_names[a] : "?";
}

int pd_relabel_rule_init(pd_relabel_rule *r)
{
    memset(r, 0, sizeof *r);
    r->action = PD_RELABEL_REPLACE;
    r->separator = strdup(";");
    r->target_label = strdup("");
    r->regex = strdup("(.*)");
    r->replacement = strdup("$1");
    if (!r->separator || !r->target_label || !r->regex || !r->replacement) {
        pd_relabel_rule_release(r);
        return PD_ENOMEM;
    }
    return 0;
}

int pd_relabel_rule_compile(pd_relabel_rule *r, pd_err *err)
{
    size_t n = strlen(r->regex);
    char *pat = malloc(n + 9);
    if (!pat)
        return PD_ENOMEM;
    /* Prometheus 3 (model/relabel NewRegexp): "^(?s:" + regex + ")$", so
     * '.' matches a newline too (values may hold newlines) */
    memcpy(pat, "^(?s:", 5);
    memcpy(pat + 5, r->regex, n);
    memcpy(pat + 5 + n, ")$", 3);
    int ec;
    PCRE2_SIZE off;
    pcre2_code *re =
        pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                      PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY, &ec, &off, NULL);
    free(pat);
    if (!re) {
        PCRE2_UCHAR msg[200];
        pcre2_get_error_message(ec, msg, sizeof msg);
        /* off counts in the wrapped pattern: take away "^(?s:" (5 bytes);
         * an error found at the closing ")$" is at the end of the regex */
        size_t o = off >= 5 ? off - 5 : 0;
        if (o > n)
            o = n;
        return pd_err_set(err, PD_EINVAL, "invalid regex \"%.200s\": %s at offset %zu", r->regex,
                          (const char *)msg, o);
    }
    if (r->re)
        pcre2_code_free(r->re);
    r->re = re;
    return 0;
}

void pd_relabel_rule_release(pd_relabel_rule *r)
{
    for (size_t i = 0; i < r->n_source; i++)
        free(r->source_labels[i]);
    free(r->source_labels);
    free(r->separator);
    free(r->target_label);
    free(r->regex);
    free(r->replacement);
    if (r->re)
        pcre2_code_free(r->re);
    memset(r, 0, sizeof *r);
}

int pd_relabel_rule_copy(pd_relabel_rule *dst, const pd_relabel_rule *src)
{
    memset(dst, 0, sizeof *dst);
    dst->action = src->action;
    dst->modulus = src->modulus;
    if (src->n_source) {
        dst->source_labels = calloc(src->n_source, sizeof *dst->source_labels);
        if (!dst->source_labels)
            goto oom;
        for (size_t i = 0; i < src->n_source; i++) {
            if (!(dst->source_labels[i] = strdup(src->source_labels[i])))
                goto oom;
            dst->n_source++;
        }
    }
    if (!(dst->separator = strdup(src->separator)) ||
        !(dst->target_label = strdup(src->target_label)) || !(dst->regex = strdup(src->regex)) ||
        !(dst->replacement = strdup(src->replacement)))
        goto oom;
    if (src->re && !(dst->re = pcre2_code_copy(src->re)))
        goto oom;
    return 0;
oom:
    pd_relabel_rule_release(dst);
    return PD_ENOMEM;
}

int pd_relabel_rule_validate(const pd_relabel_rule *r, pd_err *err)
{
    const char *an = pd_relabel_action_name(r->action);
    pd_relabel_action a = r->action;
    if (a == PD_RELABEL_HASHMOD && r->modulus == 0)
        return pd_err_set(err, PD_EINVAL,
                          "relabel configuration for hashmod requires non-zero modulus");
    if ((a == PD_RELABEL_REPLACE || a == PD_RELABEL_HASHMOD || a == PD_RELABEL_LOWERCASE ||
         a == PD_RELABEL_UPPERCASE || a == PD_RELABEL_KEEPEQUAL || a == PD_RELABEL_DROPEQUAL) &&
        !r->target_label[0])
        return pd_err_set(err, PD_EINVAL,
                          "relabel configuration for %s action requires 'target_label' value", an);
    /* one label-name rule (Prometheus 3's UTF-8 names, pd_label_name_valid)
     * for target_label, templates included ($1 and ${1} are UTF-8 too) */
    if (a == PD_RELABEL_REPLACE && !pd_label_name_valid(r->target_label))
        return pd_err_set(err, PD_EINVAL, "\"%.128s\" is invalid 'target_label' for %s action",
                          r->target_label, an);
    if ((a == PD_RELABEL_LOWERCASE || a == PD_RELABEL_UPPERCASE || a == PD_RELABEL_HASHMOD ||
         a == PD_RELABEL_KEEPEQUAL || a == PD_RELABEL_DROPEQUAL) &&
        !pd_label_name_valid(r->target_label))
        return pd_err_set(err, PD_EINVAL, "\"%.128s\" is invalid 'target_label' for %s action",
                          r->target_label, an);
    if ((a == PD_RELABEL_LOWERCASE || a == PD_RELABEL_UPPERCASE || a == PD_RELABEL_KEEPEQUAL ||
         a == PD_RELABEL_DROPEQUAL) &&
        strcmp(r->replacement, "$1"))
        return pd_err_set(err, PD_EINVAL, "'replacement' can not be set for %s action", an);
    if (a == PD_RELABEL_LABELMAP && !pd_label_name_valid(r->replacement))
        return pd_err_set(err, PD_EINVAL, "\"%.128s\" is invalid 'replacement' for %s action",
                          r->replacement, an);
    if (a == PD_RELABEL_LABELDROP || a == PD_RELABEL_LABELKEEP) {
        if (r->n_source || r->target_label[0] || r->modulus || strcmp(r->separator, ";") ||
            strcmp(r->replacement, "$1"))
            return pd_err_set(err, PD_EINVAL,
                              "%s action requires only 'regex', and no other fields", an);
    }
    if (a == PD_RELABEL_KEEPEQUAL || a == PD_RELABEL_DROPEQUAL) {
        if (strcmp(r->regex, "(.*)") || r->modulus || strcmp(r->separator, ";") ||
            strcmp(r->replacement, "$1"))
            return pd_err_set(
                err, PD_EINVAL,
                "%s action requires only 'source_labels' and `target_label`, and no other fields",
                an);
    }
    return 0;
}

/* ---- MD5 (RFC 1321) ---- */

static uint32_t rotl(uint32_t x, unsigned c)
{
    return (x << c) | (x >> (32 - c));
}

static void md5_block(uint32_t h[4], const uint8_t *blk, const uint32_t k[64])
{
    static const unsigned s[64] = {7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                                   5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20,
                                   4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                                   6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};
    uint32_t m[16];
    for (int i = 0; i < 16; i++)
        m[i] = (uint32_t)blk[4 * i] | (uint32_t)blk[4 * i + 1] << 8 |
               (uint32_t)blk[4 * i + 2] << 16 | (uint32_t)blk[4 * i + 3] << 24;
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
    for (unsigned i = 0; i < 64; i++) {
        uint32_t f;
        unsigned g;
        if (i < 16) {
            f = (b & c) | (~b & d);
            g = i;
        } else if (i < 32) {
            f = (d & b) | (~d & c);
            g = (5 * i + 1) % 16;
        } else if (i < 48) {
            f = b ^ c ^ d;
            g = (3 * i + 5) % 16;
        } else {
            f = c ^ (b | ~d);
            g = (7 * i) % 16;
        }
        f = f + a + k[i] + m[g];
        a = d;
        d = c;
        c = b;
        b = b + rotl(f, s[i]);
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
}

void pd_relabel_md5(const void *data, size_t len, uint8_t out[16])
{
    uint32_t k[64];
    for (int i = 0; i < 64; i++) /* K[i] = floor(|sin(i + 1)| * 2^32), RFC 1321 3.4 */
        k[i] = (uint32_t)(fabs(sin((double)(i + 1))) * 4294967296.0);
    uint32_t h[4] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u};
    const uint8_t *p = data;
    size_t n = len;
    while (n >= 64) {
        md5_block(h, p, k);
        p += 64;
        n -= 64;
    }
    uint8_t tail[128];
    memset(tail, 0, sizeof tail);
    memcpy(tail, p, n);
    tail[n] = 0x80;
    size_t tl = n + 1 + 8 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++)
        tail[tl - 8 + i] = (uint8_t)(bits >> (8 * i));
    md5_block(h, tail, k);
    if (tl == 128)
        md5_block(h, tail + 64, k);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            out[4 * i + j] = (uint8_t)(h[i] >> (8 * j));
}

uint64_t pd_relabel_hashmod(const char *s, uint64_t modulus)
{
    uint8_t d[16];
    pd_relabel_md5(s, strlen(s), d);
    uint64_t v = 0;
    for (int i = 8; i < 16; i++)
        v = v << 8 | d[i];
    return v % modulus;
}

/* ---- matching and expansion ---- */

typedef struct match {
    pcre2_match_data *md;
    PCRE2_SIZE *ov;
    uint32_t n; /* pairs in ov */
} match;

/* 1 when re matches s whole (the pattern is anchored), 0 when not, <0 on error. */
static int do_match(const pd_relabel_rule *r, const char *s, match *m)
{
    m->md = pcre2_match_data_create_from_pattern(r->re, NULL);
    if (!m->md)
        return PD_ENOMEM;
    int rc = pcre2_match(r->re, (PCRE2_SPTR)s, strlen(s), 0, 0, m->md, NULL);
    if (rc < 0) {
        pcre2_match_data_free(m->md);
        m->md = NULL;
        return 0; /* no match (or a match limit: Go has none, treat as no match) */
    }
    m->ov = pcre2_get_ovector_pointer(m->md);
    m->n = pcre2_get_ovector_count(m->md);
    return 1;
}

static void match_free(match *m)
{
    if (m->md)
        pcre2_match_data_free(m->md);
    m->md = NULL;
}

static bool matches(const pd_relabel_rule *r, const char *s)
{
    match m = {0};
    int rc = do_match(r, s, &m);
    match_free(&m);
    return rc == 1;
}

static int put_group(pd_buf *out, const char *src, const match *m, long g)
{
    if (g < 0 || (uint32_t)g >= m->n)
        return 0;
    PCRE2_SIZE a = m->ov[2 * g], b = m->ov[2 * g + 1];
    if (a == PCRE2_UNSET || b < a)
        return 0;
    return pd_buf_append(out, src + a, b - a);
}

/* Go's Regexp.Expand of tmpl with the match m of src, appended to out. */
static int expand(const pd_relabel_rule *r, const char *tmpl, const char *src, const match *m,
                  pd_buf *out)
{
    int rc = 0;
    const char *p = tmpl;
    while (*p && !rc) {
        const char *dollar = strchr(p, '$');
        if (!dollar)
            return pd_buf_puts(out, p);
        if ((rc = pd_buf_append(out, p, (size_t)(dollar - p))))
            return rc;
        p = dollar + 1;
        if (*p == '$') {
            rc = pd_buf_putc(out, '$');
            p++;
            continue;
        }
        bool brace = *p == '{';
        const char *q = brace ? p + 1 : p, *e = q;
        while (isalnum((unsigned char)*e) || *e == '_')
            e++;
        if (e == q || (brace && *e != '}')) {
            rc = pd_buf_putc(out, '$'); /* malformed: the '$' is raw text */
            continue;
        }
        size_t nl = (size_t)(e - q);
        p = brace ? e + 1 : e;
        long num = 0;
        for (size_t i = 0; i < nl; i++) {
            if (!isdigit((unsigned char)q[i]) || num >= 100000000) {
                num = -1;
                break;
            }
            num = num * 10 + (q[i] - '0');
        }
        if (q[0] == '0' && nl > 1)
            num = -1;
        if (num >= 0) {
            rc = put_group(out, src, m, num);
        } else {
            char name[256];
            if (nl >= sizeof name)
                continue;
            memcpy(name, q, nl);
            name[nl] = '\0';
            int g = pcre2_substring_number_from_name(r->re, (PCRE2_SPTR)name);
            if (g > 0)
                rc = put_group(out, src, m, g);
        }
    }
    return rc;
}

static int set_label(pd_labels *ls, const char *name, const char *value, size_t rule, pd_err *err)
{
    pd_err e;
    pd_err_clear(&e);
    int rc = pd_labels_set(ls, name, value, &e);
    if (rc == PD_EINVAL)
        return pd_err_set(err, rc, "relabel rule %zu: %s", rule, e.msg);
    return rc;
}

static int apply_one(const pd_relabel_rule *r, size_t idx, pd_labels *ls, bool *keep, pd_err *err)
{
    int rc = 0;
    pd_buf val, tb, vb;
    pd_buf_init(&val, 0);
    pd_buf_init(&tb, 0);
    pd_buf_init(&vb, 0);
    match m = {0};
    for (size_t i = 0; i < r->n_source && !rc; i++) {
        const char *v = pd_labels_get(ls, r->source_labels[i]);
        if (i)
            rc = pd_buf_puts(&val, r->separator);
        if (!rc && v)
            rc = pd_buf_puts(&val, v);
    }
    if (!rc && (rc = pd_buf_putc(&val, '\0')) == 0)
        val.len--;
    if (rc)
        goto out;
    const char *V = val.data ? val.data : "";
    const char *tv = pd_labels_get(ls, r->target_label);
    switch (r->action) {
    case PD_RELABEL_DROP:
        if (matches(r, V))
            *keep = false;
        break;
    case PD_RELABEL_KEEP:
        if (!matches(r, V))
            *keep = false;
        break;
    case PD_RELABEL_DROPEQUAL:
        if (!strcmp(tv ? tv : "", V))
            *keep = false;
        break;
    case PD_RELABEL_KEEPEQUAL:
        if (strcmp(tv ? tv : "", V) != 0)
            *keep = false;
        break;
    case PD_RELABEL_REPLACE: {
        int mr = do_match(r, V, &m);
        if (mr < 0) {
            rc = mr;
            break;
        }
        if (!mr)
            break;
        if ((rc = expand(r, r->target_label, V, &m, &tb)) || (rc = pd_buf_putc(&tb, '\0')))
            break;
        if (!pd_label_name_valid(tb.data))
            break;
        if ((rc = expand(r, r->replacement, V, &m, &vb)) || (rc = pd_buf_putc(&vb, '\0')))
            break;
        rc = set_label(ls, tb.data, vb.data, idx, err);
        break;
    }
    case PD_RELABEL_LOWERCASE:
    case PD_RELABEL_UPPERCASE:
        for (char *p = val.data; p && *p; p++)
            *p = (char)(r->action == PD_RELABEL_LOWERCASE ? tolower((unsigned char)*p)
                                                          : toupper((unsigned char)*p));
        rc = set_label(ls, r->target_label, V, idx, err);
        break;
    case PD_RELABEL_HASHMOD: {
        char num[32];
        snprintf(num, sizeof num, "%" PRIu64, pd_relabel_hashmod(V, r->modulus));
        rc = set_label(ls, r->target_label, num, idx, err);
        break;
    }
    case PD_RELABEL_LABELMAP:
    case PD_RELABEL_LABELDROP:
    case PD_RELABEL_LABELKEEP: {
        pd_labels snap;
        pd_labels_init(&snap);
        if (pd_labels_copy(&snap, ls)) {
            rc = PD_ENOMEM;
            break;
        }
        for (size_t i = 0; i < snap.n && !rc; i++) {
            const pd_label *l = &snap.v[i];
            if (r->action == PD_RELABEL_LABELMAP) {
                match_free(&m);
                int mr = do_match(r, l->name, &m);
                if (mr < 0) {
                    rc = mr;
                    break;
                }
                if (!mr)
                    continue;
                pd_buf_reset(&tb);
                if ((rc = expand(r, r->replacement, l->name, &m, &tb)) ||
                    (rc = pd_buf_putc(&tb, '\0')))
                    break;
                if (pd_label_name_valid(tb.data))
                    rc = set_label(ls, tb.data, l->value, idx, err);
            } else {
                bool mt = matches(r, l->name);
                if (mt == (r->action == PD_RELABEL_LABELDROP))
                    rc = set_label(ls, l->name, "", idx, err);
            }
        }
        pd_labels_release(&snap);
        break;
    }
    }
out:
    match_free(&m);
    pd_buf_release(&val);
    pd_buf_release(&tb);
    pd_buf_release(&vb);
    if (rc == PD_ENOMEM)
        pd_err_set(err, rc, "relabel rule %zu: out of memory", idx);
    return rc;
}

int pd_relabel_process(const pd_relabel_rule *rules, size_t n, pd_labels *ls, bool *keep,
                       pd_err *err)
{
    *keep = true;
    for (size_t i = 0; i < n; i++) {
        int rc = apply_one(&rules[i], i + 1, ls, keep, err);
        if (rc)
            return rc;
        if (!*keep)
            return 0;
    }
    return 0;
}
