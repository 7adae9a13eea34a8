/*
 * api/alerts_parse.c — Alertmanager's webhook payload (issue 18, capture on
 * alert), as prometheus/alertmanager notify/webhook's Message:
 *
 *   {"version":"4","groupKey":"...","truncatedAlerts":0,
 *    "status":"firing","receiver":"...","groupLabels":{...},
 *    "commonLabels":{...},"commonAnnotations":{...},"externalURL":"...",
 *    "alerts":[{"status":"firing"|"resolved","labels":{...},
 *               "annotations":{...},"startsAt":RFC3339,"endsAt":RFC3339,
 *               "generatorURL":"...","fingerprint":"..."}]}
 *
 * Read: version (when present it must be "4"), alerts[] (required, at most
 * PD_ALERTS_MAX) and per alert status (firing or resolved), labels (a
 * non-empty object of strings, each a valid label: base/labels.h), startsAt
 * (RFC 3339, optional) and fingerprint (a string, optional). Other keys are
 * ignored, as Alertmanager's own receivers ignore what they do not use (its
 * main branch of 2026-08 adds notification_reason and routeLabels, still
 * version "4": read from github:prometheus/alertmanager notify/webhook/webhook.go
 * and template/template.go). The
 * whole message is refused on the first fault, naming it.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"
#include "base/time.h"

#define PD_ALERTS_MAX 10000 /* alerts in one message */

void pd__alert_msg_release(pd__alert_msg *m)
{
    for (size_t i = 0; i < m->n; i++) {
        if (m->labels)
            pd_labels_release(&m->labels[i]);
        if (m->keys)
            free(m->keys[i]);
    }
    free(m->alerts);
    free(m->labels);
    free(m->keys);
    memset(m, 0, sizeof *m);
}

int pd__alert_msg_parse(const uint8_t *body, size_t len, pd__alert_msg *out, char *msg, size_t cap)
{
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *root = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, &je);
    int rc = PD_EINVAL;
    if (!root) {
        snprintf(msg, cap, "not JSON: %s at line %d column %d", je.text, je.line, je.column);
        return PD_EINVAL;
    }
    json_t *ver = json_object_get(root, "version"), *alerts = json_object_get(root, "alerts");
    if (!json_is_object(root)) {
        snprintf(msg, cap, "want a JSON object (Alertmanager's webhook Message)");
        goto out;
    }
    if (ver && (!json_is_string(ver) || strcmp(json_string_value(ver), "4"))) {
        snprintf(msg, cap, "\"version\" must be \"4\" (the webhook format of Alertmanager 0.x)");
        goto out;
    }
    if (!json_is_array(alerts)) {
        snprintf(msg, cap, "\"alerts\" must be an array of alerts");
        goto out;
    }
    size_t n = json_array_size(alerts);
    if (n > PD_ALERTS_MAX) {
        snprintf(msg, cap, "%zu alerts: over the limit of %d per message", n, PD_ALERTS_MAX);
        goto out;
    }
    rc = PD_ENOMEM;
    out->alerts = calloc(n ? n : 1, sizeof *out->alerts);
    out->labels = calloc(n ? n : 1, sizeof *out->labels);
    out->keys = calloc(n ? n : 1, sizeof *out->keys);
    if (!out->alerts || !out->labels || !out->keys)
        goto out;
    rc = PD_EINVAL;
    for (size_t i = 0; i < n; i++) {
        json_t *a = json_array_get(alerts, i);
        json_t *st = json_object_get(a, "status"), *labels = json_object_get(a, "labels");
        json_t *fp = json_object_get(a, "fingerprint"), *sa = json_object_get(a, "startsAt");
        pd_labels_init(&out->labels[i]);
        out->n = i + 1;
        if (!json_is_object(a) || !json_is_string(st) ||
            (strcmp(json_string_value(st), "firing") &&
             strcmp(json_string_value(st), "resolved"))) {
            snprintf(msg, cap, "alerts[%zu]: want an object with \"status\" firing or resolved", i);
            goto out;
        }
        if (!json_is_object(labels) || !json_object_size(labels)) {
            snprintf(msg, cap, "alerts[%zu]: \"labels\" must be a non-empty object", i);
            goto out;
        }
        const char *k;
        json_t *v;
        json_object_foreach(labels, k, v)
        {
            pd_err e;
            pd_err_clear(&e);
            if (!json_is_string(v)) {
                snprintf(msg, cap, "alerts[%zu].labels.%.100s: want a string", i, k);
                goto out;
            }
            int lrc = pd_labels_set(&out->labels[i], k, json_string_value(v), &e);
            if (lrc == PD_ENOMEM) {
                rc = PD_ENOMEM;
                goto out;
            }
            if (lrc) {
                snprintf(msg, cap, "alerts[%zu].labels: %s", i, e.msg);
                goto out;
            }
        }
        if (!out->labels[i].n) { /* only empty values: Prometheus' "absent" */
            snprintf(msg, cap, "alerts[%zu]: \"labels\" has no label with a value", i);
            goto out;
        }
        if (fp && !json_is_string(fp)) {
            snprintf(msg, cap, "alerts[%zu].fingerprint: want a string", i);
            goto out;
        }
        int64_t starts = 0;
        if (sa && (!json_is_string(sa) || pd_parse_rfc3339(json_string_value(sa), &starts))) {
            snprintf(msg, cap, "alerts[%zu].startsAt: want an RFC 3339 time", i);
            goto out;
        }
        if (fp && !(out->keys[i] = strdup(json_string_value(fp)))) {
            rc = PD_ENOMEM;
            goto out;
        }
        out->alerts[i].firing = !strcmp(json_string_value(st), "firing");
        out->alerts[i].labels = &out->labels[i];
        out->alerts[i].key = out->keys[i];
        out->alerts[i].starts_at_ms = starts;
    }
    out->n = n;
    rc = 0;
out:
    json_decref(root);
    if (rc)
        pd__alert_msg_release(out);
    return rc;
}
