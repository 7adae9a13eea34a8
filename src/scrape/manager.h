/*
 * scrape/manager.h — the scrape loop: one thread driving every scrape with
 * libcurl's multi interface (not a thread per target), scrapes spread over
 * the interval by a stable hash of (job, target, profile type), each body
 * decoded, validated and appended to storage with labels __name__, job,
 * instance and the static labels.
 *
 * Health per (target, profile type): up, last scrape time, duration, last
 * error — exposed as JSON for /api/v1/targets and counted in /metrics
 * (profd_scrapes_total{outcome=...}).
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
/* Stops the thread (aborting scrapes in flight) and frees. NULL is a no-op. */
void pd_scrape_manager_free(pd_scrape_manager *m);
/* Appends the targets as JSON, the "data" of /api/v1/targets:
 * {"activeTargets":[{"labels":{...},"scrapePool":job,"scrapeUrl":url,
 *   "profileType":name,"health":"up"|"down"|"unknown","lastError":"",
 *   "lastScrape":ms,"lastScrapeDuration":seconds}]} */
int pd_scrape_manager_targets_json(pd_scrape_manager *m, pd_buf *out);

#endif
