/*
 * storage/tsdb/retention.c — deleting whole blocks by age and by size (as
 * the retention part of Prometheus' tsdb/db.go).
 *
 * Retention: blocks whose max time is older than the wall clock minus
 * retention_ms are deleted (never measured against the newest profile: one
 * profile dated in the future would age out every other); then, while
 * blocks + WAL + the series file exceed retention_bytes, the oldest block
 * (by max time, then min time) is deleted — never the newest one: data is
 * given up oldest first, so the newest block goes only with the store's
 * last older data (issue 27). The WAL counts at least at its budget
 * (wal_budget, a quarter of the limit: compact.c cuts the head once the WAL
 * passes it and the checkpoint then frees its segments), so the room the
 * WAL grows into before the next cut is kept free. A block counts with its
 * aggregates file (blockagg.c). Bound, at any instant: limit + one WAL
 * segment (appends while a cut runs) + the block or aggregates file being
 * written (docs/operations.md). Whole blocks only; the head is never
 * touched by retention. A
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

/* Oldest data first: ascending max time, then min time. */
static int cmp_hb_maxt(const void *a, const void *b)
{
    const pd_block_meta *x = pd__block_meta((*(hblock *const *)a)->b),
                        *y = pd__block_meta((*(hblock *const *)b)->b);
    if (x->max_t != y->max_t)
        return x->max_t < y->max_t ? -1 : 1;
    return x->min_t < y->min_t ? -1 : x->min_t > y->min_t;
}

/* Deletes block hb (retention). With maint_mu held; hb has a snapshot ref. */
static void delete_block(pd_tsdb *s, hblock *hb, const char *why)
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

void pd__tsdb_apply_retention(pd_tsdb *s)
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
        pd_tsdb_stats_get(s, &st);
        uint64_t total = st.bytes_on_disk, wal = pd__wal_bytes(s->wal);
        if (wal < s->wal_budget)
            total += s->wal_budget - wal;
        /* oldest data first: by max time (overlapping blocks of one range,
           cut early by size, end in order), and never the newest block */
        qsort(v, n, sizeof *v, cmp_hb_maxt);
        memset(gone, 0, n * sizeof *gone);
        for (size_t i = 0; i < n; i++)
            gone[i] = pd__block_meta(v[i]->b)->max_t < now - s->retention_ms &&
                      s->retention_ms > 0 && now > INT64_MIN + s->retention_ms;
        for (size_t i = 0; i + 1 < n && total > s->retention_bytes; i++) {
            if (gone[i])
                continue;
            uint64_t b = pd__tsdb_hb_bytes(v[i]);
            delete_block(s, v[i], "size");
            gone[i] = true;
            total = total > b ? total - b : 0;
        }
    }
    free(gone);
    pd__tsdb_put_blocks(v, n);
}
