/*
 * api/rules.c — GET /api/v1/rules (issue 30): the recording rules with
 * their last evaluation and error, in Prometheus' envelope and shape
 * (rules/rules.h, pd_rules_write_json). Without rules: {"groups":[]}.
 */
#include <string.h>

#include "api/api_int.h"
#include "rules/rules.h"

const char *pd__api_rules(pd_api *api, const pd_http_request *req, pd_http_response *resp)
{
    if (strcmp(req->method, "GET") && strcmp(req->method, "HEAD")) {
        pd_http_add_header(resp, "Allow", "GET");
        resp->status = 405;
        resp->content_type = "application/json";
        pd_buf_puts(&resp->body, "{\"status\":\"error\",\"errorType\":\"method_not_allowed\","
                                 "\"error\":\"GET /api/v1/rules\"}");
        return "/api/v1/rules";
    }
    struct pd_rules *rules = __atomic_load_n(&api->rules, __ATOMIC_ACQUIRE);
    if (pd__api_begin_success(resp) == 0 && pd_rules_write_json(rules, &resp->body) == 0)
        pd__api_end_success(resp);
    return "/api/v1/rules";
}
