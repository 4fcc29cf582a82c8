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

WriteBack::WriteBack(client::NfsClient& nfs, BufferPool& pool) : nfs_(nfs), pool_(pool) {
  flusher_ = std::thread([this] { flusher_loop(); });
}

WriteBack::~WriteBack() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  flusher_.join();
}

int WriteBack::write(const std::shared_ptr<Node>& n, std::uint64_t offset, std::size_t size, const Fill& fill,
                     const client::Identity& who) {
  FileWrites& w = n->writes;
  const std::size_t chunk = pool_.chunk_bytes();
  NFSRDMA_CHECK(size <= chunk);
  std::vector<Extent*> to_send;
  std::unique_lock lk(w.mu);
  if (w.error) return w.error;
  w.last_write = Clock::now();
  auto overlaps = [&](const Extent& e) { return offset < e.offset + e.len && e.offset < offset + size; };
  Extent* filling = (!w.extents.empty() && w.extents.back().state == State::filling) ? &w.extents.back() : nullptr;
  // Into the chunk being filled when the write starts inside it or right after it.
  if (filling && offset >= filling->offset && offset <= filling->offset + filling->len &&
      offset + size - filling->offset <= chunk && filling->who.uid == who.uid) {
    fill(filling->buf + (offset - filling->offset));
    filling->len = std::max<std::uint32_t>(filling->len, static_cast<std::uint32_t>(offset + size - filling->offset));
    if (filling->len == chunk) {
      filling->state = State::sending;
      ++w.in_flight;
      to_send.push_back(filling);
    }
  } else {
    if (filling) {
      filling->state = State::sending;
      ++w.in_flight;
      to_send.push_back(filling);
    }
    lk.unlock();
    for (auto* e : to_send) send(n, e);
    to_send.clear();
    std::uint8_t* buf = pool_.acquire([this] { commit_all(); });
    lk.lock();
    // ORDER: overlapping data reaches the server in the order it was written.
    w.cv.wait(lk, [&] {
      for (auto& e : w.extents) {
        if (e.state == State::sending && overlaps(e)) return false;
      }
      return true;
    });
    Extent& e = w.extents.emplace_back();
    e.buf = buf;
    e.offset = offset;
    e.len = static_cast<std::uint32_t>(size);
    e.who = who;
    fill(buf);
    if (e.len == chunk) {
      e.state = State::sending;
      ++w.in_flight;
      to_send.push_back(&e);
    }
  }
  lk.unlock();
  track(n);
  for (auto* e : to_send) send(n, e);
  return 0;
}

void WriteBack::send(const std::shared_ptr<Node>& n, Extent* e) {
  WRITE3args a;
  a.file = n->fh;
  a.offset = e->offset + e->sent;
  a.count = e->len - e->sent;
  a.stable = stable_how::UNSTABLE;
  a.data = {e->buf + e->sent, a.count};
  nfs_.write(a, [this, n, e](Result<WRITE3res> r) { on_written(n, e, std::move(r)); }, &e->who);
}

void WriteBack::on_written(const std::shared_ptr<Node>& n, Extent* e, Result<WRITE3res> r) {
  FileWrites& w = n->writes;
  std::vector<std::function<void()>> run;
  bool again = false;
  {
    std::lock_guard lk(w.mu);
    auto it = std::find_if(w.extents.begin(), w.extents.end(), [&](const Extent& x) { return &x == e; });
    NFSRDMA_CHECK(it != w.extents.end());
    int err = !r ? EIO : client::nfsstat3_to_errno(r->status);
    if (!r) spdlog::warn("nfs: WRITE at {} failed: {}", e->offset, r.error().describe());
    if (err == 0 && r->count == 0) err = EIO;  // no progress: the server will not take it
    if (err != 0) {
      if (!w.error) w.error = err;
      drop_locked(w, it);
    } else if (e->sent + r->count < e->len) {
      e->sent += r->count;  // a short WRITE: send the rest
      again = true;
    } else if (r->committed == stable_how::FILE_SYNC) {
      drop_locked(w, it);
    } else {
      e->state = State::unstable;
      e->sent = 0;
      e->verf = r->verf;
    }
    if (!again && --w.in_flight == 0) run.swap(w.drained);
  }
  w.cv.notify_all();
  if (again) return send(n, e);
  for (auto& f : run) f();
  untrack_if_clean(*n);
}

void WriteBack::drop_locked(FileWrites& w, std::list<Extent>::iterator it) {
  pool_.release(it->buf);
  w.extents.erase(it);
}

void WriteBack::drain(const std::shared_ptr<Node>& n, std::function<void()> done) {
  FileWrites& w = n->writes;
  Extent* to_send = nullptr;
  {
    std::lock_guard lk(w.mu);
    if (!w.extents.empty() && w.extents.back().state == State::filling) {
      to_send = &w.extents.back();
      to_send->state = State::sending;
      ++w.in_flight;
    }
    if (w.in_flight > 0) {
      w.drained.push_back(std::move(done));
      done = nullptr;
    }
  }
  if (to_send) send(n, to_send);
  if (done) done();
}

void WriteBack::commit(const std::shared_ptr<Node>& n, std::function<void(int)> done) {
  drain(n, [this, n, done = std::move(done)]() mutable {
    FileWrites& w = n->writes;
    bool start = false;
    {
      std::lock_guard lk(w.mu);
      w.commit_waiters.push_back(std::move(done));
      if (!w.committing) start = w.committing = true;
    }
    if (start) start_commit(n);
  });
}

void WriteBack::start_commit(const std::shared_ptr<Node>& n) {
  FileWrites& w = n->writes;
  std::vector<Extent*> covered;
  client::Identity who;
  {
    std::lock_guard lk(w.mu);
    for (auto& e : w.extents) {
      if (e.state == State::unstable) covered.push_back(&e);
    }
    if (!covered.empty()) who = covered.back()->who;
  }
  if (covered.empty()) return finish_commit(n, 0);
  nfs_.call<COMMIT3res>(Proc::COMMIT, COMMIT3args{n->fh, 0, 0}, [this, n, covered](Result<COMMIT3res> r) {
    FileWrites& fw = n->writes;
    int err = !r ? EIO : client::nfsstat3_to_errno(r->status);
    std::vector<Extent*> lost;
    {
      std::lock_guard lk(fw.mu);
      for (auto* e : covered) {
        auto it = std::find_if(fw.extents.begin(), fw.extents.end(), [&](const Extent& x) { return &x == e; });
        if (err == 0 && e->verf != r->verf) {
          e->state = State::sending;  // the server restarted since this WRITE: send it again
          lost.push_back(e);
        } else {
          drop_locked(fw, it);  // committed, or lost to an error reported below
        }
      }
      if (!lost.empty()) fw.in_flight += 1;  // the resend chain, one WRITE at a time
    }
    if (!lost.empty()) {
      spdlog::info("nfs: write verifier changed (server restarted); sending {} chunks again", lost.size());
      return resend(n, std::move(lost), 0);
    }
    finish_commit(n, err);
  }, &who);
}

void WriteBack::resend(const std::shared_ptr<Node>& n, std::vector<Extent*> list, std::size_t i) {
  if (i == list.size()) {
    std::vector<std::function<void()>> run;
    {
      std::lock_guard lk(n->writes.mu);
      if (--n->writes.in_flight == 0) run.swap(n->writes.drained);
    }
    for (auto& f : run) f();
    return start_commit(n);
  }
  Extent* e = list[i];
  WRITE3args a;
  a.file = n->fh;
  a.offset = e->offset;
  a.count = e->len;
  a.stable = stable_how::FILE_SYNC;  // no verifier to trust until this lands
  a.data = {e->buf, e->len};
  nfs_.write(a, [this, n, list = std::move(list), i](Result<WRITE3res> r) mutable {
    FileWrites& w = n->writes;
    {
      std::lock_guard lk(w.mu);
      Extent* sent = list[i];
      auto it = std::find_if(w.extents.begin(), w.extents.end(), [&](const Extent& x) { return &x == sent; });
      int err = !r ? EIO : client::nfsstat3_to_errno(r->status);
      if (err == 0 && r->count < sent->len) err = EIO;
      if (err != 0 && !w.error) w.error = err;
      drop_locked(w, it);  // FILE_SYNC: stable once answered
    }
    n->writes.cv.notify_all();
    resend(n, std::move(list), i + 1);
  }, &e->who);
}

void WriteBack::finish_commit(const std::shared_ptr<Node>& n, int err) {
  FileWrites& w = n->writes;
  std::vector<std::function<void(int)>> waiters;
  {
    std::lock_guard lk(w.mu);
    if (err != 0 && !w.error) w.error = err;
    err = w.error;
    waiters.swap(w.commit_waiters);
    // Reported once, to the flush or fsync waiting now; background commits leave it for them.
    if (std::any_of(waiters.begin(), waiters.end(), [](auto& f) { return f != nullptr; })) w.error = 0;
    w.committing = false;
  }
  for (auto& f : waiters) {
    if (f) f(err);
  }
  untrack_if_clean(*n);
}

std::uint64_t WriteBack::pending_end(Node& n) {
  std::lock_guard lk(n.writes.mu);
  std::uint64_t end = 0;
  for (auto& e : n.writes.extents) end = std::max(end, e.offset + e.len);
  return end;
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
  for (auto& n : nodes) commit(n, nullptr);
}

void WriteBack::flusher_loop() {
  std::unique_lock lk(mu_);
  while (!cv_.wait_for(lk, std::chrono::milliseconds(500), [&] { return stopping_; })) {
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
      if (now - last > kCommitAfter) {
        commit(n, nullptr);
      } else if (now - last > kSendAfter) {
        drain(n, [] {});
      }
    }
    lk.lock();
  }
}

}  // namespace nfsrdma::fuse
