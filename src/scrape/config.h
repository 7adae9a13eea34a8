/*
 * scrape/config.h — profd's configuration file: Prometheus-style YAML
 * (DESIGN.md §4), read with libyaml.
 *
 *   global:
 *     scrape_interval: 10s        # default 10s
 *     scrape_timeout: 10s         # default: the interval... capped as Prometheus (must be <= interval)
 *   scrape_configs:
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
 *   path); an empty list is an error. labels: valid label names not starting
 *   with "__"; they may override job and instance (as in Prometheus).
 * - profiling_config.pprof_config.<name>: name matches [a-zA-Z_][a-zA-Z0-9_]*
 *   and becomes __name__. Keys: path (must start with "/"), enabled (bool,
 *   default true for a listed entry), seconds (int >= 0; 0 = no ?seconds=),
 *   delta (bool; accepted for conprof/Parca compatibility and ignored: the
 *   profile is stored as served). Entries merge over the defaults by name;
 *   a new name needs a path.
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

typedef struct pd_pprof_endpoint {
    char *name;      /* profile type, becomes __name__ (e.g. "heap", "cpu") */
    char *path;      /* URL path, e.g. "/debug/pprof/heap" */
    bool enabled;
    int64_t seconds; /* >0: add ?seconds=N (cpu); 0: none */
    bool delta;      /* as configured; informational (see above) */
    int64_t timeout_ms; /* effective timeout of this endpoint's scrapes (rule above) */
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

typedef struct pd_scrape_job {
    char *job_name;
    int64_t interval_ms, timeout_ms;
    char *scheme; /* "http" or "https" */
    pd_labels params; /* extra query parameters (first value of each whose name is a
                         valid label name; kept for compatibility, see query) */
    pd_scrape_param *query; /* every parameter in file order (all values): what goes in URLs */
    size_t n_query;
    pd_static_config *static_configs;
    size_t n_static_configs;
    pd_pprof_endpoint *endpoints; /* defaults merged with the job's pprof_config */
    size_t n_endpoints;
} pd_scrape_job;

typedef struct pd_config {
    int64_t scrape_interval_ms, scrape_timeout_ms;
    pd_scrape_job *jobs;
    size_t n_jobs;
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

/* The CPU seconds rule above: S for a job timeout of timeout_ms (>= 1). */
int64_t pd_config_default_cpu_seconds(int64_t timeout_ms);
/* The per-endpoint timeout rule above, in ms. */
int64_t pd_config_endpoint_timeout_ms(int64_t job_timeout_ms, int64_t seconds);

#endif
