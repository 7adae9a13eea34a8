/* TEMPORARY (removed when main's storage.h has pd_storage_append_many):
 * the signature the lead announced, so scrape/ builds and tests before it. */
#ifndef PD_SCRAPE_APPEND_MANY_SHIM_H
#define PD_SCRAPE_APPEND_MANY_SHIM_H
#include "storage/storage.h"
typedef struct pd_storage_item {
    const pd_labels *labels;
    int64_t ts_ms;
    const uint8_t *body;
    size_t len;
    const pd_profile *profile;
    int rc;
    pd_err err;
} pd_storage_item;
size_t pd_storage_append_many(pd_storage *s, pd_storage_item *items, size_t n, bool shift);
#endif
