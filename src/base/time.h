/*
 * base/time.h — clocks, Prometheus durations and RFC 3339 times.
 * All wall-clock times in profd are int64 Unix milliseconds unless named _ns.
 */
#ifndef PD_BASE_TIME_H
#define PD_BASE_TIME_H

#include <stdint.h>
#include "base/error.h"

/* Wall clock, Unix milliseconds. */
int64_t pd_now_ms(void);
/* Monotonic clock, nanoseconds (for durations only). */
int64_t pd_mono_ns(void);

/* Parses a Prometheus duration ("1h30m", "15s", "100ms", "2d", "1w", "1y";
 * units ms s m h d w y, each at most once, in descending order) into
 * milliseconds. Returns 0, or PD_EPARSE with err naming the text. */
int pd_parse_duration(const char *s, int64_t *ms /* OUT */, pd_err *err);

/* Formats ms as a Prometheus duration ("1m30s"). out needs 32 bytes. */
void pd_format_duration(int64_t ms, char *out, size_t cap);

/* Parses an RFC 3339 timestamp ("2026-11-22T14:00:00Z",
 * "2026-11-22T14:00:00.123+01:00") into Unix ms. Returns 0 or PD_EPARSE. */
int pd_parse_rfc3339(const char *s, int64_t *ms /* OUT */);

/* Formats Unix ms as RFC 3339 UTC with milliseconds ("...T14:00:00.123Z").
 * out needs 32 bytes. */
void pd_format_rfc3339(int64_t ms, char *out, size_t cap);

/* Parses a query time parameter as DESIGN.md §5: RFC 3339, or Unix seconds
 * with optional decimals ("1700000000.5"). Returns 0 or PD_EPARSE with err
 * naming the text. */
int pd_parse_time_param(const char *s, int64_t *ms /* OUT */, pd_err *err);

#endif
