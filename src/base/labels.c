#include "base/labels.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

size_t pd_utf8_seq_len(const unsigned char *p)
{
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? (c <= 0xef ? 3 : 0) : c >= 0xc2 ? 2 : 0;
    if (!n)
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if (n == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0)))
        return 0;
    if (n == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90)))
        return 0;
    return n;
}

bool pd_label_name_classic(const char *name)
{
    if (!name || !name[0])
        return false;
    for (const char *p = name; *p; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                  (p != name && c >= '0' && c <= '9');
        if (!ok)
            return false;
    }
    return true;
}

bool pd_label_value_valid(const char *value)
{
    if (!value)
        return false;
    for (const unsigned char *p = (const unsigned char *)value; *p;) {
        size_t k = pd_utf8_seq_len(p);
        if (!k)
            return false;
        p += k;
    }
    return true;
}

bool pd_label_name_valid(const char *name)
{
    if (!name || !name[0])
        return false;
    const unsigned char *p = (const unsigned char *)name;
    size_t n = 0;
    while (p[n]) {
        if (p[n] < 0x20 || p[n] == 0x7f)
            return false;
        size_t k = pd_utf8_seq_len(p + n);
        if (!k)
            return false;
        n += k;
        if (n > PD_LABEL_MAX_NAME)
            return false;
    }
    return true;
}

void pd_labels_init(pd_labels *ls)
{
    ls->v = NULL;
    ls->n = 0;
}

void pd_labels_release(pd_labels *ls)
{
    for (size_t i = 0; i < ls->n; i++) {
        free(ls->v[i].name);
        free(ls->v[i].value);
    }
    free(ls->v);
    pd_labels_init(ls);
}

int pd_labels_set(pd_labels *ls, const char *name, const char *value, pd_err *err)
{
    if (!pd_label_name_valid(name))
        return pd_err_set(
            err, PD_EINVAL,
            "invalid label name \"%.64s\": must be 1..%d bytes of UTF-8 without control characters",
            name, PD_LABEL_MAX_NAME);
    size_t vlen = strlen(value);
    if (vlen > PD_LABEL_MAX_VALUE)
        return pd_err_set(err, PD_EINVAL, "label %s: value of %zu bytes is over the limit of %d",
                          name, vlen, PD_LABEL_MAX_VALUE);
    /* Prometheus takes any text as a value: newlines, tabs and carriage
     * returns are taken (relabel_test.go's "foo\nbar"); invalid UTF-8 is
     * refused, and so are the other control bytes (NUL, ESC, ...: issue 19,
     * a pushed "adm\x01in" or a terminal escape is refused, not stored). */
    for (size_t i = 0; i < vlen;) {
        unsigned char c = (unsigned char)value[i];
        if ((c < 0x20 && c != '\n' && c != '\t' && c != '\r') || c == 0x7f)
            return pd_err_set(err, PD_EINVAL,
                              "label %s: value has the control byte 0x%02x at offset %zu", name, c,
                              i);
        size_t k = pd_utf8_seq_len((const unsigned char *)value + i);
        if (!k)
            return pd_err_set(err, PD_EINVAL,
                              "label %s: value is not valid UTF-8 (byte 0x%02x at offset %zu)",
                              name, (unsigned char)value[i], i);
        i += k;
    }
    size_t i = 0;
    while (i < ls->n && strcmp(ls->v[i].name, name) < 0)
        i++;
    if (i < ls->n && strcmp(ls->v[i].name, name) == 0) {
        if (vlen == 0) {
            free(ls->v[i].name);
            free(ls->v[i].value);
            memmove(&ls->v[i], &ls->v[i + 1], (ls->n - i - 1) * sizeof *ls->v);
            ls->n--;
            return 0;
        }
        char *nv = strdup(value);
        if (!nv)
            return PD_ENOMEM;
        free(ls->v[i].value);
        ls->v[i].value = nv;
        return 0;
    }
    if (vlen == 0)
        return 0;
    if (ls->n >= PD_LABEL_MAX_COUNT)
        return pd_err_set(err, PD_EINVAL, "too many labels: at most %d per series",
                          PD_LABEL_MAX_COUNT);
    pd_label *nvv = realloc(ls->v, (ls->n + 1) * sizeof *ls->v);
    if (!nvv)
        return PD_ENOMEM;
    ls->v = nvv;
    char *nn = strdup(name), *vv = strdup(value);
    if (!nn || !vv) {
        free(nn);
        free(vv);
        return PD_ENOMEM;
    }
    memmove(&ls->v[i + 1], &ls->v[i], (ls->n - i) * sizeof *ls->v);
    ls->v[i].name = nn;
    ls->v[i].value = vv;
    ls->n++;
    return 0;
}

const char *pd_labels_get(const pd_labels *ls, const char *name)
{
    for (size_t i = 0; i < ls->n; i++)
        if (strcmp(ls->v[i].name, name) == 0)
            return ls->v[i].value;
    return NULL;
}

int pd_labels_copy(pd_labels *dst, const pd_labels *src)
{
    pd_labels_init(dst);
    if (!src->n)
        return 0;
    dst->v = calloc(src->n, sizeof *dst->v);
    if (!dst->v)
        return PD_ENOMEM;
    for (size_t i = 0; i < src->n; i++) {
        dst->v[i].name = strdup(src->v[i].name);
        dst->v[i].value = strdup(src->v[i].value);
        dst->n = i + 1;
        if (!dst->v[i].name || !dst->v[i].value) {
            pd_labels_release(dst);
            return PD_ENOMEM;
        }
    }
    return 0;
}

int pd_labels_cmp(const pd_labels *a, const pd_labels *b)
{
    size_t n = a->n < b->n ? a->n : b->n;
    for (size_t i = 0; i < n; i++) {
        int c = strcmp(a->v[i].name, b->v[i].name);
        if (c)
            return c;
        c = strcmp(a->v[i].value, b->v[i].value);
        if (c)
            return c;
    }
    return a->n < b->n ? -1 : a->n > b->n;
}

uint64_t pd_labels_hash(const pd_labels *ls)
{
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    for (size_t i = 0; i < ls->n; i++) {
        XXH3_64bits_update(&st, ls->v[i].name, strlen(ls->v[i].name) + 1);
        XXH3_64bits_update(&st, ls->v[i].value, strlen(ls->v[i].value) + 1);
    }
    return XXH3_64bits_digest(&st);
}

static int put_promql_string(pd_buf *out, const char *s)
{
    /* PromQL strings use Go escapes; JSON-style escaping is a compatible subset. */
    return pd_buf_put_json_string(out, s, strlen(s));
}

/* True when s is a PromQL metric name, [a-zA-Z_:][a-zA-Z0-9_:]* (what a
 * selector accepts before its braces). */
static bool metric_name_valid(const char *s)
{
    if (!*s)
        return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
                  (p > s && c >= '0' && c <= '9');
        if (!ok)
            return false;
    }
    return true;
}

/* __name__ goes before the braces when it is a valid metric name; any other
 * value (e.g. "a-b", pushed by a client) is written quoted first inside the
 * braces (Prometheus 3: {"a-b", k="v"}); label names outside
 * [a-zA-Z_][a-zA-Z0-9_]* are quoted ({"otel.scope.name"="x"}), so the text
 * always parses back (pd_selector_parse) to this very set. */
int pd_labels_format(const pd_labels *ls, pd_buf *out)
{
    int rc = 0;
    const char *name = pd_labels_get(ls, "__name__");
    int first = 1;
    if (name && metric_name_valid(name)) {
        rc = pd_buf_puts(out, name);
        if (!rc)
            rc = pd_buf_putc(out, '{');
    } else {
        /* Prometheus 3's quoted metric name: {"a-b", k="v"} */
        rc = pd_buf_putc(out, '{');
        if (name && !rc) {
            rc = put_promql_string(out, name);
            first = 0;
        }
    }
    for (size_t i = 0; i < ls->n && !rc; i++) {
        if (strcmp(ls->v[i].name, "__name__") == 0)
            continue;
        if (!first)
            rc = pd_buf_puts(out, ", ");
        first = 0;
        if (!rc)
            rc = pd_label_name_classic(ls->v[i].name) ? pd_buf_puts(out, ls->v[i].name)
                                                      : put_promql_string(out, ls->v[i].name);
        if (!rc)
            rc = pd_buf_putc(out, '=');
        if (!rc)
            rc = put_promql_string(out, ls->v[i].value);
    }
    if (!rc)
        rc = pd_buf_putc(out, '}');
    return rc;
}

const char *pd_match_type_str(pd_match_type t)
{
    switch (t) {
    case PD_MATCH_EQ:
        return "=";
    case PD_MATCH_NEQ:
        return "!=";
    case PD_MATCH_RE:
        return "=~";
    case PD_MATCH_NRE:
        return "!~";
    }
    return "?";
}

int pd_matcher_init(pd_matcher *m, pd_match_type type, const char *name, const char *value,
                    pd_err *err)
{
    memset(m, 0, sizeof *m);
    m->type = type;
    m->name = strdup(name);
    m->value = strdup(value);
    if (!m->name || !m->value)
        goto nomem;
    if (type == PD_MATCH_RE || type == PD_MATCH_NRE) {
        size_t len = strlen(value);
        char *pat = malloc(len + 8);
        if (!pat)
            goto nomem;
        memcpy(pat, "^(?:", 4);
        memcpy(pat + 4, value, len);
        memcpy(pat + 4 + len, ")$", 3);
        int ecode;
        PCRE2_SIZE eoff;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_DOLLAR_ENDONLY, &ecode, &eoff, NULL);
        free(pat);
        if (!re) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(ecode, msg, sizeof msg);
            size_t off = eoff >= 4 ? eoff - 4 : 0;
            pd_matcher_release(m);
            return pd_err_set(err, PD_EINVAL,
                              "invalid regex \"%.200s\" for label %.64s at offset %zu: %s", value,
                              name, off, (char *)msg);
        }
        m->re = re;
        m->match_data = pcre2_match_data_create_from_pattern(re, NULL);
        if (!m->match_data)
            goto nomem;
    }
    return 0;
nomem:
    pd_matcher_release(m);
    return PD_ENOMEM;
}

void pd_matcher_release(pd_matcher *m)
{
    free(m->name);
    free(m->value);
    if (m->match_data)
        pcre2_match_data_free(m->match_data);
    if (m->re)
        pcre2_code_free(m->re);
    memset(m, 0, sizeof *m);
}

static pcre2_match_context *g_mctx;
static pthread_once_t g_mctx_once = PTHREAD_ONCE_INIT;

static void mctx_init(void)
{
    g_mctx = pcre2_match_context_create(NULL);
    if (g_mctx) {
        pcre2_set_match_limit(g_mctx, PD_REGEX_MATCH_LIMIT);
        pcre2_set_depth_limit(g_mctx, PD_REGEX_DEPTH_LIMIT);
    }
}

void *pd_regex_match_context(void)
{
    pthread_once(&g_mctx_once, mctx_init);
    return g_mctx; /* NULL (out of memory): PCRE2's defaults */
}

int pd_matchers_check_limits(const pd_matcher *ms, size_t n, pd_err *err)
{
    for (size_t i = 0; i < n; i++)
        if (ms[i].limit_hit)
            return pd_err_set(err, PD_ETOOBIG,
                              "regex \"%.200s\" for label %.64s: matching a value ran past the "
                              "backtracking limit (PCRE2 match limit %u, depth limit %u); "
                              "simplify the regex (e.g. no nested repetition such as (a+)+)",
                              ms[i].value, ms[i].name, PD_REGEX_MATCH_LIMIT, PD_REGEX_DEPTH_LIMIT);
    return 0;
}

bool pd_matcher_matches(const pd_matcher *m, const char *value)
{
    if (!value)
        value = "";
    switch (m->type) {
    case PD_MATCH_EQ:
        return strcmp(m->value, value) == 0;
    case PD_MATCH_NEQ:
        return strcmp(m->value, value) != 0;
    case PD_MATCH_RE:
    case PD_MATCH_NRE: {
        if (m->limit_hit)
            return false; /* the query fails anyway: spend no more time */
        int rc = pcre2_match(m->re, (PCRE2_SPTR)value, strlen(value), 0, 0, m->match_data,
                             pd_regex_match_context());
        if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
            rc == PCRE2_ERROR_HEAPLIMIT) {
            ((pd_matcher *)m)->limit_hit = 1; /* matchers are never const objects */
            return false;
        }
        bool ok = rc >= 0;
        return m->type == PD_MATCH_RE ? ok : !ok;
    }
    }
    return false;
}

bool pd_matchers_match(const pd_matcher *ms, size_t n, const pd_labels *ls)
{
    for (size_t i = 0; i < n; i++)
        if (!pd_matcher_matches(&ms[i], pd_labels_get(ls, ms[i].name)))
            return false;
    return true;
}
