/*
 * ingest/trie.h — Pyroscope's "trie" and "tree" upload formats; the trie (POST /ingest?format=trie
 * or Content-Type: binary/octet-stream+trie), as grafana/pyroscope's
 * pkg/og/storage/transporttrie serializes it (Trie.Serialize) and reads it
 * (IterateRaw), turned into folded text for pd_ingest_folded.
 *
 * Format: the trie's nodes in pre-order (a node, then its children's
 * subtrees in order), each node
 *     uvarint name_len | name_len bytes of name | uvarint value | uvarint n_children
 * (uvarint: LEB128, as Go's encoding/binary). A node's key is the
 * concatenation of the names from the root down to it: the keys are the
 * folded stacks ("main;work;hash"), split anywhere between bytes. Every node
 * with value > 0 is one sample "key value" (a node may be a sample and have
 * children). After the root's subtree ends, further nodes start again at the
 * top (IterateRaw reads on to the end of the input). An empty key with a
 * value is skipped (it names no frame).
 */
#ifndef PD_INGEST_TRIE_H
#define PD_INGEST_TRIE_H

#include <stddef.h>
#include <stdint.h>
#include "base/buf.h"
#include "base/error.h"

/* Caps of the trie reader. */
#define PD_TRIE_MAX_KEY (1u << 20) /* bytes of one key (one folded line) */
#define PD_TRIE_MAX_DEPTH 65536    /* nodes open at once */

/* Appends the samples of the trie data[0..len) to out as folded lines
 * "key value\n" (out's own cap bounds the output: PD_ETOOBIG). Returns 0;
 * PD_EPARSE with err naming the byte offset and node when the input is
 * truncated, a varint is malformed, a value is over INT64_MAX or a key
 * holds a newline or NUL; PD_ETOOBIG (a key over PD_TRIE_MAX_KEY, nesting
 * over PD_TRIE_MAX_DEPTH, or out's cap); PD_ENOMEM. */
int pd_ingest_trie_to_folded(const uint8_t *data, size_t len, pd_buf *out, pd_err *err);

/*
 * Pyroscope's "tree" upload format (POST /ingest?format=tree or Content-Type:
 * binary/octet-stream+tree), the call tree of the old Pyroscope agents as
 * grafana/pyroscope's pkg/og/storage/tree serializes it without a
 * dictionary and reads it (DeserializeNoDict, then Iterate and
 * convert.ParseTreeNoDict).
 *
 * Format: the tree's nodes in pre-order, each node
 *     uvarint name_len | name_len bytes of name | uvarint self | uvarint n_children
 * The first node is the root; its name is not part of any stack (Pyroscope's
 * serializer writes "" and its reader cuts the root's two key bytes). Every
 * other node with self > 0 is one sample whose stack is the names from the
 * root's child down to it, joined by ";" (a ";" inside a name therefore
 * splits it into two frames, as in Pyroscope; an empty name adds no frame —
 * Pyroscope stores an empty frame there, the folded format has none).
 * Siblings of equal name add up (Pyroscope inserts them into one node).
 * Reading stops when the root's subtree is complete; bytes after it are
 * ignored, as Pyroscope's reader ignores them.
 */

/* Appends the samples of the tree data[0..len) to out as folded lines
 * "stack self\n" (out's own cap bounds the output: PD_ETOOBIG). Returns 0;
 * PD_EPARSE with err naming the byte offset and node when the input is
 * empty or truncated, a varint is malformed, a value is over INT64_MAX or a
 * name holds a newline or NUL; PD_ETOOBIG (a stack over PD_TRIE_MAX_KEY
 * bytes, nesting over PD_TRIE_MAX_DEPTH, or out's cap); PD_ENOMEM. */
int pd_ingest_tree_to_folded(const uint8_t *data, size_t len, pd_buf *out, pd_err *err);

#endif
