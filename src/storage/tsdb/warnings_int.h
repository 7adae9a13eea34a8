/*
 * storage/tsdb/warnings_int.h — adding to the calling thread's warning
 * collector (storage.h: pd_storage_warnings_begin). Private to src/storage.
 */
#ifndef PD_STORAGE_TSDB_WARNINGS_INT_H
#define PD_STORAGE_TSDB_WARNINGS_INT_H

#if defined(__GNUC__)
#define PD_WARN_PRINTF __attribute__((format(printf, 1, 2)))
#else
#define PD_WARN_PRINTF
#endif

/* Formats a message (cut at PD_STORAGE_WARNING_BYTES - 1 bytes) and adds it
 * to the calling thread's collector, if one is active; an identical message
 * already there is not added again; past PD_STORAGE_MAX_WARNINGS it only
 * counts as dropped. Never fails (out of memory: counted as dropped). */
void pd__storage_warn(const char *fmt, ...) PD_WARN_PRINTF;

#endif
