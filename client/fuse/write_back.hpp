// Write-behind for the FUSE client, as the kernel NFS client does it with its
// page cache: a write() is copied into a registered chunk and answered at
// once; the chunk goes out as an UNSTABLE WRITE when it fills, when a write
// lands elsewhere, when the file is flushed, or after a second of quiet. The
// data stays in its chunk until a COMMIT returns the verifier its WRITE
// returned; a different verifier means the server restarted and lost it, so
// it is sent again (RFC 1813 §3.3.7, DESIGN.md).
//
// Theory of operation, per file (FileWrites, under its mu):
//   Extent states: filling -> sending -> unstable -> (committed: freed).
//   A write overlapping a `sending` extent waits until it is answered, so the
//   server sees overlapping data in the order it was written; resends after a
//   verifier change go one at a time, oldest first, for the same reason.
//   drain: nothing filling or sending. commit: COMMIT what is unstable, then
//   resend and commit again until every verifier matches; a flush or fsync
//   drains first, so everything it follows is covered. One round at a time
//   per file; requests that arrive meanwhile get the next round.
//   A WRITE or COMMIT error is reported through each open file description
//   once, as the kernel's errseq_t does: FileWrites counts the errors, each
//   open keeps how many it has been told of (ErrorsSeen, sampled at open,
//   less one while the last error reached nobody), and its next write(),
//   flush or fsync reports one it was not told of and marks it told (close
//   and fsync report it, as with nfs(5)). A killed process's flush,
//   answered EINTR already, tells nobody.
// Its WRITEs and COMMITs belong to no caller (client::CallOwner 0): a process
// killed while it waits for them stops waiting (Interrupts::guard), and its
// data still goes out.
// WARNING: client calls are never made under a FileWrites lock: a transport
// may run the reply callback inside the call.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "client/core/nfs_client.hpp"
#include "client/fuse/buffer_pool.hpp"

namespace nfsrdma::fuse {

struct Node;
// When a call that may bring a node's attributes back was sent (Node::remember_attrs).
struct AttrsAsOf {
  std::uint64_t epoch, forgot_at;
};

// One file's write-behind state; only WriteBack touches it.
struct FileWrites {
  struct Extent {
    std::list<Extent>::iterator self;  // its place in `extents`
    BufferPool* pool = nullptr;
    std::uint8_t* buf = nullptr;
    std::uint32_t capacity = 0;
    std::uint64_t offset = 0;
    std::uint32_t len = 0, sent = 0;
    enum class State : std::uint8_t { filling, sending, unstable } state = State::filling;
    nfs3::verf8 verf{};
    client::Identity who;
  };
  std::mutex mu;
  std::condition_variable cv;  // an extent left `sending`
  std::list<Extent> extents;
  Extent* filling = nullptr;  // at most one extent takes more writes
  int in_flight = 0;
  bool overlapped = false;  // since in_flight was last 0, two WRITEs were out at once
  int error = 0;                // the last WRITE or COMMIT error
  std::uint32_t error_seq = 0;  // errors met so far
  bool error_told = true;       // the last one reached some caller
  bool committing = false;
  std::vector<std::function<void()>> drained;
  // What one open file description has been told of its file's errors
  // (error_seq when it last reported one).
  using ErrorsSeen = std::shared_ptr<std::atomic<std::uint32_t>>;
  struct Waiter {
    std::function<bool(int)> done;  // null: a background commit, which reports nothing
    ErrorsSeen seen;
  };
  std::vector<Waiter> commit_waiters;
  std::chrono::steady_clock::time_point last_write;
};

class WriteBack {
 public:
  // `big` chunks (wsize) take large writes and sequential runs; `small` ones
  // take small scattered writes, so those do not pin a whole chunk each.
  // `attrs_epoch`: the mount's (Filesystem::others_changed), under which a
  // WRITE's reply leaves the file's attributes for the GETATTR after it.
  WriteBack(client::NfsClient& nfs, BufferPool& big, BufferPool& small, const std::atomic<std::uint64_t>& attrs_epoch);
  ~WriteBack();

  using ErrorsSeen = FileWrites::ErrorsSeen;
  // For a new open of `n`: the errors its file met before are not its own,
  // but for the last, if nobody was told of it.
  ErrorsSeen errors_seen_now(Node& n);

  // Takes `size` bytes for the file at `offset`, which `fill` copies to the
  // address it is given (FUSE's buffer may be memory or a pipe); returns 0, or
  // (taking nothing) the last error an earlier WRITE or COMMIT of this file
  // met that the open (`seen`) was not told of, marking it told.
  using Fill = std::function<void(std::uint8_t* dst)>;
  int write(const std::shared_ptr<Node>& n, std::uint64_t offset, std::size_t size, const Fill& fill,
            const client::Identity& who, const ErrorsSeen& seen);
  // Runs `done` once everything written so far has been answered by the
  // server. `stable_if_alone`: when the file's only data not yet stable is
  // one WRITE's worth, none of it sent, that WRITE goes FILE_SYNC, so nothing
  // is left to COMMIT (the kernel client's FLUSH_COND_STABLE: it flushes a file so
  // before a GETATTR or SETATTR, and at close).
  void drain(const std::shared_ptr<Node>& n, std::function<void()> done, bool stable_if_alone = false);
  // drain, then COMMIT until the data is stable; `done` gets 0 or the last
  // error the file met that the open (`seen`) was not told of, and returns
  // whether that reached its caller; `seen` then counts it told (not when
  // the caller was answered already, as a killed one is by
  // Interrupts::guard). A null `done` (background) reports nothing.
  // When all that is left of the file is one WRITE's worth, nothing sent
  // before it, that WRITE goes FILE_SYNC and no COMMIT follows, as the kernel
  // client flushes such a file (a small file's close: one call, not two).
  void commit(const std::shared_ptr<Node>& n, std::function<bool(int)> done, ErrorsSeen seen = nullptr);
  // `done` answered 0 whatever the commit met, and nothing counted told: a
  // flush that reports no error (a descriptor not open for writing).
  static std::function<bool(int)> untold(std::function<bool(int)> done) {
    return [done = std::move(done)](int) {
      done(0);
      return false;
    };
  }
  // The end of the data not yet committed (0 when none): a size the server's
  // attributes may not show yet.
  std::uint64_t pending_end(Node& n);
  // After the server has set the file's size: data beyond it is cut from
  // every extent not being sent, so neither the size we report nor a resend
  // after a server restart brings the truncated bytes back. An extent cut to
  // nothing is left empty for the commit round that may hold it to drop.
  void truncate(Node& n, std::uint64_t size);
  bool idle(Node& n);
  // At the end of the mount: the flusher stopped, then every file's data sent
  // and committed, waiting as a hard mount waits (a killed process's close may
  // have left some behind). After it nothing here calls the NFS client.
  struct Committed {
    std::size_t files = 0;   // files that had data
    std::size_t failed = 0;  // of them, those whose data the server did not take
  };
  Committed commit_everything();

 private:
  using Extent = FileWrites::Extent;
  Extent* take_filling_locked(FileWrites& w);
  void send(const std::shared_ptr<Node>& n, Extent* e, bool stable = false);
  void on_written(const std::shared_ptr<Node>& n, Extent* e, AttrsAsOf as_of, Result<nfs3::WRITE3res> r);
  using Waiters = std::vector<FileWrites::Waiter>;
  static void fail_locked(FileWrites& w, int err);  // counts an error every open is to be told of
  void enqueue_commit(const std::shared_ptr<Node>& n, FileWrites::Waiter waiter);
  void start_commit(const std::shared_ptr<Node>& n, Waiters waiters);
  void finish_commit(const std::shared_ptr<Node>& n, Waiters waiters, int err);
  void resend(const std::shared_ptr<Node>& n, std::vector<Extent*> list, std::size_t i, Waiters waiters);
  void drop_locked(FileWrites& w, Extent* e);
  void track(const std::shared_ptr<Node>& n);
  void untrack_if_clean(Node& n);
  void commit_all();
  void flusher_loop();
  void stop_flusher();  // idempotent

  client::NfsClient& nfs_;
  BufferPool &big_, &small_;
  const std::atomic<std::uint64_t>& attrs_epoch_;
  // Lock order: a FileWrites mu before mu_, and before its Node's attributes
  // lock (on_written keeps a WRITE's attributes under the FileWrites mu).
  std::mutex mu_;  // guards dirty_, stopping_, commit_soon_
  std::condition_variable cv_;
  std::unordered_map<Node*, std::shared_ptr<Node>> dirty_;  // files with data not yet committed
  bool stopping_ = false;
  bool commit_soon_ = false;  // a pool runs low: the flusher commits everything now
  std::thread flusher_;
};

}  // namespace nfsrdma::fuse
