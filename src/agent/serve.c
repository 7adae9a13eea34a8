/*
 * agent/serve.c — a tiny net/http/pprof on libmicrohttpd: GET
 * /debug/pprof/profile?seconds=N, /debug/pprof/heap, /debug/pprof/allocs
 * (see profd_agent.h), plus the environment hooks read at load time.
 *
 * The shared library (PD_AGENT_DLOPEN_MHD) loads libmicrohttpd only when
 * it first serves: linked, it and GnuTLS behind it were relocated in every
 * process the agent is preloaded into, 3.7 M instructions (~2 ms of CPU)
 * per start whether it serves or not (bench/agent/RESULTS.md).
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "agent/agent_int.h"

uint64_t pd__agent_cpu_samples(void);
uint64_t pd__agent_cpu_dropped(void);
uint64_t pd__agent_cpu_threads(void);
uint64_t pd__agent_heap_samples(void);
uint64_t pd__agent_heap_dropped(void);

void pd_agent_get_stats(pd_agent_stats *st)
{
    st->cpu_samples = pd__agent_cpu_samples();
    st->cpu_dropped = pd__agent_cpu_dropped();
    st->heap_samples = pd__agent_heap_samples();
    st->heap_dropped = pd__agent_heap_dropped();
    st->threads_profiled = pd__agent_cpu_threads();
}

#ifdef PD_AGENT_DLOPEN_MHD
/* The libmicrohttpd functions used here, resolved by load_mhd(). */
/* clang-format 14 does not settle on one layout of this list */
// clang-format off
#define MHD_FUNCS(X)                                                                               \
    X(MHD_create_response_from_buffer)                                                             \
    X(MHD_add_response_header)                                                                     \
    X(MHD_queue_response)                                                                          \
    X(MHD_destroy_response)                                                                        \
    X(MHD_lookup_connection_value)                                                                 \
    X(MHD_start_daemon)                                                                            \
    X(MHD_get_daemon_info)                                                                         \
    X(MHD_stop_daemon)
// clang-format on
#define MHD_SONAME "libmicrohttpd.so.12" /* Debian's libmicrohttpd12, since 0.9.3x */
#define DECL(f) static __typeof__(&f) p_##f;
MHD_FUNCS(DECL)
#undef DECL
static char g_mhd_error[256];

static void load_mhd_once(void)
{
    pd__agent_enter(); /* GnuTLS' constructors allocate: not the program's */
    void *h = dlopen(MHD_SONAME, RTLD_NOW | RTLD_LOCAL);
    pd__agent_leave();
    if (!h) {
        const char *e = dlerror();
        snprintf(g_mhd_error, sizeof g_mhd_error, "%s", e ? e : "dlopen failed");
        return;
    }
#define RESOLVE(f)                                                                                 \
    if (!g_mhd_error[0] && !(p_##f = (__typeof__(&f))dlsym(h, #f)))                                \
        snprintf(g_mhd_error, sizeof g_mhd_error, "%s has no %s", MHD_SONAME, #f);
    MHD_FUNCS(RESOLVE)
#undef RESOLVE
}

/* 0, or an error naming the library when it cannot be loaded. */
static int load_mhd(pd_err *err)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, load_mhd_once);
    if (g_mhd_error[0])
        return pd_err_set(err, -ENOENT, "agent: cannot load %s to serve: %s", MHD_SONAME,
                          g_mhd_error);
    return 0;
}
#define MHD_create_response_from_buffer (*p_MHD_create_response_from_buffer)
#define MHD_add_response_header (*p_MHD_add_response_header)
#define MHD_queue_response (*p_MHD_queue_response)
#define MHD_destroy_response (*p_MHD_destroy_response)
#define MHD_lookup_connection_value (*p_MHD_lookup_connection_value)
#define MHD_start_daemon (*p_MHD_start_daemon)
#define MHD_get_daemon_info (*p_MHD_get_daemon_info)
#define MHD_stop_daemon (*p_MHD_stop_daemon)
#else
static int load_mhd(pd_err *err)
{
    (void)err;
    return 0;
}
#endif

struct pd_agent_server {
    struct MHD_Daemon *d;
    uint16_t port;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             const void *body, size_t len)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    if (strcmp(type, "application/octet-stream") == 0)
        MHD_add_response_header(r, "Content-Disposition", "attachment; filename=\"profile\"");
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned status, const char *msg)
{
    return reply(c, status, "text/plain; charset=utf-8", msg, strlen(msg));
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **state)
{
    (void)cls, (void)version, (void)upload, (void)upload_size, (void)state;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return reply_text(c, 405, "method not allowed: use GET\n");
    pd_buf out;
    pd_buf_init(&out, 64u << 20);
    pd_err err = {{0}};
    int rc;
    if (strcmp(url, "/debug/pprof/profile") == 0) {
        unsigned secs = 30;
        const char *s = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "seconds");
        if (s) {
            char *end;
            errno = 0;
            unsigned long v = strtoul(s, &end, 10);
            if (!*s || *end || errno || v < 1 || v > PD_AGENT_MAX_SECONDS) {
                char msg[200];
                snprintf(msg, sizeof msg, "bad seconds=%.40s: want an integer from 1 to %d\n", s,
                         PD_AGENT_MAX_SECONDS);
                return reply_text(c, 400, msg);
            }
            secs = (unsigned)v;
        }
        rc = pd_agent_cpu_profile(secs, 0, NULL, &out, &err);
    } else if (strcmp(url, "/debug/pprof/heap") == 0 || strcmp(url, "/debug/pprof/allocs") == 0) {
        rc = pd_agent_heap_profile(&out, &err);
    } else {
        return reply_text(c, 404, "404 page not found\n");
    }
    enum MHD_Result ok;
    if (rc < 0) {
        char msg[600];
        snprintf(msg, sizeof msg, "Could not enable CPU profiling: %s\n",
                 err.msg[0] ? err.msg : pd_strerror(rc));
        ok = reply_text(c, 500, rc == PD_EEXIST || strstr(url, "profile") ? msg : msg + 31);
    } else {
        ok = reply(c, 200, "application/octet-stream", out.data, out.len);
    }
    pd_buf_release(&out);
    return ok;
}

int pd_agent_serve(const char *host, uint16_t port, pd_agent_server **out, pd_err *err)
{
    *out = NULL;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    if (!host || inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        return pd_err_set(err, PD_EINVAL, "agent: listen host \"%s\" is not an IPv4 address",
                          host ? host : "");
    int rc = load_mhd(err);
    if (rc < 0)
        return rc;
    pd_agent_server *s = calloc(1, sizeof *s);
    if (!s)
        return pd_err_set(err, PD_ENOMEM, "agent: out of memory");
    pd__agent_enter();
    s->d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0,
        NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(PD_AGENT_MAX_SECONDS + 60), MHD_OPTION_END);
    pd__agent_leave();
    if (!s->d) {
        int e = errno ? errno : EADDRINUSE;
        free(s);
        return pd_err_set(err, -e, "agent: cannot listen on %s:%u: %s", host, port, strerror(e));
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : port;
    *out = s;
    return 0;
}

uint16_t pd_agent_server_port(const pd_agent_server *s)
{
    return s->port;
}

void pd_agent_server_stop(pd_agent_server *s)
{
    if (!s)
        return;
    MHD_stop_daemon(s->d);
    free(s);
}

int pd_agent_serve_from_env(pd_err *err)
{
    static pd_agent_server *env_server;
    const char *l = getenv("PROFD_AGENT_LISTEN");
    if (!l || !*l || env_server)
        return 0;
    char host[64];
    const char *colon = strrchr(l, ':');
    if (!colon || (size_t)(colon - l) >= sizeof host)
        return pd_err_set(err, PD_EINVAL, "agent: PROFD_AGENT_LISTEN=\"%s\" is not HOST:PORT", l);
    memcpy(host, l, (size_t)(colon - l));
    host[colon - l] = 0;
    char *end;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (*end || port > 65535)
        return pd_err_set(err, PD_EINVAL, "agent: PROFD_AGENT_LISTEN=\"%s\": bad port", l);
    return pd_agent_serve(host, (uint16_t)port, &env_server, err);
}

/* In a child made by fork(), the server thread of the parent does not
 * exist and its port is taken: the child must not serve from the
 * environment (nor its exec'd programs). */
static void pd__agent_atfork_child(void)
{
    unsetenv("PROFD_AGENT_LISTEN");
}

/* Whether this process is the one PROFD_AGENT_COMM names (unset: any):
 * the base name of /proc/self/exe or the command name the program was
 * started as. Wrappers that preload the agent into everything they start
 * (timeout(1), env(1), pyenv's shims) would otherwise take the port. */
static bool pd__agent_comm_matches(void)
{
    const char *want = getenv("PROFD_AGENT_COMM");
    if (!want || !*want)
        return true;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        const char *b = strrchr(exe, '/');
        if (!strcmp(b ? b + 1 : exe, want))
            return true;
    }
    extern char *program_invocation_short_name;
    return program_invocation_short_name && !strcmp(program_invocation_short_name, want);
}

__attribute__((constructor)) static void pd__agent_load(void)
{
    const char *r = getenv("PROFD_AGENT_HEAP_RATE");
    if (r && *r) {
        char *end;
        unsigned long long v = strtoull(r, &end, 10);
        if (!*end)
            pd_agent_heap_set_rate(v);
    }
    const char *l = getenv("PROFD_AGENT_LISTEN");
    if (!l || !*l || !pd__agent_comm_matches())
        return;
    pd_err err = {{0}};
    if (pd_agent_serve_from_env(&err) < 0) {
        fprintf(stderr, "profd-agent: %s\n", err.msg);
        return;
    }
    /* children made by fork must not try the same port; a program this one
     * exec's without forking (the server thread is gone then) serves in its
     * place, so the variable stays in this process's environment */
    pthread_atfork(NULL, NULL, pd__agent_atfork_child);
}
