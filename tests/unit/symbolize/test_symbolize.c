/* tests/unit/symbolize: symbolize/elf.c and symbolize/symbolize.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <microhttpd.h>
#include <pthread.h>
#include <time.h>

#include "../pd_test.h"
#include "pprof/pprof.h"
#include "symbolize/elf.h"
#include "symbolize/symbolize.h"
#include "symbolize/symcache.h"
#include "base/metrics.h"

__attribute__((noinline)) int pd_test_marker_fn(int x)
{
    return x * 7 + 1;
}

static char exe[PATH_MAX];

/* An inlined function whose code's address the test knows: the address of
 * an instruction of the inlined body (the asm's own, so its line is the
 * asm's line), its line, and the line of the call in the caller. */
#if defined(__x86_64__)
#define PD_HERE(pc) __asm__ volatile("1: lea 1b(%%rip), %0" : "=r"(pc))
#elif defined(__aarch64__)
#define PD_HERE(pc) __asm__ volatile("1: adr %0, 1b" : "=r"(pc))
#endif
static uintptr_t inline_pc;
static int inline_line, call_line;

#ifdef PD_HERE
/* each __LINE__ must stay on the line of the code it names */
// clang-format off
static inline __attribute__((always_inline)) int pd_test_inline_inner(int x)
{
    uintptr_t pc;
    PD_HERE(pc); inline_line = __LINE__;
    inline_pc = pc;
    return x * 3;
}

__attribute__((noinline)) int pd_test_inline_outer(int x)
{
    call_line = __LINE__; return pd_test_inline_inner(x) + 1; /* one line: the call's */
}
// clang-format on
#endif

/* the executable mapping of this binary holding pd_test_marker_fn */
static void self_map(uint64_t *start, uint64_t *end, uint64_t *off)
{
    FILE *f = fopen("/proc/self/maps", "r");
    assert_non_null(f);
    char line[PATH_MAX + 200];
    uint64_t a = (uint64_t)(uintptr_t)&pd_test_marker_fn;
    bool found = false;
    while (fgets(line, sizeof line, f)) {
        uint64_t s, e, o;
        char perms[8];
        if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64, &s, &e, perms, &o) == 4 &&
            a >= s && a < e) {
            *start = s;
            *end = e;
            *off = o;
            found = true;
        }
    }
    fclose(f);
    assert_true(found);
}

static void test_elf_self(void **state)
{
    (void)state;
    pd_elf_info info;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_elf_read(exe, true, &info, &err), &err);
    assert_true(pd_elf_build_id_valid(info.build_id));
    assert_true(info.from_symtab);
    const pd_elf_sym *mine = NULL;
    for (size_t i = 0; i < info.n_syms; i++)
        if (!strcmp(info.syms[i].name, "pd_test_marker_fn"))
            mine = &info.syms[i];
    assert_non_null(mine);
    const pd_elf_sym *s = pd_elf_lookup(&info, mine->lo + 1);
    assert_non_null(s);
    assert_string_equal(s->name, "pd_test_marker_fn");
    assert_null(pd_elf_lookup(&info, 0));
    pd_elf_info_release(&info);
    PD_ASSERT_RC(pd_elf_read("/nonexistent/x", true, &info, &err), -2, &err); /* -ENOENT */
    assert_false(pd_elf_build_id_valid("abc"));
    assert_false(pd_elf_build_id_valid("zz"));
    assert_true(pd_elf_build_id_valid("AB12"));
}

static pd_symbolizer *new_sym(char *dir, size_t cap)
{
    snprintf(dir, cap, "/tmp/pd-test-symbolize-XXXXXX");
    assert_non_null(mkdtemp(dir));
    char cache[PATH_MAX];
    snprintf(cache, sizeof cache, "%s/cache/debuginfo", dir);
    pd_symbolizer_opts o = {.cache_dir = cache,
                            .use_debuginfod = false,
                            .debug_dir = "/nonexistent",
                            .max_upload_bytes = 64 << 20};
    pd_symbolizer *s = NULL;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_symbolizer_new(&o, &s, &err), &err);
    return s;
}

static void test_profile_named(void **state)
{
    (void)state;
    char dir[PATH_MAX];
    pd_symbolizer *sym = new_sym(dir, sizeof dir);
    pd_elf_info info;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_elf_read(exe, false, &info, &err), &err);
    uint64_t start = 0, end = 0, off = 0;
    self_map(&start, &end, &off);

    pd_profile_builder *b;
    PD_ASSERT_OK(pd_profile_builder_new(NULL, &b), &err);
    assert_true(pd_profile_builder_sample_type(b, "samples", "count", &err) >= 0);
    pd_pprof_mapping m1 = {.memory_start = start, .memory_limit = end, .file_offset = off};
    pd_pprof_mapping m2 = {.memory_start = 0x10000, .memory_limit = 0x20000, .file_offset = 0x1000};
    uint64_t mid1, mid2, l1, l2;
    PD_ASSERT_OK(pd_profile_builder_mapping(b, &m1, exe, info.build_id, &mid1, &err), &err);
    PD_ASSERT_OK(pd_profile_builder_mapping(b, &m2, "/nope/libgone.so", "abcdef0123", &mid2, &err),
                 &err);
    PD_ASSERT_OK(pd_profile_builder_location(b, mid1, (uint64_t)(uintptr_t)&pd_test_marker_fn + 2,
                                             NULL, 0, &l1, &err),
                 &err);
    PD_ASSERT_OK(pd_profile_builder_location(b, mid2, 0x10010, NULL, 0, &l2, &err), &err);
    uint64_t stack[2] = {l1, l2};
    int64_t v = 5;
    PD_ASSERT_OK(pd_profile_builder_sample(b, stack, 2, &v, NULL, 0, &err), &err);
    pd_profile p;
    PD_ASSERT_OK(pd_profile_builder_finish(b, &p, &err), &err);
    pd_profile_builder_free(b);

    PD_ASSERT_OK(pd_symbolizer_profile(sym, &p, &err), &err);
    PD_ASSERT_OK(pd_profile_validate(&p, &err), &err);
    const pd_pprof_location *a = pd_profile_location(&p, l1), *c = pd_profile_location(&p, l2);
    assert_int_equal(a->n_line, 1);
    assert_string_equal(pd_profile_str(&p, pd_profile_function(&p, a->line[0].function_id)->name),
                        "pd_test_marker_fn");
    assert_int_equal(c->n_line, 1);
    assert_string_equal(pd_profile_str(&p, pd_profile_function(&p, c->line[0].function_id)->name),
                        "libgone.so+0x1010");
    /* the stack and values are those of the input */
    assert_int_equal(p.n_sample, 1);
    assert_int_equal(p.sample[0].value[0], 5);
    pd_profile_release(&p);
    pd_elf_info_release(&info);
    pd_symbolizer_free(sym);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* An address in code inlined into its caller: two lines, innermost first
 * (profile.proto: the last is the caller the others were inlined into),
 * the inner one by its DWARF name at the address's line, the caller by the
 * symbol table's name at the line of the call (DW_AT_call_line). */
static void test_profile_inlined(void **state)
{
    (void)state;
#ifndef PD_HERE
    skip();
#else
    assert_int_equal(pd_test_inline_outer(2), 7);
    assert_true(inline_pc != 0);
    char dir[PATH_MAX];
    pd_symbolizer *sym = new_sym(dir, sizeof dir);
    pd_elf_info info;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_elf_read(exe, false, &info, &err), &err);
    uint64_t start = 0, end = 0, off = 0;
    self_map(&start, &end, &off);
    assert_true(inline_pc >= start && inline_pc < end);

    pd_profile_builder *b;
    PD_ASSERT_OK(pd_profile_builder_new(NULL, &b), &err);
    assert_true(pd_profile_builder_sample_type(b, "samples", "count", &err) >= 0);
    pd_pprof_mapping m1 = {.memory_start = start, .memory_limit = end, .file_offset = off};
    uint64_t mid1, l1, l2;
    PD_ASSERT_OK(pd_profile_builder_mapping(b, &m1, exe, info.build_id, &mid1, &err), &err);
    PD_ASSERT_OK(pd_profile_builder_location(b, mid1, inline_pc, NULL, 0, &l1, &err), &err);
    PD_ASSERT_OK(pd_profile_builder_location(b, mid1, (uint64_t)(uintptr_t)&pd_test_marker_fn + 2,
                                             NULL, 0, &l2, &err),
                 &err);
    uint64_t stack[2] = {l1, l2};
    int64_t v = 3;
    PD_ASSERT_OK(pd_profile_builder_sample(b, stack, 2, &v, NULL, 0, &err), &err);
    pd_profile p;
    PD_ASSERT_OK(pd_profile_builder_finish(b, &p, &err), &err);
    pd_profile_builder_free(b);

    PD_ASSERT_OK(pd_symbolizer_profile(sym, &p, &err), &err);
    PD_ASSERT_OK(pd_profile_validate(&p, &err), &err);
    const pd_pprof_location *a = pd_profile_location(&p, l1);
    assert_int_equal(a->n_line, 2);
    const pd_pprof_function *in = pd_profile_function(&p, a->line[0].function_id);
    const pd_pprof_function *out = pd_profile_function(&p, a->line[1].function_id);
    assert_string_equal(pd_profile_str(&p, in->name), "pd_test_inline_inner");
    assert_int_equal(a->line[0].line, inline_line);
    assert_string_equal(pd_profile_str(&p, out->name), "pd_test_inline_outer");
    assert_int_equal(a->line[1].line, call_line);
    const char *f0 = pd_profile_str(&p, in->filename), *f1 = pd_profile_str(&p, out->filename);
    assert_true(f0[0] == '/' && strstr(f0, "test_symbolize.c"));
    assert_true(f1[0] == '/' && strstr(f1, "test_symbolize.c"));
    /* a frame with nothing inlined keeps one line */
    const pd_pprof_location *c = pd_profile_location(&p, l2);
    assert_int_equal(c->n_line, 1);
    assert_string_equal(pd_profile_str(&p, pd_profile_function(&p, c->line[0].function_id)->name),
                        "pd_test_marker_fn");
    /* encoded and decoded again (what go tool pprof reads): the same lines */
    pd_buf enc;
    pd_buf_init(&enc, 0);
    assert_int_equal(pd_profile_encode(&p, false, &enc), 0);
    pd_profile q;
    PD_ASSERT_OK(pd_profile_decode(&q, (const uint8_t *)enc.data, enc.len, NULL, &err), &err);
    const pd_pprof_location *qa = pd_profile_location(&q, l1);
    assert_int_equal(qa->n_line, 2);
    assert_string_equal(pd_profile_str(&q, pd_profile_function(&q, qa->line[1].function_id)->name),
                        "pd_test_inline_outer");
    pd_profile_release(&q);
    pd_buf_release(&enc);
    pd_profile_release(&p);
    pd_elf_info_release(&info);
    pd_symbolizer_free(sym);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
#endif
}

static void test_store_checks(void **state)
{
    (void)state;
    char dir[PATH_MAX];
    pd_symbolizer *sym = new_sym(dir, sizeof dir);
    pd_err err = {{0}};
    pd_elf_info info;
    PD_ASSERT_OK(pd_elf_read(exe, false, &info, &err), &err);
    /* the whole binary as the upload */
    FILE *f = fopen(exe, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *data = malloc((size_t)n);
    assert_int_equal(fread(data, 1, (size_t)n, f), (size_t)n);
    fclose(f);

    PD_ASSERT_RC(pd_symbolizer_store(sym, "xyz", data, (size_t)n, &err), PD_EINVAL, &err);
    assert_non_null(strstr(err.msg, "bad build ID"));
    PD_ASSERT_RC(pd_symbolizer_store(sym, "abcd", "hello", 5, &err), PD_EINVAL, &err);
    assert_non_null(strstr(err.msg, "not an ELF file"));
    PD_ASSERT_RC(pd_symbolizer_store(sym, "abcd", data, (size_t)n, &err), PD_EINVAL, &err);
    assert_non_null(strstr(err.msg, "the file's build ID is"));
    PD_ASSERT_OK(pd_symbolizer_store(sym, info.build_id, data, (size_t)n, &err), &err);
    char path[PATH_MAX * 2];
    snprintf(path, sizeof path, "%s/cache/debuginfo/%s/debuginfo", dir, info.build_id);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, n);
    free(data);
    pd_elf_info_release(&info);
    pd_symbolizer_free(sym);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- debuginfod fetches run without the symbolizer's lock ---- */

/* A debuginfod server (libmicrohttpd, a thread per connection) that holds
 * every /buildid/<bid>/debuginfo request until released, then answers with
 * this test's binary (its own debug info). */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int requests; /* /buildid/<bid>/debuginfo asked */
    bool released;
    char bid[129];
    char *data;
    size_t len;
} srv = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static enum MHD_Result srv_handle(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *up,
                                  size_t *up_len, void **st)
{
    (void)cls, (void)method, (void)version, (void)up, (void)up_len, (void)st;
    char want[200];
    snprintf(want, sizeof want, "/buildid/%s/debuginfo", srv.bid);
    struct MHD_Response *r;
    unsigned status = 404;
    if (!strcmp(url, want)) {
        pthread_mutex_lock(&srv.mu);
        srv.requests++;
        pthread_cond_broadcast(&srv.cv);
        while (!srv.released)
            pthread_cond_wait(&srv.cv, &srv.mu);
        pthread_mutex_unlock(&srv.mu);
        r = MHD_create_response_from_buffer(srv.len, srv.data, MHD_RESPMEM_PERSISTENT);
        status = 200;
    } else {
        r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    }
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* waits (a hang guard of 120 s, not a measure) until *flag or srv.requests >= n */
static bool srv_wait(int n, const bool *flag)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 120;
    pthread_mutex_lock(&srv.mu);
    int rc = 0;
    while (!(flag ? *flag : srv.requests >= n) && rc == 0)
        rc = pthread_cond_timedwait(&srv.cv, &srv.mu, &ts);
    bool ok = flag ? *flag : srv.requests >= n;
    pthread_mutex_unlock(&srv.mu);
    return ok;
}

typedef struct job {
    pd_symbolizer *sym;
    pd_profile p;
    uint64_t loc;
    int rc;
    bool done;
    char name[128];
} job;

static void *job_run(void *arg)
{
    job *j = arg;
    pd_err err = {{0}};
    j->rc = pd_symbolizer_profile(j->sym, &j->p, &err);
    const pd_pprof_location *l = pd_profile_location(&j->p, j->loc);
    if (j->rc == 0 && l && l->n_line)
        snprintf(j->name, sizeof j->name, "%s",
                 pd_profile_str(&j->p, pd_profile_function(&j->p, l->line[0].function_id)->name));
    pthread_mutex_lock(&srv.mu);
    j->done = true;
    pthread_cond_broadcast(&srv.cv);
    pthread_mutex_unlock(&srv.mu);
    return NULL;
}

/* one location in a mapping of `file` with build ID bid ("" none) */
static void one_loc_profile(const char *file, const char *bid, uint64_t start, uint64_t end,
                            uint64_t off, uint64_t addr, job *j)
{
    pd_err err = {{0}};
    pd_profile_builder *b;
    PD_ASSERT_OK(pd_profile_builder_new(NULL, &b), &err);
    assert_true(pd_profile_builder_sample_type(b, "samples", "count", &err) >= 0);
    pd_pprof_mapping m = {.memory_start = start, .memory_limit = end, .file_offset = off};
    uint64_t mid;
    PD_ASSERT_OK(pd_profile_builder_mapping(b, &m, file, bid, &mid, &err), &err);
    PD_ASSERT_OK(pd_profile_builder_location(b, mid, addr, NULL, 0, &j->loc, &err), &err);
    int64_t v = 1;
    PD_ASSERT_OK(pd_profile_builder_sample(b, &j->loc, 1, &v, NULL, 0, &err), &err);
    PD_ASSERT_OK(pd_profile_builder_finish(b, &j->p, &err), &err);
    pd_profile_builder_free(b);
}

/* Regression: a debuginfod fetch ran under the symbolizer's lock, so one
 * slow server held up every answer. Now: while A's fetch of build ID X
 * hangs, B (another answer) completes; C, needing X too, makes no second
 * request; A and C get the name once the server answers. */
static void test_fetch_outside_lock(void **state)
{
    (void)state;
    char dir[PATH_MAX], env[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "/tmp/pd-test-symbolize-XXXXXX");
    assert_non_null(mkdtemp(dir));
    pd_elf_info info;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_elf_read(exe, false, &info, &err), &err);
    snprintf(srv.bid, sizeof srv.bid, "%s", info.build_id);
    FILE *f = fopen(exe, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    srv.len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    srv.data = malloc(srv.len);
    assert_int_equal(fread(srv.data, 1, srv.len, f), srv.len);
    fclose(f);
    struct MHD_Daemon *d =
        MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL,
                         NULL, srv_handle, NULL, MHD_OPTION_SOCK_ADDR, NULL, MHD_OPTION_END);
    assert_non_null(d);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    assert_non_null(di);
    snprintf(env, sizeof env, "http://127.0.0.1:%u", (unsigned)di->port);
    setenv("DEBUGINFOD_URLS", env, 1);
    setenv("DEBUGINFOD_TIMEOUT", "600", 1);
    snprintf(env, sizeof env, "%s/debuginfod-client", dir);
    setenv("DEBUGINFOD_CACHE_PATH", env, 1);
    char cache[PATH_MAX + 32];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    pd_symbolizer_opts o = {.cache_dir = cache,
                            .use_debuginfod = true,
                            .debug_dir = "/nonexistent",
                            .max_upload_bytes = 64 << 20};
    pd_symbolizer *sym = NULL;
    PD_ASSERT_OK(pd_symbolizer_new(&o, &sym, &err), &err);

    uint64_t start = 0, end = 0, off = 0;
    self_map(&start, &end, &off);
    uint64_t addr = (uint64_t)(uintptr_t)&pd_test_marker_fn + 2;
    job a = {.sym = sym}, b = {.sym = sym}, c = {.sym = sym};
    /* X only from debuginfod: a file that is not on this host */
    one_loc_profile("/nonexistent/prog", info.build_id, start, end, off, addr, &a);
    one_loc_profile("/nonexistent/prog", info.build_id, start, end, off, addr, &c);
    one_loc_profile("/nonexistent/other", "", 0x10000, 0x20000, 0, 0x10010, &b);
    pthread_t ta, tb, tc;
    assert_int_equal(pthread_create(&ta, NULL, job_run, &a), 0);
    assert_true(srv_wait(1, NULL)); /* A's fetch is in the server, held */
    assert_int_equal(pthread_create(&tc, NULL, job_run, &c), 0);
    assert_int_equal(pthread_create(&tb, NULL, job_run, &b), 0);
    assert_true(srv_wait(0, &b.done)); /* B did not wait for A's fetch */
    pthread_join(tb, NULL);
    assert_int_equal(b.rc, 0);
    assert_string_equal(b.name, "other+0x10");
    pthread_mutex_lock(&srv.mu);
    assert_false(a.done);
    assert_int_equal(srv.requests, 1);
    srv.released = true;
    pthread_cond_broadcast(&srv.cv);
    pthread_mutex_unlock(&srv.mu);
    pthread_join(ta, NULL);
    pthread_join(tc, NULL);
    assert_int_equal(a.rc, 0);
    assert_int_equal(c.rc, 0);
    assert_string_equal(a.name, "pd_test_marker_fn");
    assert_string_equal(c.name, "pd_test_marker_fn");
    assert_int_equal(srv.requests, 1); /* one fetch of X */
    /* kept in the cache directory */
    char path[PATH_MAX * 2];
    snprintf(path, sizeof path, "%s/%s/debuginfo", cache, info.build_id);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);

    pd_profile_release(&a.p);
    pd_profile_release(&b.p);
    pd_profile_release(&c.p);
    pd_symbolizer_free(sym);
    MHD_stop_daemon(d);
    free(srv.data);
    pd_elf_info_release(&info);
    unsetenv("DEBUGINFOD_URLS");
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- the results cache (symcache.h): <cache dir>/<bid>/symbols.cache ---- */

#ifdef PD_HERE
static double metric(const char *fam, const char *labels)
{
    return pd_metrics_get(fam, labels);
}
#define HITS() metric("profd_symbolize_cache_lookups_total", "result=\"hit\"")
#define MISSES() metric("profd_symbolize_cache_lookups_total", "result=\"miss\"")

/* A symbolizer over dir/cache/debuginfo as it is (made by new_sym). */
static pd_symbolizer *open_sym(const char *dir, size_t max_cache)
{
    char cache[PATH_MAX];
    snprintf(cache, sizeof cache, "%s/cache/debuginfo", dir);
    pd_symbolizer_opts o = {.cache_dir = cache,
                            .use_debuginfod = false,
                            .debug_dir = "/nonexistent",
                            .max_upload_bytes = 64 << 20,
                            .max_cache_bytes = max_cache};
    pd_symbolizer *s = NULL;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_symbolizer_new(&o, &s, &err), &err);
    return s;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *d = malloc((size_t)n + 1);
    assert_non_null(d);
    assert_int_equal(fread(d, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return d;
}

static void spit(const char *path, const void *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(d, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* The test's fixture: a copy of this binary at dir/prog (the mapping's
 * file: the debug file the first answers come from), its build ID, and the
 * addresses asked: the inlined code (2 lines) and pd_test_marker_fn. */
typedef struct fixture {
    char dir[PATH_MAX];
    char prog[PATH_MAX + 8];
    char cache_file[PATH_MAX * 2];
    pd_elf_info info;
    uint64_t start, end, off;
} fixture;

static void fixture_init(fixture *fx)
{
    assert_int_equal(pd_test_inline_outer(2), 7);
    snprintf(fx->dir, sizeof fx->dir, "/tmp/pd-test-symcache-XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_elf_read(exe, false, &fx->info, &err), &err);
    self_map(&fx->start, &fx->end, &fx->off);
    snprintf(fx->prog, sizeof fx->prog, "%s/prog", fx->dir);
    size_t n;
    char *d = slurp(exe, &n);
    spit(fx->prog, d, n);
    free(d);
    snprintf(fx->cache_file, sizeof fx->cache_file, "%s/cache/debuginfo/%s/symbols.cache", fx->dir,
             fx->info.build_id);
}

static void fixture_release(fixture *fx)
{
    pd_elf_info_release(&fx->info);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", fx->dir);
    assert_int_equal(system(cmd), 0);
}

static uint64_t file_off(const fixture *fx, uint64_t addr)
{
    return addr - fx->start + fx->off;
}

/* Names the two addresses (plus extra when not 0) with sym; their lines as
 * text "name@file:line;..." into t[0..2] (t[2]: extra's). */
static void name_them(pd_symbolizer *sym, const fixture *fx, uint64_t extra, char t[3][2048])
{
    pd_err err = {{0}};
    pd_profile_builder *b;
    PD_ASSERT_OK(pd_profile_builder_new(NULL, &b), &err);
    assert_true(pd_profile_builder_sample_type(b, "samples", "count", &err) >= 0);
    pd_pprof_mapping m = {
        .memory_start = fx->start, .memory_limit = fx->end, .file_offset = fx->off};
    uint64_t mid, l[3];
    PD_ASSERT_OK(pd_profile_builder_mapping(b, &m, fx->prog, fx->info.build_id, &mid, &err), &err);
    uint64_t addrs[3] = {inline_pc, (uint64_t)(uintptr_t)&pd_test_marker_fn + 2, extra};
    size_t n = extra ? 3 : 2;
    for (size_t i = 0; i < n; i++)
        PD_ASSERT_OK(pd_profile_builder_location(b, mid, addrs[i], NULL, 0, &l[i], &err), &err);
    int64_t v = 1;
    PD_ASSERT_OK(pd_profile_builder_sample(b, l, n, &v, NULL, 0, &err), &err);
    pd_profile p;
    PD_ASSERT_OK(pd_profile_builder_finish(b, &p, &err), &err);
    pd_profile_builder_free(b);
    PD_ASSERT_OK(pd_symbolizer_profile(sym, &p, &err), &err);
    PD_ASSERT_OK(pd_profile_validate(&p, &err), &err);
    for (size_t i = 0; i < 3; i++) {
        t[i][0] = 0;
        if (i >= n)
            continue;
        const pd_pprof_location *loc = pd_profile_location(&p, l[i]);
        size_t at = 0;
        for (size_t j = 0; j < loc->n_line; j++) {
            const pd_pprof_function *f = pd_profile_function(&p, loc->line[j].function_id);
            at += (size_t)snprintf(t[i] + at, 2048 - at, "%s@%s:%" PRId64 ";",
                                   pd_profile_str(&p, f->name), pd_profile_str(&p, f->filename),
                                   loc->line[j].line);
            assert_true(at < 2048);
        }
    }
    pd_profile_release(&p);
}

/* A second symbolizer over the same cache directory names the addresses as
 * the first did, lines, files and inlined frames included, with the debug
 * file deleted: the answers came from symbols.cache. An address not in the
 * cache is then unnamed (the cache makes nothing up). */
static void test_cache_restart(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    char t1[3][2048], t2[3][2048];
    pd_symbolizer *sym = open_sym(fx.dir, 0);
    double h0 = HITS(), m0 = MISSES();
    name_them(sym, &fx, 0, t1);
    assert_int_equal(MISSES() - m0, 2);
    assert_int_equal(HITS() - h0, 0);
    assert_non_null(strstr(t1[0], "pd_test_inline_inner@/"));
    assert_non_null(strstr(t1[0], ";pd_test_inline_outer@/"));
    assert_non_null(strstr(t1[1], "pd_test_marker_fn@"));
    /* the same symbolizer: hits */
    name_them(sym, &fx, 0, t2);
    assert_int_equal(HITS() - h0, 2);
    assert_string_equal(t1[0], t2[0]);
    pd_symbolizer_free(sym);
    struct stat st;
    assert_int_equal(stat(fx.cache_file, &st), 0);

    assert_int_equal(unlink(fx.prog), 0); /* no debug file anywhere now */
    sym = open_sym(fx.dir, 0);
    h0 = HITS();
    m0 = MISSES();
    uint64_t other = (uint64_t)(uintptr_t)&pd_test_inline_outer;
    name_them(sym, &fx, other, t2);
    assert_int_equal(HITS() - h0, 2);
    assert_int_equal(MISSES() - m0, 1);
    assert_string_equal(t1[0], t2[0]);
    assert_string_equal(t1[1], t2[1]);
    char want[64];
    snprintf(want, sizeof want, "prog+0x%" PRIx64 "@:0;", file_off(&fx, other));
    assert_string_equal(t2[2], want);
    pd_symbolizer_free(sym);
    fixture_release(&fx);
}

/* The header's source kind byte of the cache file (offset 5). */
static int cache_kind(const char *path)
{
    size_t n;
    char *d = slurp(path, &n);
    assert_true(n > 6);
    int k = (unsigned char)d[5];
    free(d);
    return k;
}

/* Writes a cache file for fx's build ID claiming src, with one answer
 * "name" for pd_test_marker_fn's offset. */
static void craft_cache(const fixture *fx, const pd_symcache_source *src, const char *name)
{
    pd_symcache c;
    assert_int_equal(pd_symcache_init(&c, fx->info.build_id, fx->cache_file, 0), 0);
    pd_symcache_reset(&c, src);
    pd_symcache_line l = {.name = name, .system_name = name, .file = "/x.c", .line = 9};
    assert_int_equal(
        pd_symcache_add(&c, file_off(fx, (uint64_t)(uintptr_t)&pd_test_marker_fn + 2), &l, 1), 0);
    assert_int_equal(pd_symcache_flush(&c), 0);
    pd_symcache_release(&c);
}

/* An upload drops the build ID's cache (file and memory): the next answers
 * come from the uploaded file and the cache is rebuilt naming it. A cache
 * whose header names another state of the file (size, mtime) is not
 * trusted; one that names the file as it is, is. */
static void test_cache_invalidation(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    char t[3][2048];
    pd_symbolizer *sym = open_sym(fx.dir, 0);
    name_them(sym, &fx, 0, t);
    assert_int_equal(cache_kind(fx.cache_file), PD_SYMCACHE_SRC_MAPPED_FILE);

    double u0 = metric("profd_symbolize_cache_invalidations_total", "reason=\"upload\"");
    size_t n;
    char *data = slurp(exe, &n);
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_symbolizer_store(sym, fx.info.build_id, data, n, &err), &err);
    free(data);
    struct stat st;
    assert_int_equal(stat(fx.cache_file, &st), -1);
    assert_int_equal(metric("profd_symbolize_cache_invalidations_total", "reason=\"upload\"") - u0,
                     1);
    double m0 = MISSES();
    name_them(sym, &fx, 0, t);
    assert_int_equal(MISSES() - m0, 2); /* asked of the upload, not the old answers */
    assert_non_null(strstr(t[1], "pd_test_marker_fn@"));
    assert_int_equal(cache_kind(fx.cache_file), PD_SYMCACHE_SRC_CACHE_DIR);
    pd_symbolizer_free(sym);

    /* the uploaded file as it is: the identity the cache must carry */
    char dbg[PATH_MAX * 2];
    snprintf(dbg, sizeof dbg, "%s/cache/debuginfo/%s/debuginfo", fx.dir, fx.info.build_id);
    assert_int_equal(stat(dbg, &st), 0);
    pd_symcache_source src = {.kind = PD_SYMCACHE_SRC_CACHE_DIR,
                              .size = (uint64_t)st.st_size,
                              .mtime_ns =
                                  (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
                              .dev = (uint64_t)st.st_dev,
                              .ino = (uint64_t)st.st_ino};
    assert_true(strlen(dbg) < sizeof src.path);
    memcpy(src.path, dbg, strlen(dbg) + 1);
    /* stale: another size */
    pd_symcache_source stale = src;
    stale.size++;
    craft_cache(&fx, &stale, "stale_fn");
    double c0 = metric("profd_symbolize_cache_invalidations_total", "reason=\"source_changed\"");
    sym = open_sym(fx.dir, 0);
    name_them(sym, &fx, 0, t);
    assert_non_null(strstr(t[1], "pd_test_marker_fn@"));
    assert_null(strstr(t[1], "stale_fn"));
    assert_int_equal(
        metric("profd_symbolize_cache_invalidations_total", "reason=\"source_changed\"") - c0, 1);
    pd_symbolizer_free(sym);
    /* current: trusted, the file is not read for it */
    craft_cache(&fx, &src, "cached_fn");
    sym = open_sym(fx.dir, 0);
    name_them(sym, &fx, 0, t);
    assert_string_equal(t[1], "cached_fn@/x.c:9;");
    pd_symbolizer_free(sym);
    /* the file touched (mtime): not trusted any more */
    struct timespec ts[2] = {{0, UTIME_OMIT}, {12345, 0}};
    assert_int_equal(utimensat(AT_FDCWD, dbg, ts, 0), 0);
    sym = open_sym(fx.dir, 0);
    name_them(sym, &fx, 0, t);
    assert_non_null(strstr(t[1], "pd_test_marker_fn@"));
    pd_symbolizer_free(sym);
    fixture_release(&fx);
}

/* Where the records of a cache file start: the header's length, then each
 * record's (len u32 | crc u32 | payload). */
static size_t header_len(const unsigned char *d)
{
    size_t plen = d[40] | (size_t)d[41] << 8;
    return 42 + plen + 1 + d[42 + plen] + 4;
}

static uint32_t rec_len(const unsigned char *d)
{
    return d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16 | (uint32_t)d[3] << 24;
}

/* Damaged cache files: a torn last record keeps the first; a flipped byte
 * in the first record keeps nothing after the header; a wrong magic or
 * version keeps nothing. Each is counted, the answers stay right (named
 * from the debug file), and the file is rebuilt: the next symbolizer finds
 * it whole (no damage counted, every address a hit). */
static void test_cache_corrupt(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    char t0[3][2048], t[3][2048];
    pd_symbolizer *sym = open_sym(fx.dir, 0);
    name_them(sym, &fx, 0, t0);
    pd_symbolizer_free(sym);
    size_t n;
    unsigned char *good = (unsigned char *)slurp(fx.cache_file, &n);
    size_t h = header_len(good);
    size_t r2 = h + 8 + rec_len(good + h);
    assert_true(r2 + 8 < n);
    assert_int_equal(r2 + 8 + rec_len(good + r2), n); /* two records, nothing else */

    struct {
        const char *what;
        size_t len;  /* bytes kept of the good file */
        size_t flip; /* a byte flipped (SIZE_MAX: none) */
        const char *part;
        int hits; /* addresses found in what was kept */
    } cases[] = {
        {"torn second record", r2 + 8 + rec_len(good + r2) / 2, SIZE_MAX, "part=\"record\"", 1},
        {"torn second record header", r2 + 3, SIZE_MAX, "part=\"record\"", 1},
        {"flipped byte in first record", n, h + 10, "part=\"record\"", 0},
        {"flipped record length", n, h + 1, "part=\"record\"", 0},
        {"wrong magic", n, 0, "part=\"header\"", 0},
        {"wrong version", n, 4, "part=\"header\"", 0},
        {"flipped byte in the header's path", n, 43, "part=\"header\"", 0},
        {"header only, torn", 20, SIZE_MAX, "part=\"header\"", 0},
        {"empty file", 0, SIZE_MAX, "part=\"header\"", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned char *bad = malloc(n + 1);
        memcpy(bad, good, n);
        if (cases[i].flip != SIZE_MAX)
            bad[cases[i].flip] ^= 0x5a;
        spit(fx.cache_file, bad, cases[i].len);
        free(bad);
        double c0 = metric("profd_symbolize_cache_corrupt_total", cases[i].part);
        double h0 = HITS(), m0 = MISSES();
        sym = open_sym(fx.dir, 0);
        name_them(sym, &fx, 0, t);
        pd_symbolizer_free(sym);
        if (metric("profd_symbolize_cache_corrupt_total", cases[i].part) - c0 != 1)
            fail_msg("%s: not counted as %s", cases[i].what, cases[i].part);
        if (HITS() - h0 != cases[i].hits || MISSES() - m0 != 2 - cases[i].hits)
            fail_msg("%s: %g hits, %g misses", cases[i].what, HITS() - h0, MISSES() - m0);
        assert_string_equal(t[0], t0[0]);
        assert_string_equal(t[1], t0[1]);
        /* rebuilt: whole again */
        double all0 = metric("profd_symbolize_cache_corrupt_total", "part=\"record\"") +
                      metric("profd_symbolize_cache_corrupt_total", "part=\"header\"");
        h0 = HITS();
        sym = open_sym(fx.dir, 0);
        name_them(sym, &fx, 0, t);
        pd_symbolizer_free(sym);
        assert_int_equal(HITS() - h0, 2);
        assert_int_equal(metric("profd_symbolize_cache_corrupt_total", "part=\"record\"") +
                             metric("profd_symbolize_cache_corrupt_total", "part=\"header\"") -
                             all0,
                         0);
        struct stat st;
        assert_int_equal(stat(fx.cache_file, &st), 0);
        assert_int_equal((size_t)st.st_size, n);
    }
    free(good);
    fixture_release(&fx);
}

/* The cap: a file at max_cache_bytes takes no more answers (counted), and
 * they are still named. */
static void test_cache_cap(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    char t0[3][2048], t[3][2048];
    pd_symbolizer *sym = open_sym(fx.dir, 0);
    name_them(sym, &fx, 0, t0);
    pd_symbolizer_free(sym);
    size_t n;
    unsigned char *good = (unsigned char *)slurp(fx.cache_file, &n);
    size_t h = header_len(good), r2 = h + 8 + rec_len(good + h);
    free(good);
    assert_int_equal(unlink(fx.cache_file), 0);
    double f0 = metric("profd_symbolize_cache_full_total", NULL);
    sym = open_sym(fx.dir, r2 + 8); /* room for the header and the first record only */
    name_them(sym, &fx, 0, t);
    pd_symbolizer_free(sym);
    assert_int_equal(metric("profd_symbolize_cache_full_total", NULL) - f0, 1);
    assert_string_equal(t[0], t0[0]);
    assert_string_equal(t[1], t0[1]);
    struct stat st;
    assert_int_equal(stat(fx.cache_file, &st), 0);
    assert_true((size_t)st.st_size <= r2 + 8);
    fixture_release(&fx);
}

/* Caches closed and read again under the memory bound: three build IDs
 * whose cache files name one address each (their binaries gone: the
 * answers stay), in a symbolizer that keeps one cache's bytes in memory.
 * Every answer names all three, twice over (each read evicts another). */
static void test_cache_evict(void **state)
{
    (void)state;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "/tmp/pd-test-symcache-XXXXXX");
    assert_non_null(mkdtemp(dir));
    const char *bids[3] = {"aa01", "bb02", "cc03"};
    char path[PATH_MAX * 2];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/cache/debuginfo/%s", dir, bids[i]);
        char cmd[PATH_MAX * 2 + 16];
        snprintf(cmd, sizeof cmd, "mkdir -p %s", path);
        assert_int_equal(system(cmd), 0);
        snprintf(path, sizeof path, "%s/cache/debuginfo/%s/symbols.cache", dir, bids[i]);
        pd_symcache c;
        assert_int_equal(pd_symcache_init(&c, bids[i], path, 0), 0);
        pd_symcache_source src = {.kind = PD_SYMCACHE_SRC_MAPPED_FILE, .size = 1};
        snprintf(src.path, sizeof src.path, "/nonexistent/prog%d", i);
        pd_symcache_reset(&c, &src);
        char name[16];
        snprintf(name, sizeof name, "fn_%d", i);
        pd_symcache_line l = {.name = name, .system_name = name, .file = "", .line = 0};
        assert_int_equal(pd_symcache_add(&c, 0x1000 + (uint64_t)i, &l, 1), 0);
        assert_int_equal(pd_symcache_flush(&c), 0);
        pd_symcache_release(&c);
    }
    char cache[PATH_MAX + 32];
    snprintf(cache, sizeof cache, "%s/cache/debuginfo", dir);
    pd_symbolizer_opts o = {
        .cache_dir = cache, .debug_dir = "/nonexistent", .max_cache_mem_bytes = 1};
    pd_symbolizer *sym;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_symbolizer_new(&o, &sym, &err), &err);
    for (int round = 0; round < 2; round++) {
        pd_profile_builder *b;
        PD_ASSERT_OK(pd_profile_builder_new(NULL, &b), &err);
        assert_true(pd_profile_builder_sample_type(b, "samples", "count", &err) >= 0);
        uint64_t l[3];
        for (int i = 0; i < 3; i++) {
            pd_pprof_mapping m = {.memory_start = 0x10000 * (uint64_t)(i + 1),
                                  .memory_limit = 0x10000 * (uint64_t)(i + 2)};
            uint64_t mid;
            char file[32];
            snprintf(file, sizeof file, "/nonexistent/prog%d", i);
            PD_ASSERT_OK(pd_profile_builder_mapping(b, &m, file, bids[i], &mid, &err), &err);
            PD_ASSERT_OK(pd_profile_builder_location(b, mid, m.memory_start + 0x1000 + (uint64_t)i,
                                                     NULL, 0, &l[i], &err),
                         &err);
        }
        int64_t v = 1;
        PD_ASSERT_OK(pd_profile_builder_sample(b, l, 3, &v, NULL, 0, &err), &err);
        pd_profile p;
        PD_ASSERT_OK(pd_profile_builder_finish(b, &p, &err), &err);
        pd_profile_builder_free(b);
        double h0 = HITS();
        PD_ASSERT_OK(pd_symbolizer_profile(sym, &p, &err), &err);
        assert_int_equal(HITS() - h0, 3);
        for (int i = 0; i < 3; i++) {
            const pd_pprof_location *loc = pd_profile_location(&p, l[i]);
            char want[16];
            snprintf(want, sizeof want, "fn_%d", i);
            assert_int_equal(loc->n_line, 1);
            assert_string_equal(
                pd_profile_str(&p, pd_profile_function(&p, loc->line[0].function_id)->name), want);
        }
        pd_profile_release(&p);
    }
    pd_symbolizer_free(sym);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}
#else
static void test_cache_restart(void **state)
{
    (void)state;
    skip();
}
static void test_cache_invalidation(void **state)
{
    (void)state;
    skip();
}
static void test_cache_corrupt(void **state)
{
    (void)state;
    skip();
}
static void test_cache_cap(void **state)
{
    (void)state;
    skip();
}
static void test_cache_evict(void **state)
{
    (void)state;
    skip();
}
#endif

int main(void)
{
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0)
        return 1;
    exe[k] = 0;
    (void)pd_test_marker_fn(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elf_self),           cmocka_unit_test(test_profile_named),
        cmocka_unit_test(test_profile_inlined),    cmocka_unit_test(test_store_checks),
        cmocka_unit_test(test_fetch_outside_lock), cmocka_unit_test(test_cache_restart),
        cmocka_unit_test(test_cache_invalidation), cmocka_unit_test(test_cache_corrupt),
        cmocka_unit_test(test_cache_cap),          cmocka_unit_test(test_cache_evict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
