/*
 * agent/export.c — stacks of PCs to gzip pprof, in-process.
 *
 * Mappings: the executable ('x') lines of /proc/self/maps that name a file
 * (start, limit, file offset, path), each with the GNU build id found by
 * dl_iterate_phdr in the PT_NOTE segments of the loaded object whose
 * PT_LOAD holds the mapping's start. Locations: one per distinct PC, in
 * its mapping. Functions: dladdr1's symbol when the PC lies inside the
 * symbol's size; else the function symbol of the mapping's file's .symtab
 * (read with libelf, once per mapping and export, only for mappings with
 * such PCs) that holds the PC's address in the file (PC minus the
 * object's load bias from dl_iterate_phdr): static functions, and
 * programs linked without -rdynamic. A PC in neither (a stripped file)
 * gets no name rather than a wrong one; pprof shows its address.
 */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
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

typedef struct fsym {
    uint64_t lo, hi; /* file addresses [lo, hi) */
    char *name;
} fsym;

typedef struct amap {
    uintptr_t lo, hi, off;
    uintptr_t bias; /* load bias of the object (dlpi_addr) */
    char path[256];
    char build_id[80];
    uint64_t id; /* builder mapping id, 0 until used */
    int syms_read;
    fsym *syms; /* the file's .symtab functions, sorted by lo */
    size_t n_syms;
} amap;

static int sym_cmp(const void *a, const void *b)
{
    const fsym *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Reads the STT_FUNC symbols of path's .symtab into m (none when the file
 * is stripped or unreadable: no error, the PCs stay unnamed). */
static void read_symtab_file(amap *m, const char *path);

/* m's file's .symtab, else that of its separate debug file found by build
 * id as Debian's -dbg/-dbgsym packages install it
 * (/usr/lib/debug/.build-id/xx/rest.debug). */
static void read_symtab(amap *m)
{
    m->syms_read = 1;
    if (elf_version(EV_CURRENT) == EV_NONE)
        return;
    read_symtab_file(m, m->path);
    if (!m->n_syms && strlen(m->build_id) > 2) {
        char dbg[200];
        snprintf(dbg, sizeof dbg, "/usr/lib/debug/.build-id/%.2s/%s.debug", m->build_id,
                 m->build_id + 2);
        read_symtab_file(m, dbg);
    }
}

static void read_symtab_file(amap *m, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    Elf_Scn *scn = NULL;
    while (e && (scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !sh.sh_entsize)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        size_t n = d ? sh.sh_size / sh.sh_entsize : 0;
        if (n > 4000000)
            n = 4000000;
        fsym *v = n ? malloc(n * sizeof *v) : NULL;
        size_t k = 0;
        for (size_t i = 0; v && i < n; i++) {
            GElf_Sym gs;
            if (!gelf_getsym(d, (int)i, &gs) || GELF_ST_TYPE(gs.st_info) != STT_FUNC ||
                gs.st_shndx == SHN_UNDEF || gs.st_value == 0)
                continue;
            const char *name = elf_strptr(e, sh.sh_link, gs.st_name);
            if (!name || !*name || !(v[k].name = strdup(name)))
                continue;
            v[k].lo = gs.st_value;
            v[k].hi = gs.st_value + (gs.st_size ? gs.st_size : 1);
            k++;
        }
        if (k) {
            qsort(v, k, sizeof *v, sym_cmp);
            m->syms = v;
            m->n_syms = k;
        } else {
            free(v);
        }
        break;
    }
    if (e)
        elf_end(e);
    close(fd);
}

/* The .symtab function of m holding pc, or NULL. */
static const char *symtab_name(amap *m, uintptr_t pc)
{
    if (!m->syms_read)
        read_symtab(m);
    uint64_t a = (uint64_t)(pc - m->bias);
    size_t lo = 0, hi = m->n_syms;
    while (lo < hi) { /* the last symbol with lo <= a */
        size_t mid = lo + (hi - lo) / 2;
        if (m->syms[mid].lo <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo && a < m->syms[lo - 1].hi ? m->syms[lo - 1].name : NULL;
}

static void free_symtabs(amap *maps, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < maps[i].n_syms; k++)
            free(maps[i].syms[k].name);
        free(maps[i].syms);
    }
}

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
    m->bias = info->dlpi_addr;
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
                   &off, &pos) < 4 ||
            pos == 0)
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
            pd_pprof_mapping pm = {.memory_start = m->lo,
                                   .memory_limit = m->hi,
                                   .file_offset = m->off,
                                   .has_functions = true};
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
    } else if (m) {
        const char *name = symtab_name(m, pc);
        if (name) {
            rc = pd_profile_builder_function(b, name, name, m->path, 0, &line.function_id, err);
            if (rc < 0)
                return rc;
            n_line = 1;
        }
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
    if (maps)
        free_symtabs(maps, n_maps);
    free(maps);
    return rc;
}
