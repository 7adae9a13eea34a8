/*
 * fuzz_tree — libFuzzer target for Pyroscope's serialized call tree reader
 * (src/ingest/tree.c) and the folded conversion of its output, the path of
 * POST /ingest?format=tree.
 *
 * Input: the tree bytes. Seed corpus: fuzz/corpus/tree.
 * Checks: no crash or sanitizer report; the reader either fails with a
 * message or writes only lines "STACK VALUE\n" with a non-empty stack free
 * of newlines and a decimal value; that text converts with pd_ingest_folded
 * (or is refused with a message), and a converted profile validates.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/ingest.h"
#include "ingest/trie.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pd_buf out;
    pd_err err;
    memset(&err, 0, sizeof err);
    pd_buf_init(&out, 4u << 20);
    int rc = pd_ingest_tree_to_folded(data, size, &out, &err);
    if (rc < 0) {
        if (rc != PD_ENOMEM && !err.msg[0])
            abort(); /* a refusal must say why */
        pd_buf_release(&out);
        return 0;
    }
    for (size_t i = 0; i < out.len;) {
        const char *l = out.data + i, *nl = memchr(l, '\n', out.len - i);
        if (!nl)
            abort();
        const char *sp = nl;
        while (sp > l && sp[-1] != ' ')
            sp--;
        if (sp == nl || sp - 1 == l)
            abort();
        for (const char *c = sp; c < nl; c++)
            if (*c < '0' || *c > '9')
                abort();
        i = (size_t)(nl - out.data) + 1;
    }
    pd_ingest_opts o;
    memset(&o, 0, sizeof o);
    o.lim.max_input_bytes = 4u << 20;
    o.lim.max_frames = 100000;
    o.lim.max_samples = 100000;
    pd_profile p;
    memset(&err, 0, sizeof err);
    if (pd_ingest_folded(out.data ? out.data : "", out.len, false, &o, &p, &err) == 0) {
        if (pd_profile_validate(&p, &err) != 0)
            abort();
        pd_profile_release(&p);
    }
    pd_buf_release(&out);
    return 0;
}
