/*
 * scrape/config.c — reads profd's YAML configuration (format and rules in
 * config.h) with libyaml's document API.
 *
 * How it works: yaml_parser_load builds the node graph of the (first)
 * document; every node carries its start mark (0-based line and column, shown
 * 1-based in messages). The walk is strict: each mapping is checked for
 * unknown and duplicate keys before its values are read, and every value is
 * checked for its YAML kind. Job values that depend on `global` (intervals,
 * timeouts, the CPU seconds) are computed after `global` is read, whatever
 * the order of the top-level keys. Aliases share nodes in libyaml's
 * document, so a "billion laughs" file cannot blow up memory; the walk also
 * counts visited nodes against a cap so it cannot blow up time.
 *
 * Ownership: everything in a pd_config is heap memory freed by
 * pd_config_release; on error `out` is left empty (pd_config_init).
 */
#include "scrape/config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "base/time.h"

#define DEFAULT_INTERVAL_MS 10000
#define DEFAULT_TIMEOUT_MS 10000
#define MAX_CONFIG_BYTES (16u << 20) /* a config file over 16 MiB is refused */
#define MAX_VISITS 1000000           /* nodes walked (aliases count each time) */

typedef struct ctx {
    yaml_document_t doc;
    const char *name;
    pd_err *err;
    size_t visits;
} ctx;

/* ---- errors ---- */

static int fail(ctx *c, const yaml_node_t *n, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(ctx *c, const yaml_node_t *n, int code, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n)
        return pd_err_set(c->err, code, "%s:%zu:%zu: %s", c->name, n->start_mark.line + 1,
                          n->start_mark.column + 1, msg);
    return pd_err_set(c->err, code, "%s: %s", c->name, msg);
}

static const char *kind_name(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_SCALAR_NODE:
        return "a scalar";
    case YAML_SEQUENCE_NODE:
        return "a list";
    case YAML_MAPPING_NODE:
        return "a mapping";
    default:
        return "nothing";
    }
}

/* ---- node helpers ---- */

static yaml_node_t *node(ctx *c, int id)
{
    return yaml_document_get_node(&c->doc, id);
}

static int visit(ctx *c, const yaml_node_t *n)
{
    if (++c->visits > MAX_VISITS)
        return fail(c, n, PD_ETOOBIG,
                    "configuration too large: over %d YAML nodes (aliases count each use)",
                    MAX_VISITS);
    return 0;
}

static bool is_null(const yaml_node_t *n)
{
    if (!n)
        return true;
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *v = (const char *)n->data.scalar.value;
    return n->data.scalar.length == 0 || !strcmp(v, "~") || !strcmp(v, "null") ||
           !strcmp(v, "Null") || !strcmp(v, "NULL");
}

static const char *sval(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

/* A mapping, or null (treated as empty: *is_empty set). */
static int want_map(ctx *c, const yaml_node_t *n, const char *what, bool *is_empty)
{
    int rc = visit(c, n);
    if (rc)
        return rc;
    *is_empty = false;
    if (is_null(n)) {
        *is_empty = true;
        return 0;
    }
    if (n->type != YAML_MAPPING_NODE)
        return fail(c, n, PD_EINVAL, "%s: expected a mapping, got %s", what, kind_name(n));
    return 0;
}

static int want_seq(ctx *c, const yaml_node_t *n, const char *what, bool *is_empty)
{
    int rc = visit(c, n);
    if (rc)
        return rc;
    *is_empty = false;
    if (is_null(n)) {
        *is_empty = true;
        return 0;
    }
    if (n->type != YAML_SEQUENCE_NODE)
        return fail(c, n, PD_EINVAL, "%s: expected a list, got %s", what, kind_name(n));
    return 0;
}

/* A scalar's text (borrowed from the document). Nul bytes are refused. */
static int want_str(ctx *c, const yaml_node_t *n, const char *what, const char **out)
{
    int rc = visit(c, n);
    if (rc)
        return rc;
    if (n->type != YAML_SCALAR_NODE)
        return fail(c, n, PD_EINVAL, "%s: expected a string, got %s", what, kind_name(n));
    if (strlen(sval(n)) != n->data.scalar.length)
        return fail(c, n, PD_EINVAL, "%s: contains a NUL character", what);
    *out = sval(n);
    return 0;
}

static int want_dup(ctx *c, const yaml_node_t *n, const char *what, char **out)
{
    const char *s;
    int rc = want_str(c, n, what, &s);
    if (rc)
        return rc;
    *out = strdup(s);
    return *out ? 0 : PD_ENOMEM;
}

static int want_bool(ctx *c, const yaml_node_t *n, const char *what, bool *out)
{
    const char *s;
    int rc = want_str(c, n, what, &s);
    if (rc)
        return rc;
    if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
        if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")) {
            *out = true;
            return 0;
        }
        if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")) {
            *out = false;
            return 0;
        }
    }
    return fail(c, n, PD_EINVAL, "%s: expected true or false, got \"%.64s\"", what, s);
}

static int want_int(ctx *c, const yaml_node_t *n, const char *what, int64_t min, int64_t max,
                    int64_t *out)
{
    const char *s;
    int rc = want_str(c, n, what, &s);
    if (rc)
        return rc;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE || !*s || *end || errno)
        return fail(c, n, PD_EINVAL, "%s: expected an integer, got \"%.64s\"", what, s);
    if (v < min || v > max)
        return fail(c, n, PD_EINVAL, "%s: %lld is out of range [%lld, %lld]", what, v,
                    (long long)min, (long long)max);
    *out = v;
    return 0;
}

static int want_duration(ctx *c, const yaml_node_t *n, const char *what, int64_t *out)
{
    const char *s;
    int rc = want_str(c, n, what, &s);
    if (rc)
        return rc;
    pd_err e;
    pd_err_clear(&e);
    if (pd_parse_duration(s, out, &e))
        return fail(c, n, PD_EINVAL, "%s: %s", what, e.msg);
    if (*out <= 0)
        return fail(c, n, PD_EINVAL, "%s: must be greater than 0, got \"%.64s\"", what, s);
    return 0;
}

/*
 * Checks a mapping's keys against `known` (NULL-terminated) and returns the
 * value node of each in vals[] (NULL when absent). Unknown and duplicate keys
 * are errors. An empty (null) mapping gives all NULLs.
 */
static int map_keys(ctx *c, const yaml_node_t *m, const char *what, const char *const *known,
                    yaml_node_t **vals)
{
    size_t nk = 0;
    while (known[nk])
        vals[nk++] = NULL;
    bool empty;
    int rc = want_map(c, m, what, &empty);
    if (rc || empty)
        return rc;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node(c, p->key), *v = node(c, p->value);
        const char *ks;
        if (!k || !v)
            return fail(c, m, PD_EPARSE, "%s: broken YAML node", what);
        if ((rc = want_str(c, k, what, &ks)))
            return rc;
        size_t i = 0;
        while (i < nk && strcmp(known[i], ks) != 0)
            i++;
        if (i == nk)
            return fail(c, k, PD_EINVAL, "unknown key \"%.64s\" in %s", ks, what);
        if (vals[i])
            return fail(c, k, PD_EINVAL, "duplicate key \"%s\" in %s (first at line %zu)", ks, what,
                        vals[i]->start_mark.line + 1);
        vals[i] = v;
    }
    return 0;
}

/* For mappings with free-form keys: the key node of pair p, checked to be a
 * string and not repeated earlier in the mapping. */
static int free_key(ctx *c, const yaml_node_t *m, yaml_node_pair_t *p, const char *what,
                    const char **key)
{
    yaml_node_t *k = node(c, p->key);
    if (!k || !node(c, p->value))
        return fail(c, m, PD_EPARSE, "%s: broken YAML node", what);
    int rc = want_str(c, k, what, key);
    if (rc)
        return rc;
    for (yaml_node_pair_t *q = m->data.mapping.pairs.start; q < p; q++) {
        yaml_node_t *qk = node(c, q->key);
        if (qk->type == YAML_SCALAR_NODE && !strcmp(sval(qk), *key))
            return fail(c, k, PD_EINVAL, "duplicate key \"%.64s\" in %s (first at line %zu)", *key,
                        what, qk->start_mark.line + 1);
    }
    return 0;
}

/* ---- rules ---- */

int64_t pd_config_default_cpu_seconds(int64_t timeout_ms)
{
    /* ceil(T/10) without T + 9, which overflows for T near INT64_MAX */
    int64_t margin = timeout_ms / 10 + (timeout_ms % 10 > 0);
    if (margin < 1000)
        margin = 1000;
    int64_t s = (timeout_ms - margin) / 1000;
    return s < 1 ? 1 : s;
}

int64_t pd_config_endpoint_timeout_ms(int64_t job_timeout_ms, int64_t seconds)
{
    if (seconds <= 0)
        return job_timeout_ms;
    if (seconds > (INT64_MAX - 1000) / 1100)
        return INT64_MAX; /* window + margin would overflow: saturate */
    int64_t margin = seconds * 100 > 1000 ? seconds * 100 : 1000;
    int64_t need = seconds * 1000 + margin;
    return need > job_timeout_ms ? need : job_timeout_ms;
}

/* ---- release ---- */

static void endpoint_release(pd_pprof_endpoint *e)
{
    free(e->name);
    free(e->path);
}

static void job_release(pd_scrape_job *j)
{
    free(j->job_name);
    free(j->scheme);
    pd_labels_release(&j->params);
    for (size_t i = 0; i < j->n_query; i++) {
        free(j->query[i].name);
        free(j->query[i].value);
    }
    free(j->query);
    for (size_t i = 0; i < j->n_static_configs; i++) {
        pd_static_config *sc = &j->static_configs[i];
        for (size_t k = 0; k < sc->n_targets; k++)
            free(sc->targets[k]);
        free(sc->targets);
        pd_labels_release(&sc->labels);
    }
    free(j->static_configs);
    for (size_t i = 0; i < j->n_endpoints; i++)
        endpoint_release(&j->endpoints[i]);
    free(j->endpoints);
    memset(j, 0, sizeof *j);
}

void pd_config_init(pd_config *c)
{
    memset(c, 0, sizeof *c);
    c->scrape_interval_ms = DEFAULT_INTERVAL_MS;
    c->scrape_timeout_ms = DEFAULT_TIMEOUT_MS;
}

void pd_config_release(pd_config *c)
{
    for (size_t i = 0; i < c->n_jobs; i++)
        job_release(&c->jobs[i]);
    free(c->jobs);
    pd_config_init(c);
}

/* ---- sections ---- */

static int parse_global(ctx *c, const yaml_node_t *g, pd_config *cfg)
{
    static const char *const keys[] = {"scrape_interval", "scrape_timeout", NULL};
    yaml_node_t *v[2];
    int rc = map_keys(c, g, "global", keys, v);
    if (rc)
        return rc;
    if (v[0] && (rc = want_duration(c, v[0], "global.scrape_interval", &cfg->scrape_interval_ms)))
        return rc;
    if (v[1]) {
        if ((rc = want_duration(c, v[1], "global.scrape_timeout", &cfg->scrape_timeout_ms)))
            return rc;
        if (cfg->scrape_timeout_ms > cfg->scrape_interval_ms) {
            char t[32], i[32];
            pd_format_duration(cfg->scrape_timeout_ms, t, sizeof t);
            pd_format_duration(cfg->scrape_interval_ms, i, sizeof i);
            return fail(c, v[1], PD_EINVAL,
                        "global.scrape_timeout (%s) is greater than global.scrape_interval (%s)", t,
                        i);
        }
    } else {
        cfg->scrape_timeout_ms = cfg->scrape_interval_ms < DEFAULT_TIMEOUT_MS
                                     ? cfg->scrape_interval_ms
                                     : DEFAULT_TIMEOUT_MS;
    }
    return 0;
}

static int add_query(pd_scrape_job *j, const char *name, const char *value)
{
    pd_scrape_param *q = realloc(j->query, (j->n_query + 1) * sizeof *q);
    if (!q)
        return PD_ENOMEM;
    j->query = q;
    q[j->n_query].name = strdup(name);
    q[j->n_query].value = strdup(value);
    j->n_query++;
    if (!q[j->n_query - 1].name || !q[j->n_query - 1].value)
        return PD_ENOMEM;
    return 0;
}

static int parse_params(ctx *c, const yaml_node_t *m, pd_scrape_job *j)
{
    bool empty;
    int rc = want_map(c, m, "params", &empty);
    if (rc || empty)
        return rc;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        const char *name;
        if ((rc = free_key(c, m, p, "params", &name)))
            return rc;
        if (!*name)
            return fail(c, node(c, p->key), PD_EINVAL, "params: empty parameter name");
        yaml_node_t *v = node(c, p->value);
        bool e2;
        if ((rc = want_seq(c, v, "params value (a list of strings)", &e2)))
            return rc;
        if (e2)
            continue;
        bool first = true;
        for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
             it++) {
            const char *s;
            yaml_node_t *item = node(c, *it);
            if (!item)
                return fail(c, v, PD_EPARSE, "params: broken YAML node");
            if ((rc = want_str(c, item, "params value", &s)))
                return rc;
            if ((rc = add_query(j, name, s)))
                return rc;
            if (first && pd_label_name_valid(name) &&
                pd_labels_set(&j->params, name, s, NULL) == PD_ENOMEM)
                return PD_ENOMEM;
            first = false;
        }
    }
    return 0;
}

/* host[:port] or [v6]:port; no scheme, path, spaces or userinfo. */
static bool target_valid(const char *t)
{
    if (!*t || strlen(t) > 1024)
        return false;
    for (const char *p = t; *p; p++)
        if ((unsigned char)*p <= ' ' || strchr("/?#@\\\"'<>", *p))
            return false;
    const char *host_end = t + strlen(t);
    const char *port = NULL;
    if (t[0] == '[') {
        const char *rb = strchr(t, ']');
        if (!rb || rb == t + 1)
            return false;
        if (rb[1] == ':')
            port = rb + 2;
        else if (rb[1])
            return false;
    } else {
        const char *colon = strrchr(t, ':');
        if (colon) {
            if (strchr(t, ':') != colon) /* bare IPv6 needs brackets */
                return false;
            port = colon + 1;
            host_end = colon;
        }
        if (host_end == t)
            return false;
    }
    if (port) {
        if (!*port || strlen(port) > 5)
            return false;
        long v = 0;
        for (const char *p = port; *p; p++) {
            if (*p < '0' || *p > '9')
                return false;
            v = v * 10 + (*p - '0');
        }
        if (v < 1 || v > 65535)
            return false;
    }
    return true;
}

static int parse_static(ctx *c, const yaml_node_t *n, pd_static_config *sc)
{
    static const char *const keys[] = {"targets", "labels", NULL};
    yaml_node_t *v[2];
    int rc = map_keys(c, n, "static_configs entry", keys, v);
    if (rc)
        return rc;
    bool empty = true;
    if (v[0] && (rc = want_seq(c, v[0], "targets", &empty)))
        return rc;
    if (!empty && v[0]->data.sequence.items.top == v[0]->data.sequence.items.start)
        empty = true;
    if (empty)
        return fail(c, v[0] ? v[0] : n, PD_EINVAL,
                    "static_configs entry has no targets: want targets: [\"host:port\", ...]");
    size_t cnt = (size_t)(v[0]->data.sequence.items.top - v[0]->data.sequence.items.start);
    sc->targets = calloc(cnt, sizeof *sc->targets);
    if (!sc->targets)
        return PD_ENOMEM;
    for (size_t i = 0; i < cnt; i++) {
        yaml_node_t *t = node(c, v[0]->data.sequence.items.start[i]);
        if (!t)
            return fail(c, v[0], PD_EPARSE, "targets: broken YAML node");
        if ((rc = want_dup(c, t, "target", &sc->targets[i])))
            return rc;
        sc->n_targets++;
        if (!target_valid(sc->targets[i]))
            return fail(c, t, PD_EINVAL,
                        "invalid target \"%.128s\": want host:port (no scheme, no path)",
                        sc->targets[i]);
        for (size_t k = 0; k < i; k++)
            if (!strcmp(sc->targets[k], sc->targets[i]))
                return fail(c, t, PD_EINVAL,
                            "duplicate target \"%.128s\" in this static_configs entry",
                            sc->targets[i]);
    }
    if (v[1]) {
        const yaml_node_t *m = v[1];
        if ((rc = want_map(c, m, "labels", &empty)))
            return rc;
        if (!empty) {
            for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top;
                 p++) {
                const char *name, *val;
                if ((rc = free_key(c, m, p, "labels", &name)))
                    return rc;
                yaml_node_t *k = node(c, p->key);
                if (!pd_label_name_valid(name))
                    return fail(c, k, PD_EINVAL,
                                "invalid label name \"%.64s\": must match [a-zA-Z_][a-zA-Z0-9_]*",
                                name);
                if (name[0] == '_' && name[1] == '_')
                    return fail(
                        c, k, PD_EINVAL,
                        "label name \"%.64s\" is reserved (names starting with \"__\" are profd's)",
                        name);
                if ((rc = want_str(c, node(c, p->value), "label value", &val)))
                    return rc;
                pd_err e;
                pd_err_clear(&e);
                if ((rc = pd_labels_set(&sc->labels, name, val, &e)))
                    return rc == PD_ENOMEM ? rc : fail(c, k, rc, "%s", e.msg);
            }
        }
    }
    return 0;
}

/* The job's pprof_config, unmerged. */
typedef struct ep_cfg {
    const char *name;
    yaml_node_t *node;
    const char *path;
    int has_enabled, enabled;
    int has_seconds;
    int64_t seconds;
    int delta;
} ep_cfg;

static int add_endpoint(pd_scrape_job *j, const char *name, const char *path, bool enabled,
                        int64_t seconds, bool delta)
{
    pd_pprof_endpoint *e = realloc(j->endpoints, (j->n_endpoints + 1) * sizeof *e);
    if (!e)
        return PD_ENOMEM;
    j->endpoints = e;
    e = &e[j->n_endpoints++];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    e->path = strdup(path);
    e->enabled = enabled;
    e->seconds = seconds;
    e->delta = delta;
    e->timeout_ms = pd_config_endpoint_timeout_ms(j->timeout_ms, seconds);
    return e->name && e->path ? 0 : PD_ENOMEM;
}

static int parse_profiling(ctx *c, const yaml_node_t *n, pd_scrape_job *j)
{
    static const char *const keys[] = {"pprof_config", NULL};
    static const char *const ekeys[] = {"path", "enabled", "seconds", "delta", NULL};
    static const char *const defaults[] = {"allocs", "block",        "goroutine", "heap",
                                           "mutex",  "threadcreate", "cpu"};
    yaml_node_t *v[1];
    ep_cfg *eps = NULL;
    size_t n_eps = 0;
    int rc = 0;
    if (n && (rc = map_keys(c, n, "profiling_config", keys, v)))
        return rc;
    const yaml_node_t *pc = n ? v[0] : NULL;
    bool empty = true;
    if (pc && (rc = want_map(c, pc, "pprof_config", &empty)))
        return rc;
    if (!empty) {
        size_t cnt = (size_t)(pc->data.mapping.pairs.top - pc->data.mapping.pairs.start);
        eps = calloc(cnt, sizeof *eps);
        if (!eps)
            return PD_ENOMEM;
        for (yaml_node_pair_t *p = pc->data.mapping.pairs.start; p < pc->data.mapping.pairs.top;
             p++) {
            ep_cfg *e = &eps[n_eps++];
            yaml_node_t *k = node(c, p->key), *ev[4];
            if ((rc = free_key(c, pc, p, "pprof_config", &e->name)))
                goto out;
            e->node = k;
            if (!pd_label_name_valid(e->name)) {
                rc = fail(c, k, PD_EINVAL,
                          "invalid profile type name \"%.64s\": must match [a-zA-Z_][a-zA-Z0-9_]*",
                          e->name);
                goto out;
            }
            char what[128];
            snprintf(what, sizeof what, "pprof_config.%s", e->name);
            if ((rc = map_keys(c, node(c, p->value), what, ekeys, ev)))
                goto out;
            if (ev[0]) {
                if ((rc = want_str(c, ev[0], "path", &e->path)))
                    goto out;
                if (e->path[0] != '/') {
                    rc = fail(c, ev[0], PD_EINVAL, "%s.path \"%.128s\" must start with \"/\"", what,
                              e->path);
                    goto out;
                }
                for (const char *q = e->path; *q; q++)
                    if ((unsigned char)*q <= ' ' || *q == '#' || *q == '?') {
                        rc = fail(c, ev[0], PD_EINVAL,
                                  "%s.path \"%.128s\" has a space, '?' or '#': give query "
                                  "parameters with params",
                                  what, e->path);
                        goto out;
                    }
            }
            if (ev[1]) {
                bool b;
                if ((rc = want_bool(c, ev[1], "enabled", &b)))
                    goto out;
                e->has_enabled = 1;
                e->enabled = b;
            }
            if (ev[2]) {
                if ((rc = want_int(c, ev[2], "seconds", 0, INT32_MAX, &e->seconds)))
                    goto out;
                if (e->seconds * 1000 > j->interval_ms) {
                    char iv[32];
                    pd_format_duration(j->interval_ms, iv, sizeof iv);
                    rc = fail(c, ev[2], PD_EINVAL,
                              "%s.seconds (%lld) is longer than the scrape_interval (%s)", what,
                              (long long)e->seconds, iv);
                    goto out;
                }
                e->has_seconds = 1;
            }
            if (ev[3]) {
                bool b;
                if ((rc = want_bool(c, ev[3], "delta", &b)))
                    goto out;
                e->delta = b;
            }
        }
    }
    /* Defaults first, in Go's order, overridden by name; then custom types. */
    for (size_t d = 0; d < sizeof defaults / sizeof *defaults; d++) {
        const char *name = defaults[d];
        bool cpu = !strcmp(name, "cpu");
        char path[64];
        snprintf(path, sizeof path, "/debug/pprof/%s", cpu ? "profile" : name);
        bool enabled = true, delta = false;
        int64_t seconds = cpu ? pd_config_default_cpu_seconds(j->timeout_ms) : 0;
        const char *p = path;
        for (size_t i = 0; i < n_eps; i++) {
            if (strcmp(eps[i].name, name) != 0)
                continue;
            if (eps[i].path)
                p = eps[i].path;
            if (eps[i].has_enabled)
                enabled = eps[i].enabled;
            if (eps[i].has_seconds)
                seconds = eps[i].seconds;
            delta = eps[i].delta;
        }
        if ((rc = add_endpoint(j, name, p, enabled, seconds, delta)))
            goto out;
    }
    for (size_t i = 0; i < n_eps; i++) {
        bool known = false;
        for (size_t d = 0; d < sizeof defaults / sizeof *defaults; d++)
            known |= !strcmp(eps[i].name, defaults[d]);
        if (known)
            continue;
        if (!eps[i].path) {
            rc = fail(c, eps[i].node, PD_EINVAL,
                      "profile type \"%.64s\" is not one of the defaults and needs a path",
                      eps[i].name);
            goto out;
        }
        if ((rc = add_endpoint(j, eps[i].name, eps[i].path,
                               eps[i].has_enabled ? eps[i].enabled : true,
                               eps[i].has_seconds ? eps[i].seconds : 0, eps[i].delta)))
            goto out;
    }
out:
    free(eps);
    return rc;
}

static int parse_job(ctx *c, const yaml_node_t *n, const pd_config *cfg, pd_scrape_job *j)
{
    static const char *const keys[] = {"job_name", "scrape_interval", "scrape_timeout",   "scheme",
                                       "params",   "static_configs",  "profiling_config", NULL};
    enum { K_NAME, K_INTERVAL, K_TIMEOUT, K_SCHEME, K_PARAMS, K_STATIC, K_PROFILING };
    yaml_node_t *v[7];
    bool empty;
    int rc;
    if ((rc = want_map(c, n, "scrape_configs entry", &empty)))
        return rc;
    if (empty)
        return fail(c, n, PD_EINVAL, "empty scrape_configs entry: job_name is required");
    if ((rc = map_keys(c, n, "scrape_configs entry", keys, v)))
        return rc;
    if (!v[K_NAME])
        return fail(c, n, PD_EINVAL, "scrape_configs entry has no job_name");
    if ((rc = want_dup(c, v[K_NAME], "job_name", &j->job_name)))
        return rc;
    if (!j->job_name[0])
        return fail(c, v[K_NAME], PD_EINVAL, "job_name is empty");
    for (size_t i = 0; i < cfg->n_jobs; i++)
        if (!strcmp(cfg->jobs[i].job_name, j->job_name))
            return fail(c, v[K_NAME], PD_EINVAL, "duplicate job_name \"%.128s\"", j->job_name);

    j->interval_ms = cfg->scrape_interval_ms;
    if (v[K_INTERVAL] && (rc = want_duration(c, v[K_INTERVAL], "scrape_interval", &j->interval_ms)))
        return rc;
    if (v[K_TIMEOUT]) {
        if ((rc = want_duration(c, v[K_TIMEOUT], "scrape_timeout", &j->timeout_ms)))
            return rc;
        if (j->timeout_ms > j->interval_ms) {
            char t[32], i[32];
            pd_format_duration(j->timeout_ms, t, sizeof t);
            pd_format_duration(j->interval_ms, i, sizeof i);
            return fail(
                c, v[K_TIMEOUT], PD_EINVAL,
                "scrape_timeout (%s) is greater than scrape_interval (%s) for job \"%.128s\"", t, i,
                j->job_name);
        }
    } else {
        j->timeout_ms =
            cfg->scrape_timeout_ms < j->interval_ms ? cfg->scrape_timeout_ms : j->interval_ms;
    }
    if (v[K_SCHEME]) {
        if ((rc = want_dup(c, v[K_SCHEME], "scheme", &j->scheme)))
            return rc;
        if (strcmp(j->scheme, "http") != 0 && strcmp(j->scheme, "https") != 0)
            return fail(c, v[K_SCHEME], PD_EINVAL, "scheme \"%.64s\": want http or https",
                        j->scheme);
    } else if (!(j->scheme = strdup("http"))) {
        return PD_ENOMEM;
    }
    if (v[K_PARAMS] && (rc = parse_params(c, v[K_PARAMS], j)))
        return rc;
    if (v[K_STATIC]) {
        const yaml_node_t *s = v[K_STATIC];
        if ((rc = want_seq(c, s, "static_configs", &empty)))
            return rc;
        if (!empty) {
            size_t cnt = (size_t)(s->data.sequence.items.top - s->data.sequence.items.start);
            j->static_configs = calloc(cnt, sizeof *j->static_configs);
            if (!j->static_configs)
                return PD_ENOMEM;
            for (size_t i = 0; i < cnt; i++) {
                yaml_node_t *sn = node(c, s->data.sequence.items.start[i]);
                if (!sn)
                    return fail(c, s, PD_EPARSE, "static_configs: broken YAML node");
                j->n_static_configs++;
                if ((rc = parse_static(c, sn, &j->static_configs[i])))
                    return rc;
            }
        }
    }
    return parse_profiling(c, v[K_PROFILING], j);
}

/* ---- entry points ---- */

int pd_config_parse(const char *text, size_t len, const char *name, pd_config *out, pd_err *err)
{
    ctx c;
    yaml_parser_t parser;
    int rc = 0;
    memset(&c, 0, sizeof c);
    c.name = name ? name : "config";
    c.err = err;
    pd_config_init(out);
    if (!yaml_parser_initialize(&parser))
        return PD_ENOMEM;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &c.doc)) {
        rc = pd_err_set(err, PD_EPARSE, "%s:%zu:%zu: YAML %s: %s", c.name,
                        parser.problem_mark.line + 1, parser.problem_mark.column + 1,
                        parser.error == YAML_SCANNER_ERROR  ? "syntax error"
                        : parser.error == YAML_PARSER_ERROR ? "structure error"
                        : parser.error == YAML_MEMORY_ERROR ? "out of memory"
                                                            : "error",
                        parser.problem ? parser.problem : "unknown");
        if (parser.error == YAML_MEMORY_ERROR)
            rc = PD_ENOMEM;
        yaml_parser_delete(&parser);
        return rc;
    }
    yaml_parser_delete(&parser);

    yaml_node_t *root = yaml_document_get_root_node(&c.doc);
    if (!root || is_null(root))
        goto out; /* empty file: no jobs */
    static const char *const keys[] = {"global", "scrape_configs", NULL};
    yaml_node_t *v[2];
    if ((rc = map_keys(&c, root, "the top level", keys, v)))
        goto out;
    if (v[0] && (rc = parse_global(&c, v[0], out)))
        goto out;
    if (v[1]) {
        const yaml_node_t *s = v[1];
        bool empty;
        if ((rc = want_seq(&c, s, "scrape_configs", &empty)) || empty)
            goto out;
        size_t cnt = (size_t)(s->data.sequence.items.top - s->data.sequence.items.start);
        out->jobs = calloc(cnt, sizeof *out->jobs);
        if (!out->jobs) {
            rc = PD_ENOMEM;
            goto out;
        }
        for (size_t i = 0; i < cnt; i++) {
            yaml_node_t *jn = node(&c, s->data.sequence.items.start[i]);
            if (!jn) {
                rc = fail(&c, s, PD_EPARSE, "scrape_configs: broken YAML node");
                goto out;
            }
            rc = parse_job(&c, jn, out, &out->jobs[i]);
            out->n_jobs++; /* counted either way so release frees it */
            if (rc)
                goto out;
        }
    }
out:
    if (rc == PD_ENOMEM)
        pd_err_set(err, rc, "%s: out of memory reading the configuration", c.name);
    if (rc)
        pd_config_release(out);
    yaml_document_delete(&c.doc);
    return rc;
}

int pd_config_load_file(const char *path, pd_config *out, pd_err *err)
{
    int rc = 0;
    char *text = NULL;
    pd_config_init(out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return pd_err_set(err, -errno, "cannot open config file %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        rc = pd_err_set(err, -errno, "cannot stat config file %s: %s", path, strerror(errno));
        goto out;
    }
    if (st.st_size > (off_t)MAX_CONFIG_BYTES) {
        rc = pd_err_set(err, PD_ETOOBIG, "config file %s is %lld bytes, over the limit of %u", path,
                        (long long)st.st_size, MAX_CONFIG_BYTES);
        goto out;
    }
    size_t cap = (size_t)st.st_size + 1, len = 0;
    text = malloc(cap);
    if (!text) {
        rc = PD_ENOMEM;
        goto out;
    }
    for (;;) {
        if (len == cap) { /* the file grew while we read it: stop at the cap */
            if (cap > MAX_CONFIG_BYTES) {
                rc = pd_err_set(err, PD_ETOOBIG, "config file %s is over the limit of %u bytes",
                                path, MAX_CONFIG_BYTES);
                goto out;
            }
            char *t = realloc(text, cap * 2);
            if (!t) {
                rc = PD_ENOMEM;
                goto out;
            }
            text = t;
            cap *= 2;
        }
        ssize_t r = read(fd, text + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = pd_err_set(err, -errno, "cannot read config file %s: %s", path, strerror(errno));
            goto out;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    rc = pd_config_parse(text, len, path, out, err);
out:
    free(text);
    close(fd);
    return rc;
}
