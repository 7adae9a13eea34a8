/*
 * scrape/scrape_int.h — internals of the scrape manager shared with its tests.
 */
#ifndef PD_SCRAPE_SCRAPE_INT_H
#define PD_SCRAPE_SCRAPE_INT_H

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

/* Test hook, NULL outside tests: called on the loop thread by every finished
 * scrape after its body was decoded and stored and before its health and
 * metrics are recorded, with the target's URL — the window in which a reload
 * can drop the target. Set it only while no manager runs. */
extern void (*pd__scrape_before_record)(const char *url);

#endif
