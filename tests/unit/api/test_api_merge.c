/*
 * Tests of GET /api/v1/query with mode=merge|diff (api.c h_query_many over
 * query/merge.c) through real HTTP: the api handler on a real
 * pd_http_server (127.0.0.1, port 0) over a real storage in a temp
 * directory holding the real series PD_TESTDATA/pprof/go-demo-series:
 *   heap{job="demo",instance="a"}  heap-0001..0030 at 1..30 s
 *   heap{job="demo",instance="b"}  heap-0001..0010 at 1..10 s
 *   cpu{job="demo",instance="a"}   cpu-0001..0010  at 1..10 s
 *   heapbulk{job="bulk",instance="c"}  100 profiles at 1..100 s: point i is
 *                                  heap-00NN with NN = (i-1) % 30 + 1
 *   heapslow{job="slow",instance="d"} 1000 profiles at 1..1000 s, the same way,
 *                                  appended newest first (test_timeout)
 * Expected values come from the files themselves: `go tool pprof -proto`
 * merging / diffing the same files (skipped without go), or their totals
 * (pd_profile_totals of each decoded file), never from profd's own output.
 */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <cmocka.h>
#include "../pd_test.h"
#include <arpa/inet.h>
#include <ftw.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/api.h"
#include "http/server.h"
#include "pprof/pprof.h"
#include "query/query.h"
#include "base/cancel.h"
#include "base/time.h"
#include "storage/storage.h"

#ifndef PD_TESTDATA
#error "PD_TESTDATA must be defined"
#endif
#define SERIES_DIR PD_TESTDATA "/pprof/go-demo-series"

static char tmpdir[256];
static pd_storage *st;
static pd_api *api, *api_small, *api_quick;
static pd_http_server *srv, *srv_small, *srv_quick;

typedef struct reply {
    long status;
    pd_buf body;
    char ctype[128];
    char profiles[32];
} reply;

static size_t on_data(char *p, size_t sz, size_t nm, void *ud)
{
    reply *r = ud;
    pd_buf_append(&r->body, p, sz * nm);
    return sz * nm;
}

static size_t on_header(char *p, size_t sz, size_t nm, void *ud)
{
    reply *r = ud;
    size_t len = sz * nm;
    static const char h[] = "X-Profd-Profiles:";
    if (len > sizeof h && strncasecmp(p, h, sizeof h - 1) == 0) {
        size_t n = len - (sizeof h - 1);
        if (n >= sizeof r->profiles)
            n = sizeof r->profiles - 1;
        memcpy(r->profiles, p + sizeof h - 1, n);
        r->profiles[n] = 0;
    }
    return len;
}

static void get(pd_http_server *s, const char *pathq, reply *r)
{
    char url[8192];
    memset(r, 0, sizeof *r);
    pd_buf_init(&r->body, 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)pd_http_server_port(s), pathq);
    CURL *c = curl_easy_init();
    assert_non_null(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    CURLcode cc = curl_easy_perform(c);
    if (cc != CURLE_OK)
        fail_msg("curl %s: %s", url, curl_easy_strerror(cc));
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    char *ct = NULL;
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
    snprintf(r->ctype, sizeof r->ctype, "%s", ct ? ct : "");
    curl_easy_cleanup(c);
}

/* GET expecting `status`; JSON replies return the parsed envelope. */
static json_t *get_json(pd_http_server *s, const char *pathq, long status)
{
    reply r;
    get(s, pathq, &r);
    if (r.status != status)
        fail_msg("GET %s: status %ld, want %ld: %.600s", pathq, r.status, status,
                 r.body.data ? r.body.data : "");
    json_error_t je;
    json_t *j = json_loadb(r.body.data ? r.body.data : "", r.body.len, 0, &je);
    if (!j)
        fail_msg("GET %s: not JSON: %.300s", pathq, r.body.data ? r.body.data : "");
    pd_buf_release(&r.body);
    assert_string_equal(json_string_value(json_object_get(j, "status")),
                        status == 200 ? "success" : "error");
    return j;
}

/* GET of a bare JSON answer (no envelope: report=flamebearer), 200. */
static json_t *get_bare_json(pd_http_server *s, const char *pathq)
{
    reply r;
    get(s, pathq, &r);
    if (r.status != 200)
        fail_msg("GET %s: status %ld: %.600s", pathq, r.status, r.body.data ? r.body.data : "");
    json_error_t je;
    json_t *j = json_loadb(r.body.data ? r.body.data : "", r.body.len, 0, &je);
    if (!j)
        fail_msg("GET %s: not JSON: %.300s", pathq, r.body.data ? r.body.data : "");
    pd_buf_release(&r.body);
    return j;
}

static const char *jerr(json_t *j)
{
    const char *e = json_string_value(json_object_get(j, "error"));
    return e ? e : "";
}

static void read_path(const char *path, pd_buf *b)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("open %s: %s", path, strerror(errno));
    char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
        assert_int_equal(pd_buf_append(b, tmp, n), 0);
    fclose(f);
}

static void decode_path(const char *path, pd_profile *p)
{
    pd_buf b;
    pd_buf_init(&b, 0);
    read_path(path, &b);
    pd_err err = {{0}};
    if (pd_profile_decode(p, (const uint8_t *)b.data, b.len, NULL, &err))
        fail_msg("decode %s: %s", path, err.msg);
    pd_buf_release(&b);
}

static void series_file(const char *kind, int i, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s-%04d.pb.gz", SERIES_DIR, kind, i);
}

static bool have_go(void)
{
    return system("go version >/dev/null 2>&1") == 0;
}

/* Runs `go tool pprof -proto ARGS` into tmpdir/ref.pb.gz and decodes it. */
static void pprof_proto(const char *args, pd_profile *out)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd,
             "HOME=%s GOCACHE=%s/gocache GOFLAGS= go tool pprof -proto %s > %s/ref.pb.gz "
             "2>/dev/null",
             tmpdir, tmpdir, args, tmpdir);
    if (system(cmd) != 0)
        fail_msg("failed: %s", cmd);
    char path[300];
    snprintf(path, sizeof path, "%s/ref.pb.gz", tmpdir);
    decode_path(path, out);
}

/* Asserts a proto reply equals pprof's profile. */
static void proto_equals(const char *pathq, const pd_profile *ref, const char *want_profiles)
{
    reply r;
    get(srv, pathq, &r);
    if (r.status != 200)
        fail_msg("GET %s: %ld %.300s", pathq, r.status, r.body.data ? r.body.data : "");
    assert_string_equal(r.ctype, "application/octet-stream");
    if (want_profiles)
        assert_int_equal(atoi(r.profiles), atoi(want_profiles));
    pd_profile mine;
    pd_err err = {{0}};
    assert_int_equal(pd_profile_decode(&mine, (const uint8_t *)r.body.data, r.body.len, NULL, &err),
                     0);
    pd_err why = {{0}};
    if (!pd_profile_equal(&mine, ref, &why))
        fail_msg("GET %s differs from go tool pprof: %s", pathq, why.msg);
    pd_profile_release(&mine);
    pd_buf_release(&r.body);
}

/* Runs a shell command (HOME/GOCACHE in tmpdir), stdout into out. */
static void run_out(pd_buf *out, const char *fmt, ...)
{
    char cmd[32768];
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(cmd, sizeof cmd, "HOME=%s GOCACHE=%s/gocache GOFLAGS= ", tmpdir, tmpdir);
    vsnprintf(cmd + n, sizeof cmd - (size_t)n, fmt, ap);
    va_end(ap);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char tmp[65536];
    size_t r;
    while ((r = fread(tmp, 1, sizeof tmp, f)) > 0)
        assert_int_equal(pd_buf_append(out, tmp, r), 0);
    int st_ = pclose(f);
    if (st_ != 0)
        fail_msg("command failed (%d): %.400s", st_, cmd);
    assert_int_equal(pd_buf_append(out, "", 1), 0); /* NUL-terminated */
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* `go tool pprof -traces` text with the header (File:, Time: ...) cut and
 * the per-sample blocks sorted: the multiset of (values, labels, stack by
 * function name) of a profile, as pprof prints it. In place; returns
 * blocks joined into out. */
static void sorted_traces(pd_buf *text, pd_buf *out)
{
    static const char sep[] = "-----------+-------------------------------------------------------";
    char *p = strstr(text->data, sep);
    assert_non_null(p);
    size_t n = 0, cap = 1024;
    char **blocks = malloc(cap * sizeof *blocks);
    assert_non_null(blocks);
    while (p) {
        p += sizeof sep - 1;
        char *next = strstr(p, sep);
        if (next)
            *next = 0;
        if (n == cap) {
            cap *= 2;
            blocks = realloc(blocks, cap * sizeof *blocks);
            assert_non_null(blocks);
        }
        blocks[n++] = p;
        p = next;
    }
    qsort(blocks, n, sizeof *blocks, cmp_str);
    for (size_t i = 0; i < n; i++)
        pd_buf_printf(out, "%s%s", sep, blocks[i]);
    free(blocks);
}

/* The exact-integer unit of pprof -top for a sample type's unit. */
static const char *exact_unit(const char *unit)
{
    if (!strcmp(unit, "bytes"))
        return "byte";
    if (!strcmp(unit, "nanoseconds"))
        return "ns";
    return "count";
}

/* For every sample type of p: `go tool pprof -top` (every node, exact
 * units) and `go tool pprof -traces` (blocks sorted) of the two files must
 * print the same — values per function and per stack. */
static void same_pprof_text(const pd_profile *p, const char *mine, const char *ref)
{
    for (size_t t = 0; t < p->n_sample_type; t++) {
        const char *type = pd_profile_str(p, p->sample_type[t].type);
        const char *unit = exact_unit(pd_profile_str(p, p->sample_type[t].unit));
        pd_buf a, b, sa, sb;
        pd_buf_init(&a, 0);
        pd_buf_init(&b, 0);
        pd_buf_init(&sa, 0);
        pd_buf_init(&sb, 0);
        const char *top = "go tool pprof -top -nodefraction=0 -edgefraction=0 -nodecount=1000000 "
                          "-sample_index=%s -unit=%s %s 2>/dev/null";
        run_out(&a, top, type, unit, mine);
        run_out(&b, top, type, unit, ref);
        assert_true(a.len > 100);
        /* the first line names the file: skip it */
        const char *ta = strchr(a.data, '\n'), *tb = strchr(b.data, '\n');
        assert_non_null(ta);
        assert_non_null(tb);
        if (strcmp(ta, tb))
            fail_msg("pprof -top -sample_index=%s differs:\n--- profd\n%.1500s\n--- pprof\n%.1500s",
                     type, a.data, b.data);
        pd_buf_reset(&a);
        pd_buf_reset(&b);
        const char *traces = "go tool pprof -traces -sample_index=%s %s 2>/dev/null";
        run_out(&a, traces, type, mine);
        run_out(&b, traces, type, ref);
        sorted_traces(&a, &sa);
        sorted_traces(&b, &sb);
        assert_true(sa.len > 100);
        if (sa.len != sb.len || memcmp(sa.data, sb.data, sa.len))
            fail_msg("pprof -traces -sample_index=%s differs (%zu vs %zu bytes)", type, sa.len,
                     sb.len);
        pd_buf_release(&a);
        pd_buf_release(&b);
        pd_buf_release(&sa);
        pd_buf_release(&sb);
    }
}

/* GETs pathq (report=proto) into tmpdir/mine.pb.gz, returns it decoded. */
static void fetch_proto(const char *pathq, pd_profile *out, const char *want_profiles)
{
    reply r;
    get(srv, pathq, &r);
    if (r.status != 200)
        fail_msg("GET %s: %ld %.300s", pathq, r.status, r.body.data ? r.body.data : "");
    if (want_profiles)
        assert_int_equal(atoi(r.profiles), atoi(want_profiles));
    char path[300];
    snprintf(path, sizeof path, "%s/mine.pb.gz", tmpdir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(r.body.data, 1, r.body.len, f), r.body.len);
    fclose(f);
    pd_err err = {{0}};
    assert_int_equal(pd_profile_decode(out, (const uint8_t *)r.body.data, r.body.len, NULL, &err),
                     0);
    pd_buf_release(&r.body);
}

/* report=top and report=flamegraph totals of pathq (without report=) for
 * every sample type equal the totals of the proto p. */
static void report_totals_match(const char *pathq, const pd_profile *p, bool diff)
{
    int64_t tot[16] = {0};
    assert_true(p->n_sample_type <= 16);
    pd_profile_totals(p, tot);
    for (size_t t = 0; t < p->n_sample_type; t++) {
        const char *type = pd_profile_str(p, p->sample_type[t].type);
        for (int k = 0; k < 2; k++) {
            char q[4096];
            snprintf(q, sizeof q, "%s&report=%s&sample_index=%s", pathq, k ? "flamegraph" : "top",
                     type);
            json_t *j = get_json(srv, q, 200);
            json_t *d = json_object_get(j, "data");
            int64_t got = json_integer_value(json_object_get(d, k ? "value" : "total"));
            if (got != tot[t])
                fail_msg("%s: total %" PRId64 ", the proto's %" PRId64, q, got, tot[t]);
            if (diff) {
                /* base + total = new, each side the proto's own sums */
                int64_t base = json_integer_value(json_object_get(d, k ? "base" : "base_total"));
                int64_t cur = json_integer_value(json_object_get(d, k ? "new" : "new_total"));
                assert_int_equal(cur - base, tot[t]);
            }
            json_decref(j);
        }
    }
}

/* Merges of 2, 10 and 100 real profiles (one series, files cycled) through
 * HTTP: the proto equals `go tool pprof -proto` of the same files, and
 * `go tool pprof -top` / `-traces` print the same for both, for every
 * sample type; the top and flame graph totals are the proto's. */
static void test_bulk_merges_vs_pprof(void **state)
{
    (void)state;
    if (!have_go())
        skip();
    const int counts[] = {2, 10, 100};
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        int n = counts[c];
        char args[16384] = "", f[512];
        size_t o = 0;
        for (int i = 1; i <= n; i++) {
            series_file("heap", (i - 1) % 30 + 1, f, sizeof f);
            o += (size_t)snprintf(args + o, sizeof args - o, " %s", f);
        }
        assert_true(o < sizeof args - 1);
        pd_profile ref, mine;
        pprof_proto(args, &ref);
        char q[512], want[16];
        snprintf(q, sizeof q, "/api/v1/query?mode=merge&query=heapbulk&from=1&to=%d", n);
        snprintf(want, sizeof want, "%d", n);
        char qp[600];
        snprintf(qp, sizeof qp, "%s&report=proto", q);
        fetch_proto(qp, &mine, want);
        pd_err why = {{0}};
        if (!pd_profile_equal(&mine, &ref, &why))
            fail_msg("merge of %d differs from go tool pprof: %s", n, why.msg);
        char mp[300], rp[300];
        snprintf(mp, sizeof mp, "%s/mine.pb.gz", tmpdir);
        snprintf(rp, sizeof rp, "%s/ref.pb.gz", tmpdir);
        same_pprof_text(&mine, mp, rp);
        report_totals_match(q, &mine, false);
        pd_profile_release(&ref);
        pd_profile_release(&mine);
    }
}

/* A diff of two merges through HTTP (A = heap a 1..10 s, B = 21..30 s)
 * against `go tool pprof -proto -diff_base=<pprof's merge of A> B...`:
 * same proto, same -top and -traces, report totals = the proto's. Also the
 * CPU series: one profile against the merge of the last five. */
static void test_diff_merges_vs_pprof(void **state)
{
    (void)state;
    if (!have_go())
        skip();
    struct {
        const char *kind, *query;
        int a_lo, a_hi, b_lo, b_hi;
    } cases[] = {
        {"heap", "heap%7Binstance%3D%22a%22%7D", 1, 10, 21, 30},
        {"cpu", "cpu", 1, 1, 6, 10},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char args[16384] = "", f[512], base[300];
        size_t o = 0;
        for (int i = cases[c].a_lo; i <= cases[c].a_hi; i++) {
            series_file(cases[c].kind, i, f, sizeof f);
            o += (size_t)snprintf(args + o, sizeof args - o, " %s", f);
        }
        pd_profile ref, mine;
        pprof_proto(args, &ref); /* A merged by pprof */
        pd_profile_release(&ref);
        snprintf(base, sizeof base, "%s/base.pb.gz", tmpdir);
        char mv[700];
        snprintf(mv, sizeof mv, "mv %s/ref.pb.gz %s", tmpdir, base);
        assert_int_equal(system(mv), 0);
        o = (size_t)snprintf(args, sizeof args, "-diff_base=%s", base);
        for (int i = cases[c].b_lo; i <= cases[c].b_hi; i++) {
            series_file(cases[c].kind, i, f, sizeof f);
            o += (size_t)snprintf(args + o, sizeof args - o, " %s", f);
        }
        pprof_proto(args, &ref);
        char q[700], qp[800], want[16];
        snprintf(q, sizeof q,
                 "/api/v1/query?mode=diff&query=%s&mode_a=merge&from_a=%d&to_a=%d&mode_b=merge"
                 "&from_b=%d&to_b=%d",
                 cases[c].query, cases[c].a_lo, cases[c].a_hi, cases[c].b_lo, cases[c].b_hi);
        snprintf(qp, sizeof qp, "%s&report=proto", q);
        snprintf(want, sizeof want, "%d",
                 cases[c].a_hi - cases[c].a_lo + 1 + cases[c].b_hi - cases[c].b_lo + 1);
        fetch_proto(qp, &mine, want);
        pd_err why = {{0}};
        if (!pd_profile_equal(&mine, &ref, &why))
            fail_msg("%s differs from go tool pprof -diff_base: %s", q, why.msg);
        char mp[300], rp[300];
        snprintf(mp, sizeof mp, "%s/mine.pb.gz", tmpdir);
        snprintf(rp, sizeof rp, "%s/ref.pb.gz", tmpdir);
        same_pprof_text(&mine, mp, rp);
        report_totals_match(q, &mine, true);
        pd_profile_release(&ref);
        pd_profile_release(&mine);
    }
}

/* ---- tests ---- */

static void test_merge_proto_vs_pprof(void **state)
{
    (void)state;
    if (!have_go())
        skip();
    char args[16384] = "", f[512];
    size_t o = 0;
    for (int i = 1; i <= 30; i++) {
        series_file("heap", i, f, sizeof f);
        o += (size_t)snprintf(args + o, sizeof args - o, " %s", f);
    }
    pd_profile ref;
    pprof_proto(args, &ref);
    proto_equals("/api/v1/query?mode=merge&query=heap%7Binstance%3D%22a%22%7D&from=0&to=100"
                 "&report=proto",
                 &ref, "30");
    pd_profile_release(&ref);

    /* both series: instance a's 30 then b's 10 (series in label order) */
    for (int i = 1; i <= 10; i++) {
        series_file("heap", i, f, sizeof f);
        o += (size_t)snprintf(args + o, sizeof args - o, " %s", f);
    }
    pprof_proto(args, &ref);
    proto_equals("/api/v1/query?mode=merge&query=heap&from=0&to=100", &ref, "40");
    pd_profile_release(&ref);

    /* a time range: 5..14 s of instance a only */
    o = 0;
    args[0] = 0;
    for (int i = 5; i <= 14; i++) {
        series_file("heap", i, f, sizeof f);
        o += (size_t)snprintf(args + o, sizeof args - o, " %s", f);
    }
    pprof_proto(args, &ref);
    proto_equals("/api/v1/query?mode=merge&query=heap%7Binstance%3D%22a%22%7D&from=5&to=14", &ref,
                 "10");
    pd_profile_release(&ref);

    /* cpu with focus, as pprof -focus */
    o = 0;
    args[0] = 0;
    o += (size_t)snprintf(args + o, sizeof args - o, "-focus=runtime");
    for (int i = 1; i <= 10; i++) {
        series_file("cpu", i, f, sizeof f);
        o += (size_t)snprintf(args + o, sizeof args - o, " %s", f);
    }
    pprof_proto(args, &ref);
    proto_equals("/api/v1/query?mode=merge&query=cpu&from=0&to=100&focus=runtime", &ref, "10");
    pd_profile_release(&ref);
}

static void test_diff_proto_vs_pprof(void **state)
{
    (void)state;
    if (!have_go())
        skip();
    char a[512], b[512], args[2048];
    series_file("heap", 1, a, sizeof a);
    series_file("heap", 30, b, sizeof b);
    snprintf(args, sizeof args, "-diff_base=%s %s", a, b);
    pd_profile ref;
    pprof_proto(args, &ref);
    proto_equals("/api/v1/query?mode=diff&query=heap%7Binstance%3D%22a%22%7D&time_a=1&time_b=30",
                 &ref, "2");
    pd_profile_release(&ref);
}

/* Sum of sample type `type` over heap files [lo, hi]. */
static int64_t files_total(const char *kind, int lo, int hi, const char *type)
{
    int64_t sum = 0;
    for (int i = lo; i <= hi; i++) {
        char f[512];
        series_file(kind, i, f, sizeof f);
        pd_profile p;
        decode_path(f, &p);
        size_t si;
        pd_err err = {{0}};
        PD_ASSERT_OK(pd_profile_sample_index(&p, type, &si, &err), &err);
        int64_t t[16] = {0};
        pd_profile_totals(&p, t);
        sum += t[si];
        pd_profile_release(&p);
    }
    return sum;
}

/* Checks a report=flamebearer answer as Pyroscope's reader does
 * (pkg/og/structs/flamebearer Validate: levels in groups of 4, or 7 for
 * "double"; name indexes within names) and returns the sum of the self
 * values (of both sides for "double"), which must be numTicks. */
static int64_t fb_check(json_t *j, const char *format)
{
    assert_int_equal(json_integer_value(json_object_get(j, "version")), 1);
    json_t *fb = json_object_get(j, "flamebearer"), *md = json_object_get(j, "metadata");
    assert_string_equal(json_string_value(json_object_get(md, "format")), format);
    assert_true(json_is_null(json_object_get(j, "timeline")));
    size_t step = strcmp(format, "single") ? 7 : 4,
           n_names = json_array_size(json_object_get(fb, "names"));
    assert_true(n_names > 1);
    int64_t self = 0;
    json_t *lv;
    size_t l;
    json_array_foreach(json_object_get(fb, "levels"), l, lv)
    {
        assert_int_equal(json_array_size(lv) % step, 0);
        for (size_t i = 0; i < json_array_size(lv); i += step) {
            size_t ni = (size_t)json_integer_value(json_array_get(lv, i + step - 1));
            assert_true(ni < n_names);
            self += json_integer_value(json_array_get(lv, i + 2));
            if (step == 7)
                self += json_integer_value(json_array_get(lv, i + 5));
        }
    }
    assert_int_equal(json_integer_value(json_object_get(fb, "numTicks")), self);
    return self;
}

static void test_reports(void **state)
{
    (void)state;
    /* top of a merge of both heap series */
    json_t *j = get_json(srv,
                         "/api/v1/query?mode=merge&query=heap&from=0&to=100&report=top"
                         "&sample_index=alloc_space&nodes=5",
                         200);
    json_t *d = json_object_get(j, "data");
    int64_t want =
        files_total("heap", 1, 30, "alloc_space") + files_total("heap", 1, 10, "alloc_space");
    assert_int_equal(json_integer_value(json_object_get(d, "total")), want);
    assert_int_equal(json_array_size(json_object_get(d, "rows")), 5);
    int64_t rows_total = json_integer_value(json_object_get(d, "rows_total"));
    assert_true(rows_total > 5);
    assert_int_equal(json_integer_value(json_object_get(d, "rows_cut")), rows_total - 5);
    json_decref(j);

    /* flame graph with a node cap: the same total, the cut reported */
    j = get_json(srv,
                 "/api/v1/query?mode=merge&query=heap&from=0&to=100&report=flamegraph"
                 "&sample_index=alloc_space&nodes=10",
                 200);
    d = json_object_get(j, "data");
    assert_int_equal(json_integer_value(json_object_get(d, "value")), want);
    assert_int_equal(json_integer_value(json_object_get(d, "nodes")), 10);
    assert_true(json_integer_value(json_object_get(d, "nodes_total")) > 10);
    json_decref(j);

    /* flamebearer (Pyroscope's export format) of the merge: its total, its name */
    j = get_bare_json(srv, "/api/v1/query?mode=merge&query=heap&from=0&to=100&report=flamebearer"
                           "&sample_index=alloc_space");
    assert_int_equal(fb_check(j, "single"), want);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "metadata"), "units")),
                        "bytes");
    assert_int_equal(
        strncmp(json_string_value(json_object_get(json_object_get(j, "metadata"), "name")),
                "heap:alloc_space:bytes:", 23),
        0);
    json_decref(j);
    /* and of one profile (the single path) */
    j = get_bare_json(srv,
                      "/api/v1/query?query=heap%7Binstance%3D%22a%22%7D&time=30&report=flamebearer"
                      "&sample_index=inuse_space");
    assert_int_equal(fb_check(j, "single"), files_total("heap", 30, 30, "inuse_space"));
    json_decref(j);

    /* folded: text lines "a;b;c N" summing to the total */
    reply r;
    get(srv,
        "/api/v1/query?mode=merge&query=heap&from=0&to=100&report=folded"
        "&sample_index=alloc_space",
        &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.ctype, "text/plain"));
    int64_t sum = 0;
    size_t lines = 0;
    for (char *line = r.body.data; line && *line; lines++) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        char *sp = nl;
        while (sp > line && sp[-1] != ' ')
            sp--;
        assert_true(sp > line + 1);
        sum += strtoll(sp, NULL, 10);
        line = nl + 1;
    }
    assert_true(lines > 10);
    assert_int_equal(sum, want);
    assert_non_null(strstr(r.body.data, "main.churn"));
    pd_buf_release(&r.body);

    /* by=instance keeps the two series apart as a sample label */
    get(srv, "/api/v1/query?mode=merge&query=heap&from=0&to=100&by=instance", &r);
    assert_int_equal(r.status, 200);
    pd_profile p;
    pd_err err = {{0}};
    assert_int_equal(pd_profile_decode(&p, (const uint8_t *)r.body.data, r.body.len, NULL, &err),
                     0);
    size_t with_a = 0, with_b = 0;
    for (size_t i = 0; i < p.n_sample; i++) {
        assert_int_equal(p.sample[i].n_label, 1); /* bytes dropped, instance added */
        const char *k = pd_profile_str(&p, p.sample[i].label[0].key);
        const char *v = pd_profile_str(&p, p.sample[i].label[0].str);
        assert_string_equal(k, "instance");
        with_a += !strcmp(v, "a");
        with_b += !strcmp(v, "b");
    }
    assert_true(with_a > 0 && with_b > 0);
    pd_profile_release(&p);
    pd_buf_release(&r.body);

    /* a single profile through the merger (hide=): no runtime frame left */
    get(srv, "/api/v1/query?query=heap%7Binstance%3D%22a%22%7D&time=30&hide=%5Eruntime", &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(atoi(r.profiles), 1);
    assert_int_equal(pd_profile_decode(&p, (const uint8_t *)r.body.data, r.body.len, NULL, &err),
                     0);
    assert_true(p.n_function > 0);
    for (size_t i = 0; i < p.n_location; i++)
        for (size_t l = 0; l < p.location[i].n_line; l++) {
            const pd_pprof_function *f = pd_profile_function(&p, p.location[i].line[l].function_id);
            assert_true(strncmp(pd_profile_str(&p, f->name), "runtime", 7) != 0);
        }
    pd_profile_release(&p);
    pd_buf_release(&r.body);

    /* callgraph via Graphviz */
    if (system("dot -V >/dev/null 2>&1") == 0) {
        get(srv, "/api/v1/query?mode=merge&query=cpu&from=0&to=100&report=callgraph", &r);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.ctype, "image/svg+xml");
        assert_non_null(strstr(r.body.data, "<svg"));
        assert_non_null(strstr(r.body.data, "main.fib"));
        pd_buf_release(&r.body);
    }
}

static void test_diff_reports(void **state)
{
    (void)state;
    /* heap a at 1 s (base) against heap a merged over 21..30 s (new) */
    json_t *j = get_json(srv,
                         "/api/v1/query?mode=diff&query_a=heap%7Binstance%3D%22a%22%7D&time_a=1"
                         "&query_b=heap%7Binstance%3D%22a%22%7D&mode_b=merge&from_b=21&to_b=30"
                         "&report=top&sample_index=inuse_space&nodes=0",
                         200);
    json_t *d = json_object_get(j, "data");
    int64_t base = files_total("heap", 1, 1, "inuse_space");
    int64_t cur = files_total("heap", 21, 30, "inuse_space");
    assert_int_equal(json_integer_value(json_object_get(d, "base_total")), base);
    assert_int_equal(json_integer_value(json_object_get(d, "new_total")), cur);
    assert_int_equal(json_integer_value(json_object_get(d, "total")), cur - base);
    /* per row: new - base == flat */
    json_t *row;
    size_t i;
    int64_t sum_new = 0;
    json_array_foreach(json_object_get(d, "rows"), i, row)
    {
        int64_t flat = json_integer_value(json_object_get(row, "flat"));
        int64_t bf = json_integer_value(json_object_get(row, "base_flat"));
        int64_t nf = json_integer_value(json_object_get(row, "new_flat"));
        assert_int_equal(flat, nf - bf);
        sum_new += nf;
    }
    assert_int_equal(sum_new, cur);
    json_decref(j);

    /* flame graph of the diff: root carries both sides */
    j = get_json(srv,
                 "/api/v1/query?mode=diff&query=heap%7Binstance%3D%22a%22%7D&time_a=1&time_b=30"
                 "&report=flamegraph&sample_index=inuse_space",
                 200);
    d = json_object_get(j, "data");
    assert_int_equal(json_integer_value(json_object_get(d, "base")), base);
    assert_int_equal(json_integer_value(json_object_get(d, "new")),
                     files_total("heap", 30, 30, "inuse_space"));
    json_decref(j);

    /* flamebearer of the diff: Pyroscope's "double", leftTicks the base's total */
    j = get_bare_json(srv, "/api/v1/query?mode=diff&query_a=heap%7Binstance%3D%22a%22%7D&time_a=1"
                           "&query_b=heap%7Binstance%3D%22a%22%7D&mode_b=merge&from_b=21&to_b=30"
                           "&report=flamebearer&sample_index=inuse_space");
    assert_int_equal(fb_check(j, "double"), base + cur);
    assert_int_equal(json_integer_value(json_object_get(j, "leftTicks")), base);
    assert_int_equal(json_integer_value(json_object_get(j, "rightTicks")), cur);
    json_decref(j);
}

static void test_errors(void **state)
{
    (void)state;
    /* sample types differ (heap and cpu match): 400 naming both series */
    json_t *j =
        get_json(srv, "/api/v1/query?mode=merge&query=%7Bjob%3D%22demo%22%7D&from=0&to=100", 400);
    assert_string_equal(json_string_value(json_object_get(j, "errorType")), "bad_data");
    assert_non_null(strstr(jerr(j), "sample types"));
    assert_non_null(strstr(jerr(j), "heap{"));
    assert_non_null(strstr(jerr(j), "cpu{"));
    json_decref(j);
    /* the same across the two sides of a diff */
    j = get_json(
        srv,
        "/api/v1/"
        "query?mode=diff&query_a=cpu&time_a=5&query_b=heap%7Binstance%3D%22a%22%7D&time_b=5",
        400);
    assert_non_null(strstr(jerr(j), "(query_a)"));
    assert_non_null(strstr(jerr(j), "(query_b)"));
    json_decref(j);

    struct {
        const char *q, *needle;
        long status;
    } bad[] = {
        {"/api/v1/query?mode=bogus&query=heap", "mode", 400},
        {"/api/v1/query?mode=merge&query=heap&report=bogus", "report", 400},
        {"/api/v1/query?mode=merge", "query", 400},
        {"/api/v1/query?mode=diff&query_b=heap", "query_a", 400},
        {"/api/v1/query?mode=diff&query=heap&mode_a=bogus", "mode_a", 400},
        {"/api/v1/query?mode=merge&query=heap&from=0&to=100&focus=(", "focus", 400},
        {"/api/v1/query?mode=merge&query=heap%7B&from=0&to=100", "query", 400},
        {"/api/v1/query?mode=merge&query=heap&from=10&to=5", "to", 400},
        {"/api/v1/query?mode=merge&query=nosuch&from=0&to=100", "nosuch", 404},
        {"/api/v1/query?mode=merge&query=heap&from=0&to=100&sample_index=bogus", "sample_index",
         400},
        {"/api/v1/query?mode=merge&query=heap&from=0&to=100&agg=mean", "agg", 400},
        {"/api/v1/query?mode=diff&query_a=heap&query_b=heap&normalize=yes", "normalize", 400},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        j = get_json(srv, bad[i].q, bad[i].status);
        if (!strstr(jerr(j), bad[i].needle))
            fail_msg("%s: error \"%s\" does not name %s", bad[i].q, jerr(j), bad[i].needle);
        json_decref(j);
    }

    /* --query.max-samples (5 on the second server): 422 saying so */
    j = get_json(srv_small, "/api/v1/query?mode=merge&query=heap&from=0&to=100&report=top", 422);
    assert_non_null(strstr(jerr(j), "--query.max-samples"));
    json_decref(j);
}

/* A clock an hour ahead: every deadline has passed (test_timeout). */
static int64_t clock_hour_ahead(void)
{
    return pd_mono_ns() + 3600ll * 1000000000;
}

/* --query.timeout (1 ms on the third server): with the merge's clock moved
 * past it (pd_query_clock_ns) the merge stops with 503 naming the flag
 * (errorType timeout) however fast the machine;
 * a diff too. The same merges succeed on the first server. */
static void test_timeout(void **state)
{
    (void)state;
    const char *qs[] = {
        "/api/v1/query?mode=merge&query=heapslow&from=0&to=1000&report=top",
        "/api/v1/query?mode=diff&query=heapslow&mode_a=merge&from_a=1&to_a=500&mode_b=merge"
        "&from_b=501&to_b=1000&report=flamegraph",
    };
    for (size_t i = 0; i < sizeof qs / sizeof *qs; i++) {
        /* the merge's clock moved past the 1 ms: the timeout fires at the
           first check whatever the machine's speed */
        __atomic_store_n(&pd_query_clock_ns, clock_hour_ahead, __ATOMIC_RELEASE);
        json_t *j = get_json(srv_quick, qs[i], 503);
        __atomic_store_n(&pd_query_clock_ns, pd_mono_ns, __ATOMIC_RELEASE);
        assert_string_equal(json_string_value(json_object_get(j, "errorType")), "timeout");
        if (!strstr(jerr(j), "--query.timeout"))
            fail_msg("%s: error \"%s\" does not name --query.timeout", qs[i], jerr(j));
        json_decref(j);
        json_decref(get_json(srv, qs[i], 200));
    }
}

/* Sends one GET for pathq on a raw socket to srv; with half_close, shuts
 * down the sending side right after (the client is gone as far as the
 * server can tell, but can still read the reply). The whole reply into out. */
static void raw_get(const char *pathq, bool half_close, pd_buf *out)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(pd_http_server_port(srv))};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    char req[2048];
    int n =
        snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", pathq);
    assert_int_equal(send(fd, req, (size_t)n, 0), n);
    if (half_close)
        assert_int_equal(shutdown(fd, SHUT_WR), 0);
    char buf[65536];
    ssize_t r;
    while ((r = recv(fd, buf, sizeof buf, 0)) > 0)
        assert_int_equal(pd_buf_append(out, buf, (size_t)r), 0);
    close(fd);
    assert_int_equal(pd_buf_append(out, "", 1), 0);
}

/* test_client_disconnect_cancels' merge clock: on the thread that runs a
 * request (its cancel token bound) it does not move on until the token
 * trips — the client is seen gone (base/cancel.h) — so the merge cannot
 * finish before the client's half-close reaches the server, however the
 * threads are scheduled. hold_until_ns (pd_mono_ns, __atomic) bounds the
 * wait for a server that never notices: past it the merge goes on, answers
 * 200, and the test fails. */
static int64_t hold_until_ns;

static int64_t clock_until_client_gone(void)
{
    struct timespec ts = {0, 1000000};
    while (pd_cancel_current() && !pd_cancel_requested() &&
           pd_mono_ns() < __atomic_load_n(&hold_until_ns, __ATOMIC_RELAXED))
        nanosleep(&ts, NULL);
    return pd_mono_ns();
}

/* A client that disconnects cancels its query: the merge polls the
 * connection and stops (the reply, readable after a half-close, says so),
 * where the same request from a client that stays gets its 200. */
static void test_client_disconnect_cancels(void **state)
{
    (void)state;
    const char *q = "/api/v1/query?mode=merge&query=heapbulk&from=0&to=100&report=top";
    pd_buf b;
    pd_buf_init(&b, 0);
    raw_get(q, false, &b);
    if (strncmp(b.data, "HTTP/1.1 200", 12))
        fail_msg("staying client: %.300s", b.data);
    assert_non_null(strstr(b.data, "X-Profd-Profiles: 100"));
    /* the half-close raced the merge (100 profiles sum in well under a
       millisecond; on a loaded machine the client can be descheduled
       between send() and shutdown() while the whole merge runs): the
       merge's clock now waits for the cancel, so only a server that does
       not notice the client leave, or a merge that does not stop for it,
       answers 200 */
    __atomic_store_n(&hold_until_ns, pd_mono_ns() + 60ll * 1000000000, __ATOMIC_RELAXED);
    __atomic_store_n(&pd_query_clock_ns, clock_until_client_gone, __ATOMIC_RELEASE);
    pd_buf_reset(&b);
    raw_get(q, true, &b);
    __atomic_store_n(&pd_query_clock_ns, pd_mono_ns, __ATOMIC_RELEASE);
    if (!strstr(b.data, "query canceled by the client"))
        fail_msg("the query of a client that hung up was not canceled: %.300s", b.data);
    pd_buf_release(&b);
}

/* ---- fixture ---- */

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static int append_as(const char *kind, int i, const char *name, const char *job,
                     const char *instance, int64_t t_ms)
{
    char f[512];
    series_file(kind, i, f, sizeof f);
    pd_buf b;
    pd_buf_init(&b, 0);
    FILE *fp = fopen(f, "rb");
    if (!fp)
        return -1;
    char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, fp)) > 0)
        pd_buf_append(&b, tmp, n);
    fclose(fp);
    pd_profile p;
    pd_err err = {{0}};
    int rc = pd_profile_decode(&p, (const uint8_t *)b.data, b.len, NULL, &err);
    if (rc == 0) {
        pd_labels ls;
        pd_labels_init(&ls);
        pd_labels_set(&ls, "__name__", name, &err);
        pd_labels_set(&ls, "job", job, &err);
        pd_labels_set(&ls, "instance", instance, &err);
        rc = pd_storage_append(st, &ls, t_ms, (const uint8_t *)b.data, b.len, &p, &err);
        pd_labels_release(&ls);
        pd_profile_release(&p);
    }
    if (rc)
        fprintf(stderr, "append %s: %s\n", f, err.msg);
    pd_buf_release(&b);
    return rc;
}

static int append_file(const char *kind, int i, const char *instance)
{
    return append_as(kind, i, kind, "demo", instance, (int64_t)i * 1000);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/profd-test-api-merge-XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    pd_storage_options so = pd_storage_options_default();
    so.path = tmpdir;
    so.fsync = PD_FSYNC_NEVER;
    so.retention_ms = -1; /* synthetic times from 1970: no lower time bound */
    pd_err err = {{0}};
    if (pd_storage_open(&so, &st, &err) != 0) {
        fprintf(stderr, "storage open: %s\n", err.msg);
        return -1;
    }
    for (int i = 1; i <= 30; i++)
        if (append_file("heap", i, "a"))
            return -1;
    for (int i = 1; i <= 10; i++)
        if (append_file("heap", i, "b") || append_file("cpu", i, "a"))
            return -1;
    for (int i = 1; i <= 100; i++)
        if (append_as("heap", (i - 1) % 30 + 1, "heapbulk", "bulk", "c", (int64_t)i * 1000))
            return -1;
    /* test_timeout: enough profiles that their merge takes well over 1 ms
       (the merge pushed into storage sums 100 in well under it); appended
       newest first, so that no head group is in time order and none has a
       sum (the head's aggregates would add 1,000 as 32 sums, under 1 ms) */
    for (int i = 1000; i >= 1; i--)
        if (append_as("heap", (i - 1) % 30 + 1, "heapslow", "slow", "d", (int64_t)i * 1000))
            return -1;
    pd_api_options ao = {.version = "test"};
    pd_api_options small = {.version = "test", .query_max_samples = 5};
    pd_api_options quick = {.version = "test", .query_timeout_ms = 1};
    if (pd_api_new(st, NULL, &ao, &api, &err) != 0 ||
        pd_api_new(st, NULL, &small, &api_small, &err) != 0 ||
        pd_api_new(st, NULL, &quick, &api_quick, &err) != 0)
        return -1;
    if (pd_http_server_start("127.0.0.1:0", 4, 8 << 20, pd_api_handle, api, &srv, &err) != 0 ||
        pd_http_server_start("127.0.0.1:0", 2, 8 << 20, pd_api_handle, api_small, &srv_small,
                             &err) != 0 ||
        pd_http_server_start("127.0.0.1:0", 2, 8 << 20, pd_api_handle, api_quick, &srv_quick,
                             &err) != 0) {
        fprintf(stderr, "http: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pd_http_server_stop(srv);
    pd_http_server_stop(srv_small);
    pd_http_server_stop(srv_quick);
    pd_api_free(api);
    pd_api_free(api_small);
    pd_api_free(api_quick);
    pd_storage_close(st);
    nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_proto_vs_pprof),
        cmocka_unit_test(test_diff_proto_vs_pprof),
        cmocka_unit_test(test_bulk_merges_vs_pprof),
        cmocka_unit_test(test_diff_merges_vs_pprof),
        cmocka_unit_test(test_reports),
        cmocka_unit_test(test_diff_reports),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_client_disconnect_cancels),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
