/*
 * storage/tsdb/wal_int.h — the write-ahead log of the embedded store: numbered
 * segment files of CRC-framed records (layout: top of wal.c and
 * docs/format/wal.md). Private to src/storage.
 *
 * The WAL knows framing, segments, fsync and replay; it does not know what a
 * record's payload means (head.c does). Record types are listed here so that
 * a garbage type byte is recognised as corruption.
 *
 * Thread-safety: pd__wal_append may be called from several threads (it
 * serialises on an internal mutex); pd__wal_read from any thread at any
 * time, concurrently with appends. pd__wal_open/close are single-threaded.
 */
#ifndef PD_STORAGE_TSDB_WAL_INT_H
#define PD_STORAGE_TSDB_WAL_INT_H

#include <stddef.h>
#include <stdint.h>
#include "base/buf.h"
#include "base/error.h"
#include "storage/storage.h"

#define PD_WAL_MAGIC "PDWAL"
/* Segment (and series file) header version written: 2 = a segment that is
 * not the newest ends with an END record naming the next one (so a lost
 * newest segment or a cut at a record boundary shows); 1 (still read): no
 * END records. */
#define PD_WAL_VERSION 2
#define PD_WAL_SEG_HDR 8               /* magic 5 + version 1 + reserved 2 */
#define PD_WAL_REC_HDR 9               /* type 1 + length 4 + crc32c 4 */
#define PD_WAL_MAX_RECORD (256u << 20) /* payload cap, bytes: bigger is corruption */
/* PATH/wal/synced: what the newest segment durably held (issue 27):
 * "PDWS" | segment u32 LE | size u64 LE | crc32c u32 LE of the 16 bytes
 * before it. Rewritten after each background fsync (policy batch), at most
 * every batch window after an fsync'ed append (policy always), at a roll
 * and at close. A newest segment found shorter than it lost acknowledged
 * records (a truncation, not a torn append): docs/format/wal.md. */
#define PD_WAL_SYNCED_NAME "synced"
#define PD_WAL_SYNCED_BYTES 20

/* Reads dir's marker: true and *seg, *size when it verifies. */
bool pd__wal_synced_read(const char *dir, uint32_t *seg /* OUT */, uint64_t *size /* OUT */);

/* Record types. 0 is never valid (a zero-filled tail is not a record).
 * END (payload: u32 LE number of the next segment) is written by the WAL
 * itself as the last record of a segment once the next one exists; it is
 * never passed to the replay callback. CHECKPOINT (payload: u32 LE the
 * first segment the WAL must still have) is the first record of PATH/series
 * (replay.c), never of a segment. */
enum {
    PD_WAL_REC_SERIES = 1,
    PD_WAL_REC_PROFILE = 2,
    PD_WAL_REC_END = 3,
    PD_WAL_REC_MAX = 3, /* in a segment */
    PD_WAL_REC_CHECKPOINT = 4,
};

typedef struct pd_wal pd_wal;

typedef struct pd_wal_options {
    const char *dir;       /* the wal directory (must exist) */
    size_t segment_bytes;  /* roll to a new segment past this size; > PD_WAL_SEG_HDR */
    pd_fsync_policy fsync; /* ALWAYS: fdatasync in append; BATCH: at most every batch_ms
                              (in append or by a background thread); NEVER: the OS */
    int64_t batch_ms;      /* > 0 */
} pd_wal_options;

/* Called by pd__wal_open for every intact record, in log order. seg/off
 * locate the record (offset of its header in the segment file); payload is
 * borrowed for the call. Return 0 to go on, or a negative code to abort the
 * open with that code (e.g. PD_ENOMEM). A payload the callback finds
 * malformed is its own business (log, count, return 0). */
typedef int (*pd_wal_replay_fn)(void *ctx, uint32_t seg, uint64_t off, uint8_t type,
                                const uint8_t *payload, uint32_t len);

/* Opens the log in o->dir: replays every segment in number order through fn
 * (segment numbers must be contiguous: a gap is logged with the first
 * missing segment's name, counted in profd_storage_corruptions_total and in
 * pd__wal_gaps, and replay goes on after it; likewise, for version-2
 * segments, an older segment that does not end with its END record (cut at
 * a record boundary) and a newest segment that does (the segment after it
 * was deleted) — except the crash window of a roll, an older segment without
 * END followed by an empty newest one, which gets its END written now),
 * skipping a corrupt record to the next valid one (pd__wal_resync; logged
 * with file and offset, counted), truncating a torn or corrupt tail of the
 * last segment (no valid record after it; logged with file and offset),
 * skipping the rest of an earlier segment with no valid record after the
 * damage, and a segment with a bad header (logged, counted in
 * profd_storage_corruptions_total). Then opens the append target: the end of
 * the last segment if it is intact and not full, else a new segment.
 * Errors: -errno (err names the file), PD_ENOMEM, or fn's code. */
int pd__wal_open(const pd_wal_options *o, pd_wal_replay_fn fn, void *ctx, pd_wal **out /* OUT */,
                 pd_err *err);

/* Where the next record that verifies starts in buf[from..len) (a WAL
 * segment's or the series file's bytes): the first offset p >= from holding
 * a record header of a known type (series_file: SERIES only) whose length
 * fits in buf and whose CRC-32C matches its payload; len when none. Records
 * carry no sync marker: the CRC is what finds them after damage (a false
 * match needs a 32-bit CRC collision on top of the type and length
 * filters). O(len) tries, each CRC only over candidates that pass the
 * filters. */
size_t pd__wal_resync(const uint8_t *buf, size_t len, size_t from, bool series_file);

/* Appends one framed record (pd__wal_frame) to buf. Errors: PD_ETOOBIG
 * (payload over PD_WAL_MAX_RECORD), PD_ENOMEM. */
int pd__wal_frame(pd_buf *buf, uint8_t type, const uint8_t *payload, size_t len);

/* Writes recs[0..len) — one or more framed records — with one write(2) at
 * the end of the current segment (rolling first when it would pass
 * segment_bytes and the segment is not empty), then fsyncs per policy.
 * *seg and *off tell where recs[0] landed. On failure the segment is cut back
 * to its previous size, so no partial record stays behind.
 * Errors: -errno (err names the file), PD_ECLOSED (an earlier failure could
 * not be cut back; the log refuses further appends). */
int pd__wal_append(pd_wal *w, const uint8_t *recs, size_t len, uint32_t *seg /* OUT */,
                   uint64_t *off /* OUT */, pd_err *err);

/* Reads the record at (seg, off) whose payload length is `len`, checks its
 * type, length and CRC, and appends the payload to out.
 * Errors: PD_ECORRUPT (err names file and offset), PD_ENOTFOUND (no such
 * segment), -errno, PD_ENOMEM. */
int pd__wal_read(pd_wal *w, uint32_t seg, uint64_t off, uint8_t type, uint32_t len, pd_buf *out,
                 pd_err *err);

/* Gaps in the segment numbers found by pd__wal_open. */
size_t pd__wal_gaps(const pd_wal *w);
/* Sum of the segment file sizes, bytes. */
uint64_t pd__wal_bytes(pd_wal *w);
/* Number of segment files (also the skipped ones). */
size_t pd__wal_segments(pd_wal *w);
/* Writes "DIR/NNNNNNNN" for segment seg into buf (n bytes). */
void pd__wal_seg_name(const pd_wal *w, uint32_t seg, char *buf, size_t n);
/* fdatasync of the current segment. 0 or -errno. */
int pd__wal_sync(pd_wal *w);
/* Number of the current (last, append target) segment. */
uint32_t pd__wal_current(pd_wal *w);
/* Checkpoint: closes and unlinks every segment numbered below seg, except
 * the current one, oldest first, then fsyncs the directory. A reader
 * holding a (seg, off) of a removed segment gets PD_ENOTFOUND from
 * pd__wal_read. Errors: -errno (err names the file; segments before it are
 * gone, the rest stay). */
int pd__wal_remove_before(pd_wal *w, uint32_t seg, pd_err *err);
/* Stops the flusher, fsyncs, closes every file, frees. NULL is a no-op. */
void pd__wal_close(pd_wal *w);

#endif
