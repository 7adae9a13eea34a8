/*
 * scrape/sd_kubeconfig.c — the part of a kubeconfig file that
 * kubernetes_sd_configs' kubeconfig_file uses: the current context's
 * cluster (server, certificate-authority, insecure-skip-tls-verify), user
 * (token, tokenFile, client-certificate, client-key, username, password)
 * and namespace. Relative file names are taken from the kubeconfig's
 * directory, as kubectl does. Inline *-data (base64 PEM) and exec/auth
 * plugins are refused with an error naming the key.
 */
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "scrape/scrape_int.h"

#define KC_MAX (1u << 20)

static const char *sval(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static yaml_node_t *get(yaml_document_t *d, const yaml_node_t *m, const char *key)
{
    if (!m || m->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        const char *k = sval(yaml_document_get_node(d, p->key));
        if (k && !strcmp(k, key))
            return yaml_document_get_node(d, p->value);
    }
    return NULL;
}

/* The `inner` map of the entry of list `list` named name. */
static yaml_node_t *named(yaml_document_t *d, const yaml_node_t *root, const char *list,
                          const char *name, const char *inner)
{
    yaml_node_t *l = get(d, root, list);
    if (!l || l->type != YAML_SEQUENCE_NODE || !name)
        return NULL;
    for (yaml_node_item_t *i = l->data.sequence.items.start; i < l->data.sequence.items.top; i++) {
        yaml_node_t *e = yaml_document_get_node(d, *i);
        const char *n = sval(get(d, e, "name"));
        if (n && !strcmp(n, name))
            return get(d, e, inner);
    }
    return NULL;
}

static int path_of(const char *dir, const char *p, char **out)
{
    size_t n = strlen(dir) + strlen(p) + 2;
    if (!(*out = malloc(n)))
        return PD_ENOMEM;
    if (p[0] == '/')
        snprintf(*out, n, "%s", p);
    else
        snprintf(*out, n, "%s/%s", dir, p);
    return 0;
}

int pd__k8s_kubeconfig(const char *path, pd_scrape_client *cl, char **server, char **ns,
                       pd_err *err)
{
    memset(cl, 0, sizeof *cl);
    cl->follow_redirects = cl->enable_http2 = true;
    *server = *ns = NULL;
    FILE *f = fopen(path, "re");
    if (!f)
        return pd_err_set(err, PD_EINVAL, "kubeconfig_file %s: cannot open", path);
    char *text = malloc(KC_MAX + 1);
    size_t len = text ? fread(text, 1, KC_MAX + 1, f) : 0;
    fclose(f);
    if (!text)
        return PD_ENOMEM;
    if (len > KC_MAX) {
        free(text);
        return pd_err_set(err, PD_ETOOBIG, "kubeconfig_file %s: over 1 MiB", path);
    }
    char tmp[PATH_MAX], dir[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    snprintf(dir, sizeof dir, "%s", dirname(tmp)); /* dirname works in tmp */
    yaml_parser_t ps;
    yaml_document_t d;
    int rc = 0;
    if (!yaml_parser_initialize(&ps)) {
        free(text);
        return PD_ENOMEM;
    }
    yaml_parser_set_input_string(&ps, (const unsigned char *)text, len);
    if (!yaml_parser_load(&ps, &d)) {
        rc = pd_err_set(err, PD_EPARSE, "kubeconfig_file %s:%zu: %s", path,
                        ps.problem_mark.line + 1, ps.problem ? ps.problem : "syntax error");
        yaml_parser_delete(&ps);
        free(text);
        return rc;
    }
    yaml_parser_delete(&ps);
    free(text);
    yaml_node_t *root = yaml_document_get_root_node(&d);
    const char *cur = sval(get(&d, root, "current-context"));
    yaml_node_t *ctx = named(&d, root, "contexts", cur, "context");
    if (!ctx) {
        rc =
            pd_err_set(err, PD_EINVAL, "kubeconfig_file %s: no context \"%.64s\" (current-context)",
                       path, cur ? cur : "");
        goto out;
    }
    const char *cname = sval(get(&d, ctx, "cluster")), *uname = sval(get(&d, ctx, "user"));
    yaml_node_t *cluster = named(&d, root, "clusters", cname, "cluster");
    yaml_node_t *user = named(&d, root, "users", uname, "user");
    const char *srv = sval(get(&d, cluster, "server"));
    if (!srv || (strncmp(srv, "http://", 7) && strncmp(srv, "https://", 8))) {
        rc = pd_err_set(err, PD_EINVAL,
                        "kubeconfig_file %s: cluster \"%.64s\" has no http(s) server", path,
                        cname ? cname : "");
        goto out;
    }
    static const char *const refused[] = {"certificate-authority-data",
                                          "client-certificate-data",
                                          "client-key-data",
                                          "exec",
                                          "auth-provider",
                                          NULL};
    for (int i = 0; refused[i]; i++)
        if (get(&d, cluster, refused[i]) || get(&d, user, refused[i])) {
            rc = pd_err_set(err, PD_EINVAL,
                            "kubeconfig_file %s: %s is not supported (give files: "
                            "certificate-authority, client-certificate, client-key, tokenFile)",
                            path, refused[i]);
            goto out;
        }
    if (!(*server = strdup(srv))) {
        rc = PD_ENOMEM;
        goto out;
    }
    const char *s;
    if ((s = sval(get(&d, cluster, "certificate-authority"))) &&
        (rc = path_of(dir, s, &cl->ca_file)))
        goto out;
    if ((s = sval(get(&d, cluster, "insecure-skip-tls-verify"))) && !strcmp(s, "true"))
        cl->insecure_skip_verify = true;
    if ((s = sval(get(&d, cluster, "tls-server-name"))) && !(cl->server_name = strdup(s))) {
        rc = PD_ENOMEM;
        goto out;
    }
    if ((s = sval(get(&d, user, "client-certificate"))) && (rc = path_of(dir, s, &cl->cert_file)))
        goto out;
    if ((s = sval(get(&d, user, "client-key"))) && (rc = path_of(dir, s, &cl->key_file)))
        goto out;
    if ((s = sval(get(&d, user, "token")))) {
        if (!(cl->auth_type = strdup("Bearer")) || !(cl->auth_credentials = strdup(s))) {
            rc = PD_ENOMEM;
            goto out;
        }
    } else if ((s = sval(get(&d, user, "tokenFile")))) {
        if (!(cl->auth_type = strdup("Bearer")) ||
            (rc = path_of(dir, s, &cl->auth_credentials_file))) {
            rc = PD_ENOMEM;
            goto out;
        }
    } else if ((s = sval(get(&d, user, "username")))) {
        const char *pw = sval(get(&d, user, "password"));
        if (!(cl->basic_username = strdup(s)) || !(cl->basic_password = strdup(pw ? pw : ""))) {
            rc = PD_ENOMEM;
            goto out;
        }
    }
    if ((s = sval(get(&d, ctx, "namespace"))) && *s && !(*ns = strdup(s)))
        rc = PD_ENOMEM;
out:
    yaml_document_delete(&d);
    if (rc) {
        pd_scrape_client_release(cl);
        free(*server);
        free(*ns);
        *server = *ns = NULL;
    }
    return rc;
}
