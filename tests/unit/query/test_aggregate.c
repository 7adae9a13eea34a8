/* Property tests of the merge pushed down into storage
 * (src/storage/tsdb/aggregate.c, pd_storage_aggregate, as pd_query_merge,
 * pd_query_diff and pd_query_merge_refs use it): on every real profile of
 * PD_TESTDATA/pprof, stored as several series, the pushed-down merge equals
 * the old merge — every profile read back one by one with
 * pd_storage_read_profile and folded into a pd_merge, computed here — for
 * every report (the merged profile's samples and header, top, flame graph,
 * folded, callgraph; a diff's top and flame graph) and with the options
 * (by=, focus/ignore/hide), in four stores of the same data:
 *   head      nothing cut (block duration < 0);
 *   blocks    every profile cut into blocks (a later profile of another
 *             series pushes the head past them);
 *   mixed     the older part in blocks, the newer in the head;
 *   compacted blocks, then compacted (checked: compactions > 0).
 * The stores walk their blocks on the default number of worker threads
 * (storage.h aggregate_workers); test_blocks_pool checks that 3 workers hand
 * over exactly the parts, in the same order, that 1 does (several blocks,
 * groups, deltas), and that a poll's or fn's error stops the workers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "query/query.h"

#ifndef PD_TESTDATA
#error "PD_TESTDATA must be defined"
#endif

#define T0 ((int64_t)1700000000000) /* ms: the first profile */
#define STEP 1000                   /* ms between profiles of a series */
#define DUR 10000                   /* block duration of the cutting stores, ms */

typedef struct input {
    char name[64];     /* __name__ */
    char instance[16]; /* instance label */
    int64_t ts;
    pd_buf body;
    pd_profile p;
} input;

static input *INPUTS;
static size_t N_INPUTS;
static int64_t T_END; /* newest input ts */
static int64_t NOW;   /* the stores' wall clock */

static int64_t test_clock(void)
{
    return NOW;
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

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every file of PD_TESTDATA/pprof/<dir>, sorted by name. */
static size_t list_dir(const char *dir, char **names, size_t cap)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/pprof/%s", PD_TESTDATA, dir);
    DIR *d = opendir(path);
    if (!d)
        fail_msg("cannot open %s", path);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < cap)
        if (strstr(e->d_name, ".pb.gz"))
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    return n;
}

/* The profile type of a file name: "heap-0003.pb.gz" -> "heap",
 * "profile.pb.gz" -> "cpu", "node-cpu.pb.gz" -> "node_cpu". */
static void type_of(const char *dir, const char *file, char *out, size_t n)
{
    char t[64];
    snprintf(t, sizeof t, "%s", file);
    char *dot = strstr(t, ".pb.gz");
    if (dot)
        *dot = 0;
    if (!strcmp(dir, "go-demo-series")) {
        char *dash = strchr(t, '-');
        if (dash)
            *dash = 0;
    }
    if (!strcmp(t, "profile"))
        snprintf(t, sizeof t, "cpu");
    for (char *c = t; *c; c++)
        if (*c == '-')
            *c = '_';
    snprintf(out, n, "%s", t);
}

/* Loads every real profile: those of one type are spread over three
 * instances ("i0".."i2") of one series name, STEP apart in time. */
static void load_inputs(void)
{
    static const char *dirs[] = {"go-demo-series", "go-demo-once", "node"};
    INPUTS = calloc(128, sizeof *INPUTS);
    int64_t per_type_ts[64] = {0};
    char types[64][64];
    size_t n_types = 0;
    for (size_t d = 0; d < 3; d++) {
        char *names[128];
        size_t n = list_dir(dirs[d], names, 128);
        for (size_t i = 0; i < n; i++) {
            assert_true(N_INPUTS < 128);
            input *in = &INPUTS[N_INPUTS++];
            type_of(dirs[d], names[i], in->name, sizeof in->name);
            size_t k = 0;
            while (k < n_types && strcmp(types[k], in->name))
                k++;
            if (k == n_types)
                snprintf(types[n_types++], sizeof types[0], "%s", in->name);
            snprintf(in->instance, sizeof in->instance, "i%d", (int)(per_type_ts[k] % 3));
            in->ts = T0 + per_type_ts[k]++ * STEP;
            if (in->ts > T_END)
                T_END = in->ts;
            char path[1024];
            snprintf(path, sizeof path, "%s/pprof/%s/%s", PD_TESTDATA, dirs[d], names[i]);
            pd_buf_init(&in->body, 0);
            read_file(path, &in->body);
            pd_err err = {{0}};
            if (pd_profile_decode(&in->p, (const uint8_t *)in->body.data, in->body.len, NULL, &err))
                fail_msg("decode %s: %s", path, err.msg);
            free(names[i]);
        }
    }
    assert_true(N_INPUTS >= 40);
}

/* ST_HEAD_SLICED: the head only, its walk sliced (lock released and taken
 * again, the part handed over) after every profile */
typedef enum { ST_HEAD, ST_BLOCKS, ST_MIXED, ST_COMPACTED, ST_HEAD_SLICED } store_kind;
static const char *KIND[] = {"head", "blocks", "mixed", "compacted", "head (sliced)"};

typedef struct fixture {
    char dir[256];
    pd_storage *st;
    store_kind kind;
} fixture;

static int g_workers; /* aggregate_workers of the stores opened (0: the default) */

static void open_store(fixture *fx, store_kind kind)
{
    fx->kind = kind;
    snprintf(fx->dir, sizeof fx->dir, "/tmp/pd_query_aggregate_XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    pd_storage_options o = pd_storage_options_default();
    o.path = fx->dir;
    o.fsync = PD_FSYNC_NEVER;
    o.clock_ms = test_clock;
    o.retention_ms = 7LL * 24 * 3600 * 1000;
    o.future_grace_ms = -1;
    o.maintenance_ms = -1; /* pd_storage_maintain below */
    o.block_duration_ms = kind == ST_HEAD || kind == ST_HEAD_SLICED ? -1 : DUR;
    if (kind == ST_HEAD_SLICED)
        o.aggregate_slice_ns = 1;
    o.aggregate_workers = g_workers;
    NOW = T_END + 1000;
    pd_err err = {{0}};
    if (pd_storage_open(&o, &fx->st, &err))
        fail_msg("open %s: %s", fx->dir, err.msg);
    for (size_t i = 0; i < N_INPUTS; i++) {
        input *in = &INPUTS[i];
        pd_labels ls;
        pd_labels_init(&ls);
        assert_int_equal(pd_labels_set(&ls, "__name__", in->name, NULL), 0);
        assert_int_equal(pd_labels_set(&ls, "instance", in->instance, NULL), 0);
        assert_int_equal(pd_labels_set(&ls, "job", "demo", NULL), 0);
        int rc = pd_storage_append(fx->st, &ls, in->ts, (const uint8_t *)in->body.data,
                                   in->body.len, &in->p, &err);
        pd_labels_release(&ls);
        if (rc)
            fail_msg("append %s: %s", in->name, err.msg);
    }
    if (kind == ST_BLOCKS || kind == ST_COMPACTED) {
        /* a profile of another series far enough ahead cuts every range */
        NOW = T_END + 100 * DUR;
        pd_labels ls;
        pd_labels_init(&ls);
        assert_int_equal(pd_labels_set(&ls, "__name__", "pusher", NULL), 0);
        int rc =
            pd_storage_append(fx->st, &ls, T_END + 50 * DUR, (const uint8_t *)INPUTS[0].body.data,
                              INPUTS[0].body.len, &INPUTS[0].p, &err);
        pd_labels_release(&ls);
        if (rc)
            fail_msg("append pusher: %s", err.msg);
    }
    /* the pool test keeps the blocks the cuts wrote (compaction would leave few) */
    for (int k = 0; k < 8 && kind != ST_HEAD && kind != ST_HEAD_SLICED && !g_workers; k++)
        if (pd_storage_maintain(fx->st, &err))
            fail_msg("maintain: %s", err.msg);
    pd_storage_stats s;
    pd_storage_stats_get(fx->st, &s);
    switch (kind) {
    case ST_HEAD:
    case ST_HEAD_SLICED:
        assert_int_equal(s.n_blocks, 0);
        break;
    case ST_BLOCKS:
        assert_true(s.n_blocks > 0);
        assert_int_equal(s.n_head_profiles, 1); /* the pusher */
        break;
    case ST_MIXED:
        assert_true(s.n_blocks > 0);
        assert_true(s.n_head_profiles > 0);
        break;
    case ST_COMPACTED:
        assert_true(s.n_compactions > 0);
        assert_int_equal(s.n_head_profiles, 1);
        break;
    }
}

static void close_store(fixture *fx)
{
    pd_storage_close(fx->st);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx->dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- the old merge: every profile read back and folded in one by one ---- */

static int old_add(pd_storage *st, pd_merge *m, const char *selector, int64_t from, int64_t to,
                   bool base, pd_err *err)
{
    pd_matcher *ms;
    size_t n;
    int rc = pd_selector_parse(selector, &ms, &n, err);
    if (rc)
        return rc;
    pd_series_set set;
    if ((rc = pd_storage_select(st, ms, n, from, to, &set, err)) == 0) {
        for (size_t i = 0; i < set.n && !rc; i++) {
            pd_points pts;
            if ((rc = pd_storage_read_points(st, set.v[i].ref, from, to, &pts, err)))
                break;
            for (size_t j = 0; j < pts.n && !rc; j++) {
                pd_profile p;
                if ((rc = pd_storage_read_profile(st, set.v[i].ref, pts.v[j].ts_ms, &p, NULL, err)))
                    break;
                rc = pd_merge_add(m, &p, &set.v[i].labels, base, "old", err);
                pd_profile_release(&p);
            }
            pd_points_release(&pts);
        }
        pd_series_set_release(&set);
    }
    pd_matchers_free(ms, n);
    return rc;
}

static int old_merge(pd_storage *st, const char *base_sel, const char *selector, int64_t from,
                     int64_t to, const pd_merge_options *o, pd_profile *out, pd_err *err)
{
    pd_merge *m;
    int rc = pd_merge_new(o, &m, err);
    if (rc)
        return rc;
    if (!(rc = old_add(st, m, selector, from, to, false, err)) &&
        (!base_sel || !(rc = old_add(st, m, base_sel, from, to, true, err))))
        rc = pd_merge_finish(m, out, err);
    pd_merge_free(m);
    return rc;
}

/* ---- comparing ---- */

/* One line per sample: frames (function name, file, line; mapping file and
 * address relative to the mapping), labels and values; lines sorted; then
 * the header. Ids and table order do not matter; the content does. */
static void canonical(const pd_profile *p, pd_buf *out)
{
    char **lines = calloc(p->n_sample + 1, sizeof *lines);
    for (size_t i = 0; i < p->n_sample; i++) {
        const pd_pprof_sample *s = &p->sample[i];
        pd_buf b;
        pd_buf_init(&b, 0);
        for (size_t k = 0; k < s->n_location; k++) {
            const pd_pprof_location *l = pd_profile_location(p, s->location_id[k]);
            assert_non_null(l);
            const pd_pprof_mapping *m = l->mapping_id ? pd_profile_mapping(p, l->mapping_id) : 0;
            pd_buf_printf(&b, "[%s+%" PRIx64 "", m ? pd_profile_str(p, m->filename) : "-",
                          m ? l->address - m->memory_start + m->file_offset : l->address);
            for (size_t q = 0; q < l->n_line; q++) {
                const pd_pprof_function *f = pd_profile_function(p, l->line[q].function_id);
                pd_buf_printf(&b, " %s:%s:%" PRId64, f ? pd_profile_str(p, f->name) : "",
                              f ? pd_profile_str(p, f->filename) : "", l->line[q].line);
            }
            pd_buf_puts(&b, "]");
        }
        char *labs[64];
        size_t nl = 0;
        for (size_t k = 0; k < s->n_label && nl < 64; k++) {
            char t[512];
            snprintf(t, sizeof t, "%s=%s/%" PRId64 "/%s", pd_profile_str(p, s->label[k].key),
                     pd_profile_str(p, s->label[k].str), s->label[k].num,
                     pd_profile_str(p, s->label[k].num_unit));
            labs[nl++] = strdup(t);
        }
        qsort(labs, nl, sizeof *labs, cmp_str);
        pd_buf_puts(&b, " {");
        for (size_t k = 0; k < nl; k++) {
            pd_buf_printf(&b, "%s%s", k ? "," : "", labs[k]);
            free(labs[k]);
        }
        pd_buf_puts(&b, "}");
        for (size_t v = 0; v < s->n_value; v++)
            pd_buf_printf(&b, " %" PRId64, s->value[v]);
        lines[i] = strdup(b.data ? b.data : "");
        pd_buf_release(&b);
    }
    qsort(lines, p->n_sample, sizeof *lines, cmp_str);
    for (size_t i = 0; i < p->n_sample; i++) {
        pd_buf_puts(out, lines[i]);
        pd_buf_putc(out, '\n');
        free(lines[i]);
    }
    free(lines);
    for (size_t t = 0; t < p->n_sample_type; t++)
        pd_buf_printf(out, "type %s/%s\n", pd_profile_str(p, p->sample_type[t].type),
                      pd_profile_str(p, p->sample_type[t].unit));
    pd_buf_printf(out, "period %s/%s %" PRId64 " time %" PRId64 " duration %" PRId64 "\n",
                  pd_profile_str(p, p->period_type.type), pd_profile_str(p, p->period_type.unit),
                  p->period, p->time_nanos, p->duration_nanos);
    for (size_t c = 0; c < p->n_comment; c++)
        pd_buf_printf(out, "comment %s\n", pd_profile_str(p, p->comment[c]));
    pd_buf_printf(out, "default %s doc %s drop %s keep %s\n",
                  pd_profile_str(p, p->default_sample_type), pd_profile_str(p, p->doc_url),
                  pd_profile_str(p, p->drop_frames), pd_profile_str(p, p->keep_frames));
}

/* b's lines sorted (DOT: the order of statements carries no meaning). */
static void sort_lines(pd_buf *b)
{
    if (!b->len)
        return;
    char *copy = strndup(b->data, b->len), *save = NULL;
    char *lines[65536];
    size_t n = 0;
    for (char *l = strtok_r(copy, "\n", &save); l && n < 65536; l = strtok_r(NULL, "\n", &save))
        lines[n++] = l;
    qsort(lines, n, sizeof *lines, cmp_str);
    pd_buf_reset(b);
    for (size_t i = 0; i < n; i++) {
        pd_buf_puts(b, lines[i]);
        pd_buf_putc(b, '\n');
    }
    free(copy);
}

static void same_text(const char *what, const pd_buf *a, const pd_buf *b)
{
    if (a->len != b->len || (a->len && memcmp(a->data, b->data, a->len))) {
        size_t i = 0;
        while (i < a->len && i < b->len && a->data[i] == b->data[i])
            i++;
        size_t from = i > 200 ? i - 200 : 0;
        fail_msg("%s: pushed-down merge differs from the one-by-one merge at byte %zu "
                 "(lengths %zu, %zu):\n--- pushed down ...\n%.400s\n--- one by one ...\n%.400s",
                 what, i, a->len, b->len, a->data ? a->data + from : "",
                 b->data ? b->data + from : "");
    }
}

/* Every report of a and b, for every sample type, compared. */
static void same_reports(const char *what, const pd_profile *a, const pd_profile *b, bool diff)
{
    pd_buf x, y;
    pd_buf_init(&x, 0);
    pd_buf_init(&y, 0);
    char w[512];
    canonical(a, &x);
    canonical(b, &y);
    snprintf(w, sizeof w, "%s: profile", what);
    same_text(w, &x, &y);
    assert_int_equal(a->n_sample_type, b->n_sample_type);
    for (size_t t = 0; t < a->n_sample_type; t++) {
        pd_report_options o = {.sample_index = t, .diff = diff};
        for (int r = 0; r < 4; r++) {
            pd_buf_reset(&x);
            pd_buf_reset(&y);
            int ra, rb;
            static const char *names[] = {"top", "flamegraph", "folded", "callgraph"};
            switch (r) {
            case 0:
                ra = pd_report_top_ex(a, &o, &x);
                rb = pd_report_top_ex(b, &o, &y);
                break;
            case 1:
                o.max_nodes = 200; /* the cut too */
                ra = pd_report_flamegraph_ex(a, &o, &x);
                rb = pd_report_flamegraph_ex(b, &o, &y);
                o.max_nodes = 0;
                break;
            case 2:
                ra = pd_report_folded(a, &o, &x);
                rb = pd_report_folded(b, &o, &y);
                break;
            default:
                o.max_nodes = 80;
                ra = pd_report_dot(a, &o, &x);
                rb = pd_report_dot(b, &o, &y);
                o.max_nodes = 0;
                sort_lines(&x);
                sort_lines(&y);
                break;
            }
            assert_int_equal(ra, 0);
            assert_int_equal(rb, 0);
            snprintf(w, sizeof w, "%s: %s of sample type %zu", what, names[r], t);
            same_text(w, &x, &y);
        }
    }
    pd_buf_release(&x);
    pd_buf_release(&y);
}

static const char *SELECTORS[] = {
    "heap",  "cpu",          "allocs",   "block",     "goroutine",
    "mutex", "threadcreate", "node_cpu", "node_heap", "heap{instance=~\"i[01]\"}",
};

static void check_merge(fixture *fx, const char *sel, const pd_merge_options *mo, int64_t from,
                        int64_t to)
{
    pd_profile a, b;
    pd_err err = {{0}};
    pd_query_side q = {.selector = sel, .mode = PD_QUERY_MODE_MERGE, .from = from, .to = to};
    pd_merge_stats stats;
    int ra = pd_query_merge(fx->st, &q, mo, &a, &stats, &err);
    if (ra)
        fail_msg("%s store, merge %s: %d %s", KIND[fx->kind], sel, ra, err.msg);
    int rb = old_merge(fx->st, NULL, sel, from, to, mo, &b, &err);
    if (rb)
        fail_msg("%s store, old merge %s: %d %s", KIND[fx->kind], sel, rb, err.msg);
    if (!strchr(sel, '{')) { /* every input counted once in the stats */
        size_t want = 0;
        for (size_t i = 0; i < N_INPUTS; i++)
            want += INPUTS[i].ts >= from && INPUTS[i].ts <= to && !strcmp(INPUTS[i].name, sel);
        assert_int_equal(stats.profiles, want);
    }
    char what[256];
    snprintf(what, sizeof what, "%s store, %s [%+" PRId64 ", %+" PRId64 "] by=%s focus=%s",
             KIND[fx->kind], sel, from - T0, to - T0, mo && mo->by ? mo->by : "(all)",
             mo && mo->focus ? mo->focus : "");
    same_reports(what, &a, &b, false);
    pd_profile_release(&a);
    pd_profile_release(&b);
}

static void check_store(store_kind kind)
{
    fixture fx;
    open_store(&fx, kind);
    int64_t all_to = T_END;
    for (size_t s = 0; s < sizeof SELECTORS / sizeof *SELECTORS; s++) {
        check_merge(&fx, SELECTORS[s], NULL, T0, all_to);
        /* a range starting and ending inside blocks */
        if (!strncmp(SELECTORS[s], "heap", 4) || !strcmp(SELECTORS[s], "cpu"))
            check_merge(&fx, SELECTORS[s], NULL, T0 + 3 * STEP, T0 + 17 * STEP);
    }
    /* options: labels by instance, and pprof's filters */
    pd_merge_options by = {.by = "instance"};
    check_merge(&fx, "heap", &by, T0, all_to);
    check_merge(&fx, "cpu", &by, T0, all_to);
    pd_merge_options none = {.by = ""};
    check_merge(&fx, "heap", &none, T0, all_to);
    pd_merge_options f = {.focus = "runtime", .ignore = "gc", .hide = "runtime\\.main"};
    check_merge(&fx, "heap", &f, T0, all_to);
    check_merge(&fx, "cpu", &f, T0, all_to);

    /* a diff: the second half against the first (pd_query_diff) */
    pd_query_side base = {
        .selector = "heap", .mode = PD_QUERY_MODE_MERGE, .from = T0, .to = T0 + 14 * STEP};
    pd_query_side cur = {
        .selector = "heap", .mode = PD_QUERY_MODE_MERGE, .from = T0 + 15 * STEP, .to = all_to};
    pd_profile a, b;
    pd_err err = {{0}};
    int rc = pd_query_diff(fx.st, &base, &cur, NULL, &a, NULL, &err);
    if (rc)
        fail_msg("diff: %s", err.msg);
    pd_merge *m;
    assert_int_equal(pd_merge_new(NULL, &m, &err), 0);
    assert_int_equal(old_add(fx.st, m, "heap", cur.from, cur.to, false, &err), 0);
    assert_int_equal(old_add(fx.st, m, "heap", base.from, base.to, true, &err), 0);
    assert_int_equal(pd_merge_finish(m, &b, &err), 0);
    pd_merge_free(m);
    char what[64];
    snprintf(what, sizeof what, "%s store, diff heap", KIND[kind]);
    same_reports(what, &a, &b, true);
    pd_profile_release(&a);
    pd_profile_release(&b);

    /* pd_query_merge_refs (the Grafana querier's path) over every heap series */
    pd_matcher *ms;
    size_t n;
    assert_int_equal(pd_selector_parse("heap", &ms, &n, &err), 0);
    pd_series_set set;
    assert_int_equal(pd_storage_select(fx.st, ms, n, T0, all_to, &set, &err), 0);
    pd_query_refs q = {.series = set.v, .n = set.n, .from = T0, .to = all_to};
    pd_merge_stats st;
    assert_int_equal(pd_query_merge_refs(fx.st, NULL, &q, NULL, &a, &st, &err), 0);
    size_t heaps = 0;
    for (size_t i = 0; i < N_INPUTS; i++)
        heaps += !strcmp(INPUTS[i].name, "heap");
    assert_int_equal(st.profiles, heaps); /* every input counted once */
    assert_int_equal(st.series, 3);
    assert_int_equal(old_merge(fx.st, NULL, "heap", T0, all_to, NULL, &b, &err), 0);
    snprintf(what, sizeof what, "%s store, merge_refs heap", KIND[kind]);
    same_reports(what, &a, &b, false);
    pd_profile_release(&a);
    pd_profile_release(&b);
    pd_series_set_release(&set);
    pd_matchers_free(ms, n);
    pd_storage_stats ss;
    pd_storage_stats_get(fx.st, &ss);
    if (kind == ST_HEAD_SLICED) /* the walks above were sliced, and still equal */
        assert_true(ss.n_aggregate_slices > 10);
    if (kind != ST_HEAD && kind != ST_HEAD_SLICED) { /* blocks' parts added pre-summed */
        assert_true(ss.n_aggregates_built >= ss.n_blocks);
        assert_true(ss.n_aggregate_records > 0);
    }
    close_store(&fx);
}

/* The top report's totals of a diff: base_total, new_total (one sample type). */
static void diff_totals(fixture *fx, const pd_query_side *base, const pd_query_side *cur,
                        const pd_merge_options *o, size_t t, double *bt, double *nt)
{
    pd_profile p;
    pd_err err = {{0}};
    int rc = pd_query_diff(fx->st, base, cur, o, &p, NULL, &err);
    if (rc)
        fail_msg("diff: %s", err.msg);
    pd_buf out;
    pd_buf_init(&out, 0);
    pd_report_options ro = {.sample_index = t, .diff = true};
    assert_int_equal(pd_report_top_ex(&p, &ro, &out), 0);
    json_error_t je;
    json_t *j = json_loadb(out.data, out.len, 0, &je);
    assert_non_null(j);
    *bt = (double)json_integer_value(json_object_get(j, "base_total"));
    *nt = (double)json_integer_value(json_object_get(j, "new_total"));
    json_decref(j);
    pd_buf_release(&out);
    pd_profile_release(&p);
}

/* The case: a diff of A = every heap profile (31) against B = one.
 * Summed (pprof's merge), A is 31 profiles' worth; with agg=avg each side
 * is its per-profile average, computed here from the raw profiles; with
 * normalize the new side's total is scaled to the base's. */
static void test_diff_avg(void **state)
{
    (void)state;
    fixture fx;
    open_store(&fx, ST_MIXED);
    size_t n_heap = 0, last = 0;
    for (size_t i = 0; i < N_INPUTS; i++)
        if (!strcmp(INPUTS[i].name, "heap")) {
            n_heap++;
            if (INPUTS[i].ts >= INPUTS[last].ts || strcmp(INPUTS[last].name, "heap"))
                last = i;
        }
    assert_int_equal(n_heap, 31);
    char sel_b[128];
    snprintf(sel_b, sizeof sel_b, "heap{instance=\"%s\"}", INPUTS[last].instance);
    pd_query_side a = {.selector = "heap", .mode = PD_QUERY_MODE_MERGE, .from = T0, .to = T_END};
    pd_query_side b = {.selector = sel_b,
                       .mode = PD_QUERY_MODE_MERGE,
                       .from = INPUTS[last].ts,
                       .to = INPUTS[last].ts};
    const pd_profile *pb = &INPUTS[last].p;
    for (size_t t = 0; t < pb->n_sample_type; t++) {
        double sum_a = 0, tot_b;
        int64_t tot[16];
        for (size_t i = 0; i < N_INPUTS; i++)
            if (!strcmp(INPUTS[i].name, "heap")) {
                pd_profile_totals(&INPUTS[i].p, tot);
                sum_a += (double)tot[t];
            }
        pd_profile_totals(pb, tot);
        tot_b = (double)tot[t];
        double bt, nt, slack = 0.5 * (double)(pb->n_sample + 64) * 4; /* rounding per sample */
        diff_totals(&fx, &a, &b, NULL, t, &bt, &nt);
        assert_true(fabs(bt - sum_a) < 1 && fabs(nt - tot_b) < 1); /* summed: 31 vs 1 */
        pd_merge_options avg = {.agg = PD_MERGE_AVG};
        diff_totals(&fx, &a, &b, &avg, t, &bt, &nt);
        if (fabs(bt - sum_a / 31) > slack || fabs(nt - tot_b) > slack)
            fail_msg("sample type %zu, avg: base %.0f new %.0f, want %.1f and %.0f", t, bt, nt,
                     sum_a / 31, tot_b);
        printf("sample type %zu: summed diff %+.1f%%, per-profile diff %+.1f%%\n", t,
               sum_a ? 100 * (tot_b - sum_a) / sum_a : 0, bt ? 100 * (nt - bt) / bt : 0);
        pd_merge_options norm = {.agg = PD_MERGE_AVG, .normalize = true};
        diff_totals(&fx, &a, &b, &norm, t, &bt, &nt);
        if (fabs(nt - bt) > slack)
            fail_msg("sample type %zu, normalize: base %.0f new %.0f", t, bt, nt);
    }
    close_store(&fx);
}

/* ---- the block walk on worker threads against the one-by-one walk ---- */

typedef struct recorder {
    pd_buf out;     /* every part: its pd_storage_agg_part, then canonical() */
    size_t n_fn;    /* fn calls */
    size_t fail_at; /* fn returns PD_EINVAL at this call (0: never) */
    size_t n_poll;
    size_t poll_fail_at; /* poll returns PD_ETIMEOUT at this call (0: never) */
} recorder;

static int record_part(void *ctx, const pd_storage_agg_part *part, const pd_profile *p, pd_err *err)
{
    recorder *r = ctx;
    if (++r->n_fn == r->fail_at)
        return pd_err_set(err, PD_EINVAL, "fn gave up");
    pd_buf_printf(
        &r->out, "part series=%zu n_series=%zu n_profiles=%zu [%" PRId64 ", %" PRId64 "]\n",
        part->series, part->n_series, part->n_profiles, part->min_ts - T0, part->max_ts - T0);
    canonical(p, &r->out);
    return 0;
}

static int record_poll(void *ctx, pd_err *err)
{
    recorder *r = ctx;
    if (++r->n_poll == r->poll_fail_at)
        return pd_err_set(err, PD_ETIMEOUT, "deadline");
    return 0;
}

/* Every aggregation of the store's series (each selector, all together and
 * by instance, plain and with deltas) recorded in order into r->out. */
static void record_all(fixture *fx, recorder *r)
{
    static const char *sels[] = {"heap", "cpu", "allocs", "goroutine", "{job=\"demo\"}"};
    pd_err err = {{0}};
    for (size_t k = 0; k < sizeof sels / sizeof *sels; k++) {
        pd_matcher *ms;
        size_t n;
        pd_series_set set;
        assert_int_equal(pd_selector_parse(sels[k], &ms, &n, &err), 0);
        assert_int_equal(pd_storage_select(fx->st, ms, n, T0, T_END, &set, &err), 0);
        uint64_t *refs = calloc(set.n + 1, sizeof *refs), *mask = calloc(set.n + 1, sizeof *mask);
        uint32_t *by = calloc(set.n + 1, sizeof *by);
        for (size_t i = 0; i < set.n; i++) {
            refs[i] = set.v[i].ref;
            by[i] = (uint32_t)(pd_labels_get(&set.v[i].labels, "instance")[1] - '0');
            mask[i] = i % 2 ? ~(uint64_t)0 : 0; /* every other series as deltas */
        }
        for (int g = 0; g < 2; g++) {
            pd_buf_printf(&r->out, "== %s %s\n", sels[k], g ? "by instance" : "all");
            size_t ns = 0;
            int rc = pd_storage_aggregate(fx->st, refs, g ? by : NULL, set.n, T0, T_END,
                                          record_part, record_poll, r, &ns, &err);
            if (rc)
                fail_msg("aggregate %s: %s", sels[k], err.msg);
            size_t nd = 0;
            pd_buf_printf(&r->out, "series %zu\n== deltas\n", ns);
            rc = pd_storage_aggregate_delta(fx->st, refs, g ? by : NULL, mask, set.n, T0 + 2 * STEP,
                                            T_END, record_part, record_poll, r, &ns, &nd, &err);
            if (rc)
                fail_msg("aggregate_delta %s: %s", sels[k], err.msg);
            pd_buf_printf(&r->out, "series %zu deltas %zu\n", ns, nd);
        }
        free(refs);
        free(mask);
        free(by);
        pd_series_set_release(&set);
        pd_matchers_free(ms, n);
    }
}

/* One aggregation of every series with r's failure points; its code. */
static int aggregate_all(fixture *fx, recorder *r, pd_err *err)
{
    pd_series_set set;
    assert_int_equal(pd_storage_select(fx->st, NULL, 0, T0, T_END, &set, err), 0);
    uint64_t *refs = calloc(set.n + 1, sizeof *refs);
    uint32_t *by = calloc(set.n + 1, sizeof *by);
    for (size_t i = 0; i < set.n; i++) {
        refs[i] = set.v[i].ref;
        by[i] = (uint32_t)i; /* each series alone: many units per block */
    }
    int rc = pd_storage_aggregate(fx->st, refs, by, set.n, T0, T_END, record_part, record_poll, r,
                                  NULL, err);
    free(refs);
    free(by);
    pd_series_set_release(&set);
    return rc;
}

/* Closes fx's store and opens its directory again with `workers` threads
 * (the same blocks, ids and head: the parts' order is the same). */
static void reopen(fixture *fx, int workers)
{
    pd_storage_close(fx->st);
    pd_storage_options o = pd_storage_options_default();
    o.path = fx->dir;
    o.fsync = PD_FSYNC_NEVER;
    o.clock_ms = test_clock;
    o.retention_ms = 7LL * 24 * 3600 * 1000;
    o.future_grace_ms = -1;
    o.maintenance_ms = -1;
    o.block_duration_ms = DUR;
    o.aggregate_workers = workers;
    pd_err err = {{0}};
    if (pd_storage_open(&o, &fx->st, &err))
        fail_msg("reopen %s: %s", fx->dir, err.msg);
}

static void check_pool(store_kind kind)
{
    recorder one = {0}, three = {0};
    pd_buf_init(&one.out, 0);
    pd_buf_init(&three.out, 0);
    fixture fx;
    pd_storage_stats ss;
    g_workers = 1;
    open_store(&fx, kind);
    pd_storage_stats_get(fx.st, &ss);
    printf("%s store: %llu blocks, %llu head profiles\n", KIND[kind],
           (unsigned long long)ss.n_blocks, (unsigned long long)ss.n_head_profiles);
    assert_true(ss.n_blocks >= 3);
    reopen(&fx, 1); /* both recordings after an open: the head replayed alike */
    record_all(&fx, &one);
    pd_storage_stats_get(fx.st, &ss);
    assert_int_equal(ss.n_aggregate_parallel, 0);
    recorder r1 = {0};
    pd_buf_init(&r1.out, 0);
    pd_err err = {{0}};
    assert_int_equal(aggregate_all(&fx, &r1, &err), 0);
    reopen(&fx, 3);
    record_all(&fx, &three);
    pd_storage_stats_get(fx.st, &ss);
    assert_true(ss.n_aggregate_parallel >= 10); /* the walks above ran on the pool */
    same_text(KIND[kind], &one.out, &three.out);
    assert_true(one.out.len > 10000);

    /* each series alone (many units per block): the same parts in order */
    recorder r = {0};
    pd_buf_init(&r.out, 0);
    assert_int_equal(aggregate_all(&fx, &r, &err), 0);
    same_text("each series alone", &r1.out, &r.out);
    printf("each series alone: %zu parts\n", r.n_fn);
    assert_true(r.n_fn > 12); /* more parts than blocks: a unit per series and block */
    pd_buf_release(&r.out);
    pd_buf_release(&r1.out);

    /* errors stop the walk and are returned: fn's, at its 3rd part */
    r = (recorder){.fail_at = 3};
    pd_buf_init(&r.out, 0);
    assert_int_equal(aggregate_all(&fx, &r, &err), PD_EINVAL);
    assert_string_equal(err.msg, "fn gave up");
    assert_int_equal(r.n_fn, 3);
    pd_buf_release(&r.out);
    /* poll's (a deadline), at its 4th call: no part handed over after it
       (the pool polls after each unit handed over and while it waits) */
    r = (recorder){.poll_fail_at = 4};
    pd_buf_init(&r.out, 0);
    assert_int_equal(aggregate_all(&fx, &r, &err), PD_ETIMEOUT);
    assert_string_equal(err.msg, "deadline");
    assert_true(r.n_fn < 4);
    pd_buf_release(&r.out);
    close_store(&fx);
    g_workers = 0;
    pd_buf_release(&one.out);
    pd_buf_release(&three.out);
}

static void test_blocks_pool(void **state)
{
    (void)state;
    check_pool(ST_BLOCKS);
    check_pool(ST_MIXED);
}

static void test_head(void **state)
{
    (void)state;
    check_store(ST_HEAD);
}
static void test_head_sliced(void **state)
{
    (void)state;
    check_store(ST_HEAD_SLICED);
}
static void test_blocks(void **state)
{
    (void)state;
    check_store(ST_BLOCKS);
}
static void test_mixed(void **state)
{
    (void)state;
    check_store(ST_MIXED);
}
static void test_compacted(void **state)
{
    (void)state;
    check_store(ST_COMPACTED);
}

/* ---- the head's aggregates (sealed groups' sums; issue 35 item 2) ----
 *
 * The same 3 x HG_N profiles in two head-only stores: appended in time
 * order (each series' sealed groups of 32 get a sum: merges add it instead
 * of decoding the group) and in a shuffled order (no group in time order:
 * no sum, every profile decoded). Every answer must be the same: every
 * part of pd_storage_aggregate and _delta (every other series as deltas —
 * a series summed as is in a delta aggregation uses sums inside its window)
 * recorded part by part, and pd_query_merge's reports with deltas off and
 * on (go's heap profiles cycled: alloc_* drop at each wrap, a reset), over
 * the whole range and over ranges that cut a group in the middle. */

#define HG_N 100 /* profiles per series: 3 sealed groups of 32 and an open one */

static void open_head_groups(fixture *fx, bool shuffled)
{
    static const char *inst[] = {"i0", "i1", "i2"};
    input *heaps[16], *cpus[16];
    size_t nh = 0, nc = 0;
    for (size_t i = 0; i < N_INPUTS; i++) {
        if (!strcmp(INPUTS[i].name, "heap") && nh < 16)
            heaps[nh++] = &INPUTS[i];
        if (!strcmp(INPUTS[i].name, "cpu") && nc < 16)
            cpus[nc++] = &INPUTS[i];
    }
    assert_true(nh >= 3 && nc >= 3);
    fx->kind = ST_HEAD;
    snprintf(fx->dir, sizeof fx->dir, "/tmp/pd_query_aggregate_XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    pd_storage_options o = pd_storage_options_default();
    o.path = fx->dir;
    o.fsync = PD_FSYNC_NEVER;
    o.clock_ms = test_clock;
    o.retention_ms = 7LL * 24 * 3600 * 1000;
    o.future_grace_ms = -1;
    o.maintenance_ms = -1;
    o.block_duration_ms = -1;
    NOW = T0 + (HG_N + 10) * STEP;
    pd_err err = {{0}};
    if (pd_storage_open(&o, &fx->st, &err))
        fail_msg("open %s: %s", fx->dir, err.msg);
    /* order: 4 series (3 heap, 1 cpu) x HG_N, series-interleaved in time;
       shuffled: a fixed permutation (k * 37 mod HG_N visits all of them) */
    for (size_t j = 0; j < HG_N; j++) {
        size_t k = shuffled ? (j * 37) % HG_N : j;
        for (size_t se = 0; se < 4; se++) {
            input *in = se < 3 ? heaps[(k + se) % nh] : cpus[k % nc];
            pd_labels ls;
            pd_labels_init(&ls);
            assert_int_equal(pd_labels_set(&ls, "__name__", se < 3 ? "heap" : "cpu", NULL), 0);
            assert_int_equal(pd_labels_set(&ls, "instance", se < 3 ? inst[se] : "i0", NULL), 0);
            assert_int_equal(pd_labels_set(&ls, "job", "demo", NULL), 0);
            int rc = pd_storage_append(fx->st, &ls, T0 + (int64_t)k * STEP,
                                       (const uint8_t *)in->body.data, in->body.len, &in->p, &err);
            pd_labels_release(&ls);
            if (rc)
                fail_msg("append: %s", err.msg);
        }
    }
}

/* Every aggregation of fx's series over [from, to] recorded into out. */
static void record_head(fixture *fx, int64_t from, int64_t to, pd_buf *out)
{
    static const char *sels[] = {"heap", "cpu"};
    recorder r = {0};
    pd_buf_init(&r.out, 0);
    pd_err err = {{0}};
    for (size_t k = 0; k < 2; k++) {
        pd_matcher *ms;
        size_t n;
        pd_series_set set;
        assert_int_equal(pd_selector_parse(sels[k], &ms, &n, &err), 0);
        assert_int_equal(pd_storage_select(fx->st, ms, n, from, to, &set, &err), 0);
        uint64_t *refs = calloc(set.n + 1, sizeof *refs), *mask = calloc(set.n + 1, sizeof *mask);
        for (size_t i = 0; i < set.n; i++) {
            refs[i] = set.v[i].ref;
            mask[i] = i % 2 ? ~(uint64_t)0 : 0;
        }
        size_t ns = 0, nd = 0;
        if (pd_storage_aggregate(fx->st, refs, NULL, set.n, from, to, record_part, NULL, &r, &ns,
                                 &err))
            fail_msg("aggregate %s: %s", sels[k], err.msg);
        pd_buf_printf(&r.out, "series %zu\n== deltas\n", ns);
        if (pd_storage_aggregate_delta(fx->st, refs, NULL, mask, set.n, from, to, record_part, NULL,
                                       &r, &ns, &nd, &err))
            fail_msg("aggregate_delta %s: %s", sels[k], err.msg);
        pd_buf_printf(&r.out, "series %zu deltas %zu\n", ns, nd);
        free(refs);
        free(mask);
        pd_series_set_release(&set);
        pd_matchers_free(ms, n);
    }
    *out = r.out;
}

static void test_head_groups(void **state)
{
    (void)state;
    fixture fs, fu; /* summed, unsummed */
    open_head_groups(&fs, false);
    open_head_groups(&fu, true);
    /* the whole range; one cutting groups 0 and 2 in the middle; one inside a group */
    int64_t ranges[][2] = {{T0, T0 + HG_N * STEP},
                           {T0 + 17 * STEP, T0 + 80 * STEP},
                           {T0 + 33 * STEP, T0 + 40 * STEP},
                           {T0 + 32 * STEP, T0 + 63 * STEP}};
    for (size_t r = 0; r < sizeof ranges / sizeof *ranges; r++) {
        int64_t from = ranges[r][0], to = ranges[r][1];
        pd_buf a, b;
        record_head(&fs, from, to, &a);
        record_head(&fu, from, to, &b);
        char what[128];
        snprintf(what, sizeof what, "head groups, parts [%+" PRId64 ", %+" PRId64 "]", from - T0,
                 to - T0);
        same_text(what, &a, &b);
        pd_buf_release(&a);
        pd_buf_release(&b);
        static const char *sels[] = {"heap", "cpu", "heap{instance=\"i1\"}"};
        for (size_t k = 0; k < 3; k++)
            for (int d = 0; d < 3; d++) {
                pd_merge_options mo = {.delta = d == 0 ? PD_DELTA_RAW : PD_DELTA_ON,
                                       .sample_type = d == 2 ? "alloc_space" : NULL};
                if (d == 2 && k == 1)
                    continue;
                pd_query_side q = {
                    .selector = sels[k], .mode = PD_QUERY_MODE_MERGE, .from = from, .to = to};
                pd_profile pa, pb;
                pd_merge_stats sa, sb;
                pd_err err = {{0}};
                if (pd_query_merge(fs.st, &q, &mo, &pa, &sa, &err))
                    fail_msg("merge %s: %s", sels[k], err.msg);
                if (pd_query_merge(fu.st, &q, &mo, &pb, &sb, &err))
                    fail_msg("merge %s (shuffled): %s", sels[k], err.msg);
                assert_int_equal(sa.profiles, sb.profiles);
                snprintf(what, sizeof what, "head groups, %s delta=%d [%+" PRId64 ", %+" PRId64 "]",
                         sels[k], d, from - T0, to - T0);
                same_reports(what, &pa, &pb, false);
                if (d == 0) { /* and the old merge, one profile at a time */
                    pd_profile pc;
                    assert_int_equal(old_merge(fs.st, NULL, sels[k], from, to, &mo, &pc, &err), 0);
                    same_reports(what, &pa, &pc, false);
                    pd_profile_release(&pc);
                }
                pd_profile_release(&pa);
                pd_profile_release(&pb);
            }
    }
    pd_storage_stats ss, su;
    pd_storage_stats_get(fs.st, &ss);
    pd_storage_stats_get(fu.st, &su);
    assert_true(ss.n_aggregate_head_groups > 0);     /* the sums were used... */
    assert_int_equal(su.n_aggregate_head_groups, 0); /* ...and not where there are none */
    assert_true(ss.n_aggregate_head_open > 0);       /* the open groups' running sums too */
    assert_int_equal(su.n_aggregate_head_open, 0);
    close_store(&fs);
    close_store(&fu);
}

int main(void)
{
    load_inputs();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_head),        cmocka_unit_test(test_head_sliced),
        cmocka_unit_test(test_blocks),      cmocka_unit_test(test_mixed),
        cmocka_unit_test(test_compacted),   cmocka_unit_test(test_diff_avg),
        cmocka_unit_test(test_blocks_pool), cmocka_unit_test(test_head_groups),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    for (size_t i = 0; i < N_INPUTS; i++) {
        pd_profile_release(&INPUTS[i].p);
        pd_buf_release(&INPUTS[i].body);
    }
    free(INPUTS);
    return rc;
}
