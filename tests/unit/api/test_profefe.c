/*
 * Tests of api/profefe.c (its merges go through query/'s pd_merge) through real HTTP: profefe's
 * /api/0 on a real server over a real storage in a temp dir, with the real
 * Go profiles of PD_TESTDATA. Expected values come from decoding the pushed
 * files independently (totals, stacks), never from the api's own output.
 * Tests run in order: later ones use what earlier ones pushed.
 */
#include "push_util.h"

#include <dirent.h>

#define NHEAP 3
static const char *HEAP[NHEAP] = {"go-demo-series/heap-0001.pb.gz",
                                  "go-demo-series/heap-0002.pb.gz",
                                  "go-demo-series/heap-0003.pb.gz"};
static const char *HEAP_AT[NHEAP] = {"2024-01-02T03:04:05", "2024-01-02T03:04:15",
                                     "2024-01-02T03:04:25"};
static const char *CPU[2] = {"go-demo-series/cpu-0001.pb.gz", "go-demo-series/cpu-0002.pb.gz"};
static char heap_id[NHEAP][64], cpu_id[2][64], other_id[64];

static int64_t utc_ms(int Y, int M, int D, int h, int m, int s)
{
    struct tm tm = {
        .tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D, .tm_hour = h, .tm_min = m, .tm_sec = s};
    return (int64_t)timegm(&tm) * 1000;
}

/* POSTs file rel to /api/0/profiles?qs; returns the status; on 200 the id into id. */
static long push(const char *rel, const char *qs, char *id)
{
    size_t len;
    uint8_t *b = read_testdata(rel, &len);
    char pq[2048];
    reply r;
    snprintf(pq, sizeof pq, "/api/0/profiles?%s", qs);
    req(NULL, pq, b, len, "application/octet-stream", &r);
    free(b);
    long status = r.status;
    json_t *j = jparse(&r);
    assert_int_equal(json_integer_value(json_object_get(j, "code")), status);
    if (status == 200 && id)
        snprintf(id, 64, "%s",
                 json_string_value(json_object_get(json_object_get(j, "body"), "id")));
    if (status != 200)
        assert_non_null(json_string_value(json_object_get(j, "error")));
    json_decref(j);
    pd_buf_release(&r.body);
    return status;
}

/* GET pathq expecting status and profefe's envelope; returns "body" (200)
 * or the whole object; *root to json_decref. */
static json_t *get_env(const char *pathq, long status, json_t **root)
{
    reply r;
    req(NULL, pathq, NULL, 0, NULL, &r);
    if (r.status != status)
        fail_msg("GET %s: status %ld, want %ld: %.300s", pathq, r.status, status,
                 r.body.data ? r.body.data : "");
    assert_non_null(strstr(r.ctype, "application/json"));
    json_t *j = jparse(&r);
    pd_buf_release(&r.body);
    *root = j;
    assert_int_equal(json_integer_value(json_object_get(j, "code")), status);
    if (status == 200)
        return json_object_get(j, "body");
    assert_non_null(json_string_value(json_object_get(j, "error")));
    return j;
}

/* GETs a profile; decodes it into p; returns the raw reply in raw (release). */
static void get_profile(const char *pathq, pd_profile *p, pd_buf *raw)
{
    reply r;
    req(NULL, pathq, NULL, 0, NULL, &r);
    if (r.status != 200)
        fail_msg("GET %s: %ld %.300s", pathq, r.status, r.body.data ? r.body.data : "");
    assert_string_equal(r.ctype, "application/octet-stream");
    assert_non_null(strstr(r.disposition, "attachment"));
    decode_buf(r.body.data, r.body.len, p);
    if (raw)
        *raw = r.body;
    else
        pd_buf_release(&r.body);
}

static void test_push(void **state)
{
    (void)state;
    double ok0 = pd_metrics_get("profd_ingested_profiles_total", "source=\"push\"");
    char qs[512], pq[600];
    for (int i = 0; i < NHEAP; i++) {
        snprintf(qs, sizeof qs,
                 "service=svc&type=heap&instance_id=i-1&labels=env=prod,zone=eu&created_at=%s",
                 HEAP_AT[i]);
        size_t len;
        uint8_t *b = read_testdata(HEAP[i], &len);
        reply r;
        snprintf(pq, sizeof pq, "/api/0/profiles?%s", qs);
        req(NULL, pq, b, len, "application/octet-stream", &r);
        free(b);
        if (r.status != 200)
            fail_msg("push %s: %ld %s", HEAP[i], r.status, r.body.data);
        json_t *j = jparse(&r);
        assert_int_equal(json_integer_value(json_object_get(j, "code")), 200);
        json_t *m = json_object_get(j, "body");
        const char *id = json_string_value(json_object_get(m, "id"));
        assert_non_null(id);
        assert_int_equal(strlen(id), 32);
        assert_true(strspn(id, "0123456789abcdef") == 32);
        snprintf(heap_id[i], sizeof heap_id[i], "%s", id);
        assert_string_equal(json_string_value(json_object_get(m, "type")), "heap");
        assert_string_equal(json_string_value(json_object_get(m, "service")), "svc");
        assert_string_equal(json_string_value(json_object_get(m, "instance_id")), "i-1");
        json_t *ls = json_object_get(m, "labels");
        assert_int_equal(json_array_size(ls), 2);
        assert_string_equal(json_string_value(json_object_get(json_array_get(ls, 0), "key")),
                            "env");
        assert_string_equal(json_string_value(json_object_get(json_array_get(ls, 0), "value")),
                            "prod");
        assert_string_equal(json_string_value(json_object_get(json_array_get(ls, 1), "key")),
                            "zone");
        int64_t cat;
        assert_int_equal(
            pd_parse_rfc3339(json_string_value(json_object_get(m, "created_at")), &cat), 0);
        assert_true(cat == utc_ms(2024, 1, 2, 3, 4, 5) + 10000 * i);
        json_decref(j);
        pd_buf_release(&r.body);
    }
    /* ids differ per profile */
    assert_string_not_equal(heap_id[0], heap_id[1]);
    assert_string_not_equal(heap_id[1], heap_id[2]);
    /* cpu: no created_at, so each profile's own time_nanos */
    for (int i = 0; i < 2; i++)
        assert_int_equal(
            push(CPU[i], "service=svc&type=cpu&instance_id=i-1&labels=env=prod", cpu_id[i]), 200);
    assert_int_equal(push("go-demo-once/heap.pb.gz",
                          "service=other&type=heap&created_at=2024-01-02T03:04:05", other_id),
                     200);
    assert_true(pd_metrics_get("profd_ingested_profiles_total", "source=\"push\"") == ok0 + 6);
}

static void test_list(void **state)
{
    (void)state;
    json_t *root, *b;
    b = get_env("/api/0/profiles?service=svc&type=heap", 200, &root);
    assert_int_equal(json_array_size(b), NHEAP);
    for (int i = 0; i < NHEAP; i++) {
        json_t *m = json_array_get(b, (size_t)i);
        assert_string_equal(json_string_value(json_object_get(m, "id")), heap_id[i]);
        assert_string_equal(json_string_value(json_object_get(m, "service")), "svc");
        assert_string_equal(json_string_value(json_object_get(m, "type")), "heap");
        assert_int_equal(json_array_size(json_object_get(m, "labels")), 2);
    }
    json_decref(root);
    /* from/to in profefe's format, inclusive */
    b = get_env("/api/0/profiles?service=svc&type=heap&from=2024-01-02T03:04:15&to=2024-01-02T03:"
                "04:25",
                200, &root);
    assert_int_equal(json_array_size(b), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(b, 0), "id")), heap_id[1]);
    json_decref(root);
    b = get_env("/api/0/profiles?service=svc&type=heap&limit=1", 200, &root);
    assert_int_equal(json_array_size(b), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(b, 0), "id")), heap_id[0]);
    json_decref(root);
    b = get_env("/api/0/profiles?service=svc&type=heap&labels=env=prod,zone=eu", 200, &root);
    assert_int_equal(json_array_size(b), NHEAP);
    json_decref(root);
    b = get_env("/api/0/profiles?service=svc&type=heap&labels=env=dev", 200, &root);
    assert_int_equal(json_array_size(b), 0);
    json_decref(root);
    b = get_env("/api/0/profiles?service=svc", 200, &root); /* every type */
    assert_int_equal(json_array_size(b), NHEAP + 2);
    json_decref(root);
    b = get_env("/api/0/profiles?service=other&type=heap", 200, &root);
    assert_int_equal(json_array_size(b), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(b, 0), "id")), other_id);
    json_decref(root);
    /* errors: profefe's envelope with 400 */
    json_decref((get_env("/api/0/profiles?type=heap", 400, &root), root));
    json_decref((get_env("/api/0/profiles?service=svc&type=bogus", 400, &root), root));
    json_decref(
        (get_env("/api/0/profiles?service=svc&type=heap&from=yesterday", 400, &root), root));
    json_decref((get_env("/api/0/profiles?service=svc&type=heap&limit=-2", 400, &root), root));
    /* profefe: a key without a value is an empty (absent) label, not an error */
    json_decref((get_env("/api/0/profiles?service=svc&labels=nokey", 200, &root), root));
    /* a malformed URL escape is */
    json_decref((get_env("/api/0/profiles?service=svc&labels=a%3D%25zz", 400, &root), root));
}

static void test_get_by_id(void **state)
{
    (void)state;
    char pq[256];
    for (int i = 0; i < NHEAP; i++) {
        pd_profile got, want;
        pd_buf raw;
        snprintf(pq, sizeof pq, "/api/0/profiles/%s", heap_id[i]);
        get_profile(pq, &got, &raw);
        decode_file(HEAP[i], &want);
        pd_err why = {{0}};
        if (!pd_profile_equal(&got, &want, &why))
            fail_msg("profile %s differs from %s: %s", heap_id[i], HEAP[i], why.msg);
        /* stored as received: the very bytes pushed */
        size_t len;
        uint8_t *b = read_testdata(HEAP[i], &len);
        assert_int_equal(raw.len, len);
        assert_memory_equal(raw.data, b, len);
        free(b);
        pd_buf_release(&raw);
        pd_profile_release(&got);
        pd_profile_release(&want);
    }
    json_t *root;
    /* well-formed id of nothing: 404; malformed: 400 */
    json_decref((get_env("/api/0/profiles/00000000000000000000000000000001", 404, &root), root));
    json_decref((get_env("/api/0/profiles/xyz", 400, &root), root));
    json_decref((get_env("/api/0/profiles/0123456789abcdef0123456789abcdeg", 400, &root), root));
    /* the hash part must match: the right time with a wrong series is 404 */
    char wrong[64];
    snprintf(wrong, sizeof wrong, "%s", heap_id[0]);
    wrong[0] = wrong[0] == '0' ? '1' : '0';
    snprintf(pq, sizeof pq, "/api/0/profiles/%s", wrong);
    json_decref((get_env(pq, 404, &root), root));
}

/* Expected merge of files: totals summed, and every (stack, labels) summed. */
static void check_merge(const pd_profile *got, const char *const *files, size_t n)
{
    pd_profile first;
    decode_file(files[0], &first);
    assert_int_equal(got->n_sample_type, first.n_sample_type);
    int64_t want_tot[64] = {0}, tot[64], got_tot[64];
    for (size_t t = 0; t < first.n_sample_type; t++) {
        const char *tn = pd_profile_str(&first, first.sample_type[t].type);
        assert_string_equal(pd_profile_str(got, got->sample_type[t].type), tn);
        assert_string_equal(pd_profile_str(got, got->sample_type[t].unit),
                            pd_profile_str(&first, first.sample_type[t].unit));
        stack_set want_s = {0}, got_s = {0};
        for (size_t i = 0; i < n; i++) {
            pd_profile p;
            decode_file(files[i], &p);
            ss_add_profile(&want_s, &p, tn, 1);
            if (t == 0) {
                pd_profile_totals(&p, tot);
                for (size_t k = 0; k < p.n_sample_type; k++)
                    want_tot[k] += tot[k];
            }
            pd_profile_release(&p);
        }
        ss_add_profile(&got_s, got, tn, 1);
        ss_assert_equal(&got_s, &want_s, tn);
        ss_release(&got_s);
        ss_release(&want_s);
    }
    pd_profile_totals(got, got_tot);
    for (size_t k = 0; k < first.n_sample_type; k++)
        if (got_tot[k] != want_tot[k])
            fail_msg("total %zu: %" PRId64 ", want %" PRId64, k, got_tot[k], want_tot[k]);
    pd_profile_release(&first);
}

static void test_get_ids_merged(void **state)
{
    (void)state;
    char pq[512];
    pd_profile got;
    snprintf(pq, sizeof pq, "/api/0/profiles/%s+%s", heap_id[0], heap_id[2]);
    get_profile(pq, &got, NULL);
    const char *two[2] = {HEAP[0], HEAP[2]};
    check_merge(&got, two, 2);
    pd_profile_release(&got);
    snprintf(pq, sizeof pq, "/api/0/profiles/%s+%s", cpu_id[0], cpu_id[1]);
    get_profile(pq, &got, NULL);
    check_merge(&got, CPU, 2);
    /* pprof's merge rules: earliest time, summed duration */
    pd_profile a, b;
    decode_file(CPU[0], &a);
    decode_file(CPU[1], &b);
    assert_true(got.time_nanos == (a.time_nanos < b.time_nanos ? a.time_nanos : b.time_nanos));
    assert_true(got.duration_nanos == a.duration_nanos + b.duration_nanos);
    pd_profile_release(&a);
    pd_profile_release(&b);
    pd_profile_release(&got);
    /* a heap and a cpu profile cannot merge: 400 naming the sample types */
    json_t *root;
    snprintf(pq, sizeof pq, "/api/0/profiles/%s+%s", heap_id[0], cpu_id[0]);
    json_t *e = get_env(pq, 400, &root);
    assert_non_null(strstr(json_string_value(json_object_get(e, "error")), "sample types"));
    json_decref(root);
    snprintf(pq, sizeof pq, "/api/0/profiles/%s+", heap_id[0]);
    json_decref((get_env(pq, 400, &root), root));
}

static void test_merge(void **state)
{
    (void)state;
    pd_profile got;
    get_profile("/api/0/profiles/merge?service=svc&type=heap", &got, NULL);
    check_merge(&got, HEAP, NHEAP);
    pd_profile_release(&got);
    get_profile("/api/0/profiles/merge?service=svc&type=heap&from=2024-01-02T03:04:15&to=2024-01-"
                "02T03:04:25&labels=zone=eu",
                &got, NULL);
    check_merge(&got, HEAP + 1, 2);
    pd_profile_release(&got);
    get_profile("/api/0/profiles/merge?service=svc&type=cpu", &got, NULL);
    check_merge(&got, CPU, 2);
    pd_profile_release(&got);
    json_t *root;
    json_decref((get_env("/api/0/profiles/merge?service=svc", 400, &root), root)); /* no type */
    json_decref((get_env("/api/0/profiles/merge?type=heap", 400, &root), root));   /* no service */
    json_decref((get_env("/api/0/profiles/merge?service=svc&type=mutex", 404, &root), root));
    json_decref((get_env("/api/0/profiles/merge?service=nobody&type=heap", 404, &root), root));
}

static void test_services_version(void **state)
{
    (void)state;
    json_t *root;
    json_t *b = get_env("/api/0/services", 200, &root);
    assert_int_equal(json_array_size(b), 2);
    assert_string_equal(json_string_value(json_array_get(b, 0)), "other");
    assert_string_equal(json_string_value(json_array_get(b, 1)), "svc");
    json_decref(root);
    b = get_env("/api/0/version", 200, &root);
    assert_string_equal(json_string_value(json_object_get(b, "version")), "test-1.2.3");
    json_decref(root);
    json_decref((get_env("/api/0/nope", 404, &root), root));
    reply r;
    req("DELETE", "/api/0/profiles", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 405);
    pd_buf_release(&r.body);
}

/* POSTs body to pathq; fails unless the status is want, the reply is
 * profefe's error envelope with code want, and its error names needle. */
static void expect_refused(const char *pathq, const void *body, size_t len, long want,
                           const char *needle)
{
    reply r;
    req(NULL, pathq, body, len, "application/octet-stream", &r);
    if (r.status != want)
        fail_msg("%.200s: HTTP %ld, want %ld: %.300s", pathq, r.status, want,
                 r.body.data ? r.body.data : "");
    json_t *j = jparse(&r);
    assert_int_equal(json_integer_value(json_object_get(j, "code")), want);
    const char *e = json_string_value(json_object_get(j, "error"));
    if (!e || !strstr(e, needle))
        fail_msg("%.200s: error '%s' does not name '%s'", pathq, e ? e : "(none)", needle);
    json_decref(j);
    pd_buf_release(&r.body);
}

static void test_bad_input(void **state)
{
    (void)state;
    pd_buf before, after;
    snapshot(&before);
    const char *reasons[] = {"bad_profile", "too_large", "bad_request", "bad_labels", "duplicate"};
    double r0[5], want[5] = {0};
    for (int i = 0; i < 5; i++)
        r0[i] = rejected(reasons[i]);
    const char *Q = "/api/0/profiles?service=svc&type=heap&created_at=2024-01-02T05:00:00";
    reply r;
    size_t len;
    uint8_t *good = read_testdata(HEAP[0], &len);

    /* garbage, truncated gzip, truncated raw protobuf, empty: 400 bad_profile */
    const char garbage[] = "this is not a profile \x01\x02\xff";
    expect_refused(Q, garbage, sizeof garbage - 1, 400, "invalid profile");
    expect_refused(Q, good, len / 2, 400, "truncated");
    pd_buf plain;
    pd_buf_init(&plain, 0);
    pd_err err = {{0}};
    assert_int_equal(pd_gunzip(good, len, 1 << 26, &plain, &err), 0);
    req(NULL, Q, plain.data, plain.len - 7, "application/octet-stream", &r);
    assert_int_equal(r.status, 400);
    pd_buf_release(&r.body);
    pd_buf_release(&plain);
    req(NULL, Q, "", 0, "application/octet-stream", &r);
    assert_int_equal(r.status, 400);
    pd_buf_release(&r.body);
    want[0] += 4;

    /* a gzip bomb: 200 MB of zeros in ~200 KB: 413 naming the cap */
    pd_buf bomb;
    gzip_zeros(200u << 20, &bomb);
    assert_true(bomb.len < TEST_MAX_BODY);
    req(NULL, Q, bomb.data, bomb.len, "application/octet-stream", &r);
    assert_int_equal(r.status, 413);
    json_t *j = jparse(&r);
    assert_non_null(strstr(json_string_value(json_object_get(j, "error")), "decompressed"));
    json_decref(j);
    pd_buf_release(&r.body);
    pd_buf_release(&bomb);
    /* a body over the api's max_body_bytes: 413 */
    uint8_t *big = calloc(1, TEST_MAX_BODY + 10);
    req(NULL, Q, big, TEST_MAX_BODY + 10, "application/octet-stream", &r);
    assert_int_equal(r.status, 413);
    pd_buf_release(&r.body);
    free(big);
    want[1] += 2;

    /* 100,000 labels and a 10 MB label value in the profile: 413 */
    pd_buf lp;
    label_profile(100000, 1, &lp);
    expect_refused(Q, lp.data, lp.len, 413, "max_labels_per_sample");
    pd_buf_release(&lp);
    label_profile(1, 10u << 20, &lp);
    assert_true(lp.len < TEST_MAX_BODY);
    req(NULL, Q, lp.data, lp.len, "application/octet-stream", &r);
    assert_int_equal(r.status, 413);
    j = jparse(&r);
    assert_non_null(strstr(json_string_value(json_object_get(j, "error")), "label value"));
    json_decref(j);
    pd_buf_release(&r.body);
    pd_buf_release(&lp);
    want[1] += 2;

    /* a wrong type; a bad created_at: 400 bad_request */
    const char *badq[] = {"service=svc&type=cpuu", "service=svc&type=allocs",
                          "service=svc&type=heap&created_at=2024-02-30T00:00:00", "type=heap"};
    const char *badq_names[] = {"type \"cpuu\"", "type \"allocs\"", "created_at", "service"};
    for (size_t i = 0; i < sizeof badq / sizeof *badq; i++) {
        char pq[256];
        snprintf(pq, sizeof pq, "/api/0/profiles?%s", badq[i]);
        expect_refused(pq, good, len, 400, badq_names[i]);
    }
    want[2] += 4;

    /* series labels over the caps, as a URL the server reads: 400 bad_labels */
    pd_buf u;
    pd_buf_init(&u, 0);
    pd_buf_puts(&u, "/api/0/profiles?service=svc&type=heap&labels=");
    for (int i = 0; i < PD_LABEL_MAX_COUNT + 1; i++)
        pd_buf_printf(&u, "%sk%d=v", i ? "," : "", i);
    req(NULL, u.data, good, len, "application/octet-stream", &r);
    assert_int_equal(r.status, 400);
    pd_buf_release(&r.body);
    pd_buf_reset(&u);
    pd_buf_puts(&u, "/api/0/profiles?service=svc&type=heap&labels=k=");
    for (int i = 0; i < 5000; i++)
        pd_buf_putc(&u, 'x');
    req(NULL, u.data, good, len, "application/octet-stream", &r);
    assert_int_equal(r.status, 400);
    pd_buf_release(&r.body);
    want[3] += 2;
    /* 100,000 labels and a 10 MB label value in the URL: the HTTP layer
     * refuses the request line (414) before any handler runs, counted in
     * profd_http_rejected_total */
    double h0 = http_rejected("request_too_large");
    pd_buf_reset(&u);
    pd_buf_puts(&u, "/api/0/profiles?service=svc&type=heap&labels=");
    for (int i = 0; i < 100000; i++)
        pd_buf_printf(&u, "%sk%d=v", i ? "," : "", i);
    long s = raw_post(u.data, good, len);
    assert_true(s >= 400 && s < 500);
    pd_buf_reset(&u);
    pd_buf_puts(&u, "/api/0/profiles?service=svc&type=heap&labels=k=");
    char *ten = malloc((10u << 20) + 1);
    memset(ten, 'x', 10u << 20);
    ten[10u << 20] = 0;
    pd_buf_puts(&u, ten);
    free(ten);
    s = raw_post(u.data, good, len);
    assert_true(s >= 400 && s < 500);
    pd_buf_release(&u);
    /* the log callback that counts them may run just after the reply */
    for (int i = 0; i < 12000 && http_rejected("request_too_large") < h0 + 2;
         i++) /* 120 s: a hang guard */
        usleep(10000);
    assert_true(http_rejected("request_too_large") == h0 + 2);
    assert_true(scrape_metric("profd_http_rejected_total{reason=\"request_too_large\"}") == h0 + 2);

    free(good);

    for (int i = 0; i < 5; i++) {
        if (rejected(reasons[i]) != r0[i] + want[i])
            fail_msg("profd_rejected_input_total{reason=\"%s\"} = %g, want %g", reasons[i],
                     rejected(reasons[i]), r0[i] + want[i]);
        char line[128];
        snprintf(line, sizeof line, "profd_rejected_input_total{reason=\"%s\"}", reasons[i]);
        /* a reason never counted in this process has no line at all */
        if (r0[i] + want[i] > 0)
            assert_true(scrape_metric(line) == r0[i] + want[i]);
    }
    snapshot(&after);
    assert_string_equal(after.data, before.data);
    pd_buf_release(&before);
    pd_buf_release(&after);
}

/* Block directories (PATH/<ULID>/meta.json) in the store. */
static int count_blocks(void)
{
    DIR *d = opendir(tmpdir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char p[sizeof tmpdir + 300];
        if (strlen(e->d_name) != 26)
            continue;
        snprintf(p, sizeof p, "%s/%.26s/meta.json", tmpdir, e->d_name);
        if (access(p, F_OK) == 0)
            n++;
    }
    closedir(d);
    return n;
}

/* Ids survive closing and reopening the store, and the head cut that moved
 * the 2024 profiles into blocks when the 2026 cpu profiles arrived (they are
 * functions of the label set and the time, not of where a profile lives). */
static void test_ids_after_reopen(void **state)
{
    (void)state;
    /* the cpu profiles are 2026, the heap ones 2024: the store's head cut
     * (default block range 2 h) has written the 2024 ones to blocks; if it
     * did not, this test would no longer cover ids across blocks */
    if (count_blocks() < 1)
        fail_msg("no block in %s: the head cut this test relies on did not happen", tmpdir);
    stop_all();
    assert_int_equal(start_all(), 0);
    assert_true(count_blocks() >= 1);
    json_t *root;
    json_t *b = get_env("/api/0/profiles?service=svc&type=heap", 200, &root);
    assert_int_equal(json_array_size(b), NHEAP);
    for (int i = 0; i < NHEAP; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(b, (size_t)i), "id")),
                            heap_id[i]);
    json_decref(root);
    char pq[256];
    pd_profile got, want;
    snprintf(pq, sizeof pq, "/api/0/profiles/%s", heap_id[1]);
    get_profile(pq, &got, NULL);
    decode_file(HEAP[1], &want);
    pd_err why = {{0}};
    if (!pd_profile_equal(&got, &want, &why))
        fail_msg("after reopen: %s", why.msg);
    pd_profile_release(&got);
    pd_profile_release(&want);
    snprintf(pq, sizeof pq, "/api/0/profiles/%s+%s", cpu_id[0], cpu_id[1]);
    get_profile(pq, &got, NULL);
    check_merge(&got, CPU, 2);
    pd_profile_release(&got);
}

/* Ids survive compaction: the blocks the head cut wrote are merged into
 * one (symbols re-mapped, profiles re-encoded), and every id still lists,
 * reads and merges the same profiles, before and after another reopen. */
static void check_ids(void)
{
    json_t *root;
    json_t *b = get_env("/api/0/profiles?service=svc&type=heap", 200, &root);
    assert_int_equal(json_array_size(b), NHEAP);
    for (int i = 0; i < NHEAP; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(b, (size_t)i), "id")),
                            heap_id[i]);
    json_decref(root);
    b = get_env("/api/0/profiles?service=other&type=heap", 200, &root);
    assert_string_equal(json_string_value(json_object_get(json_array_get(b, 0), "id")), other_id);
    json_decref(root);
    char pq[256];
    for (int i = 0; i < NHEAP; i++) {
        pd_profile got, want;
        snprintf(pq, sizeof pq, "/api/0/profiles/%s", heap_id[i]);
        get_profile(pq, &got, NULL);
        decode_file(HEAP[i], &want);
        pd_err why = {{0}};
        if (!pd_profile_equal(&got, &want, &why))
            fail_msg("%s after compaction: %s", heap_id[i], why.msg);
        pd_profile_release(&got);
        pd_profile_release(&want);
    }
    pd_profile got;
    snprintf(pq, sizeof pq, "/api/0/profiles/%s+%s", heap_id[0], heap_id[2]);
    get_profile(pq, &got, NULL);
    const char *two[2] = {HEAP[0], HEAP[2]};
    check_merge(&got, two, 2);
    pd_profile_release(&got);
}

static void test_ids_after_compaction(void **state)
{
    (void)state;
    int n0 = count_blocks();
    if (n0 < 2)
        fail_msg("%d blocks: this test needs the two blocks of the 2024 range", n0);
    pd_err err = {{0}};
    if (pd_storage_maintain(st, &err) != 0)
        fail_msg("maintain: %s", err.msg);
    pd_storage_stats ss;
    pd_storage_stats_get(st, &ss);
    if (ss.n_compactions < 1 || count_blocks() >= n0)
        fail_msg("no compaction: %d blocks before, %d after, %" PRIu64 " compactions", n0,
                 count_blocks(), ss.n_compactions);
    check_ids();
    stop_all();
    assert_int_equal(start_all(), 0);
    check_ids();
}

/* profefe's own behaviour: a duplicate push is stored again under a new
 * id; label keys and values are URL-decoded and keys may be dotted. */
static void test_profefe_semantics(void **state)
{
    (void)state;
    /* the same profile again at the same series and time: stored again
     * under a new id (profefe stores every push), not 409; in a service of
     * its own so the heap counts of the other tests stay */
    {
        char id1[64], id2[64], id3[64];
        const char *qs = "service=dupsvc&type=heap&created_at=2024-01-02T03:04:05";
        assert_int_equal(push("go-demo-once/heap.pb.gz", qs, id1), 200);
        assert_int_equal(push("go-demo-once/heap.pb.gz", qs, id2), 200);
        assert_int_equal(push("go-demo-once/heap.pb.gz", qs, id3), 200);
        assert_string_not_equal(id1, id2);
        assert_string_not_equal(id2, id3);
        assert_string_not_equal(id1, id3);
        json_t *root;
        json_t *b = get_env("/api/0/profiles?service=dupsvc&type=heap", 200, &root);
        assert_int_equal(json_array_size(b), 3);
        json_decref(root);
    }
    /* profefe's agent URL-escapes label values ("1.0 beta/2" is sent as
     * 1.0+beta%2F2 inside labels=, itself query-encoded); keys may be dotted */
    {
        char id[64];
        assert_int_equal(push("go-demo-once/heap.pb.gz",
                              "service=escsvc&type=heap&created_at=2024-01-02T03:04:05"
                              "&labels=version%3D1.0%2Bbeta%252F2%2C%20k8s.pod%20%3Dweb-1",
                              id),
                         200);
        json_t *root;
        json_t *b = get_env("/api/0/profiles?service=escsvc&type=heap"
                            "&labels=k8s.pod%3Dweb-1%2Cversion%3D1.0%2Bbeta%252F2",
                            200, &root);
        assert_int_equal(json_array_size(b), 1);
        json_t *ls = json_object_get(json_array_get(b, 0), "labels");
        assert_int_equal(json_array_size(ls), 2);
        assert_string_equal(json_string_value(json_object_get(json_array_get(ls, 0), "key")),
                            "k8s.pod");
        assert_string_equal(json_string_value(json_object_get(json_array_get(ls, 0), "value")),
                            "web-1");
        assert_string_equal(json_string_value(json_object_get(json_array_get(ls, 1), "key")),
                            "version");
        assert_string_equal(json_string_value(json_object_get(json_array_get(ls, 1), "value")),
                            "1.0 beta/2");
        json_decref(root);
    }
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_push),
        cmocka_unit_test(test_list),
        cmocka_unit_test(test_get_by_id),
        cmocka_unit_test(test_get_ids_merged),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_services_version),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_ids_after_reopen),
        cmocka_unit_test(test_ids_after_compaction),
        cmocka_unit_test(test_profefe_semantics),
    };
    int rc = cmocka_run_group_tests(tests, setup_all, teardown_all);
    curl_global_cleanup();
    return rc;
}
