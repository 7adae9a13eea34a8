/* bench/symbolize: CPU time of pd_symbolizer_profile naming one
 * address-only location per function of an ELF file with DWARF (default:
 * build/profd), the address in the middle of each function. Prints the
 * locations, how many got more than one line (inlined frames), and the CPU
 * time (CLOCK_PROCESS_CPUTIME_ID) of:
 *   first   — the first answer of a symbolizer on an empty cache directory
 *             (file opened, indexes built; with the results cache: written);
 *   warm    — the best of RUNS later answers of that symbolizer;
 *   restart — the best of RUNS first answers of a new symbolizer on the same
 *             cache directory (profd restarted: with the results cache, read
 *             from symbols.cache; without, the file opened and indexed again);
 *   restart+1 — the same with one address more than the cache holds (a miss:
 *             the file is opened and indexed for it).
 * Uses the public API only, so the same source links against any version of
 * the library (run.sh: this tree and a baseline build). See RESULTS.md. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pprof/pprof.h"
#include "symbolize/elf.h"
#include "symbolize/symbolize.h"

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* extra > 0: also the address extra bytes past the middle of the largest
 * function (one not asked before: a cache miss) */
static int build(const char *path, const pd_elf_info *info, int extra, pd_profile *p, pd_err *err)
{
    size_t big = 0;
    for (size_t i = 1; i < info->n_syms; i++)
        if (info->syms[i].hi - info->syms[i].lo > info->syms[big].hi - info->syms[big].lo)
            big = i;
    pd_profile_builder *b;
    int rc = pd_profile_builder_new(NULL, &b);
    if (rc < 0)
        return rc;
    if (pd_profile_builder_sample_type(b, "samples", "count", err) < 0)
        return -1;
    /* one mapping of the whole file at 0: address = file offset */
    pd_pprof_mapping m = {.memory_start = 0, .memory_limit = UINT64_MAX / 2, .file_offset = 0};
    uint64_t mid, lid;
    if ((rc = pd_profile_builder_mapping(b, &m, path, info->build_id, &mid, err)) < 0)
        return rc;
    for (size_t i = 0; i < info->n_syms; i++) {
        uint64_t va = info->syms[i].lo + (info->syms[i].hi - info->syms[i].lo) / 2, off = 0;
        bool ok = false;
        for (size_t j = 0; j < info->n_loads && !ok; j++)
            if (va >= info->loads[j].vaddr && va - info->loads[j].vaddr < info->loads[j].filesz) {
                off = va - info->loads[j].vaddr + info->loads[j].offset;
                ok = true;
            }
        if (!ok)
            continue;
        if ((rc = pd_profile_builder_location(b, mid, off, NULL, 0, &lid, err)) < 0)
            return rc;
        if (extra > 0 && i == big &&
            (rc = pd_profile_builder_location(b, mid, off + (uint64_t)extra, NULL, 0, &lid, err)) <
                0)
            return rc;
        int64_t v = 1;
        if ((rc = pd_profile_builder_sample(b, &lid, 1, &v, NULL, 0, err)) < 0)
            return rc;
    }
    rc = pd_profile_builder_finish(b, p, err);
    pd_profile_builder_free(b);
    return rc;
}

/* One answer of s over a new profile: its CPU time into *t. */
static int once(pd_symbolizer *s, const char *real, const pd_elf_info *info, int extra,
                pd_profile *p, double *t, pd_err *err)
{
    if (build(real, info, extra, p, err) < 0) {
        fprintf(stderr, "build: %s\n", err->msg);
        return -1;
    }
    double t0 = cpu_s();
    if (pd_symbolizer_profile(s, p, err) < 0) {
        fprintf(stderr, "symbolize: %s\n", err->msg);
        return -1;
    }
    *t = cpu_s() - t0;
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "build/profd";
    int runs = argc > 2 ? atoi(argv[2]) : 5;
    char real[4096];
    if (!realpath(path, real)) {
        perror(path);
        return 1;
    }
    pd_err err = {{0}};
    pd_elf_info info;
    if (pd_elf_read(real, true, &info, &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    char dir[] = "/tmp/pd-bench-symbolize-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    pd_symbolizer_opts o = {.cache_dir = dir, .debug_dir = "/nonexistent"};
    pd_symbolizer *s;
    if (pd_symbolizer_new(&o, &s, &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    double first = 0, best = 1e9, restart = 1e9, restart1 = 1e9;
    size_t locs = 0, multi = 0, lines = 0;
    for (int r = 0; r <= runs; r++) {
        double t;
        pd_profile p;
        if (once(s, real, &info, 0, &p, &t, &err) < 0)
            return 1;
        if (r == 0) {
            first = t;
            locs = p.n_location;
            for (size_t i = 0; i < p.n_location; i++) {
                lines += p.location[i].n_line;
                multi += p.location[i].n_line > 1;
            }
        } else if (t < best) {
            best = t;
        }
        pd_profile_release(&p);
    }
    pd_symbolizer_free(s);
    for (int r = 0; r < 2 * runs; r++) { /* a restart: a new symbolizer, the same directory */
        if (pd_symbolizer_new(&o, &s, &err) < 0) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        double t;
        pd_profile p;
        bool extra = r >= runs;
        if (once(s, real, &info, extra ? r - runs + 1 : 0, &p, &t, &err) < 0)
            return 1;
        if (extra ? t < restart1 : t < restart) {
            if (extra)
                restart1 = t;
            else
                restart = t;
        }
        pd_profile_release(&p);
        pd_symbolizer_free(s);
    }
    printf("file=%s locations=%zu with_inlined=%zu lines=%zu first_cpu_ms=%.1f warm_cpu_ms=%.1f "
           "warm_us_per_location=%.2f restart_cpu_ms=%.1f restart_us_per_location=%.2f "
           "restart_plus_1_miss_cpu_ms=%.1f\n",
           real, locs, multi, lines, first * 1e3, best * 1e3,
           best * 1e6 / (double)(locs ? locs : 1), restart * 1e3,
           restart * 1e6 / (double)(locs ? locs : 1), restart1 * 1e3);
    char cpath[4400];
    struct stat sb;
    snprintf(cpath, sizeof cpath, "%s/%s/symbols.cache", dir, info.build_id);
    printf("results_cache_bytes=%lld\n", stat(cpath, &sb) == 0 ? (long long)sb.st_size : 0LL);
    pd_elf_info_release(&info);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : 1;
}
