/*
 * http/guard.c — cross-site safety rules (the rules and their order: guard.h).
 *
 * A guard is a list of allowed host names, lower-case, without brackets or
 * port, or `any`. Names are compared byte for byte after the Host header's
 * name is normalised the same way; no DNS lookup is ever made (a rebinding
 * attack controls DNS, not the Host header the browser sends).
 */
#include "http/guard.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define GUARD_MAX_HOSTS 64
#define GUARD_MAX_NAME 253 /* a DNS name; IPv6 literals are shorter */

struct pd_http_guard {
    bool any;
    size_t n;
    char names[GUARD_MAX_HOSTS][GUARD_MAX_NAME + 1];
};

const char *const pd_http_security_headers[PD_HTTP_SECURITY_HEADERS][2] = {
    {"X-Content-Type-Options", "nosniff"},
    {"X-Frame-Options", "DENY"},
    {"Content-Security-Policy",
     "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
     "img-src 'self' data: blob:; object-src 'none'; base-uri 'none'; form-action 'self'; "
     "frame-ancestors 'none'"},
    {"Referrer-Policy", "same-origin"},
    {"Cross-Origin-Resource-Policy", "same-origin"},
};

/* The name part of a Host value or of an origin's authority (s, n bytes):
 * "[::1]:80" -> "::1", "Example.COM.:8080" -> "example.com". Writes at most
 * cap-1 bytes and a NUL into out. false when it does not fit or is empty. */
static bool host_name(const char *s, size_t n, char *out, size_t cap)
{
    const char *end = s + n;
    const char *name = s, *name_end;
    if (n && s[0] == '[') {
        const char *rb = memchr(s, ']', n);
        if (!rb)
            return false;
        name = s + 1;
        name_end = rb;
    } else {
        const char *colon = memchr(s, ':', n);
        name_end = colon ? colon : end;
    }
    size_t l = (size_t)(name_end - name);
    if (l && name[l - 1] == '.')
        l--;
    if (l == 0 || l >= cap)
        return false;
    for (size_t i = 0; i < l; i++) {
        char c = name[i];
        out[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    out[l] = 0;
    return true;
}

static int add_name(pd_http_guard *g, const char *s, size_t n, pd_err *err)
{
    char name[GUARD_MAX_NAME + 1];
    if (n == 1 && s[0] == '*') {
        g->any = true;
        return 0;
    }
    /* a bare IPv6 literal ("::1") is its own name; else the host part */
    bool v6 = n && s[0] != '[' && memchr(s, ':', n) && memchr(s, ':', n) != memrchr(s, ':', n);
    if (v6) {
        if (n >= sizeof name)
            return pd_err_set(err, PD_EINVAL, "--web.allowed-hosts: \"%.*s\" is too long",
                              (int)(n > 80 ? 80 : n), s);
        for (size_t i = 0; i < n; i++)
            name[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
        name[n] = 0;
    } else if (!host_name(s, n, name, sizeof name)) {
        return pd_err_set(err, PD_EINVAL,
                          "--web.allowed-hosts: \"%.*s\" is not a host name (e.g. "
                          "profd.example.com,10.0.0.5)",
                          (int)(n > 80 ? 80 : n), s);
    }
    for (size_t i = 0; i < g->n; i++)
        if (strcmp(g->names[i], name) == 0)
            return 0;
    if (g->n == GUARD_MAX_HOSTS)
        return pd_err_set(err, PD_EINVAL, "--web.allowed-hosts: more than %d names",
                          GUARD_MAX_HOSTS);
    memcpy(g->names[g->n++], name, strlen(name) + 1);
    return 0;
}

static bool is_loopback(const char *h)
{
    return strncmp(h, "127.", 4) == 0 || strcmp(h, "localhost") == 0 || strcmp(h, "::1") == 0;
}

int pd_http_guard_new(const char *listen_addr, const char *allowed_hosts, pd_http_guard **out,
                      pd_err *err)
{
    *out = NULL;
    pd_http_guard *g = calloc(1, sizeof *g);
    if (!g)
        return pd_err_set(err, PD_ENOMEM, "http guard: out of memory");
    /* the listen address's host: "" / 0.0.0.0 / [::] are every interface */
    const char *la = listen_addr ? listen_addr : "";
    const char *colon = la[0] == '[' ? strstr(la, "]:") : strrchr(la, ':');
    if (la[0] == '[' && colon)
        colon++;
    size_t hl = colon ? (size_t)(colon - la) : strlen(la);
    char lhost[GUARD_MAX_NAME + 1] = "";
    if (hl && !host_name(la, hl, lhost, sizeof lhost)) {
        pd_http_guard_free(g);
        return pd_err_set(err, PD_EINVAL, "listen address \"%s\": no host name", la);
    }
    bool wildcard = !lhost[0] || strcmp(lhost, "0.0.0.0") == 0 || strcmp(lhost, "::") == 0;
    bool named = allowed_hosts && *allowed_hosts;
    int rc = 0;
    for (const char *p = named ? allowed_hosts : ""; *p && rc == 0;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        while (n && (*p == ' ')) {
            p++;
            n--;
        }
        while (n && p[n - 1] == ' ')
            n--;
        if (n == 0)
            rc = pd_err_set(err, PD_EINVAL,
                            "--web.allowed-hosts: \"%s\" has an empty name (e.g. "
                            "profd.example.com,10.0.0.5)",
                            allowed_hosts);
        else
            rc = add_name(g, p, n, err);
        p = comma ? comma + 1 : p + n + strlen(p + n);
    }
    if (rc == 0 && wildcard && !named)
        g->any = true;
    if (rc == 0 && !wildcard)
        rc = add_name(g, lhost, strlen(lhost), err);
    if (rc == 0 && (named || is_loopback(lhost))) {
        rc = add_name(g, "localhost", 9, err);
        if (rc == 0)
            rc = add_name(g, "127.0.0.1", 9, err);
        if (rc == 0)
            rc = add_name(g, "::1", 3, err);
    }
    if (rc) {
        pd_http_guard_free(g);
        return rc;
    }
    *out = g;
    return 0;
}

void pd_http_guard_free(pd_http_guard *g)
{
    free(g);
}

void pd_http_guard_describe(const pd_http_guard *g, char *buf, size_t cap)
{
    if (!cap)
        return;
    buf[0] = 0;
    if (!g || g->any) {
        snprintf(buf, cap, "any");
        return;
    }
    size_t o = 0;
    for (size_t i = 0; i < g->n && o < cap; i++) {
        int k = snprintf(buf + o, cap - o, "%s%s", i ? "," : "", g->names[i]);
        if (k < 0)
            break;
        o += (size_t)k;
    }
}

/* Copies s into out (cap bytes) with control characters and quotes
 * replaced, for a message. */
static void printable(const char *s, char *out, size_t cap)
{
    size_t o = 0;
    for (; s && *s && o + 1 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        out[o++] = (char)(c < 0x20 || c == 0x7f || c == '"' ? '?' : c);
    }
    out[o] = 0;
}

static bool ieq(const char *a, const char *b)
{
    return a && strcasecmp(a, b) == 0;
}

/* Length of authority s (n bytes) without ":defport" at its end. */
static size_t drop_default_port(const char *s, size_t n, const char *defport)
{
    size_t dl = strlen(defport);
    if (n > dl + 1 && s[n - dl - 1] == ':' && strncmp(s + n - dl, defport, dl) == 0 &&
        (s[0] != '[' || s[n - dl - 2] == ']'))
        return n - dl - 1;
    return n;
}

/* a[:port] vs b[:port], case-insensitive, the scheme's default port of
 * either side dropped. */
static bool authority_eq(const char *a, size_t an, const char *b, const char *defport)
{
    an = drop_default_port(a, an, defport);
    size_t bn = drop_default_port(b, strlen(b), defport);
    return an == bn && strncasecmp(a, b, an) == 0;
}

/* The origin is the server's own: "http://HOST" or "https://HOST" with HOST
 * the Host header. */
static bool same_origin(const char *origin, const char *host)
{
    if (!host)
        return false;
    const char *auth;
    const char *defport;
    if (strncasecmp(origin, "http://", 7) == 0) {
        auth = origin + 7;
        defport = "80";
    } else if (strncasecmp(origin, "https://", 8) == 0) {
        auth = origin + 8;
        defport = "443";
    } else {
        return false;
    }
    size_t an = strlen(auth);
    if (an && auth[an - 1] == '/')
        an--; /* not sent by browsers, harmless */
    if (memchr(auth, '/', an) || memchr(auth, '@', an))
        return false;
    return authority_eq(auth, an, host, defport);
}

/* Content-Types a cross-origin form or no-cors fetch can send without a
 * preflight (Fetch standard: CORS-safelisted request header). */
static bool simple_content_type(const char *ct)
{
    if (!ct)
        return true;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    size_t n = strcspn(ct, "; \t");
    static const char *simple[] = {"application/x-www-form-urlencoded", "multipart/form-data",
                                   "text/plain"};
    for (size_t i = 0; i < sizeof simple / sizeof *simple; i++)
        if (n == strlen(simple[i]) && strncasecmp(ct, simple[i], n) == 0)
            return true;
    return n == 0;
}

static int refuse(pd_http_guard_verdict *v, int status, const char *reason, const char *fmt,
                  const char *arg)
{
    char p[200];
    printable(arg, p, sizeof p);
    v->status = status;
    v->reason = reason;
    snprintf(v->msg, sizeof v->msg - 1, fmt, p);
    strcat(v->msg, "\n");
    return status;
}

int pd_http_guard_check(const pd_http_guard *g, const pd_http_guard_req *r,
                        pd_http_guard_verdict *v)
{
    v->status = 0;
    v->reason = NULL;
    v->msg[0] = 0;
    if (!g)
        return 0;
    /* 1. Host */
    if (r->host && !g->any) {
        char name[GUARD_MAX_NAME + 1];
        bool ok = false;
        if (host_name(r->host, strlen(r->host), name, sizeof name))
            for (size_t i = 0; i < g->n && !ok; i++)
                ok = strcmp(g->names[i], name) == 0;
        if (!ok)
            return refuse(v, 421, "host_not_allowed",
                          "Host \"%s\" is not served here (DNS rebinding protection): allowed "
                          "names are set with --web.allowed-hosts",
                          r->host);
    }
    /* 2. Origin */
    if (r->origin && !same_origin(r->origin, r->host))
        return refuse(v, 403, "cross_origin",
                      "cross-origin request refused: Origin \"%s\" is not this server's origin",
                      r->origin);
    /* 3. Sec-Fetch-Site */
    bool get = ieq(r->method, "GET") || ieq(r->method, "HEAD");
    const char *site = r->sec_fetch_site;
    if (site && (ieq(site, "cross-site") || ieq(site, "same-site"))) {
        bool navigation = get && ieq(r->sec_fetch_mode, "navigate") &&
                          (!r->sec_fetch_dest || ieq(r->sec_fetch_dest, "document"));
        if (!navigation)
            return refuse(v, 403, "cross_site",
                          "cross-site request refused (Sec-Fetch-Site: %s): only links to "
                          "profd's pages may come from other sites",
                          site);
    }
    /* 4. browser writes need a non-simple Content-Type or X-Requested-By */
    bool write = !get && !ieq(r->method, "OPTIONS");
    if (write && (r->origin || site) && !r->requested_by && simple_content_type(r->content_type))
        return refuse(v, 403, "browser_simple_write",
                      "a browser's write with Content-Type \"%s\" refused: send a non-form "
                      "Content-Type or an X-Requested-By header",
                      r->content_type ? r->content_type : "");
    return 0;
}
