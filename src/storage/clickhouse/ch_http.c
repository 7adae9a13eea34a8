/*
 * storage/clickhouse/ch_http.c — statements over ClickHouse's HTTP
 * interface (libcurl), with retries, backoff and failover across the URLs;
 * RowBinary writing and reading; SQL literals.
 *
 * Which failures are retried: a curl error (connect, send, receive,
 * timeout) and a ClickHouse exception whose code is not in `stmt_codes`
 * below (those are the statement's own fault: syntax, unknown table or
 * column, types, authentication, a value that does not parse — retrying
 * cannot help). ClickHouse 18.16 answers every exception with HTTP 500 and
 * "Code: N, e.displayText() = ..." in the body; current versions use 4xx
 * for some and add X-ClickHouse-Exception-Code; the body's "Code: N" is in
 * both, and is what is read.
 *
 * An INSERT whose outcome is unknown (the connection broke after the rows
 * were sent) is not retried here but handed back as ambiguous (the caller
 * counts what landed), except on replicated tables (--clickhouse.replicated):
 * there ClickHouse deduplicates a block it already holds (the checksum of
 * each inserted part is kept in ZooKeeper, replicated_deduplication_window:
 * the last 100 blocks per table and shard), so the same rows are simply sent
 * again, to the next URL, and land once.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "base/log.h"
#include "base/metrics.h"
#include "base/time.h"
#include "base/varint.h"
#include "storage/clickhouse/ch_int.h"

#define CH_MAX_ERR_BODY 4096

/* ClickHouse error codes (src/Common/ErrorCodes.cpp) that mean the
 * statement, not the server's state, is wrong. */
static const int stmt_codes[] = {
    6,   /* CANNOT_PARSE_TEXT */
    16,  /* NO_SUCH_COLUMN_IN_TABLE */
    20,  /* NUMBER_OF_COLUMNS_DOESNT_MATCH */
    27,  /* CANNOT_PARSE_INPUT_ASSERTION_FAILED */
    33,  /* CANNOT_READ_ALL_DATA */
    36,  /* BAD_ARGUMENTS */
    41,  /* CANNOT_PARSE_DATETIME */
    43,  /* ILLEGAL_TYPE_OF_ARGUMENT */
    44,  /* ILLEGAL_COLUMN */
    46,  /* UNKNOWN_FUNCTION */
    47,  /* UNKNOWN_IDENTIFIER */
    48,  /* NOT_IMPLEMENTED */
    53,  /* TYPE_MISMATCH */
    57,  /* TABLE_ALREADY_EXISTS */
    60,  /* UNKNOWN_TABLE */
    62,  /* SYNTAX_ERROR */
    81,  /* UNKNOWN_DATABASE */
    115, /* UNKNOWN_SETTING */
    164, /* READONLY */
    170, /* BAD_GET */
    192, /* UNKNOWN_USER */
    193, /* WRONG_PASSWORD */
    194, /* REQUIRED_PASSWORD */
    195, /* IP_ADDRESS_NOT_ALLOWED */
    197, /* INVALID_SETTING_VALUE? (18.x) */
    386, /* NO_COMMON_TYPE */
    497, /* ACCESS_DENIED */
    516, /* AUTHENTICATION_FAILED */
};

static bool stmt_error(int code)
{
    for (size_t i = 0; i < sizeof stmt_codes / sizeof stmt_codes[0]; i++)
        if (stmt_codes[i] == code)
            return true;
    return false;
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    pd_buf *b = ud;
    size_t n = size * nmemb;
    if (pd_buf_append(b, ptr, n) < 0)
        return 0; /* curl fails with CURLE_WRITE_ERROR */
    return n;
}

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* Connections are kept and reused across queries (a share of curl's
 * connection cache per pd_ch): the duplicate check and a read's queries
 * cost no TCP connect nor a new HTTP session on either side. A kept
 * connection idle for more than CH_CONN_MAXAGE_S is not reused (ClickHouse
 * closes idle connections after its keep_alive_timeout, 3-10 s by version
 * and config). An INSERT always opens a fresh connection: on a reused one
 * that dies before an answer curl sends the request again by itself, and an
 * INSERT the server had written would land twice — on a fresh one such a
 * failure is handed back as an unknown outcome (counted by write_id, or
 * deduplicated by a replicated table) as the module comment says. */
#define CH_CONN_MAXAGE_S 2L

static void share_lock(CURL *h, curl_lock_data d, curl_lock_access a, void *ctx)
{
    (void)h;
    (void)d;
    (void)a;
    pthread_mutex_lock(&((pd_ch *)ctx)->share_mu);
}

static void share_unlock(CURL *h, curl_lock_data d, void *ctx)
{
    (void)h;
    (void)d;
    pthread_mutex_unlock(&((pd_ch *)ctx)->share_mu);
}

int pd__ch_http_init(pd_ch *c)
{
    pthread_once(&g_curl_once, curl_init_once);
    CURLSH *sh = curl_share_init();
    if (!sh)
        return PD_ENOMEM;
    pthread_mutex_init(&c->share_mu, NULL);
    curl_share_setopt(sh, CURLSHOPT_LOCKFUNC, share_lock);
    curl_share_setopt(sh, CURLSHOPT_UNLOCKFUNC, share_unlock);
    curl_share_setopt(sh, CURLSHOPT_USERDATA, c);
    if (curl_share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) != CURLSHE_OK)
        curl_share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS); /* older curl: DNS only */
    c->share = sh;
    return 0;
}

void pd__ch_http_release(pd_ch *c)
{
    if (!c->share)
        return;
    curl_share_cleanup((CURLSH *)c->share);
    c->share = NULL;
    pthread_mutex_destroy(&c->share_mu);
}

typedef enum { R_OK, R_STMT, R_RETRY, R_AMBIGUOUS, R_TOOBIG, R_NOMEM } result;

/* One attempt against URL u. */
static result attempt(pd_ch *c, size_t u, const char *db, const char *sql, const uint8_t *insert,
                      size_t len, const char *settings, pd_buf *resp, bool *srv, pd_err *err)
{
    *srv = false;
    CURL *h = curl_easy_init();
    if (!h) {
        pd_err_set(err, PD_ENOMEM, "out of memory (curl)");
        return R_NOMEM;
    }
    result res = R_OK;
    pd_buf url, body;
    pd_buf_init(&url, 0);
    pd_buf_init(&body, resp ? resp->max : 0);
    char *esc_db = curl_easy_escape(h, db, 0);
    char *esc_q = insert ? curl_easy_escape(h, sql, 0) : NULL;
    if (!esc_db || (insert && !esc_q) ||
        pd_buf_printf(&url, "%s/?database=%s", c->urls[u], esc_db) < 0 ||
        (esc_q && pd_buf_printf(&url, "&query=%s", esc_q) < 0) ||
        (settings && pd_buf_printf(&url, "&%s", settings) < 0) ||
        /* a read of a Distributed table fails when a shard has no replica
           answering, whatever the user's profile says: never a partial answer */
        (c->cluster && pd_buf_puts(&url, "&skip_unavailable_shards=0") < 0) ||
        pd_buf_putc(&url, 0) < 0) {
        pd_err_set(err, PD_ENOMEM, "out of memory (ClickHouse request)");
        res = R_NOMEM;
        goto out;
    }
    curl_easy_setopt(h, CURLOPT_URL, url.data);
    if (c->share) {
        curl_easy_setopt(h, CURLOPT_SHARE, (CURLSH *)c->share);
        curl_easy_setopt(h, CURLOPT_MAXAGE_CONN, CH_CONN_MAXAGE_S);
        if (insert)
            curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
    }
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    if (insert) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, (const char *)insert);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    } else {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, sql);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(sql));
    }
    curl_easy_setopt(h, CURLOPT_USERNAME, c->user);
    if (c->password)
        curl_easy_setopt(h, CURLOPT_PASSWORD, c->password);
    curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                     (long)(c->timeout_ms < 5000 ? c->timeout_ms : 5000));
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/octet-stream");
    hdr = hdr ? curl_slist_append(hdr, "Expect:") : NULL;
    if (hdr)
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    CURLcode cc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdr);
    if (cc == CURLE_WRITE_ERROR && status == 200) {
        pd_err_set(err, PD_ETOOBIG, "ClickHouse %s: the answer is larger than %zu bytes",
                   c->urls[u], body.max);
        res = R_TOOBIG;
    } else if (cc != CURLE_OK) {
        pd_err_set(err, -EIO, "ClickHouse %s: %s", c->urls[u], curl_easy_strerror(cc));
        /* connect failures never reached the server; anything later may have */
        bool sent = cc != CURLE_COULDNT_CONNECT && cc != CURLE_COULDNT_RESOLVE_HOST;
        res = insert && sent ? R_AMBIGUOUS : R_RETRY;
    } else if (status != 200) {
        size_t n = body.len < 400 ? body.len : 400;
        while (n > 0 && (body.data[n - 1] == '\n' || body.data[n - 1] == ' '))
            n--;
        int code = -1;
        const char *cp = body.len ? memmem(body.data, body.len, "Code: ", 6) : NULL;
        if (cp)
            code = atoi(cp + 6);
        pd_err_set(err, -EIO, "ClickHouse %s: HTTP %ld: %.*s", c->urls[u], status, (int)n,
                   body.len ? (const char *)body.data : "");
        res = (code >= 0 && stmt_error(code)) ? R_STMT : R_RETRY;
        *srv = true;
    } else if (resp && pd_buf_append(resp, body.data, body.len) < 0) {
        pd_err_set(err, PD_ETOOBIG, "ClickHouse %s: the answer is larger than %zu bytes",
                   c->urls[u], resp->max);
        res = R_TOOBIG;
    }
out:
    curl_free(esc_db);
    curl_free(esc_q);
    pd_buf_release(&url);
    pd_buf_release(&body);
    curl_easy_cleanup(h);
    return res;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

int pd__ch_exec(pd_ch *c, const char *sql, const uint8_t *insert, size_t len, const char *settings,
                pd_buf *resp, bool *ambiguous, pd_err *err)
{
    pthread_once(&g_curl_once, curl_init_once);
    if (ambiguous)
        *ambiguous = false;
    size_t start = __atomic_load_n(&c->cur, __ATOMIC_RELAXED);
    size_t resp_len0 = resp ? resp->len : 0;
    int64_t backoff = 100;
    pd_err srv_err; /* a server's own answer names more (e.g. the shard down) than a
                       connection refused by the next URL */
    bool have_srv = false;
    int64_t t0 = pd_mono_ns();
    for (int a = 0; a < c->retries; a++) {
        size_t u = (start + (size_t)a) % c->n_urls;
        if (resp)
            resp->len = resp_len0;
        bool srv;
        result r = attempt(c, u, c->db, sql, insert, len, settings, resp, &srv, err);
        if (r == R_RETRY && srv && !have_srv && err) {
            srv_err = *err;
            have_srv = true;
        }
        if (r == R_OK) {
            __atomic_store_n(&c->cur, u, __ATOMIC_RELAXED);
            pd_log(PD_LOG_DEBUG, "clickhouse statement",
                   "url=%s seconds=%.3f bytes=%zu sql=\"%.60s\"", c->urls[u],
                   (double)(pd_mono_ns() - t0) / 1e9, insert ? len : strlen(sql), sql);
            return 0;
        }
        if (r == R_NOMEM)
            return PD_ENOMEM;
        if (r == R_TOOBIG)
            return PD_ETOOBIG;
        pd_metrics_add("profd_clickhouse_errors_total", NULL, 1);
        if (r == R_STMT)
            return -EIO;
        /* replicated tables: an INSERT sent again is deduplicated by
           ClickHouse (the same rows make the same block, whose checksum
           ZooKeeper keeps), so an unknown outcome is simply tried again, on
           the next URL */
        if (r == R_AMBIGUOUS && c->replicated)
            r = R_RETRY;
        /* a Distributed INSERT that failed on one shard may have written
           the others: the caller settles it (count by write_id) */
        if (r == R_RETRY && insert && ambiguous && c->cluster && !c->replicated)
            r = R_AMBIGUOUS;
        if (r == R_AMBIGUOUS) {
            if (ambiguous)
                *ambiguous = true;
            return -EIO;
        }
        pd_log(PD_LOG_WARN, "clickhouse request failed", "attempt=%d err=\"%s\"", a + 1,
               err ? err->msg : "");
        if (a + 1 < c->retries) {
            sleep_ms(backoff);
            backoff = backoff * 2 > 2000 ? 2000 : backoff * 2;
        }
    }
    if (have_srv && err) {
        pd_err last = *err;
        *err = srv_err;
        if (strcmp(last.msg, srv_err.msg) != 0) {
            size_t n = strlen(err->msg);
            snprintf(err->msg + n, sizeof err->msg - n, " (then: %s)", last.msg);
        }
    }
    return -EIO;
}

int pd__ch_exec_on(pd_ch *c, size_t url, const char *sql, pd_buf *resp, pd_err *err)
{
    return pd__ch_exec_on_db(c, url, c->db, sql, resp, err);
}

int pd__ch_exec_on_db(pd_ch *c, size_t url, const char *db, const char *sql, pd_buf *resp,
                      pd_err *err)
{
    pthread_once(&g_curl_once, curl_init_once);
    bool srv;
    result r = attempt(c, url, db, sql, NULL, 0, NULL, resp, &srv, err);
    if (r == R_OK)
        return 0;
    return r == R_NOMEM ? PD_ENOMEM : r == R_TOOBIG ? PD_ETOOBIG : -EIO;
}

/* ---- SQL literals ---- */

int pd__ch_put_sql_string(pd_buf *b, const char *s, size_t len)
{
    int rc = pd_buf_putc(b, '\'');
    for (size_t i = 0; rc == 0 && i < len; i++) {
        char ch = s[i];
        if (ch == '\\' || ch == '\'')
            rc = pd_buf_putc(b, '\\');
        if (rc == 0 && ch == 0)
            rc = pd_buf_puts(b, "\\0");
        else if (rc == 0)
            rc = pd_buf_putc(b, ch);
    }
    return rc ? rc : pd_buf_putc(b, '\'');
}

int64_t pd__ch_day(int64_t ts_ms)
{
    if (ts_ms < 0)
        return 0;
    int64_t d = ts_ms / 86400000;
    if (d > 49672)
        d = 49672;
    return d;
}

int pd__ch_put_sql_day(pd_buf *b, int64_t d)
{
    time_t t = (time_t)(d * 86400);
    struct tm tm;
    gmtime_r(&t, &tm);
    return pd_buf_printf(b, "'%04d-%02d-%02d'", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
}

/* ---- RowBinary ---- */

int pd__ch_put_u16(pd_buf *b, uint16_t v)
{
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    return pd_buf_append(b, x, 2);
}

int pd__ch_put_u32(pd_buf *b, uint32_t v)
{
    uint8_t x[4];
    for (int i = 0; i < 4; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    return pd_buf_append(b, x, 4);
}

int pd__ch_put_u64(pd_buf *b, uint64_t v)
{
    uint8_t x[8];
    for (int i = 0; i < 8; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    return pd_buf_append(b, x, 8);
}

int pd__ch_put_str(pd_buf *b, const char *s, size_t len)
{
    int rc = pd_buf_put_varint(b, len);
    return rc ? rc : pd_buf_append(b, s, len);
}

static const uint8_t *take(ch_rd *r, size_t n)
{
    if (r->bad || r->len - r->pos < n) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *p = r->p + r->pos;
    r->pos += n;
    return p;
}

uint64_t pd__ch_rd_u64(ch_rd *r)
{
    const uint8_t *p = take(r, 8);
    uint64_t v = 0;
    for (int i = 0; p && i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

uint32_t pd__ch_rd_u32(ch_rd *r)
{
    const uint8_t *p = take(r, 4);
    uint32_t v = 0;
    for (int i = 0; p && i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

uint16_t pd__ch_rd_u16(ch_rd *r)
{
    const uint8_t *p = take(r, 2);
    return p ? (uint16_t)(p[0] | p[1] << 8) : 0;
}

uint64_t pd__ch_rd_varint(ch_rd *r)
{
    uint64_t v = 0;
    if (r->bad)
        return 0;
    size_t k = pd_varint_get(r->p + r->pos, r->len - r->pos, &v);
    if (k == 0) {
        r->bad = true;
        return 0;
    }
    r->pos += k;
    return v;
}

void pd__ch_rd_str(ch_rd *r, const uint8_t **s, size_t *n)
{
    uint64_t len = pd__ch_rd_varint(r);
    const uint8_t *p = len <= r->len ? take(r, (size_t)len) : (r->bad = true, NULL);
    *s = p ? p : (const uint8_t *)"";
    *n = p ? (size_t)len : 0;
}
