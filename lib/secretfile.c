/* secretfile.c: a secret read from a file. */
#include "lib/secretfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "lib/err.h"
#include "lib/file.h"
#include "lib/log.h"
#include "lib/str.h"

int vmg_secret_replace(char **slot, const char *secret)
{
    char *p;

    if (!secret || !*secret)
        return -EINVAL;
    if (*slot && strcmp(*slot, secret) == 0)
        return 1;
    p = strdup(secret);
    if (!p)
        return -ENOMEM;
    /* Too short a secret cannot be masked; it is never logged either way. */
    (void)vmg_log_add_secret(p);
    if (*slot) {
        OPENSSL_cleanse(*slot, strlen(*slot));
        free(*slot);
    }
    *slot = p;
    return 0;
}

int vmg_secret_file_read(const char *path, char *buf, size_t size, char *err, size_t errlen)
{
    char tmp[VMG_SECRET_FILE_MAX + 3]; /* room for "\r\n" and one byte too many */
    size_t len = 0, max = size - 1 < VMG_SECRET_FILE_MAX ? size - 1 : VMG_SECRET_FILE_MAX;
    int fd, rc = VMG_ECONFIG;

    if (!path || !*path || !buf || size < 2) {
        vmg_putf(err, errlen, "no secret file given");
        return VMG_ECONFIG;
    }
    fd = vmg_open_regular(path, NULL);
    if (fd < 0) {
        vmg_putf(err, errlen, "cannot open %s: %s", path, vmg_strerror(fd));
        return VMG_ECONFIG;
    }
    while (len < sizeof(tmp)) {
        ssize_t n = read(fd, tmp + len, sizeof(tmp) - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            vmg_putf(err, errlen, "cannot read %s: %s", path, strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    if (len > 0 && tmp[len - 1] == '\n') {
        len--;
        if (len > 0 && tmp[len - 1] == '\r')
            len--;
    }
    if (len == 0) {
        vmg_putf(err, errlen, "%s is empty", path);
    } else if (len > max) {
        vmg_putf(err, errlen, "%s holds more than %zu bytes", path, max);
    } else if (memchr(tmp, '\0', len)) {
        vmg_putf(err, errlen, "%s holds a NUL byte", path);
    } else {
        memcpy(buf, tmp, len);
        buf[len] = '\0';
        rc = (int)len;
    }
out:
    OPENSSL_cleanse(tmp, sizeof(tmp));
    close(fd);
    return rc;
}
