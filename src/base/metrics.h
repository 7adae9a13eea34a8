/*
 * base/metrics.h — process-wide counters and gauges exposed at /metrics in
 * the Prometheus text format (version 0.0.4). Thread-safe.
 *
 * A metric is named by its family and an optional label string, e.g.
 *   pd_metrics_add("profd_rejected_input_total", "reason=\"bad_profile\"", 1);
 * Families must be declared once with pd_metrics_describe (HELP and TYPE);
 * an undeclared family is exposed as "untyped".
 */
#ifndef PD_BASE_METRICS_H
#define PD_BASE_METRICS_H

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
/* Appends every family in the text format, families sorted by name.
 * PD_ENOMEM, PD_ETOOBIG. */
int pd_metrics_write(pd_buf *out);
/* Forgets every series (tests). Descriptions are kept. */
void pd_metrics_reset(void);

#endif
