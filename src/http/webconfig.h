/*
 * http/webconfig.h — the `--web.config.file` reader: Prometheus
 * exporter-toolkit's web configuration (github.com/prometheus/exporter-toolkit
 * web/tls_config.go and web/handler.go, read at v0.17.1-12-g19a7c2d), key for
 * key, plus one profd extension key.
 *
 *   tls_server_config:
 *     cert_file / cert          server certificate (file, or inline PEM)
 *     key_file / key            its private key (file, or inline PEM)
 *     client_auth_type          NoClientCert (default), RequestClientCert,
 *                               RequireAnyClientCert (alias RequireClientCert),
 *                               VerifyClientCertIfGiven, RequireAndVerifyClientCert
 *     client_ca_file / client_ca  CAs that client certificates must chain to
 *     client_allowed_sans       a client certificate must carry one of these
 *                               (DNS, e-mail, IP or URI SAN)
 *     min_version / max_version TLS10..TLS13 (default TLS12..TLS13)
 *     cipher_suites             Go's names (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256..)
 *     curve_preferences         CurveP256, CurveP384, CurveP521, X25519
 *     prefer_server_cipher_suites  default true
 *   http_server_config:
 *     http2                     accepted (default true); profd speaks HTTP/1.1 only
 *     headers                   only Strict-Transport-Security,
 *                               X-Content-Type-Options (nosniff),
 *                               X-Frame-Options (deny|sameorigin),
 *                               X-XSS-Protection, Content-Security-Policy
 *   rate_limit: {interval: DURATION, burst: N}   one server-wide token bucket
 *   basic_auth_users: {NAME: BCRYPT_HASH}        $2a$/$2b$/$2y$ hashes
 *   profd_access_control:                        profd's extension (not toolkit)
 *     push_users:  [NAME...]    may use the push endpoints (absent: every user)
 *     query_users: [NAME...]    may use queries and the UI   (absent: every user)
 *     admin_users: [NAME...]    may use /-/reload, /-/quit   (absent: every user)
 *     unauthenticated_paths: [PATH...]  exact paths open without credentials
 *                                       (e.g. /-/healthy for a load balancer)
 *
 * Strict like yaml.v2's UnmarshalStrict: an unknown or repeated key, or a
 * value of the wrong type, is an error naming FILE:LINE:COLUMN. Relative
 * file paths are relative to the directory of the config file (as the
 * toolkit's SetDirectory). Files named are read (capped at 1 MiB each) when
 * the config is loaded.
 */
#ifndef PD_HTTP_WEBCONFIG_H
#define PD_HTTP_WEBCONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/error.h"

#define PD_WEBCFG_MAX_FILE_BYTES ((size_t)1 << 20)
#define PD_WEBCFG_MAX_USERS 1024
#define PD_WEBCFG_MAX_LIST 256

typedef enum {
    PD_CLIENT_AUTH_NONE = 0,        /* NoClientCert */
    PD_CLIENT_AUTH_REQUEST,         /* RequestClientCert */
    PD_CLIENT_AUTH_REQUIRE_ANY,     /* RequireAnyClientCert */
    PD_CLIENT_AUTH_VERIFY_IF_GIVEN, /* VerifyClientCertIfGiven */
    PD_CLIENT_AUTH_REQUIRE_VERIFY,  /* RequireAndVerifyClientCert */
} pd_client_auth;

/* Path groups of profd_access_control. */
typedef enum {
    PD_ACCESS_QUERY = 0, /* queries, UI, /metrics, everything not below */
    PD_ACCESS_PUSH = 1,  /* the push endpoints */
    PD_ACCESS_ADMIN = 2, /* /-/reload, /-/quit */
    PD_ACCESS_N = 3
} pd_access_group;

typedef struct pd_webcfg_list {
    char **v;
    size_t n;
    bool set; /* the key was given (an empty list counts as given) */
} pd_webcfg_list;

typedef struct pd_webcfg {
    /* tls_server_config */
    bool tls_enabled;         /* any TLS key set (the toolkit's IsEnabled) */
    char *cert_pem, *key_pem; /* read from cert_file/key_file or inline */
    char *client_ca_pem;      /* from client_ca_file or client_ca; NULL if none */
    pd_client_auth client_auth;
    pd_webcfg_list allowed_sans;
    int min_version, max_version; /* 10..13 (TLS 1.0 .. 1.3) */
    pd_webcfg_list cipher_suites; /* Go names, validated */
    pd_webcfg_list curves;        /* Go names, validated */
    bool prefer_server_cipher_suites;
    /* http_server_config */
    bool http2;
    char *header_names[8], *header_values[8];
    size_t n_headers;
    /* rate_limit */
    int64_t rate_interval_ns; /* 0: no limiter */
    int64_t rate_burst;
    /* basic_auth_users */
    char **user_names, **user_hashes;
    size_t n_users;
    /* profd_access_control */
    pd_webcfg_list group_users[PD_ACCESS_N];
    pd_webcfg_list open_paths;
} pd_webcfg;

/* Reads and validates the web config at path into *out (zeroed first; call
 * pd_webcfg_release after success). Returns 0, or PD_EPARSE/PD_EINVAL with
 * err = "FILE:LINE:COL: what is wrong", -errno when a file cannot be read
 * (err names it), PD_ETOOBIG for a file over PD_WEBCFG_MAX_FILE_BYTES. The
 * certificate and key are only read here, not checked as a pair: that is
 * pd_webcfg_check_tls (http/auth.c, GnuTLS). */
int pd_webcfg_load(const char *path, pd_webcfg *out /* OUT */, pd_err *err);

/* Same, from text in memory; `name` is used in messages, `dir` resolves
 * relative file names (NULL: the current directory). */
int pd_webcfg_parse(const char *name, const char *dir, const char *text, size_t len,
                    pd_webcfg *out /* OUT */, pd_err *err);

/* Frees what cfg holds. Zeroed config and NULL are fine. */
void pd_webcfg_release(pd_webcfg *cfg);

/* The GnuTLS priority string for cfg's versions, ciphers and curves into
 * out (cap bytes). Returns 0 or PD_ETOOBIG. */
int pd_webcfg_tls_priorities(const pd_webcfg *cfg, char *out, size_t cap);

/* `profd check web-config FILE...` (defined in http/auth.c, as it checks
 * the certificate and key with GnuTLS): exit 0 when every FILE loads (and its
 * certificate and key form a pair), 2 otherwise (the error on stderr). */
int pd_webcfg_check_main(int argc, char **argv);

#endif
