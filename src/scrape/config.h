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
} pd_pprof_endpoint;

typedef struct pd_static_config {
    char **targets; /* "host:port" */
    size_t n_targets;
    pd_labels labels;
} pd_static_config;

typedef struct pd_scrape_job {
    char *job_name;
    int64_t interval_ms, timeout_ms;
    char *scheme; /* "http" or "https" */
    pd_labels params; /* extra query parameters (first value of each) */
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
void pd_config_release(pd_config *c);

#endif
