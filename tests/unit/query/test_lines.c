/* tests/unit/query: query/lines.c — a function's cost per source line on a
 * hand-built profile: self on the leaf, total once per sample per line
 * (recursion), inlined frames on their own lines, frames without a line,
 * a name in two files, build IDs by value, and the errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "../pd_test.h"
#include "query/query.h"

static pd_profile prof;

/* a location of mapping m with one line per (function, line) pair */
static uint64_t loc(pd_profile_builder *b, uint64_t m, uint64_t addr, size_t n, const uint64_t *fn,
                    const int64_t *line)
{
    pd_pprof_line l[4];
    for (size_t i = 0; i < n; i++)
        l[i] = (pd_pprof_line){.function_id = fn[i], .line = line[i]};
    uint64_t id;
    pd_err err;
    PD_ASSERT_OK(pd_profile_builder_location(b, m, addr, l, n, &id, &err), &err);
    return id;
}

static int setup(void **state)
{
    (void)state;
    pd_profile_builder *b;
    pd_err err;
    assert_int_equal(pd_profile_builder_new(NULL, &b), 0);
    PD_ASSERT_OK(pd_profile_builder_sample_type(b, "cpu", "nanoseconds", &err), &err);
    uint64_t f, g, h, f2, main_fn, m1, m2;
    PD_ASSERT_OK(pd_profile_builder_function(b, "f", "f", "/src/a.c", 9, &f, &err), &err);
    PD_ASSERT_OK(pd_profile_builder_function(b, "g", "g", "/src/a.c", 19, &g, &err), &err);
    PD_ASSERT_OK(pd_profile_builder_function(b, "h", "h", "/src/b.c", 1, &h, &err), &err);
    PD_ASSERT_OK(pd_profile_builder_function(b, "f", "f", "/src/c.c", 1, &f2, &err), &err);
    PD_ASSERT_OK(pd_profile_builder_function(b, "main", "main", "/src/m.c", 1, &main_fn, &err),
                 &err);
    pd_pprof_mapping mp = {.memory_start = 0x1000, .memory_limit = 0x9000};
    PD_ASSERT_OK(pd_profile_builder_mapping(b, &mp, "/bin/a", "abcd", &m1, &err), &err);
    mp.memory_start = 0x10000;
    mp.memory_limit = 0x19000;
    PD_ASSERT_OK(pd_profile_builder_mapping(b, &mp, "/bin/b", "ef01", &m2, &err), &err);
    uint64_t mn = loc(b, m1, 0x1100, 1, (uint64_t[]){main_fn}, (int64_t[]){3});
    uint64_t f10 = loc(b, m1, 0x1200, 1, (uint64_t[]){f}, (int64_t[]){10});
    uint64_t f11 = loc(b, m1, 0x1210, 1, (uint64_t[]){f}, (int64_t[]){11});
    uint64_t f12 = loc(b, m1, 0x1220, 1, (uint64_t[]){f}, (int64_t[]){12});
    uint64_t g20 = loc(b, m1, 0x1300, 1, (uint64_t[]){g}, (int64_t[]){20});
    uint64_t hf =
        loc(b, m1, 0x1400, 2, (uint64_t[]){h, f}, (int64_t[]){5, 13}); /* h inlined in f */
    uint64_t f0 = loc(b, m2, 0x10100, 1, (uint64_t[]){f}, (int64_t[]){0});
    uint64_t c1 = loc(b, m2, 0x10200, 1, (uint64_t[]){f2}, (int64_t[]){1});
    struct {
        uint64_t st[4];
        size_t n;
        int64_t v;
    } s[] = {
        {{f10, mn}, 2, 5},           /* leaf f:10 */
        {{g20, f11, mn}, 3, 3},      /* f:11 calls g */
        {{f10, f12, f10, mn}, 4, 2}, /* recursion: f:10 twice in one stack */
        {{hf, mn}, 2, 7},            /* h inlined at f:13 */
        {{f0, mn}, 2, 4},            /* f with no line */
        {{c1, mn}, 2, 1},            /* the other f, in c.c */
        {{mn}, 1, 100},              /* main alone */
    };
    for (size_t i = 0; i < sizeof s / sizeof *s; i++)
        PD_ASSERT_OK(pd_profile_builder_sample(b, s[i].st, s[i].n, &s[i].v, NULL, 0, &err), &err);
    PD_ASSERT_OK(pd_profile_builder_finish(b, &prof, &err), &err);
    pd_profile_builder_free(b);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pd_profile_release(&prof);
    return 0;
}

static void test_lines(void **state)
{
    (void)state;
    pd_function_lines fl;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_query_function_lines(&prof, 0, "f", NULL, &fl, &err), &err);
    assert_string_equal(fl.file, "/src/a.c"); /* total 21 against c.c's 1 */
    assert_int_equal(fl.n_files, 2);
    assert_string_equal(fl.files[0], "/src/a.c");
    assert_string_equal(fl.files[1], "/src/c.c");
    assert_int_equal(fl.n_lines, 4);
    const int64_t want[4][3] = {{10, 7, 7}, {11, 0, 3}, {12, 0, 2}, {13, 0, 7}};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(fl.lines[i].line, want[i][0]);
        assert_int_equal(fl.lines[i].self, want[i][1]);
        assert_int_equal(fl.lines[i].total, want[i][2]);
    }
    assert_int_equal(fl.no_line_self, 4);
    assert_int_equal(fl.no_line_total, 4);
    assert_int_equal(fl.self, 5 + 2 + 4);
    assert_int_equal(fl.total, 5 + 3 + 2 + 7 + 4); /* recursion counted once */
    /* build IDs by value: abcd (f's frames there: 5+3+4+7) before ef01 (4) */
    assert_int_equal(fl.n_build_ids, 2);
    assert_string_equal(fl.build_ids[0], "abcd");
    assert_string_equal(fl.build_ids[1], "ef01");
    pd_function_lines_release(&fl);

    /* the other file of the name */
    PD_ASSERT_OK(pd_query_function_lines(&prof, 0, "f", "/src/c.c", &fl, &err), &err);
    assert_int_equal(fl.n_lines, 1);
    assert_int_equal(fl.lines[0].line, 1);
    assert_int_equal(fl.lines[0].self, 1);
    assert_int_equal(fl.n_build_ids, 1);
    assert_string_equal(fl.build_ids[0], "ef01");
    pd_function_lines_release(&fl);

    /* h: self on its inlined line */
    PD_ASSERT_OK(pd_query_function_lines(&prof, 0, "h", NULL, &fl, &err), &err);
    assert_int_equal(fl.n_lines, 1);
    assert_int_equal(fl.lines[0].line, 5);
    assert_int_equal(fl.lines[0].self, 7);
    pd_function_lines_release(&fl);
}

static void test_errors(void **state)
{
    (void)state;
    pd_function_lines fl;
    pd_err err = {{0}};
    PD_ASSERT_RC(pd_query_function_lines(&prof, 0, "nope", NULL, &fl, &err), PD_ENOTFOUND, &err);
    assert_non_null(strstr(err.msg, "no function named \"nope\""));
    assert_null(fl.lines);
    PD_ASSERT_RC(pd_query_function_lines(&prof, 0, "f", "/src/zz.c", &fl, &err), PD_ENOTFOUND,
                 &err);
    assert_non_null(strstr(err.msg, "no frames in file \"/src/zz.c\""));
    PD_ASSERT_RC(pd_query_function_lines(&prof, 3, "f", NULL, &fl, &err), PD_EINVAL, &err);
    /* a prefix of a name is not the name */
    PD_ASSERT_RC(pd_query_function_lines(&prof, 0, "mai", NULL, &fl, &err), PD_ENOTFOUND, &err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
