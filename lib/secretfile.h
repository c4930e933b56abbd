/* secretfile.h: reading a secret (a password) from a file, as Kubernetes
 * mounts a Secret's keys: the whole file is the value, but one trailing
 * newline ("\n" or "\r\n") is dropped, as editors and `echo` add one. */
#ifndef VMG_SECRETFILE_H
#define VMG_SECRETFILE_H

#include <stddef.h>

/* The longest secret read, in bytes. */
#define VMG_SECRET_FILE_MAX 1024

/* vmg_secret_file_read reads the secret in path into buf (size bytes, at
 * least 2, NUL-terminated). Returns its length, or VMG_ECONFIG with one
 * sentence in err naming the file (never the content): unreadable, not a
 * regular file, empty, longer than VMG_SECRET_FILE_MAX or size - 1, or
 * holding a NUL byte. */
int vmg_secret_file_read(const char *path, char *buf, size_t size, char *err, size_t errlen);

/* vmg_secret_replace makes *slot (NULL or from malloc) a copy of secret,
 * registered with vmg_log_add_secret(); the old value is wiped and freed.
 * 0; 1 when *slot already holds secret (nothing is done); -EINVAL (secret
 * NULL or empty) or -ENOMEM (*slot is kept). */
int vmg_secret_replace(char **slot, const char *secret);

#endif
