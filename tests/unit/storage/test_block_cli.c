/*
 * tests/unit/storage/test_block_cli.c — `profd tsdb import|analyze|check`
 * (tsdb_cli.c) through pd_tsdb_cli_main: import the real profiles of
 * PD_TESTDATA/pprof into a block, analyze and check it (exit 0), corrupt a
 * byte of the chunks file and check again (exit 1); check of a store's WAL
 * (clean, torn tail, flipped byte); usage errors exit 2.
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
#include "../pd_test.h"

#include <sys/stat.h>
#include <unistd.h>

#include "storage/storage.h"
#include "storage/tsdb/block_int.h"
#include "storage/tsdb/tsdb_cli_int.h"

static int run(int argc, const char **argv)
{
    return pd_tsdb_cli_main(argc, (char **)argv);
}

static void test_import_analyze_check(void **state)
{
    char tmp[] = "/tmp/pd_test_cli_XXXXXX";
    assert_non_null(mkdtemp(tmp));
    /* the test profiles age: a retention that keeps them whatever the date */
    const char *imp[] = {"tsdb",
                         "import",
                         "--storage.path",
                         tmp,
                         "--label",
                         "job=demo",
                         "--storage.retention.time=100y",
                         PD_TESTDATA "/pprof"};
    assert_int_equal(run(8, imp), 0);
    /* exactly one block directory, holding all 49 test profiles */
    DIR *d = opendir(tmp);
    struct dirent *e;
    char block[4200] = "";
    size_t n = 0;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' &&
            strcmp(e->d_name, "lock")) { /* lock: import's, as the server's */
            snprintf(block, sizeof block, "%s/%s", tmp, e->d_name);
            n++;
        }
    closedir(d);
    assert_int_equal(n, 1);
    pd_block *b;
    pd_err err;
    PD_ASSERT_OK(pd__block_open(block, &b, &err), &err);
    assert_int_equal(pd__block_meta(b)->n_profiles, 49);
    /* __name__ guessed from the sample types: the 30 heap profiles of the series
       share one series (same labels) */
    pd_matcher m[2];
    PD_ASSERT_OK(pd_matcher_init(&m[0], PD_MATCH_EQ, "__name__", "heap", &err), &err);
    PD_ASSERT_OK(pd_matcher_init(&m[1], PD_MATCH_EQ, "job", "demo", &err), &err);
    uint32_t *ids;
    size_t nid;
    PD_ASSERT_OK(pd__block_select(b, m, 2, &ids, &nid, &err), &err);
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

static void load_file(const char *path, uint8_t **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *data = malloc((size_t)n + 1);
    assert_non_null(*data);
    assert_int_equal(fread(*data, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
}

static void flip(const char *path, long off)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, off, SEEK_SET);
    int c = fgetc(f);
    fseek(f, off, SEEK_SET);
    fputc(c ^ 0x10, f);
    fclose(f);
}

static long fsize(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (long)st.st_size;
}

/* tsdb check walks the WAL too: a store written by the real engine checks
 * clean; a torn last record is reported but is no corruption (exit 0); a
 * flipped byte inside a record is (exit 1). */
static void test_check_wal(void **state)
{
    char tmp[] = "/tmp/pd_test_cli_wal_XXXXXX";
    assert_non_null(mkdtemp(tmp));
    pd_storage_options o = pd_storage_options_default();
    o.path = tmp;
    o.maintenance_ms = -1;
    o.retention_ms = -1; /* synthetic times from 1970: no lower time bound */
    pd_storage *st;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_open(&o, &st, &err), &err);
    pd_labels ls;
    pd_labels_init(&ls);
    assert_int_equal(pd_labels_set(&ls, "__name__", "heap", NULL), 0);
    for (int i = 1; i <= 5; i++) {
        char path[512];
        snprintf(path, sizeof path, PD_TESTDATA "/pprof/go-demo-series/heap-%04d.pb.gz", i);
        uint8_t *body;
        size_t len;
        load_file(path, &body, &len);
        pd_profile p;
        PD_ASSERT_OK(pd_profile_decode(&p, body, len, NULL, &err), &err);
        PD_ASSERT_OK(pd_storage_append(st, &ls, i * 1000, body, len, &p, &err), &err);
        pd_profile_release(&p);
        free(body);
    }
    pd_labels_release(&ls);
    pd_storage_close(st);
    const char *ck[] = {"tsdb", "check", tmp};
    assert_int_equal(run(3, ck), 0);
    /* the segment: find it */
    char seg[4600] = "";
    char wal[4200];
    snprintf(wal, sizeof wal, "%s/wal", tmp);
    DIR *d = opendir(wal);
    struct dirent *e;
    while ((e = readdir(d)))
        if (strlen(e->d_name) == 8)
            snprintf(seg, sizeof seg, "%s/%s", wal, e->d_name);
    closedir(d);
    assert_true(seg[0]);
    long len = fsize(seg);
    /* the last record cut short after it was fsync'd (the close wrote
       wal/synced): lost acknowledged records, not a torn append (issue 27) */
    assert_int_equal(truncate(seg, len - 7), 0);
    assert_int_equal(run(3, ck), 1);
    /* a torn tail: a crash before the marker saw the last append */
    char mk[4300];
    snprintf(mk, sizeof mk, "%s/synced", wal);
    assert_int_equal(unlink(mk), 0);
    assert_int_equal(run(3, ck), 0);
    /* a flipped byte in the middle of the first records */
    flip(seg, 8 + 60);
    assert_int_equal(run(3, ck), 1);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    assert_int_equal(system(cmd), 0);
}

/* Issue 19 "an old push is acknowledged, then deleted": an import of
 * profiles older than the retention the server keeps would be deleted by
 * the server's next retention round; it is refused, naming the flag. Every
 * test profile is older than 1 s, so a retention of 1s refuses them all;
 * a profile dated in the future past the grace is refused too. */
static void test_import_outside_retention_refused(void **state)
{
    char tmp[] = "/tmp/pd_test_cli_XXXXXX";
    assert_non_null(mkdtemp(tmp));
    const char *imp[] = {"tsdb",
                         "import",
                         "--storage.path",
                         tmp,
                         "--storage.retention.time=1s",
                         PD_TESTDATA "/pprof/go-demo-once"};
    assert_int_equal(run(6, imp), 1); /* no profiles imported */
    DIR *d = opendir(tmp);
    struct dirent *e;
    size_t n = 0;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.' && strcmp(e->d_name, "lock") != 0;
    closedir(d);
    assert_int_equal(n, 0); /* no block written (the store's lock file only) */
    /* inside a wide retention, the same files are imported */
    const char *ok[] = {"tsdb",
                        "import",
                        "--storage.path",
                        tmp,
                        "--storage.retention.time=100y",
                        PD_TESTDATA "/pprof/go-demo-once"};
    assert_int_equal(run(6, ok), 0);
    /* the bound's arithmetic, for a fixed clock */
    pd_storage_options o = pd_storage_options_default();
    pd_err err = {{0}};
    int64_t now = 1800000000000;
    PD_ASSERT_OK(pd_storage_options_check_time(&o, now, now, &err), &err);
    PD_ASSERT_OK(pd_storage_options_check_time(&o, now, now + 10 * 60 * 1000, &err), &err);
    assert_int_equal(pd_storage_options_check_time(&o, now, now + 10 * 60 * 1000 + 1, &err),
                     PD_EOUTOFBOUNDS);
    assert_non_null(strstr(err.msg, "--storage.future-grace=10m"));
    int64_t r = 15ll * 24 * 3600 * 1000;
    PD_ASSERT_OK(pd_storage_options_check_time(&o, now, now - r, &err), &err);
    assert_int_equal(pd_storage_options_check_time(&o, now, now - r - 1, &err), PD_EOUTOFBOUNDS);
    assert_non_null(strstr(err.msg, "--storage.retention.time=15d"));
    o.retention_ms = -1;
    o.future_grace_ms = -1;
    PD_ASSERT_OK(pd_storage_options_check_time(&o, now, INT64_MIN, &err), &err);
    PD_ASSERT_OK(pd_storage_options_check_time(&o, now, INT64_MAX, &err), &err);
    char cmd[256];
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
        cmocka_unit_test(test_check_wal),
        cmocka_unit_test(test_import_outside_retention_refused),
        cmocka_unit_test(test_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
