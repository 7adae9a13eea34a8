/*
 * fuzz_time — libFuzzer target for the time parsers of src/base/time.c:
 * pd_parse_duration, pd_parse_rfc3339 and pd_parse_time_param.
 *
 * Input: any bytes, cut at the first NUL and given as a C string to all
 * three parsers. Seed corpus: fuzz/corpus/time (durations, RFC 3339 times,
 * Unix seconds, as the tests and the HTTP API use them).
 * Properties checked besides the sanitizers:
 *   - a parsed duration is >= 0 and survives pd_format_duration ->
 *     pd_parse_duration unchanged;
 *   - a parsed RFC 3339 time whose UTC year is 1..9999 survives
 *     pd_format_rfc3339 -> pd_parse_rfc3339 unchanged, and
 *     pd_parse_time_param gives the same value for the text;
 *   - a parser that fails sets an error message (when it takes a pd_err).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/time.h"

#define MIN_MS (-62135596800000LL) /* 0001-01-01T00:00:00Z */
#define MAX_MS (253402300799999LL) /* 9999-12-31T23:59:59.999Z */

static void check_duration(const char *s)
{
    int64_t ms = -1, again = -1;
    pd_err err = {{0}};
    char out[32];
    if (pd_parse_duration(s, &ms, &err) != 0) {
        if (!err.msg[0])
            abort();
        return;
    }
    if (ms < 0) {
        fprintf(stderr, "duration \"%s\" parsed as negative %lld\n", s, (long long)ms);
        abort();
    }
    pd_format_duration(ms, out, sizeof out);
    if (pd_parse_duration(out, &again, &err) != 0 || again != ms) {
        fprintf(stderr, "duration \"%s\" = %lld ms formats as \"%s\" which parses as %lld\n", s,
                (long long)ms, out, (long long)again);
        abort();
    }
}

static void check_rfc3339(const char *s)
{
    int64_t ms = 0, again = 0, param = 0;
    char out[32];
    pd_err err = {{0}};
    if (pd_parse_rfc3339(s, &ms) != 0)
        return;
    if (pd_parse_time_param(s, &param, &err) != 0 || param != ms) {
        fprintf(stderr, "\"%s\": rfc3339 %lld but time param %lld\n", s, (long long)ms,
                (long long)param);
        abort();
    }
    if (ms < MIN_MS || ms > MAX_MS)
        return; /* years outside 0001..9999 have no 4-digit form */
    pd_format_rfc3339(ms, out, sizeof out);
    if (pd_parse_rfc3339(out, &again) != 0 || again != ms) {
        fprintf(stderr, "\"%s\" = %lld ms formats as \"%s\" which parses as %lld\n", s,
                (long long)ms, out, (long long)again);
        abort();
    }
}

static void check_time_param(const char *s)
{
    int64_t ms = 0;
    pd_err err = {{0}};
    if (pd_parse_time_param(s, &ms, &err) != 0 && !err.msg[0])
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char s[4097];
    memcpy(s, data, size);
    s[size] = '\0';
    check_duration(s);
    check_rfc3339(s);
    check_time_param(s);
    return 0;
}
