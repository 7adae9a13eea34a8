/*
 * base/log.h — logfmt lines on stderr, as Prometheus logs:
 *   ts=2026-11-22T14:00:00.123Z level=info msg="scrape failed" target=...
 * Thread-safe (one write(2) per line).
 */
#ifndef PD_BASE_LOG_H
#define PD_BASE_LOG_H

enum { PD_LOG_DEBUG = 0, PD_LOG_INFO = 1, PD_LOG_WARN = 2, PD_LOG_ERROR = 3 };

/* Sets the minimum level from "debug", "info", "warn" or "error".
 * Returns 0, or PD_EINVAL for another name (level unchanged). */
int pd_log_set_level(const char *name);

/* Logs one line at `level` if enabled. `msg` is the human message (quoted as
 * needed); `fmt` (may be NULL) formats further logfmt pairs, e.g.
 * pd_log(PD_LOG_WARN, "wal torn tail", "file=%s offset=%zu", f, off).
 * Values with spaces should be passed through pd_log_quote by the caller. */
void pd_log(int level, const char *msg, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define pd_log_debug(msg, ...) pd_log(PD_LOG_DEBUG, msg, __VA_ARGS__)
#define pd_log_info(msg, ...) pd_log(PD_LOG_INFO, msg, __VA_ARGS__)
#define pd_log_warn(msg, ...) pd_log(PD_LOG_WARN, msg, __VA_ARGS__)
#define pd_log_error(msg, ...) pd_log(PD_LOG_ERROR, msg, __VA_ARGS__)

#endif
