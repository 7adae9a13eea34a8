/*
 * scrape/manager.h — the scrape loop: one thread driving every scrape with
 * libcurl's multi interface (not a thread per target), scrapes spread over
 * the interval by a stable hash of (job, target, profile type), each body
 * decoded, validated and appended to storage with labels __name__, job,
 * instance and the static labels.
 *
 * Health per (target, profile type): up, last scrape time, duration, last
 * error — exposed as JSON for /api/v1/targets and in /metrics
 * (profd_target_up and the other per-target gauges below, and
 * profd_scrapes_total{outcome=...}).
 *
 * Targets: one per (job, static target, enabled endpoint) that the job's
 * relabel_configs keep; labels, URL, interval and timeout as
 * pd__scrape_spec_build (scrape_int.h: Prometheus' PopulateLabels with
 * Parca's __name__/__profile_path__): URL
 * __scheme__://__address__/__profile_path__[?seconds=S][&params...], series
 * labels = the labels left without "__" ones, plus __name__ = profile type
 * and global.external_labels. Targets with the same job, URL, labels and
 * client options are scraped once (Prometheus drops duplicates). A target
 * relabeling leaves unscrapable (no address, bad scheme) is skipped with a
 * warning in the log. Timestamp: the scrape's start, wall-clock ms (the
 * manager's clock: pd_scrape_manager_set_clock). A slot that comes while the
 * previous scrape of the target runs is skipped (counted in
 * profd_scrape_slots_missed_total), except for a target with a profile window
 * (?seconds=: CPU and delta profiles, pd__scrape_catch_up): it runs that one
 * slot as soon as the previous scrape ends, then keeps its schedule. Timeouts:
 * pd_pprof_endpoint.timeout_ms (config.h). Client options (auth, TLS, proxy,
 * redirects, HTTP/2, body_size_limit) come from the job; secret files are
 * read at each scrape (an unreadable one fails the scrape with its error).
 *
 * Metrics (families declared by pd_scrape_manager_new):
 *   profd_scrapes_total{job,profile_type,outcome}  counter; outcome is one of
 *       success, duplicate (the series already has a profile at that
 *       timestamp: nothing stored, target up), error (connection, HTTP
 *       status != 200, storage), timeout, bad_profile (decode/validation
 *       failed), too_large (body over lim->max_body_bytes or a decode cap)
 *   profd_scrape_duration_seconds_total{job,profile_type}  counter, sum of
 *       scrape wall times (mean = this / profd_scrapes_total)
 *   profd_ingested_profiles_total{source="scrape"}, profd_ingested_bytes_total
 *       {source="scrape"}  counters (the push API uses source="push")
 *   profd_scrape_targets  gauge, number of targets
 *   Per target and profile type, labels T = the target's labels without
 *   __name__ (job, instance, static labels) plus profile_type (a static label
 *   named profile_type becomes exported_profile_type), from the target's
 *   first finished scrape on:
 *   profd_target_up{T}  gauge, 1 when the last scrape was a success or a
 *       duplicate, else 0 (Prometheus' `up`, under profd's namespace and per
 *       profile type: why, in manager.c)
 *   profd_scrape_last_duration_seconds{T}  gauge, the last scrape's wall time
 *   profd_scrape_last_success_timestamp_seconds{T}  gauge, Unix seconds of
 *       the last successful scrape's start (absent before the first success)
 *   A reload that drops a target removes its T series, and the
 *   {job,profile_type} counters once no target of that pair is left. A
 *   scrape that finishes after its target was dropped is not counted.
 * Adaptive capture (issue 18): a job with adaptive_capture has bursts of
 * fast scrapes of some profile types, its ends recorded as events, and
 * bursts on Alertmanager alerts: rules, metrics and the events and alerts
 * functions in adaptive.h.
 * Health "lastError" texts: curl's error text (e.g. "Failed to connect to
 * 127.0.0.1 port 1 after 0 ms: Couldn't connect to server", "Operation timed
 * out after ..."), "HTTP 404", "body exceeds N bytes", the decoder's message,
 * or "storage: ...".
 */
#ifndef PD_SCRAPE_MANAGER_H
#define PD_SCRAPE_MANAGER_H

#include "base/buf.h"
#include "base/error.h"
#include "pprof/pprof.h"
#include "scrape/config.h"
#include "storage/storage.h"

typedef struct pd_scrape_manager pd_scrape_manager;

/* Creates a stopped manager that appends into st (borrowed; must outlive the
 * manager). lim: caps for scraped bodies (copied; NULL = defaults).
 * Errors: PD_ENOMEM. */
int pd_scrape_manager_new(pd_storage *st, const pd_pprof_limits *lim,
                          pd_scrape_manager **out /* OUT */, pd_err *err);
/* Replaces the configuration (deep-copied); running scrapes of targets that
 * stay keep their health. Safe while running (reload). Errors: PD_ENOMEM. */
int pd_scrape_manager_apply(pd_scrape_manager *m, const pd_config *cfg, pd_err *err);
/* Starts the scrape thread. Errors: -errno, PD_ENOMEM. */
int pd_scrape_manager_start(pd_scrape_manager *m, pd_err *err);
/* Stops the thread (aborting scrapes in flight) and frees. Removes the
 * targets' series from /metrics, as a reload to no targets would.
 * NULL is a no-op. */
void pd_scrape_manager_free(pd_scrape_manager *m);
/* The time source of a manager's schedule: mono_ms, monotonic ms, says when
 * slots are due (intervals, catch-up runs, burst ends, the next slot after a
 * reload); wall_ms, Unix ms, places the first slot on its grid (t mod
 * interval == the target's offset) and is the timestamp a scraped profile is
 * stored under (and lastScrape, the burst byte budget's minute). Both are
 * called with arg, on the scrape thread and in apply(), under the manager's
 * lock: they must not block nor call back into the manager. What is measured
 * stays on the real clock: lastScrapeDuration and the duration metrics, and
 * the scrape timeouts (libcurl's). */
typedef struct pd_scrape_clock {
    int64_t (*mono_ms)(void *arg);
    int64_t (*wall_ms)(void *arg);
    void *arg;
} pd_scrape_clock;
/* Sets m's clock (copied; NULL = the system's: pd_mono_ns()/1e6 and
 * pd_now_ms(), the default). Call it before the first apply() and start():
 * the targets' slots are placed on the clock of the apply. A test drives the
 * schedule with its own clock: it moves the time, then calls
 * pd_scrape_manager_wake (the scrape thread otherwise sees the new time
 * within a second: it waits at most 1 s of real time between rounds), or
 * steps the loop itself without starting the thread (pd__scrape_round in
 * scrape_int.h). */
void pd_scrape_manager_set_clock(pd_scrape_manager *m, const pd_scrape_clock *c);
/* Wakes the scrape thread so that it looks at the clock and the schedule
 * now (thread-safe; a no-op when the thread is not running). */
void pd_scrape_manager_wake(pd_scrape_manager *m);
/* Appends the targets as JSON, the "data" of /api/v1/targets, in the shape
 * of Prometheus' (web/api/v1 TargetDiscovery, 2.47+ for the counts):
 * {"activeTargets":[{"labels":{...},"discoveredLabels":{...},"scrapePool":job,"scrapeUrl":url,
 *   "profileType":name,"health":"up"|"down"|"unknown","lastError":"",
 *   "lastScrape":ms,"lastScrapeDuration":seconds,
 *   "scrapeInterval":"10s","scrapeTimeout":"10s"}],
 *  "droppedTargets":[{"discoveredLabels":{...},"scrapePool":job,"profileType":name}],
 *  "droppedTargetCounts":{job: n, ...}}
 * labels: the series labels profiles are stored under, __name__ included;
 * discoveredLabels: the labels before relabeling (as Prometheus).
 * lastScrape: Unix ms of the last finished scrape's start, 0 before the
 * first; lastScrapeDuration: seconds (float); lastError: "" when up.
 * Targets in configuration order (job, static config, target, endpoint).
 * droppedTargets: the (target, profile type) pairs relabeling dropped at the
 * last apply or discovery change, per job at most its keep_dropped_targets
 * (0: all); droppedTargetCounts: every job with how many it dropped in all.
 * state (NULL, "" or "any": both; "active"; "dropped"; case-insensitive;
 * anything else: neither, as Prometheus) leaves the other list empty
 * (droppedTargetCounts null without dropped); pool (NULL or "": all) keeps
 * one job's targets.
 * Errors: PD_ENOMEM, PD_ETOOBIG (out's cap). */
int pd_scrape_manager_targets_json(pd_scrape_manager *m, const char *state, const char *pool,
                                   pd_buf *out);

#endif
