/*
 * rules/rules_int.h — internals of rules/ shared with its unit tests.
 */
#ifndef PD_RULES_RULES_INT_H
#define PD_RULES_RULES_INT_H

#include "rules/rules.h"

/* Called with every sample a rule produces (output labels, time, value),
 * besides the remotes; NULL: none. For tests. r->mu serializes the calls. */
typedef void (*pd__rules_sink_fn)(void *ctx, const pd_labels *labels, int64_t ts_ms, double v);
void pd__rules_set_sink(pd_rules *r, pd__rules_sink_fn fn, void *ctx);

#endif
