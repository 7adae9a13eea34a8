/*
 * tests/unit/pprof/pb_test.h — helpers shared by the pprof unit tests:
 * hand-writing protobuf bytes (independent of encode.c), reading files, and
 * walking PD_TESTDATA/pprof.
 */
#ifndef PD_TESTS_PB_TEST_H
#define PD_TESTS_PB_TEST_H

#include <dirent.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "pprof/pprof.h"

/* ---- protobuf by hand ---- */

static inline void pb_varint(pd_buf *b, uint64_t v)
{
    while (v >= 0x80) {
        char c = (char)(v | 0x80);
        pd_buf_append(b, &c, 1);
        v >>= 7;
    }
    char c = (char)v;
    pd_buf_append(b, &c, 1);
}

static inline void pb_tag(pd_buf *b, unsigned field, unsigned wt) { pb_varint(b, (uint64_t)field << 3 | wt); }

static inline void pb_u(pd_buf *b, unsigned field, uint64_t v)
{
    pb_tag(b, field, 0);
    pb_varint(b, v);
}

static inline void pb_bytes(pd_buf *b, unsigned field, const void *data, size_t len)
{
    pb_tag(b, field, 2);
    pb_varint(b, len);
    pd_buf_append(b, data, len);
}

static inline void pb_str(pd_buf *b, unsigned field, const char *s) { pb_bytes(b, field, s, strlen(s)); }

/* embeds the message m as field `field` of b, then empties m */
static inline void pb_msg(pd_buf *b, unsigned field, pd_buf *m)
{
    pb_bytes(b, field, m->data ? m->data : "", m->len);
    pd_buf_reset(m);
}

/* packed varints; n values from a uint64 array */
static inline void pb_packed(pd_buf *b, unsigned field, const uint64_t *v, size_t n)
{
    pd_buf t;
    pd_buf_init(&t, 0);
    for (size_t i = 0; i < n; i++)
        pb_varint(&t, v[i]);
    pb_msg(b, field, &t);
    pd_buf_release(&t);
}

/* ---- files ---- */

static inline int read_whole(const char *path, pd_buf *b)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
        pd_buf_append(b, tmp, n);
    fclose(f);
    return 0;
}

/* All *.pb.gz files under dir, recursively, sorted; NULL-terminated list
 * of malloc'd paths (free with free_list). */
static inline int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static inline void collect(const char *dir, char ***list, size_t *n, size_t *cap)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st))
            continue;
        if (S_ISDIR(st.st_mode)) {
            collect(path, list, n, cap);
        } else {
            size_t l = strlen(path);
            if (l > 6 && !strcmp(path + l - 6, ".pb.gz")) {
                if (*n + 2 > *cap) {
                    *cap = *cap ? *cap * 2 : 16;
                    *list = realloc(*list, *cap * sizeof **list);
                }
                (*list)[(*n)++] = strdup(path);
                (*list)[*n] = NULL;
            }
        }
    }
    closedir(d);
}

static inline char **testdata_files(size_t *count)
{
    char **list = NULL;
    size_t n = 0, cap = 0;
    collect(PD_TESTDATA "/pprof", &list, &n, &cap);
    if (list)
        qsort(list, n, sizeof *list, cmp_str);
    *count = n;
    return list;
}

static inline void free_list(char **list)
{
    for (size_t i = 0; list && list[i]; i++)
        free(list[i]);
    free(list);
}

/* decodes a testdata file (path relative to PD_TESTDATA/pprof) or fails */
static inline int load_profile(const char *rel, pd_profile *p, pd_err *err)
{
    char path[4096];
    pd_buf b;
    pd_buf_init(&b, 0);
    snprintf(path, sizeof path, "%s/pprof/%s", PD_TESTDATA, rel);
    if (read_whole(path, &b)) {
        snprintf(err->msg, sizeof err->msg, "cannot read %.400s", path);
        return -1;
    }
    int rc = pd_profile_decode(p, (const uint8_t *)b.data, b.len, NULL, err);
    pd_buf_release(&b);
    return rc;
}

#endif
