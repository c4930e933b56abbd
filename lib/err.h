/* err.h: the project's error codes.
 *
 * Functions return 0 (or a non-negative count) on success and a negative
 * code on failure: either a negated errno value (-ENOMEM, -EINVAL, ...) or
 * one of the VMG_E* codes below, which sit outside errno's range. Codes are
 * never renumbered. vmg_strerror() names any of them.
 */
#ifndef VMG_ERR_H
#define VMG_ERR_H

enum {
    VMG_EBASE = 10000,
    VMG_EPARSE = -(VMG_EBASE + 1),      /* malformed input (JSON, XML, YAML) */
    VMG_ETOOBIG = -(VMG_EBASE + 2),     /* a response or input above its bound */
    VMG_EHTTP = -(VMG_EBASE + 3),       /* an HTTP status that is an error */
    VMG_ETRANSPORT = -(VMG_EBASE + 4),  /* connection, TLS or timeout failure */
    VMG_ECONFIG = -(VMG_EBASE + 5),     /* bad or incomplete configuration */
    VMG_EFAULT = -(VMG_EBASE + 6),      /* a SOAP fault from vCenter */
    VMG_ENOTFOUND = -(VMG_EBASE + 7),   /* the object asked for does not exist */
    VMG_ECONFLICT = -(VMG_EBASE + 8),   /* a write lost a race (409) */
    VMG_EAUTH = -(VMG_EBASE + 9),       /* authentication refused */
    VMG_EFORBIDDEN = -(VMG_EBASE + 10), /* authorization refused */
    VMG_EGONE = -(VMG_EBASE + 11),      /* resource version too old (410) */
    VMG_ETHROTTLED = -(VMG_EBASE + 12), /* too many requests (429) */
    VMG_ECANCELED = -(VMG_EBASE + 13),  /* the operation was canceled */
    VMG_EAMBIGUOUS = -(VMG_EBASE + 14), /* more than one object matches */
    VMG_EUNKNOWN = -(VMG_EBASE + 15),   /* an operation's outcome cannot be known */
    VMG_ENOTREG = -(VMG_EBASE + 16),    /* a file read is a FIFO, a device, a socket */
};

/* vmg_strerror returns a static description of code; never NULL. */
const char *vmg_strerror(int code);

#endif
