/*
 * api/api.h — profd's HTTP API: the handler given to pd_http_server_start
 * (http/server.h). It routes:
 *
 *   GET|POST /api/v1/query_range?query=SEL&from=T&to=T
 *            (start/end are accepted as aliases of from/to; to defaults to
 *            now, from to to - 1h). data: pd_query_range's array.
 *   GET|POST /api/v1/query?query=SEL&time=T&report=R&sample_index=S&limit=N
 *            the profile of the one matching series nearest to T (default
 *            now). R: proto (default) — gzip pprof, application/octet-stream
 *            with Content-Disposition: attachment, readable by
 *            `go tool pprof URL`; with sample_index the profile's
 *            default_sample_type is set to that type, so pprof shows it —
 *            top (limit rows, default 100, 0 = all; `nodes` is an alias),
 *            flamegraph, meta: JSON, data as query.h documents. Unknown
 *            parameters (e.g. the seconds= that `go tool pprof -seconds`
 *            appends) are ignored. The series and time picked are returned
 *            in the headers X-Profd-Series (selector text) and
 *            X-Profd-Timestamp (Unix ms).
 *   GET|POST /api/v1/series, /api/v1/labels, /api/v1/label/NAME/values
 *            with match[] (repeatable; none = all series), start, end
 *            (default: all time).
 *   GET      /api/v1/targets  pd_scrape_manager_targets_json, or no targets
 *            when there is no scrape manager.
 *   GET      /api/v1/status/buildinfo  {"version":..}
 *   POST     /api/0/profiles?service=&type=&instance_id=&labels=k=v,k2=v2
 *            &created_at=  profefe's push (see api.c for the rules); reply
 *            in profefe's envelope {"code":200,"body":{...}} or
 *            {"code":N,"error":"..."}, each also with Prometheus' "status"
 *            ("success"/"error") and, for errors, "errorType".
 *   GET      /-/healthy, /-/ready (200 text), POST|PUT /-/reload (the reload
 *            callback; 200, or 500 with the error).
 *   GET      /metrics  Prometheus text format 0.0.4: the pd_metrics registry
 *            plus process_* (CPU, RSS, start time, open fds) and
 *            profd_storage_* gauges, refreshed at each scrape.
 *   GET      anything else: the web UI asset at that path (pd_ui_find), else
 *            404.
 *
 * JSON replies of /api/v1 use Prometheus' envelope: {"status":"success",
 * "data":...} or {"status":"error","errorType":T,"error":MSG} with HTTP 400
 * (bad_data: a bad parameter, naming it; an ambiguous selector, naming the
 * candidates), 404 (not_found), 405 (method), 422 (execution: result over the
 * size cap), 500 (internal).
 *
 * Every request is logged at debug level and counted in
 * profd_http_requests_total{handler,code}.
 */
#ifndef PD_API_API_H
#define PD_API_API_H

#include <stddef.h>
#include "base/error.h"
#include "http/server.h"
#include "pprof/pprof.h"
#include "scrape/manager.h"
#include "storage/storage.h"

typedef struct pd_api pd_api;

/* Called for POST /-/reload on the HTTP thread. Returns 0, or a negative
 * error with err saying what was wrong (sent back with HTTP 500). */
typedef int (*pd_api_reload_fn)(void *ctx, pd_err *err);

typedef struct pd_api_options {
    pd_pprof_limits limits;    /* caps for pushed bodies (0 fields = defaults) */
    size_t max_response_bytes; /* cap on one reply body; 0 = 256 MiB */
    size_t top_default_rows;   /* report=top rows without limit=; 0 = 100 */
    pd_api_reload_fn reload;   /* may be NULL: /-/reload then answers 500 */
    void *reload_ctx;
    const char *version; /* shown in buildinfo; NULL = "unknown" */
} pd_api_options;

/* Creates the API over st (borrowed, must outlive the api) and sm (borrowed,
 * may be NULL: no scraping). opts is copied (NULL = defaults). Declares the
 * metric families it counts. Errors: PD_ENOMEM. */
int pd_api_new(pd_storage *st, pd_scrape_manager *sm, const pd_api_options *opts,
               pd_api **out /* OUT */, pd_err *err);
/* Frees the api. The HTTP server using it must be stopped first. NULL is a no-op. */
void pd_api_free(pd_api *api);

/* The pd_http_handler: pass pd_api_handle with the pd_api as ctx.
 * Thread-safe. */
void pd_api_handle(void *api, const pd_http_request *req, pd_http_response *resp);

#endif
