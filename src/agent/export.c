/*
 * agent/export.c — stacks of PCs to gzip pprof, in-process.
 *
 * Mappings: the executable ('x') lines of /proc/self/maps that name a file
 * (start, limit, file offset, path), each with the GNU build id found by
 * dl_iterate_phdr in the PT_NOTE segments of the loaded object whose
 * PT_LOAD holds the mapping's start. Locations: one per distinct PC, in
 * its mapping. Functions: dladdr1's symbol when the PC lies inside the
 * symbol's size (a PC past it, e.g. in a static function of an executable
 * linked without -rdynamic, gets no name rather than a wrong one; pprof
 * shows its address).
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "agent/agent_int.h"
#include "pprof/pprof.h"

#define MAX_MAPS 4096

typedef struct amap {
    uintptr_t lo, hi, off;
    char path[256];
    char build_id[80];
    uint64_t id; /* builder mapping id, 0 until used */
} amap;

typedef struct bid_ctx {
    amap *m;
} bid_ctx;

static int bid_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    amap *m = ((bid_ctx *)data)->m;
    int holds = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && m->lo >= lo && m->lo < lo + ph->p_memsz)
            holds = 1;
    }
    if (!holds)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
        size_t left = ph->p_memsz;
        while (left >= sizeof(ElfW(Nhdr))) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)p;
            size_t nsz = (nh->n_namesz + 3) & ~(size_t)3, dsz = (nh->n_descsz + 3) & ~(size_t)3;
            size_t total = sizeof *nh + nsz + dsz;
            if (total > left)
                break;
            const char *name = (const char *)(p + sizeof *nh);
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
                const uint8_t *d = p + sizeof *nh + nsz;
                size_t o = 0;
                for (size_t k = 0; k < nh->n_descsz && o + 3 < sizeof m->build_id; k++)
                    o += (size_t)snprintf(m->build_id + o, sizeof m->build_id - o, "%02x", d[k]);
                return 1;
            }
            p += total;
            left -= total;
        }
    }
    return 1;
}

static int read_maps(amap *maps, size_t *n_out)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return -errno;
    char line[1024];
    size_t n = 0;
    while (fgets(line, sizeof line, f) && n < MAX_MAPS) {
        uintptr_t lo, hi, off;
        char perm[8];
        int pos = 0;
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s %" SCNxPTR " %*s %*s %n", &lo, &hi, perm,
                   &off, &pos) < 4 || pos == 0)
            continue;
        if (perm[2] != 'x')
            continue;
        char *path = line + pos;
        path[strcspn(path, "\n")] = 0;
        if (path[0] != '/')
            continue; /* [vdso], anonymous JIT code: no file */
        amap *m = &maps[n++];
        memset(m, 0, sizeof *m);
        m->lo = lo, m->hi = hi, m->off = off;
        snprintf(m->path, sizeof m->path, "%s", path);
        bid_ctx c = {m};
        dl_iterate_phdr(bid_cb, &c);
    }
    fclose(f);
    *n_out = n;
    return 0;
}

static amap *find_map(amap *maps, size_t n, uintptr_t pc)
{
    for (size_t i = 0; i < n; i++)
        if (pc >= maps[i].lo && pc < maps[i].hi)
            return &maps[i];
    return NULL;
}

/* Tiny PC -> location id cache (open addressing), per export. */
typedef struct loc_ent {
    uintptr_t pc;
    uint64_t id;
} loc_ent;

static int location_for(pd_profile_builder *b, amap *maps, size_t n_maps, loc_ent *cache,
                        size_t ccap, uintptr_t pc, uint64_t *id, pd_err *err)
{
    size_t h = (size_t)((pc * 0x9e3779b97f4a7c15ull) >> 20) & (ccap - 1);
    while (cache[h].pc && cache[h].pc != pc)
        h = (h + 1) & (ccap - 1);
    if (cache[h].pc == pc) {
        *id = cache[h].id;
        return 0;
    }
    int rc;
    uint64_t map_id = 0;
    amap *m = find_map(maps, n_maps, pc);
    if (m) {
        if (!m->id) {
            pd_pprof_mapping pm = {.memory_start = m->lo, .memory_limit = m->hi,
                                   .file_offset = m->off, .has_functions = true};
            rc = pd_profile_builder_mapping(b, &pm, m->path, m->build_id, &m->id, err);
            if (rc < 0)
                return rc;
        }
        map_id = m->id;
    }
    pd_pprof_line line = {0};
    size_t n_line = 0;
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (dladdr1((void *)pc, &info, (void **)&sym, RTLD_DL_SYMENT) && info.dli_sname && sym &&
        pc >= (uintptr_t)info.dli_saddr &&
        pc < (uintptr_t)info.dli_saddr + (sym->st_size ? sym->st_size : 1)) {
        rc = pd_profile_builder_function(b, info.dli_sname, info.dli_sname,
                                         m ? m->path : info.dli_fname, 0, &line.function_id, err);
        if (rc < 0)
            return rc;
        n_line = 1;
    }
    rc = pd_profile_builder_location(b, map_id, pc, &line, n_line, id, err);
    if (rc < 0)
        return rc;
    cache[h].pc = pc;
    cache[h].id = *id;
    return 0;
}

int pd__agent_export_pprof(const pd__agent_export *e, pd_buf *out, pd_err *err)
{
    int rc;
    pd_profile_builder *b = NULL;
    pd_profile prof;
    int have_prof = 0;
    size_t n_maps = 0, ccap = 1;
    amap *maps = calloc(MAX_MAPS, sizeof *maps);
    size_t n_pc = 0;
    for (size_t i = 0; i < e->n_stack; i++)
        n_pc += e->stack[i].depth;
    while (ccap < 2 * n_pc + 16)
        ccap <<= 1;
    loc_ent *cache = calloc(ccap, sizeof *cache);
    if (!maps || !cache) {
        rc = pd_err_set(err, PD_ENOMEM, "agent: out of memory exporting a profile");
        goto out;
    }
    rc = read_maps(maps, &n_maps);
    if (rc < 0) {
        pd_err_set(err, rc, "agent: cannot read /proc/self/maps: %s", strerror(-rc));
        goto out;
    }
    rc = pd_profile_builder_new(NULL, &b);
    if (rc < 0) {
        pd_err_set(err, rc, "agent: out of memory");
        goto out;
    }
    for (size_t i = 0; i < e->n_type; i++)
        if ((rc = pd_profile_builder_sample_type(b, e->type[i], e->unit[i], err)) < 0)
            goto out;
    if ((rc = pd_profile_builder_period(b, e->period_type, e->period_unit, e->period, err)) < 0)
        goto out;
    if (e->comment && (rc = pd_profile_builder_comment(b, e->comment, err)) < 0)
        goto out;
    pd_profile *p = pd_profile_builder_profile(b);
    p->time_nanos = e->time_nanos;
    p->duration_nanos = e->duration_nanos;
    if (e->default_type) {
        int64_t s = pd_profile_builder_string(b, e->default_type, err);
        if (s < 0) {
            rc = (int)s;
            goto out;
        }
        p->default_sample_type = s;
    }
    for (size_t i = 0; i < e->n_stack; i++) {
        const pd__agent_export_stack *s = &e->stack[i];
        uint64_t loc[PD__AGENT_MAX_DEPTH];
        uint32_t depth = s->depth > PD__AGENT_MAX_DEPTH ? PD__AGENT_MAX_DEPTH : s->depth;
        for (uint32_t k = 0; k < depth; k++)
            if ((rc = location_for(b, maps, n_maps, cache, ccap, s->pc[k], &loc[k], err)) < 0)
                goto out;
        if ((rc = pd_profile_builder_sample(b, loc, depth, s->value, NULL, 0, err)) < 0)
            goto out;
    }
    if ((rc = pd_profile_builder_finish(b, &prof, err)) < 0)
        goto out;
    have_prof = 1;
    rc = pd_profile_encode(&prof, true, out);
    if (rc < 0)
        pd_err_set(err, rc, "agent: cannot encode the profile (%s)", pd_strerror(rc));
out:
    if (have_prof)
        pd_profile_release(&prof);
    pd_profile_builder_free(b);
    free(cache);
    free(maps);
    return rc;
}
