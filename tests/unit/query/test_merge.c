/* Unit tests of src/query/merge.c (pd_merge_*) and of the reports of merged
 * and diffed profiles (report.c: top/flamegraph _ex, folded, dot).
 *
 * - hand-built profiles (pprof's builder) whose merged values, headers,
 *   labels, filters and caps are worked out by hand in the comments;
 * - real profiles (PD_TESTDATA/pprof/go-demo-series) against the real tool
 *   (skipped without go): for merges of 2, 10 and all heap and CPU profiles,
 *   for diffs, and for focus/ignore/hide, profd's merged proto must be
 *   semantically equal (pd_profile_equal: same multiset of samples with
 *   resolved stacks, labels and values, same headers) to what
 *   `go tool pprof -proto [-diff_base=..] [-focus=..] FILES` writes, and
 *   `go tool pprof -top -nodefraction=0 -unit=<exact>` must print the same
 *   per-function table for both files, for every sample type;
 * - report invariants on the merged real profiles: top total == the proto's
 *   totals, flame graph root == total, folded lines sum to the total.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "../pd_test.h"
#include <dirent.h>
#include <ftw.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "query/query.h"

#ifndef PD_TESTDATA
#error "PD_TESTDATA must be defined"
#endif
#define SERIES_DIR PD_TESTDATA "/pprof/go-demo-series"

/* ---------- hand-built profiles ---------- */

/* Builds a profile of sample types `types` ("samples/count,cpu/nanoseconds")
 * from sample specs "root;...;leaf|v1,v2|k=v,k2=v2" (labels optional; a
 * label value starting with '#' is numeric). Each frame name is a function
 * in file "<name>.go" at its own location without mapping. */
static void mk(const char *types, const char *const *specs, size_t n, pd_profile *out,
               void (*tweak)(pd_profile_builder *b, void *ctx), void *ctx)
{
    pd_profile_builder *b;
    pd_err err = {{0}};
    assert_int_equal(pd_profile_builder_new(NULL, &b), 0);
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", types);
    for (char *save = NULL, *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *slash = strchr(t, '/');
        *slash = 0;
        assert_true(pd_profile_builder_sample_type(b, t, slash + 1, &err) >= 0);
    }
    if (tweak)
        tweak(b, ctx);
    for (size_t i = 0; i < n; i++) {
        char spec[512];
        snprintf(spec, sizeof spec, "%s", specs[i]);
        char *bar1 = strchr(spec, '|'), *bar2 = strchr(bar1 + 1, '|');
        *bar1 = *bar2 = 0;
        uint64_t frames[64], locs[64];
        size_t nf = 0;
        for (char *save = NULL, *f = strtok_r(spec, ";", &save); f;
             f = strtok_r(NULL, ";", &save)) {
            char file[128];
            snprintf(file, sizeof file, "%s.go", f);
            uint64_t fid;
            PD_ASSERT_OK(pd_profile_builder_function(b, f, f, file, 1, &fid, &err), &err);
            pd_pprof_line ln = {fid, 10, 0};
            assert_int_equal(
                pd_profile_builder_location(b, 0, 0x1000 + fid * 16, &ln, 1, &frames[nf++], &err),
                0);
        }
        for (size_t j = 0; j < nf; j++) /* leaf first */
            locs[j] = frames[nf - 1 - j];
        int64_t vals[8];
        size_t nv = 0;
        for (char *save = NULL, *v = strtok_r(bar1 + 1, ",", &save); v;
             v = strtok_r(NULL, ",", &save))
            vals[nv++] = strtoll(v, NULL, 10);
        pd_pprof_label labs[8];
        size_t nl = 0;
        for (char *save = NULL, *l = strtok_r(bar2 + 1, ",", &save); l;
             l = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(l, '=');
            *eq = 0;
            memset(&labs[nl], 0, sizeof labs[nl]);
            labs[nl].key = pd_profile_builder_string(b, l, &err);
            if (eq[1] == '#')
                labs[nl].num = strtoll(eq + 2, NULL, 10);
            else
                labs[nl].str = pd_profile_builder_string(b, eq + 1, &err);
            nl++;
        }
        PD_ASSERT_OK(pd_profile_builder_sample(b, locs, nf, vals, labs, nl, &err), &err);
    }
    PD_ASSERT_OK(pd_profile_builder_finish(b, out, &err), &err);
    pd_profile_builder_free(b);
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "root;...;leaf|k=v,k2=v2" of a sample, labels sorted. */
static void sig(const pd_profile *p, const pd_pprof_sample *s, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = 0;
    for (size_t j = s->n_location; j-- > 0;) {
        const pd_pprof_location *l = pd_profile_location(p, s->location_id[j]);
        assert_non_null(l);
        for (size_t m = l->n_line; m-- > 0;) {
            const pd_pprof_function *f = pd_profile_function(p, l->line[m].function_id);
            o += (size_t)snprintf(out + o, cap - o, "%s%s", o ? ";" : "",
                                  f ? pd_profile_str(p, f->name) : "?");
        }
    }
    char *labs[16], buf[16][128];
    size_t nl = 0;
    for (size_t i = 0; i < s->n_label && nl < 16; i++, nl++) {
        const pd_pprof_label *l = &s->label[i];
        if (l->str)
            snprintf(buf[nl], sizeof buf[nl], "%s=%s", pd_profile_str(p, l->key),
                     pd_profile_str(p, l->str));
        else
            snprintf(buf[nl], sizeof buf[nl], "%s=#%" PRId64, pd_profile_str(p, l->key), l->num);
        labs[nl] = buf[nl];
    }
    qsort(labs, nl, sizeof *labs, cmp_cstr);
    o += (size_t)snprintf(out + o, cap - o, "|");
    for (size_t i = 0; i < nl; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%s", i ? "," : "", labs[i]);
}

/* Asserts p holds exactly the samples `want` ("stack|labels=v1,v2"), in any
 * order, each once. */
static void expect_samples(const pd_profile *p, const char *const *want, size_t n)
{
    if (p->n_sample != n) {
        for (size_t i = 0; i < p->n_sample; i++) {
            char s[1024];
            sig(p, &p->sample[i], s, sizeof s);
            print_message("  have %s = %" PRId64 "\n", s, p->sample[i].value[0]);
        }
        fail_msg("expected %zu samples, have %zu", n, p->n_sample);
    }
    bool *used = calloc(n + 1, 1);
    for (size_t i = 0; i < p->n_sample; i++) {
        const pd_pprof_sample *s = &p->sample[i];
        char have[1024], vals[128];
        sig(p, s, have, sizeof have);
        size_t o = 0;
        for (size_t v = 0; v < s->n_value; v++)
            o += (size_t)snprintf(vals + o, sizeof vals - o, "%s%" PRId64, v ? "," : "",
                                  s->value[v]);
        char full[1200];
        snprintf(full, sizeof full, "%s=%s", have, vals);
        bool found = false;
        for (size_t w = 0; w < n && !found; w++)
            if (!used[w] && strcmp(want[w], full) == 0)
                found = used[w] = true;
        if (!found) {
            free(used);
            fail_msg("unexpected sample %s", full);
        }
    }
    free(used);
}

typedef struct hdr {
    int64_t time, dur, period;
    const char *comments; /* comma-separated */
    const char *dflt;
} hdr;

static void set_hdr(pd_profile_builder *b, void *ctx)
{
    const hdr *h = ctx;
    pd_err err = {{0}};
    pd_profile *p = pd_profile_builder_profile(b);
    PD_ASSERT_OK(pd_profile_builder_period(b, "cpu", "nanoseconds", h->period, &err), &err);
    p->time_nanos = h->time;
    p->duration_nanos = h->dur;
    if (h->dflt)
        p->default_sample_type = pd_profile_builder_string(b, h->dflt, &err);
    char tmp[128];
    snprintf(tmp, sizeof tmp, "%s", h->comments ? h->comments : "");
    for (char *save = NULL, *c = strtok_r(tmp, ",", &save); c; c = strtok_r(NULL, ",", &save))
        PD_ASSERT_OK(pd_profile_builder_comment(b, c, &err), &err);
}

static const char TYPES[] = "samples/count,cpu/nanoseconds";
static const char *const SPEC_A[] = {"main;f|1,10|", "main;f|2,20|k=v", "main;g|0,0|",
                                     "main;g|3,30|a=1,b=2"};
static const char *const SPEC_B[] = {"main;f|4,40|", "main;g|5,50|b=2,a=1", "main;h|6,60|"};

static void mk_a(pd_profile *p)
{
    hdr h = {.time = 200, .dur = 5, .period = 10, .comments = "x"};
    mk(TYPES, SPEC_A, 4, p, set_hdr, &h);
}

static void mk_b(pd_profile *p)
{
    hdr h = {.time = 100, .dur = 7, .period = 20, .comments = "x,y", .dflt = "cpu"};
    mk(TYPES, SPEC_B, 3, p, set_hdr, &h);
}

/* Merges the profiles; base[i] marks diff-base inputs; series[i] may be NULL. */
static int merge(const pd_merge_options *o, pd_profile *const *ps, const bool *base,
                 const pd_labels *const *series, size_t n, pd_profile *out, pd_err *err)
{
    pd_merge *m;
    int rc = pd_merge_new(o, &m, err);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < n && rc >= 0; i++) {
        char name[32];
        snprintf(name, sizeof name, "input-%zu", i);
        rc = pd_merge_add(m, ps[i], series ? series[i] : NULL, base ? base[i] : false, name, err);
    }
    if (rc >= 0)
        rc = pd_merge_finish(m, out, err);
    pd_merge_free(m);
    return rc;
}

static void test_sum_labels_headers(void **state)
{
    (void)state;
    pd_profile a, b, out;
    mk_a(&a);
    mk_b(&b);
    pd_profile *ps[] = {&a, &b};
    pd_err err = {{0}};
    assert_int_equal(merge(NULL, ps, NULL, NULL, 2, &out, &err), 0);
    /* equal stacks with equal label sets (in any order) add up; the zero
     * sample of A disappears; k=v stays apart from the unlabelled f */
    const char *want[] = {"main;f|=5,50", "main;f|k=v=2,20", "main;g|a=1,b=2=8,80", "main;h|=6,60"};
    expect_samples(&out, want, 4);
    assert_int_equal(out.n_function, 4); /* main f g h */
    assert_int_equal(out.n_location, 4);
    /* pprof's combineHeaders: earliest time, summed duration, largest
     * period, comments without repeats, first non-empty default type */
    assert_int_equal(out.time_nanos, 100);
    assert_int_equal(out.duration_nanos, 12);
    assert_int_equal(out.period, 20);
    assert_int_equal(out.n_comment, 2);
    assert_string_equal(pd_profile_str(&out, out.comment[0]), "x");
    assert_string_equal(pd_profile_str(&out, out.comment[1]), "y");
    assert_string_equal(pd_profile_str(&out, out.default_sample_type), "cpu");
    assert_string_equal(pd_profile_str(&out, out.period_type.type), "cpu");
    assert_true(pd_profile_validate(&out, &err) == 0);
    pd_profile_release(&out);

    /* merging one profile gives it back (minus the zero sample) */
    pd_profile one;
    assert_int_equal(merge(NULL, ps, NULL, NULL, 1, &one, &err), 0);
    const char *want1[] = {"main;f|=1,10", "main;f|k=v=2,20", "main;g|a=1,b=2=3,30"};
    expect_samples(&one, want1, 3);
    pd_profile_release(&one);
    pd_profile_release(&a);
    pd_profile_release(&b);
}

static void test_type_mismatch(void **state)
{
    (void)state;
    pd_profile a, b, c, out;
    mk_a(&a);
    mk_b(&b);
    const char *sc[] = {"main;f|1,1|"};
    mk("samples/count,wall/nanoseconds", sc, 1, &c, NULL, NULL);
    pd_merge *m;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_merge_new(NULL, &m, &err), &err);
    PD_ASSERT_OK(pd_merge_add(m, &a, NULL, false, "series heap{i=\"A\"}", &err), &err);
    assert_int_equal(pd_merge_add(m, &c, NULL, false, "series wall{i=\"C\"}", &err), PD_EINVAL);
    /* the message names both inputs and both type lists */
    assert_non_null(strstr(err.msg, "series wall{i=\"C\"}"));
    assert_non_null(strstr(err.msg, "series heap{i=\"A\"}"));
    assert_non_null(strstr(err.msg, "wall/nanoseconds"));
    assert_non_null(strstr(err.msg, "cpu/nanoseconds"));
    /* nothing of C went in and the merger goes on */
    PD_ASSERT_OK(pd_merge_add(m, &b, NULL, false, "b", &err), &err);
    PD_ASSERT_OK(pd_merge_finish(m, &out, &err), &err);
    assert_int_equal(out.n_sample, 4);
    pd_merge_free(m);
    pd_profile_release(&out);
    pd_profile_release(&a);
    pd_profile_release(&b);
    pd_profile_release(&c);
}

static void test_diff(void **state)
{
    (void)state;
    pd_profile a, b, out;
    mk_a(&a); /* new */
    mk_b(&b); /* base */
    pd_profile *ps[] = {&a, &b};
    bool base[] = {false, true};
    pd_err err = {{0}};
    assert_int_equal(merge(NULL, ps, base, NULL, 2, &out, &err), 0);
    /* base values negated and marked, never summed with the new side */
    const char *want[] = {"main;f|=1,10",
                          "main;f|k=v=2,20",
                          "main;g|a=1,b=2=3,30",
                          "main;f|pprof::base=true=-4,-40",
                          "main;g|a=1,b=2,pprof::base=true=-5,-50",
                          "main;h|pprof::base=true=-6,-60"};
    expect_samples(&out, want, 6);
    assert_true(pd_report_is_diff(&out));
    assert_false(pd_report_is_diff(&a));

    /* top of cpu/nanoseconds: f: new 10+20, base 40 -> delta -10;
     * total: new 60, base 150, delta -90; % of the base side (150) */
    pd_buf buf;
    pd_buf_init(&buf, 0);
    pd_report_options ro = {.sample_index = 1, .diff = true};
    assert_int_equal(pd_report_top_ex(&out, &ro, &buf), 0);
    json_error_t je;
    json_t *j = json_loadb(buf.data, buf.len, 0, &je);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "total")), -90);
    assert_int_equal(json_integer_value(json_object_get(j, "base_total")), 150);
    assert_int_equal(json_integer_value(json_object_get(j, "new_total")), 60);
    json_t *rows = json_object_get(j, "rows"), *r;
    size_t i;
    int seen = 0;
    json_array_foreach(rows, i, r)
    {
        const char *fn = json_string_value(json_object_get(r, "function"));
        int64_t flat = json_integer_value(json_object_get(r, "flat"));
        int64_t bf = json_integer_value(json_object_get(r, "base_flat"));
        int64_t nf = json_integer_value(json_object_get(r, "new_flat"));
        if (!strcmp(fn, "f")) {
            assert_int_equal(flat, -10);
            assert_int_equal(bf, 40);
            assert_int_equal(nf, 30);
            assert_true(json_real_value(json_object_get(r, "flat_pct")) < -6.66 &&
                        json_real_value(json_object_get(r, "flat_pct")) > -6.67);
            seen++;
        } else if (!strcmp(fn, "h")) { /* only in the base: -60, largest |flat| first */
            assert_int_equal(flat, -60);
            assert_int_equal(bf, 60);
            assert_int_equal(nf, 0);
            assert_int_equal(i, 0);
            seen++;
        } else if (!strcmp(fn, "main")) {
            assert_int_equal(json_integer_value(json_object_get(r, "cum")), -90);
            assert_int_equal(json_integer_value(json_object_get(r, "base_cum")), 150);
            assert_int_equal(json_integer_value(json_object_get(r, "new_cum")), 60);
            seen++;
        }
    }
    assert_int_equal(seen, 3);
    json_decref(j);

    /* flame graph: root and node g carry both sides */
    pd_buf_reset(&buf);
    assert_int_equal(pd_report_flamegraph_ex(&out, &ro, &buf), 0);
    j = json_loadb(buf.data, buf.len, 0, &je);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "value")), -90);
    assert_int_equal(json_integer_value(json_object_get(j, "base")), 150);
    assert_int_equal(json_integer_value(json_object_get(j, "new")), 60);
    json_t *mainn = json_array_get(json_object_get(j, "children"), 0);
    json_t *g = json_array_get(json_object_get(mainn, "children"), 1);
    assert_string_equal(json_string_value(json_object_get(g, "name")), "g");
    assert_int_equal(json_integer_value(json_object_get(g, "value")), -20);
    assert_int_equal(json_integer_value(json_object_get(g, "base")), 50);
    assert_int_equal(json_integer_value(json_object_get(g, "new_self")), 30);
    json_decref(j);

    /* folded, two-column form: stack BASE NEW, in name order */
    pd_buf_reset(&buf);
    assert_int_equal(pd_report_folded(&out, &ro, &buf), 0);
    assert_string_equal(buf.data, "main;f 40 30\nmain;g 50 30\nmain;h 60 0\n");
    pd_buf_release(&buf);
    pd_profile_release(&out);
    pd_profile_release(&a);
    pd_profile_release(&b);
}

static void test_by(void **state)
{
    (void)state;
    pd_profile a, b, out;
    mk_a(&a);
    mk_b(&b);
    pd_profile *ps[] = {&a, &b};
    pd_labels la, lb;
    pd_labels_init(&la);
    pd_labels_init(&lb);
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_labels_set(&la, "__name__", "cpu", &err), &err);
    PD_ASSERT_OK(pd_labels_set(&la, "instance", "i1", &err), &err);
    PD_ASSERT_OK(pd_labels_set(&lb, "__name__", "cpu", &err), &err);
    PD_ASSERT_OK(pd_labels_set(&lb, "instance", "i2", &err), &err);
    const pd_labels *series[] = {&la, &lb};

    /* by=instance: sample labels dropped, the series' instance added */
    pd_merge_options o = {.by = "instance"};
    assert_int_equal(merge(&o, ps, NULL, series, 2, &out, &err), 0);
    const char *w1[] = {"main;f|instance=i1=3,30", "main;g|instance=i1=3,30",
                        "main;f|instance=i2=4,40", "main;g|instance=i2=5,50",
                        "main;h|instance=i2=6,60"};
    expect_samples(&out, w1, 5);
    pd_profile_release(&out);

    /* by= (empty): everything summed per stack */
    o.by = "";
    assert_int_equal(merge(&o, ps, NULL, series, 2, &out, &err), 0);
    const char *w2[] = {"main;f|=7,70", "main;g|=8,80", "main;h|=6,60"};
    expect_samples(&out, w2, 3);
    pd_profile_release(&out);

    /* by=k,a: only those sample labels stay (b goes); no series label */
    o.by = " k , a";
    assert_int_equal(merge(&o, ps, NULL, series, 2, &out, &err), 0);
    const char *w3[] = {"main;f|=5,50", "main;f|k=v=2,20", "main;g|a=1=8,80", "main;h|=6,60"};
    expect_samples(&out, w3, 4);
    pd_profile_release(&out);

    pd_labels_release(&la);
    pd_labels_release(&lb);
    pd_profile_release(&a);
    pd_profile_release(&b);
}

static int64_t total0(const pd_profile *p)
{
    int64_t t[8] = {0};
    pd_profile_totals(p, t);
    return t[0];
}

static void filtered(const pd_profile *in, const char *focus, const char *ignore, const char *hide,
                     pd_profile *out)
{
    pd_merge_options o = {.focus = focus, .ignore = ignore, .hide = hide};
    pd_profile *ps[] = {(pd_profile *)in};
    pd_err err = {{0}};
    assert_int_equal(merge(&o, ps, NULL, NULL, 1, out, &err), 0);
}

static void test_filters(void **state)
{
    (void)state;
    const char *spec[] = {"main;a;b|1,1|", "main;c;b|2,2|", "main;c|4,4|", "main;d;a|8,8|"};
    pd_profile p, out;
    mk(TYPES, spec, 4, &p, NULL, NULL);
    struct {
        const char *focus, *ignore, *hide;
        int64_t total;
    } cases[] = {
        {"^c$", NULL, NULL, 2 + 4}, /* samples through c */
        {NULL, "^a$", NULL, 2 + 4}, /* samples not through a */
        {"^(a|c)$", "^d$", NULL, 1 + 2 + 4},
        {NULL, NULL, "^b$", 15},         /* hide keeps every sample */
        {"ai", NULL, NULL, 15},          /* unanchored: "ai" is in "main" */
        {"^b\\.go$", NULL, NULL, 1 + 2}, /* file names match too */
        {"^zzz$", NULL, NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        filtered(&p, cases[i].focus, cases[i].ignore, cases[i].hide, &out);
        if (total0(&out) != cases[i].total)
            fail_msg("case %zu: total %" PRId64 ", want %" PRId64, i, total0(&out), cases[i].total);
        pd_profile_release(&out);
    }
    /* hide removes the frame from the stacks */
    filtered(&p, NULL, NULL, "^b$", &out);
    const char *want[] = {"main;a|=1,1", "main;c|=2,2", "main;c|=4,4", "main;d;a|=8,8"};
    expect_samples(&out, want, 4);
    for (size_t i = 0; i < out.n_function; i++)
        assert_string_not_equal(pd_profile_str(&out, out.function[i].name), "b");
    pd_profile_release(&out);

    /* a bad regex is PD_EINVAL naming the option */
    pd_merge *m;
    pd_err err = {{0}};
    pd_merge_options bad = {.ignore = "(unclosed"};
    assert_int_equal(pd_merge_new(&bad, &m, &err), PD_EINVAL);
    assert_null(m);
    assert_non_null(strstr(err.msg, "ignore"));
    pd_profile_release(&p);
}

static void test_caps(void **state)
{
    (void)state;
    pd_profile a, out;
    mk_a(&a);
    pd_profile *ps[] = {&a};
    pd_err err = {{0}};
    pd_merge_options o = {.max_samples = 2}; /* A has 3 non-zero samples */
    assert_int_equal(merge(&o, ps, NULL, NULL, 1, &out, &err), PD_ETOOBIG);
    assert_non_null(strstr(err.msg, "--query.max-samples"));
    o.max_samples = 3;
    assert_int_equal(merge(&o, ps, NULL, NULL, 1, &out, &err), 0);
    pd_profile_release(&out);

    pd_merge_options t = {.deadline_ns = 1, .timeout_ms = 5}; /* long past */
    assert_int_equal(merge(&t, ps, NULL, NULL, 1, &out, &err), PD_ETIMEOUT);
    assert_non_null(strstr(err.msg, "--query.timeout"));

    pd_merge *m;
    PD_ASSERT_OK(pd_merge_new(NULL, &m, &err), &err);
    assert_int_equal(pd_merge_finish(m, &out, &err), PD_ENOTFOUND);
    pd_merge_free(m);
    pd_profile_release(&a);
}

/* One location in a mapping [start, start + 0x4000) of /bin/x at start +
 * 0x100, function main. */
typedef struct mapctx {
    uint64_t start;
    const char *bid;
} mapctx;

static void mk_mapped(uint64_t start, const char *bid, int64_t v, pd_profile *out)
{
    pd_profile_builder *b;
    pd_err err = {{0}};
    assert_int_equal(pd_profile_builder_new(NULL, &b), 0);
    assert_true(pd_profile_builder_sample_type(b, "samples", "count", &err) >= 0);
    pd_pprof_mapping mp = {
        .memory_start = start, .memory_limit = start + 0x4000, .has_functions = true};
    uint64_t mid, fid, lid;
    PD_ASSERT_OK(pd_profile_builder_mapping(b, &mp, "/bin/x", bid, &mid, &err), &err);
    PD_ASSERT_OK(pd_profile_builder_function(b, "main", "main", "x.c", 1, &fid, &err), &err);
    pd_pprof_line ln = {fid, 3, 0};
    PD_ASSERT_OK(pd_profile_builder_location(b, mid, start + 0x100, &ln, 1, &lid, &err), &err);
    PD_ASSERT_OK(pd_profile_builder_sample(b, &lid, 1, &v, NULL, 0, &err), &err);
    PD_ASSERT_OK(pd_profile_builder_finish(b, out, &err), &err);
    pd_profile_builder_free(b);
}

static void test_mapping_relocation(void **state)
{
    (void)state;
    pd_profile a, b, c, out;
    mk_mapped(0x1000, "bid1", 1, &a);
    mk_mapped(0x7000, "bid1", 2, &b); /* same binary loaded elsewhere (ASLR) */
    mk_mapped(0x7000, "bid2", 4, &c); /* another binary */
    pd_profile *ps[] = {&a, &b, &c};
    pd_err err = {{0}};
    assert_int_equal(merge(NULL, ps, NULL, NULL, 3, &out, &err), 0);
    /* a and b: one mapping, b's address moved to a's base, values summed */
    assert_int_equal(out.n_mapping, 2);
    assert_int_equal(out.n_location, 2);
    assert_int_equal(out.n_sample, 2);
    for (size_t i = 0; i < out.n_sample; i++) {
        const pd_pprof_location *l = pd_profile_location(&out, out.sample[i].location_id[0]);
        const pd_pprof_mapping *m = pd_profile_mapping(&out, l->mapping_id);
        if (!strcmp(pd_profile_str(&out, m->build_id), "bid1")) {
            assert_int_equal(out.sample[i].value[0], 3);
            assert_int_equal(l->address, 0x1100);
            assert_int_equal(m->memory_start, 0x1000);
            assert_int_equal(m->id, 1); /* the first input's first mapping */
        } else {
            assert_int_equal(out.sample[i].value[0], 4);
            assert_int_equal(l->address, 0x7100);
        }
    }
    pd_profile_release(&out);
    pd_profile_release(&a);
    pd_profile_release(&b);
    pd_profile_release(&c);
}

static void test_flamegraph_nodes_cut(void **state)
{
    (void)state;
    /* root -> main(15) -> {a(9) -> b(1), c(6) -> b(2), d(8)? } built below */
    const char *spec[] = {"main;a;b|1,1|", "main;c;b|2,2|", "main;c|4,4|", "main;d;a|8,8|"};
    pd_profile p;
    mk(TYPES, spec, 4, &p, NULL, NULL);
    /* tree: main 15 > a 1 > b 1; c 6 > b 2; d 8 > a 8.  nodes=3 keeps the
     * largest reachable ones: main (15), d (8), then a under d (8). */
    pd_report_options ro = {.sample_index = 0, .max_nodes = 3};
    pd_buf buf;
    pd_buf_init(&buf, 0);
    assert_int_equal(pd_report_flamegraph_ex(&p, &ro, &buf), 0);
    json_error_t je;
    json_t *j = json_loadb(buf.data, buf.len, 0, &je);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "nodes")), 3);
    assert_int_equal(json_integer_value(json_object_get(j, "nodes_total")), 7);
    json_t *mainn = json_array_get(json_object_get(j, "children"), 0);
    assert_int_equal(json_array_size(json_object_get(mainn, "children")), 1);
    assert_int_equal(json_integer_value(json_object_get(mainn, "cut")), 1 + 6);
    assert_int_equal(json_integer_value(json_object_get(mainn, "cut_children")), 2);
    json_t *d = json_array_get(json_object_get(mainn, "children"), 0);
    assert_string_equal(json_string_value(json_object_get(d, "name")), "d");
    json_decref(j);

    /* top with a row cap reports the cut */
    pd_buf_reset(&buf);
    ro.max_nodes = 2;
    assert_int_equal(pd_report_top_ex(&p, &ro, &buf), 0);
    j = json_loadb(buf.data, buf.len, 0, &je);
    /* flat: a 8, c 4, b 3, main 0 (cum 15) */
    assert_int_equal(json_integer_value(json_object_get(j, "rows_total")), 5);
    assert_int_equal(json_integer_value(json_object_get(j, "rows_cut")), 3);
    assert_int_equal(json_integer_value(json_object_get(j, "cut_flat")), 3);
    json_decref(j);

    /* folded: one line per distinct stack, in name order */
    pd_buf_reset(&buf);
    ro.max_nodes = 0;
    assert_int_equal(pd_report_folded(&p, &ro, &buf), 0);
    assert_string_equal(buf.data, "main;a;b 1\nmain;c 4\nmain;c;b 2\nmain;d;a 8\n");

    /* DOT: 5 functions, edges between them */
    pd_buf_reset(&buf);
    assert_int_equal(pd_report_dot(&p, &ro, &buf), 0);
    assert_non_null(strstr(buf.data, "digraph"));
    assert_non_null(strstr(buf.data, "label=\"main\\n0 (0.00%)\\nof 15 (100.00%)\""));
    assert_non_null(strstr(buf.data, "->"));
    pd_buf_release(&buf);
    pd_profile_release(&p);
}

/* ---------- real profiles against go tool pprof ---------- */

static char tmpdir[128];

static bool have_go(void)
{
    return system("go version >/dev/null 2>&1") == 0;
}

static void read_file(const char *path, pd_buf *b)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    char tmp[65536];
    size_t r;
    while ((r = fread(tmp, 1, sizeof tmp, f)) > 0)
        assert_int_equal(pd_buf_append(b, tmp, r), 0);
    fclose(f);
}

static void load(const char *path, pd_profile *p)
{
    pd_buf b;
    pd_buf_init(&b, 0);
    read_file(path, &b);
    pd_err err = {{0}};
    if (pd_profile_decode(p, (const uint8_t *)b.data, b.len, NULL, &err))
        fail_msg("decode %s: %s", path, err.msg);
    pd_buf_release(&b);
}

static void write_profile(const pd_profile *p, const char *path)
{
    pd_buf b;
    pd_buf_init(&b, 0);
    assert_int_equal(pd_profile_encode(p, true, &b), 0);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b.data, 1, b.len, f), b.len);
    fclose(f);
    pd_buf_release(&b);
}

/* Runs a shell command with HOME/GOCACHE in tmpdir; stdout into out (may be
 * NULL). Fails the test on a non-zero exit. */
static void run(pd_buf *out, const char *fmt, ...)
{
    char cmd[65536];
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(cmd, sizeof cmd, "HOME=%s GOCACHE=%s/gocache GOFLAGS= ", tmpdir, tmpdir);
    vsnprintf(cmd + n, sizeof cmd - (size_t)n, fmt, ap);
    va_end(ap);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char tmp[65536];
    size_t r;
    while ((r = fread(tmp, 1, sizeof tmp, f)) > 0)
        if (out)
            assert_int_equal(pd_buf_append(out, tmp, r), 0);
    int st = pclose(f);
    if (st != 0)
        fail_msg("command failed (%d): %.400s", st, cmd);
}

/* The files of the series: "heap" or "cpu", the first n (0 = all). */
static size_t series_files(const char *kind, size_t n, char paths[][512], size_t cap)
{
    size_t k = 0;
    for (int i = 1; i <= 99 && k < cap && (!n || k < n); i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s-%04d.pb.gz", SERIES_DIR, kind, i);
        if (access(p, R_OK) != 0)
            break;
        snprintf(paths[k++], 512, "%s", p);
    }
    return k;
}

/* The exact-integer unit of pprof -top for a sample type's unit. */
static const char *exact_unit(const char *unit)
{
    if (!strcmp(unit, "bytes"))
        return "byte";
    if (!strcmp(unit, "nanoseconds"))
        return "ns";
    return "count";
}

/* pprof -top of both files must print the same table for every type. */
static void same_top(const pd_profile *p, const char *mine, const char *ref)
{
    for (size_t t = 0; t < p->n_sample_type; t++) {
        const char *type = pd_profile_str(p, p->sample_type[t].type);
        const char *unit = exact_unit(pd_profile_str(p, p->sample_type[t].unit));
        pd_buf a, b;
        pd_buf_init(&a, 0);
        pd_buf_init(&b, 0);
        run(&a,
            "go tool pprof -top -nodefraction=0 -nodecount=100000 -sample_index=%s -unit=%s %s "
            "2>/dev/null",
            type, unit, mine);
        run(&b,
            "go tool pprof -top -nodefraction=0 -nodecount=100000 -sample_index=%s -unit=%s %s "
            "2>/dev/null",
            type, unit, ref);
        assert_true(a.len > 100);
        if (a.len != b.len || memcmp(a.data, b.data, a.len))
            fail_msg("pprof -top -sample_index=%s differs:\n--- profd\n%.2000s\n--- pprof\n%.2000s",
                     type, a.data, b.data);
        pd_buf_release(&a);
        pd_buf_release(&b);
    }
}

/* Report totals agree with the proto's totals. */
static void reports_agree(const pd_profile *p, bool diff)
{
    int64_t tot[16] = {0};
    pd_profile_totals(p, tot);
    for (size_t t = 0; t < p->n_sample_type; t++) {
        pd_report_options ro = {.sample_index = t, .diff = diff};
        pd_buf b;
        pd_buf_init(&b, 0);
        json_error_t je;
        assert_int_equal(pd_report_top_ex(p, &ro, &b), 0);
        json_t *j = json_loadb(b.data, b.len, 0, &je);
        assert_non_null(j);
        assert_int_equal(json_integer_value(json_object_get(j, "total")), tot[t]);
        json_decref(j);
        pd_buf_reset(&b);
        assert_int_equal(pd_report_flamegraph_ex(p, &ro, &b), 0);
        j = json_loadb(b.data, b.len, 0, &je);
        assert_non_null(j);
        assert_int_equal(json_integer_value(json_object_get(j, "value")), tot[t]);
        int64_t root_self = json_integer_value(json_object_get(j, "self"));
        json_decref(j);
        pd_buf_reset(&b);
        ro.diff = false;
        assert_int_equal(pd_report_folded(p, &ro, &b), 0);
        int64_t sum = 0;
        for (char *line = b.data; line && *line;) {
            char *nl = strchr(line, '\n');
            char *sp = nl ? nl : line + strlen(line);
            while (sp > line && sp[-1] != ' ')
                sp--;
            sum += strtoll(sp, NULL, 10);
            line = nl ? nl + 1 : NULL;
        }
        assert_int_equal(sum + root_self, tot[t]);
        pd_buf_release(&b);
    }
}

/* Merges files (and base files for a diff) with profd, and with
 * go tool pprof -proto [flags]; asserts the two are the same. */
static void against_pprof(char files[][512], size_t n, char bases[][512], size_t nb,
                          const pd_merge_options *o, const char *pprof_flags)
{
    pd_merge *m;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_merge_new(o, &m, &err), &err);
    for (size_t i = 0; i < n; i++) {
        pd_profile p;
        load(files[i], &p);
        PD_ASSERT_OK(pd_merge_add(m, &p, NULL, false, files[i], &err), &err);
        pd_profile_release(&p);
    }
    for (size_t i = 0; i < nb; i++) {
        pd_profile p;
        load(bases[i], &p);
        PD_ASSERT_OK(pd_merge_add(m, &p, NULL, true, bases[i], &err), &err);
        pd_profile_release(&p);
    }
    pd_profile mine, ref;
    if (pd_merge_finish(m, &mine, &err))
        fail_msg("finish: %s", err.msg);
    pd_merge_free(m);
    char mine_path[256], ref_path[256];
    snprintf(mine_path, sizeof mine_path, "%s/mine.pb.gz", tmpdir);
    snprintf(ref_path, sizeof ref_path, "%s/ref.pb.gz", tmpdir);
    write_profile(&mine, mine_path);

    pd_buf cmd;
    pd_buf_init(&cmd, 0);
    /* pprof takes one -diff_base (a repeated flag keeps the last): several
     * base files are merged by pprof first */
    char base_path[256];
    snprintf(base_path, sizeof base_path, "%s/base.pb.gz", tmpdir);
    if (nb > 1) {
        pd_buf_puts(&cmd, "go tool pprof -proto");
        for (size_t i = 0; i < nb; i++)
            pd_buf_printf(&cmd, " %s", bases[i]);
        pd_buf_printf(&cmd, " > %s 2>/dev/null", base_path);
        run(NULL, "%s", cmd.data);
        pd_buf_reset(&cmd);
    }
    pd_buf_printf(&cmd, "go tool pprof -proto %s", pprof_flags ? pprof_flags : "");
    if (nb)
        pd_buf_printf(&cmd, " -diff_base=%s", nb > 1 ? base_path : bases[0]);
    for (size_t i = 0; i < n; i++)
        pd_buf_printf(&cmd, " %s", files[i]);
    pd_buf_printf(&cmd, " > %s 2>/dev/null", ref_path);
    run(NULL, "%s", cmd.data);
    pd_buf_release(&cmd);
    load(ref_path, &ref);

    pd_err why = {{0}};
    if (!pd_profile_equal(&mine, &ref, &why))
        fail_msg("profd's merge of %zu (+%zu base) files with '%s' differs from pprof's: %s", n, nb,
                 pprof_flags ? pprof_flags : "", why.msg);
    if (mine.n_sample)
        same_top(&mine, mine_path, ref_path);
    reports_agree(&mine, nb > 0);
    pd_profile_release(&mine);
    pd_profile_release(&ref);
}

static void test_real_merges(void **state)
{
    (void)state;
    if (!have_go())
        skip();
    static char files[64][512];
    const char *kinds[] = {"heap", "cpu"};
    size_t counts[] = {2, 10, 0};
    for (size_t k = 0; k < 2; k++) {
        for (size_t c = 0; c < 3; c++) {
            size_t n = series_files(kinds[k], counts[c], files, 64);
            assert_true(n >= 2);
            against_pprof(files, n, NULL, 0, NULL, NULL);
        }
    }
}

static void test_real_diffs(void **state)
{
    (void)state;
    if (!have_go())
        skip();
    static char all[64][512];
    char news[3][512], bases[3][512];
    size_t n = series_files("heap", 0, all, 64);
    assert_true(n >= 6);
    /* the last heap against the first; three against three */
    memcpy(news[0], all[n - 1], 512);
    memcpy(bases[0], all[0], 512);
    against_pprof(news, 1, bases, 1, NULL, NULL);
    for (int i = 0; i < 3; i++) {
        memcpy(news[i], all[n - 1 - (size_t)i], 512);
        memcpy(bases[i], all[(size_t)i], 512);
    }
    against_pprof(news, 3, bases, 3, NULL, NULL);
    n = series_files("cpu", 0, all, 64);
    memcpy(news[0], all[n - 1], 512);
    memcpy(bases[0], all[0], 512);
    against_pprof(news, 1, bases, 1, NULL, NULL);
}

static void test_real_filters(void **state)
{
    (void)state;
    if (!have_go())
        skip();
    static char files[64][512];
    struct {
        const char *focus, *ignore, *hide, *flags;
    } cases[] = {
        {"flate", NULL, NULL, "-focus=flate"},
        {NULL, "flate", NULL, "-ignore=flate"},
        {NULL, NULL, "runtime\\.", "-hide='runtime\\.'"},
        {"main\\.", "pprof", "flate|gzip", "-focus='main\\.' -ignore=pprof -hide='flate|gzip'"},
    };
    const char *kinds[] = {"heap", "cpu"};
    for (size_t k = 0; k < 2; k++) {
        size_t n = series_files(kinds[k], 10, files, 64);
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            pd_merge_options o = {
                .focus = cases[i].focus, .ignore = cases[i].ignore, .hide = cases[i].hide};
            against_pprof(files, n, NULL, 0, &o, cases[i].flags);
        }
    }
}

/* Memory follows distinct content, not the number of inputs: merging the
 * 30 heap profiles ten times over holds exactly the distinct samples of
 * merging them once, with values ten times as large. */
static void test_distinct_not_n(void **state)
{
    (void)state;
    static char files[64][512];
    size_t n = series_files("heap", 0, files, 64);
    pd_profile ps[64];
    for (size_t i = 0; i < n; i++)
        load(files[i], &ps[i]);
    pd_merge_stats s1, s10;
    pd_profile once, ten;
    pd_err err = {{0}};
    for (int round = 0; round < 2; round++) {
        pd_merge *m;
        PD_ASSERT_OK(pd_merge_new(NULL, &m, &err), &err);
        for (int rep = 0; rep < (round ? 10 : 1); rep++)
            for (size_t i = 0; i < n; i++)
                PD_ASSERT_OK(pd_merge_add(m, &ps[i], NULL, false, files[i], &err), &err);
        pd_merge_get_stats(m, round ? &s10 : &s1);
        PD_ASSERT_OK(pd_merge_finish(m, round ? &ten : &once, &err), &err);
        pd_merge_free(m);
    }
    assert_int_equal(s10.profiles, 10 * s1.profiles);
    assert_int_equal(s10.samples_in, 10 * s1.samples_in);
    assert_int_equal(s10.samples_out, s1.samples_out);
    assert_int_equal(ten.n_sample, once.n_sample);
    assert_int_equal(ten.n_location, once.n_location);
    int64_t t1[8], t10[8];
    pd_profile_totals(&once, t1);
    pd_profile_totals(&ten, t10);
    for (size_t t = 0; t < once.n_sample_type; t++)
        assert_int_equal(t10[t], 10 * t1[t]);
    pd_profile_release(&once);
    pd_profile_release(&ten);
    for (size_t i = 0; i < n; i++)
        pd_profile_release(&ps[i]);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/pd_test_merge_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sum_labels_headers),
        cmocka_unit_test(test_type_mismatch),
        cmocka_unit_test(test_diff),
        cmocka_unit_test(test_by),
        cmocka_unit_test(test_filters),
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_mapping_relocation),
        cmocka_unit_test(test_flamegraph_nodes_cut),
        cmocka_unit_test(test_distinct_not_n),
        cmocka_unit_test(test_real_merges),
        cmocka_unit_test(test_real_diffs),
        cmocka_unit_test(test_real_filters),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
