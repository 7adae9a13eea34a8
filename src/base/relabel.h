/*
 * base/relabel.h — Prometheus' target relabeling (model/relabel), rule by
 * rule with the same semantics, on a pd_labels set.
 *
 * Defaults as Prometheus: action replace, separator ";", regex "(.*)",
 * replacement "$1", modulus 0. The regex is fully anchored: "^(?:RE)$".
 * Regexes are PCRE2 (UTF mode); Prometheus uses Go's RE2. The RE2 subset
 * (classes, repetition, groups, (?P<name>...), (?i) flags) means the same in
 * both; PCRE2-only syntax (backreferences, lookaround) is accepted here and
 * refused by Prometheus, and RE2's \C and \z are not PCRE2's: stay in RE2's
 * syntax for configs shared with Prometheus.
 *
 * Per action, with V = the source labels' values joined by separator:
 *   replace    if the regex matches V: target = expand(target_label),
 *              value = expand(replacement); an empty value deletes target;
 *              an expanded target that is not a valid label name does nothing
 *   keep/drop  drop the set unless / if the regex matches V
 *   keepequal/dropequal  drop the set unless / if V == value of target_label
 *   hashmod    target = (MD5(V) low 8 bytes big-endian) % modulus, decimal
 *   labelmap   every label whose name the regex matches is copied to the
 *              name expand(replacement) (same value)
 *   labeldrop/labelkeep  delete the labels whose name matches / does not match
 *   lowercase/uppercase  target = V in lower / upper case (ASCII and UTF-8
 *              letters of the Latin-1 range are not folded: ASCII only)
 * expand() is Go's Regexp.Expand: $1, ${1}, $name, ${name}; "$$" is "$";
 * "$1x" names group "1x" (empty), as Go; a malformed "$" stays as is.
 */
#ifndef PD_BASE_RELABEL_H
#define PD_BASE_RELABEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/error.h"
#include "base/labels.h"

typedef enum {
    PD_RELABEL_REPLACE,
    PD_RELABEL_KEEP,
    PD_RELABEL_DROP,
    PD_RELABEL_KEEPEQUAL,
    PD_RELABEL_DROPEQUAL,
    PD_RELABEL_HASHMOD,
    PD_RELABEL_LABELMAP,
    PD_RELABEL_LABELDROP,
    PD_RELABEL_LABELKEEP,
    PD_RELABEL_LOWERCASE,
    PD_RELABEL_UPPERCASE,
} pd_relabel_action;

typedef struct pd_relabel_rule {
    char **source_labels;
    size_t n_source;
    char *separator;    /* default ";" */
    char *target_label; /* "" when absent */
    char *regex;        /* the configured text (unanchored), default "(.*)" */
    void *re;           /* pcre2_code of "^(?:regex)$", owned */
    uint64_t modulus;
    char *replacement; /* default "$1" */
    pd_relabel_action action;
} pd_relabel_rule;

/* Action by name, case-insensitive as Prometheus ("Replace" works).
 * Returns 0, or PD_EINVAL for an unknown name. */
int pd_relabel_action_parse(const char *s, pd_relabel_action *out /* OUT */);
const char *pd_relabel_action_name(pd_relabel_action a);

/* Sets r to Prometheus' defaults (allocates the default strings).
 * 0 or PD_ENOMEM. Release with pd_relabel_rule_release. */
int pd_relabel_rule_init(pd_relabel_rule *r);
/* Compiles r->regex (replacing any compiled one). PD_EINVAL with err
 * "invalid regex \"...\": <PCRE2 message> at offset N"; PD_ENOMEM. */
int pd_relabel_rule_compile(pd_relabel_rule *r, pd_err *err);
/* Checks the rule as Prometheus' Config.Validate does (target_label needed
 * by replace/hashmod/lowercase/uppercase/keepequal/dropequal, a non-zero
 * hashmod modulus, labeldrop/labelkeep/keepequal/dropequal without the keys
 * they ignore...). PD_EINVAL with a message naming the problem. */
int pd_relabel_rule_validate(const pd_relabel_rule *r, pd_err *err);
/* Frees what r holds; r is left zeroed. */
void pd_relabel_rule_release(pd_relabel_rule *r);
/* Deep copy (regex recompiled). 0, PD_ENOMEM. dst is overwritten. */
int pd_relabel_rule_copy(pd_relabel_rule *dst, const pd_relabel_rule *src);

/* Applies rules in order to ls (changed in place). *keep is false when a
 * rule dropped the set (ls is then in an unspecified, valid state).
 * Labels a rule would set past PD_LABEL_MAX_COUNT/VALUE are refused:
 * PD_EINVAL with err naming the rule (1-based) and the label. PD_ENOMEM. */
int pd_relabel_process(const pd_relabel_rule *rules, size_t n, pd_labels *ls, bool *keep /* OUT */,
                       pd_err *err);

/* MD5 (RFC 1321) of len bytes. */
void pd_relabel_md5(const void *data, size_t len, uint8_t out[16]);
/* Prometheus' hashmod value of s. modulus > 0. */
uint64_t pd_relabel_hashmod(const char *s, uint64_t modulus);

#endif
