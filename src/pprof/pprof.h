/*
 * pprof/pprof.h — the pprof profile: in-memory model, wire decode/encode,
 * validation, semantic equality.
 *
 * Wire format: perftools.profiles.Profile (proto3), field numbers from
 * google/pprof proto/profile.proto:
 *   Profile:  1 sample_type (ValueType), 2 sample, 3 mapping, 4 location,
 *             5 function, 6 string_table, 7 drop_frames, 8 keep_frames,
 *             9 time_nanos, 10 duration_nanos, 11 period_type, 12 period,
 *             13 comment (packed), 14 default_sample_type, 15 doc_url
 *   ValueType: 1 type, 2 unit (string indexes)
 *   Sample:   1 location_id (packed uint64), 2 value (packed int64), 3 label
 *   Label:    1 key, 2 str, 3 num, 4 num_unit
 *   Mapping:  1 id, 2 memory_start, 3 memory_limit, 4 file_offset, 5 filename,
 *             6 build_id, 7 has_functions, 8 has_filenames, 9 has_line_numbers,
 *             10 has_inline_frames
 *   Location: 1 id, 2 mapping_id, 3 address, 4 line, 5 is_folded
 *   Line:     1 function_id, 2 line, 3 column
 *   Function: 1 id, 2 name, 3 system_name, 4 filename, 5 start_line
 * A body is gzip-compressed pprof (what net/http/pprof serves) or raw
 * protobuf; they are told apart by the gzip magic 1f 8b.
 *
 * Memory: every array and string of a decoded profile lives in p->arena and is
 * freed by pd_profile_release. Strings are referenced by index into
 * string_table, as on the wire; string_table[0] is "".
 *
 * Ids: location, function and mapping ids are the producer's (non-zero,
 * unique per kind). After a successful decode or pd_profile_index(), the
 * lookup functions below find them in O(1): ids 1..n in array order (what Go
 * writes) are looked up as array index id - 1 with no map; other ids through
 * loc_by_id/fn_by_id/map_by_id.
 */
#ifndef PD_PPROF_PPROF_H
#define PD_PPROF_PPROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/arena.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/u64map.h"

typedef struct pd_pprof_value_type {
    int64_t type; /* string index, e.g. "alloc_space" */
    int64_t unit; /* string index, e.g. "bytes" */
} pd_pprof_value_type;

typedef struct pd_pprof_label {
    int64_t key; /* string index */
    int64_t str; /* string index, 0 when numeric */
    int64_t num;
    int64_t num_unit; /* string index, 0 when unset */
} pd_pprof_label;

typedef struct pd_pprof_sample {
    uint64_t *location_id; /* leaf first, as pprof */
    size_t n_location;
    int64_t *value; /* one per sample type */
    size_t n_value;
    pd_pprof_label *label;
    size_t n_label;
} pd_pprof_sample;

typedef struct pd_pprof_mapping {
    uint64_t id;
    uint64_t memory_start, memory_limit, file_offset;
    int64_t filename; /* string index */
    int64_t build_id; /* string index */
    bool has_functions, has_filenames, has_line_numbers, has_inline_frames;
} pd_pprof_mapping;

typedef struct pd_pprof_line {
    uint64_t function_id;
    int64_t line;
    int64_t column;
} pd_pprof_line;

typedef struct pd_pprof_location {
    uint64_t id;
    uint64_t mapping_id; /* 0: none */
    uint64_t address;
    pd_pprof_line *line; /* innermost (inlined) first, as pprof */
    size_t n_line;
    bool is_folded;
} pd_pprof_location;

typedef struct pd_pprof_function {
    uint64_t id;
    int64_t name, system_name, filename; /* string indexes */
    int64_t start_line;
} pd_pprof_function;

typedef struct pd_profile {
    pd_pprof_value_type *sample_type;
    size_t n_sample_type;
    pd_pprof_sample *sample;
    size_t n_sample;
    pd_pprof_mapping *mapping;
    size_t n_mapping;
    pd_pprof_location *location;
    size_t n_location;
    pd_pprof_function *function;
    size_t n_function;
    const char **string_table; /* NUL-terminated copies */
    size_t *string_len;        /* byte lengths (strings may hold NUL) */
    size_t n_string;
    int64_t drop_frames, keep_frames; /* string indexes */
    int64_t time_nanos, duration_nanos;
    pd_pprof_value_type period_type;
    int64_t period;
    int64_t *comment; /* string indexes */
    size_t n_comment;
    int64_t default_sample_type; /* string index */
    int64_t doc_url;             /* string index */

    pd_arena arena;
    pd_u64map loc_by_id, fn_by_id, map_by_id; /* id -> array index (empty when dense) */
    bool loc_dense, fn_dense, map_dense;      /* ids are 1..n in array order (no map needed) */
    void *intern; /* private to pprof.c: string interning table, or NULL */
} pd_profile;

/* Caps against hostile input. Defaults (pd_pprof_limits_default) are sized
 * for real profiles: a 2 MB gzip profile of a large Go service is normal.
 * A field left 0 means its default, so a partly filled struct is safe. */
typedef struct pd_pprof_limits {
    size_t max_body_bytes;         /* as received (gzip or raw); default 16 MiB */
    size_t max_decompressed_bytes; /* after gunzip; default 64 MiB */
    size_t max_samples;            /* default 1,000,000 */
    size_t max_locations;          /* default 1,000,000 */
    size_t max_functions;          /* default 1,000,000 */
    size_t max_mappings;           /* default 10,000 */
    size_t max_strings;            /* default 1,000,000 */
    size_t max_sample_types;       /* default 64 */
    size_t max_stack_depth;        /* locations per sample; default 4,096 */
    size_t max_labels_per_sample;  /* default 1,024 */
    size_t max_lines;              /* Line entries over all locations; default 4,000,000 */
} pd_pprof_limits;

/* The default caps above. */
pd_pprof_limits pd_pprof_limits_default(void);

/* Empty profile (string_table = {""}), no allocation beyond the arena's first use.
 * Returns 0 or PD_ENOMEM. */
int pd_profile_init(pd_profile *p);
/* Frees everything p holds. Safe on a zeroed or released profile. */
void pd_profile_release(pd_profile *p);

/* Decodes a body (gzip or raw protobuf) into p, then indexes and validates
 * it. Linear in the input; a raw body is also held to max_decompressed_bytes.
 * Packed and unpacked repeated fields are accepted, unknown fields skipped.
 * p is overwritten (not released first); on failure p holds nothing to free.
 * lim may be NULL for the defaults.
 * Errors: PD_ETOOBIG (a cap; err names which and the limit), PD_EPARSE
 * (bad gzip or protobuf; err says the byte offset and field), PD_EINVAL
 * (validation; see pd_profile_validate), PD_ENOMEM. */
int pd_profile_decode(pd_profile *p /* OUT */, const uint8_t *body, size_t len,
                      const pd_pprof_limits *lim, pd_err *err);

/* Builds the id lookup maps, or marks a kind dense (decode does this). 0, PD_ENOMEM, or PD_EINVAL
 * for a duplicate or zero id (err names it). */
int pd_profile_index(pd_profile *p, pd_err *err);

/* Checks referential integrity: every sample's location ids resolve, every
 * location's mapping id (non-zero) and line function ids resolve, every
 * string index is in range, string_table[0] == "", each sample has exactly
 * n_sample_type values. Ids 0 mean "none" for a location's mapping and a
 * line's function (as Go's parser accepts), never for a sample's location.
 * Returns 0 or PD_EINVAL with err like
 * "sample 12: location id 99 not found". Needs pd_profile_index first. */
int pd_profile_validate(const pd_profile *p, pd_err *err);

/* Appends p's wire encoding to out: gzip-compressed when gzip is true.
 * Errors: PD_ENOMEM, PD_ETOOBIG (out's cap). */
int pd_profile_encode(const pd_profile *p, bool gzip, pd_buf *out);

/* Semantic equality of DESIGN.md §1: same sample types, period type/period,
 * time, duration, comments, drop/keep frames, default sample type, doc URL
 * (all compared as strings), and the same multiset of samples — values,
 * labels, and stacks resolved to (mapping file/build id/start/limit/offset,
 * address, per line: function name/system name/file/start line, line,
 * column). Ids and string order may differ, and so may the order of
 * samples and of the labels within a sample; mapping has_* flags and
 * is_folded are not compared. Needs both profiles indexed. Returns true when
 * equal; else false and, when why != NULL, a description of the first
 * difference (false with "out of memory" if hashing could not allocate). */
bool pd_profile_equal(const pd_profile *a, const pd_profile *b, pd_err *why);

/* Lookups by id; NULL when absent. Need pd_profile_index (decode does it).
 * Inline for dense ids (the per-sample hot path of merges and reports); the
 * pd__profile_*_by_map functions look sparse ids up in the maps. */
const pd_pprof_location *pd__profile_location_by_map(const pd_profile *p, uint64_t id);
const pd_pprof_function *pd__profile_function_by_map(const pd_profile *p, uint64_t id);
const pd_pprof_mapping *pd__profile_mapping_by_map(const pd_profile *p, uint64_t id);

static inline const pd_pprof_location *pd_profile_location(const pd_profile *p, uint64_t id)
{
    if (p->loc_dense)
        return id - 1 < p->n_location ? &p->location[id - 1] : NULL;
    return pd__profile_location_by_map(p, id);
}

static inline const pd_pprof_function *pd_profile_function(const pd_profile *p, uint64_t id)
{
    if (p->fn_dense)
        return id - 1 < p->n_function ? &p->function[id - 1] : NULL;
    return pd__profile_function_by_map(p, id);
}

static inline const pd_pprof_mapping *pd_profile_mapping(const pd_profile *p, uint64_t id)
{
    if (p->map_dense)
        return id - 1 < p->n_mapping ? &p->mapping[id - 1] : NULL;
    return pd__profile_mapping_by_map(p, id);
}
/* The string at idx, or "" when out of range. Borrowed from p. */
const char *pd_profile_str(const pd_profile *p, int64_t idx);

/* The profile type (profefe's `type`, profd's __name__) of p when nobody
 * named it, from its sample type names as Go's runtime/pprof, @datadog/pprof
 * and profd's converters write them; the one rule of `profd push` and
 * `profd tsdb import`:
 *   cpu (or "samples" with period type cpu)              -> "cpu"
 *   inuse_space/inuse_objects/alloc_space/alloc_objects  -> "heap" (Go's heap
 *     and allocs profiles carry the same four)
 *   contentions/delay -> "mutex" or "block": Go writes both profiles with the
 *     same sample and period types, so the base name of `path` decides (it
 *     holds "mutex" or "block", not both), else "other"
 *   goroutine -> "goroutine", threadcreate -> "threadcreate"
 *   anything else (wall, perf events, ...) -> "other"
 * path may be NULL (no file name: contention profiles are "other"). Returns
 * a static string. */
const char *pd_profile_guess_type(const pd_profile *p, const char *path);

/* Writes the sum of each sample type's values over all samples into
 * totals[0..n_sample_type). */
void pd_profile_totals(const pd_profile *p, int64_t *totals /* OUT */);

/* Resolves a sample_index parameter as pprof does: NULL or "" gives the
 * default (the sample type named by default_sample_type, else the last one);
 * a decimal number N is the N-th type; otherwise the type whose name equals
 * the text (also "NAME" matching "alloc_space" for "alloc_space/bytes").
 * Returns 0 and *idx, or PD_EINVAL with err listing the valid names. */
int pd_profile_sample_index(const pd_profile *p, const char *spec, size_t *idx /* OUT */,
                            pd_err *err);

/* Builders for code that makes profiles (merge, conversion, tests).
 * Interns s[0..len) into the string table; returns its index (>= 0) or
 * PD_ENOMEM. Uses a hash map private to p (created on first call, from the
 * strings already in the table). The first call, and any call that adds a
 * string, may move p->string_table and p->string_len to new arena arrays
 * (the strings themselves do not move): do not keep pointers to those two
 * arrays across calls, and add strings only through this function once it
 * has been used. */
int64_t pd_profile_intern(pd_profile *p, const char *s, size_t len);

/* gzip helpers (zlib). pd_gunzip appends the decompression of in[0..len) to
 * out, failing with PD_ETOOBIG once more than max_out bytes would be written
 * (gzip bombs) and PD_EPARSE for corrupt data; concatenated members are
 * accepted. pd_gzip appends the gzip of in[0..len) at level 1 (zlib's
 * Z_BEST_SPEED, what Go's runtime/pprof writes its profiles with: a merge's
 * answer was ~37% deflate at the default level 6). PD_ENOMEM. */
int pd_gunzip(const uint8_t *in, size_t len, size_t max_out, pd_buf *out, pd_err *err);
int pd_gzip(const uint8_t *in, size_t len, pd_buf *out);
/* True when data starts with the gzip magic 1f 8b. */
bool pd_is_gzip(const uint8_t *data, size_t len);

/* ---- builders ---- */

/* pd_profile_builder makes a profile from parts (conversions from other
 * formats, tests): sample types, then functions, mappings and locations —
 * each deduplicated by content, so adding the same one twice returns the
 * same id — then samples, merged when their stack and labels are equal
 * (their values are added). Ids are 1, 2, 3... per kind in order of first
 * addition. pd_profile_builder_finish hands out a pd_profile whose arrays
 * all live in its arena, indexed and validated.
 *
 * Caps: the builder is held to a pd_pprof_limits (max_samples counts
 * distinct samples after merging; max_locations, max_functions,
 * max_mappings, max_strings, max_sample_types, max_stack_depth,
 * max_labels_per_sample apply as in decode); a call that would pass one
 * fails with PD_ETOOBIG and an err naming the cap. After any error other
 * than PD_EINVAL from a sample's arguments the builder should only be freed.
 * Not thread-safe. */
typedef struct pd_profile_builder pd_profile_builder;

/* Allocates an empty builder held to lim (NULL: the defaults; 0 fields mean
 * their defaults). *out is NULL on failure. Returns 0 or PD_ENOMEM. */
int pd_profile_builder_new(const pd_pprof_limits *lim, pd_profile_builder **out /* OUT */);

/* Frees the builder and all it holds (including an unfinished profile).
 * NULL is a no-op. */
void pd_profile_builder_free(pd_profile_builder *b);

/* The profile under construction, for its scalar fields (time_nanos,
 * duration_nanos, period, period_type, default_sample_type, doc_url,
 * drop/keep_frames). Its arrays are filled only by finish; set strings via
 * pd_profile_builder_string (comments: pd_profile_builder_comment). Borrowed. */
pd_profile *pd_profile_builder_profile(pd_profile_builder *b);

/* Interns s (NUL-terminated; NULL is "") and returns its string index
 * (>= 0), or PD_ENOMEM / PD_ETOOBIG (max_strings). */
int64_t pd_profile_builder_string(pd_profile_builder *b, const char *s, pd_err *err);

/* Appends a sample type TYPE/UNIT (e.g. "cpu", "nanoseconds") and returns
 * its index (>= 0). Only before the first sample: PD_EINVAL after.
 * PD_ETOOBIG (max_sample_types), PD_ENOMEM. */
int pd_profile_builder_sample_type(pd_profile_builder *b, const char *type, const char *unit,
                                   pd_err *err);

/* Sets period_type TYPE/UNIT and period. 0, PD_ENOMEM, PD_ETOOBIG. */
int pd_profile_builder_period(pd_profile_builder *b, const char *type, const char *unit,
                              int64_t period, pd_err *err);

/* Appends a comment string. 0, PD_ENOMEM, PD_ETOOBIG. */
int pd_profile_builder_comment(pd_profile_builder *b, const char *text, pd_err *err);

/* The function (name, system_name, filename, start_line); strings may be
 * NULL for "". Sets *id (non-zero). 0, PD_ENOMEM, PD_ETOOBIG (max_functions,
 * max_strings). */
int pd_profile_builder_function(pd_profile_builder *b, const char *name, const char *system_name,
                                const char *filename, int64_t start_line, uint64_t *id /* OUT */,
                                pd_err *err);

/* The mapping described by m (its id and string fields are ignored) with
 * file name `filename` and build id `build_id` (NULL for ""). Deduplicated on
 * every field including the has_* flags. Sets *id (non-zero). 0, PD_ENOMEM,
 * PD_ETOOBIG (max_mappings, max_strings). */
int pd_profile_builder_mapping(pd_profile_builder *b, const pd_pprof_mapping *m,
                               const char *filename, const char *build_id, uint64_t *id /* OUT */,
                               pd_err *err);

/* The location at `address` in mapping `mapping_id` (0: none) with lines
 * line[0..n_line) (innermost first; function ids from
 * pd_profile_builder_function, 0 for none); the lines are copied. Sets *id
 * (non-zero). PD_EINVAL for an unknown mapping or function id, PD_ENOMEM,
 * PD_ETOOBIG (max_locations, max_lines). */
int pd_profile_builder_location(pd_profile_builder *b, uint64_t mapping_id, uint64_t address,
                                const pd_pprof_line *line, size_t n_line, uint64_t *id /* OUT */,
                                pd_err *err);

/* From now on pd_profile_builder_sample appends every sample as its own,
 * never merging it into an earlier one with the same stack and labels: for
 * rebuilding one stored profile whose samples are a multiset (DESIGN.md §1
 * "lossless": a producer may repeat a stack, Go's heap profiles do). */
void pd_profile_builder_keep_repeats(pd_profile_builder *b);

/* Adds a sample: stack loc[0..n_loc) (leaf first; ids from
 * pd_profile_builder_location), value[0..n_sample_type) and
 * label[0..n_label) (string indexes from pd_profile_builder_string). A
 * sample with the same stack and the same labels in the same order as an
 * earlier one is merged into it (values added), unless
 * pd_profile_builder_keep_repeats was called. Everything is copied.
 * PD_EINVAL (unknown location id, a string index out of range, no sample
 * types declared, or an added value overflows int64), PD_ETOOBIG
 * (max_samples, max_stack_depth, max_labels_per_sample), PD_ENOMEM. */
int pd_profile_builder_sample(pd_profile_builder *b, const uint64_t *loc, size_t n_loc,
                              const int64_t *value, const pd_pprof_label *label, size_t n_label,
                              pd_err *err);

/* Moves the built profile into *out (pd_profile_release it), indexed and
 * checked with pd_profile_validate. The builder is left empty (free it; it
 * must not be used to build again). On failure *out holds nothing to free.
 * 0, PD_ENOMEM, PD_EINVAL (validation, should not happen). */
int pd_profile_builder_finish(pd_profile_builder *b, pd_profile *out /* OUT */, pd_err *err);

#endif
