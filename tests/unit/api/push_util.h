/*
 * Helpers of the push/interop tests (test_profefe.c, test_pyroscope.c): a
 * real profd api on a real pd_http_server (127.0.0.1, port 0) over a real
 * storage in a temp directory; HTTP through libcurl (and a raw socket for
 * requests curl refuses to send, like a 10 MB URL); replies parsed with
 * jansson; expected values computed from the input files independently.
 * Each test file includes this once (all static).
 */
#ifndef PD_TEST_PUSH_UTIL_H
#define PD_TEST_PUSH_UTIL_H

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <jansson.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include "../pd_test.h"

#include "api/api.h"
#include "base/metrics.h"
#include "base/time.h"
#include "http/server.h"
#include "pprof/pprof.h"
#include "storage/storage.h"

#ifndef PD_TESTDATA
#error "PD_TESTDATA must be defined"
/* A profile with one sample carrying n_labels string labels whose values
 * are value_len bytes each, gzip-encoded into out. */
static __attribute__((unused)) void label_profile(size_t n_labels, size_t value_len, pd_buf *out)
{
    pd_pprof_limits lim = pd_pprof_limits_default();
    lim.max_labels_per_sample = n_labels + 1;
    lim.max_strings = 2 * n_labels + 16;
    pd_profile_builder *b;
    pd_err err = {{0}};
    assert_int_equal(pd_profile_builder_new(&lim, &b), 0);
    assert_true(pd_profile_builder_sample_type(b, "contentions", "count", &err) >= 0);
    uint64_t fid, lid;
    PD_ASSERT_OK(pd_profile_builder_function(b, "main.f", NULL, NULL, 0, &fid, &err), &err);
    pd_pprof_line line = {.function_id = fid, .line = 1};
    PD_ASSERT_OK(pd_profile_builder_location(b, 0, 0x1000, &line, 1, &lid, &err), &err);
    pd_pprof_label *lb = calloc(n_labels, sizeof *lb);
    char *val = malloc(value_len + 1);
    memset(val, 'v', value_len);
    val[value_len] = 0;
    for (size_t i = 0; i < n_labels; i++) {
        char k[32];
        snprintf(k, sizeof k, "k%zu", i);
        lb[i].key = pd_profile_builder_string(b, k, &err);
        lb[i].str = pd_profile_builder_string(b, val, &err);
        assert_true(lb[i].key > 0 && lb[i].str > 0);
    }
    int64_t v = 1;
    PD_ASSERT_OK(pd_profile_builder_sample(b, &lid, 1, &v, lb, n_labels, &err), &err);
    pd_profile p;
    if (pd_profile_builder_finish(b, &p, &err) != 0)
        fail_msg("finish: %s", err.msg);
    pd_profile_builder_free(b);
    pd_buf_init(out, 0);
    assert_int_equal(pd_profile_encode(&p, true, out), 0);
    pd_profile_release(&p);
    free(lb);
    free(val);
}

#endif
#define PPROF_DIR PD_TESTDATA "/pprof"

/* The server's body cap, and the api's profile limits (smaller, so the
 * api's own 413 is reachable). */
#define TEST_SERVER_MAX_BODY (32u << 20)
#define TEST_MAX_BODY (4u << 20)
#define TEST_MAX_DECOMPRESSED (16u << 20)

static char tmpdir[256];
static size_t g_max_series_svc; /* --ingest.max-series-per-service of start_all (0: default) */
static pd_storage *st;
static pd_api *api;
static pd_http_server *srv;

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

/* Opens storage at tmpdir and starts api + server. 0 or -1. */
static int start_all(void)
{
    pd_storage_options so = pd_storage_options_default();
    so.path = tmpdir;
    so.fsync = PD_FSYNC_NEVER;
    /* the tests push 2024 and 2026 profiles: no retention (it would delete
     * the 2024 blocks) and no background maintenance (tests call
     * pd_storage_maintain when they mean it) */
    so.retention_ms = -1;
    so.maintenance_ms = -1;
    pd_err err = {{0}};
    if (pd_storage_open(&so, &st, &err) != 0) {
        fprintf(stderr, "storage open: %s\n", err.msg);
        return -1;
    }
    pd_api_options ao = {.version = "test-1.2.3", .max_series_per_service = g_max_series_svc};
    ao.limits.max_body_bytes = TEST_MAX_BODY;
    ao.limits.max_decompressed_bytes = TEST_MAX_DECOMPRESSED;
    if (pd_api_new(st, NULL, &ao, &api, &err) != 0)
        return -1;
    if (pd_http_server_start("127.0.0.1:0", 4, TEST_SERVER_MAX_BODY, pd_api_handle, api, &srv,
                             &err) != 0) {
        fprintf(stderr, "http: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static void stop_all(void)
{
    pd_http_server_stop(srv);
    pd_api_free(api);
    pd_storage_close(st);
    srv = NULL;
    api = NULL;
    st = NULL;
}

static int setup_all(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/profd-test-push-XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    return start_all();
}

static int teardown_all(void **state)
{
    (void)state;
    stop_all();
    nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

typedef struct reply {
    long status;
    pd_buf body;
    char ctype[128];
    char disposition[256];
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
    if (len > 20 && strncasecmp(p, "Content-Disposition:", 20) == 0) {
        snprintf(r->disposition, sizeof r->disposition, "%.*s", (int)(len - 20), p + 20);
    }
    return len;
}

/* method NULL: GET (POST when body != NULL). pathq is appended to the base
 * URL. extra_hdr: one more request header line or NULL. */
static void req_h(const char *method, const char *pathq, const void *body, size_t len,
                  const char *ctype, const char *extra_hdr, reply *r)
{
    char *url = malloc(strlen(pathq) + 64);
    memset(r, 0, sizeof *r);
    pd_buf_init(&r->body, 0);
    sprintf(url, "http://127.0.0.1:%u%s", (unsigned)pd_http_server_port(srv), pathq);
    CURL *c = curl_easy_init();
    assert_non_null(c);
    struct curl_slist *hs = NULL;
    char h[256];
    if (ctype) {
        snprintf(h, sizeof h, "Content-Type: %s", ctype);
        hs = curl_slist_append(hs, h);
    }
    if (extra_hdr)
        hs = curl_slist_append(hs, extra_hdr);
    hs = curl_slist_append(hs, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    if (method)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    CURLcode cc = curl_easy_perform(c);
    if (cc != CURLE_OK)
        fail_msg("curl %.200s: %s", url, curl_easy_strerror(cc));
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    char *ct = NULL;
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
    snprintf(r->ctype, sizeof r->ctype, "%s", ct ? ct : "");
    curl_slist_free_all(hs);
    curl_easy_cleanup(c);
    free(url);
}

static void req(const char *method, const char *pathq, const void *body, size_t len,
                const char *ctype, reply *r)
{
    req_h(method, pathq, body, len, ctype, NULL, r);
}

/* A raw HTTP/1.1 POST of pathq (any length) with body; returns the status
 * code of the reply (0 when the server closed without one). */
static __attribute__((unused)) long raw_post(const char *pathq, const void *body, size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(pd_http_server_port(srv))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    char head[256];
    int hl = snprintf(head, sizeof head,
                      " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n"
                      "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                      len);
    const void *parts[4] = {"POST ", pathq, head, body};
    size_t lens[4] = {5, strlen(pathq), (size_t)hl, len};
    for (int i = 0; i < 4; i++) {
        size_t off = 0;
        while (off < lens[i]) {
            ssize_t n = send(fd, (const char *)parts[i] + off, lens[i] - off, MSG_NOSIGNAL);
            if (n <= 0)
                goto read; /* the server may answer and close early */
            off += (size_t)n;
        }
    }
read:;
    char buf[512];
    size_t got = 0;
    for (;;) {
        ssize_t n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (n <= 0 || (got += (size_t)n) >= sizeof buf - 1)
            break;
    }
    buf[got] = 0;
    close(fd);
    long status = 0;
    if (sscanf(buf, "HTTP/1.%*d %ld", &status) != 1)
        status = 0;
    return status;
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

static uint8_t *read_testdata(const char *rel, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", PPROF_DIR, rel);
    return read_file(path, len);
}

static void decode_buf(const void *b, size_t len, pd_profile *p)
{
    pd_err err = {{0}};
    pd_pprof_limits lim = pd_pprof_limits_default();
    if (pd_profile_decode(p, b, len, &lim, &err) != 0)
        fail_msg("decode: %s", err.msg);
}

static __attribute__((unused)) void decode_file(const char *rel, pd_profile *p)
{
    size_t len;
    uint8_t *b = read_testdata(rel, &len);
    decode_buf(b, len, p);
    free(b);
}

/* URL-encodes s. */
static __attribute__((unused)) void enc(const char *s, char *out, size_t cap)
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

/* ---- stacks: a profile as {function names root..leaf -> value of type t} ---- */

typedef struct stack_val {
    char *stack;
    int64_t v;
} stack_val;

typedef struct stack_set {
    stack_val *v;
    size_t n, cap;
} stack_set;

static int sv_cmp(const void *a, const void *b)
{
    return strcmp(((const stack_val *)a)->stack, ((const stack_val *)b)->stack);
}

/* Adds (stack, v), merging equal stacks. */
static void ss_add(stack_set *s, const char *stack, int64_t v)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->v[i].stack, stack)) {
            s->v[i].v += v;
            return;
        }
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
    }
    s->v[s->n].stack = strdup(stack);
    s->v[s->n++].v = v;
}

/* Adds every sample of p's sample type named `type` into s, scaled by k;
 * the stack is "root;...;leaf" of function names (inlined frames expanded),
 * plus "|k=v" for each string label. Stacks with value 0 are dropped at
 * compare time. */
static __attribute__((unused)) void ss_add_profile(stack_set *s, const pd_profile *p, const char *type, int64_t k)
{
    size_t t = SIZE_MAX;
    for (size_t i = 0; i < p->n_sample_type; i++)
        if (!strcmp(pd_profile_str(p, p->sample_type[i].type), type))
            t = i;
    if (t == SIZE_MAX)
        fail_msg("no sample type %s", type);
    pd_buf b;
    pd_buf_init(&b, 0);
    for (size_t i = 0; i < p->n_sample; i++) {
        const pd_pprof_sample *sm = &p->sample[i];
        pd_buf_reset(&b);
        pd_buf_puts(&b, "");
        for (size_t l = sm->n_location; l-- > 0;) {
            const pd_pprof_location *loc = pd_profile_location(p, sm->location_id[l]);
            assert_non_null(loc);
            for (size_t ln = loc->n_line; ln-- > 0;) {
                const pd_pprof_function *f = pd_profile_function(p, loc->line[ln].function_id);
                pd_buf_puts(&b, f ? pd_profile_str(p, f->name) : "?");
                pd_buf_puts(&b, ";");
            }
            if (!loc->n_line)
                pd_buf_printf(&b, "0x%" PRIx64 ";", loc->address);
        }
        for (size_t l = 0; l < sm->n_label; l++)
            if (sm->label[l].str)
                pd_buf_printf(&b, "|%s=%s", pd_profile_str(p, sm->label[l].key),
                              pd_profile_str(p, sm->label[l].str));
        ss_add(s, b.data, sm->value[t] * k);
    }
    pd_buf_release(&b);
}

static __attribute__((unused)) void ss_release(stack_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i].stack);
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* Fails unless a and b hold the same non-zero (stack, value) pairs. */
static __attribute__((unused)) void ss_assert_equal(stack_set *a, stack_set *b, const char *what)
{
    stack_set *x[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        size_t o = 0;
        for (size_t i = 0; i < x[k]->n; i++) {
            if (x[k]->v[i].v == 0) {
                free(x[k]->v[i].stack);
                continue;
            }
            x[k]->v[o++] = x[k]->v[i];
        }
        x[k]->n = o;
        qsort(x[k]->v, x[k]->n, sizeof *x[k]->v, sv_cmp);
    }
    if (a->n != b->n)
        fail_msg("%s: %zu stacks vs %zu", what, a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        if (strcmp(a->v[i].stack, b->v[i].stack) || a->v[i].v != b->v[i].v)
            fail_msg("%s: stack %zu differs: %.200s=%" PRId64 " vs %.200s=%" PRId64, what, i,
                     a->v[i].stack, a->v[i].v, b->v[i].stack, b->v[i].v);
    }
}

/* ---- state of the store and counters ---- */

/* Everything stored, as query_range JSON over all time plus the profile count. */
static __attribute__((unused)) void snapshot(pd_buf *out)
{
    reply r;
    req(NULL, "/api/v1/query_range?query=%7B__name__%3D~%22.%2B%22%7D&from=0&to=9000000000", NULL,
        0, NULL, &r);
    assert_int_equal(r.status, 200);
    pd_storage_stats ss;
    pd_storage_stats_get(st, &ss);
    pd_buf_init(out, 0);
    pd_buf_printf(out, "profiles=%" PRIu64 " series=%" PRIu64 " ", ss.n_profiles, ss.n_series);
    pd_buf_append(out, r.body.data, r.body.len);
    pd_buf_release(&r.body);
}

static double rejected(const char *reason)
{
    char lbl[96];
    snprintf(lbl, sizeof lbl, "reason=\"%s\"", reason);
    return pd_metrics_get("profd_rejected_input_total", lbl);
}

/* profd_http_rejected_total{reason} (requests the HTTP layer refused). */
static __attribute__((unused)) double http_rejected(const char *reason)
{
    char lbl[96];
    snprintf(lbl, sizeof lbl, "reason=\"%s\"", reason);
    return pd_metrics_get("profd_http_rejected_total", lbl);
}

/* The value of a metric line "name{labels} v" in /metrics, or -1. */
static __attribute__((unused)) double scrape_metric(const char *line_prefix)
{
    reply r;
    req(NULL, "/metrics", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    double v = -1;
    size_t l = strlen(line_prefix);
    for (const char *p = r.body.data; p && *p;) {
        if (!strncmp(p, line_prefix, l) && p[l] == ' ') {
            v = strtod(p + l + 1, NULL);
            break;
        }
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    pd_buf_release(&r.body);
    return v;
}

/* gzip of n zero bytes (a gzip bomb when n is large). */
static __attribute__((unused)) void gzip_zeros(size_t n, pd_buf *out)
{
    uint8_t *z = calloc(1, n);
    pd_buf_init(out, 0);
    assert_int_equal(pd_gzip(z, n, out), 0);
    free(z);
}

/* A profile with one sample carrying n_labels string labels whose values
 * are value_len bytes each, gzip-encoded into out. */
static __attribute__((unused)) void label_profile(size_t n_labels, size_t value_len, pd_buf *out)
{
    pd_pprof_limits lim = pd_pprof_limits_default();
    lim.max_labels_per_sample = n_labels + 1;
    lim.max_strings = 2 * n_labels + 16;
    pd_profile_builder *b;
    pd_err err = {{0}};
    assert_int_equal(pd_profile_builder_new(&lim, &b), 0);
    assert_true(pd_profile_builder_sample_type(b, "contentions", "count", &err) >= 0);
    uint64_t fid, lid;
    PD_ASSERT_OK(pd_profile_builder_function(b, "main.f", NULL, NULL, 0, &fid, &err), &err);
    pd_pprof_line line = {.function_id = fid, .line = 1};
    PD_ASSERT_OK(pd_profile_builder_location(b, 0, 0x1000, &line, 1, &lid, &err), &err);
    pd_pprof_label *lb = calloc(n_labels, sizeof *lb);
    char *val = malloc(value_len + 1);
    memset(val, 'v', value_len);
    val[value_len] = 0;
    for (size_t i = 0; i < n_labels; i++) {
        char k[32];
        snprintf(k, sizeof k, "k%zu", i);
        lb[i].key = pd_profile_builder_string(b, k, &err);
        lb[i].str = pd_profile_builder_string(b, val, &err);
        assert_true(lb[i].key > 0 && lb[i].str > 0);
    }
    int64_t v = 1;
    PD_ASSERT_OK(pd_profile_builder_sample(b, &lid, 1, &v, lb, n_labels, &err), &err);
    pd_profile p;
    if (pd_profile_builder_finish(b, &p, &err) != 0)
        fail_msg("finish: %s", err.msg);
    pd_profile_builder_free(b);
    pd_buf_init(out, 0);
    assert_int_equal(pd_profile_encode(&p, true, out), 0);
    pd_profile_release(&p);
    free(lb);
    free(val);
}

#endif
