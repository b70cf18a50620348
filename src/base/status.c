/* status.c - status names and strings (from include/hcomm.h's list), and the version. */
#include "hcomm.h"

#define HC_STR2_(x) #x
#define HC_STR_(x)  HC_STR2_(x)

const char *hcomm_status_str(hcomm_status_t status)
{
    switch (status) {
#define HC_STATUS_STR_(name, value, desc) \
    case name:                            \
        return desc;
        HCOMM_STATUS_MAP(HC_STATUS_STR_)
#undef HC_STATUS_STR_
    }
    return "unknown status";
}

const char *hcomm_status_name(hcomm_status_t status)
{
    switch (status) {
#define HC_STATUS_NAME_(name, value, desc) \
    case name:                             \
        return #name;
        HCOMM_STATUS_MAP(HC_STATUS_NAME_)
#undef HC_STATUS_NAME_
    }
    return "HCOMM_UNKNOWN_STATUS";
}

int hcomm_version(void)
{
    return HCOMM_VERSION_CODE;
}

const char *hcomm_version_str(void)
{
    return HC_STR_(HCOMM_VERSION_MAJOR) "." HC_STR_(HCOMM_VERSION_MINOR) "." HC_STR_(
        HCOMM_VERSION_PATCH);
}
