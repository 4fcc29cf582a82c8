// The C API of fio-engine/engine_api.h over client/core. Completions go into
// one queue per session, which fio drains from its getevents. The
// connections, RDMA or TCP, have no threads: getevents reaps their
// completion queues or reads their sockets itself, so a reply is handled on
// fio's thread with no hand-off.
#include "fio-engine/engine_api.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "client/core/errno_map.hpp"
#include "client/core/nfs_client.hpp"
#include "lib/base/fifo.hpp"
#include "lib/base/log.hpp"

using namespace nfsrdma;
using namespace nfsrdma::nfs3;

// Completions waiting for getevents, oldest first.
using DoneQueue = Fifo<std::pair<void*, long>>;

struct nfsrdma_session {
  std::unique_ptr<client::NfsClient> nfs;  // nfs_nconnect connections over the addresses given
  std::uint32_t rsize = 0, wsize = 0;      // the server's FSINFO rtmax/wtmax, in pages
  // Completions come from fio's thread (getevents drives the client), but
  // also from the client's maintenance thread (timeouts, shutdown): hence the lock.
  std::mutex mu;
  DoneQueue done;  // guarded by mu
  std::optional<client::NfsClient::SendBatch> batch;  // fio's thread only
};

namespace {

struct File {
  nfs_fh3 fh;
};

void complete(nfsrdma_session* s, void* cookie, long result) {
  std::lock_guard lk(s->mu);
  s->done.emplace_back(cookie, result);
}

int fail(const Error& e, int fallback = EIO) { return -(e.domain == ErrorDomain::sys && e.code ? e.code : fallback); }

}  // namespace

extern "C" nfsrdma_session* nfsrdma_session_open(const nfsrdma_params* p, char* err, size_t errlen) {
  static bool logging = init_logging("warn");
  (void)logging;
  auto say = [&](const std::string& why) {
    std::snprintf(err, errlen, "%s", why.c_str());
    return nullptr;
  };
  // host:/export, or [address]:/export for IPv6, as nfsrdma-fuse takes it.
  client::NfsClientOptions o;
  if (auto r = client::parse_source(p->export_spec ? p->export_spec : "", o); !r) {
    return say("nfs_export: " + r.error().message);
  }
  o.proto = p->tcp ? client::Proto::tcp : client::Proto::rdma;
  o.provider = p->provider ? p->provider : "";
  o.port = static_cast<std::uint16_t>(p->port);
  o.mount_port = static_cast<std::uint16_t>(p->mount_port);
  o.credits = p->credits ? p->credits : 128;
  o.caller_progress = true;
  o.nconnect = static_cast<int>(std::max(1u, p->nconnect));
  o.uid = p->uid;
  o.gid = p->gid;
  for (auto [name, value, out] : {std::tuple{"nfs_remoteaddrs", p->remote_addrs, &o.remote_addrs},
                                  std::tuple{"nfs_localaddrs", p->local_addrs, &o.local_addrs}}) {
    if (!value) continue;
    auto a = client::parse_address_list(name, value);
    if (!a) return say(a.error().message);
    *out = std::move(*a);
  }
  auto s = std::make_unique<nfsrdma_session>();
  auto c = client::NfsClient::connect(o);
  if (!c) return say(c.error().describe());
  s->nfs = std::move(*c);
  // fio's block size may exceed what the server takes in one READ or WRITE
  // (a kernel nfsd's limit shrinks with its memory): larger I/O is split.
  auto info = s->nfs->call_sync<FSINFO3res>(Proc::FSINFO, FhArgs{s->nfs->root()});
  if (!info) return say("FSINFO: " + info.error().describe());
  if (info->status != NFS3_OK) return say(std::string("FSINFO: ") + nfsstat3_name(info->status));
  // Whole pages; a server that states no limit (0) gets no split.
  auto pages = [](std::uint32_t max) { return max == 0 ? UINT32_MAX : max >= 4096 ? max & ~4095u : max; };
  s->rsize = pages(info->rtmax);
  s->wsize = pages(info->wtmax);
  return s.release();
}

extern "C" void nfsrdma_session_close(nfsrdma_session* s) { delete s; }

extern "C" int nfsrdma_register(nfsrdma_session* s, void* buf, size_t len) {
  if (auto r = s->nfs->register_memory({static_cast<std::uint8_t*>(buf), len}); !r) return fail(r.error());
  return 0;
}

namespace {

// LOOKUP of `name` in `dir`; when missing and `create`, `make` (MKDIR or
// CREATE) and LOOKUP again, since another job may have made it first.
// The LOOKUP3res, or -errno.
template <class Make>
int lookup_or_make(client::NfsClient& c, const nfs_fh3& dir, const std::string& name, bool create, Make make,
                   LOOKUP3res& out) {
  auto lk = c.call_sync<LOOKUP3res>(Proc::LOOKUP, diropargs3{dir, name});
  if (!lk) return fail(lk.error());
  if (lk->status == NFS3ERR_NOENT && create) {
    auto mk = make(diropargs3{dir, name});
    if (!mk) return fail(mk.error());
    if (mk->status != NFS3_OK && mk->status != NFS3ERR_EXIST) return -client::nfsstat3_to_errno(mk->status);
    lk = c.call_sync<LOOKUP3res>(Proc::LOOKUP, diropargs3{dir, name});
    if (!lk) return fail(lk.error());
  }
  if (lk->status != NFS3_OK) return -client::nfsstat3_to_errno(lk->status);
  out = std::move(*lk);
  return 0;
}

// Resolves the directory holding `path` (below the export root), making the
// missing ones when `create`; `leaf` gets the last component. 0 or -errno.
int parent_of(client::NfsClient& c, const std::string& path, bool create, nfs_fh3& dir, std::string& leaf) {
  std::string rest = path;
  while (!rest.empty() && rest.front() == '/') rest.erase(0, 1);
  dir = c.root();
  auto mkdir = [&](diropargs3 where) {
    MKDIR3args a;
    a.where = std::move(where);
    a.attributes.mode = 0755;
    return c.call_sync<CreateRes>(Proc::MKDIR, a);
  };
  for (auto slash = rest.find('/'); slash != std::string::npos; slash = rest.find('/')) {
    LOOKUP3res lk;
    if (int r = lookup_or_make(c, dir, rest.substr(0, slash), create, mkdir, lk); r < 0) return r;
    rest.erase(0, slash + 1);
    dir = lk.object;
  }
  leaf = rest;
  return 0;
}

}  // namespace

extern "C" int nfsrdma_open(nfsrdma_session* s, const char* path, int create, uint64_t* size, void** file) {
  client::NfsClient& c = *s->nfs;
  nfs_fh3 dir;
  std::string name;
  if (int r = parent_of(c, path, create != 0, dir, name); r < 0) return r;
  auto create_file = [&](diropargs3 where) {
    CREATE3args a;
    a.where = std::move(where);
    a.obj_attributes.mode = 0644;
    return c.call_sync<CreateRes>(Proc::CREATE, a);
  };
  LOOKUP3res lk;
  if (int r = lookup_or_make(c, dir, name, create != 0, create_file, lk); r < 0) return r;
  if (lk.obj_attributes && lk.obj_attributes->type != NF3REG) return -EINVAL;
  *size = lk.obj_attributes ? lk.obj_attributes->size : 0;
  *file = new File{lk.object};
  return 0;
}

extern "C" void nfsrdma_file_free(void* file) { delete static_cast<File*>(file); }

extern "C" int nfsrdma_unlink(nfsrdma_session* s, const char* path) {
  client::NfsClient& c = *s->nfs;
  nfs_fh3 dir;
  std::string name;
  if (int r = parent_of(c, path, false, dir, name); r < 0) return r;
  auto r = c.call_sync<WccRes>(Proc::REMOVE, diropargs3{dir, name});
  if (!r) return fail(r.error());
  return -client::nfsstat3_to_errno(r->status);
}

namespace {

// One READ or WRITE of at most the server's size; `done` gets the bytes
// moved or -errno. A `done` of two words keeps the callbacks below within
// what std::function holds without allocating.
template <class Done>
void submit_one(nfsrdma_session* s, const nfs_fh3& fh, int op, std::uint8_t* buf, std::size_t len,
                std::uint64_t offset, Done done) {
  client::NfsClient& c = *s->nfs;
  if (op == 0) {
    c.read(fh, offset, {buf, len}, [done](Result<client::NfsClient::ReadResult> r) {
      if (!r) return done(fail(r.error()));
      if (r->status != NFS3_OK) return done(-client::nfsstat3_to_errno(r->status));
      done(static_cast<long>(r->count));
    });
  } else {
    WRITE3args a{fh, offset, static_cast<std::uint32_t>(len), stable_how::UNSTABLE, {buf, len}};
    c.write(a, [done](Result<WRITE3res> r) {
      if (!r) return done(fail(r.error()));
      if (r->status != NFS3_OK) return done(-client::nfsstat3_to_errno(r->status));
      done(static_cast<long>(r->count));
    });
  }
}

// The parts of an I/O larger than the server's size. It completes with the
// bytes of the leading whole parts (a short part ends the count, as a short
// read or write would), or the first error.
struct Split {
  std::size_t left;
  std::vector<std::pair<std::size_t, long>> parts;  // (asked, got) by index
};

}  // namespace

extern "C" int nfsrdma_submit(nfsrdma_session* s, void* file, int op, void* buf, size_t len, uint64_t offset,
                              void* cookie) {
  const nfs_fh3& fh = static_cast<File*>(file)->fh;
  auto* data = static_cast<std::uint8_t*>(buf);
  if (op == 0 || op == 1) {
    std::size_t max = op == 0 ? s->rsize : s->wsize;
    if (len <= max) {
      submit_one(s, fh, op, data, len, offset, [s, cookie](long r) { complete(s, cookie, r); });
      return 0;
    }
    std::size_t n = (len + max - 1) / max;
    auto split = std::make_shared<Split>();
    split->left = n;
    split->parts.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      std::size_t part = std::min(max, len - i * max);
      split->parts[i].first = part;
      submit_one(s, fh, op, data + i * max, part, offset + i * max, [s, cookie, split, i](long r) {
        bool last;
        {
          std::lock_guard lk(s->mu);
          split->parts[i].second = r;
          last = --split->left == 0;
        }
        if (!last) return;
        long total = 0;
        for (auto [asked, got] : split->parts) {
          if (got < 0) return complete(s, cookie, got);
          total += got;
          if (static_cast<std::size_t>(got) < asked) break;
        }
        complete(s, cookie, total);
      });
    }
  } else if (op == 2) {
    // UNSTABLE writes become durable with COMMIT, which covers the file
    // whichever connection its writes came on.
    s->nfs->call<COMMIT3res>(Proc::COMMIT, COMMIT3args{fh, 0, 0}, [s, cookie](Result<COMMIT3res> r) {
      complete(s, cookie, !r ? fail(r.error()) : -client::nfsstat3_to_errno(r->status));
    });
  } else {
    return -EINVAL;
  }
  return 0;
}

extern "C" void nfsrdma_batch_begin(nfsrdma_session* s) { s->batch.emplace(*s->nfs); }

extern "C" void nfsrdma_batch_end(nfsrdma_session* s) { s->batch.reset(); }

namespace {

// Moves up to `max` completions out; returns how many.
unsigned take_done(nfsrdma_session* s, unsigned max, void** cookies, long* results) {
  unsigned n = 0;
  while (n < max && !s->done.empty()) {
    std::tie(cookies[n], results[n]) = s->done.pop_front();
    ++n;
  }
  return n;
}

}  // namespace

extern "C" int nfsrdma_reap(nfsrdma_session* s, unsigned min, unsigned max, const struct timespec* t, void** cookies,
                            long* results) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = t ? Clock::now() + std::chrono::seconds(t->tv_sec) + std::chrono::nanoseconds(t->tv_nsec)
                          : Clock::time_point::max();
  s->nfs->progress(0);
  for (;;) {
    {
      std::lock_guard lk(s->mu);
      if (s->done.size() >= min) return static_cast<int>(take_done(s, max, cookies, results));
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    // Short enough that a completion from the maintenance thread is seen soon.
    s->nfs->progress(static_cast<int>(std::min<long long>(left, 20)));
  }
  std::lock_guard lk(s->mu);
  return static_cast<int>(take_done(s, max, cookies, results));
}
