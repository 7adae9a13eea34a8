/*
 * storage/tsdb/blockagg_int.h — per-block partial aggregates of the embedded
 * store (issue 35 item 1; docs/format/aggregates.md). Private to src/storage.
 *
 * For each series of a block, the sum of all of its profiles in that block
 * by (stack id, label-set id) — the block's own ids — with the pprof header
 * folded as aggregate.c folds it (profile.Merge's rules), the number of
 * profiles and their first/last time. A merge over a range that holds a
 * series' whole part in a block adds this one record instead of decoding
 * every profile of the part (aggregate.c: agg_add_rec); a part cut by the
 * range's ends, a cumulative type's deltas (weights per profile) and a
 * series whose profiles in the block do not share one header are decoded as
 * before.
 *
 * The records live in the block's file `aggregates` (beside meta.json),
 * written temp -> fsync -> rename -> fsync of the directory, checked whole
 * (magic, version, the block's ULID, CRC-32C, every id against the block's
 * symbols, and each record's profile count and time range against the
 * block's index). It is derived data: a block without it, or with one that
 * does not verify, is read by decoding; the maintenance round (db.c ->
 * pd__bagg_maintain) rebuilds it from the block's chunks and writes it.
 *
 * Thread-safety: a pd_bagg is immutable once published (hblock.agg, written
 * once by the maintenance thread with a release store, read with acquire
 * loads); pd__bagg_get may run on any number of threads at once, each with
 * its own scratch.
 */
#ifndef PD_STORAGE_TSDB_BLOCKAGG_INT_H
#define PD_STORAGE_TSDB_BLOCKAGG_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/error.h"
#include "storage/tsdb/block_int.h"
#include "storage/tsdb/chunks_int.h"

#define PD_BAGG_FILE "aggregates"
#define PD_BAGG_VERSION 1
#define PD_BAGG_MAX_TYPES 256                 /* sample types per record */
#define PD_BAGG_MAX_ENTRIES ((size_t)1 << 22) /* (stack, label set) per record */

/* One block's aggregates (opaque): the decompressed records and, per series
 * id, where its record starts (none: decode that series). */
typedef struct pd_bagg pd_bagg;

/* One series' record, decoded (pd__bagg_get). h holds the folded header in
 * the block's string ids (h.ts unused), h.totals the summed totals, and
 * h.n_sample entries (h.stack, h.lset ascending by (stack, lset); h.value
 * n_sample x n_types), none of them all-zero. Arrays are owned by the
 * scratch the record was decoded into. */
typedef struct pd_bagg_rec {
    pd_dprof h;
    uint64_t n_profiles;
    int64_t min_ts, max_ts; /* ms, of the series' first and last profile in the block */
    uint32_t chunks_crc;    /* of the series' chunk bytes when summed */
    bool tn_reset;          /* a profile had time_nanos 0: h.time_nanos replaces the
                               fold so far instead of joining it (aggregate.c) */
} pd_bagg_rec;

/* Reusable arrays for pd__bagg_get (one per thread). Zero it to start;
 * pd__bagg_scratch_release frees it. */
typedef struct pd_bagg_scratch {
    uint32_t *types, *comment, *stack, *lset;
    int64_t *value, *totals;
    size_t cap_types, cap_comment, cap_n, cap_lset, cap_value, cap_totals;
    int64_t *acc; /* pd__bagg_fold_record: one entry's values, */
    size_t cap_acc;
    pd_buf eb; /* and the merged entries */
} pd_bagg_scratch;
void pd__bagg_scratch_release(pd_bagg_scratch *sc);

/* Decodes series id's record of g into *r (arrays in sc). Returns 1 when
 * there is one, 0 when the series has none (not aggregable, damaged when
 * built, or its chunk bytes no longer have the CRC they had when summed —
 * checked at the record's first use, by reading them: decode it),
 * PD_ENOMEM. g was verified when loaded, so no other error is possible. */
int pd__bagg_get(const pd_bagg *g, uint32_t id, pd_bagg_rec *r /* OUT */, pd_bagg_scratch *sc);

/* pd__bagg_get's header only: r->h without its entries (n_sample 0), the
 * profile count and time range — the sample types of a block part without
 * reading its time chunk (querier.c: pd_tsdb_read_type_runs). 1 when the
 * series has a record not already found stale (no chunk check here: the
 * aggregation's pd__bagg_get does it), 0 when not, PD_ENOMEM. */
int pd__bagg_get_header(const pd_bagg *g, uint32_t id, pd_bagg_rec *r /* OUT */,
                        pd_bagg_scratch *sc);

/* The head's aggregates (headmem.c, aggregate.c): d[0..n) — profiles of one
 * series in time order, decomposed against one symbol table — summed into
 * one record of the format above (chunks_crc 0) appended to out. 1 done, 0
 * when they cannot be one record (sample types or period type differ, a
 * negative period, too many entries: decode them), PD_ENOMEM. */
int pd__bagg_sum_record(const pd_dprof *d, size_t n, pd_buf *out);
/* The open head group's running sum (headmem.c): appends to out the record
 * of the profiles summed in record p[0..n) (made by pd__bagg_sum_record or
 * this function; p NULL: none yet) followed by d — byte for byte what
 * pd__bagg_sum_record writes for all of them — using sc's arrays. 1 done,
 * 0 when they cannot be one record (d not after the record's last profile
 * in time, sample types or period type differ, a negative period, too many
 * entries: the group is then decoded), PD_ENOMEM (out may hold a part). */
int pd__bagg_fold_record(const uint8_t *p, size_t n, const pd_dprof *d, pd_bagg_scratch *sc,
                         pd_buf *out);
/* Whether d has the sample types and period type of record p[0..n) (true
 * when p does not decode). */
int pd__bagg_same_header(const uint8_t *p, size_t n, const pd_dprof *d, pd_bagg_scratch *sc);
/* Decodes a record made by pd__bagg_sum_record (p[0..n), memory of this
 * process: not checked against symbols) into *r, arrays in sc. 1, 0 when it
 * does not decode (then not used), PD_ENOMEM. */
int pd__bagg_rec_decode(const uint8_t *p, size_t n, pd_bagg_rec *r /* OUT */, pd_bagg_scratch *sc);

/* Reads and verifies b's aggregates file into *out. Errors: PD_ENOTFOUND (no
 * file), PD_ECORRUPT (err: the file and offset, or what disagrees with the
 * block), -errno, PD_ENOMEM. */
int pd__bagg_load(pd_block *b, pd_bagg **out /* OUT */, pd_err *err);

/* Builds b's aggregates by decoding each series' value groups (skip(ctx, id)
 * true: leave series id out, e.g. known damaged; skip may be NULL). A series
 * whose chunks do not read, whose profiles differ in sample types or period
 * type, or that has a negative period gets no record. *out is also given
 * the encoded file (pd__bagg_write). Errors: PD_ENOMEM, -errno. */
int pd__bagg_build(pd_block *b, bool (*skip)(void *ctx, uint32_t id), void *ctx,
                   pd_bagg **out /* OUT */, pd_err *err);

/* Writes g (built by pd__bagg_build) as b's aggregates file: DIR/aggregates.tmp,
 * fsync, rename, fsync of DIR. 0, -errno (err names the file). */
int pd__bagg_write(const pd_block *b, const pd_bagg *g, pd_err *err);

/* Records in g; bytes of its file. */
size_t pd__bagg_n_records(const pd_bagg *g);
size_t pd__bagg_file_bytes(const pd_bagg *g);

void pd__bagg_free(pd_bagg *g);

struct pd_tsdb;
/* The maintenance round's part (db.c): for each block without its
 * aggregates in memory, load the file, or build and write it; publishes
 * hblock.agg. Stops after about budget_ms of building; returns true when
 * blocks are left for the next round. Errors are logged (the block is then
 * read by decoding). */
bool pd__bagg_maintain(struct pd_tsdb *s, int64_t budget_ms);

#endif
