/*
 * api/status.c — /api/v1/status/NAME, as Prometheus' status API
 * (web/api/v1/api.go: serveFlags, serveConfig, serveRuntimeInfo,
 * serveTSDBStatus, serveBuildInfo): the flags in effect (given by main.c in
 * pd_api_options), the configuration file as last (re)loaded
 * (pd_api_set_config), start time and reload outcome, storage counts.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api_int.h"
#include "base/buf.h"
#include "base/time.h"

static void put_jstr(pd_buf *b, const char *s)
{
    pd_buf_put_json_string(b, s, strlen(s));
}

/* Prometheus' PrometheusVersion JSON (version, revision, branch, buildUser,
 * buildDate, goVersion), with "compiler" where Go has goVersion and the
 * platform added (base/buildinfo.h). */
static void h_buildinfo(const pd_api *api, pd_http_response *resp)
{
    const pd_build_info *b = &api->build;
    const char *k[] = {"version",   "revision", "branch",  "buildUser",
                       "buildDate", "compiler", "platform"};
    const char *v[] = {b->version,    b->revision, b->branch,  b->build_user,
                       b->build_date, b->compiler, b->platform};
    pd__api_begin_success(resp);
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
        pd_buf_putc(&resp->body, i ? ',' : '{');
        put_jstr(&resp->body, k[i]);
        pd_buf_putc(&resp->body, ':');
        put_jstr(&resp->body, v[i]);
    }
    pd_buf_puts(&resp->body, "}");
    pd__api_end_success(resp);
}

static void h_status_flags(pd_api *api, pd_http_response *resp)
{
    pd__api_begin_success(resp);
    pd_buf_putc(&resp->body, '{');
    for (size_t i = 0; i < api->n_flags; i++) {
        if (i)
            pd_buf_putc(&resp->body, ',');
        put_jstr(&resp->body, api->flags[2 * i]);
        pd_buf_putc(&resp->body, ':');
        put_jstr(&resp->body, api->flags[2 * i + 1]);
    }
    pd_buf_putc(&resp->body, '}');
    pd__api_end_success(resp);
}

static void h_status_config(pd_api *api, pd_http_response *resp)
{
    pd__api_begin_success(resp);
    pd_buf_puts(&resp->body, "{\"yaml\":");
    pthread_mutex_lock(&api->cfg_mu);
    put_jstr(&resp->body, api->config_text ? api->config_text : "");
    pthread_mutex_unlock(&api->cfg_mu);
    pd_buf_putc(&resp->body, '}');
    pd__api_end_success(resp);
}

static void h_status_runtime(pd_api *api, pd_http_response *resp)
{
    char cwd[4096], start[32], last[32];
    if (!getcwd(cwd, sizeof cwd))
        snprintf(cwd, sizeof cwd, "<error retrieving current working directory>");
    pd_format_rfc3339((int64_t)(api->start_time_s * 1000), start, sizeof start);
    pthread_mutex_lock(&api->cfg_mu);
    bool ok = api->config_ok;
    int64_t when = api->config_when_ms;
    pthread_mutex_unlock(&api->cfg_mu);
    pd_format_rfc3339(when, last, sizeof last);
    pd__api_begin_success(resp);
    pd_buf_puts(&resp->body, "{\"startTime\":");
    put_jstr(&resp->body, start);
    pd_buf_puts(&resp->body, ",\"CWD\":");
    put_jstr(&resp->body, cwd);
    pd_buf_printf(&resp->body,
                  ",\"reloadConfigSuccess\":%s,\"lastConfigTime\":", ok ? "true" : "false");
    put_jstr(&resp->body, when ? last : "");
    for (size_t i = 0; i < api->n_flags; i++)
        if (!strcmp(api->flags[2 * i], "storage.retention.time")) {
            pd_buf_puts(&resp->body, ",\"storageRetention\":");
            put_jstr(&resp->body, api->flags[2 * i + 1]);
        }
    pd_buf_putc(&resp->body, '}');
    pd__api_end_success(resp);
}

/* Prometheus' /status/tsdb gives headStats; profd adds its blocks and bytes. */
static void h_status_tsdb(pd_api *api, pd_http_response *resp)
{
    pd_storage_stats ss;
    memset(&ss, 0, sizeof ss);
    pd_storage_stats_get(api->st, &ss);
    pd__api_begin_success(resp);
    pd_buf_printf(
        &resp->body,
        "{\"headStats\":{\"numSeries\":%llu,\"numProfiles\":%llu,\"minTime\":%lld,"
        "\"maxTime\":%lld},\"storage\":{\"series\":%llu,\"profiles\":%llu,\"blocks\":%llu,"
        "\"bytes\":%llu,\"headProfiles\":%llu,\"headCuts\":%llu,\"compactions\":%llu,"
        "\"retentionDeletes\":%llu}}",
        (unsigned long long)ss.n_series, (unsigned long long)ss.n_head_profiles,
        (long long)ss.min_ts, (long long)ss.max_ts, (unsigned long long)ss.n_series,
        (unsigned long long)ss.n_profiles, (unsigned long long)ss.n_blocks,
        (unsigned long long)ss.bytes_on_disk, (unsigned long long)ss.n_head_profiles,
        (unsigned long long)ss.n_cuts, (unsigned long long)ss.n_compactions,
        (unsigned long long)ss.n_retention_deletes);
    pd__api_end_success(resp);
}

int pd_api_set_config(pd_api *api, const char *text, size_t len, bool ok, int64_t when_ms)
{
    char *copy = NULL;
    if (ok && text) {
        if (!(copy = malloc(len + 1)))
            return PD_ENOMEM;
        memcpy(copy, text, len);
        copy[len] = 0;
    }
    pthread_mutex_lock(&api->cfg_mu);
    if (ok) {
        free(api->config_text);
        api->config_text = copy;
    }
    api->config_ok = ok;
    api->config_when_ms = when_ms;
    pthread_mutex_unlock(&api->cfg_mu);
    return 0;
}

const char *pd__api_status_route(pd_api *api, const char *r, pd_http_response *resp)
{
    if (strcmp(r, "buildinfo") == 0) {
        h_buildinfo(api, resp);
        return "/api/v1/status/buildinfo";
    }
    if (strcmp(r, "flags") == 0) {
        h_status_flags(api, resp);
        return "/api/v1/status/flags";
    }
    if (strcmp(r, "config") == 0) {
        h_status_config(api, resp);
        return "/api/v1/status/config";
    }
    if (strcmp(r, "runtimeinfo") == 0) {
        h_status_runtime(api, resp);
        return "/api/v1/status/runtimeinfo";
    }
    if (strcmp(r, "tsdb") == 0) {
        h_status_tsdb(api, resp);
        return "/api/v1/status/tsdb";
    }
    return NULL;
}
