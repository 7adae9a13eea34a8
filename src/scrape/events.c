/*
 * scrape/events.c — the events of adaptive capture (adaptive.h): a ring of
 * the last PD_ADAPTIVE_MAX_EVENTS in memory, and, once pd__events_open has
 * named a file, the same events in that file so that a restart keeps them.
 *
 * File (docs/format/events.md), little-endian:
 *
 *   header   "PDEVENTS" (8 bytes) | u32 version = 1 | u32 0
 *   record   u32 len | u32 crc32c(payload) | payload (len bytes, len <= 65536)
 *   payload  u64 id | i64 time_ms | i64 last_profile_ms |
 *            7 x (u16 n | n bytes): kind, job, labels (name 0x1f value
 *            0x1f ...), reason, message, last_type, error
 *
 * Writes: each event is one write(2) of its record then fdatasync (events
 * are rare: a burst's start and end, a target's death). Open reads every
 * record; the first that is short, over the size cap or fails its CRC ends
 * the log (a write torn by a crash): the file is truncated there, what came
 * before is kept, the loss is logged. A file with a bad header is renamed
 * to NAME.corrupt and a new one started. When the file holds twice the ring,
 * it is rewritten with the ring (temp file, fsync, rename, fsync of the
 * directory: STYLE.md 7).
 *
 * All calls run under the scrape manager's lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/log.h"
#include "base/metrics.h"
#include "scrape/scrape_int.h"

#define MAGIC "PDEVENTS"
#define VERSION 1u
#define HEADER_LEN 16
#define MAX_PAYLOAD 65536
#define N_STR 6

typedef struct event {
    uint64_t id;
    int64_t time_ms, last_profile_ms;
    char *s[N_STR]; /* the strings below; the error is err_text[] */
} event;
/* labels: name US value US name US value ... (US = 0x1f, which no label
 * name holds; a value's own US bytes are written as spaces, see put_value) */
enum { S_KIND, S_JOB, S_LABELS, S_REASON, S_MESSAGE, S_LAST_TYPE };

struct pd__events {
    event ev[PD_ADAPTIVE_MAX_EVENTS];
    char *err_text[PD_ADAPTIVE_MAX_EVENTS]; /* error of each event (target_down), NULL = none */
    size_t n, head;
    uint64_t next_id;
    char *path; /* NULL: memory only */
    int fd;
    size_t in_file; /* records in the file */
};

int pd__events_new(pd__events **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return PD_ENOMEM;
    (*out)->fd = -1;
    return 0;
}

static void slot_release(pd__events *ev, size_t i)
{
    for (int k = 0; k < N_STR; k++)
        free(ev->ev[i].s[k]);
    free(ev->err_text[i]);
    memset(&ev->ev[i], 0, sizeof ev->ev[i]);
    ev->err_text[i] = NULL;
}

void pd__events_free(pd__events *ev)
{
    if (!ev)
        return;
    for (size_t i = 0; i < PD_ADAPTIVE_MAX_EVENTS; i++)
        slot_release(ev, i);
    if (ev->fd >= 0)
        close(ev->fd);
    free(ev->path);
    free(ev);
}

/* ---- encoding ---- */

static void put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8);
}
static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}
static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* The record of slot i into buf (cap >= 8 + MAX_PAYLOAD); its length, 0 if over the cap. */
static size_t encode(const pd__events *ev, size_t i, uint8_t *buf)
{
    const event *e = &ev->ev[i];
    const char *s[N_STR + 1];
    for (int k = 0; k < N_STR; k++)
        s[k] = e->s[k] ? e->s[k] : "";
    s[N_STR] = ev->err_text[i] ? ev->err_text[i] : "";
    size_t len = 24;
    for (int k = 0; k <= N_STR; k++) {
        size_t n = strlen(s[k]);
        if (n > 65535)
            return 0;
        len += 2 + n;
    }
    if (len > MAX_PAYLOAD)
        return 0;
    uint8_t *p = buf + 8;
    put_u64(p, e->id);
    put_u64(p + 8, (uint64_t)e->time_ms);
    put_u64(p + 16, (uint64_t)e->last_profile_ms);
    p += 24;
    for (int k = 0; k <= N_STR; k++) {
        size_t n = strlen(s[k]);
        put_u16(p, (uint16_t)n);
        memcpy(p + 2, s[k], n);
        p += 2 + n;
    }
    put_u32(buf, (uint32_t)len);
    put_u32(buf + 4, pd_crc32c(0, buf + 8, len));
    return 8 + len;
}

/* Puts the event of payload p[0..len) in the ring. false: malformed. */
static bool decode_into_ring(pd__events *ev, const uint8_t *p, size_t len)
{
    if (len < 24)
        return false;
    char *s[N_STR + 1] = {0};
    size_t off = 24;
    for (int k = 0; k <= N_STR; k++) {
        if (off + 2 > len)
            goto bad;
        size_t n = get_u16(p + off);
        if (off + 2 + n > len || memchr(p + off + 2, 0, n))
            goto bad;
        if (!(s[k] = malloc(n + 1)))
            goto bad;
        memcpy(s[k], p + off + 2, n);
        s[k][n] = 0;
        off += 2 + n;
    }
    if (off != len || !s[S_KIND][0])
        goto bad;
    size_t i = ev->head;
    slot_release(ev, i);
    event *e = &ev->ev[i];
    e->id = get_u64(p);
    e->time_ms = (int64_t)get_u64(p + 8);
    e->last_profile_ms = (int64_t)get_u64(p + 16);
    for (int k = 0; k < N_STR; k++)
        e->s[k] = s[k];
    if (s[N_STR][0])
        ev->err_text[i] = s[N_STR];
    else
        free(s[N_STR]);
    if (e->id >= ev->next_id)
        ev->next_id = e->id;
    ev->head = (ev->head + 1) % PD_ADAPTIVE_MAX_EVENTS;
    if (ev->n < PD_ADAPTIVE_MAX_EVENTS)
        ev->n++;
    return true;
bad:
    for (int k = 0; k <= N_STR; k++)
        free(s[k]);
    return false;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void header(uint8_t *h)
{
    memcpy(h, MAGIC, 8);
    put_u32(h + 8, VERSION);
    put_u32(h + 12, 0);
}

static void fsync_dir(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d >= 0) {
        fsync(d);
        close(d);
    }
}

/* Writes the ring into a new file (temp, fsync, rename, fsync dir) and
 * keeps it open for appends. */
static int rewrite(pd__events *ev, pd_err *err)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", ev->path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return pd_err_set(err, -errno, "cannot create %s: %s", tmp, strerror(errno));
    uint8_t *buf = malloc(8 + MAX_PAYLOAD);
    int rc = buf ? 0 : PD_ENOMEM;
    uint8_t h[HEADER_LEN];
    header(h);
    if (!rc)
        rc = write_all(fd, h, sizeof h);
    size_t start = (ev->head + PD_ADAPTIVE_MAX_EVENTS - ev->n) % PD_ADAPTIVE_MAX_EVENTS, kept = 0;
    for (size_t k = 0; k < ev->n && !rc; k++) {
        size_t len = encode(ev, (start + k) % PD_ADAPTIVE_MAX_EVENTS, buf);
        if (len) {
            rc = write_all(fd, buf, len);
            kept++;
        }
    }
    free(buf);
    if (!rc && fsync(fd))
        rc = -errno;
    if (!rc && rename(tmp, ev->path))
        rc = -errno;
    if (rc) {
        close(fd);
        unlink(tmp);
        return pd_err_set(err, rc, "cannot write %s: %s", ev->path,
                          rc == PD_ENOMEM ? "out of memory" : strerror(-rc));
    }
    fsync_dir(ev->path);
    if (ev->fd >= 0)
        close(ev->fd);
    close(fd);
    ev->fd = open(ev->path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (ev->fd < 0)
        return pd_err_set(err, -errno, "cannot open %s: %s", ev->path, strerror(errno));
    ev->in_file = kept;
    return 0;
}

int pd__events_open(pd__events *ev, const char *path, pd_err *err)
{
    if (ev->path)
        return 0;
    if (!(ev->path = strdup(path)))
        return pd_err_set(err, PD_ENOMEM, "out of memory");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT) {
            int e = errno;
            free(ev->path);
            ev->path = NULL;
            return pd_err_set(err, -e, "cannot open %s: %s", path, strerror(e));
        }
        return rewrite(ev, err); /* a new file (with what the ring holds) */
    }
    struct stat st;
    uint8_t want[HEADER_LEN];
    header(want);
    uint8_t *data = NULL;
    size_t size = 0;
    if (fstat(fd, &st) == 0 && st.st_size >= HEADER_LEN && st.st_size < (off_t)1 << 30) {
        size = (size_t)st.st_size;
        data = malloc(size);
        size_t got = 0;
        while (data && got < size) {
            ssize_t r = read(fd, data + got, size - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        size = data ? got : 0;
    }
    close(fd);
    if (size < HEADER_LEN || memcmp(data, want, HEADER_LEN)) {
        char bad[4200];
        snprintf(bad, sizeof bad, "%s.corrupt", path);
        pd_log_warn("events file has a bad header: set aside, a new one started",
                    "path=\"%s\" moved_to=\"%s\" bytes=%zu", path, bad, size);
        rename(path, bad);
        free(data);
        return rewrite(ev, err);
    }
    size_t off = HEADER_LEN, records = 0;
    while (off < size) {
        if (size - off < 8)
            break;
        uint32_t len = get_u32(data + off), crc = get_u32(data + off + 4);
        if (len > MAX_PAYLOAD || size - off - 8 < len || pd_crc32c(0, data + off + 8, len) != crc ||
            !decode_into_ring(ev, data + off + 8, len))
            break;
        off += 8 + len;
        records++;
    }
    free(data);
    if (off < size) {
        pd_log_warn("events file: damaged tail dropped (a write torn by a crash?)",
                    "path=\"%s\" kept_records=%zu dropped_bytes=%zu", path, records, size - off);
        pd_metrics_add("profd_adaptive_events_file_damaged_total", NULL, 1);
        if (truncate(path, (off_t)off)) {
            int e = errno;
            return pd_err_set(err, -e, "cannot truncate %s: %s", path, strerror(e));
        }
    }
    ev->fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (ev->fd < 0) {
        int e = errno;
        return pd_err_set(err, -e, "cannot open %s for appending: %s", path, strerror(e));
    }
    ev->in_file = records;
    if (records > 2 * PD_ADAPTIVE_MAX_EVENTS)
        return rewrite(ev, err);
    return 0;
}

/* A label value into the US-separated labels text (pd_labels_set refuses
 * US in values already; kept as a guard: a US byte becomes a space). */
static int put_value(pd_buf *b, const char *v)
{
    int rc = 0;
    for (; *v && !rc; v++)
        rc = pd_buf_putc(b, *v == 0x1f ? ' ' : *v);
    return rc;
}

void pd__events_add(pd__events *ev, const char *kind, int64_t time_ms, const char *job,
                    const pd_labels *labels, const char *reason, const char *message,
                    int64_t last_profile_ms, const char *last_type, const char *error)
{
    pd_buf lb;
    pd_buf_init(&lb, 0);
    for (size_t k = 0; k < labels->n; k++)
        if ((k && pd_buf_putc(&lb, 0x1f)) || pd_buf_puts(&lb, labels->v[k].name) ||
            pd_buf_putc(&lb, 0x1f) || put_value(&lb, labels->v[k].value))
            break;
    char *labels_text = pd_buf_detach(&lb, NULL);
    size_t i = ev->head;
    slot_release(ev, i);
    event *e = &ev->ev[i];
    e->id = ++ev->next_id;
    e->time_ms = time_ms;
    e->last_profile_ms = last_profile_ms;
    const char *src[N_STR] = {kind,   job,     labels_text ? labels_text : "",
                              reason, message, last_type};
    for (int k = 0; k < N_STR; k++)
        e->s[k] = strdup(src[k] ? src[k] : "");
    free(labels_text);
    ev->err_text[i] = error && error[0] ? strdup(error) : NULL;
    ev->head = (ev->head + 1) % PD_ADAPTIVE_MAX_EVENTS;
    if (ev->n < PD_ADAPTIVE_MAX_EVENTS)
        ev->n++;
    char l[64];
    snprintf(l, sizeof l, "kind=\"%s\"", kind);
    pd_metrics_add("profd_adaptive_events_total", l, 1);
    if (ev->fd < 0)
        return;
    uint8_t *buf = malloc(8 + MAX_PAYLOAD);
    size_t len = buf ? encode(ev, i, buf) : 0;
    int rc = len ? write_all(ev->fd, buf, len) : PD_ENOMEM;
    if (!rc && fdatasync(ev->fd))
        rc = -errno;
    free(buf);
    if (rc) {
        pd_log_warn("events file: cannot append an event (kept in memory)",
                    "path=\"%s\" err=\"%s\"", ev->path,
                    rc == PD_ENOMEM ? "out of memory or too large" : strerror(-rc));
        pd_metrics_add("profd_adaptive_events_file_errors_total", NULL, 1);
        return;
    }
    if (++ev->in_file > 2 * PD_ADAPTIVE_MAX_EVENTS) {
        pd_err err;
        pd_err_clear(&err);
        if (rewrite(ev, &err))
            pd_log_warn("events file: cannot compact", "err=\"%s\"", err.msg);
    }
}

/* The labels text (name US value US ...) as a JSON object; an odd count
 * leaves the last name out. */
static int put_labels(pd_buf *out, const char *t)
{
    int rc = pd_buf_putc(out, '{');
    bool first = true;
    while (*t && !rc) {
        const char *n = t, *ne = strchr(n, 0x1f);
        if (!ne)
            break;
        const char *v = ne + 1, *ve = strchr(v, 0x1f);
        if (!ve)
            ve = v + strlen(v);
        if ((!first && (rc = pd_buf_putc(out, ','))) ||
            (rc = pd_buf_put_json_string(out, n, (size_t)(ne - n))) ||
            (rc = pd_buf_putc(out, ':')) || (rc = pd_buf_put_json_string(out, v, (size_t)(ve - v))))
            break;
        first = false;
        t = *ve ? ve + 1 : ve;
    }
    return rc ? rc : pd_buf_putc(out, '}');
}

int pd__events_json(pd__events *ev, int64_t from_ms, int64_t to_ms, const char *kind, pd_buf *out)
{
    int rc = pd_buf_putc(out, '[');
    bool first = true;
    size_t start = (ev->head + PD_ADAPTIVE_MAX_EVENTS - ev->n) % PD_ADAPTIVE_MAX_EVENTS;
    for (size_t k = 0; k < ev->n && !rc; k++) {
        size_t i = (start + k) % PD_ADAPTIVE_MAX_EVENTS;
        const event *e = &ev->ev[i];
        const char *ek = e->s[S_KIND];
        if (e->time_ms < from_ms || e->time_ms > to_ms || !ek || (kind && strcmp(kind, ek)))
            continue;
        bool ok = true;
        for (int s = 0; s < N_STR; s++)
            ok = ok && e->s[s];
        if (!ok)
            continue; /* recorded while out of memory */
        const char *job = e->s[S_JOB], *reason = e->s[S_REASON], *msg = e->s[S_MESSAGE];
        if ((!first && (rc = pd_buf_putc(out, ','))) ||
            (rc = pd_buf_printf(out, "{\"id\":%llu,\"kind\":", (unsigned long long)e->id)) ||
            (rc = pd_buf_put_json_string(out, ek, strlen(ek))) ||
            (rc = pd_buf_printf(out, ",\"time\":%lld,\"job\":", (long long)e->time_ms)) ||
            (rc = pd_buf_put_json_string(out, job, strlen(job))) ||
            (rc = pd_buf_puts(out, ",\"labels\":")) || (rc = put_labels(out, e->s[S_LABELS])) ||
            (rc = pd_buf_puts(out, ",\"reason\":")) ||
            (rc = pd_buf_put_json_string(out, reason, strlen(reason))) ||
            (rc = pd_buf_puts(out, ",\"message\":")) ||
            (rc = pd_buf_put_json_string(out, msg, strlen(msg))))
            break;
        first = false;
        if (!strcmp(ek, "target_down")) {
            const char *lt = e->s[S_LAST_TYPE];
            if (e->last_profile_ms &&
                ((rc = pd_buf_printf(out, ",\"lastProfile\":%lld,\"lastProfileType\":",
                                     (long long)e->last_profile_ms)) ||
                 (rc = pd_buf_put_json_string(out, lt, strlen(lt)))))
                break;
            if (ev->err_text[i] &&
                ((rc = pd_buf_puts(out, ",\"error\":")) ||
                 (rc = pd_buf_put_json_string(out, ev->err_text[i], strlen(ev->err_text[i])))))
                break;
        }
        rc = pd_buf_putc(out, '}');
    }
    return rc ? rc : pd_buf_putc(out, ']');
}
