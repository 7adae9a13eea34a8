/*
 * Tests of http/guard.c: the Host allow-list (default per listen address,
 * --web.allowed-hosts), Origin, Sec-Fetch-Site and browser-write rules, each
 * with the clients that must keep working (no Origin: SDKs, curl, Grafana's
 * proxy, go tool pprof) and the browser requests that must not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "../pd_test.h"

#include "http/guard.h"

static pd_http_guard *mk(const char *listen, const char *hosts)
{
    pd_http_guard *g = NULL;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_http_guard_new(listen, hosts, &g, &err), &err);
    return g;
}

/* The status for a request with these headers (0 = allowed). */
static int check(const pd_http_guard *g, const char *method, const char *host, const char *origin,
                 const char *site, const char *ct)
{
    pd_http_guard_req r = {.method = method,
                           .host = host,
                           .origin = origin,
                           .sec_fetch_site = site,
                           .content_type = ct};
    pd_http_guard_verdict v;
    int st = pd_http_guard_check(g, &r, &v);
    if (st)
        assert_non_null(v.reason);
    return st;
}

static void test_host_loopback_default(void **state)
{
    (void)state;
    pd_http_guard *g = mk("127.0.0.1:10902", NULL);
    assert_int_equal(check(g, "GET", "127.0.0.1:10902", NULL, NULL, NULL), 0);
    assert_int_equal(check(g, "GET", "localhost:10902", NULL, NULL, NULL), 0);
    assert_int_equal(check(g, "GET", "LOCALHOST.", NULL, NULL, NULL), 0);
    assert_int_equal(check(g, "GET", "[::1]:10902", NULL, NULL, NULL), 0);
    assert_int_equal(check(g, "GET", NULL, NULL, NULL, NULL), 0); /* HTTP/1.0 */
    /* DNS rebinding: evil.example resolves to 127.0.0.1 */
    assert_int_equal(check(g, "GET", "evil.example:10902", NULL, NULL, NULL), 421);
    assert_int_equal(check(g, "POST", "evil.example", NULL, NULL, "application/octet-stream"), 421);
    assert_int_equal(check(g, "GET", "127.0.0.2", NULL, NULL, NULL), 421);
    assert_int_equal(check(g, "GET", "", NULL, NULL, NULL), 421);
    assert_int_equal(check(g, "GET", "[::1", NULL, NULL, NULL), 421);
    char d[200];
    pd_http_guard_describe(g, d, sizeof d);
    assert_string_equal(d, "127.0.0.1,localhost,::1");
    pd_http_guard_free(g);
}

static void test_host_wildcard_and_names(void **state)
{
    (void)state;
    pd_http_guard *g = mk(":10902", NULL); /* every interface, no names: any Host */
    assert_int_equal(check(g, "GET", "whatever.example", NULL, NULL, NULL), 0);
    pd_http_guard_free(g);
    g = mk("0.0.0.0:10902", "profd.example.com, 10.0.0.5");
    assert_int_equal(check(g, "GET", "profd.example.com:10902", NULL, NULL, NULL), 0);
    assert_int_equal(check(g, "GET", "10.0.0.5:10902", NULL, NULL, NULL), 0);
    assert_int_equal(check(g, "GET", "localhost:10902", NULL, NULL, NULL), 0);
    assert_int_equal(check(g, "GET", "other.example.com", NULL, NULL, NULL), 421);
    pd_http_guard_free(g);
    g = mk("10.1.2.3:10902", NULL); /* a specific address: only it */
    assert_int_equal(check(g, "GET", "10.1.2.3:10902", NULL, NULL, NULL), 0);
    assert_int_equal(check(g, "GET", "localhost:10902", NULL, NULL, NULL), 421);
    pd_http_guard_free(g);
    g = mk("[::1]:10902", "*");
    assert_int_equal(check(g, "GET", "anything", NULL, NULL, NULL), 0);
    pd_http_guard_free(g);

    pd_http_guard *bad = NULL;
    pd_err err = {{0}};
    assert_int_equal(pd_http_guard_new("127.0.0.1:1", "a,,b", &bad, &err), PD_EINVAL);
    assert_non_null(strstr(err.msg, "--web.allowed-hosts"));
    assert_null(bad);
}

static void test_origin(void **state)
{
    (void)state;
    pd_http_guard *g = mk("127.0.0.1:10902", NULL);
    const char *h = "127.0.0.1:10902";
    /* the UI's own requests */
    assert_int_equal(check(g, "GET", h, "http://127.0.0.1:10902", "same-origin", NULL), 0);
    assert_int_equal(
        check(g, "POST", h, "http://127.0.0.1:10902", "same-origin", "application/json"), 0);
    assert_int_equal(check(g, "GET", "localhost", "https://localhost:443", NULL, NULL), 0);
    assert_int_equal(check(g, "GET", "localhost:80", "http://localhost", NULL, NULL), 0);
    /* another origin: another port of the same host, another host, null */
    pd_http_guard_req r = {.method = "POST",
                           .host = h,
                           .origin = "http://127.0.0.1:8080",
                           .content_type = "application/octet-stream"};
    pd_http_guard_verdict v;
    assert_int_equal(pd_http_guard_check(g, &r, &v), 403);
    assert_string_equal(v.reason, "cross_origin");
    assert_non_null(strstr(v.msg, "http://127.0.0.1:8080"));
    assert_int_equal(check(g, "GET", h, "http://evil.example", NULL, NULL), 403);
    assert_int_equal(check(g, "POST", h, "null", NULL, "text/plain"), 403);
    assert_int_equal(check(g, "POST", h, "http://127.0.0.1:10902.evil.example", NULL, NULL), 403);
    assert_int_equal(check(g, "POST", h, "http://user@127.0.0.1:10902", NULL, NULL), 403);
    assert_int_equal(check(g, "POST", h, "ftp://127.0.0.1:10902", NULL, NULL), 403);
    assert_int_equal(check(g, "POST", NULL, "http://127.0.0.1:10902", NULL, NULL), 403);
    /* a message with control characters is made printable */
    r.origin = "http://a\r\nX: y";
    assert_int_equal(pd_http_guard_check(g, &r, &v), 403);
    assert_null(strchr(v.msg, '\r'));
    pd_http_guard_free(g);
}

static void test_fetch_metadata_and_writes(void **state)
{
    (void)state;
    pd_http_guard *g = mk("127.0.0.1:10902", NULL);
    const char *h = "127.0.0.1:10902";
    /* real clients: no Origin, no Sec-Fetch-* — any Content-Type */
    assert_int_equal(check(g, "POST", h, NULL, NULL, NULL), 0);
    assert_int_equal(check(g, "POST", h, NULL, NULL, "application/x-www-form-urlencoded"), 0);
    assert_int_equal(check(g, "POST", h, NULL, NULL, "multipart/form-data; boundary=x"), 0);
    /* a no-cors fetch or form post from another site */
    assert_int_equal(check(g, "POST", h, NULL, "cross-site", "text/plain"), 403);
    assert_int_equal(check(g, "POST", h, NULL, "same-site", "application/json"), 403);
    assert_int_equal(check(g, "GET", h, NULL, "cross-site", NULL), 403); /* <img>, <script> */
    /* a link into the UI from another site */
    pd_http_guard_req nav = {.method = "GET",
                             .host = h,
                             .sec_fetch_site = "cross-site",
                             .sec_fetch_mode = "navigate",
                             .sec_fetch_dest = "document"};
    pd_http_guard_verdict v;
    assert_int_equal(pd_http_guard_check(g, &nav, &v), 0);
    nav.sec_fetch_dest = "iframe";
    assert_int_equal(pd_http_guard_check(g, &nav, &v), 403);
    assert_string_equal(v.reason, "cross_site");
    nav.sec_fetch_dest = "document";
    nav.method = "POST"; /* a cross-site form post is a navigation too */
    assert_int_equal(pd_http_guard_check(g, &nav, &v), 403);
    /* the user typing the URL */
    assert_int_equal(check(g, "GET", h, NULL, "none", NULL), 0);
    /* same-origin browser writes need a non-simple type or X-Requested-By */
    pd_http_guard_req w = {.method = "POST",
                           .host = h,
                           .origin = "http://127.0.0.1:10902",
                           .sec_fetch_site = "same-origin",
                           .content_type = "text/plain;charset=UTF-8"};
    assert_int_equal(pd_http_guard_check(g, &w, &v), 403);
    assert_string_equal(v.reason, "browser_simple_write");
    w.requested_by = "profd-ui";
    assert_int_equal(pd_http_guard_check(g, &w, &v), 0);
    w.requested_by = NULL;
    w.content_type = "application/json";
    assert_int_equal(pd_http_guard_check(g, &w, &v), 0);
    w.content_type = NULL;
    assert_int_equal(pd_http_guard_check(g, &w, &v), 403);
    /* no guard: everything passes */
    assert_int_equal(pd_http_guard_check(NULL, &w, &v), 0);
    pd_http_guard_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_loopback_default),
        cmocka_unit_test(test_host_wildcard_and_names),
        cmocka_unit_test(test_origin),
        cmocka_unit_test(test_fetch_metadata_and_writes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
