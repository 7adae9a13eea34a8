/*
 * storage/tsdb/postings_int.h — the store's inverted index of series labels
 * (Prometheus' postings, as the block index has them on disk: index.md):
 * for every label pair (name, value) the ascending list of series refs that
 * carry it. Series selection intersects the lists of the matchers that
 * cannot match an absent label (`name="v"` with v non-empty, `name=~"re"`
 * where re does not match ""), instead of testing every series. Private to
 * src/storage; used by head.c under its idx lock (not thread-safe itself).
 */
#ifndef PD_STORAGE_TSDB_POSTINGS_INT_H
#define PD_STORAGE_TSDB_POSTINGS_INT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/labels.h"
#include "base/u64map.h"

typedef struct pd_posting {
    char *name, *value;
    uint64_t *refs; /* ascending */
    size_t n, cap;
    uint32_t next; /* chain of pairs with the same hash; UINT32_MAX ends */
} pd_posting;

typedef struct pd_postings {
    pd_u64map head; /* xxh3 of (name, value) -> first pair */
    pd_posting *v;
    size_t n, cap;
} pd_postings;

/* Empty index, no allocation. */
void pd__postings_init(pd_postings *p);
/* Frees everything. */
void pd__postings_release(pd_postings *p);
/* Adds series ref with labels ls (each pair's list stays ascending; adding
 * refs in ascending order is O(1) per pair). 0 or PD_ENOMEM (then the index
 * may miss ref: the caller must stop using it). */
int pd__postings_add(pd_postings *p, const pd_labels *ls, uint64_t ref);
/* Candidates for the matchers ms[0..n): the ascending refs of every series
 * that can match all of them (a superset: the caller still applies the
 * matchers), in *refs (malloc'ed; free it) / *n_refs. *all = true (and
 * *refs = NULL) when no matcher narrows the set: every series is a
 * candidate. Regex matchers are run on the values of their label name (not
 * thread-safe: pd_matcher's match data). 0 or PD_ENOMEM. */
int pd__postings_select(const pd_postings *p, const pd_matcher *ms, size_t n,
                        uint64_t **refs /* OUT */, size_t *n_refs /* OUT */, bool *all /* OUT */);

#endif
