/*
 * scrape/config_check.c — `profd check config FILE...`: loads each file as
 * `profd serve` would and prints what was understood (dialect, globals, each
 * job's targets, relabeling, client options and profile endpoints) and every
 * warning, like `promtool check config`.
 */
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/time.h"
#include "scrape/config.h"
#include "scrape/config_int.h"

static void put_labels(FILE *f, const pd_labels *ls)
{
    fputc('{', f);
    for (size_t i = 0; i < ls->n; i++)
        fprintf(f, "%s%s=\"%s\"", i ? ", " : "", ls->v[i].name, ls->v[i].value);
    fputc('}', f);
}

static const char *dur(int64_t ms, char *buf, size_t n)
{
    pd_format_duration(ms, buf, n);
    return buf;
}

static void print_job(FILE *f, const pd_scrape_job *j)
{
    char a[32], b[32];
    fprintf(f, "job \"%s\": interval %s, timeout %s, scheme %s, metrics_path %s", j->job_name,
            dur(j->interval_ms, a, sizeof a), dur(j->timeout_ms, b, sizeof b), j->scheme,
            j->metrics_path ? j->metrics_path : "/metrics");
    if (j->body_size_limit)
        fprintf(f, ", body_size_limit %zu bytes", j->body_size_limit);
    fputc('\n', f);
    for (size_t i = 0; i < j->n_query; i++)
        fprintf(f, "  param %s=%s\n", j->query[i].name, j->query[i].value);
    for (size_t s = 0; s < j->n_static_configs; s++) {
        const pd_static_config *sc = &j->static_configs[s];
        fprintf(f, "  static_configs[%zu]:", s);
        for (size_t k = 0; k < sc->n_targets; k++)
            fprintf(f, " %s", sc->targets[k]);
        if (sc->labels.n) {
            fputc(' ', f);
            put_labels(f, &sc->labels);
        }
        fputc('\n', f);
    }
    for (size_t r = 0; r < j->n_relabel; r++) {
        const pd_relabel_rule *rl = &j->relabel[r];
        fprintf(f, "  relabel[%zu]: action %s, source_labels [", r,
                pd_relabel_action_name(rl->action));
        for (size_t k = 0; k < rl->n_source; k++)
            fprintf(f, "%s%s", k ? ", " : "", rl->source_labels[k]);
        fprintf(f, "], regex \"%s\", target_label \"%s\", replacement \"%s\"", rl->regex,
                rl->target_label, rl->replacement);
        if (rl->action == PD_RELABEL_HASHMOD)
            fprintf(f, ", modulus %" PRIu64, rl->modulus);
        fputc('\n', f);
    }
    const pd_scrape_client *c = &j->client;
    if (c->basic_username)
        fprintf(f, "  basic_auth: user %s, password %s\n", c->basic_username,
                c->basic_password_file ? c->basic_password_file
                : c->basic_password    ? "<secret>"
                                       : "(none)");
    if (c->auth_type)
        fprintf(f, "  authorization: %s %s\n", c->auth_type,
                c->auth_credentials_file ? c->auth_credentials_file
                : c->auth_credentials    ? "<secret>"
                                         : "(no credentials)");
    if (c->ca_file || c->cert_file || c->server_name || c->insecure_skip_verify ||
        c->tls_min_version)
        fprintf(f,
                "  tls_config: ca_file %s, cert_file %s, key_file %s, server_name %s, "
                "insecure_skip_verify %s, min_version %s%d\n",
                c->ca_file ? c->ca_file : "-", c->cert_file ? c->cert_file : "-",
                c->key_file ? c->key_file : "-", c->server_name ? c->server_name : "-",
                c->insecure_skip_verify ? "true" : "false", c->tls_min_version ? "TLS" : "",
                c->tls_min_version);
    if (c->proxy_url)
        fprintf(f, "  proxy_url: %s\n", c->proxy_url);
    if (!c->follow_redirects || !c->enable_http2)
        fprintf(f, "  follow_redirects %s, enable_http2 %s\n",
                c->follow_redirects ? "true" : "false", c->enable_http2 ? "true" : "false");
    if (c->oauth2_token_url)
        fprintf(f, "  oauth2: token_url %s, client_id %s, scopes \"%s\"\n", c->oauth2_token_url,
                c->oauth2_client_id ? c->oauth2_client_id : "",
                c->oauth2_scopes ? c->oauth2_scopes : "");
    static const char *const kinds[] = {"file_sd", "http_sd", "dns_sd", "kubernetes_sd"};
    for (size_t i = 0; i < j->n_sd; i++) {
        const pd_sd_config *sd = &j->sd[i];
        fprintf(f, "  %s[%zu]:", kinds[sd->kind], i);
        if (sd->kind == PD_SD_K8S) {
            fprintf(f, " role %s, %s%s", pd__k8s_role_names[sd->role],
                    sd->api_server        ? "api_server "
                    : sd->kubeconfig_file ? "kubeconfig "
                                          : "in-cluster",
                    sd->api_server        ? sd->api_server
                    : sd->kubeconfig_file ? sd->kubeconfig_file
                                          : "");
            fprintf(f, ", namespaces %s", sd->n_files || sd->own_namespace ? "" : "all");
            for (size_t k = 0; k < sd->n_files; k++)
                fprintf(f, "%s%s", k ? " " : "", sd->files[k]);
            if (sd->own_namespace)
                fprintf(f, "%sown", sd->n_files ? " " : "");
            fprintf(f, ", %zu selectors\n", sd->n_selectors);
            continue;
        }
        if (sd->url)
            fprintf(f, " %s", sd->url);
        for (size_t k = 0; k < sd->n_files; k++)
            fprintf(f, " %s", sd->files[k]);
        fprintf(f, ", refresh %s\n", dur(sd->refresh_ms, a, sizeof a));
    }
    for (size_t e = 0; e < j->n_endpoints; e++) {
        const pd_pprof_endpoint *ep = &j->endpoints[e];
        fprintf(f, "  profile %s: %s", ep->name, ep->path);
        if (ep->seconds > 0)
            fprintf(f, "?seconds=%" PRId64, ep->seconds);
        fprintf(f, ", timeout %s%s%s", dur(ep->timeout_ms, a, sizeof a), ep->delta ? ", delta" : "",
                ep->enabled ? "" : ", disabled");
        if (ep->keep_sample_types) {
            fprintf(f, ", keep_sample_type");
            for (const char *l = ep->keep_sample_types; *l;) {
                const char *nl = strchr(l, '\n'), *tab = strchr(l, '\t');
                if (!nl || !tab || tab > nl)
                    break;
                fprintf(f, " %.*s/%.*s", (int)(tab - l), l, (int)(nl - tab - 1), tab + 1);
                l = nl + 1;
            }
        }
        fprintf(f, "\n");
    }
    const pd_adaptive_config *ad = &j->adaptive;
    if (ad->enabled) {
        char bi[32], w[32], md[32];
        fprintf(f, "  adaptive_capture: every %s for", dur(ad->interval_ms, bi, sizeof bi));
        for (size_t i = 0; i < ad->n_profiles; i++)
            fprintf(f, " %s", ad->profiles[i]);
        fprintf(f,
                "; growth %" PRIu64 " bytes/min, %g %%/min over %s; limit %" PRIu64
                " bytes x %g; max_duration %s, max_targets %" PRId64
                ", byte_budget_per_minute %" PRIu64 "; alert_labels",
                ad->growth_bytes_per_min, ad->growth_percent_per_min,
                dur(ad->growth_window_ms, w, sizeof w), ad->heap_limit_bytes, ad->limit_fraction,
                dur(ad->max_duration_ms, md, sizeof md), ad->max_targets, ad->byte_budget_per_min);
        for (size_t i = 0; i < ad->alert_labels.n; i++)
            fprintf(f, " %s->%s", ad->alert_labels.v[i].name, ad->alert_labels.v[i].value);
        fprintf(f, "\n");
    }
}

int pd_config_check_main(int argc, char **argv)
{
    bool help = false;
    for (int i = 2; i < argc; i++)
        help |= !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h") || !strcmp(argv[i], "-help");
    if (argc < 3 || strcmp(argv[1], "config") != 0 || help) {
        fprintf(help ? stdout : stderr,
                "usage: profd check config FILE...\n"
                "Reads each scrape configuration as `profd serve --config.file` would, prints\n"
                "what was understood and every warning. Exit 0 when all load, 2 otherwise.\n");
        return help ? 0 : 2;
    }
    int status = 0;
    for (int i = 2; i < argc; i++) {
        pd_config cfg;
        pd_err err;
        pd_err_clear(&err);
        int rc = pd_config_load_file(argv[i], &cfg, &err);
        if (rc) {
            fprintf(stderr, "FAILED: %s\n", err.msg[0] ? err.msg : pd_strerror(rc));
            status = 2;
            continue;
        }
        char a[32], b[32];
        printf("%s: SUCCESS (dialect %s)\n", argv[i], pd_config_dialect_name(cfg.dialect));
        printf("global: scrape_interval %s, scrape_timeout %s",
               dur(cfg.scrape_interval_ms, a, sizeof a), dur(cfg.scrape_timeout_ms, b, sizeof b));
        if (cfg.external_labels.n) {
            printf(", external_labels ");
            put_labels(stdout, &cfg.external_labels);
        }
        printf("\n");
        for (size_t j = 0; j < cfg.n_jobs; j++)
            print_job(stdout, &cfg.jobs[j]);
        printf("%zu warning%s\n", cfg.n_warnings, cfg.n_warnings == 1 ? "" : "s");
        for (size_t w = 0; w < cfg.n_warnings; w++)
            printf("WARNING: %s\n", cfg.warnings[w]);
        pd_config_release(&cfg);
    }
    return status;
}
