/*
 * http/guard.h — cross-site safety of the HTTP server (issue 20 item 4):
 * which requests a browser may make, which Host names are served, and the
 * security headers of every reply.
 *
 * The server (server.c) asks pd_http_guard_check once per request, when its
 * headers have arrived and before any byte of its body is kept or any
 * handler runs; a refusal is answered at once with the verdict's status and
 * message and counted in profd_http_rejected_total{reason=...}.
 *
 * The rules, in order (the first that refuses wins):
 *
 *   1. Host (DNS rebinding): the Host header's name (port ignored, case
 *      ignored, one trailing dot ignored) must be an allowed host, else 421
 *      Misdirected Request naming the host (reason "host_not_allowed").
 *      Allowed hosts: the names given (--web.allowed-hosts, comma-separated;
 *      "*" = any), plus the listen address's host, plus "localhost",
 *      "127.0.0.1" and "::1" when the listen address is loopback (or when
 *      names are given). Listening on all interfaces ("", 0.0.0.0, [::])
 *      without names given, any Host is served (a server reached by many
 *      names; give --web.allowed-hosts to close it). A request without Host
 *      (HTTP/1.0) passes this rule.
 *   2. Origin: when present it must be the server's own origin — its
 *      host[:port] equal to the Host header (http or https; default ports
 *      ignored) — else 403 naming the origin (reason "cross_origin"). "null"
 *      (sandboxed frames, file:) is foreign. Real non-browser clients
 *      (Pyroscope SDKs, the profefe agent, curl, go tool pprof, Grafana's
 *      server-side proxy) send no Origin and are not affected.
 *   3. Fetch metadata: Sec-Fetch-Site "cross-site" or "same-site" (another
 *      port of the same host is same-site) is refused 403 (reason
 *      "cross_site") unless it is a top-level navigation (GET or HEAD,
 *      Sec-Fetch-Mode "navigate", Sec-Fetch-Dest "document" or absent): a
 *      link into the UI from elsewhere works; an <img>, <script>, fetch or
 *      form post from another site does not.
 *   4. Browser writes: a request other than GET/HEAD/OPTIONS that carries a
 *      browser's marks (Origin or Sec-Fetch-Site) must have a non-simple
 *      Content-Type (not application/x-www-form-urlencoded, multipart/
 *      form-data, text/plain, nor absent) or an X-Requested-By header —
 *      either forces a CORS preflight that profd never grants to another
 *      origin — else 403 (reason "browser_simple_write").
 *
 * Thread-safe after pd_http_guard_new (read-only).
 */
#ifndef PD_HTTP_GUARD_H
#define PD_HTTP_GUARD_H

#include <stddef.h>
#include "base/error.h"

typedef struct pd_http_guard pd_http_guard;

/* The headers of one request that the guard reads; any may be NULL. */
typedef struct pd_http_guard_req {
    const char *method;
    const char *host;
    const char *origin;
    const char *sec_fetch_site;
    const char *sec_fetch_mode;
    const char *sec_fetch_dest;
    const char *content_type;
    const char *requested_by; /* X-Requested-By */
} pd_http_guard_req;

/* A refusal: HTTP status, a metric reason (static string) and a message for
 * the client naming the input. */
typedef struct pd_http_guard_verdict {
    int status;
    const char *reason;
    char msg[400];
} pd_http_guard_verdict;

/* Makes a guard for a server listening on listen_addr ("host:port" as
 * pd_http_server_start takes it) with allowed_hosts (comma-separated names
 * or IP addresses, "[::1]" or "::1" for IPv6, "*" for any; NULL or "" for
 * the default rule above). Errors: PD_EINVAL (an empty or over-long name in
 * allowed_hosts, or a malformed listen address: err names it), PD_ENOMEM. */
int pd_http_guard_new(const char *listen_addr, const char *allowed_hosts,
                      pd_http_guard **out /* OUT */, pd_err *err);
/* Frees g. NULL is a no-op. */
void pd_http_guard_free(pd_http_guard *g);

/* 0 when r may proceed; else the refusing status (421 or 403), with v
 * filled. g NULL allows everything. */
int pd_http_guard_check(const pd_http_guard *g, const pd_http_guard_req *r,
                        pd_http_guard_verdict *v /* OUT */);

/* The allowed hosts as text ("any", or "localhost,127.0.0.1,...") into buf
 * (cap bytes, NUL-terminated, cut when too small), for logs and
 * /api/v1/status/flags. */
void pd_http_guard_describe(const pd_http_guard *g, char *buf, size_t cap);

/* The security headers every reply carries unless its handler set the same
 * header itself: {name, value} pairs, PD_HTTP_SECURITY_HEADERS of them.
 *   X-Content-Type-Options: nosniff
 *   X-Frame-Options: DENY
 *   Content-Security-Policy: default-src 'self'; script-src 'self';
 *     style-src 'self' 'unsafe-inline' (the UI's flame graph places frames
 *     with style attributes); img-src 'self' data: blob:; object-src 'none';
 *     base-uri 'none'; form-action 'self'; frame-ancestors 'none'
 *   Referrer-Policy: same-origin
 *   Cross-Origin-Resource-Policy: same-origin */
#define PD_HTTP_SECURITY_HEADERS 5
extern const char *const pd_http_security_headers[PD_HTTP_SECURITY_HEADERS][2];

#endif
