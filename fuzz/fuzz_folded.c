/*
 * fuzz_folded — libFuzzer target for the folded ("collapsed stacks") and
 * Pyroscope "lines" converters (src/ingest/folded.c, via pd_ingest_convert).
 *
 * Input: byte 0 selects the format and options (fuzz_ingest_common.h), the
 * rest is the text. Seed corpus: fuzz/corpus/folded (the inputs of
 * tests/unit/ingest, each behind a flags byte).
 * Checks: those of fuzz_convert (validate, encode/decode/equal round trip),
 * plus, for the two-value cpu/wall types, value[1] == value[0] * period on
 * every sample, and for folded the sum of samples/count equals the sum of the
 * counts of the input's lines (an independent, simple re-reading).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz_ingest_common.h"

/* Sum of the last whitespace-separated token of every non-blank line, or -1
 * when a token is not a plain decimal number (then nothing is checked). */
static int64_t sum_counts(const char *s, size_t len)
{
    int64_t sum = 0;
    size_t i = 0;
    while (i < len) {
        size_t e = i;
        while (e < len && s[e] != '\n')
            e++;
        size_t n = e;
        while (n > i && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
            n--;
        size_t t = n;
        while (t > i && s[t - 1] != ' ' && s[t - 1] != '\t')
            t--;
        if (n > i) {
            int64_t v = 0;
            size_t k = t < n && s[t] == '+' ? t + 1 : t;
            if (k == n)
                return -1;
            for (; k < n; k++) {
                if (s[k] < '0' || s[k] > '9' || __builtin_mul_overflow(v, 10, &v) ||
                    __builtin_add_overflow(v, s[k] - '0', &v))
                    return -1;
            }
            if (__builtin_add_overflow(sum, v, &sum))
                return -1;
        }
        i = e + 1;
    }
    return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t flags = data[0];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    pd_ingest_opts o = fuzz_ingest_opts(flags);
    pd_ingest_format fmt = PD_INGEST_FOLDED;
    int64_t want_period = 10000000; /* 100 Hz */
    switch (flags & 3) {
    case 1:
        fmt = PD_INGEST_LINES;
        break;
    case 2:
        o.type = "alloc_space";
        o.unit = "bytes";
        want_period = 0;
        break;
    case 3:
        o.type = "wall";
        o.sample_rate_hz = 997;
        want_period = 1000000000 / 997;
        break;
    }
    pd_profile p;
    int rc;
    fuzz_convert(fmt, text, len, &o, &p, &rc);
    if (rc != 0)
        return 0;
    if (want_period) {
        if (p.n_sample_type != 2 || p.period != want_period)
            abort();
        for (size_t i = 0; i < p.n_sample; i++)
            if (p.sample[i].value[1] != p.sample[i].value[0] * want_period)
                abort();
    } else if (p.n_sample_type != 1) {
        abort();
    }
    if (fmt == PD_INGEST_FOLDED) {
        int64_t want = sum_counts(text, len), got = 0;
        for (size_t i = 0; i < p.n_sample; i++)
            got += p.sample[i].value[0];
        if (want >= 0 && want != got) {
            fprintf(stderr, "counts of the input add up to %lld, samples/count to %lld\n",
                    (long long)want, (long long)got);
            abort();
        }
    }
    pd_profile_release(&p);
    return 0;
}
