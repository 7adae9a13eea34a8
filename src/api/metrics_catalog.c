/*
 * api/metrics_catalog.c — every metric family profd exposes at /metrics, in
 * one table: name, type, HELP text, and the label sets created at 0 when
 * profd starts (issue 28: every documented metric is present in the first
 * scrape of a fresh profd, as Prometheus' own registry shows its metrics
 * before their first event).
 *
 * Families whose labels name things that come and go (a job, a target, a
 * profile type, an HTTP handler) have no series until the first of those
 * exists; pd_metrics_write still writes their HELP and TYPE, so the name is
 * in every scrape. Families with a closed set of label values (a refresh
 * mechanism, an event kind) get every value at 0.
 *
 * The modules that update a family also describe it (idempotent; the first
 * description wins, and pd__api_metrics_catalog_init runs first in profd) so
 * that they work alone in unit tests. A family added to the code belongs
 * here too: e2e_operate fails when /metrics of a fresh profd and the
 * documented names (docs/operations.md) differ.
 */
#include "api/api_int.h"

#include <stddef.h>

#include "base/metrics.h"

typedef struct catalog_entry {
    const char *name;
    pd_metric_kind kind;
    const char *help;
    const char *const *zero; /* label sets created at 0 ("" = no labels), NULL-terminated */
} catalog_entry;

static const catalog_entry catalog[] = {
    {"process_cpu_seconds_total", PD_METRIC_COUNTER,
     "Total user and system CPU time spent in seconds.", NULL},
    {"process_open_fds", PD_METRIC_GAUGE, "Number of open file descriptors.", NULL},
    {"process_resident_memory_bytes", PD_METRIC_GAUGE, "Resident memory size in bytes.", NULL},
    {"process_start_time_seconds", PD_METRIC_GAUGE,
     "Start time of the process since unix epoch in seconds.", NULL},
    {"process_virtual_memory_bytes", PD_METRIC_GAUGE, "Virtual memory size in bytes.", NULL},
    {"profd_adaptive_burst_bytes_total", PD_METRIC_COUNTER,
     "Bytes of profiles stored by burst scrapes, by job.", NULL},
    {"profd_adaptive_burst_profiles_total", PD_METRIC_COUNTER,
     "Profiles stored by burst scrapes, by job and profile type.", NULL},
    {"profd_adaptive_bursts_ended_total", PD_METRIC_COUNTER,
     "Adaptive capture bursts ended, by job and reason (calm, max_duration, "
     "resolved, target_down, reload).",
     NULL},
    {"profd_adaptive_bursts_refused_total", PD_METRIC_COUNTER,
     "Bursts not started because the job had max_targets targets in burst.", NULL},
    {"profd_adaptive_bursts_started_total", PD_METRIC_COUNTER,
     "Adaptive capture bursts started, by job and reason (growth, limit, "
     "alert).",
     NULL},
    {"profd_adaptive_events_file_damaged_total", PD_METRIC_COUNTER,
     "Opens of the events file that dropped a damaged tail.", (const char *const[]){"", NULL}},
    {"profd_adaptive_events_file_errors_total", PD_METRIC_COUNTER,
     "Events that could not be appended to the events file (kept in memory).",
     (const char *const[]){"", NULL}},
    {"profd_adaptive_events_total", PD_METRIC_COUNTER, "Events recorded (/api/v1/events), by kind.",
     (const char *const[]){"kind=\"burst_started\"", "kind=\"burst_ended\"", "kind=\"target_down\"",
                           NULL}},
    {"profd_adaptive_slots_over_budget_total", PD_METRIC_COUNTER,
     "Burst scrapes skipped because the job's byte_budget_per_minute was "
     "spent.",
     NULL},
    {"profd_adaptive_targets_in_burst", PD_METRIC_GAUGE,
     "Targets of the job in an adaptive capture burst now.", NULL},
    /* issue 30: recording rules and their remote write (rules/rules.h) */
    {"profd_rule_evaluations_total", PD_METRIC_COUNTER,
     "Profiles evaluated by recording rules (one per rule and matching profile).", NULL},
    {"profd_rule_evaluation_failures_total", PD_METRIC_COUNTER,
     "Recording rule evaluations that failed (see GET /api/v1/rules' lastError).", NULL},
    {"profd_rule_samples_total", PD_METRIC_COUNTER,
     "Samples recording rules produced (queued for every remote_write).", NULL},
    {"profd_remote_storage_samples_total", PD_METRIC_COUNTER,
     "Samples of recording rules sent to remote storage (2xx).", NULL},
    {"profd_remote_storage_failed_samples_total", PD_METRIC_COUNTER,
     "Samples the remote storage refused with a 4xx other than 429 (not retried, dropped).", NULL},
    {"profd_remote_storage_retried_samples_total", PD_METRIC_COUNTER,
     "Samples sent again after a 5xx, a 429 or a connection error.", NULL},
    {"profd_remote_storage_dropped_samples_total", PD_METRIC_COUNTER,
     "Samples dropped before sending: the queue was full, or profd stopped or removed the "
     "remote with them queued.",
     NULL},
    {"profd_remote_storage_samples_pending", PD_METRIC_GAUGE,
     "Samples queued for remote storage, the batch being sent included.", NULL},
    {"profd_alerts_received_total", PD_METRIC_COUNTER,
     "Alertmanager alerts received at /api/v1/alerts, by status (firing, "
     "resolved) and whether they matched an adaptive target.",
     (const char *const[]){
         "status=\"firing\",matched=\"true\"", "status=\"firing\",matched=\"false\"",
         "status=\"resolved\",matched=\"true\"", "status=\"resolved\",matched=\"false\"", NULL}},
    {"profd_clickhouse_agg_write_errors_total", PD_METRIC_COUNTER,
     "aggs_v1 INSERTs that failed, their sums dropped (merges read "
     "their buckets from the samples rows).",
     NULL},
    {"profd_clickhouse_agg_pending_buckets", PD_METRIC_GAUGE,
     "Series-buckets (10 minutes) whose aggs_v1 sums wait in memory "
     "(--clickhouse.agg-flush-idle).",
     NULL},
    {"profd_clickhouse_agg_pending_bytes", PD_METRIC_GAUGE, "Bytes those pending sums hold.", NULL},
    {"profd_clickhouse_agg_flushed_buckets_total", PD_METRIC_COUNTER,
     "Series-buckets whose pending sums were sent to aggs_v1, by why: "
     "idle, memory (the pending cap) or close.",
     (const char *const[]){"reason=\"idle\"", "reason=\"memory\"", "reason=\"close\"", NULL}},
    {"profd_clickhouse_merge_buckets_total", PD_METRIC_COUNTER,
     "Series-buckets wholly inside merges, by where their sums were read: "
     "aggregate (aggs_v1) or raw (the samples rows: no or a mismatched "
     "reconciliation row); aggregate_cut: buckets cut by a merge's range "
     "whose profiles all lie inside it, read from aggs_v1.",
     (const char *const[]){"path=\"aggregate\"", "path=\"raw\"", "path=\"aggregate_cut\"", NULL}},
    {"profd_clickhouse_merge_header_profiles_total", PD_METRIC_COUNTER,
     "Profiles whose headers merges folded, by how they were read: summary "
     "(one row per series-bucket, exact: uniform headers, no zero period or "
     "time) or rows (one per profile).",
     (const char *const[]){"path=\"summary\"", "path=\"rows\"", NULL}},
    {"profd_clickhouse_cache_lookups_total", PD_METRIC_COUNTER,
     "Lookups in the read cache (--clickhouse.cache-size) by cache (rows: "
     "stack, location and sample-type rows by key; merge: a merge's "
     "pre-summed whole buckets) and result (hit or miss).",
     (const char *const[]){"cache=\"rows\",result=\"hit\"", "cache=\"rows\",result=\"miss\"",
                           "cache=\"merge\",result=\"hit\"", "cache=\"merge\",result=\"miss\"",
                           NULL}},
    {"profd_clickhouse_cache_bytes", PD_METRIC_GAUGE,
     "Bytes held by the read cache, by cache (rows or merge).",
     (const char *const[]){"cache=\"rows\"", "cache=\"merge\"", NULL}},
    {"profd_clickhouse_batch_seconds_sum", PD_METRIC_COUNTER,
     "Seconds spent writing insert batches.", NULL},
    {"profd_clickhouse_batches_total", PD_METRIC_COUNTER, "Insert batches written to ClickHouse.",
     NULL},
    {"profd_clickhouse_errors_total", PD_METRIC_COUNTER,
     "Failed HTTP requests to ClickHouse (each attempt).", NULL},
    {"profd_clickhouse_exist_checks_total", PD_METRIC_COUNTER,
     "Duplicate checks (SELECTs) sent before insert batches: only "
     "for pushes not newer than their series' last one stored.",
     NULL},
    {"profd_clickhouse_failed_profiles_total", PD_METRIC_COUNTER,
     "Profiles whose insert batch failed (not acknowledged).", NULL},
    {"profd_clickhouse_queued_profiles", PD_METRIC_GAUGE,
     "Profiles in the gathering insert batch: queued, waiting for the "
     "batch in flight or the gathering window.",
     NULL},
    {"profd_clickhouse_inserted_profiles_total", PD_METRIC_COUNTER,
     "Profiles acknowledged by ClickHouse.", NULL},
    {"profd_clickhouse_inserted_rows_total", PD_METRIC_COUNTER,
     "Samples rows sent to ClickHouse in insert batches.", NULL},
    {"profd_http_auth_failures_total", PD_METRIC_COUNTER,
     "Requests and TLS handshakes refused by --web.config.file, by reason.", NULL},
    {"profd_http_cut_off_total", PD_METRIC_COUNTER,
     "Connections closed by the server because a request was not received "
     "within --web.read-timeout, by reason (idle, read_timeout).",
     NULL},
    {"profd_http_keepalive_declined_total", PD_METRIC_COUNTER,
     "Responses sent with Connection: close because 64 or more idle kept-alive "
     "connections were held (the idle budget).",
     NULL},
    {"profd_http_rejected_total", PD_METRIC_COUNTER,
     "HTTP requests refused by the server before any handler ran, by reason.",
     (const char *const[]){"reason=\"connection_limit\"", "reason=\"per_ip_limit\"",
                           "reason=\"bodies_in_flight\"", "reason=\"auth_backoff\"", NULL}},
    {"profd_http_request_body_bytes", PD_METRIC_GAUGE,
     "Bytes of request body buffers held now (the budget: max(64 MiB, 4 x "
     "--scrape.max-body-bytes)).",
     (const char *const[]){"", NULL}},
    {"profd_http_request_duration_seconds_total", PD_METRIC_COUNTER,
     "Time spent answering HTTP requests, by handler.", NULL},
    {"profd_http_requests_total", PD_METRIC_COUNTER,
     "HTTP requests answered, by handler and status code.", NULL},
    {"profd_ingested_bytes_total", PD_METRIC_COUNTER,
     "Bytes of profiles stored as received, by source (scrape or push).", NULL},
    {"profd_ingested_profiles_total", PD_METRIC_COUNTER,
     "Profiles stored, by source (scrape or push).", NULL},
    {"profd_oauth2_token_requests_total", PD_METRIC_COUNTER,
     "OAuth2 client-credentials token requests (scrapes and discovery), by "
     "outcome.",
     (const char *const[]){"outcome=\"success\"", "outcome=\"failure\"", NULL}},
    {"profd_debuginfo_uploads_total", PD_METRIC_COUNTER,
     "Debug files uploaded (POST /api/v1/debuginfo/{build_id}), stored or rejected.",
     (const char *const[]){"result=\"stored\"", "result=\"rejected\"", NULL}},
    {"profd_debuginfod_fetches_total", PD_METRIC_COUNTER,
     "Debug info asked of the DEBUGINFOD_URLS servers by build ID, by result.",
     (const char *const[]){"result=\"found\"", "result=\"missing\"", NULL}},
    {"profd_partial_answers_total", PD_METRIC_COUNTER,
     "Answers that left out damaged stored data (they carry warnings).", NULL},
    {"profd_queries_cancelled_total", PD_METRIC_COUNTER,
     "Queries stopped before their end, by reason: client_gone (the client "
     "closed its connection) or shutdown (SIGINT/SIGTERM).",
     (const char *const[]){"reason=\"client_gone\"", "reason=\"shutdown\"", NULL}},
    {"profd_rejected_input_total", PD_METRIC_COUNTER, "Pushed profiles refused, by reason.", NULL},
    {"profd_symbolize_frames_total", PD_METRIC_COUNTER,
     "Address-only frames of answers named from debug info (result=named) or "
     "shown as binary+offset (result=unnamed).",
     (const char *const[]){"result=\"named\"", "result=\"unnamed\"", NULL}},
    {"profd_symbolize_cache_lookups_total", PD_METRIC_COUNTER,
     "Address-only frames looked up in the per-build-ID results cache: hit "
     "(named without the debug file) or miss.",
     (const char *const[]){"result=\"hit\"", "result=\"miss\"", NULL}},
    {"profd_symbolize_cache_corrupt_total", PD_METRIC_COUNTER,
     "Results cache files found damaged on load, by part: header (nothing "
     "kept, rebuilt) or record (kept up to the bad record, rest rebuilt).",
     (const char *const[]){"part=\"header\"", "part=\"record\"", NULL}},
    {"profd_symbolize_cache_invalidations_total", PD_METRIC_COUNTER,
     "Results caches dropped because their debug info changed, by reason: "
     "upload or source_changed.",
     (const char *const[]){"reason=\"upload\"", "reason=\"source_changed\"", NULL}},
    {"profd_symbolize_cache_full_total", PD_METRIC_COUNTER,
     "Answers not kept because their build ID's results cache file was at its "
     "size cap.",
     (const char *const[]){"", NULL}},
    {"profd_scrape_duration_seconds_total", PD_METRIC_COUNTER,
     "Sum of the wall time of finished scrapes, by job and profile type "
     "(divide by profd_scrapes_total for the mean).",
     NULL},
    {"profd_scrape_last_duration_seconds", PD_METRIC_GAUGE,
     "Wall time of the last finished scrape of the target's profile type.", NULL},
    {"profd_scrape_last_success_timestamp_seconds", PD_METRIC_GAUGE,
     "Unix time of the start of the last successful scrape of the target's "
     "profile type (the stored profile's timestamp).",
     NULL},
    {"profd_scrape_slots_missed_total", PD_METRIC_COUNTER,
     "Scheduled scrapes not made because the previous scrape of the same "
     "target and profile type still ran (a windowed profile's first such "
     "slot runs late instead and is not counted), by job and profile type.",
     NULL},
    {"profd_scrape_store_batches_total", PD_METRIC_COUNTER,
     "Storage calls of the scrape loop's store thread, each holding every "
     "label set of every scrape that ended since the previous call (on "
     "ClickHouse, one batch).",
     (const char *const[]){"", NULL}},
    {"profd_scrape_store_seconds_total", PD_METRIC_COUNTER,
     "Wall time spent in those storage calls (the scrape loop goes on "
     "meanwhile).",
     (const char *const[]){"", NULL}},
    {"profd_scrape_targets", PD_METRIC_GAUGE,
     "Scrape targets configured (one per target and profile type).",
     (const char *const[]){"", NULL}},
    {"profd_scrapes_total", PD_METRIC_COUNTER,
     "Scrapes finished, by job, profile type and outcome (success, error, "
     "timeout, bad_profile, too_large).",
     NULL},
    {"profd_sd_kubernetes_labels_dropped_total", PD_METRIC_COUNTER,
     "Kubernetes labels and annotations left out of discovered targets "
     "(over the label caps).",
     (const char *const[]){"", NULL}},
    {"profd_sd_refresh_failures_total", PD_METRIC_COUNTER,
     "Service discovery refreshes that failed (unreadable or malformed "
     "file, HTTP error, DNS failure), by mechanism; the previous targets "
     "are kept.",
     (const char *const[]){"mechanism=\"file\"", "mechanism=\"http\"", "mechanism=\"dns\"",
                           "mechanism=\"kubernetes\"", NULL}},
    {"profd_storage_blocks", PD_METRIC_GAUGE, "Immutable blocks open.", NULL},
    {"profd_storage_bytes", PD_METRIC_GAUGE, "Bytes of every file under the storage path.", NULL},
    {"profd_storage_compactions_failed_total", PD_METRIC_COUNTER,
     "Compactions that failed; one that could not read a source block "
     "marked it failed (compaction.failed in its meta.json).",
     NULL},
    {"profd_storage_compactions_total", PD_METRIC_COUNTER,
     "Compactions of blocks into a larger block.", NULL},
    {"profd_storage_corruptions_total", PD_METRIC_COUNTER,
     "Corrupt records or segments met in the store's files (skipped or cut "
     "off).",
     NULL},
    {"profd_storage_head_chunk_bytes", PD_METRIC_GAUGE,
     "Bytes of value groups held in memory by the head (raw and "
     "zstd-compressed).",
     NULL},
    {"profd_storage_head_cuts_total", PD_METRIC_COUNTER, "Blocks cut from the head.", NULL},
    {"profd_storage_head_symbol_generations", PD_METRIC_GAUGE,
     "Symbol tables of the head alive: the current one plus those still "
     "used by head profiles from before the last head cut.",
     NULL},
    {"profd_storage_head_symbols", PD_METRIC_GAUGE,
     "Strings, functions, locations and stacks of the head's current symbol "
     "generation.",
     NULL},
    {"profd_storage_head_snapshot_loads_total", PD_METRIC_COUNTER,
     "Head snapshots (PATH/head.snapshot, written at a clean stop) met at "
     "open: result=loaded (its profiles need no WAL read), damaged or stale "
     "(ignored and removed; the head is rebuilt from the WAL).",
     (const char *const[]){"result=\"loaded\"", "result=\"damaged\"", "result=\"stale\"", NULL}},
    {"profd_storage_head_snapshot_writes_total", PD_METRIC_COUNTER,
     "Head snapshots written at a clean stop: result=written or failed "
     "(logged; the next start rebuilds the head from the WAL).",
     (const char *const[]){"result=\"written\"", "result=\"failed\"", NULL}},
    {"profd_storage_head_wal_only_profiles", PD_METRIC_GAUGE,
     "Head profiles replayed from the WAL and not yet decomposed into the "
     "head's value groups (read from the WAL meanwhile).",
     NULL},
    {"profd_storage_max_time_seconds", PD_METRIC_GAUGE,
     "Timestamp of the newest stored profile (0 when empty).", NULL},
    {"profd_storage_merge_wait_seconds_total", PD_METRIC_COUNTER,
     "Time merges waited for a turn (--query.max-merge-concurrency).",
     (const char *const[]){"", NULL}},
    {"profd_storage_merges_waiting", PD_METRIC_GAUGE,
     "Merges waiting for a turn (--query.max-merge-concurrency).", (const char *const[]){"", NULL}},
    {"profd_storage_min_time_seconds", PD_METRIC_GAUGE,
     "Timestamp of the oldest stored profile (0 when empty).", NULL},
    {"profd_storage_profiles", PD_METRIC_GAUGE, "Profiles in the storage.", NULL},
    {"profd_storage_retention_deletes_total", PD_METRIC_COUNTER,
     "Blocks deleted by retention (time or size).", NULL},
    {"profd_storage_series", PD_METRIC_GAUGE, "Series in the storage.", NULL},
    {"profd_storage_wal_bound_waits_total", PD_METRIC_COUNTER,
     "Appends held because the WAL reached its bound under "
     "--storage.retention.size (a quarter of the limit + one segment) while a "
     "head cut ran: result=stored once the checkpoint freed it, "
     "result=refused when it did not within 10 s (503, retry).",
     (const char *const[]){"result=\"stored\"", "result=\"refused\"", NULL}},
    {"profd_storage_wal_truncations_total", PD_METRIC_COUNTER,
     "Times the newest WAL segment was found shorter than what was fsync'd "
     "(PATH/wal/synced): acknowledged records lost to a truncation, not a "
     "torn append.",
     NULL},
    {"profd_target_up", PD_METRIC_GAUGE,
     "1 if the last scrape of the target's profile type succeeded (HTTP "
     "200, a profile that decoded and was stored or already stored), 0 if "
     "not.",
     NULL},
};

void pd__api_metrics_catalog_init(void)
{
    for (size_t i = 0; i < sizeof catalog / sizeof catalog[0]; i++) {
        const catalog_entry *e = &catalog[i];
        pd_metrics_describe(e->name, e->kind, e->help);
        for (size_t k = 0; e->zero && e->zero[k]; k++)
            pd_metrics_add(e->name, e->zero[k], 0);
    }
}
