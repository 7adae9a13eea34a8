/*
 * pd_pprof_reencode IN OUT [raw|gzip [mutate]] — decodes the pprof file IN
 * with profd's codec and writes it back to OUT (gzip unless "raw" is
 * given). Used by go_pprof_raw.sh to check the output against
 * `go tool pprof -raw`. "mutate" adds 1 to the first value of the first
 * sample before encoding: the script's negative control, showing that its
 * comparison does see a changed sample.
 * Exit 0 on success, 1 on any error (message on stderr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pprof/pprof.h"

static int read_file(const char *path, pd_buf *b)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    char tmp[65536];
    size_t n;
    int rc = 0;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
        if ((rc = pd_buf_append(b, tmp, n)))
            break;
    if (ferror(f))
        rc = -1;
    fclose(f);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s IN OUT [raw]\n", argv[0]);
        return 2;
    }
    int code = 1;
    pd_buf in, out;
    pd_profile p;
    pd_err err = {{0}};
    pd_buf_init(&in, 64u << 20);
    pd_buf_init(&out, 0);
    memset(&p, 0, sizeof p);
    if (read_file(argv[1], &in)) {
        fprintf(stderr, "%s: cannot read\n", argv[1]);
        goto out;
    }
    int rc = pd_profile_decode(&p, (const uint8_t *)in.data, in.len, NULL, &err);
    if (rc) {
        fprintf(stderr, "%s: %s: %s\n", argv[1], pd_strerror(rc), err.msg);
        goto out;
    }
    bool gz = !(argc > 3 && !strcmp(argv[3], "raw"));
    if (argc > 4 && !strcmp(argv[4], "mutate") && p.n_sample && p.sample[0].n_value)
        p.sample[0].value[0] += 1;
    if ((rc = pd_profile_encode(&p, gz, &out))) {
        fprintf(stderr, "encode: %s\n", pd_strerror(rc));
        goto out;
    }
    FILE *f = fopen(argv[2], "wb");
    if (!f || fwrite(out.data, 1, out.len, f) != out.len || fclose(f) != 0) {
        fprintf(stderr, "%s: cannot write\n", argv[2]);
        goto out;
    }
    code = 0;
out:
    pd_profile_release(&p);
    pd_buf_release(&in);
    pd_buf_release(&out);
    return code;
}
