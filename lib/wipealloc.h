/* wipealloc.h: OpenSSL and libcurl made to wipe what they free. Both copy
 * secrets into blocks of their own (a client key given as a blob, a
 * request's Authorization header, a key parsed from PEM, TLS session
 * keys) and free them with plain free. */
#ifndef VMG_WIPEALLOC_H
#define VMG_WIPEALLOC_H

/* vmg_wipe_allocators gives OpenSSL and libcurl allocators that wipe each
 * block they free, whole (malloc_usable_size), and the old block of a
 * realloc that moves. Call it once, first: before anything allocates
 * through OpenSSL (it refuses then) and before curl_global_init. free_fn
 * is the free called once a block is wiped (NULL: free): a test's, to
 * look at them. Returns 0, -EBUSY (OpenSSL has allocated already: nothing
 * changed) or -EIO (libcurl refused). Thread-safe once set: libcurl's
 * resolver threads free too. */
int vmg_wipe_allocators(void (*free_fn)(void *));

#endif
