/*
 * symbolize/source.c — source files for the source view; the rules (where
 * from, confinement, size) are in source.h.
 *
 * A local candidate is opened, then its real path is read back from
 * /proc/self/fd/N and must lie under realpath(DIR) + "/": a symlink inside
 * DIR that points out of it, or a ".." that slipped through, is refused on
 * what was actually opened, not on the name asked for.
 */
#include "symbolize/source.h"

#include <elfutils/debuginfod.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"

int pd_source_dir_parse(char *arg, pd_source_dir *out)
{
    out->prefix = NULL;
    out->dir = arg;
    char *eq = strchr(arg, '=');
    if (eq) {
        *eq = 0;
        out->prefix = arg;
        out->dir = eq + 1;
        if (arg[0] != '/')
            return PD_EINVAL;
    }
    return out->dir[0] ? 0 : PD_EINVAL;
}

void pd_source_file_release(pd_source_file *f)
{
    free(f->text);
    f->text = NULL;
    f->len = 0;
}

static void note(pd_buf *tried, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(pd_buf *tried, const char *fmt, ...)
{
    if (!tried)
        return;
    if (tried->len)
        pd_buf_puts(tried, "; ");
    va_list ap;
    va_start(ap, fmt);
    pd_buf_vprintf(tried, fmt, ap);
    va_end(ap);
}

/* Length of the valid UTF-8 sequence at s[0..n), 0 when invalid (RFC 3629:
 * no overlongs, surrogates or code points past U+10FFFF). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t k = c >= 0xc2 && c <= 0xdf   ? 2
               : c >= 0xe0 && c <= 0xef ? 3
               : c >= 0xf0 && c <= 0xf4 ? 4
                                        : 0;
    if (!k || k > n)
        return 0;
    for (size_t i = 1; i < k; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) || (c == 0xf0 && s[1] < 0x90) ||
        (c == 0xf4 && s[1] > 0x8f))
        return 0;
    return k;
}

/* Reads fd (a regular file of size bytes) into out as valid UTF-8.
 * 0, PD_ENOMEM, PD_EINVAL (a NUL byte: not text), -errno. */
static int read_text(int fd, size_t size, pd_source_file *out)
{
    unsigned char *raw = malloc(size + 1);
    if (!raw)
        return PD_ENOMEM;
    size_t got = 0;
    while (got < size) {
        ssize_t r = pread(fd, raw + got, size - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = -errno;
            free(raw);
            return e;
        }
        if (r == 0)
            break; /* shrank while read: what is there */
        got += (size_t)r;
    }
    if (memchr(raw, 0, got)) {
        free(raw);
        return PD_EINVAL;
    }
    size_t bad = 0;
    for (size_t i = 0; i < got;) {
        size_t k = utf8_seq(raw + i, got - i);
        if (!k) {
            bad++;
            k = 1;
        }
        i += k;
    }
    char *t = malloc(got + 2 * bad + 1);
    if (!t) {
        free(raw);
        return PD_ENOMEM;
    }
    size_t o = 0;
    for (size_t i = 0; i < got;) {
        size_t k = utf8_seq(raw + i, got - i);
        if (!k) {
            memcpy(t + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
            continue;
        }
        memcpy(t + o, raw + i, k);
        o += k;
        i += k;
    }
    t[o] = 0;
    free(raw);
    out->text = t;
    out->len = o;
    return 0;
}

/* True when path has a ".." component. */
static bool has_dotdot(const char *path)
{
    for (const char *p = path; (p = strstr(p, "..")); p += 2)
        if ((p == path || p[-1] == '/') && (p[2] == 0 || p[2] == '/'))
            return true;
    return false;
}

/* Opens candidate when it is a regular file whose real path lies inside
 * root (a real path, no trailing slash). 1 found (out filled), 0 no such
 * file, -1 refused (noted in tried), PD_ENOMEM. */
static int try_local(const char *candidate, const char *root, size_t max, pd_source_file *out,
                     pd_buf *tried)
{
    int fd = open(candidate, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return 0;
    char link[64], real[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, real, sizeof real - 1);
    size_t rl = strlen(root);
    struct stat sb;
    int rc = 0;
    if (n <= 0 || fstat(fd, &sb) < 0) {
        rc = 0;
        goto out;
    }
    real[n] = 0;
    if (strncmp(real, root, rl) != 0 || real[rl] != '/') {
        note(tried, "%s: resolves to %s, outside %s (refused)", candidate, real, root);
        rc = -1;
        goto out;
    }
    if (!S_ISREG(sb.st_mode)) {
        rc = 0;
        goto out;
    }
    if ((uint64_t)sb.st_size > max) {
        note(tried, "%s: %lld bytes, over the %zu-byte cap", candidate, (long long)sb.st_size, max);
        rc = -1;
        goto out;
    }
    rc = read_text(fd, (size_t)sb.st_size, out);
    if (rc == PD_EINVAL || (rc < 0 && rc != PD_ENOMEM)) {
        note(tried, "%s: %s", candidate, rc == PD_EINVAL ? "not a text file" : strerror(-rc));
        rc = -1;
        goto out;
    }
    if (rc == 0) {
        out->origin = "directory";
        snprintf(out->where, sizeof out->where, "%s", real);
        rc = 1;
    }
out:
    close(fd);
    return rc;
}

/* Looks path up under one --ui.source-dir. 1 found, 0 not, PD_ENOMEM. */
static int find_local(const pd_source_dir *d, const char *path, size_t max, pd_source_file *out,
                      pd_buf *tried)
{
    char root[PATH_MAX];
    if (!realpath(d->dir, root)) {
        note(tried, "--ui.source-dir %s: %s", d->dir, strerror(errno));
        return 0;
    }
    char cand[PATH_MAX + 8];
    int rc;
    if (d->prefix && *d->prefix) {
        size_t pl = strlen(d->prefix);
        while (pl > 1 && d->prefix[pl - 1] == '/')
            pl--;
        if (strncmp(path, d->prefix, pl) != 0 || (path[pl] != '/' && path[pl] != 0 && pl > 1)) {
            note(tried, "--ui.source-dir %s=%s: not under the prefix", d->prefix, d->dir);
            return 0;
        }
        const char *rest = path + pl;
        while (*rest == '/')
            rest++;
        if (!*rest)
            return 0;
        if ((size_t)snprintf(cand, sizeof cand, "%s/%s", root, rest) >= sizeof cand)
            return 0;
        rc = try_local(cand, root, max, out, tried);
        if (rc == 0)
            note(tried, "--ui.source-dir %s=%s: no %s", d->prefix, d->dir, cand);
        return rc < 0 ? (rc == PD_ENOMEM ? rc : 0) : rc;
    }
    /* each suffix of the path, longest first */
    const char *s = path;
    while (*s) {
        while (*s == '/')
            s++;
        if (!*s)
            break;
        if ((size_t)snprintf(cand, sizeof cand, "%s/%s", root, s) < sizeof cand) {
            rc = try_local(cand, root, max, out, tried);
            if (rc == 1 || rc == PD_ENOMEM)
                return rc; /* a refusal (-1) goes on with the shorter suffixes */
        }
        const char *slash = strchr(s, '/');
        if (!slash)
            break;
        s = slash + 1;
    }
    const char *base = strrchr(path, '/');
    note(tried, "--ui.source-dir %s: no %s under it", d->dir, base ? base + 1 : path);
    return 0;
}

/* Asks debuginfod for path of build ID bid. 1 found, 0 not, PD_ENOMEM. */
static int find_debuginfod(const char *bid, const char *path, size_t max, pd_source_file *out,
                           pd_buf *tried)
{
    debuginfod_client *c = debuginfod_begin();
    if (!c) {
        note(tried, "debuginfod: cannot start a client");
        return 0;
    }
    char *got = NULL;
    int fd = debuginfod_find_source(c, (const unsigned char *)bid, 0, path, &got);
    debuginfod_end(c);
    if (fd < 0) {
        note(tried, "debuginfod build ID %s: %s", bid, fd == -ENOENT ? "not found" : strerror(-fd));
        free(got);
        return 0;
    }
    struct stat sb;
    int rc = 0;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        note(tried, "debuginfod build ID %s: not a file", bid);
    } else if ((uint64_t)sb.st_size > max) {
        note(tried, "debuginfod build ID %s: %lld bytes, over the %zu-byte cap", bid,
             (long long)sb.st_size, max);
    } else {
        rc = read_text(fd, (size_t)sb.st_size, out);
        if (rc == 0) {
            out->origin = "debuginfod";
            snprintf(out->where, sizeof out->where, "%s", bid);
            rc = 1;
        } else if (rc != PD_ENOMEM) {
            note(tried, "debuginfod build ID %s: %s", bid,
                 rc == PD_EINVAL ? "not a text file" : strerror(-rc));
            rc = 0;
        }
    }
    close(fd);
    free(got);
    return rc;
}

int pd_source_find(const pd_source_opts *o, const char *const *build_ids, size_t n_ids,
                   const char *path, pd_source_file *out, pd_buf *tried)
{
    memset(out, 0, sizeof *out);
    size_t max = o->max_bytes ? o->max_bytes : PD_SOURCE_DEFAULT_MAX_BYTES;
    const char *urls = getenv("DEBUGINFOD_URLS");
    int rc;
    if (!path || !*path) {
        note(tried, "the profile names no source file");
        return PD_ENOTFOUND;
    }
    if (o->use_debuginfod && urls && *urls && path[0] == '/') {
        for (size_t i = 0; i < n_ids; i++) {
            if (!build_ids[i] || !*build_ids[i])
                continue;
            if ((rc = find_debuginfod(build_ids[i], path, max, out, tried)) != 0)
                return rc < 0 ? rc : 0;
        }
    } else if (o->use_debuginfod && n_ids) {
        note(tried, path[0] == '/' ? "debuginfod: DEBUGINFOD_URLS is not set"
                                   : "debuginfod: the path is not absolute");
    } else if (!n_ids) {
        note(tried, "debuginfod: no build ID");
    }
    if (has_dotdot(path)) {
        note(tried, "local directories: the path has a \"..\" component (refused)");
        return PD_ENOTFOUND;
    }
    if (!o->n_dirs)
        note(tried, "no --ui.source-dir configured");
    for (size_t i = 0; i < o->n_dirs; i++)
        if ((rc = find_local(&o->dirs[i], path, max, out, tried)) != 0)
            return rc < 0 ? rc : 0;
    return PD_ENOTFOUND;
}
