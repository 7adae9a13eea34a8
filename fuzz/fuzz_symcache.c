/*
 * fuzz_symcache — libFuzzer target for symbolize/symcache.c, the reader of
 * the symbolizer's results cache files (<cache dir>/<bid>/symbols.cache:
 * on disk, so possibly torn or damaged). The input is a whole file for
 * build ID 0123456789abcdef0123456789abcdef01234567:
 *   1. pd_symcache_parse on the bytes (memory only);
 *   2. pd_symcache_load on the same bytes as a file (a memfd through
 *      /proc/self/fd), which also truncates a bad tail;
 *   3. every record kept is re-added to a fresh cache with the same source
 *      and the encoded bytes parsed again.
 * Seed corpus: fuzz/corpus/symcache (good files with one and two-line
 * records, torn tail, bad CRC, header only, wrong version).
 * Properties besides the sanitizers: parse and load keep the same records
 * and good prefix; a kept record is found by its offset with 1..64 lines
 * and a non-empty name; after load the file is its good prefix; the
 * re-encoded file parses back whole (no damage) to the same answers.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "symbolize/symcache.h"

#define BID "0123456789abcdef0123456789abcdef01234567"

static void check_same(const pd_symcache *a, const pd_symcache *b)
{
    if (a->n_recs != b->n_recs)
        abort();
    for (size_t i = 0; i < a->n_recs; i++) {
        const pd_symcache_rec *r = &a->recs[i];
        const pd_symcache_rec *q = pd_symcache_get(b, r->off);
        if (!q || q->n_lines != r->n_lines)
            abort();
        for (uint32_t j = 0; j < r->n_lines; j++)
            if (strcmp(r->lines[j].name, q->lines[j].name) ||
                strcmp(r->lines[j].system_name, q->lines[j].system_name) ||
                strcmp(r->lines[j].file, q->lines[j].file) || r->lines[j].line != q->lines[j].line)
                abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pd_symcache c;
    if (pd_symcache_init(&c, BID, NULL, 1 << 20) < 0)
        return 0;
    pd_symcache_stats st;
    if (pd_symcache_parse(&c, data, size, &st) < 0) {
        pd_symcache_release(&c);
        return 0;
    }
    if (st.good_bytes > size || (st.bad_header && (c.n_recs || c.has_source)))
        abort();
    for (size_t i = 0; i < c.n_recs; i++) {
        const pd_symcache_rec *r = &c.recs[i];
        if (pd_symcache_get(&c, r->off) != r || r->n_lines < 1 ||
            r->n_lines > PD_SYMCACHE_MAX_LINES || !r->lines[0].name[0])
            abort();
    }

    /* 2. the same bytes as a file */
    int fd = memfd_create("fuzz_symcache", MFD_CLOEXEC);
    if (fd >= 0 && (!size || write(fd, data, size) == (ssize_t)size)) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        pd_symcache f;
        if (pd_symcache_init(&f, BID, path, 1 << 20) == 0) {
            pd_symcache_stats fs;
            if (pd_symcache_load(&f, &fs) == 0) {
                if (fs.good_bytes != st.good_bytes || fs.bad_header != st.bad_header ||
                    fs.records != st.records)
                    abort();
                check_same(&c, &f);
                struct stat sb;
                if (!fs.bad_header && fstat(fd, &sb) == 0 && (uint64_t)sb.st_size != fs.good_bytes)
                    abort();
            }
            pd_symcache_release(&f);
        }
    }
    if (fd >= 0)
        close(fd);

    /* 3. re-encoded: parses back whole to the same answers */
    if (c.has_source) {
        pd_symcache w;
        if (pd_symcache_init(&w, BID, NULL, 64 << 20) == 0) {
            pd_symcache_reset(&w, &c.src);
            int ok = 1;
            for (size_t i = 0; i < c.n_recs && ok; i++)
                ok = pd_symcache_add(&w, c.recs[i].off, c.recs[i].lines, c.recs[i].n_lines) == 0;
            if (ok && w.pending.len) {
                pd_symcache back;
                if (pd_symcache_init(&back, BID, NULL, 64 << 20) == 0) {
                    pd_symcache_stats bs;
                    if (pd_symcache_parse(&back, (const uint8_t *)w.pending.data, w.pending.len,
                                          &bs) == 0) {
                        if (bs.bad_header || bs.bad_record || bs.good_bytes != w.pending.len ||
                            !pd_symcache_source_equal(&back.src, &c.src))
                            abort();
                        check_same(&c, &back);
                    }
                    pd_symcache_release(&back);
                }
            }
            pd_symcache_release(&w);
        }
    }
    pd_symcache_release(&c);
    return 0;
}
