/*
 * storage/tsdb/symbols_file.c — the `symbols` file of a block (API and
 * layouts: symbols_int.h, docs/format/symbols.md): version 1 (one zstd
 * frame of the payload), 2 (each range of a table its own checksummed
 * frame, listed in a directory) and 3 (small tables sharing a frame, the
 * directory kept twice); reading a damaged file marks the entries of the
 * frames that do not verify, and pd__symbols_settle_damage spreads the
 * damage along references. The tables themselves: symbols.c.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "base/crc32c.h"
#include "base/varint.h"
#include "storage/tsdb/symbols_int.h"
#include "storage/tsdb/symbols_rd_int.h"

/* ---- the `symbols` file: version 1 (one frame) and 2 (framed tables) ---- */

#define SF_HDR 8
#define SF_MAX_RAW (16ull << 30) /* decompressed bytes of one file: cap */

static void sput_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t sget_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int zstd_append(pd_buf *out, const void *src, size_t len, int level)
{
    size_t bound = ZSTD_compressBound(len);
    int rc = pd_buf_reserve(out, bound);
    if (rc)
        return rc;
    size_t z = ZSTD_compress(out->data + out->len, bound, src, len, level);
    if (ZSTD_isError(z))
        return PD_ENOMEM;
    out->len += z;
    return 0;
}

int pd__symbols_entry_encode(const pd_symbols *s, int t, size_t i, pd_buf *o)
{
    int rc = 0;
    switch (t) {
    case T_STR:
        PUT(s->str_len[i]);
        return pd_buf_append(o, s->str[i], s->str_len[i]);
    case T_MAP: {
        const pd_sym_mapping *m = &s->map[i];
        PUT(m->start);
        PUT(m->limit);
        PUT(m->offset);
        PUT(m->filename);
        PUT(m->build_id);
        PUTB(m->flags);
        return 0;
    }
    case T_FN:
        PUT(s->fn[i].name);
        PUT(s->fn[i].system_name);
        PUT(s->fn[i].filename);
        PUT(pd_zigzag_enc(s->fn[i].start_line));
        return 0;
    case T_LOC: {
        const pd_sym_location *l = &s->loc[i];
        PUT(l->mapping);
        PUT(l->address);
        PUTB(l->folded);
        PUT(l->n_line);
        for (uint32_t j = 0; j < l->n_line; j++) {
            const pd_sym_line *ln = &s->line[l->first_line + j];
            PUT(ln->function);
            PUT(pd_zigzag_enc(ln->line));
            PUT(pd_zigzag_enc(ln->column));
        }
        return 0;
    }
    case T_STACK:
        if (s->stack_format == PD_STACKS_TREE) {
            PUT(i - s->parent[i]);
            PUT(s->node_loc[i]);
        } else {
            PUT(s->list_off[i] - s->list_off[i - 1]);
            for (uint64_t j = s->list_off[i - 1]; j < s->list_off[i]; j++)
                PUT(s->list_locs[j]);
        }
        return 0;
    default:
        PUT(s->lset_off[i] - s->lset_off[i - 1]);
        for (uint64_t j = s->lset_off[i - 1]; j < s->lset_off[i]; j++) {
            PUT(s->lab[j].key);
            PUT(s->lab[j].str);
            PUT(pd_zigzag_enc(s->lab[j].num));
            PUT(s->lab[j].num_unit);
        }
        return 0;
    }
}

static int file_v1(const pd_symbols *s, int level, pd_buf *out)
{
    pd_buf raw;
    pd_buf_init(&raw, 0);
    size_t start = out->len;
    uint8_t h[SF_HDR + 8] = {'P', 'D', 'S', 'Y', 1, 0, 0, 0};
    int rc = pd__symbols_encode(s, &raw);
    for (int i = 0; i < 8; i++)
        h[SF_HDR + i] = (uint8_t)((uint64_t)raw.len >> (8 * i));
    if (!rc)
        rc = pd_buf_append(out, h, sizeof h);
    if (!rc)
        rc = zstd_append(out, raw.data, raw.len, level);
    uint8_t crc[4];
    if (!rc) {
        sput_u32(crc, pd_crc32c(0, out->data + start, out->len - start));
        rc = pd_buf_append(out, crc, 4);
    }
    pd_buf_release(&raw);
    return rc;
}

int pd__symbols_file_encode(const pd_symbols *s, int version, int level, size_t frame_bytes,
                            pd_buf *out)
{
    if (version == 1)
        return file_v1(s, level, out);
    bool v3 = version >= 3;
    if (!frame_bytes)
        frame_bytes = PD_SYMBOLS_FRAME_BYTES;
    size_t share = frame_bytes < PD_SYMBOLS_SHARE_BYTES ? frame_bytes : PD_SYMBOLS_SHARE_BYTES;
    pd_buf dir, frames, raw, parts;
    pd_buf_init(&dir, 0);
    pd_buf_init(&frames, 0);
    pd_buf_init(&raw, 0);
    pd_buf_init(&parts, 0);
    int rc;
    size_t n_frames = 0, n_parts = 0;
    pd_buf fdir; /* the frame list, counted before it is known */
    pd_buf_init(&fdir, 0);
    size_t count[T_N] = {0, s->n_str, s->n_map, s->n_fn, s->n_loc, s->n_stack, s->n_lset};
    int last_t = 0; /* the last table with entries */
    for (int t = T_STR; t < T_N; t++)
        if (count[t])
            last_t = t;
    if ((rc = pd_buf_putc(&dir, (char)s->stack_format)))
        goto out;
    for (int t = T_STR; t < T_N; t++)
        if ((rc = pd_buf_put_varint(&dir, count[t])))
            goto out;
    for (int t = T_STR; t < T_N; t++) {
        size_t base = t >= T_STACK ? 1 : 0, in = 0;
        for (size_t i = 0; i < count[t]; i++) {
            if ((rc = pd__symbols_entry_encode(s, t, base + i, &raw)))
                goto out;
            in++;
            bool tend = i + 1 == count[t];
            /* version 2: a frame ends with its table; version 3: also, but
               a table that ends with the frame below PD_SYMBOLS_SHARE_BYTES
               raw leaves it open for the next tables (or at the very end),
               so the small tables of a block share one frame (its zstd frame
               header and directory entry) while a bigger table keeps its
               own frames (damage to one costs only its entries) */
            bool flush =
                raw.len >= frame_bytes || (tend && (!v3 || t == last_t || raw.len >= share));
            if (v3 && (flush || tend)) {
                if ((rc = pd_buf_putc(&parts, (char)t)) || (rc = pd_buf_put_varint(&parts, in)))
                    goto out;
                n_parts++;
                in = 0;
            }
            if (!flush)
                continue;
            size_t z0 = frames.len;
            if ((rc = zstd_append(&frames, raw.data, raw.len, level)))
                goto out;
            uint8_t crc[4];
            sput_u32(crc, pd_crc32c(0, frames.data + z0, frames.len - z0));
            if (v3)
                rc = pd_buf_put_varint(&fdir, n_parts);
            else if (!(rc = pd_buf_putc(&fdir, (char)t)))
                rc = pd_buf_put_varint(&fdir, in);
            if (rc || (v3 && (rc = pd_buf_append(&fdir, parts.data, parts.len))) ||
                (rc = pd_buf_put_varint(&fdir, frames.len - z0)) ||
                (rc = pd_buf_put_varint(&fdir, raw.len)) || (rc = pd_buf_append(&fdir, crc, 4)))
                goto out;
            n_frames++;
            in = n_parts = 0;
            pd_buf_reset(&parts);
            pd_buf_reset(&raw);
        }
    }
    if ((rc = pd_buf_put_varint(&dir, n_frames)) || (rc = pd_buf_append(&dir, fdir.data, fdir.len)))
        goto out;
    if (dir.len > UINT32_MAX) {
        rc = PD_ETOOBIG;
        goto out;
    }
    size_t start = out->len;
    uint8_t h[SF_HDR + 4] = {'P', 'D', 'S', 'Y', (uint8_t)(v3 ? 3 : 2), 0, 0, 0};
    sput_u32(h + SF_HDR, (uint32_t)dir.len);
    uint8_t crc[4];
    if ((rc = pd_buf_append(out, h, sizeof h)) || (rc = pd_buf_append(out, dir.data, dir.len)))
        goto out;
    sput_u32(crc, pd_crc32c(0, out->data + start, out->len - start));
    if ((rc = pd_buf_append(out, crc, 4)) || (rc = pd_buf_append(out, frames.data, frames.len)))
        goto out;
    /* version 3: the directory again at the end (issue 27: a damaged
       directory costs nothing): directory | crc32c (the same) | D */
    if (v3 && ((rc = pd_buf_append(out, dir.data, dir.len)) || (rc = pd_buf_append(out, crc, 4)) ||
               (rc = pd_buf_append(out, h + SF_HDR, 4))))
        goto out;
out:
    pd_buf_release(&dir);
    pd_buf_release(&fdir);
    pd_buf_release(&frames);
    pd_buf_release(&raw);
    pd_buf_release(&parts);
    return rc;
}

static int file_decode_v1(pd_symbols *s, const char *path, const uint8_t *p, size_t len,
                          pd_err *err)
{
    if (len < SF_HDR + 8 + 4)
        return pd_err_set(err, PD_ECORRUPT, "%s offset 0: file too short (%zu bytes)", path, len);
    uint32_t want = sget_u32(p + len - 4), got = pd_crc32c(0, p, len - 4);
    if (want != got)
        return pd_err_set(err, PD_ECORRUPT,
                          "%s offset %zu: crc32c mismatch (stored %08x, computed %08x)", path,
                          len - 4, want, got);
    uint64_t raw_len = 0;
    for (int i = 7; i >= 0; i--)
        raw_len = raw_len << 8 | p[SF_HDR + i];
    size_t zl = len - SF_HDR - 8 - 4;
    unsigned long long fc = ZSTD_getFrameContentSize(p + SF_HDR + 8, zl);
    if (raw_len > SF_MAX_RAW || fc != raw_len)
        return pd_err_set(err, PD_ECORRUPT,
                          "%s offset %d: payload length %llu does not match its zstd frame", path,
                          SF_HDR, (unsigned long long)raw_len);
    uint8_t *raw = malloc(raw_len + 1);
    if (!raw)
        return PD_ENOMEM;
    size_t n = ZSTD_decompress(raw, raw_len, p + SF_HDR + 8, zl);
    if (ZSTD_isError(n) || n != raw_len) {
        free(raw);
        return pd_err_set(err, PD_ECORRUPT, "%s offset %d: zstd: %s", path, SF_HDR + 8,
                          ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short payload");
    }
    int rc = pd__symbols_decode(s, raw, raw_len, err);
    if (rc)
        pd_err_prefix(err, "%s", path);
    return rc;
}

/* A frame of version 2 (one part: a range of one table) or 3 (the ranges of
 * up to T_N - 1 tables, in table order). */
typedef struct sframe {
    uint8_t np;
    struct {
        uint8_t t;
        uint64_t count, first;
    } part[T_N];
    uint64_t zlen, rlen, off;
    uint32_t crc;
} sframe;

/* Parses the raw entries of frame f into s; 0 or PD_ECORRUPT (no message
 * needed: the caller names the frame) or PD_ENOMEM. sb: string bytes,
 * soff: string offsets into sb. */
static int frame_parse(pd_symbols *s, const sframe *f, const uint8_t *raw, size_t rl, pd_buf *sb,
                       uint64_t *soff, size_t *cap_line, size_t *cap_ll, size_t *cap_lab)
{
    pd_err e;
    rd r = {raw, rl, 0, &e, 0};
    size_t NS = s->n_str;
    for (uint8_t pi = 0; pi < f->np && !r.bad; pi++)
        for (uint64_t k = 0; k < f->part[pi].count && !r.bad; k++) {
            size_t i = (size_t)(f->part[pi].first + k);
            switch (f->part[pi].t) {
            case T_STR: {
                uint64_t l = get(&r, "string length");
                if (!r.bad && l > r.len - r.off)
                    return PD_ECORRUPT;
                if (r.bad)
                    break;
                soff[i] = sb->len;
                s->str_len[i] = (uint32_t)l;
                if (l > UINT32_MAX || pd_buf_append(sb, raw + r.off, (size_t)l) ||
                    pd_buf_putc(sb, 0))
                    return l > UINT32_MAX ? PD_ECORRUPT : PD_ENOMEM;
                r.off += (size_t)l;
                break;
            }
            case T_MAP: {
                pd_sym_mapping *m = &s->map[i];
                m->start = get(&r, "");
                m->limit = get(&r, "");
                m->offset = get(&r, "");
                m->filename = getref(&r, NS, "");
                m->build_id = getref(&r, NS, "");
                m->flags = getb(&r, "");
                break;
            }
            case T_FN:
                s->fn[i].name = getref(&r, NS, "");
                s->fn[i].system_name = getref(&r, NS, "");
                s->fn[i].filename = getref(&r, NS, "");
                s->fn[i].start_line = pd_zigzag_dec(get(&r, ""));
                break;
            case T_LOC: {
                pd_sym_location *l = &s->loc[i];
                l->mapping = getref(&r, s->n_map + 1, "");
                l->address = get(&r, "");
                l->folded = getb(&r, "");
                uint32_t nl = (uint32_t)getn(&r, 3, "line");
                l->first_line = (uint32_t)s->n_line;
                for (uint32_t j = 0; j < nl && !r.bad; j++) {
                    if (grow(&s->line, cap_line, s->n_line, sizeof *s->line))
                        return PD_ENOMEM;
                    pd_sym_line *ln = &s->line[s->n_line++];
                    ln->function = getref(&r, s->n_fn + 1, "");
                    ln->line = pd_zigzag_dec(get(&r, ""));
                    ln->column = pd_zigzag_dec(get(&r, ""));
                }
                l->n_line = r.bad ? 0 : nl;
                break;
            }
            case T_STACK:
                if (s->stack_format == PD_STACKS_TREE) {
                    uint64_t d = getref(&r, i + 1, "");
                    s->node_loc[i] = getref(&r, s->n_loc, "");
                    if (!r.bad && d == 0)
                        return PD_ECORRUPT;
                    s->parent[i] = (uint32_t)(i - d);
                } else {
                    uint64_t d = getn(&r, 1, "");
                    for (uint64_t j = 0; j < d && !r.bad; j++) {
                        if (grow(&s->list_locs, cap_ll, s->n_list_locs, sizeof *s->list_locs))
                            return PD_ENOMEM;
                        s->list_locs[s->n_list_locs++] = getref(&r, s->n_loc, "");
                    }
                    s->list_off[i] = s->n_list_locs;
                    if (d > s->max_depth)
                        s->max_depth = d;
                }
                break;
            default: {
                size_t n = getn(&r, 4, "");
                for (size_t j = 0; j < n && !r.bad; j++) {
                    if (grow(&s->lab, cap_lab, s->n_lab, sizeof *s->lab))
                        return PD_ENOMEM;
                    pd_sym_label *lb = &s->lab[s->n_lab++];
                    lb->key = getref(&r, NS, "");
                    lb->str = getref(&r, NS, "");
                    lb->num = pd_zigzag_dec(get(&r, ""));
                    lb->num_unit = getref(&r, NS, "");
                }
                s->lset_off[i] = s->n_lab;
            }
            }
        }
    if (r.bad || r.off != r.len)
        return PD_ECORRUPT;
    return 0;
}

/* Frame f did not verify: its entries are empty and bad. */
static void frame_bad(pd_symbols *s, const sframe *f, uint64_t *soff)
{
    for (uint8_t pi = 0; pi < f->np; pi++)
        for (uint64_t k = 0; k < f->part[pi].count; k++) {
            size_t i = (size_t)(f->part[pi].first + k);
            switch (f->part[pi].t) {
            case T_STR:
                soff[i] = 0; /* sb starts with a NUL: "" */
                s->str_len[i] = 0;
                s->str_bad[i] = 1;
                break;
            case T_MAP:
                memset(&s->map[i], 0, sizeof s->map[i]);
                s->map_bad[i] = 1;
                break;
            case T_FN:
                memset(&s->fn[i], 0, sizeof s->fn[i]);
                s->fn_bad[i] = 1;
                break;
            case T_LOC:
                memset(&s->loc[i], 0, sizeof s->loc[i]);
                s->loc[i].first_line = (uint32_t)s->n_line;
                s->loc_bad[i] = 1;
                break;
            case T_STACK:
                if (s->stack_format == PD_STACKS_TREE)
                    s->parent[i] = s->node_loc[i] = 0;
                else
                    s->list_off[i] = s->n_list_locs;
                s->stack_bad[i] = 1;
                break;
            default:
                s->lset_off[i] = s->n_lab;
                s->lset_bad[i] = 1;
            }
        }
}

static void set_damage(pd_symbols *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_damage(pd_symbols *s, const char *fmt, ...)
{
    if (s->damage)
        return;
    char m[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    s->damage = strdup(m);
}

/* Parses the directory d[0..dl) of a version-2 or -3 file whose frames
 * start at file offset fstart: the stack format, the table counts, the
 * frames (malloc'd into *out, *nf of them; freed on failure) and *fend, the
 * end of the last frame. false when it does not decode or its frames do not
 * cover every table exactly (*nomem: out of memory). */
static bool dir_parse(const uint8_t *d, size_t dl, int ver, uint64_t fstart, uint8_t *sf,
                      uint64_t count[T_N], sframe **out, uint64_t *nf_out, uint64_t *fend,
                      bool *nomem)
{
    pd_err e2;
    rd r = {d, dl, 0, &e2, 0};
    *out = NULL;
    *sf = getb(&r, "stack format");
    for (int t = T_STR; t < T_N; t++)
        count[t] = get(&r, "count");
    uint64_t nf = getn(&r, 8, "frame");
    if (r.bad || (*sf != PD_STACKS_TREE && *sf != PD_STACKS_LIST))
        return false;
    sframe *fr = calloc(nf + 1, sizeof *fr);
    if (!fr) {
        *nomem = true;
        return false;
    }
    uint64_t off = fstart, next[T_N] = {0, 0, 0, 0, 0, 1, 1}, raw_total = 0;
    int last_t = T_STR;
    for (uint64_t k = 0; k < nf && !r.bad; k++) {
        sframe *f = &fr[k];
        uint64_t np = ver >= 3 ? get(&r, "parts") : 1, sum = 0;
        if (r.bad || !np || np >= T_N)
            goto bad;
        f->np = (uint8_t)np;
        for (uint8_t pi = 0; pi < f->np; pi++) {
            uint8_t t = getb(&r, "table");
            uint64_t c = get(&r, "count");
            if (r.bad || t < last_t || t >= T_N || (pi && t <= f->part[pi - 1].t) || !c ||
                c > SF_MAX_RAW)
                goto bad;
            last_t = t;
            f->part[pi].t = t;
            f->part[pi].count = c;
            f->part[pi].first = next[t];
            next[t] += c;
            sum += c;
        }
        f->zlen = get(&r, "zstd bytes");
        f->rlen = get(&r, "raw bytes");
        if (r.bad || r.len - r.off < 4)
            goto bad;
        f->crc = sget_u32(r.p + r.off);
        r.off += 4;
        if (sum > f->rlen || f->rlen > SF_MAX_RAW || f->zlen > SF_MAX_RAW)
            goto bad;
        f->off = off;
        off += f->zlen;
        raw_total += f->rlen;
    }
    for (int t = T_STR; t < T_N; t++)
        if (next[t] - (t >= T_STACK) != count[t])
            goto bad;
    if (r.bad || r.off != r.len || raw_total > SF_MAX_RAW)
        goto bad;
    *out = fr;
    *nf_out = nf;
    *fend = off;
    return true;
bad:
    free(fr);
    return false;
}

/* Versions 2 and 3 (ver): the directory at the head, or (3) its copy at the
 * end when the head's does not verify; then every frame on its own. */
static int file_decode_framed(pd_symbols *s, const char *path, const uint8_t *p, size_t len,
                              int ver, pd_err *err)
{
    if (len < SF_HDR + 8)
        return pd_err_set(err, PD_ECORRUPT, "%s offset 0: file too short (%zu bytes)", path, len);
    /* issue 27: the header is constant: the CRC is computed over the header
       as written, so a damaged header byte costs nothing */
    const uint8_t canon[SF_HDR] = {'P', 'D', 'S', 'Y', (uint8_t)ver, 0, 0, 0};
    uint32_t dl = sget_u32(p + SF_HDR), want = 0, got = 0;
    bool head_fits = (uint64_t)dl <= len - SF_HDR - 8;
    size_t dend = SF_HDR + 4 + (size_t)dl;
    if (head_fits) {
        want = sget_u32(p + dend);
        got = pd_crc32c(pd_crc32c(0, canon, SF_HDR), p + SF_HDR, dend - SF_HDR);
    }
    /* version 3: the copy at the end, directory | crc32c (as the head's) | D */
    uint32_t tl = 0;
    size_t tdir = 0;
    bool tail_crc = false;
    if (ver >= 3 && len >= SF_HDR + 16) {
        tl = sget_u32(p + len - 4);
        if (2 * (uint64_t)tl + SF_HDR + 16 <= len) {
            tdir = len - 8 - tl;
            tail_crc =
                sget_u32(p + len - 8) ==
                pd_crc32c(pd_crc32c(pd_crc32c(0, canon, SF_HDR), p + len - 4, 4), p + tdir, tl);
        }
    }
    int rc = pd__symbols_init(s, PD_STACKS_TREE, false);
    if (rc)
        return rc;
    uint8_t sf = 0;
    uint64_t count[T_N] = {0}, nf = 0, off = 0;
    sframe *fr = NULL;
    uint64_t *soff = NULL;
    pd_buf sb;
    pd_buf_init(&sb, 0);
    bool nomem = false, from_tail = false;
    /* a head directory whose CRC does not match is either damaged or its
       stored CRC is: without a copy that verifies it is read and kept only if
       it decodes, covers every table exactly and every frame verifies by its
       own CRC (a damaged directory shifts or miscounts frames, which then
       fail) */
    bool dir_crc_bad = false;
    if (head_fits && want == got &&
        dir_parse(p + SF_HDR + 4, dl, ver, dend + 4, &sf, count, &fr, &nf, &off, &nomem)) {
        /* the head verifies */
    } else if (!nomem && tail_crc &&
               dir_parse(p + tdir, tl, ver, SF_HDR + 4 + (uint64_t)tl + 4, &sf, count, &fr, &nf,
                         &off, &nomem)) {
        from_tail = true;
        set_damage(s, "%s offset %d: directory damaged (%s); read from its copy at offset %zu",
                   path, SF_HDR, head_fits ? "crc32c mismatch" : "length past the end", tdir);
    } else if (!nomem && head_fits &&
               dir_parse(p + SF_HDR + 4, dl, ver, dend + 4, &sf, count, &fr, &nf, &off, &nomem)) {
        dir_crc_bad = true;
    } else if (nomem) {
        goto nomem;
    } else if (!head_fits) {
        pd__symbols_release(s);
        return pd_err_set(err, PD_ECORRUPT, "%s offset %d: directory length %u past the end", path,
                          SF_HDR, dl);
    } else
        goto bad_dir;
    s->stack_format = (pd_stack_format)sf;
    /* tables sized from the directory (verified; every count <= its raw bytes) */
    s->n_str = count[T_STR];
    s->n_map = count[T_MAP];
    s->n_fn = count[T_FN];
    s->n_loc = count[T_LOC];
    s->n_stack = count[T_STACK];
    s->n_lset = count[T_LSET];
    s->n_frames = nf;
    size_t cap_line = 0, cap_ll = 0, cap_lab = 0;
    if (!(s->str = calloc(s->n_str + 1, sizeof *s->str)) ||
        !(s->str_len = calloc(s->n_str + 1, sizeof *s->str_len)) ||
        !(soff = calloc(s->n_str + 1, sizeof *soff)) ||
        !(s->map = calloc(s->n_map + 1, sizeof *s->map)) ||
        !(s->fn = calloc(s->n_fn + 1, sizeof *s->fn)) ||
        !(s->loc = calloc(s->n_loc + 1, sizeof *s->loc)) ||
        !(s->lset_off = calloc(s->n_lset + 2, sizeof *s->lset_off)) ||
        !(s->str_bad = calloc(s->n_str + 1, 1)) || !(s->map_bad = calloc(s->n_map + 1, 1)) ||
        !(s->fn_bad = calloc(s->n_fn + 1, 1)) || !(s->loc_bad = calloc(s->n_loc + 1, 1)) ||
        !(s->stack_bad = calloc(s->n_stack + 2, 1)) || !(s->lset_bad = calloc(s->n_lset + 2, 1)))
        goto nomem;
    if (sf == PD_STACKS_TREE) {
        if (!(s->parent = calloc(s->n_stack + 1, sizeof *s->parent)) ||
            !(s->node_loc = calloc(s->n_stack + 1, sizeof *s->node_loc)))
            goto nomem;
    } else if (!(s->list_off = calloc(s->n_stack + 2, sizeof *s->list_off)))
        goto nomem;
    if (pd_buf_putc(&sb, 0))
        goto nomem;
    uint8_t *raw = NULL;
    size_t raw_cap = 0;
    for (uint64_t k = 0; k < nf; k++) {
        sframe *f = &fr[k];
        const char *why = NULL;
        if (f->off > len || len - f->off < f->zlen)
            why = "past the end of the file";
        else if (pd_crc32c(0, p + f->off, (size_t)f->zlen) != f->crc)
            why = "crc32c mismatch";
        if (!why && raw_cap < f->rlen + 1) {
            free(raw);
            raw_cap = (size_t)f->rlen + 1;
            if (!(raw = malloc(raw_cap)))
                goto nomem;
        }
        if (!why) {
            size_t n = ZSTD_decompress(raw, (size_t)f->rlen, p + f->off, (size_t)f->zlen);
            if (ZSTD_isError(n) || n != f->rlen)
                why = "zstd frame does not decode";
        }
        if (!why) {
            size_t line0 = s->n_line, ll0 = s->n_list_locs, lab0 = s->n_lab, sb0 = sb.len;
            rc = frame_parse(s, f, raw, (size_t)f->rlen, &sb, soff, &cap_line, &cap_ll, &cap_lab);
            if (rc == PD_ENOMEM) {
                free(raw);
                goto nomem;
            }
            if (rc) {
                why = "entries do not decode";
                s->n_line = line0;
                s->n_list_locs = ll0;
                s->n_lab = lab0;
                sb.len = sb0;
            }
        }
        if (why) {
            static const char *TN[T_N] = {"",          "strings", "mappings",  "functions",
                                          "locations", "stacks",  "label sets"};
            frame_bad(s, f, soff);
            s->n_bad_frames++;
            set_damage(s, "%s offset %llu: %s%s frame (entries %llu..%llu): %s", path,
                       (unsigned long long)f->off, TN[f->part[0].t], f->np > 1 ? "+" : "",
                       (unsigned long long)f->part[0].first,
                       (unsigned long long)(f->part[0].first + f->part[0].count - 1), why);
        }
    }
    free(raw);
    if (ver >= 3 && !from_tail) {
        /* the copy at the end must be the head's directory, byte for byte */
        if (off + dl + 8 != len || !tail_crc || tl != dl || memcmp(p + SF_HDR + 4, p + tdir, dl))
            set_damage(s,
                       "%s offset %llu: the directory's copy at the end is damaged or missing "
                       "(the directory at the head verifies)",
                       path, (unsigned long long)off);
    } else if (ver >= 3) {
        if (off != tdir)
            set_damage(s,
                       "%s offset %llu: %lld bytes between the last frame and the directory's "
                       "copy",
                       path, (unsigned long long)off, (long long)(tdir - off));
    } else if (off < len)
        set_damage(s, "%s offset %llu: %llu trailing bytes after the last frame", path,
                   (unsigned long long)off, (unsigned long long)(len - off));
    /* TREE: the depth of each node bounds the stack walks */
    if (sf == PD_STACKS_TREE) {
        uint32_t *depth = calloc(s->n_stack + 1, sizeof *depth);
        if (!depth)
            goto nomem;
        for (size_t i = 1; i <= s->n_stack; i++) {
            depth[i] = depth[s->parent[i]] + 1;
            if (depth[i] > s->max_depth)
                s->max_depth = depth[i];
        }
        free(depth);
    }
    if (dir_crc_bad && s->n_bad_frames) { /* the directory itself is not trusted */
        free(fr);
        free(soff);
        pd_buf_release(&sb);
        pd__symbols_release(s);
        return pd_err_set(err, PD_ECORRUPT,
                          "%s offset %zu: directory crc32c mismatch (stored %08x, computed %08x)",
                          path, dend, want, got);
    }
    if (dir_crc_bad)
        set_damage(s,
                   "%s offset %zu: directory crc32c mismatch (every frame verifies: the "
                   "stored CRC was damaged)",
                   path, dend);
    else if (memcmp(p, canon, SF_HDR))
        set_damage(s, "%s offset 0: bad header (the directory verifies)", path);
    s->raw = (uint8_t *)pd_buf_detach(&sb, NULL);
    for (size_t i = 0; i < s->n_str; i++)
        s->str[i] = (const char *)s->raw + soff[i];
    free(soff);
    free(fr);
    if (!s->n_bad_frames) {
        free(s->str_bad);
        free(s->map_bad);
        free(s->fn_bad);
        free(s->loc_bad);
        free(s->stack_bad);
        free(s->lset_bad);
        s->str_bad = s->map_bad = s->fn_bad = s->loc_bad = s->stack_bad = s->lset_bad = NULL;
    }
    return 0;
bad_dir:
    free(fr);
    free(soff);
    pd_buf_release(&sb);
    pd__symbols_release(s);
    return pd_err_set(err, PD_ECORRUPT, "%s offset %d: directory does not decode", path,
                      SF_HDR + 4);
nomem:
    free(fr);
    free(soff);
    pd_buf_release(&sb);
    pd__symbols_release(s);
    return pd_err_set(err, PD_ENOMEM, "out of memory reading %s", path);
}

int pd__symbols_file_decode(pd_symbols *s, const char *path, const uint8_t *p, size_t len,
                            int *version, pd_err *err)
{
    memset(s, 0, sizeof *s);
    if (len < SF_HDR)
        return pd_err_set(err, PD_ECORRUPT, "%s offset 0: file too short (%zu bytes)", path, len);
    if (memcmp(p, "PDSY", 4) || p[5] || p[6] || p[7] || p[4] < 1 || p[4] > 3) {
        /* issue 27: version 1's file CRC covers its header (never read when
           damaged); the directory CRC of versions 2 and 3 is checked against
           the header as written: read as version 3, then 2 */
        for (int v = 3; v >= 2; v--) {
            *version = v;
            memset(s, 0, sizeof *s);
            int rc = file_decode_framed(s, path, p, len, v, err);
            if (rc == 0 || rc == PD_ENOMEM)
                return rc;
        }
        return pd_err_set(err, PD_ECORRUPT, "%s offset 0: bad header (%s)", path,
                          memcmp(p, "PDSY", 4) ? "bad magic" : "unknown version");
    }
    *version = p[4];
    if (p[4] == 1)
        return file_decode_v1(s, path, p, len, err);
    if (p[4] == 2 || p[4] == 3)
        return file_decode_framed(s, path, p, len, p[4], err);
    return pd_err_set(err, PD_ECORRUPT, "%s offset 4: unknown version %u", path, p[4]);
}

bool pd__symbols_restore_string(pd_symbols *s, uint32_t id, const char *bytes, uint32_t len)
{
    if (!s->str_bad || id >= s->n_str || !s->str_bad[id])
        return false;
    s->str[id] = bytes;
    s->str_len[id] = len;
    s->str_bad[id] = 0;
    return true;
}

size_t pd__symbols_settle_damage(pd_symbols *s)
{
    if (!s->n_bad_frames)
        return 0;
    const uint8_t *sb = s->str_bad;
    for (size_t i = 0; i < s->n_map; i++)
        s->map_bad[i] |= sb[s->map[i].filename] | sb[s->map[i].build_id];
    for (size_t i = 0; i < s->n_fn; i++)
        s->fn_bad[i] |= sb[s->fn[i].name] | sb[s->fn[i].system_name] | sb[s->fn[i].filename];
    for (size_t i = 0; i < s->n_loc; i++) {
        const pd_sym_location *l = &s->loc[i];
        if (l->mapping && s->map_bad[l->mapping - 1])
            s->loc_bad[i] = 1;
        for (uint32_t j = 0; j < l->n_line; j++) {
            uint32_t f = s->line[l->first_line + j].function;
            if (f && s->fn_bad[f - 1])
                s->loc_bad[i] = 1;
        }
    }
    size_t n = 0;
    for (size_t i = 1; i <= s->n_stack; i++) {
        if (s->stack_format == PD_STACKS_TREE)
            s->stack_bad[i] |= s->stack_bad[s->parent[i]] | s->loc_bad[s->node_loc[i]];
        else
            for (uint64_t j = s->list_off[i - 1]; j < s->list_off[i]; j++)
                s->stack_bad[i] |= s->loc_bad[s->list_locs[j]];
        n += s->stack_bad[i];
    }
    s->stack_bad[0] = 0;
    for (size_t i = 1; i <= s->n_lset; i++) {
        for (uint64_t j = s->lset_off[i - 1]; j < s->lset_off[i]; j++)
            s->lset_bad[i] |= sb[s->lab[j].key] | sb[s->lab[j].str] | sb[s->lab[j].num_unit];
        n += s->lset_bad[i];
    }
    return n;
}
