/*
 * Unit tests of the Pyroscope querier's helpers (src/api/querier_select.c,
 * querier_stack.c): profile type IDs checked as Pyroscope's
 * ParseProfileTypeSelector, and StackTraceSelector (call site prefix with
 * inlined frames, Go PGO keep_locations/aggregate_callees) on a profile
 * built with the pprof builder; the label listings' virtual series
 * (pd__vselect_ex meta, through pd_storage_select_latest and the kinds
 * computed once per name and sample types) equal those of the per-profile
 * path, series by series, on a store with every kind of name (the table's,
 * period stored, unknown, heap beside allocs) and a series whose sample
 * types change.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <cmocka.h>
#include "api/querier_int.h"
#include "base/time.h"

static void test_ptid_check(void **state)
{
    (void)state;
    pd_err err = {{0}};
    size_t n = 0;
    assert_int_equal(pd__ptid_check("process_cpu:cpu:nanoseconds:cpu:nanoseconds", &n, &err), 0);
    assert_int_equal(n, strlen("process_cpu:cpu:nanoseconds:cpu:nanoseconds"));
    assert_int_equal(pd__ptid_check("process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta", &n, &err),
                     0);
    assert_int_equal(n, strlen("process_cpu:cpu:nanoseconds:cpu:nanoseconds"));
    assert_int_equal(pd__ptid_check("a::c:d:e", &n, &err),
                     0); /* empty parts: upstream takes them too */
    assert_int_equal(pd__ptid_check("nonsense", &n, &err), PD_EINVAL);
    assert_non_null(
        strstr(err.msg, "profile-type selection must be of the form "
                        "<name>:<sample-type>:<sample-unit>:<period-type>:<period-unit>(:delta), "
                        "got(1): \"nonsense\""));
    assert_int_equal(pd__ptid_check("process_cpu:cpu", &n, &err), PD_EINVAL);
    assert_non_null(strstr(err.msg, "got(2)"));
    assert_int_equal(pd__ptid_check("a:b:c:d:e:f:g", &n, &err), PD_EINVAL);
    assert_non_null(strstr(err.msg, "got(7)"));
    assert_int_equal(pd__ptid_check("", &n, &err), PD_EINVAL);
}

/* main -> a -> b[c inlined] (10), main -> x (20), main -> a -> d:7 (1),
 * main -> a -> d:9 (2, label k=v) */
static void build_l(pd_profile *out, bool label)
{
    pd_profile_builder *b;
    pd_err err = {{0}};
    assert_int_equal(pd_profile_builder_new(NULL, &b), 0);
    assert_true(pd_profile_builder_sample_type(b, "cpu", "nanoseconds", &err) >= 0);
    assert_int_equal(pd_profile_builder_period(b, "cpu", "nanoseconds", 10, &err), 0);
    uint64_t f[6], l[6];
    const char *nm[] = {"main", "a", "b", "c", "x", "d"};
    for (int i = 0; i < 6; i++)
        assert_int_equal(pd_profile_builder_function(b, nm[i], nm[i], "f.go", 0, &f[i], &err), 0);
    pd_pprof_line lmain = {f[0], 1, 0}, la = {f[1], 2, 0}, lx = {f[4], 3, 0}, ld7 = {f[5], 7, 0},
                  ld9 = {f[5], 9, 0};
    pd_pprof_line lbc[2] = {{f[3], 5, 0}, {f[2], 4, 0}}; /* innermost (c) first */
    assert_int_equal(pd_profile_builder_location(b, 0, 0x10, &lmain, 1, &l[0], &err), 0);
    assert_int_equal(pd_profile_builder_location(b, 0, 0x20, &la, 1, &l[1], &err), 0);
    assert_int_equal(pd_profile_builder_location(b, 0, 0x30, lbc, 2, &l[2], &err), 0);
    assert_int_equal(pd_profile_builder_location(b, 0, 0x40, &lx, 1, &l[3], &err), 0);
    assert_int_equal(pd_profile_builder_location(b, 0, 0x50, &ld7, 1, &l[4], &err), 0);
    assert_int_equal(pd_profile_builder_location(b, 0, 0x50, &ld9, 1, &l[5], &err),
                     0); /* same address, another line */
    uint64_t s1[] = {l[2], l[1], l[0]}, s2[] = {l[3], l[0]}, s3[] = {l[4], l[1], l[0]},
             s4[] = {l[5], l[1], l[0]};
    int64_t v10 = 10, v20 = 20, v1 = 1, v2 = 2;
    pd_pprof_label lab = {0};
    lab.key = pd_profile_builder_string(b, "k", &err);
    lab.str = pd_profile_builder_string(b, "v", &err);
    assert_int_equal(pd_profile_builder_sample(b, s1, 3, &v10, NULL, 0, &err), 0);
    assert_int_equal(pd_profile_builder_sample(b, s2, 2, &v20, NULL, 0, &err), 0);
    assert_int_equal(pd_profile_builder_sample(b, s3, 3, &v1, NULL, 0, &err), 0);
    assert_int_equal(pd_profile_builder_sample(b, s4, 3, &v2, &lab, label ? 1 : 0, &err), 0);
    assert_int_equal(pd_profile_builder_finish(b, out, &err), 0);
    pd_profile_builder_free(b);
}

static void build(pd_profile *out)
{
    build_l(out, true);
}

static int64_t total(const pd_profile *p)
{
    int64_t t = 0;
    for (size_t i = 0; i < p->n_sample; i++)
        t += p->sample[i].value[0];
    return t;
}

static int64_t select_total(const char *const *site, size_t n)
{
    pd_profile p;
    pd_err err = {{0}};
    build(&p);
    pd__stack_selector s = {.call_site = site, .n_call_site = n};
    assert_int_equal(pd__stack_select(&p, &s, NULL, &err), 0);
    int64_t t = total(&p);
    pd_profile_release(&p);
    return t;
}

static void test_call_site(void **state)
{
    (void)state;
    const char *ma[] = {"main", "a"}, *mabc[] = {"main", "a", "b", "c"},
               *mabcz[] = {"main", "a", "b", "c", "z"}, *mab[] = {"main", "a", "b"},
               *mx[] = {"main", "x"}, *a[] = {"a"};
    assert_int_equal(select_total(ma, 2), 13);
    assert_int_equal(select_total(mab, 3), 10);
    assert_int_equal(select_total(mabc, 4), 10); /* the inlined c is a frame of its own */
    assert_int_equal(select_total(mabcz, 5), 0);
    assert_int_equal(select_total(mx, 2), 20);
    assert_int_equal(select_total(a, 1), 0);     /* a prefix from the root, not anywhere */
    assert_int_equal(select_total(NULL, 0), 33); /* inactive: unchanged */
    /* labels and stacks are kept whole */
    pd_profile p;
    pd_err err = {{0}};
    build(&p);
    pd__stack_selector s = {.call_site = ma, .n_call_site = 2};
    assert_int_equal(pd__stack_select(&p, &s, NULL, &err), 0);
    assert_int_equal(p.n_sample, 3);
    bool labelled = false;
    for (size_t i = 0; i < p.n_sample; i++) {
        assert_int_equal(p.sample[i].n_location, 3);
        if (p.sample[i].n_label == 1) {
            labelled = true;
            assert_string_equal(pd_profile_str(&p, p.sample[i].label[0].key), "k");
            assert_string_equal(pd_profile_str(&p, p.sample[i].label[0].str), "v");
        }
    }
    assert_true(labelled);
    assert_string_equal(pd_profile_str(&p, p.sample_type[0].type), "cpu");
    assert_int_equal(p.period, 10);
    pd_profile_release(&p);
}

static void test_go_pgo(void **state)
{
    (void)state;
    pd_profile p;
    pd_err err = {{0}};
    build(&p);
    const char *ignored[] = {"nothing"};
    /* keep 1 location, aggregate callees: d:7 and d:9 become d:0; the
       labelled one stays apart; call_site is ignored under go_pgo */
    pd__stack_selector s = {.call_site = ignored,
                            .n_call_site = 1,
                            .go_pgo = true,
                            .keep_locations = 1,
                            .aggregate_callees = true};
    assert_int_equal(pd__stack_select(&p, &s, NULL, &err), 0);
    assert_int_equal(total(&p), 33);
    assert_int_equal(p.n_sample, 4);
    for (size_t i = 0; i < p.n_sample; i++) {
        assert_int_equal(p.sample[i].n_location, 1);
        const pd_pprof_location *l = pd_profile_location(&p, p.sample[i].location_id[0]);
        assert_int_equal(l->line[0].line, 0);
    }
    pd_profile_release(&p);
    /* without the label the two d samples are one: d:0 with 3 */
    build_l(&p, false);
    assert_int_equal(pd__stack_select(&p, &s, NULL, &err), 0);
    assert_int_equal(p.n_sample, 3);
    bool joined = false;
    for (size_t i = 0; i < p.n_sample; i++)
        joined |= p.sample[i].value[0] == 3;
    assert_true(joined);
    pd_profile_release(&p);
    /* keep 2 */
    build(&p);
    s.keep_locations = 2;
    assert_int_equal(pd__stack_select(&p, &s, NULL, &err), 0);
    assert_int_equal(total(&p), 33);
    size_t deep = 0;
    for (size_t i = 0; i < p.n_sample; i++)
        deep += p.sample[i].n_location == 2;
    assert_int_equal(deep, p.n_sample);
    pd_profile_release(&p);
    /* keep_locations 0: all locations, lines of the leaf cleared */
    build(&p);
    s.keep_locations = 0;
    s.aggregate_callees = false;
    assert_int_equal(pd__stack_select(&p, &s, NULL, &err), 0);
    assert_int_equal(p.n_sample, 4);
    assert_int_equal(total(&p), 33);
    pd_profile_release(&p);
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---- label listings (pd__vselect_ex meta: pd_storage_select_latest and
 * the kinds computed once per name and types) ---- */

/* A profile of one sample (main, 1 per type) with types (n) and the period
 * type/unit pt/pu. */
static void build_types(pd_profile *out, const char *const *types, const char *const *units,
                        size_t n, const char *pt, const char *pu)
{
    pd_profile_builder *b;
    pd_err err = {{0}};
    assert_int_equal(pd_profile_builder_new(NULL, &b), 0);
    for (size_t i = 0; i < n; i++)
        assert_true(pd_profile_builder_sample_type(b, types[i], units[i], &err) >= 0);
    assert_int_equal(pd_profile_builder_period(b, pt, pu, 1, &err), 0);
    uint64_t f, l;
    assert_int_equal(pd_profile_builder_function(b, "main", "main", "m.go", 0, &f, &err), 0);
    pd_pprof_line ln = {f, 1, 0};
    assert_int_equal(pd_profile_builder_location(b, 0, 0x10, &ln, 1, &l, &err), 0);
    int64_t v[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    assert_int_equal(pd_profile_builder_sample(b, &l, 1, v, NULL, 0, &err), 0);
    assert_int_equal(pd_profile_builder_finish(b, out, &err), 0);
    pd_profile_builder_free(b);
}

static void put(pd_storage *st, const char *labels, int64_t ts, const pd_profile *p)
{
    pd_labels ls;
    pd_labels_init(&ls);
    char *dup = strdup(labels), *save = NULL;
    for (char *kv = strtok_r(dup, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        *eq = 0;
        assert_int_equal(pd_labels_set(&ls, kv, eq + 1, NULL), 0);
    }
    free(dup);
    pd_buf body;
    pd_buf_init(&body, 0);
    assert_int_equal(pd_profile_encode(p, false, &body), 0);
    pd_err err = {{0}};
    if (pd_storage_append(st, &ls, ts, (const uint8_t *)body.data, body.len, p, &err) < 0)
        fail_msg("append %s: %s", labels, err.msg);
    pd_buf_release(&body);
    pd_labels_release(&ls);
}

/* The selection's virtual series as sorted "name=value,..." strings, each
 * with its ptid; *n their count. */
static char **vstrings(const pd__vselection *s, size_t *n)
{
    char **v = calloc(s->n ? s->n : 1, sizeof *v);
    for (size_t i = 0; i < s->n; i++) {
        pd_buf b;
        pd_buf_init(&b, 0);
        for (size_t j = 0; j < s->v[i].vl.n; j++) {
            pd_buf_append(&b, s->v[i].vl.v[j].name, strlen(s->v[i].vl.v[j].name));
            pd_buf_append(&b, "=", 1);
            pd_buf_append(&b, s->v[i].vl.v[j].value, strlen(s->v[i].vl.v[j].value));
            pd_buf_append(&b, ",", 1);
        }
        pd_buf_append(&b, "ptid=", 5);
        pd_buf_append(&b, s->v[i].ptid, strlen(s->v[i].ptid));
        pd_buf_append(&b, "", 1);
        v[i] = strdup((char *)b.data);
        pd_buf_release(&b);
    }
    qsort(v, s->n, sizeof *v, cmp_cstr);
    *n = s->n;
    return v;
}

/* The listing's virtual series equal those of the per-profile path
 * (pd__vselect reads every point, no memo) over a range where each
 * series' sample types do not change. Returns their count. */
static size_t same_as_points(pd_storage *st, const char *ptid, const char *sel, int64_t a,
                             int64_t b)
{
    pd__vselection m, p;
    pd_err err = {{0}};
    const char *sels[] = {sel};
    assert_int_equal(pd__vselect_ex(st, ptid, sels, 1, a, b, true, &m, &err), 0);
    assert_int_equal(pd__vselect(st, ptid, sels, 1, a, b, &p, &err), 0);
    size_t nm, np;
    char **vm = vstrings(&m, &nm), **vp = vstrings(&p, &np);
    assert_int_equal(nm, np);
    for (size_t i = 0; i < nm; i++)
        assert_string_equal(vm[i], vp[i]);
    for (size_t i = 0; i < nm; i++) {
        free(vm[i]);
        free(vp[i]);
    }
    free(vm);
    free(vp);
    pd__vselection_release(&m);
    pd__vselection_release(&p);
    return nm;
}

static void test_listing_kinds(void **state)
{
    (void)state;
    char dir[] = "/tmp/pd_querier_test_XXXXXX";
    assert_non_null(mkdtemp(dir));
    pd_storage_options o = pd_storage_options_default();
    o.path = dir;
    o.fsync = PD_FSYNC_NEVER;
    o.maintenance_ms = -1;
    pd_storage *st = NULL;
    pd_err err = {{0}};
    assert_int_equal(pd_storage_open(&o, &st, &err), 0);
    const char *heap_t[] = {"alloc_objects", "alloc_space", "inuse_objects", "inuse_space"};
    const char *heap_u[] = {"count", "bytes", "count", "bytes"};
    const char *cpu_t[] = {"samples", "cpu"}, *cpu_u[] = {"count", "nanoseconds"};
    pd_profile heap, cpu, cpu1, mem, odd;
    build_types(&heap, heap_t, heap_u, 4, "space", "bytes");
    build_types(&cpu, cpu_t, cpu_u, 2, "cpu", "nanoseconds");
    build_types(&cpu1, cpu_t + 1, cpu_u + 1, 1, "cpu", "nanoseconds");
    build_types(&mem, heap_t + 2, heap_u + 2, 2, "objects", "count"); /* period stored */
    build_types(&odd, cpu_t, cpu_u, 2, "wallclock", "ms");            /* a name not in the table */
    int64_t t0 = pd_now_ms() - 60000;
    /* many series of one kind, some with service_name, some job only */
    for (int i = 0; i < 40; i++) {
        char ls[128];
        snprintf(ls, sizeof ls,
                 i % 2 ? "__name__=heap,service_name=s%d,i=%d" : "__name__=heap,job=j%d,i=%d",
                 i % 3, i);
        put(st, ls, t0 + i, &heap);
    }
    put(st, "__name__=allocs,service_name=s0", t0, &heap); /* heap/allocs keep their own */
    put(st, "__name__=memory,service_name=m", t0, &mem);
    put(st, "__name__=wallish,service_name=w", t0, &odd);
    put(st, "__name__=cpu,service_name=c", t0 + 1000, &cpu);
    put(st, "__name__=cpu,service_name=c", t0 + 2000, &cpu1); /* its types change */
    put(st, "__name__=cpu,service_name=c2", t0 + 1000, &cpu);
    /* every selector and profile type, over ranges where no series' types change */
    /* heap 40 x inuse_* (allocs has its alloc_*), allocs 2, memory 2, wallish 2, cpu 2 x 2 */
    assert_int_equal(same_as_points(st, NULL, "{}", t0, t0 + 1500), 40 * 2 + 2 + 2 + 2 + 2 * 2);
    assert_true(same_as_points(st, NULL, "{service_name=\"s1\"}", t0, t0 + 1500) > 0);
    assert_true(same_as_points(st, NULL, "{service_name=\"m\"}", t0, t0 + 1500) == 2);
    assert_true(same_as_points(st, NULL, "{__period_type__=\"wallclock\"}", t0, t0 + 1500) == 2);
    assert_true(same_as_points(st, "memory:inuse_space:bytes:space:bytes", "{}", t0, t0 + 1500) >
                40);
    assert_true(same_as_points(st, "process_cpu:cpu:nanoseconds:cpu:nanoseconds", "{}", t0 + 1500,
                               t0 + 2500) == 1);
    /* over the whole range a listing shows each series' newest types: cpu
       {service_name=c} only its cpu type now, c2 both */
    pd__vselection m;
    const char *all[] = {"{__name__=\"process_cpu\"}"};
    assert_int_equal(pd__vselect_ex(st, NULL, all, 1, t0, t0 + 3000, true, &m, &err), 0);
    size_t n;
    char **v = vstrings(&m, &n);
    assert_int_equal(n, 3);
    size_t c_samples = 0;
    for (size_t i = 0; i < n; i++) {
        c_samples += strstr(v[i], "__type__=samples") && strstr(v[i], "service_name=c,");
        free(v[i]);
    }
    free(v);
    assert_int_equal(c_samples, 0);
    pd__vselection_release(&m);
    pd_profile_release(&heap);
    pd_profile_release(&cpu);
    pd_profile_release(&cpu1);
    pd_profile_release(&mem);
    pd_profile_release(&odd);
    pd_storage_close(st);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ptid_check),
        cmocka_unit_test(test_call_site),
        cmocka_unit_test(test_go_pgo),
        cmocka_unit_test(test_listing_kinds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
