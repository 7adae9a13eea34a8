/*
 * ingest/jfr.h — Java Flight Recorder (JFR) recordings into pprof profiles,
 * for Pyroscope's /ingest?format=jfr (what the Pyroscope Java agent, i.e.
 * async-profiler, and the JDK's own -XX:StartFlightRecording write).
 *
 * Format (JFR 2.x, all integers big-endian): a file is one or more chunks;
 * each chunk starts with a 68-byte header ("FLR\0", major/minor version,
 * chunk size, constant-pool offset, metadata offset, start nanos, duration
 * nanos, start ticks, ticks per second, features — bit 0 set means integers
 * are LEB128-style compressed, up to 9 bytes for a long). Then events, each
 * "size, type id, fields". Type 0 is the metadata event (a string table and
 * an element tree of class descriptors with their fields); type 1 is a
 * constant-pool event (pools of id -> value per class; the header's offset
 * names the last one, each points back to the previous with a relative
 * delta, 0 ending the chain). Fields marked constantPool hold an id into
 * their class's pool; other fields are inline (compound classes field by
 * field, arrays as count then elements; strings are tagged: null, empty,
 * pool reference, UTF-8, char array, Latin-1).
 *
 * Events -> profiles (Pyroscope's jfr-parser makes the same ones; one
 * pd_jfr_kind each, stored by /ingest as its own series):
 *   jdk.ExecutionSample                   cpu                cpu/nanoseconds (count * period)
 *   jdk.NativeMethodSample,
 *   profiler.WallClockSample              wall               wall/nanoseconds (count * period)
 *   jdk.ObjectAllocationInNewTLAB         alloc_in_new_tlab  alloc_in_new_tlab_objects/count,
 *                                                            alloc_in_new_tlab_bytes/bytes
 * (tlabSize) jdk.ObjectAllocationOutsideTLAB       alloc_outside_tlab
 * alloc_outside_tlab_objects/count, alloc_outside_tlab_bytes/bytes (allocationSize)
 *   jdk.ObjectAllocationSample            alloc_sample       alloc_sample_objects/count,
 *                                                            alloc_sample_bytes/bytes (weight)
 *   jdk.JavaMonitorEnter                  mutex              contentions/count, delay/nanoseconds
 *   jdk.ThreadPark                        block              contentions/count, delay/nanoseconds
 *   profiler.LiveObject                   live               live/count
 * Period types are jfr-parser's (cpu/nanoseconds, wall/nanoseconds,
 * space/bytes for the three allocation kinds, mutex/count, block/count,
 * objects/count), so the querier names each sample type by Pyroscope's
 * profile type ID (api/querier_int.h: memory:alloc_in_new_tlab_bytes:bytes:
 * space:bytes, mutex:contentions:count:mutex:count, ...).
 *
 * Delay unit. The duration of jdk.JavaMonitorEnter and jdk.ThreadPark is
 * a Timespan in ticks (the metadata's @Timespan("TICKS")); profd divides it
 * by the chunk header's ticks per second, so "delay nanoseconds" is
 * nanoseconds and equals what `jfr print` shows. grafana/jfr-parser
 * (pprof/parser.go at 1d06ce3: values[1] = JavaMonitorEnter.Duration,
 * ThreadPark.Duration) stores the raw ticks under the same
 * delay/nanoseconds name, so Pyroscope's delay of one recording is
 * ticksPerSecond / 1e9 times profd's: on HotSpot, which counts ticks with
 * the invariant TSC on x86-64 (a 2.8 GHz TSC: 2.8e9 ticks per second),
 * 2.8x; where the JVM's ticks are nanoseconds (ticksPerSecond 1e9), equal.
 * Other durations (event start times) are converted the same way.
 * Frames are named as Pyroscope names Java frames, "pkg/Class.method"
 * (the JVM's internal class name, '.', the method name); a location is one
 * (method, line number). A truncated stack trace gets a root frame
 * "[truncated]". A sample with a contextId field (async-profiler) gets the
 * labels the caller's context callback gives for that id.
 *
 * Errors name the chunk and the byte offset in the input ("chunk 2 at
 * offset 4096: constant pool offset 99999999 is outside the chunk"). Every
 * count, size and nesting depth read from the input is checked against the
 * input's bounds and against pd_jfr_limits before use; nothing is asserted.
 */
#ifndef PD_INGEST_JFR_H
#define PD_INGEST_JFR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/error.h"
#include "pprof/pprof.h"

typedef enum pd_jfr_kind {
    PD_JFR_CPU = 0,
    PD_JFR_WALL,
    PD_JFR_ALLOC_TLAB,
    PD_JFR_ALLOC_OUTSIDE,
    PD_JFR_ALLOC_SAMPLE,
    PD_JFR_MUTEX,
    PD_JFR_BLOCK,
    PD_JFR_LIVE,
    PD_JFR_N_KINDS
} pd_jfr_kind;

/* Caps against hostile input; 0 fields mean the defaults. */
typedef struct pd_jfr_limits {
    size_t max_input_bytes;  /* whole (decompressed) recording; default 512 MiB */
    size_t max_chunks;       /* default 4,096 */
    size_t max_classes;      /* metadata classes per chunk; default 100,000 */
    size_t max_fields;       /* metadata fields per chunk; default 1,000,000 */
    size_t max_meta_strings; /* metadata string table; default 1,000,000 */
    size_t max_pool_entries; /* constant-pool entries per chunk; default 20,000,000 */
    size_t max_events;       /* events converted over the input; default 50,000,000 */
    size_t max_depth;        /* nesting of metadata elements and inline values; default 32 */
    size_t max_stack_depth;  /* frames kept per stack (deeper ones are cut at the root); default
                                4,096 */
    pd_pprof_limits pprof;   /* for each built profile */
} pd_jfr_limits;

pd_jfr_limits pd_jfr_limits_default(void);

/* Labels of an async-profiler context id: sets *kv to n_pairs*2 strings
 * (name, value, name, value...), borrowed until the conversion returns.
 * Returns the number of pairs (0: none). */
typedef size_t (*pd_jfr_context_fn)(void *ctx, int64_t context_id, const char *const **kv);

typedef struct pd_jfr_opts {
    int64_t period_nanos;      /* cpu/wall: nanoseconds per sample; 0: 10 ms (100 Hz) */
    pd_jfr_context_fn context; /* NULL: contextId ignored */
    void *context_arg;
    pd_jfr_limits lim;
} pd_jfr_opts;

/* The profiles made from one recording; have[k] says profile[k] is set. */
typedef struct pd_jfr_result {
    pd_profile profile[PD_JFR_N_KINDS];
    bool have[PD_JFR_N_KINDS];
    size_t n_chunks; /* chunks read */
    size_t n_events; /* events converted into samples */
} pd_jfr_result;

/* The series name of a kind: "cpu", "wall", "alloc_in_new_tlab",
 * "alloc_outside_tlab", "alloc_sample", "mutex", "block", "live". */
const char *pd_jfr_kind_name(pd_jfr_kind k);

/* True when data starts with a JFR chunk magic "FLR\0". */
bool pd_jfr_is_jfr(const uint8_t *data, size_t len);

/* Converts the recording data[0..len) (not compressed; see pd_gunzip) into
 * *out: one profile per kind that has at least one event (each validated,
 * release with pd_jfr_result_release; time_nanos and duration_nanos from
 * the chunk headers). opts may be NULL for the defaults. On failure *out
 * holds nothing to free and err names the chunk and offset.
 * Errors: PD_EPARSE (malformed recording), PD_ETOOBIG (a cap, named),
 * PD_ENOMEM. A recording without any of the events above gives a result
 * with no profile (not an error). */
int pd_jfr_to_pprof(const uint8_t *data, size_t len, const pd_jfr_opts *opts,
                    pd_jfr_result *out /* OUT */, pd_err *err);

/* Releases the profiles of r. */
void pd_jfr_result_release(pd_jfr_result *r);

#endif
