/*
 * query/merge.c — merging profiles as google/pprof's profile.Merge does, and
 * diffs as `go tool pprof -diff_base` builds them; streaming, so memory grows
 * with the distinct content of the result, not with the number of inputs.
 *
 * State (struct pd_merge). The result is built in place:
 *   out         the output pd_profile: its string table is filled through
 *               pd_profile_intern as inputs are folded in; its arrays are
 *               written only by finish.
 *   fn[]        distinct functions  (name, system_name, filename, start_line),
 *   map[]       distinct mappings   keyed as pprof's mappingKey: size rounded
 *               up to 4 KiB, file offset, build id (else file name),
 *   loc[]       distinct locations  (mapping id, address, is_folded, lines of
 *               (function id, line, column)); lines live in lines[],
 *   smp[]       distinct samples    (stack of location ids, labels sorted by
 *               key), values in vals[] (n_type per sample), stacks in stk[],
 *               labels in labs[].
 * Each kind has an open-addressing table (htab) from an xxh3 hash of its
 * content to its index; a hit is confirmed by comparing content, so a hash
 * collision only costs a compare. All ids and string indexes in these tables
 * are the output's.
 *
 * Adding one input (pd_merge_add) walks its samples: each location id is
 * resolved through per-input caches (src index -> output id) that are sized
 * by the input and dropped when the call returns, so an input's own tables
 * are visited once, and each sample costs a hash and a probe. The caller
 * releases the input right after the call: with storage reading one profile
 * at a time, peak memory is the merged tables plus one decoded input.
 *
 * pprof rules kept (profile/merge.go, Go 1.19's vendored copy):
 *   - inputs must have the same period type and the same sample types (type
 *     and unit, in order); otherwise PD_EINVAL naming both inputs;
 *   - samples whose values are all zero are skipped; samples with the same
 *     stack and the same labels (as a set of key -> value list) are summed;
 *   - a mapping is relocated onto an equal earlier mapping (addresses shifted
 *     by the difference of their starts); the first input's first mapping is
 *     added first (it is the main binary);
 *   - header: time_nanos the earliest (pprof's exact rule, zero quirk
 *     included), duration_nanos summed, period the largest, comments
 *     concatenated without repeats, default_sample_type the first non-empty,
 *     drop/keep frames and period type from the first input;
 *   - merged samples whose values sum to zero are dropped, and the result is
 *     compacted (unreferenced locations, functions, mappings removed).
 * Diff (-diff_base): a base input's values are negated and its samples get
 * the label pprof::base=true (replacing any such label), so they never
 * cancel against the new side; pprof's reports split the two sides on it.
 * Add the new side first, then the base, to match pprof's order.
 *
 * Filters are pprof's FilterSamplesByName (profile/filter.go), applied by
 * finish on the distinct locations: a location "matches" a regex when one of
 * its lines' function name or file name, or its mapping's file name,
 * matches (unanchored search). focus keeps samples with a matching location,
 * ignore drops samples with one (ignore wins); hide removes matching lines,
 * and locations left without lines, from stacks (a sample left with no
 * location is dropped). When any filter is given, samples without a stack
 * are dropped, as pprof does.
 *
 * Labels (option `by`): NULL keeps every sample label (pprof's behaviour).
 * Otherwise `by` is a comma-separated list of label names: sample labels with
 * other names are dropped, and for each listed name that is a label of the
 * input's series (e.g. instance) the sample gets that label as a string label
 * unless it already has one with that name — so `by=instance` keeps the
 * instances apart in the merged profile, and `by=` (empty) sums across all
 * labels.
 */
#include "query/query.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/time.h"
#include "query/query_int.h"

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

static void htab_release(htab *t)
{
    free(t->hash);
    free(t->idx);
    memset(t, 0, sizeof *t);
}

/* Makes room for one more entry (load <= 0.7). 0 or PD_ENOMEM. */
static int htab_reserve(htab *t)
{
    if ((t->n + 1) * 10 <= t->cap * 7)
        return 0;
    size_t nc = t->cap ? t->cap * 2 : 256;
    uint64_t *nh = malloc(nc * sizeof *nh);
    uint32_t *ni = calloc(nc, sizeof *ni);
    if (!nh || !ni) {
        free(nh);
        free(ni);
        return PD_ENOMEM;
    }
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->idx[i])
            continue;
        size_t s = (size_t)t->hash[i] & (nc - 1);
        while (ni[s])
            s = (s + 1) & (nc - 1);
        nh[s] = t->hash[i];
        ni[s] = t->idx[i];
    }
    free(t->hash);
    free(t->idx);
    t->hash = nh;
    t->idx = ni;
    t->cap = nc;
    return 0;
}

/* Looks for an item with hash h that eq() confirms. Returns its index, or -1
 * with *slot the empty slot to insert at. htab_reserve must have been called
 * (the table is never full). */
static int64_t htab_find(const htab *t, uint64_t h, bool (*eq)(const void *ctx, uint32_t i),
                         const void *ctx, size_t *slot)
{
    size_t s = (size_t)h & (t->cap - 1);
    while (t->idx[s]) {
        if (t->hash[s] == h && eq(ctx, t->idx[s] - 1))
            return t->idx[s] - 1;
        s = (s + 1) & (t->cap - 1);
    }
    *slot = s;
    return -1;
}

static void htab_put(htab *t, size_t slot, uint64_t h, uint32_t i)
{
    t->hash[slot] = h;
    t->idx[slot] = i + 1;
    t->n++;
}

/* ---- growable arrays ---- */

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) {
        if (nc > SIZE_MAX / 2 / elem)
            return PD_ENOMEM;
        nc *= 2;
    }
    void *n = realloc(*arr, nc * elem);
    if (!n)
        return PD_ENOMEM;
    *arr = n;
    *cap = nc;
    return 0;
}

#define GROW(arr, cap, need) grow((void **)&(arr), &(cap), (need), sizeof *(arr))

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
    size_t n_base_inputs; /* of n_inputs, those added as the diff base */

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

static void regex_release(regex *r)
{
    if (r->md)
        pcre2_match_data_free(r->md);
    if (r->re)
        pcre2_code_free(r->re);
    memset(r, 0, sizeof *r);
}

static int regex_compile(regex *r, const char *what, const char *pat, pd_err *err)
{
    r->what = what;
    if (!pat || !*pat)
        return 0;
    int ecode;
    PCRE2_SIZE eoff;
    r->re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, &ecode, &eoff, NULL);
    if (!r->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ecode, msg, sizeof msg);
        return pd_err_set(err, PD_EINVAL, "invalid %s regex \"%.200s\": %s at character %zu", what,
                          pat, (const char *)msg, (size_t)eoff);
    }
    if (!(r->md = pcre2_match_data_create_from_pattern(r->re, NULL))) {
        regex_release(r);
        return pd_err_set(err, PD_ENOMEM, "out of memory compiling the %s regex", what);
    }
    return 0;
}

/* Unanchored search, as Go's regexp.MatchString, under the backtracking
 * limits of labels.h; past them: no match, r->limit_hit, and no more work. */
static bool regex_search(const regex *r, const char *s, size_t len)
{
    if (r->limit_hit)
        return false;
    int rc = pcre2_match(r->re, (PCRE2_SPTR)s, len, 0, 0, r->md, pd_regex_match_context());
    if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
        rc == PCRE2_ERROR_HEAPLIMIT) {
        ((regex *)r)->limit_hit = true; /* never a const object */
        return false;
    }
    return rc >= 0;
}

/* PD_ETOOBIG (a 422) when a focus/ignore/hide regex hit a limit, else 0. */
static int regex_check_limits(const pd_merge *m, pd_err *err);

void pd_merge_free(pd_merge *m)
{
    if (!m)
        return;
    pd_profile_release(&m->out);
    free(m->st_type);
    free(m->st_unit);
    free(m->first_source);
    free(m->comment);
    free(m->fn);
    free(m->map);
    free(m->loc);
    free(m->lines);
    free(m->smp);
    free(m->stk);
    free(m->labs);
    free(m->vals);
    htab_release(&m->t_fn);
    htab_release(&m->t_map);
    htab_release(&m->t_loc);
    htab_release(&m->t_smp);
    regex_release(&m->focus);
    regex_release(&m->ignore);
    regex_release(&m->hide);
    free(m->smap);
    free(m->fmap);
    free(m->mmap);
    free(m->lmap);
    free(m->sstk);
    free(m->slab);
    free(m->sline);
    free(m);
}

static int64_t intern(pd_merge *m, const char *s, size_t len)
{
    int64_t i = pd_profile_intern(&m->out, s, len);
    return i;
}

int pd_merge_new(const pd_merge_options *o, pd_merge **out, pd_err *err)
{
    *out = NULL;
    pd_merge *m = calloc(1, sizeof *m);
    if (!m)
        return pd_err_set(err, PD_ENOMEM, "merge: out of memory");
    if (o)
        m->o = *o;
    m->max_samples = m->o.max_samples ? m->o.max_samples : PD_MERGE_DEFAULT_MAX_SAMPLES;
    int rc = pd_profile_init(&m->out);
    if (rc < 0) {
        free(m);
        return pd_err_set(err, rc, "merge: out of memory");
    }
    if ((m->base_key = intern(m, BASE_LABEL, strlen(BASE_LABEL))) < 0 ||
        (m->base_true = intern(m, "true", 4)) < 0) {
        rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
        goto fail;
    }
    if (m->o.by) {
        m->by_set = true;
        const char *s = m->o.by;
        while (*s) {
            const char *e = strchr(s, ',');
            size_t len = e ? (size_t)(e - s) : strlen(s);
            while (len && (*s == ' ')) {
                s++;
                len--;
            }
            while (len && s[len - 1] == ' ')
                len--;
            if (len) {
                if (m->n_by >= MAX_BY_NAMES) {
                    rc = pd_err_set(err, PD_EINVAL, "by: more than %d label names", MAX_BY_NAMES);
                    goto fail;
                }
                int64_t k = intern(m, s, len);
                if (k < 0) {
                    rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
                    goto fail;
                }
                m->by[m->n_by++] = k;
            }
            if (!e)
                break;
            s = e + 1;
        }
    }
    m->o.by = NULL; /* not kept: the caller's string may go away */
    if ((rc = regex_compile(&m->focus, "focus", m->o.focus, err)) < 0 ||
        (rc = regex_compile(&m->ignore, "ignore", m->o.ignore, err)) < 0 ||
        (rc = regex_compile(&m->hide, "hide", m->o.hide, err)) < 0)
        goto fail;
    m->o.focus = m->o.ignore = m->o.hide = NULL;
    *out = m;
    return 0;
fail:
    pd_merge_free(m);
    return rc;
}

/* Checks the deadline and the cancel callback. */
static int check_time(pd_merge *m, pd_err *err)
{
    if (m->o.deadline_ns && pd_mono_ns() > m->o.deadline_ns) {
        if (m->o.timeout_ms)
            return pd_err_set(err, PD_ETIMEOUT,
                              "query timed out after %" PRId64
                              " ms (--query.timeout) having merged %zu profiles; narrow the "
                              "selector or time range",
                              m->o.timeout_ms, m->n_inputs);
        return pd_err_set(err, PD_ETIMEOUT, "query timed out having merged %zu profiles",
                          m->n_inputs);
    }
    if (m->o.cancelled && m->o.cancelled(m->o.cancel_ctx))
        return pd_err_set(err, PD_ECANCELED, "query canceled by the client");
    return 0;
}

int pd_merge_check(pd_merge *m, pd_err *err) { return check_time(m, err); }

/* ---- per-input resolution ---- */

typedef struct input {
    pd_merge *m;
    const pd_profile *p;
    int rc;
} input;

static int64_t dstr(input *in, int64_t idx)
{
    const pd_profile *p = in->p;
    if (idx <= 0 || (size_t)idx >= p->n_string)
        return 0;
    int64_t *sm = in->m->smap;
    if (sm[idx] < 0) {
        int64_t d = intern(in->m, p->string_table[idx], p->string_len[idx]);
        if (d < 0)
            return d;
        sm[idx] = d;
    }
    return sm[idx];
}

typedef struct fn_key {
    const pd_merge *m;
    const pd_pprof_function *f;
} fn_key;

static bool fn_eq(const void *ctx, uint32_t i)
{
    const fn_key *k = ctx;
    const pd_pprof_function *a = &k->m->fn[i], *b = k->f;
    return a->name == b->name && a->system_name == b->system_name && a->filename == b->filename &&
           a->start_line == b->start_line;
}

/* The output id of input function id `id` (0 for none). Negative on error. */
static int64_t map_function(input *in, uint64_t id, pd_err *err)
{
    if (!id)
        return 0;
    const pd_profile *p = in->p;
    const pd_pprof_function *sf = pd_profile_function(p, id);
    if (!sf)
        return 0; /* a validated profile resolves; be lenient otherwise */
    size_t si = (size_t)(sf - p->function);
    pd_merge *m = in->m;
    if (m->fmap[si])
        return (int64_t)m->fmap[si];
    pd_pprof_function f = {0};
    int64_t s;
    if ((s = dstr(in, sf->name)) < 0)
        goto nomem;
    f.name = s;
    if ((s = dstr(in, sf->system_name)) < 0)
        goto nomem;
    f.system_name = s;
    if ((s = dstr(in, sf->filename)) < 0)
        goto nomem;
    f.filename = s;
    f.start_line = sf->start_line;
    int64_t key[4] = {f.name, f.system_name, f.filename, f.start_line};
    uint64_t h = XXH3_64bits(key, sizeof key);
    if (htab_reserve(&m->t_fn) < 0)
        goto nomem;
    size_t slot = 0;
    fn_key k = {m, &f};
    int64_t hit = htab_find(&m->t_fn, h, fn_eq, &k, &slot);
    if (hit >= 0) {
        m->fmap[si] = m->fn[hit].id;
        return (int64_t)m->fn[hit].id;
    }
    if (m->n_fn >= UINT32_MAX - 1)
        return pd_err_set(err, PD_ETOOBIG, "merge: too many distinct functions");
    if (GROW(m->fn, m->cap_fn, m->n_fn + 1) < 0)
        goto nomem;
    f.id = m->n_fn + 1;
    m->fn[m->n_fn] = f;
    htab_put(&m->t_fn, slot, h, (uint32_t)m->n_fn);
    m->n_fn++;
    m->fmap[si] = f.id;
    return (int64_t)f.id;
nomem:
    return pd_err_set(err, PD_ENOMEM, "merge: out of memory");
}

typedef struct map_key {
    const pd_merge *m;
    uint64_t size, offset;
    int64_t bof; /* build id, else file name (output string index) */
} map_key;

static uint64_t map_size_rounded(const pd_pprof_mapping *mp)
{
    uint64_t size = mp->memory_limit - mp->memory_start;
    size = size + 0x1000 - 1;
    return size - (size % 0x1000);
}

static bool map_eq(const void *ctx, uint32_t i)
{
    const map_key *k = ctx;
    const pd_pprof_mapping *a = &k->m->map[i];
    int64_t bof = a->build_id ? a->build_id : a->filename;
    return map_size_rounded(a) == k->size && a->file_offset == k->offset && bof == k->bof;
}

/* Resolves input mapping id `id` into *mi (id 0 for none). */
static int map_mapping(input *in, uint64_t id, mmapinfo *mi, pd_err *err)
{
    mi->id = 0;
    mi->offset = 0;
    if (!id)
        return 0;
    const pd_profile *p = in->p;
    const pd_pprof_mapping *sm = pd_profile_mapping(p, id);
    if (!sm)
        return 0;
    size_t si = (size_t)(sm - p->mapping);
    pd_merge *m = in->m;
    if (m->mmap[si].id) {
        *mi = m->mmap[si];
        return 0;
    }
    int64_t file = dstr(in, sm->filename), bid = dstr(in, sm->build_id);
    if (file < 0 || bid < 0)
        goto nomem;
    map_key k = {m, map_size_rounded(sm), sm->file_offset, bid ? bid : file};
    int64_t key[3] = {(int64_t)k.size, (int64_t)k.offset, k.bof};
    uint64_t h = XXH3_64bits(key, sizeof key);
    if (htab_reserve(&m->t_map) < 0)
        goto nomem;
    size_t slot = 0;
    int64_t hit = htab_find(&m->t_map, h, map_eq, &k, &slot);
    if (hit >= 0) {
        const pd_pprof_mapping *d = &m->map[hit];
        mi->id = d->id;
        mi->offset = (int64_t)(d->memory_start - sm->memory_start); /* wraps like Go's */
    } else {
        if (m->n_map >= UINT32_MAX - 1)
            return pd_err_set(err, PD_ETOOBIG, "merge: too many distinct mappings");
        if (GROW(m->map, m->cap_map, m->n_map + 1) < 0)
            goto nomem;
        pd_pprof_mapping d = *sm;
        d.id = m->n_map + 1;
        d.filename = file;
        d.build_id = bid;
        m->map[m->n_map] = d;
        htab_put(&m->t_map, slot, h, (uint32_t)m->n_map);
        m->n_map++;
        mi->id = d.id;
        mi->offset = 0;
    }
    m->mmap[si] = *mi;
    return 0;
nomem:
    return pd_err_set(err, PD_ENOMEM, "merge: out of memory");
}

typedef struct loc_key {
    const pd_merge *m;
    const mloc *l;
    const pd_pprof_line *lines;
} loc_key;

static bool loc_eq(const void *ctx, uint32_t i)
{
    const loc_key *k = ctx;
    const mloc *a = &k->m->loc[i];
    return a->mapping_id == k->l->mapping_id && a->address == k->l->address &&
           a->is_folded == k->l->is_folded && a->n_line == k->l->n_line &&
           (!a->n_line ||
            !memcmp(&k->m->lines[a->line_off], k->lines, a->n_line * sizeof *k->lines));
}

/* The output id of the input location at index li. Negative on error. */
static int64_t map_location(input *in, size_t li, pd_err *err)
{
    pd_merge *m = in->m;
    if (m->lmap[li])
        return (int64_t)m->lmap[li];
    const pd_pprof_location *sl = &in->p->location[li];
    mmapinfo mi;
    int rc = map_mapping(in, sl->mapping_id, &mi, err);
    if (rc < 0)
        return rc;
    if (sl->n_line > UINT32_MAX)
        return pd_err_set(err, PD_ETOOBIG, "merge: location with too many lines");
    if (GROW(m->sline, m->cap_sline, sl->n_line + 1) < 0)
        return pd_err_set(err, PD_ENOMEM, "merge: out of memory");
    for (size_t j = 0; j < sl->n_line; j++) {
        int64_t f = map_function(in, sl->line[j].function_id, err);
        if (f < 0)
            return f;
        m->sline[j] = (pd_pprof_line){(uint64_t)f, sl->line[j].line, sl->line[j].column};
    }
    mloc l = {.mapping_id = mi.id,
              .address = sl->address + (uint64_t)mi.offset,
              .n_line = (uint32_t)sl->n_line,
              .is_folded = sl->is_folded};
    uint64_t hk[3] = {l.mapping_id, l.address, (uint64_t)l.is_folded};
    uint64_t h =
        XXH3_64bits_withSeed(m->sline, sl->n_line * sizeof *m->sline, XXH3_64bits(hk, sizeof hk));
    if (htab_reserve(&m->t_loc) < 0)
        return pd_err_set(err, PD_ENOMEM, "merge: out of memory");
    size_t slot = 0;
    loc_key k = {m, &l, m->sline};
    int64_t hit = htab_find(&m->t_loc, h, loc_eq, &k, &slot);
    if (hit >= 0) {
        m->lmap[li] = (uint64_t)hit + 1;
        return hit + 1;
    }
    if (m->n_loc >= UINT32_MAX - 1)
        return pd_err_set(err, PD_ETOOBIG, "merge: too many distinct locations");
    if (GROW(m->loc, m->cap_loc, m->n_loc + 1) < 0 ||
        GROW(m->lines, m->cap_lines, m->n_lines + sl->n_line) < 0)
        return pd_err_set(err, PD_ENOMEM, "merge: out of memory");
    l.line_off = m->n_lines;
    if (sl->n_line)
        memcpy(&m->lines[m->n_lines], m->sline, sl->n_line * sizeof *m->sline);
    m->n_lines += sl->n_line;
    m->loc[m->n_loc] = l;
    htab_put(&m->t_loc, slot, h, (uint32_t)m->n_loc);
    m->n_loc++;
    m->lmap[li] = m->n_loc;
    return (int64_t)m->n_loc;
}

typedef struct smp_key {
    const pd_merge *m;
    const uint64_t *stk;
    size_t n_loc;
    const pd_pprof_label *lab;
    size_t n_lab;
} smp_key;

static bool smp_eq(const void *ctx, uint32_t i)
{
    const smp_key *k = ctx;
    const msmp *s = &k->m->smp[i];
    return s->n_loc == k->n_loc && s->n_lab == k->n_lab &&
           (!k->n_loc || !memcmp(&k->m->stk[s->stk_off], k->stk, k->n_loc * sizeof *k->stk)) &&
           (!k->n_lab || !memcmp(&k->m->labs[s->lab_off], k->lab, k->n_lab * sizeof *k->lab));
}

static bool by_has(const pd_merge *m, int64_t key)
{
    for (size_t i = 0; i < m->n_by; i++)
        if (m->by[i] == key)
            return true;
    return false;
}

/* Label order inside a merged sample: by key, string labels before numeric
 * ones, otherwise as in the input (stable), which is pprof's notion of
 * equal label sets (map key -> ordered value list). */
static bool lab_before(const pd_pprof_label *a, const pd_pprof_label *b)
{
    if (a->key != b->key)
        return a->key < b->key;
    return a->str != 0 && b->str == 0;
}

static void sort_labels(pd_pprof_label *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        pd_pprof_label x = v[i];
        size_t j = i;
        while (j > 0 && lab_before(&x, &v[j - 1])) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

static int64_t wadd(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

static int64_t wneg(int64_t a)
{
    return (int64_t)(0 - (uint64_t)a);
}

static bool same_strings(const pd_profile *p, int64_t a, const pd_profile *q, int64_t b)
{
    const char *x = pd_profile_str(p, a), *y = pd_profile_str(q, b);
    size_t lx = a > 0 && (size_t)a < p->n_string ? p->string_len[a] : 0;
    size_t ly = b > 0 && (size_t)b < q->n_string ? q->string_len[b] : 0;
    return lx == ly && !memcmp(x, y, lx);
}

/* Appends "[t/u, ...]" of profile p's sample types to b. */
static void types_text(const pd_profile *p, const pd_pprof_value_type *vt, size_t n, pd_buf *b)
{
    pd_buf_putc(b, '[');
    for (size_t i = 0; i < n; i++)
        pd_buf_printf(b, "%s%s/%s", i ? ", " : "", pd_profile_str(p, vt[i].type),
                      pd_profile_str(p, vt[i].unit));
    pd_buf_putc(b, ']');
}

/* Header: compatibility and pprof's combineHeaders, one input at a time. */
static int merge_header(input *in, const char *source, pd_err *err)
{
    pd_merge *m = in->m;
    const pd_profile *p = in->p;
    if (m->n_inputs == 0) {
        m->n_type = p->n_sample_type;
        m->st_type = calloc(m->n_type ? m->n_type : 1, sizeof *m->st_type);
        m->st_unit = calloc(m->n_type ? m->n_type : 1, sizeof *m->st_unit);
        m->first_source = strdup(source ? source : "the first profile");
        if (!m->st_type || !m->st_unit || !m->first_source)
            goto nomem;
        for (size_t i = 0; i < m->n_type; i++) {
            if ((m->st_type[i] = dstr(in, p->sample_type[i].type)) < 0 ||
                (m->st_unit[i] = dstr(in, p->sample_type[i].unit)) < 0)
                goto nomem;
        }
        if ((m->pt_type = dstr(in, p->period_type.type)) < 0 ||
            (m->pt_unit = dstr(in, p->period_type.unit)) < 0 ||
            (m->out.drop_frames = dstr(in, p->drop_frames)) < 0 ||
            (m->out.keep_frames = dstr(in, p->keep_frames)) < 0)
            goto nomem;
        m->out.period = p->period;
        m->out.time_nanos = p->time_nanos;
    } else {
        bool ok = p->n_sample_type == m->n_type;
        for (size_t i = 0; ok && i < m->n_type; i++) {
            const pd_pprof_value_type *vt = &p->sample_type[i];
            ok = same_strings(p, vt->type, &m->out, m->st_type[i]) &&
                 same_strings(p, vt->unit, &m->out, m->st_unit[i]);
        }
        bool pok = same_strings(p, p->period_type.type, &m->out, m->pt_type) &&
                   same_strings(p, p->period_type.unit, &m->out, m->pt_unit);
        if (!ok || !pok) {
            pd_buf a, b;
            pd_buf_init(&a, 1024);
            pd_buf_init(&b, 1024);
            if (!ok) {
                types_text(p, p->sample_type, p->n_sample_type, &a);
                pd_buf_putc(&b, '[');
                for (size_t i = 0; i < m->n_type; i++)
                    pd_buf_printf(&b, "%s%s/%s", i ? ", " : "",
                                  pd_profile_str(&m->out, m->st_type[i]),
                                  pd_profile_str(&m->out, m->st_unit[i]));
                pd_buf_putc(&b, ']');
            } else {
                pd_buf_printf(&a, "%s/%s", pd_profile_str(p, p->period_type.type),
                              pd_profile_str(p, p->period_type.unit));
                pd_buf_printf(&b, "%s/%s", pd_profile_str(&m->out, m->pt_type),
                              pd_profile_str(&m->out, m->pt_unit));
            }
            pd_err_set(err, PD_EINVAL,
                       "cannot merge profiles with different %s: %.150s has %.100s but "
                       "%.150s has %.100s; select series of one profile type",
                       ok ? "period types" : "sample types", source ? source : "a profile",
                       a.data ? a.data : "", m->first_source, b.data ? b.data : "");
            pd_buf_release(&a);
            pd_buf_release(&b);
            return PD_EINVAL;
        }
        if (m->out.time_nanos == 0 || p->time_nanos < m->out.time_nanos)
            m->out.time_nanos = p->time_nanos;
        if (m->out.period == 0 || m->out.period < p->period)
            m->out.period = p->period;
    }
    m->out.duration_nanos = wadd(m->out.duration_nanos, p->duration_nanos);
    for (size_t i = 0; i < p->n_comment; i++) {
        int64_t c = dstr(in, p->comment[i]);
        if (c < 0)
            goto nomem;
        bool seen = false;
        for (size_t j = 0; j < m->n_comment && !seen; j++)
            seen = m->comment[j] == c;
        if (seen)
            continue;
        if (GROW(m->comment, m->cap_comment, m->n_comment + 1) < 0)
            goto nomem;
        m->comment[m->n_comment++] = c;
    }
    if (!m->out.default_sample_type) {
        int64_t d = dstr(in, p->default_sample_type);
        if (d < 0)
            goto nomem;
        m->out.default_sample_type = d;
    }
    if (!m->out.doc_url) {
        int64_t d = dstr(in, p->doc_url);
        if (d < 0)
            goto nomem;
        m->out.doc_url = d;
    }
    return 0;
nomem:
    return pd_err_set(err, PD_ENOMEM, "merge: out of memory");
}

/* Sizes and clears the per-input caches for p. */
static int prepare_input(pd_merge *m, const pd_profile *p)
{
    if (GROW(m->smap, m->cap_smap, p->n_string + 1) < 0 ||
        GROW(m->fmap, m->cap_fmap, p->n_function + 1) < 0 ||
        GROW(m->mmap, m->cap_mmap, p->n_mapping + 1) < 0 ||
        GROW(m->lmap, m->cap_lmap, p->n_location + 1) < 0)
        return PD_ENOMEM;
    memset(m->smap, 0xff, p->n_string * sizeof *m->smap);
    memset(m->fmap, 0, p->n_function * sizeof *m->fmap);
    memset(m->mmap, 0, p->n_mapping * sizeof *m->mmap);
    memset(m->lmap, 0, p->n_location * sizeof *m->lmap);
    return 0;
}

int pd_merge_add(pd_merge *m, const pd_profile *p, const pd_labels *series, bool base,
                 const char *source, pd_err *err)
{
    return pd_merge_add_n(m, p, series, base, source, 1, err);
}

int pd_merge_add_n(pd_merge *m, const pd_profile *p, const pd_labels *series, bool base,
                   const char *source, size_t n_inputs, pd_err *err)
{
    if (m->failed)
        return pd_err_set(err, PD_EINVAL, "merge: used after an error");
    int rc = check_time(m, err);
    if (rc < 0)
        goto fail;
    if (prepare_input(m, p) < 0) {
        rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
        goto fail;
    }
    input in = {m, p, 0};
    if ((rc = merge_header(&in, source, err)) < 0) {
        if (rc != PD_EINVAL)
            goto fail;
        return rc; /* nothing of this input was folded in: the merger stays usable */
    }
    m->n_inputs += n_inputs;
    if (base)
        m->n_base_inputs += n_inputs;

    /* pprof maps the first mapping first (it is the main binary) */
    if (m->n_map == 0 && p->n_mapping > 0) {
        mmapinfo mi;
        if ((rc = map_mapping(&in, p->mapping[0].id, &mi, err)) < 0)
            goto fail;
    }

    /* series labels that by= asks for, as output string label pairs */
    pd_pprof_label extra[MAX_BY_NAMES];
    size_t n_extra = 0;
    if (m->by_set && series) {
        for (size_t i = 0; i < m->n_by; i++) {
            const char *name = pd_profile_str(&m->out, m->by[i]);
            const char *v = pd_labels_get(series, name);
            if (!v || !*v)
                continue;
            int64_t vi = intern(m, v, strlen(v));
            if (vi < 0) {
                rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
                goto fail;
            }
            extra[n_extra++] = (pd_pprof_label){.key = m->by[i], .str = vi};
        }
    }

    const size_t nt = m->n_type;
    for (size_t i = 0; i < p->n_sample; i++) {
        const pd_pprof_sample *s = &p->sample[i];
        if (++m->checks % CHECK_EVERY == 0 && (rc = check_time(m, err)) < 0)
            goto fail;
        bool zero = true;
        for (size_t v = 0; v < s->n_value && zero; v++)
            zero = s->value[v] == 0;
        if (zero)
            continue;
        m->samples_in++;
        /* stack */
        if (GROW(m->sstk, m->cap_sstk, s->n_location + 1) < 0) {
            rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
            goto fail;
        }
        for (size_t j = 0; j < s->n_location; j++) {
            const pd_pprof_location *sl = pd_profile_location(p, s->location_id[j]);
            if (!sl) {
                rc = pd_err_set(err, PD_EINVAL, "%s: sample %zu: location id %" PRIu64 " not found",
                                source ? source : "profile", i, s->location_id[j]);
                goto fail;
            }
            int64_t id = map_location(&in, (size_t)(sl - p->location), err);
            if (id < 0) {
                rc = (int)id;
                goto fail;
            }
            m->sstk[j] = (uint64_t)id;
        }
        /* labels */
        size_t nl = 0;
        if (GROW(m->slab, m->cap_slab, s->n_label + n_extra + 1) < 0) {
            rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
            goto fail;
        }
        for (size_t j = 0; j < s->n_label; j++) {
            const pd_pprof_label *sl = &s->label[j];
            int64_t k = dstr(&in, sl->key);
            if (k < 0) {
                rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
                goto fail;
            }
            if (base && k == m->base_key && sl->str)
                continue; /* replaced below, as pprof's SetLabel */
            if (m->by_set && !by_has(m, k))
                continue;
            int64_t sv = dstr(&in, sl->str), nu = dstr(&in, sl->num_unit);
            if (sv < 0 || nu < 0) {
                rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
                goto fail;
            }
            m->slab[nl++] = (pd_pprof_label){k, sv, sl->num, nu};
        }
        for (size_t j = 0; j < n_extra; j++) {
            bool have = false;
            for (size_t q = 0; q < nl && !have; q++)
                have = m->slab[q].key == extra[j].key;
            if (!have)
                m->slab[nl++] = extra[j];
        }
        if (base) {
            if (GROW(m->slab, m->cap_slab, nl + 1) < 0) {
                rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
                goto fail;
            }
            m->slab[nl++] = (pd_pprof_label){.key = m->base_key, .str = m->base_true};
        }
        if (nl > 1)
            sort_labels(m->slab, nl);
        /* find or add */
        uint64_t h = XXH3_64bits_withSeed(m->slab, nl * sizeof *m->slab,
                                          XXH3_64bits(m->sstk, s->n_location * sizeof *m->sstk));
        if (htab_reserve(&m->t_smp) < 0) {
            rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
            goto fail;
        }
        size_t slot = 0;
        smp_key k = {m, m->sstk, s->n_location, m->slab, nl};
        int64_t hit = htab_find(&m->t_smp, h, smp_eq, &k, &slot);
        int64_t *dv;
        if (hit >= 0) {
            dv = &m->vals[(size_t)hit * nt];
        } else {
            if (m->n_smp >= m->max_samples) {
                rc = pd_err_set(err, PD_ETOOBIG,
                                "query result has more than %zu distinct samples "
                                "(--query.max-samples) after merging %zu profiles; narrow the "
                                "selector or time range, or drop labels with by=",
                                m->max_samples, m->n_inputs);
                goto fail;
            }
            if (GROW(m->smp, m->cap_smp, m->n_smp + 1) < 0 ||
                GROW(m->stk, m->cap_stk, m->n_stk + s->n_location) < 0 ||
                GROW(m->labs, m->cap_labs, m->n_labs + nl) < 0 ||
                GROW(m->vals, m->cap_vals, m->n_vals + nt) < 0) {
                rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
                goto fail;
            }
            msmp *d = &m->smp[m->n_smp];
            d->stk_off = m->n_stk;
            d->n_loc = (uint32_t)s->n_location;
            d->lab_off = m->n_labs;
            d->n_lab = (uint32_t)nl;
            if (s->n_location)
                memcpy(&m->stk[m->n_stk], m->sstk, s->n_location * sizeof *m->stk);
            if (nl)
                memcpy(&m->labs[m->n_labs], m->slab, nl * sizeof *m->labs);
            m->n_stk += s->n_location;
            m->n_labs += nl;
            dv = &m->vals[m->n_vals];
            memset(dv, 0, nt * sizeof *dv);
            m->n_vals += nt;
            htab_put(&m->t_smp, slot, h, (uint32_t)m->n_smp);
            m->n_smp++;
        }
        for (size_t v = 0; v < nt && v < s->n_value; v++)
            dv[v] = wadd(dv[v], base ? wneg(s->value[v]) : s->value[v]);
    }
    return 0;
fail:
    m->failed = true;
    return rc;
}

void pd_merge_get_stats(const pd_merge *m, pd_merge_stats *st)
{
    memset(st, 0, sizeof *st);
    st->profiles = m->n_inputs;
    st->samples_in = m->samples_in;
    st->samples_out = m->n_smp;
}

/* ---- finish: filters, compaction, output arrays ---- */

static bool line_matches(const pd_merge *m, const regex *r, const pd_pprof_line *ln)
{
    if (!ln->function_id)
        return false;
    const pd_pprof_function *f = &m->fn[ln->function_id - 1];
    const pd_profile *o = &m->out;
    return regex_search(r, o->string_table[f->name], o->string_len[f->name]) ||
           regex_search(r, o->string_table[f->filename], o->string_len[f->filename]);
}

static bool mapping_matches(const pd_merge *m, const regex *r, const mloc *l)
{
    if (!l->mapping_id)
        return false;
    int64_t file = m->map[l->mapping_id - 1].filename;
    return regex_search(r, m->out.string_table[file], m->out.string_len[file]);
}

static bool loc_matches(const pd_merge *m, const regex *r, const mloc *l)
{
    for (uint32_t j = 0; j < l->n_line; j++)
        if (line_matches(m, r, &m->lines[l->line_off + j]))
            return true;
    return mapping_matches(m, r, l);
}

/* pprof's FilterSamplesByName on the distinct locations and samples.
 * fi[i]: 1 focused, -1 ignored, 0 neither; hidden[i]: location dropped from
 * stacks; hiding rewrites loc[i]'s lines in place (a subset, in order).
 * keep[s] is cleared for samples the filters drop; stacks are shortened in
 * place. */
static int apply_filters(pd_merge *m, bool *keep, pd_err *err)
{
    int8_t *fi = calloc(m->n_loc + 1, 1);
    bool *hidden = calloc(m->n_loc + 1, sizeof *hidden);
    if (!fi || !hidden) {
        free(fi);
        free(hidden);
        return pd_err_set(err, PD_ENOMEM, "merge: out of memory");
    }
    bool any_hidden = false;
    for (size_t i = 0; i < m->n_loc; i++) {
        mloc *l = &m->loc[i];
        if (m->ignore.re && loc_matches(m, &m->ignore, l))
            fi[i] = -1;
        else if (!m->focus.re || loc_matches(m, &m->focus, l))
            fi[i] = 1;
        if (m->hide.re && loc_matches(m, &m->hide, l)) {
            if (mapping_matches(m, &m->hide, l)) {
                l->n_line = 0;
            } else {
                uint32_t w = 0;
                for (uint32_t j = 0; j < l->n_line; j++) {
                    pd_pprof_line ln = m->lines[l->line_off + j];
                    if (!line_matches(m, &m->hide, &ln))
                        m->lines[l->line_off + w++] = ln;
                }
                l->n_line = w;
            }
            if (l->n_line == 0) {
                hidden[i] = true;
                any_hidden = true;
            }
        }
    }
    for (size_t s = 0; s < m->n_smp; s++) {
        if (!keep[s])
            continue;
        msmp *sp = &m->smp[s];
        uint64_t *stk = &m->stk[sp->stk_off];
        bool focused = false, ignored = false;
        for (uint32_t j = 0; j < sp->n_loc && !ignored; j++) {
            int8_t f = fi[stk[j] - 1];
            if (f < 0)
                ignored = true;
            else if (f > 0)
                focused = true;
        }
        if (ignored || !focused) {
            keep[s] = false;
            continue;
        }
        if (any_hidden) {
            uint32_t w = 0;
            for (uint32_t j = 0; j < sp->n_loc; j++)
                if (!hidden[stk[j] - 1])
                    stk[w++] = stk[j];
            sp->n_loc = w;
            if (w == 0)
                keep[s] = false;
        }
    }
    free(fi);
    free(hidden);
    return 0;
}

static int regex_check_limits(const pd_merge *m, pd_err *err)
{
    const regex *rs[3] = {&m->focus, &m->ignore, &m->hide};
    for (int i = 0; i < 3; i++)
        if (rs[i]->limit_hit)
            return pd_err_set(err, PD_ETOOBIG,
                              "%s regex: matching a frame name ran past the backtracking limit "
                              "(PCRE2 match limit %u, depth limit %u); simplify the regex",
                              rs[i]->what, PD_REGEX_MATCH_LIMIT, PD_REGEX_DEPTH_LIMIT);
    return 0;
}

static bool smp_is_base(const pd_merge *m, size_t s)
{
    const msmp *sp = &m->smp[s];
    for (uint32_t j = 0; j < sp->n_lab; j++)
        if (m->labs[sp->lab_off + j].key == m->base_key && m->labs[sp->lab_off + j].str == m->base_true)
            return true;
    return false;
}

static int64_t scale_round(int64_t v, double f)
{
    double r = (double)v * f;
    r = r < 0 ? r - 0.5 : r + 0.5;
    if (r >= 9.2e18)
        return INT64_MAX;
    if (r <= -9.2e18)
        return INT64_MIN;
    return (int64_t)r;
}

/* Options agg=avg (each side's values divided by its number of profiles)
 * and normalize (pprof's -normalize: the new side scaled so that each
 * sample type's total equals the base side's), applied before the zero-sum
 * drop. Base samples carry pprof::base=true and negated values. */
static void scale_sides(pd_merge *m)
{
    const size_t nt = m->n_type;
    size_t n_new = m->n_inputs - m->n_base_inputs, n_base = m->n_base_inputs;
    double f_new = m->o.agg == PD_MERGE_AVG && n_new ? 1.0 / (double)n_new : 1.0;
    double f_base = m->o.agg == PD_MERGE_AVG && n_base ? 1.0 / (double)n_base : 1.0;
    double fn[64];
    for (size_t v = 0; v < nt && v < 64; v++)
        fn[v] = f_new;
    if (m->o.normalize && n_base && n_new) {
        /* totals of each side after averaging; the base's values are negated */
        double tn[64] = {0}, tb[64] = {0};
        for (size_t s = 0; s < m->n_smp; s++) {
            bool b = smp_is_base(m, s);
            for (size_t v = 0; v < nt && v < 64; v++) {
                if (b)
                    tb[v] -= (double)m->vals[s * nt + v] * f_base;
                else
                    tn[v] += (double)m->vals[s * nt + v] * f_new;
            }
        }
        for (size_t v = 0; v < nt && v < 64; v++)
            if (tn[v] != 0)
                fn[v] = f_new * (tb[v] / tn[v]);
    }
    for (size_t s = 0; s < m->n_smp; s++) {
        bool b = smp_is_base(m, s);
        for (size_t v = 0; v < nt; v++) {
            int64_t *x = &m->vals[s * nt + v];
            *x = scale_round(*x, b ? f_base : (v < 64 ? fn[v] : f_new));
        }
    }
}

void pd__merge_recount(pd_merge *m, bool base, size_t counted, size_t n)
{
    if (counted > m->n_inputs)
        counted = m->n_inputs;
    m->n_inputs = m->n_inputs - counted + n;
    if (base) {
        size_t c = counted < m->n_base_inputs ? counted : m->n_base_inputs;
        m->n_base_inputs = m->n_base_inputs - c + n;
    }
}

int pd_merge_finish(pd_merge *m, pd_profile *out, pd_err *err)
{
    memset(out, 0, sizeof *out);
    if (m->failed)
        return pd_err_set(err, PD_EINVAL, "merge: used after an error");
    if (m->n_inputs == 0)
        return pd_err_set(err, PD_ENOTFOUND, "no profile to merge");
    int rc = 0;
    const size_t nt = m->n_type;
    bool *keep = malloc((m->n_smp + 1) * sizeof *keep);
    uint64_t *loc_new = calloc(m->n_loc + 1, sizeof *loc_new);
    uint64_t *fn_new = calloc(m->n_fn + 1, sizeof *fn_new);
    uint64_t *map_new = calloc(m->n_map + 1, sizeof *map_new);
    if (!keep || !loc_new || !fn_new || !map_new) {
        rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
        goto out;
    }
    size_t n_keep = 0;
    if (m->o.agg == PD_MERGE_AVG || m->o.normalize)
        scale_sides(m);
    for (size_t s = 0; s < m->n_smp; s++) {
        bool zero = true;
        for (size_t v = 0; v < nt && zero; v++)
            zero = m->vals[s * nt + v] == 0;
        keep[s] = !zero;
    }
    if (m->focus.re || m->ignore.re || m->hide.re) {
        if ((rc = check_time(m, err)) < 0 || (rc = apply_filters(m, keep, err)) < 0 ||
            (rc = regex_check_limits(m, err)) < 0)
            goto out;
    }
    /* mark what kept samples reference; new ids in order of first creation */
    size_t n_stk = 0, n_labs = 0;
    for (size_t s = 0; s < m->n_smp; s++) {
        if (!keep[s])
            continue;
        n_keep++;
        const msmp *sp = &m->smp[s];
        n_stk += sp->n_loc;
        n_labs += sp->n_lab;
        for (uint32_t j = 0; j < sp->n_loc; j++)
            loc_new[m->stk[sp->stk_off + j] - 1] = 1;
    }
    size_t n_loc = 0, n_fn = 0, n_map = 0, n_lines = 0;
    /* the main binary stays mapping 1 when anything is kept */
    if (m->n_map && n_keep)
        map_new[0] = 1;
    for (size_t i = 0; i < m->n_loc; i++) {
        if (!loc_new[i])
            continue;
        loc_new[i] = ++n_loc;
        const mloc *l = &m->loc[i];
        n_lines += l->n_line;
        if (l->mapping_id)
            map_new[l->mapping_id - 1] = 1;
        for (uint32_t j = 0; j < l->n_line; j++) {
            uint64_t f = m->lines[l->line_off + j].function_id;
            if (f)
                fn_new[f - 1] = 1;
        }
    }
    for (size_t i = 0; i < m->n_fn; i++)
        if (fn_new[i])
            fn_new[i] = ++n_fn;
    for (size_t i = 0; i < m->n_map; i++)
        if (map_new[i])
            map_new[i] = ++n_map;

    pd_profile *o = &m->out;
    pd_arena *a = &o->arena;
    o->n_sample_type = nt;
    o->sample_type = pd_arena_calloc(a, nt ? nt : 1, sizeof *o->sample_type);
    o->sample = pd_arena_calloc(a, n_keep ? n_keep : 1, sizeof *o->sample);
    o->location = pd_arena_calloc(a, n_loc ? n_loc : 1, sizeof *o->location);
    o->function = pd_arena_calloc(a, n_fn ? n_fn : 1, sizeof *o->function);
    o->mapping = pd_arena_calloc(a, n_map ? n_map : 1, sizeof *o->mapping);
    o->comment = pd_arena_calloc(a, m->n_comment ? m->n_comment : 1, sizeof *o->comment);
    uint64_t *ids = pd_arena_calloc(a, n_stk ? n_stk : 1, sizeof *ids);
    int64_t *vals = pd_arena_calloc(a, n_keep * nt + 1, sizeof *vals);
    pd_pprof_label *labs = pd_arena_calloc(a, n_labs ? n_labs : 1, sizeof *labs);
    pd_pprof_line *lines = pd_arena_calloc(a, n_lines ? n_lines : 1, sizeof *lines);
    if (!o->sample_type || !o->sample || !o->location || !o->function || !o->mapping ||
        !o->comment || !ids || !vals || !labs || !lines) {
        rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
        goto out;
    }
    for (size_t i = 0; i < nt; i++)
        o->sample_type[i] = (pd_pprof_value_type){m->st_type[i], m->st_unit[i]};
    o->period_type = (pd_pprof_value_type){m->pt_type, m->pt_unit};
    if (m->n_comment)
        memcpy(o->comment, m->comment, m->n_comment * sizeof *o->comment);
    o->n_comment = m->n_comment;
    for (size_t i = 0; i < m->n_fn; i++) {
        if (!fn_new[i])
            continue;
        pd_pprof_function f = m->fn[i];
        f.id = fn_new[i];
        o->function[o->n_function++] = f;
    }
    for (size_t i = 0; i < m->n_map; i++) {
        if (!map_new[i])
            continue;
        pd_pprof_mapping mp = m->map[i];
        mp.id = map_new[i];
        o->mapping[o->n_mapping++] = mp;
    }
    size_t lo = 0;
    for (size_t i = 0; i < m->n_loc; i++) {
        if (!loc_new[i])
            continue;
        const mloc *l = &m->loc[i];
        pd_pprof_location *d = &o->location[o->n_location++];
        d->id = loc_new[i];
        d->mapping_id = l->mapping_id ? map_new[l->mapping_id - 1] : 0;
        d->address = l->address;
        d->is_folded = l->is_folded;
        d->line = &lines[lo];
        d->n_line = l->n_line;
        for (uint32_t j = 0; j < l->n_line; j++) {
            pd_pprof_line ln = m->lines[l->line_off + j];
            ln.function_id = ln.function_id ? fn_new[ln.function_id - 1] : 0;
            lines[lo++] = ln;
        }
    }
    size_t so = 0, lb = 0;
    for (size_t s = 0; s < m->n_smp; s++) {
        if (!keep[s])
            continue;
        const msmp *sp = &m->smp[s];
        pd_pprof_sample *d = &o->sample[o->n_sample];
        d->location_id = &ids[so];
        d->n_location = sp->n_loc;
        for (uint32_t j = 0; j < sp->n_loc; j++)
            ids[so++] = loc_new[m->stk[sp->stk_off + j] - 1];
        d->value = &vals[o->n_sample * nt];
        d->n_value = nt;
        if (nt)
            memcpy(d->value, &m->vals[s * nt], nt * sizeof *vals);
        d->label = &labs[lb];
        d->n_label = sp->n_lab;
        if (sp->n_lab)
            memcpy(&labs[lb], &m->labs[sp->lab_off], sp->n_lab * sizeof *labs);
        lb += sp->n_lab;
        o->n_sample++;
    }
    if ((rc = pd_profile_index(o, err)) < 0)
        goto out;
    *out = *o; /* moved: the merger no longer owns it */
    memset(o, 0, sizeof *o);
    m->failed = true; /* finished: only pd_merge_free is left */
out:
    free(keep);
    free(loc_new);
    free(fn_new);
    free(map_new);
    return rc;
}

/* ---- over the store ---- */

/* "[type/unit, ...]" of a point, for the sample-type check before reading
 * any profile body. */
static void point_types(const pd_point *pt, pd_buf *b)
{
    pd_buf_reset(b);
    pd_buf_putc(b, '[');
    for (size_t i = 0; i < pt->n_types; i++)
        pd_buf_printf(b, "%s%s/%s", i ? ", " : "", pt->types ? pt->types[i].type : "",
                      pt->types ? pt->types[i].unit : "");
    pd_buf_putc(b, ']');
}

/* Whether a and b have the same sample types (type and unit, in order):
 * check_point's answer for b is then a's, with no formatting (a merge of N
 * profiles checks N points; consecutive ones of a series mostly share them). */
static bool same_types(const pd_point *a, const pd_point *b)
{
    if (a->n_types != b->n_types || !a->types != !b->types)
        return false;
    if (a->types == b->types)
        return true;
    for (size_t i = 0; i < a->n_types; i++)
        if (strcmp(a->types[i].type ? a->types[i].type : "",
                   b->types[i].type ? b->types[i].type : "") ||
            strcmp(a->types[i].unit ? a->types[i].unit : "",
                   b->types[i].unit ? b->types[i].unit : ""))
            return false;
    return true;
}

typedef struct run {
    pd_storage *st;
    pd_merge *m;
    pd_buf first_types; /* of the first point seen; empty before */
    char first_source[320];
    pd_buf types, name;
    size_t series;
    const char *by; /* the merge option by (groups of series, pd__query_groups) */
    const pd_merge_options *o; /* may be NULL */
    bool delta;                /* deltas were taken on some side */
} run;

static void source_name(const pd_labels *ls, int64_t ts, const char *side, pd_buf *b)
{
    pd_buf_reset(b);
    pd_buf_puts(b, "series ");
    pd_labels_format(ls, b);
    pd_buf_printf(b, " at %" PRId64 " ms", ts);
    if (side)
        pd_buf_printf(b, " (%s)", side);
}

/* Checks a point's sample types against the first point of the query. */
static int check_point(run *r, const pd_labels *ls, const pd_point *pt, const char *side,
                       pd_err *err)
{
    point_types(pt, &r->types);
    if (!r->types.data)
        return pd_err_set(err, PD_ENOMEM, "merge: out of memory");
    if (!r->first_types.len) {
        pd_buf_append(&r->first_types, r->types.data, r->types.len);
        source_name(ls, pt->ts_ms, side, &r->name);
        snprintf(r->first_source, sizeof r->first_source, "%s", r->name.data ? r->name.data : "");
        return r->first_types.len ? 0 : pd_err_set(err, PD_ENOMEM, "merge: out of memory");
    }
    if (r->types.len == r->first_types.len &&
        !memcmp(r->types.data, r->first_types.data, r->types.len))
        return 0;
    source_name(ls, pt->ts_ms, side, &r->name);
    return pd_err_set(err, PD_EINVAL,
                      "cannot merge profiles with different sample types: %.150s has %.100s but "
                      "%.150s has %.100s; select series of one profile type",
                      r->name.data ? r->name.data : "", r->types.data, r->first_source,
                      r->first_types.data);
}

/* source_name for one more profile of the series whose "series {...}"
 * prefix (prefix bytes) r->name already holds: no label formatting per
 * profile. */
static void source_name_at(run *r, size_t prefix, int64_t ts, const char *side)
{
    pd_buf *b = &r->name;
    if (!b->data || b->len < prefix) {
        b->len = 0;
        return;
    }
    b->len = prefix;
    char num[24], *e = num + sizeof num, *q = e;
    uint64_t u = ts < 0 ? 0 - (uint64_t)ts : (uint64_t)ts;
    do
        *--q = (char)('0' + u % 10);
    while ((u /= 10) != 0);
    if (ts < 0)
        *--q = '-';
    pd_buf_puts(b, " at ");
    pd_buf_append(b, q, (size_t)(e - q));
    pd_buf_puts(b, " ms");
    if (side) {
        pd_buf_puts(b, " (");
        pd_buf_puts(b, side);
        pd_buf_putc(b, ')');
    }
}

/* The series being folded in by add_side, for add_part. */
typedef struct part_ctx {
    run *r;
    const pd_series_info *const *v; /* the series aggregated (refs' order) */
    bool base;
    const char *side;
} part_ctx;

/* pd_storage_aggregate's poll: the merge's deadline and cancel. */
static int poll_part(void *ctx, pd_err *err) { return pd_merge_check(((part_ctx *)ctx)->r->m, err); }

/* pd_storage_aggregate's callback: one part (a block's sum over a group of
 * series, or one head profile) into the merger. */
static int add_part(void *ctx, const pd_storage_agg_part *part, const pd_profile *p, pd_err *err)
{
    part_ctx *c = ctx;
    run *r = c->r;
    const pd_series_info *si = c->v[part->series];
    pd_buf_reset(&r->name);
    pd_buf_puts(&r->name, "series ");
    pd_labels_format(&si->labels, &r->name);
    if (part->n_series > 1)
        pd_buf_printf(&r->name, " and %zu more", part->n_series - 1);
    size_t prefix = r->name.len;
    source_name_at(r, prefix, part->min_ts, c->side);
    if (part->n_profiles > 1 && r->name.data) {
        /* "... at T ms" -> "... from T to T2 ms (N profiles)" */
        r->name.len = prefix;
        pd_buf_printf(&r->name, " from %" PRId64 " to %" PRId64 " ms (%zu profiles)%s%s%s",
                      part->min_ts, part->max_ts, part->n_profiles, c->side ? " (" : "",
                      c->side ? c->side : "", c->side ? ")" : "");
    }
    return pd_merge_add_n(r->m, p, &si->labels, c->base, r->name.data, part->n_profiles, err);
}

/* Drops from set the series matching any of q's exclude selectors. */
static int exclude_series(const pd_query_side *q, pd_series_set *set, pd_err *err)
{
    for (size_t e = 0; e < q->n_exclude; e++) {
        pd_matcher *xm = NULL;
        size_t xn = 0;
        int rc = pd_selector_parse(q->exclude[e], &xm, &xn, err);
        if (rc < 0) {
            pd_err_prefix(err, "exclude %.100s", q->exclude[e]);
            return rc;
        }
        size_t k = 0;
        for (size_t i = 0; i < set->n; i++) {
            if (pd_matchers_match(xm, xn, &set->v[i].labels)) {
                pd_labels_release(&set->v[i].labels);
                continue;
            }
            set->v[k++] = set->v[i];
        }
        set->n = k;
        pd_matchers_free(xm, xn);
    }
    return 0;
}

/* PD_DELTA_AUTO: whether the sample type the answer is read for
 * (options sample_type: a name or an index; else the default_sample_type of
 * series ref's profile at pt, else the last type, pprof's rule) is one of
 * the cumulative types in mask. */
bool pd__query_shown_cumulative(pd_storage *st, const pd_merge_options *o, uint64_t ref,
                                const pd_point *pt, uint64_t mask)
{
    const char *want = o ? o->sample_type : NULL;
    size_t idx = pt->n_types ? pt->n_types - 1 : 0;
    pd_profile p;
    bool have_p = false;
    if (want && *want) {
        char *end;
        unsigned long u = strtoul(want, &end, 10);
        if (*end == 0 && want[0] >= '0' && want[0] <= '9') {
            idx = (size_t)u;
        } else {
            idx = SIZE_MAX;
            for (size_t t = 0; t < pt->n_types && pt->types; t++)
                if (pt->types[t].type && !strcmp(pt->types[t].type, want))
                    idx = t;
        }
    } else {
        pd_err e;
        pd_err_clear(&e);
        have_p = pd_storage_read_profile(st, ref, pt->ts_ms, &p, NULL, &e) == 0;
        if (have_p && p.default_sample_type) {
            const char *d = pd_profile_str(&p, p.default_sample_type);
            for (size_t t = 0; t < pt->n_types && pt->types; t++)
                if (pt->types[t].type && d && !strcmp(pt->types[t].type, d))
                    idx = t;
        }
    }
    if (have_p)
        pd_profile_release(&p);
    return idx < 64 && (mask >> idx & 1);
}

/* One side of a merge or diff once selected (prep_side), before its sum. */
typedef struct side_prep {
    pd_matcher *ms;
    size_t n;
    pd_series_set set;
    const pd_series_info **v; /* nv series with profiles in range (refs' order) */
    uint64_t *refs, *mask;
    uint32_t *group;
    size_t *npts;
    size_t nv;
    bool delta;     /* summed as deltas (pd_storage_aggregate_delta) */
    size_t n_count; /* what the side counts as inputs besides deltas */
} side_prep;

static void side_prep_release(side_prep *sp)
{
    free(sp->v);
    free(sp->refs);
    free(sp->group);
    free(sp->mask);
    free(sp->npts);
    pd_series_set_release(&sp->set);
    pd_matchers_free(sp->ms, sp->n);
    memset(sp, 0, sizeof *sp);
}

/* Selects a merge side's series, checks their sample types (all before any
 * profile is read), decides deltas and groups. */
static int prep_side(run *r, const pd_query_side *q, const char *side, side_prep *sp, pd_err *err)
{
    memset(sp, 0, sizeof *sp);
    int delta_mode = r->o ? (int)r->o->delta : PD_DELTA_AUTO;
    bool auto_decided = false, auto_cum = false;
    int rc;
    if ((rc = pd_selector_parse(q->selector, &sp->ms, &sp->n, err)) < 0)
        return rc;
    if ((rc = pd_storage_select(r->st, sp->ms, sp->n, q->from, q->to, &sp->set, err)) < 0 ||
        (rc = pd_matchers_check_limits(sp->ms, sp->n, err)) < 0)
        return rc;
    if ((rc = exclude_series(q, &sp->set, err)) < 0)
        return rc;
    if (sp->set.n == 0)
        return pd_err_set(
            err, PD_ENOTFOUND,
            "no series matching %.200s has profiles between %" PRId64 " and %" PRId64 " ms%s%s%s",
            q->selector, q->from, q->to, side ? " (" : "", side ? side : "", side ? ")" : "");
    size_t n = sp->set.n;
    sp->v = malloc(n * sizeof *sp->v);
    sp->refs = malloc(n * sizeof *sp->refs);
    sp->group = malloc(n * sizeof *sp->group);
    sp->mask = malloc(n * sizeof *sp->mask);
    sp->npts = malloc(n * sizeof *sp->npts);
    if (!sp->v || !sp->refs || !sp->group || !sp->mask || !sp->npts)
        return pd_err_set(err, PD_ENOMEM, "merge: out of memory");
    for (size_t i = 0; i < n && rc >= 0; i++) {
        pd_points pts = {0};
        size_t np = 0; /* the profiles; pts holds the first of each run of equal types */
        rc = pd_storage_read_type_runs(r->st, sp->set.v[i].ref, q->from, q->to, &pts, &np, err);
        if (rc == PD_ENOTFOUND) {
            rc = 0;
            continue;
        }
        if (rc < 0)
            break;
        /* all sample types first: a mismatch fails before any body is read */
        for (size_t j = 0; j < pts.n && rc >= 0; j++)
            if (!j || !same_types(&pts.v[j], &pts.v[j - 1])) /* equal to one checked: passes */
                rc = check_point(r, &sp->set.v[i].labels, &pts.v[j], side, err);
        if (pts.n && rc >= 0) {
            size_t k = sp->nv;
            r->series++;
            sp->mask[k] = pd_query_cumulative_mask(&sp->set.v[i].labels, &pts.v[0]);
            if (sp->mask[k] && delta_mode == PD_DELTA_AUTO && !auto_decided) {
                auto_decided = true;
                auto_cum = pd__query_shown_cumulative(r->st, r->o, sp->set.v[i].ref, &pts.v[0],
                                                      sp->mask[k]);
            }
            sp->npts[k] = np;
            sp->refs[k] = sp->set.v[i].ref;
            sp->v[sp->nv++] = &sp->set.v[i];
        }
        pd_points_release(&pts);
    }
    if (rc < 0)
        return rc;
    bool any_mask = false;
    for (size_t i = 0; i < sp->nv; i++)
        any_mask = any_mask || sp->mask[i] != 0;
    sp->delta =
        any_mask && (delta_mode == PD_DELTA_ON || (delta_mode == PD_DELTA_AUTO && auto_cum));
    for (size_t i = 0; i < sp->nv; i++)
        sp->n_count += sp->delta && sp->mask[i] ? 0 : sp->npts[i];
    if (sp->nv && (rc = pd__query_groups(sp->v, sp->nv, r->by, sp->group)) < 0)
        return pd_err_set(err, rc, "merge: out of memory");
    return 0;
}

/* Sums a prepared side into r->m inside the store (pd_storage_aggregate by
 * stack id, per block and group of series; with deltas, each profile times
 * its weight: pd_storage_aggregate_delta). */
static int agg_side(run *r, const pd_query_side *q, bool base, const char *side, side_prep *sp,
                    pd_err *err)
{
    if (!sp->nv)
        return 0;
    part_ctx c = {r, sp->v, base, side};
    size_t n_deltas = 0;
    pd_merge_stats before;
    pd_merge_get_stats(r->m, &before);
    int rc = pd_storage_aggregate_filtered(r->st, r->o ? r->o->sample_filter : NULL, sp->refs,
                                           sp->group, sp->delta ? sp->mask : NULL, sp->nv, q->from,
                                           q->to, add_part, poll_part, &c, NULL, &n_deltas, err);
    if (rc >= 0 && sp->delta && sp->n_count + n_deltas == 0)
        rc = pd_err_set(err, PD_ENOTFOUND,
                        "no delta: every series matching %.200s between %" PRId64 " and %" PRId64
                        " ms has only its first stored profile there (the baseline deltas "
                        "start from)%s%s%s; widen the range, or ask delta=false for the "
                        "stored counters",
                        q->selector, q->from, q->to, side ? " (" : "", side ? side : "",
                        side ? ")" : "");
    if (rc >= 0 && sp->delta) {
        pd_merge_stats after;
        pd_merge_get_stats(r->m, &after);
        pd__merge_recount(r->m, base, after.profiles - before.profiles, sp->n_count + n_deltas);
        r->delta = true;
    }
    return rc;
}

/* Folds one side (single or merge) into r->m. */
static int add_side(run *r, const pd_query_side *q, bool base, const char *side, pd_err *err)
{
    int rc;
    if (!q->selector)
        return pd_err_set(err, PD_EINVAL, "no selector given%s%s%s", side ? " (" : "",
                          side ? side : "", side ? ")" : "");
    if (q->mode == PD_QUERY_MODE_SINGLE) {
        pd_profile p;
        pd_labels ls;
        pd_labels_init(&ls);
        int64_t ts = 0;
        if ((rc = pd_query_single(r->st, q->selector, q->time, &p, &ls, &ts, err)) < 0)
            return rc;
        r->series++;
        source_name(&ls, ts, side, &r->name);
        const pd_storage_sample_filter *f = r->o ? r->o->sample_filter : NULL;
        for (size_t j = 0; f && j < p.n_sample; j++) /* zero sums are dropped */
            if (!pd_storage_sample_passes(f, &p, p.sample[j].label, p.sample[j].n_label))
                memset(p.sample[j].value, 0, p.sample[j].n_value * sizeof *p.sample[j].value);
        rc = pd_merge_add(r->m, &p, &ls, base, r->name.data, err);
        pd_profile_release(&p);
        pd_labels_release(&ls);
        return rc;
    }
    side_prep sp;
    rc = prep_side(r, q, side, &sp, err);
    if (rc >= 0)
        rc = agg_side(r, q, base, side, &sp, err);
    side_prep_release(&sp);
    return rc;
}

/* The parts of a diff in one pass (pd_storage_aggregate_diff): each to its
 * side's add_part. */
static int add_diff_part(void *ctx, const pd_storage_agg_part *part, const pd_profile *p,
                         pd_err *err)
{
    part_ctx *c = ctx;
    return add_part(&c[part->side ? 1 : 0], part, p, err);
}

/* A diff of two merge sides: both selected and checked as add_side does,
 * then, without deltas, summed in one pass by the store
 * (pd_storage_aggregate_diff: the same parts as two add_side calls give,
 * so the same answer); a side with deltas is summed on its own, as
 * add_side does. 1 when it does not apply (a single side): nothing was
 * done. */
static int add_diff(run *r, const pd_query_side *base, const pd_query_side *cur, pd_err *err)
{
    if (!base->selector || !cur->selector || base->mode == PD_QUERY_MODE_SINGLE ||
        cur->mode == PD_QUERY_MODE_SINGLE)
        return 1;
    side_prep sc, sb;
    memset(&sb, 0, sizeof sb);
    int rc = prep_side(r, cur, "query_b", &sc, err);
    if (rc >= 0 && sc.delta) { /* the new side first, then the base, as before */
        rc = agg_side(r, cur, false, "query_b", &sc, err);
        /* each side's sample types are checked alone; the merger checks
         * the two sides against each other */
        pd_buf_reset(&r->first_types);
        if (rc >= 0)
            rc = add_side(r, base, true, "query_a", err);
        goto out;
    }
    pd_buf_reset(&r->first_types);
    if (rc >= 0)
        rc = prep_side(r, base, "query_a", &sb, err);
    if (rc >= 0 && (sb.delta || !sc.nv || !sb.nv || (r->o && r->o->sample_filter))) {
        rc = agg_side(r, cur, false, "query_b", &sc, err);
        if (rc >= 0)
            rc = agg_side(r, base, true, "query_a", &sb, err);
        goto out;
    }
    if (rc >= 0) {
        part_ctx c[2] = {{r, sc.v, false, "query_b"}, {r, sb.v, true, "query_a"}};
        pd_storage_agg_side sd[2] = {
            {.refs = sc.refs, .group = sc.group, .n = sc.nv, .mint = cur->from, .maxt = cur->to},
            {.refs = sb.refs, .group = sb.group, .n = sb.nv, .mint = base->from, .maxt = base->to},
        };
        rc = pd_storage_aggregate_diff(r->st, sd, add_diff_part, poll_part, c, err);
    }
out:
    side_prep_release(&sc);
    side_prep_release(&sb);
    return rc;
}

static int run_query(pd_storage *st, const pd_query_side *base, const pd_query_side *cur,
                     const pd_merge_options *o, pd_profile *out, pd_merge_stats *stats, pd_err *err)
{
    run r = {.st = st, .by = o ? o->by : NULL, .o = o};
    pd_buf_init(&r.first_types, 0);
    pd_buf_init(&r.types, 0);
    pd_buf_init(&r.name, 0);
    memset(out, 0, sizeof *out);
    int rc = pd_merge_new(o, &r.m, err);
    if (rc < 0)
        goto out;
    /* a diff of two merges: one pass in the store when it can */
    if (base && (rc = add_diff(&r, base, cur, err)) <= 0)
        goto stats;
    /* the new side first, then the base: pprof's order for -diff_base */
    if ((rc = add_side(&r, cur, false, base ? "query_b" : NULL, err)) < 0)
        goto out;
    if (base) {
        /* each side's sample types are checked alone; the merger checks
         * the two sides against each other */
        pd_buf_reset(&r.first_types);
        if ((rc = add_side(&r, base, true, "query_a", err)) < 0)
            goto out;
    }
stats:
    if (rc < 0)
        goto out;
    if (stats) {
        pd_merge_get_stats(r.m, stats);
        stats->series = r.series;
        stats->delta = r.delta;
    }
    rc = pd_merge_finish(r.m, out, err);
    if (rc == 0)
        pd__query_symbolize(out);
out:
    pd_merge_free(r.m);
    pd_buf_release(&r.first_types);
    pd_buf_release(&r.types);
    pd_buf_release(&r.name);
    return rc;
}

int pd_query_merge(pd_storage *st, const pd_query_side *q, const pd_merge_options *o,
                   pd_profile *out, pd_merge_stats *stats, pd_err *err)
{
    return run_query(st, NULL, q, o, out, stats, err);
}

int pd_query_diff(pd_storage *st, const pd_query_side *base, const pd_query_side *cur,
                  const pd_merge_options *o, pd_profile *out, pd_merge_stats *stats, pd_err *err)
{
    return run_query(st, base, cur, o, out, stats, err);
}
