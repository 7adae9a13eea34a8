/*
 * storage/tsdb/tsdb_repair.c — `profd tsdb repair DIR` (tsdb_cli_int.h):
 * rewrites every damaged block of the store at DIR from what verifies, keeps
 * the originals aside in DIR/repair-<UTC time>/, and reports what was
 * dropped. Takes the store's lock (DIR/lock): a running profd must be
 * stopped first.
 *
 * A block is damaged when pd__block_check fails or its meta.json says
 * compaction.failed. Such a block is opened as the store opens it (a
 * missing or bad meta.json is rebuilt from the other files); every series
 * whose time chunk reads gives its profiles one by one, each one that reads
 * and rebuilds is written into a new block (same compaction level, the old
 * ULID as its compaction source), the rest is reported as dropped. The new
 * block is durable before the original moves aside, so a crash in between
 * leaves the new block naming the old as a source: the next open removes
 * the old one and nothing is served twice. A format-2 block whose index
 * entries or symbols frames are partly damaged opens without them: the
 * series and profiles they held are reported as dropped, the rest is kept.
 * A block that does not open at all (format 1 index or symbols damaged, a
 * symbols directory or index header damaged, chunks missing) is moved aside
 * whole.
 *
 * The WAL and DIR/series are not rewritten: open replays what verifies and
 * skips the rest (logged, counted); `tsdb check` still names their damage.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/labels.h"
#include "storage/tsdb/block_int.h"
#include "storage/tsdb/db_int.h"
#include "storage/tsdb/tsdb_cli_int.h"

static bool is_ulid(const char *s)
{
    if (strlen(s) != 26)
        return false;
    for (; *s; s++)
        if (!strchr("0123456789ABCDEFGHJKMNPQRSTVWXYZ", *s))
            return false;
    return true;
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) ? -errno : 0;
    close(fd);
    return rc;
}

typedef struct repair {
    const char *dir;
    char aside[4200]; /* DIR/repair-<time>, created on first use */
    unsigned long kept, dropped, rewritten, moved;
} repair;

/* Moves block `name` into the repair directory. 0 or -errno (printed). */
static int move_aside(repair *r, const char *name)
{
    if (!r->aside[0]) {
        char ts[32];
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(ts, sizeof ts, "%Y%m%dT%H%M%SZ", &tm);
        snprintf(r->aside, sizeof r->aside, "%s/repair-%s", r->dir, ts);
        if (mkdir(r->aside, 0755) < 0 && errno != EEXIST) {
            int e = -errno;
            fprintf(stderr, "cannot create %s: %s\n", r->aside, strerror(-e));
            r->aside[0] = 0;
            return e;
        }
    }
    char from[4400], to[4400];
    snprintf(from, sizeof from, "%s/%s", r->dir, name);
    snprintf(to, sizeof to, "%s/%s", r->aside, name);
    if (rename(from, to) < 0) {
        int e = -errno;
        fprintf(stderr, "cannot move %s to %s: %s\n", from, to, strerror(-e));
        return e;
    }
    fsync_dir(r->aside);
    fsync_dir(r->dir);
    r->moved++;
    printf("moved %s aside to %s\n", from, to);
    return 0;
}

/* Rewrites the damaged block DIR/name. 0, or 1 on a runtime failure. */
static int repair_block(repair *r, const char *name, const char *why)
{
    char bdir[4400];
    snprintf(bdir, sizeof bdir, "%s/%s", r->dir, name);
    printf("damaged %s: %s\n", bdir, why);
    pd_block *b = NULL;
    pd_err err;
    pd_err_clear(&err);
    int rc = pd__block_open(bdir, &b, &err);
    if (rc == PD_ENOMEM) {
        fprintf(stderr, "%s: out of memory\n", bdir);
        return 1;
    }
    if (rc < 0) {
        printf("dropped block %s: nothing reads without its index and symbols (%s)\n", bdir,
               err.msg[0] ? err.msg : pd_strerror(rc));
        return move_aside(r, name) ? 1 : 0;
    }
    if (pd__block_section_damage(b)) /* format 2: what did not verify is lost */
        printf("dropped what %s/index and %s/symbols do not verify: %s\n", bdir, bdir,
               pd__block_section_damage(b));
    const pd_block_meta *m = pd__block_meta(b);
    char src[1][27];
    memcpy(src[0], m->ulid, 27);
    pd_block_writer_opts o = {.level = m->level, .sources = (const char(*)[27])src,
                              .n_sources = 1, .stack_format = m->stack_format};
    pd_block_writer *w = NULL;
    if (pd__block_writer_new(&o, &w) < 0) {
        pd__block_close(b);
        fprintf(stderr, "%s: out of memory\n", bdir);
        return 1;
    }
    unsigned long kept = 0, dropped = 0;
    pd_buf lb;
    pd_buf_init(&lb, 4096);
    int fail = 0;
    for (uint32_t id = 0; id < pd__block_n_series(b) && !fail; id++) {
        const pd_labels *ls = pd__block_series_labels(b, id);
        pd_buf_reset(&lb);
        pd_labels_format(ls, &lb);
        int64_t mn, mx;
        uint64_t np, tb, vb;
        pd__block_series_info(b, id, &mn, &mx, &np, &tb, &vb);
        pd_points pts;
        pd_err_clear(&err);
        if ((rc = pd__block_read_points(b, id, INT64_MIN, INT64_MAX, &pts, &err)) < 0) {
            if (rc == PD_ENOMEM) {
                fail = 1;
                break;
            }
            printf("dropped series %s: %llu profiles between %lld and %lld ms (%s)\n",
                   lb.data ? lb.data : "", (unsigned long long)np, (long long)mn, (long long)mx,
                   err.msg);
            dropped += np;
            continue;
        }
        if (pts.n < np) {
            printf("dropped series %s: %llu profiles its time chunk does not list\n",
                   lb.data ? lb.data : "", (unsigned long long)(np - pts.n));
            dropped += np - pts.n;
        }
        for (size_t i = 0; i < pts.n && !fail; i++) {
            pd_profile p;
            pd_err_clear(&err);
            rc = pd__block_read_profile(b, id, pts.v[i].ts_ms, &p, &err);
            if (rc == 0) {
                rc = pd__block_writer_add(w, ls, pts.v[i].ts_ms, &p, &err);
                pd_profile_release(&p);
                if (rc == 0) {
                    kept++;
                    continue;
                }
                if (rc == PD_ENOMEM) {
                    fail = 1;
                    break;
                }
            } else if (rc == PD_ENOMEM) {
                fail = 1;
                break;
            }
            printf("dropped profile %s at %lld ms: %s\n", lb.data ? lb.data : "",
                   (long long)pts.v[i].ts_ms, err.msg[0] ? err.msg : pd_strerror(rc));
            dropped++;
        }
        pd_points_release(&pts);
    }
    pd_buf_release(&lb);
    /* series whose index entry was lost (format 2): meta.json still counts them */
    uint64_t listed = 0;
    for (uint32_t id = 0; id < pd__block_n_series(b); id++) {
        int64_t mn, mx;
        uint64_t np, tb, vb;
        pd__block_series_info(b, id, &mn, &mx, &np, &tb, &vb);
        listed += np;
    }
    if (!fail && !pd__block_damage(b) && m->n_profiles > listed) {
        printf("dropped %llu profiles of %llu series the damaged index no longer lists\n",
               (unsigned long long)(m->n_profiles - listed),
               (unsigned long long)(m->n_series - pd__block_n_series(b)));
        dropped += m->n_profiles - listed;
    }
    pd__block_close(b);
    if (fail) {
        pd__block_writer_free(w);
        fprintf(stderr, "%s: out of memory\n", bdir);
        return 1;
    }
    char id[27] = {0};
    if (kept) {
        pd_err_clear(&err);
        rc = pd__block_writer_write(w, r->dir, id, &err);
        if (rc < 0) {
            pd__block_writer_free(w);
            fprintf(stderr, "%s: cannot write the repaired block: %s\n", bdir, err.msg);
            return 1;
        }
    }
    pd__block_writer_free(w);
    r->kept += kept;
    r->dropped += dropped;
    if (kept) {
        r->rewritten++;
        printf("rewrote %s as %s/%s: %lu profiles kept, %lu dropped\n", bdir, r->dir, id, kept,
               dropped);
    } else {
        printf("dropped block %s: no profile reads (%lu dropped)\n", bdir, dropped);
    }
    return move_aside(r, name) ? 1 : 0;
}

int pd__tsdb_repair(const char *dir)
{
    int lfd;
    pd_err lerr = {{0}};
    if (pd__tsdb_lock_store(dir, &lfd, &lerr) < 0) {
        fprintf(stderr, "profd tsdb repair: %s%s\n", lerr.msg,
                strstr(lerr.msg, "in use") ? ": stop the profd serving it first" : "");
        return 1;
    }
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0) {
        fprintf(stderr, "%s: %s\n", dir, strerror(errno));
        close(lfd);
        return 1;
    }
    repair r = {.dir = dir};
    int bad = 0;
    unsigned long intact = 0;
    for (int i = 0; i < n; i++) {
        const char *nm = names[i]->d_name;
        char bdir[4400];
        snprintf(bdir, sizeof bdir, "%s/%s", dir, nm);
        struct stat st;
        if (!is_ulid(nm) || lstat(bdir, &st) < 0 || !S_ISDIR(st.st_mode))
            continue;
        pd_block_meta m;
        pd_err err;
        pd_err_clear(&err);
        memset(&m, 0, sizeof m);
        int rc = pd__block_check(bdir, &m, &err);
        if (rc == PD_ENOMEM) {
            fprintf(stderr, "%s: out of memory\n", bdir);
            bad = 1;
            continue;
        }
        if (rc == 0 && !m.compaction_failed) {
            intact++;
            continue;
        }
        bad |= repair_block(&r, nm, rc ? (err.msg[0] ? err.msg : pd_strerror(rc))
                                       : "marked compaction.failed");
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    printf("%lu blocks intact, %lu rewritten, %lu moved aside%s%s; %lu profiles kept, %lu "
           "dropped\n",
           intact, r.rewritten, r.moved, r.aside[0] ? " to " : "", r.aside, r.kept, r.dropped);
    printf("the WAL and %s/series are not rewritten: profd replays what verifies (see `profd "
           "tsdb check`)\n",
           dir);
    close(lfd);
    return bad;
}
