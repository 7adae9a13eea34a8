/*
 * symbolize/symcache.h — the results cache of one build ID: the answers the
 * symbolizer (symbolize.h) gave for file offsets of that build ID, kept in
 * memory and in an append-only file, <cache dir>/<build id>/symbols.cache,
 * so that an address named once is named again without opening its debug
 * file, also after a restart. Internal to symbolize/ (symbolize.c; the
 * fuzz target fuzz_symcache reads files through it). Layout: docs/format/
 * symbol_cache.md, and the top of symcache.c.
 *
 * What a cache holds is valid for one debug file only: the header names it
 * (pd_symcache_source: where it was found, its size, mtime, device and
 * inode). The caller (symbolize.c) compares that with the file it would
 * use now and resets the cache when they differ; this module only keeps
 * what it is given. Only named answers are kept (never "<file>+0x<off>").
 *
 * A file read from disk is untrusted: pd_symcache_parse checks the magic,
 * version and header CRC, then each record's length and CRC32C
 * (base/crc32c.h) and its fields; it keeps the records before the first bad
 * one and reports where that one starts. Nothing in a file is asserted on.
 *
 * Not thread-safe: the symbolizer calls it under its mutex.
 */
#ifndef PD_SYMBOLIZE_SYMCACHE_H
#define PD_SYMBOLIZE_SYMCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/arena.h"
#include "base/buf.h"
#include "base/u64map.h"

/* Largest cache file of one build ID unless told otherwise, bytes. */
#define PD_SYMCACHE_DEFAULT_MAX_BYTES ((size_t)4 << 20)
/* Largest record payload, bytes (64 lines of long C++ names fit). */
#define PD_SYMCACHE_MAX_RECORD ((uint32_t)256 << 10)
/* Most lines (frames) of one record: symbolize.c's MAX_FRAMES. */
#define PD_SYMCACHE_MAX_LINES 64
#define PD_SYMCACHE_VERSION 1

/* Where the debug file of a build ID was found (symbolize.h's order). */
enum {
    PD_SYMCACHE_SRC_CACHE_DIR = 1,   /* <cache dir>/<bid>/debuginfo: upload or debuginfod copy */
    PD_SYMCACHE_SRC_DEBUG_DIR = 2,   /* <debug dir>/.build-id/xx/rest.debug */
    PD_SYMCACHE_SRC_MAPPED_FILE = 3, /* the mapping's own file on this host */
    PD_SYMCACHE_SRC_DEBUGINFOD = 4   /* libdebuginfod's own copy (the cache dir copy failed) */
};

/* The identity of a debug file: answers made from it stay right while all
 * of this is unchanged. */
typedef struct pd_symcache_source {
    uint8_t kind;     /* PD_SYMCACHE_SRC_*; 0: none */
    uint64_t size;    /* bytes */
    int64_t mtime_ns; /* st_mtim, nanoseconds since the epoch */
    uint64_t dev, ino;
    char path[4096]; /* as opened; at most 4095 bytes */
} pd_symcache_source;

/* True when a and b name the same file in the same state. */
bool pd_symcache_source_equal(const pd_symcache_source *a, const pd_symcache_source *b);

/* One line of an answer (a pprof Line with its Function): innermost first,
 * as pd_symbolizer_profile makes them. Strings are never NULL ("" when
 * unknown: the file of a frame without DWARF). */
typedef struct pd_symcache_line {
    const char *name;
    const char *system_name;
    const char *file;
    int64_t line; /* 0: unknown; >= 0 */
} pd_symcache_line;

/* The answer for one file offset. */
typedef struct pd_symcache_rec {
    uint64_t off;            /* file offset in the build ID's file */
    uint32_t n_lines;        /* 1..PD_SYMCACHE_MAX_LINES */
    pd_symcache_line *lines; /* in the cache's arena */
} pd_symcache_rec;

/* One build ID's cache. Fields are read by symbolize.c; change them only
 * through the functions below. */
typedef struct pd_symcache {
    char build_id[129]; /* lowercase hex */
    char *path;         /* the file (malloc'd); NULL: memory only (fuzz, tests) */
    bool has_source;    /* src is set (from the file's header or a reset) */
    pd_symcache_source src;
    pd_arena arena;   /* records' lines and strings */
    pd_u64map by_off; /* off -> index into recs */
    pd_symcache_rec *recs;
    size_t n_recs, cap_recs;
    size_t max_bytes;    /* cap on the file's size */
    uint64_t file_bytes; /* good bytes now in the file (0: to be written anew) */
    pd_buf pending;      /* records added, not written yet */
    bool rewrite;        /* the file is written anew (header first) on flush */
    int64_t used;        /* the symbolizer's LRU clock */
} pd_symcache;

/* What pd_symcache_parse / pd_symcache_load found. */
typedef struct pd_symcache_stats {
    size_t records;      /* records kept */
    bool bad_header;     /* a file with a torn header or wrong magic/version/CRC/build ID:
                            nothing kept (a missing file is not bad) */
    bool bad_record;     /* a record failed its checks (torn tail, CRC, fields) */
    uint64_t good_bytes; /* the length of the good prefix (header + kept records) */
} pd_symcache_stats;

/* Sets up an empty cache of build_id (lowercase hex, copied) stored at path
 * (copied; NULL: memory only) holding at most max_bytes (0:
 * PD_SYMCACHE_DEFAULT_MAX_BYTES). 0 or PD_ENOMEM. */
int pd_symcache_init(pd_symcache *c, const char *build_id, const char *path, size_t max_bytes);

/* Frees what c holds (pending records not written: pd_symcache_flush
 * first). Safe on a zeroed or released cache. */
void pd_symcache_release(pd_symcache *c);

/* Reads the file data[0..len) into c (empty, from pd_symcache_init): the
 * header, then the records up to the first bad one (or up to max_bytes).
 * Duplicated offsets: the later record wins. Returns 0 (also for a bad
 * file: st says what was kept) or PD_ENOMEM (c then holds what was read
 * before). */
int pd_symcache_parse(pd_symcache *c, const uint8_t *data, size_t len,
                      pd_symcache_stats *st /* OUT */);

/* Reads c->path (a missing file is no error: nothing kept, nothing bad) through pd_symcache_parse,
 * at most max_bytes of it. A file with a bad tail is truncated to its good prefix, so that records
 * appended later follow good ones; a file with a bad header is rewritten on the next flush. 0,
 * PD_ENOMEM, or -errno reading it (c then empty, rewritten on flush). */
int pd_symcache_load(pd_symcache *c, pd_symcache_stats *st /* OUT */);

/* The answer for off, or NULL. Valid until c changes. */
const pd_symcache_rec *pd_symcache_get(const pd_symcache *c, uint64_t off);

/* Drops every record and makes src (copied; NULL: none yet, add refuses
 * until a reset with one) the debug file of what is added from now on; the
 * file is written anew on the next flush. */
void pd_symcache_reset(pd_symcache *c, const pd_symcache_source *src);

/* Adds the answer lines[0..n) for off (strings copied) to memory and to the
 * pending bytes. n must be 1..PD_SYMCACHE_MAX_LINES, and c must have a
 * source (pd_symcache_reset). 0; PD_ETOOBIG when the file would pass
 * max_bytes (nothing added); PD_EINVAL (no source, bad n, or the record
 * would pass PD_SYMCACHE_MAX_RECORD: nothing added); PD_ENOMEM. */
int pd_symcache_add(pd_symcache *c, uint64_t off, const pd_symcache_line *lines, size_t n);

/* Writes the pending bytes to c->path: appended (O_APPEND, one write, no
 * fsync), or, after a reset (rewrite set), the header and the records added
 * since into path.tmp, renamed over path (no fsync either: a cache; what a
 * crash tears is found by the CRCs and recomputed). A no-op without a path
 * or pending bytes. 0 or -errno (c is then reset to its source: memory
 * records dropped, the file written anew on the next flush). */
int pd_symcache_flush(pd_symcache *c);

/* Encodes the header of c (its build ID and source) into out (appended).
 * 0, PD_ENOMEM. For tests and the fuzz target's seeds. */
int pd_symcache_encode_header(const pd_symcache *c, pd_buf *out);

#endif
