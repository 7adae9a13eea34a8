/*
 * storage/tsdb/headsnap_int.h — the head snapshot: the head's decomposed
 * state written at a clean close and adopted at the next open, so that no
 * head profile is read from the WAL after a restart (design: top of
 * headsnap.c; layout: docs/format/head_snapshot.md). Private to
 * src/storage/tsdb.
 */
#ifndef PD_STORAGE_TSDB_HEADSNAP_INT_H
#define PD_STORAGE_TSDB_HEADSNAP_INT_H

#include <stddef.h>
#include <stdint.h>
#include "base/error.h"

#define PD_HEADSNAP_NAME "head.snapshot" /* PATH/head.snapshot (+ ".tmp" while written) */

typedef struct pd_headsnap pd_headsnap; /* a parsed snapshot */
struct pd_tsdb;

/* Parses a whole snapshot file p[0..len) (untrusted: any byte may be
 * wrong): checks magic, version, both crc32c and every length and count,
 * and decodes its symbol tables (every reference checked). *out: free with
 * pd__headsnap_free. Group encodings are not decoded here (a reader that
 * meets a bad one gets PD_ECORRUPT from pd__hmem_read). Errors:
 * PD_ECORRUPT (err names what and the file offset), PD_ENOMEM. */
int pd__headsnap_parse(const uint8_t *p, size_t len, pd_headsnap **out /* OUT */, pd_err *err);
/* Decodes every group of h against its symbol table (what readers would
 * do profile by profile): `profd tsdb check`-style verification and the
 * fuzz target. 0, PD_ECORRUPT (err: the series and group), PD_ENOMEM. */
int pd__headsnap_verify(const pd_headsnap *h, pd_err *err);
/* Frees a parsed snapshot (NULL is a no-op). */
void pd__headsnap_free(pd_headsnap *h);
/* Positions of h that name a WAL record (profiles it holds). */
uint64_t pd__headsnap_profiles(const pd_headsnap *h);

/* At open, before the WAL is opened: removes PATH/head.snapshot.tmp (a
 * close killed while writing), reads and parses PATH/head.snapshot and
 * checks that the WAL still ends where it ended when the snapshot was
 * written; removes the file in every case. *out: the snapshot to apply, or
 * NULL (none, damaged, stale, unreadable: logged and counted in
 * profd_storage_head_snapshot_loads_total{result}). Never fails the open. */
void pd__headsnap_read(struct pd_tsdb *s, pd_headsnap **out /* OUT */);
/* At open, after the WAL replay and the blocks' load (no reader, no
 * maintenance thread yet): each group position whose WAL record is a
 * WAL-only point of the same series and time becomes that point's place in
 * the head; the rest stays WAL-only. Frees h (NULL: no-op). */
void pd__headsnap_apply(struct pd_tsdb *s, pd_headsnap *h);
/* At close, after the maintenance thread stopped and the WAL was closed:
 * writes PATH/head.snapshot (tmp, fsync, rename, fsync PATH) when the head
 * holds decomposed profiles. Failures are logged and counted
 * (profd_storage_head_snapshot_writes_total{result="failed"}); nothing
 * depends on the file. */
void pd__headsnap_write(struct pd_tsdb *s);

#endif
