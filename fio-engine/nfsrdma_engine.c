/* fio --ioengine=nfsrdma: NFS READ and WRITE over RPC-RDMA (or TCP) issued by
 * fio directly, through client/core: no FUSE, no kernel. Asynchronous: queue()
 * collects io_us, commit() sends them, getevents() reaps completions. fio's
 * buffers come from iomem_alloc and are registered once, so READ data lands in
 * them by RDMA Write and WRITE data is pulled from them by RDMA Read. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fio.h"
#include "optgroup.h"

#include "fio-engine/engine_api.h"

#if FIO_IOOPS_VERSION != 31
#error "built against fio headers with another FIO_IOOPS_VERSION than fio 3.33's"
#endif

struct nfsrdma_options {
  void *pad; /* fio: option offsets must not be 0 */
  char *nfs_export;
  unsigned int nfs_transport;
  char *nfs_provider;
  unsigned int nfs_port;
  unsigned int nfs_mount_port;
  unsigned int nfs_credits;
  unsigned int nfs_nconnect;
  unsigned int nfs_uid;
  unsigned int nfs_gid;
  char *nfs_remoteaddrs;
  char *nfs_localaddrs;
};

static struct fio_option options[] = {
    {.name = "nfs_export", .lname = "NFS export", .type = FIO_OPT_STR_STORE,
     .off1 = offsetof(struct nfsrdma_options, nfs_export), .help = "The export, host:/path or [address]:/path",
     .category = FIO_OPT_C_ENGINE, .group = FIO_OPT_G_INVALID},
    {.name = "nfs_transport", .lname = "NFS transport", .type = FIO_OPT_STR,
     .off1 = offsetof(struct nfsrdma_options, nfs_transport), .help = "rdma (RPC-over-RDMA) or tcp", .def = "rdma",
     .posval = {{.ival = "rdma", .oval = 0, .help = "RPC-over-RDMA v1 through libfabric"},
                {.ival = "tcp", .oval = 1, .help = "ONC RPC over TCP"}},
     .category = FIO_OPT_C_ENGINE, .group = FIO_OPT_G_INVALID},
    {.name = "nfs_provider", .lname = "libfabric provider", .type = FIO_OPT_STR_STORE,
     .off1 = offsetof(struct nfsrdma_options, nfs_provider),
     .help = "libfabric provider: tcp, verbs or sockets (default: verbs if present, else tcp)",
     .category = FIO_OPT_C_ENGINE, .group = FIO_OPT_G_INVALID},
    {.name = "nfs_port", .lname = "NFS port", .type = FIO_OPT_INT, .off1 = offsetof(struct nfsrdma_options, nfs_port),
     .help = "NFS port (default: 20049 for rdma; for tcp the portmapper's answer, else 2049)", .def = "0",
     .category = FIO_OPT_C_ENGINE, .group = FIO_OPT_G_INVALID},
    {.name = "nfs_mount_port", .lname = "MOUNT port", .type = FIO_OPT_INT,
     .off1 = offsetof(struct nfsrdma_options, nfs_mount_port), .help = "MOUNT port (default: ask the portmapper)",
     .def = "0", .category = FIO_OPT_C_ENGINE, .group = FIO_OPT_G_INVALID},
    {.name = "nfs_credits", .lname = "RPC-RDMA credits", .type = FIO_OPT_INT,
     .off1 = offsetof(struct nfsrdma_options, nfs_credits), .help = "Most RPC-RDMA calls in flight per connection",
     .def = "128", .category = FIO_OPT_C_ENGINE, .group = FIO_OPT_G_INVALID},
    {.name = "nfs_nconnect", .lname = "connections", .type = FIO_OPT_INT,
     .off1 = offsetof(struct nfsrdma_options, nfs_nconnect), .help = "Connections per job, 1 to 16, calls spread over them",
     .def = "1", .minval = 1, .maxval = 16, .category = FIO_OPT_C_ENGINE, .group = FIO_OPT_G_INVALID},
    {.name = "nfs_remoteaddrs", .lname = "server addresses", .type = FIO_OPT_STR_STORE,
     .off1 = offsetof(struct nfsrdma_options, nfs_remoteaddrs),
     .help = "Multi-rail: server addresses a~b to spread the connections over (default: the export's host)",
     .category = FIO_OPT_C_ENGINE, .group = FIO_OPT_G_INVALID},
    {.name = "nfs_localaddrs", .lname = "local addresses", .type = FIO_OPT_STR_STORE,
     .off1 = offsetof(struct nfsrdma_options, nfs_localaddrs),
     .help = "Multi-rail: local addresses a~b to connect from, in turn (default: the route's)",
     .category = FIO_OPT_C_ENGINE, .group = FIO_OPT_G_INVALID},
    {.name = "nfs_uid", .lname = "uid", .type = FIO_OPT_INT, .off1 = offsetof(struct nfsrdma_options, nfs_uid),
     .help = "AUTH_SYS uid", .def = "0", .category = FIO_OPT_C_ENGINE, .group = FIO_OPT_G_INVALID},
    {.name = "nfs_gid", .lname = "gid", .type = FIO_OPT_INT, .off1 = offsetof(struct nfsrdma_options, nfs_gid),
     .help = "AUTH_SYS gid", .def = "0", .category = FIO_OPT_C_ENGINE, .group = FIO_OPT_G_INVALID},
    {.name = NULL},
};

struct engine_data {
  struct nfsrdma_session *session;
  struct io_u **queued; /* queue() collects, commit() sends */
  unsigned int nr_queued;
  struct io_u **events;
  void **cookies;
  long *results;
};

static int nfsrdma_init(struct thread_data *td) {
  struct nfsrdma_options *o = td->eo;
  struct engine_data *ed;
  char err[512] = "";
  if (!o->nfs_export) {
    log_err("nfsrdma: set nfs_export=host:/export\n");
    return 1;
  }
  struct nfsrdma_params p = {o->nfs_export, (int)o->nfs_transport, o->nfs_provider, o->nfs_port, o->nfs_mount_port,
                             o->nfs_credits, o->nfs_nconnect, o->nfs_uid, o->nfs_gid,
                             o->nfs_remoteaddrs, o->nfs_localaddrs};
  ed = calloc(1, sizeof(*ed));
  ed->queued = calloc(td->o.iodepth, sizeof(struct io_u *));
  ed->events = calloc(td->o.iodepth, sizeof(struct io_u *));
  ed->cookies = calloc(td->o.iodepth, sizeof(void *));
  ed->results = calloc(td->o.iodepth, sizeof(long));
  ed->session = nfsrdma_session_open(&p, err, sizeof(err));
  td->io_ops_data = ed;
  if (!ed->session) {
    log_err("nfsrdma: %s\n", err);
    return 1;
  }
  return 0;
}

static void nfsrdma_cleanup(struct thread_data *td) {
  struct engine_data *ed = td->io_ops_data;
  if (!ed) return;
  if (ed->session) nfsrdma_session_close(ed->session);
  free(ed->queued);
  free(ed->events);
  free(ed->cookies);
  free(ed->results);
  free(ed);
  td->io_ops_data = NULL;
}

/* fio's I/O buffers, registered once for the job's life, in a mapping of
 * their own: the registration pins no page shared with the heap. */
static int nfsrdma_iomem_alloc(struct thread_data *td, size_t total) {
  struct engine_data *ed = td->io_ops_data;
  int r;
  void *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    log_err("nfsrdma: cannot map %zu bytes of I/O buffers: %s\n", total, strerror(errno));
    return 1;
  }
  r = nfsrdma_register(ed->session, p, total);
  if (r < 0) {
    log_err("nfsrdma: registering %zu bytes of I/O buffers failed: %s\n", total, strerror(-r));
    munmap(p, total);
    return 1;
  }
  td->orig_buffer = p;
  return 0;
}

/* fio passes the size it allocated with as orig_buffer_size. */
static void nfsrdma_iomem_free(struct thread_data *td) {
  munmap(td->orig_buffer, td->orig_buffer_size);
  td->orig_buffer = NULL;
}

static int nfsrdma_open_file(struct thread_data *td, struct fio_file *f) {
  struct engine_data *ed = td->io_ops_data;
  void *file = NULL;
  uint64_t size = 0;
  int r = nfsrdma_open(ed->session, f->file_name, td_write(td), &size, &file);
  if (r < 0) {
    td_verror(td, -r, "nfsrdma open");
    log_err("nfsrdma: %s: %s\n", f->file_name, strerror(-r));
    return 1;
  }
  FILE_SET_ENG_DATA(f, file);
  if (!td_write(td) && size) f->real_file_size = size;
  return 0;
}

static int nfsrdma_close_file(struct thread_data *td, struct fio_file *f) {
  (void)td;
  nfsrdma_file_free(FILE_ENG_DATA(f));
  FILE_SET_ENG_DATA(f, NULL);
  return 0;
}

static int nfsrdma_unlink_file(struct thread_data *td, struct fio_file *f) {
  struct engine_data *ed = td->io_ops_data;
  int r = nfsrdma_unlink(ed->session, f->file_name);
  return r == -ENOENT ? 0 : -r;
}

static enum fio_q_status nfsrdma_queue(struct thread_data *td, struct io_u *io_u) {
  struct engine_data *ed = td->io_ops_data;
  fio_ro_check(td, io_u);
  if (io_u->ddir != DDIR_READ && io_u->ddir != DDIR_WRITE && !ddir_sync(io_u->ddir)) {
    io_u->error = EINVAL;
    return FIO_Q_COMPLETED;
  }
  if (ed->nr_queued == td->o.iodepth) return FIO_Q_BUSY;
  ed->queued[ed->nr_queued++] = io_u;
  return FIO_Q_QUEUED;
}

static int nfsrdma_commit(struct thread_data *td) {
  struct engine_data *ed = td->io_ops_data;
  unsigned int i;
  if (!ed->nr_queued) return 0;
  nfsrdma_batch_begin(ed->session);
  for (i = 0; i < ed->nr_queued; i++) {
    struct io_u *io_u = ed->queued[i];
    int op = io_u->ddir == DDIR_READ ? 0 : io_u->ddir == DDIR_WRITE ? 1 : 2;
    int r = nfsrdma_submit(ed->session, FILE_ENG_DATA(io_u->file), op, io_u->xfer_buf, io_u->xfer_buflen,
                           io_u->offset, io_u);
    if (r < 0) {
      /* Could not start: report it as this io_u's error on the next reap. */
      io_u->error = -r;
    }
  }
  nfsrdma_batch_end(ed->session);
  ed->nr_queued = 0;
  return 0;
}

static int nfsrdma_getevents(struct thread_data *td, unsigned int min, unsigned int max, const struct timespec *t) {
  struct engine_data *ed = td->io_ops_data;
  int n = nfsrdma_reap(ed->session, min, max, t, ed->cookies, ed->results);
  int i;
  for (i = 0; i < n; i++) {
    struct io_u *io_u = ed->cookies[i];
    long res = ed->results[i];
    if (res < 0) {
      io_u->error = (int)-res;
    } else if (!ddir_sync(io_u->ddir) && (unsigned long long)res < io_u->xfer_buflen) {
      io_u->resid = io_u->xfer_buflen - (unsigned long long)res;
    }
    ed->events[i] = io_u;
  }
  return n;
}

static struct io_u *nfsrdma_event(struct thread_data *td, int event) {
  struct engine_data *ed = td->io_ops_data;
  return ed->events[event];
}

struct ioengine_ops ioengine = {
    .name = "nfsrdma",
    .version = FIO_IOOPS_VERSION,
    .flags = FIO_DISKLESSIO,
    .init = nfsrdma_init,
    .cleanup = nfsrdma_cleanup,
    .queue = nfsrdma_queue,
    .commit = nfsrdma_commit,
    .getevents = nfsrdma_getevents,
    .event = nfsrdma_event,
    .open_file = nfsrdma_open_file,
    .close_file = nfsrdma_close_file,
    .unlink_file = nfsrdma_unlink_file,
    .iomem_alloc = nfsrdma_iomem_alloc,
    .iomem_free = nfsrdma_iomem_free,
    .options = options,
    .option_struct_size = sizeof(struct nfsrdma_options),
};
