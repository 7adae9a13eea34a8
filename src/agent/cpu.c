/*
 * agent/cpu.c — the CPU profiler.
 *
 * pd_agent_cpu_profile (one at a time, under g_cpu_lock):
 *   1. installs the SIGPROF handler (once; it stays installed, doing
 *      nothing while no profile runs, so a late signal never kills us);
 *   2. snapshots the rw mappings of /proc/self/maps (thread stacks live
 *      there) into the inactive half of g_regions and publishes it;
 *   3. sets g_cpu_on and creates, for every tid of /proc/self/task, a
 *      timer on that thread's CPU clock delivering SIGPROF to that thread
 *      (SIGEV_THREAD_ID), first expiry random in (0, period];
 *   4. every 100 ms until the end: rescans tasks (new threads get a timer,
 *      timers of gone threads are deleted), and maps when a thread was new
 *      (else every second);
 *   5. clears g_cpu_on, deletes every timer, waits until no handler is in
 *      flight (g_inflight), exports the table and resets it.
 *
 * The handler reads the interrupted pc/fp/sp, finds the region holding sp
 * (binary search in the published snapshot) and unwinds within
 * [sp, region end): a corrupt frame pointer ends the walk, it cannot fault.
 * A snapshot half is rewritten only after the handlers that may have seen
 * it are done (wait for g_inflight == 0 after each publish).
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include "agent/agent_int.h"

#define CPU_SLOTS 4096
#define MAX_REGIONS 16384
#define MAX_TIMERS 4096

typedef struct region {
    uintptr_t lo, hi;
} region;

static pthread_mutex_t g_cpu_lock = PTHREAD_MUTEX_INITIALIZER;
static pd__agent_table g_cpu_tbl;
static _Atomic int g_cpu_on;
static _Atomic int g_inflight;
static region *g_regions[2]; /* mmap'd halves, MAX_REGIONS each */
static _Atomic size_t g_n_regions[2];
static _Atomic int g_active = -1; /* published half, -1: none */
static _Atomic uint64_t g_samples, g_threads;

typedef struct ptimer {
    pid_t tid;
    timer_t t;
    int seen;
} ptimer;
static ptimer g_timers[MAX_TIMERS];
static size_t g_n_timers;

uint64_t pd__agent_cpu_samples(void);
uint64_t pd__agent_cpu_dropped(void);
uint64_t pd__agent_cpu_threads(void);
uint64_t pd__agent_cpu_samples(void)
{
    return atomic_load(&g_samples);
}
uint64_t pd__agent_cpu_dropped(void)
{
    return atomic_load(&g_cpu_tbl.dropped);
}
uint64_t pd__agent_cpu_threads(void)
{
    return atomic_load(&g_threads);
}

static uintptr_t region_end(uintptr_t sp)
{
    int a = atomic_load_explicit(&g_active, memory_order_acquire);
    if (a < 0)
        return 0;
    const region *r = g_regions[a];
    size_t lo = 0, hi = atomic_load_explicit(&g_n_regions[a], memory_order_acquire);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sp < r[mid].lo)
            hi = mid;
        else if (sp >= r[mid].hi)
            lo = mid + 1;
        else
            return r[mid].hi;
    }
    return 0;
}

static void on_sigprof(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    (void)si;
    int saved = errno;
    atomic_fetch_add_explicit(&g_inflight, 1, memory_order_acq_rel);
    if (atomic_load_explicit(&g_cpu_on, memory_order_acquire)) {
        ucontext_t *uc = ucv;
        uintptr_t pc, fp, sp;
#if defined(__x86_64__)
        pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
        fp = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
        sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
        pc = (uintptr_t)uc->uc_mcontext.pc;
        fp = (uintptr_t)uc->uc_mcontext.regs[29];
        sp = (uintptr_t)uc->uc_mcontext.sp;
#else
        pc = 0, fp = 0, sp = 0;
        (void)uc;
#endif
        uintptr_t pcs[PD__AGENT_MAX_DEPTH];
        uintptr_t hi = region_end(sp);
        uint32_t n = pd__agent_unwind(pc, fp, sp, hi ? hi : sp, pcs, PD__AGENT_MAX_DEPTH);
        if (n) {
            pd__agent_table_add(&g_cpu_tbl, pcs, n, 1, 0);
            atomic_fetch_add_explicit(&g_samples, 1, memory_order_relaxed);
        }
    }
    atomic_fetch_sub_explicit(&g_inflight, 1, memory_order_acq_rel);
    errno = saved;
}

static void wait_no_handler(void)
{
    struct timespec ts = {0, 50000};
    for (int i = 0; i < 200000 && atomic_load(&g_inflight) != 0; i++)
        nanosleep(&ts, NULL);
}

static int cmp_region(const void *a, const void *b)
{
    const region *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Reads the rw mappings into the inactive half and publishes it. */
static int refresh_regions(void)
{
    int a = atomic_load(&g_active);
    int next = a == 0 ? 1 : 0;
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return -errno;
    char line[512];
    size_t n = 0;
    while (fgets(line, sizeof line, f) && n < MAX_REGIONS) {
        uintptr_t lo, hi;
        char perm[8];
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s", &lo, &hi, perm) != 3)
            continue;
        if (perm[0] != 'r' || perm[1] != 'w')
            continue;
        g_regions[next][n].lo = lo;
        g_regions[next][n].hi = hi;
        n++;
    }
    fclose(f);
    qsort(g_regions[next], n, sizeof(region), cmp_region);
    atomic_store_explicit(&g_n_regions[next], n, memory_order_release);
    atomic_store_explicit(&g_active, next, memory_order_release);
    wait_no_handler(); /* the old half may now be rewritten */
    return 0;
}

static clockid_t thread_cpu_clock(pid_t tid)
{
    /* the kernel's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED), what
     * pthread_getcpuclockid returns for a pthread_t */
    return (clockid_t)((~(unsigned)tid) << 3) | 4 | 2;
}

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static void add_timer(pid_t tid, long period_ns)
{
    if (g_n_timers >= MAX_TIMERS)
        return;
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGPROF;
    sev._sigev_un._tid = tid;
    timer_t t;
    if (timer_create(thread_cpu_clock(tid), &sev, &t) != 0)
        return; /* the thread is gone already */
    long first = 1 + (long)(rnd() % (uint64_t)period_ns);
    struct itimerspec its = {{period_ns / 1000000000L, period_ns % 1000000000L},
                             {first / 1000000000L, first % 1000000000L}};
    if (timer_settime(t, 0, &its, NULL) != 0) {
        timer_delete(t);
        return;
    }
    g_timers[g_n_timers++] = (ptimer){tid, t, 1};
    atomic_fetch_add(&g_threads, 1);
}

/* Creates timers for new tids, deletes those of tids that are gone.
 * Returns the number of timers created, or -errno. */
static int scan_tasks(long period_ns)
{
    int added = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -errno;
    for (size_t i = 0; i < g_n_timers; i++)
        g_timers[i].seen = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        pid_t tid = (pid_t)atol(e->d_name);
        size_t i;
        for (i = 0; i < g_n_timers && g_timers[i].tid != tid; i++)
            ;
        if (i < g_n_timers)
            g_timers[i].seen = 1;
        else
            add_timer(tid, period_ns), added++;
    }
    closedir(d);
    for (size_t i = 0; i < g_n_timers;) {
        if (!g_timers[i].seen) {
            timer_delete(g_timers[i].t);
            g_timers[i] = g_timers[--g_n_timers];
        } else {
            i++;
        }
    }
    return added;
}

static int setup_once(pd_err *err)
{
    static int done;
    if (done)
        return 0;
    int rc = pd__agent_table_init(&g_cpu_tbl, CPU_SLOTS);
    if (rc < 0)
        return pd_err_set(err, rc, "agent: cannot map the CPU sample table");
    for (int i = 0; i < 2; i++) {
        pd__agent_table half;
        /* the regions reuse the slot allocator's mmap helper: a plain mmap */
        rc = pd__agent_table_init(&half,
                                  (MAX_REGIONS * sizeof(region)) / sizeof(pd__agent_slot) + 1);
        if (rc < 0)
            return pd_err_set(err, rc, "agent: cannot map the region table");
        g_regions[i] = (region *)(void *)half.slot;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigprof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGPROF, &sa, NULL) != 0)
        return pd_err_set(err, -errno, "agent: sigaction(SIGPROF): %s", strerror(errno));
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    g_rng ^= (uint64_t)now.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
    done = 1;
    return 0;
}

static int64_t now_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int pd_agent_cpu_profile(unsigned seconds, unsigned hz, const volatile bool *cancel, pd_buf *out,
                         pd_err *err)
{
    if (seconds < 1 || seconds > PD_AGENT_MAX_SECONDS)
        return pd_err_set(err, PD_EINVAL, "agent: seconds=%u is not from 1 to %d", seconds,
                          PD_AGENT_MAX_SECONDS);
    if (hz == 0)
        hz = PD_AGENT_DEFAULT_HZ;
    if (hz > 1000)
        return pd_err_set(err, PD_EINVAL, "agent: hz=%u is more than 1000", hz);
    if (pthread_mutex_trylock(&g_cpu_lock) != 0)
        return pd_err_set(err, PD_EEXIST, "cpu profiling already in use");
    pd__agent_enter();
    int rc = setup_once(err);
    if (rc < 0)
        goto out;
    long period_ns = 1000000000L / (long)hz;
    int64_t t0 = now_ns(CLOCK_REALTIME), m0 = now_ns(CLOCK_MONOTONIC);
    int64_t end = m0 + (int64_t)seconds * 1000000000;
    refresh_regions();
    atomic_store(&g_cpu_on, 1);
    unsigned ticks = 0;
    rc = scan_tasks(period_ns);
    if (rc >= 0)
        rc = 0;
    if (rc < 0) {
        pd_err_set(err, rc, "agent: cannot list /proc/self/task: %s", strerror(-rc));
        goto stop;
    }
    for (;;) {
        int64_t now = now_ns(CLOCK_MONOTONIC);
        if (now >= end || (cancel && *cancel))
            break;
        int64_t left = end - now;
        struct timespec ts = {0, left < 100000000 ? (long)left : 100000000L};
        nanosleep(&ts, NULL);
        /* a new thread may run on a stack mapped since the last snapshot */
        if (scan_tasks(period_ns) > 0 || ++ticks % 10 == 0)
            refresh_regions();
    }
stop:
    atomic_store(&g_cpu_on, 0);
    for (size_t i = 0; i < g_n_timers; i++)
        timer_delete(g_timers[i].t);
    g_n_timers = 0;
    wait_no_handler();
    if (rc == 0) {
        size_t n = 0;
        pd__agent_export_stack *st = calloc(g_cpu_tbl.cap, sizeof *st);
        if (!st) {
            rc = pd_err_set(err, PD_ENOMEM, "agent: out of memory exporting the CPU profile");
        } else {
            for (size_t i = 0; i < g_cpu_tbl.cap; i++) {
                pd__agent_slot *s = &g_cpu_tbl.slot[i];
                if (atomic_load(&s->state) < 2)
                    continue;
                int64_t c = (int64_t)atomic_load(&s->v[0]);
                st[n].pc = s->pc;
                st[n].depth = s->depth;
                st[n].value[0] = c;
                st[n].value[1] = c * period_ns;
                n++;
            }
            static const char *const type[] = {"samples", "cpu"};
            static const char *const unit[] = {"count", "nanoseconds"};
            pd__agent_export e = {
                .type = type,
                .unit = unit,
                .n_type = 2,
                .period_type = "cpu",
                .period_unit = "nanoseconds",
                .period = period_ns,
                .time_nanos = t0,
                .duration_nanos = now_ns(CLOCK_MONOTONIC) - m0,
                .stack = st,
                .n_stack = n,
            };
            rc = pd__agent_export_pprof(&e, out, err);
            free(st);
        }
    }
    pd__agent_table_reset(&g_cpu_tbl);
out:
    pd__agent_leave();
    pthread_mutex_unlock(&g_cpu_lock);
    return rc;
}
