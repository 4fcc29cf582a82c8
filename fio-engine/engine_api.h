/* The C face of client/core for the fio engine (fio's headers are C): a
 * session of one or more NFS connections (nconnect) with one completion queue. */
#ifndef NFSRDMA_ENGINE_API_H
#define NFSRDMA_ENGINE_API_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

struct nfsrdma_session;

struct nfsrdma_params {
  const char *export_spec; /* host:/export */
  int tcp;                 /* 0: RPC-RDMA, 1: TCP */
  const char *provider;    /* libfabric provider, or NULL */
  unsigned port, mount_port, credits, nconnect, uid, gid;
  const char *remote_addrs; /* multi-rail: server addresses, a~b (NULL: the export's host) */
  const char *local_addrs;  /* local addresses to connect from, a~b (NULL: the route's) */
};

/* Returns NULL with a one-line reason in `err` on failure. */
struct nfsrdma_session *nfsrdma_session_open(const struct nfsrdma_params *p, char *err, size_t errlen);
void nfsrdma_session_close(struct nfsrdma_session *s);
/* Registers I/O buffers once; data then moves in place. 0 or -errno. */
int nfsrdma_register(struct nfsrdma_session *s, void *buf, size_t len);
/* Looks up (or with `create`, creates) `path` below the export root.
 * 0 with *file set, or -errno. */
int nfsrdma_open(struct nfsrdma_session *s, const char *path, int create, uint64_t *size, void **file);
void nfsrdma_file_free(void *file);
int nfsrdma_unlink(struct nfsrdma_session *s, const char *path);
/* Starts an I/O; its completion comes back from nfsrdma_reap with `cookie`.
 * op: 0 read, 1 write, 2 commit (fsync). 0 or -errno if it could not start. */
int nfsrdma_submit(struct nfsrdma_session *s, void *file, int op, void *buf, size_t len, uint64_t offset,
                   void *cookie);
/* I/Os submitted between these two may leave together when the batch ends
 * (over TCP in one write): commit() brackets the io_us fio hands it. */
void nfsrdma_batch_begin(struct nfsrdma_session *s);
void nfsrdma_batch_end(struct nfsrdma_session *s);
/* Waits for at least `min` completions (until `t`, if given) and returns up to
 * `max`: cookies[i] with results[i] = bytes moved, or -errno. */
int nfsrdma_reap(struct nfsrdma_session *s, unsigned min, unsigned max, const struct timespec *t, void **cookies,
                 long *results);

#ifdef __cplusplus
}
#endif
#endif
