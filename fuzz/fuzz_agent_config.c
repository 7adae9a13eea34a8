/*
 * fuzz_agent_config — libFuzzer target for profd-agent's --config.file
 * reader (src/agent/ebpf/config.c, pd_ebpf_config_parse: YAML with
 * relabel_configs).
 *
 * Input: any bytes, given as the file's text. Seed corpus:
 * fuzz/corpus/agent_config. Properties checked besides the sanitizers:
 *   - a refused input sets an error message naming "agent.yml";
 *   - an accepted one has at most 10000 rules of at most 64 source labels,
 *     each compiled, and relabeling a process's label set with them
 *     returns 0, PD_EINVAL (a label too long or too many) or PD_ENOMEM.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agent/ebpf/ebpf_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pd_ebpf_config c;
    pd_err err;
    pd_err_clear(&err);
    int rc = pd_ebpf_config_parse((const char *)data, size, "agent.yml", &c, &err);
    if (rc) {
        if (rc != PD_ENOMEM && !strstr(err.msg, "agent.yml"))
            abort();
        if (c.n_relabel || c.relabel)
            abort(); /* released on error */
        return 0;
    }
    if (c.n_relabel > 10000)
        abort();
    for (size_t i = 0; i < c.n_relabel; i++)
        if (!c.relabel[i].re || c.relabel[i].n_source > 64)
            abort();
    pd_labels ls;
    pd_labels_init(&ls);
    pd_err e;
    if (pd_labels_set(&ls, "service_name", "app", &e) == 0 &&
        pd_labels_set(&ls, "__meta_process_exe", "/usr/bin/app", &e) == 0 &&
        pd_labels_set(&ls, "__meta_process_commandline", "/usr/bin/app --flag", &e) == 0) {
        bool keep;
        pd_err_clear(&e);
        rc = pd_relabel_process(c.relabel, c.n_relabel, &ls, &keep, &e);
        if (rc && rc != PD_EINVAL && rc != PD_ENOMEM)
            abort();
    }
    pd_labels_release(&ls);
    pd_ebpf_config_release(&c);
    return 0;
}
