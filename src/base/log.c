#include "base/log.h"
#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int min_level = PD_LOG_INFO;

int pd_log_set_level(const char *name)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, names[i]) == 0) {
            min_level = i;
            return 0;
        }
    }
    return PD_EINVAL;
}

static void put_quoted(char *out, size_t cap, size_t *len, const char *s)
{
    size_t n = *len;
    if (n + 1 < cap)
        out[n++] = '"';
    for (; *s && n + 3 < cap; s++) {
        if (*s == '"' || *s == '\\') {
            out[n++] = '\\';
            out[n++] = *s;
        } else if (*s == '\n') {
            out[n++] = '\\';
            out[n++] = 'n';
        } else {
            out[n++] = *s;
        }
    }
    if (n + 1 < cap)
        out[n++] = '"';
    out[n] = '\0';
    *len = n;
}

void pd_log(int level, const char *msg, const char *fmt, ...)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    if (level < min_level || level < 0 || level > 3)
        return;
    char line[4096];
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    size_t n = (size_t)snprintf(
        line, sizeof line,
        "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s msg=", tm.tm_year + 1900, tm.tm_mon + 1,
        tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long)(tv.tv_usec / 1000), names[level]);
    put_quoted(line, sizeof line - 2, &n, msg);
    if (fmt && *fmt && n + 2 < sizeof line - 2) {
        line[n++] = ' ';
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(line + n, sizeof line - 2 - n, fmt, ap);
        va_end(ap);
        if (w > 0)
            n += (size_t)w < sizeof line - 2 - n ? (size_t)w : sizeof line - 3 - n;
    }
    line[n++] = '\n';
    line[n] = '\0';
    ssize_t wr = write(2, line, n);
    (void)wr;
}
