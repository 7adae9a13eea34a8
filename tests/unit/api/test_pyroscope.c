/*
 * Tests of api/pyroscope.c (and api/merge.c's per-type deltas) through real HTTP: POST /ingest on a
 * real server over a real storage in a temp dir — folded and lines text, raw pprof, and the
 * multipart form of Pyroscope's Go client (profile, prev_profile, sample_type_config) built here
 * byte by byte as that client writes it. Profiles are read back with /api/v1/query (proto) and
 * checked against the inputs: the folded text's own counts, the pushed pprof files decoded
 * independently. Tests run in order.
 */
#include "push_util.h"

/* Folded input (root first) and the pprof stacks it must become. */
static const char FOLDED[] = "main;work;hash 70\n"
                             "main;work;sort 20\n"
                             "main;idle 9\n"
                             "main;work;hash 1\n";
#define FOLDED_TOTAL 100
/* A speedscope file's start up to its profiles array (frames main, work). */
#define SS_HEAD                                                                                    \
    "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"shared\":{\"frames\":"  \
    "[{\"name\":\"main\",\"file\":\"m.c\",\"line\":3},{\"name\":\"work\"}]},\"profiles\":["
#define FROM_S 1700000000
#define UNTIL_S 1700000010

/* POST /ingest?qs with body; returns status, reply released unless r given. */
static long ingest(const char *qs, const void *body, size_t len, const char *ctype, reply *out)
{
    char pq[4096];
    reply r;
    snprintf(pq, sizeof pq, "/ingest?%s", qs);
    req(NULL, pq, body, len, ctype ? ctype : "application/octet-stream", &r);
    long s = r.status;
    if (out)
        *out = r;
    else
        pd_buf_release(&r.body);
    return s;
}

/* The profile of the one series matching sel nearest to t_s, decoded. */
static void query_profile(const char *sel, int64_t t_s, pd_profile *p)
{
    char e[1024], pq[1400];
    enc(sel, e, sizeof e);
    snprintf(pq, sizeof pq, "/api/v1/query?query=%s&time=%" PRId64 "&report=proto", e, t_s);
    reply r;
    req(NULL, pq, NULL, 0, NULL, &r);
    if (r.status != 200)
        fail_msg("query %s: %ld %.300s", sel, r.status, r.body.data ? r.body.data : "");
    decode_buf(r.body.data, r.body.len, p);
    pd_buf_release(&r.body);
}

/* The labels of the series matching sel as a JSON object (json_decref). */
static json_t *series_labels(const char *sel)
{
    char e[1024], pq[1400];
    enc(sel, e, sizeof e);
    snprintf(pq, sizeof pq, "/api/v1/series?match[]=%s", e);
    reply r;
    req(NULL, pq, NULL, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    json_t *j = jparse(&r);
    pd_buf_release(&r.body);
    json_t *d = json_object_get(j, "data");
    assert_int_equal(json_array_size(d), 1);
    json_t *ls = json_incref(json_array_get(d, 0));
    json_decref(j);
    return ls;
}

static void expect_folded(stack_set *s, int64_t k)
{
    ss_add(s, "main;work;hash;", 71 * k);
    ss_add(s, "main;work;sort;", 20 * k);
    ss_add(s, "main;idle;", 9 * k);
}

static void test_folded(void **state)
{
    (void)state;
    double ok0 = pd_metrics_get("profd_ingested_profiles_total", "source=\"pyroscope\"");
    char name[256], qs[512];
    enc("myapp.cpu{env=staging,__session_id__=abc123,region=eu-1}", name, sizeof name);
    snprintf(qs, sizeof qs,
             "name=%s&from=%d&until=%d&sampleRate=100&spyName=gospy&units=samples&"
             "aggregationType=sum&format=folded",
             name, FROM_S, UNTIL_S);
    reply r;
    if (ingest(qs, FOLDED, sizeof FOLDED - 1, "text/plain", &r) != 200)
        fail_msg("ingest: %ld %s", r.status, r.body.data);
    pd_buf_release(&r.body);

    json_t *ls = series_labels("cpu{service_name=\"myapp\"}");
    assert_string_equal(json_string_value(json_object_get(ls, "__name__")), "cpu");
    assert_string_equal(json_string_value(json_object_get(ls, "env")), "staging");
    assert_string_equal(json_string_value(json_object_get(ls, "region")), "eu-1");
    assert_null(json_object_get(ls, "__session_id__"));
    assert_string_equal(json_string_value(json_object_get(ls, "pyroscope_spy")), "gospy");
    assert_int_equal(json_object_size(ls), 5);
    json_decref(ls);

    pd_profile p;
    query_profile("cpu{service_name=\"myapp\"}", FROM_S, &p);
    assert_true(p.time_nanos == (int64_t)FROM_S * 1000000000);
    assert_true(p.duration_nanos == (int64_t)(UNTIL_S - FROM_S) * 1000000000);
    assert_int_equal(p.n_sample_type, 2);
    assert_string_equal(pd_profile_str(&p, p.sample_type[0].type), "samples");
    assert_string_equal(pd_profile_str(&p, p.sample_type[1].type), "cpu");
    assert_string_equal(pd_profile_str(&p, p.sample_type[1].unit), "nanoseconds");
    int64_t tot[2];
    pd_profile_totals(&p, tot);
    assert_true(tot[0] == FOLDED_TOTAL);
    assert_true(tot[1] == (int64_t)FOLDED_TOTAL * (1000000000 / 100)); /* 100 Hz: 10 ms each */
    stack_set got = {0}, want = {0};
    ss_add_profile(&got, &p, "samples", 1);
    expect_folded(&want, 1);
    ss_assert_equal(&got, &want, "folded stacks");
    ss_release(&got);
    ss_release(&want);
    pd_profile_release(&p);

    /* the stored time is `from`: the range query shows exactly it */
    reply q;
    req(NULL, "/api/v1/query_range?query=cpu%7Bservice_name%3D%22myapp%22%7D&from=0&to=9000000000",
        NULL, 0, NULL, &q);
    json_t *j = jparse(&q);
    json_t *ts = json_object_get(json_array_get(json_object_get(j, "data"), 0), "timestamps");
    assert_int_equal(json_array_size(ts), 1);
    assert_true(json_integer_value(json_array_get(ts, 0)) == (json_int_t)FROM_S * 1000);
    json_decref(j);
    pd_buf_release(&q.body);

    /* gzip-compressed folded, Pyroscope's lines, and a non-time unit */
    pd_buf gz;
    pd_buf_init(&gz, 0);
    assert_int_equal(pd_gzip((const uint8_t *)FOLDED, sizeof FOLDED - 1, &gz), 0);
    snprintf(qs, sizeof qs, "name=gzapp.cpu&from=%d&format=folded", FROM_S);
    assert_int_equal(ingest(qs, gz.data, gz.len, NULL, NULL), 200);
    pd_buf_release(&gz);
    query_profile("cpu{service_name=\"gzapp\"}", FROM_S, &p);
    pd_profile_totals(&p, tot);
    assert_true(tot[0] == FOLDED_TOTAL);
    pd_profile_release(&p);

    const char lines[] = "main;a;b\nmain;a;b\nmain;c\n";
    snprintf(qs, sizeof qs, "name=linesapp.wall&from=%d&format=lines", FROM_S);
    assert_int_equal(ingest(qs, lines, sizeof lines - 1, NULL, NULL), 200);
    query_profile("wall{service_name=\"linesapp\"}", FROM_S, &p);
    want = (stack_set){0};
    got = (stack_set){0};
    ss_add(&want, "main;a;b;", 2);
    ss_add(&want, "main;c;", 1);
    ss_add_profile(&got, &p, "samples", 1);
    ss_assert_equal(&got, &want, "lines");
    ss_release(&got);
    ss_release(&want);
    pd_profile_release(&p);

    snprintf(qs, sizeof qs, "name=memapp.alloc_objects&from=%d&units=objects", FROM_S);
    assert_int_equal(ingest(qs, FOLDED, sizeof FOLDED - 1, NULL, NULL), 200);
    query_profile("alloc_objects{service_name=\"memapp\"}", FROM_S, &p);
    assert_int_equal(p.n_sample_type, 1);
    assert_string_equal(pd_profile_str(&p, p.sample_type[0].type), "alloc_objects");
    pd_profile_totals(&p, tot);
    assert_true(tot[0] == FOLDED_TOTAL);
    pd_profile_release(&p);

    /* a dotted app with a type suffix: the app is all before the last dot
     * (com.example.svc alone is refused, as Pyroscope does: test_bad_input) */
    snprintf(qs, sizeof qs, "name=com.example.svc.cpu&from=%d", FROM_S);
    assert_int_equal(ingest(qs, FOLDED, sizeof FOLDED - 1, NULL, NULL), 200);
    json_decref(series_labels("cpu{service_name=\"com.example.svc\"}"));

    assert_true(pd_metrics_get("profd_ingested_profiles_total", "source=\"pyroscope\"") == ok0 + 5);
}

/* Appends one form-data part as Go's mime/multipart writes it. */
static void mp_part(pd_buf *b, const char *boundary, const char *name, const char *filename,
                    const void *data, size_t len)
{
    pd_buf_printf(b, "--%s\r\n", boundary);
    if (filename)
        pd_buf_printf(b,
                      "Content-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
                      "Content-Type: application/octet-stream\r\n\r\n",
                      name, filename);
    else
        pd_buf_printf(b, "Content-Disposition: form-data; name=\"%s\"\r\n\r\n", name);
    pd_buf_append(b, data, len);
    pd_buf_puts(b, "\r\n");
}

#define BOUNDARY "a3f1c9e07b5d4c2e9f8a6b1d0c3e5f7a9b2d4c6e8f0a1b3c5d7e9f1a3b5c"
#define MP_CT "multipart/form-data; boundary=" BOUNDARY

static const char STC[] = "{\"alloc_objects\":{\"units\":\"objects\",\"cumulative\":true},"
                          "\"alloc_space\":{\"units\":\"bytes\",\"cumulative\":true},"
                          "\"inuse_objects\":{\"units\":\"objects\",\"aggregation\":\"average\"},"
                          "\"inuse_space\":{\"units\":\"bytes\",\"aggregation\":\"average\"}}";

static void test_pprof(void **state)
{
    (void)state;
    char qs[512];
    size_t len;
    /* raw pprof body */
    uint8_t *heap = read_testdata("go-demo-once/heap.pb.gz", &len);
    snprintf(qs, sizeof qs, "name=rawapp.inuse_space%%7Bpod%%3Dp1%%7D&from=%d&format=pprof",
             FROM_S);
    assert_int_equal(ingest(qs, heap, len, NULL, NULL), 200);
    pd_profile got, want;
    query_profile("inuse_space{service_name=\"rawapp\",pod=\"p1\"}", FROM_S, &got);
    decode_buf(heap, len, &want);
    pd_err why = {{0}};
    if (!pd_profile_equal(&got, &want, &why))
        fail_msg("raw pprof: %s", why.msg);
    pd_profile_release(&got);
    pd_profile_release(&want);
    free(heap);

    /* multipart with profile + sample_type_config (cpu, no prev): stored as is */
    uint8_t *cpu = read_testdata("go-demo-series/cpu-0003.pb.gz", &len);
    pd_buf b;
    pd_buf_init(&b, 0);
    mp_part(&b, BOUNDARY, "profile", "profile.pprof", cpu, len);
    mp_part(&b, BOUNDARY, "sample_type_config", "sample_type_config.json", STC, sizeof STC - 1);
    pd_buf_puts(&b, "--" BOUNDARY "--\r\n");
    /* from/until in nanoseconds, as the Go client sends them */
    snprintf(qs, sizeof qs,
             "name=goapp.cpu&from=%d000000000&until=%d000000000&spyName=gospy&sampleRate=100",
             FROM_S, UNTIL_S);
    reply r;
    if (ingest(qs, b.data, b.len, MP_CT, &r) != 200)
        fail_msg("multipart: %ld %s", r.status, r.body.data);
    pd_buf_release(&r.body);
    query_profile("cpu{service_name=\"goapp\"}", FROM_S, &got);
    reply q;
    req(NULL, "/api/v1/query_range?query=cpu%7Bservice_name%3D%22goapp%22%7D&from=0&to=9000000000",
        NULL, 0, NULL, &q);
    assert_non_null(strstr(q.body.data, "\"timestamps\":[1700000000000]"));
    pd_buf_release(&q.body);
    decode_buf(cpu, len, &want);
    if (!pd_profile_equal(&got, &want, &why))
        fail_msg("multipart profile: %s", why.msg);
    pd_profile_release(&got);
    pd_profile_release(&want);
    free(cpu);
    pd_buf_release(&b);

    /* multipart with prev_profile: cumulative types become profile - prev */
    size_t l1, l2;
    uint8_t *h1 = read_testdata("go-demo-series/heap-0001.pb.gz", &l1);
    uint8_t *h2 = read_testdata("go-demo-series/heap-0010.pb.gz", &l2);
    pd_buf_init(&b, 0);
    pd_buf_puts(&b, "preamble to ignore\r\n");
    mp_part(&b, BOUNDARY, "profile", "profile.pprof", h2, l2);
    mp_part(&b, BOUNDARY, "prev_profile", "profile.pprof", h1, l1);
    mp_part(&b, BOUNDARY, "sample_type_config", "sample_type_config.json", STC, sizeof STC - 1);
    pd_buf_puts(&b, "--" BOUNDARY "--\r\n");
    snprintf(qs, sizeof qs, "name=goapp.inuse_objects&from=%d", FROM_S);
    if (ingest(qs, b.data, b.len, MP_CT, &r) != 200)
        fail_msg("multipart prev: %ld %s", r.status, r.body.data);
    pd_buf_release(&r.body);
    pd_buf_release(&b);
    query_profile("inuse_objects{service_name=\"goapp\"}", FROM_S, &got);
    pd_profile p1, p2;
    decode_buf(h1, l1, &p1);
    decode_buf(h2, l2, &p2);
    const char *types[4] = {"alloc_objects", "alloc_space", "inuse_objects", "inuse_space"};
    for (int t = 0; t < 4; t++) {
        stack_set gs = {0}, ws = {0};
        ss_add_profile(&gs, &got, types[t], 1);
        ss_add_profile(&ws, &p2, types[t], 1);
        if (t < 2) /* cumulative */
            ss_add_profile(&ws, &p1, types[t], -1);
        ss_assert_equal(&gs, &ws, types[t]);
        ss_release(&gs);
        ss_release(&ws);
    }
    pd_profile_release(&got);
    pd_profile_release(&p1);
    pd_profile_release(&p2);
    free(h1);
    free(h2);
}

static void test_bad_input(void **state)
{
    (void)state;
    pd_buf before, after;
    snapshot(&before);
    const char *reasons[] = {"bad_profile", "too_large", "bad_request", "bad_labels"};
    double r0[4], want[4] = {0};
    for (int i = 0; i < 4; i++)
        r0[i] = rejected(reasons[i]);
    char qs[1024];
    size_t len;
    uint8_t *cpu = read_testdata("go-demo-series/cpu-0004.pb.gz", &len);
    reply r;

    /* bad_profile: garbage pprof, truncated pprof, malformed folded, empty
     * folded, truncated multipart, multipart without profile, garbage in the
     * profile part, garbage prev_profile */
    snprintf(qs, sizeof qs, "name=bad.cpu&from=%d&format=pprof", FROM_S + 100);
    assert_int_equal(ingest(qs, "garbage!", 8, NULL, NULL), 400);
    assert_int_equal(ingest(qs, cpu, len / 2, NULL, NULL), 400);
    snprintf(qs, sizeof qs, "name=bad.cpu&from=%d&format=folded", FROM_S + 100);
    const char badf[] = "main;ok 3\nmain;bad notanumber\n";
    if (ingest(qs, badf, sizeof badf - 1, NULL, &r) != 400)
        fail_msg("bad folded: %ld", r.status);
    assert_non_null(strstr(r.body.data, "line 2"));
    pd_buf_release(&r.body);
    assert_int_equal(ingest(qs, "", 0, NULL, NULL), 400);
    pd_buf b;
    pd_buf_init(&b, 0);
    mp_part(&b, BOUNDARY, "profile", "profile.pprof", cpu, len);
    pd_buf_puts(&b, "--" BOUNDARY "--\r\n");
    snprintf(qs, sizeof qs, "name=bad.cpu&from=%d", FROM_S + 100);
    for (size_t cut = 10; cut < b.len; cut += b.len / 7)
        if (ingest(qs, b.data, b.len - cut, MP_CT, &r) != 400)
            fail_msg("multipart cut by %zu: %ld %s", cut, r.status, r.body.data);
        else
            pd_buf_release(&r.body);
    want[0] += 4 + 7;
    pd_buf_reset(&b);
    mp_part(&b, BOUNDARY, "other", NULL, "x", 1);
    pd_buf_puts(&b, "--" BOUNDARY "--\r\n");
    assert_int_equal(ingest(qs, b.data, b.len, MP_CT, NULL), 400);
    pd_buf_reset(&b);
    mp_part(&b, BOUNDARY, "profile", "profile.pprof", "garbage!", 8);
    pd_buf_puts(&b, "--" BOUNDARY "--\r\n");
    assert_int_equal(ingest(qs, b.data, b.len, MP_CT, NULL), 400);
    pd_buf_reset(&b);
    mp_part(&b, BOUNDARY, "profile", "profile.pprof", cpu, len);
    mp_part(&b, BOUNDARY, "prev_profile", "profile.pprof", "garbage!", 8);
    pd_buf_puts(&b, "--" BOUNDARY "--\r\n");
    assert_int_equal(ingest(qs, b.data, b.len, MP_CT, NULL), 400);
    want[0] += 3;
    /* bad_request: a multipart without boundary, bad sample_type_config */
    assert_int_equal(ingest(qs, b.data, b.len, "multipart/form-data", NULL), 400);
    pd_buf_reset(&b);
    mp_part(&b, BOUNDARY, "profile", "profile.pprof", cpu, len);
    mp_part(&b, BOUNDARY, "sample_type_config", NULL, "{not json", 9);
    pd_buf_puts(&b, "--" BOUNDARY "--\r\n");
    assert_int_equal(ingest(qs, b.data, b.len, MP_CT, NULL), 400);
    want[2] += 2;

    /* too_large: a gzip bomb as folded and as pprof; 17 parts; a body over
     * the api's max_body_bytes */
    pd_buf bomb;
    gzip_zeros(200u << 20, &bomb);
    snprintf(qs, sizeof qs, "name=bad.cpu&from=%d&format=folded", FROM_S + 100);
    assert_int_equal(ingest(qs, bomb.data, bomb.len, NULL, NULL), 413);
    snprintf(qs, sizeof qs, "name=bad.cpu&from=%d&format=pprof", FROM_S + 100);
    assert_int_equal(ingest(qs, bomb.data, bomb.len, NULL, NULL), 413);
    pd_buf_release(&bomb);
    pd_buf_reset(&b);
    for (int i = 0; i < 17; i++)
        mp_part(&b, BOUNDARY, "junk", NULL, "x", 1);
    pd_buf_puts(&b, "--" BOUNDARY "--\r\n");
    snprintf(qs, sizeof qs, "name=bad.cpu&from=%d", FROM_S + 100);
    assert_int_equal(ingest(qs, b.data, b.len, MP_CT, NULL), 413);
    uint8_t *big = calloc(1, TEST_MAX_BODY + 1);
    assert_int_equal(ingest(qs, big, TEST_MAX_BODY + 1, NULL, NULL), 413);
    free(big);
    want[1] += 4;

    /* bad_request: what Pyroscope's convertMetadata refuses for a non-pprof
     * body: a type suffix it does not know (app16.foo, my.app) */
    const char *badq[] = {"name=app16.foo%7B%7D", "name=my.app&format=lines"};
    for (size_t i = 0; i < sizeof badq / sizeof *badq; i++)
        if (ingest(badq[i], FOLDED, sizeof FOLDED - 1, NULL, &r) != 400)
            fail_msg("%s: %ld", badq[i], r.status);
        else if (!strstr(r.body.data, "unknown profile type"))
            fail_msg("%s: reply %s", badq[i], r.body.data);
        else
            pd_buf_release(&r.body);
    want[2] += 2;

    /* bad_labels: what labelset.Parse refuses (a missing or bad application
     * name, a label name outside [a-zA-Z0-9_.] or empty), 65 labels, a
     * 5000-byte value */
    const char *badn[] = {"", "app.cpu{a-b=1}", "app.cpu{=1}", "my%app{}", "app.cpu{a b=1}"};
    for (size_t i = 0; i < sizeof badn / sizeof *badn; i++) {
        char e[256];
        enc(badn[i], e, sizeof e);
        snprintf(qs, sizeof qs, "name=%s&from=%d", e, FROM_S + 100);
        if (ingest(qs, FOLDED, sizeof FOLDED - 1, NULL, &r) != 400)
            fail_msg("name %s: %ld", badn[i], r.status);
        pd_buf_release(&r.body);
    }
    pd_buf u;
    pd_buf_init(&u, 0);
    pd_buf_puts(&u, "/ingest?from=1700000100&name=app.cpu%7B");
    for (int i = 0; i < PD_LABEL_MAX_COUNT + 1; i++)
        pd_buf_printf(&u, "%sk%d%%3Dv", i ? "," : "", i);
    pd_buf_puts(&u, "%7D");
    req(NULL, u.data, FOLDED, sizeof FOLDED - 1, NULL, &r);
    assert_int_equal(r.status, 400);
    pd_buf_release(&r.body);
    pd_buf_reset(&u);
    pd_buf_puts(&u, "/ingest?from=1700000100&name=app.cpu%7Bk%3D");
    for (int i = 0; i < 5000; i++)
        pd_buf_putc(&u, 'x');
    pd_buf_puts(&u, "%7D");
    req(NULL, u.data, FOLDED, sizeof FOLDED - 1, NULL, &r);
    assert_int_equal(r.status, 400);
    pd_buf_release(&r.body);
    want[3] += 5 + 2;
    /* 100,000 labels / a 10 MB value in the URL: refused by the HTTP layer */
    pd_buf_reset(&u);
    pd_buf_puts(&u, "/ingest?from=1700000100&name=app.cpu%7B");
    for (int i = 0; i < 100000; i++)
        pd_buf_printf(&u, "%sk%d%%3Dv", i ? "," : "", i);
    pd_buf_puts(&u, "%7D");
    long s = raw_post(u.data, FOLDED, sizeof FOLDED - 1);
    assert_true(s >= 400 && s < 500);
    pd_buf_release(&u);

    free(cpu);
    pd_buf_release(&b);
    for (int i = 0; i < 4; i++) {
        if (rejected(reasons[i]) != r0[i] + want[i])
            fail_msg("profd_rejected_input_total{reason=\"%s\"} = %g, want %g", reasons[i],
                     rejected(reasons[i]), r0[i] + want[i]);
        char line[128];
        snprintf(line, sizeof line, "profd_rejected_input_total{reason=\"%s\"}", reasons[i]);
        assert_true(scrape_metric(line) == r0[i] + want[i]);
    }
    snapshot(&after);
    assert_string_equal(after.data, before.data);
    pd_buf_release(&before);
    pd_buf_release(&after);
}

/* POSTs body to /ingest?qs; fails unless the status is want and the reply's
 * text contains every one of the NULL-ended needles. */
static void expect_refused(const char *qs, const void *body, size_t len, const char *ctype,
                           long want, ...)
{
    reply r;
    long s = ingest(qs, body, len, ctype, &r);
    const char *text = r.body.data ? r.body.data : "";
    if (s != want)
        fail_msg("%.200s: HTTP %ld, want %ld: %.300s", qs, s, want, text);
    va_list ap;
    va_start(ap, want);
    for (const char *n; (n = va_arg(ap, const char *));)
        if (!strstr(text, n))
            fail_msg("%.200s: reply '%.300s' does not name '%s'", qs, text, n);
    va_end(ap);
    pd_buf_release(&r.body);
}

/* The hostile inputs of issue 5 on every body format of /ingest, each with
 * a message naming the problem, counted, and the store unchanged. */
static void test_hostile_input(void **state)
{
    (void)state;
    pd_buf before, after;
    snapshot(&before);
    const char *reasons[] = {"bad_profile", "too_large", "bad_request", "bad_labels"};
    double r0[4], want[4] = {0};
    for (int i = 0; i < 4; i++)
        r0[i] = rejected(reasons[i]);
    double h0 = http_rejected("request_too_large");
    char qs[256];
    pd_buf b, lp, gz;
    pd_buf_init(&b, 0);
    pd_buf_init(&gz, 0);

    /* 100,000 labels in a sample: raw pprof and the multipart profile part */
    label_profile(100000, 1, &lp);
    assert_true(lp.len < TEST_MAX_BODY);
    snprintf(qs, sizeof qs, "name=hostile.cpu&from=%d&format=pprof", FROM_S + 200);
    expect_refused(qs, lp.data, lp.len, NULL, 413, "max_labels_per_sample", NULL);
    mp_part(&b, BOUNDARY, "profile", "profile.pprof", lp.data, lp.len);
    pd_buf_puts(&b, "--" BOUNDARY "--\r\n");
    snprintf(qs, sizeof qs, "name=hostile.cpu&from=%d", FROM_S + 200);
    expect_refused(qs, b.data, b.len, MP_CT, 413, "profile", "max_labels_per_sample", NULL);
    /* ... and as prev_profile beside a good profile */
    size_t len;
    uint8_t *good = read_testdata("go-demo-series/heap-0002.pb.gz", &len);
    pd_buf_reset(&b);
    mp_part(&b, BOUNDARY, "profile", "profile.pprof", good, len);
    mp_part(&b, BOUNDARY, "prev_profile", "profile.pprof", lp.data, lp.len);
    pd_buf_puts(&b, "--" BOUNDARY "--\r\n");
    expect_refused(qs, b.data, b.len, MP_CT, 413, "prev_profile", "max_labels_per_sample", NULL);
    pd_buf_release(&lp);
    want[1] += 3;

    /* a 10 MB label value: raw pprof and multipart */
    label_profile(1, 10u << 20, &lp);
    assert_true(lp.len < TEST_MAX_BODY);
    snprintf(qs, sizeof qs, "name=hostile.cpu&from=%d&format=pprof", FROM_S + 200);
    expect_refused(qs, lp.data, lp.len, NULL, 413, "label value", NULL);
    pd_buf_reset(&b);
    mp_part(&b, BOUNDARY, "profile", "profile.pprof", lp.data, lp.len);
    pd_buf_puts(&b, "--" BOUNDARY "--\r\n");
    snprintf(qs, sizeof qs, "name=hostile.cpu&from=%d", FROM_S + 200);
    expect_refused(qs, b.data, b.len, MP_CT, 413, "label value", NULL);
    pd_buf_release(&lp);
    want[1] += 2;

    /* folded / lines: a 10 MB frame (one line over the converter's cap),
     * gzip-compressed to pass the body cap; a gzip bomb as lines; truncated
     * gzip; garbage bytes with a NUL */
    size_t big = 10u << 20;
    char *line = malloc(big + 8);
    memset(line, 'f', big);
    memcpy(line + big, " 1\n", 4);
    assert_int_equal(pd_gzip((const uint8_t *)line, big + 3, &gz), 0);
    free(line);
    assert_true(gz.len < TEST_MAX_BODY);
    snprintf(qs, sizeof qs, "name=hostile.cpu&from=%d&format=folded", FROM_S + 200);
    expect_refused(qs, gz.data, gz.len, NULL, 413, "line 1", NULL);
    snprintf(qs, sizeof qs, "name=hostile.cpu&from=%d&format=lines", FROM_S + 200);
    expect_refused(qs, gz.data, gz.len, NULL, 413, "line 1", NULL);
    pd_buf bomb;
    gzip_zeros(200u << 20, &bomb);
    expect_refused(qs, bomb.data, bomb.len, NULL, 413, "decompressed", NULL);
    pd_buf_release(&bomb);
    want[1] += 3;
    pd_buf_reset(&gz);
    assert_int_equal(pd_gzip((const uint8_t *)FOLDED, sizeof FOLDED - 1, &gz), 0);
    expect_refused(qs, gz.data, gz.len - 9, NULL, 400, "truncated", NULL);
    snprintf(qs, sizeof qs, "name=hostile.cpu&from=%d&format=folded", FROM_S + 200);
    expect_refused(qs, gz.data, gz.len / 2, NULL, 400, "truncated", NULL);
    const char trunc[] = "main;work;hash 70\nmain;work;so";
    expect_refused(qs, trunc, sizeof trunc - 1, NULL, 400, "line 2", NULL);
    const char nul[] = "main;a\0b 3\n";
    expect_refused(qs, nul, sizeof nul - 1, NULL, 400, "line 1", "NUL", NULL);
    snprintf(qs, sizeof qs, "name=hostile.cpu&from=%d&format=lines", FROM_S + 200);
    expect_refused(qs, nul, sizeof nul - 1, NULL, 400, "line 1", "NUL", NULL);
    snprintf(qs, sizeof qs, "name=hostile.cpu&from=%d&format=pprof", FROM_S + 200);
    expect_refused(qs, good, len - 5, NULL, 400, "truncated", NULL);
    /* a truncated trie (Pyroscope's format=trie), raw and by Content-Type */
    {
        static const uint8_t trie[] = {0, 0, 1, 5,   'm', 'a', 'i', 'n', ';',
                                       0, 2, 4, 'w', 'o', 'r', 'k', 7,   0};
        snprintf(qs, sizeof qs, "name=hostile.cpu&from=%d&format=trie", FROM_S + 200);
        expect_refused(qs, trie, sizeof trie, NULL, 400, "trie", "truncated", NULL);
        snprintf(qs, sizeof qs, "name=hostile.cpu&from=%d", FROM_S + 200);
        expect_refused(qs, trie, sizeof trie - 3, "binary/octet-stream+trie", 400, "trie",
                       "truncated", NULL);
    }
    want[0] += 8;
    free(good);

    /* a wrong format, and a name that is not APP.TYPE{k=v}: 400 naming it */
    /* jfr is a format: folded text posted as JFR is a bad profile */
    snprintf(qs, sizeof qs, "name=hostile.cpu&from=%d&format=jfr", FROM_S + 200);
    expect_refused(qs, FOLDED, sizeof FOLDED - 1, NULL, 400, "jfr: chunk 1 at offset 0", NULL);
    want[0] += 1;
    /* folded text posted as speedscope or as a tree: bad profiles naming the format */
    snprintf(qs, sizeof qs, "name=hostile.cpu&from=%d&format=speedscope", FROM_S + 200);
    expect_refused(qs, FOLDED, sizeof FOLDED - 1, NULL, 400, "speedscope body", "not JSON", NULL);
    snprintf(qs, sizeof qs, "name=hostile.cpu&from=%d", FROM_S + 200);
    expect_refused(qs, FOLDED, sizeof FOLDED - 1, "binary/octet-stream+tree", 400, "tree body",
                   "truncated", NULL);
    want[0] += 2;
    /* speedscope files Pyroscope refuses, each with Pyroscope's reason */
    {
        static const char *bad[][2] = {
            {"{\"$schema\":\"https://example.com/x.json\",\"profiles\":[]}", "Unknown schema"},
            {SS_HEAD "{\"type\":\"sampled\",\"unit\":\"parsecs\",\"samples\":[],"
                     "\"weights\":[]}]}",
             "invalid profile unit"},
            {SS_HEAD "{\"type\":\"flat\",\"unit\":\"none\"}]}", "Profile type flat"},
            {SS_HEAD "{\"type\":\"sampled\",\"unit\":\"none\",\"samples\":[[0,1]],"
                     "\"weights\":[]}]}",
             "Unequal lengths"},
            {SS_HEAD "{\"type\":\"sampled\",\"unit\":\"none\",\"samples\":[[0,7]],"
                     "\"weights\":[1]}]}",
             "Invalid frame"},
            {SS_HEAD "{\"type\":\"sampled\",\"unit\":\"none\",\"samples\":[[0]],"
                     "\"weights\":[-2]}]}",
             "Negative weight"},
            {SS_HEAD "{\"type\":\"evented\",\"unit\":\"seconds\",\"events\":["
                     "{\"type\":\"O\",\"at\":2,\"frame\":0},{\"type\":\"C\",\"at\":1,"
                     "\"frame\":0}]}]}",
             "Events out of order"},
            {SS_HEAD "{\"type\":\"evented\",\"unit\":\"seconds\",\"events\":["
                     "{\"type\":\"O\",\"at\":0,\"frame\":0},{\"type\":\"C\",\"at\":1,"
                     "\"frame\":1}]}]}",
             "Closing non-open frame"},
            {SS_HEAD "{\"type\":\"evented\",\"unit\":\"seconds\",\"events\":["
                     "{\"type\":\"C\",\"at\":0,\"frame\":0}]}]}",
             "No stack to close"},
        };
        snprintf(qs, sizeof qs, "name=hostile&from=%d&format=speedscope", FROM_S + 200);
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            expect_refused(qs, bad[i][0], strlen(bad[i][0]), NULL, 400, bad[i][1], NULL);
            want[0] += 1;
        }
    }
    snprintf(qs, sizeof qs, "name=hostile.cpu%%7Bk-1%%3D1%%7D&from=%d", FROM_S + 200);
    expect_refused(qs, FOLDED, sizeof FOLDED - 1, NULL, 400, "name", "k-1", NULL);
    want[3] += 1;

    /* a 10 MB label value in the name: the HTTP layer refuses the request
     * line before any handler, counted in profd_http_rejected_total */
    pd_buf u;
    pd_buf_init(&u, 0);
    pd_buf_puts(&u, "/ingest?from=1700000200&name=app.cpu%7Bk%3D");
    for (size_t i = 0; i < (10u << 20); i++)
        pd_buf_putc(&u, 'x');
    pd_buf_puts(&u, "%7D");
    long s = raw_post(u.data, FOLDED, sizeof FOLDED - 1);
    if (s != 414 && s != 431)
        fail_msg("10 MB label value in the URL: HTTP %ld, want 414 or 431", s);
    pd_buf_release(&u);
    /* the log callback that counts it may run just after the reply */
    for (int i = 0; i < 12000 && http_rejected("request_too_large") < h0 + 1;
         i++) /* 120 s: a hang guard */
        usleep(10000);
    assert_true(http_rejected("request_too_large") == h0 + 1);
    assert_true(scrape_metric("profd_http_rejected_total{reason=\"request_too_large\"}") == h0 + 1);

    pd_buf_release(&b);
    pd_buf_release(&gz);
    for (int i = 0; i < 4; i++) {
        if (rejected(reasons[i]) != r0[i] + want[i])
            fail_msg("profd_rejected_input_total{reason=\"%s\"} = %g, want %g", reasons[i],
                     rejected(reasons[i]), r0[i] + want[i]);
        char mline[128];
        snprintf(mline, sizeof mline, "profd_rejected_input_total{reason=\"%s\"}", reasons[i]);
        assert_true(scrape_metric(mline) == r0[i] + want[i]);
    }
    snapshot(&after);
    assert_string_equal(after.data, before.data);
    pd_buf_release(&before);
    pd_buf_release(&after);
}

/* One folded push under name (raw, encoded here) and extra query args;
 * fails unless 200. */
static void push_named(const char *name, const char *extra, int from_s)
{
    char e[1024], qs[1400];
    enc(name, e, sizeof e);
    snprintf(qs, sizeof qs, "name=%s&from=%d%s", e, from_s, extra);
    reply r;
    if (ingest(qs, FOLDED, sizeof FOLDED - 1, "text/plain", &r) != 200)
        fail_msg("ingest %s %s: %ld %s", name, extra, r.status, r.body.data ? r.body.data : "");
    pd_buf_release(&r.body);
}

/* Label value of the one series sel matches, or NULL (string owned by *root). */
static const char *label_of(const char *sel, const char *name, json_t **root)
{
    *root = series_labels(sel);
    return json_string_value(json_object_get(*root, name));
}

/* Names Pyroscope accepts and profd refused before (issue 11): each stored
 * with the labels the client meant, as labelset.Parse reads them. */
static void test_name_forms(void **state)
{
    (void)state;
    json_t *j;
    int t = FROM_S + 1000;
    push_named("nf1{1abc=x}", "", t);
    assert_string_equal(label_of("{service_name=\"nf1\"}", "1abc", &j), "x");
    assert_string_equal(json_string_value(json_object_get(j, "__name__")), "cpu");
    assert_string_equal(json_string_value(json_object_get(j, "pyroscope_spy")), "unknown");
    json_decref(j);
    push_named(" nf2.cpu { env = prod , otel.scope.name = my lib }", "", t);
    assert_string_equal(
        label_of("{service_name=\"nf2\", \"otel.scope.name\"=\"my lib\"}", "env", &j), "prod");
    json_decref(j);
    push_named("nf3.cpu{env=,foo}", "", t);
    j = series_labels("{service_name=\"nf3\"}");
    assert_null(json_object_get(j, "env"));
    assert_null(json_object_get(j, "foo"));
    json_decref(j);
    push_named("nf4.cpu{env=a,env=b}", "", t);
    assert_string_equal(label_of("{service_name=\"nf4\"}", "env", &j), "b");
    json_decref(j);
    /* service_name in the tags wins; the app becomes app_name */
    push_named("nf5.cpu{service_name=svc5}", "", t);
    assert_string_equal(label_of("{service_name=\"svc5\"}", "app_name", &j), "nf5");
    json_decref(j);
    /* text after '}' is ignored */
    push_named("nf6.cpu{env=x}trailing", "", t);
    assert_string_equal(label_of("{service_name=\"nf6\"}", "env", &j), "x");
    json_decref(j);
    /* no type suffix: cpu; the value may hold '=' and '{' */
    push_named("nf7{q=a=b{c}", "", t);
    assert_string_equal(label_of("{service_name=\"nf7\"}", "q", &j), "a=b{c");
    json_decref(j);

    /* sampleRate 0 or garbage: 100 Hz (one sample is 10 ms) */
    const char *rates[] = {"&sampleRate=0", "&sampleRate=abc", "&sampleRate=-5", ""};
    for (int i = 0; i < 4; i++) {
        char nm[32], sel[64];
        snprintf(nm, sizeof nm, "nfrate%d.cpu", i);
        push_named(nm, rates[i], t);
        snprintf(sel, sizeof sel, "cpu{service_name=\"nfrate%d\"}", i);
        pd_profile p;
        query_profile(sel, t, &p);
        assert_int_equal(p.n_sample_type, 2);
        assert_true(p.period == 10000000);
        pd_profile_release(&p);
    }
    /* from/until in s, ms, us and ns are the same instant */
    const char *forms[] = {"1700002000", "1700002000000", "1700002000000000",
                           "1700002000000000000"};
    for (int i = 0; i < 4; i++) {
        char nm[32], sel[64], e[128];
        snprintf(nm, sizeof nm, "nftime%d.cpu", i);
        snprintf(e, sizeof e, "&until=%s", forms[i]);
        char qs[256];
        snprintf(qs, sizeof qs, "name=%s&from=%s%s", nm, forms[i], "");
        reply r;
        if (ingest(qs, FOLDED, sizeof FOLDED - 1, NULL, &r) != 200)
            fail_msg("%s: %ld", qs, r.status);
        pd_buf_release(&r.body);
        snprintf(sel, sizeof sel, "cpu{service_name=\"nftime%d\"}", i);
        pd_profile p;
        query_profile(sel, 1700002000, &p);
        assert_true(p.time_nanos == 1700002000LL * 1000000000);
        pd_profile_release(&p);
    }
    /* from=now-10s: ten seconds ago */
    {
        reply r;
        int64_t before = pd_now_ms();
        if (ingest("name=nfnow.cpu&from=now-10s&until=now", FOLDED, sizeof FOLDED - 1, NULL, &r) !=
            200)
            fail_msg("now-10s: %ld", r.status);
        pd_buf_release(&r.body);
        pd_profile p;
        query_profile("cpu{service_name=\"nfnow\"}", before / 1000 - 10, &p);
        int64_t ms = p.time_nanos / 1000000;
        assert_true(ms >= before - 10000 - 2000 && ms <= pd_now_ms() - 10000 + 2000);
        assert_true(p.duration_nanos >= 9000000000LL && p.duration_nanos <= 12000000000LL);
        pd_profile_release(&p);
    }
    /* pprof under a name without a type suffix: the type from the sample
     * types as Pyroscope names it, one series per type, service_name kept */
    {
        const char *files[] = {"go-demo-series/cpu-0003.pb.gz", "go-demo-once/heap.pb.gz",
                               "go-demo-once/goroutine.pb.gz",  "go-demo-once/mutex.pb.gz",
                               "node/node-cpu.pb.gz",           "node/node-heap.pb.gz"};
        const char *types[] = {"process_cpu", "memory", "goroutines", "mutex", "wall", "memory"};
        for (int i = 0; i < 6; i++) {
            size_t len;
            uint8_t *b = read_testdata(files[i], &len);
            char qs[256], sel[128];
            snprintf(qs, sizeof qs, "name=nfpprof%%7Benv%%3Dx%%7D&from=%d&format=pprof",
                     t + (i == 5)); /* the two heaps: one series, two times */
            reply r;
            if (ingest(qs, b, len, NULL, &r) != 200)
                fail_msg("%s: %ld %s", files[i], r.status, r.body.data ? r.body.data : "");
            pd_buf_release(&r.body);
            free(b);
            snprintf(sel, sizeof sel, "%s{service_name=\"nfpprof\", env=\"x\"}", types[i]);
            json_decref(series_labels(sel));
        }
    }
    /* format=trie and Content-Type binary/octet-stream+trie: the trie's
     * samples, as folded (main;work;hash 71, main;work;sort 20, main;idle 9) */
    {
        static const uint8_t trie[] = {0, 0,   1,                        /* root */
                                       5, 'm', 'a', 'i', 'n', ';', 0, 2, /* main; */
                                       5, 'w', 'o', 'r', 'k', ';', 0, 2, /* work; */
                                       4, 'h', 'a', 's', 'h', 71,  0,    /* hash 71 */
                                       4, 's', 'o', 'r', 't', 20,  0,    /* sort 20 */
                                       4, 'i', 'd', 'l', 'e', 9,   0};   /* idle 9 */
        for (int i = 0; i < 2; i++) {
            char qs[256], sel[64];
            snprintf(qs, sizeof qs, "name=nftrie%d.cpu&from=%d%s", i, t, i ? "" : "&format=trie");
            reply r;
            if (ingest(qs, trie, sizeof trie, i ? "binary/octet-stream+trie" : NULL, &r) != 200)
                fail_msg("trie %d: %ld %s", i, r.status, r.body.data ? r.body.data : "");
            pd_buf_release(&r.body);
            snprintf(sel, sizeof sel, "cpu{service_name=\"nftrie%d\"}", i);
            pd_profile p;
            query_profile(sel, t, &p);
            stack_set got = {0}, want = {0};
            ss_add_profile(&got, &p, "samples", 1);
            expect_folded(&want, 1);
            ss_assert_equal(&got, &want, "trie");
            ss_release(&got);
            ss_release(&want);
            pd_profile_release(&p);
        }
    }
    /* format=tree and Content-Type binary/octet-stream+tree: Pyroscope's
     * serialized call tree (root "", main, work with hash and sort, idle),
     * bytes after the root's subtree ignored as Pyroscope's reader does */
    {
        static const uint8_t tree[] = {0, 0,   1,                    /* root */
                                       4, 'm', 'a', 'i', 'n', 0,  2, /* main */
                                       4, 'w', 'o', 'r', 'k', 0,  2, /* work */
                                       4, 'h', 'a', 's', 'h', 71, 0, /* hash 71 */
                                       4, 's', 'o', 'r', 't', 20, 0, /* sort 20 */
                                       4, 'i', 'd', 'l', 'e', 9,  0, /* idle 9 */
                                       9, 9,   9};                   /* ignored */
        for (int i = 0; i < 2; i++) {
            char qs[256], sel[64];
            snprintf(qs, sizeof qs, "name=nftree%d.cpu&from=%d%s", i, t, i ? "" : "&format=tree");
            reply r;
            if (ingest(qs, tree, sizeof tree, i ? "binary/octet-stream+tree" : NULL, &r) != 200)
                fail_msg("tree %d: %ld %s", i, r.status, r.body.data ? r.body.data : "");
            pd_buf_release(&r.body);
            snprintf(sel, sizeof sel, "cpu{service_name=\"nftree%d\"}", i);
            pd_profile p;
            query_profile(sel, t, &p);
            stack_set got = {0}, want = {0};
            ss_add_profile(&got, &p, "samples", 1);
            expect_folded(&want, 1);
            ss_assert_equal(&got, &want, "tree");
            ss_release(&got);
            ss_release(&want);
            pd_profile_release(&p);
        }
    }
    /* format=speedscope: a sampled profile in seconds and an evented one in
     * milliseconds of the same name (summed into one), one in bytes: one
     * series per (profile_name, kind), values in nanoseconds or bytes */
    {
        static const char ss[] =
            SS_HEAD "{\"type\":\"sampled\",\"name\":\"one\",\"unit\":\"seconds\","
                    "\"samples\":[[0,1],[0,1],[0]],\"weights\":[1,0.5,2]},"
                    "{\"type\":\"evented\",\"name\":\"one\",\"unit\":\"milliseconds\","
                    "\"startValue\":0,\"events\":[{\"type\":\"O\",\"at\":0,\"frame\":0},"
                    "{\"type\":\"O\",\"at\":100,\"frame\":1},{\"type\":\"C\",\"at\":350,"
                    "\"frame\":1},{\"type\":\"C\",\"at\":400,\"frame\":0}]},"
                    "{\"type\":\"sampled\",\"name\":\"two\",\"unit\":\"bytes\","
                    "\"samples\":[[0,1]],\"weights\":[4096]}]}";
        char qs[256];
        snprintf(qs, sizeof qs, "name=nfss&from=%d&format=speedscope&spyName=ss", t);
        reply r;
        if (ingest(qs, ss, sizeof ss - 1, "application/json", &r) != 200)
            fail_msg("speedscope: %ld %s", r.status, r.body.data ? r.body.data : "");
        pd_buf_release(&r.body);
        json_t *root;
        assert_string_equal(label_of("cpu{service_name=\"nfss\"}", "profile_name", &root), "one");
        json_decref(root);
        assert_string_equal(label_of("memory{service_name=\"nfss\"}", "profile_name", &root),
                            "two");
        json_decref(root);
        pd_profile p;
        stack_set got = {0}, want = {0};
        query_profile("cpu{service_name=\"nfss\"}", t, &p);
        ss_add_profile(&got, &p, "cpu", 1);
        /* main;work: 1.5 s sampled + 250 ms evented; main: 2 s + 100 + 50 ms */
        ss_add(&want, "main;work;", 1750000000);
        ss_add(&want, "main;", 2150000000);
        ss_assert_equal(&got, &want, "speedscope time");
        ss_release(&got);
        ss_release(&want);
        pd_profile_release(&p);
        query_profile("memory{service_name=\"nfss\"}", t, &p);
        ss_add_profile(&got, &p, "memory", 1);
        ss_add(&want, "main;work;", 4096);
        ss_assert_equal(&got, &want, "speedscope bytes");
        ss_release(&got);
        ss_release(&want);
        pd_profile_release(&p);
    }
    /* an unknown format is read as folded, as Pyroscope does */
    push_named("nffmt.cpu", "&format=whatever", t);
    json_decref(series_labels("cpu{service_name=\"nffmt\"}"));
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_folded),     cmocka_unit_test(test_pprof),
        cmocka_unit_test(test_bad_input),  cmocka_unit_test(test_hostile_input),
        cmocka_unit_test(test_name_forms),
    };
    int rc = cmocka_run_group_tests(tests, setup_all, teardown_all);
    curl_global_cleanup();
    return rc;
}
