/*
 * storage/tsdb_names.h — force-included (-include) into every source of
 * storage/tsdb/ by src/storage/CMakeLists.txt, never included by hand.
 *
 * storage.h is one interface with two backends (the embedded TSDB and
 * ClickHouse). The TSDB's sources define the storage.h entry points under
 * their public names; this header renames them, inside the TSDB's sources
 * only, to pd__tsdb_* (and its handle type to pd__tsdb_storage), so that
 * storage.c can define the public names as the dispatch to the backend a
 * store was opened with — without a change to the TSDB's own files.
 * Functions that are not per-store (options, warnings collector, result
 * releases) keep their public names: both backends use them.
 */
#ifndef PD_STORAGE_TSDB_NAMES_H
#define PD_STORAGE_TSDB_NAMES_H

#define pd_storage pd__tsdb_storage
#define pd_storage_open pd__tsdb_open
#define pd_storage_close pd__tsdb_close
#define pd_storage_append pd__tsdb_append
#define pd_storage_append_shift pd__tsdb_append_shift
#define pd_storage_select pd__tsdb_select
#define pd_storage_select_overlapping pd__tsdb_select_overlapping
#define pd_storage_read_points pd__tsdb_read_points
#define pd_storage_read_type_runs pd__tsdb_read_type_runs
#define pd_storage_read_profile pd__tsdb_read_profile
#define pd_storage_aggregate pd__tsdb_aggregate
#define pd_storage_aggregate_delta pd__tsdb_aggregate_delta
#define pd_storage_aggregate_filtered pd__tsdb_aggregate_filtered
#define pd_storage_read_point_before pd__tsdb_read_point_before
#define pd_storage_maintain pd__tsdb_maintain
#define pd_storage_check_time pd__tsdb_check_time_store
#define pd_storage_stats_get pd__tsdb_stats_get
#define pd_storage_ready pd__tsdb_ready

#endif
