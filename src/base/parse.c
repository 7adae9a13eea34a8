#include "base/parse.h"

#include <string.h>

#include "base/error.h"

int pd_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    if (!s || !*s)
        return PD_EPARSE;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return PD_EPARSE;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return PD_ETOOBIG;
        v = v * 10 + d;
    }
    if (v > max)
        return PD_ETOOBIG;
    *out = v;
    return 0;
}

int pd_parse_flag(int argc, char **argv, int *i, const char *name, const char **val)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n))
        return 0;
    if (a[n] == '=') {
        *val = a + n + 1;
        return 1;
    }
    if (a[n] == 0) {
        if (*i + 1 >= argc)
            return -1;
        *val = argv[++*i];
        return 1;
    }
    return 0;
}
