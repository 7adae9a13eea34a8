/*
 * fuzz_config — libFuzzer target for the YAML configuration parser
 * pd_config_parse (src/scrape/config.c).
 *
 * Input: any bytes, as the text of a configuration file (with its length:
 * the parser does not need a NUL). Seed corpus: fuzz/corpus/config (the
 * configurations of the tests, examples and docs).
 * Properties checked besides the sanitizers: an error return sets a message
 * and leaves the config empty; a success gives what config.h promises:
 * intervals and timeouts > 0 with timeout <= interval (global and per job),
 * non-empty unique job names, scheme http or https, non-empty valid targets
 * lists, the seven default endpoints plus custom ones with valid names,
 * paths starting with "/", seconds >= 0 and endpoint timeouts >= the job's.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "scrape/config.h"

static void die(const char *what, size_t job)
{
    fprintf(stderr, "config accepted but %s (job %zu)\n", what, job);
    abort();
}

static void check(const pd_config *c)
{
    /* (timeout vs interval depends on the dialect: Parca wants timeout >
       interval, Prometheus <=; config.c checks it per dialect) */
    if (c->scrape_interval_ms <= 0 || c->scrape_timeout_ms <= 0)
        die("global interval/timeout out of range", 0);
    if (c->n_jobs && !c->jobs)
        die("jobs missing", 0);
    for (size_t i = 0; i < c->n_jobs; i++) {
        const pd_scrape_job *j = &c->jobs[i];
        if (!j->job_name || !j->job_name[0])
            die("empty job name", i);
        for (size_t k = 0; k < i; k++)
            if (!strcmp(c->jobs[k].job_name, j->job_name))
                die("duplicate job name", i);
        if (j->interval_ms <= 0 || j->timeout_ms <= 0)
            die("job interval/timeout out of range", i);
        if (!j->scheme || (strcmp(j->scheme, "http") && strcmp(j->scheme, "https")))
            die("bad scheme", i);
        for (size_t q = 0; q < j->n_query; q++)
            if (!j->query[q].name || !j->query[q].name[0] || !j->query[q].value)
                die("bad query parameter", i);
        for (size_t s = 0; s < j->n_static_configs; s++) {
            const pd_static_config *sc = &j->static_configs[s];
            if (sc->n_targets == 0)
                die("static config without targets", i);
            for (size_t t = 0; t < sc->n_targets; t++)
                if (!sc->targets[t] || !sc->targets[t][0] || strchr(sc->targets[t], '/'))
                    die("bad target", i);
            /* Prometheus 3's UTF-8 names (issue 32), "__" names allowed (they
             * feed relabeling), __name__ is not; values well-formed UTF-8 */
            for (size_t l = 0; l < sc->labels.n; l++)
                if (!pd_label_name_valid(sc->labels.v[l].name) || !sc->labels.v[l].value[0] ||
                    !pd_label_value_valid(sc->labels.v[l].value) ||
                    !strcmp(sc->labels.v[l].name, "__name__"))
                    die("bad static label", i);
        }
        if (j->n_endpoints < 5) /* profd's and conprof's 7, Parca's 5 (config.c) */
            die("default endpoints missing", i);
        for (size_t e = 0; e < j->n_endpoints; e++) {
            const pd_pprof_endpoint *ep = &j->endpoints[e];
            if (!pd_label_name_valid(ep->name))
                die("endpoint name is not a valid label name", i);
            if (!ep->path || ep->path[0] != '/')
                die("endpoint path does not start with /", i);
            if (ep->seconds < 0 || ep->timeout_ms < j->timeout_ms)
                die("endpoint seconds/timeout out of range", i);
            for (size_t f = 0; f < e; f++)
                if (!strcmp(j->endpoints[f].name, ep->name))
                    die("duplicate endpoint name", i);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pd_config c;
    pd_err err = {{0}};
    int rc = pd_config_parse((const char *)data, size, "fuzz.yml", &c, &err);
    if (rc != 0) {
        if (!err.msg[0] || c.n_jobs || c.jobs) {
            fprintf(stderr, "error %d without message or with jobs left: %s\n", rc, err.msg);
            abort();
        }
        return 0;
    }
    check(&c);
    pd_config_release(&c);
    if (c.n_jobs || c.jobs)
        abort();
    return 0;
}
