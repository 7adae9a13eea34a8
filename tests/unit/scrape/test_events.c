/* Tests of src/scrape/events.c (issue 18): events written to their file
 * come back after a restart (ids, labels, error, last profile); a torn
 * tail and a flipped byte are dropped at open and the file truncated there;
 * a bad header sets the file aside; the file is compacted past twice the
 * ring; labels are JSON-escaped. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/metrics.h"
#include "scrape/scrape_int.h"

static char dir[256], path[300];

static int setup(void **state)
{
    (void)state;
    /* tmpfs when there is one: the compaction test appends (and fdatasyncs) 8,202 events */
    snprintf(dir, sizeof dir, "%s/pd-test-events-XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/events.log", dir);
    pd_metrics_reset();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char p[400];
    const char *names[] = {"events.log", "events.log.tmp", "events.log.corrupt"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
    return 0;
}

static void add(pd__events *ev, int i)
{
    pd_labels ls;
    pd_labels_init(&ls);
    char inst[64];
    snprintf(inst, sizeof inst, "api-%d:6060", i);
    assert_int_equal(pd_labels_set(&ls, "job", "api \"x\"", NULL), 0);
    assert_int_equal(pd_labels_set(&ls, "instance", inst, NULL), 0);
    pd__events_add(ev, i % 2 ? "target_down" : "burst_started", 1000 + i, "api \"x\"", &ls,
                   i % 2 ? "connection refused" : "growth", "a \\ message", 900 + i, "heap",
                   i % 2 ? "Failed to connect" : NULL);
    pd_labels_release(&ls);
}

static json_t *all(pd__events *ev)
{
    pd_buf b;
    pd_buf_init(&b, 0);
    assert_int_equal(pd__events_json(ev, 0, INT64_MAX, NULL, &b), 0);
    json_error_t je;
    json_t *j = json_loadb(b.data, b.len, 0, &je);
    if (!j)
        fail_msg("not JSON: %s: %.*s", je.text, (int)b.len, b.data);
    pd_buf_release(&b);
    return j;
}

static pd__events *reopen(void)
{
    pd__events *ev;
    pd_err e;
    pd_err_clear(&e);
    assert_int_equal(pd__events_new(&ev), 0);
    if (pd__events_open(ev, path, &e))
        fail_msg("open: %s", e.msg);
    return ev;
}

static off_t fsize(void)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_size;
}

static void test_restart_keeps(void **state)
{
    (void)state;
    pd__events *ev = reopen(); /* a new file */
    assert_int_equal(fsize(), 16);
    for (int i = 1; i <= 3; i++)
        add(ev, i);
    json_t *before = all(ev);
    pd__events_free(ev);
    ev = reopen();
    json_t *after = all(ev);
    assert_true(json_equal(before, after));
    assert_int_equal(json_array_size(after), 3);
    json_t *e = json_array_get(after, 0);
    assert_int_equal(json_integer_value(json_object_get(e, "id")), 1);
    assert_string_equal(json_string_value(json_object_get(e, "kind")), "target_down");
    assert_string_equal(json_string_value(json_object_get(e, "job")), "api \"x\"");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(e, "labels"), "instance")), "api-1:6060");
    assert_string_equal(json_string_value(json_object_get(e, "error")), "Failed to connect");
    assert_int_equal(json_integer_value(json_object_get(e, "lastProfile")), 901);
    assert_string_equal(json_string_value(json_object_get(e, "message")), "a \\ message");
    assert_null(json_object_get(json_array_get(after, 1), "error")); /* burst_started */
    add(ev, 4);                                                      /* ids go on */
    json_t *more = all(ev);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(more, 3), "id")), 4);
    json_decref(before);
    json_decref(after);
    json_decref(more);
    pd__events_free(ev);
}

static void test_torn_tail_and_flipped_byte(void **state)
{
    (void)state;
    pd__events *ev = reopen();
    for (int i = 1; i <= 3; i++)
        add(ev, i);
    pd__events_free(ev);
    off_t good = fsize();
    FILE *f = fopen(path, "ab");
    assert_non_null(f);
    fwrite("\x40\x00\x00\x00\x01\x02\x03", 1, 7, f); /* half a record */
    fclose(f);
    ev = reopen();
    json_t *j = all(ev);
    assert_int_equal(json_array_size(j), 3);
    json_decref(j);
    assert_int_equal(fsize(), good); /* truncated at the torn record */
    add(ev, 4);                      /* and appends after it */
    pd__events_free(ev);
    ev = reopen();
    j = all(ev);
    assert_int_equal(json_array_size(j), 4);
    json_decref(j);
    pd__events_free(ev);

    /* a flipped byte in the second record's payload: only the first is kept */
    f = fopen(path, "r+b");
    assert_non_null(f);
    uint8_t h[8];
    assert_int_equal(fseek(f, 16, SEEK_SET), 0);
    assert_int_equal(fread(h, 1, 8, f), 8);
    long second = 16 + 8 + (long)(h[0] | h[1] << 8);
    assert_int_equal(fseek(f, second + 8 + 30, SEEK_SET), 0);
    int c = fgetc(f);
    assert_int_equal(fseek(f, second + 8 + 30, SEEK_SET), 0);
    fputc(c ^ 0x20, f);
    fclose(f);
    ev = reopen();
    j = all(ev);
    assert_int_equal(json_array_size(j), 1);
    json_decref(j);
    assert_int_equal(fsize(), second);
    pd__events_free(ev);
}

static void test_bad_header(void **state)
{
    (void)state;
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("not an events file at all", f);
    fclose(f);
    pd__events *ev = reopen();
    json_t *j = all(ev);
    assert_int_equal(json_array_size(j), 0);
    json_decref(j);
    char bad[400];
    snprintf(bad, sizeof bad, "%s.corrupt", path);
    struct stat st;
    assert_int_equal(stat(bad, &st), 0); /* set aside, not deleted */
    assert_int_equal(st.st_size, 25);
    assert_int_equal(fsize(), 16);
    pd__events_free(ev);
}

static void test_compaction(void **state)
{
    (void)state;
    pd__events *ev = reopen();
    int n = 2 * PD_ADAPTIVE_MAX_EVENTS + 10;
    for (int i = 1; i <= n; i++)
        add(ev, i);
    pd__events_free(ev);
    /* rewritten once past 2 x the ring: the ring plus what came after */
    ev = reopen();
    json_t *j = all(ev);
    assert_int_equal(json_array_size(j), PD_ADAPTIVE_MAX_EVENTS);
    assert_int_equal(
        json_integer_value(json_object_get(json_array_get(j, PD_ADAPTIVE_MAX_EVENTS - 1), "id")),
        n);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(j, 0), "id")),
                     n - PD_ADAPTIVE_MAX_EVENTS + 1);
    json_decref(j);
    assert_true(fsize() < (off_t)(PD_ADAPTIVE_MAX_EVENTS + 20) * 200);
    pd__events_free(ev);
}

static void test_memory_only(void **state)
{
    (void)state;
    pd__events *ev;
    assert_int_equal(pd__events_new(&ev), 0);
    add(ev, 1);
    json_t *j = all(ev);
    assert_int_equal(json_array_size(j), 1);
    json_decref(j);
    pd__events_free(ev);
    assert_int_equal(access(path, F_OK), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_restart_keeps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_tail_and_flipped_byte, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_header, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compaction, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memory_only, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
