/*
 * Tests of http/webconfig.c: the exporter-toolkit web config reader —
 * defaults, every section, strictness (unknown and repeated keys, wrong
 * types, FILE:LINE:COL in the message), the toolkit's checks, profd's
 * profd_access_control, the GnuTLS priority string.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "http/webconfig.h"

#define HASH "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi"

static int parse(const char *text, pd_webcfg *w, pd_err *err)
{
    pd_err_clear(err);
    return pd_webcfg_parse("web.yml", NULL, text, strlen(text), w, err);
}

static void expect_error(const char *text, const char *msg_part)
{
    pd_webcfg w;
    pd_err err;
    int rc = parse(text, &w, &err);
    if (rc == 0 || !strstr(err.msg, msg_part)) {
        fprintf(stderr, "input:\n%s\nrc=%d msg=%s\nwanted: %s\n", text, rc, err.msg, msg_part);
        if (rc == 0)
            pd_webcfg_release(&w);
        fail();
    }
}

static void test_empty_defaults(void **state)
{
    (void)state;
    pd_webcfg w;
    pd_err err;
    assert_int_equal(parse("", &w, &err), 0);
    assert_false(w.tls_enabled);
    assert_int_equal(w.min_version, 12);
    assert_int_equal(w.max_version, 13);
    assert_true(w.http2);
    assert_true(w.prefer_server_cipher_suites);
    assert_int_equal(w.n_users, 0);
    assert_int_equal(w.rate_interval_ns, 0);
    pd_webcfg_release(&w);
    assert_int_equal(parse("tls_server_config: {}\nbasic_auth_users:\n", &w, &err), 0);
    pd_webcfg_release(&w);
}

static void test_full(void **state)
{
    (void)state;
    pd_webcfg w;
    pd_err err;
    const char *y = "tls_server_config:\n"
                    "  cert: |\n    CERTPEM\n"
                    "  key: KEYPEM\n"
                    "  client_auth_type: RequireAndVerifyClientCert\n"
                    "  client_ca: CAPEM\n"
                    "  client_allowed_sans: [a.example, 10.0.0.1]\n"
                    "  min_version: TLS13\n"
                    "  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n"
                    "  curve_preferences: [X25519, CurveP256]\n"
                    "  prefer_server_cipher_suites: false\n"
                    "http_server_config:\n"
                    "  http2: false\n"
                    "  headers:\n"
                    "    X-Frame-Options: sameorigin\n"
                    "    Content-Security-Policy: default-src 'self'\n"
                    "rate_limit:\n  interval: 250ms\n  burst: 7\n"
                    "basic_auth_users:\n  alice: " HASH "\n  bob: " HASH "\n"
                    "profd_access_control:\n"
                    "  push_users: [bob]\n  query_users: []\n"
                    "  unauthenticated_paths: [/-/healthy]\n";
    assert_int_equal(parse(y, &w, &err), 0);
    assert_true(w.tls_enabled);
    assert_string_equal(w.cert_pem, "CERTPEM\n");
    assert_string_equal(w.key_pem, "KEYPEM");
    assert_string_equal(w.client_ca_pem, "CAPEM");
    assert_int_equal(w.client_auth, PD_CLIENT_AUTH_REQUIRE_VERIFY);
    assert_int_equal(w.allowed_sans.n, 2);
    assert_int_equal(w.min_version, 13);
    assert_false(w.http2);
    assert_false(w.prefer_server_cipher_suites);
    assert_int_equal(w.n_headers, 2);
    assert_string_equal(w.header_values[1], "default-src 'self'");
    assert_int_equal(w.rate_interval_ns, 250000000);
    assert_int_equal(w.rate_burst, 7);
    assert_int_equal(w.n_users, 2);
    assert_string_equal(w.user_names[1], "bob");
    assert_true(w.group_users[PD_ACCESS_PUSH].set);
    assert_int_equal(w.group_users[PD_ACCESS_PUSH].n, 1);
    assert_true(w.group_users[PD_ACCESS_QUERY].set);
    assert_int_equal(w.group_users[PD_ACCESS_QUERY].n, 0);
    assert_false(w.group_users[PD_ACCESS_ADMIN].set);
    assert_string_equal(w.open_paths.v[0], "/-/healthy");
    char prio[512];
    assert_int_equal(pd_webcfg_tls_priorities(&w, prio, sizeof prio), 0);
    assert_string_equal(prio, "NORMAL:-VERS-ALL:+VERS-TLS1.3:-KX-ALL:-CIPHER-ALL:-MAC-ALL"
                              ":+ECDHE-RSA:+AES-128-GCM:+AEAD"
                              ":+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:+AEAD"
                              ":-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1");
    assert_int_equal(pd_webcfg_tls_priorities(&w, prio, 20), PD_ETOOBIG);
    pd_webcfg_release(&w);
}

static void test_strict(void **state)
{
    (void)state;
    expect_error("basic_auth_users:\n  a: " HASH "\nbogus: 1\n",
                 "web.yml:3:1: field bogus not found in the web config");
    expect_error("http_server_config:\n  http2: true\n  header: {}\n",
                 "web.yml:3:3: field header not found in http_server_config");
    expect_error("tls_server_config:\n  cert_file: a\n  cert_file: b\n",
                 "web.yml:3:3: tls_server_config: key \"cert_file\" already set");
    expect_error("rate_limit:\n  interval: 1s\n  brust: 2\n", "web.yml:3:3: field brust not found");
    expect_error("http_server_config:\n  http2: maybe\n",
                 "web.yml:2:10: http2: expected true or false");
    expect_error("basic_auth_users: [a]\n", "web.yml:1:19: basic_auth_users: expected a mapping");
    expect_error("tls_server_config:\n  client_allowed_sans: x\n",
                 "web.yml:2:24: client_allowed_sans: expected a list");
    expect_error("a: [\n", "web.yml:");
    expect_error("profd_access_control:\n  readers: []\n", "field readers not found");
}

static void test_toolkit_checks(void **state)
{
    (void)state;
    expect_error("tls_server_config:\n  key_file: k\n", "missing one of cert or cert_file");
    expect_error("tls_server_config:\n  cert: c\n", "missing one of key or key_file");
    expect_error("tls_server_config:\n  cert: c\n  key: k\n  client_ca: x\n",
                 "client CA's have been configured without a Client Auth Policy");
    expect_error("tls_server_config:\n  cert: c\n  key: k\n  client_auth_type: Sometimes\n",
                 "invalid ClientAuth: Sometimes");
    expect_error("tls_server_config:\n  min_version: TLS14\n", "unknown TLS version: TLS14");
    expect_error("tls_server_config:\n  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n",
                 "unknown cipher: TLS_RSA_WITH_RC4_128_SHA");
    expect_error("tls_server_config:\n  curve_preferences: [P256]\n", "unknown curve: P256");
    expect_error("tls_server_config:\n  cert: c\n  key: k\n  min_version: TLS13\n"
                 "  max_version: TLS12\n",
                 "min_version is above max_version");
    expect_error("tls_server_config:\n  cert_file: /nonexistent/x.crt\n  key: k\n",
                 "cert_file: /nonexistent/x.crt");
    expect_error("http_server_config:\n  headers:\n    Server: x\n",
                 "HTTP header \"Server\" can not be configured");
    expect_error("http_server_config:\n  headers:\n    X-Content-Type-Options: sniff\n",
                 "invalid value for X-Content-Type-Options");
    expect_error("basic_auth_users:\n  a: $2y$10$short\n",
                 "web.yml:2:6: basic_auth_users: a: not a bcrypt hash");
    expect_error("basic_auth_users:\n  a: $1$abc$0123456789012345678901\n", "not a bcrypt hash");
    expect_error("basic_auth_users:\n  \"a:b\": " HASH "\n", "cannot hold ':'");
    expect_error("basic_auth_users:\n  a: " HASH "\nprofd_access_control:\n  push_users: [b]\n",
                 "push_users: user \"b\" is not in basic_auth_users");
    expect_error("profd_access_control:\n  unauthenticated_paths: [healthy]\n",
                 "does not start with /");
    expect_error("rate_limit:\n  interval: soon\n", "interval: \"soon\" is not a duration");
    expect_error("rate_limit:\n  burst: -1\n", "burst: expected an integer");
}

static void test_durations(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int64_t ns;
    } cases[] = {{"1s", 1000000000},   {"1m30s", 90000000000LL}, {"100ms", 100000000},
                 {"1.5s", 1500000000}, {"2h", 7200000000000LL},  {"250", 250},
                 {"10us", 10000}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char y[100];
        snprintf(y, sizeof y, "rate_limit:\n  interval: %s\n  burst: 1\n", cases[i].in);
        pd_webcfg w;
        pd_err err;
        assert_int_equal(parse(y, &w, &err), 0);
        assert_int_equal(w.rate_interval_ns, cases[i].ns);
        pd_webcfg_release(&w);
    }
}

static void test_load_relative_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/pd-webcfg-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char p[300];
    snprintf(p, sizeof p, "%s/c.pem", dir);
    FILE *f = fopen(p, "w");
    fputs("CERT", f);
    fclose(f);
    snprintf(p, sizeof p, "%s/k.pem", dir);
    f = fopen(p, "w");
    fputs("KEY", f);
    fclose(f);
    snprintf(p, sizeof p, "%s/web.yml", dir);
    f = fopen(p, "w");
    fputs("tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n", f);
    fclose(f);
    pd_webcfg w;
    pd_err err;
    pd_err_clear(&err);
    assert_int_equal(pd_webcfg_load(p, &w, &err), 0);
    assert_string_equal(w.cert_pem, "CERT");
    assert_string_equal(w.key_pem, "KEY");
    pd_webcfg_release(&w);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    assert_true(pd_webcfg_load("/nonexistent/web.yml", &w, &err) < 0);
    assert_non_null(strstr(err.msg, "/nonexistent/web.yml"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_defaults), cmocka_unit_test(test_full),
        cmocka_unit_test(test_strict),         cmocka_unit_test(test_toolkit_checks),
        cmocka_unit_test(test_durations),      cmocka_unit_test(test_load_relative_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
