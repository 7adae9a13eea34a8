/*
 * ingest/trie.c — Pyroscope's serialized trie (format=trie) and call tree
 * (format=tree) to folded text (see trie.h for both formats and their
 * rules). Both are nodes in pre-order, "uvarint name_len | name | uvarint
 * value | uvarint n_children", read by one walker; they differ in how a
 * node's name joins its parent's (appended as is, or as a ";"-joined frame
 * under a root that names none) and in where reading stops.
 */
#include "ingest/trie.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/varint.h"

/* What sets the two formats apart. */
typedef struct walk_rules {
    const char *format; /* "trie" or "tree", first word of every error */
    const char *key;    /* what a node's path is called in errors: "key", "stack" */
    const char *value;  /* the value's name in errors: "value", "self" */
    bool frames;        /* names are ";"-joined frames under a nameless root
                           (tree); else appended as is (trie) */
    bool one_root;      /* stop when the first node's subtree ends (tree);
                           else read top-level nodes to the end (trie) */
} walk_rules;

static const walk_rules trie_rules = {"trie", "key", "value", false, false};
static const walk_rules tree_rules = {"tree", "stack", "self", true, true};

typedef struct open_node {
    uint64_t left;     /* children still to read */
    size_t key_before; /* key length before this node's name */
} open_node;

/* Appends name[0..nl) to the key (after a ";" when r->frames and the key is
 * not empty), growing it. */
static int key_append(const walk_rules *r, char **key, size_t *klen, size_t *kcap,
                      const uint8_t *name, uint64_t nl, size_t node, size_t start, pd_err *err)
{
    size_t add = nl + (r->frames && *klen ? 1 : 0);
    if (*klen + add > PD_TRIE_MAX_KEY)
        return pd_err_set(err, PD_ETOOBIG, "%s: node %zu at byte %zu: %s over %u bytes", r->format,
                          node, start, r->key, PD_TRIE_MAX_KEY);
    if (*klen + add + 1 > *kcap) {
        size_t nc = *kcap ? *kcap : 256;
        while (nc < *klen + add + 1)
            nc *= 2;
        char *k = realloc(*key, nc);
        if (!k)
            return PD_ENOMEM;
        *key = k;
        *kcap = nc;
    }
    if (add > nl)
        (*key)[(*klen)++] = ';';
    memcpy(*key + *klen, name, nl);
    *klen += nl;
    return 0;
}

static int walk(const walk_rules *r, const uint8_t *data, size_t len, pd_buf *out, pd_err *err)
{
    char *key = NULL;
    open_node *stack = NULL;
    size_t klen = 0, kcap = 0, depth = 0, scap = 0, pos = 0, node = 0;
    int rc = 0;
    if (r->one_root && len == 0)
        return pd_err_set(err, PD_EPARSE, "%s: empty input (no root node)", r->format);
    while (r->one_root || pos < len) {
        size_t start = pos, n;
        uint64_t nl, value, nch;
        node++;
        if (!(n = pd_varint_get(data + pos, len - pos, &nl)))
            goto truncated;
        pos += n;
        if (nl > len - pos)
            goto truncated;
        const uint8_t *name = data + pos;
        pos += nl;
        if (memchr(name, '\n', nl) || memchr(name, '\0', nl)) {
            rc = pd_err_set(err, PD_EPARSE, "%s: node %zu at byte %zu: name holds a newline or NUL",
                            r->format, node, start);
            goto out;
        }
        size_t before = klen;
        /* a tree's root names no frame, nor does an empty name */
        if (!(r->frames && (node == 1 || nl == 0)) &&
            (rc = key_append(r, &key, &klen, &kcap, name, nl, node, start, err)) < 0)
            goto out;
        if (!(n = pd_varint_get(data + pos, len - pos, &value)))
            goto truncated;
        pos += n;
        if (!(n = pd_varint_get(data + pos, len - pos, &nch)))
            goto truncated;
        pos += n;
        if (value > (uint64_t)INT64_MAX) {
            rc = pd_err_set(err, PD_EPARSE, "%s: node %zu at byte %zu: %s %llu over 2^63-1",
                            r->format, node, start, r->value, (unsigned long long)value);
            goto out;
        }
        if (value > 0 && klen > 0) {
            key[klen] = 0;
            if ((rc = pd_buf_printf(out, "%s %llu\n", key, (unsigned long long)value)) < 0) {
                if (rc == PD_ETOOBIG)
                    pd_err_set(err, rc, "%s: the folded text of the samples is over %zu bytes",
                               r->format, out->max);
                goto out;
            }
        }
        if (nch > 0) {
            if (depth == PD_TRIE_MAX_DEPTH) {
                rc = pd_err_set(err, PD_ETOOBIG, "%s: node %zu at byte %zu: nesting over %d",
                                r->format, node, start, PD_TRIE_MAX_DEPTH);
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
        if (depth == 0 && r->one_root)
            break; /* the root's subtree is complete: the rest is ignored */
        continue;
    truncated:
        rc = pd_err_set(err, PD_EPARSE,
                        "%s: truncated or malformed varint in node %zu at byte %zu (of %zu)",
                        r->format, node, start, len);
        goto out;
    }
    if (depth > 0)
        rc = pd_err_set(err, PD_EPARSE,
                        "%s: truncated: input ends with %zu node(s) missing children", r->format,
                        depth);
out:
    free(key);
    free(stack);
    return rc;
}

int pd_ingest_trie_to_folded(const uint8_t *data, size_t len, pd_buf *out, pd_err *err)
{
    return walk(&trie_rules, data, len, out, err);
}

int pd_ingest_tree_to_folded(const uint8_t *data, size_t len, pd_buf *out, pd_err *err)
{
    return walk(&tree_rules, data, len, out, err);
}
