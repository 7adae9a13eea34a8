#include "base/time.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t pd_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t pd_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int pd_parse_duration(const char *s, int64_t *ms, pd_err *err)
{
    static const struct {
        const char *u;
        int64_t ms;
    } units[] = {
        {"y", 365LL * 24 * 3600 * 1000},
        {"w", 7LL * 24 * 3600 * 1000},
        {"d", 24LL * 3600 * 1000},
        {"h", 3600LL * 1000},
        {"m", 60LL * 1000},
        {"s", 1000},
        {"ms", 1},
    };
    const char *p = s;
    int64_t total = 0;
    int last = -1;
    if (!s || !*s)
        return pd_err_set(err, PD_EPARSE, "empty duration");
    if (strcmp(s, "0") == 0) {
        *ms = 0;
        return 0;
    }
    while (*p) {
        if (!isdigit((unsigned char)*p))
            goto bad;
        int64_t v = 0;
        while (isdigit((unsigned char)*p)) {
            if (v > INT64_MAX / 10 - 10)
                goto bad;
            v = v * 10 + (*p++ - '0');
        }
        int u = -1;
        if (p[0] == 'm' && p[1] == 's') {
            u = 6;
            p += 2;
        } else {
            for (int i = 0; i < 6; i++) {
                if (*p == units[i].u[0]) {
                    u = i;
                    p++;
                    break;
                }
            }
        }
        if (u < 0 || u <= last)
            goto bad;
        last = u;
        if (v > INT64_MAX / units[u].ms || v * units[u].ms > INT64_MAX - total)
            goto bad; /* the term, or the sum of the terms, overflows int64 */
        total += v * units[u].ms;
    }
    *ms = total;
    return 0;
bad:
    return pd_err_set(err, PD_EPARSE,
                      "invalid duration \"%s\": want e.g. 15s, 1m30s, 2h (units ms s m h d w y)",
                      s);
}

void pd_format_duration(int64_t ms, char *out, size_t cap)
{
    static const struct {
        const char *u;
        int64_t ms;
    } units[] = {
        {"d", 24LL * 3600 * 1000}, {"h", 3600LL * 1000}, {"m", 60LL * 1000}, {"s", 1000}, {"ms", 1},
    };
    size_t n = 0;
    if (ms <= 0) {
        snprintf(out, cap, "0s");
        return;
    }
    out[0] = '\0';
    for (int i = 0; i < 5 && n < cap; i++) {
        if (ms >= units[i].ms) {
            int w = snprintf(out + n, cap - n, "%lld%s", (long long)(ms / units[i].ms), units[i].u);
            if (w < 0)
                return;
            n += (size_t)w;
            ms %= units[i].ms;
        }
    }
}

/* days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = (unsigned)(y - era * 400);
    const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static int digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)**p))
            return -1;
        v = v * 10 + (**p - '0');
        (*p)++;
    }
    *out = v;
    return 0;
}

int pd_parse_rfc3339(const char *s, int64_t *ms)
{
    const char *p = s;
    int Y, M, D, h, m, sec;
    if (digits(&p, 4, &Y) || *p++ != '-' || digits(&p, 2, &M) || *p++ != '-' || digits(&p, 2, &D) ||
        (*p != 'T' && *p != 't' && *p != ' '))
        return PD_EPARSE;
    p++;
    if (digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &m) || *p++ != ':' || digits(&p, 2, &sec))
        return PD_EPARSE;
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (M < 1 || M > 12 || D < 1 || D > mdays[M - 1] || h > 23 || m > 59 || sec > 60)
        return PD_EPARSE;
    if (M == 2 && D == 29 && !((Y % 4 == 0 && Y % 100 != 0) || Y % 400 == 0))
        return PD_EPARSE;
    int64_t frac_ms = 0;
    if (*p == '.') {
        p++;
        int nd = 0;
        int64_t scale = 100;
        if (!isdigit((unsigned char)*p))
            return PD_EPARSE;
        while (isdigit((unsigned char)*p)) {
            if (nd < 3)
                frac_ms += (*p - '0') * scale;
            scale /= 10;
            nd++;
            p++;
        }
    }
    int64_t off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p == '-' ? -1 : 1;
        int oh, om;
        p++;
        if (digits(&p, 2, &oh) || *p++ != ':' || digits(&p, 2, &om) || oh > 23 || om > 59)
            return PD_EPARSE;
        off = sign * (oh * 3600 + om * 60);
    } else {
        return PD_EPARSE;
    }
    if (*p)
        return PD_EPARSE;
    int64_t days = days_from_civil(Y, (unsigned)M, (unsigned)D);
    *ms = ((days * 86400 + h * 3600 + m * 60 + sec) - off) * 1000 + frac_ms;
    return 0;
}

void pd_format_rfc3339(int64_t ms, char *out, size_t cap)
{
    time_t t = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    int64_t frac = ms - (int64_t)t * 1000;
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(out, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)frac);
}

int pd_parse_time_param(const char *s, int64_t *ms, pd_err *err)
{
    if (!s || !*s)
        return pd_err_set(err, PD_EPARSE, "empty time");
    if (pd_parse_rfc3339(s, ms) == 0)
        return 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !isfinite(v) || v > 9.2e15 || v < -9.2e15 ||
        !(isdigit((unsigned char)s[0]) || s[0] == '-' || s[0] == '.'))
        return pd_err_set(err, PD_EPARSE,
                          "cannot parse \"%s\" as a time: want RFC 3339 or Unix seconds", s);
    *ms = (int64_t)llround(v * 1000.0);
    return 0;
}
