/*
 * base/metrics.h — process-wide counters and gauges exposed at /metrics in
 * the Prometheus text format (version 0.0.4). Thread-safe.
 *
 * A metric is named by its family and an optional label string, e.g.
 *   pd_metrics_add("profd_rejected_input_total", "reason=\"bad_profile\"", 1);
 * Families must be declared once with pd_metrics_describe (HELP and TYPE);
 * an undeclared family is exposed as "untyped".
 *
 * Ownership: every function copies the strings it is given; nothing returned
 * points into the registry. Thread-safety: every function may be called from
 * any thread (one process-wide mutex; lookups are hashed, so the cost of an
 * update does not grow with the number of series). Allocation failures are
 * silent: the update is lost, the registry stays consistent.
 */
#ifndef PD_BASE_METRICS_H
#define PD_BASE_METRICS_H

#include <stddef.h>
#include "base/buf.h"

typedef enum { PD_METRIC_COUNTER, PD_METRIC_GAUGE } pd_metric_kind;

/* Declares a family's HELP text and kind. Idempotent. */
void pd_metrics_describe(const char *family, pd_metric_kind kind, const char *help);
/* Adds v to the series family{labels} (labels: NULL/"" or `k="v",k2="v2"`,
 * already escaped). Creates the series at 0 first. */
void pd_metrics_add(const char *family, const char *labels, double v);
/* Sets a gauge series to v. */
void pd_metrics_set(const char *family, const char *labels, double v);
/* Returns the current value of a series (0 when absent). For tests. */
double pd_metrics_get(const char *family, const char *labels);
/* Returns 1 when the series family{labels} exists, else 0 (tells an absent
 * series from one at 0). */
int pd_metrics_has(const char *family, const char *labels);
/* Removes the series family{labels} (labels compared as exact strings, as
 * given to add/set; NULL = ""), so it is no longer written. Returns 1 when it
 * existed, 0 otherwise. The family's description stays. A later add/set
 * creates the series again at 0: a caller that removes the series of
 * something that went away (a scrape target dropped by a reload) must make
 * sure no late update of it follows. */
int pd_metrics_remove(const char *family, const char *labels);
/* Removes every series of family whose label string is `labels` or begins
 * with `labels` followed by ',' (whole label pairs: job="a" removes
 * {job="a"} and {job="a",x="y"} but not {job="ab"}); labels NULL or ""
 * removes every series of the family. Returns how many were removed. */
size_t pd_metrics_remove_prefix(const char *family, const char *labels);
/* Appends every family in the text format, families sorted by name; a
 * described family with no series yet is written as its HELP and TYPE lines
 * alone (valid text format: the name is there before its first event).
 * PD_ENOMEM, PD_ETOOBIG. */
int pd_metrics_write(pd_buf *out);
/* Forgets every series (tests). Descriptions are kept. */
void pd_metrics_reset(void);

#endif
