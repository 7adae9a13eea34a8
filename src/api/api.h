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
 *            mode=merge|diff (and single with by/focus/ignore/hide, or
 *            report=folded|callgraph) run through the merger (query.h,
 *            merge.c; pprof's Merge and -diff_base rules):
 *              mode=merge  query, from, to (start/end aliases; to defaults
 *                          to now, from to to - 1h): every profile of every
 *                          matching series in the range, merged.
 *              mode=diff   query_a, query_b (each defaults to query),
 *                          mode_a/mode_b (single|merge, default single),
 *                          time_a/time_b, from_a/from_b, to_a/to_b: a is
 *                          the base, b the new side (go tool pprof
 *                          -diff_base=A B).
 *            with by= (sample labels kept; series labels named there are
 *            added, e.g. by=instance), focus=/ignore=/hide= (pprof's regexes
 *            on frame names), sample_index, nodes= (limit= alias: top rows,
 *            flame graph nodes, call graph nodes; default 100 for top, 80
 *            for callgraph, all for flamegraph; the cut is reported in the
 *            JSON: rows_cut/cut_flat, nodes/nodes_total and per-node cut).
 *            Reports: proto, top, flamegraph (pd_report_*_ex; for a diff
 *            rows and nodes carry base/new values besides the delta),
 *            folded (text/plain collapsed stacks "a;b;c V", for a diff
 *            "a;b;c BASE NEW"), meta, callgraph (SVG via Graphviz dot).
 *            Headers X-Profd-Profiles and X-Profd-Series-Count say what was
 *            merged. Sample types that differ between matching series give
 *            400 naming two of them; --query.max-samples 422; the
 *            --query.timeout deadline 503.
 *   GET|POST /api/v1/series, /api/v1/labels, /api/v1/label/NAME/values
 *            with match[] (repeatable; none = all series), start, end
 *            (default: all time).
 *   GET      /api/v1/targets  pd_scrape_manager_targets_json, or no targets
 *            when there is no scrape manager.
 *   GET      /api/v1/status/buildinfo  {"version","revision","branch","buildUser",
 *                                      "buildDate","compiler","platform"}
 *   /api/0/...  profefe's API, whole (profefe.c): POST /api/0/profiles
 *            (push), GET /api/0/profiles (list metas), /api/0/profiles/merge,
 *            /api/0/profiles/ID[+ID...], /api/0/services, /api/0/version;
 *            profefe's envelope {"code":200,"body":...} or
 *            {"code":N,"error":"..."}, each also with Prometheus' "status"
 *            ("success"/"error") and, for errors, "errorType".
 *   POST     /ingest  Pyroscope's ingest (pyroscope.c): name=APP.TYPE{k=v},
 *            format=folded|lines|pprof, multipart profile/prev_profile/
 *            sample_type_config.
 *   POST     /push.v1.PusherService/Push  Pyroscope's Connect push
 *            (push_connect.c; Connect protocol in connect.h).
 *   POST     /querier.v1.QuerierService/<Method>  Pyroscope's querier API
 *            for Grafana (querier.c); GET /pyroscope/render and
 *            /pyroscope/render-diff, flamebearer JSON (querier_render.c).
 *            querier_int.h says how profd's series look through it.
 *   GET      /-/healthy, /-/ready (200 text; /-/ready 503 while
 *            pd_storage_ready is false: the head replayed after a crash
 *            is still being decomposed), POST|PUT /-/reload (the reload
 *            callback; 200, or 500 with the error; 403 naming
 *            --web.enable-lifecycle unless enable_lifecycle, counted in
 *            profd_http_rejected_total{reason="lifecycle_disabled"}).
 *   GET      /metrics  Prometheus text format 0.0.4: the pd_metrics registry
 *            plus process_* (CPU, RSS, start time, open fds) and
 *            profd_storage_* gauges, refreshed at each scrape.
 *   GET      /debug/pprof/profile?seconds=N (1..3600, default 30) and
 *            /debug/pprof/heap, /debug/pprof/allocs: profd's own CPU and
 *            heap profiles (libprofd-agent, gzip pprof, as Go's
 *            net/http/pprof) when enable_pprof; else 404. A bad seconds is
 *            400 naming it (profd_rejected_input_total{reason=
 *            "pprof_bad_seconds"}); a CPU profile already running is 500
 *            as Go ("cpu profiling already in use").
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
#include <stdint.h>
#include "base/error.h"
#include "http/server.h"
#include "pprof/pprof.h"
#include "symbolize/source.h"
#include "base/buildinfo.h"
#include "scrape/manager.h"
#include "storage/storage.h"

typedef struct pd_api pd_api;

/* Called for POST /-/reload on the HTTP thread. Returns 0, or a negative
 * error with err saying what was wrong (sent back with HTTP 500). */
typedef int (*pd_api_reload_fn)(void *ctx, pd_err *err);

#define PD_API_DEFAULT_MAX_SERIES_PER_SERVICE 10000

typedef struct pd_api_options {
    pd_pprof_limits limits;    /* caps for pushed bodies (0 fields = defaults) */
    size_t max_response_bytes; /* cap on one reply body; 0 = 256 MiB */
    size_t top_default_rows;   /* report=top rows without limit=; 0 = 100 */
    pd_api_reload_fn reload;   /* may be NULL: /-/reload then answers 500 */
    void *reload_ctx;
    const char *version; /* shown in buildinfo; NULL = "unknown" (build->version wins) */
    /* The binary's build facts (base/buildinfo.h), borrowed: must outlive
     * the api (profd passes its static pd_build_info_profd). NULL: every
     * field "unknown" but the version. Shown by /api/v1/status/buildinfo,
     * /api/0/version and the gauge profd_build_info{...} 1 on /metrics. */
    const pd_build_info *build;
    int64_t query_timeout_ms; /* --query.timeout: merge/diff deadline; 0 = 2 min */
    size_t query_max_samples; /* --query.max-samples: distinct samples of a merge; 0 = 1M */
    /* --ingest.max-series-per-service (issue 26): series a service (its
     * service_name) may have through the push APIs, dynamic labels
     * included; a push past it is refused whole with 429.
     * 0 = PD_API_DEFAULT_MAX_SERIES_PER_SERVICE, SIZE_MAX = no cap */
    size_t max_series_per_service;
    /* /api/v1/status/flags, as Prometheus: every flag's name (without "--")
     * and value as in effect; n_flags pairs, copied by pd_api_new. */
    const char *const *flag_names, *const *flag_values;
    size_t n_flags;
    bool enable_pprof; /* --web.enable-pprof: profd's own /debug/pprof (libprofd-agent) */
    /* --web.enable-lifecycle (issue 20 item 4): without it POST /-/reload
     * answers 403 naming the flag, as Prometheus (SIGHUP still reloads) */
    bool enable_lifecycle;
    /* --ui.source-dir (issue 31 item 7): the local directories the source
     * view (GET /api/v1/source) reads source files from, after debuginfod
     * (symbolize/source.h has the rules). Borrowed: must outlive the api. */
    const pd_source_dir *source_dirs;
    size_t n_source_dirs;
} pd_api_options;

/* Creates the API over st (borrowed, must outlive the api) and sm (borrowed,
 * may be NULL: no scraping). opts is copied (NULL = defaults). Declares the
 * metric families it counts. Errors: PD_ENOMEM.
 * st may be NULL: the api is then "starting" (the store is being opened and
 * its WAL replayed, as Prometheus serves during replay) until
 * pd_api_set_ready: /-/healthy answers 200, /-/ready 503, /metrics and the
 * UI's assets are served, every other endpoint answers 503 saying profd is
 * starting (nothing is acknowledged that could not be stored). */
int pd_api_new(pd_storage *st, pd_scrape_manager *sm, const pd_api_options *opts,
               pd_api **out /* OUT */, pd_err *err);
/* Ends the "starting" state of an api made with st NULL: from now on every
 * endpoint answers over st and sm (borrowed as in pd_api_new; sm may be NULL).
 * Safe while requests are being served; call once. */
void pd_api_set_ready(pd_api *api, pd_storage *st, pd_scrape_manager *sm);
/* issue 30: the recording rules engine GET /api/v1/rules lists (borrowed,
 * must outlive the api; NULL: no rules). Thread-safe. */
struct pd_rules;
void pd_api_set_rules(pd_api *api, struct pd_rules *rules);
/* Frees the api. The HTTP server using it must be stopped first. NULL is a no-op. */
void pd_api_free(pd_api *api);

/* The pd_http_classify_fn to pass with pd_api_handle (ctx unused): which
 * pool runs a request, so a slow query never delays a push or a probe:
 *   inline (the server's epoll thread): GET /-/healthy, /-/ready;
 *   query pool: /api/v1/..., Connect /querier.v1.*, /pyroscope/render*,
 *     profefe's reads (/api/0/... but POST
 *     /api/0/profiles), any other GET/HEAD (UI assets, Pyroscope /render,
 *     /pprof/...);
 *   ingest pool: everything else — pushes (POST /ingest, POST
 *     /api/0/profiles, OTLP, ...), POST /-/reload, GET /metrics. */
pd_http_pool pd_api_classify(void *ctx, const char *method, const char *path);

/* issue 20: the access group of a request for --web.config.file's
 * profd_access_control (a pd_access_group of http/webconfig.h):
 *   push (1):  POST /api/0/profiles, /ingest, /push.v1.*,
 *              /v1development/profiles (OTLP)
 *   admin (2): /-/reload, /-/quit, profd's own /debug/pprof/
 *   query (0): everything else (queries, UI, /metrics, /-/healthy) */
int pd_api_access_group(const char *method, const char *path);

/* issue 26 item 7: the routes whose POST body is a form when its
 * Content-Type says application/x-www-form-urlencoded (http/server.h's form
 * option): Prometheus' API under /api/v1/ only. Every push (profefe's
 * /api/0/profiles, /ingest, Connect, OTLP) reads its raw body whatever the
 * Content-Type, as profefe and Pyroscope do. */
bool pd_api_form_route(const char *method, const char *path);

/* Records the configuration file as last loaded (text: its bytes, len;
 * copied) for /api/v1/status/config, and the outcome of that (re)load
 * (ok false: text is ignored and the previous text kept) with the time
 * (Unix ms) for /api/v1/status/runtimeinfo. Thread-safe. PD_ENOMEM. */
int pd_api_set_config(pd_api *api, const char *text, size_t len, bool ok, int64_t when_ms);

/* The pd_http_handler: pass pd_api_handle with the pd_api as ctx.
 * Thread-safe. */
void pd_api_handle(void *api, const pd_http_request *req, pd_http_response *resp);

#endif
