/*
 * http/server.h — a small HTTP/1.1 server over libmicrohttpd that a few slow
 * or hostile clients cannot exhaust.
 *
 * One epoll thread reads and writes every connection (idle and slow clients
 * cost a socket, not a thread); the handler is called once per request,
 * after the whole body has arrived, on a worker of one of two pools chosen by
 * pd_http_classify_fn (ingest/admin vs queries, so a slow query never delays
 * a push), or inline on the epoll thread for trivial handlers (health). So
 * handlers must be thread-safe.
 *
 * Refused by the server before any handler runs, each counted in
 * profd_http_rejected_total{reason=...}:
 *   body_too_large      413 at the first byte past max_body_bytes (or at once
 *                       from Content-Length); the buffer never grows past it
 *   bodies_in_flight    503 when the bodies being received together would
 *                       pass the server-wide budget (max(64 MiB, 4 x max body))
 *   too_many_args       400 past PD_HTTP_MAX_ARGS query/form arguments
 *   queue_full          503 when a pool's queue is full
 *   request_too_large, malformed_request, connection_limit: refused by
 *                       libmicrohttpd itself (414/431, 400, closed at accept)
 * Connections cut off, in profd_http_cut_off_total{reason=...}:
 *   idle                no request started within read_timeout
 *   read_timeout        a request (headers and body) not complete within
 *                       read_timeout of the connection's start or of the end
 *                       of its previous reply (a whole-request deadline, not
 *                       an inactivity timeout: slowloris and 1 byte/s bodies)
 *   idle_budget         an idle kept-alive connection that has served a
 *                       request, closed because more than 64 such were open
 *                       (the longest idle first; each holds MHD's zeroed
 *                       256 KiB pool, so idle clients cost at most ~16 MiB)
 */
#ifndef PD_HTTP_SERVER_H
#define PD_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/buf.h"
#include "base/error.h"

typedef struct pd_http_server pd_http_server;

typedef struct pd_http_request {
    const char *method; /* "GET", "POST", ... */
    const char *path;   /* URL path, decoded, without the query string */
    const uint8_t *body;
    size_t body_len;
    void *priv; /* server-private (the MHD connection) */
    /* the client's numeric address ("127.0.0.1", "::1"; "" when unknown),
     * as the server saw it (no X-Forwarded-For): what per-client limits key on */
    const char *client;
} pd_http_request;

typedef struct pd_http_response {
    int status;               /* default 200 */
    const char *content_type; /* static string; default "text/plain; charset=utf-8" */
    pd_buf body;              /* owned by the server, freed after sending */
    char *headers;            /* extra "Name: value\r\n" lines (malloc'd) or NULL */
} pd_http_response;

typedef void (*pd_http_handler)(void *ctx, const pd_http_request *req, pd_http_response *resp);

/* The first value of query argument `name` (URL-decoded), or NULL. Borrowed. */
const char *pd_http_arg(const pd_http_request *req, const char *name);
/* Up to max values of a repeated query argument (e.g. "match[]") into vals;
 * returns how many there are (may exceed max). Borrowed. */
size_t pd_http_args(const pd_http_request *req, const char *name, const char **vals, size_t max);
/* A request header by case-insensitive name, or NULL. Borrowed. */
const char *pd_http_header(const pd_http_request *req, const char *name);
/* True when the client of req has closed its side of the connection (or it
 * failed): a long handler polls it to stop work nobody will read. Cheap (a
 * poll(2) with timeout 0); false when it cannot tell. */
bool pd_http_client_gone(const pd_http_request *req);
/* Adds a response header. 0 or PD_ENOMEM. */
int pd_http_add_header(pd_http_response *resp, const char *name, const char *value);

/* Where a request's handler runs (see the top of this file). */
typedef enum {
    PD_HTTP_POOL_INGEST = 0, /* the main pool: pushes, admin, /metrics (default) */
    PD_HTTP_POOL_QUERY = 1,  /* queries: merge, diff, series, UI */
    PD_HTTP_POOL_INLINE = 2, /* on the epoll thread: must be fast and never block */
} pd_http_pool;

/* Chooses the pool of a request from its method and decoded path. */
typedef pd_http_pool (*pd_http_classify_fn)(void *ctx, const char *method, const char *path);

#define PD_HTTP_MAX_ARGS 512

typedef struct pd_http_server_options {
    const char *listen_addr; /* "host:port", see pd_http_server_start */
    unsigned threads;        /* ingest pool workers; 0: 4 */
    unsigned query_threads;  /* query pool workers; 0: 4 */
    size_t max_body_bytes;   /* 0: 16 MiB */
    /* bytes of request bodies all requests may hold at once; past it a
     * request is answered 503 with Retry-After: 1 (reason="bodies_in_flight").
     * 0: max(64 MiB, 4 x max_body_bytes) */
    size_t body_budget_bytes;
    int64_t read_timeout_ms;         /* whole-request deadline; 0: 30 s */
    unsigned max_connections;        /* 0: 4096 (clamped to RLIMIT_NOFILE - 64) */
    unsigned max_connections_per_ip; /* 0: no per-IP cap */
    pd_http_classify_fn classify;    /* NULL: everything in the ingest pool */
    /* issue 20 (--web.config.file): TLS and the per-request gate of
     * http/auth.h (NULL: plain HTTP, no gate); group gives the
     * pd_access_group of a request (NULL: every request is a query). */
    struct pd_http_gate *gate;
    int (*group)(const char *method, const char *path);
    /* issue 20 item 4: Host/Origin/fetch-metadata rules checked when a
     * request's headers have arrived (http/guard.h); borrowed, must outlive
     * the server; NULL: none. Refusals are counted like the others above
     * (host_not_allowed, cross_origin, cross_site, browser_simple_write).
     * Every reply carries guard.h's security headers either way. */
    const struct pd_http_guard *guard;
    /* issue 26 item 7: whether a POST to path with an
     * application/x-www-form-urlencoded body has that body parsed into the
     * request's args (as Prometheus' API takes forms). NULL: every such
     * POST. A route answered false gets its body untouched whatever the
     * Content-Type (curl --data-binary sends a form type with a gzip
     * profile). */
    bool (*form)(const char *method, const char *path);
} pd_http_server_options;

/* Starts a server with options o (see pd_http_server_options; the handler
 * and classify both get ctx). Raises the soft RLIMIT_NOFILE to the hard one
 * so max_connections sockets fit. Errors as pd_http_server_start. */
int pd_http_server_start_opts(const pd_http_server_options *o, pd_http_handler handler, void *ctx,
                              pd_http_server **out /* OUT */, pd_err *err);

/* Starts listening on listen_addr ("host:port"; host may be an IPv4 address,
 * "[::1]", a name such as "localhost", or empty for all interfaces; port 0
 * picks a free one). A name or an empty host is served on every address it
 * resolves to, on one port: "localhost" on 127.0.0.1 and ::1 (as Debian's
 * /etc/hosts maps it), "" on 0.0.0.0 and ::; an address of a family the
 * host cannot bind (no IPv6) is skipped with a warning when another is bound.
 * max_connections caps the connections of all these addresses together.
 * with `threads` worker threads (every request in that one pool, other
 * options at their defaults). Errors: PD_EINVAL (bad address, err says
 * which), -errno (bind failed: err names the address), PD_ENOMEM. */
int pd_http_server_start(const char *listen_addr, unsigned threads, size_t max_body_bytes,
                         pd_http_handler handler, void *ctx, pd_http_server **out /* OUT */,
                         pd_err *err);
/* The port actually bound (useful with port 0). */
uint16_t pd_http_server_port(const pd_http_server *srv);
/* Stops accepting, waits for running handlers, frees. NULL is a no-op. */
void pd_http_server_stop(pd_http_server *srv);

#endif
