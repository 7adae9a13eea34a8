/*
 * storage/tsdb/symbols_int.h — the symbol tables of a block (the `symbols`
 * file, docs/format/symbols.md): strings, mappings, functions, locations
 * (with their lines), stacks and sample-label sets, each deduplicated by
 * content across every profile of the block. Private to src/storage.
 *
 * One struct serves both sides:
 *   - writer: pd__symbols_init(.., writable=true), pd__symbols_add_profile for
 *     every profile, pd__symbols_encode to get the file's payload;
 *   - reader: pd__symbols_decode of a payload, which checks every reference
 *     (a string, mapping, function, location or stack id out of range is
 *     PD_ECORRUPT), so lookups afterwards need no further checks.
 *
 * Ids: every table is 0-based; references that may be "none" (a location's
 * mapping, a line's function) are stored as index+1 with 0 for none. Stack id
 * 0 is the empty stack; stack ids 1..n_stack are real stacks.
 *
 * Stack formats (chosen per block, recorded in the file):
 *   PD_STACKS_TREE: parent-pointer tree (Pyroscope symdb): node i (1-based)
 *     = (parent node < i or 0 for a root, location). Stack id = its leaf node.
 *   PD_STACKS_LIST: deduplicated location lists, leaf first.
 *
 * Not thread-safe while writing; a decoded table is read-only and may be
 * shared by threads.
 */
#ifndef PD_STORAGE_TSDB_SYMBOLS_INT_H
#define PD_STORAGE_TSDB_SYMBOLS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/buf.h"
#include "base/error.h"
#include "base/u64map.h"
#include "pprof/pprof.h"

typedef enum { PD_STACKS_TREE = 1, PD_STACKS_LIST = 2 } pd_stack_format;

typedef struct pd_sym_mapping {
    uint64_t start, limit, offset;
    uint32_t filename, build_id; /* string ids */
    uint8_t flags; /* bit 0..3: has_functions, filenames, line_numbers, inline_frames */
} pd_sym_mapping;

typedef struct pd_sym_function {
    uint32_t name, system_name, filename; /* string ids */
    int64_t start_line;
} pd_sym_function;

typedef struct pd_sym_line {
    uint32_t function; /* function index + 1, 0 = none */
    int64_t line, column;
} pd_sym_line;

typedef struct pd_sym_location {
    uint32_t mapping; /* mapping index + 1, 0 = none */
    uint64_t address;
    uint32_t first_line, n_line; /* into lines */
    uint8_t folded;
} pd_sym_location;

typedef struct pd_sym_label {
    uint32_t key, str; /* string ids */
    int64_t num;
    uint32_t num_unit; /* string id */
} pd_sym_label;

/* A content-keyed dictionary (private to symbols.c; here for the struct size). */
typedef struct pd_sym_dict {
    pd_u64map head; /* hash -> first index */
    uint32_t *next; /* chain, UINT32_MAX ends */
    uint64_t *koff; /* key bytes in keys */
    uint32_t *klen;
    pd_buf keys;
    size_t n, cap;
} pd_sym_dict;

typedef struct pd_symbols {
    pd_stack_format stack_format;
    /* strings: str[i] points at str_len[i] bytes (NUL-terminated copy) */
    const char **str;
    uint32_t *str_len;
    size_t n_str;
    pd_sym_mapping *map;
    size_t n_map;
    pd_sym_function *fn;
    size_t n_fn;
    pd_sym_location *loc;
    size_t n_loc;
    pd_sym_line *line;
    size_t n_line;
    /* stacks, 1-based (index 0 unused). TREE: parent[i], node_loc[i].
       LIST: locs of stack i are list_locs[list_off[i] .. list_off[i+1]). */
    uint32_t *parent, *node_loc;
    uint64_t *list_off;
    uint32_t *list_locs;
    size_t n_stack, n_list_locs;
    /* sample-label sets, 1-based (0 = no labels): set i is
       lab[lset_off[i] .. lset_off[i+1]) */
    uint64_t *lset_off;
    pd_sym_label *lab;
    size_t n_lset, n_lab;
    size_t max_depth; /* longest stack */

    /* writer state */
    bool writable;
    pd_sym_dict d_str, d_map, d_fn, d_loc, d_stack, d_lset; /* d_stack: LIST only */
    pd_u64map tree; /* TREE: (parent << 32 | location) -> node */
    /* TREE: a whole stack's locations (XXH3-128 of the ids, leaf first) ->
       its node, so a stack seen before costs one lookup, not one per frame:
       low 64 bits -> node here, the high 64 bits in stack_hi[node] (0 = none
       cached; a mismatch walks the tree) */
    pd_u64map stack_cache;
    uint64_t *stack_hi;
    size_t cap_hi;
    size_t cap_str, cap_map, cap_fn, cap_loc, cap_line, cap_stack, cap_list, cap_lset, cap_lab,
        cap_list_locs;
    /* reader state */
    uint8_t *raw; /* decoded payload the strings point into */
    /* damage of a version-2 file (pd__symbols_file_decode): the entries of
       the frames that did not verify, then (pd__symbols_settle_damage)
       every entry that references one. All NULL when n_bad_frames == 0.
       str_bad/map_bad/fn_bad/loc_bad are 0-based; stack_bad/lset_bad are
       1-based like the ids (index 0, the empty stack/set, is never bad). */
    uint8_t *str_bad, *map_bad, *fn_bad, *loc_bad, *stack_bad, *lset_bad;
    size_t n_bad_frames, n_frames;
    char *damage; /* malloc'ed, NULL when intact: the first bad frame or the
                     trailing bytes, naming the file and its offset */
} pd_symbols;

/* Sets up empty tables. writable: a writer (dedup dictionaries kept).
 * 0 or PD_ENOMEM. */
int pd__symbols_init(pd_symbols *s, pd_stack_format f, bool writable);
/* Frees everything s holds. Safe on a zeroed struct. */
void pd__symbols_release(pd_symbols *s);

/* Interns bytes s[0..len) as a string; *id is its string id. 0, PD_ENOMEM. */
int pd__symbols_string(pd_symbols *s, const char *str, size_t len, uint32_t *id /* OUT */);

/* Adds the symbols of p (indexed and validated): its strings, and for each
 * sample its stack and label set. Fills
 *   str_map[0..p->n_string): block string id of each profile string,
 *   stack[0..p->n_sample), lset[0..p->n_sample): ids of each sample's stack
 *   and label set.
 * Arrays are the caller's. Errors: PD_ENOMEM, PD_EINVAL (a reference of p
 * that does not resolve, err says which). */
int pd__symbols_add_profile(pd_symbols *s, const pd_profile *p, uint32_t *str_map /* OUT */,
                            uint32_t *stack /* OUT */, uint32_t *lset /* OUT */, pd_err *err);
/* pd__symbols_add_profile, or with find_only the same lookups without any
 * change to s: returns 1 (and the outputs are incomplete) as soon as one of
 * p's strings, mappings, functions, locations, stacks (tree stacks: only
 * through the whole-stack cache, where every stack added is kept) or label
 * sets is not in s yet; 0 when every one is, with the outputs filled as
 * pd__symbols_add_profile would. A find_only call only reads the writer's
 * dictionaries, so it may run while readers read s (the head's appender
 * under app_mu alone: headmem_int.h); a second writer may not run
 * meanwhile. Errors as pd__symbols_add_profile. */
int pd__symbols_map_profile(pd_symbols *s, const pd_profile *p, bool find_only,
                            uint32_t *str_map /* OUT */, uint32_t *stack /* OUT */,
                            uint32_t *lset /* OUT */, pd_err *err);

/* Appends the tables' encoding (uncompressed; docs/format/symbols.md) to out.
 * PD_ENOMEM, PD_ETOOBIG. */
int pd__symbols_encode(const pd_symbols *s, pd_buf *out);

/* Parses an encoding made by pd__symbols_encode into s (overwritten; release
 * with pd__symbols_release). Takes ownership of raw (malloc'ed, len bytes),
 * also on failure. Every reference is checked. Errors: PD_ECORRUPT (err says
 * what and at which payload offset), PD_ENOMEM. */
int pd__symbols_decode(pd_symbols *s /* OUT */, uint8_t *raw, size_t len, pd_err *err);

/* ---- the `symbols` file (docs/format/symbols.md) ----
 *
 * Version 1: "PDSY" | u8 1 | 3 x 0 | u64 payload length | one zstd frame of
 * pd__symbols_encode's payload | u32 crc32c(all before). One bad byte loses
 * the whole file.
 *
 * Version 2: every table is cut into ranges of consecutive entries of about
 * frame_bytes raw bytes; each range is its own zstd frame with its own
 * crc32c, listed in a directory (under its own crc32c) at the head:
 *
 *   "PDSY" | u8 2 | 3 x 0 | u32 D | directory (D bytes) | u32 crc32c(bytes 0..12+D) |
 *   frames, back to back
 *   directory: u8 stack format | varint n_str, n_map, n_fn, n_loc, n_stack, n_lset |
 *              varint n_frames | n_frames x (u8 table, varint count, varint zstd
 *              bytes, varint raw bytes, u32 crc32c of the zstd bytes)
 *   table 1 strings, 2 mappings, 3 functions, 4 locations, 5 stacks, 6 label sets;
 *   the frames of a table come in id order and cover it exactly.
 *   A frame's raw bytes are its entries, each encoded as in version 1 but
 *   row-wise: strings (len, bytes); tree stacks (i - parent, location); list
 *   stacks (depth, locations leaf first); the rest as version 1.
 * A frame that does not verify (crc, zstd, a reference out of range, past
 * the end of a truncated file) marks its entries bad; every other frame is
 * served. Damage in the directory loses the file (version 3: its copy).
 *
 * Version 3 (written): as version 2, with two changes (issue 27):
 *   - a frame that ends with its table below PD_SYMBOLS_SHARE_BYTES raw
 *     stays open for the next table: a frame may hold the ranges of several
 *     tables (the small tables of a block share one), listed as its parts:
 *     directory frame entry: varint n_parts | n_parts x (u8 table, varint
 *     count) | varint zstd bytes | varint raw bytes | u32 crc32c;
 *     the raw bytes are the parts' entries one after the other;
 *   - the directory again after the frames: directory (D bytes) | u32 crc32c
 *     (as the head's: over the header as written, D and the directory) |
 *     u32 D. When the head's directory (or D) does not verify, the copy is
 *     read: one damaged byte in either costs no profile.
 */

/* Appends the whole `symbols` file of s, in version (1, 2 or 3), to out.
 * zstd_level: as ZSTD_compress; frame_bytes: versions 2-3's raw bytes per
 * frame (0 = PD_SYMBOLS_FRAME_BYTES). PD_ENOMEM, PD_ETOOBIG. */
#define PD_SYMBOLS_FRAME_BYTES (16u << 10) /* bench/storage_size/RESULTS.md, "format 2" */
#define PD_SYMBOLS_FILE_VERSION 3          /* written in block format 2 */
/* Version 3: a frame whose tables end below this many raw bytes takes the
 * next table's entries too (docs/format/symbols.md). */
#define PD_SYMBOLS_SHARE_BYTES 1024u
int pd__symbols_file_encode(const pd_symbols *s, int version, int zstd_level, size_t frame_bytes,
                            pd_buf *out);

/* Parses the `symbols` file p[0..len) (path: for messages) into s (released
 * first by the caller; release with pd__symbols_release). Version 1: any
 * damage is PD_ECORRUPT. Versions 2-3: PD_ECORRUPT only when the directory
 * (version 3: and its copy) does not verify; a damaged frame is returned as 0 with
 * s->n_bad_frames > 0, its entries in the *_bad arrays and s->damage naming
 * the file and offset; the caller then calls pd__symbols_settle_damage
 * (after restoring strings it has other copies of: pd__symbols_restore_string).
 * *version receives the file's version. Errors: PD_ECORRUPT (err: file and
 * offset), PD_ENOMEM. */
int pd__symbols_file_decode(pd_symbols *s /* OUT */, const char *path, const uint8_t *p, size_t len,
                            int *version /* OUT */, pd_err *err);

/* String id of a damaged frame whose bytes are known from elsewhere (the
 * index keeps the sample-type names of each series): str[id] points at
 * bytes (borrowed: must outlive s) and it is no longer bad. Returns true if
 * id was bad; false (nothing done) otherwise. */
bool pd__symbols_restore_string(pd_symbols *s, uint32_t id, const char *bytes, uint32_t len);

/* Propagates damage: a mapping, function or label set naming a bad string,
 * a location naming a bad mapping or function, a stack holding a bad
 * location (or, tree, under a bad node) becomes bad. No-op when intact.
 * Returns the number of bad stacks + bad label sets. */
size_t pd__symbols_settle_damage(pd_symbols *s);

/* Writes the locations of stack id (0 = empty) into out[0..cap), leaf first,
 * as location indexes; returns the depth, or PD_ECORRUPT when id is out of
 * range or the stack is deeper than cap. */
int pd__symbols_stack(const pd_symbols *s, uint32_t id, uint32_t *out, size_t cap);

#endif
