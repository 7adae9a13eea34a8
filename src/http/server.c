/*
 * http/server.c — pd_http_server over libmicrohttpd.
 *
 * Threads: MHD runs an internal polling thread per pool member
 * (MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO with
 * MHD_OPTION_THREAD_POOL_SIZE); the handler runs on those threads.
 *
 * The listen socket is created, bound and put in listen state here (so a
 * bind failure is a precise -errno naming the address, and port 0 can be
 * read back with getsockname) and handed to MHD with MHD_OPTION_LISTEN_SOCKET.
 *
 * Life of one request (MHD calls, all on the same pool thread):
 *
 *   uri_log_cb(raw uri)          -> allocates the per-request state `req`
 *                                   (arena + body buffer), copies the raw
 *                                   query string, becomes *con_cls
 *   access_cb(first call)        -> checks Content-Length against
 *                                   max_body_bytes: over it, 413 at once
 *                                   (curl's Expect: 100-continue then never
 *                                   sends the body)
 *   access_cb(upload data)*      -> appends to the body; past the cap the
 *                                   rest is read and dropped, req->too_large
 *   access_cb(final, no data)    -> 413 if too_large, else parse the query
 *                                   string (and a form-urlencoded POST body)
 *                                   into (name, value) pairs, call the
 *                                   handler, queue its response
 *   completed_cb                 -> frees `req`
 *
 * Query arguments are decoded here, not by MHD, with the rules of Go's
 * url.ParseQuery (which Prometheus and `go tool pprof` use): pairs split on
 * '&', name and value on the first '=', "%HH" escapes and '+' as a space.
 * (MHD's own decoder leaves '+' alone, but `go tool pprof` re-encodes the
 * URL it is given with '+' for spaces, and browsers' URLSearchParams too.)
 * A malformed escape is kept literally. Args are capped at PD_HTTP_MAX_ARGS.
 */
#include "http/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/log.h"
#include "base/metrics.h"

#define PD_HTTP_MAX_ARGS 4096
#define PD_HTTP_DEFAULT_THREADS 4
#define PD_HTTP_CONN_MEMORY (256 * 1024) /* per-connection: request line + headers */
#define PD_HTTP_CONN_LIMIT 512
#define PD_HTTP_CONN_TIMEOUT_S 120

struct pd_http_server {
    struct MHD_Daemon *d;
    int fd;
    uint16_t port;
    size_t max_body;
    pd_http_handler handler;
    void *ctx;
};

typedef struct http_arg {
    const char *name;
    const char *value;
} http_arg;

typedef struct http_req {
    pd_http_server *srv;
    struct MHD_Connection *conn;
    pd_arena arena;
    char *query; /* raw query string (after '?'), arena */
    pd_buf body;
    bool started;   /* access_cb has seen the first call */
    bool too_large; /* body exceeded max_body */
    http_arg *args;
    size_t n_args;
} http_req;

/* ---- address parsing and the listen socket ---- */

/* Splits "host:port" into host (maybe empty) and port. IPv6 literals need
 * brackets. Returns 0 or PD_EINVAL. host needs NI_MAXHOST bytes. */
static int split_addr(const char *addr, char *host, size_t hostcap, unsigned *port, pd_err *err)
{
    const char *colon;
    size_t hl;
    if (addr[0] == '[') {
        const char *rb = strchr(addr, ']');
        if (!rb || rb[1] != ':')
            return pd_err_set(err, PD_EINVAL, "listen address \"%s\": expected [IPv6]:port", addr);
        hl = (size_t)(rb - addr - 1);
        if (hl >= hostcap)
            return pd_err_set(err, PD_EINVAL, "listen address \"%s\": host too long", addr);
        memcpy(host, addr + 1, hl);
        host[hl] = 0;
        colon = rb + 1;
    } else {
        colon = strrchr(addr, ':');
        if (!colon)
            return pd_err_set(err, PD_EINVAL,
                              "listen address \"%s\": expected host:port (e.g. 127.0.0.1:10902)",
                              addr);
        hl = (size_t)(colon - addr);
        if (memchr(addr, ':', hl))
            return pd_err_set(
                err, PD_EINVAL,
                "listen address \"%s\": IPv6 addresses need brackets, e.g. [::1]:10902", addr);
        if (hl >= hostcap)
            return pd_err_set(err, PD_EINVAL, "listen address \"%s\": host too long", addr);
        memcpy(host, addr, hl);
        host[hl] = 0;
    }
    const char *p = colon + 1;
    if (!*p)
        return pd_err_set(err, PD_EINVAL, "listen address \"%s\": missing port", addr);
    unsigned long v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return pd_err_set(err, PD_EINVAL, "listen address \"%s\": port is not a number", addr);
        v = v * 10 + (unsigned long)(*p - '0');
        if (v > 65535)
            return pd_err_set(err, PD_EINVAL, "listen address \"%s\": port over 65535", addr);
    }
    *port = (unsigned)v;
    return 0;
}

/* Creates a listening socket for addr. Returns the fd, or a negative error. */
static int listen_on(const char *addr, uint16_t *bound_port, bool *ipv6, pd_err *err)
{
    char host[NI_MAXHOST], portstr[8];
    unsigned port = 0;
    int rc = split_addr(addr, host, sizeof host, &port, err);
    if (rc)
        return rc;
    snprintf(portstr, sizeof portstr, "%u", port);

    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
    int gai = getaddrinfo(host[0] ? host : NULL, portstr, &hints, &res);
    if (gai != 0)
        return pd_err_set(err, PD_EINVAL, "listen address \"%s\": %s", addr, gai_strerror(gai));

    /* Prefer IPv4 when a name resolves to both (localhost), as loopback
     * clients most often use 127.0.0.1. For an empty host, AI_PASSIVE gives
     * 0.0.0.0 (and ::): take IPv4 any as well. */
    struct addrinfo *ai = res;
    for (struct addrinfo *it = res; it; it = it->ai_next)
        if (it->ai_family == AF_INET) {
            ai = it;
            break;
        }
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
        rc = -errno;
        pd_err_set(err, rc, "listen address \"%s\": socket: %s", addr, strerror(errno));
        goto out;
    }
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        rc = -errno;
        pd_err_set(err, rc, "listen address \"%s\": bind: %s", addr, strerror(errno));
        goto fail;
    }
    if (listen(fd, 128) != 0) {
        rc = -errno;
        pd_err_set(err, rc, "listen address \"%s\": listen: %s", addr, strerror(errno));
        goto fail;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
        rc = -errno;
        pd_err_set(err, rc, "listen address \"%s\": getsockname: %s", addr, strerror(errno));
        goto fail;
    }
    if (ss.ss_family == AF_INET6)
        *bound_port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    else
        *bound_port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    *ipv6 = ss.ss_family == AF_INET6;
    rc = fd;
    goto out;
fail:
    close(fd);
out:
    freeaddrinfo(res);
    return rc;
}

/* ---- query-string decoding ---- */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decodes s[0..len) ("%HH", '+' = space) into a NUL-terminated arena copy.
 * A "%00" sets *nul: the value would be cut there by every C string use
 * ("service=admin%00evil" stored as "admin"), so the request is refused. */
static char *form_decode(pd_arena *a, const char *s, size_t len, bool *nul)
{
    char *out = pd_arena_alloc(a, len + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '+') {
            out[o++] = ' ';
        } else if (c == '%' && i + 2 < len && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
            out[o++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
            if (!out[o - 1])
                *nul = true;
            i += 2;
        } else {
            out[o++] = c;
        }
    }
    out[o] = 0;
    return out;
}

/* Appends the pairs of a query string / form body to req->args. */
static int parse_pairs(http_req *r, const char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && s[j] != '&')
            j++;
        if (j > i) {
            if (r->n_args >= PD_HTTP_MAX_ARGS)
                return PD_ETOOBIG;
            const char *eq = memchr(s + i, '=', j - i);
            size_t nl = eq ? (size_t)(eq - (s + i)) : j - i;
            bool nul = false;
            const char *name = form_decode(&r->arena, s + i, nl, &nul);
            const char *val = eq ? form_decode(&r->arena, eq + 1, (size_t)(s + j - eq - 1), &nul)
                                 : form_decode(&r->arena, "", 0, &nul);
            if (!name || !val)
                return PD_ENOMEM;
            if (nul)
                return PD_EINVAL;
            if ((r->n_args & (r->n_args - 1)) == 0 || r->n_args == 0) {
                /* grow at powers of two (arena memory: old array is abandoned) */
                size_t cap = r->n_args ? r->n_args * 2 : 8;
                http_arg *na = pd_arena_alloc(&r->arena, cap * sizeof *na);
                if (!na)
                    return PD_ENOMEM;
                if (r->n_args)
                    memcpy(na, r->args, r->n_args * sizeof *na);
                r->args = na;
            }
            r->args[r->n_args].name = name;
            r->args[r->n_args].value = val;
            r->n_args++;
        }
        i = j + 1;
    }
    return 0;
}

/* ---- request accessors (server.h) ---- */

const char *pd_http_arg(const pd_http_request *req, const char *name)
{
    const http_req *r = req->priv;
    if (!r)
        return NULL;
    for (size_t i = 0; i < r->n_args; i++)
        if (strcmp(r->args[i].name, name) == 0)
            return r->args[i].value;
    return NULL;
}

size_t pd_http_args(const pd_http_request *req, const char *name, const char **vals, size_t max)
{
    const http_req *r = req->priv;
    size_t n = 0;
    if (!r)
        return 0;
    for (size_t i = 0; i < r->n_args; i++)
        if (strcmp(r->args[i].name, name) == 0) {
            if (n < max)
                vals[n] = r->args[i].value;
            n++;
        }
    return n;
}

const char *pd_http_header(const pd_http_request *req, const char *name)
{
    const http_req *r = req->priv;
    if (!r || !r->conn)
        return NULL;
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

bool pd_http_client_gone(const pd_http_request *req)
{
    const http_req *r = req ? req->priv : NULL;
    if (!r || !r->conn)
        return false;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return false;
    struct pollfd pfd = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
    if (poll(&pfd, 1, 0) <= 0)
        return false;
    if (pfd.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL))
        return true;
    if (pfd.revents & POLLIN) {
        char c;
        /* readable: EOF (0) is a close; data is a pipelined request */
        return recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
    }
    return false;
}

int pd_http_add_header(pd_http_response *resp, const char *name, const char *value)
{
    size_t old = resp->headers ? strlen(resp->headers) : 0;
    size_t add = strlen(name) + 2 + strlen(value) + 2;
    char *n = realloc(resp->headers, old + add + 1);
    if (!n)
        return PD_ENOMEM;
    snprintf(n + old, add + 1, "%s: %s\r\n", name, value);
    resp->headers = n;
    return 0;
}

/* ---- MHD callbacks ---- */

static void *uri_log_cb(void *cls, const char *uri, struct MHD_Connection *conn)
{
    pd_http_server *srv = cls;
    http_req *r = calloc(1, sizeof *r);
    if (!r)
        return NULL; /* access_cb answers 500 */
    r->srv = srv;
    r->conn = conn;
    pd_arena_init(&r->arena);
    pd_buf_init(&r->body, srv->max_body);
    const char *q = strchr(uri, '?');
    if (q) {
        /* drop a fragment, as clients never send one but be safe */
        const char *h = strchr(q + 1, '#');
        size_t ql = h ? (size_t)(h - q - 1) : strlen(q + 1);
        r->query = pd_arena_strndup(&r->arena, q + 1, ql);
    }
    return r;
}

static void completed_cb(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    http_req *r = *con_cls;
    if (!r)
        return;
    pd_buf_release(&r->body);
    pd_arena_release(&r->arena);
    free(r);
    *con_cls = NULL;
}

static enum MHD_Result queue_text(struct MHD_Connection *conn, unsigned status, const char *text)
{
    struct MHD_Response *mr =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    if (!mr)
        return MHD_NO;
    MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    enum MHD_Result ret = MHD_queue_response(conn, status, mr);
    MHD_destroy_response(mr);
    return ret;
}

static enum MHD_Result reject_too_large(http_req *r)
{
    char msg[160];
    pd_metrics_add("profd_http_rejected_total", "reason=\"body_too_large\"", 1);
    snprintf(msg, sizeof msg, "request body exceeds the limit of %zu bytes\n", r->srv->max_body);
    return queue_text(r->conn, MHD_HTTP_CONTENT_TOO_LARGE, msg);
}

/* Adds "Name: value\r\n" lines to mr. Malformed lines are skipped. */
static void add_extra_headers(struct MHD_Response *mr, char *h)
{
    while (h && *h) {
        char *eol = strstr(h, "\r\n");
        if (eol)
            *eol = 0;
        char *colon = strchr(h, ':');
        if (colon) {
            *colon = 0;
            char *v = colon + 1;
            while (*v == ' ')
                v++;
            MHD_add_response_header(mr, h, v);
        }
        h = eol ? eol + 2 : NULL;
    }
}

static bool is_form(const char *ct)
{
    static const char form[] = "application/x-www-form-urlencoded";
    return ct && strncasecmp(ct, form, sizeof form - 1) == 0 &&
           (ct[sizeof form - 1] == 0 || ct[sizeof form - 1] == ';' || ct[sizeof form - 1] == ' ');
}

static enum MHD_Result access_cb(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls)
{
    pd_http_server *srv = cls;
    http_req *r = *con_cls;
    if (!r)
        return queue_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");

    if (!r->started) {
        r->started = true;
        const char *cl =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl) {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(cl, &end, 10);
            if (errno == 0 && end != cl && v > srv->max_body)
                return reject_too_large(r);
        }
        return MHD_YES;
    }

    if (*upload_data_size > 0) {
        if (!r->too_large && pd_buf_append(&r->body, upload_data, *upload_data_size) != 0)
            r->too_large = true; /* PD_ETOOBIG (or ENOMEM): read on, drop, answer 413 */
        *upload_data_size = 0;
        return MHD_YES;
    }

    if (r->too_large)
        return reject_too_large(r);

    int rc = 0;
    if (r->query)
        rc = parse_pairs(r, r->query, strlen(r->query));
    if (rc == 0 && strcmp(method, "POST") == 0 &&
        is_form(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE)))
        rc = parse_pairs(r, r->body.data ? r->body.data : "", r->body.len);
    if (rc == PD_ETOOBIG)
        return queue_text(conn, MHD_HTTP_BAD_REQUEST, "too many query arguments\n");
    if (rc == PD_EINVAL) {
        pd_metrics_add("profd_http_rejected_total", "reason=\"nul_in_argument\"", 1);
        return queue_text(conn, MHD_HTTP_BAD_REQUEST,
                          "a query or form argument contains a NUL byte (%00): refused, as it "
                          "would cut the value short\n");
    }
    if (rc)
        return queue_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");

    pd_http_request req = {
        .method = method,
        .path = url,
        .body = (const uint8_t *)(r->body.data ? r->body.data : ""),
        .body_len = r->body.len,
        .priv = r,
    };
    pd_http_response resp = {.status = 200, .content_type = NULL, .headers = NULL};
    pd_buf_init(&resp.body, 0);
    srv->handler(srv->ctx, &req, &resp);

    size_t len = 0;
    char *data = pd_buf_detach(&resp.body, &len);
    struct MHD_Response *mr;
    if (data)
        mr = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
    else
        mr = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!mr) {
        free(data);
        free(resp.headers);
        return MHD_NO;
    }
    MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE,
                            resp.content_type ? resp.content_type : "text/plain; charset=utf-8");
    add_extra_headers(mr, resp.headers);
    free(resp.headers);
    int status = resp.status > 0 ? resp.status : 200;
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)status, mr);
    MHD_destroy_response(mr);
    return ret;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t l = strlen(line);
    while (l && (line[l - 1] == '\n' || line[l - 1] == '\r'))
        line[--l] = 0;
    for (char *p = line; *p; p++)
        if (*p == '"')
            *p = '\'';
    pd_log(PD_LOG_DEBUG, "libmicrohttpd", "detail=\"%s\"", line);
    /* Requests MHD refuses itself never reach access_cb (nor completed_cb):
     * a request line or headers over the connection memory get 414/431, a
     * malformed request 400. MHD reports them only through this log, as
     * "Error processing request (HTTP response code is NNN (...)". */
    const char *code = strstr(line, "HTTP response code is ");
    if (code) {
        int status = atoi(code + strlen("HTTP response code is "));
        pd_metrics_add("profd_http_rejected_total",
                       status == 414 || status == 431 ? "reason=\"request_too_large\""
                                                      : "reason=\"malformed_request\"",
                       1);
    }
}

/* ---- start / stop ---- */

int pd_http_server_start(const char *listen_addr, unsigned threads, size_t max_body_bytes,
                         pd_http_handler handler, void *ctx, pd_http_server **out, pd_err *err)
{
    pd_metrics_describe("profd_http_rejected_total", PD_METRIC_COUNTER,
                        "HTTP requests refused by the server before any handler ran, by reason.");
    *out = NULL;
    if (!listen_addr || !handler)
        return pd_err_set(err, PD_EINVAL, "http server: missing listen address or handler");
    pd_http_server *srv = calloc(1, sizeof *srv);
    if (!srv)
        return pd_err_set(err, PD_ENOMEM, "http server: out of memory");
    srv->handler = handler;
    srv->ctx = ctx;
    srv->max_body = max_body_bytes ? max_body_bytes : (size_t)16 << 20;
    bool ipv6 = false;
    int fd = listen_on(listen_addr, &srv->port, &ipv6, err);
    if (fd < 0) {
        free(srv);
        return fd;
    }
    srv->fd = fd;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG;
    if (ipv6)
        flags |= MHD_USE_IPv6;
    srv->d = MHD_start_daemon(
        flags, 0, NULL, NULL, access_cb, srv, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)(threads ? threads : PD_HTTP_DEFAULT_THREADS), MHD_OPTION_URI_LOG_CALLBACK,
        uri_log_cb, srv, MHD_OPTION_NOTIFY_COMPLETED, completed_cb, srv,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)PD_HTTP_CONN_MEMORY,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)PD_HTTP_CONN_LIMIT, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)PD_HTTP_CONN_TIMEOUT_S, MHD_OPTION_END);
    if (!srv->d) {
        /* whether MHD closed the socket on failure is not documented */
        if (fcntl(fd, F_GETFD) != -1)
            close(fd);
        free(srv);
        return pd_err_set(err, PD_EINVAL, "listen address \"%s\": libmicrohttpd failed to start",
                          listen_addr);
    }
    *out = srv;
    return 0;
}

uint16_t pd_http_server_port(const pd_http_server *srv)
{
    return srv ? srv->port : 0;
}

void pd_http_server_stop(pd_http_server *srv)
{
    if (!srv)
        return;
    MHD_stop_daemon(srv->d); /* also closes the listen socket it was given */
    free(srv);
}
