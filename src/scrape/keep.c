/*
 * scrape/keep.c — Parca's keep_sample_type: a scraped profile keeps only
 * the listed sample types before it is stored (contract in scrape_int.h).
 */
#include <stdio.h>
#include <string.h>

#include "scrape/scrape_int.h"

static bool listed(const char *keep, const char *type, const char *unit)
{
    size_t tl = strlen(type), ul = strlen(unit);
    for (const char *l = keep; *l;) {
        const char *tab = strchr(l, '\t'), *nl = tab ? strchr(tab, '\n') : NULL;
        if (!tab || !nl)
            break;
        bool type_ok = (size_t)(tab - l) == tl && !memcmp(l, type, tl);
        bool unit_ok =
            nl == tab + 1 || ((size_t)(nl - tab - 1) == ul && !memcmp(tab + 1, unit, ul));
        if (type_ok && unit_ok)
            return true;
        l = nl + 1;
    }
    return false;
}

int pd__scrape_keep_types(pd_profile *p, const char *keep, pd_buf *out, pd_err *err)
{
    size_t map[64], nk = 0;
    char have[256] = "";
    size_t hl = 0;
    for (size_t i = 0; i < p->n_sample_type; i++) {
        const char *ty = p->sample_type[i].type >= 0 && (size_t)p->sample_type[i].type < p->n_string
                             ? p->string_table[p->sample_type[i].type]
                             : "";
        const char *un = p->sample_type[i].unit >= 0 && (size_t)p->sample_type[i].unit < p->n_string
                             ? p->string_table[p->sample_type[i].unit]
                             : "";
        if (hl < sizeof have - 1)
            hl += (size_t)snprintf(have + hl, sizeof have - hl, "%s%s/%s", hl ? ", " : "", ty, un);
        if (hl >= sizeof have)
            hl = sizeof have - 1;
        if (listed(keep, ty, un) && nk < sizeof map / sizeof *map)
            map[nk++] = i;
    }
    if (!nk)
        return pd_err_set(err, PD_EINVAL,
                          "keep_sample_type: none of the profile's sample types (%s) is listed",
                          have);
    if (nk < p->n_sample_type) {
        for (size_t s = 0; s < p->n_sample; s++) {
            pd_pprof_sample *sm = &p->sample[s];
            if (sm->n_value != p->n_sample_type)
                return pd_err_set(err, PD_EINVAL, "sample %zu has %zu values for %zu types", s,
                                  sm->n_value, p->n_sample_type);
            for (size_t k = 0; k < nk; k++)
                sm->value[k] = sm->value[map[k]];
            sm->n_value = nk;
        }
        bool def_kept = p->default_sample_type == 0;
        for (size_t k = 0; k < nk; k++) {
            def_kept |= p->sample_type[map[k]].type == p->default_sample_type;
            p->sample_type[k] = p->sample_type[map[k]];
        }
        p->n_sample_type = nk;
        if (!def_kept)
            p->default_sample_type = 0;
    }
    int rc = pd_profile_encode(p, true, out);
    if (rc)
        return pd_err_set(err, rc, "keep_sample_type: cannot encode the profile: %s",
                          pd_strerror(rc));
    return 0;
}
