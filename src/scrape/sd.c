/*
 * scrape/sd.c — service discovery: file_sd_configs, http_sd_configs,
 * dns_sd_configs, and kubernetes_sd_configs whose watchers
 * (sd_kubernetes.c) run their own threads and are polled here (contract in
 * scrape_int.h).
 *
 * State: the manager's own parse of the configuration (its source text, so
 * that discovery can rebuild the targets later without the caller's copy),
 * and per discovery config its target groups: per file for file SD (a file
 * that fails to read or parse keeps its previous groups, as Prometheus), one
 * list for HTTP SD (a failed refresh keeps the previous list).
 *
 * Thread: wakes on inotify events in the directories of the file patterns
 * and at least every 500 ms. An event counts only when its name matches a
 * file pattern of that directory (fnmatch of the pattern's last segment, as
 * glob sees it): profd's own log, an editor's swap file or any other file
 * beside the SD files wakes nothing. A file SD is re-read when such an event
 * marked it and SD_FILE_MIN_GAP_MS passed since its last read (events in
 * between leave it marked: a burst of writes costs two reads), or when its
 * refresh_interval is due. A file that fails to read or parse is logged and
 * counted once per distinct failure (hash of its bytes, or of the error when
 * unreadable): re-reading the same broken bytes is silent. The
 * HTTP and DNS SDs refresh when due the HTTP and DNS SDs when due (the GET or
 * the lookups run without the lock, their result is dropped if a reload
 * came meanwhile); if a
 * discovery's groups changed (hash of their text), calls the manager's
 * rebuild under sd->mu. The manager takes sd->mu around apply too, so
 * rebuilds and reloads never interleave.
 */
#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <resolv.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <yaml.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/time.h"
#include "scrape/config_int.h"
#include "scrape/scrape_int.h"

#define SD_MAX_BODY (16u << 20) /* a discovery file or HTTP body over 16 MiB is refused */
#define SD_MAX_GROUPS 100000    /* groups per file or response */
#define SD_MAX_WATCHES 1024
#define SD_HTTP_TIMEOUT_MS 10000
#define SD_FILE_MIN_GAP_MS 1000 /* least time between two event-driven reads of a file SD */

typedef struct groups {
    pd_static_config *v;
    size_t n;
} groups;

typedef struct sd_file {
    char *path;
    groups g;
    uint64_t fail_hash; /* of the bytes (or error) of its last failed read; 0: last read was good */
} sd_file;

typedef struct sd_state {
    size_t job; /* index in own->jobs */
    const pd_sd_config *cfg;
    sd_file *files; /* file SD: the files the patterns matched at the last refresh */
    size_t n_files;
    groups g;        /* http SD */
    int64_t next_ms; /* monotonic ms of the next refresh */
    pd__k8s *k8s;    /* kubernetes SD: its watcher (NULL: it could not start) */
    uint64_t k8s_seen;
    uint64_t hash;   /* of the groups' text, to see a change */
    bool dirty;      /* file SD: an event named one of its files since its last read */
    int64_t read_ms; /* file SD: monotonic ms of its last read */
} sd_state;

struct pd__sd {
    pthread_mutex_t mu;
    pd_config *own;
    sd_state *v;
    size_t n;
    uint64_t gen; /* bumped by each set */
    int ifd;      /* inotify, -1 when unavailable */
    int wake;     /* eventfd: stop wakes the thread at once (-1: polls every 500 ms) */
    int wd[SD_MAX_WATCHES];
    char *wdir[SD_MAX_WATCHES]; /* the directory of wd[i] as the patterns spell it */
    size_t n_wd;
    int (*rebuild)(void *arg, pd_err *err);
    void *arg;
    pthread_t thread;
    bool running, stop;
};

static int64_t mono_ms(void)
{
    return pd_mono_ns() / 1000000;
}

static void groups_free(groups *g)
{
    for (size_t i = 0; i < g->n; i++) {
        for (size_t k = 0; k < g->v[i].n_targets; k++)
            free(g->v[i].targets[k]);
        free(g->v[i].targets);
        pd_labels_release(&g->v[i].labels);
    }
    free(g->v);
    g->v = NULL;
    g->n = 0;
}

static void state_free(sd_state *s)
{
    pd__k8s_stop(s->k8s);
    for (size_t i = 0; i < s->n_files; i++) {
        free(s->files[i].path);
        groups_free(&s->files[i].g);
    }
    free(s->files);
    groups_free(&s->g);
    memset(s, 0, sizeof *s);
}

/* ---- parsing: [{"targets": [...], "labels": {...}}, ...] in JSON or YAML ---- */

int pd__sd_parse_groups(const char *text, size_t len, const char *name, const char *meta_name,
                        const char *meta_value, pd_static_config **out, size_t *n_out, pd_err *err)
{
    pd__cfg_ctx c;
    pd_config dummy;
    yaml_parser_t parser;
    groups g = {0};
    int rc = 0;
    *out = NULL;
    *n_out = 0;
    memset(&c, 0, sizeof c);
    pd_config_init(&dummy);
    c.name = name;
    c.err = err;
    c.cfg = &dummy;
    if (len > SD_MAX_BODY)
        return pd_err_set(err, PD_ETOOBIG, "%s: %zu bytes, over the limit of %u", name, len,
                          SD_MAX_BODY);
    if (!yaml_parser_initialize(&parser))
        return PD_ENOMEM;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &c.doc)) {
        rc = pd_err_set(err, PD_EPARSE, "%s:%zu:%zu: %s", name, parser.problem_mark.line + 1,
                        parser.problem_mark.column + 1,
                        parser.problem ? parser.problem : "syntax error");
        yaml_parser_delete(&parser);
        return rc;
    }
    yaml_parser_delete(&parser);
    yaml_node_t *root = yaml_document_get_root_node(&c.doc);
    bool empty = true;
    if (root && (rc = pd__cfg_want_seq(&c, root, "target groups", &empty)))
        goto out;
    if (!empty) {
        size_t cnt = (size_t)(root->data.sequence.items.top - root->data.sequence.items.start);
        if (cnt > SD_MAX_GROUPS) {
            rc = pd__cfg_fail(&c, root, PD_ETOOBIG, "%zu target groups, over the limit of %d", cnt,
                              SD_MAX_GROUPS);
            goto out;
        }
        g.v = calloc(cnt ? cnt : 1, sizeof *g.v);
        if (!g.v) {
            rc = PD_ENOMEM;
            goto out;
        }
        for (size_t i = 0; i < cnt; i++) {
            static const char *const keys[] = {"targets", "labels", NULL};
            yaml_node_t *v[2], *gn = pd__cfg_node(&c, root->data.sequence.items.start[i]);
            pd_static_config *sc = &g.v[g.n++];
            if (!gn) {
                rc = pd__cfg_fail(&c, root, PD_EPARSE, "broken YAML node");
                goto out;
            }
            if ((rc = pd__cfg_map_keys(&c, gn, "target group", keys, v)))
                goto out;
            bool e2 = true;
            if (v[0] && (rc = pd__cfg_want_seq(&c, v[0], "targets", &e2)))
                goto out;
            size_t nt =
                e2 ? 0 : (size_t)(v[0]->data.sequence.items.top - v[0]->data.sequence.items.start);
            if (nt && !(sc->targets = calloc(nt, sizeof *sc->targets))) {
                rc = PD_ENOMEM;
                goto out;
            }
            for (size_t k = 0; k < nt; k++) {
                yaml_node_t *tn = pd__cfg_node(&c, v[0]->data.sequence.items.start[k]);
                const char *ts;
                if (!tn) {
                    rc = pd__cfg_fail(&c, v[0], PD_EPARSE, "broken YAML node");
                    goto out;
                }
                if ((rc = pd__cfg_want_str(&c, tn, "target", &ts)))
                    goto out;
                if (!*ts || strlen(ts) > 1024) {
                    rc = pd__cfg_fail(&c, tn, PD_EINVAL, "invalid target \"%.128s\"", ts);
                    goto out;
                }
                if (!(sc->targets[sc->n_targets++] = strdup(ts))) {
                    rc = PD_ENOMEM;
                    goto out;
                }
            }
            if (v[1]) {
                bool e3;
                if ((rc = pd__cfg_want_map(&c, v[1], "labels", &e3)))
                    goto out;
                for (yaml_node_pair_t *p = e3 ? NULL : v[1]->data.mapping.pairs.start;
                     p && p < v[1]->data.mapping.pairs.top; p++) {
                    const char *ln, *lv;
                    if ((rc = pd__cfg_free_key(&c, v[1], p, "labels", &ln)) ||
                        (rc = pd__cfg_want_str(&c, pd__cfg_node(&c, p->value), "label value", &lv)))
                        goto out;
                    pd_err e;
                    pd_err_clear(&e);
                    /* Prometheus 3's UTF-8 names, the one rule of static labels
                     * and relabeling too (pd_label_name_valid) */
                    if (!pd_label_name_valid(ln)) {
                        rc = pd__cfg_fail(&c, pd__cfg_node(&c, p->key), PD_EINVAL,
                                          "\"%.64s\" is not a valid label name (1..%d bytes of "
                                          "UTF-8 without control characters)",
                                          ln, PD_LABEL_MAX_NAME);
                        goto out;
                    }
                    if ((rc = pd_labels_set(&sc->labels, ln, lv, &e))) {
                        if (rc != PD_ENOMEM)
                            rc = pd__cfg_fail(&c, pd__cfg_node(&c, p->key), rc, "%s", e.msg);
                        goto out;
                    }
                }
            }
            if ((rc = pd_labels_set(&sc->labels, meta_name, meta_value, err)))
                goto out;
        }
    }
out:
    yaml_document_delete(&c.doc);
    pd_config_release(&dummy);
    if (rc) {
        if (rc == PD_ENOMEM)
            pd_err_set(err, rc, "%s: out of memory", name);
        groups_free(&g);
        return rc;
    }
    *out = g.v;
    *n_out = g.n;
    return 0;
}

/* ---- refresh ---- */

static int read_file(const char *path, pd_buf *b, pd_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return pd_err_set(err, -errno, "cannot open %s: %s", path, strerror(errno));
    char chunk[65536];
    int rc = 0;
    for (;;) {
        ssize_t r = read(fd, chunk, sizeof chunk);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = pd_err_set(err, -errno, "cannot read %s: %s", path, strerror(errno));
            break;
        }
        if (r == 0)
            break;
        if ((rc = pd_buf_append(b, chunk, (size_t)r))) {
            rc = pd_err_set(err, rc, "%s: over the limit of %u bytes", path, SD_MAX_BODY);
            break;
        }
    }
    close(fd);
    return rc;
}

static void count_failure(const char *mechanism)
{
    char l[64];
    snprintf(l, sizeof l, "mechanism=\"%s\"", mechanism);
    pd_metrics_add("profd_sd_refresh_failures_total", l, 1);
}

static uint64_t groups_hash(uint64_t h, const groups *g)
{
    for (size_t i = 0; i < g->n; i++) {
        for (size_t k = 0; k < g->v[i].n_targets; k++)
            h = XXH3_64bits_withSeed(g->v[i].targets[k], strlen(g->v[i].targets[k]) + 1, h);
        h = XXH3_64bits_withSeed(&i, sizeof i, h ^ pd_labels_hash(&g->v[i].labels));
    }
    return h;
}

static uint64_t state_hash(const sd_state *s)
{
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < s->n_files; i++) {
        h = XXH3_64bits_withSeed(s->files[i].path, strlen(s->files[i].path), h);
        h = groups_hash(h, &s->files[i].g);
    }
    return groups_hash(h, &s->g);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Re-reads every file the patterns match. 0 or PD_ENOMEM. */
static int refresh_files(sd_state *s)
{
    char **paths = NULL;
    size_t np = 0;
    int rc = 0;
    for (size_t i = 0; i < s->cfg->n_files && !rc; i++) {
        glob_t gl;
        int gr = glob(s->cfg->files[i], GLOB_NOSORT, NULL, &gl);
        if (gr == 0) {
            char **v = realloc(paths, (np + gl.gl_pathc) * sizeof *v);
            if (!v) {
                rc = PD_ENOMEM;
            } else {
                paths = v;
                for (size_t k = 0; k < gl.gl_pathc && !rc; k++)
                    if (!(paths[np] = strdup(gl.gl_pathv[k])))
                        rc = PD_ENOMEM;
                    else
                        np++;
            }
        }
        if (gr == 0 || gr == GLOB_NOMATCH)
            globfree(&gl);
    }
    if (np)
        qsort(paths, np, sizeof *paths, cmp_str);
    sd_file *nf = rc ? NULL : calloc(np ? np : 1, sizeof *nf);
    if (!nf && !rc)
        rc = PD_ENOMEM;
    size_t nn = 0;
    for (size_t i = 0; i < np && !rc; i++) {
        if (nn && !strcmp(paths[i], nf[nn - 1].path))
            continue; /* matched by two patterns */
        sd_file *f = &nf[nn++];
        f->path = paths[i];
        paths[i] = NULL;
        pd_buf b;
        pd_buf_init(&b, SD_MAX_BODY);
        pd_err e;
        pd_err_clear(&e);
        int r = read_file(f->path, &b, &e);
        if (!r)
            r = pd__sd_parse_groups(b.data ? b.data : "", b.len, f->path, "__meta_filepath",
                                    f->path, &f->g.v, &f->g.n, &e);
        uint64_t fh = 0;
        if (r && r != PD_ENOMEM) { /* what failed: these bytes, or this error */
            fh = b.len ? XXH3_64bits(b.data, b.len) : XXH3_64bits(e.msg, strlen(e.msg));
            fh |= 1; /* never 0 */
        }
        pd_buf_release(&b);
        if (r == PD_ENOMEM) {
            rc = r;
        } else if (r) { /* keep what this file gave before */
            bool again = false;
            for (size_t k = 0; k < s->n_files; k++)
                if (!strcmp(s->files[k].path, f->path)) {
                    again = s->files[k].fail_hash == fh;
                    f->g = s->files[k].g;
                    s->files[k].g.v = NULL;
                    s->files[k].g.n = 0;
                }
            f->fail_hash = fh;
            if (!again) { /* once per distinct failure, not once per read */
                count_failure("file");
                pd_log_warn("file_sd: keeping the previous targets of a file", "err=\"%s\"", e.msg);
            }
        }
    }
    for (size_t i = 0; i < np; i++)
        free(paths[i]);
    free(paths);
    if (rc) {
        for (size_t i = 0; i < nn; i++) {
            free(nf[i].path);
            groups_free(&nf[i].g);
        }
        free(nf);
        return rc;
    }
    for (size_t i = 0; i < s->n_files; i++) {
        free(s->files[i].path);
        groups_free(&s->files[i].g);
    }
    free(s->files);
    s->files = nf;
    s->n_files = nn;
    return 0;
}

static size_t on_http_body(char *p, size_t size, size_t nmemb, void *ud)
{
    size_t n = size * nmemb;
    return pd_buf_append(ud, p, n) ? 0 : n;
}

/* GETs url; on success parses the groups into out. Failures are logged and counted. */
static int fetch_http(const char *url, const pd_scrape_client *cl, groups *out)
{
    struct curl_slist *hdrs = NULL;
    char cmsg[512] = "";
    pd_buf b;
    pd_buf_init(&b, SD_MAX_BODY);
    CURL *e = curl_easy_init();
    char errbuf[CURL_ERROR_SIZE] = "";
    int rc = PD_EPARSE;
    if (!e)
        goto out;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_http_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)SD_HTTP_TIMEOUT_MS);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROXY, "");
    curl_easy_setopt(e, CURLOPT_USERAGENT, "profd/0.1");
    curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)SD_MAX_BODY);
    bool client_ok = pd__client_setopt(cl, e, &hdrs, cmsg, sizeof cmsg);
    if (hdrs)
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
    CURLcode cr = client_ok ? curl_easy_perform(e) : CURLE_OK;
    long status = 0;
    char *ctype = NULL;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(e, CURLINFO_CONTENT_TYPE, &ctype);
    pd_err err;
    pd_err_clear(&err);
    if (!client_ok) {
        pd_err_set(&err, PD_EPARSE, "%s", cmsg);
    } else if (cr != CURLE_OK) {
        pd_err_set(&err, PD_EPARSE, "%s", errbuf[0] ? errbuf : curl_easy_strerror(cr));
    } else if (status != 200) {
        pd_err_set(&err, PD_EPARSE, "server returned HTTP status %ld", status);
    } else if (!ctype || strncmp(ctype, "application/json", 16) != 0) {
        pd_err_set(&err, PD_EPARSE, "unsupported content type \"%s\"", ctype ? ctype : "");
    } else {
        rc = pd__sd_parse_groups(b.data ? b.data : "", b.len, url, "__meta_url", url, &out->v,
                                 &out->n, &err);
    }
    if (rc) {
        count_failure("http");
        pd_log_warn("http_sd: refresh failed, keeping the previous targets",
                    "url=\"%s\" err=\"%s\"", url, err.msg);
    }
out:
    if (e)
        curl_easy_cleanup(e);
    curl_slist_free_all(hdrs);
    pd_buf_release(&b);
    return rc;
}

/* ---- DNS ---- */

/* What a DNS refresh needs, copied under the lock. */
typedef struct dns_req {
    char **names;
    size_t n;
    int type, port;
} dns_req;

static void dns_req_free(dns_req *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->names[i]);
    free(r->names);
    memset(r, 0, sizeof *r);
}

static int dns_req_copy(dns_req *r, const pd_sd_config *c)
{
    memset(r, 0, sizeof *r);
    r->type = c->dns_type;
    r->port = c->port;
    r->names = calloc(c->n_files ? c->n_files : 1, sizeof *r->names);
    if (!r->names)
        return PD_ENOMEM;
    for (size_t i = 0; i < c->n_files; i++) {
        if (!(r->names[i] = strdup(c->files[i]))) {
            dns_req_free(r);
            return PD_ENOMEM;
        }
        r->n++;
    }
    return 0;
}

/* One group per record: __address__ target, __meta_dns_name and, for SRV,
 * __meta_dns_srv_record_target/_port (Prometheus' discovery/dns). */
static int add_record(groups *g, const char *addr, const char *name, const char *srv_target,
                      const char *srv_port)
{
    pd_static_config *v = realloc(g->v, (g->n + 1) * sizeof *v);
    if (!v)
        return PD_ENOMEM;
    g->v = v;
    pd_static_config *sc = &v[g->n++];
    memset(sc, 0, sizeof *sc);
    sc->targets = calloc(1, sizeof *sc->targets);
    if (!sc->targets || !(sc->targets[0] = strdup(addr)))
        return PD_ENOMEM;
    sc->n_targets = 1;
    if (pd_labels_set(&sc->labels, "__meta_dns_name", name, NULL) ||
        (srv_target &&
         pd_labels_set(&sc->labels, "__meta_dns_srv_record_target", srv_target, NULL)) ||
        (srv_port && pd_labels_set(&sc->labels, "__meta_dns_srv_record_port", srv_port, NULL)))
        return PD_ENOMEM;
    return 0;
}

/* Resolves every name of r. The resolver is the system's (/etc/resolv.conf)
 * unless PROFD_DNS_SERVER=IPv4:PORT names one (tests run dnsmasq on
 * loopback). A name that does not exist gives no target (as Prometheus); a
 * name whose lookup fails otherwise is flagged in failed[] (its previous
 * targets are kept by the caller, as Prometheus keeps that name's group).
 * Returns PD_ENOMEM or a resolver setup failure (everything kept). */
static int fetch_dns(const dns_req *r, groups *out, bool *failed)
{
    struct __res_state rs;
    memset(&rs, 0, sizeof rs);
    char msg[300] = "";
    int rc = 0;
    if (res_ninit(&rs) != 0) {
        snprintf(msg, sizeof msg, "cannot initialise the resolver");
        rc = PD_EPARSE;
        goto out;
    }
    const char *srv = getenv("PROFD_DNS_SERVER");
    if (srv && *srv) {
        char host[64];
        const char *colon = strrchr(srv, ':');
        struct in_addr a;
        size_t hl = colon ? (size_t)(colon - srv) : strlen(srv);
        if (hl >= sizeof host) {
            snprintf(msg, sizeof msg, "PROFD_DNS_SERVER \"%.64s\": want IPv4:PORT", srv);
            rc = PD_EINVAL;
            goto out;
        }
        memcpy(host, srv, hl);
        host[hl] = '\0';
        int port = colon ? atoi(colon + 1) : 53;
        if (inet_pton(AF_INET, host, &a) != 1 || port <= 0 || port > 65535) {
            snprintf(msg, sizeof msg, "PROFD_DNS_SERVER \"%.64s\": want IPv4:PORT", srv);
            rc = PD_EINVAL;
            goto out;
        }
        rs.nscount = 1;
        rs.nsaddr_list[0].sin_family = AF_INET;
        rs.nsaddr_list[0].sin_addr = a;
        rs.nsaddr_list[0].sin_port = htons((uint16_t)port);
    }
    rs.retrans = 2;
    rs.retry = 2;
    for (size_t i = 0; i < r->n && !rc; i++) {
        unsigned char ans[65536];
        int len = res_nquery(&rs, r->names[i], ns_c_in, r->type, ans, sizeof ans);
        if (len < 0) {
            if (rs.res_h_errno == HOST_NOT_FOUND || rs.res_h_errno == NO_DATA)
                continue; /* no such name or no records: no targets */
            failed[i] = true;
            count_failure("dns");
            pd_log_warn("dns_sd: lookup failed, keeping the name's previous targets",
                        "name=\"%s\" err=\"%s\"", r->names[i], hstrerror(rs.res_h_errno));
            continue;
        }
        ns_msg m;
        if (ns_initparse(ans, len, &m) < 0) {
            failed[i] = true;
            count_failure("dns");
            pd_log_warn("dns_sd: malformed answer, keeping the name's previous targets",
                        "name=\"%s\"", r->names[i]);
            continue;
        }
        for (int k = 0; k < ns_msg_count(m, ns_s_an) && !rc; k++) {
            ns_rr rr;
            if (ns_parserr(&m, ns_s_an, k, &rr) < 0 || (int)ns_rr_type(rr) != r->type)
                continue;
            const unsigned char *rd = ns_rr_rdata(rr);
            char addr[NS_MAXDNAME + 16];
            if (r->type == ns_t_srv) {
                char target[NS_MAXDNAME];
                if (ns_rr_rdlen(rr) < 7 ||
                    dn_expand(ns_msg_base(m), ns_msg_end(m), rd + 6, target, sizeof target) < 0)
                    continue;
                unsigned port = (unsigned)rd[4] << 8 | rd[5];
                char ps[8];
                snprintf(ps, sizeof ps, "%u", port);
                size_t tl = strlen(target);
                while (tl > 0 && target[tl - 1] == '.')
                    target[--tl] = '\0';
                if (strchr(target, ':'))
                    snprintf(addr, sizeof addr, "[%s]:%u", target, port);
                else
                    snprintf(addr, sizeof addr, "%s:%u", target, port);
                rc = add_record(out, addr, r->names[i], target, ps);
            } else {
                char ip[INET6_ADDRSTRLEN];
                if ((r->type == ns_t_a && ns_rr_rdlen(rr) != 4) ||
                    (r->type == ns_t_aaaa && ns_rr_rdlen(rr) != 16) ||
                    !inet_ntop(r->type == ns_t_a ? AF_INET : AF_INET6, rd, ip, sizeof ip))
                    continue;
                snprintf(addr, sizeof addr, r->type == ns_t_a ? "%s:%d" : "[%s]:%d", ip, r->port);
                rc = add_record(out, addr, r->names[i], NULL, NULL);
            }
        }
    }
out:
    res_nclose(&rs);
    if (rc) {
        groups_free(out);
        count_failure("dns");
        pd_log_warn("dns_sd: refresh failed, keeping the previous targets", "err=\"%s\"",
                    msg[0] ? msg : "out of memory");
    }
    return rc;
}

/* ---- inotify ---- */

/* The directory of a pattern as the watch names it ("." when it has none). */
static void pattern_dir(const char *pattern, char *dir, size_t cap)
{
    snprintf(dir, cap, "%s", pattern);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, cap, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
}

/* Whether the file `name` in directory `dir` is one that pattern matches. */
static bool pattern_matches(const char *pattern, const char *dir, const char *name)
{
    char pdir[PATH_MAX];
    pattern_dir(pattern, pdir, sizeof pdir);
    if (strcmp(pdir, dir) != 0)
        return false;
    const char *slash = strrchr(pattern, '/');
    const char *base = slash ? slash + 1 : pattern;
    return fnmatch(base, name, FNM_PERIOD) == 0;
}

static void watch_dirs(pd__sd *sd)
{
    if (sd->ifd < 0)
        return;
    for (size_t i = 0; i < sd->n_wd; i++) {
        inotify_rm_watch(sd->ifd, sd->wd[i]);
        free(sd->wdir[i]);
    }
    sd->n_wd = 0;
    for (size_t i = 0; i < sd->n; i++) {
        const pd_sd_config *c = sd->v[i].cfg;
        for (size_t k = 0; k < c->n_files && sd->n_wd < SD_MAX_WATCHES; k++) {
            char dir[PATH_MAX];
            pattern_dir(c->files[k], dir, sizeof dir);
            bool have = false;
            for (size_t w = 0; w < sd->n_wd && !have; w++)
                have = !strcmp(sd->wdir[w], dir);
            if (have)
                continue;
            int wd = inotify_add_watch(sd->ifd, dir,
                                       IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE |
                                           IN_MOVED_TO | IN_MOVED_FROM);
            if (wd < 0) {
                pd_log_warn("file_sd: cannot watch a directory (refresh_interval still applies)",
                            "dir=\"%s\" err=\"%s\"", dir, strerror(errno));
                continue;
            }
            char *d = strdup(dir);
            if (!d) {
                inotify_rm_watch(sd->ifd, wd);
                continue;
            }
            sd->wd[sd->n_wd] = wd;
            sd->wdir[sd->n_wd++] = d;
        }
    }
}

/* Marks the file SDs a batch of inotify events names (a queue overflow marks
 * them all). Called under sd->mu. */
static void mark_events(pd__sd *sd, const char *buf, size_t len)
{
    for (size_t off = 0; off + sizeof(struct inotify_event) <= len;) {
        const struct inotify_event *ev = (const void *)(buf + off);
        off += sizeof *ev + ev->len;
        if (ev->mask & IN_Q_OVERFLOW) {
            for (size_t i = 0; i < sd->n; i++)
                sd->v[i].dirty = sd->v[i].cfg->kind == PD_SD_FILE;
            continue;
        }
        if (!ev->len || !ev->name[0])
            continue;
        const char *dir = NULL;
        for (size_t w = 0; w < sd->n_wd && !dir; w++)
            if (sd->wd[w] == ev->wd)
                dir = sd->wdir[w];
        if (!dir)
            continue;
        for (size_t i = 0; i < sd->n; i++) {
            sd_state *s = &sd->v[i];
            if (s->cfg->kind != PD_SD_FILE || s->dirty)
                continue;
            for (size_t k = 0; k < s->cfg->n_files && !s->dirty; k++)
                s->dirty = pattern_matches(s->cfg->files[k], dir, ev->name);
        }
    }
}

/* ---- API ---- */

int pd__sd_new(int (*rebuild)(void *arg, pd_err *err), void *arg, pd__sd **out)
{
    pd__sd *sd = calloc(1, sizeof *sd);
    if (!sd)
        return PD_ENOMEM;
    pthread_mutex_init(&sd->mu, NULL);
    sd->rebuild = rebuild;
    sd->arg = arg;
    sd->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    sd->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pd_metrics_describe("profd_sd_refresh_failures_total", PD_METRIC_COUNTER,
                        "Service discovery refreshes that failed (unreadable or malformed file, "
                        "HTTP error, DNS failure), by mechanism; the previous targets are kept.");
    *out = sd;
    return 0;
}

void pd__sd_lock(pd__sd *sd)
{
    pthread_mutex_lock(&sd->mu);
}

void pd__sd_unlock(pd__sd *sd)
{
    pthread_mutex_unlock(&sd->mu);
}

int pd__sd_set(pd__sd *sd, const pd_config *cfg, const pd_config **use, pd_err *err)
{
    pd_config *own = NULL;
    sd_state *nv = NULL;
    size_t nn = 0;
    int rc = 0;
    *use = cfg;
    if (cfg->source) {
        own = malloc(sizeof *own);
        if (!own)
            return PD_ENOMEM;
        if ((rc = pd_config_parse(cfg->source, cfg->source_len, cfg->source_name, own, err))) {
            free(own);
            return rc;
        }
        size_t cnt = 0;
        for (size_t j = 0; j < own->n_jobs; j++)
            cnt += own->jobs[j].n_sd;
        nv = calloc(cnt ? cnt : 1, sizeof *nv);
        if (!nv) {
            rc = PD_ENOMEM;
            goto fail;
        }
        int64_t now = mono_ms();
        for (size_t j = 0; j < own->n_jobs; j++)
            for (size_t k = 0; k < own->jobs[j].n_sd; k++) {
                sd_state *s = &nv[nn++];
                s->job = j;
                s->cfg = &own->jobs[j].sd[k];
                s->next_ms = now; /* HTTP, DNS: at once, in the thread */
                if (s->cfg->kind == PD_SD_FILE) {
                    /* a reload re-reads: the same broken file is logged again */
                    if ((rc = refresh_files(s)))
                        goto fail;
                    s->next_ms = now + s->cfg->refresh_ms;
                    s->read_ms = now;
                }
                if (s->cfg->kind == PD_SD_K8S) {
                    pd_err ke;
                    pd_err_clear(&ke);
                    int kr = pd__k8s_start(s->cfg, &s->k8s, &ke);
                    if (kr == PD_ENOMEM) {
                        rc = kr;
                        goto fail;
                    }
                    if (kr) { /* as Prometheus: logged, the job gets no targets from it */
                        count_failure("kubernetes");
                        pd_log_warn("kubernetes_sd: cannot start, no targets from it",
                                    "job=\"%s\" err=\"%s\"", own->jobs[j].job_name, ke.msg);
                    }
                }
                s->hash = state_hash(s);
            }
    }
    for (size_t i = 0; i < sd->n; i++)
        state_free(&sd->v[i]);
    free(sd->v);
    if (sd->own) {
        pd_config_release(sd->own);
        free(sd->own);
    }
    sd->own = own;
    sd->v = nv;
    sd->n = nn;
    sd->gen++;
    watch_dirs(sd);
    if (own)
        *use = own;
    return 0;
fail:
    for (size_t i = 0; i < nn; i++)
        state_free(&nv[i]);
    free(nv);
    if (own) {
        pd_config_release(own);
        free(own);
    }
    if (rc == PD_ENOMEM)
        pd_err_set(err, rc, "out of memory reading service discovery");
    return rc;
}

size_t pd__sd_group_count(const pd__sd *sd, size_t job)
{
    size_t n = 0;
    for (size_t i = 0; i < sd->n; i++) {
        if (sd->v[i].job != job)
            continue;
        for (size_t f = 0; f < sd->v[i].n_files; f++)
            n += sd->v[i].files[f].g.n;
        n += sd->v[i].g.n;
    }
    return n;
}

const pd_static_config *pd__sd_group(const pd__sd *sd, size_t job, size_t idx)
{
    for (size_t i = 0; i < sd->n; i++) {
        if (sd->v[i].job != job)
            continue;
        for (size_t f = 0; f < sd->v[i].n_files; f++) {
            if (idx < sd->v[i].files[f].g.n)
                return &sd->v[i].files[f].g.v[idx];
            idx -= sd->v[i].files[f].g.n;
        }
        if (idx < sd->v[i].g.n)
            return &sd->v[i].g.v[idx];
        idx -= sd->v[i].g.n;
    }
    return NULL;
}

static void *sd_loop(void *arg)
{
    pd__sd *sd = arg;
    char evbuf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        struct pollfd p[2] = {{.fd = sd->ifd, .events = POLLIN},
                              {.fd = sd->wake, .events = POLLIN}};
        bool readable = poll(p, 2, 500) > 0 && sd->ifd >= 0 && (p[0].revents & POLLIN);
        pthread_mutex_lock(&sd->mu);
        if (sd->stop) {
            pthread_mutex_unlock(&sd->mu);
            break;
        }
        for (ssize_t r; readable && (r = read(sd->ifd, evbuf, sizeof evbuf)) > 0;)
            mark_events(sd, evbuf, (size_t)r);
        int64_t now = mono_ms();
        bool changed = false;
        /* HTTP SDs due: fetched without the lock */
        for (size_t i = 0; i < sd->n; i++) {
            sd_state *s = &sd->v[i];
            if (s->cfg->kind == PD_SD_FILE || s->cfg->kind == PD_SD_K8S || now < s->next_ms)
                continue;
            s->next_ms = now + s->cfg->refresh_ms;
            char *url = NULL;
            dns_req dr = {0};
            uint64_t gen = sd->gen;
            pd_scrape_client cl = {0};
            if (s->cfg->kind == PD_SD_HTTP
                    ? (!(url = strdup(s->cfg->url)) || pd_scrape_client_copy(&cl, &s->cfg->client))
                    : dns_req_copy(&dr, s->cfg) != 0) {
                free(url);
                continue;
            }
            pthread_mutex_unlock(&sd->mu);
            groups g = {0};
            bool *failed = dr.n ? calloc(dr.n, sizeof *failed) : NULL;
            int rc = url      ? fetch_http(url, &cl, &g)
                     : failed ? fetch_dns(&dr, &g, failed)
                              : PD_ENOMEM;
            free(url);
            pd_scrape_client_release(&cl);
            pthread_mutex_lock(&sd->mu);
            if (sd->stop || gen != sd->gen) { /* a reload came: its state is new */
                groups_free(&g);
                free(failed);
                dns_req_free(&dr);
                break;
            }
            for (size_t k = 0; !rc && failed && k < dr.n; k++) {
                if (!failed[k])
                    continue; /* move that name's previous groups over */
                for (size_t o = 0; o < s->g.n && !rc; o++) {
                    const char *nm = pd_labels_get(&s->g.v[o].labels, "__meta_dns_name");
                    if (!nm || strcmp(nm, dr.names[k]) != 0 || !s->g.v[o].n_targets)
                        continue;
                    pd_static_config *nv = realloc(g.v, (g.n + 1) * sizeof *nv);
                    if (!nv) {
                        rc = PD_ENOMEM;
                        break;
                    }
                    g.v = nv;
                    g.v[g.n++] = s->g.v[o];
                    memset(&s->g.v[o], 0, sizeof s->g.v[o]);
                }
            }
            free(failed);
            dns_req_free(&dr);
            if (!rc) {
                groups_free(&s->g);
                s->g = g;
            } else {
                groups_free(&g);
            }
        }
        for (size_t i = 0; i < sd->n; i++) {
            sd_state *s = &sd->v[i];
            if (s->cfg->kind == PD_SD_K8S && s->k8s) {
                pd_static_config *kv;
                size_t kn;
                int kr = pd__k8s_groups(s->k8s, &s->k8s_seen, &kv, &kn);
                if (kr == 1) {
                    groups_free(&s->g);
                    s->g.v = kv;
                    s->g.n = kn;
                } else if (kr) {
                    pd_log_warn("kubernetes_sd: out of memory taking the targets", "job=%zu",
                                s->job);
                }
            }
            if (s->cfg->kind == PD_SD_FILE &&
                ((s->dirty && now - s->read_ms >= SD_FILE_MIN_GAP_MS) || now >= s->next_ms)) {
                s->next_ms = now + s->cfg->refresh_ms;
                s->read_ms = now;
                s->dirty = false;
                if (refresh_files(s))
                    pd_log_warn("file_sd: out of memory refreshing", "job=%zu", s->job);
            }
            uint64_t h = state_hash(s);
            if (h != s->hash) {
                s->hash = h;
                changed = true;
            }
        }
        if (changed && !sd->stop) {
            pd_err e;
            pd_err_clear(&e);
            if (sd->rebuild(sd->arg, &e))
                pd_log_warn("service discovery: applying the new targets failed", "err=\"%s\"",
                            e.msg);
        }
        pthread_mutex_unlock(&sd->mu);
    }
    return NULL;
}

int pd__sd_start(pd__sd *sd, pd_err *err)
{
    if (sd->running)
        return 0;
    sd->stop = false;
    int rc = pthread_create(&sd->thread, NULL, sd_loop, sd);
    if (rc)
        return pd_err_set(err, -rc, "cannot start the service discovery thread: %s", strerror(rc));
    sd->running = true;
    return 0;
}

void pd__sd_stop(pd__sd *sd)
{
    if (!sd || !sd->running)
        return;
    pthread_mutex_lock(&sd->mu);
    sd->stop = true;
    pthread_mutex_unlock(&sd->mu);
    if (sd->wake >= 0) {
        uint64_t one = 1;
        ssize_t w = write(sd->wake, &one, sizeof one);
        (void)w;
    }
    pthread_join(sd->thread, NULL);
    sd->running = false;
}

void pd__sd_free(pd__sd *sd)
{
    if (!sd)
        return;
    pd__sd_stop(sd);
    for (size_t i = 0; i < sd->n; i++)
        state_free(&sd->v[i]);
    free(sd->v);
    if (sd->own) {
        pd_config_release(sd->own);
        free(sd->own);
    }
    for (size_t i = 0; i < sd->n_wd; i++)
        free(sd->wdir[i]);
    if (sd->ifd >= 0)
        close(sd->ifd);
    if (sd->wake >= 0)
        close(sd->wake);
    pthread_mutex_destroy(&sd->mu);
    free(sd);
}

const pd_config *pd__sd_config(const pd__sd *sd)
{
    return sd->own;
}
