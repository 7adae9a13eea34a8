/* Unit tests of src/ingest/perf_script.c: the header and frame grammar of
 * `perf script` text (layouts perf prints: default, PID/TID, [CPU], event
 * modifiers, no period, no callchain), the pprof it makes (mappings,
 * addresses, functions, labels, values), errors with line numbers, and caps.
 * The conversion of real `perf record` output is checked end to end by
 * perf_e2e.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include "../pd_test.h"

#include "ingest_test.h"

static void conv(const char *text, const pd_ingest_opts *o, pd_profile *p)
{
    pd_err err = {{0}};
    int rc = pd_ingest_perf_script(text, strlen(text), o, p, &err);
    if (rc)
        fail_msg("perf script: %d %s", rc, err.msg);
}

static void expect_error(const char *text, const pd_ingest_opts *o, int code,
                         const char *msg_prefix)
{
    pd_profile p;
    pd_err err = {{0}};
    int rc = pd_ingest_perf_script(text, strlen(text), o, &p, &err);
    if (rc != code)
        fail_msg("want %d, got %d (%s)", code, rc, err.msg);
    if (strncmp(err.msg, msg_prefix, strlen(msg_prefix)))
        fail_msg("want message starting '%s', got '%s'", msg_prefix, err.msg);
}

static const pd_pprof_mapping *mapping_named(const pd_profile *p, const char *file)
{
    for (size_t i = 0; i < p->n_mapping; i++)
        if (!strcmp(pd_profile_str(p, p->mapping[i].filename), file))
            return &p->mapping[i];
    return NULL;
}

/* Two records of one thread of "my prog" (a comm with a space), PID/TID and
 * CPU shown, event with modifiers, a C++ frame, an [unknown] symbol in a
 * known DSO, an [unknown] DSO, a deleted file. */
static const char two_records[] =
    "my prog  1234/1235 [003] 12345.500000:     250000 cpu-clock:uhH: \n"
    "\t    55d0c0a1b2c3 leaf_fn+0x1a (/usr/bin/my prog)\n"
    "\t    55d0c0a1b000 ns::Klass::method(int, char const*) const+0x10 (/usr/bin/my prog)\n"
    "\t    7f0000001000 [unknown] (/usr/lib/libfoo.so)\n"
    "\t    7f0000002000 dlopen_thing (/tmp/plugin.so (deleted))\n"
    "\t    7fdb385618a8 [unknown] ([unknown])\n"
    "\n"
    "my prog  1234/1235 [001] 12346.750000:     250000 cpu-clock:uhH: \n"
    "\t    55d0c0a1b2c3 leaf_fn+0x1a (/usr/bin/my prog)\n"
    "\t    55d0c0a1b000 ns::Klass::method(int, char const*) const+0x10 (/usr/bin/my prog)\n"
    "\t    7f0000001000 [unknown] (/usr/lib/libfoo.so)\n"
    "\t    7f0000002000 dlopen_thing (/tmp/plugin.so (deleted))\n"
    "\t    7fdb385618a8 [unknown] ([unknown])\n"
    "\n";

static void test_records(void **state)
{
    (void)state;
    pd_profile p;
    conv(two_records, NULL, &p);
    /* sample types and period from the first header */
    assert_int_equal(p.n_sample_type, 2);
    assert_string_equal(pd_profile_str(&p, p.sample_type[0].type), "samples");
    assert_string_equal(pd_profile_str(&p, p.sample_type[1].type), "cpu");
    assert_string_equal(pd_profile_str(&p, p.sample_type[1].unit), "nanoseconds");
    assert_string_equal(pd_profile_str(&p, p.period_type.type), "cpu");
    assert_int_equal(p.period, 250000);
    assert_int_equal(p.duration_nanos, 1250000000); /* 12346.75 - 12345.5 s */
    /* equal stack + labels: one sample, values added (the CPU is not a label) */
    assert_int_equal(p.n_sample, 1);
    const pd_pprof_sample *s = &p.sample[0];
    assert_int_equal(s->value[0], 2);
    assert_int_equal(s->value[1], 500000);
    char buf[1024];
    assert_string_equal(stack_str(&p, s, buf, sizeof buf),
                        "0x7fdb385618a8;dlopen_thing;0x7f0000001000;"
                        "ns::Klass::method(int, char const*) const;leaf_fn");
    assert_string_equal(pd_profile_str(&p, find_label(&p, s, "comm")->str), "my prog");
    assert_int_equal(find_label(&p, s, "pid")->num, 1234);
    assert_int_equal(find_label(&p, s, "tid")->num, 1235);
    /* real addresses; mappings by DSO; [unknown] DSO has none */
    const pd_pprof_location *leaf = pd_profile_location(&p, s->location_id[0]);
    assert_int_equal(leaf->address, 0x55d0c0a1b2c3);
    const pd_pprof_mapping *bin = pd_profile_mapping(&p, leaf->mapping_id);
    assert_string_equal(pd_profile_str(&p, bin->filename), "/usr/bin/my prog");
    assert_int_equal(bin->memory_limit, 0x55d0c0a1b2c4); /* one past the highest address */
    assert_true(bin->has_functions);
    assert_int_equal(p.n_mapping, 3);
    assert_non_null(mapping_named(&p, "/tmp/plugin.so (deleted)"));
    assert_false(mapping_named(&p, "/usr/lib/libfoo.so")->has_functions);
    const pd_pprof_location *anon = pd_profile_location(&p, s->location_id[4]);
    assert_int_equal(anon->mapping_id, 0);
    assert_int_equal(anon->n_line, 0);
    assert_int_equal(p.n_location, 5);
    assert_int_equal(p.n_function, 3);
    pd_err why = {{0}};
    if (!roundtrip_equal(&p, &why))
        fail_msg("roundtrip: %s", why.msg);
    pd_profile_release(&p);
}

static void test_header_layouts(void **state)
{
    (void)state;
    pd_profile p;
    /* perf's default: lone TID, no CPU; CRLF; no blank line between records;
     * records of two threads stay apart by their labels */
    conv("hot  9404  2567.216925:    1001001 cpu-clock: \r\n"
         "\t            115a hot_leaf+0x11 (/tmp/hot)\r\n"
         "\t            11e2 main+0x21 (/tmp/hot)\r\n"
         "hot  9405  2567.217925:    1001001 cpu-clock: \r\n"
         "\t            115a hot_leaf+0x11 (/tmp/hot)\r\n"
         "\t            11e2 main+0x21 (/tmp/hot)\r\n",
         NULL, &p);
    assert_int_equal(p.n_sample, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_null(find_label(&p, &p.sample[i], "pid"));
        assert_string_equal(pd_profile_str(&p, find_label(&p, &p.sample[i], "comm")->str), "hot");
    }
    assert_int_equal(find_label(&p, &p.sample[0], "tid")->num +
                         find_label(&p, &p.sample[1], "tid")->num,
                     9404 + 9405);
    assert_int_equal(p.period, 1001001);
    pd_profile_release(&p);

    /* no period: one sample type; a hardware event with modifiers */
    conv("prog 77 [000] 1.000000: cycles:ppp: \n\t 401000 f (/bin/prog)\n", NULL, &p);
    assert_int_equal(p.n_sample_type, 1);
    assert_string_equal(pd_profile_str(&p, p.sample_type[0].type), "samples");
    pd_profile_release(&p);
    conv("prog 77 [000] 1.000000: 12345 cycles:ppp: \n\t 401000 f (/bin/prog)\n", NULL, &p);
    assert_int_equal(p.n_sample_type, 2);
    assert_string_equal(pd_profile_str(&p, p.sample_type[1].type), "cycles");
    assert_string_equal(pd_profile_str(&p, p.sample_type[1].unit), "count");
    assert_int_equal(p.sample[0].value[1], 12345);
    pd_profile_release(&p);
    /* a tracepoint keeps its subsystem; its trailing fields are ignored */
    conv("prog 77 [000] 1.000000: 1 sched:sched_switch: prev_comm=prog prev_pid=77 ==> next\n"
         "\t ffffffff81000000 __schedule+0x1 ([kernel.kallsyms])\n",
         NULL, &p);
    assert_string_equal(pd_profile_str(&p, p.sample_type[1].type), "sched:sched_switch");
    assert_int_equal(p.sample[0].n_location, 1);
    pd_profile_release(&p);

    /* no callchain: perf pads the comm and prints the one frame on the header */
    conv("             prog  1234 [000]   100.000001:    1001001 cpu-clock:      4005d6 "
         "main+0x10 (/bin/prog)\n"
         "             prog  1234 [000]   100.001002:    1001001 cpu-clock:      4005e0 "
         "main+0x1a (/bin/prog)\n",
         NULL, &p);
    assert_int_equal(p.n_sample, 2);
    char buf[256];
    assert_string_equal(stack_str(&p, &p.sample[0], buf, sizeof buf), "main");
    assert_string_equal(pd_profile_str(&p, find_label(&p, &p.sample[0], "comm")->str), "prog");
    assert_int_equal(p.n_location, 2); /* two addresses, one function */
    assert_int_equal(p.n_function, 1);
    pd_profile_release(&p);

    /* -F +srcline: a FILE:LINE line after a frame sets the function's file
     * and the line number; ??:0 sets neither */
    conv("hot 9 1.0: 10 cpu-clock: \n"
         "\t 116d hot_leaf+0x24 (/tmp/hot)\n"
         "  hot.c:4\n"
         "\t 11dd middle+0x1c (/tmp/hot)\n"
         "\t 2724a __libc_start_call_main+0x7a (/lib/libc.so.6)\n"
         "  ??:0\n"
         "\t ffffffff81000130 entry_SYSCALL_64+0x76 ([kernel.kallsyms])\n"
         "  [kernel.kallsyms][ffffffff81000130]\n"
         "\t 1234 inl (/tmp/hot)\n"
         "  hot.c:9 (discriminator 2)\n"
         "\t 1ab78 _dl_start_user+0x0 (/lib/ld.so)\n"
         "  :0\n"
         "\n",
         NULL, &p);
    assert_int_equal(p.sample[0].n_location, 6);
    const pd_pprof_location *l0 = pd_profile_location(&p, p.sample[0].location_id[0]);
    const pd_pprof_location *l1 = pd_profile_location(&p, p.sample[0].location_id[1]);
    const pd_pprof_location *l2 = pd_profile_location(&p, p.sample[0].location_id[2]);
    assert_int_equal(l0->line[0].line, 4);
    assert_string_equal(
        pd_profile_str(&p, pd_profile_function(&p, l0->line[0].function_id)->filename), "hot.c");
    assert_int_equal(l1->line[0].line, 0);
    assert_int_equal(l2->line[0].line, 0);
    assert_string_equal(
        pd_profile_str(&p, pd_profile_function(&p, l2->line[0].function_id)->filename), "");
    const pd_pprof_location *l3 = pd_profile_location(&p, p.sample[0].location_id[3]);
    const pd_pprof_location *l4 = pd_profile_location(&p, p.sample[0].location_id[4]);
    assert_int_equal(l3->line[0].line, 0);
    assert_int_equal(l4->line[0].line, 9);
    pd_profile_release(&p);

    /* side-band records are skipped; empty input is an empty profile */
    conv("perf 1 1.000000: PERF_RECORD_MMAP2 1/1: [0x400000(0x1000) @ 0 fd:01 1 0]: r-xp /bin/x\n"
         "x 1 1.500000: 10 cpu-clock: \n\t 401000 f (/bin/x)\n",
         NULL, &p);
    assert_int_equal(p.n_sample, 1);
    pd_profile_release(&p);
    conv("", NULL, &p);
    assert_int_equal(p.n_sample, 0);
    assert_int_equal(p.n_sample_type, 1);
    pd_profile_release(&p);
}

static void test_malformed(void **state)
{
    (void)state;
    expect_error("\t 401000 f (/bin/x)\n", NULL, PD_EPARSE, "line 1: frame line outside a sample");
    expect_error("x 1 1.5: 10 cpu-clock: \n\t 401000 f (/bin/x)\n\tnot-hex f (/bin/x)\n", NULL,
                 PD_EPARSE, "line 3: not a frame line");
    expect_error("x 1 1.5: 10 cpu-clock: \n\n\n\nthis is not perf output\n", NULL, PD_EPARSE,
                 "line 5: not a perf script sample header");
    expect_error("x 1 1.5: 10 cpu-clock: \n\nx 1 1.6: 10 cycles: \n", NULL, PD_EPARSE,
                 "line 3: event 'cycles' differs from the first sample's 'cpu-clock'");
    expect_error("x 1 1.5: 10 cpu-clock: \n\nx 1 1.6: cpu-clock: \n", NULL, PD_EPARSE,
                 "line 3: the sample has no period");
    /* a srcline-like line where no frame precedes it is not a srcline */
    expect_error("x 1 1.5: 10 cpu-clock: \n\n  hot.c:4\n", NULL, PD_EPARSE,
                 "line 3: not a perf script sample header");
    expect_error("x 1 1.5: 10 \n", NULL, PD_EPARSE, "line 1: no event name after the period");
    expect_error("x 1 1.5: 10 cpu-clock\n", NULL, PD_EPARSE, "line 1: 'cpu-clock' is not an event");
    static const char nul[] = "x 1 1.5: 10 cpu-clock: \n\t 401000 f\0 (/bin/x)\n";
    pd_profile p;
    pd_err err = {{0}};
    assert_int_equal(pd_ingest_perf_script(nul, sizeof nul - 1, NULL, &p, &err), PD_EPARSE);
    assert_string_equal(err.msg, "line 2: NUL byte in text");
}

static void test_caps(void **state)
{
    (void)state;
    const char *rec = "x 1 1.5: 10 cpu-clock: \n\t 3 c (/b)\n\t 2 b (/b)\n\t 1 a (/b)\n\n";
    pd_ingest_opts o = {.lim = {.max_stack_depth = 2}};
    expect_error(rec, &o, PD_ETOOBIG,
                 "line 4: stack of the sample at line 1 is deeper than "
                 "max_stack_depth=2");
    o = (pd_ingest_opts){.lim = {.max_frames = 2}};
    expect_error(rec, &o, PD_ETOOBIG, "line 4: more than max_frames=2");
    o = (pd_ingest_opts){.lim = {.max_lines = 3}};
    expect_error(rec, &o, PD_ETOOBIG, "line 4: more than max_lines=3");
    o = (pd_ingest_opts){.lim = {.max_line_bytes = 12}};
    expect_error(rec, &o, PD_ETOOBIG, "line 1: 23 bytes exceed max_line_bytes=12");
    o = (pd_ingest_opts){.lim = {.max_samples = 1}};
    expect_error("x 1 1.5: 10 cpu-clock: \n\t 1 a (/b)\n\nx 1 1.6: 10 cpu-clock: \n\t 2 b (/b)\n",
                 &o, PD_ETOOBIG, "line 4: more than max_samples=1");
    /* exactly at the caps */
    pd_profile p;
    pd_err err = {{0}};
    o = (pd_ingest_opts){.lim = {.max_stack_depth = 3, .max_frames = 3, .max_lines = 5}};
    PD_ASSERT_OK(pd_ingest_perf_script(rec, strlen(rec), &o, &p, &err), &err);
    char buf[64];
    assert_string_equal(stack_str(&p, &p.sample[0], buf, sizeof buf), "a;b;c");
    pd_profile_release(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records),
        cmocka_unit_test(test_header_layouts),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_caps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
