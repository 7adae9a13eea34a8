/*
 * scrape/scrape_int.h — internals of the scrape manager shared with its tests.
 */
#ifndef PD_SCRAPE_SCRAPE_INT_H
#define PD_SCRAPE_SCRAPE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include "base/buf.h"
#include "scrape/adaptive.h"
#include "scrape/config.h"

/* The offset (ms, in [0, interval_ms)) of a target inside its interval:
 * xxh3-64 of job, a 0 byte, and the URL, modulo the interval. Stable across
 * runs and machines, so restarts keep the spread (as Prometheus' offsets). */
int64_t pd__scrape_offset_ms(const char *job, const char *url, int64_t interval_ms);

/* Whether a target whose profile window is `seconds` (0: none) and whose
 * interval is interval_ms runs a slot that came while its previous scrape
 * still ran as soon as that scrape ends (true), or skips it (false): every
 * windowed profile (CPU, delta) catches up, so a late answer costs
 * lateness, not a profile; others skip, as Prometheus does. */
bool pd__scrape_catch_up(int64_t seconds, int64_t interval_ms);

/* Appends scheme://tgt/path[?seconds=S][&name=value...] to out: seconds
 * when ep->seconds > 0 (a "seconds" entry of the job's params is then
 * dropped), then the job's params in order, names and values
 * percent-encoded (RFC 3986 unreserved characters kept). PD_ENOMEM, PD_ETOOBIG. */
int pd__scrape_url(const pd_scrape_job *job, const char *tgt, const pd_pprof_endpoint *ep,
                   pd_buf *out);

/* What a target is, from pd__scrape_spec_build. */
typedef struct pd__scrape_spec {
    pd_labels labels;     /* stored labels: __name__ and the labels not starting with "__" */
    pd_labels discovered; /* the labels before relabeling ("__" labels included) */
    pd_buf url;           /* NUL-terminated */
    int64_t interval_ms, timeout_ms; /* from __scrape_interval__ / __scrape_timeout__ */
    bool keep;                       /* false: relabeling dropped the target (nothing else set) */
    bool cumulative; /* profiles served cumulative (Go's allocs/heap/block/mutex without a
                        ?seconds= window, issue 12): the stored series also carry
                        PD_LABEL_DELTA="false" (not a target label: /metrics and
                        /api/v1/targets show the labels above) */
} pd__scrape_spec;

/*
 * Builds the target of (job, address, group labels, endpoint) as
 * Prometheus' PopulateLabels, with Parca's per-profile labels:
 *  1. the group labels, __address__ = address; then, when not set by the
 *     group, job, __scrape_interval__, __scrape_timeout__,
 *     __metrics_path__, __scheme__, __param_<name> (the first value of each
 *     job param); __name__ = the profile type and __profile_path__ = its path.
 *  2. the job's relabel_configs; a dropped target gives keep = false.
 *  3. __address__ must be set and be host[:port]; without a port the
 *     scheme's (80, 443) is added (Prometheus 2.42); __scheme__ must be
 *     http or https; interval and timeout are read from their labels.
 *  4. URL = __scheme__://__address__ + __profile_path__, ?seconds=S (S > 0),
 *     the job's params in order (a __param_X label replaces X's first value,
 *     as Prometheus), then __param_ labels of no job parameter.
 *  5. instance defaults to __address__; every "__" label but __name__ is
 *     removed; global.external_labels are added where absent.
 * Errors: PD_EINVAL with err naming the problem (the target is skipped),
 * PD_ENOMEM. out is released on error.
 */
int pd__scrape_spec_build(const pd_config *cfg, const pd_scrape_job *job, const char *address,
                          const pd_labels *group, const pd_pprof_endpoint *ep,
                          pd__scrape_spec *out /* OUT */, pd_err *err);
void pd__scrape_spec_release(pd__scrape_spec *s);
/* Appends s percent-encoded (RFC 3986 unreserved characters kept). */
int pd__scrape_put_escaped(pd_buf *b, const char *s);

/* ---- service discovery (sd.c) ---- */
typedef struct pd__sd pd__sd;
/* A discovery with no configuration. rebuild(arg, err) is called on its
 * thread, with the sd lock held, when discovered targets changed. PD_ENOMEM. */
int pd__sd_new(int (*rebuild)(void *arg, pd_err *err), void *arg, pd__sd **out);
/* The lock serialising set() and rebuilds: the manager holds it around apply. */
void pd__sd_lock(pd__sd *sd);
void pd__sd_unlock(pd__sd *sd);
/* Under the lock: takes cfg's file_sd/http_sd configs (parsing its own copy
 * of cfg->source; *use is that copy, or cfg when it has no source) and reads
 * the file SDs once. Errors as pd_config_parse, PD_ENOMEM; the previous
 * state stays on error. */
int pd__sd_set(pd__sd *sd, const pd_config *cfg, const pd_config **use /* OUT */, pd_err *err);
/* Under the lock: the groups discovered for job index job of *use. */
size_t pd__sd_group_count(const pd__sd *sd, size_t job);
const pd_static_config *pd__sd_group(const pd__sd *sd, size_t job, size_t idx);
/* The own configuration copy (NULL before a set with a source). Under the lock. */
const pd_config *pd__sd_config(const pd__sd *sd);
int pd__sd_start(pd__sd *sd, pd_err *err);
void pd__sd_stop(pd__sd *sd);
void pd__sd_free(pd__sd *sd);
/* Parses a file_sd file or http_sd body (JSON or YAML: a list of
 * {targets: [...], labels: {...}}); each group gets meta_name=meta_value.
 * Errors name "NAME:LINE:COL". PD_EPARSE, PD_EINVAL, PD_ETOOBIG, PD_ENOMEM. */
int pd__sd_parse_groups(const char *text, size_t len, const char *name, const char *meta_name,
                        const char *meta_value, pd_static_config **out, size_t *n_out, pd_err *err);

/* Test hook: runs one round of the scrape loop on the calling thread, as
 * the scrape thread does, with m NOT started (pd_scrape_manager_start never
 * called): starts the transfers of the slots due at the now of m's clock
 * (pd_scrape_manager_set_clock), waits at most max_wait_ms of real time for
 * transfer events, and finishes (decodes, stores, records) the transfers that
 * ended. *running (may be NULL): transfers still in flight. Returns the ms on
 * m's clock from its now to the next slot after the round: <= 0 when one is
 * due already (a catch-up run after a scrape that met its next slot busy),
 * INT64_MAX without targets. A test that moves its clock to an instant and
 * calls this until nothing runs and the return is > 0 has run every slot up
 * to that instant. */
int64_t pd__scrape_round(pd_scrape_manager *m, int64_t max_wait_ms, int *running);

/* Test hook, NULL outside tests: called by every finished scrape after its
 * body was decoded and stored and before its health and metrics are
 * recorded (on the store thread once pd_scrape_manager_start ran, else on
 * the thread stepping the loop), with the target's URL — the window in
 * which a reload can drop the target. Set it only while no manager runs. */
extern void (*pd__scrape_before_record)(const char *url);

/* ---- storing the scrapes a loop round finished (store.c) ---- */
#include "pprof/split.h"
#include "storage/storage.h"

/* Room for the message of a failed scrape (the target's last_error). */
#define PD__SCRAPE_MSG 600
/* Most label sets one scraped profile is split into (manager.c's top). */
#define PD__SCRAPE_MAX_SPLIT 1000

/* A scrape whose transfer ended with HTTP 200, on its way to the store.
 * The caller sets the inputs and calls pd__scrape_fin_decode, then stores
 * every decoded one of the round together (pd__scrape_store), reads the
 * outputs and releases it (pd__scrape_fin_release). */
typedef struct pd__scrape_fin {
    /* in: borrowed until pd__scrape_fin_release */
    const pd_labels *labels; /* the series labels (the target's stored labels) */
    int64_t ts_ms;           /* the scrape's start: the time stored at */
    const uint8_t *body;     /* the body as served */
    size_t len;
    const char *keep; /* keep_sample_type ("type\tunit\n"...), NULL: every type */
    size_t max_body;  /* cap of the body re-encoded for keep */
    /* out: outcome as at manager.c's top ("success", "duplicate",
     * "out_of_bounds", "error", "bad_profile", "too_large"); msg the error,
     * "" when the target is up; inuse the heap in use of the stored profile
     * (bytes, -1: none or not stored) */
    const char *outcome;
    char msg[PD__SCRAPE_MSG];
    int64_t inuse;
    /* the caller's, untouched here: whose scrape, curl's result, duration
     * (s) and end (wall ms) of the transfer */
    void *owner;
    int res;
    double dur;
    int64_t end_wall;
    /* private (store.c) */
    bool ready;   /* decoded, to be stored */
    pd_profile p; /* decoded body (ready) */
    pd_buf kept;  /* body re-encoded with the kept types (keep) */
    pd_pprof_split sp;
    pd_buf *enc;     /* sp.n encoded parts */
    size_t first, n; /* its items in the round's pd_storage_append_many */
} pd__scrape_fin;

/* Decodes f's body (limits lim), keeps its listed types and splits it by its
 * samples' labels (manager.c's top), each part encoded. On failure sets
 * f->outcome and f->msg (bad_profile, too_large, error); else f is ready
 * for pd__scrape_store. */
void pd__scrape_fin_decode(pd__scrape_fin *f, const pd_pprof_limits *lim);

/* Stores every ready scrape of v[0..n) with one pd_storage_append_many
 * (none when no scrape is ready): each label set of each scrape, at its
 * time, without the push's shift. Sets each ready scrape's outcome, msg
 * and inuse — a scrape whose label sets partly failed reports the first
 * failure: duplicate (PD_EEXIST), out_of_bounds, error — and counts the
 * stored ones in profd_ingested_{profiles,bytes}_total{source="scrape"},
 * the call in profd_scrape_store_batches_total and its wall time in
 * profd_scrape_store_seconds_total. Returns the label sets stored. */
size_t pd__scrape_store(pd_storage *st, pd__scrape_fin *v, size_t n);

/* Frees what pd__scrape_fin_decode and pd__scrape_store made (not the
 * inputs; the outputs stay readable). */
void pd__scrape_fin_release(pd__scrape_fin *f);

/* The store step of the scrape loop: the loop fills the scrapes of a round
 * (pd__scrape_storer_slot) and hands them over (pd__scrape_storer_flush);
 * they are stored with one pd__scrape_store, released, and passed one by
 * one to done(arg, f) — on the loop's thread before flush returns while no
 * store thread was started, else on the store thread while the loop goes
 * on; scrapes handed over while that thread stores gather into its next
 * call. After each call on the store thread, idle(arg). */
typedef struct pd__scrape_storer pd__scrape_storer;
typedef void (*pd__scrape_done_fn)(void *arg, pd__scrape_fin *f);
/* 0 or PD_ENOMEM. */
int pd__scrape_storer_new(pd_storage *st, pd__scrape_done_fn done, void (*idle)(void *arg),
                          void *arg, pd__scrape_storer **out /* OUT */);
/* The next scrape of the round, zeroed; never NULL (when memory runs out
 * the scrapes so far are stored first, waiting for them). */
pd__scrape_fin *pd__scrape_storer_slot(pd__scrape_storer *s);
/* Hands the round's scrapes over; wait: returns once every scrape handed
 * over is stored and passed to done. */
void pd__scrape_storer_flush(pd__scrape_storer *s, bool wait);
/* Starts the store thread. 0 or -errno. */
int pd__scrape_storer_start(pd__scrape_storer *s, pd_err *err);
/* Stores what was handed over or filled, stops the thread, frees s. NULL: no-op. */
void pd__scrape_storer_free(pd__scrape_storer *s);

/* Describes the metrics of store.c and creates them at 0. */
void pd__scrape_store_describe(void);

/* ---- keep_sample_type (keep.c) ---- */
#include "pprof/pprof.h"
/* Keeps only the sample types of p listed in keep ("type\tunit\n"...,
 * an empty unit matches any) — samples' values follow — and appends p's
 * gzip encoding to out. Errors: PD_EINVAL naming the profile's types when
 * none is listed (p unchanged) or a sample's value count is wrong;
 * PD_ENOMEM, PD_ETOOBIG (out's cap). */
int pd__scrape_keep_types(pd_profile *p, const char *keep, pd_buf *out, pd_err *err);

/* ---- HTTP client options for scrapes and discovery requests (client.c) ---- */
#include <curl/curl.h>
/* Sets c's auth (basic_auth, authorization/bearer: secret files read now,
 * whitespace-trimmed as Prometheus), TLS, proxy, redirect and HTTP version
 * options on e. An Authorization header is appended to *hdrs (the caller
 * sets CURLOPT_HTTPHEADER and frees the list). false with msg set when a
 * secret file cannot be read or memory runs out. */
bool pd__client_setopt(const pd_scrape_client *c, CURL *e, struct curl_slist **hdrs, char *msg,
                       size_t msg_cap);
/* client_oauth2.c: the "Authorization: TYPE TOKEN" header line of c's
 * oauth2 (c->oauth2_token_url set), from the cache or a token request
 * (client credentials). false with msg set ("oauth2: ..."). Thread-safe. */
bool pd__oauth2_header(const pd_scrape_client *c, char *hdr, size_t cap, char *msg, size_t msg_cap);
/* Reads a secret file into out (cap bytes with the NUL), trimmed. false with msg set. */
bool pd__client_read_secret(const char *path, char *out, size_t cap, char *msg, size_t msg_cap);

/* ---- kubernetes_sd_configs (sd_kubernetes.c) ----
 * One discovery: a thread lists and then watches the role's objects on the
 * API server (pods; services; endpoints with their services and pods;
 * nodes), per namespace or in all namespaces, and keeps the target groups
 * Prometheus' discovery/kubernetes would make of them, one pd_static_config
 * per target (group labels and the target's own labels merged). */
typedef struct pd__k8s pd__k8s;
/* Starts the discovery of cfg (borrowed: it must outlive the discovery).
 * The API server, credentials and namespace come from cfg->api_server and
 * cfg->client, cfg->kubeconfig_file, or in-cluster (KUBERNETES_SERVICE_HOST,
 * KUBERNETES_SERVICE_PORT and the service account directory,
 * /var/run/secrets/kubernetes.io/serviceaccount unless
 * PROFD_K8S_SERVICEACCOUNT_DIR names another). Errors (PD_EINVAL with err:
 * no API server, unreadable kubeconfig; PD_ENOMEM) leave *out NULL. */
int pd__k8s_start(const pd_sd_config *cfg, pd__k8s **out, pd_err *err);
/* When the groups changed since *seen (a counter, 0 at first): *v, *n get a
 * copy of them, *seen is updated, returns 1. 0: no change. PD_ENOMEM. */
int pd__k8s_groups(pd__k8s *k, uint64_t *seen, pd_static_config **v, size_t *n);
/* sd_kubeconfig.c: the current context of a kubeconfig file: *cl (auth,
 * TLS), *server and *ns (the context's namespace, NULL if none), all owned
 * by the caller. Errors name the file and the key: PD_EINVAL, PD_EPARSE,
 * PD_ETOOBIG (over 1 MiB), PD_ENOMEM. */
int pd__k8s_kubeconfig(const char *path, pd_scrape_client *cl, char **server, char **ns,
                       pd_err *err);
/* Stops the thread and frees k (NULL is fine). */
void pd__k8s_stop(pd__k8s *k);

/* ---- adaptive capture (adaptive.c; rules in adaptive.h) ----
 * Every function runs under the manager's lock (m->mu). */
typedef struct pd__adaptive pd__adaptive;
typedef struct pd__burst pd__burst; /* one target (job + labels without __name__) */
int pd__adaptive_new(pd__adaptive **out /* OUT */);
void pd__adaptive_free(pd__adaptive *a);
/* Apply: begin, ref each target of an adaptive job (find or create its
 * burst; job copied into the burst's job state), end (bursts not ref'd are
 * ended with reason "reload" and freed). NULL from ref: out of memory. */
void pd__adaptive_begin_apply(pd__adaptive *a);
pd__burst *pd__adaptive_ref(pd__adaptive *a, const pd_scrape_job *job, const pd_labels *labels);
void pd__adaptive_end_apply(pd__adaptive *a);
/* Whether profile type name is scraped fast during b's bursts. */
bool pd__burst_profile(const pd__burst *b, const char *name);
/* Ends bursts past max_duration. now: monotonic ms. */
void pd__adaptive_tick(pd__adaptive *a, int64_t now_mono);
/* 0 when b is not in burst, else the burst scrape interval (ms). */
int64_t pd__burst_interval(const pd__burst *b);
/* Whether the job's byte budget of the current minute has room. */
bool pd__burst_budget_ok(pd__burst *b, int64_t now_wall);
/* A burst slot skipped for the budget (counted). */
void pd__burst_over_budget(pd__burst *b);
/* A finished scrape of b's target: ok (stored), start_ms (its wall ms: the
 * time a stored profile gets), end_ms (wall ms the attempt ended: the time of
 * a target_down event, never before the last stored profile), bytes stored, in_burst (it was a
 * burst scrape), metric_labels (job=..,profile_type=..), profile type name; when !ok and
 * conn_failed (the target did not answer), reason ("connection refused", "timeout", "connection
 * reset", "error") and the error text. */
void pd__burst_scraped(pd__burst *b, bool ok, int64_t start_ms, int64_t end_ms, size_t bytes,
                       bool in_burst, const char *metric_labels, const char *name, bool conn_failed,
                       const char *reason, const char *error, int64_t now_mono);
/* A heap profile of b's target: heap in use (bytes) at ts_ms. May start a
 * growth/limit burst or end one (calm). */
void pd__burst_observe(pd__burst *b, int64_t ts_ms, int64_t inuse, int64_t now_mono);
/* pd_scrape_manager_alerts / _events_json under the lock. */
size_t pd__adaptive_alert(pd__adaptive *a, const pd_scrape_alert *al, int64_t now_mono);
int pd__adaptive_events_json(pd__adaptive *a, int64_t from_ms, int64_t to_ms, const char *kind,
                             pd_buf *out);
/* pd_scrape_manager_events_open under the lock. */
int pd__adaptive_events_open(pd__adaptive *a, const char *path, pd_err *err);
/* The sum of the inuse_space sample type of p (bytes), or -1 when p has none. */
int64_t pd__adaptive_heap_inuse(const pd_profile *p);

/* ---- events (events.c; format in the file's header comment and
 * docs/format/events.md). Under the manager's lock. ---- */
typedef struct pd__events pd__events;
int pd__events_new(pd__events **out /* OUT */);
void pd__events_free(pd__events *ev);
/* Loads the events of path (creating it when absent; a damaged tail is
 * truncated, a bad header set aside as path.corrupt) and appends every
 * later event to it. Errors: -errno, PD_ENOMEM, with err naming the file;
 * the events then stay in memory only. */
int pd__events_open(pd__events *ev, const char *path, pd_err *err);
/* Records an event (strings copied; error may be NULL) and counts it in
 * profd_adaptive_events_total{kind}. A failed write is logged and counted
 * (profd_adaptive_events_file_errors_total); the event stays in memory. */
void pd__events_add(pd__events *ev, const char *kind, int64_t time_ms, const char *job,
                    const pd_labels *labels, const char *reason, const char *message,
                    int64_t last_profile_ms, const char *last_type, const char *error);
/* The JSON array of pd_scrape_manager_events_json. */
int pd__events_json(pd__events *ev, int64_t from_ms, int64_t to_ms, const char *kind, pd_buf *out);

#endif
