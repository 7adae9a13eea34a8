/*
 * scrape/config_client.c — a job's HTTP client options (Prometheus' common
 * HTTPClientConfig keys) and its relabel_configs, checked as Prometheus
 * checks them.
 */
#include <arpa/nameser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "scrape/config_int.h"
#include "scrape/scrape_int.h"

const char *const pd__k8s_role_names[PD_K8S_N_ROLES] = {"pod",  "service",       "endpoints",
                                                        "node", "endpointslice", "ingress"};

const char *const pd__cfg_client_keys[PD_CFG_CL_N + 1] = {
    "basic_auth",       "authorization",
    "bearer_token",     "bearer_token_file",
    "tls_config",       "proxy_url",
    "follow_redirects", "enable_http2",
    "oauth2",           NULL,
};

void pd_scrape_client_release(pd_scrape_client *c)
{
    free(c->basic_username);
    free(c->basic_password);
    free(c->basic_password_file);
    free(c->auth_type);
    free(c->auth_credentials);
    free(c->auth_credentials_file);
    free(c->ca_file);
    free(c->cert_file);
    free(c->key_file);
    free(c->server_name);
    free(c->proxy_url);
    free(c->oauth2_token_url);
    free(c->oauth2_client_id);
    free(c->oauth2_client_secret);
    free(c->oauth2_client_secret_file);
    free(c->oauth2_scopes);
    free(c->oauth2_params);
    memset(c, 0, sizeof *c);
}

static int dup_opt(char **dst, const char *src)
{
    *dst = NULL;
    if (!src)
        return 0;
    *dst = strdup(src);
    return *dst ? 0 : PD_ENOMEM;
}

int pd_scrape_client_copy(pd_scrape_client *d, const pd_scrape_client *s)
{
    *d = *s;
    if (dup_opt(&d->basic_username, s->basic_username) ||
        dup_opt(&d->basic_password, s->basic_password) ||
        dup_opt(&d->basic_password_file, s->basic_password_file) ||
        dup_opt(&d->auth_type, s->auth_type) ||
        dup_opt(&d->auth_credentials, s->auth_credentials) ||
        dup_opt(&d->auth_credentials_file, s->auth_credentials_file) ||
        dup_opt(&d->ca_file, s->ca_file) || dup_opt(&d->cert_file, s->cert_file) ||
        dup_opt(&d->key_file, s->key_file) || dup_opt(&d->server_name, s->server_name) ||
        dup_opt(&d->proxy_url, s->proxy_url) ||
        dup_opt(&d->oauth2_token_url, s->oauth2_token_url) ||
        dup_opt(&d->oauth2_client_id, s->oauth2_client_id) ||
        dup_opt(&d->oauth2_client_secret, s->oauth2_client_secret) ||
        dup_opt(&d->oauth2_client_secret_file, s->oauth2_client_secret_file) ||
        dup_opt(&d->oauth2_scopes, s->oauth2_scopes) ||
        dup_opt(&d->oauth2_params, s->oauth2_params)) {
        /* pointers not yet duplicated still alias s: clear them before release */
        pd_scrape_client t = *d;
        memset(d, 0, sizeof *d);
        char **from[] = {&t.basic_username,
                         &t.basic_password,
                         &t.basic_password_file,
                         &t.auth_type,
                         &t.auth_credentials,
                         &t.auth_credentials_file,
                         &t.ca_file,
                         &t.cert_file,
                         &t.key_file,
                         &t.server_name,
                         &t.proxy_url,
                         &t.oauth2_token_url,
                         &t.oauth2_client_id,
                         &t.oauth2_client_secret,
                         &t.oauth2_client_secret_file,
                         &t.oauth2_scopes,
                         &t.oauth2_params};
        char *const orig[] = {s->basic_username,
                              s->basic_password,
                              s->basic_password_file,
                              s->auth_type,
                              s->auth_credentials,
                              s->auth_credentials_file,
                              s->ca_file,
                              s->cert_file,
                              s->key_file,
                              s->server_name,
                              s->proxy_url,
                              s->oauth2_token_url,
                              s->oauth2_client_id,
                              s->oauth2_client_secret,
                              s->oauth2_client_secret_file,
                              s->oauth2_scopes,
                              s->oauth2_params};
        for (size_t i = 0; i < sizeof from / sizeof *from; i++)
            if (*from[i] != orig[i])
                free(*from[i]);
        return PD_ENOMEM;
    }
    return 0;
}

static int parse_basic(pd__cfg_ctx *c, const yaml_node_t *n, pd_scrape_client *o)
{
    static const char *const keys[] = {"username", "password", "password_file", "username_file",
                                       NULL};
    yaml_node_t *v[4];
    int rc = pd__cfg_map_keys(c, n, "basic_auth", keys, v);
    if (rc)
        return rc;
    if (v[3])
        return pd__cfg_fail(c, v[3], PD_EINVAL,
                            "basic_auth.username_file is not supported: give username");
    if (!v[0])
        return pd__cfg_fail(c, n, PD_EINVAL, "basic_auth needs a username");
    if ((rc = pd__cfg_want_dup(c, v[0], "basic_auth.username", &o->basic_username)))
        return rc;
    if (v[1] && v[2])
        return pd__cfg_fail(
            c, v[2], PD_EINVAL,
            "at most one of basic_auth password & password_file must be configured");
    if (v[1] && (rc = pd__cfg_want_dup(c, v[1], "basic_auth.password", &o->basic_password)))
        return rc;
    if (v[2] &&
        (rc = pd__cfg_want_path(c, v[2], "basic_auth.password_file", &o->basic_password_file)))
        return rc;
    return 0;
}

static int parse_authz(pd__cfg_ctx *c, const yaml_node_t *n, pd_scrape_client *o)
{
    static const char *const keys[] = {"type", "credentials", "credentials_file", NULL};
    yaml_node_t *v[3];
    int rc = pd__cfg_map_keys(c, n, "authorization", keys, v);
    if (rc)
        return rc;
    if (v[0]) {
        if ((rc = pd__cfg_want_dup(c, v[0], "authorization.type", &o->auth_type)))
            return rc;
        if (!strcasecmp(o->auth_type, "basic"))
            return pd__cfg_fail(
                c, v[0], PD_EINVAL,
                "authorization type cannot be set to \"basic\", use \"basic_auth\" instead");
        if (!o->auth_type[0] || strpbrk(o->auth_type, " \t\r\n"))
            return pd__cfg_fail(c, v[0], PD_EINVAL, "authorization.type \"%.64s\" is not a token",
                                o->auth_type);
    } else if (!(o->auth_type = strdup("Bearer"))) {
        return PD_ENOMEM;
    }
    if (v[1] && v[2])
        return pd__cfg_fail(
            c, v[2], PD_EINVAL,
            "at most one of authorization credentials & credentials_file must be configured");
    if (v[1] && (rc = pd__cfg_want_dup(c, v[1], "authorization.credentials", &o->auth_credentials)))
        return rc;
    if (v[2] && (rc = pd__cfg_want_path(c, v[2], "authorization.credentials_file",
                                        &o->auth_credentials_file)))
        return rc;
    return 0;
}

static int parse_tls(pd__cfg_ctx *c, const yaml_node_t *n, pd_scrape_client *o)
{
    static const char *const keys[] = {
        "ca_file",     "cert_file", "key_file", "server_name", "insecure_skip_verify",
        "min_version", "ca",        "cert",     "key",         NULL};
    yaml_node_t *v[9];
    int rc = pd__cfg_map_keys(c, n, "tls_config", keys, v);
    if (rc)
        return rc;
    for (int i = 6; i < 9; i++)
        if (v[i])
            return pd__cfg_fail(c, v[i], PD_EINVAL,
                                "tls_config.%s (inline PEM) is not supported: give %s_file",
                                keys[i], keys[i]);
    if ((v[0] && (rc = pd__cfg_want_path(c, v[0], "tls_config.ca_file", &o->ca_file))) ||
        (v[1] && (rc = pd__cfg_want_path(c, v[1], "tls_config.cert_file", &o->cert_file))) ||
        (v[2] && (rc = pd__cfg_want_path(c, v[2], "tls_config.key_file", &o->key_file))) ||
        (v[3] && (rc = pd__cfg_want_dup(c, v[3], "tls_config.server_name", &o->server_name))) ||
        (v[4] && (rc = pd__cfg_want_bool(c, v[4], "tls_config.insecure_skip_verify",
                                         &o->insecure_skip_verify))))
        return rc;
    if (!o->cert_file != !o->key_file)
        return pd__cfg_fail(c, n, PD_EINVAL,
                            "tls_config: exactly one of key_file and cert_file is set: give both");
    if (v[5]) {
        const char *s;
        if ((rc = pd__cfg_want_str(c, v[5], "tls_config.min_version", &s)))
            return rc;
        static const char *const names[] = {"TLS10", "TLS11", "TLS12", "TLS13"};
        o->tls_min_version = 0;
        for (int i = 0; i < 4; i++)
            if (!strcmp(s, names[i]))
                o->tls_min_version = 10 + i;
        if (!o->tls_min_version)
            return pd__cfg_fail(c, v[5], PD_EINVAL,
                                "unknown TLS version \"%.32s\": want TLS10, TLS11, TLS12 or TLS13",
                                s);
    }
    return 0;
}

/* oauth2: client_id, client_secret | client_secret_file, token_url,
 * scopes, endpoint_params (Prometheus' common OAuth2 config; its own
 * tls_config and proxy_url are refused: the job's are used). */
static int parse_oauth2(pd__cfg_ctx *c, const yaml_node_t *n, pd_scrape_client *o)
{
    static const char *const keys[] = {"client_id",  "client_secret", "client_secret_file",
                                       "token_url",  "scopes",        "endpoint_params",
                                       "tls_config", "proxy_url",     NULL};
    yaml_node_t *v[8];
    int rc = pd__cfg_map_keys(c, n, "oauth2", keys, v);
    if (rc)
        return rc;
    for (int i = 6; i < 8; i++)
        if (v[i])
            return pd__cfg_fail(c, v[i], PD_EINVAL,
                                "oauth2.%s is not supported: the job's %s is used for the token "
                                "request",
                                keys[i], keys[i]);
    if (!v[3])
        return pd__cfg_fail(c, n, PD_EINVAL, "oauth2 needs a token_url");
    if (v[1] && v[2])
        return pd__cfg_fail(c, v[2], PD_EINVAL,
                            "at most one of oauth2 client_secret & client_secret_file must be "
                            "configured");
    if ((v[0] && (rc = pd__cfg_want_dup(c, v[0], "oauth2.client_id", &o->oauth2_client_id))) ||
        (v[1] &&
         (rc = pd__cfg_want_dup(c, v[1], "oauth2.client_secret", &o->oauth2_client_secret))) ||
        (v[2] && (rc = pd__cfg_want_path(c, v[2], "oauth2.client_secret_file",
                                         &o->oauth2_client_secret_file))) ||
        (rc = pd__cfg_want_dup(c, v[3], "oauth2.token_url", &o->oauth2_token_url)))
        return rc;
    if (strncmp(o->oauth2_token_url, "http://", 7) && strncmp(o->oauth2_token_url, "https://", 8))
        return pd__cfg_fail(c, v[3], PD_EINVAL, "oauth2.token_url \"%.128s\": want http(s)://",
                            o->oauth2_token_url);
    pd_buf b;
    pd_buf_init(&b, 65536);
    bool empty = true;
    if (v[4] && (rc = pd__cfg_want_seq(c, v[4], "oauth2.scopes", &empty)))
        return rc;
    for (yaml_node_item_t *it = empty ? NULL : v[4]->data.sequence.items.start;
         it && it < v[4]->data.sequence.items.top; it++) {
        const char *sc;
        if ((rc = pd__cfg_want_str(c, pd__cfg_node(c, *it), "oauth2.scopes item", &sc)) ||
            (rc = pd_buf_printf(&b, "%s%s", b.len ? " " : "", sc))) {
            pd_buf_release(&b);
            return rc == PD_ETOOBIG ? pd__cfg_fail(c, v[4], rc, "oauth2.scopes: over 64 KiB") : rc;
        }
    }
    if (b.len && (rc = pd_buf_append(&b, "", 1) ? PD_ENOMEM : 0) == 0 &&
        !(o->oauth2_scopes = strdup(b.data)))
        rc = PD_ENOMEM;
    pd_buf_release(&b);
    if (rc)
        return rc;
    pd_buf_init(&b, 65536);
    if (v[5]) {
        if ((rc = pd__cfg_want_map(c, v[5], "oauth2.endpoint_params", &empty)))
            return rc;
        for (yaml_node_pair_t *p = empty ? NULL : v[5]->data.mapping.pairs.start;
             p && p < v[5]->data.mapping.pairs.top && !rc; p++) {
            const char *k, *val;
            if ((rc = pd__cfg_free_key(c, v[5], p, "oauth2.endpoint_params", &k)) ||
                (rc =
                     pd__cfg_want_str(c, pd__cfg_node(c, p->value), "endpoint_params value", &val)))
                break;
            if (!(rc = pd_buf_append(&b, "&", 1)) && !(rc = pd__scrape_put_escaped(&b, k)) &&
                !(rc = pd_buf_append(&b, "=", 1)))
                rc = pd__scrape_put_escaped(&b, val);
        }
        if (!rc && b.len && !(rc = pd_buf_append(&b, "", 1)) &&
            !(o->oauth2_params = strdup(b.data)))
            rc = PD_ENOMEM;
    }
    pd_buf_release(&b);
    return rc;
}

int pd__cfg_parse_client(pd__cfg_ctx *c, yaml_node_t *const *v, const yaml_node_t *job_node,
                         pd_scrape_client *o)
{
    int rc;
    o->follow_redirects = true;
    o->enable_http2 = true;
    (void)job_node;
    if (v[PD_CFG_CL_BASIC_AUTH] && (rc = parse_basic(c, v[PD_CFG_CL_BASIC_AUTH], o)))
        return rc;
    /* as Prometheus: at most one of basic_auth, authorization, oauth2, bearer_token(_file) */
    const yaml_node_t *auths[] = {v[PD_CFG_CL_BASIC_AUTH], v[PD_CFG_CL_AUTHORIZATION],
                                  v[PD_CFG_CL_BEARER_TOKEN], v[PD_CFG_CL_BEARER_TOKEN_FILE],
                                  v[PD_CFG_CL_OAUTH2]};
    int na = 0;
    for (int i = 0; i < 5; i++)
        na += auths[i] != NULL;
    if (na > 1) {
        const yaml_node_t *second = NULL;
        for (int i = 0, seen = 0; i < 5; i++)
            if (auths[i] && ++seen == 2)
                second = auths[i];
        return pd__cfg_fail(c, second, PD_EINVAL,
                            "at most one of basic_auth, authorization, oauth2, bearer_token & "
                            "bearer_token_file must be configured");
    }
    if (v[PD_CFG_CL_OAUTH2] && (rc = parse_oauth2(c, v[PD_CFG_CL_OAUTH2], o)))
        return rc;
    if (v[PD_CFG_CL_AUTHORIZATION] && (rc = parse_authz(c, v[PD_CFG_CL_AUTHORIZATION], o)))
        return rc;
    if (v[PD_CFG_CL_BEARER_TOKEN] || v[PD_CFG_CL_BEARER_TOKEN_FILE]) {
        if (!(o->auth_type = strdup("Bearer")))
            return PD_ENOMEM;
        if (v[PD_CFG_CL_BEARER_TOKEN] &&
            (rc = pd__cfg_want_dup(c, v[PD_CFG_CL_BEARER_TOKEN], "bearer_token",
                                   &o->auth_credentials)))
            return rc;
        if (v[PD_CFG_CL_BEARER_TOKEN_FILE] &&
            (rc = pd__cfg_want_path(c, v[PD_CFG_CL_BEARER_TOKEN_FILE], "bearer_token_file",
                                    &o->auth_credentials_file)))
            return rc;
    }
    if (v[PD_CFG_CL_TLS_CONFIG] && (rc = parse_tls(c, v[PD_CFG_CL_TLS_CONFIG], o)))
        return rc;
    if (v[PD_CFG_CL_PROXY_URL]) {
        if ((rc = pd__cfg_want_dup(c, v[PD_CFG_CL_PROXY_URL], "proxy_url", &o->proxy_url)))
            return rc;
        if (strncmp(o->proxy_url, "http://", 7) && strncmp(o->proxy_url, "https://", 8) &&
            strncmp(o->proxy_url, "socks5://", 9))
            return pd__cfg_fail(c, v[PD_CFG_CL_PROXY_URL], PD_EINVAL,
                                "proxy_url \"%.128s\": want http://, https:// or socks5://",
                                o->proxy_url);
    }
    if (v[PD_CFG_CL_FOLLOW_REDIRECTS] &&
        (rc = pd__cfg_want_bool(c, v[PD_CFG_CL_FOLLOW_REDIRECTS], "follow_redirects",
                                &o->follow_redirects)))
        return rc;
    if (v[PD_CFG_CL_ENABLE_HTTP2] &&
        (rc = pd__cfg_want_bool(c, v[PD_CFG_CL_ENABLE_HTTP2], "enable_http2", &o->enable_http2)))
        return rc;
    return 0;
}

/* ---- relabel_configs ---- */

static int parse_rule(pd__cfg_ctx *c, const yaml_node_t *n, pd_relabel_rule *r)
{
    static const char *const keys[] = {"source_labels", "separator",   "target_label", "regex",
                                       "modulus",       "replacement", "action",       NULL};
    yaml_node_t *v[7];
    int rc;
    if (pd_yaml_is_null(n))
        return pd__cfg_fail(c, n, PD_EINVAL, "empty or null relabeling rule in scrape config");
    if ((rc = pd__cfg_map_keys(c, n, "relabel_configs entry", keys, v)))
        return rc;
    if (v[0]) {
        bool empty;
        if ((rc = pd__cfg_want_seq(c, v[0], "source_labels", &empty)))
            return rc;
        size_t cnt =
            empty ? 0 : (size_t)(v[0]->data.sequence.items.top - v[0]->data.sequence.items.start);
        if (cnt) {
            r->source_labels = calloc(cnt, sizeof *r->source_labels);
            if (!r->source_labels)
                return PD_ENOMEM;
        }
        for (size_t i = 0; i < cnt; i++) {
            yaml_node_t *it = pd__cfg_node(c, v[0]->data.sequence.items.start[i]);
            if (!it)
                return pd__cfg_fail(c, v[0], PD_EPARSE, "source_labels: broken YAML node");
            if ((rc = pd__cfg_want_dup(c, it, "source_labels item", &r->source_labels[i])))
                return rc;
            r->n_source++;
            if (!pd_label_name_valid(r->source_labels[i]))
                return pd__cfg_fail(c, it, PD_EINVAL, "\"%.64s\" is not a valid label name",
                                    r->source_labels[i]);
        }
    }
    char **strs[] = {&r->separator, &r->target_label, &r->regex, NULL, &r->replacement};
    static const char *const what[] = {"separator", "target_label", "regex", "", "replacement"};
    for (int i = 1; i <= 5; i++) {
        if (i == 4 || !v[i])
            continue;
        char *s;
        if ((rc = pd__cfg_want_dup(c, v[i], what[i - 1], &s)))
            return rc;
        free(*strs[i - 1]);
        *strs[i - 1] = s;
    }
    if (v[4]) {
        int64_t m;
        if ((rc = pd__cfg_want_int(c, v[4], "modulus", 0, INT64_MAX, &m)))
            return rc;
        r->modulus = (uint64_t)m;
    }
    if (v[6]) {
        const char *s;
        if ((rc = pd__cfg_want_str(c, v[6], "action", &s)))
            return rc;
        if (!*s)
            return pd__cfg_fail(c, v[6], PD_EINVAL, "relabel action cannot be empty");
        if (pd_relabel_action_parse(s, &r->action))
            return pd__cfg_fail(c, v[6], PD_EINVAL,
                                "unknown relabel action \"%.64s\": want replace, keep, drop, "
                                "keepequal, dropequal, hashmod, labelmap, labeldrop, labelkeep, "
                                "lowercase or uppercase",
                                s);
    }
    pd_err e;
    pd_err_clear(&e);
    if ((rc = pd_relabel_rule_compile(r, &e)))
        return rc == PD_ENOMEM ? rc : pd__cfg_fail(c, v[3] ? v[3] : n, rc, "%s", e.msg);
    if ((rc = pd_relabel_rule_validate(r, &e)))
        return pd__cfg_fail(c, n, rc, "%s", e.msg);
    return 0;
}

int pd__cfg_parse_relabel(pd__cfg_ctx *c, const yaml_node_t *n, pd_scrape_job *j)
{
    bool empty;
    int rc = pd__cfg_want_seq(c, n, "relabel_configs", &empty);
    if (rc || empty)
        return rc;
    size_t cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (cnt > 10000)
        return pd__cfg_fail(c, n, PD_ETOOBIG, "relabel_configs: %zu rules, over the limit of 10000",
                            cnt);
    j->relabel = calloc(cnt, sizeof *j->relabel);
    if (!j->relabel)
        return PD_ENOMEM;
    for (size_t i = 0; i < cnt; i++) {
        yaml_node_t *rn = pd__cfg_node(c, n->data.sequence.items.start[i]);
        if (!rn)
            return pd__cfg_fail(c, n, PD_EPARSE, "relabel_configs: broken YAML node");
        if ((rc = pd_relabel_rule_init(&j->relabel[i])))
            return rc;
        j->n_relabel++;
        if ((rc = parse_rule(c, rn, &j->relabel[i])))
            return rc;
    }
    return 0;
}

/* ---- file_sd_configs, http_sd_configs ---- */

/* Prometheus' file SD pattern rule: the last element may hold one '*'
 * glob, and the name ends in .json, .yml or .yaml. */
static bool sd_pattern_valid(const char *p)
{
    const char *base = strrchr(p, '/');
    base = base ? base + 1 : p;
    for (const char *q = p; q < base; q++)
        if (*q == '*' || *q == '?' || *q == '[')
            return false;
    const char *star = strchr(base, '*');
    if (star && strchr(star + 1, '*'))
        return false;
    if (strchr(base, '?') || strchr(base, '['))
        return false;
    static const char *const ext[] = {".json", ".yml", ".yaml", ".JSON", ".YML", ".YAML"};
    size_t n = strlen(base);
    for (int i = 0; i < 6; i++) {
        size_t el = strlen(ext[i]);
        if (n > el && !strcmp(base + n - el, ext[i]))
            return true;
    }
    return false;
}

static int parse_dns_sd(pd__cfg_ctx *c, const yaml_node_t *n, pd_sd_config *sd)
{
    static const char *const keys[] = {"names", "type", "port", "refresh_interval", NULL};
    yaml_node_t *v[4];
    int rc = pd__cfg_map_keys(c, n, "dns_sd_configs entry", keys, v);
    if (rc)
        return rc;
    sd->kind = PD_SD_DNS;
    sd->refresh_ms = 30 * 1000;
    sd->dns_type = ns_t_srv;
    if (v[3] && (rc = pd__cfg_want_duration(c, v[3], "refresh_interval", &sd->refresh_ms)))
        return rc;
    if (v[1]) {
        const char *t;
        if ((rc = pd__cfg_want_str(c, v[1], "type", &t)))
            return rc;
        if (!strcmp(t, "SRV"))
            sd->dns_type = ns_t_srv;
        else if (!strcmp(t, "A"))
            sd->dns_type = ns_t_a;
        else if (!strcmp(t, "AAAA"))
            sd->dns_type = ns_t_aaaa;
        else
            return pd__cfg_fail(c, v[1], PD_EINVAL,
                                "invalid DNS-SD records type \"%.32s\": want SRV, A or AAAA "
                                "(MX and NS are not supported)",
                                t);
    }
    if (v[2]) {
        int64_t p;
        if ((rc = pd__cfg_want_int(c, v[2], "port", 0, 65535, &p)))
            return rc;
        sd->port = (int)p;
    }
    if (sd->dns_type != ns_t_srv && sd->port == 0)
        return pd__cfg_fail(c, n, PD_EINVAL,
                            "a port is required in DNS-SD configs for all record types except SRV");
    bool empty = true;
    if (v[0] && (rc = pd__cfg_want_seq(c, v[0], "names", &empty)))
        return rc;
    size_t cnt =
        empty ? 0 : (size_t)(v[0]->data.sequence.items.top - v[0]->data.sequence.items.start);
    if (!cnt)
        return pd__cfg_fail(c, v[0] ? v[0] : n, PD_EINVAL,
                            "DNS-SD config must contain at least one SRV record name");
    sd->files = calloc(cnt, sizeof *sd->files);
    if (!sd->files)
        return PD_ENOMEM;
    for (size_t i = 0; i < cnt; i++) {
        yaml_node_t *f = pd__cfg_node(c, v[0]->data.sequence.items.start[i]);
        if (!f)
            return pd__cfg_fail(c, v[0], PD_EPARSE, "names: broken YAML node");
        if ((rc = pd__cfg_want_dup(c, f, "names item", &sd->files[i])))
            return rc;
        sd->n_files++;
        if (!sd->files[i][0] || strlen(sd->files[i]) > 253)
            return pd__cfg_fail(c, f, PD_EINVAL, "invalid DNS name \"%.64s\"", sd->files[i]);
    }
    return 0;
}

static int parse_role(pd__cfg_ctx *c, const yaml_node_t *n, const char *what, pd_k8s_role *out)
{
    const char *r;
    int rc = pd__cfg_want_str(c, n, what, &r);
    if (rc)
        return rc;
    for (int i = 0; i < PD_K8S_N_ROLES; i++)
        if (!strcmp(r, pd__k8s_role_names[i])) {
            *out = (pd_k8s_role)i;
            return 0;
        }
    return pd__cfg_fail(c, n, PD_EINVAL, "unknown Kubernetes SD role \"%.64s\"", r);
}

/* Kubernetes' field selector grammar (fields.ParseSelector): terms split
 * by unescaped ',', each key=value, key==value or key!=value with a
 * non-empty key. Returns the first term it cannot read (a static buffer),
 * or NULL when the selector is well formed ("" is). */
static const char *field_selector_bad_term(const char *sel)
{
    static _Thread_local char term[256];
    const char *p = sel;
    while (*p) {
        const char *st = p;
        while (*p && *p != ',') {
            if (*p == '\\' && p[1])
                p++;
            p++;
        }
        size_t n = (size_t)(p - st);
        const char *op = NULL;
        for (const char *q = st; q < p; q++) {
            if (*q == '\\' && q + 1 < p) {
                q++;
                continue;
            }
            if (*q == '=' || (*q == '!' && q + 1 < p && q[1] == '=')) {
                op = q;
                break;
            }
        }
        if (n && (!op || op == st)) {
            snprintf(term, sizeof term, "%.*s", (int)(n < 200 ? n : 200), st);
            return term;
        }
        if (*p == ',')
            p++;
    }
    return NULL;
}

/* kubernetes_sd_configs entry: role, api_server, kubeconfig_file,
 * namespaces {names, own_namespace}, selectors [{role, label, field}], and
 * the HTTP client keys (Prometheus' SDConfig rules: kubeconfig_file excludes
 * api_server and the client keys; each selector's role must be usable by
 * the entry's role). */
static int parse_k8s_sd(pd__cfg_ctx *c, const yaml_node_t *n, pd_sd_config *sd)
{
    enum { K_ROLE, K_API, K_KUBECONFIG, K_NS, K_SEL, K_ATTACH, K_CL, K_N = K_CL + PD_CFG_CL_N };
    const char *keys[K_N + 1] = {"role",       "api_server", "kubeconfig_file",
                                 "namespaces", "selectors",  "attach_metadata"};
    for (int i = 0; i < PD_CFG_CL_N; i++)
        keys[K_CL + i] = pd__cfg_client_keys[i];
    keys[K_N] = NULL;
    yaml_node_t *v[K_N];
    int rc = pd__cfg_map_keys(c, n, "kubernetes_sd_configs entry", keys, v);
    if (rc)
        return rc;
    sd->kind = PD_SD_K8S;
    if (!v[K_ROLE])
        return pd__cfg_fail(c, n, PD_EINVAL,
                            "role missing (one of: pod, service, endpoints, "
                            "endpointslice, node, ingress)");
    if ((rc = parse_role(c, v[K_ROLE], "role", &sd->role)))
        return rc;
    if (v[K_API] && (rc = pd__cfg_want_dup(c, v[K_API], "api_server", &sd->api_server)))
        return rc;
    if (sd->api_server && strncmp(sd->api_server, "http://", 7) &&
        strncmp(sd->api_server, "https://", 8))
        return pd__cfg_fail(c, v[K_API], PD_EINVAL,
                            "api_server \"%.128s\": want an http:// or https:// URL",
                            sd->api_server);
    if (v[K_KUBECONFIG] &&
        (rc = pd__cfg_want_path(c, v[K_KUBECONFIG], "kubeconfig_file", &sd->kubeconfig_file)))
        return rc;
    if (sd->kubeconfig_file && sd->api_server)
        return pd__cfg_fail(c, v[K_API], PD_EINVAL,
                            "cannot use 'kubeconfig_file' and 'api_server' simultaneously");
    bool has_client = false;
    for (int i = 0; i < PD_CFG_CL_N; i++)
        if (i != PD_CFG_CL_FOLLOW_REDIRECTS && i != PD_CFG_CL_ENABLE_HTTP2 && v[K_CL + i])
            has_client = true;
    if (sd->kubeconfig_file && has_client)
        return pd__cfg_fail(c, n, PD_EINVAL,
                            "cannot use a custom HTTP client configuration together with "
                            "'kubeconfig_file'");
    if (!sd->api_server && !sd->kubeconfig_file && has_client)
        return pd__cfg_fail(c, n, PD_EINVAL,
                            "to use custom HTTP client configuration please provide the "
                            "'api_server' URL explicitly");
    if (v[K_ATTACH])
        pd__cfg_warn(c, v[K_ATTACH], "attach_metadata ignored: node metadata is not attached");
    if (v[K_NS]) {
        static const char *const nkeys[] = {"names", "own_namespace", NULL};
        yaml_node_t *nv[2];
        if ((rc = pd__cfg_map_keys(c, v[K_NS], "namespaces", nkeys, nv)))
            return rc;
        if (nv[1] && (rc = pd__cfg_want_bool(c, nv[1], "own_namespace", &sd->own_namespace)))
            return rc;
        bool empty = true;
        if (nv[0] && (rc = pd__cfg_want_seq(c, nv[0], "namespaces.names", &empty)))
            return rc;
        size_t cnt =
            empty ? 0 : (size_t)(nv[0]->data.sequence.items.top - nv[0]->data.sequence.items.start);
        if (cnt > 1000)
            return pd__cfg_fail(c, nv[0], PD_ETOOBIG, "%zu namespaces, over the limit of 1000",
                                cnt);
        if (cnt && !(sd->files = calloc(cnt, sizeof *sd->files)))
            return PD_ENOMEM;
        for (size_t i = 0; i < cnt; i++) {
            yaml_node_t *f = pd__cfg_node(c, nv[0]->data.sequence.items.start[i]);
            if (!f)
                return pd__cfg_fail(c, nv[0], PD_EPARSE, "names: broken YAML node");
            if ((rc = pd__cfg_want_dup(c, f, "namespaces.names item", &sd->files[i])))
                return rc;
            sd->n_files++;
            if (!sd->files[i][0] || strlen(sd->files[i]) > 253 ||
                strspn(sd->files[i], "abcdefghijklmnopqrstuvwxyz0123456789-.") !=
                    strlen(sd->files[i]))
                return pd__cfg_fail(c, f, PD_EINVAL, "invalid namespace \"%.64s\"", sd->files[i]);
        }
    }
    /* Prometheus: own_namespace is the pod's own namespace, which only the
     * in-cluster configuration knows */
    if (sd->own_namespace && sd->api_server)
        return pd__cfg_fail(
            c, v[K_NS], PD_EINVAL,
            "cannot use 'api_server' and 'namespaces.own_namespace' simultaneously");
    if (sd->own_namespace && sd->kubeconfig_file)
        return pd__cfg_fail(c, v[K_NS], PD_EINVAL,
                            "cannot use 'kubeconfig_file' and 'namespaces.own_namespace' "
                            "simultaneously");
    if (v[K_SEL]) {
        bool empty = true;
        if ((rc = pd__cfg_want_seq(c, v[K_SEL], "selectors", &empty)))
            return rc;
        size_t cnt =
            empty
                ? 0
                : (size_t)(v[K_SEL]->data.sequence.items.top - v[K_SEL]->data.sequence.items.start);
        if (cnt > 16)
            return pd__cfg_fail(c, v[K_SEL], PD_ETOOBIG, "%zu selectors, over the limit of 16",
                                cnt);
        if (cnt && !(sd->selectors = calloc(cnt, sizeof *sd->selectors)))
            return PD_ENOMEM;
        for (size_t i = 0; i < cnt; i++) {
            static const char *const skeys[] = {"role", "label", "field", NULL};
            yaml_node_t *sv[3], *e = pd__cfg_node(c, v[K_SEL]->data.sequence.items.start[i]);
            if (!e)
                return pd__cfg_fail(c, v[K_SEL], PD_EPARSE, "selectors: broken YAML node");
            pd_k8s_selector *s = &sd->selectors[sd->n_selectors++];
            if ((rc = pd__cfg_map_keys(c, e, "selectors entry", skeys, sv)))
                return rc;
            if (!sv[0])
                return pd__cfg_fail(c, e, PD_EINVAL, "selectors entry needs a role");
            if ((rc = parse_role(c, sv[0], "selectors role", &s->role)) ||
                (sv[1] && (rc = pd__cfg_want_dup(c, sv[1], "selectors label", &s->label))) ||
                (sv[2] && (rc = pd__cfg_want_dup(c, sv[2], "selectors field", &s->field))))
                return rc;
            const char *bad = s->field ? field_selector_bad_term(s->field) : NULL;
            if (bad)
                return pd__cfg_fail(c, sv[2], PD_EINVAL,
                                    "invalid selector: '%.128s'; can't understand '%.128s'",
                                    s->field, bad);
            for (size_t k = 0; k + 1 < sd->n_selectors; k++)
                if (sd->selectors[k].role == s->role)
                    return pd__cfg_fail(c, sv[0], PD_EINVAL, "duplicated selector role: %s",
                                        pd__cfg_sval(sv[0]));
            bool ok = s->role == sd->role ||
                      ((sd->role == PD_K8S_ENDPOINTS || sd->role == PD_K8S_ENDPOINTSLICE) &&
                       (s->role == PD_K8S_POD || s->role == PD_K8S_SERVICE));
            if (!ok)
                return pd__cfg_fail(c, sv[0], PD_EINVAL,
                                    "selector role \"%s\" is not usable with the role of this "
                                    "kubernetes_sd_configs entry",
                                    pd__cfg_sval(sv[0]));
        }
    }
    return pd__cfg_parse_client(c, &v[K_CL], n, &sd->client);
}

static int parse_one_sd(pd__cfg_ctx *c, const yaml_node_t *n, pd_sd_kind kind, pd_sd_config *sd)
{
    if (kind == PD_SD_DNS)
        return parse_dns_sd(c, n, sd);
    if (kind == PD_SD_K8S)
        return parse_k8s_sd(c, n, sd);
    enum { K_URL, K_REFRESH, K_CL, K_N = K_CL + PD_CFG_CL_N };
    static const char *const fkeys[] = {"files", "refresh_interval", NULL};
    const char *hkeys[K_N + 1] = {"url", "refresh_interval"};
    for (int i = 0; i < PD_CFG_CL_N; i++)
        hkeys[K_CL + i] = pd__cfg_client_keys[i];
    hkeys[K_N] = NULL;
    yaml_node_t *v[K_N];
    memset(v, 0, sizeof v);
    const char *what = kind == PD_SD_FILE ? "file_sd_configs entry" : "http_sd_configs entry";
    int rc = pd__cfg_map_keys(c, n, what, kind == PD_SD_FILE ? fkeys : hkeys, v);
    if (rc)
        return rc;
    if (kind == PD_SD_HTTP && (rc = pd__cfg_parse_client(c, &v[K_CL], n, &sd->client)))
        return rc;
    sd->kind = kind;
    sd->refresh_ms = kind == PD_SD_FILE ? 5 * 60 * 1000 : 60 * 1000;
    if (v[1] && (rc = pd__cfg_want_duration(c, v[1], "refresh_interval", &sd->refresh_ms)))
        return rc;
    if (kind == PD_SD_HTTP) {
        if (!v[0])
            return pd__cfg_fail(c, n, PD_EINVAL, "http_sd_configs entry needs a url");
        if ((rc = pd__cfg_want_dup(c, v[0], "url", &sd->url)))
            return rc;
        if (strncmp(sd->url, "http://", 7) && strncmp(sd->url, "https://", 8))
            return pd__cfg_fail(c, v[0], PD_EINVAL,
                                "URL scheme must be 'http' or 'https': \"%.128s\"", sd->url);
        return 0;
    }
    bool empty = true;
    if (v[0] && (rc = pd__cfg_want_seq(c, v[0], "files", &empty)))
        return rc;
    size_t cnt =
        empty ? 0 : (size_t)(v[0]->data.sequence.items.top - v[0]->data.sequence.items.start);
    if (!cnt)
        return pd__cfg_fail(c, v[0] ? v[0] : n, PD_EINVAL,
                            "file service discovery config must contain at least one path name");
    sd->files = calloc(cnt, sizeof *sd->files);
    if (!sd->files)
        return PD_ENOMEM;
    for (size_t i = 0; i < cnt; i++) {
        yaml_node_t *f = pd__cfg_node(c, v[0]->data.sequence.items.start[i]);
        if (!f)
            return pd__cfg_fail(c, v[0], PD_EPARSE, "files: broken YAML node");
        if ((rc = pd__cfg_want_path(c, f, "files item", &sd->files[i])))
            return rc;
        sd->n_files++;
        if (!sd_pattern_valid(sd->files[i]))
            return pd__cfg_fail(c, f, PD_EINVAL,
                                "path name \"%.200s\" is not valid for file discovery (one '*' in "
                                "the file name at most, ending in .json, .yml or .yaml)",
                                sd->files[i]);
    }
    return 0;
}

int pd__cfg_parse_sd(pd__cfg_ctx *c, const yaml_node_t *n, pd_sd_kind kind, pd_scrape_job *j)
{
    bool empty;
    const char *what = kind == PD_SD_FILE   ? "file_sd_configs"
                       : kind == PD_SD_HTTP ? "http_sd_configs"
                       : kind == PD_SD_K8S  ? "kubernetes_sd_configs"
                                            : "dns_sd_configs";
    int rc = pd__cfg_want_seq(c, n, what, &empty);
    if (rc || empty)
        return rc;
    size_t cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (cnt > 1000)
        return pd__cfg_fail(c, n, PD_ETOOBIG, "%s: %zu entries, over the limit of 1000", what, cnt);
    pd_sd_config *v = realloc(j->sd, (j->n_sd + cnt) * sizeof *v);
    if (!v)
        return PD_ENOMEM;
    j->sd = v;
    for (size_t i = 0; i < cnt; i++) {
        yaml_node_t *e = pd__cfg_node(c, n->data.sequence.items.start[i]);
        if (!e)
            return pd__cfg_fail(c, n, PD_EPARSE, "%s: broken YAML node", what);
        memset(&j->sd[j->n_sd], 0, sizeof *j->sd);
        j->n_sd++;
        if ((rc = parse_one_sd(c, e, kind, &j->sd[j->n_sd - 1])))
            return rc;
    }
    return 0;
}
