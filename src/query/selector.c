/*
 * query/selector.c — the PromQL series-selector parser (DESIGN.md §5).
 *
 * Grammar (whitespace = space, tab, CR, LF, allowed between any two tokens):
 *
 *   selector    = metric_name [ "{" [ matchers ] "}" ]
 *               | "{" [ matchers ] "}"
 *   matchers    = item { "," item } [ "," ]
 *   item        = label_name op string
 *               | string                     (Prometheus 3: the quoted metric
 *                                             name, {"cpu", job="a"})
 *   op          = "=" | "!=" | "=~" | "!~"
 *   metric_name = [a-zA-Z_:][a-zA-Z0-9_:]*
 *   label_name  = [a-zA-Z_][a-zA-Z0-9_]*
 *               | string                     (Prometheus 3: any UTF-8 name,
 *                                             {"otel.scope.name"="x"})
 *   string      = '"' ... '"' | "'" ... "'"   (Go escapes, no raw newline)
 *               | "`" ... "`"                 (raw, no escapes)
 *
 * Escapes inside "..." and '...' are Go's (as PromQL's lexer + strconv.Unquote):
 * \a \b \f \n \r \t \v \\, the enclosing quote (\" in "...", \' in '...'),
 * \NNN (exactly three octal digits, <= 0377), \xNN (two hex digits, a byte),
 * \uNNNN and \UNNNNNNNN (a Unicode code point, encoded as UTF-8; surrogates
 * and values above U+10FFFF are rejected). A NUL byte cannot be expressed
 * (label values are C strings).
 *
 * Semantics (Prometheus 3, promql/parser generated_parser.y): a metric name
 * (bare before the braces, or quoted alone inside them) becomes the matcher
 * __name__="name"; a bare name and a __name__ matcher or quoted name inside
 * the braces is an error ("must not be set twice"), while inside the braces
 * several are matchers like any other ({"a", __name__="b"} and
 * {__name__="a", __name__="b"} parse, and match nothing); invalid UTF-8
 * anywhere is an error (Prometheus' lexer: "invalid UTF-8 rune"); a quoted label name
 * must be valid per pd_label_name_valid (non-empty UTF-8); at least one matcher must not match the
 * empty string. Regex matchers are fully anchored (pd_matcher_init compiles ^(?:re)$).
 *
 * Errors name the 1-based character (Unicode code point, not byte) where the
 * problem is: "at character 7: expected label matching operator ...".
 */
#include "query/query.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MATCHERS 256

typedef struct parser {
    const char *s;
    size_t len;
    size_t pos;
    pd_err *err;
    pd_matcher *ms;
    size_t n, cap;
    char *metric; /* the metric name once given (bare or quoted), owned */
    bool outside; /* metric was given before the braces (foo{...}) */
} parser;

/* 1-based character number of byte offset off (UTF-8 continuation bytes are
 * not counted as characters). */
static size_t char_at(const char *s, size_t off)
{
    size_t n = 1;
    for (size_t i = 0; i < off; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            n++;
    return n;
}

/* Describes the input at off for a message: end of input or the character. */
static void describe(const parser *p, size_t off, char *out, size_t sz)
{
    if (off >= p->len) {
        snprintf(out, sz, "end of input");
        return;
    }
    size_t l = 1;
    while (off + l < p->len && l < 4 && ((unsigned char)p->s[off + l] & 0xC0) == 0x80)
        l++;
    unsigned char c = (unsigned char)p->s[off];
    if (c < 0x20 || c == 0x7F)
        snprintf(out, sz, "character 0x%02x", c);
    else
        snprintf(out, sz, "\"%.*s\"", (int)l, p->s + off);
}

static int fail_at(parser *p, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail_at(parser *p, size_t off, const char *fmt, ...)
{
    if (p->err) {
        char msg[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        pd_err_set(p->err, PD_EPARSE, "at character %zu: %s", char_at(p->s, off), msg);
    }
    return PD_EPARSE;
}

static int fail_expected(parser *p, const char *what)
{
    char found[32];
    describe(p, p->pos, found, sizeof found);
    return fail_at(p, p->pos, "expected %s, found %s", what, found);
}

static void skip_ws(parser *p)
{
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->pos++;
    }
}

static bool is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Parses a string literal at p->pos into a malloc'd C string *out. An
 * unescaped value is never longer than its literal, so len+1 bytes suffice. */
static int parse_string(parser *p, char **out)
{
    size_t start = p->pos;
    char q = p->s[p->pos];
    if (q != '"' && q != '\'' && q != '`')
        return fail_expected(p, "string literal");
    char *v = malloc(p->len - start + 1);
    if (!v)
        return PD_ENOMEM;
    size_t n = 0;
    int rc;
    p->pos++;
    if (q == '`') {
        while (p->pos < p->len && p->s[p->pos] != '`') {
            if (p->s[p->pos] == '\0') {
                rc = fail_at(p, p->pos, "NUL character in string literal");
                goto fail;
            }
            v[n++] = p->s[p->pos++];
        }
        if (p->pos >= p->len) {
            rc = fail_at(p, start, "unterminated raw string");
            goto fail;
        }
        p->pos++;
        v[n] = '\0';
        *out = v;
        return 0;
    }
    for (;;) {
        if (p->pos >= p->len || p->s[p->pos] == '\n') {
            rc = fail_at(p, start, "unterminated quoted string");
            goto fail;
        }
        char c = p->s[p->pos];
        if (c == q) {
            p->pos++;
            break;
        }
        if (c == '\0') {
            rc = fail_at(p, p->pos, "NUL character in string literal");
            goto fail;
        }
        if (c != '\\') {
            v[n++] = c;
            p->pos++;
            continue;
        }
        size_t esc = p->pos; /* the backslash */
        p->pos++;
        if (p->pos >= p->len) {
            rc = fail_at(p, esc, "escape sequence not terminated");
            goto fail;
        }
        c = p->s[p->pos];
        int digits = 0, base = 0;
        uint32_t max = 0;
        switch (c) {
        case 'a':
            v[n++] = '\a';
            p->pos++;
            continue;
        case 'b':
            v[n++] = '\b';
            p->pos++;
            continue;
        case 'f':
            v[n++] = '\f';
            p->pos++;
            continue;
        case 'n':
            v[n++] = '\n';
            p->pos++;
            continue;
        case 'r':
            v[n++] = '\r';
            p->pos++;
            continue;
        case 't':
            v[n++] = '\t';
            p->pos++;
            continue;
        case 'v':
            v[n++] = '\v';
            p->pos++;
            continue;
        case '\\':
            v[n++] = '\\';
            p->pos++;
            continue;
        case '0':
        case '1':
        case '2':
        case '3':
        case '4':
        case '5':
        case '6':
        case '7':
            digits = 3, base = 8, max = 255;
            break;
        case 'x':
            digits = 2, base = 16, max = 255, p->pos++;
            break;
        case 'u':
            digits = 4, base = 16, max = 0x10FFFF, p->pos++;
            break;
        case 'U':
            digits = 8, base = 16, max = 0x10FFFF, p->pos++;
            break;
        default:
            if (c == q) {
                v[n++] = c;
                p->pos++;
                continue;
            }
            if ((unsigned char)c < 0x20 || c == 0x7F)
                rc = fail_at(p, esc, "unknown escape sequence: backslash before character 0x%02x",
                             (unsigned char)c);
            else if ((unsigned char)c >= 0x80)
                rc = fail_at(p, esc,
                             "unknown escape sequence: backslash before a non-ASCII character");
            else
                rc = fail_at(p, esc, "unknown escape sequence \"\\%c\"", c);
            goto fail;
        }
        uint32_t x = 0;
        for (int i = 0; i < digits; i++) {
            if (p->pos >= p->len) {
                rc = fail_at(p, esc, "escape sequence not terminated");
                goto fail;
            }
            int d = base == 8
                        ? (p->s[p->pos] >= '0' && p->s[p->pos] <= '7' ? p->s[p->pos] - '0' : -1)
                        : hexval(p->s[p->pos]);
            if (d < 0) {
                char found[32];
                describe(p, p->pos, found, sizeof found);
                rc = fail_at(p, esc, "illegal character %s in escape sequence", found);
                goto fail;
            }
            x = x * (uint32_t)base + (uint32_t)d;
            p->pos++;
        }
        if (x > max || (base == 16 && max > 255 && x >= 0xD800 && x <= 0xDFFF)) {
            rc = fail_at(p, esc, "escape sequence is an invalid Unicode code point");
            goto fail;
        }
        if (x == 0) {
            rc = fail_at(p, esc, "NUL character in string literal");
            goto fail;
        }
        if (max == 255)
            v[n++] = (char)x; /* \xNN and octal are raw bytes, as in Go */
        else
            n += put_utf8(v + n, x);
    }
    v[n] = '\0';
    *out = v;
    return 0;
fail:
    free(v);
    return rc;
}

static int add_matcher(parser *p, size_t off, pd_match_type type, const char *name,
                       const char *value)
{
    if (p->n >= MAX_MATCHERS)
        return fail_at(p, off, "too many matchers (at most %d)", MAX_MATCHERS);
    if (p->n == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 4;
        pd_matcher *nm = realloc(p->ms, nc * sizeof *nm);
        if (!nm)
            return PD_ENOMEM;
        p->ms = nm;
        p->cap = nc;
    }
    int rc = pd_matcher_init(&p->ms[p->n], type, name, value, p->err);
    if (rc < 0) {
        if (rc == PD_EINVAL)
            pd_err_prefix(p->err, "at character %zu", char_at(p->s, off));
        return rc;
    }
    p->n++;
    return 0;
}

static int parse_matchers(parser *p)
{
    p->pos++; /* '{' */
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == '}') {
        p->pos++;
        return 0;
    }
    for (;;) {
        size_t moff = p->pos;
        char name[PD_LABEL_MAX_NAME + 1];
        char q = p->pos < p->len ? p->s[p->pos] : 0;
        if (q == '"' || q == '\'' || q == '`') {
            char *qs = NULL;
            int rc = parse_string(p, &qs);
            if (rc < 0)
                return rc;
            skip_ws(p);
            char nx = p->pos < p->len ? p->s[p->pos] : 0;
            if (nx == ',' || nx == '}') { /* the quoted metric name */
                if (p->metric && p->outside) {
                    rc = fail_at(p, moff,
                                 "metric name must not be set twice: \"%.100s\" or \"%.100s\"",
                                 p->metric, qs);
                    free(qs);
                    return rc;
                }
                rc = add_matcher(p, moff, PD_MATCH_EQ, "__name__", qs);
                if (rc < 0) {
                    free(qs);
                    return rc;
                }
                if (p->metric)
                    free(qs); /* {"a", "b"}: both matchers kept, as Prometheus 3 */
                else
                    p->metric = qs;
                if (nx == '}') {
                    p->pos++;
                    return 0;
                }
                p->pos++;
                skip_ws(p);
                if (p->pos < p->len && p->s[p->pos] == '}') {
                    p->pos++;
                    return 0;
                }
                continue;
            }
            if (!pd_label_name_valid(qs)) {
                size_t ql = strlen(qs);
                rc = ql > PD_LABEL_MAX_NAME
                         ? fail_at(p, moff, "label name of %zu bytes is over the limit of %d", ql,
                                   PD_LABEL_MAX_NAME)
                         : fail_at(p, moff, "invalid label name \"%.100s\": %s", qs,
                                   ql ? "not UTF-8 or holds a control character" : "empty");
                free(qs);
                return rc;
            }
            memcpy(name, qs, strlen(qs) + 1);
            free(qs);
        } else {
            if (p->pos >= p->len || !is_alpha(p->s[p->pos]))
                return fail_expected(p, "label name");
            size_t ns = p->pos;
            while (p->pos < p->len && (is_alpha(p->s[p->pos]) || is_digit(p->s[p->pos])))
                p->pos++;
            size_t nl = p->pos - ns;
            if (nl > PD_LABEL_MAX_NAME)
                return fail_at(p, ns, "label name of %zu bytes is over the limit of %d", nl,
                               PD_LABEL_MAX_NAME);
            memcpy(name, p->s + ns, nl);
            name[nl] = '\0';
        }
        skip_ws(p);
        pd_match_type type;
        const char *s = p->s + p->pos;
        size_t rem = p->len - p->pos;
        if (rem >= 2 && s[0] == '=' && s[1] == '~') {
            type = PD_MATCH_RE;
            p->pos += 2;
        } else if (rem >= 2 && s[0] == '!' && s[1] == '~') {
            type = PD_MATCH_NRE;
            p->pos += 2;
        } else if (rem >= 2 && s[0] == '!' && s[1] == '=') {
            type = PD_MATCH_NEQ;
            p->pos += 2;
        } else if (rem >= 1 && s[0] == '=') {
            type = PD_MATCH_EQ;
            p->pos += 1;
        } else {
            return fail_expected(p, "label matching operator (=, !=, =~, !~)");
        }
        skip_ws(p);
        if (p->pos >= p->len)
            return fail_expected(p, "string literal");
        char *value = NULL;
        int rc = parse_string(p, &value);
        if (rc < 0)
            return rc;
        if (p->metric && p->outside && strcmp(name, "__name__") == 0) {
            rc = fail_at(p, moff, "metric name must not be set twice: \"%.100s\" or \"%.100s\"",
                         p->metric, value);
            free(value);
            return rc;
        }
        rc = add_matcher(p, moff, type, name, value);
        free(value);
        if (rc < 0)
            return rc;
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            skip_ws(p);
            if (p->pos < p->len && p->s[p->pos] == '}') {
                p->pos++;
                return 0;
            }
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == '}') {
            p->pos++;
            return 0;
        }
        return fail_expected(p, "\",\" or \"}\"");
    }
}

void pd_matchers_free(pd_matcher *ms, size_t n)
{
    if (!ms)
        return;
    for (size_t i = 0; i < n; i++)
        pd_matcher_release(&ms[i]);
    free(ms);
}

int pd_selector_parse(const char *s, pd_matcher **ms, size_t *n, pd_err *err)
{
    parser p = {.s = s ? s : "", .err = err};
    int rc;
    bool braces = false;
    *ms = NULL;
    *n = 0;
    p.len = strlen(p.s);
    /* Prometheus' lexer reads runes: an invalid UTF-8 byte anywhere fails */
    for (size_t i = 0; i < p.len;) {
        size_t k = pd_utf8_seq_len((const unsigned char *)p.s + i);
        if (!k)
            return fail_at(&p, i, "invalid UTF-8 rune");
        i += k;
    }
    if (p.len > PD_SELECTOR_MAX_BYTES)
        return pd_err_set(err, PD_EPARSE, "selector of %zu bytes is over the limit of %d bytes",
                          p.len, PD_SELECTOR_MAX_BYTES);
    skip_ws(&p);
    if (p.pos >= p.len) {
        rc = fail_at(&p, p.pos, "empty selector: expected metric name or \"{\"");
        goto fail;
    }
    char c = p.s[p.pos];
    if (is_alpha(c) || c == ':') {
        size_t ns = p.pos;
        while (p.pos < p.len && (is_alpha(p.s[p.pos]) || is_digit(p.s[p.pos]) || p.s[p.pos] == ':'))
            p.pos++;
        size_t nl = p.pos - ns;
        if (nl > PD_LABEL_MAX_VALUE) {
            rc = fail_at(&p, ns, "metric name of %zu bytes is over the limit of %d", nl,
                         PD_LABEL_MAX_VALUE);
            goto fail;
        }
        p.metric = malloc(nl + 1);
        if (!p.metric) {
            rc = PD_ENOMEM;
            goto fail;
        }
        memcpy(p.metric, p.s + ns, nl);
        p.metric[nl] = '\0';
        p.outside = true;
        if ((rc = add_matcher(&p, ns, PD_MATCH_EQ, "__name__", p.metric)) < 0)
            goto fail;
        skip_ws(&p);
        if (p.pos < p.len && p.s[p.pos] == '{') {
            if ((rc = parse_matchers(&p)) < 0)
                goto fail;
            braces = true;
        }
    } else if (c == '{') {
        if ((rc = parse_matchers(&p)) < 0)
            goto fail;
        braces = true;
    } else {
        rc = fail_expected(&p, "metric name or \"{\"");
        goto fail;
    }
    skip_ws(&p);
    if (p.pos < p.len) {
        rc = fail_expected(&p, !braces ? "\"{\" or end of input" : "end of input");
        goto fail;
    }
    bool nonempty = false;
    for (size_t i = 0; i < p.n && !nonempty; i++)
        nonempty = !pd_matcher_matches(&p.ms[i], "");
    if (!nonempty) {
        rc = pd_err_set(err, PD_EINVAL,
                        "selector \"%.200s\": vector selector must contain at least one "
                        "non-empty matcher",
                        p.s);
        goto fail;
    }
    free(p.metric);
    *ms = p.ms;
    *n = p.n;
    return 0;
fail:
    free(p.metric);
    pd_matchers_free(p.ms, p.n);
    return rc;
}
