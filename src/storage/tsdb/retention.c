/*
 * storage/tsdb/retention.c — deleting whole blocks by age and by size (as
 * the retention part of Prometheus' tsdb/db.go).
 *
 * Retention: blocks whose max time is older than the wall clock minus
 * retention_ms are deleted (never measured against the newest profile: one
 * profile dated in the future would age out every other); then, while
 * blocks + WAL exceed retention_bytes, the oldest block (by min time) is
 * deleted. Whole blocks only; the head is never touched by retention. A
 * deleted block leaves the list under app_mu + the idx write lock; its
 * directory is removed at once and the block closed by its last reader.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/crc32c.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/time.h"
#include "base/varint.h"
#include "storage/storage.h"
#include "storage/tsdb/block_int.h"
#include "storage/tsdb/head_int.h"
#include "storage/tsdb/headmem_int.h"
#include "storage/tsdb/postings_int.h"
#include "storage/tsdb/wal_int.h"
#include "storage/tsdb/warnings_int.h"
#include "storage/tsdb/db_int.h"

/* Deletes block hb (retention). With maint_mu held; hb has a snapshot ref. */
static void delete_block(pd_storage *s, hblock *hb, const char *why)
{
    const pd_block_meta *m = pd__block_meta(hb->b);
    pd_log_info("storage: retention deletes a block", "block=%s mint=%lld maxt=%lld reason=%s",
                m->ulid, (long long)m->min_t, (long long)m->max_t, why);
    pthread_mutex_lock(&s->app_mu);
    pthread_rwlock_wrlock(&s->idx);
    pd__tsdb_unlink_block(s, hb);
    pthread_rwlock_unlock(&s->idx);
    pthread_mutex_unlock(&s->app_mu);
    pd__tsdb_remove_block_dir(pd__block_dir(hb->b));
    pd__tsdb_hb_put(hb); /* the store's reference */
    __atomic_add_fetch(&s->n_ret_deletes, 1, __ATOMIC_RELAXED);
    pd_metrics_add("profd_storage_retention_deletes_total", NULL, 1);
}

void pd__tsdb_apply_retention(pd_storage *s)
{
    hblock **v;
    size_t n;
    if ((!s->retention_ms || s->retention_ms < 0) && !s->retention_bytes)
        return;
    /* the wall clock, never the newest profile: one profile dated in the
       future must not age every other one out (issue 19) */
    int64_t now = s->clock();
    if (pd__tsdb_snapshot_blocks(s, &v, &n) < 0)
        return;
    qsort(v, n, sizeof *v, pd__tsdb_cmp_hb_mint);
    bool *gone = calloc(n ? n : 1, sizeof *gone);
    if (!gone) {
        pd__tsdb_put_blocks(v, n);
        return;
    }
    if (s->retention_ms > 0 && now > INT64_MIN + s->retention_ms)
        for (size_t i = 0; i < n; i++)
            if (pd__block_meta(v[i]->b)->max_t < now - s->retention_ms) {
                delete_block(s, v[i], "time");
                gone[i] = true;
            }
    if (s->retention_bytes) {
        pd_storage_stats st;
        pd_storage_stats_get(s, &st);
        uint64_t total = st.bytes_on_disk;
        for (size_t i = 0; i < n && total > s->retention_bytes; i++) {
            if (gone[i])
                continue;
            const pd_block_meta *m = pd__block_meta(v[i]->b);
            uint64_t b = m->meta_bytes + m->index_bytes + m->symbols_bytes + m->chunks_bytes;
            delete_block(s, v[i], "size");
            gone[i] = true;
            total = total > b ? total - b : 0;
        }
    }
    free(gone);
    pd__tsdb_put_blocks(v, n);
}

