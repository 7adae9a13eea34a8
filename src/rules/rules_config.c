/*
 * rules/rules_config.c — reads recording_rules, rule_files and remote_write
 * (rules.h) from profd's configuration file, strictly: an unknown key or a
 * bad value is an error naming FILE:LINE:COL and the key, as the scrape
 * reader (scrape/config.c) does for its sections. Prometheus' remote_write
 * keys profd does not implement are accepted with a warning each, so a
 * Prometheus configuration still loads whole.
 */
#include <errno.h>
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "base/time.h"
#include "base/yaml/yaml_node.h"
#include "query/query.h"
#include "rules/rules.h"

#define MAX_RULE_FILE_BYTES (4u << 20)
#define MAX_RULE_FILES 1000

typedef struct ctx {
    yaml_document_t doc;
    const char *name;
    pd_err *err;
    pd_rules_config *cfg;
} ctx;

static int fail(ctx *c, const yaml_node_t *n, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(ctx *c, const yaml_node_t *n, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = pd_yaml_vfail(c->err, c->name, n, code, fmt, ap);
    va_end(ap);
    return rc;
}

static int warn(ctx *c, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int warn(ctx *c, const yaml_node_t *n, const char *fmt, ...)
{
    char msg[500], line[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(line, sizeof line, "%s:%zu:%zu: %s", c->name, n ? n->start_mark.line + 1 : 0,
             n ? n->start_mark.column + 1 : 0, msg);
    if (c->cfg->n_warnings >= 1000)
        return 0;
    char **w = realloc(c->cfg->warnings, (c->cfg->n_warnings + 1) * sizeof *w);
    if (!w)
        return PD_ENOMEM;
    c->cfg->warnings = w;
    if (!(w[c->cfg->n_warnings] = strdup(line)))
        return PD_ENOMEM;
    c->cfg->n_warnings++;
    return 0;
}

static yaml_node_t *node(ctx *c, int id)
{
    return yaml_document_get_node(&c->doc, id);
}

static int want_str(ctx *c, const yaml_node_t *n, const char *what, const char **out)
{
    if (!n || n->type != YAML_SCALAR_NODE || pd_yaml_is_null(n))
        return fail(c, n, PD_EINVAL, "%s: want a string", what);
    if (strlen((const char *)n->data.scalar.value) != n->data.scalar.length)
        return fail(c, n, PD_EINVAL, "%s: NUL byte in the value", what);
    *out = (const char *)n->data.scalar.value;
    return 0;
}

static int want_dup(ctx *c, const yaml_node_t *n, const char *what, char **out)
{
    const char *s;
    int rc = want_str(c, n, what, &s);
    if (rc)
        return rc;
    free(*out);
    return (*out = strdup(s)) ? 0 : PD_ENOMEM;
}

static int want_duration(ctx *c, const yaml_node_t *n, const char *what, int64_t *ms)
{
    const char *s;
    int rc = want_str(c, n, what, &s);
    if (rc)
        return rc;
    pd_err e = {{0}};
    if (pd_parse_duration(s, ms, &e) < 0 || *ms <= 0)
        return fail(c, n, PD_EINVAL, "%s: \"%s\" is not a duration > 0 (e.g. 30s, 5m)", what, s);
    return 0;
}

static int want_count(ctx *c, const yaml_node_t *n, const char *what, size_t max, size_t *out)
{
    const char *s;
    int rc = want_str(c, n, what, &s);
    if (rc)
        return rc;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v == 0 || v > max)
        return fail(c, n, PD_EINVAL, "%s: \"%s\" is not a whole number in 1..%zu", what, s, max);
    *out = (size_t)v;
    return 0;
}

/* Checks a mapping's keys against known (NULL-terminated); vals[i] gets
 * known[i]'s value node or NULL. Keys of ign (NULL-terminated, may be NULL)
 * get a warning; any other key or a duplicate is an error. */
static int map_keys(ctx *c, const yaml_node_t *m, const char *what, const char *const *known,
                    yaml_node_t **vals, const char *const *ign, const char *ign_why)
{
    size_t nk = 0;
    while (known[nk])
        vals[nk++] = NULL;
    if (pd_yaml_is_null(m))
        return 0;
    if (m->type != YAML_MAPPING_NODE)
        return fail(c, m, PD_EINVAL, "%s: want a mapping", what);
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node(c, p->key), *v = node(c, p->value);
        if (!k || !v || k->type != YAML_SCALAR_NODE)
            return fail(c, k ? k : m, PD_EINVAL, "%s: keys must be strings", what);
        const char *ks = (const char *)k->data.scalar.value;
        size_t i = 0;
        while (i < nk && strcmp(known[i], ks))
            i++;
        if (i < nk) {
            if (vals[i])
                return fail(c, k, PD_EINVAL, "%s: %s given twice", what, ks);
            vals[i] = v;
            continue;
        }
        bool ignored = false;
        for (size_t j = 0; ign && ign[j]; j++)
            ignored |= !strcmp(ign[j], ks);
        if (ignored) {
            int rc = warn(c, k, "%s: %s ignored: %s", what, ks, ign_why);
            if (rc)
                return rc;
            continue;
        }
        char list[300] = "";
        for (size_t j = 0; j < nk; j++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", j ? ", " : "",
                     known[j]);
        return fail(c, k, PD_EINVAL, "%s: unknown key %s (known: %s)", what, ks, list);
    }
    return 0;
}

static bool metric_name_ok(const char *s)
{
    if (!*s)
        return false;
    for (const char *p = s; *p; p++) {
        bool alpha = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' || *p == ':';
        if (!alpha && (p == s || *p < '0' || *p > '9'))
            return false;
    }
    return true;
}

void pd_rule_release(pd_rule *r)
{
    free(r->record);
    free(r->selector);
    pd_matchers_free(r->ms, r->n_ms);
    free(r->sample_type);
    if (r->function)
        pd_matcher_release(&r->fn);
    free(r->function);
    for (size_t i = 0; i < r->n_by; i++)
        free(r->by[i]);
    free(r->by);
    pd_labels_release(&r->labels);
    free(r->source);
    memset(r, 0, sizeof *r);
}

static int parse_rule(ctx *c, const yaml_node_t *n, pd_rule *r)
{
    static const char *const keys[] = {"record",         "selector", "sample_type", "function",
                                       "function_match", "by",       "labels",      NULL};
    yaml_node_t *v[7];
    int rc = map_keys(c, n, "recording rule", keys, v, NULL, NULL);
    if (rc)
        return rc;
    if (n->type != YAML_MAPPING_NODE)
        return fail(c, n, PD_EINVAL, "recording rule: want a mapping");
    char src[600];
    snprintf(src, sizeof src, "%s:%zu", c->name, n->start_mark.line + 1);
    if (!(r->source = strdup(src)))
        return PD_ENOMEM;
    if (!v[0])
        return fail(c, n, PD_EINVAL, "recording rule: record (the metric name) is missing");
    if ((rc = want_dup(c, v[0], "record", &r->record)))
        return rc;
    if (!metric_name_ok(r->record))
        return fail(c, v[0], PD_EINVAL,
                    "record: \"%s\" is not a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)", r->record);
    if (!v[1])
        return fail(c, n, PD_EINVAL, "rule %s: selector (profile type and matchers) is missing",
                    r->record);
    if ((rc = want_dup(c, v[1], "selector", &r->selector)))
        return rc;
    pd_err e = {{0}};
    if (pd_selector_parse(r->selector, &r->ms, &r->n_ms, &e) < 0)
        return fail(c, v[1], PD_EINVAL, "rule %s: selector %s: %s", r->record, r->selector, e.msg);
    bool has_type = false;
    for (size_t i = 0; i < r->n_ms; i++)
        has_type |= !strcmp(r->ms[i].name, "__name__") && r->ms[i].type == PD_MATCH_EQ;
    if (!has_type)
        return fail(c, v[1], PD_EINVAL,
                    "rule %s: selector %s names no profile type (write cpu{...} or "
                    "{__name__=\"cpu\", ...})",
                    r->record, r->selector);
    if (!v[2])
        return fail(c, n, PD_EINVAL,
                    "rule %s: sample_type is missing (e.g. cpu, samples, alloc_space)", r->record);
    if ((rc = want_dup(c, v[2], "sample_type", &r->sample_type)))
        return rc;
    if (v[3] && !pd_yaml_is_null(v[3])) {
        if ((rc = want_dup(c, v[3], "function", &r->function)))
            return rc;
        if (pd_matcher_init(&r->fn, PD_MATCH_RE, "function", r->function, &e) < 0) {
            free(r->function);
            r->function = NULL;
            return fail(c, v[3], PD_EINVAL, "rule %s: function: %s", r->record, e.msg);
        }
    }
    if (v[4]) {
        const char *m;
        if ((rc = want_str(c, v[4], "function_match", &m)))
            return rc;
        if (!strcmp(m, "total"))
            r->fn_match = PD_RULE_FN_TOTAL;
        else if (!strcmp(m, "self"))
            r->fn_match = PD_RULE_FN_SELF;
        else
            return fail(c, v[4], PD_EINVAL,
                        "rule %s: function_match: \"%s\": want total (a frame of the stack "
                        "matches) or self (the leaf frame matches)",
                        r->record, m);
        if (!r->function)
            return fail(c, v[4], PD_EINVAL, "rule %s: function_match without function", r->record);
    }
    if (v[5] && !pd_yaml_is_null(v[5])) {
        if (v[5]->type != YAML_SEQUENCE_NODE)
            return fail(c, v[5], PD_EINVAL, "rule %s: by: want a list of label names", r->record);
        size_t cnt = (size_t)(v[5]->data.sequence.items.top - v[5]->data.sequence.items.start);
        if (cnt > PD_RULES_MAX_BY)
            return fail(c, v[5], PD_EINVAL, "rule %s: by: %zu labels, at most %d", r->record, cnt,
                        PD_RULES_MAX_BY);
        if (!(r->by = calloc(cnt ? cnt : 1, sizeof *r->by)))
            return PD_ENOMEM;
        for (size_t i = 0; i < cnt; i++) {
            yaml_node_t *ln = node(c, v[5]->data.sequence.items.start[i]);
            if ((rc = want_dup(c, ln, "by", &r->by[i])))
                return rc;
            r->n_by++;
            if (!pd_label_name_valid(r->by[i]) || !strncmp(r->by[i], "__", 2))
                return fail(c, ln, PD_EINVAL, "rule %s: by: \"%s\" is not a label name", r->record,
                            r->by[i]);
            for (size_t j = 0; j < i; j++)
                if (!strcmp(r->by[j], r->by[i]))
                    return fail(c, ln, PD_EINVAL, "rule %s: by: %s given twice", r->record,
                                r->by[i]);
        }
    }
    if (v[6] && !pd_yaml_is_null(v[6])) {
        if (v[6]->type != YAML_MAPPING_NODE)
            return fail(c, v[6], PD_EINVAL, "rule %s: labels: want a mapping", r->record);
        for (yaml_node_pair_t *p = v[6]->data.mapping.pairs.start; p < v[6]->data.mapping.pairs.top;
             p++) {
            const char *k, *val;
            if ((rc = want_str(c, node(c, p->key), "labels key", &k)) ||
                (rc = want_str(c, node(c, p->value), "labels value", &val)))
                return rc;
            if (!pd_label_name_valid(k) || !strncmp(k, "__", 2))
                return fail(c, node(c, p->key), PD_EINVAL,
                            "rule %s: labels: \"%s\" is not a label name", r->record, k);
            for (size_t j = 0; j < r->n_by; j++)
                if (!strcmp(r->by[j], k))
                    return fail(c, node(c, p->key), PD_EINVAL,
                                "rule %s: labels: %s is also a by label", r->record, k);
            if (pd_labels_get(&r->labels, k))
                return fail(c, node(c, p->key), PD_EINVAL, "rule %s: labels: %s given twice",
                            r->record, k);
            if (pd_labels_set(&r->labels, k, val, &e) < 0)
                return fail(c, node(c, p->key), PD_EINVAL, "rule %s: labels: %s", r->record, e.msg);
        }
    }
    return 0;
}

static int parse_rules(ctx *c, const yaml_node_t *n)
{
    if (pd_yaml_is_null(n))
        return 0;
    if (n->type != YAML_SEQUENCE_NODE)
        return fail(c, n, PD_EINVAL, "recording_rules: want a list of rules");
    pd_rules_config *cfg = c->cfg;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        if (cfg->n_rules >= PD_RULES_MAX)
            return fail(c, n, PD_EINVAL, "recording_rules: more than %d rules", PD_RULES_MAX);
        pd_rule *nr = realloc(cfg->rules, (cfg->n_rules + 1) * sizeof *nr);
        if (!nr)
            return PD_ENOMEM;
        cfg->rules = nr;
        pd_rule *r = &cfg->rules[cfg->n_rules++];
        memset(r, 0, sizeof *r);
        yaml_node_t *rn = node(c, *it);
        if (!rn)
            return fail(c, n, PD_EINVAL, "recording_rules: broken YAML node");
        int rc = parse_rule(c, rn, r);
        if (rc)
            return rc;
        for (size_t i = 0; i + 1 < cfg->n_rules; i++)
            if (!strcmp(cfg->rules[i].record, r->record))
                return fail(c, rn, PD_EINVAL,
                            "rule %s: record given twice (also at %s): one rule per metric",
                            r->record, cfg->rules[i].source);
    }
    return 0;
}

static void remote_release(pd_remote_write_config *r)
{
    free(r->name);
    free(r->url);
    for (size_t i = 0; i < r->n_headers; i++)
        free(r->headers[i]);
    free(r->headers);
    free(r->username);
    free(r->password);
    memset(r, 0, sizeof *r);
}

static int read_small_file(const char *path, char **out, size_t *len, pd_err *err);

static int parse_remote(ctx *c, const yaml_node_t *n, pd_remote_write_config *r)
{
    static const char *const keys[] = {
        "url", "name", "remote_timeout", "headers", "basic_auth", "queue_config", NULL};
    static const char *const ign[] = {"write_relabel_configs",
                                      "metadata_config",
                                      "send_exemplars",
                                      "send_native_histograms",
                                      "authorization",
                                      "sigv4",
                                      "azuread",
                                      "oauth2",
                                      "tls_config",
                                      "proxy_url",
                                      "follow_redirects",
                                      "enable_http2",
                                      "bearer_token",
                                      "bearer_token_file",
                                      "protobuf_message",
                                      NULL};
    yaml_node_t *v[6];
    int rc = map_keys(c, n, "remote_write entry", keys, v, ign, "not supported by profd");
    if (rc)
        return rc;
    r->timeout_ms = 30000;
    r->capacity = 100000;
    r->max_samples_per_send = 2000;
    r->min_backoff_ms = 30;
    r->max_backoff_ms = 5000;
    if (!v[0])
        return fail(c, n, PD_EINVAL, "remote_write entry: url is missing");
    if ((rc = want_dup(c, v[0], "remote_write url", &r->url)))
        return rc;
    if (strncmp(r->url, "http://", 7) && strncmp(r->url, "https://", 8))
        return fail(c, v[0], PD_EINVAL, "remote_write url: \"%s\" is not an http(s) URL", r->url);
    if (v[1]) {
        if ((rc = want_dup(c, v[1], "remote_write name", &r->name)))
            return rc;
    } else {
        uint64_t h = 1469598103934665603ull; /* FNV-1a of the URL, as a short stable name */
        for (const char *p = r->url; *p; p++)
            h = (h ^ (unsigned char)*p) * 1099511628211ull;
        char nm[16];
        snprintf(nm, sizeof nm, "%06llx", (unsigned long long)(h & 0xffffff));
        if (!(r->name = strdup(nm)))
            return PD_ENOMEM;
    }
    if (v[2] && (rc = want_duration(c, v[2], "remote_timeout", &r->timeout_ms)))
        return rc;
    if (v[3] && !pd_yaml_is_null(v[3])) {
        if (v[3]->type != YAML_MAPPING_NODE)
            return fail(c, v[3], PD_EINVAL, "remote_write headers: want a mapping");
        for (yaml_node_pair_t *p = v[3]->data.mapping.pairs.start; p < v[3]->data.mapping.pairs.top;
             p++) {
            const char *k, *val;
            if ((rc = want_str(c, node(c, p->key), "headers key", &k)) ||
                (rc = want_str(c, node(c, p->value), "headers value", &val)))
                return rc;
            if (strpbrk(k, ": \r\n") || strpbrk(val, "\r\n") || !*k)
                return fail(c, node(c, p->key), PD_EINVAL, "remote_write headers: bad header %s",
                            k);
            char **h = realloc(r->headers, (r->n_headers + 1) * sizeof *h);
            if (!h)
                return PD_ENOMEM;
            r->headers = h;
            size_t l = strlen(k) + strlen(val) + 3;
            if (!(h[r->n_headers] = malloc(l)))
                return PD_ENOMEM;
            snprintf(h[r->n_headers++], l, "%s: %s", k, val);
        }
    }
    if (v[4] && !pd_yaml_is_null(v[4])) {
        static const char *const bk[] = {"username", "password", "password_file", NULL};
        yaml_node_t *b[3];
        if ((rc = map_keys(c, v[4], "remote_write basic_auth", bk, b, NULL, NULL)))
            return rc;
        if (!b[0])
            return fail(c, v[4], PD_EINVAL, "remote_write basic_auth: username is missing");
        if ((rc = want_dup(c, b[0], "basic_auth username", &r->username)))
            return rc;
        if (b[1] && b[2])
            return fail(c, v[4], PD_EINVAL,
                        "remote_write basic_auth: password and password_file are exclusive");
        if (b[1] && (rc = want_dup(c, b[1], "basic_auth password", &r->password)))
            return rc;
        if (b[2]) {
            const char *pf;
            if ((rc = want_str(c, b[2], "basic_auth password_file", &pf)))
                return rc;
            char *text = NULL;
            size_t len = 0;
            pd_err e = {{0}};
            if (read_small_file(pf, &text, &len, &e) < 0)
                return fail(c, b[2], PD_EINVAL, "basic_auth password_file: %s", e.msg);
            while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
                text[--len] = 0;
            r->password = text;
        }
        if (!r->password && !(r->password = strdup("")))
            return PD_ENOMEM;
    }
    if (v[5] && !pd_yaml_is_null(v[5])) {
        static const char *const qk[] = {"capacity", "max_samples_per_send", "min_backoff",
                                         "max_backoff", NULL};
        static const char *const qign[] = {"max_shards",          "min_shards",
                                           "batch_send_deadline", "retry_on_http_429",
                                           "sample_age_limit",    NULL};
        yaml_node_t *q[4];
        if ((rc = map_keys(c, v[5], "remote_write queue_config", qk, q, qign,
                           "profd sends from one queue per remote")))
            return rc;
        if (q[0] && (rc = want_count(c, q[0], "queue_config capacity", 10000000, &r->capacity)))
            return rc;
        if (q[1] && (rc = want_count(c, q[1], "queue_config max_samples_per_send", 100000,
                                     &r->max_samples_per_send)))
            return rc;
        if (q[2] && (rc = want_duration(c, q[2], "queue_config min_backoff", &r->min_backoff_ms)))
            return rc;
        if (q[3] && (rc = want_duration(c, q[3], "queue_config max_backoff", &r->max_backoff_ms)))
            return rc;
        if (r->max_backoff_ms < r->min_backoff_ms)
            return fail(c, v[5], PD_EINVAL,
                        "remote_write queue_config: max_backoff is below min_backoff");
    }
    return 0;
}

static int parse_remotes(ctx *c, const yaml_node_t *n)
{
    if (pd_yaml_is_null(n))
        return 0;
    if (n->type != YAML_SEQUENCE_NODE)
        return fail(c, n, PD_EINVAL, "remote_write: want a list of {url: ...}");
    pd_rules_config *cfg = c->cfg;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        if (cfg->n_remotes >= 100)
            return fail(c, n, PD_EINVAL, "remote_write: more than 100 remotes");
        pd_remote_write_config *nr = realloc(cfg->remotes, (cfg->n_remotes + 1) * sizeof *nr);
        if (!nr)
            return PD_ENOMEM;
        cfg->remotes = nr;
        pd_remote_write_config *r = &cfg->remotes[cfg->n_remotes++];
        memset(r, 0, sizeof *r);
        yaml_node_t *rn = node(c, *it);
        if (!rn)
            return fail(c, n, PD_EINVAL, "remote_write: broken YAML node");
        int rc = parse_remote(c, rn, r);
        if (rc)
            return rc;
        for (size_t i = 0; i + 1 < cfg->n_remotes; i++)
            if (!strcmp(cfg->remotes[i].name, r->name))
                return fail(c, rn, PD_EINVAL, "remote_write: name %s given twice", r->name);
    }
    return 0;
}

static int read_small_file(const char *path, char **out, size_t *len, pd_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return pd_err_set(err, -errno, "cannot open %s: %s", path, strerror(errno));
    char *text = malloc(MAX_RULE_FILE_BYTES + 1);
    if (!text) {
        fclose(f);
        return PD_ENOMEM;
    }
    size_t n = fread(text, 1, MAX_RULE_FILE_BYTES + 1, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || n > MAX_RULE_FILE_BYTES) {
        free(text);
        return pd_err_set(err, bad ? -EIO : PD_ETOOBIG,
                          bad ? "cannot read %s" : "%s is over %u bytes", path,
                          MAX_RULE_FILE_BYTES);
    }
    text[n] = 0;
    *out = text;
    *len = n;
    return 0;
}

static int parse_doc(const char *text, size_t len, const char *name, bool rule_file,
                     pd_rules_config *cfg, pd_err *err);

static int parse_rule_files(ctx *c, const yaml_node_t *n)
{
    if (pd_yaml_is_null(n))
        return 0;
    if (n->type != YAML_SEQUENCE_NODE)
        return fail(c, n, PD_EINVAL, "recording_rule_files: want a list of file names or patterns");
    const char *slash = strrchr(c->name, '/');
    size_t dl = slash ? (size_t)(slash - c->name) + 1 : 0;
    size_t files = 0;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        const char *pat;
        int rc = want_str(c, node(c, *it), "recording_rule_files", &pat);
        if (rc)
            return rc;
        char full[4096];
        if (pat[0] == '/' || !dl)
            snprintf(full, sizeof full, "%s", pat);
        else
            snprintf(full, sizeof full, "%.*s%s", (int)dl, c->name, pat);
        glob_t g;
        memset(&g, 0, sizeof g);
        int gr = glob(full, 0, NULL, &g);
        if (gr == GLOB_NOMATCH && !strpbrk(pat, "*?[")) {
            globfree(&g);
            return fail(c, node(c, *it), PD_EINVAL, "recording_rule_files: %s: no such file", full);
        }
        for (size_t i = 0; gr == 0 && i < g.gl_pathc; i++) {
            if (++files > MAX_RULE_FILES) {
                globfree(&g);
                return fail(c, n, PD_EINVAL, "recording_rule_files: more than %d files",
                            MAX_RULE_FILES);
            }
            char *t = NULL;
            size_t tl = 0;
            rc = read_small_file(g.gl_pathv[i], &t, &tl, c->err);
            if (rc == 0) {
                rc = parse_doc(t, tl, g.gl_pathv[i], true, c->cfg, c->err);
                free(t);
            }
            if (rc) {
                globfree(&g);
                return rc;
            }
        }
        globfree(&g);
    }
    return 0;
}

/* One document: profd's configuration (rule_file false: the three keys,
 * other keys left to the scrape reader) or a rule file (recording_rules:
 * only). */
static int parse_doc(const char *text, size_t len, const char *name, bool rule_file,
                     pd_rules_config *cfg, pd_err *err)
{
    ctx c;
    memset(&c, 0, sizeof c);
    c.name = name ? name : "config";
    c.err = err;
    c.cfg = cfg;
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return PD_ENOMEM;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &c.doc)) {
        int rc = pd_err_set(err, PD_EPARSE, "%s:%zu:%zu: YAML error: %s", c.name,
                            parser.problem_mark.line + 1, parser.problem_mark.column + 1,
                            parser.problem ? parser.problem : "unknown");
        yaml_parser_delete(&parser);
        return rc;
    }
    yaml_parser_delete(&parser);
    int rc = 0;
    yaml_node_t *root = yaml_document_get_root_node(&c.doc);
    if (!root || pd_yaml_is_null(root))
        goto out;
    if (root->type != YAML_MAPPING_NODE) {
        rc = fail(&c, root, PD_EINVAL, "want a mapping at the top level");
        goto out;
    }
    if (rule_file) {
        static const char *const keys[] = {"recording_rules", NULL};
        yaml_node_t *v[1];
        if (!(rc = map_keys(&c, root, "rule file", keys, v, NULL, NULL)))
            rc = parse_rules(&c, v[0]);
        goto out;
    }
    yaml_node_t *rules = NULL, *files = NULL, *remotes = NULL;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = node(&c, p->key);
        if (!k || k->type != YAML_SCALAR_NODE)
            continue; /* the scrape reader names it */
        const char *ks = (const char *)k->data.scalar.value;
        yaml_node_t **slot = !strcmp(ks, "recording_rules")        ? &rules
                             : !strcmp(ks, "recording_rule_files") ? &files
                             : !strcmp(ks, "remote_write")         ? &remotes
                                                                   : NULL;
        if (slot && *slot) {
            rc = fail(&c, k, PD_EINVAL, "%s given twice", ks);
            goto out;
        }
        if (slot)
            *slot = node(&c, p->value);
    }
    /* remote_write belongs to the rules: without recording_rules or
       recording_rule_files (a Prometheus file) the scrape reader warns it is
       ignored */
    if ((rc = parse_rules(&c, rules)) || (rc = parse_rule_files(&c, files)) ||
        (rc = (rules || files) ? parse_remotes(&c, remotes) : 0))
        goto out;
out:
    if (rc == PD_ENOMEM)
        pd_err_set(err, rc, "%s: out of memory reading the rules", c.name);
    yaml_document_delete(&c.doc);
    return rc;
}

void pd_rules_config_init(pd_rules_config *c)
{
    memset(c, 0, sizeof *c);
}

void pd_rules_config_release(pd_rules_config *c)
{
    for (size_t i = 0; i < c->n_rules; i++)
        pd_rule_release(&c->rules[i]);
    free(c->rules);
    for (size_t i = 0; i < c->n_remotes; i++)
        remote_release(&c->remotes[i]);
    free(c->remotes);
    for (size_t i = 0; i < c->n_warnings; i++)
        free(c->warnings[i]);
    free(c->warnings);
    memset(c, 0, sizeof *c);
}

int pd_rules_config_parse(const char *text, size_t len, const char *name, pd_rules_config *out,
                          pd_err *err)
{
    pd_rules_config_init(out);
    int rc = parse_doc(text, len, name, false, out, err);
    if (rc)
        pd_rules_config_release(out);
    return rc;
}

int pd_rules_config_load_file(const char *path, pd_rules_config *out, pd_err *err)
{
    pd_rules_config_init(out);
    char *text = NULL;
    size_t len = 0;
    int rc = read_small_file(path, &text, &len, err);
    if (rc)
        return rc;
    rc = pd_rules_config_parse(text, len, path, out, err);
    free(text);
    return rc;
}

void pd_rules_config_print(const pd_rules_config *c, FILE *out)
{
    for (size_t i = 0; i < c->n_rules; i++) {
        const pd_rule *r = &c->rules[i];
        fprintf(out, "  recording rule %s: %s of %s", r->record, r->sample_type, r->selector);
        if (r->function)
            fprintf(out, ", stacks %s %s",
                    r->fn_match == PD_RULE_FN_SELF ? "ending in" : "containing", r->function);
        fprintf(out, ", by (");
        for (size_t j = 0; j < r->n_by; j++)
            fprintf(out, "%s%s", j ? ", " : "", r->by[j]);
        fprintf(out, ") [%s]\n", r->source);
    }
    for (size_t i = 0; i < c->n_remotes; i++) {
        const pd_remote_write_config *r = &c->remotes[i];
        fprintf(out,
                "  remote_write %s: %s (queue %zu samples, %zu per request, backoff %lld-%lld ms, "
                "timeout %lld ms)\n",
                r->name, r->url, r->capacity, r->max_samples_per_send, (long long)r->min_backoff_ms,
                (long long)r->max_backoff_ms, (long long)r->timeout_ms);
    }
    for (size_t i = 0; i < c->n_warnings; i++)
        fprintf(out, "  warning: %s\n", c->warnings[i]);
}
