/*
 * storage/tsdb/db_int.h — the types the files of the embedded store share
 * (db.c, head.c, replay.c, compact.c, retention.c, querier.c) and their
 * internal functions, grouped by the file that defines them. Private to
 * src/storage/tsdb. The design: top of db.c and of each file.
 */
#ifndef PD_STORAGE_TSDB_DB_INT_H
#define PD_STORAGE_TSDB_DB_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "storage/storage.h"
#include "storage/tsdb/block_int.h"
#include "storage/tsdb/head_int.h"
#include "storage/tsdb/headmem_int.h"
#include "storage/tsdb/postings_int.h"
#include "storage/tsdb/tsdb.h"
#include "storage/tsdb/wal_int.h"

#define MAX_SAMPLE_TYPES 1024 /* per profile, at append and replay */
#define MAX_STR (1u << 20)    /* a label or sample type string read back */

typedef struct typeset {
    size_t n;
    pd_sample_type_desc *d; /* n; strings malloc'ed */
} typeset;

typedef struct point {
    int64_t ts;
    uint64_t off;      /* record header offset in the segment */
    uint32_t seg;      /* segment number */
    uint32_t len;      /* record payload length */
    uint32_t body_off; /* body offset inside the payload */
    uint32_t body_len;
    uint32_t tset;      /* index into series.tsets */
    uint32_t tot;       /* index into series.totals (tsets[tset].n values) */
    uint32_t gid, gpos; /* the decomposed profile: group and position (headmem_int.h);
                           gid WAL_ONLY: replayed, not decomposed yet (read from the WAL) */
} point;

#define WAL_ONLY UINT32_MAX
/* aggregate.c: default slice of the head walk under the idx read lock */
#define HEAD_SLICE_NS ((int64_t)1000 * 1000)

/* An open block of the store. refs: 1 for the store's list (s->blocks) plus
 * one per reader doing I/O on it outside the idx lock (hb_get/hb_put); the
 * last put closes it. A block removed by compaction or retention leaves the
 * list (and every bref) under app_mu + the idx write lock; its directory is
 * deleted at once (an open fd keeps its chunks readable) and the pd_block
 * closed when its last reader is done. */
typedef struct hblock {
    pd_block *b;
    int refs;            /* __atomic */
    unsigned char *bad;  /* per series id: non-zero once a read found its data
                            damaged (__atomic; reported once, then skipped by
                            select and read_points); 2 while why[id] is set, then 1 */
    char **why;          /* per series id: the first error (file and offset) */
    struct pd_bagg *agg; /* its aggregates (blockagg_int.h), NULL: none (yet);
                            published once by the maintenance thread (__atomic) */
    int agg_tried;       /* __atomic: agg loaded or built (or that failed) */
    uint64_t agg_bytes;  /* __atomic: bytes of DIR/aggregates on disk (0: none);
                            counted by --storage.retention.size */
} hblock;

/* Bytes the block takes on disk: its meta, index, symbols and chunks files
 * plus its aggregates file (what --storage.retention.size counts). */
uint64_t pd__tsdb_hb_bytes(const hblock *hb);

/* Records the size of hb's aggregates file (stat; 0 when there is none). */
void pd__tsdb_hb_stat_agg(hblock *hb);

/* A series' part in one block. */
typedef struct bref {
    hblock *hb;
    uint32_t id;        /* series id in b */
    int64_t mint, maxt; /* of the series in b */
    uint64_t n;         /* profiles of the series in b */
} bref;

/* A series lives from its first append (or replay) until the store is
 * closed: it is never freed nor removed from by_ref while the store is
 * open, and its labels and each type set (tsets[i].d and its strings) never
 * change once made (tsets only grows). pd_tsdb_select_latest lends them to
 * its callers on that promise: a change that forgets series (e.g. ones
 * retention emptied) must keep them until no such set is alive. */
typedef struct series {
    uint64_t ref, hash;
    bref *brefs; /* ascending mint; changed under the idx write lock */
    size_t n_brefs, cap_brefs;
    point *cpts; /* ascending ts: profiles already in a block whose WAL record still
                    exists (raw bytes of read_profile); pruned at checkpoints */
    size_t n_cpts, cap_cpts;
    pd_labels labels;
    struct series *hnext;
    point *pts;
    size_t n_pts, cap_pts;
    typeset *tsets;
    size_t n_tsets, cap_tsets;
    int64_t *totals;
    size_t n_tot, cap_tot;
    pd_hchunks hc;       /* the head profiles, decomposed */
    size_t n_wal_only;   /* points with gid WAL_ONLY */
    uint32_t series_seg; /* the WAL segment holding this series' latest SERIES record
                            (0: none): an append into another one logs it again, so
                            every segment names the series its PROFILEs use (issue 27) */
} series;

struct pd_tsdb {
    char *path;
    char waldir[4096];
    pd_pprof_limits limits;
    int lock_fd;
    pd_wal *wal;
    uint32_t series_first_seg; /* PATH/series' CHECKPOINT: the first WAL segment the
                                  last checkpoint kept (0: unknown) */

    pthread_mutex_t app_mu;
    pthread_rwlock_t idx;
    pthread_rwlock_t cut_rw; /* held for reading by pd_tsdb_aggregate from its block
                                snapshot to the end of its head walk (which releases
                                idx between slices), for writing by a head cut's swap:
                                no profile moves from the head into a block the
                                aggregation did not see. Order: cut_rw, app_mu, idx */
    pd_hmem hm;              /* symbols and value groups of the head (headmem_int.h) */
    pd_postings post;        /* label pair -> refs of every series (postings_int.h) */
    uint64_t n_wal_only;     /* head points not decomposed yet (replayed) */
    bool head_ready;         /* __atomic: n_wal_only reached 0 since the open (pd_tsdb_ready) */
    bool snapshot;           /* write PATH/head.snapshot at close (headsnap.c) */
    bool opened;             /* the open succeeded (close may write the snapshot) */
    bool post_broken;        /* out of memory adding to post: select scans every series */
    series **by_ref;         /* ascending ref */
    size_t n_series, cap_series;
    series **buckets; /* n_buckets, power of two */
    size_t n_buckets;
    uint64_t next_ref;
    uint64_t n_profiles;
    uint64_t replay_corrupt; /* malformed payloads met on replay */

    hblock **blocks; /* changed under app_mu + idx write lock */
    size_t n_blocks, cap_blocks;
    int64_t block_ms;        /* <= 0: no head cut */
    int64_t cut_retry_after; /* monotonic ms: no cut attempt before */
    uint64_t n_cuts;         /* __atomic: stats read it under the idx read lock only */
    const char *replay_file; /* set while PATH/series is replayed */
    struct orphan {          /* replayed PROFILE records of a ref not known yet: */
        uint32_t seg, len;   /* resolved after the whole WAL is read (a later */
        uint64_t off;        /* segment's SERIES record; issue 27) */
    } * orphans;
    size_t n_orphans, cap_orphans;
    bool replay_final;     /* pd__tsdb_replay_orphans: unknown refs are damage now */
    bool hr_valid, hr_any; /* head_range's cache (under app_mu) */
    int64_t hr_min, hr_max;

    /* maintenance (compaction, retention): rounds serialised by maint_mu */
    pthread_mutex_t maint_mu;
    int64_t retention_ms;       /* <= 0: no time retention (nor lower bound on appends) */
    int64_t agg_slice_ns;       /* aggregate.c: head walk slices (storage.h) */
    uint64_t n_agg_slices;      /* their count (atomic) */
    int agg_workers;            /* aggregate.c: block walk threads (storage.h), >= 1 */
    uint64_t n_agg_parallel;    /* walks that used more than one (atomic) */
    uint64_t n_agg_built;       /* block aggregates built (blockagg.c, atomic) */
    uint64_t n_agg_records;     /* block parts a merge added as one record (atomic) */
    uint64_t n_agg_head_groups; /* sealed head groups a merge added as their sum (atomic) */
    uint64_t n_agg_head_open;   /* open head groups a merge added as their running sum */
    int64_t grace_ms;           /* <= 0: no upper bound on appends */
    int64_t (*clock)(void);     /* wall clock, Unix ms */
    uint64_t retention_bytes;   /* 0: no size retention */
    uint64_t wal_budget;        /* with retention_bytes: WAL bytes past which the head is
                                   cut early (retention_bytes / 4; compact.c) */
    uint64_t wal_hard;          /* with retention_bytes and the maintenance thread: WAL
                                   bytes past which appends wait for the cut's
                                   checkpoint (wal_budget + one segment; head.c) */
    pthread_cond_t wal_cv;      /* with app_mu: broadcast after each checkpoint */
    int64_t maint_ms;           /* <= 0: no thread */
    uint64_t n_compactions, n_ret_deletes; /* __atomic */
    int64_t compact_retry_after;           /* monotonic ms */
    pthread_t maint_thread;
    bool maint_running;
    pthread_mutex_t stop_mu;
    pthread_cond_t stop_cv;
    bool stopping;
    bool kicked; /* a head cut is due: run now (under stop_mu) */
};

typedef struct reader {
    const uint8_t *p;
    size_t len, pos;
    bool bad;
} reader;

typedef pd_profile_rec profile_rec;

/* ---- db.c ---- */
int pd__tsdb_check_time(int64_t retention_ms, int64_t grace_ms, int64_t now, int64_t ts,
                        pd_err *err);
void pd__tsdb_update_gauges(pd_tsdb *s);
int64_t pd__tsdb_now_mono_ms(void);
void pd__tsdb_hb_get(hblock *hb);
void pd__tsdb_hb_put(hblock *hb);
bool pd__tsdb_hb_bad(const hblock *hb, uint32_t id);
void pd__tsdb_hb_damaged(hblock *hb, uint32_t id, const pd_err *e);
void pd__tsdb_hb_warn_known(const hblock *hb, uint32_t id, uint64_t ref);
void pd__tsdb_hb_read_failed(hblock *hb, uint32_t id, int rc, const pd_err *e);
int pd__tsdb_add_block(pd_tsdb *s, pd_block *b, bool *added);
void pd__tsdb_unlink_block(pd_tsdb *s, hblock *hb);
void pd__tsdb_remove_block_dir(const char *dir);
bool pd__tsdb_blocks_have(const series *se, int64_t ts);
void pd__tsdb_prune_stash(series *se, uint32_t keep);
size_t pd__tsdb_drop_points(pd_tsdb *s, series *se, const int64_t *ts, size_t n);
int pd__tsdb_write_full_fd(int fd, const uint8_t *p, size_t n);
int pd__tsdb_fsync_path(const char *path);
/* Takes the store's lock: an exclusive flock(2) on DIR/lock (created if
 * missing), held until *fd_out is closed. The server holds it while the store
 * is open (pd_tsdb_open); the offline tools that write into a store
 * (`profd tsdb import`, `tsdb repair`) take it too, so neither writes under a
 * running server. Returns 0; PD_EEXIST when another process holds it (err
 * names the store and the lock file); -errno when DIR/lock cannot be opened;
 * PD_EINVAL when the path is too long. */
int pd__tsdb_lock_store(const char *dir, int *fd_out /* OUT */, pd_err *err);
int pd__tsdb_load_blocks(pd_tsdb *s, bool *added, pd_err *err);
void pd__tsdb_kick_maintenance(pd_tsdb *s);

/* ---- head.c ---- */
void pd__tsdb_series_free(pd_tsdb *s, series *se);
series *pd__tsdb_find_by_ref(const pd_tsdb *s, uint64_t ref);
series *pd__tsdb_find_by_labels(const pd_tsdb *s, const pd_labels *ls, uint64_t hash);
int pd__tsdb_reserve_series(pd_tsdb *s);
void pd__tsdb_insert_series(pd_tsdb *s, series *se);
size_t pd__tsdb_lower_bound(const series *se, int64_t t);
bool pd__tsdb_has_ts(const series *se, int64_t ts);
/* The index of se's sample-type set (types[k], units[k]), or -1 when se has
 * none such (reads only: app_mu or the idx lock). */
int pd__tsdb_find_tset(const series *se, size_t k, const char *const *types, const size_t *tlen,
                       const char *const *units, const size_t *ulen);
int pd__tsdb_intern_tset(series *se, size_t k, const char *const *types, const size_t *tlen,
                         const char *const *units, const size_t *ulen, uint32_t *idx /* OUT */);
int pd__tsdb_reserve_point(series *se, size_t k);
/* True when se has room for one more point with k totals (no
 * pd__tsdb_reserve_point needed). */
bool pd__tsdb_has_room(const series *se, size_t k);
void pd__tsdb_insert_point(series *se, point p, const int64_t *totals, size_t k);
int pd__tsdb_buf_put_u64le(pd_buf *b, uint64_t v);
int pd__tsdb_buf_put_str(pd_buf *b, const char *s, size_t len);
uint64_t pd__tsdb_rd_u64le(reader *r);
uint64_t pd__tsdb_rd_varint(reader *r);
const char *pd__tsdb_rd_str(reader *r, size_t *len);

/* ---- replay.c ---- */
void pd__tsdb_compress_sealed(pd_tsdb *s, series *se);
void pd__tsdb_seg_name(const pd_tsdb *s, uint32_t seg, char *buf, size_t n);
int pd__tsdb_replay_fn(void *ctx, uint32_t seg, uint64_t off, uint8_t type, const uint8_t *payload,
                       uint32_t len);
/* Writes PATH/series: a CHECKPOINT record naming first_seg (the first WAL
 * segment kept; 0 = none written), then every series. */
int pd__tsdb_write_series_file(pd_tsdb *s, uint32_t first_seg, pd_err *err);
int pd__tsdb_read_series_file(pd_tsdb *s);
/* After the WAL replay: replays the PROFILE records whose ref was unknown
 * when met (their SERIES record came later: the append that rolled a
 * segment, or the record was damaged and a later segment names the series
 * again); one still unknown is logged and counted. Frees the list. 0 or
 * PD_ENOMEM. */
int pd__tsdb_replay_orphans(pd_tsdb *s);
bool pd__tsdb_decompose_replayed(pd_tsdb *s, int64_t budget_ms);

/* ---- compact.c ---- */
void pd__tsdb_head_range_add(pd_tsdb *s, int64_t ts);
bool pd__tsdb_cut_due(pd_tsdb *s, int64_t *start /* OUT */);
void pd__tsdb_maybe_cut(pd_tsdb *s, bool locked);
bool pd__tsdb_newest_ts(pd_tsdb *s, int64_t *out);
int pd__tsdb_snapshot_blocks(pd_tsdb *s, hblock ***out, size_t *n);
void pd__tsdb_put_blocks(hblock **v, size_t n);
int pd__tsdb_cmp_hb_mint(const void *a, const void *b);
bool pd__tsdb_plan_compaction(const pd_tsdb *s, hblock **v, size_t n, int64_t newest, size_t *first,
                              size_t *count);
int pd__tsdb_compact_blocks(pd_tsdb *s, hblock **v, size_t n, size_t *bad_src, pd_err *err);

/* ---- retention.c ---- */
void pd__tsdb_apply_retention(pd_tsdb *s);

/* ---- querier.c ---- */
int pd__tsdb_wal_profile(pd_tsdb *s, uint64_t ref, const point *pt, pd_profile *out, pd_buf *raw,
                         pd_err *err);

#endif
