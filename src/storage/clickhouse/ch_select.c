/*
 * storage/clickhouse/ch_select.c — the series side of the ClickHouse
 * querier: select (series from the label index, every matcher re-checked on
 * the labels) and read_points (the profiles' totals, prefetched for a whole
 * selection in one query and kept per thread for a few seconds), plus the
 * read helpers ch_read.c shares (ch_int.h). The design is in clickhouse.h.
 *
 * Every query filters on day (the partition key) as well as ts, so
 * ClickHouse reads only the days in range. Queries name the plain tables:
 * on a cluster those are the Distributed ones, and subqueries use GLOBAL IN
 * (allowed on plain tables too) so one text works in both modes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include "base/log.h"
#include "storage/clickhouse/ch_int.h"

#define CH_CACHE_MS 5000           /* prefetched points kept this long (below) */
#define CH_CACHE_MAX_POINTS 200000 /* and only this many */

typedef struct types_grp types_grp;
static void remember(pd_ch *c, const char *where, int64_t mint, int64_t maxt, types_grp *g,
                     size_t n_g);

int pd__ch_nomem(pd_err *err)
{
    return pd_err_set(err, PD_ENOMEM, "out of memory (ClickHouse read)");
}

int pd__ch_put_fp_in(pd_buf *b, const uint64_t *fps, size_t n)
{
    int rc = pd_buf_puts(b, "fingerprint IN (");
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = pd_buf_printf(b, "%s%llu", i ? "," : "", (unsigned long long)fps[i]);
    return rc ? rc : pd_buf_putc(b, ')');
}

int pd__ch_put_range(pd_buf *b, int64_t mint, int64_t maxt)
{
    int rc = pd_buf_puts(b, " day BETWEEN ");
    rc = rc ? rc : pd__ch_put_sql_day(b, pd__ch_day(mint));
    rc = rc ? rc : pd_buf_puts(b, " AND ");
    rc = rc ? rc : pd__ch_put_sql_day(b, pd__ch_day(maxt));
    rc = rc ? rc
            : pd_buf_printf(b, " AND ts BETWEEN %lld AND %lld", (long long)mint, (long long)maxt);
    return rc;
}

int pd__ch_put_sample_buckets(pd_buf *b, int64_t mint, int64_t maxt)
{
    /* ts >= 0 (appends check it), and C's division truncates as intDiv */
    return pd_buf_printf(b, " AND intDiv(ts, %lld) BETWEEN %lld AND %lld",
                         (long long)PD_CH_AGG_BUCKET_MS, (long long)(mint / PD_CH_AGG_BUCKET_MS),
                         (long long)(maxt / PD_CH_AGG_BUCKET_MS));
}

/* Queries name their series' fingerprints (IN lists, ~20 bytes and an AST
 * element each, a diff's six times): ClickHouse's max_query_size (256 KiB)
 * and max_ast_elements (50,000) would refuse a merge of ~6,000 series; these
 * let ~500,000 through. */
#define CH_READ_SETTINGS                                                                           \
    "max_query_size=67108864&max_ast_elements=10000000&max_expanded_ast_elements=10000000"

int pd__ch_query(pd_ch *c, pd_buf *sql, pd_buf *resp, pd_err *err)
{
    if (pd_buf_putc(sql, 0) < 0)
        return pd__ch_nomem(err);
    return pd__ch_exec(c, (const char *)sql->data, NULL, 0, CH_READ_SETTINGS, resp, NULL, err);
}

int pd__ch_query_built(pd_ch *c, int build_rc, pd_buf *sql, pd_buf *resp, pd_err *err)
{
    return build_rc < 0 ? pd__ch_nomem(err) : pd__ch_query(c, sql, resp, err);
}

static void *bg_main(void *arg)
{
    ch_bg *q = arg;
    q->rc = pd__ch_query(q->c, q->sql, q->resp, &q->err);
    return NULL;
}

void pd__ch_bg_start(ch_bg *q)
{
    q->rc = 0;
    q->ran = true;
    pd_err_clear(&q->err);
    q->started = pthread_create(&q->th, NULL, bg_main, q) == 0;
}

int pd__ch_bg_join(ch_bg *q, pd_err *err)
{
    if (!q->ran)
        return 0;
    if (q->started)
        pthread_join(q->th, NULL);
    else
        bg_main(q);
    q->started = q->ran = false;
    if (q->rc < 0 && err)
        *err = q->err;
    return q->rc;
}

int pd__ch_bad_answer(pd_ch *c, pd_err *err, const char *what)
{
    return pd_err_set(err, -EIO, "ClickHouse %s: malformed RowBinary answer to %s",
                      c->urls[__atomic_load_n(&c->cur, __ATOMIC_RELAXED)], what);
}

char *pd__ch_rd_arena_str(ch_rd *r, pd_arena *a)
{
    const uint8_t *s;
    size_t n;
    pd__ch_rd_str(r, &s, &n);
    return pd_arena_strndup(a, (const char *)s, n);
}

/* ---- select ---- */

typedef struct fp_stat {
    uint64_t n;
    int64_t min, max;
} fp_stat;

/* A series' profiles of one sample-type set in the range (select's first
 * query): count, first and last ts, the types (strings in select's arena). */
struct types_grp {
    uint64_t fp, n;
    int64_t min, max;
    size_t n_types;
    pd_sample_type_desc *types;
};

static int cmp_info(const void *a, const void *b)
{
    return pd_labels_cmp(&((const pd_series_info *)a)->labels,
                         &((const pd_series_info *)b)->labels);
}

int pd__ch_select(pd_ch *c, const pd_matcher *ms, size_t n, int64_t mint, int64_t maxt,
                  pd_series_set *out, pd_err *err)
{
    out->v = NULL;
    out->n = 0;
    pd_buf where, sql, resp, lsql, lresp;
    pd_buf_init(&where, 0);
    pd_buf_init(&sql, 0);
    pd_buf_init(&resp, CH_MAX_ANSWER);
    pd_buf_init(&lsql, 0);
    pd_buf_init(&lresp, CH_MAX_ANSWER);
    ch_bg lq = {0};
    pd_u64map stat_idx;
    pd_u64map_init(&stat_idx);
    fp_stat *st = NULL;
    size_t n_st = 0, cap = 0;
    types_grp *grp = NULL;
    size_t n_grp = 0, cap_grp = 0;
    pd_arena ga;
    pd_arena_init(&ga);
    int rc = pd__ch_put_range(&where, mint, maxt);
    /* equality matchers from the inverted index; the rest re-checked below */
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (ms[i].type != PD_MATCH_EQ || !ms[i].value[0])
            continue;
        rc = pd_buf_puts(&where, " AND fingerprint GLOBAL IN (SELECT fingerprint FROM "
                                 "series_index_v3 WHERE day BETWEEN ");
        rc = rc ? rc : pd__ch_put_sql_day(&where, pd__ch_day(mint));
        rc = rc ? rc : pd_buf_puts(&where, " AND ");
        rc = rc ? rc : pd__ch_put_sql_day(&where, pd__ch_day(maxt));
        rc = rc ? rc : pd_buf_puts(&where, " AND name = ");
        rc = rc ? rc : pd__ch_put_sql_string(&where, ms[i].name, strlen(ms[i].name));
        rc = rc ? rc : pd_buf_puts(&where, " AND value = ");
        rc = rc ? rc : pd__ch_put_sql_string(&where, ms[i].value, strlen(ms[i].value));
        rc = rc ? rc : pd_buf_putc(&where, ')');
    }
    if (rc < 0 || pd_buf_putc(&where, 0) < 0) {
        rc = pd__ch_nomem(err);
        goto out;
    }
    /* the series' labels (second query) sent beside their counts: it
       names the same profiles rows by a subquery, not by the first
       answer (one round trip of latency instead of two) */
    if (pd_buf_printf(&lsql,
                      "SELECT fingerprint, any(names), any(values) FROM series_v3 WHERE "
                      "fingerprint GLOBAL IN (SELECT fingerprint FROM %s WHERE%s) "
                      "GROUP BY fingerprint FORMAT RowBinary",
                      pd__ch_profiles_read(c), (const char *)where.data) < 0) {
        rc = pd__ch_nomem(err);
        goto out;
    }
    lq = (ch_bg){.c = c, .sql = &lsql, .resp = &lresp};
    pd__ch_bg_start(&lq);
    rc = pd_buf_printf(&sql,
                       "SELECT fingerprint, count(), min(ts), max(ts), sample_types, sample_units "
                       "FROM %s WHERE%s GROUP BY fingerprint, sample_types, "
                       "sample_units FORMAT RowBinary",
                       pd__ch_profiles_read(c), (const char *)where.data);
    if ((rc = pd__ch_query_built(c, rc, &sql, &resp, err)) < 0)
        goto out;
    ch_rd r = {(const uint8_t *)resp.data, resp.len, 0, false};
    while (pd__ch_rd_more(&r)) {
        uint64_t fp = pd__ch_rd_u64(&r), at;
        fp_stat s = {pd__ch_rd_u64(&r), (int64_t)pd__ch_rd_u64(&r), (int64_t)pd__ch_rd_u64(&r)};
        if (n_grp == cap_grp) {
            size_t nc = cap_grp ? 2 * cap_grp : 64;
            types_grp *x = realloc(grp, nc * sizeof *x);
            if (!x) {
                rc = pd__ch_nomem(err);
                goto out;
            }
            grp = x;
            cap_grp = nc;
        }
        types_grp *tg = &grp[n_grp];
        *tg = (types_grp){.fp = fp, .n = s.n, .min = s.min, .max = s.max};
        uint64_t nt = pd__ch_rd_varint(&r);
        if (r.bad || nt > r.len)
            break;
        tg->n_types = (size_t)nt;
        tg->types = pd_arena_calloc(&ga, nt ? nt : 1, sizeof *tg->types);
        if (!tg->types) {
            rc = pd__ch_nomem(err);
            goto out;
        }
        for (size_t i = 0; i < nt; i++)
            tg->types[i].type = pd__ch_rd_arena_str(&r, &ga);
        if (pd__ch_rd_varint(&r) != nt)
            r.bad = true;
        for (size_t i = 0; i < nt && !r.bad; i++)
            tg->types[i].unit = pd__ch_rd_arena_str(&r, &ga);
        if (r.bad)
            break;
        for (size_t i = 0; i < nt; i++)
            if (!tg->types[i].type || !tg->types[i].unit) {
                rc = pd__ch_nomem(err);
                goto out;
            }
        n_grp++;
        if (pd_u64map_get(&stat_idx, fp, &at)) { /* another sample-type set of fp */
            st[at].n += s.n;
            if (s.min < st[at].min)
                st[at].min = s.min;
            if (s.max > st[at].max)
                st[at].max = s.max;
            continue;
        }
        if (n_st == cap) {
            size_t nc = cap ? 2 * cap : 64;
            fp_stat *x = realloc(st, nc * sizeof *x);
            if (!x) {
                rc = pd__ch_nomem(err);
                goto out;
            }
            st = x;
            cap = nc;
        }
        st[n_st] = s;
        if (pd_u64map_put(&stat_idx, fp, n_st++) < 0) {
            rc = pd__ch_nomem(err);
            goto out;
        }
    }
    if (r.bad) {
        rc = pd__ch_bad_answer(c, err, "the series' profile counts");
        goto out;
    }
    if (n_st == 0)
        goto out;
    if ((rc = pd__ch_bg_join(&lq, err)) < 0)
        goto out;
    out->v = calloc(n_st, sizeof *out->v);
    if (!out->v) {
        rc = pd__ch_nomem(err);
        goto out;
    }
    r = (ch_rd){(const uint8_t *)lresp.data, lresp.len, 0, false};
    char *tmp = NULL;
    while (pd__ch_rd_more(&r)) {
        uint64_t fp = pd__ch_rd_u64(&r), at;
        uint64_t nn = pd__ch_rd_varint(&r);
        if (r.bad || nn > r.len)
            break;
        const uint8_t **nv = calloc(nn ? 2 * nn : 1, sizeof *nv);
        size_t *nl = calloc(nn ? 2 * nn : 1, sizeof *nl);
        if (!nv || !nl) {
            free(nv);
            free(nl);
            rc = pd__ch_nomem(err);
            goto out;
        }
        for (uint64_t i = 0; i < nn; i++)
            pd__ch_rd_str(&r, &nv[i], &nl[i]);
        uint64_t nvals = pd__ch_rd_varint(&r);
        if (nvals != nn)
            r.bad = true;
        for (uint64_t i = 0; i < nn && !r.bad; i++)
            pd__ch_rd_str(&r, &nv[nn + i], &nl[nn + i]);
        pd_labels ls;
        pd_labels_init(&ls);
        for (uint64_t i = 0; i < nn && !r.bad && rc == 0; i++) {
            char *x = realloc(tmp, nl[i] + nl[nn + i] + 2);
            if (!x) {
                rc = pd__ch_nomem(err);
                break;
            }
            tmp = x;
            memcpy(tmp, nv[i], nl[i]);
            tmp[nl[i]] = 0;
            memcpy(tmp + nl[i] + 1, nv[nn + i], nl[nn + i]);
            tmp[nl[i] + 1 + nl[nn + i]] = 0;
            pd_err e2;
            if (pd_labels_set(&ls, tmp, tmp + nl[i] + 1, &e2) < 0)
                r.bad = true;
        }
        free(nv);
        free(nl);
        if (rc < 0 || r.bad || !pd_u64map_get(&stat_idx, fp, &at) ||
            !pd_matchers_match(ms, n, &ls)) {
            pd_labels_release(&ls);
            if (rc < 0 || r.bad)
                break;
            continue;
        }
        pd_series_info *si = &out->v[out->n++];
        si->ref = fp;
        si->labels = ls;
        si->n_profiles = (size_t)st[at].n;
        si->min_ts = st[at].min;
        si->max_ts = st[at].max;
        if (out->n == n_st)
            break;
    }
    free(tmp);
    if (rc < 0)
        goto out;
    if (r.bad) {
        rc = pd__ch_bad_answer(c, err, "the series' labels");
        goto out;
    }
    if ((rc = pd_matchers_check_limits(ms, n, err)) < 0)
        goto out;
    qsort(out->v, out->n, sizeof *out->v, cmp_info);
    size_t total = 0;
    for (size_t i = 0; i < out->n; i++)
        total += out->v[i].n_profiles;
    if (out->n > 1 && total <= CH_CACHE_MAX_POINTS)
        remember(c, (const char *)where.data, mint, maxt, grp, n_grp);
out:
    (void)pd__ch_bg_join(&lq, NULL); /* when left before its answer was read */
    if (rc < 0)
        pd_series_set_release(out);
    free(st);
    free(grp);
    pd_arena_release(&ga);
    pd_u64map_release(&stat_idx);
    pd_buf_release(&where);
    pd_buf_release(&sql);
    pd_buf_release(&resp);
    pd_buf_release(&lsql);
    pd_buf_release(&lresp);
    return rc;
}

/* ---- points ---- */

/* Reads one (ts, sample_types, sample_units, totals) into pt, strings in a.
 * 0, 1 for a malformed row, PD_ENOMEM. */
static int parse_point(ch_rd *r, pd_arena *a, pd_point *pt)
{
    pt->ts_ms = (int64_t)pd__ch_rd_u64(r);
    uint64_t nt = pd__ch_rd_varint(r);
    if (r->bad || nt > r->len)
        return 1;
    pt->n_types = (size_t)nt;
    pt->types = pd_arena_calloc(a, nt ? nt : 1, sizeof *pt->types);
    pt->totals = pd_arena_calloc(a, nt ? nt : 1, sizeof *pt->totals);
    if (!pt->types || !pt->totals)
        return PD_ENOMEM;
    for (size_t i = 0; i < nt; i++)
        pt->types[i].type = pd__ch_rd_arena_str(r, a);
    if (pd__ch_rd_varint(r) != nt)
        r->bad = true;
    for (size_t i = 0; i < nt && !r->bad; i++)
        pt->types[i].unit = pd__ch_rd_arena_str(r, a);
    if (pd__ch_rd_varint(r) != nt)
        r->bad = true;
    for (size_t i = 0; i < nt && !r->bad; i++)
        pt->totals[i] = (int64_t)pd__ch_rd_u64(r);
    if (r->bad)
        return 1;
    for (size_t i = 0; i < nt; i++)
        if (!pt->types[i].type || !pt->types[i].unit)
            return PD_ENOMEM;
    return 0;
}

/* What the last pd__ch_select of this thread selected, for the reads the
 * query layer makes next over every series selected: its filter, and
 *  - the sample-type runs of each series (pd__ch_read_type_runs: a merge's
 *    check before any profile is read), from select's own first query
 *    (grouped by series and sample types) — no query of their own;
 *  - the points (read_points: query_range, a delta merge's counts), read
 *    for all series in one query at the first read_points (not before:
 *    a merge needs only the runs).
 * Valid for the store and range it was made for, while no append of this
 * process happened since (c->gen) and for CH_CACHE_MS. */

typedef struct pcache_ent {
    size_t off, n; /* into pts, or (runs) into runs */
} pcache_ent;

typedef struct pcache {
    const pd_ch *c;
    uint64_t gen;
    int64_t mint, maxt, born;
    int64_t first, last; /* the selection's oldest and newest profile in [mint, maxt] (ms;
                            first > last: none) */
    char *where;         /* select's filter; NULL: nothing remembered */
    bool points_read;    /* the points query ran (idx/ents/pts hold its answer) */
    pd_u64map idx;       /* ref -> index into ents + 1 */
    pcache_ent *ents;
    size_t n_ents;
    pd_point *pts;
    size_t n_pts, cap_pts;
    pd_u64map ridx; /* ref -> index into rents + 1; absent: runs not known */
    pcache_ent *rents;
    size_t n_rents;
    pd_point *runs;  /* first ts and types of each run (totals NULL) */
    uint64_t *run_n; /* profiles in each run */
    size_t n_runs;
    pd_arena a;
} pcache;

static pthread_key_t g_cache_key;
static pthread_once_t g_cache_once = PTHREAD_ONCE_INIT;

static void pcache_clear(pcache *pc)
{
    pd_u64map_release(&pc->idx);
    pd_u64map_init(&pc->idx);
    pd_u64map_release(&pc->ridx);
    pd_u64map_init(&pc->ridx);
    free(pc->ents);
    free(pc->pts);
    free(pc->rents);
    free(pc->runs);
    free(pc->run_n);
    free(pc->where);
    pc->ents = pc->rents = NULL;
    pc->pts = pc->runs = NULL;
    pc->run_n = NULL;
    pc->where = NULL;
    pc->points_read = false;
    pc->n_ents = pc->n_pts = pc->cap_pts = pc->n_rents = pc->n_runs = 0;
    pd_arena_release(&pc->a);
    pd_arena_init(&pc->a);
    pc->c = NULL;
}

static void pcache_free(void *p)
{
    if (!p)
        return;
    pcache_clear(p);
    pd_u64map_release(&((pcache *)p)->idx);
    pd_u64map_release(&((pcache *)p)->ridx);
    free(p);
}

static void cache_key_init(void)
{
    (void)pthread_key_create(&g_cache_key, pcache_free);
}

static pcache *thread_cache(bool create)
{
    pthread_once(&g_cache_once, cache_key_init);
    pcache *pc = pthread_getspecific(g_cache_key);
    if (!pc && create) {
        pc = calloc(1, sizeof *pc);
        if (!pc)
            return NULL;
        pd_u64map_init(&pc->idx);
        pd_u64map_init(&pc->ridx);
        pd_arena_init(&pc->a);
        if (pthread_setspecific(g_cache_key, pc) != 0) {
            free(pc);
            return NULL;
        }
    }
    return pc;
}

/* Forgets this thread's prefetch if it is of c (a closed store's address
 * may be reused). */
void pd__ch_cache_forget(const pd_ch *c)
{
    pcache *pc = thread_cache(false);
    if (pc && pc->c == c)
        pcache_clear(pc);
}

static int cmp_grp(const void *a, const void *b)
{
    const types_grp *x = a, *y = b;
    if (x->fp != y->fp)
        return x->fp < y->fp ? -1 : 1;
    return x->min < y->min ? -1 : x->min > y->min;
}

/* Remembers select's filter and, from its groups g[0..n_g) (sorted here),
 * each series' sample-type runs: one per group when the groups' time spans
 * do not interleave (a series whose do is left out: read_type_runs reads
 * its points). Failures leave nothing remembered (reads then query). */
static void remember(pd_ch *c, const char *where, int64_t mint, int64_t maxt, types_grp *g,
                     size_t n_g)
{
    pcache *pc = thread_cache(true);
    if (!pc)
        return;
    pcache_clear(pc);
    pc->where = strdup(where);
    pc->runs = malloc((n_g ? n_g : 1) * sizeof *pc->runs);
    pc->run_n = malloc((n_g ? n_g : 1) * sizeof *pc->run_n);
    pc->rents = malloc((n_g ? n_g : 1) * sizeof *pc->rents);
    if (!pc->where || !pc->runs || !pc->run_n || !pc->rents)
        goto fail;
    qsort(g, n_g, sizeof *g, cmp_grp);
    pc->first = INT64_MAX;
    pc->last = INT64_MIN;
    for (size_t i = 0; i < n_g; i++) {
        pc->first = g[i].min < pc->first ? g[i].min : pc->first;
        pc->last = g[i].max > pc->last ? g[i].max : pc->last;
    }
    for (size_t i = 0, j; i < n_g; i = j) {
        bool apart = true;
        for (j = i + 1; j < n_g && g[j].fp == g[i].fp; j++)
            apart = apart && g[j - 1].max < g[j].min;
        if (!apart)
            continue;
        pc->rents[pc->n_rents] = (pcache_ent){pc->n_runs, j - i};
        if (pd_u64map_put(&pc->ridx, g[i].fp, ++pc->n_rents) < 0)
            goto fail;
        for (size_t k = i; k < j; k++) {
            pd_point *q = &pc->runs[pc->n_runs];
            q->ts_ms = g[k].min;
            q->n_types = g[k].n_types;
            q->totals = NULL;
            q->types = pd_arena_calloc(&pc->a, q->n_types ? q->n_types : 1, sizeof *q->types);
            if (!q->types)
                goto fail;
            for (size_t t = 0; t < q->n_types; t++) {
                q->types[t].type = pd_arena_strdup(&pc->a, g[k].types[t].type);
                q->types[t].unit = pd_arena_strdup(&pc->a, g[k].types[t].unit);
                if (!q->types[t].type || !q->types[t].unit)
                    goto fail;
            }
            pc->run_n[pc->n_runs++] = g[k].n;
        }
    }
    pc->c = c;
    pc->gen = __atomic_load_n(&c->gen, __ATOMIC_ACQUIRE);
    pc->born = c->clock();
    pc->mint = mint;
    pc->maxt = maxt;
    return;
fail:
    pcache_clear(pc);
}

/* Whether this thread's cache serves c over [mint, maxt]. */
static pcache *cache_for(pd_ch *c, int64_t mint, int64_t maxt)
{
    pcache *pc = thread_cache(false);
    if (!pc || !pc->where || pc->c != c || pc->gen != __atomic_load_n(&c->gen, __ATOMIC_ACQUIRE) ||
        c->clock() - pc->born > CH_CACHE_MS || c->clock() < pc->born || mint < pc->mint ||
        maxt > pc->maxt)
        return NULL;
    return pc;
}

bool pd__ch_select_span(pd_ch *c, int64_t mint, int64_t maxt, int64_t *first, int64_t *last)
{
    pcache *pc = cache_for(c, mint, maxt);
    if (!pc)
        return false;
    *first = pc->first;
    *last = pc->last;
    return true;
}

/* Reads the points of every series of the remembered selection (one
 * query) into pc. On failure none are kept (read_points then queries its
 * series). */
static void read_all_points(pd_ch *c, pcache *pc)
{
    pc->points_read = true;
    pd_buf sql, resp;
    pd_buf_init(&sql, 0);
    pd_buf_init(&resp, CH_MAX_ANSWER);
    pd_err err;
    int rc = pd_buf_printf(
        &sql,
        "SELECT fingerprint, ts, sample_types, sample_units, totals FROM %s WHERE%s ORDER BY "
        "fingerprint, ts LIMIT %d FORMAT RowBinary",
        pd__ch_profiles_read(c), pc->where, CH_CACHE_MAX_POINTS + 1);
    bool ok = pd__ch_query_built(c, rc, &sql, &resp, &err) == 0;
    ch_rd r = {(const uint8_t *)resp.data, resp.len, 0, false};
    uint64_t last = 0;
    while (ok && pd__ch_rd_more(&r)) {
        uint64_t fp = pd__ch_rd_u64(&r);
        if (pc->n_pts == pc->cap_pts) {
            size_t nc = pc->cap_pts ? 2 * pc->cap_pts : 1024;
            pd_point *v = realloc(pc->pts, nc * sizeof *v);
            pcache_ent *e = v ? realloc(pc->ents, nc * sizeof *e) : NULL;
            if (v)
                pc->pts = v;
            if (!e) {
                ok = false;
                break;
            }
            pc->ents = e;
            pc->cap_pts = nc;
        }
        if (parse_point(&r, &pc->a, &pc->pts[pc->n_pts]) != 0) {
            ok = false;
            break;
        }
        if (pc->n_ents == 0 || fp != last) {
            if (pd_u64map_get(&pc->idx, fp, NULL) ||
                pd_u64map_put(&pc->idx, fp, pc->n_ents + 1) < 0) {
                ok = false;
                break;
            }
            pc->ents[pc->n_ents++] = (pcache_ent){pc->n_pts, 0};
            last = fp;
        }
        pc->ents[pc->n_ents - 1].n++;
        pc->n_pts++;
    }
    if (!ok || pc->n_pts > CH_CACHE_MAX_POINTS) {
        pd_u64map_release(&pc->idx);
        pd_u64map_init(&pc->idx); /* none served; the strings stay in pc->a until cleared */
        pc->n_ents = pc->n_pts = 0;
    }
    pd_buf_release(&sql);
    pd_buf_release(&resp);
}

int pd__ch_read_type_runs(pd_ch *c, uint64_t ref, int64_t mint, int64_t maxt, pd_points *out,
                          size_t *n_profiles, pd_err *err)
{
    pcache *pc = cache_for(c, mint, maxt);
    uint64_t at;
    if (!pc || mint != pc->mint || maxt != pc->maxt || !pd_u64map_get(&pc->ridx, ref, &at))
        return 0;
    const pcache_ent *e = &pc->rents[at - 1];
    pd_arena *a = malloc(sizeof *a);
    if (!a)
        return pd__ch_nomem(err);
    pd_arena_init(a);
    out->priv = a;
    out->n = 0;
    out->v = pd_arena_calloc(a, e->n ? e->n : 1, sizeof *out->v);
    if (!out->v) {
        pd_points_release(out);
        return pd__ch_nomem(err);
    }
    *n_profiles = 0;
    for (size_t i = 0; i < e->n; i++) {
        const pd_point *p = &pc->runs[e->off + i];
        pd_point *q = &out->v[out->n++];
        q->ts_ms = p->ts_ms;
        q->n_types = p->n_types;
        q->totals = NULL;
        q->types = pd_arena_calloc(a, p->n_types ? p->n_types : 1, sizeof *q->types);
        if (!q->types) {
            pd_points_release(out);
            return pd__ch_nomem(err);
        }
        for (size_t k = 0; k < p->n_types; k++) {
            q->types[k].type = pd_arena_strdup(a, p->types[k].type);
            q->types[k].unit = pd_arena_strdup(a, p->types[k].unit);
            if (!q->types[k].type || !q->types[k].unit) {
                pd_points_release(out);
                return pd__ch_nomem(err);
            }
        }
        *n_profiles += pc->run_n[e->off + i];
    }
    return 1;
}

/* Serves read_points from the prefetch: 1 (served), 0 (not cached), <0. */
static int from_cache(pd_ch *c, uint64_t ref, int64_t mint, int64_t maxt, pd_points *out,
                      pd_err *err)
{
    pcache *pc = cache_for(c, mint, maxt);
    uint64_t at;
    if (pc && !pc->points_read)
        read_all_points(c, pc);
    if (!pc || !pd_u64map_get(&pc->idx, ref, &at))
        return 0;
    const pcache_ent *e = &pc->ents[at - 1];
    pd_arena *a = malloc(sizeof *a);
    if (!a)
        return pd__ch_nomem(err);
    pd_arena_init(a);
    out->priv = a;
    out->v = pd_arena_calloc(a, e->n ? e->n : 1, sizeof *out->v);
    if (!out->v) {
        pd_points_release(out);
        return pd__ch_nomem(err);
    }
    for (size_t i = 0; i < e->n; i++) {
        const pd_point *p = &pc->pts[e->off + i];
        if (p->ts_ms < mint || p->ts_ms > maxt)
            continue;
        pd_point *q = &out->v[out->n];
        q->ts_ms = p->ts_ms;
        q->n_types = p->n_types;
        q->types = pd_arena_calloc(a, p->n_types ? p->n_types : 1, sizeof *q->types);
        q->totals = pd_arena_calloc(a, p->n_types ? p->n_types : 1, sizeof *q->totals);
        if (!q->types || !q->totals) {
            pd_points_release(out);
            return pd__ch_nomem(err);
        }
        for (size_t k = 0; k < p->n_types; k++) {
            q->types[k].type = pd_arena_strdup(a, p->types[k].type);
            q->types[k].unit = pd_arena_strdup(a, p->types[k].unit);
            q->totals[k] = p->totals[k];
            if (!q->types[k].type || !q->types[k].unit) {
                pd_points_release(out);
                return pd__ch_nomem(err);
            }
        }
        out->n++;
    }
    return 1;
}

static int series_exists(pd_ch *c, uint64_t ref, pd_err *err)
{
    pd_buf sql, resp;
    pd_buf_init(&sql, 0);
    pd_buf_init(&resp, 1024);
    int rc = pd_buf_printf(&sql,
                           "SELECT count() FROM series_v3 WHERE fingerprint = %llu "
                           "FORMAT RowBinary",
                           (unsigned long long)ref);
    rc = pd__ch_query_built(c, rc, &sql, &resp, err);
    if (rc == 0) {
        ch_rd r = {(const uint8_t *)resp.data, resp.len, 0, false};
        uint64_t n = pd__ch_rd_u64(&r);
        rc = r.bad ? pd__ch_bad_answer(c, err, "count()") : n > 0;
    }
    pd_buf_release(&sql);
    pd_buf_release(&resp);
    return rc;
}

int pd__ch_read_points(pd_ch *c, uint64_t ref, int64_t mint, int64_t maxt, pd_points *out,
                       pd_err *err)
{
    out->v = NULL;
    out->n = 0;
    out->priv = NULL;
    int rc = from_cache(c, ref, mint, maxt, out, err);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    pd_buf sql, resp;
    pd_buf_init(&sql, 0);
    pd_buf_init(&resp, CH_MAX_ANSWER);
    pd_arena *a = malloc(sizeof *a);
    if (!a) {
        rc = pd__ch_nomem(err);
        goto out;
    }
    pd_arena_init(a);
    out->priv = a;
    rc = pd_buf_printf(&sql,
                       "SELECT ts, sample_types, sample_units, totals FROM %s WHERE "
                       "fingerprint = %llu AND",
                       pd__ch_profiles_read(c), (unsigned long long)ref);
    rc = rc ? rc : pd__ch_put_range(&sql, mint, maxt);
    rc = rc ? rc : pd_buf_puts(&sql, " ORDER BY ts FORMAT RowBinary");
    if ((rc = pd__ch_query_built(c, rc, &sql, &resp, err)) < 0)
        goto out;
    size_t cap = 0;
    ch_rd r = {(const uint8_t *)resp.data, resp.len, 0, false};
    while (pd__ch_rd_more(&r)) {
        if (out->n == cap) {
            size_t nc = cap ? 2 * cap : 64;
            pd_point *v = pd_arena_alloc(a, nc * sizeof *v);
            if (!v) {
                rc = pd__ch_nomem(err);
                goto out;
            }
            if (out->n)
                memcpy(v, out->v, out->n * sizeof *v);
            out->v = v;
            cap = nc;
        }
        int pr = parse_point(&r, a, &out->v[out->n]);
        if (pr == PD_ENOMEM) {
            rc = pd__ch_nomem(err);
            goto out;
        }
        if (pr)
            break;
        out->n++;
    }
    if (r.bad) {
        rc = pd__ch_bad_answer(c, err, "the series' points");
        goto out;
    }
    if (out->n == 0) {
        rc = series_exists(c, ref, err);
        if (rc == 0)
            rc = pd_err_set(err, PD_ENOTFOUND, "no series with ref %llu", (unsigned long long)ref);
        else if (rc > 0)
            rc = 0;
    }
out:
    if (rc < 0)
        pd_points_release(out);
    pd_buf_release(&sql);
    pd_buf_release(&resp);
    return rc;
}
