/*
 * storage/tsdb/chunks_int.h — the chunks of a block (docs/format/chunks.md):
 * per series a *time chunk* (timestamps delta-of-delta, sample-type sets,
 * totals, and the table of value groups) and *value groups* (G consecutive
 * profiles of the series, each encoded against the previous one of the
 * group, zstd-compressed together by block.c). Code: chunks.c (decomposed
 * profiles, value groups), tchunk.c (time chunks). Private to src/storage.
 *
 * A profile is handled here in decomposed form (pd_dprof): its scalar fields
 * and strings as block string ids, and its samples as (stack id, label-set
 * id, values) sorted by (stack, label set) — ids of the block's symbols
 * (symbols_int.h). Conversion both ways is here too.
 */
#ifndef PD_STORAGE_TSDB_CHUNKS_INT_H
#define PD_STORAGE_TSDB_CHUNKS_INT_H

#include <stddef.h>
#include <stdint.h>
#include "base/buf.h"
#include "base/error.h"
#include "pprof/pprof.h"
#include "storage/tsdb/symbols_int.h"

typedef struct pd_dprof {
    int64_t ts; /* ms (kept by the time chunk, not the value group) */
    uint32_t n_types;
    uint32_t *types; /* 2 * n_types string ids: type, unit */
    uint32_t period_type, period_unit;
    int64_t period, time_nanos, duration_nanos;
    uint32_t n_comment;
    uint32_t *comment;
    uint32_t drop_frames, keep_frames, default_sample_type, doc_url;
    uint32_t n_sample;
    uint32_t *stack, *lset; /* n_sample each, ascending by (stack, lset) */
    int64_t *value;         /* n_sample x n_types, row-major */
    int64_t *totals;        /* n_types */
} pd_dprof;

/* Frees what d holds (not d). Safe on a zeroed struct. */
void pd__dprof_release(pd_dprof *d);

/* Decomposes p (indexed, validated) into d, interning its symbols into s.
 * d is overwritten. Errors: PD_ENOMEM, PD_EINVAL (unresolvable reference). */
int pd__dprof_from_profile(pd_symbols *s, const pd_profile *p, int64_t ts_ms, pd_dprof *d /* OUT */,
                           pd_err *err);
/* pd__dprof_from_profile, or with find_only without interning anything
 * (pd__symbols_map_profile): returns 1, d empty, when a symbol of p is not
 * in s yet. */
int pd__dprof_map_profile(pd_symbols *s, const pd_profile *p, int64_t ts_ms, bool find_only,
                          pd_dprof *d /* OUT */, pd_err *err);

/* Rebuilds a pd_profile from d and the block's symbols s (d was decoded
 * against s, so its ids are in range). out is overwritten; release it with
 * pd_profile_release. Errors: PD_ENOMEM, PD_ECORRUPT (a stack deeper than the
 * symbols said, or the result fails pd_profile_validate). */
int pd__dprof_to_profile(const pd_symbols *s, const pd_dprof *d, pd_profile *out /* OUT */,
                         pd_err *err);

/* Most values (n_sample x n_types, summed over its profiles) a value group
 * may decode to: a reader refuses more (PD_ECORRUPT) before allocating, and
 * the writers refuse to write more (PD_ETOOBIG). Unchanged samples cost no
 * byte, so the payload's size does not bound this. block.c ends a group
 * before it passes PD_VGROUP_GROUP_VALUES (a group of one bigger profile is
 * fine): a single-profile read decodes at most ~32 MiB of values. Callers of
 * pd__vgroup_encode_one count n_sample x n_types themselves. */
#define PD_VGROUP_MAX_VALUES ((uint64_t)1 << 26)
#define PD_VGROUP_GROUP_VALUES ((uint64_t)1 << 22) /* 32 MiB of decoded values */

/* The writer of one value group at a time (docs/format/chunks.md): each
 * profile appended is encoded against the previous one of the group and the
 * per-sample state the group has learned so far (the "quanta" of the value
 * model), which pd__vgroup_encode_one cannot carry. What it keeps of the last
 * profile is a copy: the caller's profiles need not outlive the call.
 *
 *   pd_vgroup_enc e; pd__vgroup_enc_init(&e);
 *   for each group: pd__vgroup_enc_reset(&e);
 *                   for each profile: pd__vgroup_enc_append(&e, d, &raw);
 *                   compress raw;
 *   pd__vgroup_enc_release(&e);
 */
typedef struct pd_vgroup_enc {
    size_t n;          /* profiles appended since the last reset */
    uint64_t n_values; /* their n_sample x n_types, summed */
    /* the last profile appended: keys, values, and each sample's quantum */
    uint32_t n_types, n_sample;
    uint32_t *stack, *lset;
    int64_t *value;
    uint64_t *q;          /* n_sample + 1 */
    size_t cap, vcap;     /* of stack and lset; of value */
    pd_buf hdr, hdr_next; /* the last profile's header bytes (flag bit 1), the next one's */
    /* Set by the caller after init: leave out the values of each profile's
     * last listed sample (flag bit 2), which the reader derives from the
     * profile's totals — only for groups whose reader is given the totals
     * (a block's time chunk holds them; the head's groups do not). Off after
     * init. */
    bool derive;
} pd_vgroup_enc;

void pd__vgroup_enc_init(pd_vgroup_enc *e);
/* The next append starts a new group (encoded against nothing). */
void pd__vgroup_enc_reset(pd_vgroup_enc *e);
/* Frees what e holds. */
void pd__vgroup_enc_release(pd_vgroup_enc *e);
/* Appends the encoding of c (against the last profile appended since the
 * reset) to out. PD_ETOOBIG (the group would pass PD_VGROUP_MAX_VALUES, or
 * out's cap) and PD_ENOMEM: out as it was; e unchanged, except after an
 * PD_ENOMEM while keeping c, when the next append starts a new group (the
 * caller must then start one too: pd__vgroup_enc_reset and a new buffer). */
int pd__vgroup_enc_append(pd_vgroup_enc *e, const pd_dprof *c, pd_buf *out);

/* Appends the uncompressed encoding of the value group d[0..n) to out (with a
 * pd_vgroup_enc). PD_ENOMEM, PD_ETOOBIG. */
int pd__vgroup_encode(const pd_dprof *const *d, size_t n, pd_buf *out);
/* Appends the encoding of profile c against prev (NULL for the first of a
 * group): a group is the concatenation of its profiles. Stateless, so c is
 * written with its quanta reset (flag bit 0): valid anywhere in a group, but
 * values of a busy series cost ~1.2x what pd__vgroup_enc_append writes
 * (heap: 103.5 vs 84.8 B/profile after zstd 19). PD_ENOMEM, PD_ETOOBIG (c alone
 * has more than PD_VGROUP_MAX_VALUES values). */
int pd__vgroup_encode_one(const pd_dprof *prev, const pd_dprof *c, pd_buf *out);

/* Decodes a value group of exactly n profiles into out[0..n) (zeroed by the
 * caller except for out[i].ts, which must hold each profile's timestamp from
 * the time chunk, and optionally out[i].totals + out[i].n_types: the
 * profile's totals from the time chunk, malloc'd, owned by out[i] from then
 * on — a profile written with derive (flag bit 2) needs them, else
 * PD_ECORRUPT; release each with pd__dprof_release, also on failure). On
 * success out[i].totals are the sums of the decoded values (equal to the
 * given ones for a derived profile by construction; the caller compares the
 * others). Every id is checked against s.
 * Errors: PD_ECORRUPT (err: what and at which payload offset), PD_ENOMEM. */
int pd__vgroup_decode(const pd_symbols *s, const uint8_t *p, size_t len, size_t n,
                      pd_dprof *out /* OUT */, pd_err *err);

/* A decoded time chunk. */
typedef struct pd_tchunk {
    size_t n;            /* profiles */
    int64_t *ts;         /* n, ascending */
    int64_t *time_nanos; /* n: each profile's time_nanos (version 3; NULL in version 2,
                            whose value groups hold it) */
    uint32_t *tset;      /* n: index of the profile's sample-type set */
    uint64_t *tot_off;   /* n + 1: totals of profile i are totals[tot_off[i] .. tot_off[i+1]) */
    int64_t *totals;
    size_t n_tset;
    uint64_t *tset_off; /* n_tset + 1: set k is tset_str[2*tset_off[k] .. 2*tset_off[k+1]) */
    uint32_t *tset_str; /* (type, unit) string ids */
    size_t n_group;
    uint32_t *g_first; /* n_group + 1: first profile of each group; g_first[n_group] = n */
    uint64_t *g_off;   /* n_group: offset of the group's chunk in the chunks file */
} pd_tchunk;

/* Appends the time chunk (version 4, PD_CHUNKS_VERSION) of profiles d[0..n) (ascending ts) with
 * the value groups given as (first profile, chunk offset) pairs. PD_ENOMEM,
 * PD_ETOOBIG. */
int pd__tchunk_encode(const pd_dprof *const *d, size_t n, const uint32_t *g_first,
                      const uint64_t *g_off, size_t n_group, pd_buf *out);

/* Decodes a time chunk of chunks-file version 2 (rows of ts, set, totals),
 * 3 (columns, then time_nanos; ts as delta-of-delta) or 4 (as 3; ts as
 * intervals minus their median, column mode 2); string ids checked against
 * n_str.
 * Errors: PD_ECORRUPT, PD_ENOMEM. out is overwritten. */
int pd__tchunk_decode(const uint8_t *p, size_t len, size_t n_str, int version,
                      pd_tchunk *out /* OUT */, pd_err *err);
void pd__tchunk_release(pd_tchunk *t);

#endif
