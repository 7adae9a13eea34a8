/*
 * symbolize/elf.h — what symbolization needs of one ELF file, read with
 * libelf (elfutils): its GNU build ID, its PT_LOAD segments (to turn a
 * file offset into the address the symbol table uses) and its function
 * symbols (.symtab, else .dynsym). Used by profd's symbolizer (symbolize.h)
 * and by profd-agent (agent/ebpf/), which names frames on the host when the
 * file still has symbols. Depends on base/ only.
 */
#ifndef PD_SYMBOLIZE_ELF_H
#define PD_SYMBOLIZE_ELF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/arena.h"
#include "base/error.h"

/* A function symbol: file addresses [lo, hi). */
typedef struct pd_elf_sym {
    uint64_t lo, hi;
    const char *name; /* in the pd_elf_info's arena */
} pd_elf_sym;

/* A PT_LOAD segment: file bytes [offset, offset + filesz) are loaded at
 * vaddr. */
typedef struct pd_elf_load {
    uint64_t offset, vaddr, filesz;
} pd_elf_load;

typedef struct pd_elf_info {
    char build_id[129]; /* lowercase hex of NT_GNU_BUILD_ID ("" when none) */
    pd_elf_load *loads;
    size_t n_loads;
    pd_elf_sym *syms; /* sorted by lo, without overlaps of equal lo */
    size_t n_syms;
    bool from_symtab; /* syms came from .symtab (else .dynsym or none) */
    pd_arena arena;   /* holds loads, syms and names */
} pd_elf_info;

/* Reads the ELF file at path into *out (pd_elf_info_release it). With
 * want_syms false only the build ID and segments are read. A file with no
 * symbols is not an error (n_syms 0). Errors: -errno (open), PD_EPARSE (not
 * an ELF file: err names path), PD_ENOMEM. On error *out holds nothing. */
int pd_elf_read(const char *path, bool want_syms, pd_elf_info *out /* OUT */, pd_err *err);

/* As pd_elf_read on an open descriptor (not closed; its offset is not
 * used). name is for messages. */
int pd_elf_read_fd(int fd, const char *name, bool want_syms, pd_elf_info *out /* OUT */,
                   pd_err *err);

/* Frees what info holds. Safe on a zeroed or released info. */
void pd_elf_info_release(pd_elf_info *info);

/* The file address (the symbol table's) of file offset off: through the
 * PT_LOAD segment holding it; off itself when no segment does (a file
 * without program headers). */
uint64_t pd_elf_offset_to_vaddr(const pd_elf_info *info, uint64_t off);

/* The function symbol holding file address vaddr, or NULL. */
const pd_elf_sym *pd_elf_lookup(const pd_elf_info *info, uint64_t vaddr);

/* The build ID of the ELF image in data[0..len) (an uploaded file) as
 * lowercase hex into out (cap >= 129 bytes). 0; PD_EPARSE when data is not
 * ELF; PD_ENOTFOUND when it has no build ID note. */
int pd_elf_build_id_mem(const void *data, size_t len, char *out, size_t cap, pd_err *err);

/* True when s is 2..128 lowercase or uppercase hex digits of even length
 * (a build ID as the API and file paths take it). */
bool pd_elf_build_id_valid(const char *s);

#endif
