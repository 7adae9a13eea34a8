/*
 * query/engine.c — queries over the store: range (timestamps + totals),
 * single profile, series / label names / label values.
 *
 * Everything goes through storage.h: pd_storage_select picks series by
 * matchers and time range, pd_storage_read_points gives timestamps and
 * totals (no profile body is read), pd_storage_read_profile one profile.
 * Results are JSON appended to the caller's buffer; on failure the buffer is
 * cut back to what it held before the call, so no partial JSON is left.
 */
#include "query/query.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <xxhash.h>
#include "base/u64map.h"
#include "query/query_int.h"

/* Upper bound on the series one listing collects (union of selectors). */
#define MAX_LISTED_SERIES 1000000

static int put_labels(pd_buf *out, const pd_labels *ls)
{
    int rc = pd_buf_putc(out, '{');
    for (size_t i = 0; i < ls->n && !rc; i++) {
        if (i)
            rc = pd_buf_putc(out, ',');
        if (!rc)
            rc = pd__query_json_cstr(out, ls->v[i].name);
        if (!rc)
            rc = pd_buf_putc(out, ':');
        if (!rc)
            rc = pd__query_json_cstr(out, ls->v[i].value);
    }
    if (!rc)
        rc = pd_buf_putc(out, '}');
    return rc;
}

/* The series' "timestamps":[...],"totals":[[...],...] numbers: the bulk of
 * a query_range answer (1,000 series x 720 points x 5 numbers is ~33 MB).
 * Room is reserved once per series and the digits written in place
 * (pd__query_fmt_i64: the bytes "%lld" gives, without printf's ~100 ns per
 * call); b's cap still applies (PD_ETOOBIG). 0, PD_ENOMEM, PD_ETOOBIG. */
static int put_i64(pd_buf *out, int64_t v)
{
    char tmp[PD_QUERY_I64_MAX];
    return pd_buf_append(out, tmp, pd__query_fmt_i64(tmp, v));
}

/* put_numbers number by number: fails with PD_ETOOBIG only when the text
 * itself does not fit under the cap. */
static int put_numbers_exact(pd_buf *out, const pd_points *pts)
{
    int rc = 0;
    for (size_t i = 0; i < pts->n && !rc; i++)
        if (!(rc = i ? pd_buf_putc(out, ',') : 0))
            rc = put_i64(out, pts->v[i].ts_ms);
    if (!rc)
        rc = pd_buf_puts(out, "],\"totals\":[");
    for (size_t i = 0; i < pts->n && !rc; i++) {
        const pd_point *pt = &pts->v[i];
        rc = pd_buf_puts(out, i ? ",[" : "[");
        for (size_t t = 0; t < pt->n_types && !rc; t++)
            if (!(rc = t ? pd_buf_putc(out, ',') : 0))
                rc = put_i64(out, pt->totals[t]);
        if (!rc)
            rc = pd_buf_putc(out, ']');
    }
    return rc;
}

static int put_numbers(pd_buf *out, const pd_points *pts)
{
    size_t need = sizeof "],\"totals\":[" + 2;
    for (size_t i = 0; i < pts->n; i++) /* ",ts" and ",[" v(,v)* "]" */
        need += 2 * (PD_QUERY_I64_MAX + 1) + 3 + pts->v[i].n_types * (PD_QUERY_I64_MAX + 1);
    int rc = pd_buf_reserve(out, need);
    if (rc == PD_ETOOBIG) /* near the cap: the bound overestimates, go exact */
        return put_numbers_exact(out, pts);
    if (rc)
        return rc;
    char *p = out->data + out->len;
    for (size_t i = 0; i < pts->n; i++) {
        if (i)
            *p++ = ',';
        p += pd__query_fmt_i64(p, pts->v[i].ts_ms);
    }
    memcpy(p, "],\"totals\":[", sizeof "],\"totals\":[" - 1);
    p += sizeof "],\"totals\":[" - 1;
    for (size_t i = 0; i < pts->n; i++) {
        const pd_point *pt = &pts->v[i];
        if (i)
            *p++ = ',';
        *p++ = '[';
        for (size_t t = 0; t < pt->n_types; t++) {
            if (t)
                *p++ = ',';
            p += pd__query_fmt_i64(p, pt->totals[t]);
        }
        *p++ = ']';
    }
    out->len = (size_t)(p - out->data);
    out->data[out->len] = '\0';
    return 0;
}

/* Room for a query_range answer over set, reserved at once: the answer
 * (~70 bytes per point with 4 sample types: 33 MB for 1,000 series x 720)
 * would otherwise grow by doubling, each realloc copying what was written
 * and touching fresh pages (a third of the request's CPU, perf). Sized for
 * 8 sample types per point and capped by out's limit; untouched pages cost
 * no memory. Large answers are marked for transparent huge pages (a page
 * fault per 2 MiB instead of per 4 KiB where the kernel's THP mode is
 * "madvise"). A hint: a failure changes nothing. */
static void reserve_answer(pd_buf *out, const pd_series_set *set, size_t lo, size_t hi)
{
    size_t need = 64;
    for (size_t i = lo; i < hi; i++)
        need += 512 + set->v[i].n_profiles * (8 * 12 + 24);
    size_t room = out->max > out->len ? out->max - out->len : 0;
    if (out->max && need > room)
        need = room;
    if (need < ((size_t)4 << 20) || pd_buf_reserve(out, need) < 0)
        return;
#ifdef MADV_HUGEPAGE
    uintptr_t a =
        ((uintptr_t)out->data + out->len + ((size_t)2 << 20) - 1) & ~(((uintptr_t)2 << 20) - 1);
    uintptr_t e = ((uintptr_t)out->data + out->cap) & ~(((uintptr_t)2 << 20) - 1);
    if (e > a)
        madvise((void *)a, e - a, MADV_HUGEPAGE);
#endif
}

static int put_series_range(pd_buf *out, const pd_series_info *si, const pd_points *pts, bool delta)
{
    int rc = pd_buf_puts(out, "{\"labels\":");
    if (!rc)
        rc = put_labels(out, &si->labels);
    if (!rc)
        rc = pd_buf_puts(out, ",\"sample_types\":[");
    if (pts->n) {
        const pd_point *p0 = &pts->v[0];
        for (size_t t = 0; t < p0->n_types && !rc; t++) {
            if (t)
                rc = pd_buf_putc(out, ',');
            if (!rc)
                rc = pd_buf_puts(out, "{\"type\":");
            if (!rc)
                rc = pd__query_json_cstr(out, p0->types ? p0->types[t].type : "");
            if (!rc)
                rc = pd_buf_puts(out, ",\"unit\":");
            if (!rc)
                rc = pd__query_json_cstr(out, p0->types ? p0->types[t].unit : "");
            if (!rc)
                rc = pd_buf_puts(out, ",\"kind\":");
            if (!rc)
                rc = pd__query_json_cstr(
                    out, pd_query_sample_kind(&si->labels, p0->types ? p0->types[t].type : NULL));
            if (!rc)
                rc = pd_buf_putc(out, '}');
        }
    }
    if (!rc && delta)
        rc = pd_buf_puts(out, "],\"delta\":true,\"timestamps\":[");
    else if (!rc)
        rc = pd_buf_puts(out, "],\"timestamps\":[");
    if (!rc)
        rc = put_numbers(out, pts);
    if (!rc)
        rc = pd_buf_puts(out, "]}");
    return rc;
}

int pd_query_range(pd_storage *st, const char *selector, int64_t from, int64_t to, pd_buf *out,
                   pd_err *err)
{
    return pd_query_range_ex(st, selector, from, to, true, out, err);
}

/* The series set->v[lo, hi) of a query_range answer appended to out,
 * separated by commas (none before the first); *any: whether one was
 * written. Errors as pd_query_range_ex (out then holds a partial text). */
static int range_series(pd_storage *st, const pd_series_set *set, size_t lo, size_t hi,
                        int64_t from, int64_t to, bool delta, pd_buf *out, bool *any, pd_err *err)
{
    int rc = 0;
    *any = false;
    for (size_t i = lo; i < hi; i++) {
        pd_points pts = {0};
        rc = pd_storage_read_points(st, set->v[i].ref, from, to, &pts, err);
        if (rc == PD_ENOTFOUND) { /* gone since the select (retention) */
            rc = 0;
            continue;
        }
        if (rc < 0)
            return rc;
        bool applied = false; /* delta.c: each point against the one before, also before from */
        if (delta && (rc = pd_query_points_delta(st, &set->v[i], &pts, &applied, err)) < 0) {
            pd_points_release(&pts);
            return rc;
        }
        if (!pts.n) { /* its points were in a damaged block part (a warning) */
            pd_points_release(&pts);
            continue;
        }
        if (*any)
            rc = pd_buf_putc(out, ',');
        *any = true;
        if (!rc)
            rc = put_series_range(out, &set->v[i], &pts, applied);
        pd_points_release(&pts);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* A share of the series of a query_range answer, written on its own thread
 * into its own buffer (with its own storage warnings collector). */
typedef struct range_share {
    pd_storage *st;
    const pd_series_set *set;
    size_t lo, hi;
    int64_t from, to;
    bool delta, any;
    pd_buf out;
    int rc;
    pd_err err;
    pd_storage_warnings w;
    pthread_t tid;
    bool started;
} range_share;

static void *range_share_main(void *arg)
{
    range_share *r = arg;
    pd_storage_warnings_begin(&r->w);
    reserve_answer(&r->out, r->set, r->lo, r->hi);
    r->rc = range_series(r->st, r->set, r->lo, r->hi, r->from, r->to, r->delta, &r->out, &r->any,
                         &r->err);
    pd_storage_warnings_end();
    return NULL;
}

/* Series per share at least: fewer are not worth a thread. */
#define RANGE_SHARE_MIN 64

int pd_query_range_ex(pd_storage *st, const char *selector, int64_t from, int64_t to, bool delta,
                      pd_buf *out, pd_err *err)
{
    pd_matcher *ms = NULL;
    size_t n = 0, start = out->len, n_sh = 0;
    pd_series_set set = {0};
    range_share *sh = NULL;
    int rc = pd_selector_parse(selector, &ms, &n, err);
    if (rc < 0)
        return rc;
    /* every series' points are read below: a block cut by the range is
       not decoded twice (once to count, once to read) */
    if ((rc = pd_storage_select_overlapping(st, ms, n, from, to, &set, err)) < 0 ||
        (rc = pd_matchers_check_limits(ms, n, err)) < 0)
        goto out;
    /* the series in contiguous shares: the first on this thread, straight
       into out, the others on threads of their own (pd_storage_workers),
       appended after it in order: the same bytes as one thread writes */
    size_t threads = (size_t)pd_storage_workers(st);
    if (threads > set.n / RANGE_SHARE_MIN)
        threads = set.n / RANGE_SHARE_MIN;
    if (threads > 1 && (sh = calloc(threads, sizeof *sh))) {
        n_sh = threads;
        for (size_t t = 0; t < n_sh; t++) {
            sh[t] = (range_share){.st = st,
                                  .set = &set,
                                  .lo = set.n * t / n_sh,
                                  .hi = set.n * (t + 1) / n_sh,
                                  .from = from,
                                  .to = to,
                                  .delta = delta};
            pd_buf_init(&sh[t].out, out->max);
            pd_err_clear(&sh[t].err);
        }
        for (size_t t = 1; t < n_sh; t++)
            sh[t].started = pthread_create(&sh[t].tid, NULL, range_share_main, &sh[t]) == 0;
    }
    reserve_answer(out, &set, 0, set.n);
    if ((rc = pd_buf_putc(out, '[')) < 0)
        goto out;
    bool any = false;
    rc = range_series(st, &set, 0, n_sh ? sh[0].hi : set.n, from, to, delta, out, &any, err);
    for (size_t t = 1; t < n_sh; t++) {
        if (sh[t].started)
            pthread_join(sh[t].tid, NULL);
        else /* no thread: this one writes the share */
            range_share_main(&sh[t]);
        sh[t].started = false;
        pd_storage_warnings_add(&sh[t].w); /* to this thread's collector, in order */
        if (rc < 0)
            continue; /* an earlier share failed: that is the answer */
        if ((rc = sh[t].rc) < 0) {
            if (err)
                *err = sh[t].err;
            continue;
        }
        if (sh[t].any && any && (rc = pd_buf_putc(out, ',')) < 0)
            continue;
        if (sh[t].any && (rc = pd_buf_append(out, sh[t].out.data, sh[t].out.len)) < 0)
            continue;
        any = any || sh[t].any;
        pd_buf_release(&sh[t].out); /* early: the answer holds it now */
    }
    if (rc >= 0)
        rc = pd_buf_putc(out, ']');
out:
    for (size_t t = 0; t < n_sh; t++) {
        if (sh[t].started) /* left before its turn (the '[' failed) */
            pthread_join(sh[t].tid, NULL);
        pd_buf_release(&sh[t].out);
        pd_storage_warnings_release(&sh[t].w);
    }
    free(sh);
    if (rc < 0) {
        pd__query_buf_truncate(out, start);
        if (rc == PD_ETOOBIG && err && !err->msg[0])
            pd_err_set(err, rc, "query_range result is over the response size limit of %zu bytes",
                       out->max);
    }
    pd_series_set_release(&set);
    pd_matchers_free(ms, n);
    return rc;
}

/* Builds the PD_EAMBIGUOUS message listing up to 10 candidate series. */
static int ambiguous(const char *selector, const pd_series_set *set, pd_err *err)
{
    if (!err)
        return PD_EAMBIGUOUS;
    pd_buf msg, one;
    pd_buf_init(&msg, sizeof err->msg);
    pd_buf_init(&one, 0);
    pd_buf_printf(&msg, "selector %.100s matches %zu series, add labels to pick one of: ", selector,
                  set->n);
    size_t shown = 0;
    for (size_t i = 0; i < set->n && i < 10; i++) {
        pd_buf_reset(&one);
        if (pd_labels_format(&set->v[i].labels, &one) < 0)
            break;
        if (msg.len + one.len + 32 >= sizeof err->msg)
            break;
        if (shown)
            pd_buf_puts(&msg, ", ");
        pd_buf_append(&msg, one.data, one.len);
        shown++;
    }
    if (shown < set->n)
        pd_buf_printf(&msg, " (and %zu more)", set->n - shown);
    pd_err_set(err, PD_EAMBIGUOUS, "%s", msg.data ? msg.data : "ambiguous selector");
    pd_buf_release(&msg);
    pd_buf_release(&one);
    return PD_EAMBIGUOUS;
}

int pd_query_single(pd_storage *st, const char *selector, int64_t t, pd_profile *out,
                    pd_labels *labels, int64_t *ts_ms, pd_err *err)
{
    pd_matcher *ms = NULL;
    size_t n = 0;
    pd_series_set set = {0};
    pd_points pts = {0};
    int rc = pd_selector_parse(selector, &ms, &n, err);
    if (rc < 0)
        return rc;
    if ((rc = pd_storage_select(st, ms, n, INT64_MIN, INT64_MAX, &set, err)) < 0 ||
        (rc = pd_matchers_check_limits(ms, n, err)) < 0)
        goto out;
    if (set.n == 0) {
        rc = pd_err_set(err, PD_ENOTFOUND, "no series matches selector %.200s", selector);
        goto out;
    }
    if (set.n > 1) {
        rc = ambiguous(selector, &set, err);
        goto out;
    }
    const pd_series_info *si = &set.v[0];
    int64_t ts;
    if ((rc = pd_storage_read_points(st, si->ref, INT64_MIN, t, &pts, err)) < 0)
        goto out;
    if (pts.n) {
        ts = pts.v[pts.n - 1].ts_ms;
    } else {
        pd_points_release(&pts);
        memset(&pts, 0, sizeof pts);
        if ((rc = pd_storage_read_points(st, si->ref, t, INT64_MAX, &pts, err)) < 0)
            goto out;
        if (!pts.n) {
            rc = pd_err_set(err, PD_ENOTFOUND, "series matching %.200s has no profile", selector);
            goto out;
        }
        ts = pts.v[0].ts_ms;
    }
    if ((rc = pd_storage_read_profile(st, si->ref, ts, out, NULL, err)) < 0)
        goto out;
    pd__query_symbolize(out); /* issue 29: answers are named, the store keeps addresses */
    if ((rc = pd_labels_copy(labels, &si->labels)) < 0) {
        pd_profile_release(out);
        goto out;
    }
    *ts_ms = ts;
out:
    pd_points_release(&pts);
    pd_series_set_release(&set);
    pd_matchers_free(ms, n);
    return rc;
}

/* The union of the series matching any selector (all when n == 0), sorted
 * by labels, unique by ref. Labels are moved out of the storage's sets. */
typedef struct series_list {
    pd_series_info *v;
    size_t n, cap;
} series_list;

static void series_list_release(series_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        pd_labels_release(&l->v[i].labels);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int cmp_series(const void *a, const void *b)
{
    const pd_series_info *x = a, *y = b;
    return pd_labels_cmp(&x->labels, &y->labels);
}

static int collect(pd_storage *st, const char *const *selectors, size_t nsel, int64_t start,
                   int64_t end, series_list *l, pd_err *err)
{
    pd_u64map seen;
    pd_u64map_init(&seen);
    int rc = 0;
    size_t rounds = nsel ? nsel : 1;
    for (size_t k = 0; k < rounds && rc >= 0; k++) {
        pd_matcher *ms = NULL;
        size_t n = 0;
        pd_series_set set = {0};
        if (nsel && (rc = pd_selector_parse(selectors[k], &ms, &n, err)) < 0)
            break;
        rc = pd_storage_select(st, ms, n, start, end, &set, err);
        if (rc >= 0)
            rc = pd_matchers_check_limits(ms, n, err);
        for (size_t i = 0; i < set.n && rc >= 0; i++) {
            uint64_t ref = set.v[i].ref;
            if (pd_u64map_get(&seen, ref, NULL))
                continue;
            if (l->n >= MAX_LISTED_SERIES) {
                rc = pd_err_set(err, PD_ETOOBIG, "more than %d series match; narrow the selectors",
                                MAX_LISTED_SERIES);
                break;
            }
            if (l->n == l->cap) {
                size_t nc = l->cap ? l->cap * 2 : 16;
                pd_series_info *nv = realloc(l->v, nc * sizeof *nv);
                if (!nv) {
                    rc = PD_ENOMEM;
                    break;
                }
                l->v = nv;
                l->cap = nc;
            }
            if ((rc = pd_u64map_put(&seen, ref, 1)) < 0)
                break;
            l->v[l->n++] = set.v[i];
            pd_labels_init(&set.v[i].labels); /* moved */
        }
        pd_series_set_release(&set);
        pd_matchers_free(ms, n);
    }
    pd_u64map_release(&seen);
    if (rc < 0) {
        series_list_release(l);
        return rc;
    }
    if (l->n > 1)
        qsort(l->v, l->n, sizeof *l->v, cmp_series);
    return 0;
}

int pd_query_series(pd_storage *st, const char *const *selectors, size_t n, int64_t start,
                    int64_t end, pd_buf *out, pd_err *err)
{
    series_list l = {0};
    size_t at = out->len;
    int rc = collect(st, selectors, n, start, end, &l, err);
    if (rc < 0)
        return rc;
    rc = pd_buf_putc(out, '[');
    for (size_t i = 0; i < l.n && !rc; i++) {
        if (i)
            rc = pd_buf_putc(out, ',');
        if (!rc)
            rc = put_labels(out, &l.v[i].labels);
    }
    if (!rc)
        rc = pd_buf_putc(out, ']');
    if (rc < 0)
        pd__query_buf_truncate(out, at);
    series_list_release(&l);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Writes the sorted, unique strings strs[0..n) as a JSON array. */
static int put_sorted_unique(pd_buf *out, const char **strs, size_t n)
{
    if (n > 1)
        qsort(strs, n, sizeof *strs, cmp_str);
    int rc = pd_buf_putc(out, '[');
    bool first = true;
    for (size_t i = 0; i < n && !rc; i++) {
        if (i && strcmp(strs[i], strs[i - 1]) == 0)
            continue;
        if (!first)
            rc = pd_buf_putc(out, ',');
        first = false;
        if (!rc)
            rc = pd__query_json_cstr(out, strs[i]);
    }
    if (!rc)
        rc = pd_buf_putc(out, ']');
    return rc;
}

/* The labels of the series matching any of the selectors (each series
 * once), borrowed from sets (one pd_storage_select_latest per selector:
 * no copy, no sort — a listing sorts the strings it answers). *ls (n_ls)
 * is malloc'ed; release sets with pd_series_latest_set_release and free
 * both, also after an error. Errors as collect. */
static int collect_labels(pd_storage *st, const char *const *selectors, size_t nsel, int64_t start,
                          int64_t end, pd_series_latest_set *sets, const pd_labels ***ls,
                          size_t *n_ls, pd_err *err)
{
    pd_u64map seen;
    pd_u64map_init(&seen);
    int rc = 0;
    size_t rounds = nsel ? nsel : 1, cap = 0;
    *ls = NULL;
    *n_ls = 0;
    for (size_t k = 0; k < rounds && rc >= 0; k++) {
        pd_matcher *ms = NULL;
        size_t n = 0;
        if (nsel && (rc = pd_selector_parse(selectors[k], &ms, &n, err)) < 0)
            break;
        rc = pd_storage_select_latest(st, ms, n, start, end, &sets[k], err);
        if (rc >= 0)
            rc = pd_matchers_check_limits(ms, n, err);
        for (size_t i = 0; i < sets[k].n && rc >= 0; i++) {
            uint64_t ref = sets[k].v[i].ref;
            if (nsel > 1 && pd_u64map_get(&seen, ref, NULL))
                continue;
            if (*n_ls >= MAX_LISTED_SERIES) {
                rc = pd_err_set(err, PD_ETOOBIG, "more than %d series match; narrow the selectors",
                                MAX_LISTED_SERIES);
                break;
            }
            if (*n_ls == cap) {
                size_t nc = cap ? cap * 2 : 16;
                const pd_labels **nv = realloc(*ls, nc * sizeof *nv);
                if (!nv) {
                    rc = PD_ENOMEM;
                    break;
                }
                *ls = nv;
                cap = nc;
            }
            if (nsel > 1 && (rc = pd_u64map_put(&seen, ref, 1)) < 0)
                break;
            (*ls)[(*n_ls)++] = sets[k].v[i].labels;
        }
        pd_matchers_free(ms, n);
    }
    pd_u64map_release(&seen);
    return rc < 0 ? rc : 0;
}

/* name == NULL: label names; else the values of label `name`. Equal
 * strings are dropped by a hash set before the sort (the names of 50k
 * series are 150k strings, a handful distinct). */
static int list_labels(pd_storage *st, const char *name, const char *const *selectors, size_t n,
                       int64_t start, int64_t end, pd_buf *out, pd_err *err)
{
    size_t at = out->len, rounds = n ? n : 1, n_ls = 0;
    const char **strs = NULL;
    const pd_labels **ls = NULL;
    pd_u64map seen;
    pd_u64map_init(&seen);
    pd_series_latest_set *sets = calloc(rounds, sizeof *sets);
    int rc = sets ? collect_labels(st, selectors, n, start, end, sets, &ls, &n_ls, err) : PD_ENOMEM;
    if (rc < 0)
        goto out;
    size_t total = 0, k = 0;
    for (size_t i = 0; i < n_ls; i++)
        total += name ? 1 : ls[i]->n;
    if (total && !(strs = malloc(total * sizeof *strs))) {
        rc = PD_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n_ls && rc >= 0; i++) {
        for (size_t j = 0; j < ls[i]->n && rc >= 0; j++) {
            const pd_label *l = &ls[i]->v[j];
            if (name && strcmp(l->name, name))
                continue;
            const char *v = name ? l->value : l->name;
            /* each string once: its hash, compared on a hit (a collision
               of unequal strings keeps both: put_sorted_unique drops
               equal neighbours anyway) */
            uint64_t h = XXH3_64bits(v, strlen(v)), at_k;
            h = h == UINT64_MAX ? 0 : h;
            if (pd_u64map_get(&seen, h, &at_k) && !strcmp(strs[at_k], v))
                continue;
            rc = pd_u64map_put(&seen, h, k);
            strs[k++] = v;
        }
    }
    if (rc >= 0)
        rc = put_sorted_unique(out, strs, k);
out:
    if (rc == PD_ENOMEM)
        pd_err_set(err, rc, "list labels: out of memory");
    if (rc < 0)
        pd__query_buf_truncate(out, at);
    pd_u64map_release(&seen);
    free(strs);
    free(ls);
    for (size_t i = 0; sets && i < rounds; i++)
        pd_series_latest_set_release(&sets[i]);
    free(sets);
    return rc;
}

int pd_query_label_names(pd_storage *st, const char *const *selectors, size_t n, int64_t start,
                         int64_t end, pd_buf *out, pd_err *err)
{
    return list_labels(st, NULL, selectors, n, start, end, out, err);
}

int pd_query_profile_types(pd_storage *st, const char *const *selectors, size_t n, int64_t start,
                           int64_t end, pd_buf *out, pd_err *err)
{
    series_list l = {0};
    size_t at = out->len;
    int rc = collect(st, selectors, n, start, end, &l, err);
    if (rc < 0)
        return rc;
    /* l is sorted by labels, __name__ first: one run per profile type */
    rc = pd_buf_putc(out, '[');
    bool first = true;
    for (size_t i = 0; i < l.n && rc >= 0;) {
        const char *name = pd_labels_get(&l.v[i].labels, "__name__");
        size_t j = i + 1;
        while (j < l.n) {
            const char *nj = pd_labels_get(&l.v[j].labels, "__name__");
            if ((name == NULL) != (nj == NULL) || (name && strcmp(name, nj)))
                break;
            j++;
        }
        /* the sample types of the run's newest profile in the range (of its
           last series: each series of a type has the same ones as a rule) */
        pd_points pts = {0};
        rc = pd_storage_read_point_before(st, l.v[j - 1].ref, end == INT64_MAX ? end : end + 1,
                                          &pts, err);
        if (rc == PD_ENOTFOUND) {
            pd_err_clear(err);
            rc = 0;
        }
        if (rc >= 0 && name) {
            rc = pd_buf_puts(out, first ? "{\"name\":" : ",{\"name\":");
            first = false;
            if (!rc)
                rc = pd__query_json_cstr(out, name);
            if (!rc)
                rc = pd_buf_printf(out, ",\"series\":%zu,\"sample_types\":[", j - i);
            const pd_point *p0 = pts.n ? &pts.v[0] : NULL;
            for (size_t t = 0; p0 && t < p0->n_types && !rc; t++) {
                rc = pd_buf_puts(out, t ? ",{\"type\":" : "{\"type\":");
                if (!rc)
                    rc = pd__query_json_cstr(out, p0->types ? p0->types[t].type : "");
                if (!rc)
                    rc = pd_buf_puts(out, ",\"unit\":");
                if (!rc)
                    rc = pd__query_json_cstr(out, p0->types ? p0->types[t].unit : "");
                if (!rc)
                    rc = pd_buf_puts(out, ",\"kind\":");
                if (!rc)
                    rc = pd__query_json_cstr(
                        out, pd_query_sample_kind(&l.v[j - 1].labels,
                                                  p0->types ? p0->types[t].type : NULL));
                if (!rc)
                    rc = pd_buf_putc(out, '}');
            }
            if (!rc)
                rc = pd_buf_puts(out, "]}");
        }
        pd_points_release(&pts);
        i = j;
    }
    if (rc >= 0)
        rc = pd_buf_putc(out, ']');
    if (rc < 0)
        pd__query_buf_truncate(out, at);
    series_list_release(&l);
    return rc;
}

int pd_query_label_values(pd_storage *st, const char *name, const char *const *selectors, size_t n,
                          int64_t start, int64_t end, pd_buf *out, pd_err *err)
{
    if (!name || !name[0])
        return pd_err_set(err, PD_EINVAL, "label name is empty");
    return list_labels(st, name, selectors, n, start, end, out, err);
}
