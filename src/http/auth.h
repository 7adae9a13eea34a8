/*
 * http/auth.h — the gate every request passes when profd runs with
 * `--web.config.file` (http/webconfig.h): what Prometheus' exporter-toolkit
 * web.webHandler does, in its order, plus profd's path groups.
 *
 * Per request, steps 1-3 and 5's "no credentials at all" as soon as its
 * headers have arrived (pd_http_gate_precheck, on the event thread: before
 * any byte of its body is received), the rest on a worker thread before the
 * handler (pd_http_gate_check):
 *   1. the web config file is stat(2)ed; when its inode, size, mtime or
 *      ctime changed it is read again (the toolkit reads it on every
 *      request; profd on change — same effect, no parse per request). If it
 *      no longer loads: 500 to every request until it is fixed (fail closed,
 *      as the toolkit), the error logged once per change;
 *   2. rate_limit: one token bucket for the server (rate 1/interval, depth
 *      burst, made at start from the file as read then, as the toolkit's
 *      limiter): none left -> 429 "Too Many Requests";
 *   3. http_server_config.headers go on the reply (401 and 403 included);
 *   4. no basic_auth_users: the request goes on. A path listed in
 *      profd_access_control.unauthenticated_paths goes on;
 *   5. "Authorization: Basic" checked with bcrypt (libcrypt crypt_rn), an
 *      unknown user against a dummy hash of the highest cost in the file
 *      (so an unknown and a known user with a wrong password cost the same;
 *      the toolkit uses a fixed cost-10 hash), one bcrypt at a time, results
 *      cached as the toolkit's cache.go (100 entries of user:hash:password,
 *      random eviction). Failure -> 401 with "WWW-Authenticate: Basic".
 *      A check that needs bcrypt (not cached) while 3 already run or wait
 *      for it -> 429 "Retry-After: 1" at once (profd_http_rejected_total
 *      {reason="auth_busy"}): a flood of wrong passwords holds no worker,
 *      cached users never wait. Per client address (req->client): after 5
 *      failed checks in a row that ran bcrypt (not cached), each such
 *      failure makes the address wait 1, 2, 4 ... 60 s; while it waits, a
 *      check that is not cached (valid or not) -> 429 "Retry-After: N"
 *      (reason="auth_backoff"), whether or not the user exists; a pass
 *      while it does not wait, or 10 minutes without a failure, clears the
 *      count;
 *   6. the request's group (push, query, admin: the pd_http_group_fn given
 *      to the server) is checked against profd_access_control; a valid user
 *      outside the group -> 403.
 * Counted in profd_http_auth_failures_total{reason="missing_credentials" |
 * "wrong_credentials" | "forbidden" | "client_certificate" | "config_error"}
 * and profd_http_rejected_total{reason="rate_limited" | "auth_busy" | "auth_backoff"}.
 *
 * TLS (libmicrohttpd + GnuTLS) is set up from the file as read at start;
 * changing TLS settings needs a restart (the toolkit re-reads them per
 * connection). client_auth_type is applied per session at the handshake:
 * Require* modes make GnuTLS refuse a client without a certificate, the
 * Verify* modes and client_allowed_sans verify it during the handshake.
 */
#ifndef PD_HTTP_AUTH_H
#define PD_HTTP_AUTH_H

#include <stdbool.h>
#include "base/error.h"
#include "http/server.h"
#include "http/webconfig.h"

typedef struct pd_http_gate pd_http_gate;

/* Loads the web config at path (pd_webcfg_load) and checks that its
 * certificate and key form a pair. Returns 0 and *out, or an error of
 * pd_webcfg_load / PD_EINVAL (err names the file). */
int pd_http_gate_new(const char *path, pd_http_gate **out /* OUT */, pd_err *err);
/* Frees the gate. NULL is fine. */
void pd_http_gate_free(pd_http_gate *g);

/* The configuration as read at start (TLS settings). Borrowed. */
const pd_webcfg *pd_http_gate_config(const pd_http_gate *g);

/* Steps 1 and 3-6 above for req of group `group` (pd_access_group), after
 * pd_http_gate_precheck let it in. true: go on (resp may have headers
 * added); false: resp holds the refusal. */
bool pd_http_gate_check(pd_http_gate *g, const pd_http_request *req, int group,
                        pd_http_response *resp);

/* Steps 1-3 above and the cheap part of 5, for a request whose body has not
 * been read yet (the server calls it once per request on its event thread
 * when the headers have arrived): false, with resp holding the refusal
 * (the configured headers on it), when the config is broken (500), the rate
 * limit is exhausted (429), or users are configured, path is not an
 * unauthenticated path, and `authorization` (the header's value, or NULL)
 * carries no Basic credentials (401 + WWW-Authenticate) — so an anonymous
 * client cannot make profd receive a body. Counted as above. The password
 * and the group are left to pd_http_gate_check (bcrypt never runs on the
 * event thread). */
bool pd_http_gate_precheck(pd_http_gate *g, const char *path, const char *authorization,
                           pd_http_response *resp);

/* Applies client_auth_type to a new GnuTLS session (a gnutls_session_t). */
void pd_http_gate_tls_session(pd_http_gate *g, void *session);

/* Checks that cert_pem and key_pem form a pair (and client_ca_pem, when
 * set, parses). 0 or PD_EINVAL with err. */
int pd_webcfg_check_tls(const pd_webcfg *cfg, pd_err *err);

/* Verifies password against a bcrypt hash with libcrypt. true on a match. */
bool pd_http_bcrypt_ok(const char *hash, const char *password);

/* Tests only: how many checks run or wait for bcrypt now (the bcrypt hook
 * is in auth_int.h; it runs with the bcrypt lock held). */
unsigned pd__http_gate_bcrypt_queued(pd_http_gate *g);

#endif
