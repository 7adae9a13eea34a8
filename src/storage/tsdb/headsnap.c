/*
 * storage/tsdb/headsnap.c — the head snapshot (issue 35: "no slow window
 * after a restart"; docs/format/head_snapshot.md).
 *
 * At open the WAL is only indexed (replay.c): each head profile is
 * "WAL-only" until the maintenance thread decomposes it into the head's
 * value groups, and a merge meanwhile reads and decodes every such profile
 * from the WAL (8-40x slower). So a clean close (pd_tsdb_close) writes
 * the head's decomposed state — its symbol generations and every series'
 * value groups, as they are in memory — to PATH/head.snapshot, and the next
 * open adopts those groups instead of decomposing the WAL again: nothing is
 * WAL-only when /-/ready turns 200.
 *
 * The WAL stays the truth; the snapshot only saves work:
 *   - written at close only, after the WAL is closed: tmp file, fsync,
 *     rename, fsync of PATH (a kill -9 meanwhile leaves a .tmp that the next
 *     open removes, or no file: the WAL has everything acknowledged);
 *   - it names the WAL's end when written (newest segment, its size); the
 *     next open uses it only when the WAL still ends there (checked before
 *     the WAL is opened, which may roll or cut it), else it is "stale";
 *   - magic, version, crc32c over the header and over the payload: any
 *     damage ("damaged") or staleness ignores the whole file — logged,
 *     counted in profd_storage_head_snapshot_loads_total{result} — and the
 *     head is rebuilt from the WAL as without one;
 *   - every group position names its profile's WAL record (segment,
 *     offset) and time: a position is adopted only by the replayed point of
 *     the same series at the same record; points no position claims stay
 *     WAL-only and are decomposed as before;
 *   - read once: the file is removed as soon as it is read, whatever its
 *     fate, so a later crash never meets a snapshot older than the WAL.
 *
 * Adopted groups are sealed and encoded against read-only generations of
 * their own (pd__hmem_adopt_syms): new appends open groups in the current
 * generation, and an adopted generation is freed with its last group, as an
 * older generation is after a head cut.
 *
 * Who calls what (db.c): pd__headsnap_read before pd__wal_open,
 * pd__headsnap_apply once the WAL is replayed and the blocks loaded,
 * pd__headsnap_write from pd_tsdb_close after pd__wal_close.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "base/crc32c.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/varint.h"
#include "storage/tsdb/db_int.h"
#include "storage/tsdb/headmem_int.h"
#include "storage/tsdb/headsnap_int.h"
#include "storage/tsdb/symbols_int.h"

#define SNAP_MAGIC "PDHS"
#define SNAP_VERSION 1
#define SNAP_HDR 32
#define SNAP_MAX_TABLES 1024              /* symbol generations in one snapshot */
#define SNAP_MAX_GROUP_BYTES (256u << 20) /* one group's encoding, raw or zstd */

typedef struct hs_group {
    uint32_t tab, n;
    int64_t ts[PD_HMEM_GROUP];
    uint32_t seg[PD_HMEM_GROUP]; /* 0: the profile was no longer in the head */
    uint64_t off[PD_HMEM_GROUP];
    uint8_t *raw, *z; /* raw: raw_len + 1 bytes; z: z_len bytes (NULL: raw) */
    size_t raw_len, z_len;
} hs_group;

typedef struct hs_series {
    uint64_t ref;
    hs_group *g;
    size_t n_g;
} hs_series;

struct pd_headsnap {
    uint32_t wal_seg;
    uint64_t wal_size;
    pd_hsyms **tabs;
    size_t n_tabs;
    hs_series *series;
    size_t n_series;
    uint64_t n_profiles; /* positions naming a WAL record */
};

static void le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

void pd__headsnap_free(pd_headsnap *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->n_series; i++) {
        for (size_t j = 0; j < h->series[i].n_g; j++) {
            free(h->series[i].g[j].raw);
            free(h->series[i].g[j].z);
        }
        free(h->series[i].g);
    }
    free(h->series);
    for (size_t i = 0; i < h->n_tabs; i++)
        pd__hmem_adopt_done(h->tabs[i]);
    free(h->tabs);
    free(h);
}

uint64_t pd__headsnap_profiles(const pd_headsnap *h)
{
    return h ? h->n_profiles : 0;
}

/* ---- parsing ---- */

typedef struct cur {
    const uint8_t *p;
    size_t len, pos;
    const char *why; /* the first problem met */
    size_t at;       /* and its payload offset */
} cur;

static bool fail(cur *c, const char *why)
{
    if (!c->why) {
        c->why = why;
        c->at = c->pos;
    }
    return false;
}

static bool get_varint(cur *c, uint64_t *v, uint64_t max, const char *what)
{
    if (c->why)
        return false;
    size_t n = pd_varint_get(c->p + c->pos, c->len - c->pos, v);
    if (!n)
        return fail(c, what);
    if (*v > max)
        return fail(c, what);
    c->pos += n;
    return true;
}

static bool get_bytes(cur *c, size_t n, const uint8_t **out, const char *what)
{
    if (c->why)
        return false;
    if (n > c->len - c->pos)
        return fail(c, what);
    *out = c->p + c->pos;
    c->pos += n;
    return true;
}

static uint8_t *dup_bytes(const uint8_t *p, size_t n, size_t extra)
{
    uint8_t *d = malloc(n + extra ? n + extra : 1);
    if (d)
        memcpy(d, p, n);
    return d;
}

int pd__headsnap_parse(const uint8_t *p, size_t len, pd_headsnap **out, pd_err *err)
{
    *out = NULL;
    if (len < SNAP_HDR + 4 || memcmp(p, SNAP_MAGIC, 4) != 0)
        return pd_err_set(err, PD_ECORRUPT,
                          "not a head snapshot (bad magic or %zu bytes) at offset 0", len);
    if (p[4] != SNAP_VERSION)
        return pd_err_set(err, PD_ECORRUPT,
                          "head snapshot version %u (this profd reads %u) at offset 4", p[4],
                          SNAP_VERSION);
    if (pd_crc32c(0, p, 28) != rd32(p + 28))
        return pd_err_set(err, PD_ECORRUPT, "head snapshot header checksum mismatch at offset 28");
    uint64_t plen = rd64(p + 20);
    if (plen != len - SNAP_HDR - 4)
        return pd_err_set(err, PD_ECORRUPT,
                          "head snapshot truncated: payload of %llu bytes announced, %zu present "
                          "at offset %d",
                          (unsigned long long)plen, len - SNAP_HDR - 4, SNAP_HDR);
    if (pd_crc32c(0, p + SNAP_HDR, (size_t)plen) != rd32(p + SNAP_HDR + plen))
        return pd_err_set(err, PD_ECORRUPT,
                          "head snapshot payload checksum mismatch at offset %llu",
                          (unsigned long long)(SNAP_HDR + plen));
    pd_headsnap *h = calloc(1, sizeof *h);
    if (!h)
        return pd_err_set(err, PD_ENOMEM, "head snapshot: out of memory");
    h->wal_seg = rd32(p + 8);
    h->wal_size = rd64(p + 12);
    cur c = {.p = p + SNAP_HDR, .len = (size_t)plen};
    int rc = 0;
    uint64_t n_tabs, n_series;
    if (!get_varint(&c, &n_tabs, SNAP_MAX_TABLES, "symbol table count"))
        goto bad;
    if (n_tabs && !(h->tabs = calloc((size_t)n_tabs, sizeof *h->tabs)))
        goto nomem;
    for (uint64_t i = 0; i < n_tabs; i++) {
        uint64_t tl;
        const uint8_t *tp;
        if (!get_varint(&c, &tl, c.len, "symbol table length") ||
            !get_bytes(&c, (size_t)tl, &tp, "symbol table past the end"))
            goto bad;
        uint8_t *raw = dup_bytes(tp, (size_t)tl, 0);
        if (!raw)
            goto nomem;
        pd_symbols sym;
        pd_err se;
        pd_err_clear(&se);
        size_t at = c.pos - (size_t)tl;
        if ((rc = pd__symbols_decode(&sym, raw, (size_t)tl, &se)) < 0) {
            if (rc == PD_ENOMEM)
                goto nomem;
            rc = pd_err_set(err, PD_ECORRUPT, "head snapshot symbol table %llu at offset %zu: %s",
                            (unsigned long long)i, SNAP_HDR + at, se.msg);
            goto out;
        }
        if (!(h->tabs[i] = pd__hmem_adopt_syms(&sym)))
            goto nomem;
        h->n_tabs++;
    }
    if (!get_varint(&c, &n_series, (c.len - c.pos) / 9, "series count"))
        goto bad;
    if (n_series && !(h->series = calloc((size_t)n_series, sizeof *h->series)))
        goto nomem;
    for (uint64_t i = 0; i < n_series; i++) {
        hs_series *hs = &h->series[i];
        const uint8_t *rp;
        uint64_t ng;
        if (!get_bytes(&c, 8, &rp, "series ref past the end") ||
            !get_varint(&c, &ng, (c.len - c.pos) / 5, "group count"))
            goto bad;
        hs->ref = rd64(rp);
        h->n_series++;
        if (ng && !(hs->g = calloc((size_t)ng, sizeof *hs->g)))
            goto nomem;
        for (uint64_t j = 0; j < ng; j++) {
            hs_group *g = &hs->g[j];
            uint64_t tab, n, zflag, rl, zl = 0;
            if (!get_varint(&c, &tab, n_tabs ? n_tabs - 1 : 0, "group symbol table") ||
                (!n_tabs && !fail(&c, "group without symbol tables")) ||
                !get_varint(&c, &n, PD_HMEM_GROUP, "group profile count") ||
                (n == 0 && !fail(&c, "empty group")))
                goto bad;
            hs->n_g++;
            g->tab = (uint32_t)tab;
            g->n = (uint32_t)n;
            int64_t t = 0;
            for (uint32_t k = 0; k < g->n; k++) {
                uint64_t dt, seg, off;
                if (!get_varint(&c, &dt, UINT64_MAX, "profile time") ||
                    !get_varint(&c, &seg, UINT32_MAX, "profile segment") ||
                    !get_varint(&c, &off, UINT64_MAX, "profile offset"))
                    goto bad;
                t = (int64_t)((uint64_t)t + (uint64_t)pd_zigzag_dec(dt));
                g->ts[k] = t;
                g->seg[k] = (uint32_t)seg;
                g->off[k] = off;
                h->n_profiles += seg != 0;
            }
            const uint8_t *bp;
            if (!get_varint(&c, &zflag, 1, "group encoding flag") ||
                !get_varint(&c, &rl, SNAP_MAX_GROUP_BYTES, "group raw length") ||
                (rl == 0 && !fail(&c, "group of no bytes")) ||
                (zflag && !get_varint(&c, &zl, SNAP_MAX_GROUP_BYTES, "group zstd length")) ||
                !get_bytes(&c, (size_t)(zflag ? zl : rl), &bp, "group bytes past the end"))
                goto bad;
            g->raw_len = (size_t)rl;
            if (zflag) {
                g->z_len = (size_t)zl;
                if (!(g->z = dup_bytes(bp, (size_t)zl, 0)))
                    goto nomem;
            } else if (!(g->raw = dup_bytes(bp, (size_t)rl, 1)))
                goto nomem;
        }
    }
    if (c.pos != c.len) {
        fail(&c, "bytes after the last series");
        goto bad;
    }
    *out = h;
    return 0;
bad:
    rc = pd_err_set(err, PD_ECORRUPT, "head snapshot malformed: %s at offset %zu", c.why,
                    SNAP_HDR + c.at);
    goto out;
nomem:
    rc = pd_err_set(err, PD_ENOMEM, "head snapshot: out of memory");
out:
    pd__headsnap_free(h);
    return rc;
}

int pd__headsnap_verify(const pd_headsnap *h, pd_err *err)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < h->n_series; i++)
        for (size_t j = 0; rc == 0 && j < h->series[i].n_g; j++) {
            const hs_group *g = &h->series[i].g[j];
            const uint8_t *p = g->raw;
            uint8_t *tmp = NULL;
            if (g->z) {
                if (!(tmp = malloc(g->raw_len)))
                    return pd_err_set(err, PD_ENOMEM, "head snapshot: out of memory");
                size_t got = ZSTD_decompress(tmp, g->raw_len, g->z, g->z_len);
                if (ZSTD_isError(got) || got != g->raw_len) {
                    free(tmp);
                    return pd_err_set(err, PD_ECORRUPT,
                                      "head snapshot: group %zu of series %llu does not "
                                      "decompress",
                                      j, (unsigned long long)h->series[i].ref);
                }
                p = tmp;
            }
            pd_dprof d[PD_HMEM_GROUP];
            memset(d, 0, sizeof d);
            for (uint32_t k = 0; k < g->n; k++)
                d[k].ts = g->ts[k];
            rc = pd__vgroup_decode(&h->tabs[g->tab]->sym, p, g->raw_len, g->n, d, err);
            for (uint32_t k = 0; k < g->n; k++)
                pd__dprof_release(&d[k]);
            free(tmp);
        }
    return rc;
}

/* ---- the WAL's end ---- */

/* The newest segment of waldir (8-digit names) and its size: false when
 * there is none or it cannot be stat'ed. */
static bool wal_end(const char *waldir, uint32_t *seg, uint64_t *size)
{
    DIR *d = opendir(waldir);
    if (!d)
        return false;
    uint32_t last = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strlen(e->d_name) != 8 || strspn(e->d_name, "0123456789") != 8)
            continue;
        uint32_t v = (uint32_t)strtoul(e->d_name, NULL, 10);
        if (v > last)
            last = v;
    }
    closedir(d);
    char name[4200];
    struct stat st;
    snprintf(name, sizeof name, "%s/%08u", waldir, last);
    if (!last || stat(name, &st) < 0)
        return false;
    *seg = last;
    *size = (uint64_t)st.st_size;
    return true;
}

/* ---- reading at open ---- */

static void snap_name(const pd_tsdb *s, char *buf, size_t n, bool tmp)
{
    snprintf(buf, n, "%s/%s%s", s->path, PD_HEADSNAP_NAME, tmp ? ".tmp" : "");
}

static void count_load(const char *result)
{
    char l[64];
    snprintf(l, sizeof l, "result=\"%s\"", result);
    pd_metrics_add("profd_storage_head_snapshot_loads_total", l, 1);
}

#define SNAP_MAX_FILE ((uint64_t)64 << 30)

void pd__headsnap_read(pd_tsdb *s, pd_headsnap **out)
{
    *out = NULL;
    char name[4200], tmp[4200];
    snap_name(s, name, sizeof name, false);
    snap_name(s, tmp, sizeof tmp, true);
    if (unlink(tmp) == 0) /* a close killed while writing it */
        pd_log_warn("storage: removed an unfinished head snapshot (the head is rebuilt from "
                    "the WAL)",
                    "file=%s", tmp);
    int fd = open(name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT)
            pd_log_warn("storage: cannot open the head snapshot; the head is rebuilt from the WAL",
                        "file=%s err=\"%s\"", name, strerror(errno));
        return;
    }
    struct stat st;
    uint8_t *data = NULL;
    size_t got = 0;
    pd_err e;
    pd_err_clear(&e);
    int rc = 0;
    const char *result = "damaged";
    if (fstat(fd, &st) < 0 || (uint64_t)st.st_size > SNAP_MAX_FILE) {
        pd_err_set(&e, PD_ECORRUPT, "cannot stat it or over %llu bytes",
                   (unsigned long long)SNAP_MAX_FILE);
        goto done;
    }
    if (!(data = malloc(st.st_size ? (size_t)st.st_size : 1))) {
        rc = PD_ENOMEM;
        pd_err_set(&e, rc, "out of memory for %lld bytes", (long long)st.st_size);
        goto done;
    }
    while (got < (size_t)st.st_size) {
        ssize_t r = pread(fd, data + got, (size_t)st.st_size - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    pd_headsnap *h = NULL;
    if ((rc = pd__headsnap_parse(data, got, &h, &e)) < 0)
        goto done;
    uint32_t seg = 0;
    uint64_t size = 0;
    if (!wal_end(s->waldir, &seg, &size) || seg != h->wal_seg || size != h->wal_size) {
        result = "stale";
        pd_err_set(&e, PD_ECORRUPT,
                   "written when the WAL ended at segment %08u byte %llu; it ends at %08u byte "
                   "%llu now",
                   h->wal_seg, (unsigned long long)h->wal_size, seg, (unsigned long long)size);
        pd__headsnap_free(h);
        goto done;
    }
    *out = h;
    result = "loaded";
done:
    free(data);
    close(fd);
    /* read once, whatever its fate: a later crash never meets it again */
    if (unlink(name) < 0 && errno != ENOENT)
        pd_log_warn("storage: cannot remove the head snapshot", "file=%s err=\"%s\"", name,
                    strerror(errno));
    else
        pd__tsdb_fsync_path(s->path);
    if (!*out) {
        pd_log_warn("storage: head snapshot ignored and removed; the head is rebuilt from the "
                    "WAL (nothing is lost)",
                    "file=%s reason=%s err=\"%s\"", name, result, e.msg);
        count_load(result);
    }
}

/* ---- adopting it ---- */

/* The index of se's point claimed by position k of g (a WAL-only point at
 * the same time and WAL record), or SIZE_MAX. */
static size_t claim(const series *se, const hs_group *g, uint32_t k)
{
    if (!g->seg[k])
        return SIZE_MAX;
    size_t i = pd__tsdb_lower_bound(se, g->ts[k]);
    if (i >= se->n_pts)
        return SIZE_MAX;
    const point *pt = &se->pts[i];
    if (pt->ts != g->ts[k] || pt->gid != WAL_ONLY || pt->seg != g->seg[k] || pt->off != g->off[k])
        return SIZE_MAX;
    return i;
}

void pd__headsnap_apply(pd_tsdb *s, pd_headsnap *h)
{
    if (!h)
        return;
    int64_t t0 = pd__tsdb_now_mono_ms();
    uint64_t adopted = 0, groups = 0, summed = 0;
    bool nomem = false;
    for (size_t i = 0; i < h->n_series && !nomem; i++) {
        hs_series *hs = &h->series[i];
        series *se = pd__tsdb_find_by_ref(s, hs->ref);
        if (!se || se->hc.n_g) /* (nothing is decomposed at open: never) */
            continue;
        for (size_t j = 0; j < hs->n_g && !nomem; j++) {
            hs_group *g = &hs->g[j];
            size_t at[PD_HMEM_GROUP];
            uint32_t live = 0;
            for (uint32_t k = 0; k < g->n; k++) {
                at[k] = claim(se, g, k);
                for (uint32_t q = 0; q < k && at[k] != SIZE_MAX; q++)
                    if (at[q] == at[k])
                        at[k] = SIZE_MAX; /* (two positions naming one record) */
                live += at[k] != SIZE_MAX;
            }
            if (!live)
                continue;
            uint32_t gid;
            if (pd__hmem_adopt_group(&s->hm, &se->hc, h->tabs[g->tab], g->n, live, g->ts, g->raw,
                                     g->raw_len, g->z, g->z_len, &gid) < 0) {
                nomem = true; /* the rest stays WAL-only */
                g->raw = g->z = NULL;
                break;
            }
            g->raw = g->z = NULL; /* taken */
            groups++;
            /* the head's aggregates: rebuilt, as appends keep them — over
               the live profiles when they are the group's last ones (a
               head cut took its first: compact.c resum_split) */
            uint32_t from = g->n - live;
            for (uint32_t k = 0; k < g->n && from < g->n; k++)
                if ((at[k] != SIZE_MAX) != (k >= from))
                    from = g->n;
            if (from < g->n) {
                pd_hgroup *hg = se->hc.g[se->hc.n_g - 1];
                uint8_t *sum;
                size_t sl;
                if (pd__hgroup_sum(hg, from, &sum, &sl) == 0 && sum) {
                    pd__hgroup_set_sum(&s->hm, hg, from, sum, sl);
                    summed++;
                }
            }
            for (uint32_t k = 0; k < g->n; k++) {
                if (at[k] == SIZE_MAX)
                    continue;
                se->pts[at[k]].gid = gid;
                se->pts[at[k]].gpos = k;
                se->n_wal_only--;
                s->n_wal_only--;
                adopted++;
            }
        }
    }
    pd_log_info("storage: head snapshot loaded",
                "profiles=%llu groups=%llu summed=%llu wal_only_left=%llu ms=%lld",
                (unsigned long long)adopted, (unsigned long long)groups, (unsigned long long)summed,
                (unsigned long long)s->n_wal_only, (long long)(pd__tsdb_now_mono_ms() - t0));
    count_load("loaded");
    pd__headsnap_free(h);
}

/* ---- writing at close ---- */

static int put_group(pd_buf *o, const pd_hgroup *g, uint32_t tab, const uint32_t *seg,
                     const uint64_t *off)
{
    int rc = pd_buf_put_varint(o, tab);
    if (rc == 0)
        rc = pd_buf_put_varint(o, g->n);
    int64_t prev = 0;
    for (uint32_t k = 0; rc == 0 && k < g->n; k++) {
        if ((rc = pd_buf_put_varint(
                 o, pd_zigzag_enc((int64_t)((uint64_t)g->ts[k] - (uint64_t)prev)))) == 0 &&
            (rc = pd_buf_put_varint(o, seg[k])) == 0)
            rc = pd_buf_put_varint(o, off[k]);
        prev = g->ts[k];
    }
    if (rc < 0)
        return rc;
    if (g->z) {
        if ((rc = pd_buf_put_varint(o, 1)) == 0 && (rc = pd_buf_put_varint(o, g->raw_len)) == 0 &&
            (rc = pd_buf_put_varint(o, g->z_len)) == 0)
            rc = pd_buf_append(o, g->z, g->z_len);
    } else if ((rc = pd_buf_put_varint(o, 0)) == 0 && (rc = pd_buf_put_varint(o, g->raw.len)) == 0)
        rc = pd_buf_append(o, g->raw.data, g->raw.len);
    return rc;
}

/* The payload: symbol tables, then series and their groups. */
static int encode(const pd_tsdb *s, pd_buf *o, uint64_t *n_prof)
{
    const pd_hsyms *tabs[SNAP_MAX_TABLES];
    size_t n_tabs = 0, n_series = 0;
    /* the generations the groups use */
    for (size_t i = 0; i < s->n_series; i++) {
        const pd_hchunks *c = &s->by_ref[i]->hc;
        n_series += c->n_g > 0;
        for (size_t j = 0; j < c->n_g; j++) {
            const pd_hgroup *g = c->g[j];
            size_t t = 0;
            while (g && t < n_tabs && tabs[t] != g->syms)
                t++;
            if (g && t == n_tabs) {
                if (n_tabs == SNAP_MAX_TABLES)
                    return PD_ETOOBIG;
                tabs[n_tabs++] = g->syms;
            }
        }
    }
    int rc = pd_buf_put_varint(o, n_tabs);
    pd_buf t;
    pd_buf_init(&t, 0);
    for (size_t i = 0; rc == 0 && i < n_tabs; i++) {
        pd_buf_reset(&t);
        if ((rc = pd__symbols_encode(&tabs[i]->sym, &t)) == 0 &&
            (rc = pd_buf_put_varint(o, t.len)) == 0)
            rc = pd_buf_append(o, t.data, t.len);
    }
    pd_buf_release(&t);
    if (rc == 0)
        rc = pd_buf_put_varint(o, n_series);
    uint32_t(*seg)[PD_HMEM_GROUP] = NULL;
    uint64_t(*off)[PD_HMEM_GROUP] = NULL;
    size_t cap = 0;
    for (size_t i = 0; rc == 0 && i < s->n_series; i++) {
        const series *se = s->by_ref[i];
        const pd_hchunks *c = &se->hc;
        if (!c->n_g)
            continue;
        if (c->n_g > cap) {
            free(seg);
            free(off);
            cap = c->n_g;
            seg = calloc(cap, sizeof *seg);
            off = calloc(cap, sizeof *off);
            if (!seg || !off) {
                rc = PD_ENOMEM;
                break;
            }
        }
        memset(seg, 0, c->n_g * sizeof *seg);
        memset(off, 0, c->n_g * sizeof *off);
        /* each position's WAL record, from the points that use it */
        for (size_t k = 0; k < se->n_pts; k++) {
            const point *pt = &se->pts[k];
            if (pt->gid == WAL_ONLY || pt->gid < c->base || pt->gid - c->base >= c->n_g ||
                pt->gpos >= PD_HMEM_GROUP)
                continue;
            seg[pt->gid - c->base][pt->gpos] = pt->seg;
            off[pt->gid - c->base][pt->gpos] = pt->off;
            (*n_prof)++;
        }
        size_t ng = 0;
        for (size_t j = 0; j < c->n_g; j++)
            ng += c->g[j] != NULL;
        uint8_t ref[8];
        le64(ref, se->ref);
        if ((rc = pd_buf_append(o, ref, 8)) == 0)
            rc = pd_buf_put_varint(o, ng);
        for (size_t j = 0; rc == 0 && j < c->n_g; j++) {
            const pd_hgroup *g = c->g[j];
            if (!g)
                continue;
            uint32_t tab = 0;
            while (tabs[tab] != g->syms)
                tab++;
            rc = put_group(o, g, tab, seg[j], off[j]);
        }
    }
    free(seg);
    free(off);
    return rc;
}

void pd__headsnap_write(pd_tsdb *s)
{
    int64_t t0 = pd__tsdb_now_mono_ms();
    char name[4200], tmp[4200];
    snap_name(s, name, sizeof name, false);
    snap_name(s, tmp, sizeof tmp, true);
    uint32_t seg;
    uint64_t size, n_prof = 0;
    pd_buf o;
    pd_buf_init(&o, 0);
    uint8_t hdr[SNAP_HDR] = {0};
    const char *what = "out of memory";
    int rc = 0, fd = -1;
    if (!wal_end(s->waldir, &seg, &size)) {
        what = "the WAL has no segment";
        rc = PD_ENOTFOUND;
        goto out;
    }
    if ((rc = pd_buf_append(&o, hdr, sizeof hdr)) < 0 || (rc = encode(s, &o, &n_prof)) < 0)
        goto out;
    if (!n_prof) { /* nothing decomposed in the head: no file */
        rc = 0;
        goto out;
    }
    uint8_t *p = (uint8_t *)o.data;
    uint64_t plen = o.len - SNAP_HDR;
    memcpy(p, SNAP_MAGIC, 4);
    p[4] = SNAP_VERSION;
    le32(p + 8, seg);
    le64(p + 12, size);
    le64(p + 20, plen);
    le32(p + 28, pd_crc32c(0, p, 28));
    uint8_t crc[4];
    le32(crc, pd_crc32c(0, p + SNAP_HDR, (size_t)plen));
    if ((rc = pd_buf_append(&o, crc, 4)) < 0)
        goto out;
    what = "write";
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
        rc = -errno;
        goto out;
    }
    if ((rc = pd__tsdb_write_full_fd(fd, (const uint8_t *)o.data, o.len)) < 0)
        goto out;
    if (fsync(fd) < 0) {
        rc = -errno;
        goto out;
    }
    close(fd);
    fd = -1;
    if (rename(tmp, name) < 0) {
        rc = -errno;
        goto out;
    }
    pd__tsdb_fsync_path(s->path);
    pd_log_info("storage: head snapshot written", "file=%s profiles=%llu bytes=%zu ms=%lld", name,
                (unsigned long long)n_prof, o.len, (long long)(pd__tsdb_now_mono_ms() - t0));
    pd_metrics_add("profd_storage_head_snapshot_writes_total", "result=\"written\"", 1);
out:
    if (fd >= 0)
        close(fd);
    if (rc < 0) {
        unlink(tmp);
        pd_log_warn("storage: cannot write the head snapshot; the next start rebuilds the head "
                    "from the WAL (nothing is lost)",
                    "file=%s err=\"%s: %s\"", name, what, pd_strerror(rc));
        pd_metrics_add("profd_storage_head_snapshot_writes_total", "result=\"failed\"", 1);
    }
    pd_buf_release(&o);
}
