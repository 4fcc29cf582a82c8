#include "client/fuse/write_back.hpp"

#include <cstring>

#include "client/core/errno_map.hpp"
#include "client/fuse/node_table.hpp"
#include "lib/base/log.hpp"

namespace nfsrdma::fuse {

using namespace nfs3;
using State = FileWrites::Extent::State;
using Clock = std::chrono::steady_clock;

namespace {
constexpr auto kSendAfter = std::chrono::seconds(1);     // a filling chunk idle this long goes out
constexpr auto kCommitAfter = std::chrono::seconds(5);   // unstable data idle this long is committed
}  // namespace

WriteBack::WriteBack(client::NfsClient& nfs, BufferPool& big, BufferPool& small,
                     const std::atomic<std::uint64_t>& attrs_epoch)
    : nfs_(nfs), big_(big), small_(small), attrs_epoch_(attrs_epoch) {
  flusher_ = std::thread([this] { flusher_loop(); });
}

WriteBack::~WriteBack() { stop_flusher(); }

void WriteBack::stop_flusher() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (flusher_.joinable()) flusher_.join();
}

// The file's filling extent, now `sending` (the caller sends it), or null.
FileWrites::Extent* WriteBack::take_filling_locked(FileWrites& w) {
  Extent* e = std::exchange(w.filling, nullptr);
  if (e) {
    e->state = State::sending;
    ++w.in_flight;
  }
  return e;
}

WriteBack::ErrorsSeen WriteBack::errors_seen_now(Node& n) {
  std::lock_guard lk(n.writes.mu);
  // An error nobody was told of yet is the new open's too (errseq_sample).
  const std::uint32_t seq = n.writes.error_seq - (n.writes.error_told ? 0 : 1);
  return std::make_shared<std::atomic<std::uint32_t>>(seq);
}

void WriteBack::fail_locked(FileWrites& w, int err) {
  w.error = err;
  ++w.error_seq;
  w.error_told = false;
}

int WriteBack::write(const std::shared_ptr<Node>& n, std::uint64_t offset, std::size_t size, const Fill& fill,
                     const client::Identity& who, const ErrorsSeen& seen) {
  FileWrites& w = n->writes;
  NFSRDMA_CHECK(size <= big_.chunk_bytes());
  std::unique_lock lk(w.mu);
  if (seen->load() != w.error_seq) {
    // Reported here, not again at the open's flush, and the next write goes.
    seen->store(w.error_seq);
    w.error_told = true;
    return w.error;
  }
  w.last_write = Clock::now();
  // Into the extent being filled when the write starts inside it or right after it.
  if (Extent* f = w.filling; f && offset >= f->offset && offset <= f->offset + f->len &&
                             offset + size - f->offset <= f->capacity && f->who.uid == who.uid) {
    fill(f->buf + (offset - f->offset));
    f->len = std::max<std::uint32_t>(f->len, static_cast<std::uint32_t>(offset + size - f->offset));
    Extent* full = f->len == f->capacity ? take_filling_locked(w) : nullptr;
    lk.unlock();
    if (full) send(n, full);
    return 0;
  }
  // A new extent: what was filling goes out first.
  if (Extent* prev = take_filling_locked(w)) {
    lk.unlock();
    send(n, prev);
  } else {
    lk.unlock();
  }
  BufferPool& pool = size > small_.chunk_bytes() / 2 ? big_ : small_;
  std::uint8_t* buf = pool.acquire([this] { commit_all(); });  // all out: commit now, then wait
  if (pool.running_low()) {
    // Commit before writers have to wait: committed chunks are free again.
    std::lock_guard glk(mu_);
    commit_soon_ = true;
    cv_.notify_all();
  }
  lk.lock();
  // ORDER: overlapping data reaches the server in the order it was written.
  // Another writer may have started a filling extent meanwhile; it goes out now.
  Extent* other = take_filling_locked(w);
  auto overlaps = [&](const Extent& e) { return offset < e.offset + e.len && e.offset < offset + size; };
  if (other) {
    lk.unlock();
    send(n, other);
    lk.lock();
  }
  w.cv.wait(lk, [&] {
    return std::none_of(w.extents.begin(), w.extents.end(),
                        [&](const Extent& e) { return e.state == State::sending && overlaps(e); });
  });
  Extent& e = w.extents.emplace_back();
  e.self = std::prev(w.extents.end());
  e.pool = &pool;
  e.buf = buf;
  e.capacity = static_cast<std::uint32_t>(pool.chunk_bytes());
  e.offset = offset;
  e.len = static_cast<std::uint32_t>(size);
  e.who = who;
  fill(buf);
  Extent* full = nullptr;
  Extent* slipped = nullptr;  // another writer's filling extent, started while we waited
  if (e.len == e.capacity) {
    e.state = State::sending;
    ++w.in_flight;
    full = &e;
  } else {
    slipped = take_filling_locked(w);
    w.filling = &e;
  }
  lk.unlock();
  track(n);
  if (slipped) send(n, slipped);
  if (full) send(n, full);
  return 0;
}

void WriteBack::send(const std::shared_ptr<Node>& n, Extent* e, bool stable) {
  client::CallOwner nobody(0);  // the write-back's calls are no caller's: a killed one's data still goes out
  WRITE3args a;
  a.file = n->fh;
  a.offset = e->offset + e->sent;
  a.count = e->len - e->sent;
  a.stable = stable ? stable_how::FILE_SYNC : stable_how::UNSTABLE;
  a.data = {e->buf + e->sent, a.count};
  const auto as_of = n->changing(attrs_epoch_);
  nfs_.write(a, [this, n, e, as_of](Result<WRITE3res> r) { on_written(n, e, as_of, std::move(r)); }, &e->who);
}

void WriteBack::on_written(const std::shared_ptr<Node>& n, Extent* e, AttrsAsOf as_of, Result<WRITE3res> r) {
  FileWrites& w = n->writes;
  n->change_answered();
  std::vector<std::function<void()>> run;
  bool again = false;
  {
    std::lock_guard lk(w.mu);
    int err = !r ? EIO : client::nfsstat3_to_errno(r->status);
    if (!r) spdlog::warn("nfs: WRITE at {} failed: {}", e->offset, r.error().describe());
    if (err == 0 && r->count == 0) err = EIO;  // no progress: the server will not take it
    if (err == 0) n->cto_follow(r->file_wcc);  // the kernel's pages took this data when it was written
    if (err != 0) {
      fail_locked(w, err);
      drop_locked(w, e);
    } else if (e->sent + r->count < e->len) {
      e->sent += r->count;  // a short WRITE: send the rest
      again = true;
    } else if (r->committed == stable_how::FILE_SYNC) {
      drop_locked(w, e);
    } else {
      e->state = State::unstable;
      e->sent = 0;
      e->verf = r->verf;
    }
    // Replies of WRITEs out together may come back in any order, so only
    // the reply of a WRITE that had the file to itself tells its state.
    if (!again && w.in_flight > 1) w.overlapped = true;
    if (!again && --w.in_flight == 0) {
      run.swap(w.drained);
      // The file's attributes after a WRITE that was alone in flight: the
      // GETATTR the kernel sends after a write is answered from them, as
      // the kernel client keeps a WRITE's post-op attributes. Kept under
      // the lock, before a WRITE or SETATTR sent next can forget them.
      if (!w.overlapped && r && r->status == nfsstat3::NFS3_OK && r->file_wcc.after) {
        n->remember_attrs(*r->file_wcc.after, as_of);
      }
      w.overlapped = false;
    }
  }
  w.cv.notify_all();
  if (again) return send(n, e);
  for (auto& f : run) f();
  untrack_if_clean(*n);
}

void WriteBack::drop_locked(FileWrites& w, Extent* e) {
  e->pool->release(e->buf);
  w.extents.erase(e->self);
}

void WriteBack::drain(const std::shared_ptr<Node>& n, std::function<void()> done, bool stable_if_alone) {
  FileWrites& w = n->writes;
  Extent* to_send = nullptr;
  bool stable = false;
  {
    std::lock_guard lk(w.mu);
    to_send = take_filling_locked(w);
    // The file's only extent, none in flight or awaiting COMMIT beside it.
    stable = stable_if_alone && to_send && w.in_flight == 1 && w.extents.size() == 1;
    if (w.in_flight > 0) {
      w.drained.push_back(std::move(done));
      done = nullptr;
    }
  }
  if (to_send) send(n, to_send, stable);
  if (done) done();
}

void WriteBack::commit(const std::shared_ptr<Node>& n, std::function<bool(int)> done, ErrorsSeen seen) {
  // A background commit takes what is unstable now; a flush first waits for
  // every write it follows to be answered (ORDER: COMMIT covers only WRITEs
  // whose replies came back).
  if (!done) return enqueue_commit(n, {});
  if (!seen) seen = errors_seen_now(*n);  // no open's: what this round meets
  FileWrites::Waiter waiter{std::move(done), std::move(seen)};
  drain(n, [this, n, waiter = std::move(waiter)]() mutable { enqueue_commit(n, std::move(waiter)); }, true);
}

void WriteBack::enqueue_commit(const std::shared_ptr<Node>& n, FileWrites::Waiter waiter) {
  FileWrites& w = n->writes;
  {
    std::lock_guard lk(w.mu);
    w.commit_waiters.push_back(std::move(waiter));
    if (w.committing) return;  // the running round starts another for these when it ends
    w.committing = true;
  }
  start_commit(n, {});
}

void WriteBack::start_commit(const std::shared_ptr<Node>& n, Waiters waiters) {
  client::CallOwner nobody(0);  // the write-back's calls are no caller's: a killed one's data still goes out
  FileWrites& w = n->writes;
  std::vector<Extent*> covered;
  client::Identity who;
  {
    std::lock_guard lk(w.mu);
    for (auto& f : w.commit_waiters) waiters.push_back(std::move(f));
    w.commit_waiters.clear();
    for (auto& e : w.extents) {
      if (e.state == State::unstable) covered.push_back(&e);
    }
    if (!covered.empty()) who = covered.back()->who;
  }
  if (covered.empty()) return finish_commit(n, std::move(waiters), 0);
  auto on_reply = [this, n, covered, waiters = std::move(waiters)](Result<COMMIT3res> r) mutable {
    FileWrites& fw = n->writes;
    int err = !r ? EIO : client::nfsstat3_to_errno(r->status);
    std::vector<Extent*> lost;
    {
      std::lock_guard lk(fw.mu);
      for (auto* e : covered) {
        if (err == 0 && e->verf != r->verf && e->len > 0) {
          e->state = State::sending;  // the server restarted since this WRITE: send it again
          lost.push_back(e);
        } else {
          drop_locked(fw, e);  // committed, or lost to an error reported below
        }
      }
      if (!lost.empty()) fw.in_flight += 1;  // the resend chain, one WRITE at a time
    }
    if (!lost.empty()) {
      spdlog::info("nfs: write verifier changed (server restarted); sending {} chunks again", lost.size());
      return resend(n, std::move(lost), 0, std::move(waiters));
    }
    finish_commit(n, std::move(waiters), err);
  };
  nfs_.call<COMMIT3res>(Proc::COMMIT, COMMIT3args{n->fh, 0, 0}, std::move(on_reply), &who);
}

void WriteBack::resend(const std::shared_ptr<Node>& n, std::vector<Extent*> list, std::size_t i, Waiters waiters) {
  client::CallOwner nobody(0);  // the write-back's calls are no caller's: a killed one's data still goes out
  if (i == list.size()) {
    std::vector<std::function<void()>> run;
    {
      std::lock_guard lk(n->writes.mu);
      // A WRITE sent while the resends ran is not known to have been alone.
      if (--n->writes.in_flight == 0) {
        run.swap(n->writes.drained);
      } else {
        n->writes.overlapped = true;
      }
    }
    for (auto& f : run) f();
    return start_commit(n, std::move(waiters));
  }
  Extent* e = list[i];
  WRITE3args a;
  a.file = n->fh;
  a.offset = e->offset;
  a.count = e->len;
  a.stable = stable_how::FILE_SYNC;  // no verifier to trust until this lands
  a.data = {e->buf, e->len};
  n->forget_attrs();
  auto on_reply = [this, n, list = std::move(list), i, waiters = std::move(waiters)](Result<WRITE3res> r) mutable {
    FileWrites& w = n->writes;
    {
      std::lock_guard lk(w.mu);
      Extent* sent = list[i];
      int err = !r ? EIO : client::nfsstat3_to_errno(r->status);
      if (err == 0 && r->count < sent->len) err = EIO;
      if (err != 0) fail_locked(w, err);
      drop_locked(w, sent);  // FILE_SYNC: stable once answered
    }
    n->writes.cv.notify_all();
    resend(n, std::move(list), i + 1, std::move(waiters));
  };
  nfs_.write(a, std::move(on_reply), &e->who);
}

void WriteBack::finish_commit(const std::shared_ptr<Node>& n, Waiters waiters, int err) {
  FileWrites& w = n->writes;
  bool again = false;
  {
    std::lock_guard lk(w.mu);
    if (err != 0) fail_locked(w, err);
    // Each flush or fsync waiting now is told of what its open was not.
    // Answered under the lock (each answer is a FUSE reply or a promise),
    // so a flush that a reply lets in finds the error marked told.
    for (auto& [done, seen] : waiters) {
      if (!done) continue;
      const std::uint32_t now = w.error_seq;
      const bool untold = seen->load() != now;
      if (done(untold ? w.error : 0) && untold) {
        seen->store(now);
        w.error_told = true;
      }
    }
    again = !w.commit_waiters.empty();  // queued while this round ran: their data needs a round of its own
    w.committing = again;
  }
  if (again) return start_commit(n, {});
  untrack_if_clean(*n);
}

std::uint64_t WriteBack::pending_end(Node& n) {
  std::lock_guard lk(n.writes.mu);
  std::uint64_t end = 0;
  for (auto& e : n.writes.extents) {
    if (e.len > 0) end = std::max(end, e.offset + e.len);
  }
  return end;
}

void WriteBack::truncate(Node& n, std::uint64_t size) {
  FileWrites& w = n.writes;
  std::lock_guard lk(w.mu);
  for (auto it = w.extents.begin(); it != w.extents.end();) {
    Extent& e = *it++;
    if (e.state == State::sending || e.offset + e.len <= size) continue;
    e.len = static_cast<std::uint32_t>(e.offset >= size ? 0 : size - e.offset);
    // No commit round holds a filling extent, and an empty WRITE would fail.
    if (e.len == 0 && w.filling == &e) {
      w.filling = nullptr;
      drop_locked(w, &e);
    }
  }
}

bool WriteBack::idle(Node& n) {
  std::lock_guard lk(n.writes.mu);
  return n.writes.extents.empty() && n.writes.in_flight == 0;
}

void WriteBack::track(const std::shared_ptr<Node>& n) {
  std::lock_guard lk(mu_);
  dirty_.try_emplace(n.get(), n);
}

void WriteBack::untrack_if_clean(Node& n) {
  std::lock_guard wl(n.writes.mu);
  if (!n.writes.extents.empty() || n.writes.in_flight > 0 || n.writes.committing) return;
  std::lock_guard lk(mu_);
  dirty_.erase(&n);
}

void WriteBack::commit_all() {
  std::vector<std::shared_ptr<Node>> nodes;
  {
    std::lock_guard lk(mu_);
    for (auto& [p, n] : dirty_) nodes.push_back(n);
  }
  // A pool ran out: what is still being sent holds chunks too, so each round
  // waits for its WRITEs and commits them. Committing only what was unstable
  // freed next to nothing when replies were slow (RDMA: the server pulls the
  // data first), and the writers then waited for a new write to try again.
  for (auto& n : nodes) drain(n, [this, n] { enqueue_commit(n, {}); });
}

WriteBack::Committed WriteBack::commit_everything() {
  stop_flusher();  // ORDER: no WRITE or COMMIT of its own goes out after this
  std::vector<std::shared_ptr<Node>> nodes;
  {
    std::lock_guard lk(mu_);
    for (auto& [p, n] : dirty_) nodes.push_back(n);
  }
  if (nodes.empty()) return {};
  struct Left {
    std::mutex mu;
    std::condition_variable cv;
    std::size_t files = 0;
    std::size_t failed = 0;
  };
  auto left = std::make_shared<Left>();
  left->files = nodes.size();
  client::CallOwner nobody(0);
  for (auto& n : nodes) {
    commit(n, [left](int err) {
      if (err) spdlog::error("nfs: data written before the unmount was not committed: {}", std::strerror(err));
      std::lock_guard lk(left->mu);
      if (err) ++left->failed;
      if (--left->files == 0) left->cv.notify_all();
      return true;
    });
  }
  std::unique_lock lk(left->mu);
  while (!left->cv.wait_for(lk, std::chrono::seconds(30), [&] { return left->files == 0; })) {
    spdlog::warn("nfs: waiting for the server to take what {} files still hold before exiting (SIGKILL loses it)",
                 left->files);
  }
  return {nodes.size(), left->failed};
}

void WriteBack::flusher_loop() {
  std::unique_lock lk(mu_);
  while (!stopping_) {
    cv_.wait_for(lk, std::chrono::milliseconds(500), [&] { return stopping_ || commit_soon_; });
    if (stopping_) break;
    bool now_all = std::exchange(commit_soon_, false);
    std::vector<std::shared_ptr<Node>> nodes;
    for (auto& [p, n] : dirty_) nodes.push_back(n);
    lk.unlock();
    auto now = Clock::now();
    for (auto& n : nodes) {
      Clock::time_point last;
      {
        std::lock_guard wl(n->writes.mu);
        last = n->writes.last_write;
      }
      if (now_all || now - last > kCommitAfter) {
        commit(n, nullptr);
      } else if (now - last > kSendAfter) {
        drain(n, [] {});
      }
    }
    lk.lock();
  }
}

}  // namespace nfsrdma::fuse
