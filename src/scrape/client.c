/*
 * scrape/client.c — a job's HTTP client options (pd_scrape_client) on a
 * libcurl handle, for the scrapes (manager.c adds their Host header) and
 * the discovery requests (http_sd_configs, kubernetes_sd_configs); contract
 * in scrape_int.h.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "scrape/scrape_int.h"

bool pd__client_read_secret(const char *path, char *out, size_t cap, char *msg, size_t msg_cap)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        snprintf(msg, msg_cap, "cannot read %s: %s", path, strerror(errno));
        return false;
    }
    size_t n = fread(out, 1, cap - 1, f);
    bool more = fgetc(f) != EOF;
    fclose(f);
    if (more) {
        snprintf(msg, msg_cap, "cannot read %s: over %zu bytes", path, cap - 1);
        return false;
    }
    out[n] = '\0';
    while (n > 0 && strchr("\n\r \t", out[n - 1]))
        out[--n] = '\0';
    size_t lead = strspn(out, " \t\r\n");
    memmove(out, out + lead, n - lead + 1);
    return true;
}

bool pd__client_setopt(const pd_scrape_client *c, CURL *e, struct curl_slist **hdrs, char *msg,
                       size_t msg_cap)
{
    char secret[4096];
    if (c->basic_username) {
        curl_easy_setopt(e, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(e, CURLOPT_USERNAME, c->basic_username);
        if (c->basic_password_file) {
            if (!pd__client_read_secret(c->basic_password_file, secret, sizeof secret, msg,
                                        msg_cap))
                return false;
            curl_easy_setopt(e, CURLOPT_PASSWORD, secret); /* libcurl copies it */
        } else {
            curl_easy_setopt(e, CURLOPT_PASSWORD, c->basic_password ? c->basic_password : "");
        }
    }
    if (c->auth_type) {
        const char *cred = c->auth_credentials ? c->auth_credentials : "";
        if (c->auth_credentials_file) {
            if (!pd__client_read_secret(c->auth_credentials_file, secret, sizeof secret, msg,
                                        msg_cap))
                return false;
            cred = secret;
        }
        char h[4200];
        snprintf(h, sizeof h, "Authorization: %s %s", c->auth_type, cred);
        struct curl_slist *l = curl_slist_append(*hdrs, h);
        if (!l) {
            snprintf(msg, msg_cap, "out of memory setting the Authorization header");
            return false;
        }
        *hdrs = l;
    }
    if (c->oauth2_token_url) {
        char h[4200];
        if (!pd__oauth2_header(c, h, sizeof h, msg, msg_cap))
            return false;
        struct curl_slist *l = curl_slist_append(*hdrs, h);
        if (!l) {
            snprintf(msg, msg_cap, "out of memory setting the Authorization header");
            return false;
        }
        *hdrs = l;
    }
    if (c->ca_file)
        curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_file);
    if (c->cert_file) {
        curl_easy_setopt(e, CURLOPT_SSLCERT, c->cert_file);
        curl_easy_setopt(e, CURLOPT_SSLKEY, c->key_file);
    }
    if (c->insecure_skip_verify) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (c->tls_min_version >= 10 && c->tls_min_version <= 13) {
        static const long v[] = {CURL_SSLVERSION_TLSv1_0, CURL_SSLVERSION_TLSv1_1,
                                 CURL_SSLVERSION_TLSv1_2, CURL_SSLVERSION_TLSv1_3};
        curl_easy_setopt(e, CURLOPT_SSLVERSION, v[c->tls_min_version - 10]);
    }
    curl_easy_setopt(e, CURLOPT_PROXY, c->proxy_url ? c->proxy_url : "");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, c->follow_redirects ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION,
                     c->enable_http2 ? (long)CURL_HTTP_VERSION_2TLS : (long)CURL_HTTP_VERSION_1_1);
    return true;
}
