/*
 * pprof/split.h — dynamic labels become series labels (issue 26): a
 * pushed profile whose samples carry pprof string labels (Go's
 * pprof.Do / the Pyroscope Go SDK's TagWrapper, Node's wrapWithLabels, Java's
 * contextId labels, OTLP sample attributes converted to pprof labels) is
 * cut into one profile per distinct set of those labels, each to be stored
 * under the push's labels plus that set — as Pyroscope's distributor does
 * with pkg/model/pprofsplit (VisitSampleSeries). Used by every push
 * dialect (api/push_store.c) and by scrapes (scrape/manager.c): Grafana
 * Alloy's pyroscope.scrape sends what it scrapes to Pyroscope's push, which
 * splits, so a scraped Go CPU profile with pprof.Do labels gives the same
 * series either way.
 *
 * The rules (Pyroscope's, with the differences marked):
 *   - A sample label takes part when it is a string label (str != 0;
 *     numeric labels stay on the sample, as Pyroscope), its key is a valid
 *     label name (base/labels.h) not starting "__" (reserved), its value is
 *     1..PD_LABEL_MAX_VALUE bytes of UTF-8 with no control byte, and its key
 *     is not one of the per-request ids kept on the samples:
 *       span_id, trace_id, profile_id (Pyroscope renames profile_id to
 *       span_id and groups without trace_id/span_id: they stay on the
 *       samples, for span profiles), pyroscope.profile.id (OpenTelemetry's
 *       profile-to-span link attribute, per-request too).
 *     span_name is split (Pyroscope splits it: the root span's name,
 *     bounded).
 *   - A key the push's own labels already name stays on the sample (the
 *     series labels take precedence, as Pyroscope's; Pyroscope drops the
 *     sample's value, profd keeps it on the sample: lossless). So does a key
 *     repeated within one sample's labels, and every label of a sample whose
 *     labels would take the series past PD_LABEL_MAX_COUNT labels.
 *   - Samples with no such label form the group with the empty set: stored
 *     under the push's labels alone.
 *   - The labels that became series labels are removed from the group's
 *     samples; every other label stays. Samples are kept one by one (no
 *     summing), values untouched.
 *   - A profile with no sample holding such a label is not split (n = 0):
 *     it is stored as received, byte for byte.
 * Each group's profile keeps the header of the source (sample types,
 * period, time, duration, comments, drop/keep frames, default sample type,
 * doc URL), only the locations, functions and mappings its samples use,
 * and only the strings those and the header use (renumbered; the bytes are
 * the source's, not copied): a part encodes to about its share of the
 * source, so N parts cost the WAL about one source, not N.
 */
#ifndef PD_PPROF_SPLIT_H
#define PD_PPROF_SPLIT_H

#include <stdbool.h>
#include <stddef.h>
#include "base/error.h"
#include "base/labels.h"
#include "pprof/pprof.h"

typedef struct pd_pprof_split_group {
    pd_labels labels; /* the push's labels + this group's sample labels (owned) */
    size_t n_split;   /* how many of labels came from the samples (0: the group
                         of samples with none) */
    pd_profile view;  /* indexed and valid; borrows the source's strings, lines
                         and sample values: read-only, valid while the source
                         lives; freed by pd_pprof_split_release (never
                         pd_profile_release it) */
} pd_pprof_split_group;

typedef struct pd_pprof_split {
    pd_pprof_split_group *v; /* n groups, in the order of their first sample */
    size_t n;                /* 0: nothing to split, store the source as it is */
} pd_pprof_split;

/* True for the sample label keys that never become series labels (the
 * per-request ids listed above). */
bool pd_pprof_split_excluded(const char *key);

/* Splits p (indexed, validated: what pd_profile_decode gives) by its sample
 * labels under the rules above; base is the push's labels. *out is
 * overwritten; max_groups caps the groups (0: none): more distinct label
 * sets than that is PD_ETOOBIG with err naming the count (nothing in out).
 * Errors: PD_ETOOBIG, PD_ENOMEM (PD_EINVAL only if base itself is not a
 * valid label set). */
int pd_pprof_split_by_labels(const pd_profile *p, const pd_labels *base, size_t max_groups,
                             pd_pprof_split *out /* OUT */, pd_err *err);

/* Frees what pd_pprof_split made. Safe on a zeroed or released split. */
void pd_pprof_split_release(pd_pprof_split *s);

#endif
