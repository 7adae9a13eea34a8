/*
 * symbolize/symbolize.h — names for frames that reach profd as addresses
 * (profd-agent's frames of stripped files, any pprof whose locations have
 * a mapping with a build ID but no lines). A query-side service (DESIGN.md
 * §2): stored profiles keep their addresses; answers are named when they
 * are made, so debug info that arrives later names old profiles too.
 *
 * Where debug info for a build ID comes from, first found wins:
 *   1. <cache dir>/<build id>/debuginfo — uploaded (POST
 *      /api/v1/debuginfo/{build_id}, `profd debuginfo upload`) or fetched
 *      earlier from debuginfod;
 *   2. /usr/lib/debug/.build-id/<xx>/<rest>.debug (Debian's -dbgsym);
 *   3. the mapping's own file on this host, when its build ID matches;
 *   4. debuginfod servers (libdebuginfod, $DEBUGINFOD_URLS, elfutils'
 *      convention; none set: skipped), the file copied into 1.
 * From the file: the function from .symtab/.dynsym (symbolize/elf.h), the
 * source file and line from DWARF (libdw) when present (the CU found through
 * .debug_aranges, else through the CUs' own ranges: clang writes no aranges
 * by default), and the functions inlined at the address
 * (DW_TAG_inlined_subroutine scopes): then the location gets one line per
 * frame, innermost first, as profile.proto says ("the last entry represents
 * the caller into which the preceding entries were inlined") — each inlined
 * function by its DWARF name (DW_AT_abstract_origin's linkage name, else
 * name) with the line table's file and line for the innermost and the
 * inlined subroutine's DW_AT_call_file/DW_AT_call_line for each caller; the
 * last line is the symbol table's function (at most 64 lines, the outer
 * inlined ones dropped past that). A build ID found
 * nowhere is asked again after RETRY_MS (5 minutes) or after an upload.
 * A frame that cannot be named is named "<file base name>+0x<offset>"
 * (offset in the file), never left empty.
 *
 * Results cache (symcache.h; format: docs/format/symbol_cache.md): each
 * named answer (the lines of one file offset of one build ID, innermost
 * first) is kept in <cache dir>/<build id>/symbols.cache, an append-only
 * file of CRC32C-checked records behind a header naming the debug file the
 * answers came from (where it was found, size, mtime, device, inode). The
 * file of a build ID is read into memory on its first use (at most 64 build
 * IDs' at once and 64 MiB of their files together, ~2.1x that in memory;
 * least recently used closed first); an address found there is
 * named without opening the debug file (no ELF, no DWARF: also after a
 * restart). Kept valid: the header's file is checked with stat() on load
 * against the file a lookup would use now (another or a changed file drops
 * the cache: an upload, a new /usr/lib/debug file; a file that is gone
 * with none in its place keeps it: the answers came from this build ID);
 * an upload (pd_symbolizer_store) deletes it at once. Unnamed answers are never kept, so debug info
 * that comes later names old profiles. Bad files: a header that fails its checks keeps nothing, a
 * bad record (torn tail, CRC) keeps the records before it; the rest is rebuilt by later answers
 * (counted: /metrics below). Bounded: max_cache_bytes per build ID's file (answers past it are not
 * kept; the default 4 MiB holds ~32,000 addresses of ~130 bytes, more than the hot code of one
 * binary) and the 64 MiB of files in memory above (~135 MiB of RSS at most). No fsync (a cache:
 * what a crash tears is found by the CRCs and recomputed). Thread-safe: one mutex, never held over
 * a debuginfod fetch; an answer that needs a build ID another is fetching waits for that fetch (one
 * fetch per build ID at a time), others go on.
 */
#ifndef PD_SYMBOLIZE_SYMBOLIZE_H
#define PD_SYMBOLIZE_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/error.h"
#include "pprof/pprof.h"

typedef struct pd_symbolizer pd_symbolizer;

typedef struct pd_symbolizer_opts {
    const char *cache_dir;      /* created when missing (required) */
    bool use_debuginfod;        /* ask $DEBUGINFOD_URLS (when set) */
    const char *debug_dir;      /* NULL: /usr/lib/debug */
    size_t max_upload_bytes;    /* 0: 1 GiB */
    size_t max_cache_bytes;     /* results cache file per build ID, bytes; 0: 4 MiB */
    size_t max_cache_mem_bytes; /* results caches' file bytes in memory together; 0: 64 MiB */
} pd_symbolizer_opts;

/* Creates the cache directory and the symbolizer. Errors: -errno (the
 * directory; err names it), PD_ENOMEM. Also sets DEBUGINFOD_CACHE_PATH to
 * <cache dir>/.debuginfod-client when unset (call before threads start). */
int pd_symbolizer_new(const pd_symbolizer_opts *o, pd_symbolizer **out /* OUT */, pd_err *err);
void pd_symbolizer_free(pd_symbolizer *s);

/* Names, in place, every location of p that has no line and whose mapping
 * (with a build ID, or a file) covers it: a function (and file/line when
 * DWARF has them; one line per inlined frame, innermost first, when DWARF
 * says functions are inlined there) from the debug info, else
 * "<file>+0x<off>". New lines, functions and strings live in p's arena. p
 * must be indexed; it is re-indexed. 0, PD_ENOMEM (p is then still valid,
 * maybe partly named). */
int pd_symbolizer_profile(pd_symbolizer *s, pd_profile *p, pd_err *err);

/* Stores data[0..len) (an ELF file: a .debug file or an unstripped
 * binary) as the debug info of build_id. Checked: an ELF file whose GNU
 * build ID equals build_id (case-insensitive); written to a temporary file,
 * fsynced, renamed; build_id's results cache (memory and file) is dropped. Errors: PD_EINVAL (bad
 * build ID, not ELF, no or another build ID: err says which), PD_ETOOBIG (max_upload_bytes),
 * -errno. */
int pd_symbolizer_store(pd_symbolizer *s, const char *build_id, const void *data, size_t len,
                        pd_err *err);

/* Describes the symbolizer's /metrics families (base/metrics.h):
 * profd_symbolize_frames_total{result="named"|"unnamed"},
 * profd_debuginfod_fetches_total{result="found"|"missing"},
 * profd_debuginfo_uploads_total{result="stored"|"rejected"},
 * profd_symbolize_cache_lookups_total{result="hit"|"miss"} (address-only
 * frames with a build ID, per answer),
 * profd_symbolize_cache_corrupt_total{part="header"|"record"} (files found
 * damaged on load),
 * profd_symbolize_cache_invalidations_total{reason="upload"|"source_changed"},
 * profd_symbolize_cache_full_total (answers not kept: file at its cap). */
void pd_symbolizer_describe_metrics(void);

/* The process-wide symbolizer the query layer's answers go through (set by
 * `profd serve` at start; NULL: no symbolization). */
void pd_symbolizer_set_global(pd_symbolizer *s);
pd_symbolizer *pd_symbolizer_global(void);

/* `profd debuginfo upload [--url=URL] FILE...` (upload_main.c): argv[0]
 * is "debuginfo". Returns the exit code: 0 all uploaded, 1 some file
 * failed, 2 usage. */
int pd_debuginfo_main(int argc, char **argv);

#endif
