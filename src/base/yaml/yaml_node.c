/*
 * base/yaml/yaml_node.c — error positions, null and kinds of libyaml nodes
 * (yaml_node.h).
 */
#include "base/yaml/yaml_node.h"

#include <stdio.h>
#include <string.h>

int pd_yaml_vfail(pd_err *err, const char *file, const yaml_node_t *n, int code, const char *fmt,
                  va_list ap)
{
    char msg[500];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (n)
        return pd_err_set(err, code, "%s:%zu:%zu: %s", file, n->start_mark.line + 1,
                          n->start_mark.column + 1, msg);
    return pd_err_set(err, code, "%s: %s", file, msg);
}

int pd_yaml_fail(pd_err *err, const char *file, const yaml_node_t *n, int code, const char *fmt,
                 ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = pd_yaml_vfail(err, file, n, code, fmt, ap);
    va_end(ap);
    return rc;
}

bool pd_yaml_is_null(const yaml_node_t *n)
{
    if (!n)
        return true;
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *v = (const char *)n->data.scalar.value;
    return n->data.scalar.length == 0 || !strcmp(v, "~") || !strcmp(v, "null") ||
           !strcmp(v, "Null") || !strcmp(v, "NULL");
}

const char *pd_yaml_kind(const yaml_node_t *n)
{
    switch (n ? n->type : YAML_NO_NODE) {
    case YAML_SCALAR_NODE:
        return "a scalar";
    case YAML_SEQUENCE_NODE:
        return "a list";
    case YAML_MAPPING_NODE:
        return "a mapping";
    default:
        return "nothing";
    }
}
