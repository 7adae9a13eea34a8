/*
 * ingest/push_main.c — `profd push`: validates profile files locally, then
 * pushes each to profefe's push endpoint of a profd (or profefe) server.
 * See pd_ingest_push_main in ingest.h for the flags.
 *
 * Per FILE, in order, independently of the others:
 *   1. read it ("-": stdin) under a cap: pprof files under the server's
 *      default body cap (pd_pprof_limits_default().max_body_bytes), other
 *      formats under pd_ingest_limits_default().max_input_bytes;
 *   2. pprof: the bytes are the body, sent unchanged (the server stores them
 *      as pushed); folded/lines/perf-script: converted (pd_ingest_convert)
 *      and encoded as gzip pprof;
 *   3. the body is decoded and validated (pd_profile_decode) under
 *      pd_pprof_limits_default(), the caps the server applies by default,
 *      and its sample labels held to the server's PUSH_MAX_SAMPLE_LABEL_BYTES,
 *      so a file the server would refuse is refused here without a request;
 *   4. its profefe type (--type, else guessed from the sample types:
 *      pd_profile_guess_type in pprof.h, the rule `tsdb import` uses too)
 *      and its time (--created-at, else the profile's time_nanos, else the
 *      file's mtime, else now for stdin) are fixed;
 *   5. POST URL/api/0/profiles?service=&type=&instance_id=&labels=&created_at=
 *      with the body (one libcurl handle, so one kept-alive connection).
 * A file that fails any step is reported on stderr as "profd push: FILE:
 * what went wrong" (for a 4xx/5xx: the status and the "error" field of the
 * server's JSON reply) and skipped; the others still go. A pushed file is
 * reported on stdout as "FILE: pushed TYPE at TIME (id ID)".
 *
 * Labels reach the server as profefe's labels=k=v,k2=v2 parameter with each
 * name and value URL-escaped (every byte outside [A-Za-z0-9._~-] as %XX), as
 * profefe's agent sends them and profefe (and profd) decode them, so values
 * may hold ',', '=', '+' or '%'. Names must be valid label names
 * (pd_label_name_valid: UTF-8 without control characters) not starting
 * with "__"; both are usage errors otherwise. `--label service=X` and `--label instance_id=X` are
 * the same as
 * --service and --instance-id (profefe keeps those two apart from labels).
 */
#include "ingest/ingest.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/labels.h"
#include "base/parse.h"
#include "base/time.h"

#define DEFAULT_URL "http://127.0.0.1:10902"
/* The server's cap on one sample label key or string value of a pushed
 * profile (PD_API_MAX_SAMPLE_LABEL_BYTES in api/api_int.h, which ingest/
 * may not include): checked here too so that such a file is refused
 * locally, without a request. */
#define PUSH_MAX_SAMPLE_LABEL_BYTES 65536
#define ENDPOINT "/api/0/profiles"
#define DEFAULT_TIMEOUT_MS 30000
#define MAX_REPLY_BYTES ((size_t)1 << 20) /* kept of a reply; the rest is dropped */
#define STR_(x) #x
#define STR(x) STR_(x)

static const char usage_text[] =
    "usage: profd push [--url=URL] [--service=NAME] [--type=T] [--instance-id=ID]\n"
    "                  [--label k=v ...] [--format=pprof|folded|lines|perf-script]\n"
    "                  [--sample-rate=HZ] [--created-at=TIME] [--timeout=DURATION] FILE...\n"
    "  Reads and validates each FILE (- for stdin) locally, then pushes it to\n"
    "  URL" ENDPOINT " (profefe's push API; URL defaults to " DEFAULT_URL ").\n"
    "  --service         required (or --label service=NAME)\n"
    "  --type            cpu, heap, block, mutex, goroutine, threadcreate or other;\n"
    "                    default: guessed from the profile's sample types (block and\n"
    "                    mutex profiles look alike: told apart by the file name)\n"
    "  --label k=v       repeatable; Prometheus label names, values without ','\n"
    "  --format          of every FILE (default pprof, sent unchanged); the others\n"
    "                    are converted to pprof locally as 'profd convert' does\n"
    "  --sample-rate=HZ  folded/lines: sampling rate (default 100)\n"
    "  --created-at      RFC 3339 or Unix seconds; default: the profile's time, else\n"
    "                    the file's modification time\n"
    "  --timeout         per request, a duration like 30s (default 30s)\n"
    "  TLS and authentication (a profd behind --web.config.file, or a proxy):\n"
    "  --tls.ca-file=FILE        CA certificates (PEM) the server's must chain to\n"
    "                            (default: the system's)\n"
    "  --tls.cert-file=FILE      client certificate (PEM), with --tls.key-file\n"
    "  --tls.key-file=FILE       its private key (PEM, not encrypted)\n"
    "  --tls.server-name=NAME    name to check the server's certificate against\n"
    "                            (default: the URL's host)\n"
    "  --tls.insecure-skip-verify  do not check the server's certificate\n"
    "  --basic-auth.username=U   basic auth user; the password from\n"
    "  --basic-auth.password-file=FILE  (first line; trailing whitespace dropped)\n"
    "  --bearer-token-file=FILE  \"Authorization: Bearer\" with the token in FILE\n"
    "  (user:password@ in --url works too; prefer the file: argv is visible in ps)\n"
    "  Exit: 0 all pushed, 1 some file failed (one message per file), 2 usage.\n";

static const char *const PROFEFE_TYPES[] = {"cpu",       "heap",         "block", "mutex",
                                            "goroutine", "threadcreate", "other"};

typedef struct push_cfg {
    char *url; /* full endpoint URL, malloc'd */
    const char *service;
    const char *type; /* NULL: guess per file */
    const char *instance_id;
    pd_buf labels;        /* "k=v,k2=v2", each k and v URL-escaped */
    size_t n_labels;      /* in labels */
    pd_ingest_format fmt; /* 0: pprof */
    int64_t sample_rate_hz;
    bool have_created;
    int64_t created_ms;
    int64_t timeout_ms;
    /* issue 20: TLS and authentication */
    const char *ca_file, *cert_file, *key_file, *server_name;
    bool insecure;
    const char *username, *password_file, *bearer_file;
    char *password, *bearer; /* read from the files, malloc'd */
} push_cfg;

static int usage(const char *fmt, const char *arg)
{
    if (fmt) {
        fputs("profd push: ", stderr);
        fprintf(stderr, fmt, arg);
        fputc('\n', stderr);
    }
    fputs(usage_text, stderr);
    return 2;
}

/* True when s[0..n) is well-formed UTF-8 (no overlongs, surrogates or
 * code points past U+10FFFF). */
static bool utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *e = p + n;
    while (p < e) {
        unsigned c = *p;
        size_t len;
        unsigned cp;
        if (c < 0x80) {
            p++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            len = 2, cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3, cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4, cp = c & 0x07;
        } else {
            return false;
        }
        if ((size_t)(e - p) < len)
            return false;
        for (size_t k = 1; k < len; k++) {
            if ((p[k] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (p[k] & 0x3f);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        p += len;
    }
    return true;
}

/* Why v cannot be the value of `what`, or NULL when it can. */
static const char *value_problem(const char *v)
{
    size_t n = strlen(v);
    if (n == 0)
        return "empty";
    if (n > PD_LABEL_MAX_VALUE)
        return "longer than " STR(PD_LABEL_MAX_VALUE) " bytes";
    if (!utf8_valid(v, n))
        return "not UTF-8";
    return NULL;
}

static bool type_valid(const char *t)
{
    for (size_t i = 0; i < sizeof PROFEFE_TYPES / sizeof *PROFEFE_TYPES; i++)
        if (!strcmp(t, PROFEFE_TYPES[i]))
            return true;
    return false;
}

/* Appends the whole of path ("-": stdin) to b, which caps the size
 * (PD_ETOOBIG); *mtime_ms gets the file's modification time, 0 for stdin
 * or a pipe. 0 or -errno. */
static int read_all(const char *path, pd_buf *b, int64_t *mtime_ms)
{
    bool is_stdin = !strcmp(path, "-");
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    int rc = 0;
    *mtime_ms = 0;
    if (!f)
        return -errno;
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) {
            rc = -EISDIR;
            goto out;
        }
        if (!is_stdin && S_ISREG(sb.st_mode))
            *mtime_ms = (int64_t)sb.st_mtim.tv_sec * 1000 + sb.st_mtim.tv_nsec / 1000000;
    }
    char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
        if ((rc = pd_buf_append(b, chunk, got)))
            break;
    if (!rc && ferror(f))
        rc = -EIO;
out:
    if (!is_stdin)
        fclose(f);
    return rc;
}

/* libcurl write callback: keeps the first MAX_REPLY_BYTES of the reply. */
static size_t on_reply(char *data, size_t size, size_t nmemb, void *ctx)
{
    pd_buf *b = ctx;
    size_t n = size * nmemb;
    size_t room = b->len < MAX_REPLY_BYTES ? MAX_REPLY_BYTES - b->len : 0;
    if (room && pd_buf_append(b, data, n < room ? n : room) < 0)
        return 0; /* out of memory: abort the transfer */
    return n;
}

/* Writes s to f with control characters as spaces, at most max bytes. */
static void put_clean(FILE *f, const char *s, size_t len, size_t max)
{
    for (size_t i = 0; i < len && i < max; i++)
        fputc((unsigned char)s[i] < 0x20 || s[i] == 0x7f ? ' ' : s[i], f);
    if (len > max)
        fputs("...", f);
}

/* Appends "&name=ESCAPED(value)" (or "?name=..." first). 0 or PD_ENOMEM. */
static int put_param(CURL *c, pd_buf *u, const char *name, const char *value)
{
    char *esc = curl_easy_escape(c, value, (int)strlen(value));
    if (!esc)
        return PD_ENOMEM;
    int rc = pd_buf_printf(u, "%c%s=%s", strchr(u->data, '?') ? '&' : '?', name, esc);
    curl_free(esc);
    return rc;
}

/* Sends body to the server. Returns 0 when the server stored it (then the
 * profile's id, when the reply has one, is in id[]), else 1 after printing
 * why on stderr. */
static int send_one(CURL *c, const push_cfg *cfg, const char *name, const char *type,
                    int64_t created_ms, const pd_buf *body, char *id, size_t id_cap)
{
    char created[40];
    pd_format_rfc3339(created_ms, created, sizeof created);
    pd_buf url, reply;
    pd_buf_init(&url, 0);
    pd_buf_init(&reply, MAX_REPLY_BYTES);
    int ret = 1, rc;
    json_t *js = NULL;
    id[0] = 0;

    rc = pd_buf_puts(&url, cfg->url);
    rc = rc ? rc : put_param(c, &url, "service", cfg->service);
    rc = rc ? rc : put_param(c, &url, "type", type);
    if (cfg->instance_id)
        rc = rc ? rc : put_param(c, &url, "instance_id", cfg->instance_id);
    if (cfg->labels.len)
        rc = rc ? rc : put_param(c, &url, "labels", cfg->labels.data);
    rc = rc ? rc : put_param(c, &url, "created_at", created);
    if (rc) {
        fprintf(stderr, "profd push: %s: %s\n", name, pd_strerror(rc));
        goto out;
    }

    curl_easy_setopt(c, CURLOPT_URL, url.data);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body->data);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body->len);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_reply);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &reply);
    CURLcode cc = curl_easy_perform(c);
    if (cc != CURLE_OK) {
        fprintf(stderr, "profd push: %s: cannot push to %s: %s\n", name, cfg->url,
                curl_easy_strerror(cc));
        goto out;
    }
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);

    json_error_t jerr;
    js = reply.len ? json_loadb(reply.data, reply.len, 0, &jerr) : NULL;
    if (status < 200 || status > 299) {
        const char *msg = js ? json_string_value(json_object_get(js, "error")) : NULL;
        fprintf(stderr, "profd push: %s: server refused it (HTTP %ld): ", name, status);
        if (msg)
            put_clean(stderr, msg, strlen(msg), 1000);
        else if (reply.len)
            put_clean(stderr, reply.data, reply.len, 200);
        else
            fputs("(empty reply)", stderr);
        fputc('\n', stderr);
        goto out;
    }
    /* A 2xx that is not profefe's JSON reply means URL is not a push
     * endpoint (a proxy page, another service): nothing was stored. */
    if (!json_is_object(js)) {
        fprintf(stderr,
                "profd push: %s: unexpected reply (HTTP %ld, not profefe's JSON) from %s: ", name,
                status, cfg->url);
        put_clean(stderr, reply.data ? reply.data : "", reply.len, 200);
        fputc('\n', stderr);
        goto out;
    }
    const char *s = json_string_value(json_object_get(json_object_get(js, "body"), "id"));
    if (s)
        snprintf(id, id_cap, "%s", s);
    ret = 0;
out:
    json_decref(js);
    pd_buf_release(&url);
    pd_buf_release(&reply);
    return ret;
}

/* 0, or PD_ETOOBIG with err naming the sample and label when a sample label
 * key or string value of p is over PUSH_MAX_SAMPLE_LABEL_BYTES. */
static int check_sample_labels(const pd_profile *p, pd_err *err)
{
    for (size_t i = 0; i < p->n_sample; i++) {
        const pd_pprof_sample *s = &p->sample[i];
        for (size_t k = 0; k < s->n_label; k++) {
            int64_t idx[2] = {s->label[k].key, s->label[k].str};
            for (int j = 0; j < 2; j++) {
                size_t len = idx[j] > 0 && (size_t)idx[j] < p->n_string ? p->string_len[idx[j]] : 0;
                if (len > PUSH_MAX_SAMPLE_LABEL_BYTES)
                    return pd_err_set(err, PD_ETOOBIG, "sample %zu: label %s is %zu bytes, over %d",
                                      i, j ? "value" : "key", len, PUSH_MAX_SAMPLE_LABEL_BYTES);
            }
        }
    }
    return 0;
}

/* Reads, converts, validates and pushes one file. 0 pushed, 1 failed
 * (reported on stderr). */
static int push_file(CURL *c, const push_cfg *cfg, const char *path)
{
    const char *name = strcmp(path, "-") ? path : "<stdin>";
    pd_pprof_limits plim = pd_pprof_limits_default();
    pd_ingest_limits ilim = pd_ingest_limits_default();
    pd_buf in, enc;
    pd_buf_init(&in, cfg->fmt ? ilim.max_input_bytes : plim.max_body_bytes);
    pd_buf_init(&enc, plim.max_body_bytes);
    pd_profile p = {0};
    bool have_p = false;
    pd_err err = {{0}};
    int64_t mtime_ms = 0;
    int ret = 1, rc;
    const pd_buf *body = &in;

    if ((rc = read_all(path, &in, &mtime_ms))) {
        if (rc == PD_ETOOBIG)
            fprintf(stderr, "profd push: %s: larger than %zu bytes\n", name, in.max);
        else
            fprintf(stderr, "profd push: %s: %s\n", name, pd_strerror(rc));
        goto out;
    }
    if (in.len == 0) {
        fprintf(stderr, "profd push: %s: empty file\n", name);
        goto out;
    }
    if (cfg->fmt) {
        pd_ingest_opts o = {.type = cfg->type && strcmp(cfg->type, "cpu") ? cfg->type : NULL,
                            .sample_rate_hz = cfg->sample_rate_hz};
        if ((rc = pd_ingest_convert(cfg->fmt, in.data, in.len, &o, &p, &err))) {
            fprintf(stderr, "profd push: %s: %s\n", name, err.msg[0] ? err.msg : pd_strerror(rc));
            goto out;
        }
        rc = pd_profile_encode(&p, true, &enc);
        pd_profile_release(&p);
        if (rc) {
            if (rc == PD_ETOOBIG)
                fprintf(stderr, "profd push: %s: converted profile is larger than %zu bytes\n",
                        name, enc.max);
            else
                fprintf(stderr, "profd push: %s: encoding pprof: %s\n", name, pd_strerror(rc));
            goto out;
        }
        body = &enc;
    }
    /* What the server will do to the body, under its default caps. */
    if ((rc = pd_profile_decode(&p, (const uint8_t *)body->data, body->len, &plim, &err))) {
        fprintf(stderr, "profd push: %s: %s: %s\n", name,
                rc == PD_ETOOBIG ? "over a server limit" : "not a valid pprof profile",
                err.msg[0] ? err.msg : pd_strerror(rc));
        goto out;
    }
    have_p = true;
    if ((rc = check_sample_labels(&p, &err))) {
        fprintf(stderr, "profd push: %s: over a server limit: %s\n", name, err.msg);
        goto out;
    }

    const char *type = cfg->type ? cfg->type : pd_profile_guess_type(&p, path);
    int64_t created = cfg->have_created  ? cfg->created_ms
                      : p.time_nanos > 0 ? p.time_nanos / 1000000
                      : mtime_ms > 0     ? mtime_ms
                                         : pd_now_ms();
    char id[80], when[40];
    if (send_one(c, cfg, name, type, created, body, id, sizeof id))
        goto out;
    pd_format_rfc3339(created, when, sizeof when);
    printf("%s: pushed %s at %s", name, type, when);
    if (id[0]) {
        fputs(" (id ", stdout);
        put_clean(stdout, id, strlen(id), 80);
        fputc(')', stdout);
    }
    fputc('\n', stdout);
    fflush(stdout);
    ret = 0;
out:
    if (have_p)
        pd_profile_release(&p);
    pd_buf_release(&in);
    pd_buf_release(&enc);
    return ret;
}

/* Appends s to b URL-escaped: bytes outside [A-Za-z0-9._~-] as %XX (what
 * Go's url.QueryUnescape, used by profefe on each label key and value,
 * reads back). 0 or PD_ENOMEM/PD_ETOOBIG. */
static int put_escaped(pd_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    int rc = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && !rc; p++) {
        unsigned char c = *p;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '.' || c == '_' || c == '~' || c == '-')
            rc = pd_buf_putc(b, (char)c);
        else if (!(rc = pd_buf_putc(b, '%')) && !(rc = pd_buf_putc(b, hex[c >> 4])))
            rc = pd_buf_putc(b, hex[c & 15]);
    }
    return rc;
}

/* Adds --label k=v to cfg (service/instance_id go to their own fields).
 * seen holds the names given so far. 0, or a usage error printed and 2. */
static int add_label(push_cfg *cfg, pd_labels *seen, const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv)
        return usage("--label '%s' is not k=v", kv);
    char name[PD_LABEL_MAX_NAME + 1];
    size_t nl = (size_t)(eq - kv);
    if (nl > PD_LABEL_MAX_NAME)
        return usage("--label '%.300s': name too long", kv);
    memcpy(name, kv, nl);
    name[nl] = 0;
    const char *v = eq + 1, *why;
    if (!pd_label_name_valid(name) || !strncmp(name, "__", 2))
        return usage("--label '%s': the name must be UTF-8 without control characters (as "
                     "Prometheus 3) and not start with '__'",
                     kv);
    if ((why = value_problem(v))) {
        fprintf(stderr, "profd push: --label %s: the value is %s\n", name, why);
        return usage(NULL, NULL);
    }
    if (pd_labels_get(seen, name))
        return usage("--label %s given twice", name);
    pd_err err = {{0}};
    int rc = pd_labels_set(seen, name, v, &err);
    if (rc) {
        fprintf(stderr, "profd push: --label %s: %s\n", name,
                err.msg[0] ? err.msg : pd_strerror(rc));
        return 2;
    }
    if (!strcmp(name, "service") || !strcmp(name, "instance_id")) {
        const char **field = name[0] == 's' ? &cfg->service : &cfg->instance_id;
        if (*field && strcmp(*field, v))
            return usage("--label %s disagrees with the flag of the same meaning", name);
        *field = v;
        return 0;
    }
    cfg->n_labels++;
    if ((cfg->labels.len && pd_buf_putc(&cfg->labels, ',')) || put_escaped(&cfg->labels, name) ||
        pd_buf_putc(&cfg->labels, '=') || put_escaped(&cfg->labels, v)) {
        fputs("profd push: out of memory\n", stderr);
        return 1;
    }
    return 0;
}

/* The first line of a secret file (at most 64 KiB), trailing whitespace
 * dropped, as Prometheus' password_file and bearer_token_file. NULL after
 * a message on stderr. */
static char *read_secret(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "profd push: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    char *b = calloc(1, 65537);
    size_t n = b ? fread(b, 1, 65536, f) : 0;
    bool more = b && fgetc(f) != EOF;
    fclose(f);
    if (!b || more) {
        fprintf(stderr, "profd push: %s: %s\n", path, b ? "larger than 64 KiB" : "out of memory");
        free(b);
        return NULL;
    }
    b[n] = 0;
    char *nl = strpbrk(b, "\r\n");
    if (nl)
        *nl = 0;
    n = strlen(b);
    while (n && (b[n - 1] == ' ' || b[n - 1] == '\t'))
        b[--n] = 0;
    if (!n) {
        fprintf(stderr, "profd push: %s: empty\n", path);
        free(b);
        return NULL;
    }
    return b;
}

/* Parses argv into cfg and the file list. -1 to go on, else an exit code. */
static int parse_args(int argc, char **argv, push_cfg *cfg, pd_labels *seen, const char **files,
                      int *n_files)
{
    const char *url = DEFAULT_URL, *fmt = NULL, *rate = NULL, *created = NULL, *timeout = NULL;
    bool flags_done = false, have_stdin = false;
    int r;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (flags_done || !strcmp(a, "-") || a[0] != '-') {
            if (!strcmp(a, "-")) {
                if (have_stdin)
                    return usage("'-' (stdin) given twice%s", "");
                have_stdin = true;
            }
            files[(*n_files)++] = a;
            continue;
        }
        if (!strcmp(a, "--")) {
            flags_done = true;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage_text, stdout);
            return 0;
        }
        if ((r = pd_parse_flag(argc, argv, &i, "--url", &v)) > 0)
            url = v;
        else if (r == 0 && (r = pd_parse_flag(argc, argv, &i, "--service", &v)) > 0) {
            if (cfg->service && strcmp(cfg->service, v))
                return usage("--service disagrees with --label service=%s", cfg->service);
            cfg->service = v;
        } else if (r == 0 && (r = pd_parse_flag(argc, argv, &i, "--type", &v)) > 0)
            cfg->type = v;
        else if (r == 0 && (r = pd_parse_flag(argc, argv, &i, "--instance-id", &v)) > 0) {
            if (cfg->instance_id && strcmp(cfg->instance_id, v))
                return usage("--instance-id disagrees with --label instance_id=%s",
                             cfg->instance_id);
            cfg->instance_id = v;
        } else if (r == 0 && (r = pd_parse_flag(argc, argv, &i, "--label", &v)) > 0) {
            int rc = add_label(cfg, seen, v);
            if (rc)
                return rc;
        } else if (r == 0 && (r = pd_parse_flag(argc, argv, &i, "--format", &v)) > 0)
            fmt = v;
        else if (r == 0 && (r = pd_parse_flag(argc, argv, &i, "--sample-rate", &v)) > 0)
            rate = v;
        else if (r == 0 && (r = pd_parse_flag(argc, argv, &i, "--created-at", &v)) > 0)
            created = v;
        else if (r == 0 && (r = pd_parse_flag(argc, argv, &i, "--timeout", &v)) > 0)
            timeout = v;
        else if (r == 0 && (r = pd_parse_flag(argc, argv, &i, "--tls.ca-file", &v)) > 0)
            cfg->ca_file = v;
        else if (r == 0 && (r = pd_parse_flag(argc, argv, &i, "--tls.cert-file", &v)) > 0)
            cfg->cert_file = v;
        else if (r == 0 && (r = pd_parse_flag(argc, argv, &i, "--tls.key-file", &v)) > 0)
            cfg->key_file = v;
        else if (r == 0 && (r = pd_parse_flag(argc, argv, &i, "--tls.server-name", &v)) > 0)
            cfg->server_name = v;
        else if (r == 0 && !strcmp(a, "--tls.insecure-skip-verify"))
            cfg->insecure = true, r = 1;
        else if (r == 0 && (r = pd_parse_flag(argc, argv, &i, "--basic-auth.username", &v)) > 0)
            cfg->username = v;
        else if (r == 0 &&
                 (r = pd_parse_flag(argc, argv, &i, "--basic-auth.password-file", &v)) > 0)
            cfg->password_file = v;
        else if (r == 0 && (r = pd_parse_flag(argc, argv, &i, "--bearer-token-file", &v)) > 0)
            cfg->bearer_file = v;
        if (r < 0)
            return usage("flag '%s' needs a value", a);
        if (r == 0)
            return usage("unknown flag '%s'", a);
    }

    if (!cfg->cert_file != !cfg->key_file)
        return usage("--tls.cert-file and --tls.key-file go together%s", "");
    if (cfg->password_file && !cfg->username)
        return usage("--basic-auth.password-file needs --basic-auth.username%s", "");
    if (cfg->bearer_file && cfg->username)
        return usage("--bearer-token-file and --basic-auth.username exclude each other%s", "");
    if (cfg->password_file && !(cfg->password = read_secret(cfg->password_file)))
        return 2;
    if (cfg->bearer_file && !(cfg->bearer = read_secret(cfg->bearer_file)))
        return 2;
    const char *why;
    if (!cfg->service)
        return usage("--service is required (or --label service=NAME)%s", "");
    if ((why = value_problem(cfg->service))) {
        fprintf(stderr, "profd push: --service: the value is %s\n", why);
        return usage(NULL, NULL);
    }
    if (cfg->instance_id && (why = value_problem(cfg->instance_id))) {
        fprintf(stderr, "profd push: --instance-id: the value is %s\n", why);
        return usage(NULL, NULL);
    }
    /* the server's cap counts every label of the series: ours, service,
     * instance_id and __name__ (the type) */
    if (cfg->n_labels + 2 + (cfg->instance_id ? 1 : 0) > PD_LABEL_MAX_COUNT)
        return usage(
            "too many labels: at most " STR(PD_LABEL_MAX_COUNT) " with service, "
                                                                "instance_id and the type%s",
            "");
    if (cfg->type && !type_valid(cfg->type))
        return usage("--type '%s' is not one of cpu, heap, block, mutex, goroutine, "
                     "threadcreate, other",
                     cfg->type);
    if (fmt && strcmp(fmt, "pprof") && !(cfg->fmt = pd_ingest_format_parse(fmt)))
        return usage("unknown --format '%s' (pprof, folded, lines or perf-script)", fmt);
    if (rate) {
        if (cfg->fmt != PD_INGEST_FOLDED && cfg->fmt != PD_INGEST_LINES)
            return usage("--sample-rate applies to --format=folded or lines only%s", "");
        char *end;
        errno = 0;
        long long hz = strtoll(rate, &end, 10);
        if (errno || end == rate || *end || hz <= 0 || hz > 1000000000)
            return usage("--sample-rate '%s' is not a rate in Hz (1..1000000000)", rate);
        cfg->sample_rate_hz = hz;
    }
    if (created) {
        if (pd_parse_time_param(created, &cfg->created_ms, NULL) < 0)
            return usage("--created-at '%s' is not an RFC 3339 time or Unix seconds", created);
        cfg->have_created = true;
    }
    cfg->timeout_ms = DEFAULT_TIMEOUT_MS;
    if (timeout && (pd_parse_duration(timeout, &cfg->timeout_ms, NULL) < 0 || cfg->timeout_ms <= 0))
        return usage("--timeout '%s' is not a duration like 30s", timeout);
    if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8))
        return usage("--url '%s' is not an http:// or https:// URL", url);
    if (strpbrk(url, "?# \t\r\n"))
        return usage("--url '%s': give the server's base URL, without query or fragment", url);
    if (*n_files == 0)
        return usage("no FILE given%s", "");

    /* URL + ENDPOINT, without doubling a trailing '/' or the endpoint */
    size_t ul = strlen(url);
    while (ul > 0 && url[ul - 1] == '/')
        ul--;
    size_t el = strlen(ENDPOINT);
    bool has_endpoint = ul >= el && !memcmp(url + ul - el, ENDPOINT, el);
    size_t n = ul + el + 1;
    if (!(cfg->url = malloc(n))) {
        fputs("profd push: out of memory\n", stderr);
        return 1;
    }
    snprintf(cfg->url, n, "%.*s%s", (int)ul, url, has_endpoint ? "" : ENDPOINT);
    return -1;
}

int pd_ingest_push_main(int argc, char **argv)
{
    push_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    pd_buf_init(&cfg.labels, 0);
    pd_labels seen;
    pd_labels_init(&seen);
    const char **files = calloc(argc > 0 ? (size_t)argc : 1, sizeof *files);
    int n_files = 0, ret = 1, failed = 0;
    struct curl_slist *resolve = NULL; /* --tls.server-name */
    CURL *c = NULL;
    struct curl_slist *hdr = NULL;
    bool curl_up = false;

    if (!files) {
        fputs("profd push: out of memory\n", stderr);
        goto out;
    }
    if ((ret = parse_args(argc, argv, &cfg, &seen, files, &n_files)) >= 0)
        goto out;
    ret = 1;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fputs("profd push: cannot initialise libcurl\n", stderr);
        goto out;
    }
    curl_up = true;
    if (!(c = curl_easy_init()) ||
        !(hdr = curl_slist_append(NULL, "Content-Type: application/octet-stream"))) {
        fputs("profd push: cannot initialise libcurl\n", stderr);
        goto out;
    }
    {
        struct curl_slist *h2 = curl_slist_append(hdr, "Expect:"); /* no 100-continue wait */
        if (!h2) {
            fputs("profd push: out of memory\n", stderr);
            goto out;
        }
        hdr = h2;
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "profd-push");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)cfg.timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                     (long)(cfg.timeout_ms < 10000 ? cfg.timeout_ms : 10000));
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    /* issue 20: TLS and authentication */
    if (cfg.ca_file)
        curl_easy_setopt(c, CURLOPT_CAINFO, cfg.ca_file);
    if (cfg.cert_file) {
        curl_easy_setopt(c, CURLOPT_SSLCERT, cfg.cert_file);
        curl_easy_setopt(c, CURLOPT_SSLKEY, cfg.key_file);
    }
    if (cfg.insecure) {
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (cfg.username) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(c, CURLOPT_USERNAME, cfg.username);
        curl_easy_setopt(c, CURLOPT_PASSWORD, cfg.password ? cfg.password : "");
    }
    if (cfg.bearer) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
        curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, cfg.bearer);
    }
    if (cfg.server_name) {
        /* connect to the URL's address, check the certificate against
         * server_name: curl has no such option, so the URL's host is
         * rewritten to server_name and server_name resolved to the URL's
         * host with CURLOPT_CONNECT_TO */
        char *host = NULL, *port = NULL;
        CURLU *u = curl_url();
        if (u && curl_url_set(u, CURLUPART_URL, cfg.url, 0) == CURLUE_OK &&
            curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
            curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK) {
            char line[600];
            snprintf(line, sizeof line, "%s:%s:%s:%s", cfg.server_name, port, host, port);
            char *nurl = NULL;
            if (curl_url_set(u, CURLUPART_HOST, cfg.server_name, 0) == CURLUE_OK &&
                curl_url_get(u, CURLUPART_URL, &nurl, 0) == CURLUE_OK) {
                free(cfg.url);
                cfg.url = strdup(nurl);
                resolve = curl_slist_append(NULL, line);
                curl_easy_setopt(c, CURLOPT_CONNECT_TO, resolve);
            }
            curl_free(nurl);
        }
        curl_free(host);
        curl_free(port);
        curl_url_cleanup(u);
        if (!cfg.url || !resolve) {
            fputs("profd push: --tls.server-name: cannot rewrite the URL\n", stderr);
            ret = 2;
            goto out;
        }
    }

    for (int i = 0; i < n_files; i++)
        failed += push_file(c, &cfg, files[i]);
    if (failed)
        fprintf(stderr, "profd push: %d of %d files not pushed\n", failed, n_files);
    ret = failed ? 1 : 0;
out:
    curl_slist_free_all(resolve);
    curl_slist_free_all(hdr);
    if (c)
        curl_easy_cleanup(c);
    if (curl_up)
        curl_global_cleanup();
    free(cfg.url);
    pd_buf_release(&cfg.labels);
    if (cfg.password)
        explicit_bzero(cfg.password, strlen(cfg.password));
    free(cfg.password);
    free(cfg.bearer);
    pd_labels_release(&seen);
    free(files);
    return ret;
}
