/*
 * fuzz_elf — libFuzzer target for symbolize/elf.c, which reads the debug
 * files uploaded to POST /api/v1/debuginfo/{build_id} (untrusted bytes):
 * pd_elf_build_id_mem on the input, and pd_elf_read_fd (build ID, PT_LOAD
 * segments, function symbols) on the same bytes through a memfd, then a
 * lookup of every segment's start.
 * Seed corpus: fuzz/corpus/elf (a small .debug file, a stripped program,
 * truncated and not-ELF inputs).
 * Properties besides the sanitizers: both readers agree on the build ID;
 * symbols are sorted and each covers a non-empty range; a lookup's symbol
 * holds the address.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "symbolize/elf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char bid[129];
    pd_err err;
    int rc = pd_elf_build_id_mem(data, size, bid, sizeof bid, &err);
    int fd = memfd_create("fuzz_elf", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    pd_elf_info info;
    if (pd_elf_read_fd(fd, "input", true, &info, &err) == 0) {
        if (rc == 0 && strcmp(bid, info.build_id) != 0) {
            fprintf(stderr, "build IDs differ: memory %s, file %s\n", bid, info.build_id);
            abort();
        }
        for (size_t i = 0; i < info.n_syms; i++) {
            if (info.syms[i].hi <= info.syms[i].lo)
                abort();
            if (i && info.syms[i - 1].lo >= info.syms[i].lo)
                abort();
        }
        for (size_t i = 0; i < info.n_loads; i++) {
            uint64_t va = pd_elf_offset_to_vaddr(&info, info.loads[i].offset);
            const pd_elf_sym *s = pd_elf_lookup(&info, va);
            if (s && (va < s->lo || va >= s->hi))
                abort();
        }
        pd_elf_info_release(&info);
    }
    close(fd);
    return 0;
}
