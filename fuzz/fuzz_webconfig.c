/*
 * fuzz_webconfig — libFuzzer target for the --web.config.file reader
 * (src/http/webconfig.c, pd_webcfg_parse).
 *
 * Input: any bytes, given as the file's text (relative file names resolve
 * under a directory that does not exist, so cert_file/key_file fail as
 * unreadable; inline cert/key are taken). Seed corpus: fuzz/corpus/webconfig.
 * Properties checked besides the sanitizers:
 *   - a refused input sets an error message naming "web.yml";
 *   - an accepted one satisfies what the reader promises: versions within
 *     10..13 and min <= max, at most the five headers, every user hash 60
 *     characters starting "$2", every group user in basic_auth_users, and
 *     pd_webcfg_tls_priorities fits 1 KiB or says PD_ETOOBIG.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "http/webconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pd_webcfg w;
    pd_err err;
    pd_err_clear(&err);
    int rc = pd_webcfg_parse("web.yml", "/nonexistent-pd-fuzz", (const char *)data, size, &w, &err);
    if (rc) {
        if (rc != PD_ENOMEM && !strstr(err.msg, "web.yml") && !strstr(err.msg, "nonexistent"))
            abort();
        return 0;
    }
    if (w.min_version < 10 || w.max_version > 13 || w.min_version > w.max_version)
        abort();
    if (w.n_headers > 5)
        abort();
    for (size_t i = 0; i < w.n_users; i++)
        if (strlen(w.user_hashes[i]) != 60 || strncmp(w.user_hashes[i], "$2", 2))
            abort();
    for (int g = 0; g < PD_ACCESS_N; g++)
        for (size_t i = 0; i < w.group_users[g].n; i++) {
            size_t j = 0;
            while (j < w.n_users && strcmp(w.user_names[j], w.group_users[g].v[i]))
                j++;
            if (j == w.n_users)
                abort();
        }
    char prio[1024];
    int p = pd_webcfg_tls_priorities(&w, prio, sizeof prio);
    if (p != 0 && p != PD_ETOOBIG)
        abort();
    if (w.tls_enabled && (!w.cert_pem || !w.key_pem))
        abort();
    pd_webcfg_release(&w);
    return 0;
}
