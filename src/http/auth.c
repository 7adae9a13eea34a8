/*
 * http/auth.c — the request gate of `--web.config.file` (see auth.h for the
 * order of the checks, which is exporter-toolkit's webHandler.ServeHTTP).
 *
 * State: the config in force (`cur`, replaced under `mu` when the file
 * changes; readers hold `mu` shared while they check), the file's identity
 * (`st`), the token bucket (`rl_*`, under `rl_mu`), the bcrypt result cache
 * (`cache`, under `cache_mu`) and `bcrypt_mu`, which lets one bcrypt run at
 * a time (the toolkit's bcryptMtx: a flood of wrong passwords costs one
 * core, not all of them). Issue 28: the checks waiting for bcrypt are
 * bounded too (`bcrypt_queued`, under `cache_mu`): past BCRYPT_MAX_QUEUED
 * running or waiting, a check that needs bcrypt (a cache miss: a wrong or
 * new password) is answered 429 with Retry-After at once instead of holding
 * a worker thread, so a flood of wrong passwords cannot take every worker
 * from users whose credentials are cached (those never wait for bcrypt).
 * The decision does not depend on whether the user exists: unknown and
 * known users still cost the same.
 * Issue 28 too: per client address, failed logins that ran bcrypt (new
 * passwords: what a brute force sends) are counted in a row (`fails`, under
 * cache_mu); from the FAIL_FREE-th on, the address waits 1, 2, 4 ...
 * FAIL_MAX_WAIT_S seconds after each, and while it waits a check that would
 * need bcrypt is answered 429 with Retry-After. Cached answers (valid or
 * not) cost nothing and are given as before: a user behind the same address
 * who logged in before is not locked out by a flooder.
 */
#include "http/auth.h"
#include "http/auth_int.h"

#include <crypt.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/log.h"
#include "base/metrics.h"
#include "base/time.h"

#define CACHE_SIZE 100      /* the toolkit's cacheSize */
#define MAX_CRED_BYTES 4096 /* decoded user:password */
#define BCRYPT_MAX_QUEUED 3 /* password checks running or waiting for bcrypt */
#define FAIL_FREE 5         /* failed logins in a row from one address before it waits */
#define FAIL_MAX_WAIT_S 60
#define FAIL_FORGET_NS (600LL * 1000000000LL) /* a count left alone this long is cleared */
#define FAIL_TABLE 256 /* addresses tracked; the least recently failed is replaced */

void (*pd__http_bcrypt_hook)(const char *hash); /* auth_int.h */
int64_t (*pd__http_auth_clock)(void);           /* auth_int.h */

/* failed logins of one client address (pd_http_request.client) */
typedef struct fail_ent {
    char addr[64];
    unsigned fails;   /* in a row */
    int64_t last_ns;  /* of the last failure */
    int64_t until_ns; /* the address waits until then (0: it does not) */
} fail_ent;

typedef struct cache_ent {
    char *key; /* hex(user):hex(hash):hex(password), the toolkit's key */
    bool ok;
} cache_ent;

struct pd_http_gate {
    char *path;
    pthread_rwlock_t mu;
    pd_webcfg cur;    /* in force */
    pd_webcfg start;  /* as read at start: TLS */
    char *dummy_hash; /* for unknown users, at the highest cost of cur */
    bool broken;      /* the file no longer loads: 500 */
    struct stat st;   /* identity of the file cur came from */
    pthread_mutex_t rl_mu;
    double rl_tokens;
    int64_t rl_last_ns;
    pthread_mutex_t cache_mu;
    cache_ent cache[CACHE_SIZE];
    size_t n_cache;
    unsigned rnd;
    unsigned bcrypt_queued;     /* checks running or waiting for bcrypt (cache_mu) */
    fail_ent fails[FAIL_TABLE]; /* (cache_mu) */
    pthread_mutex_t bcrypt_mu;
};

static pd_http_gate *g_tls_gate; /* the gate of the TLS verify callback (one server) */

bool pd_http_bcrypt_ok(const char *hash, const char *password)
{
    struct crypt_data *cd = calloc(1, sizeof *cd);
    if (!cd)
        return false;
    const char *out = crypt_rn(password, hash, cd, (int)sizeof *cd);
    bool ok = false;
    size_t hl = strlen(hash);
    if (out && out[0] != '*' && strlen(out) == hl) {
        unsigned char d = 0; /* constant time over the hash length */
        for (size_t i = 0; i < hl; i++)
            d |= (unsigned char)(out[i] ^ hash[i]);
        ok = d == 0;
    }
    explicit_bzero(cd, sizeof *cd);
    free(cd);
    return ok;
}

/* A bcrypt hash of random bytes at `cost` (libcrypt's own randomness). */
static char *make_dummy(int cost)
{
    char salt[CRYPT_GENSALT_OUTPUT_SIZE];
    if (!crypt_gensalt_rn("$2y$", (unsigned long)cost, NULL, 0, salt, (int)sizeof salt))
        return NULL;
    struct crypt_data *cd = calloc(1, sizeof *cd);
    if (!cd)
        return NULL;
    const char *out = crypt_rn("profd-no-such-user", salt, cd, (int)sizeof *cd);
    char *r = out && out[0] != '*' ? strdup(out) : NULL;
    free(cd);
    return r;
}

static int max_cost(const pd_webcfg *w)
{
    int c = 10;
    for (size_t i = 0; i < w->n_users; i++) {
        const char *h = w->user_hashes[i];
        int k = (h[4] - '0') * 10 + (h[5] - '0');
        if (i == 0 || k > c)
            c = k;
    }
    return c;
}

static void cache_clear(pd_http_gate *g)
{
    for (size_t i = 0; i < g->n_cache; i++) {
        explicit_bzero(g->cache[i].key, strlen(g->cache[i].key));
        free(g->cache[i].key);
    }
    g->n_cache = 0;
}

int pd_webcfg_check_tls(const pd_webcfg *w, pd_err *err)
{
    if (!w->tls_enabled)
        return 0;
    gnutls_certificate_credentials_t cred;
    if (gnutls_certificate_allocate_credentials(&cred) < 0)
        return PD_ENOMEM;
    int rc = 0;
    gnutls_datum_t c = {(unsigned char *)w->cert_pem, (unsigned)strlen(w->cert_pem)};
    gnutls_datum_t k = {(unsigned char *)w->key_pem, (unsigned)strlen(w->key_pem)};
    int e = gnutls_certificate_set_x509_key_mem(cred, &c, &k, GNUTLS_X509_FMT_PEM);
    if (e < 0) {
        rc = pd_err_set(err, PD_EINVAL,
                        "tls_server_config: failed to load the certificate and key as a pair: %s",
                        gnutls_strerror(e));
        goto out;
    }
    if (w->client_ca_pem) {
        gnutls_datum_t ca = {(unsigned char *)w->client_ca_pem, (unsigned)strlen(w->client_ca_pem)};
        e = gnutls_certificate_set_x509_trust_mem(cred, &ca, GNUTLS_X509_FMT_PEM);
        if (e <= 0) {
            rc = pd_err_set(err, PD_EINVAL, "tls_server_config: no client CA certificate read%s%s",
                            e < 0 ? ": " : "", e < 0 ? gnutls_strerror(e) : "");
            goto out;
        }
    }
    char prio[1024];
    const char *epos = NULL;
    gnutls_priority_t pc;
    if (pd_webcfg_tls_priorities(w, prio, sizeof prio) < 0) {
        rc = pd_err_set(err, PD_EINVAL, "tls_server_config: too many cipher suites or curves");
        goto out;
    }
    e = gnutls_priority_init(&pc, prio, &epos);
    if (e < 0) {
        rc = pd_err_set(err, PD_EINVAL, "tls_server_config: GnuTLS refuses \"%s\" at \"%s\": %s",
                        prio, epos ? epos : "", gnutls_strerror(e));
        goto out;
    }
    gnutls_priority_deinit(pc);
out:
    gnutls_certificate_free_credentials(cred);
    return rc;
}

int pd_http_gate_new(const char *path, pd_http_gate **out, pd_err *err)
{
    *out = NULL;
    pd_metrics_describe("profd_http_auth_failures_total", PD_METRIC_COUNTER,
                        "Requests and TLS handshakes refused by --web.config.file, by reason.");
    static const char *reasons[] = {"missing_credentials", "wrong_credentials", "forbidden",
                                    "client_certificate", "config_error"};
    for (size_t i = 0; i < sizeof reasons / sizeof *reasons; i++) {
        char l[64];
        snprintf(l, sizeof l, "reason=\"%s\"", reasons[i]);
        pd_metrics_add("profd_http_auth_failures_total", l, 0);
    }
    pd_http_gate *g = calloc(1, sizeof *g);
    if (!g)
        return PD_ENOMEM;
    int rc = pd_webcfg_load(path, &g->cur, err);
    if (rc == 0)
        rc = pd_webcfg_check_tls(&g->cur, err);
    if (rc == 0)
        rc = pd_webcfg_load(path, &g->start, err);
    if (rc == 0 && stat(path, &g->st) != 0)
        rc = pd_err_set(err, PD_EINVAL, "%s: cannot stat", path);
    if (rc == 0 && !(g->path = strdup(path)))
        rc = PD_ENOMEM;
    if (rc == 0 && !(g->dummy_hash = make_dummy(max_cost(&g->cur))))
        rc = pd_err_set(err, PD_ENOMEM, "%s: libcrypt cannot make a bcrypt hash", path);
    if (rc) {
        pd_webcfg_release(&g->cur);
        pd_webcfg_release(&g->start);
        free(g->path);
        free(g->dummy_hash);
        free(g);
        return rc;
    }
    pthread_rwlock_init(&g->mu, NULL);
    pthread_mutex_init(&g->rl_mu, NULL);
    pthread_mutex_init(&g->cache_mu, NULL);
    pthread_mutex_init(&g->bcrypt_mu, NULL);
    g->rl_tokens = (double)g->start.rate_burst;
    g->rl_last_ns = pd_mono_ns();
    g->rnd = (unsigned)pd_mono_ns();
    g_tls_gate = g;
    *out = g;
    return 0;
}

void pd_http_gate_free(pd_http_gate *g)
{
    if (!g)
        return;
    if (g_tls_gate == g)
        g_tls_gate = NULL;
    cache_clear(g);
    pd_webcfg_release(&g->cur);
    pd_webcfg_release(&g->start);
    free(g->path);
    free(g->dummy_hash);
    pthread_rwlock_destroy(&g->mu);
    pthread_mutex_destroy(&g->rl_mu);
    pthread_mutex_destroy(&g->cache_mu);
    pthread_mutex_destroy(&g->bcrypt_mu);
    free(g);
}

const pd_webcfg *pd_http_gate_config(const pd_http_gate *g)
{
    return &g->start;
}

/* Step 1: reads the file again when it changed. */
static void maybe_reload(pd_http_gate *g)
{
    struct stat st;
    bool ok = stat(g->path, &st) == 0;
    pthread_rwlock_rdlock(&g->mu);
    bool same = ok && st.st_ino == g->st.st_ino && st.st_dev == g->st.st_dev &&
                st.st_size == g->st.st_size && st.st_mtim.tv_sec == g->st.st_mtim.tv_sec &&
                st.st_mtim.tv_nsec == g->st.st_mtim.tv_nsec &&
                st.st_ctim.tv_sec == g->st.st_ctim.tv_sec &&
                st.st_ctim.tv_nsec == g->st.st_ctim.tv_nsec;
    bool was_broken = g->broken;
    pthread_rwlock_unlock(&g->mu);
    if (same && (ok || was_broken))
        return;
    pthread_rwlock_wrlock(&g->mu);
    pd_webcfg n;
    pd_err err;
    pd_err_clear(&err);
    int rc = ok ? pd_webcfg_load(g->path, &n, &err)
                : pd_err_set(&err, PD_ENOTFOUND, "%s: cannot stat", g->path);
    if (ok)
        g->st = st;
    else
        memset(&g->st, 0, sizeof g->st);
    if (rc) {
        if (!g->broken)
            pd_log(PD_LOG_ERROR, "web config no longer loads: every request answered 500",
                   "err=\"%s\"", err.msg);
        g->broken = true;
    } else {
        char *d = make_dummy(max_cost(&n));
        if (!d) {
            pd_webcfg_release(&n);
            g->broken = true;
        } else {
            pd_webcfg_release(&g->cur);
            g->cur = n;
            free(g->dummy_hash);
            g->dummy_hash = d;
            g->broken = false;
            pd_log(PD_LOG_INFO, "web config re-read", "file=%s users=%zu", g->path, n.n_users);
        }
    }
    pthread_rwlock_unlock(&g->mu);
}

/* Step 2: golang.org/x/time/rate Limiter.Allow with rate 1/interval. */
static bool rate_allow(pd_http_gate *g)
{
    if (g->start.rate_interval_ns <= 0)
        return true;
    pthread_mutex_lock(&g->rl_mu);
    int64_t now = pd_mono_ns();
    double burst = (double)g->start.rate_burst;
    g->rl_tokens += (double)(now - g->rl_last_ns) / (double)g->start.rate_interval_ns;
    if (g->rl_tokens > burst)
        g->rl_tokens = burst;
    g->rl_last_ns = now;
    bool ok = g->rl_tokens >= 1.0;
    if (ok)
        g->rl_tokens -= 1.0;
    pthread_mutex_unlock(&g->rl_mu);
    return ok;
}

static int b64val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Go's Request.BasicAuth: "Basic " (any case) + standard base64 of
 * user:password, split at the first ':'. out needs MAX_CRED_BYTES + 1. */
static bool parse_basic(const char *h, char *out, char **pass)
{
    if (!h || strncasecmp(h, "Basic ", 6) != 0)
        return false;
    const char *s = h + 6;
    size_t n = strlen(s), o = 0;
    if (n % 4 || n / 4 * 3 > MAX_CRED_BYTES)
        return false;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        for (int j = 0; j < 4; j++) {
            v[j] = s[i + j] == '=' && i + 4 == n && j >= 2 ? -2 : b64val((unsigned char)s[i + j]);
            if (v[j] == -1)
                return false;
        }
        if (v[2] == -2 && v[3] != -2)
            return false;
        out[o++] = (char)(v[0] << 2 | v[1] >> 4);
        if (v[2] != -2)
            out[o++] = (char)((v[1] & 15) << 4 | v[2] >> 2);
        if (v[3] != -2)
            out[o++] = (char)((v[2] & 3) << 6 | v[3]);
    }
    out[o] = 0;
    if (strlen(out) != o) /* a NUL inside */
        return false;
    char *colon = strchr(out, ':');
    if (!colon)
        return false;
    *colon = 0;
    *pass = colon + 1;
    return true;
}

static char *hexjoin(const char *a, const char *b, const char *c)
{
    size_t n = 2 * (strlen(a) + strlen(b) + strlen(c)) + 3;
    char *k = malloc(n);
    if (!k)
        return NULL;
    size_t o = 0;
    const char *parts[3] = {a, b, c};
    for (int p = 0; p < 3; p++) {
        for (const unsigned char *s = (const unsigned char *)parts[p]; *s; s++)
            o += (size_t)sprintf(k + o, "%02x", *s);
        if (p < 2)
            k[o++] = ':';
    }
    k[o] = 0;
    return k;
}

enum { CHECK_BAD, CHECK_OK, CHECK_BUSY };

static int64_t auth_now(void)
{
    return pd__http_auth_clock ? pd__http_auth_clock() : pd_mono_ns();
}

/* The entry of addr (cache_mu held), or NULL; with make, a new or the least
 * recently failed one, reset for addr. */
static fail_ent *fail_find(pd_http_gate *g, const char *addr, bool make)
{
    fail_ent *old = &g->fails[0];
    for (size_t i = 0; i < FAIL_TABLE; i++) {
        fail_ent *e = &g->fails[i];
        if (e->addr[0] && strcmp(e->addr, addr) == 0)
            return e;
        if (!e->addr[0] || (old->addr[0] && e->last_ns < old->last_ns))
            old = e;
    }
    if (!make)
        return NULL;
    memset(old, 0, sizeof *old);
    snprintf(old->addr, sizeof old->addr, "%s", addr);
    return old;
}

/* Nanoseconds addr must still wait (0: none). */
static int64_t fail_wait(pd_http_gate *g, const char *addr)
{
    int64_t now = auth_now(), left = 0;
    pthread_mutex_lock(&g->cache_mu);
    fail_ent *e = fail_find(g, addr, false);
    if (e && e->until_ns > now)
        left = e->until_ns - now;
    pthread_mutex_unlock(&g->cache_mu);
    return left;
}

/* Counts a failed (ok false) or a passed login of addr. */
static void fail_note(pd_http_gate *g, const char *addr, bool ok)
{
    int64_t now = auth_now();
    pthread_mutex_lock(&g->cache_mu);
    fail_ent *e = fail_find(g, addr, !ok);
    if (e && ok) {
        if (e->until_ns <= now) /* not while it waits: a flooder's neighbour does not clear it */
            memset(e, 0, sizeof *e);
    } else if (e) {
        if (now - e->last_ns > FAIL_FORGET_NS)
            e->fails = 0;
        e->fails++;
        e->last_ns = now;
        if (e->fails >= FAIL_FREE) {
            unsigned sh = e->fails - FAIL_FREE;
            int64_t s = sh >= 6 ? FAIL_MAX_WAIT_S : (int64_t)1 << sh;
            e->until_ns = now + (s > FAIL_MAX_WAIT_S ? FAIL_MAX_WAIT_S : s) * 1000000000LL;
        }
    }
    pthread_mutex_unlock(&g->cache_mu);
}

/* Step 5 for user/pass against the current config (mu held shared):
 * CHECK_OK, CHECK_BAD, or CHECK_BUSY when bcrypt is needed and
 * BCRYPT_MAX_QUEUED checks already run or wait for it. */
static int check_password(pd_http_gate *g, const char *user, const char *pass)
{
    const char *hash = NULL;
    for (size_t i = 0; i < g->cur.n_users; i++)
        if (strcmp(g->cur.user_names[i], user) == 0)
            hash = g->cur.user_hashes[i];
    bool valid_user = hash != NULL;
    if (!hash)
        hash = g->dummy_hash;
    char *key = hexjoin(user, hash, pass);
    if (!key)
        return CHECK_BAD;
    bool ok = false, hit = false, busy = false;
    pthread_mutex_lock(&g->cache_mu);
    for (size_t i = 0; i < g->n_cache; i++)
        if (strcmp(g->cache[i].key, key) == 0) {
            ok = g->cache[i].ok;
            hit = true;
            break;
        }
    if (!hit && !(busy = g->bcrypt_queued >= BCRYPT_MAX_QUEUED))
        g->bcrypt_queued++;
    pthread_mutex_unlock(&g->cache_mu);
    if (!hit && !busy) {
        pthread_mutex_lock(&g->bcrypt_mu);
        if (pd__http_bcrypt_hook)
            pd__http_bcrypt_hook(hash);
        bool match = pd_http_bcrypt_ok(hash, pass);
        pthread_mutex_unlock(&g->bcrypt_mu);
        ok = valid_user && match;
        pthread_mutex_lock(&g->cache_mu);
        g->bcrypt_queued--;
        if (g->n_cache == CACHE_SIZE) { /* random eviction, as cache.go */
            size_t v = (size_t)rand_r(&g->rnd) % CACHE_SIZE;
            explicit_bzero(g->cache[v].key, strlen(g->cache[v].key));
            free(g->cache[v].key);
            g->cache[v] = g->cache[--g->n_cache];
        }
        g->cache[g->n_cache].key = key;
        g->cache[g->n_cache].ok = ok;
        g->n_cache++;
        key = NULL;
        pthread_mutex_unlock(&g->cache_mu);
    }
    if (key) {
        explicit_bzero(key, strlen(key));
        free(key);
    }
    return busy ? CHECK_BUSY : ok && valid_user ? CHECK_OK : CHECK_BAD;
}

/* Whether user/pass has a cached answer, valid or not (mu held shared):
 * checking it costs no bcrypt. */
static bool cached(pd_http_gate *g, const char *user, const char *pass)
{
    const char *hash = g->dummy_hash;
    for (size_t i = 0; i < g->cur.n_users; i++)
        if (strcmp(g->cur.user_names[i], user) == 0)
            hash = g->cur.user_hashes[i];
    char *key = hexjoin(user, hash, pass);
    if (!key)
        return false;
    bool hit = false;
    pthread_mutex_lock(&g->cache_mu);
    for (size_t i = 0; i < g->n_cache && !hit; i++)
        hit = strcmp(g->cache[i].key, key) == 0;
    pthread_mutex_unlock(&g->cache_mu);
    explicit_bzero(key, strlen(key));
    free(key);
    return hit;
}

unsigned pd__http_gate_bcrypt_queued(pd_http_gate *g)
{
    pthread_mutex_lock(&g->cache_mu);
    unsigned n = g->bcrypt_queued;
    pthread_mutex_unlock(&g->cache_mu);
    return n;
}

static void refuse(pd_http_response *resp, int status, const char *text, const char *reason)
{
    pd_buf_reset(&resp->body);
    resp->status = status;
    resp->content_type = "text/plain; charset=utf-8";
    pd_buf_puts(&resp->body, text);
    pd_buf_puts(&resp->body, "\n");
    if (!resp->headers || !strstr(resp->headers, "X-Content-Type-Options:"))
        pd_http_add_header(resp, "X-Content-Type-Options", "nosniff"); /* as Go's http.Error */
    if (reason) {
        char l[64];
        snprintf(l, sizeof l, "reason=\"%s\"", reason);
        pd_metrics_add("profd_http_auth_failures_total", l, 1);
    }
}

/* Steps 1 and 3 (auth.h), shared by both checks: takes g->mu for reading
 * (the caller releases it); false with resp holding the 500 when the config
 * is broken, else the configured headers are on resp. */
static bool gate_begin(pd_http_gate *g, pd_http_response *resp)
{
    maybe_reload(g);
    pthread_rwlock_rdlock(&g->mu);
    if (g->broken) {
        refuse(resp, 500, "Internal Server Error", "config_error");
        return false;
    }
    for (size_t i = 0; i < g->cur.n_headers; i++) /* on refusals too */
        pd_http_add_header(resp, g->cur.header_names[i], g->cur.header_values[i]);
    return true;
}

/* Step 4: no users, or a path of profd_access_control.unauthenticated_paths. */
static bool needs_no_auth(const pd_http_gate *g, const char *path)
{
    if (g->cur.n_users == 0)
        return true;
    for (size_t i = 0; i < g->cur.open_paths.n; i++)
        if (strcmp(g->cur.open_paths.v[i], path) == 0)
            return true;
    return false;
}

static void refuse_401(pd_http_response *resp, const char *reason)
{
    refuse(resp, 401, "Unauthorized", reason);
    pd_http_add_header(resp, "WWW-Authenticate", "Basic");
}

bool pd_http_gate_precheck(pd_http_gate *g, const char *path, const char *authorization,
                           pd_http_response *resp)
{
    bool go = gate_begin(g, resp);
    if (go && !rate_allow(g)) {
        refuse(resp, 429, "Too Many Requests", NULL);
        pd_metrics_add("profd_http_rejected_total", "reason=\"rate_limited\"", 1);
        go = false;
    } else if (go && !needs_no_auth(g, path)) {
        char cred[MAX_CRED_BYTES + 1], *pass = NULL;
        if (!parse_basic(authorization, cred, &pass)) {
            refuse_401(resp, "missing_credentials");
            go = false;
        }
        explicit_bzero(cred, sizeof cred);
    }
    pthread_rwlock_unlock(&g->mu);
    return go;
}

bool pd_http_gate_check(pd_http_gate *g, const pd_http_request *req, int group,
                        pd_http_response *resp)
{
    bool go = false;
    if (!gate_begin(g, resp))
        goto out;
    if (needs_no_auth(g, req->path)) {
        go = true;
        goto out;
    }
    char cred[MAX_CRED_BYTES + 1], *pass = NULL;
    if (!parse_basic(pd_http_header(req, "Authorization"), cred, &pass)) {
        refuse_401(resp, "missing_credentials");
        goto out;
    }
    const char *addr = req->client && req->client[0] ? req->client : NULL;
    int64_t wait_ns = addr ? fail_wait(g, addr) : 0;
    bool hit = cached(g, cred, pass);
    if (wait_ns > 0 && !hit) {
        /* issue 28: this address failed FAIL_FREE+ times in a row; it waits
         * (whether or not the user exists: the same answer either way) */
        char msg[160], ra[24];
        long long s = (wait_ns + 999999999LL) / 1000000000LL;
        snprintf(msg, sizeof msg,
                 "Too Many Requests: too many failed logins from %s, retry in %lld s", addr, s);
        snprintf(ra, sizeof ra, "%lld", s);
        refuse(resp, 429, msg, NULL);
        pd_http_add_header(resp, "Retry-After", ra);
        pd_metrics_add("profd_http_rejected_total", "reason=\"auth_backoff\"", 1);
        explicit_bzero(cred, sizeof cred);
        goto out;
    }
    int ck = check_password(g, cred, pass);
    if (addr && ck != CHECK_BUSY && !hit) /* only checks that ran bcrypt count */
        fail_note(g, addr, ck == CHECK_OK);
    if (ck == CHECK_BUSY) { /* issue 28: a worker is not held waiting for bcrypt */
        refuse(resp, 429, "Too Many Requests: password checks are busy, retry later", NULL);
        pd_http_add_header(resp, "Retry-After", "1");
        pd_metrics_add("profd_http_rejected_total", "reason=\"auth_busy\"", 1);
        explicit_bzero(cred, sizeof cred);
        goto out;
    }
    if (ck != CHECK_OK) {
        refuse_401(resp, "wrong_credentials");
        explicit_bzero(cred, sizeof cred);
        goto out;
    }
    if (group >= 0 && group < PD_ACCESS_N && g->cur.group_users[group].set) {
        const pd_webcfg_list *l = &g->cur.group_users[group];
        bool in = false;
        for (size_t i = 0; i < l->n; i++)
            in |= strcmp(l->v[i], cred) == 0;
        if (!in) {
            static const char *names[PD_ACCESS_N] = {"query", "push", "admin"};
            char msg[160];
            snprintf(msg, sizeof msg,
                     "Forbidden: user may not use the %s endpoints (profd_access_control)",
                     names[group]);
            refuse(resp, 403, msg, "forbidden");
            explicit_bzero(cred, sizeof cred);
            goto out;
        }
    }
    explicit_bzero(cred, sizeof cred);
    go = true;
out:
    pthread_rwlock_unlock(&g->mu);
    return go;
}

/* ---- TLS client certificates ---- */

static bool san_allowed(const pd_webcfg *w, gnutls_x509_crt_t crt)
{
    for (unsigned i = 0;; i++) {
        char buf[1024];
        size_t sz = sizeof buf - 1;
        unsigned crit = 0;
        int t = gnutls_x509_crt_get_subject_alt_name(crt, i, buf, &sz, &crit);
        if (t == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
            return false;
        if (t < 0)
            continue;
        char val[INET6_ADDRSTRLEN + 1024];
        if (t == GNUTLS_SAN_IPADDRESS) {
            if (sz == 4)
                inet_ntop(AF_INET, buf, val, sizeof val);
            else if (sz == 16)
                inet_ntop(AF_INET6, buf, val, sizeof val);
            else
                continue;
        } else if (t == GNUTLS_SAN_DNSNAME || t == GNUTLS_SAN_RFC822NAME || t == GNUTLS_SAN_URI) {
            buf[sz] = 0;
            snprintf(val, sizeof val, "%s", buf);
        } else {
            continue;
        }
        for (size_t j = 0; j < w->allowed_sans.n; j++)
            if (strcmp(w->allowed_sans.v[j], val) == 0)
                return true;
    }
}

static int verify_cb(gnutls_session_t s)
{
    pd_http_gate *g = g_tls_gate;
    if (!g)
        return 0;
    const pd_webcfg *w = &g->start;
    unsigned n = 0;
    const gnutls_datum_t *certs = gnutls_certificate_get_peers(s, &n);
    const char *why = NULL;
    if (!certs || n == 0) {
        if (w->client_auth != PD_CLIENT_AUTH_REQUIRE_ANY &&
            w->client_auth != PD_CLIENT_AUTH_REQUIRE_VERIFY)
            return 0;
        why = "none given"; /* Require*: refused here (see pd_http_gate_tls_session) */
    }
    if (!why && (w->client_auth == PD_CLIENT_AUTH_VERIFY_IF_GIVEN ||
                 w->client_auth == PD_CLIENT_AUTH_REQUIRE_VERIFY)) {
        unsigned status = 0;
        if (gnutls_certificate_verify_peers2(s, &status) < 0 || status != 0)
            why = "does not chain to client_ca_file";
    }
    if (!why && w->allowed_sans.set) {
        gnutls_x509_crt_t crt;
        if (gnutls_x509_crt_init(&crt) < 0)
            return -1;
        if (gnutls_x509_crt_import(crt, &certs[0], GNUTLS_X509_FMT_DER) < 0 || !san_allowed(w, crt))
            why = "has none of client_allowed_sans";
        gnutls_x509_crt_deinit(crt);
    }
    if (why) {
        pd_metrics_add("profd_http_auth_failures_total", "reason=\"client_certificate\"", 1);
        pd_log(PD_LOG_DEBUG, "TLS client certificate refused", "why=\"%s\"", why);
        return -1;
    }
    return 0;
}

void pd_http_gate_tls_session(pd_http_gate *g, void *session)
{
    gnutls_session_t s = session;
    if (!g || !s)
        return;
    switch (g->start.client_auth) {
    case PD_CLIENT_AUTH_NONE:
        gnutls_certificate_server_set_request(s, GNUTLS_CERT_IGNORE);
        return;
    case PD_CLIENT_AUTH_REQUEST:
    case PD_CLIENT_AUTH_VERIFY_IF_GIVEN:
    case PD_CLIENT_AUTH_REQUIRE_ANY:
    case PD_CLIENT_AUTH_REQUIRE_VERIFY:
        /* Require* too: GnuTLS' own GNUTLS_CERT_REQUIRE refuses a client
           without a certificate before verify_cb runs, uncounted; verify_cb
           refuses it instead (same handshake failure, counted) */
        gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUEST);
        break;
    }
    gnutls_session_set_verify_function(s, verify_cb);
}

/* ---- profd check web-config ---- */

int pd_webcfg_check_main(int argc, char **argv)
{
    bool help = false;
    for (int i = 1; i < argc; i++)
        help |= !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h") || !strcmp(argv[i], "-help");
    if (argc < 2 || help) {
        fprintf(help ? stdout : stderr,
                "usage: profd check web-config FILE...\n"
                "Reads each --web.config.file as `profd serve` would (Prometheus'\n"
                "exporter-toolkit format; docs/security.md), with its certificate, key\n"
                "and client CA. Exit 0 when all load, 2 otherwise (FILE:LINE:COL on stderr).\n");
        return help ? 0 : 2;
    }
    int status = 0;
    for (int i = 1; i < argc; i++) {
        pd_webcfg w;
        pd_err err;
        pd_err_clear(&err);
        int rc = pd_webcfg_load(argv[i], &w, &err);
        if (rc == 0) {
            rc = pd_webcfg_check_tls(&w, &err);
            if (rc)
                pd_err_prefix(&err, "%s", argv[i]);
        }
        if (rc) {
            fprintf(stderr, "FAILED: %s\n", err.msg[0] ? err.msg : pd_strerror(rc));
            status = 2;
            continue;
        }
        static const char *auth[] = {"NoClientCert", "RequestClientCert", "RequireAnyClientCert",
                                     "VerifyClientCertIfGiven", "RequireAndVerifyClientCert"};
        printf("%s: SUCCESS\n", argv[i]);
        if (w.tls_enabled)
            printf("tls: TLS1.%d..TLS1.%d, client_auth_type %s%s\n", w.min_version - 10,
                   w.max_version - 10, auth[w.client_auth],
                   w.client_ca_pem ? ", client CA set" : "");
        else
            printf("tls: off (plain HTTP)\n");
        printf("basic_auth_users: %zu, headers: %zu, rate_limit: %s\n", w.n_users, w.n_headers,
               w.rate_interval_ns > 0 ? "on" : "off");
        pd_webcfg_release(&w);
    }
    return status;
}
