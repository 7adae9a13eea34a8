/*
 * scrape/adaptive.h — adaptive capture (issue 18): bursts of fast scrapes of
 * a target's heap and goroutine profiles when its heap climbs, when it nears
 * a known limit, or when Alertmanager says an alert on it fires; the end of
 * a target seen in (or just after) a burst recorded as an event.
 *
 * The configuration is a job's adaptive_capture block (config.h,
 * pd_adaptive_config). The scrape manager (manager.c) runs the bursts: it
 * scrapes the burst's profile types every adaptive_capture.scrape_interval
 * (spread over that interval by the same stable hash as normal scrapes)
 * instead of every scrape_interval, and returns to the normal schedule when
 * the burst ends. Rules (adaptive.c):
 *   - start: reason "growth" (heap in use grew at least
 *     heap_growth_bytes_per_minute or heap_growth_percent_per_minute between
 *     the newest heap profile and the oldest one within growth_window),
 *     "limit" (heap in use >= limit_fraction x heap_limit), "alert"
 *     (pd_scrape_manager_alerts, a firing alert whose labels match).
 *     Refused while the job already has max_targets targets in burst
 *     (profd_adaptive_bursts_refused_total{reason="max_targets"}).
 *   - end: "calm" (a growth/limit burst at least growth_window old whose
 *     target no longer grows nor is over the fraction), "max_duration",
 *     "resolved" (every alert that held it resolved), "target_down" (its
 *     scrape failed to connect or timed out), "reload" (the target left the
 *     configuration).
 *   - byte budget: while the bytes of the job's burst scrapes in the current
 *     wall-clock minute reach byte_budget_per_minute, a burst slot of a
 *     target scraped less than scrape_interval ago is skipped
 *     (profd_adaptive_slots_over_budget_total): the normal cadence holds.
 *
 * Events (kinds burst_started, burst_ended, target_down) are kept in a ring
 * of the last PD_ADAPTIVE_MAX_EVENTS in memory and, after
 * pd_scrape_manager_events_open, in a file beside the storage
 * (events.c, docs/format/events.md) that a restart reads back: a restart
 * keeps them all but a record torn by a crash. target_down is
 * recorded once per down transition of a target in a burst or within twice
 * its scrape_interval after one: its time is the start of the first failed
 * scrape, with the timestamp of the target's last stored profile.
 *
 * Metrics (job = the job name):
 *   profd_adaptive_bursts_started_total{job,reason}  counter
 *   profd_adaptive_bursts_ended_total{job,reason}    counter
 *   profd_adaptive_bursts_refused_total{job,reason="max_targets"} counter
 *   profd_adaptive_targets_in_burst{job}             gauge
 *   profd_adaptive_burst_profiles_total{job,profile_type} counter, profiles
 *       stored by burst scrapes
 *   profd_adaptive_burst_bytes_total{job}            counter
 *   profd_adaptive_slots_over_budget_total{job}      counter
 *   profd_adaptive_events_total{kind}                counter
 *   profd_adaptive_events_file_errors_total, profd_adaptive_events_file_damaged_total
 *       counters: failed appends; files opened with a damaged tail
 *   profd_alerts_received_total{status,matched}      counter (api/alerts.c)
 */
#ifndef PD_SCRAPE_ADAPTIVE_H
#define PD_SCRAPE_ADAPTIVE_H

#include <stdbool.h>
#include <stdint.h>
#include "base/buf.h"
#include "base/error.h"
#include "base/labels.h"
#include "scrape/manager.h"

#define PD_ADAPTIVE_MAX_EVENTS 4096

/* One alert of an Alertmanager webhook message (api/alerts.c reads the
 * message; prometheus/alertmanager notify/webhook Message, template.Alert).
 * All borrowed for the call. */
typedef struct pd_scrape_alert {
    bool firing;             /* status "firing" (else "resolved") */
    const pd_labels *labels; /* the alert's labels */
    const char *key;         /* fingerprint (or any stable id of the alert) */
    int64_t starts_at_ms;    /* startsAt, Unix ms (0 unknown) */
} pd_scrape_alert;

/* Applies n alerts: a firing alert puts every target of an adaptive_capture
 * job whose labels match (each alert label named in the job's alert_labels,
 * at least one present, equals the mapped target label) into a burst
 * (reason "alert", until resolved or max_duration; a firing alert already
 * held, or capped by max_duration, changes nothing); a resolved alert ends
 * the bursts it holds. *matched: targets matched by all alerts. m NULL (no
 * scraping configured): *matched = 0. Thread-safe. 0 or PD_ENOMEM. */
int pd_scrape_manager_alerts(pd_scrape_manager *m, const pd_scrape_alert *alerts, size_t n,
                             size_t *matched /* OUT */);

/* Appends the events with from_ms <= time <= to_ms (kind NULL: all) as a
 * JSON array, oldest first:
 *   {"id":N,"kind":"target_down"|"burst_started"|"burst_ended","time":ms,
 *    "job":"...","labels":{...},"reason":"...","message":"..."
 *    [,"lastProfile":ms,"lastProfileType":"heap","error":"..."]}
 * reason: a start/end reason above, or for target_down "connection refused",
 * "timeout", "connection reset" or "error"; lastProfile (target_down): the
 * target's last stored profile's timestamp, absent when none. m NULL: [].
 * Thread-safe. 0, PD_ENOMEM, PD_ETOOBIG (out's cap). */
/* Keeps the events in the file path (profd: STORAGE/events.log): loads the
 * events it holds (a damaged tail is dropped and logged, a file with a bad
 * header set aside as path.corrupt) and appends each new one, fdatasync'd.
 * Call before pd_scrape_manager_start. Errors (-errno, PD_ENOMEM) name the
 * file; events then stay in memory only. */
int pd_scrape_manager_events_open(pd_scrape_manager *m, const char *path, pd_err *err);

int pd_scrape_manager_events_json(pd_scrape_manager *m, int64_t from_ms, int64_t to_ms,
                                  const char *kind, pd_buf *out);

#endif
