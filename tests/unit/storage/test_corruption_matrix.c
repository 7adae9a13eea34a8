/* The corruption matrix of issue 19: every file kind of the store (a
 * block's meta.json, index, symbols, chunks; a WAL segment; the `series`
 * file) x flip / truncate / zero / delete / CRC-fixed edit, at several
 * offsets and in several files (262 cases). For each case, on a copy of the
 * fixture store (damage_fixture.h: real profiles in two blocks and a head):
 *   - the store opens;
 *   - every profile the damage did not touch is served equal to what was
 *     appended, listed by read_points and its series by select (the test
 *     knows where each profile lives: the block by time, the series' byte
 *     range in chunks/000001, the WAL record of each head profile);
 *   - when a profile is not served and the damage is detectable, it was
 *     reported and counted (profd_storage_corruptions_total grew);
 *   - `profd tsdb check` exits 1 naming the damaged file (and the offset for
 *     binary files) for every detectable case;
 *   - `profd tsdb repair` exits 0, then the store opens and still serves
 *     every intact profile, and the blocks pass check.
 * Not detectable (no check/count required): CRC-fixed edits that still
 * decode, the series file truncated exactly at a record boundary, a zeroed
 * range that was zero already. Detectable since WAL format 2: the first or
 * the last segment deleted, an older segment cut at a record boundary; since
 * issue 27: the newest segment truncated at or between record boundaries
 * (against PATH/wal/synced, what was fsync'd). Issue 27 also narrowed what
 * damage may cost: a WAL flip or zeroed range only the records it overlaps
 * (replay finds the next valid record), the series file nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/crc32c.h"
#include "damage_fixture.h"
#include "sym_closure.h"
#include "storage/tsdb/wal_int.h"

enum { K_META, K_INDEX, K_SYMBOLS, K_CHUNKS, K_WAL, K_SERIES, NKIND };
/* OP_FLIP2 (symbols): a byte of the head's directory and the same byte of
   its copy at the end (issue 27: one copy is enough) */
enum { OP_FLIP, OP_TRUNC, OP_ZERO, OP_DELETE, OP_CRCFIX, OP_FLIP2, NOP };
static const char *KIND_NAME[NKIND] = {"meta.json", "index", "symbols", "chunks", "wal", "series"};
static const char *OP_NAME[NOP] = {"flip",   "truncate",       "zero",
                                   "delete", "crc-fixed edit", "flip in both directories"};

/* Offsets: >= 0 a fraction of the size, < 0 -(absolute offset + 1); LAST the
 * last byte (or the last 64 for zero). */
#define LAST 2.0
static const double FLIP_AT[] = {-1, -5, -6, 0.25, 0.5, 0.75, LAST};
static const double TRUNC_AT[] = {-1, -9, 0.33, 0.66, LAST};
static const double ZERO_AT[] = {-1, 0.33, 0.66, LAST};
static const double CRC_AT[] = {0.25, 0.5, 0.75};
#define ZERO_LEN 64

typedef struct layout {
    char dir[256];
    uint64_t refs[FX_NSERIES];
    char blocks[2][27];
    uint64_t ext[2][FX_NSERIES][2];  /* series byte range in chunks/000001 */
    uint64_t ient[2][FX_NSERIES][2]; /* series entry byte range in the index (format 2) */
    uint64_t itoc[2];                /* the index's toc offset */
    /* symbols (format 2): frames, where the directory ends, and what each
       profile uses (sym_closure.h); uses_of[k]: of FX_E[k], NULL in the head */
    vframe sfr[2][512];
    size_t n_sfr[2];
    uint64_t sdir_end[2], scopy[2], slen[2]; /* head directory's end, copy's start, size */
    uses *su[2];
    size_t n_su[2];
    uint8_t *type_str[2];
    const uses *uses_of[FX_MAXEXP];
    uint32_t segs[64];
    size_t n_segs;
    int wal_t[3]; /* indexes into segs: first, middle, last */
    fx_rec recs[3][256];
    size_t n_recs[3];
    fx_rec srecs[64]; /* the series file */
    size_t n_srecs;
} layout;

static layout L;

static uint8_t *slurp(const char *p, size_t *len)
{
    FILE *f = fopen(p, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static int group_setup(void **state)
{
    fx_group_setup(state);
    fx_mkdtemp(L.dir, sizeof L.dir, "matrix");
    fx_build(L.dir);
    pd_storage *st = fx_open(L.dir, -1);
    for (int s = 0; s < FX_NSERIES; s++)
        L.refs[s] = fx_ref(st, s);
    pd_storage_close(st);
    int64_t mint[8];
    char names[8][27];
    assert_int_equal(fx_blocks(L.dir, names, mint, 8), 2);
    for (int b = 0; b < 2; b++) {
        assert_int_equal(mint[b], b ? FX_DUR : FX_STEP);
        memcpy(L.blocks[b], names[b], 27);
        char bdir[600];
        snprintf(bdir, sizeof bdir, "%s/%s", L.dir, names[b]);
        pd_block *blk;
        pd_err err = {{0}};
        assert_int_equal(pd__block_open(bdir, &blk, &err), 0);
        /* the index (format 2): footer -> toc -> entry k at offs[k], u32 length L,
           L + 8 bytes (block_index_int.h); entry k is series id k */
        assert_int_equal(pd__block_meta(blk)->version, 2);
        char ip[700];
        snprintf(ip, sizeof ip, "%s/index", bdir);
        size_t il;
        uint8_t *ib = slurp(ip, &il);
        uint64_t toc = 0;
        for (int i = 7; i >= 0; i--)
            toc = toc << 8 | ib[il - 12 + i];
        L.itoc[b] = toc;
        for (uint32_t id = 0; id < pd__block_n_series(blk); id++)
            for (int s = 0; s < FX_NSERIES; s++)
                if (!pd_labels_cmp(pd__block_series_labels(blk, id), &FX_L[s])) {
                    pd__block_series_extent(blk, id, &L.ext[b][s][0], &L.ext[b][s][1]);
                    uint64_t eo = 0;
                    for (int i = 7; i >= 0; i--)
                        eo = eo << 8 | ib[toc + 4 + 8 * (uint64_t)id + (uint64_t)i];
                    uint32_t el = (uint32_t)ib[eo] | (uint32_t)ib[eo + 1] << 8 |
                                  (uint32_t)ib[eo + 2] << 16 | (uint32_t)ib[eo + 3] << 24;
                    L.ient[b][s][0] = eo;
                    L.ient[b][s][1] = eo + el + 8;
                }
        free(ib);
        /* the symbols: frames, and the closure of every profile */
        snprintf(ip, sizeof ip, "%s/symbols", bdir);
        ib = slurp(ip, &il);
        L.n_sfr[b] = sym_frames_at(ib, il, L.sfr[b], 512, &L.sdir_end[b], &L.scopy[b]);
        L.slen[b] = il;
        assert_int_equal(ib[4], 3); /* the copy of the directory at the end */
        free(ib);
        const pd_symbols *S = pd__block_symbols(blk);
        uses_ctx uc = {S, calloc(FX_MAXEXP + 1, sizeof(uses)), 0, 0, calloc(S->n_str + 1, 1)};
        for (uint32_t id = 0; id < pd__block_n_series(blk); id++) {
            uc.series = id;
            assert_int_equal(pd__block_series_foreach_dprof(blk, id, INT64_MIN, INT64_MAX,
                                                            collect_uses, &uc, &err),
                             0);
        }
        for (size_t i = 0; i < uc.n; i++)
            for (size_t k = 0; k < FX_NE; k++)
                if (FX_E[k].ts == uc.v[i].ts &&
                    !pd_labels_cmp(&FX_L[FX_E[k].s], pd__block_series_labels(blk, uc.v[i].series)))
                    L.uses_of[k] = &uc.v[i];
        L.su[b] = uc.v;
        L.n_su[b] = uc.n;
        L.type_str[b] = uc.type_str;
        pd__block_close(blk);
    }
    L.n_segs = fx_segments(L.dir, L.segs, 64);
    assert_true(L.n_segs >= 4);
    L.wal_t[0] = 0;
    L.wal_t[1] = (int)L.n_segs / 2;
    L.wal_t[2] = (int)L.n_segs - 1;
    for (int t = 0; t < 3; t++) {
        char p[600];
        snprintf(p, sizeof p, "%s/wal/%08u", L.dir, L.segs[L.wal_t[t]]);
        L.n_recs[t] = fx_records(p, L.recs[t], 256);
    }
    char p[600];
    snprintf(p, sizeof p, "%s/series", L.dir);
    L.n_srecs = fx_records(p, L.srecs, 64);
    assert_true(L.n_srecs >= FX_NSERIES);
    return 0;
}

static int group_teardown(void **state)
{
    for (int b = 0; b < 2; b++) {
        for (size_t i = 0; i < L.n_su[b]; i++)
            for (int t = 1; t < TT_N; t++)
                free(L.su[b][i].u[t]);
        free(L.su[b]);
        free(L.type_str[b]);
    }
    fx_rm_rf(L.dir);
    return fx_group_teardown(state);
}

typedef struct mcase {
    int kind, target, op;
    double at;
} mcase;

static mcase CASES[400];
static size_t N_CASES;

static void add_cases(int kind, int target)
{
    for (size_t i = 0; i < sizeof FLIP_AT / sizeof *FLIP_AT; i++)
        CASES[N_CASES++] = (mcase){kind, target, OP_FLIP, FLIP_AT[i]};
    for (size_t i = 0; i < sizeof TRUNC_AT / sizeof *TRUNC_AT; i++)
        CASES[N_CASES++] = (mcase){kind, target, OP_TRUNC, TRUNC_AT[i]};
    for (size_t i = 0; i < sizeof ZERO_AT / sizeof *ZERO_AT; i++)
        CASES[N_CASES++] = (mcase){kind, target, OP_ZERO, ZERO_AT[i]};
    CASES[N_CASES++] = (mcase){kind, target, OP_DELETE, 0};
    for (size_t i = 0; i < sizeof CRC_AT / sizeof *CRC_AT; i++)
        CASES[N_CASES++] = (mcase){kind, target, OP_CRCFIX, CRC_AT[i]};
}

/* The damaged file of case c under dir. */
static void case_path(const mcase *c, const char *dir, char *p, size_t n)
{
    switch (c->kind) {
    case K_META:
    case K_INDEX:
    case K_SYMBOLS:
        snprintf(p, n, "%s/%s/%s", dir, L.blocks[c->target], KIND_NAME[c->kind]);
        break;
    case K_CHUNKS:
        snprintf(p, n, "%s/%s/chunks/000001", dir, L.blocks[c->target]);
        break;
    case K_WAL:
        snprintf(p, n, "%s/wal/%08u", dir, L.segs[L.wal_t[c->target]]);
        break;
    default:
        snprintf(p, n, "%s/series", dir);
    }
}

static void spit(const char *p, const uint8_t *b, size_t len)
{
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, len, f), len);
    fclose(f);
}

static void put_crc(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* What the damage did: [lo, hi) the bytes changed (hi = UINT64_MAX: to the
 * end), changed = anything changed at all. */
typedef struct dmg {
    uint64_t lo, hi;
    bool changed;
    bool boundary; /* a truncation exactly at a record boundary (WAL, series) */
} dmg;

static bool at_boundary(const fx_rec *r, size_t n, uint64_t x)
{
    if (x == 8)
        return true;
    for (size_t i = 0; i < n; i++)
        if (r[i].end == x)
            return true;
    return false;
}

/* Applies case c to the file under dir. */
static dmg apply(const mcase *c, const char *dir)
{
    char p[800];
    case_path(c, dir, p, sizeof p);
    dmg d = {0, 0, false, false};
    if (c->op == OP_DELETE) {
        assert_int_equal(unlink(p), 0);
        d.hi = UINT64_MAX;
        d.changed = true;
        return d;
    }
    size_t len;
    uint8_t *b = slurp(p, &len);
    assert_true(len > 16);
    uint64_t x;
    if (c->at == LAST)
        x = c->op == OP_ZERO ? (len > ZERO_LEN ? len - ZERO_LEN : 0) : len - 1;
    else if (c->at < 0)
        x = (uint64_t)(-c->at - 1);
    else
        x = (uint64_t)(c->at * (double)len);
    if (x >= len)
        x = len - 1;
    switch (c->op) {
    case OP_FLIP:
        b[x] ^= 0x5a;
        d = (dmg){x, x + 1, true, false};
        spit(p, b, len);
        break;
    case OP_FLIP2: { /* x in the head's directory; the same byte of the copy */
        uint64_t y = L.scopy[c->target] + (x - 12);
        assert_true(x >= 12 && x < L.sdir_end[c->target] - 4 && y < len);
        b[x] ^= 0x5a;
        b[y] ^= 0x5a;
        d = (dmg){x, y + 1, true, false};
        spit(p, b, len);
        break;
    }
    case OP_TRUNC:
        assert_int_equal(truncate(p, (off_t)x), 0);
        d = (dmg){x, UINT64_MAX, true, false};
        if (c->kind == K_WAL)
            d.boundary = at_boundary(L.recs[c->target], L.n_recs[c->target], x);
        if (c->kind == K_SERIES)
            d.boundary = at_boundary(L.srecs, L.n_srecs, x);
        break;
    case OP_ZERO: {
        uint64_t e = x + ZERO_LEN < len ? x + ZERO_LEN : len;
        for (uint64_t i = x; i < e; i++) {
            d.changed |= b[i] != 0;
            b[i] = 0;
        }
        d.lo = x;
        d.hi = e;
        spit(p, b, len);
        break;
    }
    default: /* OP_CRCFIX */
        if (c->kind == K_META) {
            /* a digit changed: still valid JSON */
            size_t i = x;
            while (i < len && (b[i] < '0' || b[i] > '9'))
                i++;
            if (i == len)
                for (i = x; i > 0 && (b[i] < '0' || b[i] > '9'); i--)
                    ;
            assert_true(b[i] >= '0' && b[i] <= '9');
            b[i] = b[i] == '9' ? '8' : (uint8_t)(b[i] + 1);
            d = (dmg){i, i + 1, true, false};
        } else if (c->kind == K_INDEX || c->kind == K_SYMBOLS) {
            if (x < 8)
                x = 8;
            if (x >= len - 4)
                x = len - 5;
            b[x] ^= 0x01;
            put_crc(b + len - 4, pd_crc32c(0, b, len - 4));
            d = (dmg){x, x + 1, true, false};
        } else if (c->kind == K_CHUNKS) {
            /* the frame holding x: u32 len, kind, payload, crc32c(kind + payload) */
            uint64_t off = 8;
            for (;;) {
                uint32_t fl = (uint32_t)b[off] | (uint32_t)b[off + 1] << 8 |
                              (uint32_t)b[off + 2] << 16 | (uint32_t)b[off + 3] << 24;
                uint64_t end = off + 5 + fl + 4;
                assert_true(end <= len);
                if (x < end || end == len) {
                    uint64_t y = off + 5 + fl / 2;
                    b[y] ^= 0x01;
                    put_crc(b + off + 5 + fl,
                            pd_crc32c(pd_crc32c(0, b + off + 4, 1), b + off + 5, fl));
                    d = (dmg){off, end, true, false};
                    break;
                }
                off = end;
            }
        } else {
            /* a WAL or series record: its payload edited, its CRC fixed */
            const fx_rec *r = c->kind == K_WAL ? L.recs[c->target] : L.srecs;
            size_t n = c->kind == K_WAL ? L.n_recs[c->target] : L.n_srecs;
            size_t k = 0;
            while (k + 1 < n && r[k].end <= x)
                k++;
            uint64_t y;
            if (r[k].type == 2)
                y = r[k].end - 5; /* the body's gzip CRC32 */
            else
                y = r[k].off + 9 + (x % (r[k].end - r[k].off - 9)); /* anywhere */
            b[y] ^= r[k].type == 2 ? 0x01 : 0x20;
            uint32_t l = (uint32_t)(r[k].end - r[k].off - 9);
            put_crc(b + r[k].off + 5,
                    pd_crc32c(pd_crc32c(0, b + r[k].off, 1), b + r[k].off + 9, l));
            d = (dmg){r[k].off, c->kind == K_WAL ? r[k].end : UINT64_MAX, true, false};
        }
        spit(p, b, len);
    }
    free(b);
    return d;
}

/* Whether profile e may be lost by damage d of case c. */
static bool touched(const mcase *c, const dmg *d, const fx_exp *e)
{
    /* block 0 holds [0, 10 s), block 1 [10 s, 20 s), the head the rest */
    int blk = e->ts < FX_DUR ? 0 : e->ts < 2 * FX_DUR ? 1 : -1;
    switch (c->kind) {
    case K_META:
        return false; /* rebuilt from the other files */
    case K_INDEX: {
        /* format 2: a damaged series entry loses its series; when the toc or
           the footer is gone too (truncation, the end zeroed, a CRC-fixed
           edit rewrote the last 4 bytes) entries are found by a walk from
           the start, which ends at the first damaged one */
        if (blk != c->target)
            return false;
        /* issue 27: a damaged header is read past (version 2: the footer,
           toc and entries verify on their own) */
        if (c->op == OP_DELETE || (d->lo < 8 && c->op == OP_TRUNC))
            return true;
        const uint64_t *en = L.ient[blk][e->s];
        bool walk = d->hi > L.itoc[blk] || c->op == OP_TRUNC || c->op == OP_CRCFIX;
        return walk ? en[1] > d->lo : en[0] < d->hi && d->lo < en[1];
    }
    case K_SYMBOLS: {
        /* format 2: the frames the damage reaches lose the profiles whose
           closure uses one of their entries (sym_closure.h). Issue 27: the
           header costs nothing (its CRC is checked against the header as
           written), and neither does the directory (its length, bytes or
           CRC) while its copy at the end verifies (symbols version 3), nor
           the copy while the head's verifies; both damaged lose the block.
           A truncation always loses the copy; a CRC-fixed edit rewrote the
           last 4 bytes (the copy's length). */
        if (blk != c->target)
            return false;
        if (c->op == OP_DELETE)
            return true;
        uint64_t dend = L.sdir_end[blk], cp = L.scopy[blk];
        bool head_hit = c->op == OP_TRUNC ? d->lo < dend : d->lo < dend && d->hi > 8;
        bool copy_hit = c->op == OP_TRUNC || c->op == OP_CRCFIX || d->hi > cp;
        if (head_hit && copy_hit)
            return true;
        const uses *u = L.uses_of[e - FX_E];
        assert_non_null(u);
        for (size_t k = 0; k < L.n_sfr[blk]; k++) {
            const vframe *f = &L.sfr[blk][k];
            uint64_t fe = f->off + f->zlen;
            bool hit = c->op == OP_TRUNC ? fe > d->lo : f->off < d->hi && d->lo < fe;
            if (hit && frame_touches(u, f, L.type_str[blk]))
                return true;
        }
        return false;
    }
    case K_CHUNKS:
        if (blk != c->target)
            return false;
        /* issue 27: the header is redundant (constants; the version found
           again from the first time chunk): only the frames it overlaps */
        if (c->op == OP_DELETE || c->op == OP_TRUNC)
            return true;
        return L.ext[blk][e->s][0] < d->hi && d->lo < L.ext[blk][e->s][1];
    case K_WAL: {
        if (blk >= 0)
            return false; /* read from its block */
        const fx_rec *r = L.recs[c->target];
        for (size_t i = 0; i < L.n_recs[c->target]; i++)
            if (r[i].type == 2 && r[i].ref == L.refs[e->s] && r[i].ts == e->ts)
                /* issue 27: replay finds the next valid record after damage,
                   so a flip or a zeroed range costs the records it overlaps;
                   a truncation everything after it */
                return c->op == OP_DELETE || d->lo < 8 ||
                       (c->op == OP_CRCFIX  ? r[i].off == d->lo
                        : c->op == OP_TRUNC ? r[i].end > d->lo
                                            : r[i].off < d->hi && d->lo < r[i].end);
        return false;
    }
    default: /* K_SERIES: every WAL segment names the series of its profiles
                again (issue 27), so no damage to the series file, its
                header included, nor deleting it, costs a profile; only
                an edit that still verifies (CRC fixed) can give the
                series of that record other labels */
        if (blk >= 0 || c->op != OP_CRCFIX)
            return false;
        for (size_t i = 0; i < L.n_srecs; i++)
            if (L.srecs[i].off == d->lo)
                return L.srecs[i].ref == L.refs[e->s];
        return false;
    }
}

/* Whether check must find case c (d: what it did). WAL continuity (format
 * version 2): the first segment deleted shows against the series file's
 * CHECKPOINT record, the last one deleted by the END record its predecessor
 * ends with, an older segment cut at a record boundary by its missing END. */
static bool detectable(const mcase *c, const dmg *d)
{
    if (!d->changed || c->op == OP_CRCFIX)
        return false;
    if (d->boundary && c->kind != K_WAL)
        return false; /* the series file cut between records */
    /* issue 27: the newest segment cut short (at or between record
       boundaries) shows against PATH/wal/synced, what was fsync'd */
    return true;
}

static void served_all(const char *dir, const mcase *c, const dmg *d, const char *what,
                       size_t *lost, bool exact)
{
    pd_storage *st = fx_open(dir, -1);
    uint64_t refs[FX_NSERIES];
    for (int s = 0; s < FX_NSERIES; s++)
        refs[s] = fx_ref(st, s);
    *lost = 0;
    for (size_t k = 0; k < FX_NE; k++) {
        const fx_exp *e = &FX_E[k];
        bool t = touched(c, d, e);
        bool ok = fx_served(st, refs, e);
        /* index and symbols (format 2): the test knows exactly what is lost */
        if (exact && t && ok)
            fail_msg("%s %s (target %d, at %g, bytes %llu..%llu): series %d at %lld ms is "
                     "served, but the damage touches it %s",
                     OP_NAME[c->op], KIND_NAME[c->kind], c->target, c->at,
                     (unsigned long long)d->lo, (unsigned long long)d->hi, e->s, (long long)e->ts,
                     what);
        if (!t && (!ok || !fx_has_point(st, refs[e->s], e->ts)))
            fail_msg("%s %s of %s (target %d, at %g, bytes %llu..%llu): series %d at %lld ms "
                     "not served %s",
                     OP_NAME[c->op], KIND_NAME[c->kind], KIND_NAME[c->kind], c->target, c->at,
                     (unsigned long long)d->lo, (unsigned long long)d->hi, e->s, (long long)e->ts,
                     what);
        *lost += !ok;
    }
    pd_storage_close(st);
}

static void test_matrix(void **state)
{
    (void)state;
    N_CASES = 0;
    for (int b = 0; b < 2; b++)
        for (int k = K_META; k <= K_CHUNKS; k++)
            add_cases(k, b);
    for (int t = 0; t < 3; t++)
        add_cases(K_WAL, t);
    add_cases(K_SERIES, 0);
    /* issue 27: a byte of the symbols directory's stored CRC; its length,
       first, middle and last bytes, zeroed; the same bytes of its copy at the
       end; a byte in both (the block lost) */
    for (int b = 0; b < 2; b++) {
        uint64_t dend = L.sdir_end[b], cp = L.scopy[b], mid = 12 + (dend - 4 - 12) / 2;
        const uint64_t at[] = {dend - 2, 9, 12, mid, dend - 5};
        for (size_t i = 0; i < sizeof at / sizeof *at; i++)
            CASES[N_CASES++] = (mcase){K_SYMBOLS, b, OP_FLIP, -(double)at[i] - 1};
        CASES[N_CASES++] = (mcase){K_SYMBOLS, b, OP_ZERO, -(double)12 - 1};
        const uint64_t cat[] = {cp, cp + (mid - 12), L.slen[b] - 6, L.slen[b] - 3};
        for (size_t i = 0; i < sizeof cat / sizeof *cat; i++)
            CASES[N_CASES++] = (mcase){K_SYMBOLS, b, OP_FLIP, -(double)cat[i] - 1};
        CASES[N_CASES++] = (mcase){K_SYMBOLS, b, OP_FLIP2, -(double)mid - 1};
    }
    assert_true(N_CASES >= 200);
    size_t n_detect = 0, n_lost_cases = 0, n_lost = 0, lost_by_kind[NKIND] = {0},
           cases_by_kind[NKIND] = {0};
    static char out[1 << 16];
    for (size_t ci = 0; ci < N_CASES; ci++) {
        const mcase *c = &CASES[ci];
        char dir[300];
        snprintf(dir, sizeof dir, "%s.case", L.dir);
        fx_rm_rf(dir);
        fx_copy_tree(L.dir, dir);
        dmg d = apply(c, dir);
        bool det = detectable(c, &d);
        /* check names the file (and the offset for binary files) */
        int rc = run_tsdb(out, sizeof out, "check", dir);
        if (det) {
            n_detect++;
            char p[800];
            case_path(c, dir, p, sizeof p);
            const char *hit = strstr(out, p);
            if (rc != 1 || !hit)
                fail_msg("case %zu (%s %s, target %d, at %g): check rc %d, output:\n%s", ci,
                         OP_NAME[c->op], KIND_NAME[c->kind], c->target, c->at, rc, out);
            char line[1024] = "";
            if (hit)
                snprintf(line, sizeof line, "%.*s", (int)strcspn(hit, "\n"), hit);
            if (c->op != OP_DELETE && c->kind != K_META && !strstr(line, "offset"))
                fail_msg("case %zu (%s %s): check names no offset:\n%s", ci, OP_NAME[c->op],
                         KIND_NAME[c->kind], out);
        }
        double c0 = fx_corruptions();
        size_t lost;
        /* exact (lost <=> touched) for index and symbols damage that changed
           bytes, before repair (a zeroed range may leave a frame's bytes as
           they were: one way only) */
        bool exact = (c->kind == K_INDEX || c->kind == K_SYMBOLS) && d.changed && c->op != OP_ZERO;
        served_all(dir, c, &d, "after open", &lost, exact);
        if (lost && det && fx_corruptions() <= c0)
            fail_msg("case %zu (%s %s, target %d, at %g): %zu profiles lost, nothing counted", ci,
                     OP_NAME[c->op], KIND_NAME[c->kind], c->target, c->at, lost);
        n_lost += lost;
        n_lost_cases += lost > 0;
        lost_by_kind[c->kind] += lost;
        cases_by_kind[c->kind]++;
        /* repair keeps every intact profile; its blocks pass check */
        rc = run_tsdb(out, sizeof out, "repair", dir);
        if (rc != 0)
            fail_msg("case %zu (%s %s): repair rc %d:\n%s", ci, OP_NAME[c->op], KIND_NAME[c->kind],
                     rc, out);
        if (c->kind == K_SERIES) { /* issue 27: repair rebuilds the series file */
            char sp[800];
            snprintf(sp, sizeof sp, "CORRUPT %s/series", dir);
            static char out2[1 << 16];
            run_tsdb(out2, sizeof out2, "check", dir);
            if (strstr(out2, sp))
                fail_msg("case %zu (%s series, at %g): series file still damaged after "
                         "repair:\n%s\nrepair said:\n%s",
                         ci, OP_NAME[c->op], c->at, out2, out);
        }
        served_all(dir, c, &d, "after repair", &lost, false);
        if (c->kind <= K_CHUNKS) {
            run_tsdb(out, sizeof out, "check", dir);
            if (strstr(out, "CORRUPT"))
                fail_msg("case %zu (%s %s, target %d, at %g): blocks still damaged after "
                         "repair:\n%s",
                         ci, OP_NAME[c->op], KIND_NAME[c->kind], c->target, c->at, out);
        }
        fx_rm_rf(dir);
    }
    print_message("corruption matrix: %zu cases, %zu detectable, %zu with profiles lost "
                  "(%zu profiles in all); every untouched profile served\n",
                  N_CASES, n_detect, n_lost_cases, n_lost);
    print_message("  (blocks of %zu and %zu symbols frames; index and symbols cases checked "
                  "exactly: a profile is lost if and only if the damage touches it)\n",
                  L.n_sfr[0], L.n_sfr[1]);
    for (int k = 0; k < NKIND; k++)
        print_message("  %-9s %3zu cases, %4zu profiles not served after open (of %zu per case)\n",
                      KIND_NAME[k], cases_by_kind[k], lost_by_kind[k], FX_NE);
}

/* Issue 27: `profd tsdb check` goes on past a damaged WAL record as replay
 * does (to the next record that verifies) and lists every damaged record —
 * file and offset — with the count of good records after it in its file.
 * Damage: a byte flipped in every other record of the oldest, a middle and
 * the newest segment (none of them the last of its file). The expected lines are computed from the
 * intact segments' record list (fx_records), not from the checker. */
static void test_check_lists_every_damaged_wal_record(void **state)
{
    (void)state;
    char dir[300];
    snprintf(dir, sizeof dir, "%s.walcheck", L.dir);
    fx_rm_rf(dir);
    fx_copy_tree(L.dir, dir);
    /* in the oldest, middle and newest segments: records k0, k0 + 2, ...
       before the last (k0 = 1 in the middle one, else 0): not adjacent, so
       each is its own damage, with a good record after it */
    size_t expected = 0;
    static char out[1 << 16];
    for (int t = 0; t < 3; t++) {
        char p[800];
        snprintf(p, sizeof p, "%s/wal/%08u", dir, L.segs[L.wal_t[t]]);
        size_t len;
        uint8_t *b = slurp(p, &len);
        for (size_t k = t == 1; k + 1 < L.n_recs[t]; k += 2) {
            const fx_rec *r = &L.recs[t][k];
            b[r->off + PD_WAL_REC_HDR + (r->end - r->off - PD_WAL_REC_HDR) / 2] ^= 0x5a;
        }
        spit(p, b, len);
        free(b);
    }
    int rc = run_tsdb(out, sizeof out, "check", dir);
    assert_int_equal(rc, 1);
    for (int t = 0; t < 3; t++) {
        char p[800];
        snprintf(p, sizeof p, "%s/wal/%08u", dir, L.segs[L.wal_t[t]]);
        size_t nr = L.n_recs[t], k0 = t == 1;
        for (size_t k = k0; k + 1 < nr; k += 2) {
            const fx_rec *r = &L.recs[t][k];
            /* good records after it: those after it in the file, less the
               damaged ones among them */
            size_t damaged_after = 0;
            for (size_t j = k + 2; j + 1 < nr; j += 2)
                damaged_after++;
            size_t after = nr - 1 - k - damaged_after;
            char want[1000];
            snprintf(want, sizeof want,
                     "CORRUPT %s offset %llu: CRC mismatch (%llu bytes skipped to the next valid "
                     "record at offset %llu; %zu good records after it)",
                     p, (unsigned long long)r->off, (unsigned long long)(r->end - r->off),
                     (unsigned long long)r->end, after);
            if (!strstr(out, want))
                fail_msg("check does not list\n  %s\noutput:\n%s", want, out);
            expected++;
        }
    }
    assert_true(expected >= 4);
    /* nothing else is listed as damaged in the WAL */
    size_t n_corrupt = 0;
    char wal[400];
    snprintf(wal, sizeof wal, "CORRUPT %s/wal/", dir);
    for (const char *q = out; (q = strstr(q, wal)); q++)
        n_corrupt++;
    if (n_corrupt != expected)
        fail_msg("%zu WAL lines, want %zu:\n%s", n_corrupt, expected, out);
    print_message("tsdb check: %zu damaged WAL records listed, with the good records after each\n",
                  expected);
    fx_rm_rf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matrix),
        cmocka_unit_test(test_check_lists_every_damaged_wal_record),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
