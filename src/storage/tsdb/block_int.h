/*
 * storage/tsdb/block_int.h — immutable blocks of the embedded store
 * (DESIGN.md §3, docs/format/{index,symbols,chunks}.md). Private to
 * src/storage. Used by head.c (head cut, compaction, retention) and by
 * `profd tsdb import|analyze|check` (tsdb_cli.c).
 *
 * A block is a directory PARENT/<ULID>/ holding
 *   meta.json        id, min/max time, stats, file sizes, format version
 *   index            label symbols, series, postings, per-series chunk refs
 *   symbols          strings, mappings, functions, locations, stacks, label sets
 *   chunks/000001    time chunks and value groups of every series
 * written into PARENT/<ULID>.tmp, every file fsynced, renamed, and PARENT
 * fsynced (so a crash leaves either no block or a complete one; a *.tmp
 * directory is garbage).
 *
 * Everything read from disk is checked: a bad byte gives PD_ECORRUPT with an
 * err naming the file and its offset, never a crash.
 *
 * Thread-safety: a writer is single-threaded. An open block is read-only;
 * pd__block_select is not thread-safe for regex matchers (pd_matcher), the
 * other read functions may run concurrently (pread, no shared state).
 */
#ifndef PD_STORAGE_TSDB_BLOCK_INT_H
#define PD_STORAGE_TSDB_BLOCK_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/error.h"
#include "base/labels.h"
#include "pprof/pprof.h"
#include "storage/storage.h"
#include "storage/tsdb/symbols_int.h"

/* Block format written (meta.json "version", the index and symbols headers):
 * 2 = index entries and symbols frames each under their own CRC, so damage
 * costs only what it touches (block_index_int.h, symbols_int.h). Version 1
 * blocks are still read. */
#define PD_BLOCK_VERSION 2
#define PD_BLOCK_DEFAULT_GROUP 256 /* max profiles per value group (bench/storage_size) */
#define PD_BLOCK_DEFAULT_GROUP_BYTES                                                               \
    (1u << 20)                    /* raw bytes that end a value group:                             \
                                    bench/storage_size/RESULTS.md */
#define PD_BLOCK_DEFAULT_LEVEL 19 /* zstd level of value groups and symbols */

typedef struct pd_block_writer_opts {
    size_t group;                 /* max profiles per value group; 0 = PD_BLOCK_DEFAULT_GROUP */
    size_t group_bytes;           /* a group ends once its raw encoding has this many
                                     bytes; 0 = PD_BLOCK_DEFAULT_GROUP_BYTES */
    int zstd_level;               /* 0 = PD_BLOCK_DEFAULT_LEVEL */
    pd_stack_format stack_format; /* 0 = PD_STACKS_TREE */
    int level;                    /* meta.json compaction.level: 1 for a block cut from the
                                     head or imported, 1 + max of the sources' when
                                     compacted; 0 = 1 */
    const char (*sources)[27];    /* meta.json compaction.sources: ULIDs of the blocks this
                                     one replaces (compaction); borrowed until
                                     pd__block_writer_write returns; may be NULL */
    size_t n_sources;
    int version;            /* block format to write: 1 or 2; else PD_BLOCK_VERSION */
    size_t sym_frame_bytes; /* version 2: raw bytes per symbols frame;
                               0 = PD_SYMBOLS_FRAME_BYTES */
    int sym_version;        /* version 2: the symbols file's version, 2 or
                               3; else PD_SYMBOLS_FILE_VERSION (3) */
} pd_block_writer_opts;

typedef struct pd_block_writer pd_block_writer;

/* A writer collecting profiles in memory, decomposed (symbols interned, not
 * the pprof kept). The profiles of a series added in ascending time (a head
 * cut, a compaction of blocks that do not overlap) are encoded into value
 * groups and zstd-compressed as they come, so the writer holds the block
 * compressed (~100-300 B per profile) plus one open group per series; a
 * series that receives a profile older than its last one is decoded back and
 * kept whole until pd__block_writer_write sorts it (imports). Both ways give
 * the same bytes. opts may be NULL. 0 or PD_ENOMEM. */
int pd__block_writer_new(const pd_block_writer_opts *opts, pd_block_writer **out /* OUT */);
/* Frees the writer. NULL is a no-op. */
void pd__block_writer_free(pd_block_writer *w);

/* Adds profile p (indexed, validated; not kept) of series `labels` (needs
 * __name__) at ts_ms, in any order (ascending per series is cheapest: see
 * above). Errors: PD_EINVAL (no __name__, or a reference of p that does not
 * resolve), PD_EEXIST (series and ts_ms already added), PD_ETOOBIG (p has
 * more values than a value group may hold; nothing added), PD_ENOMEM (the
 * writer is then unusable: pd__block_writer_write fails). */
int pd__block_writer_add(pd_block_writer *w, const pd_labels *labels, int64_t ts_ms,
                         const pd_profile *p, pd_err *err);

/* Number of profiles added so far. */
size_t pd__block_writer_count(const pd_block_writer *w);

/* Writes the block into parent_dir (which must exist) as parent_dir/<ULID>
 * (tmp dir, fsync, rename, fsync parent) and copies the ULID (26 chars + NUL)
 * into id. An empty writer writes nothing and returns PD_EINVAL. The writer
 * can only be freed afterwards. Errors: -errno (err names the path),
 * PD_ENOMEM, PD_ETOOBIG, PD_EINVAL. */
int pd__block_writer_write(pd_block_writer *w, const char *parent_dir, char id[27] /* OUT */,
                           pd_err *err);

/* ---- reading ---- */

typedef struct pd_block pd_block;

typedef struct pd_block_meta {
    char ulid[27];
    int version;
    int64_t min_t, max_t; /* ms, inclusive */
    uint64_t n_series, n_profiles, n_samples;
    uint64_t n_strings, n_mappings, n_functions, n_locations, n_stacks, n_label_sets;
    pd_stack_format stack_format;
    uint64_t group;
    int level;              /* compaction level (1 = not compacted) */
    bool compaction_failed; /* meta.json compaction.failed: a compaction could not read
                               the block; it is left out of later plans */
    /* bytes */
    uint64_t meta_bytes, index_bytes, symbols_bytes, chunks_bytes;
    uint64_t time_bytes, value_bytes; /* parts of chunks_bytes (frames included) */
} pd_block_meta;

/* Opens the block directory dir: reads and checks meta.json, index and
 * symbols (CRCs, every reference), opens chunks/000001 (chunks are checked
 * when read). A meta.json that is missing, does not verify or disagrees with
 * the other files (sizes, counts, time range) does not hide the block: its
 * meta is rebuilt from index, symbols and the file sizes
 * (level 1, no sources, numSamples 0) and pd__block_damage says why.
 * Version 2 blocks: an index entry that does not verify loses its series
 * only (the postings are rebuilt from the others); a symbols frame that does
 * not verify loses the profiles that reference its entries (reads of them
 * give PD_ECORRUPT; merges skip them); pd__block_section_damage says what.
 * Version 1 (and a version 2 index header, toc-less first entry or symbols
 * directory damaged) fails the open. dir's last component must be the
 * 26-char ULID. Errors: PD_ECORRUPT (err: file and offset), -errno, PD_ENOMEM. */
int pd__block_open(const char *dir, pd_block **out /* OUT */, pd_err *err);
/* Closes and frees. NULL is a no-op. */
void pd__block_close(pd_block *b);

const pd_block_meta *pd__block_meta(const pd_block *b);
/* NULL for an intact block; else why its meta.json was rebuilt (file and
 * offset; borrowed from b). */
const char *pd__block_damage(const pd_block *b);
/* The error of a read refused because the profile references a damaged
 * symbols frame (pd__block_read_profile, pd__block_series_foreach*) is
 * PD_ECORRUPT with this text in its message: only that profile is lost, the
 * series' other profiles read, so callers must not skip the series for it
 * (db.c pd__tsdb_hb_damaged). */
#define PD_BLOCK_LOST_PROFILE "references a damaged symbols frame"

/* NULL when the block's index and symbols verify whole; else what did not
 * (file and offset) and what it costs (series and stacks lost), borrowed
 * from b. Such a block is served minus what is lost; pd__block_check fails
 * on it and `profd tsdb repair` rewrites it. */
const char *pd__block_section_damage(const pd_block *b);

/* Sets compaction.failed = true in b's meta (pd__block_meta) and persists it
 * in meta.json (rewritten via meta.json.tmp, renamed, directory fsynced), as
 * Prometheus does: later compaction plans leave the block out. A block whose
 * meta.json was rebuilt (pd__block_damage) is marked in memory only. Not
 * thread-safe against another mark of the same block.
 * Errors: -errno (err names the file), PD_ECORRUPT (meta.json does not
 * read), PD_ENOMEM; the in-memory flag is set even then. */
int pd__block_mark_failed(pd_block *b, pd_err *err);
/* The block's symbols (read-only). */
const pd_symbols *pd__block_symbols(const pd_block *b);

/* ULIDs of the blocks this one was compacted from (meta.json
 * compaction.sources), borrowed from b; *n = 0 for a level-1 block. A store
 * that finds both a block and one of its sources (a crash between the
 * compacted block's rename and the sources' deletion) drops the source. */
const char (*pd__block_sources(const pd_block *b, size_t *n /* OUT */))[27];

/* The block's directory (borrowed). */
const char *pd__block_dir(const pd_block *b);

/* Calls fn(ctx, ts_ms, profile) for every profile of series id in ascending
 * time, decompressing each value group once (compaction reads a block this
 * way). The profile is valid only during the call (it is released after).
 * fn returns 0 to go on or a negative code, which stops the walk and is
 * returned. Errors: PD_ENOTFOUND (id), PD_ECORRUPT (err: file and offset),
 * -errno, PD_ENOMEM, or fn's code. */
int pd__block_series_foreach(pd_block *b, uint32_t id,
                             int (*fn)(void *ctx, int64_t ts_ms, const pd_profile *p), void *ctx,
                             pd_err *err);

/* Calls fn(ctx, d) for every profile of series id with ts in [mint, maxt]
 * (ms, inclusive), in ascending time, in the block's decomposed form (stack
 * and label-set ids of pd__block_symbols(b), values; chunks_int.h): no
 * pd_profile is rebuilt (the pushed-down merge, aggregate.c). Value groups
 * wholly outside the range are not read. d is valid only during the call. A
 * group that does not read (PD_ECORRUPT) is skipped and the walk goes on;
 * PD_ECORRUPT is then returned at the end with err naming the first one
 * (file and offset). fn returns 0 to go on or a negative code, which stops
 * the walk and is returned. Errors: PD_ENOTFOUND (id), PD_ECORRUPT, -errno,
 * PD_ENOMEM, or fn's code. */
struct pd_dprof;
int pd__block_series_foreach_dprof(pd_block *b, uint32_t id, int64_t mint, int64_t maxt,
                                   int (*fn)(void *ctx, const struct pd_dprof *d), void *ctx,
                                   pd_err *err);

/* Series ids are 0..n_series-1 in label order. */
size_t pd__block_n_series(const pd_block *b);
/* Labels of series id (borrowed), min/max ts and profile count. */
const pd_labels *pd__block_series_labels(const pd_block *b, uint32_t id);
void pd__block_series_info(const pd_block *b, uint32_t id, int64_t *min_t /* OUT */,
                           int64_t *max_t /* OUT */, uint64_t *n_profiles /* OUT */,
                           uint64_t *time_bytes /* OUT */, uint64_t *value_bytes /* OUT */);

/* The byte range [*start, *end) of chunks/000001 holding series id: its value
 * groups, then its time chunk (docs/format/chunks.md). For damage reports. */
/* CRC-32C of the bytes of chunks/000001 that series id's extent (below)
 * covers, read now: the aggregates file (blockagg.c) checks its records
 * against the chunks they sum. 0, -errno, PD_ECORRUPT (file too short). */
int pd__block_series_crc(const pd_block *b, uint32_t id, uint32_t *crc /* OUT */);
void pd__block_series_extent(const pd_block *b, uint32_t id, uint64_t *start /* OUT */,
                             uint64_t *end /* OUT */);

/* Series matching all matchers (n may be 0: all), from the postings, as
 * ascending ids in *ids (malloc'ed; free it) and *n_ids. 0 or PD_ENOMEM. */
int pd__block_select(const pd_block *b, const pd_matcher *ms, size_t n, uint32_t **ids /* OUT */,
                     size_t *n_ids /* OUT */, pd_err *err);

/* Timestamps and totals of series id in [mint, maxt] from its time chunk
 * only (no value group is read). out as storage.h (release with
 * pd_points_release). Errors: PD_ENOTFOUND (id), PD_ECORRUPT, -errno, PD_ENOMEM. */
int pd__block_read_points(pd_block *b, uint32_t id, int64_t mint, int64_t maxt,
                          pd_points *out /* OUT */, pd_err *err);

/* The profile of series id at exactly ts_ms, rebuilt from its value group
 * (one group is read and decompressed). out: release with pd_profile_release.
 * Errors: PD_ENOTFOUND (id or ts), PD_ECORRUPT, -errno, PD_ENOMEM. */
int pd__block_read_profile(pd_block *b, uint32_t id, int64_t ts_ms, pd_profile *out /* OUT */,
                           pd_err *err);

/* Verifies the block at dir completely: opens it (all of the above) and then
 * reads every time chunk and every value group of every series, decoding
 * every profile and rebuilding it. If meta != NULL, it receives the block's
 * meta (sizes included) when the open succeeded. A rebuilt meta.json
 * (pd__block_damage) is an error here. Returns 0 or the first error
 * (PD_ECORRUPT with file and offset). */
int pd__block_check(const char *dir, pd_block_meta *meta /* OUT, may be NULL */, pd_err *err);

#endif
