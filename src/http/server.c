/*
 * http/server.c — pd_http_server over libmicrohttpd.
 *
 * Threads:
 *   - one MHD epoll thread (MHD_USE_EPOLL_INTERNAL_THREAD) reads and writes
 *     every connection: an idle or trickling client costs a socket and a
 *     small MHD memory pool, never a thread;
 *   - two worker pools (ingest, query) run handlers: the epoll thread
 *     suspends the connection (MHD_suspend_connection), queues the request,
 *     and the worker resumes it with the response ready; a pool's queue is
 *     bounded (503 past it);
 *   - a reaper thread enforces the whole-request deadline (read_timeout):
 *     every 250 ms it shuts down (shutdown(2), MHD then closes) connections
 *     whose current request has not been fully received in time; and it
 *     bounds the memory of idle kept-alive connections: MHD zeroes a
 *     connection's whole pool (PD_HTTP_CONN_MEMORY, mmap'ed) after each
 *     request, so a connection that has served one holds ~64 KiB of RSS
 *     while it waits for the next; past PD_HTTP_IDLE_KEEP such idle
 *     connections the longest idle are shut down (HTTP lets a server close
 *     an idle kept-alive connection; clients open a new one), counted in
 *     profd_http_cut_off_total{reason="idle_budget"}. Such a cut races with
 *     a request the client may just be sending on that connection (a fleet
 *     pushing on timers reuses exactly the longest idle one next), so while
 *     the last scan counted PD_HTTP_IDLE_KEEP or more, responses carry
 *     "Connection: close" instead (profd_http_keepalive_declined_total):
 *     the client knows before it reuses the connection, and the cut stays
 *     a fallback. A connection that has
 *     served nothing yet holds untouched pages (a few KiB).
 *
 * The listen sockets are created, bound and put in listen state here (so a
 * bind failure is a precise -errno naming the address, and port 0 can be
 * read back with getsockname), one per address the listen address resolves
 * to ("localhost" is 127.0.0.1 and ::1 on Debian: a client may pick either),
 * each handed to its own MHD daemon with MHD_OPTION_LISTEN_SOCKET; the
 * daemons share everything else (pools, connections, callbacks).
 *
 * Per-connection state `http_conn` is made by notify_conn_cb(STARTED) and
 * freed by notify_conn_cb(CLOSED), which MHD always calls (before it closes
 * the socket: the reaper's shutdown under conns_mu never hits a reused fd).
 * It owns the current request `http_req`, so a request that MHD drops
 * without completed_cb (a malformed one) is freed with its connection.
 *
 * Life of one request:
 *
 *   uri_log_cb(raw uri)          -> allocates `req` (arena + body buffer),
 *                                   copies the raw query string, becomes
 *                                   *con_cls and conn->req
 *   access_cb(first call)        -> checks Content-Length against
 *                                   max_body_bytes: over it, 413 at once
 *   access_cb(upload data)*      -> appends to the body; at the first byte
 *                                   past the cap the buffer is freed and the
 *                                   rest dropped (it never grows past
 *                                   max_body + 1); 413 once the body ends
 *   access_cb(final, no data)    -> parse the query string (and a form POST
 *                                   body, on the routes the form option
 *                                   names) into pairs (400 past the cap);
 *                                   the deadline stops; classify: inline ->
 *                                   handler now; else suspend + enqueue
 *   worker                       -> handler, response kept in req, resume
 *   access_cb(after resume)      -> queue the response
 *   completed_cb                 -> frees `req`; the deadline restarts
 *
 * Query arguments are decoded here, not by MHD, with the rules of Go's
 * url.ParseQuery (which Prometheus and `go tool pprof` use): pairs split on
 * '&', name and value on the first '=', "%HH" escapes and '+' as a space.
 * (MHD's own decoder leaves '+' alone, but `go tool pprof` re-encodes the
 * URL it is given with '+' for spaces, and browsers' URLSearchParams too.)
 * A malformed escape is kept literally. Args are capped at PD_HTTP_MAX_ARGS.
 * MHD would also split the query into its own pool and, past ~900 short
 * arguments, close the connection unanswered (its 431 needs pool memory
 * too): uri_log_cb empties MHD's copy once it has its own, so any query
 * whose request line fits the read buffer is answered (400 past
 * PD_HTTP_MAX_ARGS; 414 from MHD past the buffer).
 */
#include "http/server.h"

#include "base/cancel.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/time.h"
#include "http/auth.h" /* issue 20: --web.config.file */
#include "http/guard.h"

#define PD_HTTP_DEFAULT_THREADS 4
/* per connection: the read buffer, request line and headers (not the
 * query's arguments: uri_log_cb keeps MHD from splitting it); Grafana and
 * browsers POST long queries. A push body passes through the read buffer
 * (half the pool) in pieces, never held whole here.
 * MHD zeroes the whole pool after each request and a new connection faults
 * its pages in: at 640 KiB that was ~18% of a merge request's CPU and ~14% of
 * a push's (bench/merge_pushdown/RESULTS.md); at 256 KiB still ~15% of a
 * ClickHouse-backed profd's CPU under a fleet that opens connections
 * (bench/clickhouse/RESULTS.md, session 32). 64 KiB holds request lines
 * and headers of 30 KiB and more (Go's and nginx's defaults hold less) */
#define PD_HTTP_CONN_MEMORY (64 * 1024)
#define PD_HTTP_CONN_LIMIT 4096
#define PD_HTTP_READ_TIMEOUT_MS 30000
#define PD_HTTP_QUEUE_MAX 1024 /* requests waiting for a worker, per pool */
#define PD_HTTP_QUERY_NICE 10  /* added to the query workers' nice value (see pool_main) */
/* a query after which the process's RSS is this much above what it was after
 * the last malloc_trim is followed by one (see maybe_trim) */
#define PD_HTTP_TRIM_GROWTH_MIN ((int64_t)8 << 20)
#define PD_HTTP_BODY_BUDGET_MIN ((size_t)64 << 20)
#define PD_HTTP_MAX_LISTEN 8 /* addresses one listen address may resolve to */
/* idle kept-alive connections that served a request, kept at most (each
 * holds a zeroed PD_HTTP_CONN_MEMORY pool: 256 x 64 KiB = 16 MiB). Past it
 * a fleet's pushes each open a new connection (its pool faulted in, its
 * TCP handshake): a budget to spend on keeping them */
#define PD_HTTP_IDLE_KEEP 256

typedef struct http_req http_req;
typedef struct http_conn http_conn;

/* A pool of workers running handlers of queued (suspended) requests. */
typedef struct http_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    http_req *head, *tail; /* FIFO through http_req.qnext */
    size_t len;
    bool stop;
    pthread_t *th;
    unsigned n_th;
    struct pd_http_server *srv;
} http_pool;

struct pd_http_server {
    /* one MHD daemon per listening socket (listen_all): they share the
     * pools, the connections list and the callbacks */
    struct MHD_Daemon *d[PD_HTTP_MAX_LISTEN];
    int fd[PD_HTTP_MAX_LISTEN];
    size_t n_listen;
    unsigned max_conn; /* over all daemons (accept_cb) */
    unsigned n_conns;  /* open connections, all daemons (conns_mu) */
    unsigned n_idle;   /* idle kept-alive connections that served one, at the
                          reaper's last scan (__atomic) */
    uint16_t port;
    size_t max_body;
    size_t body_budget; /* bytes of body buffers all requests may hold */
    size_t body_bytes;  /* held now (atomic) */
    int64_t read_timeout_ns;
    pd_http_handler handler;
    pd_http_classify_fn classify;
    void *ctx;
    const pd_http_guard *guard; /* issue 20 item 4 (guard.h); may be NULL */
    http_pool pools[2];         /* PD_HTTP_POOL_INGEST, PD_HTTP_POOL_QUERY */
    int64_t rss_after_trim;     /* bytes, RSS read after the last malloc_trim (atomic) */
    pthread_mutex_t conns_mu;
    http_conn *conns; /* doubly linked through prev/next */
    pthread_t reaper;
    pthread_cond_t reaper_cv;
    bool reaper_stop, reaper_started;
    unsigned n_answering;      /* requests answered, not yet completed (atomic; stop) */
    struct pd_http_gate *gate; /* issue 20: TLS + auth gate, or NULL */
    int (*group)(const char *method, const char *path);
    bool (*form)(const char *method, const char *path); /* NULL: every POST */
    char *tls_prio;
};

/* One TCP connection (MHD's socket context). */
struct http_conn {
    http_conn *prev, *next; /* srv->conns, under conns_mu */
    int fd;
    int64_t phase_start_ns; /* start of the current read phase (conns_mu) */
    bool reading;           /* waiting for / receiving a request (conns_mu) */
    bool cut;               /* shut down by the reaper (conns_mu) */
    bool served;            /* a request completed: MHD's pool is resident (conns_mu) */
    http_req *req;          /* the current request, owned (epoll thread) */
};

enum { REQ_NEW = 0, REQ_QUEUED, REQ_DONE };

typedef struct http_arg {
    const char *name;
    const char *value;
} http_arg;

struct http_req {
    pd_http_server *srv;
    struct MHD_Connection *conn;
    http_conn *hc;
    pd_arena arena;
    char *query;     /* raw query string (after '?'), arena */
    pd_buf body;     /* capped at max_body; its cap is counted in srv->body_bytes */
    bool started;    /* access_cb has seen the first call */
    int body_error;  /* PD_ETOOBIG, -EAGAIN (budget), PD_ENOMEM: body dropped */
    bool query_lost; /* out of memory copying the query string: 500 */
    bool answering;  /* counted in srv->n_answering until freed */
    int state;       /* REQ_NEW, REQ_QUEUED (in a pool), REQ_DONE (resp ready) */
    http_arg *args;
    size_t n_args;
    const char *method, *url; /* MHD's, valid for the request's life */
    pd_http_response resp;    /* REQ_DONE: the handler's response */
    http_req *qnext;
};

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

/* Binds and listens on one resolved address. Returns the fd or -errno. For
 * IPv6 it sets IPV6_V6ONLY, so "::" and "0.0.0.0" (and "::1" beside
 * "127.0.0.1") are separate sockets on one port. */
static int bind_one(const struct addrinfo *ai, const char *addr, pd_err *err)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
        int rc = -errno;
        pd_err_set(err, rc, "listen address \"%s\": socket: %s", addr, strerror(errno));
        return rc;
    }
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ai->ai_family == AF_INET6)
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    const char *what = "bind";
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0)
        goto fail;
    what = "listen";
    if (listen(fd, 4096) != 0) /* many clients at once: idle ones too */
        goto fail;
    return fd;
fail:;
    int rc = -errno;
    char num[NI_MAXHOST] = "?";
    (void)getnameinfo(ai->ai_addr, ai->ai_addrlen, num, sizeof num, NULL, 0, NI_NUMERICHOST);
    pd_err_set(err, rc, "listen address \"%s\" (%s): %s: %s", addr, num, what, strerror(-rc));
    close(fd);
    return rc;
}

static uint16_t fd_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        return 0;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* Sets the port of a resolved address (for the addresses after the first
 * when port 0 picked one). */
static void ai_set_port(struct addrinfo *ai, uint16_t port)
{
    if (ai->ai_family == AF_INET6)
        ((struct sockaddr_in6 *)ai->ai_addr)->sin6_port = htons(port);
    else
        ((struct sockaddr_in *)ai->ai_addr)->sin_port = htons(port);
}

/* Creates the listening sockets for addr: one per distinct address the host
 * resolves to ("localhost" -> 127.0.0.1 and ::1 on Debian; "" -> 0.0.0.0
 * and ::), all on one port (port 0: the one the first bind picked). An
 * address of a family this host cannot bind (EADDRNOTAVAIL, EAFNOSUPPORT:
 * no IPv6) is skipped when another one is bound. Fills fds[0..*n) with
 * ipv6[i]; returns 0 or a negative error (err names the address). */
static int listen_all(const char *addr, int fds[PD_HTTP_MAX_LISTEN], bool ipv6[PD_HTTP_MAX_LISTEN],
                      size_t *n, uint16_t *bound_port, pd_err *err)
{
    char host[NI_MAXHOST], portstr[8];
    unsigned port = 0;
    *n = 0;
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

    /* IPv4 first (the port of a port-0 bind is picked there), then the rest
     * in resolver order, each distinct address once */
    struct addrinfo *order[PD_HTTP_MAX_LISTEN];
    size_t no = 0;
    for (int pass = 0; pass < 2; pass++)
        for (struct addrinfo *it = res; it && no < PD_HTTP_MAX_LISTEN; it = it->ai_next) {
            if ((pass == 0) != (it->ai_family == AF_INET) ||
                (it->ai_family != AF_INET && it->ai_family != AF_INET6))
                continue;
            bool dup = false;
            for (size_t k = 0; k < no && !dup; k++)
                dup = order[k]->ai_addrlen == it->ai_addrlen &&
                      memcmp(order[k]->ai_addr, it->ai_addr, it->ai_addrlen) == 0;
            if (!dup)
                order[no++] = it;
        }
    if (no == 0) {
        freeaddrinfo(res);
        return pd_err_set(err, PD_EINVAL, "listen address \"%s\": no IPv4 or IPv6 address", addr);
    }
    /* with port 0 another process may take the picked port on the other
     * family between the two binds: pick again a few times */
    for (int attempt = 0; attempt < 8; attempt++) {
        rc = 0;
        *n = 0;
        uint16_t p = (uint16_t)port;
        for (size_t k = 0; k < no; k++) {
            if (port == 0)
                ai_set_port(order[k], p);
            int fd = bind_one(order[k], addr, err);
            if (fd < 0) {
                if ((fd == -EADDRNOTAVAIL || fd == -EAFNOSUPPORT) && (k > 0 || no > 1)) {
                    pd_log(PD_LOG_WARN, "http server",
                           "msg=\"an address of the listen address cannot be bound here; "
                           "serving on the others\" %s",
                           err && err->msg[0] ? err->msg : "");
                    continue;
                }
                rc = fd;
                break;
            }
            if (*n == 0)
                p = fd_port(fd);
            ipv6[*n] = order[k]->ai_family == AF_INET6;
            fds[(*n)++] = fd;
        }
        if (rc == 0 && *n == 0)
            rc = pd_err_set(err, PD_EINVAL, "listen address \"%s\": no address could be bound",
                            addr);
        if (rc == 0) {
            *bound_port = p;
            break;
        }
        for (size_t k = 0; k < *n; k++)
            close(fds[k]);
        *n = 0;
        if (!(port == 0 && rc == -EADDRINUSE))
            break;
    }
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

/* ---- body buffer with a hard cap and a server-wide budget ---- */

/* Appends n bytes to r->body. Returns 0, PD_ETOOBIG (past max_body: the
 * buffer is left as it was) or -EAGAIN (the server-wide budget of body
 * bytes is spent) or PD_ENOMEM. The buffer grows by doubling but never past
 * max_body + 1 bytes. */
static int body_append(http_req *r, const char *data, size_t n)
{
    pd_buf *b = &r->body;
    size_t max = r->srv->max_body;
    if (n > max || b->len > max - n)
        return PD_ETOOBIG;
    size_t need = b->len + n + 1;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < need)
            cap *= 2;
        if (cap > max + 1)
            cap = max + 1;
        size_t grow = cap - b->cap;
        size_t now = __atomic_add_fetch(&r->srv->body_bytes, grow, __ATOMIC_RELAXED);
        if (now > r->srv->body_budget) {
            __atomic_sub_fetch(&r->srv->body_bytes, grow, __ATOMIC_RELAXED);
            return -EAGAIN;
        }
        char *d = realloc(b->data, cap);
        if (!d) {
            __atomic_sub_fetch(&r->srv->body_bytes, grow, __ATOMIC_RELAXED);
            return PD_ENOMEM;
        }
        b->data = d;
        b->cap = cap;
        pd_metrics_add("profd_http_request_body_bytes", NULL, (double)grow);
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = 0;
    return 0;
}

static void req_free(http_req *r)
{
    if (!r)
        return;
    if (r->answering)
        __atomic_sub_fetch(&r->srv->n_answering, 1, __ATOMIC_RELEASE);
    __atomic_sub_fetch(&r->srv->body_bytes, r->body.cap, __ATOMIC_RELAXED);
    if (r->body.cap)
        pd_metrics_add("profd_http_request_body_bytes", NULL, -(double)r->body.cap);
    pd_buf_release(&r->body);
    pd_buf_release(&r->resp.body);
    free(r->resp.headers);
    pd_arena_release(&r->arena);
    free(r);
}

/* ---- connections and the whole-request deadline ---- */

static void set_reading(pd_http_server *srv, http_conn *hc, bool reading)
{
    pthread_mutex_lock(&srv->conns_mu);
    hc->reading = reading;
    if (reading)
        hc->phase_start_ns = pd_mono_ns();
    pthread_mutex_unlock(&srv->conns_mu);
}

static void notify_conn_cb(void *cls, struct MHD_Connection *conn, void **socket_context,
                           enum MHD_ConnectionNotificationCode toe)
{
    pd_http_server *srv = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        http_conn *hc = calloc(1, sizeof *hc);
        *socket_context = hc;
        if (!hc)
            return; /* no deadline for this one; uri_log_cb copes */
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        hc->fd = ci ? ci->connect_fd : -1;
        if (srv->gate) { /* issue 20: client_auth_type for this TLS session */
            const union MHD_ConnectionInfo *ti =
                MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
            if (ti)
                pd_http_gate_tls_session(srv->gate, ti->tls_session);
        }
        hc->reading = true;
        hc->phase_start_ns = pd_mono_ns();
        pthread_mutex_lock(&srv->conns_mu);
        hc->next = srv->conns;
        if (srv->conns)
            srv->conns->prev = hc;
        srv->conns = hc;
        srv->n_conns++;
        pthread_mutex_unlock(&srv->conns_mu);
        return;
    }
    http_conn *hc = *socket_context;
    if (!hc)
        return;
    pthread_mutex_lock(&srv->conns_mu);
    if (hc->prev)
        hc->prev->next = hc->next;
    else
        srv->conns = hc->next;
    if (hc->next)
        hc->next->prev = hc->prev;
    srv->n_conns--;
    pthread_mutex_unlock(&srv->conns_mu);
    req_free(hc->req); /* a request MHD dropped without completed_cb */
    free(hc);
    *socket_context = NULL;
}

static void *reaper_main(void *arg)
{
    pd_http_server *srv = arg;
    pthread_mutex_lock(&srv->conns_mu);
    while (!srv->reaper_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 250 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&srv->reaper_cv, &srv->conns_mu, &ts);
        if (srv->reaper_stop)
            break;
        int64_t now = pd_mono_ns();
        unsigned idle = 0;
        for (http_conn *hc = srv->conns; hc; hc = hc->next) {
            if (!hc->reading || hc->cut || hc->fd < 0)
                continue;
            if (now - hc->phase_start_ns < srv->read_timeout_ns) {
                idle += hc->served && !hc->req;
                continue;
            }
            hc->cut = true;
            /* counted before the cut: a client that sees its connection
               closed and then reads /metrics finds it there */
            pd_metrics_add("profd_http_cut_off_total",
                           hc->req ? "reason=\"read_timeout\"" : "reason=\"idle\"", 1);
            (void)shutdown(hc->fd, SHUT_RDWR); /* MHD sees EOF/error and closes */
        }
        __atomic_store_n(&srv->n_idle, idle, __ATOMIC_RELAXED);
        /* over the idle budget: shut the longest idle down, one scan per
         * excess connection (O(excess x conns): a few ms for 2,000) */
        while (idle > PD_HTTP_IDLE_KEEP) {
            http_conn *old = NULL;
            for (http_conn *hc = srv->conns; hc; hc = hc->next)
                if (hc->reading && !hc->cut && hc->fd >= 0 && hc->served && !hc->req &&
                    (!old || hc->phase_start_ns < old->phase_start_ns))
                    old = hc;
            if (!old)
                break;
            old->cut = true;
            pd_metrics_add("profd_http_cut_off_total", "reason=\"idle_budget\"", 1);
            (void)shutdown(old->fd, SHUT_RDWR);
            idle--;
        }
    }
    pthread_mutex_unlock(&srv->conns_mu);
    return NULL;
}

/* ---- MHD callbacks ---- */

static void *uri_log_cb(void *cls, const char *uri, struct MHD_Connection *conn)
{
    pd_http_server *srv = cls;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    http_conn *hc = ci ? ci->socket_context : NULL;
    if (hc && hc->req) {
        /* the previous request on this connection never completed */
        req_free(hc->req);
        hc->req = NULL;
    }
    http_req *r = calloc(1, sizeof *r);
    if (!r)
        return NULL; /* access_cb answers 500 */
    r->srv = srv;
    r->conn = conn;
    r->hc = hc;
    if (hc)
        hc->req = r;
    pd_arena_init(&r->arena);
    pd_buf_init(&r->body, srv->max_body + 1);
    pd_buf_init(&r->resp.body, 0);
    const char *q = strchr(uri, '?');
    if (q) {
        /* drop a fragment, as clients never send one but be safe */
        const char *h = strchr(q + 1, '#');
        size_t ql = h ? (size_t)(h - q - 1) : strlen(q + 1);
        r->query = pd_arena_strndup(&r->arena, q + 1, ql);
        if (!r->query)
            r->query_lost = true;
        else if (q[1])
            /* profd decodes its copy (parse_pairs). libmicrohttpd splits
               the query into the connection's pool too (~56 bytes an
               argument) and past ~900 arguments closes the connection
               unanswered: its 431 needs pool memory as well (0.9.75,
               connection.c connection_add_header). It calls this callback
               before that split, on the same buffer (its own, writable: it
               writes a NUL over the '?' next), so an empty query here
               leaves it nothing to split, and PD_HTTP_MAX_ARGS answers. */
            ((char *)q)[1] = '\0';
    }
    return r;
}

static void completed_cb(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    pd_http_server *srv = cls;
    http_req *r = *con_cls;
    if (!r)
        return;
    http_conn *hc = r->hc;
    if (toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED && !(hc && hc->cut))
        pd_metrics_add("profd_http_cut_off_total", "reason=\"read_timeout\"", 1);
    if (hc) {
        hc->req = NULL;
        pthread_mutex_lock(&srv->conns_mu);
        hc->served = true;
        pthread_mutex_unlock(&srv->conns_mu);
        set_reading(srv, hc, true); /* the next request's deadline starts now */
    }
    req_free(r);
    *con_cls = NULL;
}

/* issue 20 item 4: the security headers of guard.h on every reply, unless
 * the handler (or --web.config.file's http_server_config.headers) set one */
static void add_security_headers(struct MHD_Response *mr)
{
    for (size_t i = 0; i < PD_HTTP_SECURITY_HEADERS; i++)
        if (!MHD_get_response_header(mr, pd_http_security_headers[i][0]))
            MHD_add_response_header(mr, pd_http_security_headers[i][0],
                                    pd_http_security_headers[i][1]);
}

static enum MHD_Result queue_text(struct MHD_Connection *conn, unsigned status, const char *text)
{
    struct MHD_Response *mr =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    if (!mr)
        return MHD_NO;
    MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    add_security_headers(mr);
    if (status == 503 ||
        status == 429) /* a refusal that passes: say when to retry (RFC 9110 10.2.3) */
        MHD_add_response_header(mr, "Retry-After", "1");
    if (status >= 400 && status != 404 && status != 405)
        MHD_add_response_header(mr, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(conn, status, mr);
    MHD_destroy_response(mr);
    return ret;
}

/* r has its answer (or is about to): pd_http_server_stop waits for it to
 * be sent (completed_cb frees r) before MHD closes the connections. */
static void mark_answering(http_req *r)
{
    if (!r->answering) {
        r->answering = true;
        __atomic_add_fetch(&r->srv->n_answering, 1, __ATOMIC_RELEASE);
    }
}

static enum MHD_Result reject(http_req *r, unsigned status, const char *reason, const char *msg)
{
    mark_answering(r);
    char lbl[64];
    snprintf(lbl, sizeof lbl, "reason=\"%s\"", reason);
    pd_metrics_add("profd_http_rejected_total", lbl, 1);
    /* the deadline keeps running: a client that goes on sending a refused
     * body is cut off by it */
    return queue_text(r->conn, status, msg);
}

static enum MHD_Result reject_too_large(http_req *r)
{
    char msg[160];
    snprintf(msg, sizeof msg, "request body exceeds the limit of %zu bytes\n", r->srv->max_body);
    return reject(r, MHD_HTTP_CONTENT_TOO_LARGE, "body_too_large", msg);
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

/* pd_http_guard_check on the request's headers. */
static int guard_check(pd_http_server *srv, struct MHD_Connection *conn, const char *method,
                       pd_http_guard_verdict *v)
{
#define H(name) MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name)
    pd_http_guard_req gr = {
        .method = method,
        .host = H(MHD_HTTP_HEADER_HOST),
        .origin = H("Origin"),
        .sec_fetch_site = H("Sec-Fetch-Site"),
        .sec_fetch_mode = H("Sec-Fetch-Mode"),
        .sec_fetch_dest = H("Sec-Fetch-Dest"),
        .content_type = H(MHD_HTTP_HEADER_CONTENT_TYPE),
        .requested_by = H("X-Requested-By"),
    };
#undef H
    int st = pd_http_guard_check(srv->guard, &gr, v);
    if (st)
        pd_log(PD_LOG_INFO, "request refused by the cross-site rules",
               "reason=%s status=%d method=%s", v->reason, st, method);
    return st;
}

static bool is_form(const char *ct)
{
    static const char form[] = "application/x-www-form-urlencoded";
    return ct && strncasecmp(ct, form, sizeof form - 1) == 0 &&
           (ct[sizeof form - 1] == 0 || ct[sizeof form - 1] == ';' || ct[sizeof form - 1] == ' ');
}

static bool client_gone_cb(void *req)
{
    return pd_http_client_gone(req);
}

/* Runs the handler of r (any thread); the response is kept in r->resp. */
static void run_handler(http_req *r)
{
    char client[INET6_ADDRSTRLEN] = "";
    const union MHD_ConnectionInfo *ci =
        r->conn ? MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS) : NULL;
    if (ci && ci->client_addr) {
        const struct sockaddr *sa = ci->client_addr;
        if (sa->sa_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, client, sizeof client);
        else if (sa->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, client,
                      sizeof client);
    }
    pd_http_request req = {
        .client = client,
        .method = r->method,
        .path = r->url,
        .body = (const uint8_t *)(r->body.data ? r->body.data : ""),
        .body_len = r->body.len,
        .priv = r,
    };
    r->resp.status = 200;
    r->resp.content_type = NULL;
    r->resp.headers = NULL;
    pd_buf_init(&r->resp.body, 0);
    /* issue 20: --web.config.file's rate limit, headers, basic auth, groups */
    if (r->srv->gate &&
        !pd_http_gate_check(r->srv->gate, &req,
                            r->srv->group ? r->srv->group(r->method, r->url) : PD_ACCESS_QUERY,
                            &r->resp))
        return;
    /* issue 35: the handler's queries stop when the client leaves or profd
       stops (base/cancel.h); each query that did is counted */
    pd_cancel tok;
    pd_cancel_init(&tok, client_gone_cb, &req);
    pd_cancel_bind(&tok);
    r->srv->handler(r->srv->ctx, &req, &r->resp);
    pd_cancel_bind(NULL);
    pd_cancel_reason why = pd_cancel_reason_of(&tok);
    if (why != PD_CANCEL_NONE)
        pd_metrics_add("profd_queries_cancelled_total",
                       why == PD_CANCEL_SHUTDOWN ? "reason=\"shutdown\"" : "reason=\"client_gone\"",
                       1);
}

/* Queues r->resp on the connection (epoll thread). */
static enum MHD_Result queue_handler_response(http_req *r)
{
    mark_answering(r);
    pd_http_response *resp = &r->resp;
    size_t len = 0;
    char *data = pd_buf_detach(&resp->body, &len);
    struct MHD_Response *mr;
    if (data)
        mr = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
    else
        mr = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!mr) {
        free(data);
        return MHD_NO;
    }
    MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE,
                            resp->content_type ? resp->content_type : "text/plain; charset=utf-8");
    add_extra_headers(mr, resp->headers);
    add_security_headers(mr);
    free(resp->headers);
    resp->headers = NULL;
    /* at the idle budget, this connection is not kept: "Connection: close"
       tells the client before it could reuse it, where a cut of an idle one
       races with a request the client may be sending on it */
    if (__atomic_load_n(&r->srv->n_idle, __ATOMIC_RELAXED) >= PD_HTTP_IDLE_KEEP &&
        !MHD_get_response_header(mr, MHD_HTTP_HEADER_CONNECTION)) {
        MHD_add_response_header(mr, MHD_HTTP_HEADER_CONNECTION, "close");
        pd_metrics_add("profd_http_keepalive_declined_total", NULL, 1);
    }
    int status = resp->status > 0 ? resp->status : 200;
    enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)status, mr);
    MHD_destroy_response(mr);
    return ret;
}

/* The resident set size of this process in bytes, from /proc/self/statm;
 * -1 when unreadable. */
static int64_t self_rss_bytes(void)
{
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[128];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    long long size, resident;
    if (sscanf(buf, "%lld %lld", &size, &resident) != 2)
        return -1;
    return (int64_t)resident * sysconf(_SC_PAGESIZE);
}

/* Issue 35: a wide query (50k series) frees hundreds of MB in its thread's
 * malloc arena, which glibc keeps (RSS grew 482 MB -> 2.2 GB over 6
 * identical rounds). After each query, when the RSS is more than
 * max(8 MiB, 1/32 of it) above what it was after the last malloc_trim, the
 * free pages are given back (malloc_trim: ~1-10 ms on a few hundred MB) and
 * the RSS after it becomes the new mark. Decided by memory, not by how long
 * the query ran (a faster machine ran the same queries under a time
 * threshold and kept the memory): at most one trim per 1/32 of growth, and
 * memory really in use (a growing head) only moves the mark up. */
static void maybe_trim(pd_http_server *srv)
{
    int64_t rss = self_rss_bytes();
    if (rss < 0)
        return;
    int64_t mark = __atomic_load_n(&srv->rss_after_trim, __ATOMIC_RELAXED);
    int64_t slack = rss / 32 > PD_HTTP_TRIM_GROWTH_MIN ? rss / 32 : PD_HTTP_TRIM_GROWTH_MIN;
    if (rss - mark <= slack)
        return;
    malloc_trim(0);
    rss = self_rss_bytes();
    if (rss >= 0)
        __atomic_store_n(&srv->rss_after_trim, rss, __ATOMIC_RELAXED);
}

static void *pool_main(void *arg)
{
    http_pool *p = arg;
    /* Query workers run at nice PD_HTTP_QUERY_NICE (10): the CPU goes to
     * ingestion first, merges get the rest (issue 20). The inversion this
     * risks — a niced merge descheduled while it holds the storage's read
     * lock, a push waiting for the write lock — is bounded since an append
     * takes the write lock only for new symbols and for one short
     * publication (storage/tsdb/headmem_int.h) and a merge holds the read
     * lock ~1 ms at a time. bench/ingest_under_query (20 pushers, 4 merging
     * clients, 2 cores, load 9): 94.4 pushes/s, p99 388 ms at nice 10
     * against 19.0/s, p99 3.45 s at nice 0. (Before that append split, nice
     * 10 was worse: p99 700-1,140 ms against 460 ms.) */
    if (p == &p->srv->pools[1] && PD_HTTP_QUERY_NICE)
        (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), PD_HTTP_QUERY_NICE);
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->head && !p->stop)
            pthread_cond_wait(&p->cv, &p->mu);
        http_req *r = p->head;
        if (!r)
            break; /* stop, and the queue is drained */
        p->head = r->qnext;
        if (!p->head)
            p->tail = NULL;
        p->len--;
        pthread_mutex_unlock(&p->mu);
        run_handler(r);
        if (p == &p->srv->pools[1])
            maybe_trim(p->srv);
        mark_answering(r);
        r->state = REQ_DONE;
        MHD_resume_connection(r->conn); /* access_cb then queues r->resp */
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Queues r on pool p. false when the queue is full. */
static bool pool_push(http_pool *p, http_req *r)
{
    pthread_mutex_lock(&p->mu);
    if (p->len >= PD_HTTP_QUEUE_MAX || p->stop) {
        pthread_mutex_unlock(&p->mu);
        return false;
    }
    r->qnext = NULL;
    if (p->tail)
        p->tail->qnext = r;
    else
        p->head = r;
    p->tail = r;
    p->len++;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return true;
}

static enum MHD_Result access_cb(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls)
{
    (void)version;
    pd_http_server *srv = cls;
    http_req *r = *con_cls;
    if (!r)
        return queue_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");

    if (r->state == REQ_DONE)
        return queue_handler_response(r);
    if (r->state == REQ_QUEUED)
        return MHD_YES; /* not reached: suspended until the worker is done */

    if (!r->started) {
        r->started = true;
        if (srv->guard) { /* issue 20 item 4: Host, Origin, fetch metadata (guard.h) */
            pd_http_guard_verdict v;
            if (guard_check(srv, conn, method, &v))
                return reject(r, (unsigned)v.status, v.reason, v.msg);
        }
        if (srv->gate) { /* issue 20: no credentials, no body received */
            pd_buf_init(&r->resp.body, 0);
            r->resp.headers = NULL;
            r->resp.content_type = NULL;
            const char *q = strchr(url, '?');
            char path[1024];
            snprintf(path, sizeof path, "%.*s", (int)(q ? (size_t)(q - url) : strlen(url)), url);
            if (!pd_http_gate_precheck(
                    srv->gate, path,
                    MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization"), &r->resp))
                return queue_handler_response(r);
            pd_buf_release(&r->resp.body); /* let in: the worker answers */
            free(r->resp.headers);
            r->resp.headers = NULL;
        }
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
        /* libmicrohttpd 0.9.75 cannot queue a reply while a body is being
         * received: past the cap (or the budget) the buffer is freed, the
         * rest is read and dropped (the read deadline bounds how long), and
         * the refusal is answered at the end */
        if (!r->body_error) {
            int rc = body_append(r, upload_data, *upload_data_size);
            if (rc) {
                r->body_error = rc;
                __atomic_sub_fetch(&srv->body_bytes, r->body.cap, __ATOMIC_RELAXED);
                if (r->body.cap)
                    pd_metrics_add("profd_http_request_body_bytes", NULL, -(double)r->body.cap);
                pd_buf_release(&r->body);
            }
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (r->body_error == PD_ETOOBIG)
        return reject_too_large(r);
    if (r->body_error == -EAGAIN)
        return reject(r, MHD_HTTP_SERVICE_UNAVAILABLE, "bodies_in_flight",
                      "too many request bodies are being received at once; retry later\n");
    if (r->body_error || r->query_lost)
        return reject(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out_of_memory", "out of memory\n");

    /* the whole request has arrived */
    if (r->hc)
        set_reading(srv, r->hc, false);
    int rc = 0;
    if (r->query)
        rc = parse_pairs(r, r->query, strlen(r->query));
    if (rc == 0 && strcmp(method, "POST") == 0 &&
        is_form(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE)) &&
        (!srv->form || srv->form(method, url)))
        rc = parse_pairs(r, r->body.data ? r->body.data : "", r->body.len);
    if (rc == PD_ETOOBIG) {
        char msg[120];
        snprintf(msg, sizeof msg, "too many query arguments: the limit is %d\n", PD_HTTP_MAX_ARGS);
        return reject(r, MHD_HTTP_BAD_REQUEST, "too_many_args", msg);
    }
    if (rc == PD_EINVAL)
        return reject(r, MHD_HTTP_BAD_REQUEST, "nul_in_argument",
                      "a query or form argument contains a NUL byte (%00): refused, as it "
                      "would cut the value short\n");
    if (rc)
        return reject(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out_of_memory", "out of memory\n");

    r->method = method;
    r->url = url;
    pd_http_pool pool = srv->classify ? srv->classify(srv->ctx, method, url) : PD_HTTP_POOL_INGEST;
    if (pool == PD_HTTP_POOL_INLINE && srv->gate)
        pool = PD_HTTP_POOL_INGEST; /* issue 20: bcrypt never on the epoll thread */
    if (pool == PD_HTTP_POOL_INLINE) {
        run_handler(r);
        return queue_handler_response(r);
    }
    http_pool *p = &srv->pools[pool == PD_HTTP_POOL_QUERY ? 1 : 0];
    r->state = REQ_QUEUED;
    MHD_suspend_connection(conn);
    if (!pool_push(p, r)) {
        r->state = REQ_NEW;
        MHD_resume_connection(conn);
        return reject(r, MHD_HTTP_SERVICE_UNAVAILABLE, "queue_full",
                      "too many requests are waiting; retry later\n");
    }
    return MHD_YES;
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
    if (strstr(line, "limit") && strstr(line, "connection")) {
        /* MHD says the same for its total and its per-IP cap: below the
         * total, it was the client's address that was over its cap */
        pd_http_server *srv = cls;
        pthread_mutex_lock(&srv->conns_mu);
        bool total = srv->n_conns + 1 >= srv->max_conn;
        pthread_mutex_unlock(&srv->conns_mu);
        pd_metrics_add("profd_http_rejected_total",
                       total ? "reason=\"connection_limit\"" : "reason=\"per_ip_limit\"", 1);
    }
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

static int pool_start(pd_http_server *srv, http_pool *p, unsigned n)
{
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->srv = srv;
    p->th = calloc(n, sizeof *p->th);
    if (!p->th)
        return PD_ENOMEM;
    for (unsigned i = 0; i < n; i++) {
        int e = pthread_create(&p->th[i], NULL, pool_main, p);
        if (e)
            return -e;
        p->n_th++;
    }
    return 0;
}

/* Stops p after its queue is drained; joins the workers. */
static void pool_stop(http_pool *p)
{
    if (!p->srv)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->n_th; i++)
        pthread_join(p->th[i], NULL);
    free(p->th);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    p->srv = NULL;
}

/* Everything but the daemon: pools, reaper, socket. */
/* Undoes a failed start: stops daemons [0, started) (MHD closes nothing
 * it was given: MHD_quiesce_daemon hands the socket back) and closes the
 * listening sockets of those not started. */
static void close_listeners(pd_http_server *srv, size_t started)
{
    for (size_t i = 0; i < srv->n_listen; i++) {
        if (i < started && srv->d[i]) {
            MHD_socket ls = MHD_quiesce_daemon(srv->d[i]);
            MHD_stop_daemon(srv->d[i]);
            srv->d[i] = NULL;
            if (ls != MHD_INVALID_SOCKET)
                close(ls);
        } else if (fcntl(srv->fd[i], F_GETFD) != -1) {
            close(srv->fd[i]);
        }
    }
}

/* MHD's accept policy: refuses a connection past the cap of all daemons
 * together (each daemon's own MHD_OPTION_CONNECTION_LIMIT is the same cap,
 * so one address alone behaves as before). */
static enum MHD_Result accept_cb(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    (void)addr;
    (void)addrlen;
    pd_http_server *srv = cls;
    pthread_mutex_lock(&srv->conns_mu);
    bool ok = srv->n_listen < 2 || srv->n_conns < srv->max_conn;
    pthread_mutex_unlock(&srv->conns_mu);
    return ok ? MHD_YES : MHD_NO;
}

static void server_free(pd_http_server *srv)
{
    pool_stop(&srv->pools[0]);
    pool_stop(&srv->pools[1]);
    if (srv->reaper_started) {
        pthread_mutex_lock(&srv->conns_mu);
        srv->reaper_stop = true;
        pthread_cond_signal(&srv->reaper_cv);
        pthread_mutex_unlock(&srv->conns_mu);
        pthread_join(srv->reaper, NULL);
    }
    pthread_cond_destroy(&srv->reaper_cv);
    pthread_mutex_destroy(&srv->conns_mu);
    free(srv->tls_prio);
    free(srv);
}

/* Raises the soft open-files limit to the hard one; returns the soft limit. */
static rlim_t raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 1024;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t want = rl.rlim_max;
        if (want == RLIM_INFINITY || want > 1048576)
            want = 1048576;
        struct rlimit nl = {want, rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &nl) == 0)
            rl.rlim_cur = want;
    }
    return rl.rlim_cur;
}

int pd_http_server_start_opts(const pd_http_server_options *o, pd_http_handler handler, void *ctx,
                              pd_http_server **out, pd_err *err)
{
    pd_metrics_describe("profd_http_rejected_total", PD_METRIC_COUNTER,
                        "HTTP requests refused by the server before any handler ran, by reason.");
    pd_metrics_describe("profd_http_cut_off_total", PD_METRIC_COUNTER,
                        "Connections closed by the server because a request was not received "
                        "within --web.read-timeout, by reason (idle, read_timeout).");
    pd_metrics_describe("profd_http_request_body_bytes", PD_METRIC_GAUGE,
                        "Bytes of request body buffers held now (the budget: max(64 MiB, 4 x "
                        "--scrape.max-body-bytes)).");
    pd_metrics_add("profd_http_request_body_bytes", NULL, 0);
    pd_metrics_add("profd_http_cut_off_total", "reason=\"idle\"", 0);
    pd_metrics_add("profd_http_cut_off_total", "reason=\"read_timeout\"", 0);
    pd_metrics_add("profd_http_cut_off_total", "reason=\"idle_budget\"", 0);
    pd_metrics_describe("profd_http_keepalive_declined_total", PD_METRIC_COUNTER,
                        "Responses sent with Connection: close because 64 or more idle "
                        "kept-alive connections were held (the idle budget).");
    pd_metrics_add("profd_http_keepalive_declined_total", NULL, 0);
    *out = NULL;
    if (!o || !o->listen_addr || !handler)
        return pd_err_set(err, PD_EINVAL, "http server: missing listen address or handler");
    pd_http_server *srv = calloc(1, sizeof *srv);
    if (!srv)
        return pd_err_set(err, PD_ENOMEM, "http server: out of memory");
    pthread_mutex_init(&srv->conns_mu, NULL);
    /* the reaper's deadlines are CLOCK_MONOTONIC: so must the condvar's clock be
       (with the default CLOCK_REALTIME every wait returned at once and the
       reaper spun a whole core) */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&srv->reaper_cv, &ca);
    pthread_condattr_destroy(&ca);
    srv->handler = handler;
    srv->classify = o->classify;
    srv->ctx = ctx;
    srv->guard = o->guard;
    srv->max_body = o->max_body_bytes ? o->max_body_bytes : (size_t)16 << 20;
    srv->body_budget = o->body_budget_bytes                          ? o->body_budget_bytes
                       : srv->max_body * 4 > PD_HTTP_BODY_BUDGET_MIN ? srv->max_body * 4
                                                                     : PD_HTTP_BODY_BUDGET_MIN;
    int64_t rt = o->read_timeout_ms > 0 ? o->read_timeout_ms : PD_HTTP_READ_TIMEOUT_MS;
    srv->read_timeout_ns = rt * 1000000;
    unsigned max_conn = o->max_connections ? o->max_connections : PD_HTTP_CONN_LIMIT;
    rlim_t nofile = raise_nofile();
    if (nofile < 256)
        nofile = 256;
    if ((rlim_t)max_conn > nofile - 128) {
        pd_log(PD_LOG_WARN, "http server",
               "msg=\"connection cap lowered to fit the open-files limit\" wanted=%u cap=%u",
               max_conn, (unsigned)(nofile - 128));
        max_conn = (unsigned)(nofile - 128);
    }
    int rc = pool_start(srv, &srv->pools[0], o->threads ? o->threads : PD_HTTP_DEFAULT_THREADS);
    if (rc == 0)
        rc = pool_start(srv, &srv->pools[1],
                        o->query_threads ? o->query_threads : PD_HTTP_DEFAULT_THREADS);
    if (rc == 0) {
        int e = pthread_create(&srv->reaper, NULL, reaper_main, srv);
        if (e)
            rc = -e;
        else
            srv->reaper_started = true;
    }
    if (rc) {
        server_free(srv);
        return pd_err_set(err, rc, "http server: cannot start threads: %s", pd_strerror(rc));
    }
    bool ipv6[PD_HTTP_MAX_LISTEN];
    rc = listen_all(o->listen_addr, srv->fd, ipv6, &srv->n_listen, &srv->port, err);
    if (rc) {
        server_free(srv);
        return rc;
    }
    srv->max_conn = max_conn;
    /* inactivity, only a backstop: the reaper (which counts) comes first */
    unsigned conn_timeout_s = (unsigned)((2 * rt + 999) / 1000) + 5;
    srv->gate = o->gate;
    srv->group = o->group;
    srv->form = o->form;
    const pd_webcfg *wc = srv->gate ? pd_http_gate_config(srv->gate) : NULL;
    if (wc && wc->tls_enabled) {
        char prio[1024];
        if (pd_webcfg_tls_priorities(wc, prio, sizeof prio) < 0 ||
            !(srv->tls_prio = strdup(prio))) {
            close_listeners(srv, 0);
            server_free(srv);
            return pd_err_set(err, PD_EINVAL, "web config: too many cipher suites or curves");
        }
    }
    for (size_t i = 0; i < srv->n_listen; i++) {
        unsigned flags =
            MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
        if (ipv6[i])
            flags |= MHD_USE_IPv6;
        struct MHD_OptionItem opts[24];
        size_t no = 0;
#define OPT(k, v, p) (opts[no++] = (struct MHD_OptionItem){(k), (intptr_t)(v), (p)})
        OPT(MHD_OPTION_EXTERNAL_LOGGER, mhd_log, srv);
        OPT(MHD_OPTION_LISTEN_SOCKET, srv->fd[i], NULL);
        OPT(MHD_OPTION_URI_LOG_CALLBACK, uri_log_cb, srv);
        OPT(MHD_OPTION_NOTIFY_COMPLETED, completed_cb, srv);
        OPT(MHD_OPTION_NOTIFY_CONNECTION, notify_conn_cb, srv);
        OPT(MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)PD_HTTP_CONN_MEMORY, NULL);
        OPT(MHD_OPTION_CONNECTION_LIMIT, max_conn, NULL);
        OPT(MHD_OPTION_PER_IP_CONNECTION_LIMIT, o->max_connections_per_ip, NULL);
        OPT(MHD_OPTION_CONNECTION_TIMEOUT, conn_timeout_s, NULL);
        if (wc && wc->tls_enabled) { /* issue 20: TLS through MHD's GnuTLS */
            flags |= MHD_USE_TLS;
            /* one-pointer options travel in ptr_value (MHD's MHD_OPTION_ARRAY) */
            OPT(MHD_OPTION_HTTPS_MEM_CERT, 0, wc->cert_pem);
            OPT(MHD_OPTION_HTTPS_MEM_KEY, 0, wc->key_pem);
            OPT(MHD_OPTION_HTTPS_PRIORITIES, 0, srv->tls_prio);
            if (wc->client_ca_pem)
                OPT(MHD_OPTION_HTTPS_MEM_TRUST, 0, wc->client_ca_pem);
        }
        OPT(MHD_OPTION_END, 0, NULL);
#undef OPT
        /* the connection cap counts all daemons' connections together */
        srv->d[i] = MHD_start_daemon(flags, 0, accept_cb, srv, access_cb, srv, MHD_OPTION_ARRAY,
                                     opts, MHD_OPTION_END);
        if (!srv->d[i]) {
            /* whether MHD closed the socket on failure is not documented */
            close_listeners(srv, i);
            server_free(srv);
            return pd_err_set(err, PD_EINVAL,
                              "listen address \"%s\": libmicrohttpd failed to start",
                              o->listen_addr);
        }
    }
    *out = srv;
    return 0;
}

int pd_http_server_start(const char *listen_addr, unsigned threads, size_t max_body_bytes,
                         pd_http_handler handler, void *ctx, pd_http_server **out, pd_err *err)
{
    pd_http_server_options o = {
        .listen_addr = listen_addr, .threads = threads, .max_body_bytes = max_body_bytes};
    return pd_http_server_start_opts(&o, handler, ctx, out, err);
}

uint16_t pd_http_server_port(const pd_http_server *srv)
{
    return srv ? srv->port : 0;
}

void pd_http_server_stop(pd_http_server *srv)
{
    if (!srv)
        return;
    /* stop accepting; workers finish what is queued and resume those
     * connections; then MHD closes everything */
    MHD_socket ls[PD_HTTP_MAX_LISTEN];
    for (size_t i = 0; i < srv->n_listen; i++)
        ls[i] = MHD_quiesce_daemon(srv->d[i]); /* the listen socket is ours again */
    pool_stop(&srv->pools[0]);
    pool_stop(&srv->pools[1]);
    /* the answers already made (a worker's, resumed; an inline one, such
       as /-/quit's own 200) go out before MHD closes their connections:
       MHD's threads send them meanwhile; at most 2 s (a client that does
       not read its answer) */
    for (int i = 0; i < 400 && __atomic_load_n(&srv->n_answering, __ATOMIC_ACQUIRE) > 0; i++)
        usleep(5000);
    for (size_t i = 0; i < srv->n_listen; i++) {
        MHD_stop_daemon(srv->d[i]);
        if (ls[i] != MHD_INVALID_SOCKET)
            close(ls[i]);
    }
    server_free(srv);
}
