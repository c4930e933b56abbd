/* err.c: descriptions of the project's error codes. */
#include "lib/err.h"

#include <string.h>

const char *vmg_strerror(int code)
{
    switch (code) {
    case 0:
        return "success";
    case VMG_EPARSE:
        return "malformed input";
    case VMG_ETOOBIG:
        return "input larger than allowed";
    case VMG_EHTTP:
        return "HTTP error status";
    case VMG_ETRANSPORT:
        return "connection failed";
    case VMG_ECONFIG:
        return "bad configuration";
    case VMG_EFAULT:
        return "vCenter fault";
    case VMG_ENOTFOUND:
        return "not found";
    case VMG_ECONFLICT:
        return "conflict";
    case VMG_EAUTH:
        return "authentication failed";
    case VMG_EFORBIDDEN:
        return "forbidden";
    case VMG_EGONE:
        return "resource version too old";
    case VMG_ETHROTTLED:
        return "too many requests";
    case VMG_ECANCELED:
        return "canceled";
    case VMG_EAMBIGUOUS:
        return "ambiguous";
    case VMG_EUNKNOWN:
        return "outcome unknown";
    case VMG_ENOTREG:
        return "not a regular file";
    default:
        break;
    }
    if (code < 0 && code > -VMG_EBASE)
        return strerror(-code);
    return "unknown error";
}
