/*
 * Tests of api/push_store.c through real HTTP (POST /ingest, pprof bodies
 * built here with pd_profile_builder as an SDK's pprof.Do / wrapWithLabels
 * would label them) over a real storage: a profile is stored as one series
 * per sample label set; the cap of series per service
 * (--ingest.max-series-per-service = 4 here) refuses a push that would pass
 * it with 429 naming the flag, counts it, stores nothing of it, and is
 * learnt back from the store after a restart; services have their own
 * budgets; a push at a taken second is kept beside the first. Tests run in
 * order.
 */
#include "push_util.h"

/* the pushes' time: 10 minutes ago (the cap counts series active in the last hour) */
static int64_t T_S;

/* A cpu profile of one sample per label value in endpoints[] (NULL: a
 * sample without labels), value 1 << i, gzip-encoded into out. */
static void labelled_profile(const char *const *endpoints, size_t n, pd_buf *out)
{
    pd_profile_builder *b;
    pd_err err = {{0}};
    assert_int_equal(pd_profile_builder_new(NULL, &b), 0);
    assert_true(pd_profile_builder_sample_type(b, "cpu", "nanoseconds", &err) >= 0);
    for (size_t i = 0; i < n; i++) {
        char fn[32];
        snprintf(fn, sizeof fn, "main.work%zu", i);
        uint64_t fid, lid;
        PD_ASSERT_OK(pd_profile_builder_function(b, fn, NULL, NULL, 0, &fid, &err), &err);
        pd_pprof_line line = {.function_id = fid, .line = 1};
        PD_ASSERT_OK(pd_profile_builder_location(b, 0, 0x1000 + i, &line, 1, &lid, &err), &err);
        pd_pprof_label lb = {0};
        size_t nl = 0;
        if (endpoints[i]) {
            lb.key = pd_profile_builder_string(b, "endpoint", &err);
            lb.str = pd_profile_builder_string(b, endpoints[i], &err);
            nl = 1;
        }
        int64_t v = (int64_t)1 << i;
        PD_ASSERT_OK(pd_profile_builder_sample(b, &lid, 1, &v, &lb, nl, &err), &err);
    }
    pd_profile p;
    PD_ASSERT_OK(pd_profile_builder_finish(b, &p, &err), &err);
    pd_profile_builder_free(b);
    pd_buf_init(out, 0);
    assert_int_equal(pd_profile_encode(&p, true, out), 0);
    pd_profile_release(&p);
}

static long push(const char *app, int64_t from, const char *const *eps, size_t n, reply *out)
{
    pd_buf body;
    labelled_profile(eps, n, &body);
    char pq[256];
    snprintf(pq, sizeof pq, "/ingest?name=%s.cpu&from=%" PRId64 "&format=pprof", app, from);
    reply r;
    req(NULL, pq, body.data, body.len, "application/octet-stream", &r);
    pd_buf_release(&body);
    long s = r.status;
    if (out)
        *out = r;
    else
        pd_buf_release(&r.body);
    return s;
}

/* How many series match sel; with points, the total points of them. */
static size_t count_series(const char *sel, size_t *points)
{
    char e[512], pq[700];
    enc(sel, e, sizeof e);
    snprintf(pq, sizeof pq, "/api/v1/query_range?query=%s&from=%" PRId64 "&to=%" PRId64, e,
             T_S - 100, T_S + 1000);
    reply r;
    req(NULL, pq, NULL, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    json_t *j = jparse(&r);
    pd_buf_release(&r.body);
    json_t *d = json_object_get(j, "data");
    size_t n = json_array_size(d), pts = 0;
    for (size_t i = 0; i < n; i++)
        pts += json_array_size(json_object_get(json_array_get(d, i), "timestamps"));
    json_decref(j);
    if (points)
        *points = pts;
    return n;
}

static void test_split_and_cap(void **state)
{
    (void)state;
    double split0 = pd_metrics_get("profd_ingested_split_series_total", NULL);
    double lim0 = rejected("series_limit");
    reply r;
    /* 3 series: endpoint=/a, endpoint=/b, and the unlabelled samples */
    const char *p1[] = {"/a", "/b", NULL, "/a"};
    if (push("app1", T_S, p1, 4, &r) != 200)
        fail_msg("push: %ld %s", r.status, r.body.data);
    pd_buf_release(&r.body);
    assert_int_equal(count_series("cpu{service_name=\"app1\"}", NULL), 3);
    assert_int_equal(count_series("cpu{service_name=\"app1\",endpoint=\"/a\"}", NULL), 1);
    assert_int_equal(count_series("cpu{service_name=\"app1\",endpoint=\"\"}", NULL), 1);
    assert_true(pd_metrics_get("profd_ingested_split_series_total", NULL) == split0 + 3);
    /* the /a series holds samples 0 and 3 (values 1 + 8) and nothing else */
    pd_profile p;
    char e[256], pq[400];
    enc("cpu{service_name=\"app1\",endpoint=\"/a\"}", e, sizeof e);
    snprintf(pq, sizeof pq, "/api/v1/query?query=%s&time=%" PRId64 "&report=proto", e, T_S);
    req(NULL, pq, NULL, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    decode_buf(r.body.data, r.body.len, &p);
    pd_buf_release(&r.body);
    int64_t tot;
    pd_profile_totals(&p, &tot);
    assert_true(tot == 9);
    assert_int_equal(p.n_sample, 2);
    assert_int_equal(p.sample[0].n_label, 0); /* the label left the samples */
    pd_profile_release(&p);

    /* 2 new series (/c, /d): 5 > 4 -> 429, nothing of it stored */
    const char *p2[] = {"/c", "/d", "/a"};
    assert_int_equal(push("app1", T_S + 10, p2, 3, &r), 429);
    assert_non_null(strstr(r.body.data, "--ingest.max-series-per-service"));
    assert_non_null(strstr(r.body.data, "app1"));
    pd_buf_release(&r.body);
    assert_true(rejected("series_limit") == lim0 + 1);
    size_t pts;
    assert_int_equal(count_series("cpu{service_name=\"app1\"}", &pts), 3);
    assert_int_equal(pts, 3);

    /* 1 new series: 4, at the cap -> stored */
    const char *p3[] = {"/a", "/c"};
    assert_int_equal(push("app1", T_S + 20, p3, 2, NULL), 200);
    assert_int_equal(count_series("cpu{service_name=\"app1\"}", NULL), 4);
    /* another service has its own budget */
    const char *p4[] = {"/w", "/x", "/y", NULL};
    assert_int_equal(push("app2", T_S, p4, 4, NULL), 200);
    assert_int_equal(count_series("cpu{service_name=\"app2\"}", NULL), 4);

    /* a replica's push at the same second: kept beside the first */
    assert_int_equal(push("app1", T_S, p1, 4, NULL), 200);
    assert_int_equal(count_series("cpu{service_name=\"app1\",endpoint=\"/a\"}", &pts), 1);
    assert_int_equal(pts, 3); /* T_S, T_S + 1 ms, T_S + 20 */

    /* after a restart the cap knows the service's series from the store */
    stop_all();
    assert_int_equal(start_all(), 0);
    const char *p5[] = {"/e"};
    assert_int_equal(push("app1", T_S + 30, p5, 1, &r), 429);
    assert_non_null(strstr(r.body.data, "has 4 series pushed in the last hour"));
    pd_buf_release(&r.body);
    const char *p6[] = {"/b"};
    assert_int_equal(push("app1", T_S + 30, p6, 1, NULL), 200);
}

int main(void)
{
    g_max_series_svc = 4;
    T_S = pd_now_ms() / 1000 - 600;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_and_cap),
    };
    return cmocka_run_group_tests(tests, setup_all, teardown_all);
}
