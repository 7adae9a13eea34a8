/*
 * scrape/target.c — a scrape target's labels and URL from its job, its
 * static (or discovered) target and group labels, and one profile endpoint:
 * Prometheus' PopulateLabels (scrape/target.go) with Parca's per-profile
 * labels. Rules in scrape_int.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/time.h"
#include "scrape/scrape_int.h"
#include "storage/storage.h"

int pd__scrape_put_escaped(pd_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    int rc = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && !rc; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '.' || *p == '_' || *p == '~') {
            rc = pd_buf_putc(b, (char)*p);
        } else {
            char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
            rc = pd_buf_append(b, e, 3);
        }
    }
    return rc;
}

void pd__scrape_spec_release(pd__scrape_spec *s)
{
    pd_labels_release(&s->labels);
    pd_labels_release(&s->discovered);
    pd_buf_release(&s->url);
    memset(s, 0, sizeof *s);
}

static int set_if_absent(pd_labels *ls, const char *name, const char *value, pd_err *err)
{
    if (pd_labels_get(ls, name))
        return 0;
    return pd_labels_set(ls, name, value, err);
}

/* host:port has a port ([v6]:port, or one ':' not inside brackets). */
static bool has_port(const char *a)
{
    if (a[0] == '[') {
        const char *rb = strchr(a, ']');
        return rb && rb[1] == ':';
    }
    const char *c = strrchr(a, ':');
    return c && strchr(a, ':') == c;
}

/* One query parameter, percent-encoded, after sep. */
static int put_param(pd_buf *b, char *sep, const char *name, const char *value)
{
    int rc;
    if ((rc = pd_buf_putc(b, *sep)) || (rc = pd__scrape_put_escaped(b, name)) ||
        (rc = pd_buf_putc(b, '=')) || (rc = pd__scrape_put_escaped(b, value)))
        return rc;
    *sep = '&';
    return 0;
}

/* The value of label __param_<name>, or NULL. */
static const char *param_label(const pd_labels *ls, const char *name)
{
    char ln[PD_LABEL_MAX_NAME + 1];
    if (snprintf(ln, sizeof ln, "__param_%s", name) >= (int)sizeof ln)
        return NULL;
    return pd_labels_get(ls, ln);
}

/* Whether a scrape of `path` with final URL `url` gets profiles counted
 * since process start (issue 12; the rule: query/delta.c): Go's
 * net/http/pprof allocs, heap, block and mutex endpoints serve them so
 * unless asked for a window (?seconds=N: a delta, Parca's and conprof's
 * delta: true). Such series are marked PD_LABEL_DELTA="false". */
static bool served_cumulative(const char *path, const char *url)
{
    static const char *const names[] = {"allocs", "heap", "block", "mutex"};
    const char *base = path ? strrchr(path, '/') : NULL;
    const char *q = url ? strchr(url, '?') : NULL;
    if (!base)
        return false;
    base++;
    for (const char *p = q; p && *p; p = strchr(p + 1, '&'))
        if (!strncmp(p + 1, "seconds=", 8))
            return false;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(base, names[i]))
            return true;
    return false;
}

int pd__scrape_spec_build(const pd_config *cfg, const pd_scrape_job *job, const char *address,
                          const pd_labels *group, const pd_pprof_endpoint *ep, pd__scrape_spec *out,
                          pd_err *err)
{
    pd_labels *ls = &out->labels;
    char buf[64];
    int rc;
    memset(out, 0, sizeof *out);
    pd_buf_init(&out->url, 0);
    out->keep = true;
    if (pd_labels_copy(ls, group))
        return PD_ENOMEM;
    if ((rc = pd_labels_set(ls, "__address__", address, err)) ||
        (rc = set_if_absent(ls, "job", job->job_name, err)))
        goto fail;
    pd_format_duration(job->interval_ms, buf, sizeof buf);
    if ((rc = set_if_absent(ls, "__scrape_interval__", buf, err)))
        goto fail;
    pd_format_duration(job->timeout_ms, buf, sizeof buf);
    if ((rc = set_if_absent(ls, "__scrape_timeout__", buf, err)) ||
        (rc = set_if_absent(ls, "__metrics_path__",
                            job->metrics_path ? job->metrics_path : "/metrics", err)) ||
        (rc = set_if_absent(ls, "__scheme__", job->scheme ? job->scheme : "http", err)))
        goto fail;
    for (size_t i = 0; i < job->n_query; i++) {
        char ln[PD_LABEL_MAX_NAME + 1];
        if (snprintf(ln, sizeof ln, "__param_%s", job->query[i].name) >= (int)sizeof ln ||
            !pd_label_name_classic(ln))
            continue; /* not expressible as a label: stays a plain parameter */
        if ((rc = set_if_absent(ls, ln, job->query[i].value, err)))
            goto fail;
    }
    /* Parca's per-profile labels */
    if ((rc = pd_labels_set(ls, "__name__", ep->name, err)) ||
        (rc = set_if_absent(ls, "__profile_path__", ep->path, err)))
        goto fail;
    rc = PD_ENOMEM;
    if (pd_labels_copy(&out->discovered, ls))
        goto fail;
    if ((rc = pd_relabel_process(job->relabel, job->n_relabel, ls, &out->keep, err)))
        goto fail;
    if (!out->keep)
        return 0;

    const char *addr = pd_labels_get(ls, "__address__");
    const char *scheme = pd_labels_get(ls, "__scheme__");
    const char *path = pd_labels_get(ls, "__profile_path__");
    if (!addr) {
        rc = pd_err_set(err, PD_EINVAL, "no address");
        goto fail;
    }
    if (!scheme || (strcmp(scheme, "http") && strcmp(scheme, "https"))) {
        rc = pd_err_set(err, PD_EINVAL, "scheme \"%.64s\": want http or https",
                        scheme ? scheme : "");
        goto fail;
    }
    for (const char *p = addr; *p; p++)
        if ((unsigned char)*p <= ' ' || strchr("/?#@\\\"'<>", *p)) {
            rc = pd_err_set(err, PD_EINVAL, "invalid address \"%.128s\" after relabeling", addr);
            goto fail;
        }
    if (!has_port(addr)) { /* Prometheus 2.42 adds the scheme's port */
        char a[PD_LABEL_MAX_VALUE + 8];
        snprintf(a, sizeof a, "%s:%s", addr, strcmp(scheme, "https") ? "80" : "443");
        if ((rc = pd_labels_set(ls, "__address__", a, err)))
            goto fail;
        addr = pd_labels_get(ls, "__address__");
    }
    if (!path || path[0] != '/') {
        rc = pd_err_set(err, PD_EINVAL, "__profile_path__ \"%.128s\" must start with \"/\"",
                        path ? path : "");
        goto fail;
    }
    pd_err e;
    pd_err_clear(&e);
    const char *iv = pd_labels_get(ls, "__scrape_interval__");
    const char *to = pd_labels_get(ls, "__scrape_timeout__");
    if (!iv || pd_parse_duration(iv, &out->interval_ms, &e) || out->interval_ms <= 0) {
        rc = pd_err_set(err, PD_EINVAL, "error parsing scrape interval \"%.64s\"", iv ? iv : "");
        goto fail;
    }
    if (!to || pd_parse_duration(to, &out->timeout_ms, &e) || out->timeout_ms <= 0) {
        rc = pd_err_set(err, PD_EINVAL, "error parsing scrape timeout \"%.64s\"", to ? to : "");
        goto fail;
    }

    /* URL: scheme://address/path?seconds=S&params (a __param_X label replaces X's values) */
    rc = PD_ENOMEM;
    if (pd_buf_printf(&out->url, "%s://%s%s", scheme, addr, path))
        goto fail;
    char sep = '?';
    if (ep->seconds > 0) {
        if (pd_buf_printf(&out->url, "?seconds=%lld", (long long)ep->seconds))
            goto fail;
        sep = '&';
    }
    for (size_t i = 0; i < job->n_query; i++) {
        const char *n = job->query[i].name, *v = job->query[i].value;
        if (ep->seconds > 0 && !strcmp(n, "seconds"))
            continue;
        bool first = true; /* a __param_ label replaces the first value (Prometheus) */
        for (size_t k = 0; k < i && first; k++)
            first = strcmp(job->query[k].name, n) != 0;
        const char *lv = first ? param_label(ls, n) : NULL;
        if (put_param(&out->url, &sep, n, lv ? lv : v))
            goto fail;
    }
    for (size_t i = 0; i < ls->n; i++) { /* __param_ labels of no job parameter */
        const char *n = ls->v[i].name;
        if (strncmp(n, "__param_", 8) || !n[8] || (ep->seconds > 0 && !strcmp(n + 8, "seconds")))
            continue;
        bool in_job = false;
        for (size_t k = 0; k < job->n_query && !in_job; k++)
            in_job = !strcmp(job->query[k].name, n + 8);
        if (!in_job && put_param(&out->url, &sep, n + 8, ls->v[i].value))
            goto fail;
    }
    if (pd_buf_putc(&out->url, '\0'))
        goto fail;
    out->url.len--;
    bool cumulative = served_cumulative(path, out->url.data);

    /* stored labels: no "__" label but __name__; instance defaults to the address */
    if ((rc = set_if_absent(ls, "instance", addr, err)))
        goto fail;
    for (size_t i = ls->n; i-- > 0;) {
        const char *n = ls->v[i].name;
        if (n[0] == '_' && n[1] == '_' && strcmp(n, "__name__") != 0 &&
            (rc = pd_labels_set(ls, n, "", err)))
            goto fail;
    }
    if (!pd_labels_get(ls, "__name__")) {
        rc = pd_err_set(err, PD_EINVAL, "relabeling removed __name__ (the profile type)");
        goto fail;
    }
    out->cumulative = cumulative;
    for (size_t i = 0; i < cfg->external_labels.n; i++)
        if ((rc = set_if_absent(ls, cfg->external_labels.v[i].name, cfg->external_labels.v[i].value,
                                err)))
            goto fail;
    return 0;
fail:
    if (rc == PD_ENOMEM)
        pd_err_set(err, rc, "out of memory building a scrape target");
    pd__scrape_spec_release(out);
    return rc;
}
