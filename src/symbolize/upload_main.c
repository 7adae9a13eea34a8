/*
 * symbolize/upload_main.c — `profd debuginfo upload [--url=URL] FILE...`:
 * sends debug files to a profd, as `parca-debuginfo upload` does for Parca.
 * Per FILE, independently: read it (at most MAX_FILE bytes), take its GNU
 * build ID from the ELF note (a file without one is refused here, no
 * request), POST it to URL/api/v1/debuginfo/<build id>. Reports
 * "FILE: uploaded as <build id> (N bytes)" on stdout, problems on stderr
 * as "profd debuginfo upload: FILE: what" (for an HTTP error the status and
 * the server's "error" text). Exit 0 all uploaded, 1 some failed, 2 usage.
 */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/time.h"
#include "symbolize/elf.h"
#include "symbolize/symbolize.h"

#define DEFAULT_URL "http://127.0.0.1:10902"
#define MAX_FILE ((size_t)1 << 30)

static const char usage_text[] =
    "usage: profd debuginfo upload [--url=URL] [--timeout=DURATION]\n"
    "                              [--bearer-token-file=FILE] FILE...\n"
    "  Uploads each FILE (an ELF file with a GNU build ID: a .debug file from\n"
    "  objcopy --only-keep-debug, or the unstripped binary) to profd's\n"
    "  POST URL/api/v1/debuginfo/BUILD_ID (URL defaults to " DEFAULT_URL "),\n"
    "  where it names the address-only frames of stripped programs, in old\n"
    "  profiles too.\n"
    "  --timeout            per request, a duration like 60s (default 60s)\n"
    "  --bearer-token-file  \"Authorization: Bearer\" with the token in FILE\n"
    "  Exit: 0 all uploaded, 1 some file failed (one message per file), 2 usage.\n";

static size_t on_reply(char *d, size_t sz, size_t n, void *ctx)
{
    pd_buf *b = ctx;
    if (b->len < 65536)
        pd_buf_append(b, d, sz * n);
    return sz * n;
}

static int read_file(const char *path, pd_buf *b)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    char tmp[65536];
    size_t n;
    int rc = 0;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
        if ((rc = pd_buf_append(b, tmp, n)) < 0)
            break;
    if (!rc && ferror(f))
        rc = -EIO;
    fclose(f);
    return rc;
}

static int upload(CURL *c, const char *url, const char *path)
{
    pd_buf body, reply;
    pd_buf_init(&body, MAX_FILE);
    pd_buf_init(&reply, 1 << 20);
    int rc = read_file(path, &body), ret = 1;
    char bid[129];
    pd_err err = {{0}};
    if (rc < 0) {
        fprintf(stderr, "profd debuginfo upload: %s: %s\n", path,
                rc == PD_ETOOBIG ? "larger than 1 GiB" : pd_strerror(rc));
        goto out;
    }
    if (pd_elf_build_id_mem(body.data, body.len, bid, sizeof bid, &err) < 0) {
        fprintf(stderr, "profd debuginfo upload: %s: %s\n", path, err.msg);
        goto out;
    }
    char full[4400];
    snprintf(full, sizeof full, "%s/api/v1/debuginfo/%s", url, bid);
    curl_easy_setopt(c, CURLOPT_URL, full);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body.len);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_reply);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &reply);
    CURLcode cc = curl_easy_perform(c);
    if (cc != CURLE_OK) {
        fprintf(stderr, "profd debuginfo upload: %s: %s: %s\n", path, full, curl_easy_strerror(cc));
        goto out;
    }
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200) {
        const char *msg = NULL;
        json_t *j = json_loadb(reply.data ? reply.data : "", reply.len, 0, NULL);
        if (j)
            msg = json_string_value(json_object_get(j, "error"));
        fprintf(stderr, "profd debuginfo upload: %s: HTTP %ld: %.500s\n", path, status,
                msg ? msg : "(no error text)");
        json_decref(j);
        goto out;
    }
    printf("%s: uploaded as %s (%zu bytes)\n", path, bid, body.len);
    ret = 0;
out:
    pd_buf_release(&body);
    pd_buf_release(&reply);
    return ret;
}

int pd_debuginfo_main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(usage_text, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "upload") != 0) {
        fprintf(stderr, "profd debuginfo: unknown command \"%s\"; see 'profd debuginfo --help'\n",
                argv[1]);
        return 2;
    }
    const char *url = DEFAULT_URL, *bearer_file = NULL;
    int64_t timeout_ms = 60000;
    const char *files[4096];
    size_t n = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_text, stdout);
            return 0;
        }
        const char *v = NULL;
        const char *names[] = {"--url", "--timeout", "--bearer-token-file"};
        int which = -1;
        for (int k = 0; k < 3; k++) {
            size_t l = strlen(names[k]);
            if (!strncmp(a, names[k], l) && (a[l] == '=' || a[l] == 0)) {
                which = k;
                if (a[l] == '=')
                    v = a + l + 1;
                else if (i + 1 < argc)
                    v = argv[++i];
                else {
                    fprintf(stderr, "profd debuginfo upload: %s needs a value\n", names[k]);
                    return 2;
                }
            }
        }
        if (which == 0) {
            url = v;
        } else if (which == 1) {
            pd_err err;
            if (pd_parse_duration(v, &timeout_ms, &err) < 0 || timeout_ms <= 0) {
                fprintf(stderr, "profd debuginfo upload: --timeout=%s: not a duration like 60s\n",
                        v);
                return 2;
            }
        } else if (which == 2) {
            bearer_file = v;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "profd debuginfo upload: unknown flag \"%s\"; see --help\n", a);
            return 2;
        } else if (n < sizeof files / sizeof *files) {
            files[n++] = a;
        }
    }
    if (!n) {
        fprintf(stderr, "profd debuginfo upload: no FILE given\n%s", usage_text);
        return 2;
    }
    if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) {
        fprintf(stderr, "profd debuginfo upload: --url=%s: want an http:// or https:// URL\n", url);
        return 2;
    }
    char bearer[4200] = "";
    if (bearer_file) {
        FILE *f = fopen(bearer_file, "r");
        size_t got = f ? fread(bearer, 1, 4096, f) : 0;
        if (f)
            fclose(f);
        bearer[got] = 0;
        bearer[strcspn(bearer, "\r\n")] = 0;
        if (!f || !bearer[0]) {
            fprintf(stderr, "profd debuginfo upload: --bearer-token-file=%s: %s\n", bearer_file,
                    f ? "empty" : strerror(errno));
            return 2;
        }
    }
    char base[4096];
    snprintf(base, sizeof base, "%s", url);
    size_t bl = strlen(base);
    while (bl && base[bl - 1] == '/')
        base[--bl] = 0;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *c = curl_easy_init();
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/octet-stream");
    char auth[4300];
    if (bearer[0]) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", bearer);
        hdr = curl_slist_append(hdr, auth);
    }
    int ret = 0;
    if (!c) {
        fprintf(stderr, "profd debuginfo upload: out of memory\n");
        ret = 1;
    } else {
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(c, CURLOPT_USERAGENT, "profd-debuginfo-upload");
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        for (size_t i = 0; i < n; i++)
            if (upload(c, base, files[i]))
                ret = 1;
        curl_easy_cleanup(c);
    }
    curl_slist_free_all(hdr);
    curl_global_cleanup();
    return ret;
}
