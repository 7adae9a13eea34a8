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
 * DIR/series, when damaged (or missing while the WAL starts past segment
 * 1), is rebuilt from its records that verify and the SERIES records of
 * the WAL (issue 27); the old file is kept as DIR/series.damaged. The WAL
 * is not rewritten: open replays what verifies and skips the rest (logged,
 * counted); `tsdb check` still names its damage.
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

#include "base/crc32c.h"
#include "base/labels.h"
#include "storage/tsdb/block_int.h"
#include "storage/tsdb/db_int.h"
#include "storage/tsdb/tsdb_cli_int.h"
#include "storage/tsdb/wal_int.h"

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
    pd_block_writer_opts o = {.level = m->level,
                              .sources = (const char(*)[27])src,
                              .n_sources = 1,
                              .stack_format = m->stack_format};
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

/* ---- DIR/series (issue 27: rebuildable from what verifies and the WAL) ---- */

static uint8_t *slurp(const char *path, size_t cap, size_t *len)
{
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *b = NULL;
    size_t n = 0, c = 0;
    for (;;) {
        if (n == c) {
            size_t nc = c ? 2 * c : 1 << 16;
            uint8_t *nb = nc <= cap ? realloc(b, nc) : NULL;
            if (!nb) {
                free(b);
                fclose(f);
                return NULL;
            }
            b = nb;
            c = nc;
        }
        size_t r = fread(b + n, 1, c - n, f);
        if (r == 0)
            break;
        n += r;
    }
    fclose(f);
    *len = n;
    return b ? b : malloc(1);
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Adds the SERIES records of buf[8..len) that verify (found past damage by
 * pd__wal_resync) to out, framed, skipping refs already in refs[0..*n). */
static int collect_series(const uint8_t *buf, size_t len, pd_buf *out, uint64_t **refs, size_t *n,
                          size_t *cap)
{
    size_t off = PD_WAL_SEG_HDR;
    while (off < len) {
        size_t at = pd__wal_resync(buf, len, off, false);
        if (at >= len)
            break;
        uint8_t type = buf[at];
        uint32_t l = rd32(buf + at + 1);
        const uint8_t *pl = buf + at + PD_WAL_REC_HDR;
        off = at + PD_WAL_REC_HDR + l;
        if (type != PD_WAL_REC_SERIES || l < 9)
            continue;
        uint64_t ref = 0;
        for (int i = 7; i >= 0; i--)
            ref = ref << 8 | pl[i];
        bool seen = false;
        for (size_t i = 0; i < *n && !seen; i++)
            seen = (*refs)[i] == ref;
        if (seen)
            continue;
        if (*n == *cap) {
            size_t nc = *cap ? 2 * *cap : 256;
            uint64_t *nr = realloc(*refs, nc * sizeof *nr);
            if (!nr)
                return PD_ENOMEM;
            *refs = nr;
            *cap = nc;
        }
        (*refs)[(*n)++] = ref;
        int rc = pd__wal_frame(out, PD_WAL_REC_SERIES, pl, l);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Rewrites DIR/series when it is damaged or missing while the WAL starts
 * past segment 1: from its records that verify, then the SERIES records of
 * every WAL segment (first seen wins, as at open). The old file is kept as
 * DIR/series.damaged. 0, or 1 on failure (printed). */
static int repair_series_file(const char *dir)
{
    char path[4200], wal[4200], tmp[4300], old[4300];
    snprintf(path, sizeof path, "%s/series", dir);
    snprintf(wal, sizeof wal, "%s/wal", dir);
    size_t len = 0;
    uint8_t *buf = slurp(path, (size_t)1 << 32, &len);
    /* intact: the header, then records that verify back to back */
    bool intact = buf && len >= PD_WAL_SEG_HDR && !memcmp(buf, PD_WAL_MAGIC, 5) && buf[5] >= 1 &&
                  buf[5] <= PD_WAL_VERSION && !buf[6] && !buf[7];
    uint32_t ckpt = 0;
    for (size_t off = PD_WAL_SEG_HDR; intact && off < len;) {
        if (pd__wal_resync(buf, len, off, false) != off &&
            !(off == PD_WAL_SEG_HDR && buf[off] == PD_WAL_REC_CHECKPOINT))
            intact = false;
        else if (len - off < PD_WAL_REC_HDR)
            intact = false;
        else {
            uint32_t l = rd32(buf + off + 1);
            if (buf[off] == PD_WAL_REC_CHECKPOINT) {
                if (l != 4 || len - off - PD_WAL_REC_HDR < 4 ||
                    pd_crc32c(pd_crc32c(0, buf + off, 1), buf + off + PD_WAL_REC_HDR, 4) !=
                        rd32(buf + off + 5))
                    intact = false;
                else
                    ckpt = rd32(buf + off + PD_WAL_REC_HDR);
            } else if (buf[off] != PD_WAL_REC_SERIES)
                intact = false;
            off += PD_WAL_REC_HDR + (size_t)l;
        }
    }
    DIR *d = opendir(wal);
    uint32_t first = 0;
    struct dirent *e;
    uint32_t *segs = NULL;
    size_t n_segs = 0, cap_segs = 0;
    while (d && (e = readdir(d))) {
        if (strlen(e->d_name) != 8 || strspn(e->d_name, "0123456789") != 8)
            continue;
        uint32_t v = (uint32_t)strtoul(e->d_name, NULL, 10);
        if (!v)
            continue;
        if (n_segs == cap_segs) {
            size_t nc = cap_segs ? 2 * cap_segs : 64;
            uint32_t *ns = realloc(segs, nc * sizeof *ns);
            if (!ns)
                break;
            segs = ns;
            cap_segs = nc;
        }
        segs[n_segs++] = v;
        if (!first || v < first)
            first = v;
    }
    if (d)
        closedir(d);
    if (intact || (!buf && first <= 1)) {
        free(buf);
        free(segs);
        return 0; /* intact, or not needed */
    }
    if (!ckpt && buf && len > PD_WAL_SEG_HDR + PD_WAL_REC_HDR + 4 &&
        buf[PD_WAL_SEG_HDR] == PD_WAL_REC_CHECKPOINT && rd32(buf + PD_WAL_SEG_HDR + 1) == 4 &&
        pd_crc32c(pd_crc32c(0, buf + PD_WAL_SEG_HDR, 1), buf + PD_WAL_SEG_HDR + PD_WAL_REC_HDR,
                  4) == rd32(buf + PD_WAL_SEG_HDR + 5))
        ckpt = rd32(buf + PD_WAL_SEG_HDR + PD_WAL_REC_HDR);
    if (!ckpt)
        ckpt = first;
    pd_buf out;
    pd_buf_init(&out, 0);
    uint8_t hdr[PD_WAL_SEG_HDR] = {0};
    memcpy(hdr, PD_WAL_MAGIC, 5);
    hdr[5] = PD_WAL_VERSION;
    uint8_t c4[4] = {(uint8_t)ckpt, (uint8_t)(ckpt >> 8), (uint8_t)(ckpt >> 16),
                     (uint8_t)(ckpt >> 24)};
    uint64_t *refs = NULL;
    size_t n_refs = 0, cap_refs = 0, from_file = 0;
    int rc = pd_buf_append(&out, hdr, sizeof hdr);
    if (rc == 0 && ckpt)
        rc = pd__wal_frame(&out, PD_WAL_REC_CHECKPOINT, c4, 4);
    if (rc == 0 && buf)
        rc = collect_series(buf, len, &out, &refs, &n_refs, &cap_refs);
    from_file = n_refs;
    free(buf);
    buf = NULL;
    for (size_t i = 0; rc == 0 && i < n_segs; i++) {
        char sp[4300];
        snprintf(sp, sizeof sp, "%s/%08u", wal, segs[i]);
        size_t sl;
        uint8_t *sb = slurp(sp, (size_t)1 << 32, &sl);
        if (sb)
            rc = collect_series(sb, sl, &out, &refs, &n_refs, &cap_refs);
        free(sb);
    }
    free(segs);
    free(refs);
    int bad = 0;
    if (rc < 0) {
        fprintf(stderr, "%s: out of memory rebuilding it\n", path);
        bad = 1;
        goto out;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    snprintf(old, sizeof old, "%s.damaged", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    rc = fd < 0 ? -errno : pd__tsdb_write_full_fd(fd, (const uint8_t *)out.data, out.len);
    if (rc == 0 && fsync(fd) < 0)
        rc = -errno;
    if (fd >= 0)
        close(fd);
    if (rc == 0 && access(path, F_OK) == 0 && rename(path, old) < 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) < 0)
        rc = -errno;
    if (rc == 0)
        rc = pd__tsdb_fsync_path(dir);
    if (rc < 0) {
        fprintf(stderr, "%s: cannot rewrite it: %s\n", path, strerror(-rc));
        unlink(tmp);
        bad = 1;
        goto out;
    }
    printf("rewrote %s: %zu series (%zu from its records that verify, %zu from the WAL); the "
           "old file kept as %s\n",
           path, n_refs, from_file, n_refs - from_file, old);
out:
    pd_buf_release(&out);
    return bad;
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
        bad |= repair_block(
            &r, nm, rc ? (err.msg[0] ? err.msg : pd_strerror(rc)) : "marked compaction.failed");
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    printf("%lu blocks intact, %lu rewritten, %lu moved aside%s%s; %lu profiles kept, %lu "
           "dropped\n",
           intact, r.rewritten, r.moved, r.aside[0] ? " to " : "", r.aside, r.kept, r.dropped);
    bad |= repair_series_file(dir);
    printf("the WAL is not rewritten: profd replays what verifies (see `profd tsdb check`)\n");
    close(lfd);
    return bad;
}
