/*
 * scrape/config_int.h — internals of the config reader shared by its files
 * (config.c: top level, global, jobs, pprof endpoints; config_client.c: HTTP
 * client options and relabel_configs; config_yaml.c: YAML helpers).
 *
 * Every helper that fails sets c->err to "FILE:LINE:COL: message" and
 * returns a negative PD_E* code; PD_ENOMEM is returned without a message
 * (pd_config_parse adds one).
 */
#ifndef PD_SCRAPE_CONFIG_INT_H
#define PD_SCRAPE_CONFIG_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <yaml.h>

#include "base/yaml/yaml_node.h"
#include "scrape/config.h"

#define PD_CFG_MAX_VISITS 1000000 /* nodes walked (aliases count each time) */
#define PD_CFG_MAX_WARNINGS 1000  /* warnings kept (more are counted in one line) */

typedef struct pd__cfg_ctx {
    yaml_document_t doc;
    const char *name; /* the file name in messages */
    char *dir;        /* the file's directory ("" for text not from a file), for relative paths */
    pd_err *err;
    size_t visits;
    pd_config *cfg; /* where warnings go */
    size_t dropped_warnings;
} pd__cfg_ctx;

/* A key accepted and ignored with a warning "<key> ignored: <why>". A key
 * starting with '*' matches by suffix ("*_sd_configs"). */
typedef struct pd__cfg_ignored {
    const char *key;
    const char *why;
} pd__cfg_ignored;

int pd__cfg_fail(pd__cfg_ctx *c, const yaml_node_t *n, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Appends a warning "FILE:LINE:COL: message" to c->cfg (capped). 0 or PD_ENOMEM. */
int pd__cfg_warn(pd__cfg_ctx *c, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
yaml_node_t *pd__cfg_node(pd__cfg_ctx *c, int id);
int pd__cfg_visit(pd__cfg_ctx *c, const yaml_node_t *n);
const char *pd__cfg_sval(const yaml_node_t *n);
/* A mapping / list, or null (treated as empty: *is_empty set). */
int pd__cfg_want_map(pd__cfg_ctx *c, const yaml_node_t *n, const char *what, bool *is_empty);
int pd__cfg_want_seq(pd__cfg_ctx *c, const yaml_node_t *n, const char *what, bool *is_empty);
/* A scalar's text, borrowed from the document (NUL bytes refused). */
int pd__cfg_want_str(pd__cfg_ctx *c, const yaml_node_t *n, const char *what, const char **out);
int pd__cfg_want_dup(pd__cfg_ctx *c, const yaml_node_t *n, const char *what, char **out);
int pd__cfg_want_bool(pd__cfg_ctx *c, const yaml_node_t *n, const char *what, bool *out);
int pd__cfg_want_int(pd__cfg_ctx *c, const yaml_node_t *n, const char *what, int64_t min,
                     int64_t max, int64_t *out);
/* A Prometheus duration > 0, in ms. */
int pd__cfg_want_duration(pd__cfg_ctx *c, const yaml_node_t *n, const char *what, int64_t *out);
/* A path, duplicated; relative paths are joined to c->dir. */
int pd__cfg_want_path(pd__cfg_ctx *c, const yaml_node_t *n, const char *what, char **out);
/* Checks a mapping's keys against known (NULL-terminated) and returns the
 * value node of each in vals[] (NULL when absent). Keys in ign (NULL-key
 * terminated, may be NULL) are warned about and skipped; any other key and
 * duplicates are errors. An empty (null) mapping gives all NULLs. */
int pd__cfg_map_keys(pd__cfg_ctx *c, const yaml_node_t *m, const char *what,
                     const char *const *known, yaml_node_t **vals);
int pd__cfg_map_keys_ign(pd__cfg_ctx *c, const yaml_node_t *m, const char *what,
                         const char *const *known, yaml_node_t **vals, const pd__cfg_ignored *ign);
/* For free-form mappings: the key of pair p, a string not repeated earlier. */
int pd__cfg_free_key(pd__cfg_ctx *c, const yaml_node_t *m, yaml_node_pair_t *p, const char *what,
                     const char **key);

/* config_client.c: the HTTP client keys of a job (basic_auth, authorization,
 * bearer_token(_file), tls_config, proxy_url, follow_redirects,
 * enable_http2), given their value nodes (NULL when absent), in this order. */
enum {
    PD_CFG_CL_BASIC_AUTH,
    PD_CFG_CL_AUTHORIZATION,
    PD_CFG_CL_BEARER_TOKEN,
    PD_CFG_CL_BEARER_TOKEN_FILE,
    PD_CFG_CL_TLS_CONFIG,
    PD_CFG_CL_PROXY_URL,
    PD_CFG_CL_FOLLOW_REDIRECTS,
    PD_CFG_CL_ENABLE_HTTP2,
    PD_CFG_CL_OAUTH2,
    PD_CFG_CL_N
};
/* The kubernetes_sd_configs role names, by pd_k8s_role (Prometheus' spelling). */
extern const char *const pd__k8s_role_names[PD_K8S_N_ROLES];
extern const char *const pd__cfg_client_keys[PD_CFG_CL_N + 1];
int pd__cfg_parse_client(pd__cfg_ctx *c, yaml_node_t *const *v, const yaml_node_t *job_node,
                         pd_scrape_client *out);
/* config_client.c: relabel_configs (a list) into job->relabel. */
int pd__cfg_parse_relabel(pd__cfg_ctx *c, const yaml_node_t *n, pd_scrape_job *job);

/* config_client.c: file_sd_configs / http_sd_configs (a list) appended to job->sd. */
int pd__cfg_parse_sd(pd__cfg_ctx *c, const yaml_node_t *n, pd_sd_kind kind, pd_scrape_job *job);

/* config_adaptive.c: a job's adaptive_capture block into job->adaptive. */
int pd__cfg_parse_adaptive(pd__cfg_ctx *c, const yaml_node_t *n, pd_scrape_job *job);

#endif
