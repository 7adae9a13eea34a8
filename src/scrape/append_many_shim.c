/* TEMPORARY: see append_many_shim.h. One append after another. */
#include "scrape/append_many_shim.h"

size_t pd_storage_append_many(pd_storage *s, pd_storage_item *items, size_t n, bool shift)
{
    size_t ok = 0;
    for (size_t i = 0; i < n; i++) {
        pd_err_clear(&items[i].err);
        int64_t at = items[i].ts_ms;
        items[i].rc =
            shift ? pd_storage_append_shift(s, items[i].labels, items[i].ts_ms, items[i].body,
                                            items[i].len, items[i].profile, &at, &items[i].err)
                  : pd_storage_append(s, items[i].labels, items[i].ts_ms, items[i].body,
                                      items[i].len, items[i].profile, &items[i].err);
        if (items[i].rc == 0) {
            items[i].ts_ms = at;
            ok++;
        }
    }
    return ok;
}
