/* placeholder, replaced below */
#include "api/api_int.h"
const char *pd__api_regressions(pd_api *api, const pd_http_request *req, pd_http_response *resp)
{
    (void)api;
    (void)req;
    resp->status = 501;
    return "/api/v1/regressions";
}
