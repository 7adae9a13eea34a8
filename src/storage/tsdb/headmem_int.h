/*
 * storage/tsdb/headmem_int.h — the head's profiles in memory, decomposed as
 * in blocks (DESIGN.md §3): symbols deduplicated in a pd_symbols table
 * (symbols_int.h) and each series' samples in value groups encoded by
 * chunks.c (pd_vgroup_enc, as blocks), so a head read and a block read decode
 * the same structures with the same code (pd__vgroup_decode,
 * pd__dprof_to_profile). Private to src/storage; used by head.c.
 *
 * Layout:
 *   - symbol generations (pd_hsyms): the table profiles are interned into.
 *     A generation is refcounted by the groups encoded against it; head.c
 *     starts a new one after each head cut (pd__hmem_new_generation), so the
 *     symbols of profiles cut into a block are freed together with their last
 *     group, without re-encoding anything.
 *   - per series (pd_hchunks) a list of groups in append order (not time
 *     order: a late profile joins the open group like any other). A group
 *     holds up to PD_HMEM_GROUP profiles or PD_HMEM_GROUP_BYTES of raw
 *     encoding, each profile encoded against the previous one of the group;
 *     the open group is raw (appended to in place); a full group is sealed
 *     and then zstd-compressed (PD_HMEM_ZSTD_LEVEL) by the appender outside
 *     the index lock (pd__hgroup_compress / pd__hgroup_install).
 *   - a profile is addressed by (group id, position in the group); group ids
 *     grow from 0 per series and are never reused.
 *
 * Locking (head.c): everything that changes what readers read of a
 * series' groups or of the symbols (publish, install, drop, new generation,
 * interning new symbols) runs under app_mu + the idx write lock; reads
 * (pd__hmem_read) under the idx read lock; an appender (app_mu) reads and
 * encodes without the idx lock (pd__hmem_prepare). `enc` (the open group's
 * encoder: a copy of its last profile and the value model's state), the
 * symbols' dictionaries and `sealed` are touched by appenders only (app_mu).
 * Decoded groups are cached per thread (one group): a read of the next
 * profile of the same group decodes nothing.
 */
#ifndef PD_STORAGE_TSDB_HEADMEM_INT_H
#define PD_STORAGE_TSDB_HEADMEM_INT_H
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/buf.h"
#include "base/error.h"
#include "pprof/pprof.h"
#include "storage/tsdb/chunks_int.h"

#define PD_HMEM_GROUP 32                 /* profiles per head group (bench/storage_speed) */
#define PD_HMEM_GROUP_BYTES (256u << 10) /* raw bytes that seal a head group */
#define PD_HMEM_ZSTD_LEVEL 3             /* blocks recompress at PD_BLOCK_DEFAULT_LEVEL */

typedef struct pd_hsyms {
    pd_symbols sym; /* writable (interning) */
    size_t refs;    /* groups encoded against it + 1 while current */
    uint64_t gen;   /* unique over the process */
} pd_hsyms;

typedef struct pd_hgroup {
    pd_hsyms *syms;
    uint64_t uid;    /* unique over the process (cache key); changes on undo */
    uint32_t n;      /* profiles encoded */
    uint32_t n_live; /* profiles not dropped */
    bool sealed;     /* no more appends */
    pd_buf raw;      /* the encoding while open or not yet compressed */
    uint8_t *z;      /* zstd frame once compressed (raw released) */
    size_t z_len, raw_len;
    int64_t ts[PD_HMEM_GROUP]; /* ms, of each profile (the decoder needs them) */
    uint8_t *sum;              /* the head's aggregates: all n profiles of the group summed
                                  (a blockagg record, pd__bagg_sum_record), kept up to date
                                  by each append (pd__bagg_fold_record in pd__hmem_prepare,
                                  swapped in by pd__hmem_publish: under the idx lock it
                                  always covers exactly the n profiles readers see); NULL:
                                  none — profiles not in time order, or not one record */
    size_t sum_len;
    uint32_t sum_from; /* the sum covers profiles sum_from..n-1: 0, or after a head cut
                          took the group's first profiles, the rest summed again
                          (compact.c resum_split; set only on groups no append extends) */
} pd_hgroup;

typedef struct pd_hchunks {
    pd_hgroup **g; /* g[i] is group id base + i; NULL once freed */
    size_t n_g, cap_g;
    uint32_t base;
    pd_vgroup_enc enc; /* the open group's encoder: its last profile and value
                          model (appenders only) */
    bool open;         /* the last group takes appends (enc describes it) */
} pd_hchunks;

typedef struct pd_hmem {
    /* cur and its dictionaries: read (pd__hmem_decompose) under sym_rw's
       read lock by appenders that do not hold app_mu yet; changed under its
       write lock (+ app_mu + the idx write lock) */
    pthread_rwlock_t sym_rw;
    pd_hsyms *cur;
    uint64_t bytes;               /* value groups held (raw + compressed), bytes */
    struct pd_bagg_scratch *fold; /* pd__hmem_prepare's sums (appenders only) */
} pd_hmem;

/* A profile decomposed and encoded for a series' chunks, not yet visible
 * to readers (pd__hmem_prepare). */
/* A profile decomposed against a generation by pd__hmem_decompose, before
 * its append takes app_mu. */
typedef struct pd_hmem_dec {
    pd_dprof d;   /* valid when found */
    uint64_t gen; /* the generation d's ids belong to */
    bool found;   /* every symbol of the profile was in that generation */
} pd_hmem_dec;

typedef struct pd_hmem_prep {
    pd_buf enc;   /* its encoding, appended to g's raw bytes when published */
    uint8_t *sum; /* g's running sum with this profile folded in (NULL: none) */
    size_t sum_len;
    pd_hgroup *g;   /* the open group it extends, or a new one (new_group) */
    bool new_group; /* g is private until published */
} pd_hmem_prep;

/* Sets up m with a first symbol generation. 0 or PD_ENOMEM. */
int pd__hmem_init(pd_hmem *m);
/* Frees m's current generation (the series' chunks must be released first). */
void pd__hmem_release(pd_hmem *m);
/* Frees every group of c. */
void pd__hchunks_release(pd_hmem *m, pd_hchunks *c);

/* Locking of an append (the only writer: app_mu held throughout). Readers
 * hold the idx read lock and read the symbol tables' entries, the groups'
 * raw bytes up to raw.len and their first n timestamps; an appender may
 * read anything with app_mu alone, and changes what readers read only
 * under the idx write lock. So an append is split:
 *   pd__hmem_prepare   app_mu; the write lock only for new symbols or more
 *                      room (rare once a series' program is known)
 *   (the WAL write)    app_mu
 *   pd__hmem_publish   app_mu + idx write lock: a copy of the encoded bytes
 *   or pd__hmem_abandon (the WAL write failed)
 *
 * pd__hmem_prepare decomposes p (indexed, validated) against the current
 * generation's symbols — looked up without any lock, interned under idx's
 * write lock when some are new — and encodes it for c's open group (a new
 * group when there is none, when it is sealed or full, or when it belongs
 * to an older generation, or when p's sample types or period type differ
 * from the group's: a group sums into one record), reserving (under idx's
 * write lock) what publishing needs, and folds p into the group's running
 * sum (pd_hgroup.sum) aside, for pd__hmem_publish to swap in. idx NULL: the caller holds the write
 * lock. On success exactly one of pd__hmem_publish and pd__hmem_abandon must follow, with app_mu
 * held since. Errors: PD_ENOMEM, PD_EINVAL (a reference of p that does not resolve), PD_ETOOBIG (p
 * alone has more than PD_VGROUP_MAX_VALUES values); on error nothing is to publish (symbols p
 * interned may stay; the open group may be sealed). */
int pd__hmem_prepare(pd_hmem *m, pd_hchunks *c, const pd_profile *p, int64_t ts_ms,
                     pthread_rwlock_t *idx, pd_hmem_dec *dec, pd_hmem_prep *pp /* OUT */,
                     pd_err *err);
/* The part of pd__hmem_prepare that needs no lock of the store, run by an
 * appender before it takes app_mu so that appends decompose in parallel:
 * p's samples mapped to the current generation's ids, found (not interned)
 * under sym_rw's read lock. dec (OUT) is then given to pd__hmem_prepare,
 * which uses it when dec->found and the generation is still current (else
 * it maps p again), and releases it in every case (also on its error).
 * Without a prepare to follow: pd__hmem_dec_release. Errors: PD_ENOMEM,
 * PD_EINVAL (a reference of p that does not resolve). */
int pd__hmem_decompose(pd_hmem *m, const pd_profile *p, int64_t ts_ms, pd_hmem_dec *dec /* OUT */,
                       pd_err *err);
void pd__hmem_dec_release(pd_hmem_dec *dec);
/* Makes the prepared profile visible at (*gid, *pos) (idx write lock);
 * seals the group when it is full — PD_HMEM_GROUP profiles,
 * PD_HMEM_GROUP_BYTES raw, or PD_VGROUP_GROUP_VALUES values (then
 * pd__hchunks_raw_sealed finds it for compression). Cannot fail. */
void pd__hmem_publish(pd_hmem *m, pd_hchunks *c, pd_hmem_prep *pp, int64_t ts_ms,
                      uint32_t *gid /* OUT */, uint32_t *pos /* OUT */);
/* Drops a prepared profile (app_mu; no idx lock: nothing of it is visible);
 * c's open group is sealed (its encoder has seen the profile). */
void pd__hmem_abandon(pd_hmem *m, pd_hchunks *c, pd_hmem_prep *pp);
/* pd__hmem_prepare (no pd__hmem_decompose before) + pd__hmem_publish with
 * the write lock held by the caller (the replay's decomposition). Errors as
 * pd__hmem_prepare. */
int pd__hmem_append(pd_hmem *m, pd_hchunks *c, const pd_profile *p, int64_t ts_ms,
                    uint32_t *gid /* OUT */, uint32_t *pos /* OUT */, pd_err *err);

/* zstd-compresses a sealed raw group g (which stays readable meanwhile:
 * run it outside the idx lock, under app_mu). *z: malloc'ed frame. 0 or
 * PD_ENOMEM. */
int pd__hgroup_compress(const pd_hgroup *g, uint8_t **z /* OUT */, size_t *z_len /* OUT */);
/* Replaces g's raw encoding by z (takes ownership) (idx write lock). */
void pd__hgroup_install(pd_hmem *m, pd_hgroup *g, uint8_t *z, size_t z_len);
/* The head's aggregates (issue 35): the sum of group g's profiles —
 * decoded (raw or compressed) and summed as a block's aggregates record
 * (blockagg_int.h: pd__bagg_sum_record) — into *sum (malloc'ed; NULL when
 * g has none: its profiles were not appended in time order, or do not sum
 * into one record) — of its profiles from..n-1 only (from < n; every
 * profile is decoded, the value model runs from the first). Derived from the
 * group alone: appends keep the sum running instead (pd__hmem_prepare); this
 * rebuilds it for groups adopted from a head snapshot and for groups a head
 * cut split. No lock of the store needed for a group no one else changes
 * (app_mu, or at open); the idx read lock keeps an appender's compression
 * (pd__hgroup_install) from swapping its bytes meanwhile. 0 or PD_ENOMEM. */
int pd__hgroup_sum(const pd_hgroup *g, uint32_t from, uint8_t **sum /* OUT */,
                   size_t *sum_len /* OUT */);
/* Attaches sum (ownership taken; NULL: none) of g's profiles from..n-1 to g
 * (g->sum_from = from) (idx write lock). */
void pd__hgroup_set_sum(pd_hmem *m, pd_hgroup *g, uint32_t from, uint8_t *sum, size_t sum_len);
/* Group gid of c, or NULL (freed, or no such group). idx read lock. */
const pd_hgroup *pd__hmem_group(const pd_hchunks *c, uint32_t gid);
/* The sealed groups of c still raw (at most n of them into out); returns
 * how many. */
size_t pd__hchunks_raw_sealed(pd_hchunks *c, pd_hgroup **out, size_t n);

/* Rebuilds the profile at (gid, pos) of c into out (release with
 * pd_profile_release); ts_ms must be its timestamp (checked). idx read
 * lock. Errors: PD_ENOTFOUND (no such group, position or timestamp), PD_ECORRUPT (a
 * group that does not decode: a bug, never input), PD_ENOMEM. */
int pd__hmem_read(const pd_hchunks *c, uint32_t gid, uint32_t pos, int64_t ts_ms,
                  pd_profile *out /* OUT */, pd_err *err);

/* The profile at (gid, pos) of c in its decomposed form: *out points into
 * this thread's decoded-group cache and *sym at the generation's symbols
 * it was encoded against; both valid until this thread's next read and
 * while the idx read lock is held (the pushed-down merge, aggregate.c).
 * Errors as pd__hmem_read. */
int pd__hmem_read_dprof(const pd_hchunks *c, uint32_t gid, uint32_t pos, int64_t ts_ms,
                        const pd_dprof **out /* OUT */, const pd_symbols **sym /* OUT */,
                        pd_err *err);

/* Keeps the generation whose table sym is (as pd__hmem_read_dprof gave it)
 * alive after the idx read lock is released, so stack ids read under it
 * stay meaningful across the lock's release (aggregate.c's slices). Call
 * under the idx read lock; the table may only be read under that lock while
 * it is current (appends intern into it). Never fails. */
pd_hsyms *pd__hmem_pin(const pd_symbols *sym);

/* Undoes pd__hmem_pin (any lock or none): the generation is freed if it
 * was its last reference. NULL is ignored. */
void pd__hmem_unpin(pd_hsyms *h);

/* One profile of group gid left the head (cut into a block): the group is
 * freed with its last profile unless it is still open in the current
 * generation (idx write lock). */
void pd__hmem_drop(pd_hmem *m, pd_hchunks *c, uint32_t gid);

/* Starts a new symbol generation: later appends open new groups against it;
 * the old one is freed with its last group (idx write lock). 0 or PD_ENOMEM
 * (then the current one stays). */
int pd__hmem_new_generation(pd_hmem *m);
/* ---- the head snapshot (headsnap.c) ----
 *
 * A generation read back from a head snapshot: sym is a decoded (read-only)
 * table, moved into the generation (*sym is zeroed). It is never current
 * (appends intern into m->cur); it lives while groups adopted against it
 * do. NULL when out of memory (sym is released then). */
pd_hsyms *pd__hmem_adopt_syms(pd_symbols *sym);
/* Frees a generation from pd__hmem_adopt_syms that no group was adopted
 * against (or drops the reference held while adopting). */
void pd__hmem_adopt_done(pd_hsyms *h);
/* Appends a sealed group read back from a head snapshot to c (whose groups
 * the caller is rebuilding: the idx write lock, or no reader yet): n
 * profiles at ts[0..n) (n <= PD_HMEM_GROUP), n_live of them still in the
 * head, encoded against h; the encoding is raw (z NULL: raw[0..raw_len)) or
 * a zstd frame z[0..z_len) of raw_len bytes. Takes ownership of raw
 * (malloc'ed with raw_len + 1 bytes: pd_buf's NUL) and z (malloc'ed), also
 * on failure. *gid: the group's id. 0 or PD_ENOMEM. */
int pd__hmem_adopt_group(pd_hmem *m, pd_hchunks *c, pd_hsyms *h, uint32_t n, uint32_t n_live,
                         const int64_t *ts, uint8_t *raw, size_t raw_len, uint8_t *z, size_t z_len,
                         uint32_t *gid /* OUT */);

/* Symbol generations alive in this process (all stores): one per open store
 * plus those still held by groups not yet cut. */
uint64_t pd__hmem_generations(void);
/* Strings, stacks and locations interned in the current generation. */
size_t pd__hmem_symbols_count(const pd_hmem *m);

#endif
