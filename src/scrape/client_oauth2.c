/*
 * scrape/client_oauth2.c — oauth2 (the client credentials grant, RFC 6749
 * §4.4) for scrapes and discovery requests, as Prometheus' common oauth2
 * (golang.org/x/oauth2/clientcredentials): a POST to token_url of
 * grant_type=client_credentials, scope (space-joined) and the
 * endpoint_params, the client id and secret in HTTP basic auth (each
 * form-encoded first, as Go's oauth2 does). The token is cached per
 * (token_url, client id, secret, scopes, params) until 10 s before its
 * expires_in (no expires_in: until the process ends or the secret file
 * changes), then fetched again at the next request that needs it.
 *
 * The request is synchronous (timeout 10 s) on the caller's thread: the
 * scrape loop waits for it once per token lifetime. A failure is not
 * cached: each scrape tries again and reports the error.
 */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "base/buf.h"
#include "base/metrics.h"
#include "base/time.h"
#include "scrape/scrape_int.h"

#define OAUTH2_SLOTS 64
#define OAUTH2_TIMEOUT_MS 10000
#define OAUTH2_MAX_BODY (1u << 20)

typedef struct slot {
    uint64_t key;
    char header[4200]; /* "Authorization: Bearer ..." */
    int64_t expiry_ms; /* monotonic; 0 = never */
    int64_t used_ms;
} slot;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static slot slots[OAUTH2_SLOTS];

static pthread_once_t describe_once = PTHREAD_ONCE_INIT;
static void describe(void)
{
    pd_metrics_describe("profd_oauth2_token_requests_total", PD_METRIC_COUNTER,
                        "OAuth2 client-credentials token requests (scrapes and discovery), by "
                        "outcome.");
}

static int64_t mono_ms(void)
{
    return pd_mono_ns() / 1000000;
}

static uint64_t key_of(const pd_scrape_client *c, const char *secret)
{
    const char *parts[] = {c->oauth2_token_url, c->oauth2_client_id, secret, c->oauth2_scopes,
                           c->oauth2_params};
    uint64_t h = 0x6f61757468ull;
    for (int i = 0; i < 5; i++) {
        const char *p = parts[i] ? parts[i] : "";
        h = XXH3_64bits_withSeed(p, strlen(p) + 1, h);
    }
    return h;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud)
{
    size_t n = size * nmemb;
    return pd_buf_append(ud, p, n) ? 0 : n;
}

/* Fetches a token; fills s->header and s->expiry_ms. false with msg. */
static bool fetch(const pd_scrape_client *c, const char *secret, slot *s, char *msg, size_t cap)
{
    pd_buf form, body, user, pass;
    pd_buf_init(&form, 0);
    pd_buf_init(&body, OAUTH2_MAX_BODY);
    pd_buf_init(&user, 0);
    pd_buf_init(&pass, 0);
    bool ok = false;
    CURL *e = curl_easy_init();
    char errbuf[CURL_ERROR_SIZE] = "";
    json_t *j = NULL;
    /* only TLS and proxy from the job: no auth of the job on the token request */
    pd_scrape_client tls = {0};
    tls.ca_file = c->ca_file;
    tls.cert_file = c->cert_file;
    tls.key_file = c->key_file;
    tls.insecure_skip_verify = c->insecure_skip_verify;
    tls.tls_min_version = c->tls_min_version;
    tls.proxy_url = c->proxy_url;
    tls.follow_redirects = true;
    tls.enable_http2 = c->enable_http2;
    struct curl_slist *hdrs = NULL;
    if (!e || pd_buf_printf(&form, "grant_type=client_credentials") ||
        (c->oauth2_scopes &&
         (pd_buf_printf(&form, "&scope=") || pd__scrape_put_escaped(&form, c->oauth2_scopes))) ||
        (c->oauth2_params && pd_buf_printf(&form, "%s", c->oauth2_params)) ||
        pd_buf_append(&form, "", 1) ||
        pd__scrape_put_escaped(&user, c->oauth2_client_id ? c->oauth2_client_id : "") ||
        pd_buf_append(&user, "", 1) || pd__scrape_put_escaped(&pass, secret) ||
        pd_buf_append(&pass, "", 1)) {
        snprintf(msg, cap, "oauth2: out of memory");
        goto out;
    }
    if (!pd__client_setopt(&tls, e, &hdrs, msg, cap))
        goto out;
    hdrs = curl_slist_append(hdrs, "Accept: application/json");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(e, CURLOPT_URL, c->oauth2_token_url);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, form.data);
    curl_easy_setopt(e, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
    curl_easy_setopt(e, CURLOPT_USERNAME, user.data);
    curl_easy_setopt(e, CURLOPT_PASSWORD, pass.data);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)OAUTH2_TIMEOUT_MS);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "profd/0.1");
    CURLcode cr = curl_easy_perform(e);
    long status = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    if (cr != CURLE_OK) {
        snprintf(msg, cap, "oauth2: token request to %.200s: %s", c->oauth2_token_url,
                 errbuf[0] ? errbuf : curl_easy_strerror(cr));
        goto out;
    }
    json_error_t je;
    j = json_loadb(body.data ? body.data : "", body.len, 0, &je);
    if (status < 200 || status > 299) {
        const char *oe = json_string_value(json_object_get(j, "error"));
        snprintf(msg, cap, "oauth2: token request to %.200s: HTTP status %ld%s%.100s",
                 c->oauth2_token_url, status, oe ? ", error " : "", oe ? oe : "");
        goto out;
    }
    const char *tok = json_string_value(json_object_get(j, "access_token"));
    const char *type = json_string_value(json_object_get(j, "token_type"));
    if (!tok || !*tok || strpbrk(tok, "\r\n")) {
        snprintf(msg, cap, "oauth2: token response of %.200s has no access_token",
                 c->oauth2_token_url);
        goto out;
    }
    if (!type || !*type || !strcasecmp(type, "bearer"))
        type = "Bearer";
    if (strlen(tok) + strlen(type) + 20 > sizeof s->header || strpbrk(type, "\r\n ")) {
        snprintf(msg, cap, "oauth2: token of %.200s over 4 KiB or a bad token_type",
                 c->oauth2_token_url);
        goto out;
    }
    snprintf(s->header, sizeof s->header, "Authorization: %s %s", type, tok);
    json_t *exp = json_object_get(j, "expires_in");
    double secs = json_is_number(exp)   ? json_number_value(exp)
                  : json_is_string(exp) ? atof(json_string_value(exp))
                                        : 0;
    s->expiry_ms = secs > 0 ? mono_ms() + (int64_t)(secs * 1000) - 10000 : 0;
    if (secs > 0 && s->expiry_ms <= mono_ms())
        s->expiry_ms = mono_ms() + 1; /* under 10 s: good for this request only */
    ok = true;
    pd_metrics_add("profd_oauth2_token_requests_total", "outcome=\"success\"", 1);
out:
    if (!ok)
        pd_metrics_add("profd_oauth2_token_requests_total", "outcome=\"failure\"", 1);
    json_decref(j);
    if (e)
        curl_easy_cleanup(e);
    curl_slist_free_all(hdrs);
    pd_buf_release(&form);
    pd_buf_release(&body);
    pd_buf_release(&user);
    pd_buf_release(&pass);
    return ok;
}

bool pd__oauth2_header(const pd_scrape_client *c, char *hdr, size_t cap, char *msg, size_t msg_cap)
{
    char secret[4096] = "";
    if (c->oauth2_client_secret_file) {
        if (!pd__client_read_secret(c->oauth2_client_secret_file, secret, sizeof secret, msg,
                                    msg_cap))
            return false;
    } else if (c->oauth2_client_secret) {
        snprintf(secret, sizeof secret, "%s", c->oauth2_client_secret);
    }
    pthread_once(&describe_once, describe);
    uint64_t key = key_of(c, secret);
    int64_t now = mono_ms();
    pthread_mutex_lock(&mu);
    for (int i = 0; i < OAUTH2_SLOTS; i++) {
        slot *s = &slots[i];
        if (s->key == key && s->header[0] && (s->expiry_ms == 0 || now < s->expiry_ms)) {
            s->used_ms = now;
            snprintf(hdr, cap, "%s", s->header);
            pthread_mutex_unlock(&mu);
            return true;
        }
    }
    pthread_mutex_unlock(&mu);
    slot fresh = {.key = key};
    if (!fetch(c, secret, &fresh, msg, msg_cap))
        return false;
    fresh.used_ms = now;
    pthread_mutex_lock(&mu);
    int victim = 0;
    for (int i = 0; i < OAUTH2_SLOTS; i++) {
        if (slots[i].key == key) {
            victim = i;
            break;
        }
        if (slots[i].used_ms < slots[victim].used_ms)
            victim = i;
    }
    slots[victim] = fresh;
    pthread_mutex_unlock(&mu);
    snprintf(hdr, cap, "%s", fresh.header);
    return true;
}
