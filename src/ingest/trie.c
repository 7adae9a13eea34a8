/*
 * ingest/trie.c — Pyroscope's serialized trie to folded text (see trie.h).
 */
#include "ingest/trie.h"

#include <stdlib.h>
#include <string.h>

#include "base/varint.h"

typedef struct open_node {
    uint64_t left;     /* children still to read */
    size_t key_before; /* key length before this node's name */
} open_node;

int pd_ingest_trie_to_folded(const uint8_t *data, size_t len, pd_buf *out, pd_err *err)
{
    char *key = NULL;
    open_node *stack = NULL;
    size_t klen = 0, kcap = 0, depth = 0, scap = 0, pos = 0, node = 0;
    int rc = 0;
    while (pos < len) {
        size_t start = pos, n;
        uint64_t nl, value, nch;
        node++;
        if (!(n = pd_varint_get(data + pos, len - pos, &nl)))
            goto truncated;
        pos += n;
        if (nl > len - pos)
            goto truncated;
        if (klen + nl > PD_TRIE_MAX_KEY) {
            rc = pd_err_set(err, PD_ETOOBIG, "trie: node %zu at byte %zu: key over %u bytes", node,
                            start, PD_TRIE_MAX_KEY);
            goto out;
        }
        if (memchr(data + pos, '\n', nl) || memchr(data + pos, '\0', nl)) {
            rc = pd_err_set(err, PD_EPARSE, "trie: node %zu at byte %zu: name holds a newline or NUL",
                            node, start);
            goto out;
        }
        if (klen + nl + 1 > kcap) {
            size_t nc = kcap ? kcap : 256;
            while (nc < klen + nl + 1)
                nc *= 2;
            char *k = realloc(key, nc);
            if (!k) {
                rc = PD_ENOMEM;
                goto out;
            }
            key = k;
            kcap = nc;
        }
        size_t before = klen;
        memcpy(key + klen, data + pos, nl);
        klen += nl;
        pos += nl;
        if (!(n = pd_varint_get(data + pos, len - pos, &value)))
            goto truncated;
        pos += n;
        if (!(n = pd_varint_get(data + pos, len - pos, &nch)))
            goto truncated;
        pos += n;
        if (value > (uint64_t)INT64_MAX) {
            rc = pd_err_set(err, PD_EPARSE, "trie: node %zu at byte %zu: value %llu over 2^63-1",
                            node, start, (unsigned long long)value);
            goto out;
        }
        if (value > 0 && klen > 0) {
            key[klen] = 0;
            if ((rc = pd_buf_printf(out, "%s %llu\n", key, (unsigned long long)value)) < 0) {
                if (rc == PD_ETOOBIG)
                    pd_err_set(err, rc, "trie: the folded text of the samples is over %zu bytes",
                               out->max);
                goto out;
            }
        }
        if (nch > 0) {
            if (depth == PD_TRIE_MAX_DEPTH) {
                rc = pd_err_set(err, PD_ETOOBIG, "trie: node %zu at byte %zu: nesting over %d",
                                node, start, PD_TRIE_MAX_DEPTH);
                goto out;
            }
            if (depth == scap) {
                size_t nc = scap ? scap * 2 : 64;
                open_node *s = realloc(stack, nc * sizeof *s);
                if (!s) {
                    rc = PD_ENOMEM;
                    goto out;
                }
                stack = s;
                scap = nc;
            }
            stack[depth].left = nch;
            stack[depth].key_before = before;
            depth++;
            continue;
        }
        /* a leaf: drop its name, then close every parent it completes */
        klen = before;
        while (depth > 0) {
            if (--stack[depth - 1].left > 0)
                break;
            klen = stack[depth - 1].key_before;
            depth--;
        }
        continue;
    truncated:
        rc = pd_err_set(err, PD_EPARSE,
                        "trie: truncated or malformed varint in node %zu at byte %zu (of %zu)", node,
                        start, len);
        goto out;
    }
    if (depth > 0)
        rc = pd_err_set(err, PD_EPARSE,
                        "trie: truncated: input ends with %zu node(s) missing children", depth);
out:
    free(key);
    free(stack);
    return rc;
}
