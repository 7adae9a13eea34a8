/*
 * fuzz_events — libFuzzer target for the reader of the events file of
 * adaptive capture (src/scrape/events.c, docs/format/events.md): the file
 * is disk input, read back at every start.
 *
 * Input: any bytes, as the whole content of STORAGE/events.log (written to
 * a temp file). Seed corpus: fuzz/corpus/events (files written by
 * events.c: empty, three events, one with a torn tail).
 * Properties checked besides the sanitizers: open succeeds (a damaged file
 * is truncated or set aside, never refused); the events it gives read as a
 * JSON array; an event can then be appended and read back after a second
 * open.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "scrape/scrape_int.h"

static char dir[64], path[128];

static size_t count(pd__events *ev)
{
    pd_buf b;
    pd_buf_init(&b, 0);
    if (pd__events_json(ev, INT64_MIN, INT64_MAX, NULL, &b))
        abort();
    json_t *j = json_loadb(b.data, b.len, 0, NULL);
    if (!json_is_array(j)) {
        fprintf(stderr, "events JSON does not parse: %.*s\n", (int)b.len, b.data);
        abort();
    }
    size_t n = json_array_size(j);
    json_decref(j);
    pd_buf_release(&b);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/fuzz-events-XXXXXX");
        if (!mkdtemp(dir))
            abort();
        snprintf(path, sizeof path, "%s/events.log", dir);
    }
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f))
        abort();
    pd__events *ev;
    pd_err err;
    pd_err_clear(&err);
    if (pd__events_new(&ev))
        return 0;
    if (pd__events_open(ev, path, &err)) {
        fprintf(stderr, "open failed: %s\n", err.msg);
        abort();
    }
    size_t n = count(ev);
    pd_labels ls;
    pd_labels_init(&ls);
    pd_labels_set(&ls, "job", "j", NULL);
    pd__events_add(ev, "target_down", 1, "j", &ls, "timeout", "m", 0, "heap", "e");
    pd_labels_release(&ls);
    pd__events_free(ev);
    if (pd__events_new(&ev))
        return 0;
    if (pd__events_open(ev, path, &err))
        abort();
    size_t n2 = count(ev);
    if (n2 != (n < PD_ADAPTIVE_MAX_EVENTS ? n + 1 : PD_ADAPTIVE_MAX_EVENTS))
        abort();
    pd__events_free(ev);
    char bad[160];
    snprintf(bad, sizeof bad, "%s.corrupt", path);
    unlink(bad);
    return 0;
}
