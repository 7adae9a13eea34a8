/*
 * api/alerts.c — capture on alert and the events of adaptive capture
 * (issue 18; rules in scrape/adaptive.h).
 *
 * POST /api/v1/alerts takes Alertmanager's webhook payload unchanged (read
 * by alerts_parse.c, rules there). Reply 200:
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"
#include "base/metrics.h"
#include "base/time.h"
#include "scrape/adaptive.h"

static void reply_json_error(pd_http_response *resp, int status, const char *msg)
{
    pd_buf_reset(&resp->body);
    resp->status = status;
    resp->content_type = "application/json";
    pd_buf_printf(&resp->body, "{\"status\":\"error\",\"errorType\":\"%s\",\"error\":",
                  status == 405   ? "method_not_allowed"
                  : status >= 500 ? "internal"
                                  : "bad_data");
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
    pd__alert_msg am;
    char msg[600];
    int rc = pd__alert_msg_parse(req->body, req->body_len, &am, msg, sizeof msg);
    if (rc == PD_ENOMEM) {
        reply_json_error(resp, 500, "out of memory reading the alerts");
        return "/api/v1/alerts";
    }
    if (rc) {
        bad_alert(resp, msg);
        return "/api/v1/alerts";
    }
    size_t matched_total = 0;
    for (size_t i = 0; i < am.n; i++) {
        size_t matched = 0;
        pd_scrape_manager_alerts(api->sm, &am.alerts[i], 1, &matched);
        matched_total += matched;
        char l[64];
        snprintf(l, sizeof l, "status=\"%s\",matched=\"%s\"",
                 am.alerts[i].firing ? "firing" : "resolved", matched ? "true" : "false");
        pd_metrics_add("profd_alerts_received_total", l, 1);
    }
    pd_buf_reset(&resp->body);
    resp->content_type = "application/json";
    pd_buf_printf(&resp->body,
                  "{\"status\":\"success\",\"data\":{\"alerts\":%zu,\"matchedTargets\":%zu}}", am.n,
                  matched_total);
    pd__alert_msg_release(&am);
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
        reply_json_error(resp, 400, "invalid kind: want target_down, burst_started or burst_ended");
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
