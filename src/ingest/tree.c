/*
 * ingest/tree.c — Pyroscope's serialized call tree (format=tree) to folded
 * text (see trie.h for the format and the rules).
 */
#include "ingest/trie.h"

#include <stdlib.h>
#include <string.h>

#include "base/varint.h"

typedef struct open_node {
    uint64_t left;     /* children still to read */
    size_t key_before; /* stack length before this node's name */
} open_node;

int pd_ingest_tree_to_folded(const uint8_t *data, size_t len, pd_buf *out, pd_err *err)
{
    char *key = NULL;
    open_node *stack = NULL;
    size_t klen = 0, kcap = 0, depth = 0, scap = 0, pos = 0, node = 0;
    int rc = 0;
    if (len == 0)
        return pd_err_set(err, PD_EPARSE, "tree: empty input (no root node)");
    for (;;) {
        size_t start = pos, n;
        uint64_t nl, self, nch;
        node++;
        if (!(n = pd_varint_get(data + pos, len - pos, &nl)))
            goto truncated;
        pos += n;
        if (nl > len - pos)
            goto truncated;
        const uint8_t *name = data + pos;
        pos += nl;
        if (memchr(name, '\n', nl) || memchr(name, '\0', nl)) {
            rc = pd_err_set(err, PD_EPARSE, "tree: node %zu at byte %zu: name holds a newline or NUL",
                            node, start);
            goto out;
        }
        size_t before = klen;
        if (node > 1 && nl > 0) { /* the root's name is no frame */
            size_t add = nl + (klen ? 1 : 0);
            if (klen + add > PD_TRIE_MAX_KEY) {
                rc = pd_err_set(err, PD_ETOOBIG, "tree: node %zu at byte %zu: stack over %u bytes",
                                node, start, PD_TRIE_MAX_KEY);
                goto out;
            }
            if (klen + add + 1 > kcap) {
                size_t nc = kcap ? kcap : 256;
                while (nc < klen + add + 1)
                    nc *= 2;
                char *k = realloc(key, nc);
                if (!k) {
                    rc = PD_ENOMEM;
                    goto out;
                }
                key = k;
                kcap = nc;
            }
            if (klen)
                key[klen++] = ';';
            memcpy(key + klen, name, nl);
            klen += nl;
        }
        if (!(n = pd_varint_get(data + pos, len - pos, &self)))
            goto truncated;
        pos += n;
        if (!(n = pd_varint_get(data + pos, len - pos, &nch)))
            goto truncated;
        pos += n;
        if (self > (uint64_t)INT64_MAX) {
            rc = pd_err_set(err, PD_EPARSE, "tree: node %zu at byte %zu: self %llu over 2^63-1",
                            node, start, (unsigned long long)self);
            goto out;
        }
        if (self > 0 && klen > 0) {
            key[klen] = 0;
            if ((rc = pd_buf_printf(out, "%s %llu\n", key, (unsigned long long)self)) < 0) {
                if (rc == PD_ETOOBIG)
                    pd_err_set(err, rc, "tree: the folded text of the samples is over %zu bytes",
                               out->max);
                goto out;
            }
        }
        if (nch > 0) {
            if (depth == PD_TRIE_MAX_DEPTH) {
                rc = pd_err_set(err, PD_ETOOBIG, "tree: node %zu at byte %zu: nesting over %d",
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
        if (depth == 0)
            break; /* the root's subtree is complete: the rest is ignored */
        continue;
    truncated:
        rc = pd_err_set(err, PD_EPARSE,
                        "tree: truncated or malformed varint in node %zu at byte %zu (of %zu)", node,
                        start, len);
        goto out;
    }
out:
    free(key);
    free(stack);
    return rc;
}
