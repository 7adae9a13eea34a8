/*
 * Tests of api/api.c through real HTTP: the api handler on a real
 * pd_http_server (127.0.0.1, port 0) over a real storage in a temp
 * directory, no scrape manager. Profiles are real ones from
 * PD_TESTDATA/pprof, pushed with libcurl the way profefe's clients do;
 * replies are parsed with jansson. Expected values come from decoding the
 * pushed files independently (pd_profile_decode, pd_profile_totals), never
 * from the api's own output.
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
#include <dirent.h>
#include <ftw.h>
#include <unistd.h>

#include "api/api.h"
#include "base/metrics.h"
#include "base/time.h"
#include "http/server.h"
#include "pprof/pprof.h"
#include "storage/storage.h"

#ifndef PD_TESTDATA
#error "PD_TESTDATA must be defined"
#endif
#define PPROF_DIR PD_TESTDATA "/pprof"

static char tmpdir[256];
static pd_storage *st;
static pd_api *api;
static pd_http_server *srv;
static int reload_calls;
static int reload_fail;

static int reload_cb(void *ctx, pd_err *err)
{
    (void)ctx;
    __atomic_add_fetch(&reload_calls, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&reload_fail, __ATOMIC_SEQ_CST))
        return pd_err_set(err, PD_EPARSE, "test.yaml:3:1: unknown key \"bogus\"");
    return 0;
}

/* ---- helpers ---- */

typedef struct reply {
    long status;
    pd_buf body;
    char ctype[128];
    char disposition[256];
    char x_ts[64];
    char x_series[512];
} reply;

static size_t on_data(char *p, size_t sz, size_t nm, void *ud)
{
    reply *r = ud;
    pd_buf_append(&r->body, p, sz * nm);
    return sz * nm;
}

static void grab(const char *line, const char *name, char *dst, size_t cap)
{
    size_t nl = strlen(name);
    if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
        const char *v = line + nl + 1;
        while (*v == ' ')
            v++;
        snprintf(dst, cap, "%s", v);
        char *cr = strpbrk(dst, "\r\n");
        if (cr)
            *cr = 0;
    }
}

static size_t on_header(char *p, size_t sz, size_t nm, void *ud)
{
    reply *r = ud;
    size_t len = sz * nm;
    char line[1024];
    if (len >= sizeof line)
        return len;
    memcpy(line, p, len);
    line[len] = 0;
    grab(line, "Content-Disposition", r->disposition, sizeof r->disposition);
    grab(line, "X-Profd-Timestamp", r->x_ts, sizeof r->x_ts);
    grab(line, "X-Profd-Series", r->x_series, sizeof r->x_series);
    return len;
}

/* method NULL: GET (or POST when body != NULL). pathq is appended to the base URL. */
static void req(const char *method, const char *pathq, const void *body, size_t len,
                const char *ctype, reply *r)
{
    char url[4096];
    memset(r, 0, sizeof *r);
    pd_buf_init(&r->body, 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)pd_http_server_port(srv), pathq);
    CURL *c = curl_easy_init();
    assert_non_null(c);
    struct curl_slist *hs = NULL;
    if (ctype) {
        char h[160];
        snprintf(h, sizeof h, "Content-Type: %s", ctype);
        hs = curl_slist_append(hs, h);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    if (method)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    CURLcode cc = curl_easy_perform(c);
    if (cc != CURLE_OK)
        fail_msg("curl %s: %s", url, curl_easy_strerror(cc));
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    char *ct = NULL;
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
    snprintf(r->ctype, sizeof r->ctype, "%s", ct ? ct : "");
    curl_slist_free_all(hs);
    curl_easy_cleanup(c);
}

/* URL-encodes s (every byte but unreserved ones). Returns a static-size copy. */
static void enc(const char *s, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (; *s && o + 4 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '_' || ch == '.' || ch == '~') {
            out[o++] = (char)ch;
        } else {
            out[o++] = '%';
            out[o++] = hex[ch >> 4];
            out[o++] = hex[ch & 15];
        }
    }
    out[o] = 0;
}

/* Parses a reply as JSON; fails the test when it is not. Caller json_decref's. */
static json_t *jparse(const reply *r)
{
    json_error_t je;
    json_t *j = json_loadb(r->body.data ? r->body.data : "", r->body.len, 0, &je);
    if (!j)
        fail_msg("reply is not JSON (%s): %.300s", je.text, r->body.data ? r->body.data : "");
    return j;
}

/* GETs pathq, expects `status` and the Prometheus envelope; returns "data"
 * (success) or the whole object (error), with a reference the caller drops
 * via *root. */
static json_t *get_json(const char *pathq, long status, json_t **root)
{
    reply r;
    req(NULL, pathq, NULL, 0, NULL, &r);
    if (r.status != status)
        fail_msg("GET %s: status %ld, want %ld: %.400s", pathq, r.status, status,
                 r.body.data ? r.body.data : "");
    assert_non_null(strstr(r.ctype, "application/json"));
    json_t *j = jparse(&r);
    pd_buf_release(&r.body);
    *root = j;
    const char *st_ = json_string_value(json_object_get(j, "status"));
    assert_non_null(st_);
    if (status == 200) {
        assert_string_equal(st_, "success");
        json_t *d = json_object_get(j, "data");
        assert_non_null(d);
        return d;
    }
    assert_string_equal(st_, "error");
    assert_non_null(json_string_value(json_object_get(j, "errorType")));
    assert_non_null(json_string_value(json_object_get(j, "error")));
    return j;
}

static const char *jerr(json_t *j)
{
    return json_string_value(json_object_get(j, "error"));
}

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("open %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void decode_file(const char *rel, pd_profile *p)
{
    char path[512];
    size_t len;
    snprintf(path, sizeof path, "%s/%s", PPROF_DIR, rel);
    uint8_t *b = read_file(path, &len);
    pd_err err = {{0}};
    if (pd_profile_decode(p, b, len, NULL, &err) != 0)
        fail_msg("decode %s: %s", rel, err.msg);
    free(b);
}

/* Pushes file rel with query string qs; returns the HTTP status, reply in r. */
static long push(const char *rel, const char *qs, reply *r)
{
    char path[512], pq[2048];
    size_t len;
    snprintf(path, sizeof path, "%s/%s", PPROF_DIR, rel);
    uint8_t *b = read_file(path, &len);
    snprintf(pq, sizeof pq, "/api/0/profiles?%s", qs);
    req(NULL, pq, b, len, "application/octet-stream", r);
    free(b);
    return r->status;
}

static int64_t utc_ms(int Y, int M, int D, int h, int m, int s)
{
    struct tm tm = {
        .tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D, .tm_hour = h, .tm_min = m, .tm_sec = s};
    return (int64_t)timegm(&tm) * 1000;
}

/* The three heap pushes at T1..T3 (profefe's time format), the cpu push at
 * its own time_nanos. */
static int64_t T1, T2, T3, TCPU;

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/profd-test-api-XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    pd_storage_options so = pd_storage_options_default();
    so.path = tmpdir;
    so.fsync = PD_FSYNC_NEVER;
    /* the test data spans 2024 to now: no retention (it would delete the
       2024 profiles as 15 days older than the newest), no background round */
    so.retention_ms = -1;
    so.maintenance_ms = -1;
    pd_err err = {{0}};
    if (pd_storage_open(&so, &st, &err) != 0) {
        fprintf(stderr, "storage open: %s\n", err.msg);
        return -1;
    }
    pd_api_options ao = {.reload = reload_cb, .version = "test", .enable_lifecycle = true};
    if (pd_api_new(st, NULL, &ao, &api, &err) != 0)
        return -1;
    if (pd_http_server_start("127.0.0.1:0", 4, 8 << 20, pd_api_handle, api, &srv, &err) != 0) {
        fprintf(stderr, "http: %s\n", err.msg);
        return -1;
    }
    T1 = utc_ms(2024, 1, 2, 3, 4, 5);
    T2 = T1 + 10000;
    T3 = T1 + 20000;
    pd_profile cpu;
    decode_file("go-demo-series/cpu-0001.pb.gz", &cpu);
    TCPU = cpu.time_nanos / 1000000;
    pd_profile_release(&cpu);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pd_http_server_stop(srv);
    pd_api_free(api);
    pd_storage_close(st);
    nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* ---- tests (run in order: later ones use what earlier ones pushed) ---- */

static void test_push(void **state)
{
    (void)state;
    reply r;
    double n0 = pd_metrics_get("profd_ingested_profiles_total", "source=\"push\"");
    double b0 = pd_metrics_get("profd_ingested_bytes_total", "source=\"push\"");
    const char *files[3] = {"go-demo-series/heap-0001.pb.gz", "go-demo-series/heap-0002.pb.gz",
                            "go-demo-series/heap-0003.pb.gz"};
    int64_t ts[3] = {T1, T2, T3};
    size_t total_bytes = 0;
    for (int i = 0; i < 3; i++) {
        char qs[512], created[64];
        time_t tt = (time_t)(ts[i] / 1000);
        struct tm tm;
        gmtime_r(&tt, &tm);
        strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%S", &tm); /* profefe's format */
        snprintf(
            qs, sizeof qs,
            "service=demo&type=heap&instance_id=host-1&labels=env=test,zone=eu-1&created_at=%s",
            created);
        if (push(files[i], qs, &r) != 200)
            fail_msg("push %s: %ld %s", files[i], r.status, r.body.data);
        json_t *j = jparse(&r);
        assert_int_equal(json_integer_value(json_object_get(j, "code")), 200);
        json_t *b = json_object_get(j, "body");
        assert_string_equal(json_string_value(json_object_get(b, "type")), "heap");
        assert_string_equal(json_string_value(json_object_get(b, "service")), "demo");
        assert_string_equal(json_string_value(json_object_get(b, "instance_id")), "host-1");
        assert_true(strlen(json_string_value(json_object_get(b, "id"))) > 0);
        json_t *ls = json_object_get(b, "labels");
        assert_int_equal(json_array_size(ls), 2);
        assert_string_equal(json_string_value(json_object_get(json_array_get(ls, 0), "key")),
                            "env");
        assert_string_equal(json_string_value(json_object_get(json_array_get(ls, 0), "value")),
                            "test");
        assert_string_equal(json_string_value(json_object_get(json_array_get(ls, 1), "key")),
                            "zone");
        int64_t cat;
        assert_int_equal(
            pd_parse_rfc3339(json_string_value(json_object_get(b, "created_at")), &cat), 0);
        assert_true(cat == ts[i]);
        json_decref(j);
        pd_buf_release(&r.body);
        char path[512];
        size_t len;
        snprintf(path, sizeof path, "%s/%s", PPROF_DIR, files[i]);
        free(read_file(path, &len));
        total_bytes += len;
    }
    /* no created_at: the profile's time_nanos */
    assert_int_equal(
        push("go-demo-series/cpu-0001.pb.gz", "service=demo&type=cpu&instance_id=host-1", &r), 200);
    pd_buf_release(&r.body);
    char path[512];
    size_t len;
    snprintf(path, sizeof path, "%s/go-demo-series/cpu-0001.pb.gz", PPROF_DIR);
    free(read_file(path, &len));
    total_bytes += len;
    /* RFC 3339 created_at, another service (makes heap ambiguous later) */
    assert_int_equal(push("go-demo-once/heap.pb.gz",
                          "service=other&type=heap&created_at=2024-01-02T04%3A00%3A00%2B01%3A00",
                          &r),
                     200);
    json_t *j = jparse(&r);
    int64_t cat;
    assert_int_equal(
        pd_parse_rfc3339(
            json_string_value(json_object_get(json_object_get(j, "body"), "created_at")), &cat),
        0);
    assert_true(cat == utc_ms(2024, 1, 2, 3, 0, 0));
    json_decref(j);
    pd_buf_release(&r.body);
    snprintf(path, sizeof path, "%s/go-demo-once/heap.pb.gz", PPROF_DIR);
    free(read_file(path, &len));
    total_bytes += len;

    assert_true(pd_metrics_get("profd_ingested_profiles_total", "source=\"push\"") == n0 + 5);
    assert_true(pd_metrics_get("profd_ingested_bytes_total", "source=\"push\"") ==
                b0 + (double)total_bytes);
}

static void test_query_range(void **state)
{
    (void)state;
    json_t *root;
    char sel[256], pq[1024];
    enc("heap{service=\"demo\"}", sel, sizeof sel);
    snprintf(pq, sizeof pq, "/api/v1/query_range?query=%s&from=%" PRId64 "&to=%" PRId64, sel,
             T1 / 1000 - 1, T3 / 1000 + 1);
    json_t *d = get_json(pq, 200, &root);
    assert_int_equal(json_array_size(d), 1);
    json_t *s = json_array_get(d, 0);
    json_t *lb = json_object_get(s, "labels");
    assert_string_equal(json_string_value(json_object_get(lb, "__name__")), "heap");
    assert_string_equal(json_string_value(json_object_get(lb, "service")), "demo");
    assert_string_equal(json_string_value(json_object_get(lb, "instance_id")), "host-1");
    assert_string_equal(json_string_value(json_object_get(lb, "env")), "test");
    assert_string_equal(json_string_value(json_object_get(lb, "zone")), "eu-1");
    assert_int_equal(json_object_size(lb), 5);
    json_t *tss = json_object_get(s, "timestamps");
    assert_int_equal(json_array_size(tss), 3);
    assert_true(json_integer_value(json_array_get(tss, 0)) == T1);
    assert_true(json_integer_value(json_array_get(tss, 1)) == T2);
    assert_true(json_integer_value(json_array_get(tss, 2)) == T3);
    /* totals of heap-0002 computed from the file */
    pd_profile p;
    decode_file("go-demo-series/heap-0002.pb.gz", &p);
    int64_t tot[64];
    pd_profile_totals(&p, tot);
    json_t *tt = json_array_get(json_object_get(s, "totals"), 1);
    assert_int_equal(json_array_size(tt), p.n_sample_type);
    for (size_t i = 0; i < p.n_sample_type; i++)
        assert_true(json_integer_value(json_array_get(tt, i)) == tot[i]);
    json_t *sts = json_object_get(s, "sample_types");
    assert_int_equal(json_array_size(sts), p.n_sample_type);
    assert_string_equal(json_string_value(json_object_get(json_array_get(sts, 0), "type")),
                        pd_profile_str(&p, p.sample_type[0].type));
    pd_profile_release(&p);
    json_decref(root);

    /* a narrower window: only T2; spaces as '+' (browsers, go tool pprof) */
    snprintf(pq, sizeof pq,
             "/api/v1/query_range?query=heap%%7Bservice%%3D%%22demo%%22,+env%%3D%%22test%%22%%7D"
             "&start=%" PRId64 "&end=%" PRId64 ".5",
             T2 / 1000, T2 / 1000);
    d = get_json(pq, 200, &root);
    assert_int_equal(json_array_size(d), 1);
    assert_int_equal(json_array_size(json_object_get(json_array_get(d, 0), "timestamps")), 1);
    json_decref(root);

    /* default window is the last hour: the 2024 data is outside */
    d = get_json("/api/v1/query_range?query=heap", 200, &root);
    assert_int_equal(json_array_size(d), 0);
    json_decref(root);
}

static void test_query_reports(void **state)
{
    (void)state;
    json_t *root;
    char sel[256], pq[1024];
    reply r;
    enc("heap{service=\"demo\"}", sel, sizeof sel);

    /* proto at T2 (+ extra params as go tool pprof may add) equals heap-0002 */
    snprintf(pq, sizeof pq, "/api/v1/query?query=%s&time=%" PRId64 "&report=proto&seconds=30", sel,
             T2 / 1000);
    req(NULL, pq, NULL, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.ctype, "application/octet-stream");
    assert_non_null(strstr(r.disposition, "attachment"));
    assert_true(strtoll(r.x_ts, NULL, 10) == T2);
    assert_non_null(strstr(r.x_series, "service=\"demo\""));
    pd_profile got, want;
    pd_err err = {{0}};
    assert_true(pd_is_gzip((const uint8_t *)r.body.data, r.body.len));
    if (pd_profile_decode(&got, (const uint8_t *)r.body.data, r.body.len, NULL, &err) != 0)
        fail_msg("decode reply: %s", err.msg);
    decode_file("go-demo-series/heap-0002.pb.gz", &want);
    if (!pd_profile_equal(&got, &want, &err))
        fail_msg("proto reply differs from the pushed profile: %s", err.msg);
    pd_profile_release(&got);
    pd_buf_release(&r.body);

    /* nearest: just after T3 gives T3; before T1 gives T1; default report is proto */
    snprintf(pq, sizeof pq, "/api/v1/query?query=%s&time=%" PRId64 ".999", sel, T3 / 1000);
    req(NULL, pq, NULL, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_true(strtoll(r.x_ts, NULL, 10) == T3);
    pd_buf_release(&r.body);
    snprintf(pq, sizeof pq, "/api/v1/query?query=%s&time=1000&report=meta", sel);
    req(NULL, pq, NULL, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_true(strtoll(r.x_ts, NULL, 10) == T1);
    pd_buf_release(&r.body);

    /* meta of T2 */
    snprintf(pq, sizeof pq, "/api/v1/query?query=%s&time=%" PRId64 "&report=meta", sel, T2 / 1000);
    json_t *d = get_json(pq, 200, &root);
    assert_int_equal(json_integer_value(json_object_get(d, "samples")), want.n_sample);
    assert_int_equal(json_integer_value(json_object_get(d, "functions")), want.n_function);
    assert_true(json_integer_value(json_object_get(d, "time_nanos")) == want.time_nanos);
    json_decref(root);

    /* proto with sample_index: pprof then shows that type by default */
    snprintf(pq, sizeof pq, "/api/v1/query?query=%s&time=%" PRId64 "&report=proto&sample_index=0",
             sel, T2 / 1000);
    req(NULL, pq, NULL, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(pd_profile_decode(&got, (const uint8_t *)r.body.data, r.body.len, NULL, &err),
                     0);
    assert_string_equal(pd_profile_str(&got, got.default_sample_type),
                        pd_profile_str(&want, want.sample_type[0].type));
    pd_profile_release(&got);
    pd_buf_release(&r.body);
    pd_profile_release(&want);

    /* top of the cpu profile, limit 3, sample_index by name */
    pd_profile cpu;
    decode_file("go-demo-series/cpu-0001.pb.gz", &cpu);
    size_t si = cpu.n_sample_type - 1;
    const char *tname = pd_profile_str(&cpu, cpu.sample_type[si].type);
    int64_t tot[64];
    pd_profile_totals(&cpu, tot);
    snprintf(pq, sizeof pq, "/api/v1/query?query=cpu&report=top&limit=3&sample_index=%s", tname);
    d = get_json(pq, 200, &root);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(d, "sample_type"), "type")), tname);
    assert_true(json_integer_value(json_object_get(d, "total")) == tot[si]);
    json_t *rows = json_object_get(d, "rows");
    assert_int_equal(json_array_size(rows), 3);
    for (size_t i = 1; i < 3; i++)
        assert_true(json_integer_value(json_object_get(json_array_get(rows, i - 1), "flat")) >=
                    json_integer_value(json_object_get(json_array_get(rows, i), "flat")));
    json_decref(root);
    /* default limit is 100 rows (the profile has more functions than that?) */
    d = get_json("/api/v1/query?query=cpu&report=top", 200, &root);
    assert_true(json_array_size(json_object_get(d, "rows")) <= 100);
    assert_true(json_array_size(json_object_get(d, "rows")) > 3);
    json_decref(root);

    /* flamegraph: root value is the total of the default sample type */
    size_t dsi;
    assert_int_equal(pd_profile_sample_index(&cpu, NULL, &dsi, NULL), 0);
    d = get_json("/api/v1/query?query=cpu&report=flamegraph", 200, &root);
    assert_true(json_integer_value(json_object_get(d, "value")) == tot[dsi]);
    assert_true(json_array_size(json_object_get(d, "children")) > 0);
    json_decref(root);

    /* issue 12: a single profile's flame graph honours nodes= and says it cut */
    d = get_json("/api/v1/query?query=cpu&report=flamegraph&nodes=3", 200, &root);
    assert_true(json_integer_value(json_object_get(d, "value")) == tot[dsi]);
    assert_true(json_integer_value(json_object_get(d, "nodes")) <= 3);
    assert_true(json_integer_value(json_object_get(d, "nodes_total")) > 3);
    json_decref(root);
    /* top sorted by cum on the server before the cut; asc/desc; bad sort 400 */
    d = get_json("/api/v1/query?query=cpu&report=top&limit=3&sort=cum", 200, &root);
    rows = json_object_get(d, "rows");
    assert_int_equal(json_array_size(rows), 3);
    for (size_t i = 1; i < 3; i++)
        assert_true(json_integer_value(json_object_get(json_array_get(rows, i - 1), "cum")) >=
                    json_integer_value(json_object_get(json_array_get(rows, i), "cum")));
    assert_string_equal(json_string_value(json_object_get(d, "sort")), "cum");
    json_decref(root);
    d = get_json("/api/v1/query?query=cpu&report=top&limit=0&sort=cum&order=asc&filter=MAIN.", 200,
                 &root);
    rows = json_object_get(d, "rows");
    assert_true(json_array_size(rows) > 0);
    for (size_t i = 0; i < json_array_size(rows); i++) {
        assert_non_null(strstr(
            json_string_value(json_object_get(json_array_get(rows, i), "function")), "main."));
        if (i)
            assert_true(json_integer_value(json_object_get(json_array_get(rows, i - 1), "cum")) <=
                        json_integer_value(json_object_get(json_array_get(rows, i), "cum")));
    }
    json_decref(root);
    json_t *e = get_json("/api/v1/query?query=cpu&report=top&sort=size", 400, &root);
    assert_non_null(strstr(jerr(e), "sort"));
    json_decref(root);

    /* unknown sample_index: 400 listing the valid ones */
    e = get_json("/api/v1/query?query=cpu&report=top&sample_index=bogus", 400, &root);
    assert_string_equal(json_string_value(json_object_get(e, "errorType")), "bad_data");
    assert_non_null(strstr(jerr(e), tname));
    json_decref(root);
    pd_profile_release(&cpu);
}

static void test_series_labels(void **state)
{
    (void)state;
    json_t *root;
    json_t *d = get_json("/api/v1/series", 200, &root);
    assert_int_equal(json_array_size(d), 3); /* heap demo, heap other, cpu demo */
    json_decref(root);
    d = get_json("/api/v1/series?match[]=heap&match%5B%5D=cpu%7Bservice%3D%22nope%22%7D", 200,
                 &root);
    assert_int_equal(json_array_size(d), 2);
    for (size_t i = 0; i < 2; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(d, i), "__name__")),
                            "heap");
    json_decref(root);

    d = get_json("/api/v1/labels", 200, &root);
    const char *want[] = {"__name__", "env", "instance_id", "service", "zone"};
    assert_int_equal(json_array_size(d), 5);
    for (size_t i = 0; i < 5; i++)
        assert_string_equal(json_string_value(json_array_get(d, i)), want[i]);
    json_decref(root);

    /* the profile types with their sample types (the UI's type picker) */
    d = get_json("/api/v1/profile_types", 200, &root);
    assert_int_equal(json_array_size(d), 2);
    json_t *pt = json_array_get(d, 0);
    assert_string_equal(json_string_value(json_object_get(pt, "name")), "cpu");
    assert_int_equal(json_integer_value(json_object_get(pt, "series")), 1);
    json_t *sts = json_object_get(pt, "sample_types");
    assert_int_equal(json_array_size(sts), 2); /* Go's cpu: samples/count, cpu/nanoseconds */
    assert_string_equal(json_string_value(json_object_get(json_array_get(sts, 1), "type")), "cpu");
    assert_string_equal(json_string_value(json_object_get(json_array_get(sts, 1), "unit")),
                        "nanoseconds");
    pt = json_array_get(d, 1);
    assert_string_equal(json_string_value(json_object_get(pt, "name")), "heap");
    assert_int_equal(json_integer_value(json_object_get(pt, "series")), 2);
    sts = json_object_get(pt, "sample_types");
    assert_int_equal(json_array_size(sts), 4);
    assert_string_equal(json_string_value(json_object_get(json_array_get(sts, 3), "type")),
                        "inuse_space");
    assert_string_equal(json_string_value(json_object_get(json_array_get(sts, 3), "unit")),
                        "bytes");
    assert_string_equal(json_string_value(json_object_get(json_array_get(sts, 3), "kind")),
                        "gauge");
    json_decref(root);
    d = get_json("/api/v1/profile_types?match[]=heap", 200, &root);
    assert_int_equal(json_array_size(d), 1);
    json_decref(root);

    d = get_json("/api/v1/label/__name__/values", 200, &root);
    assert_int_equal(json_array_size(d), 2);
    assert_string_equal(json_string_value(json_array_get(d, 0)), "cpu");
    assert_string_equal(json_string_value(json_array_get(d, 1)), "heap");
    json_decref(root);
    d = get_json("/api/v1/label/service/values?match[]=heap", 200, &root);
    assert_int_equal(json_array_size(d), 2);
    assert_string_equal(json_string_value(json_array_get(d, 0)), "demo");
    assert_string_equal(json_string_value(json_array_get(d, 1)), "other");
    json_decref(root);
    /* time filter: [T1, T3] excludes the "other" heap at 03:00 */
    char pq[256];
    snprintf(pq, sizeof pq,
             "/api/v1/label/service/values?match[]=heap&start=%" PRId64 "&end=%" PRId64, T1 / 1000,
             T3 / 1000);
    d = get_json(pq, 200, &root);
    assert_int_equal(json_array_size(d), 1);
    json_decref(root);

    /* POST with a form body, as Prometheus clients do */
    reply r;
    const char *form = "match%5B%5D=cpu";
    req("POST", "/api/v1/series", form, strlen(form), "application/x-www-form-urlencoded", &r);
    assert_int_equal(r.status, 200);
    json_t *j = jparse(&r);
    assert_int_equal(json_array_size(json_object_get(j, "data")), 1);
    json_decref(j);
    pd_buf_release(&r.body);

    d = get_json("/api/v1/targets", 200, &root);
    assert_int_equal(json_array_size(json_object_get(d, "activeTargets")), 0);
    json_decref(root);
}

static void test_errors(void **state)
{
    (void)state;
    json_t *root, *e;
    e = get_json("/api/v1/query_range?query=heap%7Bjob%3D", 400, &root);
    assert_string_equal(json_string_value(json_object_get(e, "errorType")), "bad_data");
    assert_non_null(strstr(jerr(e), "at character"));
    json_decref(root);
    e = get_json("/api/v1/query?query=%7B%7D", 400, &root);
    assert_non_null(strstr(jerr(e), "query"));
    json_decref(root);
    e = get_json("/api/v1/query_range", 400, &root);
    assert_non_null(strstr(jerr(e), "\"query\""));
    json_decref(root);
    e = get_json("/api/v1/query_range?query=heap&from=yesterday", 400, &root);
    assert_non_null(strstr(jerr(e), "\"from\""));
    json_decref(root);
    e = get_json("/api/v1/query?query=cpu&time=notatime", 400, &root);
    assert_non_null(strstr(jerr(e), "\"time\""));
    json_decref(root);
    e = get_json("/api/v1/query_range?query=heap&from=20&to=10", 400, &root);
    json_decref(root);
    e = get_json("/api/v1/series?match[]=%7B", 400, &root);
    assert_non_null(strstr(jerr(e), "match[]"));
    json_decref(root);
    e = get_json("/api/v1/query?query=cpu&report=svg", 400, &root);
    assert_non_null(strstr(jerr(e), "report"));
    json_decref(root);
    e = get_json("/api/v1/query?query=cpu&report=top&limit=-1", 400, &root);
    json_decref(root);
    /* Prometheus 3: any UTF-8 name; %XX and U__ escapes decoded; control bytes refused */
    e = get_json("/api/v1/label/1bad/values", 200, &root);
    json_decref(root);
    e = get_json("/api/v1/label/U__otel_2e_scope__name/values", 200, &root);
    json_decref(root);
    e = get_json("/api/v1/label/a%09b/values", 400, &root);
    json_decref(root);
    e = get_json("/api/v1/label/U__a_zz_/values", 400, &root);
    json_decref(root);
    /* ambiguous: both heap series named */
    e = get_json("/api/v1/query?query=heap&report=meta", 400, &root);
    assert_non_null(strstr(jerr(e), "service=\"demo\""));
    assert_non_null(strstr(jerr(e), "service=\"other\""));
    json_decref(root);
    /* none */
    e = get_json("/api/v1/query?query=goroutine&report=meta", 404, &root);
    assert_string_equal(json_string_value(json_object_get(e, "errorType")), "not_found");
    json_decref(root);
    e = get_json("/api/v1/nope", 404, &root);
    json_decref(root);

    reply r;
    req(NULL, "/no/such/page", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 404);
    pd_buf_release(&r.body);
    req("DELETE", "/api/v1/series", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 405);
    pd_buf_release(&r.body);
    req("DELETE", "/api/0/profiles", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 405);
    pd_buf_release(&r.body);
}

/* A malformed push gets 400 in profefe's envelope, is counted, and stores nothing. */
static void test_bad_push(void **state)
{
    (void)state;
    reply before, after, r;
    const char *all = "/api/v1/query_range?query=%7B__name__%3D~%22.%2B%22%7D&from=0&to=4000000000";
    req(NULL, all, NULL, 0, NULL, &before);
    assert_int_equal(before.status, 200);
    double bad0 = pd_metrics_get("profd_rejected_input_total", "reason=\"bad_profile\"");
    double lab0 = pd_metrics_get("profd_rejected_input_total", "reason=\"bad_labels\"");
    double req0 = pd_metrics_get("profd_rejected_input_total", "reason=\"bad_request\"");
    double ok0 = pd_metrics_get("profd_ingested_profiles_total", "source=\"push\"");

    /* garbage body; truncated gzip; empty body */
    const char garbage[] = "this is not a profile";
    req(NULL, "/api/0/profiles?service=demo&type=heap&created_at=2024-01-02T05:00:00", garbage,
        sizeof garbage - 1, "application/octet-stream", &r);
    assert_int_equal(r.status, 400);
    json_t *j = jparse(&r);
    assert_int_equal(json_integer_value(json_object_get(j, "code")), 400);
    assert_non_null(json_string_value(json_object_get(j, "error")));
    assert_string_equal(json_string_value(json_object_get(j, "status")), "error");
    json_decref(j);
    pd_buf_release(&r.body);
    char path[512];
    size_t len;
    snprintf(path, sizeof path, "%s/go-demo-once/heap.pb.gz", PPROF_DIR);
    uint8_t *b = read_file(path, &len);
    req(NULL, "/api/0/profiles?service=demo&type=heap&created_at=2024-01-02T05:00:01", b, len / 2,
        "application/octet-stream", &r);
    assert_int_equal(r.status, 400);
    pd_buf_release(&r.body);
    req(NULL, "/api/0/profiles?service=demo&type=heap", "", 0, "application/octet-stream", &r);
    assert_int_equal(r.status, 400);
    pd_buf_release(&r.body);
    assert_true(pd_metrics_get("profd_rejected_input_total", "reason=\"bad_profile\"") == bad0 + 3);

    /* bad parameters with a good body */
    const char *badq[] = {
        "type=heap",                                             /* no service */
        "service=demo",                                          /* no type */
        "service=demo&type=__x",                                 /* reserved type */
        "service=demo&type=heap-x",                              /* invalid type */
        "service=demo&type=heap&created_at=yesterday",           /* bad time */
        "service=demo&type=heap&created_at=2024-13-02T05:00:00", /* bad month */
    };
    for (size_t i = 0; i < sizeof badq / sizeof *badq; i++) {
        char pq[512];
        snprintf(pq, sizeof pq, "/api/0/profiles?%s", badq[i]);
        req(NULL, pq, b, len, "application/octet-stream", &r);
        if (r.status != 400)
            fail_msg("%s: status %ld", badq[i], r.status);
        j = jparse(&r);
        assert_int_equal(json_integer_value(json_object_get(j, "code")), 400);
        json_decref(j);
        pd_buf_release(&r.body);
    }
    assert_true(pd_metrics_get("profd_rejected_input_total", "reason=\"bad_request\"") == req0 + 6);
    /* profefe reads "1x=a", "a", "a=" and "a-b=c" (any UTF-8 key, empty = absent);
     * "%zz" is a bad URL escape, "a%09b" a control character */
    const char *badl[] = {"__x=a", "service=x", "a=1,a=2", "a=%zz", "a%09b=1", "%5f_x=1", "t%00=1"};
    for (size_t i = 0; i < sizeof badl / sizeof *badl; i++) {
        char pq[512], e[128];
        enc(badl[i], e, sizeof e);
        snprintf(pq, sizeof pq, "/api/0/profiles?service=demo&type=heap&labels=%s", e);
        req(NULL, pq, b, len, "application/octet-stream", &r);
        if (r.status != 400)
            fail_msg("labels=%s: status %ld", badl[i], r.status);
        pd_buf_release(&r.body);
    }
    assert_true(pd_metrics_get("profd_rejected_input_total", "reason=\"bad_labels\"") ==
                lab0 + (double)(sizeof badl / sizeof *badl));

    /* (a push at the same series and time is stored again, as profefe
     * does: test_profefe.c covers it) */
    free(b);

    req(NULL, all, NULL, 0, NULL, &after);
    assert_int_equal(after.status, 200);
    assert_int_equal(after.body.len, before.body.len);
    assert_memory_equal(after.body.data, before.body.data, before.body.len);
    assert_true(pd_metrics_get("profd_ingested_profiles_total", "source=\"push\"") == ok0);
    pd_buf_release(&before.body);
    pd_buf_release(&after.body);
}

static bool metric_line(const char *text, const char *prefix, double *v)
{
    const char *p = text;
    size_t l = strlen(prefix);
    while ((p = strstr(p, prefix))) {
        if ((p == text || p[-1] == '\n') && p[l] == ' ') {
            *v = strtod(p + l + 1, NULL);
            return true;
        }
        p += l;
    }
    return false;
}

static void test_metrics_health(void **state)
{
    (void)state;
    reply r;
    double v;
    req(NULL, "/metrics", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.ctype, "text/plain"));
    const char *t = r.body.data;
    assert_true(metric_line(t, "profd_ingested_profiles_total{source=\"push\"}", &v));
    assert_true(v >= 5);
    assert_true(metric_line(t, "profd_ingested_bytes_total{source=\"push\"}", &v));
    assert_true(v > 1000);
    assert_true(metric_line(t, "profd_rejected_input_total{reason=\"bad_profile\"}", &v));
    assert_true(v >= 3);
    assert_true(metric_line(t, "process_cpu_seconds_total", &v));
    assert_true(metric_line(t, "process_resident_memory_bytes", &v));
    assert_true(v > 1e6);
    assert_true(metric_line(t, "process_start_time_seconds", &v));
    assert_true(v > 1.6e9 && v <= (double)pd_now_ms() / 1000 + 1);
    assert_true(metric_line(t, "profd_storage_profiles", &v));
    assert_true(v == 5);
    assert_true(metric_line(t, "profd_storage_series", &v));
    assert_true(v == 3);
    assert_non_null(strstr(t, "# TYPE process_cpu_seconds_total counter"));
    pd_buf_release(&r.body);

    req(NULL, "/-/healthy", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    pd_buf_release(&r.body);
    req(NULL, "/-/ready", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    pd_buf_release(&r.body);

    int c0 = __atomic_load_n(&reload_calls, __ATOMIC_SEQ_CST);
    req("POST", "/-/reload", "", 0, NULL, &r);
    assert_int_equal(r.status, 200);
    pd_buf_release(&r.body);
    __atomic_store_n(&reload_fail, 1, __ATOMIC_SEQ_CST);
    req("POST", "/-/reload", "", 0, NULL, &r);
    assert_int_equal(r.status, 500);
    assert_non_null(strstr(r.body.data, "unknown key \"bogus\""));
    pd_buf_release(&r.body);
    req(NULL, "/-/reload", NULL, 0, NULL, &r); /* GET is not a reload */
    assert_int_equal(r.status, 405);
    pd_buf_release(&r.body);
    assert_int_equal(__atomic_load_n(&reload_calls, __ATOMIC_SEQ_CST), c0 + 2);

    /* issue 20 item 4: without --web.enable-lifecycle, 403 naming the flag
       and no reload (as Prometheus) */
    __atomic_store_n(&reload_fail, 0, __ATOMIC_SEQ_CST);
    pd_api *off = NULL;
    pd_err oerr = {{0}};
    pd_api_options oo = {.reload = reload_cb, .version = "test"};
    assert_int_equal(pd_api_new(st, NULL, &oo, &off, &oerr), 0);
    pd_http_request hr = {.method = "POST", .path = "/-/reload", .body = (const uint8_t *)""};
    pd_http_response hresp = {0};
    pd_api_handle(off, &hr, &hresp);
    assert_int_equal(hresp.status, 403);
    assert_non_null(strstr(hresp.body.data, "--web.enable-lifecycle"));
    pd_buf_release(&hresp.body);
    free(hresp.headers);
    pd_api_free(off);
    assert_int_equal(__atomic_load_n(&reload_calls, __ATOMIC_SEQ_CST), c0 + 2);

    /* the UI page */
    req(NULL, "/", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.ctype, "text/html"));
    pd_buf_release(&r.body);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_push),           cmocka_unit_test(test_query_range),
        cmocka_unit_test(test_query_reports),  cmocka_unit_test(test_series_labels),
        cmocka_unit_test(test_errors),         cmocka_unit_test(test_bad_push),
        cmocka_unit_test(test_metrics_health),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
