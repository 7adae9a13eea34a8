/*
 * query/merge_int.h — the merger's state (struct pd_merge), shared by the
 * files of the merge: merge.c (inputs folded in), merge_finish.c (filters,
 * compaction and the output arrays; the focus/ignore/hide regexes).
 * merge_store.c (a merge or diff over the store) uses only query.h and
 * query_int.h. Not part of the module's interface.
 */
#ifndef PD_QUERY_MERGE_INT_H
#define PD_QUERY_MERGE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "query/query.h"

#define BASE_LABEL "pprof::base"
#define MAX_BY_NAMES 64
#define CHECK_EVERY 1024 /* samples between deadline/cancel checks */

/* ---- open-addressing table: content hash -> item index ---- */

typedef struct htab {
    uint64_t *hash;
    uint32_t *idx; /* item index + 1; 0 = empty slot */
    size_t cap;    /* power of two, or 0 */
    size_t n;
} htab;

/* ---- the merger ---- */

typedef struct mloc {
    uint64_t mapping_id; /* output id, 0 none */
    uint64_t address;
    size_t line_off; /* into lines[] */
    uint32_t n_line;
    bool is_folded;
} mloc;

typedef struct msmp {
    size_t stk_off, lab_off;
    uint32_t n_loc, n_lab;
} msmp;

typedef struct mmapinfo {
    uint64_t id;    /* output mapping id; 0 = not resolved yet */
    int64_t offset; /* output start - input start */
} mmapinfo;

typedef struct regex {
    pcre2_code *re;
    pcre2_match_data *md;
    const char *what; /* "focus", "ignore", "hide" */
    bool limit_hit;   /* a search ran past PD_REGEX_MATCH_LIMIT/DEPTH_LIMIT */
} regex;

struct pd_merge {
    pd_merge_options o;
    size_t max_samples;
    pd_profile out;

    /* header */
    size_t n_inputs;
    int64_t *st_type, *st_unit; /* output string indexes of the first input's types */
    size_t n_type;
    int64_t pt_type, pt_unit;
    char *first_source;
    int64_t *comment;
    size_t n_comment, cap_comment;

    /* content */
    pd_pprof_function *fn;
    size_t n_fn, cap_fn;
    pd_pprof_mapping *map;
    size_t n_map, cap_map;
    mloc *loc;
    size_t n_loc, cap_loc;
    pd_pprof_line *lines;
    size_t n_lines, cap_lines;
    msmp *smp;
    size_t n_smp, cap_smp;
    uint64_t *stk;
    size_t n_stk, cap_stk;
    pd_pprof_label *labs;
    size_t n_labs, cap_labs;
    int64_t *vals;
    size_t n_vals, cap_vals;
    htab t_fn, t_map, t_loc, t_smp;

    /* by= */
    bool by_set;
    int64_t by[MAX_BY_NAMES]; /* output string indexes */
    size_t n_by;
    int64_t base_key, base_true; /* "pprof::base", "true" */
    size_t n_base_inputs;        /* of n_inputs, those added as the diff base */

    regex focus, ignore, hide;

    /* per-input scratch, reused across inputs */
    int64_t *smap; /* input string index -> output, -1 unmapped */
    size_t cap_smap;
    uint64_t *fmap; /* input function index -> output id, 0 unmapped */
    size_t cap_fmap;
    mmapinfo *mmap;
    size_t cap_mmap;
    uint64_t *lmap; /* input location index -> output id, 0 unmapped */
    size_t cap_lmap;
    uint64_t *sstk;
    size_t cap_sstk;
    pd_pprof_label *slab;
    size_t cap_slab;
    pd_pprof_line *sline;
    size_t cap_sline;

    size_t samples_in, checks;
    bool failed;
};

/* The focus/ignore/hide regexes (merge_finish.c). pd__merge_regex_compile:
 * an empty or NULL pat leaves r empty (no filter); PD_EINVAL naming the
 * regex (what) and the error's position, PD_ENOMEM. */
int pd__merge_regex_compile(regex *r, const char *what, const char *pat, pd_err *err);
void pd__merge_regex_release(regex *r);

#endif
