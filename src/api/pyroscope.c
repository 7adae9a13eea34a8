/*
 * api/pyroscope.c — Pyroscope's ingest API:
 *
 *   POST /ingest?name=APP.TYPE{k=v,...}&from=&until=&sampleRate=&spyName=
 *               &units=&aggregationType=&format=
 *
 * Read input by input as grafana/pyroscope's server reads it (the ingest
 * handler, labelset.Parse, the pprof and Put adapters); docs/push.md's
 * "Pyroscope's /ingest" lists each rule.
 * name: parse_name (labelset.Parse). APP ending in ".TYPE" with TYPE in
 *   KNOWN_TYPES is split; else pprof bodies get the type from their sample
 *   types (detect_type, Pyroscope's metricName) and other bodies are cpu
 *   (no dot) or refused (unknown profile type, Pyroscope's convertMetadata).
 *   Stored labels: __name__=TYPE, service_name=APP (or the service_name tag,
 *   then app_name=APP for non-pprof bodies), pyroscope_spy=spyName
 *   ("unknown" when absent), the tags.
 * from/until: parse_time (attime.Parse: never fails); until - from becomes
 *   duration_nanos. sampleRate: absent, 0 or garbage is 100 Hz.
 * format (picked as Pyroscope picks it: trie / tree by format or by
 * Content-Type binary/octet-stream+trie|+tree, lines, jfr, a multipart
 * body, pprof, speedscope, and folded for anything else):
 *   trie: the body (raw or gzip) read by ingest/trie.h into folded text,
 *     then as folded.
 *   tree: the body (raw or gzip) read by ingest/trie.h's tree reader into
 *     folded text, then as folded.
 *   speedscope: the JSON (raw or gzip) converted by ingest/speedscope.h;
 *     one stored profile per profile of the file (equal names summed), each
 *     labelled as folded input plus profile_name=NAME; TYPE from the name's
 *     suffix, else cpu (time units, none) or memory (bytes).
 *   folded (also "collapsed", "groups", unknown) and lines: the body (raw, or gzip)
 *     is converted by ingest/ (pd_ingest_folded). With units empty or
 *     "samples", sampleRate (Hz, default 100) gives TYPE/nanoseconds
 *     values beside samples/count; other units give one TYPE/UNIT sample
 *     type with the counts (objects, goroutines and lock_samples become
 *     pprof's "count", lock_nanoseconds "nanoseconds", others are kept).
 *     The stored body is the converted profile, gzip pprof.
 *   pprof: a raw pprof body (gzip or not), stored as received; or, when
 *     the Content-Type is multipart/form-data (what the Pyroscope Go
 *     client sends, whatever format says), the parts
 *       profile            the pprof (required)
 *       prev_profile       the previous cumulative profile (optional)
 *       sample_type_config JSON {"TYPE":{"units":..,"aggregation":..,
 *                          "cumulative":bool,...},...} (optional)
 *     With prev_profile, the stored profile is profile - prev_profile for
 *     the cumulative sample types (those marked "cumulative":true, or with
 *     no config Pyroscope's defaults alloc_objects, alloc_space,
 *     contentions, delay) and profile for the others; samples that end up
 *     all zero are dropped. Without it, the profile part is stored as
 *     received.
 *   jfr: a Java Flight Recorder recording (the Pyroscope Java agent), raw
 *     or as the multipart parts jfr and labels: see ingest_jfr.c; one series
 *     per event kind (__name__ = the kind), labelled as the other formats.
 * aggregationType: accepted, not stored.
 *
 * Multipart parsing (RFC 2046 / 7578), by hand over the whole body: the
 * boundary comes from the Content-Type (at most 70 bytes, maybe quoted);
 * parts are delimited by "--BOUNDARY" at the body's start or "\r\n--BOUNDARY"
 * later; each part has headers (at most MP_MAX_HEADER bytes, ended by a blank
 * line) of which Content-Disposition's name="..." names the part; at most
 * MP_MAX_PARTS parts; the body must end with the close delimiter
 * "--BOUNDARY--" (else it was truncated). Part contents point into the body.
 *
 * Limits: the body and each part are held to the api's pprof limits
 * (max_body_bytes, gzip decompressed to max_decompressed_bytes, counts
 * of samples/locations/functions/stack depth in the decoder or converter);
 * a cap answers 413, anything malformed 400, both as text naming the
 * problem, counted in profd_rejected_input_total{reason} (bad_request,
 * bad_labels, bad_profile, too_large, series_limit). Nothing is stored unless
 * everything passed. Success: 200 with an empty body (as Pyroscope),
 * counted in profd_ingested_*{source="pyroscope"}.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "api/api_int.h"
#include "base/log.h"
#include "base/time.h"
#include "ingest/ingest.h"
#include "ingest/speedscope.h"
#include "ingest/trie.h"

#define MP_MAX_PARTS 16
#define MP_MAX_HEADER 8192
#define MP_MAX_BOUNDARY 70
#define MAX_NAME_BYTES 65536
#define MAX_CONFIG_BYTES 65536

static const char *const KNOWN_TYPES[] = {
    "cpu",
    "itimer",
    "wall",
    "alloc_objects",
    "alloc_space",
    "inuse_objects",
    "inuse_space",
    "goroutines",
    "goroutine",
    "mutex_count",
    "mutex_duration",
    "block_count",
    "block_duration",
    "lock_count",
    "lock_duration",
    "lock_samples",
    "lock_nanoseconds",
    "exceptions",
    "alloc_in_new_tlab_objects",
    "alloc_in_new_tlab_bytes",
    "alloc_outside_tlab_objects",
    "alloc_outside_tlab_bytes",
    "heap",
    "block",
    "mutex",
    "threadcreate",
};

static const char *const DEFAULT_CUMULATIVE[] = {"alloc_objects", "alloc_space", "contentions",
                                                 "delay"};

/* The api's limits with 0 fields replaced by the defaults. */
static pd_pprof_limits eff_limits(const pd_pprof_limits *l)
{
    pd_pprof_limits d = pd_pprof_limits_default();
    if (!l)
        return d;
#define TAKE(f)                                                                                    \
    if (l->f)                                                                                      \
        d.f = l->f;
    TAKE(max_body_bytes)
    TAKE(max_decompressed_bytes)
    TAKE(max_samples)
    TAKE(max_locations)
    TAKE(max_functions)
    TAKE(max_mappings)
    TAKE(max_strings)
    TAKE(max_sample_types)
    TAKE(max_stack_depth)
    TAKE(max_labels_per_sample)
    TAKE(max_lines)
#undef TAKE
    return d;
}

/* Seconds of one unit of an attime offset (graphite's attime, as
 * Pyroscope's pkg/og/util/attime): s, min/m, h, d, w, mon/M, y; else 0. */
static int64_t attime_unit(const char *u)
{
    if (u[0] == 's')
        return 1;
    if (!strncmp(u, "mon", 3) || u[0] == 'M')
        return 30 * 86400;
    if (u[0] == 'm')
        return 60;
    if (u[0] == 'h')
        return 3600;
    if (u[0] == 'd')
        return 86400;
    if (u[0] == 'w')
        return 7 * 86400;
    if (u[0] == 'y')
        return 365 * 86400;
    return 0;
}

/* from/until as Pyroscope reads them (attime.Parse), into Unix ms; never
 * fails, as there: digits only are Unix seconds, or ms / us / ns for 13 /
 * 16 / 19 digits (the Go client sends nanoseconds), or YYYYMMDD for 8 digits
 * that form a date; RFC 3339 and decimal seconds (pd_parse_time_param) are
 * taken too; anything else is now plus the offset after its first '+' or
 * '-' ("now-10s", "now-1h30m"), with '_', ',' and spaces dropped; an
 * unreadable offset counts as 0. */
static int64_t parse_time(const char *in)
{
    char s[64];
    size_t n = 0;
    for (const char *c = in; *c && n + 1 < sizeof s; c++)
        if (*c != '_' && *c != ',' && *c != ' ' && *c != '\t')
            s[n++] = *c;
    s[n] = 0;
    size_t d = strspn(s, "0123456789");
    if (n > 0 && d == n && n <= 19) {
        long long v = strtoll(s, NULL, 10);
        if (n == 8) {
            int y = (int)(v / 10000), mo = (int)(v / 100 % 100), dd = (int)(v % 100);
            if (y > 1900 && mo >= 1 && mo <= 12 && dd >= 1 && dd <= 31) {
                struct tm tm = {0};
                tm.tm_year = y - 1900;
                tm.tm_mon = mo - 1;
                tm.tm_mday = dd;
                return (int64_t)timegm(&tm) * 1000;
            }
        }
        return n == 13 ? v : n == 16 ? v / 1000 : n == 19 ? v / 1000000 : v * 1000;
    }
    int64_t ms;
    pd_err err = {{0}};
    if (pd_parse_time_param(in, &ms, &err) == 0)
        return ms;
    int64_t now = pd_now_ms();
    const char *off = strchr(s, '+');
    if (!off)
        off = strchr(s, '-');
    if (!off)
        return now;
    int sign = *off == '-' ? -1 : 1;
    off++;
    int64_t secs = 0;
    while (*off) {
        int64_t num = 0;
        while (*off >= '0' && *off <= '9') {
            if (num < 1000000000)
                num = num * 10 + (*off - '0');
            off++;
        }
        const char *u = off;
        while (*off && !(*off >= '0' && *off <= '9'))
            off++;
        secs += num * attime_unit(u);
        if (secs > 100LL * 365 * 86400)
            secs = 100LL * 365 * 86400;
    }
    return now + sign * secs * 1000;
}

/* ---- name=APP.TYPE{k=v,...} ---- */

/* True for the bytes Pyroscope allows in a tag key (flameql
 * IsTagKeyRuneAllowed): [a-zA-Z0-9_.]. */
static bool tag_key_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.';
}

/* s[0..n) without leading and trailing ASCII white space (Go's TrimSpace
 * on what clients send), as a malloc'd string. */
static char *trim_dup(const char *s, size_t n)
{
    while (n && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\v' || *s == '\f'))
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r' ||
                 s[n - 1] == '\v' || s[n - 1] == '\f'))
        n--;
    char *o = malloc(n + 1);
    if (o) {
        memcpy(o, s, n);
        o[n] = 0;
    }
    return o;
}

/* Parses name=APP{k=v,...} as Pyroscope's labelset.Parse does, byte by
 * byte over name + "{": APP is everything up to the first '{', trimmed,
 * 1+ bytes of [a-zA-Z0-9_.\-/]; then keys run to '=' (a '}' there ends the
 * set: "{foo}" adds nothing) and values to ',' or '}', both trimmed; a key
 * must be 1+ bytes of [a-zA-Z0-9_.] ("1abc" is fine); the same key again
 * replaces the value (last wins); an empty value means absent; text after
 * the closing '}' is read on in the key state, so it adds nothing unless it
 * holds a complete "k=v," (as there). Keys starting "__" (the Go client's
 * __session_id__, Pyroscope's __name__) are dropped. *app gets APP
 * (malloc'd), tags the labels. 0, or replies 400 (reason bad_labels) and
 * returns -1. */
static int parse_name(const char *name, char **app, pd_labels *tags, pd_http_response *resp)
{
    size_t len = strlen(name);
    *app = NULL;
    if (len > MAX_NAME_BYTES) {
        pd__api_text_error(resp, 400, "bad_labels", "name: %zu bytes, over the limit of %d", len,
                           MAX_NAME_BYTES);
        return -1;
    }
    if (!pd__api_utf8_valid(name, len)) {
        pd__api_text_error(resp, 400, "bad_labels", "name: not UTF-8");
        return -1;
    }
    enum { NAME, KEY, VALUE, DONE } st = NAME;
    size_t tok = 0;              /* start of the current app/value */
    size_t kstart = 0, kend = 0; /* key bytes (Pyroscope's key buffer) */
    bool have_key = false;
    pd_err err = {{0}};
    for (size_t i = 0; i <= len && st != DONE; i++) {
        char c = i < len ? name[i] : '{';
        switch (st) {
        case NAME:
            if (c != '{')
                break;
            *app = trim_dup(name, i);
            if (!*app)
                goto nomem;
            if (!**app) {
                pd__api_text_error(resp, 400, "bad_labels", "name: application name is required");
                return -1;
            }
            for (const char *a = *app; *a; a++)
                if (!tag_key_char(*a) && *a != '-' && *a != '/') {
                    pd__api_text_error(
                        resp, 400, "bad_labels",
                        "name: invalid application name \"%.100s\": character '%c' is not "
                        "allowed (want [a-zA-Z0-9_.\\-/])",
                        *app, *a);
                    return -1;
                }
            st = KEY;
            kstart = i + 1;
            kend = kstart;
            have_key = false;
            break;
        case KEY:
            if (c == '}') {
                st = DONE;
            } else if (c == '=') {
                st = VALUE;
                tok = i + 1;
            } else {
                if (!have_key)
                    kstart = i;
                have_key = true;
                kend = i + 1;
            }
            break;
        case VALUE:
            if (c != ',' && c != '}')
                break;
            {
                char *k = trim_dup(name + kstart, have_key ? kend - kstart : 0);
                char *v = trim_dup(name + tok, i - tok);
                if (!k || !v) {
                    free(k);
                    free(v);
                    goto nomem;
                }
                const char *bad = NULL;
                if (strcmp(k, "__name__") != 0) {
                    if (!*k)
                        bad = "label name is required";
                    for (const char *a = k; *a && !bad; a++)
                        if (!tag_key_char(*a))
                            bad = "character not allowed (want [a-zA-Z0-9_.])";
                }
                if (bad) {
                    pd__api_text_error(resp, 400, "bad_labels",
                                       "name: invalid label name \"%.100s\": %s", k, bad);
                    free(k);
                    free(v);
                    return -1;
                }
                int rc = 0;
                if (strncmp(k, "__", 2) != 0)
                    rc = pd_labels_set(tags, k, v, &err);
                free(k);
                free(v);
                if (rc == PD_ENOMEM)
                    goto nomem;
                if (rc < 0) {
                    pd__api_text_error(resp, 400, "bad_labels", "name: %s", err.msg);
                    return -1;
                }
            }
            st = KEY; /* also after '}', as labelset.Parse */
            have_key = false;
            break;
        case DONE:
            break;
        }
    }
    return 0;
nomem:
    pd__api_text_error(resp, 500, NULL, "out of memory");
    return -1;
}

/* Pyroscope's profile type of a pprof pushed under a name without a known
 * type suffix (pkg/og/convert/pprof RawProfile.metricName): "wall" when a
 * sample type is wall; else by the first sample type whose name (or its
 * display-name in sample_type_config, or in Pyroscope's default mapping:
 * samples -> cpu, goroutine -> goroutines, contentions -> mutex_count,
 * delay -> mutex_duration) holds cpu -> process_cpu; alloc_, inuse_, or is
 * space/objects -> memory; mutex_ -> mutex; block_ -> block; goroutines ->
 * goroutines; else the last sample type's name. Into out. */
static void detect_type(const pd_profile *p, json_t *cfg, char *out, size_t cap)
{
    const char *st = "";
    for (size_t i = 0; i < p->n_sample_type; i++)
        if (!strcmp(pd_profile_str(p, p->sample_type[i].type), "wall")) {
            snprintf(out, cap, "wall");
            return;
        }
    for (size_t i = 0; i < p->n_sample_type; i++) {
        st = pd_profile_str(p, p->sample_type[i].type);
        const char *dn = NULL;
        if (cfg) {
            json_t *c = json_object_get(cfg, st);
            dn = json_string_value(json_object_get(c, "display-name"));
        } else {
            dn = !strcmp(st, "samples")       ? "cpu"
                 : !strcmp(st, "goroutine")   ? "goroutines"
                 : !strcmp(st, "contentions") ? "mutex_count"
                 : !strcmp(st, "delay")       ? "mutex_duration"
                                              : NULL;
        }
        if (dn && *dn)
            st = dn;
        const char *t = strstr(st, "cpu") ? "process_cpu"
                        : strstr(st, "alloc_") || strstr(st, "inuse_") || !strcmp(st, "space") ||
                                !strcmp(st, "objects")
                            ? "memory"
                        : strstr(st, "mutex_")     ? "mutex"
                        : strstr(st, "block_")     ? "block"
                        : strstr(st, "goroutines") ? "goroutines"
                                                   : NULL;
        if (t) {
            snprintf(out, cap, "%s", t);
            return;
        }
    }
    snprintf(out, cap, "%s", st);
}

/* Splits APP.TYPE when TYPE is one of KNOWN_TYPES: the type into type
 * (cap bytes) and the length of APP into *app_len; else type "" and
 * *app_len the whole length. */
static void split_type(const char *app, char *type, size_t cap, size_t *app_len)
{
    size_t len = strlen(app);
    const char *dot = strrchr(app, '.');
    type[0] = 0;
    *app_len = len;
    if (!dot)
        return;
    for (size_t i = 0; i < sizeof KNOWN_TYPES / sizeof *KNOWN_TYPES; i++)
        if (!strcmp(dot + 1, KNOWN_TYPES[i]) && strlen(KNOWN_TYPES[i]) < cap) {
            snprintf(type, cap, "%s", KNOWN_TYPES[i]);
            *app_len = (size_t)(dot - app);
            return;
        }
}

/* ---- multipart ---- */

typedef struct part {
    char name[64];
    const uint8_t *data;
    size_t len;
} part;

/* The boundary of a multipart/form-data Content-Type into out. 0 or -1. */
static int mp_boundary(const char *ct, char *out, size_t cap)
{
    const char *b = strcasestr(ct, "boundary=");
    if (!b)
        return -1;
    b += 9;
    size_t n = 0;
    if (*b == '"') {
        b++;
        while (b[n] && b[n] != '"')
            n++;
        if (b[n] != '"')
            return -1;
    } else {
        while (b[n] && b[n] != ';' && b[n] != ' ' && b[n] != '\t')
            n++;
    }
    if (n == 0 || n > MP_MAX_BOUNDARY || n >= cap)
        return -1;
    memcpy(out, b, n);
    out[n] = 0;
    return 0;
}

/* The value of name="..." in a Content-Disposition header value. */
static void mp_part_name(const char *h, size_t hl, char *out, size_t cap)
{
    out[0] = 0;
    for (size_t i = 0; i + 6 <= hl; i++) {
        if (strncasecmp(h + i, "name=", 5) != 0 || (i > 0 && h[i - 1] != ' ' && h[i - 1] != ';'))
            continue;
        const char *v = h + i + 5;
        size_t rest = hl - i - 5, n = 0;
        if (rest && *v == '"') {
            v++;
            rest--;
            while (n < rest && v[n] != '"')
                n++;
        } else {
            while (n < rest && v[n] != ';' && v[n] != ' ')
                n++;
        }
        if (n >= cap)
            n = cap - 1;
        memcpy(out, v, n);
        out[n] = 0;
        return;
    }
}

/* Splits body into parts. 0, or PD_EPARSE / PD_ETOOBIG with msg. */
static int mp_parse(const uint8_t *body, size_t len, const char *boundary, part *parts,
                    size_t *n_parts, char *msg, size_t cap)
{
    char delim[MP_MAX_BOUNDARY + 8];
    size_t bl = strlen(boundary);
    snprintf(delim, sizeof delim, "\r\n--%s", boundary);
    size_t dl = bl + 4;
    const uint8_t *end = body + len, *p;
    *n_parts = 0;
    /* the first delimiter may lack the leading CRLF */
    if (len >= dl - 2 && !memcmp(body, delim + 2, dl - 2)) {
        p = body + dl - 2;
    } else {
        const uint8_t *f = memmem(body, len, delim, dl);
        if (!f) {
            snprintf(msg, cap, "multipart body: no boundary \"%s\" found", boundary);
            return PD_EPARSE;
        }
        p = f + dl;
    }
    for (;;) {
        /* after a delimiter: "--" ends, else transport padding then CRLF */
        if (end - p >= 2 && p[0] == '-' && p[1] == '-')
            return 0;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (end - p < 2 || p[0] != '\r' || p[1] != '\n') {
            snprintf(msg, cap, "multipart body: truncated or malformed after part %zu", *n_parts);
            return PD_EPARSE;
        }
        p += 2;
        if (*n_parts == MP_MAX_PARTS) {
            snprintf(msg, cap, "multipart body: more than %d parts", MP_MAX_PARTS);
            return PD_ETOOBIG;
        }
        size_t room = (size_t)(end - p);
        const uint8_t *hend = memmem(p, room < MP_MAX_HEADER ? room : MP_MAX_HEADER, "\r\n\r\n", 4);
        part *pt = &parts[*n_parts];
        pt->name[0] = 0;
        if (!hend && p + 2 <= end && p[0] == '\r' && p[1] == '\n') {
            hend = p - 2; /* no headers at all */
        }
        if (!hend) {
            snprintf(msg, cap, "multipart part %zu: headers %s", *n_parts + 1,
                     room >= MP_MAX_HEADER ? "over 8192 bytes" : "truncated");
            return room >= MP_MAX_HEADER ? PD_ETOOBIG : PD_EPARSE;
        }
        /* headers: lines up to hend */
        const uint8_t *h = p;
        while (h < hend) {
            const uint8_t *eol = memmem(h, (size_t)(hend - h), "\r\n", 2);
            size_t hl = eol ? (size_t)(eol - h) : (size_t)(hend - h);
            if (hl > 20 && !strncasecmp((const char *)h, "Content-Disposition:", 20))
                mp_part_name((const char *)h + 20, hl - 20, pt->name, sizeof pt->name);
            h += hl + 2;
        }
        const uint8_t *data = hend + 4;
        const uint8_t *next = memmem(data, (size_t)(end - data), delim, dl);
        if (!next) {
            snprintf(msg, cap, "multipart part %zu (\"%s\"): truncated, no closing boundary",
                     *n_parts + 1, pt->name);
            return PD_EPARSE;
        }
        pt->data = data;
        pt->len = (size_t)(next - data);
        (*n_parts)++;
        p = next + dl;
    }
}

static const part *find_part(const part *parts, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(parts[i].name, name))
            return &parts[i];
    return NULL;
}

/* ---- decoding ---- */

/* Decodes a pprof body/part, replying on failure (what names it). */
static int decode(const uint8_t *b, size_t len, const pd_pprof_limits *lim, const char *what,
                  pd_profile *p, pd_http_response *resp)
{
    pd_err err = {{0}};
    if (len == 0) {
        pd__api_text_error(resp, 400, "bad_profile", "%s: empty", what);
        return -1;
    }
    int rc = pd_profile_decode(p, b, len, lim, &err);
    if (rc == 0) {
        if ((rc = pd__api_check_sample_labels(p, &err)) == 0)
            return 0;
        pd_profile_release(p);
    }
    if (rc == PD_ENOMEM)
        pd__api_text_error(resp, 500, NULL, "%s: out of memory", what);
    else if (rc == PD_ETOOBIG)
        pd__api_text_error(resp, 413, "too_large", "%s refused: %s", what, err.msg);
    else
        pd__api_text_error(resp, 400, "bad_profile", "%s: invalid pprof: %s", what, err.msg);
    return -1;
}

/* Which sample types of p are cumulative (scale for prev_profile: -1 or 0). */
static int prev_scale(const pd_profile *p, const part *cfg, int64_t *scale, pd_http_response *resp)
{
    json_t *j = NULL;
    if (cfg) {
        json_error_t je;
        if (cfg->len > MAX_CONFIG_BYTES) {
            pd__api_text_error(resp, 413, "too_large", "sample_type_config: %zu bytes, over %d",
                               cfg->len, MAX_CONFIG_BYTES);
            return -1;
        }
        j = json_loadb((const char *)cfg->data, cfg->len, 0, &je);
        if (!j || !json_is_object(j)) {
            pd__api_text_error(resp, 400, "bad_request",
                               "sample_type_config: not a JSON object%s%s", j ? "" : ": ",
                               j ? "" : je.text);
            json_decref(j);
            return -1;
        }
    }
    for (size_t i = 0; i < p->n_sample_type; i++) {
        const char *t = pd_profile_str(p, p->sample_type[i].type);
        bool cum = false;
        if (j) {
            json_t *c = json_object_get(j, t);
            cum = c && json_is_true(json_object_get(c, "cumulative"));
        } else {
            for (size_t k = 0; k < sizeof DEFAULT_CUMULATIVE / sizeof *DEFAULT_CUMULATIVE; k++)
                cum = cum || !strcmp(t, DEFAULT_CUMULATIVE[k]);
        }
        scale[i] = cum ? -1 : 0;
    }
    json_decref(j);
    return 0;
}

/* The profile minus prev for the cumulative types, gzip-encoded into enc. */
static int delta(const pd_profile *p, const pd_profile *prev, const int64_t *scale,
                 const pd_pprof_limits *lim, pd_profile *out, pd_buf *enc, pd_http_response *resp)
{
    pd__merger *m = NULL;
    pd_err err = {{0}};
    int rc = pd__merger_new(lim, &m);
    if (rc == 0)
        rc = pd__merger_add(m, p, NULL, &err);
    if (rc == 0)
        rc = pd__merger_add(m, prev, scale, &err);
    if (rc == 0)
        rc = pd__merger_finish(m, true, out, &err);
    pd__merger_free(m);
    if (rc == 0) {
        out->time_nanos = p->time_nanos;
        out->duration_nanos = p->duration_nanos;
        rc = pd_profile_encode(out, true, enc);
        if (rc < 0) {
            pd_profile_release(out);
            pd_err_set(&err, rc, "encoding the delta profile: %s", pd_strerror(rc));
        }
    }
    if (rc < 0) {
        pd__api_input_error(resp, rc, &err, "prev_profile");
        return -1;
    }
    return 0;
}

/* ---- the handler ---- */

static bool is_multipart(const char *ct)
{
    return ct && !strncasecmp(ct, "multipart/form-data", 19);
}

/* format=speedscope: the JSON file (raw or gzip) converted by
 * ingest/speedscope.h, one stored profile per profile of the file (its
 * series labelled as the folded formats' plus profile_name=NAME, as
 * Pyroscope labels them). Every profile is converted and its labels checked
 * before the first is stored. */
static void ingest_speedscope(const pd__api_env *env, const pd_pprof_limits *lim,
                              const pd_http_request *req, const char *type, const char *app,
                              const pd_labels *tags, const char *spy, int64_t ts, int64_t dur_ns,
                              int64_t rate, pd_http_response *resp)
{
    pd_buf plain, enc;
    pd_buf_init(&plain, lim->max_decompressed_bytes);
    pd_buf_init(&enc, lim->max_decompressed_bytes);
    pd_ingest_named_profile *ps = NULL;
    size_t n = 0;
    pd_labels *ls = NULL;
    pd_err err = {{0}};
    int rc;
    const uint8_t *text = req->body;
    size_t tlen = req->body_len;
    if (tlen == 0) {
        pd__api_text_error(resp, 400, "bad_profile", "empty body: POST a speedscope file");
        goto out;
    }
    if (pd_is_gzip(text, tlen)) {
        if ((rc = pd_gunzip(text, tlen, lim->max_decompressed_bytes, &plain, &err)) < 0) {
            pd__api_input_error(resp, rc, &err, "gzip body");
            goto out;
        }
        text = (const uint8_t *)plain.data;
        tlen = plain.len;
    }
    pd_ingest_opts o;
    memset(&o, 0, sizeof o);
    o.type = type;
    o.sample_rate_hz = rate;
    o.time_nanos = ts * 1000000;
    o.duration_nanos = dur_ns;
    o.lim.max_input_bytes = lim->max_decompressed_bytes;
    o.lim.max_stack_depth = lim->max_stack_depth;
    o.lim.max_frames =
        lim->max_locations < lim->max_functions ? lim->max_locations : lim->max_functions;
    o.lim.max_samples = lim->max_samples;
    if ((rc = pd_ingest_speedscope((const char *)text, tlen, &o, &ps, &n, &err)) < 0) {
        pd__api_input_error(resp, rc, &err, "speedscope body");
        goto out;
    }
    if (!(ls = calloc(n, sizeof *ls))) {
        pd__api_text_error(resp, 500, NULL, "out of memory");
        goto out;
    }
    const char *tag_service = pd_labels_get(tags, "service_name");
    for (size_t i = 0; i < n; i++) {
        pd_labels_init(&ls[i]);
        if ((rc = pd_labels_copy(&ls[i], tags)) < 0 ||
            (rc = pd_labels_set(&ls[i], "__name__", ps[i].type, &err)) < 0 ||
            (!tag_service && (rc = pd_labels_set(&ls[i], "service_name", app, &err)) < 0) ||
            (tag_service && !pd_labels_get(tags, "app_name") &&
             (rc = pd_labels_set(&ls[i], "app_name", app, &err)) < 0) ||
            (rc = pd_labels_set(&ls[i], "pyroscope_spy", spy && *spy ? spy : "unknown", &err)) <
                0 ||
            (ps[i].name[0] && (rc = pd_labels_set(&ls[i], "profile_name", ps[i].name, &err)) < 0)) {
            pd__api_text_error(resp, rc == PD_ENOMEM ? 500 : 400,
                               rc == PD_ENOMEM ? NULL : "bad_labels", "profile %zu: labels: %s", i,
                               err.msg[0] ? err.msg : pd_strerror(rc));
            goto out;
        }
    }
    for (size_t i = 0; i < n; i++) {
        pd_buf_reset(&enc);
        if ((rc = pd_profile_encode(&ps[i].profile, true, &enc)) < 0) {
            pd__api_text_error(resp, rc == PD_ETOOBIG ? 413 : 500,
                               rc == PD_ETOOBIG ? "too_large" : NULL,
                               "encoding the converted profile: %s", pd_strerror(rc));
            goto out;
        }
        pd_err_clear(&err);
        rc = pd__api_store(env, &ls[i], ts, (const uint8_t *)enc.data, enc.len, &ps[i].profile,
                           "pyroscope", &err);
        if (rc == PD_EOUTOFBOUNDS || rc == PD_ELIMIT) { /* counted by pd__api_store */
            pd__api_text_error(resp, pd__api_store_status(rc), NULL, "profile %zu: %s%s", i,
                               err.msg,
                               i ? " (the profiles before it in the file were stored)" : "");
            goto out;
        }
        if (rc < 0) {
            pd_log(PD_LOG_ERROR, "ingest: storage append failed", "err=\"%s\"", err.msg);
            pd__api_text_error(resp, pd__api_store_status(rc), NULL, "storage: %s%s",
                               err.msg[0] ? err.msg : pd_strerror(rc),
                               i ? " (the profiles before it in the file were stored)" : "");
            goto out;
        }
    }
    resp->status = 200;
    resp->content_type = "text/plain; charset=utf-8";
out:
    if (ls)
        for (size_t i = 0; i < n; i++)
            pd_labels_release(&ls[i]);
    free(ls);
    pd_ingest_named_profiles_free(ps, n);
    pd_buf_release(&plain);
    pd_buf_release(&enc);
}

const char *pd__pyroscope_ingest(const pd__api_env *env, const pd_http_request *req,
                                 pd_http_response *resp)
{
    static const char H[] = "/ingest";
    if (strcmp(req->method, "POST") != 0) {
        pd_http_add_header(resp, "Allow", "POST");
        pd__api_text_error(resp, 405, NULL, "method not allowed; use POST");
        return H;
    }
    const pd_pprof_limits lim = eff_limits(env->limits);
    const char *name = pd_http_arg(req, "name");
    const char *format = pd_http_arg(req, "format");
    const char *from_s = pd_http_arg(req, "from");
    const char *until_s = pd_http_arg(req, "until");
    const char *rate_s = pd_http_arg(req, "sampleRate");
    const char *units = pd_http_arg(req, "units");
    const char *spy = pd_http_arg(req, "spyName");
    const char *ct = pd_http_header(req, "Content-Type");
    pd_labels ls, tags;
    pd_labels_init(&ls);
    pd_labels_init(&tags);
    char *app = NULL;
    json_t *stcfg = NULL;
    pd_profile p, prev, d;
    bool have_p = false, have_prev = false, have_d = false;
    pd_buf enc;
    pd_buf_init(&enc, lim.max_decompressed_bytes);
    pd_buf plain, folded;
    pd_buf_init(&plain, lim.max_decompressed_bytes);
    bool have_folded = false;
    pd_err err = {{0}};
    int rc;

    if (parse_name(name ? name : "", &app, &tags, resp) < 0)
        goto out;

    /* times and rate never fail, as in Pyroscope's ingest handler */
    int64_t now = pd_now_ms();
    int64_t from = from_s && *from_s ? parse_time(from_s) : now;
    int64_t until = until_s && *until_s ? parse_time(until_s) : now;
    int64_t ts = from;
    int64_t dur_ns = until > from ? (until - from) * 1000000 : 0;
    int64_t rate = 100; /* Pyroscope's DefaultSampleRate: absent, 0 or not a number */
    if (rate_s && *rate_s) {
        char *e;
        long long v = strtoll(rate_s, &e, 10);
        if (!*e && v > 0 && v <= 1000000000)
            rate = v;
    }

    /* the format, as Pyroscope's readInputRawDataFromRequest picks it */
    enum { F_GROUPS, F_LINES, F_TRIE, F_TREE, F_SPEEDSCOPE, F_JFR, F_PPROF, F_MULTIPART } fmt;
    if (!format)
        format = "";
    if (!strcmp(format, "trie") || (ct && !strcasecmp(ct, "binary/octet-stream+trie")))
        fmt = F_TRIE;
    else if (!strcmp(format, "tree") || (ct && !strcasecmp(ct, "binary/octet-stream+tree")))
        fmt = F_TREE;
    else if (!strcmp(format, "lines"))
        fmt = F_LINES;
    else if (!strcmp(format, "jfr"))
        fmt = F_JFR;
    else if (is_multipart(ct))
        fmt = F_MULTIPART; /* also with format=pprof: the Go and Node clients */
    else if (!strcmp(format, "pprof"))
        fmt = F_PPROF;
    else if (!strcmp(format, "speedscope"))
        fmt = F_SPEEDSCOPE;
    else
        fmt = F_GROUPS; /* folded, collapsed, groups, absent or unknown: Pyroscope's default */
    bool pprof_in = fmt == F_PPROF || fmt == F_MULTIPART || fmt == F_JFR;

    /* APP.TYPE: a known suffix names the type; pprof input without one gets
     * its type from the sample types (after decoding); other formats refuse
     * an unknown suffix as Pyroscope's convertMetadata does */
    char type[64];
    size_t app_len;
    split_type(app, type, sizeof type, &app_len);
    bool type_named = type[0] != 0;
    if (!type[0] && !pprof_in) {
        const char *dot = strrchr(app, '.');
        if (dot) {
            pd__api_text_error(resp, 400, "bad_request",
                               "unknown profile type: %.64s (name \"%.100s\")", dot + 1, app);
            goto out;
        }
        snprintf(type, sizeof type, "cpu");
    }
    app[app_len] = 0;
    if (req->body_len > lim.max_body_bytes) {
        pd__api_text_error(resp, 413, "too_large", "body is %zu bytes, over max_body_bytes=%zu",
                           req->body_len, lim.max_body_bytes);
        goto out;
    }

    if (fmt == F_SPEEDSCOPE) { /* one stored profile per profile of the file */
        ingest_speedscope(env, &lim, req, type_named ? type : NULL, app, &tags, spy, ts, dur_ns,
                          rate, resp);
        goto out;
    }
    if (fmt == F_JFR) { /* the Java agent: ingest_jfr.c; __name__ per event kind there */
        const char *jservice = pd_labels_get(&tags, "service_name");
        if ((rc = pd_labels_copy(&ls, &tags)) < 0 ||
            (!jservice && (rc = pd_labels_set(&ls, "service_name", app, &err)) < 0) ||
            (rc = pd_labels_set(&ls, "pyroscope_spy", spy && *spy ? spy : "unknown", &err)) < 0) {
            pd__api_text_error(resp, rc == PD_ENOMEM ? 500 : 400,
                               rc == PD_ENOMEM ? NULL : "bad_labels", "name: %s",
                               err.msg[0] ? err.msg : pd_strerror(rc));
            goto out;
        }
        const part *pj = NULL, *pl = NULL;
        char boundary[MP_MAX_BOUNDARY + 1], msg[256];
        part parts[MP_MAX_PARTS];
        size_t n = 0;
        if (is_multipart(ct)) {
            if (mp_boundary(ct, boundary, sizeof boundary) < 0) {
                pd__api_text_error(resp, 400, "bad_request",
                                   "multipart/form-data without a valid boundary");
                goto out;
            }
            rc = mp_parse(req->body, req->body_len, boundary, parts, &n, msg, sizeof msg);
            if (rc < 0) {
                pd__api_text_error(resp, pd__api_input_status(rc),
                                   pd__api_input_reason(rc, "bad_profile"), "%s", msg);
                goto out;
            }
            if (!(pj = find_part(parts, n, "jfr"))) {
                pd__api_text_error(resp, 400, "bad_profile",
                                   "multipart body without a \"jfr\" part");
                goto out;
            }
            pl = find_part(parts, n, "labels");
        }
        pd__ingest_jfr(env, &ls, ts, rate, pj ? pj->data : req->body, pj ? pj->len : req->body_len,
                       pl ? pl->data : NULL, pl ? pl->len : 0, &lim, resp);
        goto out;
    }

    const uint8_t *store = NULL;
    size_t store_len = 0;
    const pd_profile *stored = NULL;
    if (fmt == F_MULTIPART) {
        char boundary[MP_MAX_BOUNDARY + 1], msg[256];
        part parts[MP_MAX_PARTS];
        size_t n = 0;
        if (mp_boundary(ct, boundary, sizeof boundary) < 0) {
            pd__api_text_error(
                resp, 400, "bad_request",
                "Content-Type multipart/form-data without a valid boundary (1..70 bytes)");
            goto out;
        }
        if ((rc = mp_parse(req->body, req->body_len, boundary, parts, &n, msg, sizeof msg)) < 0) {
            pd__api_text_error(resp, pd__api_input_status(rc),
                               pd__api_input_reason(rc, "bad_profile"), "%s", msg);
            goto out;
        }
        const part *pp = find_part(parts, n, "profile");
        const part *pv = find_part(parts, n, "prev_profile");
        const part *pc = find_part(parts, n, "sample_type_config");
        if (!pp) {
            pd__api_text_error(resp, 400, "bad_profile",
                               "multipart body without a \"profile\" part");
            goto out;
        }
        if (decode(pp->data, pp->len, &lim, "part \"profile\"", &p, resp) < 0)
            goto out;
        have_p = true;
        if (pc && pc->len <= MAX_CONFIG_BYTES)
            stcfg = json_loadb((const char *)pc->data, pc->len, 0, NULL);
        if (pv && pv->len) {
            int64_t *scale = calloc(p.n_sample_type ? p.n_sample_type : 1, sizeof *scale);
            if (!scale) {
                pd__api_text_error(resp, 500, NULL, "out of memory");
                goto out;
            }
            rc = decode(pv->data, pv->len, &lim, "part \"prev_profile\"", &prev, resp);
            have_prev = rc == 0;
            if (rc == 0)
                rc = prev_scale(&p, pc, scale, resp);
            if (rc == 0)
                rc = delta(&p, &prev, scale, &lim, &d, &enc, resp);
            free(scale);
            if (rc < 0)
                goto out;
            have_d = true;
            store = (const uint8_t *)enc.data;
            store_len = enc.len;
            stored = &d;
        } else {
            if (pc) { /* validate it even when unused */
                int64_t one;
                pd_profile none;
                memset(&none, 0, sizeof none);
                if (prev_scale(&none, pc, &one, resp) < 0)
                    goto out;
            }
            store = pp->data;
            store_len = pp->len;
            stored = &p;
        }
    } else if (fmt == F_PPROF) {
        if (decode(req->body, req->body_len, &lim, "body", &p, resp) < 0)
            goto out;
        have_p = true;
        store = req->body;
        store_len = req->body_len;
        stored = &p;
    } else {
        const uint8_t *text = req->body;
        size_t tlen = req->body_len;
        if (tlen == 0 && fmt != F_TRIE && fmt != F_TREE) {
            pd__api_text_error(resp, 400, "bad_profile", "empty body: POST %s stacks",
                               fmt == F_LINES ? "lines" : "folded");
            goto out;
        }
        if (tlen == 0 && (fmt == F_TRIE || fmt == F_TREE)) {
            pd__api_text_error(resp, 400, "bad_profile", "empty body: POST a %s",
                               fmt == F_TRIE ? "trie" : "tree");
            goto out;
        }
        if (pd_is_gzip(text, tlen)) {
            rc = pd_gunzip(text, tlen, lim.max_decompressed_bytes, &plain, &err);
            if (rc < 0) {
                pd__api_input_error(resp, rc, &err, "gzip body");
                goto out;
            }
            text = (const uint8_t *)plain.data;
            tlen = plain.len;
        }
        if (fmt == F_TRIE || fmt == F_TREE) { /* their samples as folded text (ingest/trie.h) */
            pd_buf_init(&folded, lim.max_decompressed_bytes);
            have_folded = true;
            rc = fmt == F_TRIE ? pd_ingest_trie_to_folded(text, tlen, &folded, &err)
                               : pd_ingest_tree_to_folded(text, tlen, &folded, &err);
            if (rc < 0) {
                pd__api_input_error(resp, rc, &err, fmt == F_TRIE ? "trie body" : "tree body");
                goto out;
            }
            text = (const uint8_t *)(folded.data ? folded.data : "");
            tlen = folded.len;
        }
        pd_ingest_opts o;
        memset(&o, 0, sizeof o);
        o.type = type;
        if (!units || !*units || !strcmp(units, "samples")) {
            o.sample_rate_hz = rate ? rate : 100;
        } else {
            /* Pyroscope's unit names to pprof's */
            o.unit = !strcmp(units, "objects") || !strcmp(units, "goroutines") ||
                             !strcmp(units, "lock_samples")
                         ? "count"
                     : !strcmp(units, "lock_nanoseconds") ? "nanoseconds"
                                                          : units;
        }
        o.time_nanos = ts * 1000000;
        o.duration_nanos = dur_ns;
        o.lim.max_input_bytes = lim.max_decompressed_bytes;
        o.lim.max_stack_depth = lim.max_stack_depth;
        o.lim.max_frames =
            lim.max_locations < lim.max_functions ? lim.max_locations : lim.max_functions;
        o.lim.max_samples = lim.max_samples;
        rc = pd_ingest_folded((const char *)text, tlen, fmt == F_LINES, &o, &p, &err);
        if (rc < 0) {
            pd__api_input_error(resp, rc, &err, fmt == F_LINES ? "lines body" : "folded body");
            goto out;
        }
        have_p = true;
        if ((rc = pd_profile_encode(&p, true, &enc)) < 0) {
            pd__api_text_error(resp, rc == PD_ETOOBIG ? 413 : 500,
                               rc == PD_ETOOBIG ? "too_large" : NULL,
                               "encoding the converted profile: %s", pd_strerror(rc));
            goto out;
        }
        store = (const uint8_t *)enc.data;
        store_len = enc.len;
        stored = &p;
    }

    /* the series' labels, as Pyroscope's adapters build them */
    if (!type[0]) {
        detect_type(&p, json_is_object(stcfg) ? stcfg : NULL, type, sizeof type);
        if (!type[0] || !pd__api_utf8_valid(type, strlen(type))) {
            pd__api_text_error(resp, 400, "bad_profile",
                               "profile has no sample type to name its type by");
            goto out;
        }
    }
    const char *tag_service = pd_labels_get(&tags, "service_name");
    if ((rc = pd_labels_copy(&ls, &tags)) < 0 ||
        (rc = pd_labels_set(&ls, "__name__", type, &err)) < 0 ||
        (!tag_service && (rc = pd_labels_set(&ls, "service_name", app, &err)) < 0) ||
        (tag_service && !pprof_in && !pd_labels_get(&tags, "app_name") &&
         (rc = pd_labels_set(&ls, "app_name", app, &err)) < 0) ||
        (rc = pd_labels_set(&ls, "pyroscope_spy", spy && *spy ? spy : "unknown", &err)) < 0) {
        pd__api_text_error(resp, rc == PD_ENOMEM ? 500 : 400, rc == PD_ENOMEM ? NULL : "bad_labels",
                           "name: %s", err.msg[0] ? err.msg : pd_strerror(rc));
        goto out;
    }

    pd_err_clear(&err);
    rc = pd__api_store(env, &ls, ts, store, store_len, stored, "pyroscope", &err);
    if (rc == PD_EOUTOFBOUNDS || rc == PD_ELIMIT || rc == PD_EINVAL) { /* counted there, but */
        pd__api_text_error(resp, pd__api_store_status(rc), rc == PD_EINVAL ? "bad_labels" : NULL,
                           "%s", err.msg);
        goto out;
    }
    if (rc < 0) {
        pd_log(PD_LOG_ERROR, "ingest: storage append failed", "err=\"%s\"", err.msg);
        pd__api_text_error(resp, pd__api_store_status(rc), NULL, "storage: %s",
                           err.msg[0] ? err.msg : pd_strerror(rc));
        goto out;
    }
    resp->status = 200;
    resp->content_type = "text/plain; charset=utf-8";
out:
    if (have_p)
        pd_profile_release(&p);
    if (have_prev)
        pd_profile_release(&prev);
    if (have_d)
        pd_profile_release(&d);
    pd_buf_release(&enc);
    pd_buf_release(&plain);
    if (have_folded)
        pd_buf_release(&folded);
    pd_labels_release(&ls);
    pd_labels_release(&tags);
    free(app);
    json_decref(stcfg);
    return H;
}
