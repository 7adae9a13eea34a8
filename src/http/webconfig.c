/*
 * http/webconfig.c — reads `--web.config.file` (see webconfig.h) with
 * libyaml's document loader, then walks the node tree by hand so that every
 * unknown key, repeated key and wrongly typed value is an error naming
 * FILE:LINE:COLUMN (yaml.v2's UnmarshalStrict, which the toolkit uses,
 * refuses the same things).
 *
 * Defaults are the toolkit's getConfig: min_version TLS12, max_version
 * TLS13, prefer_server_cipher_suites true, http2 true. The checks after the
 * walk are ConfigToTLSConfig's and validateHeaderConfig's, in their words
 * where they have any: "missing one of cert or cert_file", "client CA's have
 * been configured without a Client Auth Policy", "HTTP header %q can not be
 * configured", bcrypt.Cost on every hash.
 */
#include "http/webconfig.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "base/time.h"
#include "base/yaml/yaml_node.h"

typedef struct wc_ctx {
    const char *name; /* file name for messages */
    const char *dir;  /* for relative paths, may be NULL */
    yaml_document_t *doc;
    pd_err *err;
} wc_ctx;

static int at(wc_ctx *c, const yaml_node_t *n, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int at(wc_ctx *c, const yaml_node_t *n, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = pd_yaml_vfail(c->err, c->name, n, code, fmt, ap);
    va_end(ap);
    return rc;
}

static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* A scalar that is YAML null ("", "~", "null" unquoted); no node is not. */
static bool is_null(const yaml_node_t *n)
{
    return n && pd_yaml_is_null(n);
}

static int get_string(wc_ctx *c, const yaml_node_t *n, const char *key, char **out)
{
    if (is_null(n))
        return 0;
    const char *s = scalar(n);
    if (!s)
        return at(c, n, PD_EPARSE, "%s: expected a string", key);
    free(*out);
    *out = strdup(s);
    return *out ? 0 : PD_ENOMEM;
}

static int get_bool(wc_ctx *c, const yaml_node_t *n, const char *key, bool *out)
{
    const char *s = scalar(n);
    static const char *yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES",
                                "on",   "On",   "ON",   "y",   "Y"};
    static const char *no[] = {"false", "False", "FALSE", "no", "No", "NO",
                               "off",   "Off",   "OFF",   "n",  "N"};
    if (s && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
        for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
            if (!strcmp(s, yes[i])) {
                *out = true;
                return 0;
            }
        for (size_t i = 0; i < sizeof no / sizeof *no; i++)
            if (!strcmp(s, no[i])) {
                *out = false;
                return 0;
            }
    }
    return at(c, n, PD_EPARSE, "%s: expected true or false", key);
}

static int get_list(wc_ctx *c, const yaml_node_t *n, const char *key, pd_webcfg_list *l)
{
    l->set = true;
    if (is_null(n))
        return 0;
    if (n->type != YAML_SEQUENCE_NODE)
        return at(c, n, PD_EPARSE, "%s: expected a list of strings", key);
    size_t cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (cnt > PD_WEBCFG_MAX_LIST)
        return at(c, n, PD_ETOOBIG, "%s: more than %d entries", key, PD_WEBCFG_MAX_LIST);
    l->v = calloc(cnt ? cnt : 1, sizeof *l->v);
    if (!l->v)
        return PD_ENOMEM;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        yaml_node_t *e = yaml_document_get_node(c->doc, *it);
        const char *s = scalar(e);
        if (!s)
            return at(c, e, PD_EPARSE, "%s: expected a string", key);
        if (!(l->v[l->n] = strdup(s)))
            return PD_ENOMEM;
        l->n++;
    }
    return 0;
}

static void list_release(pd_webcfg_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* Iterates the pairs of a mapping node, refusing repeated keys. */
#define MAP_EACH(c, n, k, v, ks)                                                                   \
    for (yaml_node_pair_t *k##_p = (n)->data.mapping.pairs.start;                                  \
         k##_p < (n)->data.mapping.pairs.top; k##_p++)                                             \
        for (yaml_node_t *k = yaml_document_get_node((c)->doc, k##_p->key),                        \
                         *v = yaml_document_get_node((c)->doc, k##_p->value);                      \
             k; k = NULL)                                                                          \
            for (const char *ks = scalar(k) ? scalar(k) : ""; ks; ks = NULL)

static int check_map(wc_ctx *c, const yaml_node_t *n, const char *what)
{
    if (is_null(n))
        return 1; /* empty: nothing to walk */
    if (n->type != YAML_MAPPING_NODE)
        return at(c, n, PD_EPARSE, "%s: expected a mapping", what);
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        if (!scalar(k))
            return at(c, k, PD_EPARSE, "%s: keys must be strings", what);
        for (yaml_node_pair_t *q = n->data.mapping.pairs.start; q < p; q++)
            if (!strcmp(scalar(yaml_document_get_node(c->doc, q->key)), scalar(k)))
                return at(c, k, PD_EPARSE, "%s: key \"%s\" already set", what, scalar(k));
    }
    return 0;
}

/* Reads a whole file under the cap into a NUL-terminated malloc'd buffer. */
static int slurp(const char *path, char **out, size_t *len, pd_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return pd_err_set(err, -errno, "%s: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *b = malloc(cap + 1);
    int rc = 0;
    if (!b) {
        close(fd);
        return PD_ENOMEM;
    }
    for (;;) {
        if (n == cap) {
            if (cap >= PD_WEBCFG_MAX_FILE_BYTES) {
                rc = pd_err_set(err, PD_ETOOBIG, "%s: larger than %zu bytes", path,
                                PD_WEBCFG_MAX_FILE_BYTES);
                break;
            }
            cap *= 2;
            char *nb = realloc(b, cap + 1);
            if (!nb) {
                rc = PD_ENOMEM;
                break;
            }
            b = nb;
        }
        ssize_t r = read(fd, b + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = pd_err_set(err, -errno, "%s: %s", path, strerror(errno));
            break;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (rc) {
        free(b);
        return rc;
    }
    b[n] = 0;
    *out = b;
    if (len)
        *len = n;
    return 0;
}

static int read_rel(wc_ctx *c, const yaml_node_t *n, const char *key, const char *file, char **out)
{
    char path[4096];
    if (file[0] == '/' || !c->dir)
        snprintf(path, sizeof path, "%s", file);
    else
        snprintf(path, sizeof path, "%s/%s", c->dir, file);
    pd_err e;
    pd_err_clear(&e);
    int rc = slurp(path, out, NULL, &e);
    if (rc)
        return at(c, n, rc, "%s: %s", key, e.msg[0] ? e.msg : pd_strerror(rc));
    return 0;
}

/* ---- Go names ---- */

static const struct {
    const char *go, *kx, *cipher, *mac;
} ciphers[] = {
    {"TLS_AES_128_GCM_SHA256", NULL, "AES-128-GCM", "AEAD"},
    {"TLS_AES_256_GCM_SHA384", NULL, "AES-256-GCM", "AEAD"},
    {"TLS_CHACHA20_POLY1305_SHA256", NULL, "CHACHA20-POLY1305", "AEAD"},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA", "AES-128-CBC", "SHA1"},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA", "AES-256-CBC", "SHA1"},
    {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA", "AES-128-CBC", "SHA1"},
    {"TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA", "AES-256-CBC", "SHA1"},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA", "AES-128-GCM", "AEAD"},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA", "AES-256-GCM", "AEAD"},
    {"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA", "AES-128-GCM", "AEAD"},
    {"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA", "AES-256-GCM", "AEAD"},
    {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA", "CHACHA20-POLY1305", "AEAD"},
    {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA", "CHACHA20-POLY1305", "AEAD"},
};

static const struct {
    const char *go, *gnutls;
} curves[] = {{"CurveP256", "GROUP-SECP256R1"},
              {"CurveP384", "GROUP-SECP384R1"},
              {"CurveP521", "GROUP-SECP521R1"},
              {"X25519", "GROUP-X25519"}};

static int tls_version(wc_ctx *c, const yaml_node_t *n, const char *key, int *out)
{
    const char *s = scalar(n);
    static const char *names[] = {"TLS10", "TLS11", "TLS12", "TLS13"};
    for (int i = 0; s && i < 4; i++)
        if (!strcmp(s, names[i])) {
            *out = 10 + i;
            return 0;
        }
    return at(c, n, PD_EINVAL, "%s: unknown TLS version: %s (TLS10, TLS11, TLS12 or TLS13)", key,
              s ? s : "(not a string)");
}

/* ---- sections ---- */

static int walk_tls(wc_ctx *c, const yaml_node_t *n, pd_webcfg *w)
{
    int rc = check_map(c, n, "tls_server_config");
    if (rc)
        return rc < 0 ? rc : 0;
    char *cert_file = NULL, *key_file = NULL, *ca_file = NULL, *cert = NULL, *key = NULL,
         *ca = NULL, *auth = NULL;
    const yaml_node_t *cert_n = NULL, *key_n = NULL, *ca_n = NULL, *auth_n = NULL;
    MAP_EACH(c, n, k, v, ks)
    {
        if (rc)
            break;
        if (!strcmp(ks, "cert_file"))
            rc = get_string(c, v, ks, &cert_file), cert_n = v;
        else if (!strcmp(ks, "key_file"))
            rc = get_string(c, v, ks, &key_file), key_n = v;
        else if (!strcmp(ks, "cert"))
            rc = get_string(c, v, ks, &cert), cert_n = cert_n ? cert_n : v;
        else if (!strcmp(ks, "key"))
            rc = get_string(c, v, ks, &key), key_n = key_n ? key_n : v;
        else if (!strcmp(ks, "client_ca_file"))
            rc = get_string(c, v, ks, &ca_file), ca_n = v;
        else if (!strcmp(ks, "client_ca"))
            rc = get_string(c, v, ks, &ca), ca_n = ca_n ? ca_n : v;
        else if (!strcmp(ks, "client_auth_type"))
            rc = get_string(c, v, ks, &auth), auth_n = v;
        else if (!strcmp(ks, "client_allowed_sans"))
            rc = get_list(c, v, ks, &w->allowed_sans);
        else if (!strcmp(ks, "min_version"))
            rc = tls_version(c, v, ks, &w->min_version);
        else if (!strcmp(ks, "max_version"))
            rc = tls_version(c, v, ks, &w->max_version);
        else if (!strcmp(ks, "prefer_server_cipher_suites"))
            rc = get_bool(c, v, ks, &w->prefer_server_cipher_suites);
        else if (!strcmp(ks, "cipher_suites")) {
            rc = get_list(c, v, ks, &w->cipher_suites);
            for (size_t i = 0; !rc && i < w->cipher_suites.n; i++) {
                size_t j = 0;
                while (j < sizeof ciphers / sizeof *ciphers &&
                       strcmp(ciphers[j].go, w->cipher_suites.v[i]))
                    j++;
                if (j == sizeof ciphers / sizeof *ciphers)
                    rc = at(c, v, PD_EINVAL, "unknown cipher: %s", w->cipher_suites.v[i]);
            }
        } else if (!strcmp(ks, "curve_preferences")) {
            rc = get_list(c, v, ks, &w->curves);
            for (size_t i = 0; !rc && i < w->curves.n; i++) {
                size_t j = 0;
                while (j < sizeof curves / sizeof *curves && strcmp(curves[j].go, w->curves.v[i]))
                    j++;
                if (j == sizeof curves / sizeof *curves)
                    rc = at(c, v, PD_EINVAL, "unknown curve: %s", w->curves.v[i]);
            }
        } else
            rc = at(c, k, PD_EPARSE, "field %s not found in tls_server_config", ks);
    }
    if (rc)
        goto out;
    w->tls_enabled = (cert_file && *cert_file) || (cert && *cert) || (key_file && *key_file) ||
                     (key && *key) || (ca_file && *ca_file) || (ca && *ca) || (auth && *auth);
    if (!w->tls_enabled)
        goto out;
    if (!(cert_file && *cert_file) && !(cert && *cert)) {
        rc = at(c, n, PD_EINVAL, "tls_server_config: missing one of cert or cert_file");
        goto out;
    }
    if (!(key_file && *key_file) && !(key && *key)) {
        rc = at(c, n, PD_EINVAL, "tls_server_config: missing one of key or key_file");
        goto out;
    }
    if (cert_file && *cert_file)
        rc = read_rel(c, cert_n, "cert_file", cert_file, &w->cert_pem);
    else
        w->cert_pem = strdup(cert), rc = w->cert_pem ? 0 : PD_ENOMEM;
    if (rc)
        goto out;
    if (key_file && *key_file)
        rc = read_rel(c, key_n, "key_file", key_file, &w->key_pem);
    else
        w->key_pem = strdup(key), rc = w->key_pem ? 0 : PD_ENOMEM;
    if (rc)
        goto out;
    if (ca_file && *ca_file)
        rc = read_rel(c, ca_n, "client_ca_file", ca_file, &w->client_ca_pem);
    else if (ca && *ca)
        w->client_ca_pem = strdup(ca), rc = w->client_ca_pem ? 0 : PD_ENOMEM;
    if (rc)
        goto out;
    const char *a = auth ? auth : "";
    if (!strcmp(a, "") || !strcmp(a, "NoClientCert"))
        w->client_auth = PD_CLIENT_AUTH_NONE;
    else if (!strcmp(a, "RequestClientCert"))
        w->client_auth = PD_CLIENT_AUTH_REQUEST;
    else if (!strcmp(a, "RequireAnyClientCert") || !strcmp(a, "RequireClientCert"))
        w->client_auth = PD_CLIENT_AUTH_REQUIRE_ANY;
    else if (!strcmp(a, "VerifyClientCertIfGiven"))
        w->client_auth = PD_CLIENT_AUTH_VERIFY_IF_GIVEN;
    else if (!strcmp(a, "RequireAndVerifyClientCert"))
        w->client_auth = PD_CLIENT_AUTH_REQUIRE_VERIFY;
    else {
        rc = at(c, auth_n, PD_EINVAL, "invalid ClientAuth: %s", a);
        goto out;
    }
    if (w->client_ca_pem && w->client_auth == PD_CLIENT_AUTH_NONE) {
        rc =
            at(c, ca_n, PD_EINVAL, "client CA's have been configured without a Client Auth Policy");
        goto out;
    }
    if (!w->client_ca_pem && (w->client_auth == PD_CLIENT_AUTH_VERIFY_IF_GIVEN ||
                              w->client_auth == PD_CLIENT_AUTH_REQUIRE_VERIFY)) {
        /* Go would verify against the system roots; a private CA is what is
         * meant in practice, so profd asks for it */
        rc = at(c, auth_n, PD_EINVAL, "client_auth_type %s needs client_ca_file or client_ca", a);
        goto out;
    }
    if (w->min_version > w->max_version)
        rc = at(c, n, PD_EINVAL, "tls_server_config: min_version is above max_version");
out:
    free(cert_file), free(key_file), free(ca_file), free(cert), free(key), free(ca), free(auth);
    return rc;
}

static const struct {
    const char *name;
    const char *allowed[2];
} allowed_headers[] = {
    {"Strict-Transport-Security", {NULL, NULL}}, {"X-Content-Type-Options", {"nosniff", NULL}},
    {"X-Frame-Options", {"deny", "sameorigin"}}, {"X-XSS-Protection", {NULL, NULL}},
    {"Content-Security-Policy", {NULL, NULL}},
};

static int walk_http(wc_ctx *c, const yaml_node_t *n, pd_webcfg *w)
{
    int rc = check_map(c, n, "http_server_config");
    if (rc)
        return rc < 0 ? rc : 0;
    MAP_EACH(c, n, k, v, ks)
    {
        if (rc)
            break;
        if (!strcmp(ks, "http2")) {
            rc = get_bool(c, v, ks, &w->http2);
        } else if (!strcmp(ks, "headers")) {
            int m = check_map(c, v, "headers");
            if (m) {
                rc = m < 0 ? m : 0;
                continue;
            }
            MAP_EACH(c, v, hk, hv, hn)
            {
                if (rc)
                    break;
                size_t j = 0;
                while (j < 5 && strcmp(allowed_headers[j].name, hn))
                    j++;
                const char *val = scalar(hv);
                if (j == 5) {
                    rc = at(c, hk, PD_EINVAL, "HTTP header \"%s\" can not be configured", hn);
                } else if (!val) {
                    rc = at(c, hv, PD_EPARSE, "headers: %s: expected a string", hn);
                } else if (strpbrk(val, "\r\n")) {
                    rc = at(c, hv, PD_EINVAL, "headers: %s: a line break in the value", hn);
                } else if (allowed_headers[j].allowed[0] &&
                           strcmp(val, allowed_headers[j].allowed[0]) &&
                           (!allowed_headers[j].allowed[1] ||
                            strcmp(val, allowed_headers[j].allowed[1]))) {
                    rc =
                        at(c, hv, PD_EINVAL,
                           "invalid value for %s. Expected one of: [\"%s\"%s%s%s], but got: \"%s\"",
                           hn, allowed_headers[j].allowed[0],
                           allowed_headers[j].allowed[1] ? " \"" : "",
                           allowed_headers[j].allowed[1] ? allowed_headers[j].allowed[1] : "",
                           allowed_headers[j].allowed[1] ? "\"" : "", val);
                } else {
                    w->header_names[w->n_headers] = strdup(hn);
                    w->header_values[w->n_headers] = strdup(val);
                    w->n_headers++;
                    if (!w->header_names[w->n_headers - 1] || !w->header_values[w->n_headers - 1])
                        rc = PD_ENOMEM;
                }
            }
        } else {
            rc = at(c, k, PD_EPARSE, "field %s not found in http_server_config", ks);
        }
    }
    return rc;
}

/* A Go time.Duration as yaml.v2 reads it: a string for time.ParseDuration
 * ("1s", "250ms", "1m30s") or an integer of nanoseconds. */
static int go_duration(wc_ctx *c, const yaml_node_t *n, const char *key, int64_t *ns)
{
    const char *s = scalar(n);
    if (!s)
        return at(c, n, PD_EPARSE, "%s: expected a duration", key);
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*s && !*end && !errno) {
        *ns = v;
        return 0;
    }
    /* units of Go: ns us µs ms s m h, decimals allowed, summed */
    double total = 0;
    const char *p = s;
    if (!*p)
        return at(c, n, PD_EINVAL, "%s: \"%s\" is not a duration like 1s or 100ms", key, s);
    while (*p) {
        char *e;
        double x = strtod(p, &e);
        if (e == p || x < 0)
            return at(c, n, PD_EINVAL, "%s: \"%s\" is not a duration like 1s or 100ms", key, s);
        p = e;
        double mul;
        if (!strncmp(p, "ns", 2))
            mul = 1, p += 2;
        else if (!strncmp(p, "us", 2))
            mul = 1e3, p += 2;
        else if (!strncmp(p, "\xc2\xb5s", 3))
            mul = 1e3, p += 3;
        else if (!strncmp(p, "ms", 2))
            mul = 1e6, p += 2;
        else if (*p == 's')
            mul = 1e9, p++;
        else if (*p == 'm')
            mul = 60e9, p++;
        else if (*p == 'h')
            mul = 3600e9, p++;
        else
            return at(c, n, PD_EINVAL, "%s: \"%s\" is not a duration like 1s or 100ms", key, s);
        total += x * mul;
    }
    if (total > 9.2e18)
        return at(c, n, PD_EINVAL, "%s: \"%s\" is too long", key, s);
    *ns = (int64_t)total;
    return 0;
}

static int walk_rate(wc_ctx *c, const yaml_node_t *n, pd_webcfg *w)
{
    int rc = check_map(c, n, "rate_limit");
    if (rc)
        return rc < 0 ? rc : 0;
    MAP_EACH(c, n, k, v, ks)
    {
        if (rc)
            break;
        if (!strcmp(ks, "interval")) {
            rc = go_duration(c, v, ks, &w->rate_interval_ns);
            if (!rc && w->rate_interval_ns < 0)
                rc = at(c, v, PD_EINVAL, "interval: negative");
        } else if (!strcmp(ks, "burst")) {
            const char *s = scalar(v);
            char *end = NULL;
            long long b = s ? strtoll(s, &end, 10) : 0;
            if (!s || !*s || *end || b < 0 || b > 1000000000)
                rc = at(c, v, PD_EINVAL, "burst: expected an integer from 0 to 1000000000");
            else
                w->rate_burst = b;
        } else
            rc = at(c, k, PD_EPARSE, "field %s not found in rate_limit", ks);
    }
    return rc;
}

/* bcrypt.Cost: "$2a$", "$2b$" or "$2y$", a cost of 4..31 in two digits, "$",
 * 22 salt and 31 hash characters of bcrypt's base64 alphabet. */
static bool bcrypt_hash_ok(const char *h)
{
    if (strlen(h) != 60 || h[0] != '$' || h[1] != '2' || !strchr("aby", h[2]) || h[3] != '$' ||
        h[6] != '$')
        return false;
    if (h[4] < '0' || h[4] > '3' || h[5] < '0' || h[5] > '9')
        return false;
    int cost = (h[4] - '0') * 10 + (h[5] - '0');
    if (cost < 4 || cost > 31)
        return false;
    return strspn(h + 7, "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") == 53;
}

static int walk_users(wc_ctx *c, const yaml_node_t *n, pd_webcfg *w)
{
    int rc = check_map(c, n, "basic_auth_users");
    if (rc)
        return rc < 0 ? rc : 0;
    size_t cnt = (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
    if (cnt > PD_WEBCFG_MAX_USERS)
        return at(c, n, PD_ETOOBIG, "basic_auth_users: more than %d users", PD_WEBCFG_MAX_USERS);
    w->user_names = calloc(cnt + 1, sizeof *w->user_names);
    w->user_hashes = calloc(cnt + 1, sizeof *w->user_hashes);
    if (!w->user_names || !w->user_hashes)
        return PD_ENOMEM;
    MAP_EACH(c, n, k, v, ks)
    {
        if (rc)
            break;
        const char *h = scalar(v);
        if (!h)
            rc = at(c, v, PD_EPARSE, "basic_auth_users: %s: expected a bcrypt hash string", ks);
        else if (!bcrypt_hash_ok(h))
            rc = at(c, v, PD_EINVAL,
                    "basic_auth_users: %s: not a bcrypt hash ($2y$, $2b$ or $2a$, cost 04..31, "
                    "60 characters; make one with htpasswd -nBC 10 \"\" | tr -d ':\\n')",
                    ks);
        else if (strchr(ks, ':'))
            rc = at(c, k, PD_EINVAL, "basic_auth_users: \"%s\": a user name cannot hold ':'", ks);
        else {
            w->user_names[w->n_users] = strdup(ks);
            w->user_hashes[w->n_users] = strdup(h);
            w->n_users++;
            if (!w->user_names[w->n_users - 1] || !w->user_hashes[w->n_users - 1])
                rc = PD_ENOMEM;
        }
    }
    return rc;
}

static int walk_access(wc_ctx *c, const yaml_node_t *n, pd_webcfg *w)
{
    int rc = check_map(c, n, "profd_access_control");
    if (rc)
        return rc < 0 ? rc : 0;
    static const char *keys[PD_ACCESS_N] = {"query_users", "push_users", "admin_users"};
    MAP_EACH(c, n, k, v, ks)
    {
        if (rc)
            break;
        int g = -1;
        for (int i = 0; i < PD_ACCESS_N; i++)
            if (!strcmp(ks, keys[i]))
                g = i;
        if (g >= 0) {
            rc = get_list(c, v, ks, &w->group_users[g]);
            for (size_t i = 0; !rc && i < w->group_users[g].n; i++) {
                size_t j = 0;
                while (j < w->n_users && strcmp(w->user_names[j], w->group_users[g].v[i]))
                    j++;
                if (j == w->n_users)
                    rc = at(c, v, PD_EINVAL, "%s: user \"%s\" is not in basic_auth_users", ks,
                            w->group_users[g].v[i]);
            }
        } else if (!strcmp(ks, "unauthenticated_paths")) {
            rc = get_list(c, v, ks, &w->open_paths);
            for (size_t i = 0; !rc && i < w->open_paths.n; i++)
                if (w->open_paths.v[i][0] != '/')
                    rc = at(c, v, PD_EINVAL, "unauthenticated_paths: \"%s\" does not start with /",
                            w->open_paths.v[i]);
        } else
            rc = at(c, k, PD_EPARSE,
                    "field %s not found in profd_access_control (push_users, query_users, "
                    "admin_users, unauthenticated_paths)",
                    ks);
    }
    return rc;
}

int pd_webcfg_parse(const char *name, const char *dir, const char *text, size_t len, pd_webcfg *w,
                    pd_err *err)
{
    memset(w, 0, sizeof *w);
    w->min_version = 12;
    w->max_version = 13;
    w->prefer_server_cipher_suites = true;
    w->http2 = true;
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser))
        return PD_ENOMEM;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        int rc = pd_err_set(err, PD_EPARSE, "%s:%zu:%zu: %s", name, parser.problem_mark.line + 1,
                            parser.problem_mark.column + 1,
                            parser.problem ? parser.problem : "not YAML");
        yaml_parser_delete(&parser);
        return rc;
    }
    wc_ctx c = {.name = name, .dir = dir, .doc = &doc, .err = err};
    int rc = 0;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    const yaml_node_t *access = NULL;
    if (!root) /* an empty file: every default (the toolkit accepts it) */
        goto out;
    rc = check_map(&c, root, "web config");
    if (rc) {
        rc = rc < 0 ? rc : 0;
        goto out;
    }
    MAP_EACH(&c, root, k, v, ks)
    {
        if (rc)
            break;
        if (!strcmp(ks, "tls_server_config"))
            rc = walk_tls(&c, v, w);
        else if (!strcmp(ks, "http_server_config"))
            rc = walk_http(&c, v, w);
        else if (!strcmp(ks, "rate_limit"))
            rc = walk_rate(&c, v, w);
        else if (!strcmp(ks, "basic_auth_users"))
            rc = walk_users(&c, v, w);
        else if (!strcmp(ks, "profd_access_control"))
            access = v; /* after the users, which it names */
        else
            rc = at(&c, k, PD_EPARSE,
                    "field %s not found in the web config (tls_server_config, "
                    "http_server_config, rate_limit, basic_auth_users, profd_access_control)",
                    ks);
    }
    if (!rc && access)
        rc = walk_access(&c, access, w);
out:
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    if (rc)
        pd_webcfg_release(w);
    return rc;
}

int pd_webcfg_load(const char *path, pd_webcfg *out, pd_err *err)
{
    char *text = NULL;
    size_t len = 0;
    memset(out, 0, sizeof *out);
    int rc = slurp(path, &text, &len, err);
    if (rc)
        return rc;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        slash == dir ? (void)(dir[1] = 0) : (void)(*slash = 0);
    rc = pd_webcfg_parse(path, slash ? dir : NULL, text, len, out, err);
    free(text);
    return rc;
}

void pd_webcfg_release(pd_webcfg *w)
{
    if (!w)
        return;
    free(w->cert_pem);
    free(w->key_pem);
    free(w->client_ca_pem);
    list_release(&w->allowed_sans);
    list_release(&w->cipher_suites);
    list_release(&w->curves);
    for (size_t i = 0; i < w->n_headers; i++)
        free(w->header_names[i]), free(w->header_values[i]);
    for (size_t i = 0; i < w->n_users; i++)
        free(w->user_names[i]), free(w->user_hashes[i]);
    free(w->user_names);
    free(w->user_hashes);
    for (int g = 0; g < PD_ACCESS_N; g++)
        list_release(&w->group_users[g]);
    list_release(&w->open_paths);
    memset(w, 0, sizeof *w);
}

static int put(char *out, size_t cap, size_t *o, const char *s)
{
    size_t l = strlen(s);
    if (*o + l + 1 > cap)
        return PD_ETOOBIG;
    memcpy(out + *o, s, l + 1);
    *o += l;
    return 0;
}

int pd_webcfg_tls_priorities(const pd_webcfg *w, char *out, size_t cap)
{
    size_t o = 0;
    int rc = put(out, cap, &o, "NORMAL:-VERS-ALL");
    static const char *vers[] = {"VERS-TLS1.0", "VERS-TLS1.1", "VERS-TLS1.2", "VERS-TLS1.3"};
    for (int v = w->min_version; !rc && v <= w->max_version; v++) {
        rc = put(out, cap, &o, ":+");
        if (!rc)
            rc = put(out, cap, &o, vers[v - 10]);
    }
    if (!rc && w->cipher_suites.n) {
        /* GnuTLS names key exchanges, ciphers and MACs apart: TLS 1.2 gets
         * their product, TLS 1.3 the named AEAD ciphers (or, when none is
         * named, all three, as Go ignores cipher_suites for TLS 1.3) */
        rc = put(out, cap, &o, ":-KX-ALL:-CIPHER-ALL:-MAC-ALL");
        bool tls13_named = false;
        for (size_t i = 0; !rc && i < w->cipher_suites.n; i++)
            for (size_t j = 0; j < sizeof ciphers / sizeof *ciphers; j++)
                if (!strcmp(ciphers[j].go, w->cipher_suites.v[i])) {
                    char part[96];
                    tls13_named |= ciphers[j].kx == NULL;
                    snprintf(part, sizeof part, "%s%s:+%s:+%s", ciphers[j].kx ? ":+" : "",
                             ciphers[j].kx ? ciphers[j].kx : "", ciphers[j].cipher, ciphers[j].mac);
                    rc = put(out, cap, &o, part);
                }
        if (!rc && !tls13_named && w->max_version == 13)
            rc = put(out, cap, &o, ":+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:+AEAD");
    }
    if (!rc && w->curves.n) {
        rc = put(out, cap, &o, ":-GROUP-ALL");
        for (size_t i = 0; !rc && i < w->curves.n; i++)
            for (size_t j = 0; j < sizeof curves / sizeof *curves; j++)
                if (!strcmp(curves[j].go, w->curves.v[i])) {
                    rc = put(out, cap, &o, ":+");
                    if (!rc)
                        rc = put(out, cap, &o, curves[j].gnutls);
                }
    }
    if (!rc && w->prefer_server_cipher_suites)
        rc = put(out, cap, &o, ":%SERVER_PRECEDENCE");
    return rc;
}
