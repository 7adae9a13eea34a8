/*
 * symbolize/elf.c — build ID, PT_LOAD segments and function symbols of an
 * ELF file through libelf (see elf.h).
 *
 * Symbols: STT_FUNC and STT_GNU_IFUNC with a non-zero value and a section,
 * from .symtab when the file has one, else from .dynsym (a stripped shared
 * library keeps its exported functions there). A symbol of size 0 (hand
 * written assembly) ends where the next one starts. Sorted by address;
 * symbols at the same address keep the first (global before local is not
 * guaranteed; either name is right). A symbol at the last address or whose
 * size passes the end of the address space (corrupt files) is clipped or
 * skipped, so every symbol covers [lo, hi) with lo < hi. A bad section is skipped, never
 * trusted: every index is checked against its table's size by libelf.
 */
#include "symbolize/elf.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SYMS 4000000

static int sym_cmp(const void *a, const void *b)
{
    const pd_elf_sym *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return x->hi > y->hi ? -1 : x->hi < y->hi; /* the larger first */
}

static void hex(const uint8_t *d, size_t n, char *out, size_t cap)
{
    static const char h[] = "0123456789abcdef";
    size_t j = 0;
    for (size_t i = 0; i < n && j + 2 < cap; i++) {
        out[j++] = h[d[i] >> 4];
        out[j++] = h[d[i] & 15];
    }
    out[j] = 0;
}

/* The NT_GNU_BUILD_ID of note data d (an SHT_NOTE section or PT_NOTE). */
static bool note_build_id(Elf *e, Elf_Data *d, char *out, size_t cap)
{
    size_t off = 0, name_off, desc_off;
    GElf_Nhdr nh;
    while (d && (off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
            !memcmp((const char *)d->d_buf + name_off, "GNU", 4) && nh.n_descsz > 0 &&
            nh.n_descsz <= 64) {
            hex((const uint8_t *)d->d_buf + desc_off, nh.n_descsz, out, cap);
            return true;
        }
    }
    (void)e;
    return false;
}

static void find_build_id(Elf *e, char *out, size_t cap)
{
    out[0] = 0;
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;
    while ((scn = elf_nextscn(e, scn))) {
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
            continue;
        if (note_build_id(e, elf_getdata(scn, NULL), out, cap))
            return;
    }
    size_t n;
    if (elf_getphdrnum(e, &n) != 0)
        return;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_NOTE)
            continue;
        Elf_Data *d = elf_getdata_rawchunk(e, ph.p_offset, ph.p_filesz, ELF_T_NHDR);
        if (note_build_id(e, d, out, cap))
            return;
    }
}

static int read_syms(Elf *e, pd_elf_info *info, Elf64_Word want)
{
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;
    while ((scn = elf_nextscn(e, scn))) {
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != want || sh.sh_entsize == 0)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        if (!d)
            continue;
        size_t n = sh.sh_size / sh.sh_entsize;
        if (n > MAX_SYMS)
            n = MAX_SYMS;
        pd_elf_sym *syms = pd_arena_calloc(&info->arena, n ? n : 1, sizeof *syms);
        if (!syms)
            return PD_ENOMEM;
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            GElf_Sym s;
            if (!gelf_getsym(d, (int)i, &s))
                break;
            int t = GELF_ST_TYPE(s.st_info);
            if ((t != STT_FUNC && t != STT_GNU_IFUNC) || s.st_value == 0 ||
                s.st_value == UINT64_MAX || s.st_shndx == SHN_UNDEF)
                continue;
            const char *name = elf_strptr(e, sh.sh_link, s.st_name);
            if (!name || !*name)
                continue;
            const char *at = strchr(name, '@'); /* versioned: memcpy@@GLIBC_2.14 */
            if (at == name) /* only a version ("@@V", a crafted file): no name */
                continue;
            char *copy =
                pd_arena_strndup(&info->arena, name, at ? (size_t)(at - name) : strlen(name));
            if (!copy)
                return PD_ENOMEM;
            syms[k].lo = s.st_value;
            /* a size past the address space (a corrupt file) ends there */
            syms[k].hi = s.st_value + s.st_size < s.st_value ? UINT64_MAX : s.st_value + s.st_size;
            syms[k].name = copy;
            k++;
        }
        qsort(syms, k, sizeof *syms, sym_cmp);
        size_t w = 0;
        for (size_t i = 0; i < k; i++) {
            if (w && syms[w - 1].lo == syms[i].lo)
                continue;
            syms[w++] = syms[i];
        }
        for (size_t i = 0; i < w; i++) /* size 0: up to the next symbol */
            if (syms[i].hi == syms[i].lo)
                syms[i].hi = i + 1 < w ? syms[i + 1].lo : syms[i].lo + 1;
        info->syms = syms;
        info->n_syms = w;
        return 0;
    }
    return 0;
}

static int read_elf(Elf *e, const char *name, bool want_syms, pd_elf_info *out, pd_err *err)
{
    if (elf_kind(e) != ELF_K_ELF)
        return pd_err_set(err, PD_EPARSE, "%s: not an ELF file", name);
    find_build_id(e, out->build_id, sizeof out->build_id);
    size_t n;
    if (elf_getphdrnum(e, &n) == 0 && n > 0) {
        out->loads = pd_arena_calloc(&out->arena, n, sizeof *out->loads);
        if (!out->loads)
            return PD_ENOMEM;
        for (size_t i = 0; i < n; i++) {
            GElf_Phdr ph;
            if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
                continue;
            out->loads[out->n_loads++] =
                (pd_elf_load){.offset = ph.p_offset, .vaddr = ph.p_vaddr, .filesz = ph.p_filesz};
        }
    }
    if (!want_syms)
        return 0;
    int rc = read_syms(e, out, SHT_SYMTAB);
    if (rc < 0)
        return rc;
    if (out->n_syms) {
        out->from_symtab = true;
        return 0;
    }
    return read_syms(e, out, SHT_DYNSYM);
}

int pd_elf_read_fd(int fd, const char *name, bool want_syms, pd_elf_info *out, pd_err *err)
{
    memset(out, 0, sizeof *out);
    pd_arena_init(&out->arena);
    if (elf_version(EV_CURRENT) == EV_NONE)
        return pd_err_set(err, PD_EINVAL, "libelf: %s", elf_errmsg(-1));
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!e)
        return pd_err_set(err, PD_EPARSE, "%s: not an ELF file (%s)", name, elf_errmsg(-1));
    int rc = read_elf(e, name, want_syms, out, err);
    elf_end(e);
    if (rc < 0)
        pd_elf_info_release(out);
    return rc;
}

int pd_elf_read(const char *path, bool want_syms, pd_elf_info *out, pd_err *err)
{
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return pd_err_set(err, -e, "%s: %s", path, strerror(e));
    }
    int rc = pd_elf_read_fd(fd, path, want_syms, out, err);
    close(fd);
    return rc;
}

void pd_elf_info_release(pd_elf_info *info)
{
    pd_arena_release(&info->arena);
    info->loads = NULL;
    info->syms = NULL;
    info->n_loads = info->n_syms = 0;
}

uint64_t pd_elf_offset_to_vaddr(const pd_elf_info *info, uint64_t off)
{
    for (size_t i = 0; i < info->n_loads; i++) {
        const pd_elf_load *l = &info->loads[i];
        if (off >= l->offset && off - l->offset < l->filesz)
            return off - l->offset + l->vaddr;
    }
    return off;
}

const pd_elf_sym *pd_elf_lookup(const pd_elf_info *info, uint64_t vaddr)
{
    size_t lo = 0, hi = info->n_syms;
    while (lo < hi) { /* first symbol with lo > vaddr */
        size_t mid = lo + (hi - lo) / 2;
        if (info->syms[mid].lo <= vaddr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    const pd_elf_sym *s = &info->syms[lo - 1];
    return vaddr < s->hi ? s : NULL;
}

int pd_elf_build_id_mem(const void *data, size_t len, char *out, size_t cap, pd_err *err)
{
    out[0] = 0;
    if (elf_version(EV_CURRENT) == EV_NONE)
        return pd_err_set(err, PD_EINVAL, "libelf: %s", elf_errmsg(-1));
    /* libelf converts a file of the other byte order in place: on a copy,
     * so that the caller's bytes (an upload about to be stored) stay as
     * received */
    char *copy = malloc(len ? len : 1);
    if (!copy)
        return pd_err_set(err, PD_ENOMEM, "out of memory");
    memcpy(copy, data, len);
    Elf *e = elf_memory(copy, len);
    if (!e || elf_kind(e) != ELF_K_ELF) {
        if (e)
            elf_end(e);
        free(copy);
        return pd_err_set(err, PD_EPARSE, "not an ELF file");
    }
    find_build_id(e, out, cap);
    elf_end(e);
    free(copy);
    if (!out[0])
        return pd_err_set(err, PD_ENOTFOUND, "the ELF file has no GNU build ID note");
    return 0;
}

bool pd_elf_build_id_valid(const char *s)
{
    size_t n = strlen(s);
    if (n < 2 || n > 128 || n % 2)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
            return false;
    }
    return true;
}
