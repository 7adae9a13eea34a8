/*
 * scrape/sd_kubernetes.c — kubernetes_sd_configs: list + watch of the API
 * server's pods, services, endpoints, endpointslices (discovery.k8s.io/v1),
 * nodes and ingresses (networking.k8s.io/v1), turned into target groups
 * with the __meta_kubernetes_* labels of Prometheus' discovery/kubernetes
 * (contract in scrape_int.h, behaviour in docs/configuration.md "Kubernetes").
 *
 * One thread per discovery. Per (resource, namespace) a stream: a LIST
 * (GET /api/v1[/namespaces/NS]/RES?labelSelector=&fieldSelector=, or
 * /apis/GROUP/v1/... for a resource of an API group) fills the
 * stream's store (JSON objects by "namespace/name") and gives the
 * resourceVersion; then a WATCH (the same URL with watch=1,
 * resourceVersion, allowWatchBookmarks, timeoutSeconds=300) runs in a curl
 * multi handle, each line of its body an event (ADDED, MODIFIED, DELETED,
 * BOOKMARK, ERROR) applied to the store. A watch that ends cleanly is
 * started again from the last resourceVersion; an ERROR event (410 Gone:
 * the version is too old) or a failed request lists again after 1 s (5 s
 * after a failed list). After events, the groups of the role are rebuilt
 * from the stores and published (a counter tells the sd thread).
 *
 * Caps: a list or watch line over 16 MiB is refused; at most 100,000
 * objects per stream; labels: a label or annotation whose value is over the
 * label caps of base/labels.h, or past 64 labels in a set, is left out of
 * the target (counted in profd_sd_kubernetes_labels_dropped_total).
 */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/time.h"
#include "scrape/scrape_int.h"

#define K8S_MAX_BODY (16u << 20)
#define K8S_MAX_OBJECTS 100000
#define K8S_LIST_TIMEOUT_MS 30000
#define K8S_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

typedef enum {
    RES_PODS,
    RES_SERVICES,
    RES_ENDPOINTS,
    RES_NODES,
    RES_ENDPOINTSLICES,
    RES_INGRESSES,
    RES_N
} k8s_res;
static const char *const res_name[RES_N] = {"pods",  "services",       "endpoints",
                                            "nodes", "endpointslices", "ingresses"};
/* the API path of each resource's group and version */
static const char *const res_api[RES_N] = {"api/v1",
                                           "api/v1",
                                           "api/v1",
                                           "api/v1",
                                           "apis/discovery.k8s.io/v1",
                                           "apis/networking.k8s.io/v1"};
/* the role whose selectors apply to each resource's list and watch */
static const pd_k8s_role res_role[RES_N] = {PD_K8S_POD,  PD_K8S_SERVICE,       PD_K8S_ENDPOINTS,
                                            PD_K8S_NODE, PD_K8S_ENDPOINTSLICE, PD_K8S_INGRESS};

typedef enum { ST_LIST, ST_WATCH, ST_WATCHING, ST_WAIT } stream_state;

typedef struct stream {
    k8s_res res;
    char *ns;         /* NULL: all namespaces (or a cluster-scoped resource) */
    char *selector_q; /* "&labelSelector=..&fieldSelector=.." or "" */
    json_t *store;    /* object: "ns/name" -> object */
    char rv[128];     /* resourceVersion to watch from */
    stream_state state;
    int64_t retry_ms; /* ST_WAIT: monotonic ms of the next list */
    CURL *easy;       /* ST_WATCHING */
    struct curl_slist *hdrs;
    pd_buf line; /* a watch event being received */
    bool relist; /* the watch saw an ERROR event */
    bool bad;    /* the watch body broke a cap */
} stream;

struct pd__k8s {
    const pd_sd_config *cfg;
    pd_scrape_client client; /* resolved: cfg's, kubeconfig's or in-cluster */
    char *server;            /* https://host:port, no trailing slash */
    stream *sv;
    size_t ns;
    CURLM *multi;
    pthread_t thread;
    bool started;
    pthread_mutex_t mu; /* guards stop, groups, version */
    bool stop;
    pd_static_config *groups;
    size_t n_groups;
    uint64_t version;
};

static int64_t mono_ms(void)
{
    return pd_mono_ns() / 1000000;
}

static void count_failure(void)
{
    pd_metrics_add("profd_sd_refresh_failures_total", "mechanism=\"kubernetes\"", 1);
}

/* ---- groups ---- */

typedef struct gl {
    pd_static_config *v;
    size_t n, cap;
} gl;

static void gl_free(pd_static_config *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < v[i].n_targets; k++)
            free(v[i].targets[k]);
        free(v[i].targets);
        pd_labels_release(&v[i].labels);
    }
    free(v);
}

/* Sets a label; a name or value over the caps is left out (counted). */
static int put(pd_labels *ls, const char *name, const char *value)
{
    pd_err e;
    pd_err_clear(&e);
    int rc = pd_labels_set(ls, name, value ? value : "", &e);
    if (rc == PD_ENOMEM)
        return rc;
    if (rc)
        pd_metrics_add("profd_sd_kubernetes_labels_dropped_total", NULL, 1);
    return 0;
}

static const char *jstr(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

/* Prometheus' strutil.SanitizeLabelName: every character outside
 * [a-zA-Z0-9_] becomes '_'. */
static void sanitize(char *s)
{
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            *s = '_';
}

/* __meta_kubernetes_<role>_label_<name>, _labelpresent_, _annotation_,
 * _annotationpresent_ from metadata.labels and metadata.annotations. */
static int put_meta(pd_labels *ls, const char *role, const json_t *obj)
{
    const json_t *md = json_object_get(obj, "metadata");
    static const char *const kinds[2][3] = {{"labels", "label_", "labelpresent_"},
                                            {"annotations", "annotation_", "annotationpresent_"}};
    for (int k = 0; k < 2; k++) {
        const json_t *m = json_object_get(md, kinds[k][0]);
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)m, key, val)
        {
            char n[PD_LABEL_MAX_NAME + 64];
            int rc;
            snprintf(n, sizeof n, "__meta_kubernetes_%s_%s%s", role, kinds[k][1], key);
            sanitize(n + 18);
            if ((rc = put(ls, n, json_string_value(val))))
                return rc;
            snprintf(n, sizeof n, "__meta_kubernetes_%s_%s%s", role, kinds[k][2], key);
            sanitize(n + 18);
            if ((rc = put(ls, n, "true")))
                return rc;
        }
    }
    return 0;
}

/* Appends one group of one target: base labels, then the target's own. */
static int add_target(gl *g, const pd_labels *base, const pd_labels *own, const char *addr)
{
    if (g->n == g->cap) {
        size_t nc = g->cap ? g->cap * 2 : 16;
        pd_static_config *nv = realloc(g->v, nc * sizeof *nv);
        if (!nv)
            return PD_ENOMEM;
        g->v = nv;
        g->cap = nc;
    }
    pd_static_config *sc = &g->v[g->n];
    memset(sc, 0, sizeof *sc);
    if (!(sc->targets = calloc(1, sizeof *sc->targets)) || !(sc->targets[0] = strdup(addr))) {
        free(sc->targets);
        return PD_ENOMEM;
    }
    sc->n_targets = 1;
    g->n++;
    int rc = pd_labels_copy(&sc->labels, base);
    for (size_t i = 0; !rc && own && i < own->n; i++)
        rc = put(&sc->labels, own->v[i].name, own->v[i].value);
    return rc;
}

static void join_host_port(char *out, size_t cap, const char *host, long long port)
{
    if (strchr(host, ':'))
        snprintf(out, cap, "[%s]:%lld", host, port);
    else
        snprintf(out, cap, "%s:%lld", host, port);
}

/* Prometheus' podLabels: name, ip, ready, phase, node, host ip, uid,
 * controller, labels and annotations, and the namespace. */
static int pod_labels(pd_labels *ls, const json_t *pod)
{
    const json_t *md = json_object_get(pod, "metadata"), *st = json_object_get(pod, "status");
    const char *ready = "unknown";
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(st, "conditions"), i, c)
    {
        if (!strcmp(jstr(c, "type"), "Ready")) {
            ready = jstr(c, "status");
            break;
        }
    }
    char rl[16];
    snprintf(rl, sizeof rl, "%s", ready);
    for (char *p = rl; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    int rc;
    if ((rc = put(ls, "__meta_kubernetes_namespace", jstr(md, "namespace"))) ||
        (rc = put(ls, "__meta_kubernetes_pod_name", jstr(md, "name"))) ||
        (rc = put(ls, "__meta_kubernetes_pod_ip", jstr(st, "podIP"))) ||
        (rc = put(ls, "__meta_kubernetes_pod_ready", rl)) ||
        (rc = put(ls, "__meta_kubernetes_pod_phase", jstr(st, "phase"))) ||
        (rc = put(ls, "__meta_kubernetes_pod_node_name",
                  jstr(json_object_get(pod, "spec"), "nodeName"))) ||
        (rc = put(ls, "__meta_kubernetes_pod_host_ip", jstr(st, "hostIP"))) ||
        (rc = put(ls, "__meta_kubernetes_pod_uid", jstr(md, "uid"))))
        return rc;
    json_array_foreach(json_object_get(md, "ownerReferences"), i, c)
    {
        if (!json_is_true(json_object_get(c, "controller")))
            continue;
        if (*jstr(c, "kind") &&
            (rc = put(ls, "__meta_kubernetes_pod_controller_kind", jstr(c, "kind"))))
            return rc;
        if (*jstr(c, "name") &&
            (rc = put(ls, "__meta_kubernetes_pod_controller_name", jstr(c, "name"))))
            return rc;
        break;
    }
    return put_meta(ls, "pod", pod);
}

/* The container labels of one container (and port, NULL: none). */
static int container_labels(pd_labels *ls, const json_t *c, const json_t *port, bool init)
{
    int rc;
    if ((rc = put(ls, "__meta_kubernetes_pod_container_name", jstr(c, "name"))) ||
        (rc = put(ls, "__meta_kubernetes_pod_container_image", jstr(c, "image"))) ||
        (rc = put(ls, "__meta_kubernetes_pod_container_init", init ? "true" : "false")))
        return rc;
    if (!port)
        return 0;
    char pn[24];
    snprintf(pn, sizeof pn, "%lld",
             (long long)json_integer_value(json_object_get(port, "containerPort")));
    const char *proto = jstr(port, "protocol");
    if ((rc = put(ls, "__meta_kubernetes_pod_container_port_name", jstr(port, "name"))) ||
        (rc = put(ls, "__meta_kubernetes_pod_container_port_number", pn)) ||
        (rc = put(ls, "__meta_kubernetes_pod_container_port_protocol", *proto ? proto : "TCP")))
        return rc;
    return 0;
}

/* Calls fn for every container (containers, then initContainers). */
#define FOREACH_CONTAINER(pod, c, init)                                                            \
    for (int pass_ = 0; pass_ < 2; pass_++)                                                        \
        for (size_t ci_ = 0,                                                                       \
                    n_ = json_array_size(json_object_get(                                          \
                        json_object_get(pod, "spec"), pass_ ? "initContainers" : "containers"));   \
             ci_ < n_ &&                                                                           \
             ((c = json_array_get(json_object_get(json_object_get(pod, "spec"),                    \
                                                  pass_ ? "initContainers" : "containers"),        \
                                  ci_)),                                                           \
              (init = pass_ == 1), 1);                                                             \
             ci_++)

static int build_pod(gl *g, const json_t *pod)
{
    const char *ip = jstr(json_object_get(pod, "status"), "podIP");
    if (!*ip)
        return 0; /* starting or evicted: no targets, as Prometheus */
    pd_labels base = {0}, own = {0};
    int rc = pod_labels(&base, pod);
    const json_t *c;
    bool init;
    FOREACH_CONTAINER(pod, c, init)
    {
        if (rc)
            break;
        const json_t *ports = json_object_get(c, "ports");
        if (!json_array_size(ports)) {
            pd_labels_release(&own);
            if (!(rc = container_labels(&own, c, NULL, init)))
                rc = add_target(g, &base, &own, ip);
            continue;
        }
        size_t i;
        json_t *p;
        json_array_foreach(ports, i, p)
        {
            char addr[300];
            join_host_port(addr, sizeof addr, ip,
                           (long long)json_integer_value(json_object_get(p, "containerPort")));
            pd_labels_release(&own);
            if ((rc = container_labels(&own, c, p, init)) ||
                (rc = add_target(g, &base, &own, addr)))
                break;
        }
    }
    pd_labels_release(&base);
    pd_labels_release(&own);
    return rc;
}

/* Prometheus' serviceLabels: namespace, name, labels, annotations. */
static int service_labels(pd_labels *ls, const json_t *svc)
{
    const json_t *md = json_object_get(svc, "metadata");
    int rc;
    if ((rc = put(ls, "__meta_kubernetes_namespace", jstr(md, "namespace"))) ||
        (rc = put(ls, "__meta_kubernetes_service_name", jstr(md, "name"))))
        return rc;
    return put_meta(ls, "service", svc);
}

static int build_service(gl *g, const json_t *svc)
{
    const json_t *md = json_object_get(svc, "metadata"), *spec = json_object_get(svc, "spec");
    pd_labels base = {0}, own = {0};
    int rc = service_labels(&base, svc);
    size_t i;
    json_t *p;
    const char *type = jstr(spec, "type");
    json_array_foreach(json_object_get(spec, "ports"), i, p)
    {
        if (rc)
            break;
        char addr[600], pn[24];
        long long port = (long long)json_integer_value(json_object_get(p, "port"));
        snprintf(addr, sizeof addr, "%s.%s.svc:%lld", jstr(md, "name"), jstr(md, "namespace"),
                 port);
        snprintf(pn, sizeof pn, "%lld", port);
        const char *proto = jstr(p, "protocol");
        pd_labels_release(&own);
        if ((rc = put(&own, "__meta_kubernetes_service_port_name", jstr(p, "name"))) ||
            (rc = put(&own, "__meta_kubernetes_service_port_number", pn)) ||
            (rc = put(&own, "__meta_kubernetes_service_port_protocol", *proto ? proto : "TCP")) ||
            (rc = put(&own, "__meta_kubernetes_service_type", type)))
            break;
        if (!strcmp(type, "ExternalName"))
            rc = put(&own, "__meta_kubernetes_service_external_name", jstr(spec, "externalName"));
        else
            rc = put(&own, "__meta_kubernetes_service_cluster_ip", jstr(spec, "clusterIP"));
        if (!rc)
            rc = add_target(g, &base, &own, addr);
    }
    pd_labels_release(&base);
    pd_labels_release(&own);
    return rc;
}

static int build_node(gl *g, const json_t *node)
{
    const json_t *md = json_object_get(node, "metadata"), *st = json_object_get(node, "status");
    static const char *const prio[] = {"InternalIP",  "InternalDNS",  "ExternalIP",
                                       "ExternalDNS", "LegacyHostIP", "Hostname"};
    const json_t *addrs = json_object_get(st, "addresses");
    const char *addr = NULL;
    for (int p = 0; p < 6 && !addr; p++) {
        size_t i;
        json_t *a;
        json_array_foreach(addrs, i, a)
        {
            if (!strcmp(jstr(a, "type"), prio[p])) {
                addr = jstr(a, "address");
                break;
            }
        }
    }
    if (!addr || !*addr) {
        pd_log_warn("kubernetes_sd: node without an address, skipped", "node=\"%.128s\"",
                    jstr(md, "name"));
        return 0;
    }
    pd_labels base = {0}, own = {0};
    int rc;
    if ((rc = put(&base, "__meta_kubernetes_node_name", jstr(md, "name"))) ||
        (rc = put(&base, "__meta_kubernetes_node_provider_id",
                  jstr(json_object_get(node, "spec"), "providerID"))) ||
        (rc = put_meta(&base, "node", node)))
        goto out;
    size_t i;
    json_t *a;
    json_array_foreach(addrs, i, a)
    {
        char n[PD_LABEL_MAX_NAME];
        snprintf(n, sizeof n, "__meta_kubernetes_node_address_%s", jstr(a, "type"));
        sanitize(n);
        if (!pd_labels_get(&base, n) && (rc = put(&base, n, jstr(a, "address"))))
            goto out;
    }
    long long port = (long long)json_integer_value(json_object_get(
        json_object_get(json_object_get(st, "daemonEndpoints"), "kubeletEndpoint"), "Port"));
    char hp[300];
    join_host_port(hp, sizeof hp, addr, port);
    if (!(rc = put(&own, "instance", jstr(md, "name"))))
        rc = add_target(g, &base, &own, hp);
out:
    pd_labels_release(&base);
    pd_labels_release(&own);
    return rc;
}

/* The container of pod declaring port (number, protocol), or NULL. */
static const json_t *pod_container_of(const json_t *pod, long long port, const char *proto,
                                      const json_t **port_out, bool *init_out)
{
    const json_t *c;
    bool init;
    FOREACH_CONTAINER(pod, c, init)
    {
        size_t i;
        json_t *p;
        json_array_foreach(json_object_get(c, "ports"), i, p)
        {
            const char *pp = jstr(p, "protocol");
            if (json_integer_value(json_object_get(p, "containerPort")) == port &&
                !strcmp(*pp ? pp : "TCP", *proto ? proto : "TCP")) {
                *port_out = p;
                *init_out = init;
                return c;
            }
        }
    }
    return NULL;
}

/* Prometheus' endpoints role: a target per subset address x port, with the
 * endpoints', its service's and (targetRef Pod) its pod's labels; then the
 * container ports of those pods the endpoints do not list. */
static int build_endpoints(gl *g, const json_t *ep, json_t *services, json_t *pods)
{
    const json_t *md = json_object_get(ep, "metadata");
    char key[600];
    snprintf(key, sizeof key, "%s/%s", jstr(md, "namespace"), jstr(md, "name"));
    pd_labels base = {0}, own = {0};
    json_t *seen = json_object(); /* "ns/pod" -> {"port/proto": true} */
    int rc = seen ? 0 : PD_ENOMEM;
    if (!rc && !(rc = put(&base, "__meta_kubernetes_namespace", jstr(md, "namespace"))) &&
        !(rc = put(&base, "__meta_kubernetes_endpoints_name", jstr(md, "name"))))
        rc = put_meta(&base, "endpoints", ep);
    const json_t *svc = json_object_get(services, key);
    if (!rc && svc)
        rc = service_labels(&base, svc);
    size_t si;
    json_t *sub;
    json_array_foreach(json_object_get(ep, "subsets"), si, sub)
    {
        size_t pi;
        json_t *port;
        json_array_foreach(json_object_get(sub, "ports"), pi, port)
        {
            for (int ready = 1; ready >= 0; ready--) {
                size_t ai;
                json_t *a;
                json_array_foreach(json_object_get(sub, ready ? "addresses" : "notReadyAddresses"),
                                   ai, a)
                {
                    if (rc)
                        goto out;
                    long long pn = (long long)json_integer_value(json_object_get(port, "port"));
                    const char *proto = jstr(port, "protocol");
                    char addr[300];
                    join_host_port(addr, sizeof addr, jstr(a, "ip"), pn);
                    pd_labels_release(&own);
                    if ((rc = put(&own, "__meta_kubernetes_endpoint_port_name",
                                  jstr(port, "name"))) ||
                        (rc = put(&own, "__meta_kubernetes_endpoint_port_protocol",
                                  *proto ? proto : "TCP")) ||
                        (rc = put(&own, "__meta_kubernetes_endpoint_ready",
                                  ready ? "true" : "false")))
                        goto out;
                    if (*jstr(a, "hostname") &&
                        (rc =
                             put(&own, "__meta_kubernetes_endpoint_hostname", jstr(a, "hostname"))))
                        goto out;
                    if (*jstr(a, "nodeName") &&
                        (rc = put(&own, "__meta_kubernetes_endpoint_node_name",
                                  jstr(a, "nodeName"))))
                        goto out;
                    const json_t *ref = json_object_get(a, "targetRef");
                    if (ref && ((rc = put(&own, "__meta_kubernetes_endpoint_address_target_kind",
                                          jstr(ref, "kind"))) ||
                                (rc = put(&own, "__meta_kubernetes_endpoint_address_target_name",
                                          jstr(ref, "name")))))
                        goto out;
                    const json_t *pod = NULL;
                    if (ref && !strcmp(jstr(ref, "kind"), "Pod")) {
                        char pk[600];
                        const char *rns = jstr(ref, "namespace");
                        snprintf(pk, sizeof pk, "%s/%s", *rns ? rns : jstr(md, "namespace"),
                                 jstr(ref, "name"));
                        pod = json_object_get(pods, pk);
                        if (pod) {
                            json_t *ps = json_object_get(seen, pk);
                            if (!ps) {
                                ps = json_object();
                                if (!ps || json_object_set_new(seen, pk, ps)) {
                                    rc = PD_ENOMEM;
                                    goto out;
                                }
                            }
                            char pp[64];
                            snprintf(pp, sizeof pp, "%lld/%s", pn, *proto ? proto : "TCP");
                            json_object_set_new(ps, pp, json_true());
                        }
                    }
                    if (pod) {
                        const json_t *cp = NULL;
                        bool init = false;
                        const json_t *c = pod_container_of(pod, pn, proto, &cp, &init);
                        if ((rc = pod_labels(&own, pod)) ||
                            (c && (rc = container_labels(&own, c, cp, init))))
                            goto out;
                    }
                    if ((rc = add_target(g, &base, &own, addr)))
                        goto out;
                }
            }
        }
    }
    /* the ports of those pods' containers not listed */
    const char *pk;
    json_t *ps;
    json_object_foreach(seen, pk, ps)
    {
        const json_t *pod = json_object_get(pods, pk);
        const char *ip = jstr(json_object_get(pod, "status"), "podIP");
        const json_t *c;
        bool init;
        if (!*ip)
            continue;
        FOREACH_CONTAINER(pod, c, init)
        {
            size_t i;
            json_t *p;
            json_array_foreach(json_object_get(c, "ports"), i, p)
            {
                long long pn = (long long)json_integer_value(json_object_get(p, "containerPort"));
                const char *proto = jstr(p, "protocol");
                char pp[64], addr[300];
                snprintf(pp, sizeof pp, "%lld/%s", pn, *proto ? proto : "TCP");
                if (json_object_get(ps, pp))
                    continue;
                join_host_port(addr, sizeof addr, ip, pn);
                pd_labels_release(&own);
                if ((rc = pod_labels(&own, pod)) || (rc = container_labels(&own, c, p, init)) ||
                    (rc = add_target(g, &base, &own, addr)))
                    goto out;
            }
        }
    }
out:
    json_decref(seen);
    pd_labels_release(&base);
    pd_labels_release(&own);
    return rc;
}

static const char *bool_str(const json_t *v)
{
    return json_is_true(v) ? "true" : "false";
}

/* Prometheus' nonPrimaryIPFamilySlice: a dual-stack service's slice of its
 * second address family gives no targets. */
static bool non_primary_family(const json_t *svc, const json_t *eps)
{
    const json_t *spec = json_object_get(svc, "spec");
    const char *policy = jstr(spec, "ipFamilyPolicy");
    const json_t *fams = json_object_get(spec, "ipFamilies");
    if (!svc || (strcmp(policy, "PreferDualStack") && strcmp(policy, "RequireDualStack")) ||
        !json_array_size(fams))
        return false;
    const char *first = json_string_value(json_array_get(fams, 0));
    return first && strcmp(jstr(eps, "addressType"), first) != 0;
}

/* Prometheus' endpointslice role (discovery/kubernetes/endpointslice.go): a
 * target per endpoint address x port with the slice's, its service's
 * (label kubernetes.io/service-name) and (targetRef Pod) its pod's labels;
 * then the container ports of those pods the slice does not list. */
static int build_endpointslice(gl *g, const json_t *eps, json_t *services, json_t *pods)
{
    const json_t *md = json_object_get(eps, "metadata");
    const char *ns = jstr(md, "namespace");
    pd_labels base = {0}, own = {0};
    json_t *seen = json_object(); /* "ns/pod" -> {"port": true} */
    int rc = seen ? 0 : PD_ENOMEM;
    if (!rc && !(rc = put(&base, "__meta_kubernetes_namespace", ns)) &&
        !(rc = put(&base, "__meta_kubernetes_endpointslice_address_type",
                   jstr(eps, "addressType"))) &&
        !(rc = put(&base, "__meta_kubernetes_endpointslice_name", jstr(md, "name"))))
        rc = put_meta(&base, "endpointslice", eps);
    const json_t *svc = NULL;
    const char *svc_name = json_string_value(
        json_object_get(json_object_get(md, "labels"), "kubernetes.io/service-name"));
    if (svc_name) {
        char key[600];
        snprintf(key, sizeof key, "%s/%s", ns, svc_name);
        svc = json_object_get(services, key);
    }
    if (!rc && svc)
        rc = service_labels(&base, svc);
    if (rc || non_primary_family(svc, eps))
        goto built;
    size_t ei, pi, ai;
    json_t *ep, *port, *a;
    json_array_foreach(json_object_get(eps, "endpoints"), ei, ep)
    {
        json_array_foreach(json_object_get(eps, "ports"), pi, port)
        {
            json_array_foreach(json_object_get(ep, "addresses"), ai, a)
            {
                const json_t *pv = json_object_get(port, "port");
                long long pn = (long long)json_integer_value(pv);
                char addr[300], pns[24];
                const char *ip = json_string_value(a) ? json_string_value(a) : "";
                if (json_is_integer(pv))
                    join_host_port(addr, sizeof addr, ip, pn);
                else
                    snprintf(addr, sizeof addr, "%s", ip);
                snprintf(pns, sizeof pns, "%lld", pn);
                pd_labels_release(&own);
                const json_t *cond = json_object_get(ep, "conditions");
                static const char *const conds[3][2] = {
                    {"ready", "__meta_kubernetes_endpointslice_endpoint_conditions_ready"},
                    {"serving", "__meta_kubernetes_endpointslice_endpoint_conditions_serving"},
                    {"terminating",
                     "__meta_kubernetes_endpointslice_endpoint_conditions_terminating"}};
                static const char *const strs[4][2] = {
                    {"hostname", "__meta_kubernetes_endpointslice_endpoint_hostname"},
                    {"nodeName", "__meta_kubernetes_endpointslice_endpoint_node_name"},
                    {"zone", "__meta_kubernetes_endpointslice_endpoint_zone"},
                    {NULL, NULL}};
                if (json_is_string(json_object_get(port, "name")) &&
                    (rc = put(&own, "__meta_kubernetes_endpointslice_port_name",
                              jstr(port, "name"))))
                    goto built;
                if (json_is_string(json_object_get(port, "protocol")) &&
                    (rc = put(&own, "__meta_kubernetes_endpointslice_port_protocol",
                              jstr(port, "protocol"))))
                    goto built;
                if (json_is_integer(pv) &&
                    (rc = put(&own, "__meta_kubernetes_endpointslice_port", pns)))
                    goto built;
                if (json_is_string(json_object_get(port, "appProtocol")) &&
                    (rc = put(&own, "__meta_kubernetes_endpointslice_port_app_protocol",
                              jstr(port, "appProtocol"))))
                    goto built;
                for (int i = 0; i < 3; i++) {
                    const json_t *b = json_object_get(cond, conds[i][0]);
                    if (json_is_boolean(b) && (rc = put(&own, conds[i][1], bool_str(b))))
                        goto built;
                }
                for (int i = 0; strs[i][0]; i++)
                    if (json_is_string(json_object_get(ep, strs[i][0])) &&
                        (rc = put(&own, strs[i][1], jstr(ep, strs[i][0]))))
                        goto built;
                const json_t *ref = json_object_get(ep, "targetRef");
                if (ref && ((rc = put(&own, "__meta_kubernetes_endpointslice_address_target_kind",
                                      jstr(ref, "kind"))) ||
                            (rc = put(&own, "__meta_kubernetes_endpointslice_address_target_name",
                                      jstr(ref, "name")))))
                    goto built;
                const char *tk;
                json_t *tv;
                json_object_foreach(json_object_get(ep, "deprecatedTopology"), tk, tv)
                {
                    char n1[PD_LABEL_MAX_NAME + 64], n2[PD_LABEL_MAX_NAME + 64];
                    snprintf(n1, sizeof n1, "__meta_kubernetes_endpointslice_endpoint_topology_%s",
                             tk);
                    snprintf(n2, sizeof n2,
                             "__meta_kubernetes_endpointslice_endpoint_topology_present_%s", tk);
                    sanitize(n1);
                    sanitize(n2);
                    if ((rc = put(&own, n1, json_string_value(tv))) || (rc = put(&own, n2, "true")))
                        goto built;
                }
                const json_t *pod = NULL;
                char pk[600];
                if (ref && !strcmp(jstr(ref, "kind"), "Pod")) {
                    snprintf(pk, sizeof pk, "%s/%s", jstr(ref, "namespace"), jstr(ref, "name"));
                    pod = json_object_get(pods, pk);
                }
                if (pod) {
                    json_t *ps = json_object_get(seen, pk);
                    if (!ps && (!(ps = json_object()) || json_object_set_new(seen, pk, ps))) {
                        rc = PD_ENOMEM;
                        goto built;
                    }
                    if (json_is_integer(pv))
                        json_object_set_new(ps, pns, json_true());
                    if ((rc = pod_labels(&own, pod)))
                        goto built;
                    const json_t *c;
                    bool init;
                    bool found = false;
                    FOREACH_CONTAINER(pod, c, init)
                    {
                        size_t k;
                        json_t *cp;
                        json_array_foreach(json_object_get(c, "ports"), k, cp)
                        {
                            if (found || !json_is_integer(pv) ||
                                json_integer_value(json_object_get(cp, "containerPort")) != pn)
                                continue;
                            found = true;
                            if ((rc = container_labels(&own, c, cp, init)))
                                goto built;
                        }
                    }
                }
                if ((rc = add_target(g, &base, &own, addr)))
                    goto built;
            }
        }
    }
    /* the ports of those pods' containers not listed */
    const char *pk;
    json_t *ps;
    json_object_foreach(seen, pk, ps)
    {
        const json_t *pod = json_object_get(pods, pk);
        const char *ip = jstr(json_object_get(pod, "status"), "podIP");
        const json_t *c;
        bool init;
        if (!*ip)
            continue;
        FOREACH_CONTAINER(pod, c, init)
        {
            size_t i;
            json_t *p;
            json_array_foreach(json_object_get(c, "ports"), i, p)
            {
                long long pn = (long long)json_integer_value(json_object_get(p, "containerPort"));
                char pns[24], addr[300];
                snprintf(pns, sizeof pns, "%lld", pn);
                if (json_object_get(ps, pns))
                    continue;
                join_host_port(addr, sizeof addr, ip, pn);
                pd_labels_release(&own);
                if ((rc = pod_labels(&own, pod)) || (rc = container_labels(&own, c, p, init)) ||
                    (rc = add_target(g, &base, &own, addr)))
                    goto built;
            }
        }
    }
built:
    json_decref(seen);
    pd_labels_release(&base);
    pd_labels_release(&own);
    return rc;
}

/* Prometheus' matchesHostnamePattern: equal, or "*.rest" matching one
 * first label of host with the same rest. */
static bool host_matches(const char *pattern, const char *host)
{
    if (!strcmp(pattern, host))
        return true;
    if (strncmp(pattern, "*.", 2) != 0)
        return false;
    const char *dot = strchr(host, '.');
    return dot && !strcmp(pattern + 1, dot);
}

/* Prometheus' ingress role (discovery/kubernetes/ingress.go): a target per
 * rule x path, __address__ the rule's host, scheme https when a TLS entry
 * names the host. */
static int build_ingress(gl *g, const json_t *ing)
{
    const json_t *md = json_object_get(ing, "metadata"), *spec = json_object_get(ing, "spec");
    pd_labels base = {0}, own = {0};
    int rc = put(&base, "__meta_kubernetes_namespace", jstr(md, "namespace"));
    if (!rc && json_is_string(json_object_get(spec, "ingressClassName")))
        rc = put(&base, "__meta_kubernetes_ingress_class_name", jstr(spec, "ingressClassName"));
    if (!rc && !(rc = put(&base, "__meta_kubernetes_ingress_name", jstr(md, "name"))))
        rc = put_meta(&base, "ingress", ing);
    size_t ri;
    json_t *rule;
    json_array_foreach(json_object_get(spec, "rules"), ri, rule)
    {
        if (rc)
            break;
        const char *host = jstr(rule, "host"), *scheme = "http";
        size_t ti, hi;
        json_t *tls, *h;
        json_array_foreach(json_object_get(spec, "tls"), ti, tls)
        {
            json_array_foreach(json_object_get(tls, "hosts"), hi, h)
            {
                if (json_is_string(h) && host_matches(json_string_value(h), host))
                    scheme = "https";
            }
        }
        const json_t *http = json_object_get(rule, "http");
        if (!json_is_object(http))
            http = NULL; /* no HTTP rule: one target, path "/" */
        const json_t *paths = json_object_get(http, "paths");
        size_t np = http ? json_array_size(paths) : 0;
        for (size_t pi = 0; pi < (http ? np : 1) && !rc; pi++) {
            const char *path = http ? jstr(json_array_get(paths, pi), "path") : "/";
            pd_labels_release(&own);
            if (!(rc = put(&own, "__meta_kubernetes_ingress_scheme", scheme)) &&
                !(rc = put(&own, "__meta_kubernetes_ingress_host", host)) &&
                !(rc = put(&own, "__meta_kubernetes_ingress_path", *path ? path : "/")))
                rc = add_target(g, &base, &own, host);
        }
    }
    pd_labels_release(&base);
    pd_labels_release(&own);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The keys of obj, sorted (the order of the groups follows them). */
static const char **sorted_keys(json_t *obj, size_t *n)
{
    *n = json_object_size(obj);
    const char **k = calloc(*n ? *n : 1, sizeof *k);
    if (!k)
        return NULL;
    size_t i = 0;
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) k[i++] = key;
    qsort(k, *n, sizeof *k, cmp_str);
    return k;
}

/* Groups of role from the objects of stores[RES_*] (objects by "ns/name"). */
static int build_role(pd_k8s_role role, json_t *const *stores, gl *g)
{
    k8s_res main_res = role == PD_K8S_POD             ? RES_PODS
                       : role == PD_K8S_SERVICE       ? RES_SERVICES
                       : role == PD_K8S_NODE          ? RES_NODES
                       : role == PD_K8S_ENDPOINTSLICE ? RES_ENDPOINTSLICES
                       : role == PD_K8S_INGRESS       ? RES_INGRESSES
                                                      : RES_ENDPOINTS;
    size_t n;
    const char **keys = sorted_keys(stores[main_res], &n);
    if (!keys)
        return PD_ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        const json_t *o = json_object_get(stores[main_res], keys[i]);
        switch (role) {
        case PD_K8S_POD:
            rc = build_pod(g, o);
            break;
        case PD_K8S_SERVICE:
            rc = build_service(g, o);
            break;
        case PD_K8S_NODE:
            rc = build_node(g, o);
            break;
        case PD_K8S_ENDPOINTS:
            rc = build_endpoints(g, o, stores[RES_SERVICES], stores[RES_PODS]);
            break;
        case PD_K8S_ENDPOINTSLICE:
            rc = build_endpointslice(g, o, stores[RES_SERVICES], stores[RES_PODS]);
            break;
        case PD_K8S_INGRESS:
            rc = build_ingress(g, o);
            break;
        }
    }
    free(keys);
    return rc;
}

static int obj_key(const json_t *o, char *out, size_t cap)
{
    const json_t *md = json_object_get(o, "metadata");
    const char *name = jstr(md, "name");
    if (!*name)
        return PD_EINVAL;
    snprintf(out, cap, "%s/%s", jstr(md, "namespace"), name);
    return 0;
}

/* ---- HTTP ---- */

static size_t on_list_body(char *p, size_t size, size_t nmemb, void *ud)
{
    size_t n = size * nmemb;
    return pd_buf_append(ud, p, n) ? 0 : n;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    pd__k8s *k = ud;
    (void)a, (void)b, (void)c, (void)d;
    pthread_mutex_lock(&k->mu);
    bool stop = k->stop;
    pthread_mutex_unlock(&k->mu);
    return stop ? 1 : 0;
}

static void url_of(const pd__k8s *k, const stream *s, bool watch, pd_buf *u)
{
    pd_buf_reset(u);
    if (s->ns)
        pd_buf_printf(u, "%s/%s/namespaces/%s/%s?", k->server, res_api[s->res], s->ns,
                      res_name[s->res]);
    else
        pd_buf_printf(u, "%s/%s/%s?", k->server, res_api[s->res], res_name[s->res]);
    pd_buf_printf(u, "limit=0%s", s->selector_q);
    if (watch) {
        pd_buf_printf(u, "&watch=1&allowWatchBookmarks=true&timeoutSeconds=300&resourceVersion=");
        pd__scrape_put_escaped(u, s->rv);
    }
    pd_buf_append(u, "", 1);
}

/* Options common to list and watch; false with msg set. */
static bool set_common(pd__k8s *k, CURL *e, struct curl_slist **hdrs, char *msg, size_t cap)
{
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "profd/0.1");
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
    if (!pd__client_setopt(&k->client, e, hdrs, msg, cap))
        return false;
    struct curl_slist *l = curl_slist_append(*hdrs, "Accept: application/json");
    if (!l) {
        snprintf(msg, cap, "out of memory");
        return false;
    }
    *hdrs = l;
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, l);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, k);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    return true;
}

/* LIST: replaces s's store and resourceVersion. 0 or -1 (logged, counted). */
static int do_list(pd__k8s *k, stream *s)
{
    pd_buf u, b;
    pd_buf_init(&u, 0);
    pd_buf_init(&b, K8S_MAX_BODY);
    url_of(k, s, false, &u);
    CURL *e = curl_easy_init();
    struct curl_slist *hdrs = NULL;
    char msg[512] = "", errbuf[CURL_ERROR_SIZE] = "";
    int rc = -1;
    if (!e || !u.data) {
        snprintf(msg, sizeof msg, "out of memory");
        goto out;
    }
    curl_easy_setopt(e, CURLOPT_URL, u.data);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_list_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)K8S_LIST_TIMEOUT_MS);
    if (!set_common(k, e, &hdrs, msg, sizeof msg))
        goto out;
    CURLcode cr = curl_easy_perform(e);
    long status = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    if (cr != CURLE_OK) {
        snprintf(msg, sizeof msg, "%s", errbuf[0] ? errbuf : curl_easy_strerror(cr));
        goto out;
    }
    if (status != 200) {
        snprintf(msg, sizeof msg, "server returned HTTP status %ld: %.200s", status,
                 b.data ? b.data : "");
        goto out;
    }
    json_error_t je;
    json_t *root = json_loadb(b.data ? b.data : "", b.len, 0, &je);
    json_t *items = json_object_get(root, "items");
    if (!json_is_object(root) || (!json_is_array(items) && !json_is_null(items) && items)) {
        snprintf(msg, sizeof msg, "not a Kubernetes list: %s", root ? "no items" : je.text);
        json_decref(root);
        goto out;
    }
    if (json_array_size(items) > K8S_MAX_OBJECTS) {
        snprintf(msg, sizeof msg, "%zu objects, over the limit of %d", json_array_size(items),
                 K8S_MAX_OBJECTS);
        json_decref(root);
        goto out;
    }
    json_t *store = json_object();
    size_t i;
    json_t *o;
    json_array_foreach(items, i, o)
    {
        char key[600];
        if (store && !obj_key(o, key, sizeof key))
            json_object_set(store, key, o);
    }
    snprintf(s->rv, sizeof s->rv, "%s", jstr(json_object_get(root, "metadata"), "resourceVersion"));
    json_decref(root);
    if (!store) {
        snprintf(msg, sizeof msg, "out of memory");
        goto out;
    }
    json_decref(s->store);
    s->store = store;
    rc = 0;
out:
    if (rc) {
        count_failure();
        pd_log_warn("kubernetes_sd: list failed, keeping the previous targets",
                    "resource=%s namespace=\"%s\" err=\"%s\"", res_name[s->res], s->ns ? s->ns : "",
                    msg);
    }
    if (e)
        curl_easy_cleanup(e);
    curl_slist_free_all(hdrs);
    pd_buf_release(&u);
    pd_buf_release(&b);
    return rc;
}

/* Applies one watch event line; true when the store changed. */
static bool apply_event(stream *s, const char *line, size_t len)
{
    json_error_t je;
    json_t *ev = json_loadb(line, len, 0, &je);
    bool changed = false;
    const char *type = jstr(ev, "type");
    json_t *o = json_object_get(ev, "object");
    const char *rv = jstr(json_object_get(o, "metadata"), "resourceVersion");
    char key[600];
    if (!ev) {
        pd_log_warn("kubernetes_sd: malformed watch event, listing again", "resource=%s err=\"%s\"",
                    res_name[s->res], je.text);
        s->relist = true;
    } else if (!strcmp(type, "ERROR")) {
        pd_log_info("kubernetes_sd: watch error event, listing again",
                    "resource=%s message=\"%.200s\"", res_name[s->res], jstr(o, "message"));
        s->relist = true;
    } else if (!strcmp(type, "BOOKMARK")) {
        /* only the version moves */
    } else if (obj_key(o, key, sizeof key)) {
        pd_log_warn("kubernetes_sd: watch event without an object name, ignored",
                    "resource=%s type=\"%.32s\"", res_name[s->res], type);
    } else if (!strcmp(type, "ADDED") || !strcmp(type, "MODIFIED")) {
        if (json_object_size(s->store) < K8S_MAX_OBJECTS || json_object_get(s->store, key)) {
            json_object_set(s->store, key, o);
            changed = true;
        }
    } else if (!strcmp(type, "DELETED")) {
        changed = json_object_del(s->store, key) == 0;
    }
    if (ev && !s->relist && *rv)
        snprintf(s->rv, sizeof s->rv, "%s", rv);
    json_decref(ev);
    return changed;
}

static size_t on_watch_body(char *p, size_t size, size_t nmemb, void *ud)
{
    stream *s = ud;
    size_t n = size * nmemb;
    long status = 0;
    curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200)
        return n; /* an error Status, not events: end_watch reports the status */
    if (pd_buf_append(&s->line, p, n)) {
        s->bad = true;
        return 0;
    }
    return n;
}

/* Takes the complete lines out of s->line. */
static bool drain_lines(stream *s)
{
    bool changed = false;
    size_t start = 0;
    for (size_t i = 0; i < s->line.len; i++) {
        if (s->line.data[i] != '\n')
            continue;
        if (i > start && !s->relist)
            changed |= apply_event(s, s->line.data + start, i - start);
        start = i + 1;
    }
    if (start) {
        memmove(s->line.data, s->line.data + start, s->line.len - start);
        s->line.len -= start;
    }
    return changed;
}

static void start_watch(pd__k8s *k, stream *s)
{
    pd_buf u;
    pd_buf_init(&u, 0);
    url_of(k, s, true, &u);
    char msg[512] = "";
    CURL *e = curl_easy_init();
    s->hdrs = NULL;
    s->relist = s->bad = false;
    pd_buf_reset(&s->line);
    if (!e || !u.data || !set_common(k, e, &s->hdrs, msg, sizeof msg)) {
        pd_log_warn("kubernetes_sd: cannot start a watch", "resource=%s err=\"%s\"",
                    res_name[s->res], msg[0] ? msg : "out of memory");
        if (e)
            curl_easy_cleanup(e);
        curl_slist_free_all(s->hdrs);
        s->hdrs = NULL;
        s->state = ST_WAIT;
        s->retry_ms = mono_ms() + 5000;
        pd_buf_release(&u);
        return;
    }
    curl_easy_setopt(e, CURLOPT_URL, u.data);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_watch_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(e, CURLOPT_PRIVATE, s);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 330000L); /* timeoutSeconds + 30 s */
    curl_multi_add_handle(k->multi, e);
    s->easy = e;
    s->state = ST_WATCHING;
    pd_buf_release(&u);
}

static void end_watch(pd__k8s *k, stream *s, CURLcode res)
{
    long status = 0;
    curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
    curl_multi_remove_handle(k->multi, s->easy);
    curl_easy_cleanup(s->easy);
    s->easy = NULL;
    curl_slist_free_all(s->hdrs);
    s->hdrs = NULL;
    if (res == CURLE_OK && status == 200 && !s->relist && !s->bad) {
        s->state = ST_WATCH; /* ended cleanly (timeoutSeconds): watch again */
        return;
    }
    if (!s->relist) {
        count_failure();
        pd_log_warn("kubernetes_sd: watch failed, listing again",
                    "resource=%s status=%ld err=\"%s\"", res_name[s->res], status,
                    s->bad ? "event over 16 MiB" : curl_easy_strerror(res));
    }
    s->state = ST_WAIT;
    s->retry_ms = mono_ms() + 1000;
}

/* ---- thread ---- */

static int publish(pd__k8s *k)
{
    json_t *stores[RES_N];
    int rc = 0;
    for (int r = 0; r < RES_N; r++)
        if (!(stores[r] = json_object()))
            rc = PD_ENOMEM;
    for (size_t i = 0; i < k->ns && !rc; i++)
        if (k->sv[i].store && json_object_update(stores[k->sv[i].res], k->sv[i].store))
            rc = PD_ENOMEM;
    gl g = {0};
    if (!rc)
        rc = build_role(k->cfg->role, stores, &g);
    for (int r = 0; r < RES_N; r++)
        json_decref(stores[r]);
    if (rc) {
        gl_free(g.v, g.n);
        return rc;
    }
    pthread_mutex_lock(&k->mu);
    gl_free(k->groups, k->n_groups);
    k->groups = g.v;
    k->n_groups = g.n;
    k->version++;
    pthread_mutex_unlock(&k->mu);
    return 0;
}

static void *k8s_loop(void *arg)
{
    pd__k8s *k = arg;
    for (;;) {
        pthread_mutex_lock(&k->mu);
        bool stop = k->stop;
        pthread_mutex_unlock(&k->mu);
        if (stop)
            break;
        bool changed = false;
        int64_t now = mono_ms();
        for (size_t i = 0; i < k->ns; i++) {
            stream *s = &k->sv[i];
            if (s->state == ST_WAIT && now >= s->retry_ms)
                s->state = ST_LIST;
            if (s->state == ST_LIST) {
                if (do_list(k, s) == 0) {
                    changed = true;
                    s->state = ST_WATCH;
                } else {
                    s->state = ST_WAIT;
                    s->retry_ms = mono_ms() + 5000;
                }
            }
            if (s->state == ST_WATCH)
                start_watch(k, s);
        }
        int running = 0;
        curl_multi_poll(k->multi, NULL, 0, 200, NULL);
        curl_multi_perform(k->multi, &running);
        for (size_t i = 0; i < k->ns; i++)
            if (k->sv[i].state == ST_WATCHING)
                changed |= drain_lines(&k->sv[i]);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(k->multi, &left))) {
            if (m->msg != CURLMSG_DONE)
                continue;
            char *priv = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
            stream *s = (stream *)priv;
            CURLcode res = m->data.result;
            changed |= drain_lines(s);
            end_watch(k, s, res);
        }
        if (changed && publish(k))
            pd_log_warn("kubernetes_sd: out of memory building the targets", "role=%d",
                        (int)k->cfg->role);
    }
    return NULL;
}

/* ---- configuration: api_server, kubeconfig, in-cluster ---- */

static char *dup_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int resolve(pd__k8s *k, char **own_ns, pd_err *err)
{
    const pd_sd_config *c = k->cfg;
    const char *sa = getenv("PROFD_K8S_SERVICEACCOUNT_DIR");
    if (!sa || !*sa)
        sa = K8S_SA_DIR;
    *own_ns = NULL;
    if (c->kubeconfig_file) {
        char *kns = NULL;
        int rc = pd__k8s_kubeconfig(c->kubeconfig_file, &k->client, &k->server, &kns, err);
        if (rc)
            return rc;
        if (c->own_namespace)
            *own_ns = kns; /* the context's namespace, as Prometheus */
        else
            free(kns);
    } else if (c->api_server) {
        if (pd_scrape_client_copy(&k->client, &c->client) || !(k->server = strdup(c->api_server)))
            return PD_ENOMEM;
    } else {
        const char *host = getenv("KUBERNETES_SERVICE_HOST");
        const char *port = getenv("KUBERNETES_SERVICE_PORT");
        if (!host || !*host || !port || !*port)
            return pd_err_set(err, PD_EINVAL,
                              "kubernetes_sd_configs: no api_server or kubeconfig_file, and not in "
                              "a cluster (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
                              "unset)");
        size_t n = strlen(host) + strlen(port) + 16;
        if (!(k->server = malloc(n)))
            return PD_ENOMEM;
        snprintf(k->server, n, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host, port);
        memset(&k->client, 0, sizeof k->client);
        k->client.follow_redirects = true;
        k->client.enable_http2 = true;
        if (!(k->client.auth_type = strdup("Bearer")) ||
            !(k->client.auth_credentials_file = dup_join(sa, "token")) ||
            !(k->client.ca_file = dup_join(sa, "ca.crt")))
            return PD_ENOMEM;
    }
    size_t sl = strlen(k->server);
    while (sl > 0 && k->server[sl - 1] == '/')
        k->server[--sl] = '\0';
    if (c->own_namespace && !*own_ns) {
        char *p = dup_join(sa, "namespace"), buf[256], msg[300];
        if (!p)
            return PD_ENOMEM;
        bool ok = pd__client_read_secret(p, buf, sizeof buf, msg, sizeof msg);
        free(p);
        if (!ok)
            return pd_err_set(err, PD_EINVAL, "kubernetes_sd_configs: own_namespace: %s", msg);
        if (!(*own_ns = strdup(buf)))
            return PD_ENOMEM;
    }
    return 0;
}

static int add_stream(pd__k8s *k, k8s_res res, const char *ns)
{
    stream *nv = realloc(k->sv, (k->ns + 1) * sizeof *nv);
    if (!nv)
        return PD_ENOMEM;
    k->sv = nv;
    stream *s = &nv[k->ns];
    memset(s, 0, sizeof *s);
    s->res = res;
    pd_buf_init(&s->line, K8S_MAX_BODY);
    if (ns && !(s->ns = strdup(ns)))
        return PD_ENOMEM;
    k->ns++;
    pd_buf q;
    pd_buf_init(&q, 0);
    for (size_t i = 0; i < k->cfg->n_selectors; i++) {
        const pd_k8s_selector *sel = &k->cfg->selectors[i];
        if (sel->role != res_role[res])
            continue;
        if (sel->label) {
            pd_buf_printf(&q, "&labelSelector=");
            pd__scrape_put_escaped(&q, sel->label);
        }
        if (sel->field) {
            pd_buf_printf(&q, "&fieldSelector=");
            pd__scrape_put_escaped(&q, sel->field);
        }
    }
    pd_buf_append(&q, "", 1);
    s->selector_q = q.data ? strdup(q.data) : strdup("");
    pd_buf_release(&q);
    s->state = ST_LIST;
    return s->selector_q ? 0 : PD_ENOMEM;
}

int pd__k8s_start(const pd_sd_config *cfg, pd__k8s **out, pd_err *err)
{
    *out = NULL;
    pd__k8s *k = calloc(1, sizeof *k);
    if (!k)
        return pd_err_set(err, PD_ENOMEM, "out of memory");
    pthread_mutex_init(&k->mu, NULL);
    k->cfg = cfg;
    pd_metrics_describe("profd_sd_kubernetes_labels_dropped_total", PD_METRIC_COUNTER,
                        "Kubernetes labels and annotations left out of discovered targets "
                        "(over the label caps).");
    char *own_ns = NULL;
    int rc = resolve(k, &own_ns, err);
    if (rc)
        goto fail;
    k8s_res res[3];
    size_t nr = 0;
    switch (cfg->role) {
    case PD_K8S_POD:
        res[nr++] = RES_PODS;
        break;
    case PD_K8S_SERVICE:
        res[nr++] = RES_SERVICES;
        break;
    case PD_K8S_NODE:
        res[nr++] = RES_NODES;
        break;
    case PD_K8S_INGRESS:
        res[nr++] = RES_INGRESSES;
        break;
    case PD_K8S_ENDPOINTS:
    case PD_K8S_ENDPOINTSLICE:
        res[nr++] = cfg->role == PD_K8S_ENDPOINTS ? RES_ENDPOINTS : RES_ENDPOINTSLICES;
        res[nr++] = RES_SERVICES;
        res[nr++] = RES_PODS;
        break;
    }
    for (size_t r = 0; r < nr && !rc; r++) {
        if (res[r] == RES_NODES || (!cfg->n_files && !own_ns)) {
            rc = add_stream(k, res[r], NULL);
            continue;
        }
        for (size_t i = 0; i < cfg->n_files && !rc; i++)
            rc = add_stream(k, res[r], cfg->files[i]);
        if (own_ns && !rc) {
            bool dup = false;
            for (size_t i = 0; i < cfg->n_files; i++)
                dup |= !strcmp(cfg->files[i], own_ns);
            if (!dup)
                rc = add_stream(k, res[r], own_ns);
        }
    }
    free(own_ns);
    own_ns = NULL;
    if (rc)
        goto fail;
    if (!(k->multi = curl_multi_init())) {
        rc = PD_ENOMEM;
        goto fail;
    }
    if ((rc = pthread_create(&k->thread, NULL, k8s_loop, k))) {
        rc = pd_err_set(err, -rc, "cannot start the Kubernetes discovery thread: %s", strerror(rc));
        goto fail;
    }
    k->started = true;
    *out = k;
    return 0;
fail:
    free(own_ns);
    if (rc == PD_ENOMEM)
        pd_err_set(err, rc, "out of memory starting Kubernetes discovery");
    pd__k8s_stop(k);
    return rc;
}

int pd__k8s_groups(pd__k8s *k, uint64_t *seen, pd_static_config **v, size_t *n)
{
    *v = NULL;
    *n = 0;
    pthread_mutex_lock(&k->mu);
    int rc = 0;
    if (k->version != *seen) {
        gl g = {0};
        for (size_t i = 0; i < k->n_groups && !rc; i++)
            rc = add_target(&g, &k->groups[i].labels, NULL, k->groups[i].targets[0]);
        if (rc) {
            gl_free(g.v, g.n);
        } else {
            *v = g.v;
            *n = g.n;
            *seen = k->version;
            rc = 1;
        }
    }
    pthread_mutex_unlock(&k->mu);
    return rc;
}

void pd__k8s_stop(pd__k8s *k)
{
    if (!k)
        return;
    if (k->started) {
        pthread_mutex_lock(&k->mu);
        k->stop = true;
        pthread_mutex_unlock(&k->mu);
        curl_multi_wakeup(k->multi);
        pthread_join(k->thread, NULL);
    }
    for (size_t i = 0; i < k->ns; i++) {
        stream *s = &k->sv[i];
        if (s->easy) {
            curl_multi_remove_handle(k->multi, s->easy);
            curl_easy_cleanup(s->easy);
        }
        curl_slist_free_all(s->hdrs);
        json_decref(s->store);
        pd_buf_release(&s->line);
        free(s->ns);
        free(s->selector_q);
    }
    free(k->sv);
    if (k->multi)
        curl_multi_cleanup(k->multi);
    gl_free(k->groups, k->n_groups);
    pd_scrape_client_release(&k->client);
    free(k->server);
    pthread_mutex_destroy(&k->mu);
    free(k);
}
