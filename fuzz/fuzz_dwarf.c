/*
 * fuzz_dwarf — libFuzzer target for symbolize/symbolize.c's reading of the
 * debug files uploaded to POST /api/v1/debuginfo/{build_id} (untrusted
 * bytes): symbol table, line table and inlined frames (DWARF scopes,
 * DW_AT_call_file/DW_AT_call_line, abstract origins) through libdw.
 * The input is put where an upload lands (<cache>/<build id>/debuginfo,
 * under the build ID the input itself carries: inputs without one are
 * skipped, as an upload would be refused) and a profile of address-only
 * locations — each segment's start, each function's start and middle, at
 * most 256 — is named by pd_symbolizer_profile.
 * Seed corpus: fuzz/corpus/dwarf (clang -O2 -g programs with inlined
 * functions, whole and their .debug).
 * Properties besides the sanitizers: the named profile validates; every
 * location gets 1..64 lines, each with a function that has a name.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "pprof/pprof.h"
#include "symbolize/elf.h"
#include "symbolize/symbolize.h"

#define MAX_LOCS 256

static char dir[] = "/tmp/pd-fuzz-dwarf-XXXXXX";

static void add(pd_profile_builder *b, uint64_t mid, uint64_t off, size_t *n, pd_err *err)
{
    uint64_t lid;
    int64_t v = 1;
    if (*n >= MAX_LOCS || pd_profile_builder_location(b, mid, off, NULL, 0, &lid, err) < 0)
        return;
    if (pd_profile_builder_sample(b, &lid, 1, &v, NULL, 0, err) == 0)
        (*n)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        if (!mkdtemp(dir))
            abort();
        setenv("DEBUGINFOD_URLS", "", 1);
        ready = 1;
    }
    char bid[129];
    pd_err err;
    if (pd_elf_build_id_mem(data, size, bid, sizeof bid, &err) < 0)
        return 0;
    char sub[256], path[320];
    snprintf(sub, sizeof sub, "%s/%s", dir, bid);
    snprintf(path, sizeof path, "%s/debuginfo", sub);
    mkdir(sub, 0755);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return 0;
    bool ok = write(fd, data, size) == (ssize_t)size;
    close(fd);
    pd_elf_info info;
    if (!ok || pd_elf_read(path, true, &info, &err) < 0)
        goto out;

    pd_symbolizer_opts o = {.cache_dir = dir, .debug_dir = "/nonexistent"};
    pd_symbolizer *s = NULL;
    pd_profile_builder *b = NULL;
    if (pd_symbolizer_new(&o, &s, &err) < 0 || pd_profile_builder_new(NULL, &b) < 0 ||
        pd_profile_builder_sample_type(b, "samples", "count", &err) < 0)
        abort();
    pd_pprof_mapping m = {.memory_start = 0, .memory_limit = UINT64_MAX / 2, .file_offset = 0};
    uint64_t mid;
    if (pd_profile_builder_mapping(b, &m, "/fuzz/input", bid, &mid, &err) < 0)
        abort();
    size_t n = 0;
    for (size_t i = 0; i < info.n_loads; i++)
        add(b, mid, info.loads[i].offset, &n, &err);
    for (size_t i = 0; i < info.n_syms && n < MAX_LOCS; i++) {
        const pd_elf_sym *y = &info.syms[i];
        for (int k = 0; k < 2; k++) {
            uint64_t va = k ? y->lo + (y->hi - y->lo) / 2 : y->lo;
            for (size_t j = 0; j < info.n_loads; j++)
                if (va >= info.loads[j].vaddr && va - info.loads[j].vaddr < info.loads[j].filesz) {
                    add(b, mid, va - info.loads[j].vaddr + info.loads[j].offset, &n, &err);
                    break;
                }
        }
    }
    pd_profile p;
    if (n && pd_profile_builder_finish(b, &p, &err) == 0) {
        if (pd_symbolizer_profile(s, &p, &err) < 0 || pd_profile_validate(&p, &err) < 0) {
            fprintf(stderr, "%s\n", err.msg);
            abort();
        }
        for (size_t i = 0; i < p.n_location; i++) {
            const pd_pprof_location *l = &p.location[i];
            if (l->n_line < 1 || l->n_line > 64)
                abort();
            for (size_t j = 0; j < l->n_line; j++) {
                const pd_pprof_function *f = pd_profile_function(&p, l->line[j].function_id);
                if (!f || !*pd_profile_str(&p, f->name))
                    abort();
            }
        }
        pd_profile_release(&p);
    }
    pd_profile_builder_free(b);
    pd_symbolizer_free(s);
    pd_elf_info_release(&info);
out:
    unlink(path);
    rmdir(sub);
    return 0;
}
