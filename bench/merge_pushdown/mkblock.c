/* bench/merge_pushdown/mkblock.c — writes one block of real profiles for
 * bench/merge_pushdown/run.sh (not a test):
 *
 *   bench_mkblock PARENT_DIR N_SERIES PER_SERIES T0_MS STEP_MS NAME FILE...
 *
 * Series i (0-based) is {__name__=NAME, job="bench", instance="iNNNN"};
 * profile j of series i is FILE[(i * PER_SERIES + j) % n_files] at
 * T0_MS + j * STEP_MS. Prints the block's ULID. Exit 1 on any error.
 * With MKBLOCK_CUMULATIVE=1 in the environment the series also carry
 * __delta__="false", as profd's scraper stores Go's allocs/heap/block/mutex
 * scraped as served (issue 12; bench/merge_pushdown/delta.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/tsdb/block_int.h"

static int read_all(const char *path, pd_buf *b)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    char tmp[65536];
    size_t r;
    while ((r = fread(tmp, 1, sizeof tmp, f)) > 0)
        if (pd_buf_append(b, tmp, r) < 0) {
            fclose(f);
            return -1;
        }
    fclose(f);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 8) {
        fprintf(stderr, "usage: %s PARENT_DIR N_SERIES PER_SERIES T0_MS STEP_MS NAME FILE...\n",
                argv[0]);
        return 2;
    }
    const char *dir = argv[1], *name = argv[6];
    long ns = atol(argv[2]), per = atol(argv[3]);
    long long t0 = atoll(argv[4]), step = atoll(argv[5]);
    int nf = argc - 7;
    pd_profile *ps = calloc((size_t)nf, sizeof *ps);
    pd_err err = {{0}};
    for (int i = 0; i < nf; i++) {
        pd_buf b;
        pd_buf_init(&b, 0);
        if (read_all(argv[7 + i], &b) < 0 ||
            pd_profile_decode(&ps[i], (const uint8_t *)b.data, b.len, NULL, &err) < 0) {
            fprintf(stderr, "%s: %s\n", argv[7 + i], err.msg);
            return 1;
        }
        pd_buf_release(&b);
    }
    pd_block_writer *w;
    if (pd__block_writer_new(NULL, &w) < 0)
        return 1;
    for (long i = 0; i < ns; i++) {
        char inst[32];
        snprintf(inst, sizeof inst, "i%04ld", i);
        pd_labels ls;
        pd_labels_init(&ls);
        pd_labels_set(&ls, "__name__", name, NULL);
        pd_labels_set(&ls, "job", "bench", NULL);
        pd_labels_set(&ls, "instance", inst, NULL);
        if (getenv("MKBLOCK_CUMULATIVE") && !strcmp(getenv("MKBLOCK_CUMULATIVE"), "1"))
            pd_labels_set(&ls, "__delta__", "false", NULL);
        for (long j = 0; j < per; j++) {
            const pd_profile *p = &ps[(i * per + j) % nf];
            if (pd__block_writer_add(w, &ls, t0 + j * step, p, &err) < 0) {
                fprintf(stderr, "add: %s\n", err.msg);
                return 1;
            }
        }
        pd_labels_release(&ls);
    }
    char id[27];
    if (pd__block_writer_write(w, dir, id, &err) < 0) {
        fprintf(stderr, "write: %s\n", err.msg);
        return 1;
    }
    pd__block_writer_free(w);
    printf("%s\n", id);
    for (int i = 0; i < nf; i++)
        pd_profile_release(&ps[i]);
    free(ps);
    return 0;
}
