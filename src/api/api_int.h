/*
 * api/api_int.h — private declarations shared by the files of api/: the push
 * and interop endpoints that live beside api.c.
 *
 *   profefe.c    profefe's API under /api/0/ (push, list, get by id, merge,
 *                services, version)
 *   pyroscope.c  Pyroscope's POST /ingest (folded, lines, pprof, multipart)
 *   merge.c      merging pprof profiles with a factor per sample type (Pyroscope's
 *                prev_profile deltas; profefe's /merge uses query.h's pd_merge)
 *   status.c     /api/v1/status/NAME (Prometheus' status API: flags, config,
 *                runtimeinfo, tsdb, buildinfo)
 *   serve.c      the UI's assets (entity tags, 304) and gzip of text replies
 *   envelope.c   Prometheus' reply envelopes (success, error, warnings) and
 *                the parameters every /api/v1 handler reads (time, selector, count)
 *
 * api.c routes to pd__profefe_route and pd__pyroscope_ingest with a
 * pd__api_env describing what they may use; both reply through resp and
 * return the handler name used in profd_http_requests_total{handler}.
 */
#ifndef PD_API_API_INT_H
#define PD_API_API_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/error.h"
#include "base/labels.h"
#include "http/server.h"
#include "pprof/pprof.h"
#include "storage/storage.h"

#include <pthread.h>
#include "api/api.h"
#include "ui/ui.h"

/* The api (api.h's pd_api): api.c owns it; status.c reads flags and config. */
struct pd_api {
    pd_storage *st; /* NULL while starting (set before ready) */
    pd_scrape_manager *sm;
    bool ready; /* __atomic: st and sm are set (release/acquire) */
    pd_api_options o;
    char version[64];
    pd_build_info build; /* strings borrowed (options' build) or static "unknown" */
    double start_time_s; /* fallback for process_start_time_seconds */
    char **flags;        /* n_flags x (name, value), owned */
    size_t n_flags;
    pthread_mutex_t cfg_mu; /* guards the three below */
    char *config_text;      /* as last loaded (pd_api_set_config), or NULL */
    bool config_ok;
    int64_t config_when_ms;
    struct pd__series_cap *series_cap; /* --ingest.max-series-per-service (push_store.c) */
    struct pd_rules *rules; /* issue 30: recording rules (pd_api_set_rules), __atomic, or NULL */
};

/* A Prometheus success envelope around data appended in between:
 * pd__api_begin_success writes '{"status":"success","data":' (and sets the
 * JSON content type), pd__api_end_success the storage warnings of the
 * request, if any, and '}'. 0 or PD_ENOMEM / PD_ETOOBIG (the reply cap). */
/* ---- envelope.c: Prometheus' reply envelopes and common parameters ---- */

/* The HTTP status of a query/storage error code: PD_EPARSE, PD_EINVAL,
 * PD_EAMBIGUOUS 400; PD_ENOTFOUND 404; PD_ETOOBIG 422; PD_ETIMEOUT 503;
 * anything else 500. */
int pd__api_status_of(int rc);

/* Replaces resp's body with Prometheus' error envelope
 * {"status":"error","errorType":T,"error":"<fmt...>"} (T from the status:
 * 400/405/409/413 bad_data, 404 not_found, 422 execution, 503 timeout,
 * else internal; the message is cut at 2 KiB) and sets status and the JSON
 * content type. */
void pd__api_reply_error(pd_http_response *resp, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Replaces resp's body with text (text/plain; charset=utf-8) and status. */
void pd__api_reply_text(pd_http_response *resp, int status, const char *text);

/* The storage warnings of the request this thread handles (pd_api_handle
 * sets them around the route and clears them with NULL; borrowed). */
void pd__api_set_warnings(pd_storage_warnings *w);

/* Ends a query handler that appended its data after pd__api_begin_success:
 * on rc == 0 the envelope is closed; on an error the body is replaced by
 * the error envelope (err's message, else pd_strerror(rc); PD_ETOOBIG
 * without a message names `what` and the reply cap in bytes). */
void pd__api_finish_query(pd_http_response *resp, int rc, const pd_err *err, const char *what);

/* The first non-empty of the query parameters a and b (b may be NULL), or
 * NULL. Borrowed from req. */
const char *pd__api_arg_any(const pd_http_request *req, const char *a, const char *b);

/* An optional time parameter name (or alias, may be NULL) in Prometheus'
 * forms (RFC 3339 or Unix seconds, base/parse.h pd_parse_time_param) into
 * *out in milliseconds since the epoch; def when absent. 0, or -1 after
 * replying 400 naming the parameter. */
int pd__api_time_param(const pd_http_request *req, pd_http_response *resp, const char *name,
                       const char *alias, int64_t def, int64_t *out);

/* 0 if sel parses as a selector (query/selector.h), else -1 after replying
 * 400 naming param and the parse error. */
int pd__api_check_selector(pd_http_response *resp, const char *param, const char *sel);

/* An optional non-negative decimal count parameter (or alias) into *out;
 * def when absent. 0, or -1 after replying 400 (not a number, too large). */
int pd__api_uint_param(const pd_http_request *req, pd_http_response *resp, const char *name,
                       const char *alias, size_t def, size_t *out);

/* Describes every metric family profd exposes (metrics_catalog.c) and
 * creates the series of closed label sets at 0, so /metrics of a fresh
 * profd names every family. Idempotent; called by pd_api_new. */
void pd__api_metrics_catalog_init(void);
int pd__api_begin_success(pd_http_response *resp);
int pd__api_end_success(pd_http_response *resp);

/* /api/v1/status/NAME (status.c): r is NAME (flags, config, runtimeinfo,
 * tsdb, buildinfo). Replies and returns the handler name, or NULL (and
 * touches nothing) when NAME is none of them. The store must be open. */
const char *pd__api_status_route(pd_api *api, const char *r, pd_http_response *resp);

/* An embedded UI asset (serve.c) with its entity tag: Cache-Control:
 * no-cache, and 304 with no body when If-None-Match names the tag
 * (RFC 9110 13.1.2, weak comparison). */
void pd__api_serve_asset(const pd_http_request *req, pd_http_response *resp, const pd_ui_asset *a);

/* gzip of a text reply (serve.c): JSON, HTML, JS, CSS, SVG or plain text of
 * 1 KiB or more when Accept-Encoding names gzip without q=0, as Prometheus'
 * and Pyroscope's servers do; pprof bodies (octet-stream, gzip already) are
 * left as they are. On any failure the reply goes out uncompressed. */
void pd__api_maybe_gzip(const pd_http_request *req, pd_http_response *resp);

/* The series each service has, against --ingest.max-series-per-service
 * (push_store.c). Thread-safe. */
typedef struct pd__series_cap pd__series_cap;
/* New tracker capping each service at max series (0: no cap). 0 or PD_ENOMEM. */
int pd__series_cap_new(size_t max, pd__series_cap **out /* OUT */);
/* Frees it. NULL is a no-op. */
void pd__series_cap_free(pd__series_cap *c);
/* The cap (0: none; NULL: 0). */
size_t pd__series_cap_max(const pd__series_cap *c);

/* What the push/interop handlers use of the api (all borrowed). */
typedef struct pd__api_env {
    pd_storage *st;
    const pd_pprof_limits *limits; /* caps for bodies (0 fields = defaults) */
    const char *version;           /* shown by /api/0/version */
    const pd_build_info *build;    /* its commit and build time */
    pd__series_cap *cap;           /* series per service; NULL: no cap */
} pd__api_env;

/* Routes every path under /api/0/ (profefe's API, see profefe.c for the
 * endpoints and rules). Returns the handler name for metrics (static). */
const char *pd__profefe_route(const pd__api_env *env, const pd_http_request *req,
                              pd_http_response *resp);

/* POST /ingest (Pyroscope's ingest API, see pyroscope.c). Returns the
 * handler name for metrics (static). */
const char *pd__pyroscope_ingest(const pd__api_env *env, const pd_http_request *req,
                                 pd_http_response *resp);

/* /ingest?format=jfr (ingest_jfr.c): converts the JFR recording jfr[0..len)
 * (gzip or not) with the optional LabelsSnapshot labels[0..labels_len) and
 * stores one profile per event kind under ls with __name__ = the kind, at
 * ts_ms; rate_hz (0: 100) sets the cpu/wall sample worth. Replies through
 * resp (200, or a 4xx/5xx naming the problem, counted). 0 or -1. */
int pd__ingest_jfr(const pd__api_env *env, const pd_labels *ls, int64_t ts_ms, int64_t rate_hz,
                   const uint8_t *jfr, size_t jfr_len, const uint8_t *labels, size_t labels_len,
                   const pd_pprof_limits *lim, pd_http_response *resp);

/* POST /v1development/profiles (OTLP profiles, see otlp.c). Returns the
 * handler name for metrics (static). */
const char *pd__otlp_profiles(const pd__api_env *env, const pd_http_request *req,
                              pd_http_response *resp);

/* POST /api/v1/alerts (Alertmanager's webhook) and GET /api/v1/events
 * (alerts.c; rules there and in scrape/adaptive.h). Reply through resp and
 * return the handler name. */
const char *pd__api_alerts(pd_api *api, const pd_http_request *req, pd_http_response *resp);
const char *pd__api_events(pd_api *api, const pd_http_request *req, pd_http_response *resp);
/* GET /api/v1/rules (rules.c, issue 30). */
const char *pd__api_rules(pd_api *api, const pd_http_request *req, pd_http_response *resp);
/* GET /api/v1/source (source.c, issue 31 item 7): a function's source
 * file with its cost per line. */
const char *pd__api_source(pd_api *api, const pd_http_request *req, pd_http_response *resp);

/* The profile a merge-path /api/v1/query selects (api.c), for the handlers
 * that report on it: mode (single, merge, and diff when allow_diff), each
 * side's query/time/from/to/exclude, by, focus/ignore/hide, agg, delta,
 * normalize, span_id, and sample_index for the delta rule — the rules and
 * messages of /api/v1/query. 0 with *p (pd_profile_release it), *stats and
 * *diff; -1 after replying (400 naming the parameter, or the query's error:
 * 404 nothing matches, 503 timeout, ...), *p then holds nothing. */
struct pd_merge_stats;
int pd__api_query_profile(pd_api *api, const pd_http_request *req, pd_http_response *resp,
                          bool allow_diff, pd_profile *p, struct pd_merge_stats *stats,
                          bool *diff /* OUT */);
/* GET /api/v1/regressions (regressions.c, issue 30). */
const char *pd__api_regressions(pd_api *api, const pd_http_request *req, pd_http_response *resp);

/* An Alertmanager webhook message (alerts_parse.c): n alerts, each with its
 * labels and fingerprint owned by the message. */
#include "scrape/adaptive.h"
typedef struct pd__alert_msg {
    pd_scrape_alert *alerts;
    pd_labels *labels;
    char **keys;
    size_t n;
} pd__alert_msg;
/* Reads body[0..len) as prometheus/alertmanager's notify/webhook Message
 * (rules in alerts_parse.c). 0 (release *out), PD_EINVAL with msg naming what
 * is wrong ("alerts[3].labels.job: want a string"; *out empty), PD_ENOMEM. */
int pd__alert_msg_parse(const uint8_t *body, size_t len, pd__alert_msg *out /* OUT */, char *msg,
                        size_t msg_cap);
void pd__alert_msg_release(pd__alert_msg *m);

/* ---- shared helpers (profefe.c) ---- */

/* True when s is valid UTF-8 (no overlongs, surrogates or code points past
 * U+10FFFF). */
bool pd__api_utf8_valid(const char *s, size_t len);

/* Longest key or string value of a sample label accepted in a pushed
 * profile, bytes (pprof labels are short tags; the decoder's caps alone
 * would let one 10 MB string through). */
#define PD_API_MAX_SAMPLE_LABEL_BYTES 65536

/* Checks the sample labels of a pushed profile against
 * PD_API_MAX_SAMPLE_LABEL_BYTES. 0, or PD_ETOOBIG with err naming the
 * sample and label. */
/* The warnings of the request being handled on this thread (storage.h:
 * damaged data a read skipped): appends `,"warnings":["...",...]` to b when
 * there are any (the answer is partial), nothing otherwise. 0 or
 * PD_ENOMEM/PD_ETOOBIG (b's cap). */
int pd__api_put_warnings(pd_buf *b);

int pd__api_check_sample_labels(const pd_profile *p, pd_err *err);

/* Replaces resp's body with the text error fmt... (and a newline), status as
 * given, counts reason in profd_rejected_input_total when not NULL, logs it
 * at debug level (serve.c). For the text-replying push endpoints (/ingest,
 * its JFR part, OTLP). */
void pd__api_text_error(pd_http_response *resp, int status, const char *reason, const char *fmt,
                        ...) __attribute__((format(printf, 4, 5)));

/* The answer to an input a decoder refused with rc (< 0): status 413 and
 * reason "too_large" for PD_ETOOBIG, 500 and no reason for PD_ENOMEM (the
 * input is not at fault: not counted as refused), else 400 and `bad`
 * (e.g. "bad_profile"). */
int pd__api_input_status(int rc);
const char *pd__api_input_reason(int rc, const char *bad);

/* pd__api_text_error with the status and reason of pd__api_input_status/
 * pd__api_input_reason(rc, "bad_profile") and the text "<what>: <err's
 * message>" (pd_strerror(rc) when err has none). what is e.g. "gzip body". */
void pd__api_input_error(pd_http_response *resp, int rc, const pd_err *err, const char *what);

/* Counts one refused input in profd_rejected_input_total{reason}. */
void pd__api_count_rejected(const char *reason);

/* Stores a decoded, validated pushed profile (push_store.c has the rules):
 * split by its samples' labels into series (ingest/split.h), held to the
 * cap of series per service (env->cap), each part stored with the push
 * duplicate rule (pd_storage_append_shift: a taken ms is never refused),
 * plus the profd_ingested_* counters of source. body/len (the producer's
 * bytes) are stored when nothing is split; split parts are stored
 * re-encoded (gzip pprof). Returns 0 or an error with err saying what:
 * PD_ELIMIT (the cap; nothing stored), PD_EOUTOFBOUNDS (a time outside
 * retention or the future grace), a storage error (err says how many of
 * the parts were stored before it). PD_ELIMIT and PD_EOUTOFBOUNDS are
 * already counted in profd_rejected_input_total (series_limit,
 * out_of_bounds). pd__api_store_status maps the code to the HTTP status. */
int pd__api_store(const pd__api_env *env, const pd_labels *ls, int64_t ts_ms, const uint8_t *body,
                  size_t len, const pd_profile *p, const char *source, pd_err *err);

/* The HTTP status for an error of pd__api_store: 400 (PD_EOUTOFBOUNDS,
 * PD_EINVAL), 429 (PD_ELIMIT, as Pyroscope's and Mimir's series limits),
 * 413 (PD_ETOOBIG), else 500. */
int pd__api_store_status(int rc);

/* profefe's store (its own rules, profefe.c): pd_storage_append as it is
 * (a taken ms is PD_EEXIST), no split, plus the counters of source.
 * PD_EOUTOFBOUNDS is counted as in pd__api_store. */
int pd__api_store_exact(pd_storage *st, const pd_labels *ls, int64_t ts_ms, const uint8_t *body,
                        size_t len, const pd_profile *p, const char *source, pd_err *err);

/* ---- merge (merge.c) ----
 *
 * A pd__merger adds profiles one at a time (so merging a long range holds
 * one decoded profile plus the result) into a pd_profile_builder:
 * functions, mappings and locations are deduplicated by content, samples
 * with the same stack and labels have their values added. The rules of
 * google/pprof's Merge: every profile must have the same sample types
 * (type/unit) as the first; period_type comes from the first; period is
 * the largest; time_nanos the earliest non-zero; duration_nanos the sum;
 * comments are kept once each in order; default_sample_type, doc_url,
 * drop/keep_frames come from the first.
 *
 * query.h's pd_merge (which profefe.c uses) cannot scale per sample type:
 * its diff base negates every type and labels the samples. */
typedef struct pd__merger pd__merger;

/* New merger held to lim (NULL: defaults). 0 or PD_ENOMEM. */
int pd__merger_new(const pd_pprof_limits *lim, pd__merger **out /* OUT */);
/* Adds p (indexed, validated: what decode gives). p is only read. scale
 * (may be NULL: all 1) has one factor per sample type that multiplies each
 * sample's value of that type (Pyroscope's prev_profile deltas add the
 * previous profile with -1 for cumulative types, 0 for the others).
 * Errors: PD_EINVAL (sample types differ from the first profile's: err
 * names both), PD_ETOOBIG (a cap of lim), PD_ENOMEM, PD_EINVAL (an added value
 * overflows int64). After an error the merger should only be freed. */
int pd__merger_add(pd__merger *m, const pd_profile *p, const int64_t *scale /* may be NULL */,
                   pd_err *err);
/* Number of profiles added so far. */
size_t pd__merger_count(const pd__merger *m);
/* Moves the merged profile into *out (pd_profile_release it); with
 * drop_zero, samples whose values are all 0 are left out. PD_EINVAL when
 * nothing was added; PD_ENOMEM. The merger must then only be freed. */
int pd__merger_finish(pd__merger *m, bool drop_zero, pd_profile *out /* OUT */, pd_err *err);
/* Frees the merger. NULL is a no-op. */
void pd__merger_free(pd__merger *m);

#endif
