/*
 * ingest/ingest.h — conversions of other profile formats into pprof, for
 * `profd convert`, `profd push` and the push endpoints (Pyroscope /ingest).
 *
 * Formats:
 *   - folded: Brendan Gregg's collapsed stacks, one "frame;frame;frame COUNT"
 *     per line, root first (what stackcollapse-perf.pl, `perf script |
 *     stackcollapse`, Pyroscope's format=folded and `pprof --collapsed` make).
 *   - lines: Pyroscope's format=lines, one "frame;frame;frame" per line, each
 *     line counting 1.
 *   - perf-script: the text of `perf script` after `perf record -g` (see
 *     perf_script.c for the grammar).
 * Each converter reads a whole input held in memory, so one input is either
 * converted entirely or refused (nothing partial); errors name the line
 * ("line 12: count '-3' is negative"). Every cap is in pd_ingest_limits.
 *
 * The result is a pd_profile (pprof/pprof.h) that passes pd_profile_validate;
 * the caller releases it with pd_profile_release. ingest/ never touches
 * storage: a caller that stores the profile hands it to an appender.
 */
#ifndef PD_INGEST_INGEST_H
#define PD_INGEST_INGEST_H

#include <stddef.h>
#include <stdint.h>
#include "base/error.h"
#include "pprof/pprof.h"

typedef enum pd_ingest_format {
    PD_INGEST_FOLDED = 1,
    PD_INGEST_LINES,
    PD_INGEST_PERF_SCRIPT,
} pd_ingest_format;

/* Caps against hostile or runaway input. A field left 0 means its default. */
typedef struct pd_ingest_limits {
    size_t max_input_bytes; /* whole input; default 512 MiB */
    size_t max_line_bytes;  /* one line, without its newline; default 1 MiB */
    size_t max_lines;       /* lines of input; default 50,000,000 */
    size_t max_stack_depth; /* frames in one stack; default 4,096 */
    size_t max_frames;      /* distinct frames (locations) over the input; default 1,000,000 */
    size_t max_samples;     /* distinct (stack, labels) samples; default 1,000,000 */
} pd_ingest_limits;

/* The default caps above. */
pd_ingest_limits pd_ingest_limits_default(void);

/* Options of a conversion. Zero-initialise, then set what you need.
 *
 * Sample types:
 *   folded/lines: with type "cpu" or "wall" (the default is "cpu"), or any
 *     type when sample_rate_hz > 0, the profile gets two sample types,
 *     samples/count and TYPE/nanoseconds, where the second value is
 *     count * period and period = 1e9 / HZ nanoseconds (integer division;
 *     HZ defaults to 100, Pyroscope's default); period_type is
 *     TYPE/nanoseconds. Otherwise one sample type TYPE/UNIT (UNIT defaults
 *     to "count") whose values are the counts, period_type the same, period 1.
 *   perf-script: samples/count (1 per sample), plus the event's period when
 *     the sample headers carry it: cpu-clock and task-clock become
 *     cpu/nanoseconds, any other event EVENT/count. `type`, `unit` and
 *     `sample_rate_hz` are ignored.
 */
typedef struct pd_ingest_opts {
    const char *type;       /* folded/lines: profile type; NULL: "cpu" */
    const char *unit;       /* folded/lines, non-time types: value unit; NULL: "count" */
    int64_t sample_rate_hz; /* folded/lines: sampling rate, Hz; 0: 100 for cpu/wall */
    int64_t time_nanos;     /* profile time_nanos to set (Unix ns); 0: none */
    int64_t duration_nanos; /* profile duration_nanos; 0: none (perf-script: from its timestamps) */
    pd_ingest_limits lim;
} pd_ingest_opts;

/* Parses a format name: "folded" (also "collapsed"), "lines",
 * "perf-script" (also "perf"). Returns the format, or 0 when unknown. */
pd_ingest_format pd_ingest_format_parse(const char *name);

/* Converts data[0..len) in the given format into *out (release it with
 * pd_profile_release). opts may be NULL for the defaults. On failure *out
 * holds nothing to free and err says what and where ("line 7: ...").
 * An input without any sample gives a valid profile with no samples.
 * Errors: PD_EPARSE (malformed input), PD_ETOOBIG (a cap, named in err),
 * PD_EINVAL (bad options or format; also values that overflow int64 when
 * equal stacks are added up), PD_ENOMEM. */
int pd_ingest_convert(pd_ingest_format fmt, const char *data, size_t len,
                      const pd_ingest_opts *opts, pd_profile *out /* OUT */, pd_err *err);

/* The same, per format. `lines` selects Pyroscope's lines format. */
int pd_ingest_folded(const char *data, size_t len, bool lines, const pd_ingest_opts *opts,
                     pd_profile *out /* OUT */, pd_err *err);
int pd_ingest_perf_script(const char *data, size_t len, const pd_ingest_opts *opts,
                          pd_profile *out /* OUT */, pd_err *err);

/* `profd convert --from=folded|lines|perf-script [--sample-rate=HZ]
 * [--type=T] [--unit=U] IN OUT`: reads IN ("-": stdin), converts, writes
 * gzip-compressed pprof to OUT ("-": stdout; a file is written to OUT.tmp
 * and renamed). argv[0] is the command name ("convert") and is skipped.
 * Messages go to stderr and name the file and line. Returns the process
 * exit code: 0 ok, 1 failure (input, conversion, output), 2 usage. */
int pd_ingest_convert_main(int argc, char **argv);

/* `profd push [--url=URL] [--service=NAME] [--type=T] [--instance-id=ID]
 * [--label k=v ...] [--format=pprof|folded|lines|perf-script]
 * [--sample-rate=HZ] [--created-at=TIME] [--timeout=DURATION] FILE...`:
 * pushes each FILE ("-": stdin, at most once) to profefe's push endpoint
 * POST URL/api/0/profiles?service=&type=&instance_id=&labels=&created_at=
 * (URL defaults to http://127.0.0.1:10902; "/api/0/profiles" is appended
 * unless URL already ends with it). argv[0] is the command name ("push").
 *
 * Each file is first read and checked locally, as the server would: read
 * under the server's default body cap (pd_pprof_limits_default; other
 * formats under pd_ingest_limits_default().max_input_bytes), converted to
 * gzip pprof when --format is not pprof (pd_ingest_convert, --sample-rate
 * for folded/lines), and decoded and validated (pd_profile_decode with the
 * default limits). A pprof file is sent byte for byte as read.
 *   --service      required, here or as --label service=NAME.
 *   --type         one of profefe's cpu, heap, block, mutex, goroutine,
 *                  threadcreate, other; default: per file, from the sample
 *                  types (cpu -> cpu; inuse_ or alloc_space/objects ->
 *                  heap; contentions/delay -> mutex or block by "mutex" or
 *                  "block" in the file's base name, else other; goroutine,
 *                  threadcreate; anything else, e.g. wall -> other).
 *                  With a converted format a type other than cpu is also
 *                  the converter's type (TYPE/count samples).
 *   --label k=v    repeatable, split at the first '='; names UTF-8 without
 *                  control characters (pd_label_name_valid) nor "__";
 *                  values non-empty UTF-8; both sent URL-escaped inside
 *                  profefe's labels parameter (so ',' and '+' survive);
 *                  service and instance_id mean --service and --instance-id.
 *   --created-at   RFC 3339 or Unix seconds; default: the profile's
 *                  time_nanos, else the file's mtime, else now (stdin).
 *   --timeout      per request, Prometheus duration; default 30s.
 * A file that fails (read, conversion, validation, network, or a non-2xx
 * reply, whose JSON "error" message is shown) gets one line "profd push:
 * FILE: message" on stderr and is skipped; the others are still pushed.
 * Each pushed file gets "FILE: pushed TYPE at TIME (id ID)" on stdout.
 * Returns the process exit code: 0 all pushed, 1 some file failed, 2 usage
 * (nothing is read or sent then). */
int pd_ingest_push_main(int argc, char **argv);

#endif
