/*
 * symbolize/symcache.c — the symbolizer's results cache file of one build
 * ID (symcache.h; docs/format/symbol_cache.md has the boxes).
 *
 * File: <cache dir>/<build id>/symbols.cache, little-endian:
 *
 *   header   magic "PDSC" | version u8 (1) | source kind u8 | 0 u16 |
 *            size u64 | mtime_ns i64 | dev u64 | ino u64 |
 *            path_len u16 | path | bid_len u8 | build id (lowercase hex) |
 *            crc32c u32 (of every header byte before it)
 *   record*  len u32 (payload bytes, 1..PD_SYMCACHE_MAX_RECORD) |
 *            crc32c u32 (of the payload) | payload:
 *              off uvarint | n_lines uvarint (1..64) |
 *              n_lines x (name str | system_name str | file str | line uvarint)
 *            str = uvarint length | bytes (no NUL byte)
 *
 * Invariants: the file is a header followed by whole good records, except
 * for a tail that a crash (or an append that failed) may have torn; the
 * reader keeps the records before the first bad one and load() truncates
 * the file there, so later appends follow good records. A bad header
 * (missing, torn, another version or build ID) keeps nothing; the next
 * flush writes the file anew (temp file + rename). The records were made
 * from the debug file the header names; symbolize.c checks that it is
 * still the one it would use before trusting them (pd_symcache_source_equal)
 * and resets the cache otherwise.
 *
 * Durability: none is needed: a cache. Appends are one write() each flush,
 * never fsynced; a lost or torn tail costs answers to recompute, never a
 * wrong answer (CRC per record, header CRC, source identity).
 *
 * Bounds: a file is read up to max_bytes (a longer one is cut there, its
 * straddling record torn); a record holds at most PD_SYMCACHE_MAX_LINES
 * lines and PD_SYMCACHE_MAX_RECORD bytes; memory is the records' strings
 * (about the file's size) plus a hash map entry per record.
 */
#include "symbolize/symcache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/error.h"
#include "base/varint.h"

static const uint8_t MAGIC[4] = {'P', 'D', 'S', 'C'};
#define REC_HDR 8 /* len u32 | crc u32 */

bool pd_symcache_source_equal(const pd_symcache_source *a, const pd_symcache_source *b)
{
    return a->kind == b->kind && a->size == b->size && a->mtime_ns == b->mtime_ns &&
           a->dev == b->dev && a->ino == b->ino && !strcmp(a->path, b->path);
}

int pd_symcache_init(pd_symcache *c, const char *build_id, const char *path, size_t max_bytes)
{
    memset(c, 0, sizeof *c);
    snprintf(c->build_id, sizeof c->build_id, "%s", build_id);
    if (path && !(c->path = strdup(path)))
        return PD_ENOMEM;
    pd_arena_init_small(&c->arena, 4096);
    pd_u64map_init(&c->by_off);
    c->max_bytes = max_bytes ? max_bytes : PD_SYMCACHE_DEFAULT_MAX_BYTES;
    pd_buf_init(&c->pending, 0);
    return 0;
}

void pd_symcache_release(pd_symcache *c)
{
    if (!c)
        return;
    free(c->path);
    pd_arena_release(&c->arena);
    pd_u64map_release(&c->by_off);
    free(c->recs);
    pd_buf_release(&c->pending);
    memset(c, 0, sizeof *c);
}

static void clear_records(pd_symcache *c)
{
    pd_arena_release(&c->arena);
    pd_u64map_release(&c->by_off);
    pd_u64map_init(&c->by_off);
    c->n_recs = 0;
}

/* ---- little-endian fields ---- */

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

int pd_symcache_encode_header(const pd_symcache *c, pd_buf *out)
{
    size_t plen = strnlen(c->src.path, sizeof c->src.path - 1);
    size_t blen = strlen(c->build_id);
    uint8_t fixed[4 + 1 + 1 + 2 + 8 * 4 + 2];
    memcpy(fixed, MAGIC, 4);
    fixed[4] = PD_SYMCACHE_VERSION;
    fixed[5] = c->src.kind;
    put_le(fixed + 6, 0, 2);
    put_le(fixed + 8, c->src.size, 8);
    put_le(fixed + 16, (uint64_t)c->src.mtime_ns, 8);
    put_le(fixed + 24, c->src.dev, 8);
    put_le(fixed + 32, c->src.ino, 8);
    put_le(fixed + 40, plen, 2);
    size_t start = out->len;
    uint8_t bl = (uint8_t)blen, crc[4];
    if (pd_buf_append(out, fixed, sizeof fixed) < 0 || pd_buf_append(out, c->src.path, plen) < 0 ||
        pd_buf_append(out, &bl, 1) < 0 || pd_buf_append(out, c->build_id, blen) < 0)
        return PD_ENOMEM;
    put_le(crc, pd_crc32c(0, out->data + start, out->len - start), 4);
    return pd_buf_append(out, crc, 4) < 0 ? PD_ENOMEM : 0;
}

/* The header at data[0..len): its length into *hlen and c's source; false
 * when it is torn or fails a check (magic, version, CRC, build ID). */
static bool parse_header(pd_symcache *c, const uint8_t *d, size_t len, size_t *hlen)
{
    if (len < 42 || memcmp(d, MAGIC, 4) != 0 || d[4] != PD_SYMCACHE_VERSION)
        return false;
    size_t plen = (size_t)get_le(d + 40, 2);
    if (plen >= sizeof c->src.path || len < 42 + plen + 1)
        return false;
    size_t blen = d[42 + plen];
    size_t n = 42 + plen + 1 + blen;
    if (len < n + 4 || get_le(d + n, 4) != pd_crc32c(0, d, n))
        return false;
    if (blen != strlen(c->build_id) || memcmp(d + 42 + plen + 1, c->build_id, blen) != 0)
        return false;
    if (memchr(d + 42, 0, plen) || d[5] == 0)
        return false;
    pd_symcache_source *s = &c->src;
    memset(s, 0, sizeof *s);
    s->kind = d[5];
    s->size = get_le(d + 8, 8);
    s->mtime_ns = (int64_t)get_le(d + 16, 8);
    s->dev = get_le(d + 24, 8);
    s->ino = get_le(d + 32, 8);
    memcpy(s->path, d + 42, plen);
    *hlen = n + 4;
    return true;
}

/* Puts rec (its lines already in the arena) in the map. */
static int index_record(pd_symcache *c, uint64_t off, pd_symcache_line *lines, uint32_t n)
{
    uint64_t idx;
    if (pd_u64map_get(&c->by_off, off, &idx)) { /* later wins */
        c->recs[idx].lines = lines;
        c->recs[idx].n_lines = n;
        return 0;
    }
    if (c->n_recs == c->cap_recs) {
        size_t nc = c->cap_recs ? c->cap_recs * 2 : 64;
        pd_symcache_rec *nv = realloc(c->recs, nc * sizeof *nv);
        if (!nv)
            return PD_ENOMEM;
        c->recs = nv;
        c->cap_recs = nc;
    }
    if (off == UINT64_MAX || pd_u64map_put(&c->by_off, off, c->n_recs) < 0)
        return off == UINT64_MAX ? PD_EINVAL : PD_ENOMEM;
    c->recs[c->n_recs++] = (pd_symcache_rec){.off = off, .n_lines = n, .lines = lines};
    return 0;
}

/* A string field at p[*at..len) into the arena. */
static const char *get_str(pd_symcache *c, const uint8_t *p, size_t len, size_t *at, int *rc)
{
    uint64_t n;
    size_t k = pd_varint_get(p + *at, len - *at, &n);
    if (!k || n > len - *at - k || memchr(p + *at + k, 0, (size_t)n)) {
        *rc = PD_ECORRUPT;
        return NULL;
    }
    const char *s = pd_arena_strndup(&c->arena, (const char *)p + *at + k, (size_t)n);
    if (!s)
        *rc = PD_ENOMEM;
    *at += k + (size_t)n;
    return s;
}

/* One record's payload p[0..len) into c. PD_ECORRUPT when a field is bad. */
static int parse_record(pd_symcache *c, const uint8_t *p, size_t len)
{
    uint64_t off, n;
    size_t at = 0, k;
    if (!(k = pd_varint_get(p, len, &off)))
        return PD_ECORRUPT;
    at += k;
    if (!(k = pd_varint_get(p + at, len - at, &n)) || n == 0 || n > PD_SYMCACHE_MAX_LINES)
        return PD_ECORRUPT;
    at += k;
    pd_symcache_line *ls = pd_arena_calloc(&c->arena, (size_t)n, sizeof *ls);
    if (!ls)
        return PD_ENOMEM;
    int rc = 0;
    for (uint64_t i = 0; i < n; i++) {
        ls[i].name = get_str(c, p, len, &at, &rc);
        if (!rc)
            ls[i].system_name = get_str(c, p, len, &at, &rc);
        if (!rc)
            ls[i].file = get_str(c, p, len, &at, &rc);
        if (rc)
            return rc;
        uint64_t line;
        if (!(k = pd_varint_get(p + at, len - at, &line)) || line > INT64_MAX)
            return PD_ECORRUPT;
        at += k;
        ls[i].line = (int64_t)line;
    }
    if (at != len || !*ls[0].name)
        return PD_ECORRUPT;
    return index_record(c, off, ls, (uint32_t)n);
}

int pd_symcache_parse(pd_symcache *c, const uint8_t *data, size_t len, pd_symcache_stats *st)
{
    memset(st, 0, sizeof *st);
    size_t at;
    c->has_source = false;
    if (!parse_header(c, data, len, &at)) {
        st->bad_header = true;
        memset(&c->src, 0, sizeof c->src);
        return 0;
    }
    c->has_source = true;
    int rc = 0;
    while (at < len) {
        if (len - at < REC_HDR) {
            st->bad_record = true;
            break;
        }
        uint32_t rl = (uint32_t)get_le(data + at, 4);
        uint32_t crc = (uint32_t)get_le(data + at + 4, 4);
        if (rl == 0 || rl > PD_SYMCACHE_MAX_RECORD || rl > len - at - REC_HDR ||
            pd_crc32c(0, data + at + REC_HDR, rl) != crc) {
            st->bad_record = true;
            break;
        }
        rc = parse_record(c, data + at + REC_HDR, rl);
        if (rc == PD_ECORRUPT || rc == PD_EINVAL) {
            st->bad_record = true;
            rc = 0;
            break;
        }
        if (rc < 0)
            break;
        at += REC_HDR + rl;
    }
    st->records = c->n_recs;
    st->good_bytes = at;
    return rc;
}

int pd_symcache_load(pd_symcache *c, pd_symcache_stats *st)
{
    memset(st, 0, sizeof *st);
    c->file_bytes = 0;
    c->rewrite = false;
    if (!c->path)
        return 0;
    int fd = open(c->path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    int rc = 0;
    uint8_t *data = NULL;
    struct stat sb;
    if (fstat(fd, &sb) < 0) {
        rc = -errno;
        goto out;
    }
    size_t want = (size_t)sb.st_size < c->max_bytes ? (size_t)sb.st_size : c->max_bytes;
    data = malloc(want ? want : 1);
    if (!data) {
        rc = PD_ENOMEM;
        goto out;
    }
    size_t got = 0;
    while (got < want) {
        ssize_t n = pread(fd, data + got, want - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            goto out;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    rc = pd_symcache_parse(c, data, got, st);
    if (rc < 0)
        goto out;
    if (st->bad_header)
        goto out;
    if (st->good_bytes < (uint64_t)sb.st_size) { /* cut the bad tail: appends follow good records */
        st->bad_record = st->bad_record || got == want;
        if (ftruncate(fd, (off_t)st->good_bytes) < 0) {
            rc = -errno;
            goto out;
        }
    }
    c->file_bytes = st->good_bytes;
out:
    if (rc < 0) {
        clear_records(c);
        c->has_source = false;
        c->file_bytes = 0;
    }
    free(data);
    close(fd);
    return rc;
}

const pd_symcache_rec *pd_symcache_get(const pd_symcache *c, uint64_t off)
{
    uint64_t idx;
    if (!pd_u64map_get(&c->by_off, off, &idx))
        return NULL;
    return &c->recs[idx];
}

void pd_symcache_reset(pd_symcache *c, const pd_symcache_source *src)
{
    clear_records(c);
    c->file_bytes = 0;
    c->rewrite = true;
    pd_buf_reset(&c->pending);
    if (!src) {
        c->has_source = false;
        memset(&c->src, 0, sizeof c->src);
        return;
    }
    pd_symcache_source keep = *src; /* src may be &c->src */
    c->src = keep;
    c->has_source = true;
    if (pd_symcache_encode_header(c, &c->pending) < 0)
        pd_buf_reset(&c->pending); /* out of memory: add refuses, flush writes nothing */
}

static int put_str(pd_buf *b, const char *s)
{
    size_t n = strlen(s);
    if (pd_buf_put_varint(b, n) < 0 || pd_buf_append(b, s, n) < 0)
        return PD_ENOMEM;
    return 0;
}

int pd_symcache_add(pd_symcache *c, uint64_t off, const pd_symcache_line *lines, size_t n)
{
    if (!c->has_source || n == 0 || n > PD_SYMCACHE_MAX_LINES || off == UINT64_MAX)
        return PD_EINVAL;
    if (c->rewrite && c->pending.len == 0)
        return PD_ENOMEM; /* the header could not be encoded */
    pd_buf rec;
    pd_buf_init(&rec, PD_SYMCACHE_MAX_RECORD + REC_HDR);
    uint8_t hdr[REC_HDR] = {0};
    int rc = pd_buf_append(&rec, hdr, sizeof hdr);
    if (!rc)
        rc = pd_buf_put_varint(&rec, off);
    if (!rc)
        rc = pd_buf_put_varint(&rec, n);
    for (size_t i = 0; i < n && !rc; i++) {
        rc = put_str(&rec, lines[i].name);
        if (!rc)
            rc = put_str(&rec, lines[i].system_name);
        if (!rc)
            rc = put_str(&rec, lines[i].file);
        if (!rc)
            rc = pd_buf_put_varint(&rec, lines[i].line > 0 ? (uint64_t)lines[i].line : 0);
    }
    if (rc < 0) { /* PD_ETOOBIG: past the record cap: an answer too big to keep */
        pd_buf_release(&rec);
        return rc == PD_ETOOBIG ? PD_EINVAL : PD_ENOMEM;
    }
    if (c->file_bytes + c->pending.len + rec.len > c->max_bytes) {
        pd_buf_release(&rec);
        return PD_ETOOBIG;
    }
    uint32_t plen = (uint32_t)(rec.len - REC_HDR);
    put_le((uint8_t *)rec.data, plen, 4);
    put_le((uint8_t *)rec.data + 4, pd_crc32c(0, rec.data + REC_HDR, plen), 4);
    /* into memory: the same bytes through the reader's path */
    pd_symcache_line *ls = pd_arena_calloc(&c->arena, n, sizeof *ls);
    rc = ls ? 0 : PD_ENOMEM;
    for (size_t i = 0; i < n && !rc; i++) {
        ls[i].name = pd_arena_strdup(&c->arena, lines[i].name);
        ls[i].system_name = pd_arena_strdup(&c->arena, lines[i].system_name);
        ls[i].file = pd_arena_strdup(&c->arena, lines[i].file);
        ls[i].line = lines[i].line > 0 ? lines[i].line : 0;
        if (!ls[i].name || !ls[i].system_name || !ls[i].file)
            rc = PD_ENOMEM;
    }
    if (!rc)
        rc = index_record(c, off, ls, (uint32_t)n);
    if (!rc)
        rc = pd_buf_append(&c->pending, rec.data, rec.len) < 0 ? PD_ENOMEM : 0;
    pd_buf_release(&rec);
    return rc;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int pd_symcache_flush(pd_symcache *c)
{
    if (!c->path || c->pending.len == 0)
        return 0;
    int rc = 0;
    if (c->rewrite) {
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.tmp", c->path);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
            rc = -errno;
        else {
            rc = write_all(fd, c->pending.data, c->pending.len);
            close(fd);
            if (!rc && rename(tmp, c->path) < 0)
                rc = -errno;
            if (rc)
                unlink(tmp);
        }
        if (!rc) {
            c->file_bytes = c->pending.len;
            c->rewrite = false;
        }
    } else {
        int fd = open(c->path, O_WRONLY | O_APPEND | O_CLOEXEC);
        if (fd < 0)
            rc = -errno;
        else {
            rc = write_all(fd, c->pending.data, c->pending.len);
            close(fd);
        }
        if (!rc)
            c->file_bytes += c->pending.len;
    }
    pd_buf_reset(&c->pending);
    if (rc < 0)
        pd_symcache_reset(c, &c->src);
    return rc;
}
