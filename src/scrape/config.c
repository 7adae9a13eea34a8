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
#include "scrape/config_int.h"

#define DEFAULT_INTERVAL_MS 10000
#define DEFAULT_TIMEOUT_MS 10000
#define MAX_CONFIG_BYTES (16u << 20) /* a config file over 16 MiB is refused */

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
    free(e->keep_sample_types);
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
    free(j->metrics_path);
    pd_scrape_client_release(&j->client);
    for (size_t i = 0; i < j->n_relabel; i++)
        pd_relabel_rule_release(&j->relabel[i]);
    free(j->relabel);
    for (size_t i = 0; i < j->n_sd; i++) {
        for (size_t k = 0; k < j->sd[i].n_files; k++)
            free(j->sd[i].files[k]);
        free(j->sd[i].files);
        free(j->sd[i].url);
        pd_scrape_client_release(&j->sd[i].client);
        free(j->sd[i].api_server);
        free(j->sd[i].kubeconfig_file);
        for (size_t k = 0; k < j->sd[i].n_selectors; k++) {
            free(j->sd[i].selectors[k].label);
            free(j->sd[i].selectors[k].field);
        }
        free(j->sd[i].selectors);
    }
    free(j->sd);
    pd_adaptive_config_release(&j->adaptive);
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
    pd_labels_release(&c->external_labels);
    for (size_t i = 0; i < c->n_warnings; i++)
        free(c->warnings[i]);
    free(c->warnings);
    free(c->source);
    free(c->source_name);
    pd_config_init(c);
}

/* ---- sections ---- */

/* Keys of Prometheus' global section profd has no use for. */
static const pd__cfg_ignored global_ignored[] = {
    {"evaluation_interval", "profd evaluates no rules"},
    {"rule_query_offset", "profd evaluates no rules"},
    {"query_log_file", "profd logs no queries to a file"},
    {"scrape_failure_log_file", "scrape failures are logged on stderr"},
    {"scrape_protocols", "profd scrapes pprof, not metrics"},
    {"body_size_limit", "set it per job or with --scrape.max-body-bytes"},
    {"sample_limit", "a limit on metric samples"},
    {"target_limit", "not implemented"},
    {"label_limit", "a limit on metric labels"},
    {"label_name_length_limit", "a limit on metric labels"},
    {"label_value_length_limit", "a limit on metric labels"},
    {"metric_name_validation_scheme", "profd scrapes pprof, not metrics"},
    {"metric_name_escaping_scheme", "profd scrapes pprof, not metrics"},
    {"scrape_native_histograms", "profd scrapes pprof, not metrics"},
    {"always_scrape_classic_histograms", "profd scrapes pprof, not metrics"},
    {"convert_classic_histograms_to_nhcb", "profd scrapes pprof, not metrics"},
    {"extra_scrape_metrics", "profd scrapes pprof, not metrics"},
    {NULL, NULL},
};

static int parse_labels_map(pd__cfg_ctx *c, const yaml_node_t *m, const char *what, bool reserved,
                            pd_labels *out);

static int parse_global(pd__cfg_ctx *c, const yaml_node_t *g, pd_config *cfg)
{
    static const char *const keys[] = {"scrape_interval", "scrape_timeout", "external_labels",
                                       "keep_dropped_targets", NULL};
    yaml_node_t *v[4];
    int rc = pd__cfg_map_keys_ign(c, g, "global", keys, v, global_ignored);
    if (rc)
        return rc;
    if (v[0] &&
        (rc = pd__cfg_want_duration(c, v[0], "global.scrape_interval", &cfg->scrape_interval_ms)))
        return rc;
    if (v[1]) {
        if ((rc = pd__cfg_want_duration(c, v[1], "global.scrape_timeout", &cfg->scrape_timeout_ms)))
            return rc;
        if (cfg->scrape_timeout_ms > cfg->scrape_interval_ms) {
            char t[32], i[32];
            pd_format_duration(cfg->scrape_timeout_ms, t, sizeof t);
            pd_format_duration(cfg->scrape_interval_ms, i, sizeof i);
            return pd__cfg_fail(
                c, v[1], PD_EINVAL,
                "global.scrape_timeout (%s) is greater than global.scrape_interval (%s)", t, i);
        }
    } else {
        cfg->scrape_timeout_ms = cfg->scrape_interval_ms < DEFAULT_TIMEOUT_MS
                                     ? cfg->scrape_interval_ms
                                     : DEFAULT_TIMEOUT_MS;
    }
    if (v[2] && (rc = parse_labels_map(c, v[2], "external_labels", true, &cfg->external_labels)))
        return rc;
    int64_t kd;
    if (v[3] && (rc = pd__cfg_want_int(c, v[3], "global.keep_dropped_targets", 0, INT64_MAX, &kd)))
        return rc;
    if (v[3])
        cfg->keep_dropped_targets = (uint64_t)kd;
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

static int parse_params(pd__cfg_ctx *c, const yaml_node_t *m, pd_scrape_job *j)
{
    bool empty;
    int rc = pd__cfg_want_map(c, m, "params", &empty);
    if (rc || empty)
        return rc;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        const char *name;
        if ((rc = pd__cfg_free_key(c, m, p, "params", &name)))
            return rc;
        if (!*name)
            return pd__cfg_fail(c, pd__cfg_node(c, p->key), PD_EINVAL,
                                "params: empty parameter name");
        yaml_node_t *v = pd__cfg_node(c, p->value);
        bool e2;
        if ((rc = pd__cfg_want_seq(c, v, "params value (a list of strings)", &e2)))
            return rc;
        if (e2)
            continue;
        bool first = true;
        for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
             it++) {
            const char *s;
            yaml_node_t *item = pd__cfg_node(c, *it);
            if (!item)
                return pd__cfg_fail(c, v, PD_EPARSE, "params: broken YAML node");
            if ((rc = pd__cfg_want_str(c, item, "params value", &s)))
                return rc;
            if ((rc = add_query(j, name, s)))
                return rc;
            if (first && pd_label_name_classic(name) &&
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

static int parse_labels_map(pd__cfg_ctx *c, const yaml_node_t *m, const char *what, bool reserved,
                            pd_labels *out)
{
    bool empty;
    int rc = pd__cfg_want_map(c, m, what, &empty);
    if (rc || empty)
        return rc;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        const char *name, *val;
        if ((rc = pd__cfg_free_key(c, m, p, what, &name)))
            return rc;
        yaml_node_t *k = pd__cfg_node(c, p->key);
        /* one label-name rule: Prometheus 3's UTF-8 names (pd_label_name_valid) */
        if (!pd_label_name_valid(name))
            return pd__cfg_fail(c, k, PD_EINVAL,
                                "%s: \"%.64s\" is not a valid label name (1..%d bytes of UTF-8 "
                                "without control characters)",
                                what, name, PD_LABEL_MAX_NAME);
        if (!strcmp(name, "__name__") || (reserved && name[0] == '_' && name[1] == '_'))
            return pd__cfg_fail(
                c, k, PD_EINVAL, "label name \"%.64s\" is reserved in %s (%s)", name, what,
                !strcmp(name, "__name__") ? "__name__ is the profile type"
                                          : "names starting with \"__\" are internal");
        if ((rc = pd__cfg_want_str(c, pd__cfg_node(c, p->value), "label value", &val)))
            return rc;
        if (!pd_label_value_valid(val))
            return pd__cfg_fail(c, pd__cfg_node(c, p->value), PD_EINVAL,
                                "%s: \"%.64s\" is not a valid label value (not UTF-8)", what, val);
        pd_err e;
        pd_err_clear(&e);
        if ((rc = pd_labels_set(out, name, val, &e)))
            return rc == PD_ENOMEM ? rc : pd__cfg_fail(c, k, rc, "%s", e.msg);
    }
    return 0;
}

static int parse_static(pd__cfg_ctx *c, const yaml_node_t *n, pd_static_config *sc)
{
    static const char *const keys[] = {"targets", "labels", NULL};
    yaml_node_t *v[2];
    int rc = pd__cfg_map_keys(c, n, "static_configs entry", keys, v);
    if (rc)
        return rc;
    bool empty = true;
    if (v[0] && (rc = pd__cfg_want_seq(c, v[0], "targets", &empty)))
        return rc;
    if (!empty && v[0]->data.sequence.items.top == v[0]->data.sequence.items.start)
        empty = true;
    if (empty)
        return pd__cfg_fail(
            c, v[0] ? v[0] : n, PD_EINVAL,
            "static_configs entry has no targets: want targets: [\"host:port\", ...]");
    size_t cnt = (size_t)(v[0]->data.sequence.items.top - v[0]->data.sequence.items.start);
    sc->targets = calloc(cnt, sizeof *sc->targets);
    if (!sc->targets)
        return PD_ENOMEM;
    for (size_t i = 0; i < cnt; i++) {
        yaml_node_t *t = pd__cfg_node(c, v[0]->data.sequence.items.start[i]);
        char *s;
        if (!t)
            return pd__cfg_fail(c, v[0], PD_EPARSE, "targets: broken YAML node");
        if ((rc = pd__cfg_want_dup(c, t, "target", &s)))
            return rc;
        if (!target_valid(s)) {
            rc = pd__cfg_fail(c, t, PD_EINVAL,
                              "invalid target \"%.128s\": want host:port (no scheme, no path)", s);
            free(s);
            return rc;
        }
        bool dup = false;
        for (size_t k = 0; k < sc->n_targets && !dup; k++)
            dup = !strcmp(sc->targets[k], s);
        if (dup) { /* Prometheus keeps one target of the same labels */
            rc = pd__cfg_warn(
                c, t, "duplicate target \"%.128s\" in this static_configs entry dropped", s);
            free(s);
            if (rc)
                return rc;
            continue;
        }
        sc->targets[sc->n_targets++] = s;
    }
    if (v[1] && (rc = parse_labels_map(c, v[1], "labels", false, &sc->labels)))
        return rc;
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
    int has_delta, delta;
    char *keep; /* keep_sample_type as "type\tunit\n"... (owned), NULL = none */
} ep_cfg;

/* A default profile type of a dialect. */
typedef struct ep_default {
    const char *name, *path;
    bool enabled, cpu, delta;
} ep_default;

static const ep_default profd_defaults[] = {
    {"allocs", "/debug/pprof/allocs", true, false, false},
    {"block", "/debug/pprof/block", true, false, false},
    {"goroutine", "/debug/pprof/goroutine", true, false, false},
    {"heap", "/debug/pprof/heap", true, false, false},
    {"mutex", "/debug/pprof/mutex", true, false, false},
    {"threadcreate", "/debug/pprof/threadcreate", true, false, false},
    {"cpu", "/debug/pprof/profile", true, true, false},
    {NULL, NULL, false, false, false},
};
/* conprof: the CPU profile is "profile"; "trace" is known and off (a Go
 * execution trace is not pprof). */
static const ep_default conprof_defaults[] = {
    {"allocs", "/debug/pprof/allocs", true, false, false},
    {"block", "/debug/pprof/block", true, false, false},
    {"goroutine", "/debug/pprof/goroutine", true, false, false},
    {"heap", "/debug/pprof/heap", true, false, false},
    {"mutex", "/debug/pprof/mutex", true, false, false},
    {"profile", "/debug/pprof/profile", true, true, false},
    {"threadcreate", "/debug/pprof/threadcreate", true, false, false},
    {"trace", "/debug/pprof/trace", false, true, false},
    {NULL, NULL, false, false, false},
};
/* Parca's DefaultScrapeConfig: memory is the allocs endpoint, process_cpu a
 * delta profile (?seconds=<interval>). */
static const ep_default parca_defaults[] = {
    {"memory", "/debug/pprof/allocs", true, false, false},
    {"block", "/debug/pprof/block", true, false, false},
    {"goroutine", "/debug/pprof/goroutine", true, false, false},
    {"mutex", "/debug/pprof/mutex", true, false, false},
    {"process_cpu", "/debug/pprof/profile", true, true, true},
    {NULL, NULL, false, false, false},
};

static const ep_default *dialect_defaults(pd_config_dialect d)
{
    return d == PD_DIALECT_PARCA     ? parca_defaults
           : d == PD_DIALECT_CONPROF ? conprof_defaults
                                     : profd_defaults;
}

static int add_endpoint(pd_scrape_job *j, const char *prefix, const char *name, const char *path,
                        bool enabled, int64_t seconds, bool delta)
{
    pd_pprof_endpoint *e = realloc(j->endpoints, (j->n_endpoints + 1) * sizeof *e);
    if (!e)
        return PD_ENOMEM;
    j->endpoints = e;
    e = &e[j->n_endpoints++];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    /* Parca's path_prefix: joined as a path (one '/' between) */
    size_t pl = prefix ? strlen(prefix) : 0;
    while (pl > 0 && prefix[pl - 1] == '/')
        pl--;
    e->path = malloc(pl + strlen(path) + 1);
    if (e->path) {
        if (pl)
            memcpy(e->path, prefix, pl);
        strcpy(e->path + pl, path);
    }
    e->enabled = enabled;
    e->seconds = seconds;
    e->delta = delta;
    e->timeout_ms = pd_config_endpoint_timeout_ms(j->timeout_ms, seconds);
    return e->name && e->path ? 0 : PD_ENOMEM;
}

/* seconds of an endpoint: explicit, else the interval for a delta profile
 * (as Parca), else the CPU seconds rule for a CPU type, else none. */
static int64_t endpoint_seconds(const pd_scrape_job *j, const ep_cfg *e, bool cpu, bool delta)
{
    if (e && e->has_seconds)
        return e->seconds;
    if (delta) {
        int64_t s = j->interval_ms / 1000;
        return s < 1 ? 1 : s;
    }
    return cpu ? pd_config_default_cpu_seconds(j->timeout_ms) : 0;
}

static int parse_endpoint(pd__cfg_ctx *c, yaml_node_t *k, yaml_node_t *val, const pd_scrape_job *j,
                          pd_config_dialect d, ep_cfg *e)
{
    static const char *const ekeys[] = {"path",  "enabled",          "seconds",
                                        "delta", "keep_sample_type", NULL};
    yaml_node_t *ev[5];
    int rc;
    e->node = k;
    if (!pd_label_name_classic(e->name))
        return pd__cfg_fail(
            c, k, PD_EINVAL,
            "invalid profile type name \"%.64s\": must match [a-zA-Z_][a-zA-Z0-9_]*", e->name);
    char what[128];
    snprintf(what, sizeof what, "pprof_config.%s", e->name);
    if ((rc = pd__cfg_map_keys(c, val, what, ekeys, ev)))
        return rc;
    if (ev[0]) {
        if ((rc = pd__cfg_want_str(c, ev[0], "path", &e->path)))
            return rc;
        if (e->path[0] != '/')
            return pd__cfg_fail(c, ev[0], PD_EINVAL, "%s.path \"%.128s\" must start with \"/\"",
                                what, e->path);
        for (const char *q = e->path; *q; q++)
            if ((unsigned char)*q <= ' ' || *q == '#' || *q == '?')
                return pd__cfg_fail(c, ev[0], PD_EINVAL,
                                    "%s.path \"%.128s\" has a space, '?' or '#': give query "
                                    "parameters with params",
                                    what, e->path);
    }
    if (ev[1]) {
        bool b;
        if ((rc = pd__cfg_want_bool(c, ev[1], "enabled", &b)))
            return rc;
        e->has_enabled = 1;
        e->enabled = b;
    }
    if (ev[2]) {
        if ((rc = pd__cfg_want_int(c, ev[2], "seconds", 0, INT32_MAX, &e->seconds)))
            return rc;
        if (d != PD_DIALECT_PARCA && e->seconds * 1000 > j->interval_ms) {
            char iv[32];
            pd_format_duration(j->interval_ms, iv, sizeof iv);
            return pd__cfg_fail(c, ev[2], PD_EINVAL,
                                "%s.seconds (%lld) is longer than the scrape_interval (%s)", what,
                                (long long)e->seconds, iv);
        }
        e->has_seconds = 1;
    }
    if (ev[3]) {
        bool b;
        if ((rc = pd__cfg_want_bool(c, ev[3], "delta", &b)))
            return rc;
        e->has_delta = 1;
        e->delta = b;
    }
    if (ev[4]) { /* Parca: [{type: alloc_space, unit: bytes}, ...]; unit optional here */
        bool empty;
        if ((rc = pd__cfg_want_seq(c, ev[4], "keep_sample_type", &empty)))
            return rc;
        pd_buf kb;
        pd_buf_init(&kb, 65536);
        for (yaml_node_item_t *it = empty ? NULL : ev[4]->data.sequence.items.start;
             it && it < ev[4]->data.sequence.items.top; it++) {
            static const char *const kkeys[] = {"type", "unit", NULL};
            yaml_node_t *kv[2], *kn = pd__cfg_node(c, *it);
            const char *ty = NULL, *un = "";
            if (!kn)
                rc = pd__cfg_fail(c, ev[4], PD_EPARSE, "keep_sample_type: broken YAML node");
            else if (!(rc = pd__cfg_map_keys(c, kn, "keep_sample_type entry", kkeys, kv))) {
                if (!kv[0])
                    rc = pd__cfg_fail(c, kn, PD_EINVAL, "keep_sample_type entry needs a type");
                else if (!(rc = pd__cfg_want_str(c, kv[0], "keep_sample_type type", &ty)) &&
                         !(kv[1] &&
                           (rc = pd__cfg_want_str(c, kv[1], "keep_sample_type unit", &un))) &&
                         (strpbrk(ty, "\t\n") || strpbrk(un, "\t\n") || !*ty))
                    rc = pd__cfg_fail(c, kn, PD_EINVAL, "keep_sample_type: bad type or unit");
            }
            if (!rc && (rc = pd_buf_printf(&kb, "%s\t%s\n", ty, un)) == PD_ETOOBIG)
                rc = pd__cfg_fail(c, ev[4], rc, "keep_sample_type: over 64 KiB");
            if (rc)
                break;
        }
        if (!rc && kb.len && (pd_buf_append(&kb, "", 1) || !(e->keep = strdup(kb.data))))
            rc = PD_ENOMEM;
        pd_buf_release(&kb);
        if (rc)
            return rc;
    }
    return 0;
}

static int parse_profiling(pd__cfg_ctx *c, const yaml_node_t *n, pd_scrape_job *j,
                           pd_config_dialect d)
{
    static const char *const keys[] = {"pprof_config", "path_prefix", NULL};
    const ep_default *defs = dialect_defaults(d);
    yaml_node_t *v[2] = {NULL, NULL};
    ep_cfg *eps = NULL;
    size_t n_eps = 0;
    const char *prefix = NULL;
    int rc = 0;
    if (n && (rc = pd__cfg_map_keys(c, n, "profiling_config", keys, v)))
        return rc;
    if (v[1]) {
        if ((rc = pd__cfg_want_str(c, v[1], "path_prefix", &prefix)))
            return rc;
        if (*prefix && prefix[0] != '/')
            return pd__cfg_fail(c, v[1], PD_EINVAL, "path_prefix \"%.128s\" must start with \"/\"",
                                prefix);
        for (const char *q = prefix; *q; q++)
            if ((unsigned char)*q <= ' ' || *q == '#' || *q == '?')
                return pd__cfg_fail(c, v[1], PD_EINVAL,
                                    "path_prefix \"%.128s\" has a space, '?' or '#'", prefix);
    }
    const yaml_node_t *pc = v[0];
    bool empty = true;
    if (pc && (rc = pd__cfg_want_map(c, pc, "pprof_config", &empty)))
        return rc;
    if (!empty) {
        size_t cnt = (size_t)(pc->data.mapping.pairs.top - pc->data.mapping.pairs.start);
        eps = calloc(cnt, sizeof *eps);
        if (!eps)
            return PD_ENOMEM;
        for (yaml_node_pair_t *p = pc->data.mapping.pairs.start; p < pc->data.mapping.pairs.top;
             p++) {
            ep_cfg *e = &eps[n_eps++];
            if ((rc = pd__cfg_free_key(c, pc, p, "pprof_config", &e->name)) ||
                (rc = parse_endpoint(c, pd__cfg_node(c, p->key), pd__cfg_node(c, p->value), j, d,
                                     e)))
                goto out;
        }
    }
    /* Defaults first, in the dialect's order, overridden by name; then custom types. */
    for (const ep_default *df = defs; df->name; df++) {
        const ep_cfg *e = NULL;
        for (size_t i = 0; i < n_eps; i++)
            if (!strcmp(eps[i].name, df->name))
                e = &eps[i];
        bool enabled = e && e->has_enabled ? e->enabled : (e ? true : df->enabled);
        bool delta = e && e->has_delta ? e->delta : df->delta;
        const char *path = e && e->path ? e->path : df->path;
        if (d == PD_DIALECT_PARCA && df->cpu && enabled && j->timeout_ms < 2000) {
            rc = pd__cfg_fail(c, e ? e->node : n, PD_EINVAL,
                              "%s scrape_timeout must be at least 2 seconds in %.128s", df->name,
                              j->job_name);
            goto out;
        }
        if ((rc = add_endpoint(j, prefix, df->name, path, enabled,
                               endpoint_seconds(j, e, df->cpu, delta), delta)))
            goto out;
        if (e && e->keep &&
            !(j->endpoints[j->n_endpoints - 1].keep_sample_types = strdup(e->keep))) {
            rc = PD_ENOMEM;
            goto out;
        }
    }
    for (size_t i = 0; i < n_eps; i++) {
        bool known = false;
        for (const ep_default *df = defs; df->name; df++)
            known |= !strcmp(eps[i].name, df->name);
        if (known)
            continue;
        if (!eps[i].path) {
            rc = pd__cfg_fail(c, eps[i].node, PD_EINVAL,
                              "profile type \"%.64s\" is not one of the %s defaults and needs a "
                              "path",
                              eps[i].name, pd_config_dialect_name(d));
            goto out;
        }
        bool delta = eps[i].has_delta && eps[i].delta;
        if ((rc = add_endpoint(j, prefix, eps[i].name, eps[i].path,
                               eps[i].has_enabled ? eps[i].enabled : true,
                               endpoint_seconds(j, &eps[i], false, delta), delta)))
            goto out;
        if (eps[i].keep &&
            !(j->endpoints[j->n_endpoints - 1].keep_sample_types = strdup(eps[i].keep))) {
            rc = PD_ENOMEM;
            goto out;
        }
    }
out:
    for (size_t i = 0; eps && i < n_eps; i++)
        free(eps[i].keep);
    free(eps);
    return rc;
}

#define SD_NOT_IMPLEMENTED                                                                         \
    "this service discovery is not implemented (file_sd_configs, http_sd_configs, "                \
    "dns_sd_configs and kubernetes_sd_configs are): no targets from it"

/* Job keys profd accepts and ignores, with why. */
static const pd__cfg_ignored job_ignored[] = {
    {"metric_relabel_configs", "profiles have no metric series to relabel"},
    {"sample_limit", "a limit on metric samples"},
    {"target_limit", "not implemented"},
    {"label_limit", "a limit on metric labels"},
    {"label_name_length_limit", "a limit on metric labels"},
    {"label_value_length_limit", "a limit on metric labels"},
    {"scrape_protocols", "profd scrapes pprof, not metrics"},
    {"fallback_scrape_protocol", "profd scrapes pprof, not metrics"},
    {"scrape_native_histograms", "profd scrapes pprof, not metrics"},
    {"metric_name_escaping_scheme", "profd scrapes pprof, not metrics"},
    {"extra_scrape_metrics", "profd scrapes pprof, not metrics"},
    {"track_timestamps_staleness", "profiles have no staleness markers"},
    {"enable_compression", "libcurl asks for gzip as it sees fit"},
    {"native_histogram_bucket_limit", "profd scrapes pprof, not metrics"},
    {"native_histogram_min_bucket_factor", "profd scrapes pprof, not metrics"},
    {"scrape_classic_histograms", "profd scrapes pprof, not metrics"},
    {"always_scrape_classic_histograms", "profd scrapes pprof, not metrics"},
    {"convert_classic_histograms_to_nhcb", "profd scrapes pprof, not metrics"},
    {"metric_name_validation_scheme", "profd scrapes pprof, not metrics"},
    {"scrape_failure_log_file", "scrape failures are logged on stderr"},
    {"normalized_addresses", "addresses are always normalized (default port added)"},
    {"no_proxy", "not supported"},
    {"proxy_from_environment", "not supported: give proxy_url"},
    {"proxy_connect_header", "not supported"},
    {"http_headers", "not supported"},
    /* Prometheus 3.14's other service discoveries (discovery/): warned, no
     * targets; a name not on this list (consult_sd_configs) is refused */
    {"aws_sd_configs", SD_NOT_IMPLEMENTED},
    {"azure_sd_configs", SD_NOT_IMPLEMENTED},
    {"consul_sd_configs", SD_NOT_IMPLEMENTED},
    {"digitalocean_sd_configs", SD_NOT_IMPLEMENTED},
    {"docker_sd_configs", SD_NOT_IMPLEMENTED},
    {"dockerswarm_sd_configs", SD_NOT_IMPLEMENTED},
    {"ec2_sd_configs", SD_NOT_IMPLEMENTED},
    {"ecs_sd_configs", SD_NOT_IMPLEMENTED},
    {"elasticache_sd_configs", SD_NOT_IMPLEMENTED},
    {"eureka_sd_configs", SD_NOT_IMPLEMENTED},
    {"gce_sd_configs", SD_NOT_IMPLEMENTED},
    {"hetzner_sd_configs", SD_NOT_IMPLEMENTED},
    {"ionos_sd_configs", SD_NOT_IMPLEMENTED},
    {"kuma_sd_configs", SD_NOT_IMPLEMENTED},
    {"lightsail_sd_configs", SD_NOT_IMPLEMENTED},
    {"linode_sd_configs", SD_NOT_IMPLEMENTED},
    {"marathon_sd_configs", SD_NOT_IMPLEMENTED},
    {"msk_sd_configs", SD_NOT_IMPLEMENTED},
    {"nerve_sd_configs", SD_NOT_IMPLEMENTED},
    {"nomad_sd_configs", SD_NOT_IMPLEMENTED},
    {"oci_sd_configs", SD_NOT_IMPLEMENTED},
    {"openstack_sd_configs", SD_NOT_IMPLEMENTED},
    {"outscale_sd_configs", SD_NOT_IMPLEMENTED},
    {"ovhcloud_sd_configs", SD_NOT_IMPLEMENTED},
    {"puppetdb_sd_configs", SD_NOT_IMPLEMENTED},
    {"rds_sd_configs", SD_NOT_IMPLEMENTED},
    {"scaleway_sd_configs", SD_NOT_IMPLEMENTED},
    {"serverset_sd_configs", SD_NOT_IMPLEMENTED},
    {"stackit_sd_configs", SD_NOT_IMPLEMENTED},
    {"triton_sd_configs", SD_NOT_IMPLEMENTED},
    {"uyuni_sd_configs", SD_NOT_IMPLEMENTED},
    {"vultr_sd_configs", SD_NOT_IMPLEMENTED},
    {NULL, NULL},
};

static int parse_job(pd__cfg_ctx *c, const yaml_node_t *n, const pd_config *cfg, pd_scrape_job *j)
{
    enum {
        K_NAME,
        K_INTERVAL,
        K_TIMEOUT,
        K_SCHEME,
        K_PARAMS,
        K_STATIC,
        K_PROFILING,
        K_METRICS_PATH,
        K_HONOR_LABELS,
        K_HONOR_TS,
        K_BODY_LIMIT,
        K_KEEP_DROPPED,
        K_RELABEL,
        K_FILE_SD,
        K_HTTP_SD,
        K_DNS_SD,
        K_K8S_SD,
        K_ADAPTIVE,
        K_CLIENT, /* PD_CFG_CL_N keys from here */
        K_N = K_CLIENT + PD_CFG_CL_N
    };
    const char *keys[K_N + 1] = {"job_name",
                                 "scrape_interval",
                                 "scrape_timeout",
                                 "scheme",
                                 "params",
                                 "static_configs",
                                 "profiling_config",
                                 "metrics_path",
                                 "honor_labels",
                                 "honor_timestamps",
                                 "body_size_limit",
                                 "keep_dropped_targets",
                                 "relabel_configs",
                                 "file_sd_configs",
                                 "http_sd_configs",
                                 "dns_sd_configs",
                                 "kubernetes_sd_configs",
                                 "adaptive_capture"};
    for (int i = 0; i < PD_CFG_CL_N; i++)
        keys[K_CLIENT + i] = pd__cfg_client_keys[i];
    keys[K_N] = NULL;
    yaml_node_t *v[K_N];
    bool empty;
    int rc;
    if ((rc = pd__cfg_want_map(c, n, "scrape_configs entry", &empty)))
        return rc;
    if (empty)
        return pd__cfg_fail(c, n, PD_EINVAL, "empty scrape_configs entry: job_name is required");
    if ((rc = pd__cfg_map_keys_ign(c, n, "scrape_configs entry", keys, v, job_ignored)))
        return rc;
    if (!v[K_NAME])
        return pd__cfg_fail(c, n, PD_EINVAL, "scrape_configs entry has no job_name");
    if ((rc = pd__cfg_want_dup(c, v[K_NAME], "job_name", &j->job_name)))
        return rc;
    if (!j->job_name[0])
        return pd__cfg_fail(c, v[K_NAME], PD_EINVAL, "job_name is empty");
    for (size_t i = 0; i < cfg->n_jobs; i++)
        if (!strcmp(cfg->jobs[i].job_name, j->job_name))
            return pd__cfg_fail(c, v[K_NAME], PD_EINVAL, "duplicate job_name \"%.128s\"",
                                j->job_name);

    bool parca = cfg->dialect == PD_DIALECT_PARCA;
    j->interval_ms = parca ? DEFAULT_INTERVAL_MS : cfg->scrape_interval_ms;
    if (v[K_INTERVAL] &&
        (rc = pd__cfg_want_duration(c, v[K_INTERVAL], "scrape_interval", &j->interval_ms)))
        return rc;
    char t[32], iv[32];
    if (v[K_TIMEOUT]) {
        if ((rc = pd__cfg_want_duration(c, v[K_TIMEOUT], "scrape_timeout", &j->timeout_ms)))
            return rc;
        pd_format_duration(j->timeout_ms, t, sizeof t);
        pd_format_duration(j->interval_ms, iv, sizeof iv);
        if (parca && j->timeout_ms <= j->interval_ms)
            return pd__cfg_fail(c, v[K_TIMEOUT], PD_EINVAL,
                                "scrape_timeout (%s) must be greater than scrape_interval (%s) "
                                "for job \"%.128s\" (Parca's rule: this file uses Parca's keys)",
                                t, iv, j->job_name);
        if (!parca && j->timeout_ms > j->interval_ms)
            return pd__cfg_fail(
                c, v[K_TIMEOUT], PD_EINVAL,
                "scrape_timeout (%s) is greater than scrape_interval (%s) for job \"%.128s\"", t,
                iv, j->job_name);
    } else if (parca) {
        j->timeout_ms = j->interval_ms + 3000; /* Parca's default */
    } else {
        j->timeout_ms =
            cfg->scrape_timeout_ms < j->interval_ms ? cfg->scrape_timeout_ms : j->interval_ms;
    }
    if (v[K_SCHEME]) {
        if ((rc = pd__cfg_want_dup(c, v[K_SCHEME], "scheme", &j->scheme)))
            return rc;
        if (strcmp(j->scheme, "http") != 0 && strcmp(j->scheme, "https") != 0)
            return pd__cfg_fail(c, v[K_SCHEME], PD_EINVAL, "scheme \"%.64s\": want http or https",
                                j->scheme);
    } else if (!(j->scheme = strdup("http"))) {
        return PD_ENOMEM;
    }
    if (v[K_PARAMS] && (rc = parse_params(c, v[K_PARAMS], j)))
        return rc;
    if (v[K_METRICS_PATH]) {
        if ((rc = pd__cfg_want_dup(c, v[K_METRICS_PATH], "metrics_path", &j->metrics_path)))
            return rc;
        if (j->metrics_path[0] != '/')
            return pd__cfg_fail(c, v[K_METRICS_PATH], PD_EINVAL,
                                "metrics_path \"%.128s\" must start with \"/\"", j->metrics_path);
    } else if (!(j->metrics_path = strdup("/metrics"))) {
        return PD_ENOMEM;
    }
    j->honor_timestamps = true;
    if ((v[K_HONOR_LABELS] &&
         (rc = pd__cfg_want_bool(c, v[K_HONOR_LABELS], "honor_labels", &j->honor_labels))) ||
        (v[K_HONOR_TS] &&
         (rc = pd__cfg_want_bool(c, v[K_HONOR_TS], "honor_timestamps", &j->honor_timestamps))))
        return rc;
    if (v[K_BODY_LIMIT]) {
        const char *s;
        if ((rc = pd__cfg_want_str(c, v[K_BODY_LIMIT], "body_size_limit", &s)))
            return rc;
        /* Prometheus (units.ParseBase2Bytes): a bare number only as "0" */
        if (pd_config_parse_size(s, &j->body_size_limit) ||
            (strspn(s, "0123456789") == strlen(s) && strcmp(s, "0")))
            return pd__cfg_fail(c, v[K_BODY_LIMIT], PD_EINVAL,
                                "body_size_limit \"%.64s\": unknown unit: want a size with a unit "
                                "such as 512KB, 16MB, 1GB, or 0",
                                s);
    }
    j->keep_dropped_targets = cfg->keep_dropped_targets;
    if (v[K_KEEP_DROPPED]) {
        int64_t kd;
        if ((rc =
                 pd__cfg_want_int(c, v[K_KEEP_DROPPED], "keep_dropped_targets", 0, INT64_MAX, &kd)))
            return rc;
        if (kd)
            j->keep_dropped_targets = (uint64_t)kd;
    }
    if (v[K_RELABEL] && (rc = pd__cfg_parse_relabel(c, v[K_RELABEL], j)))
        return rc;
    if ((v[K_FILE_SD] && (rc = pd__cfg_parse_sd(c, v[K_FILE_SD], PD_SD_FILE, j))) ||
        (v[K_HTTP_SD] && (rc = pd__cfg_parse_sd(c, v[K_HTTP_SD], PD_SD_HTTP, j))) ||
        (v[K_DNS_SD] && (rc = pd__cfg_parse_sd(c, v[K_DNS_SD], PD_SD_DNS, j))) ||
        (v[K_K8S_SD] && (rc = pd__cfg_parse_sd(c, v[K_K8S_SD], PD_SD_K8S, j))))
        return rc;
    if ((rc = pd__cfg_parse_client(c, &v[K_CLIENT], n, &j->client)))
        return rc;
    if (v[K_STATIC]) {
        const yaml_node_t *s = v[K_STATIC];
        if ((rc = pd__cfg_want_seq(c, s, "static_configs", &empty)))
            return rc;
        if (!empty) {
            size_t cnt = (size_t)(s->data.sequence.items.top - s->data.sequence.items.start);
            j->static_configs = calloc(cnt, sizeof *j->static_configs);
            if (!j->static_configs)
                return PD_ENOMEM;
            for (size_t i = 0; i < cnt; i++) {
                yaml_node_t *sn = pd__cfg_node(c, s->data.sequence.items.start[i]);
                if (!sn)
                    return pd__cfg_fail(c, s, PD_EPARSE, "static_configs: broken YAML node");
                j->n_static_configs++;
                if ((rc = parse_static(c, sn, &j->static_configs[i])))
                    return rc;
            }
        }
    }
    if ((rc = parse_profiling(c, v[K_PROFILING], j, cfg->dialect)))
        return rc;
    /* after the endpoints: adaptive_capture.profiles names them */
    return v[K_ADAPTIVE] ? pd__cfg_parse_adaptive(c, v[K_ADAPTIVE], j) : 0;
}

/* Size as Prometheus' body_size_limit (units.Base2Bytes): a number with an
 * optional B, KB, MB, GB, TB, PB or KiB... suffix, powers of 1024. */
int pd_config_parse_size(const char *s, size_t *out)
{
    char *end;
    if (!*s || *s == '-' || *s == '+')
        return PD_EINVAL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno)
        return PD_EINVAL;
    static const char *const units[] = {"", "B", "KB", "MB", "GB", "TB", "PB"};
    static const char *const iunits[] = {"", "B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    for (int u = 0; u < 7; u++) {
        if (strcmp(end, units[u]) && strcmp(end, iunits[u]))
            continue;
        int shift = u < 2 ? 0 : 10 * (u - 1);
        if (shift && v > (SIZE_MAX >> shift))
            return PD_EINVAL;
        *out = (size_t)(v << shift);
        return 0;
    }
    return PD_EINVAL;
}

const char *pd_config_dialect_name(pd_config_dialect d)
{
    switch (d) {
    case PD_DIALECT_PROMETHEUS:
        return "prometheus";
    case PD_DIALECT_PARCA:
        return "parca";
    case PD_DIALECT_CONPROF:
        return "conprof";
    default:
        return "profd";
    }
}

/* The dialect from the document's keys, before anything is parsed (rules in
 * config.h). Reads without checking: the strict walk comes after. */
static pd_config_dialect detect_dialect(pd__cfg_ctx *c, const yaml_node_t *root)
{
    bool parca = false, conprof = false, prom = false;
    if (!root || root->type != YAML_MAPPING_NODE)
        return PD_DIALECT_PROFD;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = pd__cfg_node(c, p->key), *v = pd__cfg_node(c, p->value);
        if (!k || !v || k->type != YAML_SCALAR_NODE)
            continue;
        const char *ks = pd__cfg_sval(k);
        if (!strcmp(ks, "object_storage"))
            parca = true;
        else if (!strcmp(ks, "alerting") || !strcmp(ks, "rule_files") ||
                 !strcmp(ks, "remote_write") || !strcmp(ks, "remote_read") ||
                 !strcmp(ks, "storage") || !strcmp(ks, "tracing"))
            prom = true;
        else if (!strcmp(ks, "global") && v->type == YAML_MAPPING_NODE) {
            for (yaml_node_pair_t *q = v->data.mapping.pairs.start; q < v->data.mapping.pairs.top;
                 q++) {
                yaml_node_t *gk = pd__cfg_node(c, q->key);
                if (gk && gk->type == YAML_SCALAR_NODE &&
                    (!strcmp(pd__cfg_sval(gk), "evaluation_interval") ||
                     !strcmp(pd__cfg_sval(gk), "external_labels")))
                    prom = true;
            }
        } else if (!strcmp(ks, "scrape_configs") && v->type == YAML_SEQUENCE_NODE) {
            for (yaml_node_item_t *it = v->data.sequence.items.start;
                 it < v->data.sequence.items.top; it++) {
                yaml_node_t *jn = pd__cfg_node(c, *it);
                if (!jn || jn->type != YAML_MAPPING_NODE)
                    continue;
                for (yaml_node_pair_t *q = jn->data.mapping.pairs.start;
                     q < jn->data.mapping.pairs.top; q++) {
                    yaml_node_t *jk = pd__cfg_node(c, q->key), *jv = pd__cfg_node(c, q->value);
                    if (!jk || !jv || jk->type != YAML_SCALAR_NODE)
                        continue;
                    if (!strcmp(pd__cfg_sval(jk), "normalized_addresses"))
                        parca = true;
                    if (strcmp(pd__cfg_sval(jk), "profiling_config") ||
                        jv->type != YAML_MAPPING_NODE)
                        continue;
                    for (yaml_node_pair_t *r = jv->data.mapping.pairs.start;
                         r < jv->data.mapping.pairs.top; r++) {
                        yaml_node_t *pk = pd__cfg_node(c, r->key), *pv = pd__cfg_node(c, r->value);
                        if (!pk || !pv || pk->type != YAML_SCALAR_NODE)
                            continue;
                        if (!strcmp(pd__cfg_sval(pk), "path_prefix"))
                            parca = true;
                        if (strcmp(pd__cfg_sval(pk), "pprof_config") ||
                            pv->type != YAML_MAPPING_NODE)
                            continue;
                        for (yaml_node_pair_t *e = pv->data.mapping.pairs.start;
                             e < pv->data.mapping.pairs.top; e++) {
                            yaml_node_t *ek = pd__cfg_node(c, e->key),
                                        *ev = pd__cfg_node(c, e->value);
                            if (!ek || ek->type != YAML_SCALAR_NODE)
                                continue;
                            const char *en = pd__cfg_sval(ek);
                            if (!strcmp(en, "memory") || !strcmp(en, "process_cpu"))
                                parca = true;
                            if (!strcmp(en, "profile") || !strcmp(en, "trace"))
                                conprof = true;
                            if (ev && ev->type == YAML_MAPPING_NODE)
                                for (yaml_node_pair_t *f = ev->data.mapping.pairs.start;
                                     f < ev->data.mapping.pairs.top; f++) {
                                    yaml_node_t *fk = pd__cfg_node(c, f->key);
                                    if (fk && fk->type == YAML_SCALAR_NODE &&
                                        !strcmp(pd__cfg_sval(fk), "keep_sample_type"))
                                        parca = true;
                                }
                        }
                    }
                }
            }
        }
    }
    return parca     ? PD_DIALECT_PARCA
           : conprof ? PD_DIALECT_CONPROF
           : prom    ? PD_DIALECT_PROMETHEUS
                     : PD_DIALECT_PROFD;
}

/* ---- entry points ---- */

/* YAML's !!binary scalars (base64, as Go's yaml reads them): decoded in
 * place (the bytes are never longer than their base64), so "/w==" is the
 * byte 0xff that the label checks then refuse, like Prometheus. */
static int decode_binary(pd__cfg_ctx *c)
{
    for (yaml_node_t *n = c->doc.nodes.start; n < c->doc.nodes.top; n++) {
        if (n->type != YAML_SCALAR_NODE || !n->tag ||
            strcmp((const char *)n->tag, "tag:yaml.org,2002:binary"))
            continue;
        unsigned char *s = n->data.scalar.value;
        size_t len = n->data.scalar.length, o = 0;
        uint32_t acc = 0;
        int bits = 0;
        bool pad = false;
        for (size_t i = 0; i < len; i++) {
            unsigned char ch = s[i];
            if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t')
                continue;
            if (ch == '=') {
                pad = true;
                continue;
            }
            int v = ch >= 'A' && ch <= 'Z'   ? ch - 'A'
                    : ch >= 'a' && ch <= 'z' ? ch - 'a' + 26
                    : ch >= '0' && ch <= '9' ? ch - '0' + 52
                    : ch == '+'              ? 62
                    : ch == '/'              ? 63
                                             : -1;
            if (v < 0 || pad)
                return pd__cfg_fail(c, n, PD_EINVAL, "!!binary value contains invalid base64 data");
            acc = (acc << 6) | (uint32_t)v;
            bits += 6;
            if (bits >= 8) {
                bits -= 8;
                s[o++] = (unsigned char)(acc >> bits);
            }
        }
        if (memchr(s, 0, o))
            return pd__cfg_fail(c, n, PD_EINVAL, "!!binary value holds a NUL byte");
        s[o] = 0;
        n->data.scalar.length = o;
    }
    return 0;
}

int pd_config_parse(const char *text, size_t len, const char *name, pd_config *out, pd_err *err)
{
    pd__cfg_ctx c;
    yaml_parser_t parser;
    int rc = 0;
    memset(&c, 0, sizeof c);
    c.name = name ? name : "config";
    c.err = err;
    c.cfg = out;
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
    if ((rc = decode_binary(&c)))
        goto out;
    const char *slash = strrchr(c.name, '/');
    c.dir = slash ? strndup(c.name, (size_t)(slash - c.name) + (slash == c.name)) : strdup("");
    if (!c.dir) {
        rc = PD_ENOMEM;
        goto out;
    }

    yaml_node_t *root = yaml_document_get_root_node(&c.doc);
    if (!root || pd_yaml_is_null(root))
        goto out; /* empty file: no jobs */
    /* recording_rules, recording_rule_files and remote_write are read by
       rules/ (issue 30); remote_write only along with rules (else, as in a
       Prometheus file, it is ignored with the warning below) */
    static const char *const keys[] = {
        "global", "scrape_configs", "recording_rules", "recording_rule_files", NULL, NULL};
    static const char *const keys_rw[] = {"global",          "scrape_configs",
                                          "recording_rules", "recording_rule_files",
                                          "remote_write",    NULL};
    static const pd__cfg_ignored top_ignored[] = {
        {"remote_write", "profd writes no metrics remotely"}, /* first: see keys_rw */
        {"alerting", "profd sends no alerts"},
        {"rule_files", "profd evaluates no rules"},
        {"remote_read", "profd reads no metrics remotely"},
        {"storage", "profd's storage is set by --storage.* flags"},
        {"tracing", "profd exports no traces"},
        {"otlp", "profd takes no OTLP metrics"},
        {"runtime", "Go runtime settings"},
        {"scrape_config_files", "not supported: put the jobs in scrape_configs"},
        {"object_storage", "Parca's block storage: profd stores under --storage.path"},
        {NULL, NULL},
    };
    yaml_node_t *v[5];
    out->dialect = detect_dialect(&c, root);
    bool rules = false;
    if (root->type == YAML_MAPPING_NODE)
        for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
             p++) {
            yaml_node_t *k = pd__cfg_node(&c, p->key);
            rules |= k && k->type == YAML_SCALAR_NODE &&
                     (!strcmp(pd__cfg_sval(k), "recording_rules") ||
                      !strcmp(pd__cfg_sval(k), "recording_rule_files"));
        }
    if ((rc = pd__cfg_map_keys_ign(&c, root, "the top level", rules ? keys_rw : keys, v,
                                   rules ? top_ignored + 1 : top_ignored)))
        goto out;
    if (v[0] && out->dialect == PD_DIALECT_PARCA &&
        (rc = pd__cfg_warn(&c, v[0],
                           "global: Parca has no global section; read as Prometheus' "
                           "(Parca's job defaults still apply: 10s, timeout interval+3s)")))
        goto out;
    if (v[0] && (rc = parse_global(&c, v[0], out)))
        goto out;
    if (v[1]) {
        const yaml_node_t *s = v[1];
        bool empty;
        if ((rc = pd__cfg_want_seq(&c, s, "scrape_configs", &empty)) || empty)
            goto out;
        size_t cnt = (size_t)(s->data.sequence.items.top - s->data.sequence.items.start);
        out->jobs = calloc(cnt, sizeof *out->jobs);
        if (!out->jobs) {
            rc = PD_ENOMEM;
            goto out;
        }
        for (size_t i = 0; i < cnt; i++) {
            yaml_node_t *jn = pd__cfg_node(&c, s->data.sequence.items.start[i]);
            if (!jn) {
                rc = pd__cfg_fail(&c, s, PD_EPARSE, "scrape_configs: broken YAML node");
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
    if (!rc && !(out->source = malloc(len + 1))) {
        rc = PD_ENOMEM;
    } else if (!rc) {
        memcpy(out->source, text, len);
        out->source[len] = '\0';
        out->source_len = len;
        if (!(out->source_name = strdup(c.name)))
            rc = PD_ENOMEM;
    }
    if (rc == PD_ENOMEM) {
        pd_err_set(err, rc, "%s: out of memory reading the configuration", c.name);
        pd_config_release(out);
    }
    if (!rc && c.dropped_warnings)
        pd__cfg_warn(&c, NULL, "%zu more warnings not shown", c.dropped_warnings);
    yaml_document_delete(&c.doc);
    free(c.dir);
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
