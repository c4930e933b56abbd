/* file.h: opening a file the manager reads whole (a secret, a token, a
 * certificate or a key, a kubeconfig), never blocking on it. */
#ifndef VMG_FILE_H
#define VMG_FILE_H

#include <sys/stat.h>

/* vmg_open_regular opens path for reading (O_CLOEXEC) without ever
 * blocking on it: a FIFO, a device or a socket named where a file is
 * expected would hang the start or, for a file read again while running
 * (a rotated token, password or certificate), the loop. Its status goes
 * to *st unless st is NULL. Returns the descriptor, or a negated errno:
 * -EISDIR for a directory, VMG_ENOTREG for anything else that is not a
 * regular file. */
int vmg_open_regular(const char *path, struct stat *st);

#endif
