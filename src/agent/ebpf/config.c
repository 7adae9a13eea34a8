/*
 * agent/ebpf/config.c — profd-agent's --config.file (YAML, libyaml):
 *
 *   relabel_configs:          # Prometheus relabel_config entries, in order
 *     - source_labels: [__meta_process_exe]
 *       regex: .+/([^/]+)
 *       target_label: service_name
 *     - source_labels: [__meta_process_commandline]
 *       regex: .*--no-profile.*
 *       action: drop
 *
 * Each entry has Prometheus' keys (source_labels, separator, target_label,
 * regex, modulus, replacement, action) with Prometheus' defaults and checks
 * (base/relabel.h: the engine profd's scrape configs use). Any other key,
 * a duplicate key, a wrong kind of node or a bad regex is an error
 * "FILE:LINE:COL: message". Limits: 10000 rules, 64 source labels a rule,
 * 100000 YAML nodes walked (aliases count each use).
 */
#include "agent/ebpf/ebpf_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "base/yaml/yaml_node.h"

#define MAX_RULES 10000
#define MAX_SOURCES 64
#define MAX_VISITS 100000

typedef struct ctx {
    yaml_document_t doc;
    const char *file;
    pd_err *err;
    size_t visits;
} ctx;

static int fail(ctx *c, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(ctx *c, const yaml_node_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = pd_yaml_vfail(c->err, c->file, n, PD_EINVAL, fmt, ap);
    va_end(ap);
    return rc;
}

static yaml_node_t *node(ctx *c, int id, const yaml_node_t *parent, int *rc)
{
    yaml_node_t *n = yaml_document_get_node(&c->doc, id);
    if (!n)
        *rc = fail(c, parent, "broken YAML node");
    else if (++c->visits > MAX_VISITS)
        *rc = fail(c, n, "configuration too large: over %d YAML nodes (aliases count each use)",
                   MAX_VISITS);
    else
        return n;
    return NULL;
}

static int want_str(ctx *c, const yaml_node_t *n, const char *what, const char **out)
{
    if (n->type != YAML_SCALAR_NODE)
        return fail(c, n, "%s: expected a string, got %s", what, pd_yaml_kind(n));
    if (strlen((const char *)n->data.scalar.value) != n->data.scalar.length)
        return fail(c, n, "%s: contains a NUL character", what);
    *out = (const char *)n->data.scalar.value;
    return 0;
}

static int set_str(ctx *c, const yaml_node_t *n, const char *what, char **field)
{
    const char *s = NULL;
    int rc = want_str(c, n, what, &s);
    if (rc)
        return rc;
    char *d = strdup(s);
    if (!d)
        return PD_ENOMEM;
    free(*field);
    *field = d;
    return 0;
}

static int parse_rule(ctx *c, const yaml_node_t *n, pd_relabel_rule *r)
{
    static const char *const keys[] = {"source_labels", "separator",   "target_label", "regex",
                                       "modulus",       "replacement", "action"};
    if (pd_yaml_is_null(n) || n->type != YAML_MAPPING_NODE)
        return fail(c, n, "relabel_configs entry: expected a mapping, got %s",
                    pd_yaml_is_null(n) ? "nothing" : pd_yaml_kind(n));
    const yaml_node_t *v[7] = {0};
    int rc = 0;
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node(c, p->key, n, &rc), *val = k ? node(c, p->value, n, &rc) : NULL;
        const char *ks;
        if (!val)
            return rc;
        if ((rc = want_str(c, k, "relabel_configs entry key", &ks)))
            return rc;
        size_t i = 0;
        while (i < 7 && strcmp(keys[i], ks))
            i++;
        if (i == 7)
            return fail(c, k,
                        "unknown key \"%.64s\" in relabel_configs entry: want source_labels, "
                        "separator, target_label, regex, modulus, replacement or action",
                        ks);
        if (v[i])
            return fail(c, k, "duplicate key \"%s\" in relabel_configs entry (first at line %zu)",
                        ks, v[i]->start_mark.line + 1);
        v[i] = val;
    }
    if (v[0] && !pd_yaml_is_null(v[0])) {
        if (v[0]->type != YAML_SEQUENCE_NODE)
            return fail(c, v[0], "source_labels: expected a list, got %s", pd_yaml_kind(v[0]));
        size_t cnt = (size_t)(v[0]->data.sequence.items.top - v[0]->data.sequence.items.start);
        if (cnt > MAX_SOURCES)
            return fail(c, v[0], "source_labels: %zu labels, over the limit of %d", cnt,
                        MAX_SOURCES);
        if (cnt && !(r->source_labels = calloc(cnt, sizeof *r->source_labels)))
            return PD_ENOMEM;
        for (size_t i = 0; i < cnt; i++) {
            yaml_node_t *it = node(c, v[0]->data.sequence.items.start[i], v[0], &rc);
            const char *s;
            if (!it)
                return rc;
            if ((rc = want_str(c, it, "source_labels item", &s)))
                return rc;
            if (!pd_label_name_valid(s))
                return fail(c, it, "\"%.64s\" is not a valid label name", s);
            if (!(r->source_labels[i] = strdup(s)))
                return PD_ENOMEM;
            r->n_source++;
        }
    }
    if ((v[1] && (rc = set_str(c, v[1], "separator", &r->separator))) ||
        (v[2] && (rc = set_str(c, v[2], "target_label", &r->target_label))) ||
        (v[3] && (rc = set_str(c, v[3], "regex", &r->regex))) ||
        (v[5] && (rc = set_str(c, v[5], "replacement", &r->replacement))))
        return rc;
    if (v[4]) {
        const char *s = NULL;
        char *end;
        if ((rc = want_str(c, v[4], "modulus", &s)))
            return rc;
        errno = 0;
        unsigned long long m = strtoull(s, &end, 10);
        if (!*s || *end || errno || s[0] == '-')
            return fail(c, v[4], "modulus: expected a whole number, got \"%.64s\"", s);
        r->modulus = m;
    }
    if (v[6]) {
        const char *s;
        if ((rc = want_str(c, v[6], "action", &s)))
            return rc;
        if (pd_relabel_action_parse(s, &r->action))
            return fail(c, v[6],
                        "unknown relabel action \"%.64s\": want replace, keep, drop, keepequal, "
                        "dropequal, hashmod, labelmap, labeldrop, labelkeep, lowercase or "
                        "uppercase",
                        s);
    }
    pd_err e;
    pd_err_clear(&e);
    if ((rc = pd_relabel_rule_compile(r, &e)))
        return rc == PD_ENOMEM ? rc : fail(c, v[3] ? v[3] : n, "%s", e.msg);
    if ((rc = pd_relabel_rule_validate(r, &e)))
        return fail(c, n, "%s", e.msg);
    return 0;
}

static int parse_doc(ctx *c, pd_ebpf_config *out)
{
    yaml_node_t *root = yaml_document_get_root_node(&c->doc);
    if (pd_yaml_is_null(root))
        return 0; /* an empty file: no rules */
    if (root->type != YAML_MAPPING_NODE)
        return fail(c, root, "expected a mapping (relabel_configs: ...), got %s",
                    pd_yaml_kind(root));
    const yaml_node_t *rel = NULL;
    int rc = 0;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = node(c, p->key, root, &rc), *v = k ? node(c, p->value, root, &rc) : NULL;
        const char *ks;
        if (!v)
            return rc;
        if ((rc = want_str(c, k, "key", &ks)))
            return rc;
        if (strcmp(ks, "relabel_configs"))
            return fail(c, k, "unknown key \"%.64s\": want relabel_configs", ks);
        if (rel)
            return fail(c, k, "duplicate key \"relabel_configs\" (first at line %zu)",
                        rel->start_mark.line + 1);
        rel = v;
    }
    if (pd_yaml_is_null(rel))
        return 0;
    if (rel->type != YAML_SEQUENCE_NODE)
        return fail(c, rel, "relabel_configs: expected a list, got %s", pd_yaml_kind(rel));
    size_t cnt = (size_t)(rel->data.sequence.items.top - rel->data.sequence.items.start);
    if (cnt > MAX_RULES)
        return fail(c, rel, "relabel_configs: %zu rules, over the limit of %d", cnt, MAX_RULES);
    if (!cnt)
        return 0;
    if (!(out->relabel = calloc(cnt, sizeof *out->relabel)))
        return PD_ENOMEM;
    for (size_t i = 0; i < cnt; i++) {
        yaml_node_t *rn = node(c, rel->data.sequence.items.start[i], rel, &rc);
        if (!rn)
            return rc;
        if ((rc = pd_relabel_rule_init(&out->relabel[i])))
            return rc;
        out->n_relabel++;
        if ((rc = parse_rule(c, rn, &out->relabel[i])))
            return rc;
    }
    return 0;
}

int pd_ebpf_config_parse(const char *text, size_t len, const char *name, pd_ebpf_config *out,
                         pd_err *err)
{
    memset(out, 0, sizeof *out);
    ctx c = {.file = name, .err = err};
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return pd_err_set(err, PD_ENOMEM, "%s: out of memory", name);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    int rc;
    if (!yaml_parser_load(&parser, &c.doc)) {
        rc = pd_err_set(err, PD_EINVAL, "%s:%zu:%zu: YAML: %s", name, parser.problem_mark.line + 1,
                        parser.problem_mark.column + 1,
                        parser.problem ? parser.problem : "cannot parse");
        yaml_parser_delete(&parser);
        return rc;
    }
    yaml_parser_delete(&parser);
    rc = parse_doc(&c, out);
    yaml_document_delete(&c.doc);
    if (rc == PD_ENOMEM)
        pd_err_set(err, rc, "%s: out of memory", name);
    if (rc)
        pd_ebpf_config_release(out);
    return rc;
}

int pd_ebpf_config_load(const char *path, pd_ebpf_config *out, pd_err *err)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f)
        return pd_err_set(err, -errno, "%s: %s", path, strerror(errno));
    pd_buf b;
    pd_buf_init(&b, (size_t)4 << 20);
    char chunk[8192];
    size_t n;
    int rc = 0;
    while (!rc && (n = fread(chunk, 1, sizeof chunk, f)) > 0)
        rc = pd_buf_append(&b, chunk, n);
    bool bad = ferror(f);
    fclose(f);
    if (rc == PD_ETOOBIG)
        rc = pd_err_set(err, rc, "%s: over 4 MiB", path);
    else if (rc)
        rc = pd_err_set(err, rc, "%s: out of memory", path);
    else if (bad)
        rc = pd_err_set(err, -EIO, "%s: read error", path);
    else
        rc = pd_ebpf_config_parse(b.data ? b.data : "", b.len, path, out, err);
    pd_buf_release(&b);
    return rc;
}

void pd_ebpf_config_release(pd_ebpf_config *c)
{
    for (size_t i = 0; i < c->n_relabel; i++)
        pd_relabel_rule_release(&c->relabel[i]);
    free(c->relabel);
    memset(c, 0, sizeof *c);
}
