/*
 * base/yaml/yaml_node.h — what every YAML reader of profd does alike on
 * libyaml's document nodes (yaml.h, libyaml 0.2): name a node's position in
 * errors, tell YAML's null and a node's kind. The readers (scrape/config,
 * rules/rules_config, http/webconfig, agent/ebpf/config) keep their own
 * schemas; only these rules are shared, so an error reads the same
 * ("FILE:LINE:COL: message") whichever file has it.
 *
 * A separate library (pd_base_yaml) rather than part of pd_base: pd_base is
 * also compiled into libprofd-agent, which must not depend on libyaml.
 */
#ifndef PD_BASE_YAML_NODE_H
#define PD_BASE_YAML_NODE_H

#include <stdarg.h>
#include <stdbool.h>
#include <yaml.h>

#include "base/error.h"

/*
 * Sets *err to code with the message "FILE:LINE:COL: <fmt...>" (LINE and
 * COL 1-based, from n's start mark), or "FILE: <fmt...>" when n is NULL
 * (the whole file). The formatted part is cut at 500 bytes. Returns code
 * (a negative PD_E* value, as pd_err_set), so a reader can
 * `return pd_yaml_fail(...)`. err may be NULL (then only code is returned).
 */
int pd_yaml_fail(pd_err *err, const char *file, const yaml_node_t *n, int code, const char *fmt,
                 ...) __attribute__((format(printf, 5, 6)));

/* pd_yaml_fail with a va_list (for a reader's own printf-like wrapper). */
int pd_yaml_vfail(pd_err *err, const char *file, const yaml_node_t *n, int code, const char *fmt,
                  va_list ap) __attribute__((format(printf, 5, 0)));

/*
 * true if n is YAML's null: no node (NULL), or a plain (unquoted) scalar
 * that is empty, "~", "null", "Null" or "NULL" (YAML 1.2 core schema, as
 * Go's gopkg.in/yaml.v2 reads Prometheus' files). A quoted "null" is the
 * string null.
 */
bool pd_yaml_is_null(const yaml_node_t *n);

/* "a scalar", "a list", "a mapping" or "nothing": for "expected X, got Y". */
const char *pd_yaml_kind(const yaml_node_t *n);

#endif
