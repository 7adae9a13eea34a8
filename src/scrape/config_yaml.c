/*
 * scrape/config_yaml.c — the YAML walking helpers of the config reader
 * (config_int.h): kinds, scalars, strict key checks, errors and warnings
 * naming FILE:LINE:COL.
 */
#include "scrape/config_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/time.h"

/* ---- errors ---- */

int pd__cfg_fail(pd__cfg_ctx *c, const yaml_node_t *n, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = pd_yaml_vfail(c->err, c->name, n, code, fmt, ap);
    va_end(ap);
    return rc;
}

/* ---- node helpers ---- */

yaml_node_t *pd__cfg_node(pd__cfg_ctx *c, int id)
{
    return yaml_document_get_node(&c->doc, id);
}

int pd__cfg_visit(pd__cfg_ctx *c, const yaml_node_t *n)
{
    if (++c->visits > PD_CFG_MAX_VISITS)
        return pd__cfg_fail(c, n, PD_ETOOBIG,
                            "configuration too large: over %d YAML nodes (aliases count each use)",
                            PD_CFG_MAX_VISITS);
    return 0;
}

const char *pd__cfg_sval(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

/* A mapping, or null (treated as empty: *is_empty set). */
int pd__cfg_want_map(pd__cfg_ctx *c, const yaml_node_t *n, const char *what, bool *is_empty)
{
    int rc = pd__cfg_visit(c, n);
    if (rc)
        return rc;
    *is_empty = false;
    if (pd_yaml_is_null(n)) {
        *is_empty = true;
        return 0;
    }
    if (n->type != YAML_MAPPING_NODE)
        return pd__cfg_fail(c, n, PD_EINVAL, "%s: expected a mapping, got %s", what,
                            pd_yaml_kind(n));
    return 0;
}

int pd__cfg_want_seq(pd__cfg_ctx *c, const yaml_node_t *n, const char *what, bool *is_empty)
{
    int rc = pd__cfg_visit(c, n);
    if (rc)
        return rc;
    *is_empty = false;
    if (pd_yaml_is_null(n)) {
        *is_empty = true;
        return 0;
    }
    if (n->type != YAML_SEQUENCE_NODE)
        return pd__cfg_fail(c, n, PD_EINVAL, "%s: expected a list, got %s", what, pd_yaml_kind(n));
    return 0;
}

/* A scalar's text (borrowed from the document). Nul bytes are refused. */
int pd__cfg_want_str(pd__cfg_ctx *c, const yaml_node_t *n, const char *what, const char **out)
{
    int rc = pd__cfg_visit(c, n);
    if (rc)
        return rc;
    if (n->type != YAML_SCALAR_NODE)
        return pd__cfg_fail(c, n, PD_EINVAL, "%s: expected a string, got %s", what,
                            pd_yaml_kind(n));
    if (strlen(pd__cfg_sval(n)) != n->data.scalar.length)
        return pd__cfg_fail(c, n, PD_EINVAL, "%s: contains a NUL character", what);
    *out = pd__cfg_sval(n);
    return 0;
}

int pd__cfg_want_dup(pd__cfg_ctx *c, const yaml_node_t *n, const char *what, char **out)
{
    const char *s;
    int rc = pd__cfg_want_str(c, n, what, &s);
    if (rc)
        return rc;
    *out = strdup(s);
    return *out ? 0 : PD_ENOMEM;
}

int pd__cfg_want_bool(pd__cfg_ctx *c, const yaml_node_t *n, const char *what, bool *out)
{
    const char *s;
    int rc = pd__cfg_want_str(c, n, what, &s);
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
    return pd__cfg_fail(c, n, PD_EINVAL, "%s: expected true or false, got \"%.64s\"", what, s);
}

int pd__cfg_want_int(pd__cfg_ctx *c, const yaml_node_t *n, const char *what, int64_t min,
                     int64_t max, int64_t *out)
{
    const char *s;
    int rc = pd__cfg_want_str(c, n, what, &s);
    if (rc)
        return rc;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE || !*s || *end || errno)
        return pd__cfg_fail(c, n, PD_EINVAL, "%s: expected an integer, got \"%.64s\"", what, s);
    if (v < min || v > max)
        return pd__cfg_fail(c, n, PD_EINVAL, "%s: %lld is out of range [%lld, %lld]", what, v,
                            (long long)min, (long long)max);
    *out = v;
    return 0;
}

int pd__cfg_want_duration(pd__cfg_ctx *c, const yaml_node_t *n, const char *what, int64_t *out)
{
    const char *s;
    int rc = pd__cfg_want_str(c, n, what, &s);
    if (rc)
        return rc;
    pd_err e;
    pd_err_clear(&e);
    if (pd_parse_duration(s, out, &e))
        return pd__cfg_fail(c, n, PD_EINVAL, "%s: %s", what, e.msg);
    if (*out <= 0)
        return pd__cfg_fail(c, n, PD_EINVAL, "%s: must be greater than 0, got \"%.64s\"", what, s);
    return 0;
}

/*
 * Checks a mapping's keys against `known` (NULL-terminated) and returns the
 * value node of each in vals[] (NULL when absent). Unknown and duplicate keys
 * are errors. An empty (null) mapping gives all NULLs.
 */
static bool ignored_key(const pd__cfg_ignored *ign, const char *k, const char **why)
{
    for (; ign && ign->key; ign++) {
        if (ign->key[0] == '*') {
            size_t sl = strlen(ign->key + 1), kl = strlen(k);
            if (kl > sl && !strcmp(k + kl - sl, ign->key + 1)) {
                *why = ign->why;
                return true;
            }
        } else if (!strcmp(ign->key, k)) {
            *why = ign->why;
            return true;
        }
    }
    return false;
}

int pd__cfg_map_keys(pd__cfg_ctx *c, const yaml_node_t *m, const char *what,
                     const char *const *known, yaml_node_t **vals)
{
    return pd__cfg_map_keys_ign(c, m, what, known, vals, NULL);
}

int pd__cfg_map_keys_ign(pd__cfg_ctx *c, const yaml_node_t *m, const char *what,
                         const char *const *known, yaml_node_t **vals, const pd__cfg_ignored *ign)
{
    size_t nk = 0;
    while (known[nk])
        vals[nk++] = NULL;
    bool empty;
    int rc = pd__cfg_want_map(c, m, what, &empty);
    if (rc || empty)
        return rc;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = pd__cfg_node(c, p->key), *v = pd__cfg_node(c, p->value);
        const char *ks, *why;
        if (!k || !v)
            return pd__cfg_fail(c, m, PD_EPARSE, "%s: broken YAML node", what);
        if ((rc = pd__cfg_want_str(c, k, what, &ks)))
            return rc;
        for (yaml_node_pair_t *q = m->data.mapping.pairs.start; q < p; q++) {
            yaml_node_t *qk = pd__cfg_node(c, q->key);
            if (qk && qk->type == YAML_SCALAR_NODE && !strcmp(pd__cfg_sval(qk), ks))
                return pd__cfg_fail(c, k, PD_EINVAL,
                                    "duplicate key \"%.64s\" in %s (first at line %zu)", ks, what,
                                    qk->start_mark.line + 1);
        }
        size_t i = 0;
        while (i < nk && strcmp(known[i], ks) != 0)
            i++;
        if (i == nk) {
            if (ignored_key(ign, ks, &why)) {
                if ((rc = pd__cfg_warn(c, k, "%s: \"%.64s\" ignored: %s", what, ks, why)))
                    return rc;
                continue;
            }
            return pd__cfg_fail(c, k, PD_EINVAL, "unknown key \"%.64s\" in %s", ks, what);
        }
        vals[i] = v;
    }
    return 0;
}

int pd__cfg_warn(pd__cfg_ctx *c, const yaml_node_t *n, const char *fmt, ...)
{
    pd_config *cfg = c->cfg;
    if (cfg->n_warnings >= PD_CFG_MAX_WARNINGS) {
        c->dropped_warnings++;
        return 0;
    }
    char msg[400], line[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n)
        snprintf(line, sizeof line, "%s:%zu:%zu: %s", c->name, n->start_mark.line + 1,
                 n->start_mark.column + 1, msg);
    else
        snprintf(line, sizeof line, "%s: %s", c->name, msg);
    char **w = realloc(cfg->warnings, (cfg->n_warnings + 1) * sizeof *w);
    if (!w)
        return PD_ENOMEM;
    cfg->warnings = w;
    if (!(w[cfg->n_warnings] = strdup(line)))
        return PD_ENOMEM;
    cfg->n_warnings++;
    return 0;
}

int pd__cfg_want_path(pd__cfg_ctx *c, const yaml_node_t *n, const char *what, char **out)
{
    const char *s;
    int rc = pd__cfg_want_str(c, n, what, &s);
    if (rc)
        return rc;
    if (!*s)
        return pd__cfg_fail(c, n, PD_EINVAL, "%s: empty path", what);
    if (s[0] == '/' || !c->dir || !c->dir[0]) {
        *out = strdup(s);
    } else {
        size_t a = strlen(c->dir), b = strlen(s);
        *out = malloc(a + b + 2);
        if (*out) {
            memcpy(*out, c->dir, a);
            (*out)[a] = '/';
            memcpy(*out + a + 1, s, b + 1);
        }
    }
    return *out ? 0 : PD_ENOMEM;
}

/* For mappings with free-form keys: the key node of pair p, checked to be a
 * string and not repeated earlier in the mapping. */
int pd__cfg_free_key(pd__cfg_ctx *c, const yaml_node_t *m, yaml_node_pair_t *p, const char *what,
                     const char **key)
{
    yaml_node_t *k = pd__cfg_node(c, p->key);
    if (!k || !pd__cfg_node(c, p->value))
        return pd__cfg_fail(c, m, PD_EPARSE, "%s: broken YAML node", what);
    int rc = pd__cfg_want_str(c, k, what, key);
    if (rc)
        return rc;
    for (yaml_node_pair_t *q = m->data.mapping.pairs.start; q < p; q++) {
        yaml_node_t *qk = pd__cfg_node(c, q->key);
        if (qk->type == YAML_SCALAR_NODE && !strcmp(pd__cfg_sval(qk), *key))
            return pd__cfg_fail(c, k, PD_EINVAL,
                                "duplicate key \"%.64s\" in %s (first at line %zu)", *key, what,
                                qk->start_mark.line + 1);
    }
    return 0;
}
