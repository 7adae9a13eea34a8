/*
 * ingest/convert_main.c — `profd convert`: a file in another profile format
 * to gzip-compressed pprof. See pd_ingest_convert_main in ingest.h.
 */
#include "ingest/ingest.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/parse.h"

static const char usage_text[] =
    "usage: profd convert --from=folded|lines|perf-script [--sample-rate=HZ] [--type=T]\n"
    "                     [--unit=U] IN OUT.pb.gz\n"
    "  IN and OUT may be - for stdin/stdout. folded: 'frame;frame;... COUNT' per line\n"
    "  (root first); lines: one stack per line, counting 1; perf-script: the text of\n"
    "  'perf script' after 'perf record -g'. --type (default cpu) and --sample-rate\n"
    "  (default 100 Hz for cpu/wall) set folded/lines sample types.\n";

static int usage(const char *fmt, const char *arg)
{
    if (fmt) {
        fputs("profd convert: ", stderr);
        fprintf(stderr, fmt, arg);
        fputc('\n', stderr);
    }
    fputs(usage_text, stderr);
    return 2;
}

/* Appends the whole of path ("-": stdin) to b, which caps the size
 * (PD_ETOOBIG). 0 or -errno. */
static int read_all(const char *path, pd_buf *b)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    int rc = 0;
    if (!f)
        return -errno;
    char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
        if ((rc = pd_buf_append(b, chunk, got)))
            break;
    if (!rc && ferror(f))
        rc = -EIO;
    if (f != stdin)
        fclose(f);
    return rc;
}

/* Writes b to path ("-": stdout) through path.tmp + rename, so a reader
 * never sees a partial file. 0, PD_ENOMEM or -errno. */
static int write_all(const char *path, const pd_buf *b)
{
    if (!strcmp(path, "-")) {
        if (fwrite(b->data, 1, b->len, stdout) != b->len || fflush(stdout))
            return -EIO;
        return 0;
    }
    size_t n = strlen(path) + 5;
    char *tmp = malloc(n);
    if (!tmp)
        return PD_ENOMEM;
    snprintf(tmp, n, "%s.tmp", path);
    int rc = 0;
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        rc = -errno;
        goto out;
    }
    if (fwrite(b->data, 1, b->len, f) != b->len)
        rc = -EIO;
    if (fflush(f) || fsync(fileno(f)))
        rc = rc ? rc : -errno;
    if (fclose(f))
        rc = rc ? rc : -errno;
    if (!rc && rename(tmp, path))
        rc = -errno;
    if (rc)
        unlink(tmp);
out:
    free(tmp);
    return rc;
}

int pd_ingest_convert_main(int argc, char **argv)
{
    const char *from = NULL, *rate = NULL, *type = NULL, *unit = NULL;
    const char *pos[2];
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int r;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage_text, stdout);
            return 0;
        }
        if (!strcmp(a, "-") || a[0] != '-') {
            if (n_pos == 2)
                return usage("unexpected argument '%s' (want IN and OUT)", a);
            pos[n_pos++] = a;
            continue;
        }
        if ((r = pd_parse_flag(argc, argv, &i, "--from", &v)))
            from = v;
        else if ((r = pd_parse_flag(argc, argv, &i, "--sample-rate", &v)))
            rate = v;
        else if ((r = pd_parse_flag(argc, argv, &i, "--type", &v)))
            type = v;
        else if ((r = pd_parse_flag(argc, argv, &i, "--unit", &v)))
            unit = v;
        else
            return usage("unknown flag '%s'", a);
        if (r < 0)
            return usage("flag '%s' needs a value", a);
    }
    if (!from)
        return usage("--from is required", NULL);
    pd_ingest_format fmt = pd_ingest_format_parse(from);
    if (!fmt)
        return usage("unknown input format '%s' (folded, lines or perf-script)", from);
    if (n_pos != 2)
        return usage("need IN and OUT", NULL);

    pd_ingest_opts o = {.type = type, .unit = unit};
    if (rate) {
        char *end;
        errno = 0;
        long long hz = strtoll(rate, &end, 10);
        if (errno || end == rate || *end || hz <= 0 || hz > 1000000000)
            return usage("--sample-rate '%s' is not a rate in Hz (1..1000000000)", rate);
        o.sample_rate_hz = hz;
    }

    pd_ingest_limits lim = pd_ingest_limits_default();
    pd_buf in, out;
    pd_profile p = {0};
    pd_err err = {{0}};
    int rc, ret = 1;
    const char *in_name = strcmp(pos[0], "-") ? pos[0] : "<stdin>";
    pd_buf_init(&in, lim.max_input_bytes);
    pd_buf_init(&out, 0);
    if ((rc = read_all(pos[0], &in))) {
        if (rc == PD_ETOOBIG)
            fprintf(stderr, "profd convert: %s: larger than %zu bytes\n", in_name,
                    lim.max_input_bytes);
        else
            fprintf(stderr, "profd convert: %s: %s\n", in_name, pd_strerror(rc));
        goto out;
    }
    if ((rc = pd_ingest_convert(fmt, in.data ? in.data : "", in.len, &o, &p, &err))) {
        fprintf(stderr, "profd convert: %s: %s\n", in_name, err.msg[0] ? err.msg : pd_strerror(rc));
        goto out;
    }
    if ((rc = pd_profile_encode(&p, true, &out))) {
        fprintf(stderr, "profd convert: %s: encoding pprof: %s\n", in_name, pd_strerror(rc));
        goto out;
    }
    if ((rc = write_all(pos[1], &out))) {
        fprintf(stderr, "profd convert: %s: %s\n", strcmp(pos[1], "-") ? pos[1] : "<stdout>",
                pd_strerror(rc));
        goto out;
    }
    ret = 0;
out:
    pd_profile_release(&p);
    pd_buf_release(&in);
    pd_buf_release(&out);
    return ret;
}
