/* Unit tests of src/ingest/trie.c: Pyroscope's serialized trie (the format
 * of pkg/og/storage/transporttrie) to folded text. The inputs are written
 * node by node here from the format's definition (uvarint name length,
 * name, uvarint value, uvarint child count, pre-order). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/varint.h"
#include "ingest/trie.h"

typedef struct enc {
    uint8_t b[4096];
    size_t n;
} enc;

static void put_uv(enc *e, uint64_t v)
{
    e->n += pd_varint_put(e->b + e->n, v);
}

static void node(enc *e, const char *name, uint64_t value, uint64_t children)
{
    put_uv(e, strlen(name));
    memcpy(e->b + e->n, name, strlen(name));
    e->n += strlen(name);
    put_uv(e, value);
    put_uv(e, children);
}

static int conv(const enc *e, size_t len, pd_buf *out, pd_err *err)
{
    pd_buf_init(out, 1 << 20);
    memset(err, 0, sizeof *err);
    return pd_ingest_trie_to_folded(e->b, len, out, err);
}

/* The keys main;work;hash 71, main;work;sort 20, main;idle 9, with the
 * names split mid-frame as a trie does, and main;work itself a sample. */
static void build(enc *e)
{
    e->n = 0;
    node(e, "", 0, 1);      /* root */
    node(e, "main;", 0, 2); /* "main;" */
    node(e, "work", 5, 1);  /* "main;work" = 5, one child */
    node(e, ";", 0, 2);     /* "main;work;" */
    node(e, "hash", 71, 0); /* leaf */
    node(e, "sort", 20, 0); /* leaf */
    node(e, "idle", 9, 0);  /* "main;idle" */
}

static void test_samples(void **state)
{
    (void)state;
    enc e;
    pd_buf out;
    pd_err err;
    build(&e);
    assert_int_equal(conv(&e, e.n, &out, &err), 0);
    assert_string_equal(out.data,
                        "main;work 5\nmain;work;hash 71\nmain;work;sort 20\nmain;idle 9\n");
    pd_buf_release(&out);
    /* after the root closes, nodes start at the top again (IterateRaw) */
    node(&e, "other;x", 3, 0);
    assert_int_equal(conv(&e, e.n, &out, &err), 0);
    assert_non_null(strstr(out.data, "main;idle 9\nother;x 3\n"));
    pd_buf_release(&out);
    /* an empty input has no samples */
    assert_int_equal(conv(&e, 0, &out, &err), 0);
    assert_int_equal(out.len, 0);
    pd_buf_release(&out);
}

static void test_truncated_everywhere(void **state)
{
    (void)state;
    enc e;
    pd_buf out;
    pd_err err;
    build(&e);
    /* every proper prefix either ends between nodes with open parents or
     * inside a node: always refused, naming the problem */
    for (size_t cut = 1; cut < e.n; cut++) {
        int rc = conv(&e, cut, &out, &err);
        if (rc != PD_EPARSE)
            fail_msg("cut at %zu of %zu: rc %d (%s) out \"%s\"", cut, e.n, rc, err.msg,
                     out.data ? out.data : "");
        assert_non_null(strstr(err.msg, "trie: truncated"));
        pd_buf_release(&out);
    }
}

static void test_hostile(void **state)
{
    (void)state;
    enc e;
    pd_buf out;
    pd_err err;
    /* a name length past the end */
    e.n = 0;
    put_uv(&e, 1000);
    memcpy(e.b + e.n, "abc", 3);
    e.n += 3;
    assert_int_equal(conv(&e, e.n, &out, &err), PD_EPARSE);
    assert_non_null(strstr(err.msg, "byte 0"));
    pd_buf_release(&out);
    /* an 11-byte varint */
    e.n = 0;
    memset(e.b, 0xff, 11);
    e.n = 11;
    assert_int_equal(conv(&e, e.n, &out, &err), PD_EPARSE);
    pd_buf_release(&out);
    /* a value over int64 */
    e.n = 0;
    node(&e, "a", (uint64_t)INT64_MAX + 1, 0);
    assert_int_equal(conv(&e, e.n, &out, &err), PD_EPARSE);
    assert_non_null(strstr(err.msg, "over 2^63-1"));
    pd_buf_release(&out);
    /* a newline in a name would forge a folded line */
    e.n = 0;
    node(&e, "a\nb", 1, 0);
    assert_int_equal(conv(&e, e.n, &out, &err), PD_EPARSE);
    assert_non_null(strstr(err.msg, "newline"));
    pd_buf_release(&out);
    /* nesting deeper than the cap: each node one child */
    uint8_t *deep = malloc(3 * (PD_TRIE_MAX_DEPTH + 2));
    size_t n = 0;
    for (int i = 0; i < PD_TRIE_MAX_DEPTH + 2; i++) {
        deep[n++] = 0; /* name "" */
        deep[n++] = 0; /* value */
        deep[n++] = 1; /* one child */
    }
    pd_buf_init(&out, 1 << 20);
    memset(&err, 0, sizeof err);
    assert_int_equal(pd_ingest_trie_to_folded(deep, n, &out, &err), PD_ETOOBIG);
    assert_non_null(strstr(err.msg, "nesting"));
    pd_buf_release(&out);
    free(deep);
    /* output over the buffer's cap */
    build(&e);
    pd_buf_init(&out, 16);
    memset(&err, 0, sizeof err);
    assert_int_equal(pd_ingest_trie_to_folded(e.b, e.n, &out, &err), PD_ETOOBIG);
    pd_buf_release(&out);
}

/* Pyroscope's tree (format=tree): the root's name is no frame, ';' in a
 * name splits it, an empty name adds no frame, equal siblings add up (in
 * the folded conversion), bytes after the root's subtree are ignored. */
static void test_tree(void **state)
{
    (void)state;
    enc e = {.n = 0};
    node(&e, "root", 3, 2); /* root: its name and value are no sample */
    node(&e, "main", 0, 2);
    node(&e, "a;b", 4, 0);  /* main;a;b 4 */
    node(&e, "", 6, 0);     /* main 6 (empty name: no frame) */
    node(&e, "main", 2, 0); /* main 2 (a sibling of equal name) */
    node(&e, "junk", 9, 0); /* after the tree: ignored */
    pd_buf out;
    pd_err err = {{0}};
    pd_buf_init(&out, 1 << 20);
    assert_int_equal(pd_ingest_tree_to_folded(e.b, e.n, &out, &err), 0);
    assert_non_null(out.data);
    assert_string_equal(out.data, "main;a;b 4\nmain 6\nmain 2\n");
    pd_buf_release(&out);

    /* every truncation of the tree is refused with the byte offset */
    size_t whole = e.n - 7; /* without the junk node */
    for (size_t len = 0; len < whole; len++) {
        pd_buf_init(&out, 1 << 20);
        memset(&err, 0, sizeof err);
        int rc = pd_ingest_tree_to_folded(e.b, len, &out, &err);
        if (rc != PD_EPARSE)
            fail_msg("tree cut at %zu of %zu: rc %d", len, whole, rc);
        assert_non_null(strstr(err.msg, "tree"));
        pd_buf_release(&out);
    }
    /* a NUL or a newline in a name */
    e.n = 0;
    node(&e, "", 0, 1);
    node(&e, "a\nb", 1, 0);
    pd_buf_init(&out, 1 << 20);
    assert_int_equal(pd_ingest_tree_to_folded(e.b, e.n, &out, &err), PD_EPARSE);
    assert_non_null(strstr(err.msg, "newline or NUL"));
    pd_buf_release(&out);
    /* nesting over the cap: a chain of one-child nodes */
    static uint8_t deep[(PD_TRIE_MAX_DEPTH + 2) * 4];
    size_t n = 0;
    for (int i = 0; i < PD_TRIE_MAX_DEPTH + 2; i++) {
        deep[n++] = 1;
        deep[n++] = 'f';
        deep[n++] = 0;
        deep[n++] = 1;
    }
    pd_buf_init(&out, 1 << 20);
    assert_int_equal(pd_ingest_tree_to_folded(deep, n, &out, &err), PD_ETOOBIG);
    pd_buf_release(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_samples),
        cmocka_unit_test(test_truncated_everywhere),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_tree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
