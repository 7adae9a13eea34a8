/*
 * storage/tsdb/head_int.h — the PROFILE record payload of the WAL, as
 * head.c writes it (layout: top of head.c and docs/format/wal.md), for the
 * other readers of the WAL inside src/storage (tsdb_cli.c's check). Private
 * to src/storage.
 */
#ifndef PD_STORAGE_TSDB_HEAD_INT_H
#define PD_STORAGE_TSDB_HEAD_INT_H

#include <stddef.h>
#include <stdint.h>

/* A decoded PROFILE payload: ref u64, ts i64, k sample types (type, unit),
 * k zigzag totals, the pprof body. Strings point into the payload. */
typedef struct pd_profile_rec {
    uint64_t ref;
    int64_t ts;
    size_t k;
    const char **types, **units;
    size_t *tlen, *ulen;
    int64_t *totals;
    uint32_t body_off, body_len; /* the body: payload[body_off .. body_off + body_len) */
} pd_profile_rec;

/* Parses a PROFILE payload of len bytes into pr (overwritten; release with
 * pd__profile_rec_release on success). Errors: PD_ECORRUPT (*why says what:
 * truncated header, too many sample types, malformed, body length), PD_ENOMEM. */
int pd__profile_rec_parse(const uint8_t *p, size_t len, pd_profile_rec *pr /* OUT */,
                          const char **why);
/* Frees what pr holds (not the payload). */
void pd__profile_rec_release(pd_profile_rec *pr);

#endif
