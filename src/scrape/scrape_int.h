/*
 * scrape/scrape_int.h — internals of the scrape manager shared with its tests.
 */
#ifndef PD_SCRAPE_SCRAPE_INT_H
#define PD_SCRAPE_SCRAPE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include "base/buf.h"
#include "scrape/config.h"

/* The offset (ms, in [0, interval_ms)) of a target inside its interval:
 * xxh3-64 of job, a 0 byte, and the URL, modulo the interval. Stable across
 * runs and machines, so restarts keep the spread (as Prometheus' offsets). */
int64_t pd__scrape_offset_ms(const char *job, const char *url, int64_t interval_ms);

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
    bool keep;            /* false: relabeling dropped the target (nothing else set) */
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

/* Test hook, NULL outside tests: called on the loop thread by every finished
 * scrape after its body was decoded and stored and before its health and
 * metrics are recorded, with the target's URL — the window in which a reload
 * can drop the target. Set it only while no manager runs. */
extern void (*pd__scrape_before_record)(const char *url);

#endif
