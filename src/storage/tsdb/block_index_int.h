/*
 * storage/tsdb/block_index_int.h — the `index` file of a block
 * (docs/format/index.md): the series (labels, time range, chunk refs) and the
 * postings (label pair -> series ids). Private to src/storage; used by
 * block.c. Code: block_index.c.
 *
 * Version 1: "PDIX" | u8 1 | 3 x 0 | body | u32 crc32c(all before)
 *   body: n_sym | n_sym x (len, bytes)              label symbols, sorted
 *         n_series | n_series x (n_labels, n_labels x (name sym, value sym),
 *                    zz min_t, zz max_t, n_profiles, time chunk offset,
 *                    time chunk bytes, value chunk bytes)   sorted by labels
 *         n_post | n_post x (name sym, value sym, n, n x id delta)
 *   One CRC: a bad byte anywhere loses the whole block.
 *
 * Version 2: every part under its own CRC, so one bad byte loses at most the
 * series it falls in:
 *   "PDIX" | u8 2 | 3 x 0
 *   sections, back to back, each  u32 length L | u8 kind | L - 1 bytes |
 *                                  u32 crc32c(the L + 4 bytes before it)
 *     kind 1, a series entry (in label order), self-sufficient:
 *       n_labels, n_labels x (len, name, len, value), zz min_t, zz max_t,
 *       n_profiles, time chunk offset, time chunk bytes, value chunk bytes,
 *       n_types, n_types x (string id, len, bytes)  the sample type and unit
 *       strings its time chunk names by `symbols` string id, inline: a
 *       damaged strings frame of `symbols` does not hide the series' points
 *     kind 2, the postings: version 1's label symbols and postings (ids =
 *       the entries' order); rebuilt from the entries when it does not
 *       verify or an entry is lost
 *   toc: u32 n_series | n_series x u64 entry offset | u64 postings offset |
 *        u32 crc32c(toc)
 *   footer (last 12 bytes): u64 toc offset | u32 crc32c(those 8 bytes)
 *   Readers find the entries by the toc; without it (damaged), by walking
 *   the sections from offset 8 (a damaged section then ends the walk).
 */
#ifndef PD_STORAGE_TSDB_BLOCK_INDEX_INT_H
#define PD_STORAGE_TSDB_BLOCK_INDEX_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/buf.h"
#include "base/error.h"
#include "base/labels.h"
#include "storage/tsdb/symbols_int.h"

/* A series as the writer hands it over (borrowed). */
typedef struct pd_ixw_series {
    const pd_labels *labels;
    int64_t min_t, max_t; /* ms */
    uint64_t n, tref, tbytes, vbytes;
    const uint32_t *tstr; /* string ids (of the block's symbols) its time chunk names */
    size_t n_tstr;
} pd_ixw_series;

/* Appends the index file (version 1 or 2) of the series s[0..n) (sorted by
 * labels) to out. sym: the block's symbols (strings of version 2's inline
 * sample types). PD_ENOMEM. */
int pd__index_encode(int version, const pd_ixw_series *s, size_t n, const pd_symbols *sym,
                     pd_buf *out);

typedef struct pd_ix_series {
    pd_labels labels;
    int64_t min_t, max_t;
    uint64_t n, tref, tbytes, vbytes;
    size_t n_tstr; /* version 2: inline strings of the time chunk */
    uint32_t *tstr_id;
    char **tstr;
    uint32_t *tstr_len;
} pd_ix_series;

typedef struct pd_ix_post {
    uint32_t name, value; /* into lsym */
    uint32_t *ids;
    size_t n;
} pd_ix_post;

typedef struct pd_index {
    int version;
    char **lsym; /* sorted label strings the postings name */
    size_t n_lsym;
    pd_ix_series *s; /* the entries that verified, in label order */
    size_t n_series;
    pd_ix_post *post;
    size_t n_post;
    size_t n_lost;         /* version 2: entries that did not verify (known ones) */
    bool postings_rebuilt; /* version 2: rebuilt from the entries */
    char *damage;          /* malloc'ed; NULL when intact: the first damage (file, offset) */
} pd_index;

/* Parses index file p[0..len) (path: for messages) into ix (zeroed first).
 * chunks_size: bytes of chunks/000001 (chunk refs are checked against it).
 * Version 1: any damage is PD_ECORRUPT. Version 2: PD_ECORRUPT only when
 * nothing verifies (header; no toc and no first entry); a damaged entry is
 * left out and counted in n_lost, damaged postings are rebuilt, and
 * ix->damage names the first damage. Errors: PD_ECORRUPT (err: file and
 * offset), PD_ENOMEM. */
int pd__index_decode(pd_index *ix /* OUT */, const char *path, const uint8_t *p, size_t len,
                     uint64_t chunks_size, pd_err *err);
/* Frees what ix holds. Safe on a zeroed struct. */
void pd__index_release(pd_index *ix);

#endif
