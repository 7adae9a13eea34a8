/*
 * ingest/speedscope.h — speedscope's JSON file format (POST
 * /ingest?format=speedscope) into pprof, read as grafana/pyroscope's
 * pkg/og/convert/speedscope reads it; the format is speedscope's own
 * (jlfwong/speedscope src/lib/file-format-spec.ts).
 *
 * Input: {"$schema": "https://www.speedscope.app/file-format-schema.json",
 * "shared": {"frames": [{"name", "file", "line", "col"}...]},
 * "profiles": [...]} where each profile is
 *   {"type": "sampled", "name", "unit", "startValue", "endValue",
 *    "samples": [[frame index, ... root first], ...], "weights": [w, ...]}
 *   {"type": "evented", "name", "unit", "startValue", "endValue",
 *    "events": [{"type": "O"|"C", "at": t, "frame": i}, ...]}
 * An evented profile charges the time between two events to the frames
 * open then (root first); a sampled one charges each weight to its stack.
 *
 * Rules (Pyroscope's, with its error texts where it has one):
 *   - "$schema" must be the schema above ("Unknown schema: X"); a profile
 *     type other than sampled/evented is refused ("Profile type X not
 *     supported"), as is a unit outside none, nanoseconds, microseconds,
 *     milliseconds, seconds, bytes ("invalid profile unit"); sampled:
 *     samples and weights of unequal length, a negative or non-finite
 *     weight, a frame index outside shared.frames; evented: events out of
 *     order, an unknown event type, a frame index outside shared.frames, a
 *     close with nothing open or of a frame other than the innermost open.
 *   - Profiles with the same name and the same value kind (time or bytes)
 *     are summed into one (Pyroscope merges equal name/type/unit/startValue
 *     so they are not deduplicated downstream; here they would land in the
 *     same series at the same time).
 *   - Values: a time unit (nanoseconds ... seconds) gives one sample type
 *     TYPE/nanoseconds with the weights converted to nanoseconds; unit
 *     "none" counts samples taken at opts->sample_rate_hz (default 100 Hz,
 *     Pyroscope's default), giving TYPE/nanoseconds = weight * 1e9 / HZ;
 *     "bytes" gives TYPE/bytes. Weights are rounded to whole units.
 *     Pyroscope keeps a time unit's value with a precision multiplier of
 *     100 against a sample rate it derives from the unit: the same seconds.
 *   - TYPE: opts->type when set (the name's known suffix), else "cpu" for
 *     time and none, "memory" for bytes.
 *   - Frames become functions (name, file) and one location per frame
 *     index holding the frame's line.
 * Caps: opts->lim.max_stack_depth (frames of one stack or open at once),
 * max_frames (shared frames), max_samples (samples or events of the file).
 */
#ifndef PD_INGEST_SPEEDSCOPE_H
#define PD_INGEST_SPEEDSCOPE_H

#include <stddef.h>
#include "ingest/ingest.h"

/* One profile of a speedscope file. */
typedef struct pd_ingest_named_profile {
    char *name;       /* the profile's "name" ("" when absent); owned */
    const char *type; /* TYPE of its sample type (see above); static or opts->type */
    pd_profile profile;
} pd_ingest_named_profile;

/* Converts the speedscope JSON data[0..len) into *out, an array of *n_out
 * profiles (at least 1), each with time_nanos and duration_nanos from opts.
 * Release with pd_ingest_named_profiles_free. On failure *out is NULL and
 * err names the profile (by index and name), the sample or event and the
 * problem. Errors: PD_EPARSE (not JSON, not speedscope, a rule above),
 * PD_ETOOBIG (a cap, named), PD_ENOMEM. */
int pd_ingest_speedscope(const char *data, size_t len, const pd_ingest_opts *opts,
                         pd_ingest_named_profile **out /* OUT */, size_t *n_out /* OUT */,
                         pd_err *err);

/* Frees p[0..n) and p itself (NULL is fine). */
void pd_ingest_named_profiles_free(pd_ingest_named_profile *p, size_t n);

#endif
