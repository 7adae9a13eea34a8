/*
 * base/labels.h — label sets and label matchers, the vocabulary every layer
 * shares (as Prometheus' model/labels).
 *
 * A label set is owned: names and values are heap strings freed by
 * pd_labels_release. Sets are kept sorted by name, names unique. Label names
 * follow Prometheus 3: any UTF-8 text of 1..PD_LABEL_MAX_NAME bytes without
 * control characters (dots, dashes, leading digits: "otel.scope.name",
 * "k8s.pod", "1abc"), stored as given; names outside the classic
 * [a-zA-Z_][a-zA-Z0-9_]* are written quoted in selectors. Names starting
 * "__" are reserved for profd (__name__ is the profile type): the push
 * APIs drop or refuse them. Values are any UTF-8 text.
 */
#ifndef PD_BASE_LABELS_H
#define PD_BASE_LABELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/buf.h"
#include "base/error.h"

typedef struct pd_label {
    char *name;
    char *value;
} pd_label;

typedef struct pd_labels {
    pd_label *v;
    size_t n;
} pd_labels;

/* Caps applied to labels from the network (push, relabel, scrape config). */
#define PD_LABEL_MAX_COUNT 64
#define PD_LABEL_MAX_NAME 256
#define PD_LABEL_MAX_VALUE 4096

/* Length of the UTF-8 sequence at p (1..4) when it is well formed (Go's
 * utf8 rules: no overlong forms, no surrogates, at most U+10FFFF), else 0.
 * p must be NUL-terminated or hold the whole sequence: a truncated one is 0. */
size_t pd_utf8_seq_len(const unsigned char *p);

/* True when name is 1..PD_LABEL_MAX_NAME bytes of well-formed UTF-8 with no
 * control character (bytes < 0x20, 0x7f): Prometheus 3's rule plus profd's
 * length cap. NULL or "" is invalid. */
bool pd_label_name_valid(const char *name);
/* True when value is well-formed UTF-8 (Prometheus' rule for label
 * values; pd_labels_set also refuses control bytes but \n \t \r); NULL is
 * invalid. */
bool pd_label_value_valid(const char *value);
/* True when name matches the classic [a-zA-Z_][a-zA-Z0-9_]* (written
 * unquoted in a selector). */
bool pd_label_name_classic(const char *name);

/* Empty set, no allocation. */
void pd_labels_init(pd_labels *ls);
/* Frees every name and value and the array. */
void pd_labels_release(pd_labels *ls);
/* Sets name=value (copied), replacing an existing value; keeps the set sorted.
 * An empty value removes the label (Prometheus: empty means absent).
 * Returns 0, PD_ENOMEM, or PD_EINVAL (invalid name, or value over
 * PD_LABEL_MAX_VALUE bytes or not valid UTF-8 or holding a control byte
 * other than \n, \t, \r, or more than PD_LABEL_MAX_COUNT labels) with err.
 * A value may hold newlines, tabs and carriage returns (as Prometheus). */
int pd_labels_set(pd_labels *ls, const char *name, const char *value, pd_err *err);
/* Returns the value of name, or NULL when absent. Borrowed from ls. */
const char *pd_labels_get(const pd_labels *ls, const char *name);
/* Deep copy into dst (which is overwritten, not released). 0 or PD_ENOMEM. */
int pd_labels_copy(pd_labels *dst, const pd_labels *src);
/* Orders sets by (name, value) pairs lexicographically; <0, 0, >0. */
int pd_labels_cmp(const pd_labels *a, const pd_labels *b);
/* 64-bit xxh3 hash of the set (stable across runs and machines). */
uint64_t pd_labels_hash(const pd_labels *ls);
/* Appends the set as a selector, e.g. heap{instance="a:1", job="api"}
 * (__name__ outside the braces; values escaped as PromQL strings). */
int pd_labels_format(const pd_labels *ls, pd_buf *out);

/* Matcher kinds, as PromQL: =, !=, =~, !~ */
typedef enum { PD_MATCH_EQ, PD_MATCH_NEQ, PD_MATCH_RE, PD_MATCH_NRE } pd_match_type;

typedef struct pd_matcher {
    pd_match_type type;
    char *name;
    char *value;
    void *re;         /* pcre2_code*, fully anchored, for RE/NRE; NULL otherwise */
    void *match_data; /* pcre2_match_data* (not shared across threads) */
    int limit_hit;    /* a match ran past PD_REGEX_MATCH_LIMIT/DEPTH_LIMIT (see below) */
} pd_matcher;

/* Backtracking limits of every regex matcher (PCRE2 match and depth limits):
 * a catastrophic pattern such as (a+)+b against a long value stops after
 * them instead of running for seconds with the index locked. A value that
 * hits a limit does not match, the matcher is marked (limit_hit) and matches
 * nothing more, and the query fails with pd_matchers_check_limits. */
#define PD_REGEX_MATCH_LIMIT 100000u
#define PD_REGEX_DEPTH_LIMIT 10000u

/* Builds a matcher; copies name and value; compiles RE/NRE values with PCRE2
 * as ^(?:value)$ (Prometheus anchoring). Returns 0, PD_ENOMEM, or PD_EINVAL
 * with err naming the regex and PCRE2's message and offset. */
int pd_matcher_init(pd_matcher *m, pd_match_type type, const char *name, const char *value,
                    pd_err *err);
/* Frees what m holds. */
void pd_matcher_release(pd_matcher *m);
/* True when `value` (NULL or "" for an absent label) satisfies m.
 * Not thread-safe for RE/NRE matchers (uses m->match_data). */
bool pd_matcher_matches(const pd_matcher *m, const char *value);
/* 0, or PD_ETOOBIG with err naming the first matcher whose regex hit a
 * backtracking limit (by pattern and label, and the limit) — a 422. */
int pd_matchers_check_limits(const pd_matcher *ms, size_t n, pd_err *err);
/* The shared pcre2_match_context* carrying those limits (thread-safe, read
 * only; for other regexes over input such as focus=/ignore=). */
void *pd_regex_match_context(void);
/* True when every matcher matches the set (absent labels match as ""). */
bool pd_matchers_match(const pd_matcher *ms, size_t n, const pd_labels *ls);
/* "=", "!=", "=~", "!~" */
const char *pd_match_type_str(pd_match_type t);

#endif
