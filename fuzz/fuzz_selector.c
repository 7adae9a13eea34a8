/*
 * fuzz_selector — libFuzzer target for the PromQL series-selector parser
 * pd_selector_parse (src/query/selector.c), and pd_labels_format
 * (src/base/labels.c), whose output must parse back.
 *
 * Input: any bytes, cut at the first NUL, as the selector text (the HTTP API
 * hands the parser a C string). Seed corpus: fuzz/corpus/selector.
 * Properties checked besides the sanitizers:
 *   - an error return sets a message; a success gives 1..256 matchers with
 *     valid label names, at least one of which does not match "";
 *   - printing the matchers back as {name OP "escaped value", ...} and
 *     parsing that gives the same matchers (type, name, value) in order;
 *   - the label set of the EQ matchers with non-empty values, printed with
 *     pd_labels_format, parses back to EQ matchers of exactly that set.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/buf.h"
#include "base/labels.h"
#include "query/query.h"

static void die(const char *what, const char *text, const pd_err *err)
{
    fprintf(stderr, "%s: selector [%s]%s%s\n", what, text, err ? ": " : "", err ? err->msg : "");
    abort();
}

/* A PromQL double-quoted string whose unescaping gives back s's bytes. */
static void put_quoted(pd_buf *b, const char *s)
{
    pd_buf_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            pd_buf_printf(b, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7F)
            pd_buf_printf(b, "\\x%02x", *p);
        else
            pd_buf_putc(b, (char)*p);
    }
    pd_buf_putc(b, '"');
}

static void check_reprint(const char *text, const pd_matcher *ms, size_t n)
{
    pd_buf b;
    pd_buf_init(&b, 0);
    pd_buf_putc(&b, '{');
    for (size_t i = 0; i < n; i++) {
        if (i)
            pd_buf_puts(&b, ", ");
        /* a UTF-8 name outside [a-zA-Z_][a-zA-Z0-9_]* is written quoted (Prometheus 3) */
        if (pd_label_name_classic(ms[i].name))
            pd_buf_puts(&b, ms[i].name);
        else
            put_quoted(&b, ms[i].name);
        pd_buf_puts(&b, pd_match_type_str(ms[i].type));
        put_quoted(&b, ms[i].value);
    }
    pd_buf_putc(&b, '}');
    if (b.len <= PD_SELECTOR_MAX_BYTES) {
        pd_matcher *ms2 = NULL;
        size_t n2 = 0;
        pd_err err = {{0}};
        if (pd_selector_parse(b.data, &ms2, &n2, &err) != 0) {
            fprintf(stderr, "reprinted as [%s]\n", b.data);
            die("reprinted selector does not parse", text, &err);
        }
        if (n2 != n)
            die("reprinted selector has another matcher count", text, NULL);
        for (size_t i = 0; i < n; i++)
            if (ms2[i].type != ms[i].type || strcmp(ms2[i].name, ms[i].name) ||
                strcmp(ms2[i].value, ms[i].value)) {
                fprintf(stderr, "reprinted as [%s]\n", b.data);
                die("reprinted selector gives other matchers", text, NULL);
            }
        pd_matchers_free(ms2, n2);
    }
    pd_buf_release(&b);
}

static void check_labels_format(const char *text, const pd_matcher *ms, size_t n)
{
    pd_labels ls;
    pd_labels_init(&ls);
    for (size_t i = 0; i < n; i++)
        if (ms[i].type == PD_MATCH_EQ && ms[i].value[0] && !pd_labels_get(&ls, ms[i].name))
            if (pd_labels_set(&ls, ms[i].name, ms[i].value, NULL) != 0)
                goto out; /* over a label cap: nothing to check */
    if (ls.n == 0)
        goto out;
    pd_buf b;
    pd_buf_init(&b, 0);
    if (pd_labels_format(&ls, &b) != 0)
        abort();
    if (b.len <= PD_SELECTOR_MAX_BYTES) {
        pd_matcher *ms2 = NULL;
        size_t n2 = 0;
        pd_err err = {{0}};
        if (pd_selector_parse(b.data, &ms2, &n2, &err) != 0) {
            fprintf(stderr, "pd_labels_format gave [%s]\n", b.data);
            die("pd_labels_format output does not parse", text, &err);
        }
        pd_labels back;
        pd_labels_init(&back);
        for (size_t i = 0; i < n2; i++) {
            if (ms2[i].type != PD_MATCH_EQ || pd_labels_get(&back, ms2[i].name) ||
                pd_labels_set(&back, ms2[i].name, ms2[i].value, NULL) != 0) {
                fprintf(stderr, "pd_labels_format gave [%s]\n", b.data);
                die("pd_labels_format output is not one EQ matcher per label", text, NULL);
            }
        }
        if (pd_labels_cmp(&back, &ls) != 0) {
            fprintf(stderr, "pd_labels_format gave [%s]\n", b.data);
            die("pd_labels_format output parses to another label set", text, NULL);
        }
        pd_labels_release(&back);
        pd_matchers_free(ms2, n2);
    }
    pd_buf_release(&b);
out:
    pd_labels_release(&ls);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > PD_SELECTOR_MAX_BYTES + 16)
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    pd_matcher *ms = NULL;
    size_t n = 0;
    pd_err err = {{0}};
    if (pd_selector_parse(text, &ms, &n, &err) != 0) {
        if (!err.msg[0] || ms || n)
            die("error without message, or with matchers", text, &err);
        free(text);
        return 0;
    }
    if (n == 0 || n > 256)
        die("matcher count out of range", text, NULL);
    bool nonempty = false;
    for (size_t i = 0; i < n; i++) {
        if (!pd_label_name_valid(ms[i].name))
            die("invalid label name accepted", text, NULL);
        nonempty |= !pd_matcher_matches(&ms[i], "");
    }
    if (!nonempty)
        die("selector that matches everything accepted", text, NULL);
    check_reprint(text, ms, n);
    check_labels_format(text, ms, n);
    pd_matchers_free(ms, n);
    free(text);
    return 0;
}
