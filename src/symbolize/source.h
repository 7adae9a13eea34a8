/*
 * symbolize/source.h — the text of a program's source file, for the UI's
 * source view (issue 31 item 7; api/source.c serves it).
 *
 * Where a file comes from, first found wins:
 *   1. debuginfod, when the frames' mapping has a build ID and
 *      $DEBUGINFOD_URLS is set: libdebuginfod's debuginfod_find_source
 *      (`GET /buildid/BUILDID/source/ABSOLUTE-PATH`), for an absolute path
 *      as DWARF names it; the client caches it (DEBUGINFOD_CACHE_PATH);
 *   2. the local source directories (`--ui.source-dir=[PREFIX=]DIR`, in
 *      order). With a PREFIX, a path that starts with it (whole components)
 *      is looked up as DIR + the rest; without one, as DIR + the path's
 *      suffixes, longest first (/home/u/app/main.go: DIR/home/u/app/main.go,
 *      DIR/u/app/main.go, DIR/app/main.go, DIR/main.go) — pprof's
 *      -source_path and -trim_path idea.
 * Confinement: a path with a ".." component is never looked up locally, and
 * a file opened under DIR must resolve (symlinks followed, through
 * /proc/self/fd) to a regular file inside DIR's own real path: nothing
 * outside the configured directories is ever read. Paths come from
 * profiles, which are input from the network.
 * Size: files over max_bytes are refused (named in the message).
 */
#ifndef PD_SYMBOLIZE_SOURCE_H
#define PD_SYMBOLIZE_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include "base/buf.h"
#include "base/error.h"

/* Largest source file read unless told otherwise, bytes. */
#define PD_SOURCE_DEFAULT_MAX_BYTES ((size_t)4 << 20)

/* One --ui.source-dir: prefix NULL (or "") for "any path, by suffix". */
typedef struct pd_source_dir {
    const char *prefix;
    const char *dir;
} pd_source_dir;

/* Parses a --ui.source-dir value "DIR" or "PREFIX=DIR" into *out (pointers
 * into arg, which arg's buffer is modified to split: pass a copy).
 * PD_EINVAL when DIR is empty or PREFIX is not an absolute path. */
int pd_source_dir_parse(char *arg, pd_source_dir *out /* OUT */);

/* Where to look and how much to read (borrowed for the call). */
typedef struct pd_source_opts {
    const pd_source_dir *dirs;
    size_t n_dirs;
    bool use_debuginfod; /* ask $DEBUGINFOD_URLS (when set) */
    size_t max_bytes;    /* 0: PD_SOURCE_DEFAULT_MAX_BYTES */
} pd_source_opts;

/* A file found: text[0..len) (malloc'd, NUL-terminated, made valid UTF-8:
 * bad bytes become U+FFFD), where it came from ("debuginfod" or
 * "directory") and what: the build ID asked, or the local file's path. */
typedef struct pd_source_file {
    char *text;
    size_t len;
    const char *origin; /* static */
    char where[4200];
} pd_source_file;

/* Finds path (as the profile names it: DWARF's or Go's file name) of the
 * program with build IDs build_ids[0..n_ids) (hex, tried in order; may be
 * empty) per the rules above. 0 with *out filled (pd_source_file_release
 * it); PD_ENOTFOUND when nowhere: `tried` (appended to, may be NULL) then
 * says what was tried, "; "-separated, for a person ("debuginfod build ID
 * 1a2b...: not found", "--ui.source-dir /src: no main.go under it",
 * "/src/big.c: 9000000 bytes, over the 4194304-byte cap"); PD_ENOMEM. A
 * file that is not text (a NUL byte) is skipped and named in tried. */
int pd_source_find(const pd_source_opts *o, const char *const *build_ids, size_t n_ids,
                   const char *path, pd_source_file *out /* OUT */, pd_buf *tried);

/* Frees out's text. */
void pd_source_file_release(pd_source_file *f);

#endif
