/*
 * scrape/config.h — profd's configuration file: Prometheus-style YAML
 * (DESIGN.md §4), read with libyaml.
 *
 *   global:
 *     scrape_interval: 10s        # default 10s
 *     scrape_timeout: 10s         # default: the interval... capped as Prometheus (must be <=
 * interval) scrape_configs:
 *     - job_name: api
 *       scrape_interval: 5s
 *       scrape_timeout: 5s
 *       scheme: http              # or https
 *       params: {k: [v]}
 *       static_configs:
 *         - targets: ["127.0.0.1:6060"]
 *           labels: {env: prod}
 *       profiling_config:
 *         pprof_config:
 *           heap: {enabled: true, path: /debug/pprof/heap}
 *           cpu:  {enabled: true, path: /debug/pprof/profile, seconds: 5}
 *           custom: {path: /debug/pprof/custom}
 *
 * Unknown keys and bad values are errors naming file:line:column.
 *
 * Three dialects, one reader. The file's dialect (pd_config.dialect) comes
 * from its keys, checked before anything is parsed:
 *   parca       top-level object_storage, a job's normalized_addresses,
 *               profiling_config.path_prefix, a pprof_config entry named
 *               memory or process_cpu, or an entry with keep_sample_type;
 *   conprof     else a pprof_config entry named profile or trace;
 *   prometheus  else a top-level alerting, rule_files, remote_write,
 *               remote_read, storage or tracing, or global.evaluation_interval
 *               or global.external_labels;
 *   profd       else.
 * What the dialect decides:
 * - Default profile types: profd/prometheus: allocs, block, goroutine, heap,
 *   mutex, threadcreate, cpu (below). conprof: the same with the CPU profile
 *   named "profile", plus "trace" (disabled: not pprof). parca (as Parca's
 *   DefaultScrapeConfig): memory (/debug/pprof/allocs), block, goroutine,
 *   mutex, process_cpu (/debug/pprof/profile, delta: true).
 * - Timeout vs interval. profd/prometheus/conprof (Prometheus' rule): a job
 *   timeout defaults to min(global timeout, interval) and may not exceed the
 *   interval. parca (Parca's rule): the job interval defaults to 10s (Parca
 *   has no global section), the timeout to interval + 3s, and an explicit
 *   timeout must be greater than the interval; an enabled process_cpu needs
 *   a timeout of at least 2s.
 * Sections and keys profd has no use for (alerting, rule_files,
 * remote_write, remote_read, storage, tracing, object_storage,
 * global.evaluation_interval, metric_relabel_configs, sample limits,
 * *_sd_configs but file, http, dns and kubernetes...) are accepted with one warning each
 * (pd_config.warnings, logged at load, printed by `profd check config`).
 * global.external_labels are added to every stored profile's labels where
 * absent. A target repeated in one static_configs entry is dropped with a
 * warning; the same target from two entries is scraped once (manager).
 * delta: true (any dialect) asks ?seconds=<interval in s> as Parca does,
 * unless seconds is given. path_prefix (Parca) is prepended to every path.
 * keep_sample_type (Parca: a list of {type, unit}) keeps only those sample
 * types of each scraped profile (manager: the others are cut before it is
 * stored). Job keys also read: metrics_path (only as __metrics_path__ for
 * relabeling), honor_labels and honor_timestamps (accepted, no effect: a
 * pprof body carries no target labels, profiles are stored at scrape
 * start), body_size_limit, relabel_configs (relabel.h), and the HTTP client
 * keys of pd_scrape_client.
 *
 * Rules (as Prometheus where Prometheus has one):
 * - Durations use Prometheus syntax (pd_parse_duration) and must be > 0.
 * - global.scrape_interval defaults to 10s; global.scrape_timeout to
 *   min(10s, global interval); a global timeout over the global interval is
 *   an error. A job's interval defaults to the global one; its timeout to
 *   min(global timeout, job interval); a job timeout set over its interval is
 *   an error.
 * - job_name is required, non-empty and unique. scheme is "http" (default) or
 *   "https". params: name -> list of strings, sent as query parameters.
 * - static_configs[].targets: non-empty "host[:port]" strings (no scheme, no
 *   path); an empty list is an error. labels: valid label names but
 *   __name__ (the profile type); they may override job and instance, and
 *   "__" labels (__scheme__, __metrics_path__, __param_x...) feed relabeling
 *   (as in Prometheus).
 * - profiling_config.pprof_config.<name>: name matches [a-zA-Z_][a-zA-Z0-9_]*
 *   and becomes __name__. Keys: path (must start with "/"), enabled (bool,
 *   default true for a listed entry), seconds (int >= 0; 0 = no ?seconds=),
 *   delta (bool: ?seconds=<interval>, see above), keep_sample_type (Parca). Entries merge over the
 * defaults by name; a new name needs a path.
 * - Defaults, as Go's net/http/pprof: allocs, block, goroutine, heap, mutex,
 *   threadcreate at /debug/pprof/<name>, and cpu at /debug/pprof/profile
 *   with ?seconds=S (pd_config_default_cpu_seconds).
 * - CPU seconds rule. With the job's timeout T, margin
 *   M = max(1s, ceil(T/10)) (time for the target to encode and send the
 *   profile), S = max(1, floor((T - M) / 1s)). So the profile window plus the
 *   margin fits inside the timeout, hence inside the interval: 10s -> 9,
 *   5s -> 4, 2s -> 1, 60s -> 54. Go's seconds are whole, so the minimum is 1;
 *   for T < 2s the window cannot fit and the endpoint's own timeout is raised
 *   (next rule); the manager never overlaps two scrapes of one endpoint (a
 *   slot that comes while the previous scrape runs is skipped).
 * - Per-endpoint timeout (pd_pprof_endpoint.timeout_ms): for seconds S > 0,
 *   max(T, S*1000 + max(1000, S*100)) ms — a CPU scrape must be allowed to
 *   last the profile window plus a margin; else T. An explicit seconds over
 *   the interval is an error.
 * - Any other key is an error; so is a value of the wrong YAML type.
 */
#ifndef PD_SCRAPE_CONFIG_H
#define PD_SCRAPE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/error.h"
#include "base/labels.h"
#include "base/relabel.h"

/* Which project's file this is, from its keys (rules in the comment
 * above). Decides defaults and the timeout-vs-interval rule. */
typedef enum {
    PD_DIALECT_PROFD,
    PD_DIALECT_PROMETHEUS,
    PD_DIALECT_PARCA,
    PD_DIALECT_CONPROF,
} pd_config_dialect;

const char *pd_config_dialect_name(pd_config_dialect d);

/* HTTP client options of a job (Prometheus' common HTTPClientConfig). File
 * paths are absolute (relative ones are resolved against the config file's
 * directory) and read at each scrape, as Prometheus does. NULL = unset. */
typedef struct pd_scrape_client {
    char *basic_username, *basic_password, *basic_password_file;
    char *auth_type; /* Authorization scheme ("Bearer" by default) when credentials are set */
    char *auth_credentials, *auth_credentials_file;
    char *ca_file, *cert_file, *key_file, *server_name;
    bool insecure_skip_verify;
    int tls_min_version; /* 0 = libcurl's default; 10, 11, 12, 13 = TLS 1.0..1.3 */
    char *proxy_url;
    bool follow_redirects; /* default true */
    bool enable_http2;     /* default true */
    /* oauth2 (client credentials grant, client_oauth2.c): token_url set = on.
     * scopes space-joined; params the endpoint_params as an
     * application/x-www-form-urlencoded tail ("&k=v..."), NULL = none. */
    char *oauth2_token_url, *oauth2_client_id, *oauth2_client_secret, *oauth2_client_secret_file,
        *oauth2_scopes, *oauth2_params;
} pd_scrape_client;

/* Deep copy; 0 or PD_ENOMEM (dst left empty). */
int pd_scrape_client_copy(pd_scrape_client *dst, const pd_scrape_client *src);
void pd_scrape_client_release(pd_scrape_client *c);

typedef struct pd_pprof_endpoint {
    char *name; /* profile type, becomes __name__ (e.g. "heap", "cpu") */
    char *path; /* URL path, e.g. "/debug/pprof/heap" */
    bool enabled;
    int64_t seconds;         /* >0: add ?seconds=N (cpu); 0: none */
    bool delta;              /* delta profile: seconds defaults to the interval (see above) */
    int64_t timeout_ms;      /* effective timeout of this endpoint's scrapes (rule above) */
    char *keep_sample_types; /* Parca's keep_sample_type: "type\tunit\n" per entry (unit
                                may be empty: any), NULL = keep all */
} pd_pprof_endpoint;

/* One query parameter from `params` (a list value gives one entry per item). */
typedef struct pd_scrape_param {
    char *name;
    char *value;
} pd_scrape_param;

typedef struct pd_static_config {
    char **targets; /* "host:port" */
    size_t n_targets;
    pd_labels labels;
} pd_static_config;

/* One service discovery of a job: file_sd_configs or http_sd_configs
 * (Prometheus' keys: files + refresh_interval default 5m; url +
 * refresh_interval default 60s). The targets they find are scraped as
 * static_configs targets are, with their group's labels and __meta_filepath,
 * __meta_url or __meta_dns_* (manager.h, sd.c). dns_sd_configs: names, type
 * (SRV, A, AAAA), port, refresh_interval (30s). */
typedef enum { PD_SD_FILE, PD_SD_HTTP, PD_SD_DNS, PD_SD_K8S } pd_sd_kind;
/* kubernetes_sd_configs roles (sd_kubernetes.h) */
typedef enum {
    PD_K8S_POD,
    PD_K8S_SERVICE,
    PD_K8S_ENDPOINTS,
    PD_K8S_NODE,
    PD_K8S_ENDPOINTSLICE, /* discovery.k8s.io/v1 EndpointSlices */
    PD_K8S_INGRESS,       /* networking.k8s.io/v1 Ingresses */
} pd_k8s_role;
#define PD_K8S_N_ROLES 6
/* One kubernetes_sd_configs selectors entry: label and field selectors
 * passed to the API server's list and watch of that role's objects. */
typedef struct pd_k8s_selector {
    pd_k8s_role role;
    char *label, *field; /* NULL = none */
} pd_k8s_selector;
typedef struct pd_sd_config {
    pd_sd_kind kind;
    char **files; /* PD_SD_FILE: glob patterns (absolute) ending in .json, .yml or .yaml;
                     PD_SD_DNS: the names to query */
    size_t n_files;
    char *url;               /* PD_SD_HTTP: http:// or https:// */
    int dns_type;            /* PD_SD_DNS: ns_t_srv (default), ns_t_a, ns_t_aaaa */
    int port;                /* PD_SD_DNS: for A/AAAA (required there), 0 for SRV */
    int64_t refresh_ms;      /* default 5m (file), 60s (http), 30s (dns) */
    pd_scrape_client client; /* PD_SD_HTTP, PD_SD_K8S: HTTP client options (auth, TLS) */
    /* PD_SD_K8S (kubernetes_sd_configs): role, api_server (NULL: kubeconfig_file
     * or in-cluster), kubeconfig_file (absolute), namespaces.names in files/n_files
     * (none: all namespaces), namespaces.own_namespace, selectors. */
    pd_k8s_role role;
    char *api_server, *kubeconfig_file;
    bool own_namespace;
    pd_k8s_selector *selectors;
    size_t n_selectors;
} pd_sd_config;

/* adaptive_capture of a job (issue 18; parsed by config_adaptive.c, used by
 * adaptive.c). Off unless the job has the block (enabled defaults to true
 * inside it). Keys and defaults:
 *   enabled: bool (true)
 *   scrape_interval: duration (1s), the burst interval
 *   profiles: [names] (heap, memory, goroutine): the job's pprof endpoints
 *       scraped at that interval during a burst
 *   heap_growth_bytes_per_minute: size (unset = off)
 *   heap_growth_percent_per_minute: number > 0 (unset = off)
 *   growth_window: duration (1m): the growth is measured between the newest
 *       heap profile and the oldest one of the target not older than this
 *   heap_limit: size (unset = off) and limit_fraction: number in (0, 1] (0.8):
 *       a burst starts when heap in use >= fraction x limit
 *   max_duration: duration (5m), max_targets: int >= 1 (5),
 *   byte_budget_per_minute: size (64MiB, 0 = no budget)
 *   alert_labels: map alert label -> target label ({job: job, instance: instance})
 * Heap in use = the sum of the inuse_space sample type of a scraped profile
 * (Go's heap profile). */
typedef struct pd_adaptive_config {
    bool enabled;
    int64_t interval_ms;
    char **profiles;
    size_t n_profiles;
    uint64_t growth_bytes_per_min; /* 0 = off */
    double growth_percent_per_min; /* 0 = off */
    int64_t growth_window_ms;
    uint64_t heap_limit_bytes; /* 0 = off */
    double limit_fraction;
    int64_t max_duration_ms;
    int64_t max_targets;
    uint64_t byte_budget_per_min; /* 0 = none */
    pd_labels alert_labels;       /* alert label name -> target label name */
} pd_adaptive_config;

/* Deep copy (0 or PD_ENOMEM, dst left empty) and release. */
int pd_adaptive_config_copy(pd_adaptive_config *dst, const pd_adaptive_config *src);
void pd_adaptive_config_release(pd_adaptive_config *a);

typedef struct pd_scrape_job {
    char *job_name;
    int64_t interval_ms, timeout_ms;
    char *scheme;           /* "http" or "https" */
    pd_labels params;       /* extra query parameters (first value of each whose name is a
                               valid label name; kept for compatibility, see query) */
    pd_scrape_param *query; /* every parameter in file order (all values): what goes in URLs */
    size_t n_query;
    pd_static_config *static_configs;
    size_t n_static_configs;
    pd_pprof_endpoint *endpoints; /* defaults merged with the job's pprof_config */
    size_t n_endpoints;
    char *metrics_path;     /* __metrics_path__ (default "/metrics"; profiles use their path) */
    bool honor_labels;      /* accepted; pprof bodies carry no target labels to honor */
    bool honor_timestamps;  /* accepted (default true); profiles are stored at scrape start */
    size_t body_size_limit; /* bytes, 0 = only --scrape.max-body-bytes */
    uint64_t keep_dropped_targets; /* dropped targets listed by /api/v1/targets, 0 = all
                                      (Prometheus' keep_dropped_targets; global's by default) */
    pd_scrape_client client;
    pd_relabel_rule *relabel; /* relabel_configs, compiled */
    size_t n_relabel;
    pd_sd_config *sd; /* file_sd_configs, http_sd_configs, dns_sd_configs, kubernetes_sd_configs */
    size_t n_sd;
    pd_adaptive_config adaptive; /* adaptive_capture (enabled false when absent) */
} pd_scrape_job;

typedef struct pd_config {
    int64_t scrape_interval_ms, scrape_timeout_ms;
    uint64_t keep_dropped_targets; /* global.keep_dropped_targets, 0 = all */
    pd_scrape_job *jobs;
    size_t n_jobs;
    pd_config_dialect dialect;
    pd_labels external_labels; /* global.external_labels: added to every stored profile */
    char **warnings;           /* "FILE:LINE:COL: ... ignored: why" (top level, global, jobs) */
    size_t n_warnings;
    char *source; /* the text parsed and its name: the manager parses its own copy */
    size_t source_len;
    char *source_name;
} pd_config;

/* Parses YAML text (name is used in messages, e.g. the file path).
 * out is overwritten. Errors: PD_EPARSE / PD_EINVAL with err
 * "FILE:LINE:COL: message". */
int pd_config_parse(const char *text, size_t len, const char *name, pd_config *out /* OUT */,
                    pd_err *err);
/* Reads and parses a file. Adds -errno for a file that cannot be read. */
int pd_config_load_file(const char *path, pd_config *out /* OUT */, pd_err *err);
/* An empty configuration (no jobs, default intervals). */
void pd_config_init(pd_config *c);
/* Frees everything c holds and leaves it as pd_config_init. */
void pd_config_release(pd_config *c);

/* A size as Prometheus' body_size_limit: digits with an optional B, KB, MB,
 * GB, TB, PB (or KiB, MiB...) suffix, powers of 1024. 0 or PD_EINVAL. */
int pd_config_parse_size(const char *s, size_t *out /* OUT */);

/* `profd check config FILE...` (argv[0] is "check"): prints each file's
 * configuration as understood and its warnings on stdout, errors on
 * stderr. Returns the exit code: 0 all loaded, 2 an error. */
int pd_config_check_main(int argc, char **argv);

/* The CPU seconds rule above: S for a job timeout of timeout_ms (>= 1). */
int64_t pd_config_default_cpu_seconds(int64_t timeout_ms);
/* The per-endpoint timeout rule above, in ms. */
int64_t pd_config_endpoint_timeout_ms(int64_t job_timeout_ms, int64_t seconds);

#endif
