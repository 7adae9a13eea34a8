/*
 * rules/rules.h — recording rules: profiles become metrics (issue 30,
 * DESIGN.md §2 `rules/`), and the Prometheus remote write that carries them.
 *
 * A *recording rule* turns each profile that arrives into one sample per
 * output series:
 *
 *   recording_rules:
 *     - record: profd_cpu_hot_tagged_nanoseconds   # the metric name
 *       selector: 'cpu{job="app"}'                 # profile type + matchers
 *       sample_type: cpu                           # which value of the samples
 *       function: 'main\.hotTagged'                # optional, regex (anchored)
 *       function_match: total                      # total (stack contains) | self (leaf)
 *       by: [endpoint]                             # series labels or sample labels
 *       labels: {team: checkout}                   # optional, added as they are
 *   recording_rule_files: ['rules/<glob>.yml']      # more files of recording_rules:
 *   remote_write:
 *     - url: http://prometheus:9090/api/v1/write
 *       remote_timeout: 30s
 *       headers: {X-Scope-OrgID: team-a}
 *       basic_auth: {username: u, password: p}     # or password_file
 *       queue_config: {capacity: 100000, max_samples_per_send: 2000,
 *                      min_backoff: 30ms, max_backoff: 5s}
 *
 * The keys live in profd's --config.file beside scrape_configs (the scrape
 * reader, scrape/config.c, leaves them to this module) and are reloaded with
 * it (SIGHUP, POST /-/reload). `profd check config` validates them.
 * remote_write is read only along with recording_rules or
 * recording_rule_files: in a Prometheus file without them it stays ignored
 * (with the scrape reader's warning), as Prometheus' own rule_files are
 * (PromQL rules, not profd's).
 *
 * Evaluation (rules_eval.c): on every profile storage accepted (the storage
 * appender's observer, pd_storage_on_append: scrapes and every push path),
 * each rule whose selector matches the series sums the sample type's values
 * of the samples whose stack passes the function filter, grouped by the `by`
 * labels — a series label when the series has it, else the sample's string
 * label of that key, else absent. One sample per output series at the
 * profile's time. Cumulative sample types (query/delta.c's rule: a series
 * served cumulative, alloc_*, contentions, delay) give the delta against the
 * previous profile of the same input series — the one seen last since profd
 * started, else (after a restart) the one stored before it (a reset — the
 * profile's total below the previous one — counts from 0; the first profile
 * of a series, with nothing stored before it, gives 0). An output series that had a sample
 * from an input series' previous profile and none now gets 0 (the function
 * cost nothing in that window). Two input series feeding one output series
 * at one time: the later sample goes 1 ms after the earlier one (a
 * Prometheus series takes one sample per ms, in order).
 *
 * Output labels: __name__ = record, the rule's labels, then the `by` labels
 * that have a non-empty value. No other label is added.
 *
 * Remote write (remote_write.c): Prometheus remote-write 1.0 — a
 * prometheus.WriteRequest (protobuf, src/rules/remote_write.proto, field
 * numbers of prometheus/prompb) compressed with snappy's block format,
 * POSTed with Content-Encoding: snappy, Content-Type:
 * application/x-protobuf, X-Prometheus-Remote-Write-Version: 0.1.0. Each
 * remote has a bounded in-memory queue and one sender thread: a 2xx counts
 * the batch sent; a 5xx, a 429 or a connection error retries the same batch
 * with exponential backoff (min_backoff doubling up to max_backoff) until it
 * goes through; any other 4xx drops it (failed). A sample that finds the
 * queue full is dropped. /metrics (names as Prometheus' own remote write,
 * with profd_ for prometheus_, labels remote_name and url):
 * profd_remote_storage_samples_total, _failed_samples_total,
 * _retried_samples_total, _dropped_samples_total (queue full or shut down
 * with samples pending), profd_remote_storage_samples_pending.
 *
 * Thread-safety: pd_rules_* functions may be called from any thread.
 */
#ifndef PD_RULES_RULES_H
#define PD_RULES_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/labels.h"
#include "pprof/pprof.h"
#include "storage/storage.h"

/* Most rules in one configuration (with its rule files), and most `by`
 * labels of one rule; output series a rule keeps state for. */
#define PD_RULES_MAX 1000
#define PD_RULES_MAX_BY 16
#define PD_RULES_MAX_SERIES 100000

typedef enum { PD_RULE_FN_TOTAL = 0, PD_RULE_FN_SELF = 1 } pd_rule_fn_match;

typedef struct pd_rule {
    char *record;   /* metric name, [a-zA-Z_:][a-zA-Z0-9_:]* */
    char *selector; /* as written */
    pd_matcher *ms; /* parsed (query/selector.c), n_ms of them */
    size_t n_ms;
    char *sample_type; /* e.g. "cpu", "alloc_space" */
    char *function;    /* regex over function names, or NULL (every sample) */
    pd_matcher fn;     /* compiled function (PD_MATCH_RE, anchored) when function */
    pd_rule_fn_match fn_match;
    char **by; /* n_by label names */
    size_t n_by;
    pd_labels labels; /* static labels added to the output */
    char *source;     /* "FILE:LINE" of the rule, for messages */
} pd_rule;

typedef struct pd_remote_write_config {
    char *name; /* remote_name label: `name:` or the first 6 hex of the URL's hash */
    char *url;
    int64_t timeout_ms;          /* remote_timeout, default 30 s */
    size_t capacity;             /* queued samples, default 100000 */
    size_t max_samples_per_send; /* default 2000 */
    int64_t min_backoff_ms;      /* default 30 */
    int64_t max_backoff_ms;      /* default 5000 */
    char **headers;              /* n_headers "Name: value" lines */
    size_t n_headers;
    char *username, *password; /* basic_auth, or NULL */
} pd_remote_write_config;

typedef struct pd_rules_config {
    pd_rule *rules;
    size_t n_rules;
    pd_remote_write_config *remotes;
    size_t n_remotes;
    char **warnings; /* "FILE:LINE:COL: KEY ignored: why" */
    size_t n_warnings;
} pd_rules_config;

/* Frees what one rule holds and zeroes it. */
void pd_rule_release(pd_rule *r);

void pd_rules_config_init(pd_rules_config *c);
void pd_rules_config_release(pd_rules_config *c);

/* Reads recording_rules, recording_rule_files and remote_write of the YAML text (other
 * top-level keys are the scrape reader's and are skipped). name is used in
 * messages and is the directory recording_rule_files patterns are relative to. out is
 * overwritten. Errors: PD_EPARSE / PD_EINVAL with err "FILE:LINE:COL:
 * message" (a rule file's own name when the error is in it), -errno for a
 * rule file that cannot be read, PD_ENOMEM. */
int pd_rules_config_parse(const char *text, size_t len, const char *name,
                          pd_rules_config *out /* OUT */, pd_err *err);
/* Reads the file and pd_rules_config_parse's it. */
int pd_rules_config_load_file(const char *path, pd_rules_config *out /* OUT */, pd_err *err);
/* Prints what the rules and remotes of a loaded configuration mean (for
 * `profd check config`), one line each, and the warnings. */
void pd_rules_config_print(const pd_rules_config *c, FILE *out);

typedef struct pd_rules pd_rules;

/* A rules engine with no rules and no remotes. PD_ENOMEM. */
int pd_rules_new(pd_storage *st, pd_rules **out /* OUT */, pd_err *err);
/* Replaces the rules and remotes by cfg's (which is emptied: its contents
 * move into r). The state of a rule whose record, selector, sample type,
 * function and by are unchanged is kept; a remote whose URL and options are
 * unchanged keeps its queue; a removed remote stops (samples still queued
 * are counted dropped). 0 or PD_ENOMEM. */
int pd_rules_apply(pd_rules *r, pd_rules_config *cfg, pd_err *err);
/* The observer to give pd_storage_on_append (ctx: the pd_rules). */
void pd_rules_observe(void *ctx, const pd_labels *labels, int64_t ts_ms, const pd_profile *profile);
/* Appends GET /api/v1/rules' data (Prometheus' shape): {"groups":[{"name":
 * "recording_rules","file":..., "rules":[{"name","query","labels","health":
 * "ok"|"err"|"unknown","lastError","evaluations","samples",
 * "lastEvaluation" (RFC 3339 or null),"evaluationTime" (s),"type":
 * "recording", "sampleType","function","functionMatch","by"}]}]}.
 * PD_ENOMEM / PD_ETOOBIG (out's cap). */
int pd_rules_write_json(pd_rules *r, pd_buf *out);
/* Stops the senders (pending samples counted dropped) and frees r. NULL ok. */
void pd_rules_free(pd_rules *r);

/* ---- remote write (remote_write.c) ---- */

typedef struct pd_remote pd_remote;

/* Starts a remote's sender thread. cfg is copied. PD_ENOMEM, -errno. */
int pd_remote_start(const pd_remote_write_config *cfg, pd_remote **out /* OUT */, pd_err *err);
/* Queues one sample of the series `labels` (sorted by name, __name__
 * first) — dropped and counted when the queue is full. */
void pd_remote_enqueue(pd_remote *rm, const pd_labels *labels, int64_t ts_ms, double value);
/* Samples queued or in the batch being sent. */
size_t pd_remote_pending(pd_remote *rm);
/* Stops the thread (an attempt under way finishes or times out); pending
 * samples are counted dropped. NULL ok. */
void pd_remote_stop(pd_remote *rm);
/* The WriteRequest body of n samples (labels[i], ts[i], v[i]) before
 * compression, samples of one label set grouped into one TimeSeries in
 * their order. For tests and the sender. PD_ENOMEM. */
int pd_remote_encode(const pd_labels *const *labels, const int64_t *ts, const double *v, size_t n,
                     pd_buf *out);

#endif
