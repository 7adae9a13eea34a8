/*
 * ingest/perf_script.c — the text of `perf script` (after `perf record -g`)
 * into pprof.
 *
 * Input, one record per sample; lines end in "\n" or "\r\n":
 *
 *   header  = COMM SP+ PID ["/" TID] SP+ ["[" CPU "]" SP+] SECS "." FRAC ":"
 *             SP+ [PERIOD SP+] EVENT ":" [SP+ rest]
 *   frame   = TAB SP* HEXADDR SP+ SYMBOL ["+0x" HEXOFF] [SP+ "(" DSO ")"]
 *             [NL SP+ FILE ":" LINE]        ; srcline, with -F +srcline
 *   blank line between records (optional: a header also ends a record)
 *
 *   hot  9404/9405 [000]  2567.217929:    1001001 cpu-clock:uhH:
 *   \t            115a hot_leaf+0x11 (/tmp/ing/hot)
 *   \t            11e2 main+0x21 (/tmp/ing/hot)
 *
 * - A line starting with a tab is a frame; any other non-blank line is a
 *   header (perf pads COMM with leading spaces when there is no callchain).
 * - COMM may hold spaces: the header is anchored on the timestamp token
 *   (digits "." digits ":"), preceded by an optional "[CPU]" and by PID or
 *   PID/TID; COMM is everything before. perf's default prints the TID alone,
 *   so a lone number becomes the label tid; PID/TID gives both.
 * - EVENT is the token ending in ":" after the timestamp and optional
 *   PERIOD; a trailing modifier part (":u", ":uhH", ":ppp") is dropped, so
 *   "cpu-clock:uhH:" is cpu-clock and "sched:sched_switch:" stays whole.
 *   Records whose event token starts with PERF_RECORD_ (side-band events
 *   shown with --show-*-events) are skipped. When the header goes on after
 *   the event with "ADDR SYMBOL (DSO)" (perf script without callchains), that
 *   is the sample's only frame; other trailing text (tracepoint fields) is
 *   ignored.
 * - Frames are leaf first, as pprof. SYMBOL may hold spaces and parentheses
 *   (C++); the DSO is the last parenthesised group of the line (nesting
 *   allowed, e.g. "(/x (deleted))"). "+0xOFF" is stripped from SYMBOL.
 *   "[unknown]" as SYMBOL means no function; as DSO, no mapping.
 * - A frame may be followed by a srcline line (FILE:LINE, indented with
 *   spaces); it gives the function's file name and the line number
 *   ("??:0", ":0" and perf's "DSO[ADDR]" for no position give neither). A frame line is therefore
 * held until the next line shows whether a srcline follows.
 *
 * Output model: one mapping per DSO (filename = DSO path, memory_start 0,
 * memory_limit one past the highest address seen, file offset 0: the
 * addresses are as perf prints them, i.e. in the DSO's own address space
 * for files; has_functions when every frame in it had a symbol); one
 * location per (mapping, address) with one line for the symbol's function
 * (and the srcline's line number), or no line for [unknown]; functions by
 * symbol name (and srcline file). Samples carry the
 * labels comm (string), pid and tid (numbers) when present, and the values
 * samples/count = 1 and, when headers carry PERIOD, the period: cpu-clock and
 * task-clock as cpu/nanoseconds, any other event as EVENT/count. The first
 * record fixes the event and whether periods are present; a record that
 * differs is an error (convert one event per file). period_type is that
 * second type and period the first record's PERIOD; duration_nanos is the
 * span of the timestamps unless the caller sets it.
 */
#include "ingest/ingest_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct span {
    const char *s;
    size_t n;
} span;

typedef struct perf_state {
    pd_profile_builder *b;
    pd_ingest_limits lim;
    /* current record */
    bool in_record;  /* a header was seen and its sample not yet added */
    bool skip;       /* the current record is a side-band event */
    size_t hdr_line; /* line of the current header */
    uint64_t *stack;
    size_t depth, cap_stack;
    pd_pprof_label labels[3];
    size_t n_labels;
    int64_t period;
    /* fixed by the first record */
    bool have_first;
    bool with_period;
    char event[256];
    /* strings */
    int64_t k_comm, k_pid, k_tid;
    char *tmp[2]; /* scratch NUL-terminated copies */
    size_t cap_tmp[2];
    /* the last frame line, held until we know whether a srcline follows */
    bool pend;
    size_t pend_line;
    uint64_t pend_addr;
    span pend_sym, pend_dso; /* point into the input */
    /* timestamps, ns */
    int64_t t_min, t_max;
    bool have_t;
    size_t n_records;
} perf_state;

static bool is_sp(char c)
{
    return c == ' ' || c == '\t';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_hex(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static span trim(span x)
{
    while (x.n && is_sp(x.s[0]))
        x.s++, x.n--;
    while (x.n && is_sp(x.s[x.n - 1]))
        x.n--;
    return x;
}

/* Next whitespace-separated token of *rest; false at the end. */
static bool next_token(span *rest, span *tok)
{
    *rest = trim(*rest);
    if (!rest->n)
        return false;
    size_t i = 0;
    while (i < rest->n && !is_sp(rest->s[i]))
        i++;
    tok->s = rest->s;
    tok->n = i;
    rest->s += i;
    rest->n -= i;
    return true;
}

static bool span_eq(span x, const char *lit)
{
    size_t n = strlen(lit);
    return x.n == n && !memcmp(x.s, lit, n);
}

/* A NUL-terminated copy of x in scratch slot k (0 or 1), valid until the
 * next call for that slot. NULL when out of memory. */
static const char *cstr(perf_state *st, int k, span x)
{
    if (x.n + 1 > st->cap_tmp[k]) {
        size_t nc = x.n + 1 < 256 ? 256 : x.n + 1;
        char *t = realloc(st->tmp[k], nc);
        if (!t)
            return NULL;
        st->tmp[k] = t;
        st->cap_tmp[k] = nc;
    }
    if (x.n)
        memcpy(st->tmp[k], x.s, x.n);
    st->tmp[k][x.n] = 0;
    return st->tmp[k];
}

/* Decimal int64 (optional leading '-'); false when not all digits or overflow. */
static bool parse_i64(span x, int64_t *out)
{
    size_t i = 0;
    bool neg = false;
    int64_t v = 0;
    if (x.n && x.s[0] == '-')
        neg = true, i = 1;
    if (i == x.n)
        return false;
    for (; i < x.n; i++) {
        if (!is_digit(x.s[i]))
            return false;
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, x.s[i] - '0', &v))
            return false;
    }
    *out = neg ? -v : v;
    return true;
}

static bool parse_hex(span x, uint64_t *out)
{
    uint64_t v = 0;
    if (!x.n || x.n > 16)
        return false;
    for (size_t i = 0; i < x.n; i++) {
        char c = x.s[i];
        if (!is_hex(c))
            return false;
        v = v << 4 | (uint64_t)(is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    *out = v;
    return true;
}

/* "12345.678901:" -> ns. */
static bool parse_time(span x, int64_t *ns)
{
    if (x.n < 4 || x.s[x.n - 1] != ':')
        return false;
    const char *dot = memchr(x.s, '.', x.n);
    if (!dot || dot == x.s)
        return false;
    span sec = {x.s, (size_t)(dot - x.s)};
    span frac = {dot + 1, x.n - 1 - (size_t)(dot + 1 - x.s)};
    int64_t s;
    if (!frac.n || sec.s[0] == '-' || !parse_i64(sec, &s))
        return false;
    int64_t f = 0;
    for (size_t i = 0; i < frac.n; i++) {
        if (!is_digit(frac.s[i]))
            return false;
        if (i < 9)
            f = f * 10 + (frac.s[i] - '0');
    }
    for (size_t i = frac.n; i < 9; i++)
        f *= 10;
    if (__builtin_mul_overflow(s, 1000000000, &s) || __builtin_add_overflow(s, f, &s))
        return false;
    *ns = s;
    return true;
}

static bool is_cpu_token(span x)
{
    if (x.n < 3 || x.s[0] != '[' || x.s[x.n - 1] != ']')
        return false;
    for (size_t i = 1; i + 1 < x.n; i++)
        if (!is_digit(x.s[i]))
            return false;
    return true;
}

/* PID or PID/TID (perf prints -1 for unknown). */
static bool parse_pid_tid(span x, int64_t *pid, int64_t *tid, bool *both)
{
    const char *slash = memchr(x.s, '/', x.n);
    if (!slash) {
        *both = false;
        return parse_i64(x, tid);
    }
    span a = {x.s, (size_t)(slash - x.s)}, b = {slash + 1, x.n - a.n - 1};
    *both = true;
    return parse_i64(a, pid) && parse_i64(b, tid);
}

/* Event name from its token "name[:mods]:" ; false when not an event token. */
static bool event_name(span tok, span *name)
{
    if (tok.n < 2 || tok.s[tok.n - 1] != ':')
        return false;
    span x = {tok.s, tok.n - 1};
    const char *colon = NULL;
    for (size_t i = x.n; i-- > 0;)
        if (x.s[i] == ':') {
            colon = x.s + i;
            break;
        }
    if (colon && colon > x.s) {
        span mods = {colon + 1, x.n - (size_t)(colon + 1 - x.s)};
        bool all = mods.n > 0;
        for (size_t i = 0; i < mods.n; i++)
            if (!strchr("ukhIGHpPSDeWb", mods.s[i]))
                all = false;
        if (all)
            x.n = (size_t)(colon - x.s);
    }
    if (!x.n)
        return false;
    *name = x;
    return true;
}

/* Splits a frame text "ADDR SYMBOL[+0xOFF] [(DSO)]" (leading blanks
 * allowed). False when it does not start with a hex address. */
static bool split_frame(span line, uint64_t *addr, span *sym, span *dso)
{
    span rest = line, tok;
    if (!next_token(&rest, &tok) || !parse_hex(tok, addr))
        return false;
    rest = trim(rest);
    dso->s = NULL;
    dso->n = 0;
    if (rest.n && rest.s[rest.n - 1] == ')') {
        size_t depth = 0, i = rest.n;
        while (i-- > 0) {
            if (rest.s[i] == ')')
                depth++;
            else if (rest.s[i] == '(' && --depth == 0)
                break;
        }
        if (depth == 0 && i < rest.n && (i == 0 || is_sp(rest.s[i - 1]))) {
            dso->s = rest.s + i + 1;
            dso->n = rest.n - i - 2;
            rest.n = i;
            rest = trim(rest);
        }
    }
    /* strip +0xOFF */
    size_t k = rest.n;
    while (k && is_hex(rest.s[k - 1]))
        k--;
    if (k < rest.n && k >= 3 && rest.s[k - 1] == 'x' && rest.s[k - 2] == '0' &&
        rest.s[k - 3] == '+')
        rest.n = k - 3;
    *sym = rest;
    return true;
}

static int push_frame(perf_state *st, size_t lineno, uint64_t addr, span sym, span dso, span file,
                      int64_t line_no, pd_err *err)
{
    int rc;
    uint64_t map_id = 0, fn_id = 0, loc_id;
    if (st->depth >= st->lim.max_stack_depth)
        return pd_err_set(err, PD_ETOOBIG,
                          "line %zu: stack of the sample at line %zu is deeper "
                          "than max_stack_depth=%zu frames",
                          lineno, st->hdr_line, st->lim.max_stack_depth);
    if (dso.n && !span_eq(dso, "[unknown]")) {
        const char *d = cstr(st, 0, dso);
        pd_pprof_mapping m = {0};
        if (!d)
            return pd_err_set(err, PD_ENOMEM, "line %zu: out of memory", lineno);
        if ((rc = pd_profile_builder_mapping(st->b, &m, d, NULL, &map_id, err)))
            goto fail;
    }
    if (sym.n && !span_eq(sym, "[unknown]")) {
        const char *s = cstr(st, 0, sym), *f = cstr(st, 1, file);
        if (!s || !f)
            return pd_err_set(err, PD_ENOMEM, "line %zu: out of memory", lineno);
        if ((rc = pd_profile_builder_function(st->b, s, NULL, f, 0, &fn_id, err)))
            goto fail;
    }
    pd_pprof_line ln = {.function_id = fn_id, .line = fn_id ? line_no : 0};
    if ((rc = pd_profile_builder_location(st->b, map_id, addr, &ln, fn_id ? 1 : 0, &loc_id, err)))
        goto fail;
    if (st->depth == st->cap_stack) {
        size_t nc = st->cap_stack ? st->cap_stack * 2 : 64;
        uint64_t *ns = realloc(st->stack, nc * sizeof *ns);
        if (!ns)
            return pd_err_set(err, PD_ENOMEM, "line %zu: out of memory", lineno);
        st->stack = ns;
        st->cap_stack = nc;
    }
    st->stack[st->depth++] = loc_id;
    return 0;
fail:
    if (rc == PD_ETOOBIG && err &&
        (strstr(err->msg, "max_locations") || strstr(err->msg, "max_functions")))
        return pd_err_set(err, rc, "line %zu: more than max_frames=%zu distinct frames", lineno,
                          st->lim.max_frames);
    pd_err_prefix(err, "line %zu", lineno);
    return rc;
}

/* Adds the current record's sample, if any. */
static int end_record(perf_state *st, pd_err *err)
{
    int rc;
    if (!st->in_record)
        return 0;
    st->in_record = false;
    if (st->skip)
        return 0;
    int64_t v[2] = {1, st->period};
    if ((rc = pd_profile_builder_sample(st->b, st->stack, st->depth, v, st->labels, st->n_labels,
                                        err))) {
        if (rc == PD_ETOOBIG && strstr(err ? err->msg : "", "max_samples"))
            return pd_err_set(err, rc, "line %zu: more than max_samples=%zu distinct samples",
                              st->hdr_line, st->lim.max_samples);
        pd_err_prefix(err, "sample at line %zu", st->hdr_line);
        return rc;
    }
    st->n_records++;
    return 0;
}

/* Declares the sample types from the first record. */
static int first_record(perf_state *st, size_t lineno, span ev, bool with_period, int64_t period,
                        pd_err *err)
{
    int rc;
    if (ev.n >= sizeof st->event)
        return pd_err_set(err, PD_EPARSE, "line %zu: event name of %zu bytes is too long", lineno,
                          ev.n);
    memcpy(st->event, ev.s, ev.n);
    st->event[ev.n] = 0;
    st->with_period = with_period;
    st->have_first = true;
    if ((rc = pd_profile_builder_sample_type(st->b, "samples", "count", err)) < 0)
        return rc;
    if (!with_period)
        return pd_profile_builder_period(st->b, "samples", "count", 1, err);
    bool cpu = !strcmp(st->event, "cpu-clock") || !strcmp(st->event, "task-clock");
    const char *type = cpu ? "cpu" : st->event, *unit = cpu ? "nanoseconds" : "count";
    if ((rc = pd_profile_builder_sample_type(st->b, type, unit, err)) < 0)
        return rc;
    return pd_profile_builder_period(st->b, type, unit, period, err);
}

static int header(perf_state *st, size_t lineno, span line, pd_err *err)
{
    int rc;
    span rest = line, tok;
    /* Tokens are visited left to right; the first timestamp token preceded
     * by PID[/TID] (and an optional [CPU]) anchors the header. */
    span prev[2] = {{0}};
    int n_prev = 0;
    int64_t pid = 0, tid = 0, t_ns = 0;
    bool both = false, found = false;
    span pid_tok = {0};
    while (next_token(&rest, &tok)) {
        if (n_prev >= 1 && parse_time(tok, &t_ns)) {
            span p = prev[1];
            if (is_cpu_token(p) && n_prev >= 2)
                p = prev[0];
            if (!is_cpu_token(p) && parse_pid_tid(p, &pid, &tid, &both)) {
                pid_tok = p;
                found = true;
                break;
            }
        }
        prev[0] = prev[1];
        prev[1] = tok;
        if (n_prev < 2)
            n_prev++;
    }
    if (!found)
        return pd_err_set(err, PD_EPARSE,
                          "line %zu: not a perf script sample header (expected "
                          "'COMM PID[/TID] [CPU] SECONDS: [PERIOD] EVENT:' followed by frame "
                          "lines starting with a tab)",
                          lineno);
    span comm = trim((span){line.s, (size_t)(pid_tok.s - line.s)});

    /* [PERIOD] EVENT: */
    span ev;
    int64_t period = 0;
    bool with_period = false;
    if (!next_token(&rest, &tok))
        return pd_err_set(err, PD_EPARSE, "line %zu: no event name after the timestamp", lineno);
    if (tok.n >= 12 && !memcmp(tok.s, "PERF_RECORD_", 12)) {
        st->in_record = true;
        st->skip = true;
        st->hdr_line = lineno;
        return 0;
    }
    if (parse_i64(tok, &period)) {
        if (period < 0)
            return pd_err_set(err, PD_EPARSE, "line %zu: negative period %" PRId64, lineno, period);
        with_period = true;
        if (!next_token(&rest, &tok))
            return pd_err_set(err, PD_EPARSE, "line %zu: no event name after the period", lineno);
    }
    if (!event_name(tok, &ev))
        return pd_err_set(err, PD_EPARSE,
                          "line %zu: '%.*s' is not an event name (expected "
                          "'NAME:' after the timestamp)",
                          lineno, (int)(tok.n > 60 ? 60 : tok.n), tok.s);
    if (!st->have_first) {
        if ((rc = first_record(st, lineno, ev, with_period, period, err)))
            return rc < 0 ? rc : 0;
    } else {
        if (strlen(st->event) != ev.n || memcmp(st->event, ev.s, ev.n))
            return pd_err_set(err, PD_EPARSE,
                              "line %zu: event '%.*s' differs from the first "
                              "sample's '%s' (convert one event per file)",
                              lineno, (int)(ev.n > 60 ? 60 : ev.n), ev.s, st->event);
        if (with_period != st->with_period)
            return pd_err_set(err, PD_EPARSE,
                              "line %zu: the sample has %s period but the first "
                              "sample has %s",
                              lineno, with_period ? "a" : "no", st->with_period ? "one" : "none");
    }

    st->in_record = true;
    st->skip = false;
    st->hdr_line = lineno;
    st->depth = 0;
    st->period = period;
    st->n_labels = 0;
    if (!st->have_t || t_ns < st->t_min)
        st->t_min = t_ns;
    if (!st->have_t || t_ns > st->t_max)
        st->t_max = t_ns;
    st->have_t = true;
    if (comm.n) {
        const char *c = cstr(st, 0, comm);
        int64_t s;
        if (!c)
            return pd_err_set(err, PD_ENOMEM, "line %zu: out of memory", lineno);
        if ((s = pd_profile_builder_string(st->b, c, err)) < 0) {
            pd_err_prefix(err, "line %zu", lineno);
            return (int)s;
        }
        st->labels[st->n_labels++] = (pd_pprof_label){.key = st->k_comm, .str = s};
    }
    if (both)
        st->labels[st->n_labels++] = (pd_pprof_label){.key = st->k_pid, .num = pid};
    st->labels[st->n_labels++] = (pd_pprof_label){.key = st->k_tid, .num = tid};

    /* Without callchains the one frame follows the event on this line. */
    span tail = trim(rest);
    uint64_t addr;
    span sym, dso;
    if (tail.n && split_frame(tail, &addr, &sym, &dso) && (sym.n || dso.n))
        return push_frame(st, lineno, addr, sym, dso, (span){0}, 0, err);
    return 0;
}

/* Adds the held frame line, with a source position when one followed. */
static int flush_frame(perf_state *st, span file, int64_t line_no, pd_err *err)
{
    if (!st->pend)
        return 0;
    st->pend = false;
    return push_frame(st, st->pend_line, st->pend_addr, st->pend_sym, st->pend_dso, file, line_no,
                      err);
}

/* A srcline line (from perf script -F +srcline), indented with spaces:
 * "FILE:LINE", optionally followed by parenthesised notes; or, when perf
 * has no source position, "DSO[HEXADDR]" ("[kernel.kallsyms][ffff...]"),
 * "??:0" or ":0", which give an empty file and line 0. */
static bool parse_srcline(span line, span *file, int64_t *line_no)
{
    span x = trim(line), tok, rest;
    if (!x.n || line.s[0] == '\t')
        return false;
    rest = x;
    next_token(&rest, &tok);
    rest = trim(rest);
    if (rest.n && rest.s[0] != '(')
        return false;
    file->s = tok.s;
    file->n = 0;
    *line_no = 0;
    if (!rest.n && tok.n >= 3 && tok.s[tok.n - 1] == ']' && memchr(tok.s, '[', tok.n - 1))
        return true;
    const char *colon = NULL;
    for (size_t i = tok.n; i-- > 0;)
        if (tok.s[i] == ':') {
            colon = tok.s + i;
            break;
        }
    if (!colon)
        return false;
    span num = {colon + 1, tok.n - (size_t)(colon + 1 - tok.s)};
    if (!num.n || num.s[0] == '-' || !parse_i64(num, line_no))
        return false;
    file->n = (size_t)(colon - tok.s);
    if (span_eq(*file, "??"))
        file->n = 0, *line_no = 0;
    return true;
}

/* Sets each mapping's memory_limit past its highest address and
 * has_functions when all of its locations have a function. */
static void fix_mappings(pd_profile *p)
{
    for (size_t i = 0; i < p->n_mapping; i++)
        p->mapping[i].has_functions = true;
    for (size_t i = 0; i < p->n_location; i++) {
        const pd_pprof_location *l = &p->location[i];
        if (!l->mapping_id || l->mapping_id > p->n_mapping)
            continue;
        pd_pprof_mapping *m = &p->mapping[l->mapping_id - 1]; /* builder ids are 1..n */
        uint64_t lim = l->address == UINT64_MAX ? UINT64_MAX : l->address + 1;
        if (lim > m->memory_limit)
            m->memory_limit = lim;
        if (!l->n_line)
            m->has_functions = false;
    }
}

int pd_ingest_perf_script(const char *data, size_t len, const pd_ingest_opts *opts, pd_profile *out,
                          pd_err *err)
{
    static const pd_ingest_opts none;
    const pd_ingest_opts *o = opts ? opts : &none;
    perf_state st = {.lim = pd__ingest_limits_effective(opts)};
    int rc;
    memset(out, 0, sizeof *out);
    if (len > st.lim.max_input_bytes)
        return pd_err_set(err, PD_ETOOBIG, "input of %zu bytes exceeds max_input_bytes=%zu", len,
                          st.lim.max_input_bytes);
    pd_pprof_limits pl = {.max_samples = st.lim.max_samples,
                          .max_locations = st.lim.max_frames,
                          .max_functions = st.lim.max_frames,
                          .max_stack_depth = st.lim.max_stack_depth,
                          .max_strings = 2 * st.lim.max_frames + st.lim.max_samples + 64};
    if ((rc = pd_profile_builder_new(&pl, &st.b)))
        return pd_err_set(err, rc, "out of memory");
    if ((rc = (int)(st.k_comm = pd_profile_builder_string(st.b, "comm", err))) < 0 ||
        (rc = (int)(st.k_pid = pd_profile_builder_string(st.b, "pid", err))) < 0 ||
        (rc = (int)(st.k_tid = pd_profile_builder_string(st.b, "tid", err))) < 0)
        goto out;

    size_t pos = 0, lineno = 0, n;
    const char *l;
    while (pd__ingest_next_line(data, len, &pos, &l, &n)) {
        lineno++;
        if (lineno > st.lim.max_lines) {
            rc = pd_err_set(err, PD_ETOOBIG, "line %zu: more than max_lines=%zu lines", lineno,
                            st.lim.max_lines);
            goto out;
        }
        if (n > st.lim.max_line_bytes) {
            rc = pd_err_set(err, PD_ETOOBIG, "line %zu: %zu bytes exceed max_line_bytes=%zu",
                            lineno, n, st.lim.max_line_bytes);
            goto out;
        }
        if (memchr(l, 0, n)) {
            rc = pd_err_set(err, PD_EPARSE, "line %zu: NUL byte in text", lineno);
            goto out;
        }
        span line = {l, n};
        if (!trim(line).n) {
            if ((rc = flush_frame(&st, (span){0}, 0, err)) || (rc = end_record(&st, err)))
                goto out;
            continue;
        }
        if (l[0] == '\t') {
            if (!st.in_record) {
                rc = pd_err_set(err, PD_EPARSE,
                                "line %zu: frame line outside a sample (no "
                                "header line before it)",
                                lineno);
                goto out;
            }
            if (st.skip)
                continue;
            uint64_t addr;
            span sym, dso;
            if (!split_frame(line, &addr, &sym, &dso)) {
                rc = pd_err_set(err, PD_EPARSE,
                                "line %zu: not a frame line (expected "
                                "'<TAB>HEXADDR SYMBOL (DSO)')",
                                lineno);
                goto out;
            }
            if ((rc = flush_frame(&st, (span){0}, 0, err)))
                goto out;
            st.pend = true;
            st.pend_line = lineno;
            st.pend_addr = addr;
            st.pend_sym = sym;
            st.pend_dso = dso;
            continue;
        }
        span file;
        int64_t line_no;
        if (st.pend && parse_srcline(line, &file, &line_no)) {
            if ((rc = flush_frame(&st, file, line_no, err)))
                goto out;
            continue;
        }
        if ((rc = flush_frame(&st, (span){0}, 0, err)) || (rc = end_record(&st, err)) ||
            (rc = header(&st, lineno, line, err)))
            goto out;
    }
    if ((rc = flush_frame(&st, (span){0}, 0, err)) || (rc = end_record(&st, err)))
        goto out;
    if (!st.have_first) {
        /* No samples: an empty profile that still names what it counts. */
        if ((rc = pd_profile_builder_sample_type(st.b, "samples", "count", err)) < 0 ||
            (rc = pd_profile_builder_period(st.b, "samples", "count", 1, err)))
            goto out;
    }
    pd_profile *pp = pd_profile_builder_profile(st.b);
    pp->time_nanos = o->time_nanos;
    pp->duration_nanos = o->duration_nanos ? o->duration_nanos : st.t_max - st.t_min;
    if ((rc = pd_profile_builder_finish(st.b, out, err)))
        goto out;
    fix_mappings(out);
out:
    pd_profile_builder_free(st.b);
    free(st.stack);
    free(st.tmp[0]);
    free(st.tmp[1]);
    return rc;
}
