/* file.c: opening a file the manager reads whole. See file.h. */
#include "lib/file.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "lib/err.h"

int vmg_open_regular(const char *path, struct stat *st)
{
    struct stat buf;
    int fd, e;

    if (!path)
        return -EINVAL;
    /* O_NONBLOCK: opening a FIFO with no writer would wait for one. */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    if (!st)
        st = &buf;
    if (fstat(fd, st) < 0) {
        e = -errno;
        close(fd);
        return e;
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        return S_ISDIR(st->st_mode) ? -EISDIR : VMG_ENOTREG;
    }
    return fd;
}
