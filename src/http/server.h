/*
 * http/server.h — a small HTTP/1.1 server over libmicrohttpd (thread pool).
 *
 * The handler is called once per request, after the whole body has arrived,
 * on one of the server's threads (so handlers must be thread-safe). Bodies
 * over max_body_bytes are refused by the server with 413 before the handler
 * runs (and counted in profd_http_rejected_total{reason="body_too_large"}).
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

/* Starts listening on listen_addr ("host:port"; host may be an IPv4 address,
 * "[::1]", "localhost" or empty for all interfaces; port 0 picks a free one)
 * with `threads` worker threads. Errors: PD_EINVAL (bad address, err says
 * which), -errno (bind failed: err names the address), PD_ENOMEM. */
int pd_http_server_start(const char *listen_addr, unsigned threads, size_t max_body_bytes,
                         pd_http_handler handler, void *ctx, pd_http_server **out /* OUT */,
                         pd_err *err);
/* The port actually bound (useful with port 0). */
uint16_t pd_http_server_port(const pd_http_server *srv);
/* Stops accepting, waits for running handlers, frees. NULL is a no-op. */
void pd_http_server_stop(pd_http_server *srv);

#endif
