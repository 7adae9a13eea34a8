/*
 * tests/unit/storage/test_block_cli.c — `profd tsdb import|analyze|check`
 * (tsdb_cli.c) through pd_tsdb_cli_main: import the real profiles of
 * PD_TESTDATA/pprof into a block, analyze and check it (exit 0), corrupt a
 * byte of the chunks file and check again (exit 1); usage errors exit 2.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "storage/tsdb/block_int.h"
#include "storage/tsdb/tsdb_cli_int.h"

static int run(int argc, const char **argv) { return pd_tsdb_cli_main(argc, (char **)argv); }

static void test_import_analyze_check(void **state)
{
    char tmp[] = "/tmp/pd_test_cli_XXXXXX";
    assert_non_null(mkdtemp(tmp));
    const char *imp[] = {"tsdb", "import", "--storage.path", tmp, "--label", "job=demo",
                         PD_TESTDATA "/pprof"};
    assert_int_equal(run(7, imp), 0);
    /* exactly one block directory, holding all 49 test profiles */
    DIR *d = opendir(tmp);
    struct dirent *e;
    char block[4200] = "";
    size_t n = 0;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(block, sizeof block, "%s/%s", tmp, e->d_name);
            n++;
        }
    closedir(d);
    assert_int_equal(n, 1);
    pd_block *b;
    pd_err err;
    assert_int_equal(pd__block_open(block, &b, &err), 0);
    assert_int_equal(pd__block_meta(b)->n_profiles, 49);
    /* __name__ guessed from the sample types: the 30 heap profiles of the series
       share one series (same labels) */
    pd_matcher m[2];
    assert_int_equal(pd_matcher_init(&m[0], PD_MATCH_EQ, "__name__", "heap", &err), 0);
    assert_int_equal(pd_matcher_init(&m[1], PD_MATCH_EQ, "job", "demo", &err), 0);
    uint32_t *ids;
    size_t nid;
    assert_int_equal(pd__block_select(b, m, 2, &ids, &nid, &err), 0);
    assert_int_equal(nid, 1);
    int64_t a, z;
    uint64_t np, tb, vb;
    pd__block_series_info(b, ids[0], &a, &z, &np, &tb, &vb);
    assert_true(np >= 30); /* the series' 30 + go-demo-once heap (if its time differs) */
    free(ids);
    pd_matcher_release(&m[0]);
    pd_matcher_release(&m[1]);
    pd__block_close(b);

    const char *an[] = {"tsdb", "analyze", tmp};
    assert_int_equal(run(3, an), 0);
    const char *ck[] = {"tsdb", "check", tmp};
    assert_int_equal(run(3, ck), 0);
    /* corrupt one byte in the middle of the chunks file */
    char cp[4300];
    snprintf(cp, sizeof cp, "%s/chunks/000001", block);
    FILE *f = fopen(cp, "r+b");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, len / 2, SEEK_SET);
    int c = fgetc(f);
    fseek(f, len / 2, SEEK_SET);
    fputc(c ^ 0x10, f);
    fclose(f);
    assert_int_equal(run(3, ck), 1);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    assert_int_equal(system(cmd), 0);
}

static void test_usage(void **state)
{
    const char *a[] = {"tsdb", "frobnicate"};
    assert_int_equal(run(2, a), 2);
    const char *b[] = {"tsdb", "import", "x.pb.gz"};
    assert_int_equal(run(3, b), 2);
    const char *c[] = {"tsdb", "import", "--storage.path", "/tmp/x", "--label", "novalue", "f"};
    assert_int_equal(run(7, c), 2);
    const char *d[] = {"tsdb", "check"};
    assert_int_equal(run(2, d), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_import_analyze_check),
        cmocka_unit_test(test_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
