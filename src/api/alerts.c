/*
 * api/alerts.c — capture on alert and the events of adaptive capture
 * (issue 18; rules in scrape/adaptive.h).
 *
 * POST /api/v1/alerts takes Alertmanager's webhook payload unchanged
 * (prometheus/alertmanager notify/webhook Message: version "4", groupKey,
 * truncatedAlerts, and template.Data's receiver, status, alerts[],
 * groupLabels, commonLabels, commonAnnotations, externalURL; each
 * template.Alert: status "firing"|"resolved", labels, annotations,
 * startsAt, endsAt, generatorURL, fingerprint). Only version, alerts[] and,
 * per alert, status, labels, startsAt and fingerprint are read; other keys
 * are ignored as Alertmanager's own receivers do. Reply 200:
 *   {"status":"success","data":{"alerts":N,"matchedTargets":M}}
 * A body that is not such a message: 400 naming what is wrong (counted in
 * profd_rejected_input_total{reason="bad_alert"}); nothing is applied.
 * Every alert applied is counted in
 * profd_alerts_received_total{status,matched="true"|"false"}.
 *
 * GET /api/v1/events?start=&end=&kind=: the events (start/end: RFC 3339 or
 * Unix seconds, default the last hour up to now; kind: target_down,
 * burst_started or burst_ended), as Prometheus' envelope around
 * pd_scrape_manager_events_json's array.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"
#include "base/metrics.h"
#include "base/time.h"
#include "scrape/adaptive.h"

#define MAX_ALERTS 10000 /* alerts in one message */

static void reply_json_error(pd_http_response *resp, int status, const char *msg)
{
    pd_buf_reset(&resp->body);
    resp->status = status;
    resp->content_type = "application/json";
    pd_buf_printf(&resp->body, "{\"status\":\"error\",\"errorType\":\"%s\",\"error\":",
                  status == 405 ? "method_not_allowed" : status >= 500 ? "internal" : "bad_data");
    pd_buf_put_json_string(&resp->body, msg, strlen(msg));
    pd_buf_puts(&resp->body, "}");
}

static void bad_alert(pd_http_response *resp, const char *msg)
{
    pd__api_count_rejected("bad_alert");
    char m[700];
    snprintf(m, sizeof m, "alertmanager webhook payload: %s", msg);
    reply_json_error(resp, 400, m);
}

const char *pd__api_alerts(pd_api *api, const pd_http_request *req, pd_http_response *resp)
{
    if (strcmp(req->method, "POST") != 0) {
        pd_http_add_header(resp, "Allow", "POST");
        reply_json_error(resp, 405, "POST an Alertmanager webhook message to /api/v1/alerts");
        return "/api/v1/alerts";
    }
    json_error_t je;
    char msg[600];
    json_t *root = json_loadb((const char *)req->body, req->body_len, JSON_REJECT_DUPLICATES, &je);
    pd_scrape_alert *al = NULL;
    pd_labels *ls = NULL;
    size_t n = 0;
    if (!root) {
        snprintf(msg, sizeof msg, "not JSON: %s at line %d column %d", je.text, je.line,
                 je.column);
        bad_alert(resp, msg);
        goto out;
    }
    json_t *ver = json_object_get(root, "version"), *alerts = json_object_get(root, "alerts");
    if (!json_is_object(root)) {
        bad_alert(resp, "want a JSON object (Alertmanager's webhook Message)");
        goto out;
    }
    if (ver && (!json_is_string(ver) || strcmp(json_string_value(ver), "4"))) {
        bad_alert(resp, "\"version\" must be \"4\" (the webhook format of Alertmanager 0.x)");
        goto out;
    }
    if (!json_is_array(alerts)) {
        bad_alert(resp, "\"alerts\" must be an array of alerts");
        goto out;
    }
    n = json_array_size(alerts);
    if (n > MAX_ALERTS) {
        snprintf(msg, sizeof msg, "%zu alerts: over the limit of %d per message", n, MAX_ALERTS);
        bad_alert(resp, msg);
        n = 0;
        goto out;
    }
    al = calloc(n ? n : 1, sizeof *al);
    ls = calloc(n ? n : 1, sizeof *ls);
    if (!al || !ls) {
        reply_json_error(resp, 500, "out of memory reading the alerts");
        resp->status = 500;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *a = json_array_get(alerts, i);
        json_t *st = json_object_get(a, "status"), *labels = json_object_get(a, "labels");
        json_t *fp = json_object_get(a, "fingerprint"), *sa = json_object_get(a, "startsAt");
        pd_labels_init(&ls[i]);
        if (!json_is_object(a) || !json_is_string(st) ||
            (strcmp(json_string_value(st), "firing") && strcmp(json_string_value(st), "resolved"))) {
            snprintf(msg, sizeof msg, "alerts[%zu]: want an object with \"status\" firing or resolved",
                     i);
            bad_alert(resp, msg);
            goto out;
        }
        if (!json_is_object(labels) || !json_object_size(labels)) {
            snprintf(msg, sizeof msg, "alerts[%zu]: \"labels\" must be a non-empty object", i);
            bad_alert(resp, msg);
            goto out;
        }
        const char *k;
        json_t *v;
        json_object_foreach(labels, k, v)
        {
            pd_err e;
            pd_err_clear(&e);
            if (!json_is_string(v)) {
                snprintf(msg, sizeof msg, "alerts[%zu].labels.%.100s: want a string", i, k);
                bad_alert(resp, msg);
                goto out;
            }
            int rc = pd_labels_set(&ls[i], k, json_string_value(v), &e);
            if (rc) {
                snprintf(msg, sizeof msg, "alerts[%zu].labels: %s", i,
                         rc == PD_ENOMEM ? "out of memory" : e.msg);
                bad_alert(resp, msg);
                goto out;
            }
        }
        if (fp && !json_is_string(fp)) {
            snprintf(msg, sizeof msg, "alerts[%zu].fingerprint: want a string", i);
            bad_alert(resp, msg);
            goto out;
        }
        int64_t starts = 0;
        if (sa && (!json_is_string(sa) || pd_parse_rfc3339(json_string_value(sa), &starts))) {
            snprintf(msg, sizeof msg, "alerts[%zu].startsAt: want an RFC 3339 time", i);
            bad_alert(resp, msg);
            goto out;
        }
        al[i].firing = !strcmp(json_string_value(st), "firing");
        al[i].labels = &ls[i];
        al[i].key = fp ? json_string_value(fp) : NULL;
        al[i].starts_at_ms = starts;
    }
    size_t matched_total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t matched = 0;
        pd_scrape_manager_alerts(api->sm, &al[i], 1, &matched);
        matched_total += matched;
        char l[64];
        snprintf(l, sizeof l, "status=\"%s\",matched=\"%s\"", al[i].firing ? "firing" : "resolved",
                 matched ? "true" : "false");
        pd_metrics_add("profd_alerts_received_total", l, 1);
    }
    pd_buf_reset(&resp->body);
    resp->content_type = "application/json";
    pd_buf_printf(&resp->body,
                  "{\"status\":\"success\",\"data\":{\"alerts\":%zu,\"matchedTargets\":%zu}}", n,
                  matched_total);
out:
    for (size_t i = 0; ls && i < n; i++)
        pd_labels_release(&ls[i]);
    free(ls);
    free(al);
    json_decref(root);
    return "/api/v1/alerts";
}

const char *pd__api_events(pd_api *api, const pd_http_request *req, pd_http_response *resp)
{
    int64_t now = pd_now_ms(), from = now - 3600 * 1000, to = now;
    const char *s = pd_http_arg(req, "start"), *e = pd_http_arg(req, "end"),
               *kind = pd_http_arg(req, "kind");
    pd_err err;
    pd_err_clear(&err);
    char msg[700];
    if ((s && pd_parse_time_param(s, &from, &err)) || (e && pd_parse_time_param(e, &to, &err))) {
        snprintf(msg, sizeof msg, "invalid %s: %s", s && err.msg[0] && !e ? "start" : "start/end",
                 err.msg);
        pd__api_count_rejected("bad_query");
        reply_json_error(resp, 400, msg);
        return "/api/v1/events";
    }
    if (kind && strcmp(kind, "target_down") && strcmp(kind, "burst_started") &&
        strcmp(kind, "burst_ended")) {
        pd__api_count_rejected("bad_query");
        reply_json_error(resp, 400,
                         "invalid kind: want target_down, burst_started or burst_ended");
        return "/api/v1/events";
    }
    pd_buf_reset(&resp->body);
    resp->content_type = "application/json";
    if (pd_buf_puts(&resp->body, "{\"status\":\"success\",\"data\":") ||
        pd_scrape_manager_events_json(api->sm, from, to, kind, &resp->body) ||
        pd_buf_putc(&resp->body, '}'))
        reply_json_error(resp, 500, "the events do not fit the reply limit; narrow start/end");
    return "/api/v1/events";
}
