/*
 * api/source.c — GET /api/v1/source (issue 31 item 7): one function's
 * source file with its cost per line, for the UI's source view (as Parca's
 * and Pyroscope's).
 *
 *   function=NAME (required: the function as the flame graph and the top
 *   table name it), file=PATH (optional: which of its files, when a name
 *   lives in several; default the one with the largest total), and the
 *   selection parameters of a merge-path /api/v1/query: query, mode=single
 *   (time) or merge (from, to, exclude), sample_index, focus/ignore/hide,
 *   agg, delta, span_id. mode=diff is refused (400).
 *
 * The selection is merged by the query engine (pd__api_query_profile, so
 * address-only frames are named with DWARF lines by symbolize/), summed by
 * line (query.h pd_query_function_lines), and the file found by
 * symbolize/source.h (debuginfod by the frames' build IDs, then
 * --ui.source-dir). Answer, in Prometheus' envelope:
 *   {"function","file","files":[..],"sample_type":{"type","unit"},
 *    "profile_total","self","total","no_line":{"self","total"},
 *    "source":{"origin":"debuginfod","build_id"} | {"origin":"directory","path"},
 *    "hottest":LINE, "stale":bool, "lines_in_file":N,
 *    "lines":[{"line","text","self","total"}...]}   (every line of the file)
 * stale: a line with cost lies past the file's end (the file is another
 * version than the program's). hottest: the line with the largest self
 * (the largest total when no line has self; 0 when none).
 * 404 naming the function and what was tried when there is no source, or
 * no line numbers; 400 naming the parameter for bad input (counted in
 * profd_rejected_input_total{reason="query_bad_param"}).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"
#include "base/metrics.h"
#include "query/query.h"
#include "symbolize/source.h"

#define H "/api/v1/source"
#define MAX_PARAM_BYTES 4096

/* The error envelope; a 400 is counted as a bad query parameter. */
#define error_reply(resp, status, ...)                                                             \
    do {                                                                                           \
        if ((status) == 400)                                                                       \
            pd_metrics_add("profd_rejected_input_total", "reason=\"query_bad_param\"", 1);         \
        pd__api_reply_error((resp), (status), __VA_ARGS__);                                        \
    } while (0)

/* True when s has a ".." path component. */
static bool dotdot(const char *s)
{
    for (const char *p = s; (p = strstr(p, "..")); p += 2)
        if ((p == s || p[-1] == '/') && (p[2] == 0 || p[2] == '/'))
            return true;
    return false;
}

static int put_str(pd_buf *b, const char *key, const char *v)
{
    int rc = pd_buf_printf(b, ",\"%s\":", key);
    return rc ? rc : pd_buf_put_json_string(b, v, strlen(v));
}

/* The answer for fl (of function fn, sample type st of p) and the file's
 * text src. */
static int put_answer(pd_buf *b, const char *fn, const pd_function_lines *fl, const pd_profile *p,
                      size_t si, int64_t profile_total, const pd_source_file *src)
{
    /* the hottest line and the file's lines */
    int64_t hot = 0, best = 0;
    bool by_self = false;
    for (size_t i = 0; i < fl->n_lines; i++)
        by_self |= fl->lines[i].self != 0;
    for (size_t i = 0; i < fl->n_lines; i++) {
        int64_t v = by_self ? fl->lines[i].self : fl->lines[i].total;
        if (v > best) {
            best = v;
            hot = fl->lines[i].line;
        }
    }
    size_t n_text = 0;
    for (size_t i = 0; i < src->len; i++)
        n_text += src->text[i] == '\n';
    if (src->len && src->text[src->len - 1] != '\n')
        n_text++;
    bool stale = fl->n_lines && fl->lines[fl->n_lines - 1].line > (int64_t)n_text;

    int rc = pd_buf_puts(b, "{\"function\":");
    if (!rc)
        rc = pd_buf_put_json_string(b, fn, strlen(fn));
    if (!rc)
        rc = put_str(b, "file", fl->file);
    if (!rc)
        rc = pd_buf_puts(b, ",\"files\":[");
    for (size_t i = 0; i < fl->n_files && !rc; i++) {
        if (i)
            rc = pd_buf_putc(b, ',');
        if (!rc)
            rc = pd_buf_put_json_string(b, fl->files[i], strlen(fl->files[i]));
    }
    if (!rc)
        rc = pd_buf_puts(b, "],\"sample_type\":{\"type\":");
    const char *t = pd_profile_str(p, p->sample_type[si].type),
               *u = pd_profile_str(p, p->sample_type[si].unit);
    if (!rc)
        rc = pd_buf_put_json_string(b, t, strlen(t));
    if (!rc)
        rc = put_str(b, "unit", u);
    if (!rc)
        rc = pd_buf_printf(b,
                           "},\"profile_total\":%" PRId64 ",\"self\":%" PRId64 ",\"total\":%" PRId64
                           ",\"no_line\":{\"self\":%" PRId64 ",\"total\":%" PRId64
                           "},\"source\":{\"origin\":",
                           profile_total, fl->self, fl->total, fl->no_line_self, fl->no_line_total);
    if (!rc)
        rc = pd_buf_put_json_string(b, src->origin, strlen(src->origin));
    if (!rc)
        rc = put_str(b, strcmp(src->origin, "debuginfod") == 0 ? "build_id" : "path", src->where);
    if (!rc)
        rc = pd_buf_printf(b,
                           "},\"hottest\":%" PRId64 ",\"stale\":%s,\"lines_in_file\":%zu,"
                           "\"lines\":[",
                           hot, stale ? "true" : "false", n_text);
    size_t k = 0; /* next cost line */
    const char *s = src->text, *end = src->text + src->len;
    for (int64_t ln = 1; s < end && !rc; ln++) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t len = nl ? (size_t)(nl - s) : (size_t)(end - s);
        if (len && s[len - 1] == '\r')
            len--;
        int64_t self = 0, total = 0;
        while (k < fl->n_lines && fl->lines[k].line < ln)
            k++;
        if (k < fl->n_lines && fl->lines[k].line == ln) {
            self = fl->lines[k].self;
            total = fl->lines[k].total;
        }
        rc = pd_buf_printf(b, "%s{\"line\":%" PRId64 ",\"text\":", ln > 1 ? "," : "", ln);
        if (!rc)
            rc = pd_buf_put_json_string(b, s, len);
        if (!rc)
            rc = pd_buf_printf(b, ",\"self\":%" PRId64 ",\"total\":%" PRId64 "}", self, total);
        s = nl ? nl + 1 : end;
    }
    if (!rc)
        rc = pd_buf_puts(b, "]}");
    return rc;
}

const char *pd__api_source(pd_api *api, const pd_http_request *req, pd_http_response *resp)
{
    const char *fn = pd_http_arg(req, "function"), *file = pd_http_arg(req, "file");
    if (!fn || !*fn) {
        error_reply(resp, 400,
                    "invalid parameter \"function\": missing (a function name as the flame "
                    "graph shows it, e.g. function=main.hotLoop)");
        return H;
    }
    if (strlen(fn) > MAX_PARAM_BYTES || !pd__api_utf8_valid(fn, strlen(fn))) {
        error_reply(resp, 400, "invalid parameter \"function\": not UTF-8 or over %d bytes",
                    MAX_PARAM_BYTES);
        return H;
    }
    if (file && !*file)
        file = NULL;
    if (file && (strlen(file) > MAX_PARAM_BYTES || !pd__api_utf8_valid(file, strlen(file)))) {
        error_reply(resp, 400, "invalid parameter \"file\": not UTF-8 or over %d bytes",
                    MAX_PARAM_BYTES);
        return H;
    }
    if (file && dotdot(file)) {
        error_reply(resp, 400,
                    "invalid parameter \"file\": \"%.300s\" has a \"..\" component (a file as "
                    "the profile names it, never a path to walk)",
                    file);
        return H;
    }
    pd_profile p;
    pd_merge_stats stats;
    bool diff = false;
    if (pd__api_query_profile(api, req, resp, false, &p, &stats, &diff) < 0)
        return H;
    pd_err err = {{0}};
    pd_function_lines fl;
    memset(&fl, 0, sizeof fl);
    pd_source_file src;
    memset(&src, 0, sizeof src);
    pd_buf tried;
    pd_buf_init(&tried, 16384);
    size_t si = 0;
    const char *sis = pd_http_arg(req, "sample_index");
    int rc = pd_profile_sample_index(&p, sis && *sis ? sis : NULL, &si, &err);
    if (rc < 0) {
        error_reply(resp, 400, "invalid parameter \"sample_index\": %s", err.msg);
        goto out;
    }
    rc = pd_query_function_lines(&p, si, fn, file, &fl, &err);
    if (rc < 0) {
        error_reply(resp, rc == PD_ENOTFOUND ? 404 : 500, "%s", err.msg);
        goto out;
    }
    if (!fl.n_lines) {
        error_reply(resp, 404,
                    "function \"%.300s\" has no line numbers in this profile (file \"%.300s\"): "
                    "its frames were named without DWARF lines (e.g. by the program itself); "
                    "nothing to show per line",
                    fn, fl.file);
        goto out;
    }
    pd_source_opts so = {
        .dirs = api->o.source_dirs, .n_dirs = api->o.n_source_dirs, .use_debuginfod = true};
    rc = pd_source_find(&so, (const char *const *)fl.build_ids, fl.n_build_ids, fl.file, &src,
                        &tried);
    if (rc == PD_ENOTFOUND) {
        error_reply(resp, 404, "no source for function \"%.300s\" (file \"%.500s\"): tried %.1000s",
                    fn, fl.file, tried.len ? tried.data : "nothing");
        goto out;
    }
    if (rc < 0) {
        error_reply(resp, 500, "reading the source of \"%.300s\": %s", fn, pd_strerror(rc));
        goto out;
    }
    int64_t profile_total = 0;
    for (size_t i = 0; i < p.n_sample; i++)
        if (si < p.sample[i].n_value)
            profile_total += p.sample[i].value[si];
    rc = pd__api_begin_success(resp);
    if (!rc)
        rc = put_answer(&resp->body, fn, &fl, &p, si, profile_total, &src);
    if (!rc)
        rc = pd__api_end_success(resp);
    if (rc < 0)
        error_reply(resp, rc == PD_ETOOBIG ? 422 : 500, "source of \"%.300s\": %s", fn,
                    rc == PD_ETOOBIG ? "over the reply size limit" : pd_strerror(rc));
out:
    pd_buf_release(&tried);
    pd_source_file_release(&src);
    pd_function_lines_release(&fl);
    pd_profile_release(&p);
    return H;
}
