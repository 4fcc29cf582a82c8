#include "lib/transport/tcp/tcp_loop.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "lib/base/clock.hpp"
#include "lib/base/fifo.hpp"
#include "lib/base/log.hpp"
#include "lib/base/metrics.hpp"
#include "lib/transport/tcp/record.hpp"
#include "lib/transport/tcp/tcp_server.hpp"
#include "lib/xdr/xdr.hpp"

namespace nfsrdma::tcp {

namespace {
// What a queued reply costs beyond its bytes (its queue entry and allocation).
constexpr std::size_t kQueuedOverhead = 64;
// Replies one sendmsg carries at most (up to three iovecs each: mark,
// message, a piped payload's padding). Also how many of a batch's replies
// wait for the rest: a client that sends its calls together (the fio
// engine's commit) gets the first replies while the server makes the
// others, rather than all of them after the last (32: the two took turns,
// 0.87x the 4 KiB reads of one connection at depth 32).
constexpr std::size_t kRepliesPerSend = 16;
// While a connection is corked, replies wait for the batch's end up to this
// many bytes (then they go at once).
constexpr std::size_t kCorkedBytes = 256 * 1024;
// Piped replies one connection holds queued at most before its calls stop
// being lent pipes; a head of a piped reply above this room moves to a
// buffer of its size.
constexpr unsigned kPipesPerConnection = 4;
constexpr std::size_t kSmallHead = 4096;

metrics::Gauge& connections_gauge() {
  static metrics::Gauge& g =
      metrics::registry().gauge("nfsrdma_server_connections", "Connections open, by transport", {{"transport", "tcp"}});
  return g;
}
}  // namespace

class TcpConnection final : public std::enable_shared_from_this<TcpConnection> {
 public:
  TcpConnection(TcpServer& server, TcpLoop& loop, Fd fd, rpc::Peer peer, int tag,
                std::shared_ptr<rpc::Admission::Ticket> ticket)
      : server_(server), loop_(loop), fd_(std::move(fd)), peer_(peer), addr_(rpc::to_v6(peer.addr)), tag_(tag),
        ticket_(std::move(ticket)), reader_(server.options_.max_record_bytes, &server.shelf_) {}
  ~TcpConnection() {
    std::lock_guard lk(mu_);
    held(-static_cast<std::int64_t>(held_));
    sync_record_charge(true);
    end_step();
  }

  // ---- loop thread: one read step ----
  // A step (a record parsed and handed out, or one recv) adds at most
  // step_bytes_. It is charged to the budget before it is taken, so loops
  // stepping at once cannot pass the budget together; what it adds is drawn
  // from that charge, and end_step() gives back the rest. False: a limit is
  // reached (the loop is resumed once the budget has room).
  bool begin_step() {
    {
      std::lock_guard lk(mu_);
      const auto& o = server_.options_;
      if (closed_ || in_flight_ >= o.max_calls_in_flight || held_ >= o.max_connection_bytes) return false;
    }
    while (reserved_ == 0) {
      if (!loop_.budget_allows(raw_fd_, addr_)) {
        stop_reading();  // until the budget wakes it: the loop would spin on EPOLLIN
        return false;
      }
      if (server_.budget_->try_charge(kStepKind, addr_, server_.step_bytes_)) reserved_ = server_.step_bytes_;
    }
    return true;
  }

  void end_step() {
    if (reserved_ > 0) server_.budget_->release(kStepKind, addr_, reserved_);
    reserved_ = 0;
  }

  // Charges (or releases) what the partial record holds now.
  void sync_record_charge(bool gone = false) {
    const std::size_t now = gone ? 0 : reader_.held_bytes();
    if (now > record_charged_) charge_step(rpc::MemoryBudget::tcp_records, now - record_charged_);
    if (now < record_charged_) server_.budget_->release(rpc::MemoryBudget::tcp_records, addr_, record_charged_ - now);
    record_charged_ = now;
  }

  // ---- any thread: the end of one call ----

  // `charge` is what begin_call() counted for the call.
  void reply(rpc::ReplyMessage&& reply, std::size_t charge) {
    std::lock_guard lk(mu_);
    held(-static_cast<std::int64_t>(charge));
    if (closed_) {
      --in_flight_;
      return;
    }
    // The call stays in flight, and its reply's bytes held (a pipe's pages
    // too), until the socket took them.
    Pending p;
    NFSRDMA_CHECK(reply.payload.empty());  // TCP lends no registered memory
    if (reply.pipe) {
      p.piped = reply.pipe.held();
      ++piped_;
      // The reply's room was sized for the data: it goes back, and the
      // head waits in a small buffer.
      if (reply.bytes.capacity() > kSmallHead) {
        p.bytes = server_.shelf_.take(reply.bytes.size());
        p.bytes.assign(reply.bytes.begin(), reply.bytes.end());
        server_.shelf_.give(std::move(reply.bytes));
      }
    }
    if (p.bytes.empty()) p.bytes = std::move(reply.bytes);
    p.pad = xdr::pad4(p.piped) - p.piped;
    p.mark = record_mark(static_cast<std::uint32_t>(p.bytes.size() + p.piped + p.pad));
    p.pipe = std::move(reply.pipe);
    p.held = p.size() + kQueuedOverhead;
    held(static_cast<std::int64_t>(p.held));
    out_bytes_ += p.size();
    out_.emplace_back(std::move(p));
    // Held only when the loop made it while corked: a worker's reply goes
    // at once, not behind the rest of the loop's batch.
    const bool hold = corked_ && loop_.on_loop_thread() && out_.size() < kRepliesPerSend && out_bytes_ < kCorkedBytes;
    if (!blocked_ && !hold) flush_locked();
    update_events_locked();
  }

  // Loop thread, around the calls of one readable turn: the replies the
  // loop makes meanwhile (inline calls) wait in out_, and leave together in
  // one sendmsg at uncork() or when a send's most have gathered: one
  // syscall and one wake of the client for the batch, not one per call.
  void cork() {
    std::lock_guard lk(mu_);
    corked_ = true;
  }
  void uncork() {
    std::lock_guard lk(mu_);
    corked_ = false;
    send_batch_locked();
  }

  void no_reply(std::size_t charge) {
    std::lock_guard lk(mu_);
    held(-static_cast<std::int64_t>(charge));
    --in_flight_;
    update_events_locked();
  }

  // Any thread: ends the connection's calls and shuts the socket, whose
  // hang-up the loop sees and answers with release() (the descriptor stays
  // open until then, so accept() cannot reuse its number meanwhile).
  void close() {
    std::lock_guard lk(mu_);
    close_locked();
  }

  // Loop thread: leaves the epoll set and closes the descriptor.
  void release() {
    std::lock_guard lk(mu_);
    close_locked();
    if (!fd_.valid()) return;
    // ORDER: leave the epoll set before the fd number can be reused by accept().
    loop_.unwatch(raw_fd_);
    fd_.reset();
  }

  const rpc::Peer& peer() const { return peer_; }

  // Whether the connection's calls may take pipes (rpc::IncomingCall::pipes):
  // a client that does not read its replies holds a few of the server's
  // pipes, not all (the rest of its READs are copied, and bounded by its
  // held bytes).
  bool may_take_pipes() const { return piped_.load(std::memory_order_relaxed) < kPipesPerConnection; }

  // ---- loop thread ----

  // Counts a call handed out with `charge` bytes; `unparsed`: bytes after it
  // are already received. Returns whether the loop may read on.
  // Ends the step: what the call leaves of its charge is given back before
  // the budget is asked whether the connection may read on.
  bool begin_call(std::size_t charge, bool unparsed) {
    std::lock_guard lk(mu_);
    ++in_flight_;
    charge_step(rpc::MemoryBudget::tcp_calls, charge);
    held_ += charge;
    end_step();
    unparsed_ = unparsed;
    update_events_locked();
    return may_read_locked();
  }

  void refresh_events() {
    std::lock_guard lk(mu_);
    update_events_locked();
  }

  void stop_reading() {
    std::lock_guard lk(mu_);
    if (closed_ || !(events_ & EPOLLIN)) return;
    events_ &= ~static_cast<std::uint32_t>(EPOLLIN);
    loop_.rewatch(raw_fd_, events_);
  }

  int tag() const { return tag_; }
  bool secure() const {
    const auto& a = peer_.addr;
    std::uint16_t port = a.ss_family == AF_INET6 ? ntohs(reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port)
                                                 : ntohs(reinterpret_cast<const sockaddr_in*>(&a)->sin_port);
    return port < 1024;
  }
  RecordReader& reader() { return reader_; }
  rpc::Admission::Ticket& ticket() { return *ticket_; }
  int fd() const { return raw_fd_; }

  // Returns false when the socket failed and the connection should go.
  bool on_writable() {
    std::lock_guard lk(mu_);
    if (closed_) return false;
    blocked_ = false;
    bool ok = flush_locked();
    update_events_locked();
    return ok;
  }

  bool has_pending_output() {
    std::lock_guard lk(mu_);
    return !closed_ && !out_.empty();
  }

  void register_with_epoll() {
    std::lock_guard lk(mu_);
    raw_fd_ = fd_.get();
    events_ = EPOLLIN;
    if (!loop_.watch(raw_fd_, events_)) spdlog::warn("tcp: cannot watch the connection from {}: {}", peer_.describe(), std::strerror(errno));
  }

 private:
  // A reply on the wire: its record mark, `bytes`, then (when piped) the
  // payload in `pipe` and its XDR padding.
  struct Pending {
    std::array<std::uint8_t, 4> mark;
    std::vector<std::uint8_t> bytes;
    PipePool::Pipe pipe;
    std::size_t piped = 0;  // the payload's length in `pipe`
    std::size_t pad = 0;
    std::size_t sent = 0;  // counts the mark's 4 bytes first
    std::size_t held = 0;  // what it counts in held_
    std::size_t size() const { return 4 + bytes.size() + piped + pad; }
    // Where the pipe's part starts and ends.
    std::size_t pipe_from() const { return 4 + bytes.size(); }
    std::size_t pipe_to() const { return pipe_from() + piped; }
  };

  bool may_read_locked() const {
    const auto& o = server_.options_;
    return in_flight_ < o.max_calls_in_flight && held_ < o.max_connection_bytes &&
           loop_.budget_allows(raw_fd_, addr_);
  }

  // What the step adds, drawn from its charge first.
  void charge_step(rpc::MemoryBudget::Kind kind, std::size_t bytes) {
    const std::size_t drawn = std::min(bytes, reserved_);
    reserved_ -= drawn;
    if (drawn > 0 && kind != kStepKind) server_.budget_->relabel(kStepKind, kind, drawn);
    if (bytes > drawn) server_.budget_->charge(kind, addr_, bytes - drawn);
  }

  // held_ and the budget move together (mu_ held).
  void held(std::int64_t delta) {
    if (delta > 0) server_.budget_->charge(rpc::MemoryBudget::tcp_calls, addr_, static_cast<std::size_t>(delta));
    if (delta < 0) server_.budget_->release(rpc::MemoryBudget::tcp_calls, addr_, static_cast<std::size_t>(-delta));
    held_ = static_cast<std::size_t>(static_cast<std::int64_t>(held_) + delta);
  }

  // The batch's replies, unless the socket is full (they go at EPOLLOUT).
  void send_batch_locked() {
    if (closed_ || blocked_ || out_.empty()) return;
    flush_locked();
    update_events_locked();
  }

  // Writes what the socket takes; when it takes less, the rest waits for
  // EPOLLOUT (blocked_). Returns false on a socket error. Bytes go by
  // sendmsg, as many replies as fit one; a pipe's part by splice.
  bool flush_locked() {
    static constexpr std::uint8_t kZeros[4] = {};
    while (!out_.empty()) {
      Pending& front = out_.front();
      if (front.piped > 0 && front.sent >= front.pipe_from() && front.sent < front.pipe_to()) {
        ssize_t w = ::splice(front.pipe.read_end(), nullptr, fd_.get(), nullptr, front.pipe_to() - front.sent,
                             SPLICE_F_NONBLOCK | (front.pad > 0 || out_.size() > 1 ? SPLICE_F_MORE : 0));
        if (Sent r = sent(w); r != Sent::took) {
          if (r == Sent::retry) continue;
          return !closed_;
        }
        front.pipe.drained(static_cast<std::size_t>(w));
        advance(static_cast<std::size_t>(w));
        continue;
      }
      iovec iov[3 * kRepliesPerSend];
      int n = 0;
      bool pipe_next = false;
      for (auto it = out_.begin(); it != out_.end() && n + 3 <= static_cast<int>(std::size(iov)); ++it) {
        const std::size_t at = it->sent;
        if (at < 4) iov[n++] = {it->mark.data() + at, 4 - at};
        const std::size_t b = at > 4 ? at - 4 : 0;
        if (b < it->bytes.size()) iov[n++] = {it->bytes.data() + b, it->bytes.size() - b};
        if (it->piped > 0 && at < it->pipe_to()) {
          pipe_next = true;  // the payload goes by splice, after these
          break;
        }
        const std::size_t padded = std::max(at, it->pipe_to()) - it->pipe_to();
        if (padded < it->pad) iov[n++] = {const_cast<std::uint8_t*>(kZeros), it->pad - padded};
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<std::size_t>(n);
      ssize_t w = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT | (pipe_next ? MSG_MORE : 0));
      if (Sent r = sent(w); r != Sent::took) {
        if (r == Sent::retry) continue;
        return !closed_;
      }
      advance(static_cast<std::size_t>(w));
    }
    return true;
  }

  // After a send or splice: whether it took bytes (took), was interrupted
  // (retry), or did not: the socket is full (blocked_) or failed (the
  // connection closes).
  enum class Sent { took, retry, stop };
  Sent sent(ssize_t w) {
    if (w > 0) {
      ticket_->touch();
      return Sent::took;
    }
    if (w < 0 && errno == EINTR) return Sent::retry;
    if (w < 0 && errno == EAGAIN) {
      blocked_ = true;
      return Sent::stop;
    }
    NFSRDMA_LOG_LIMITED(info, "tcp: send to {} failed: {}", peer_.describe(), w < 0 ? std::strerror(errno) : "nothing taken");
    close_locked();
    return Sent::stop;
  }

  // `n` bytes of the queue went: the replies they finish end their calls.
  void advance(std::size_t n) {
    while (n > 0 && !out_.empty()) {
      Pending& p = out_.front();
      const std::size_t rest = p.size() - p.sent;
      if (n < rest) {
        p.sent += n;
        return;
      }
      n -= rest;
      if (p.piped > 0) --piped_;
      out_bytes_ -= p.size();
      held(-static_cast<std::int64_t>(p.held));
      --in_flight_;
      server_.shelf_.give(std::move(p.bytes));
      out_.pop_front();
    }
  }

  void update_events_locked() {
    if (closed_) return;
    std::uint32_t want = 0;
    if (!server_.intake_stopped_.load() && may_read_locked()) want |= EPOLLIN;
    if (blocked_) want |= EPOLLOUT;  // corked replies go at uncork(), without it
    if (want == events_) return;
    if ((want & EPOLLIN) && !(events_ & EPOLLIN) && unparsed_) loop_.resume(raw_fd_);
    events_ = want;
    loop_.rewatch(raw_fd_, want);
  }

  void close_locked() {
    if (closed_) return;
    closed_ = true;
    // Replies never sent end their calls now.
    for (auto& p : out_) {
      held(-static_cast<std::int64_t>(p.held));
      server_.shelf_.give(std::move(p.bytes));
    }
    in_flight_ -= out_.size();
    out_.clear();
    piped_ = 0;
    out_bytes_ = 0;
    // Both ways shut: epoll reports a hang-up whatever events are asked for.
    if (fd_.valid()) ::shutdown(fd_.get(), SHUT_RDWR);
  }

  TcpServer& server_;
  TcpLoop& loop_;
  std::mutex mu_;  // guards everything below except reader_ (loop thread only)
  Fd fd_;
  int raw_fd_ = -1;
  rpc::Peer peer_;
  rpc::Address addr_;
  int tag_;
  std::shared_ptr<rpc::Admission::Ticket> ticket_;
  RecordReader reader_;
  Fifo<Pending> out_;  // replies not yet taken by the socket, in order
  std::size_t out_bytes_ = 0;  // their bytes, marks included
  std::atomic<unsigned> piped_{0};  // queued replies with a pipe (read without mu_: may_take_pipes)
  bool corked_ = false;   // the loop is running a receive batch's calls (cork())
  bool blocked_ = false;  // the socket took less than offered: the rest goes at EPOLLOUT
  std::size_t in_flight_ = 0;  // calls handed out whose reply has not left
  std::size_t held_ = 0;       // bytes those calls count for (charged to the budget)
  std::size_t record_charged_ = 0;  // reader_'s bytes charged to the budget (loop thread)
  static constexpr rpc::MemoryBudget::Kind kStepKind = rpc::MemoryBudget::tcp_records;
  std::size_t reserved_ = 0;  // what is left of the step's charge (loop thread)
  bool unparsed_ = false;      // received bytes wait in reader_
  std::uint32_t events_ = 0;
  bool closed_ = false;
};

namespace {

// The way back for one call: it knows what the call was charged.
// Holds the call's message, which IncomingCall::message points into, until the call ends.
class TcpCallChannel final : public rpc::ReplyChannel {
 public:
  TcpCallChannel(std::shared_ptr<TcpConnection> c, std::size_t charge, std::vector<std::uint8_t> message,
                 BufferShelf& shelf)
      : conn_(std::move(c)), charge_(charge), message_(std::move(message)), shelf_(shelf) {}
  ~TcpCallChannel() override { shelf_.give(std::move(message_)); }
  std::span<const std::uint8_t> message() const { return message_; }
  void send(rpc::ReplyMessage&& reply) override { conn_->reply(std::move(reply), charge_); }
  void drop() override { conn_->no_reply(charge_); }
  void close() override { conn_->close(); }
  const rpc::Peer& peer() const override { return conn_->peer(); }

 private:
  std::shared_ptr<TcpConnection> conn_;
  std::size_t charge_;
  std::vector<std::uint8_t> message_;
  BufferShelf& shelf_;
};

}  // namespace

TcpLoop::TcpLoop(TcpServer& server, EventLoop& loop, unsigned index)
    : server_(server), loop_(loop), index_(index) {
  loop_.attach(*this);
}

TcpLoop::~TcpLoop() { drop_all(); }

void TcpLoop::adopt(Fd fd, const rpc::Peer& peer, int tag, std::shared_ptr<rpc::Admission::Ticket> ticket) {
  auto c = std::make_shared<TcpConnection>(server_, *this, std::move(fd), peer, tag, std::move(ticket));
  loop_.add_load(1);
  server_.connection_count_.fetch_add(1);
  connections_gauge().add(1);
  inbox_.post({Posted::Kind::adopt, std::move(c)});
}

void TcpLoop::close_ticket(std::uint64_t id, const char* why) {
  inbox_.post({Posted::Kind::close, nullptr, id, why});
}

void TcpLoop::wake() { loop_.waker().wake_now(); }

void TcpLoop::resume(int fd) { inbox_.post({Posted::Kind::resume, nullptr, 0, nullptr, fd}); }

bool TcpLoop::budget_allows(int fd, const rpc::Address& addr) {
  if (server_.budget_->room(addr, server_.step_bytes_)) return true;
  {
    std::lock_guard lk(budget_mu_);
    if (std::find(budget_waiting_.begin(), budget_waiting_.end(), fd) == budget_waiting_.end()) {
      budget_waiting_.push_back(fd);
    }
  }
  // ORDER: listed, then the wait: a release that makes room after it wakes
  // every listed connection; one before it, and wait() says there is room.
  return !server_.budget_->wait(rpc::MemoryBudget::tcp_calls, addr, server_.step_bytes_);
}

void TcpLoop::on_budget_room() {
  std::lock_guard lk(budget_mu_);  // before the inbox's, which takes no other lock
  for (int fd : budget_waiting_) resume(fd);
  budget_waiting_.clear();  // keeps its room
}

void TcpLoop::take_posted() {
  inbox_.take(posted_);
  for (Posted& p : posted_) {
    switch (p.kind) {
      case Posted::Kind::adopt: {
        auto& c = p.conn;
        c->register_with_epoll();
        if (intake_applied_) c->refresh_events();  // adopted as intake stopped: not read
        spdlog::debug("tcp: connection from {} on event loop {}", c->peer().describe(), index_);
        connections_[c->fd()] = std::move(c);
        break;
      }
      case Posted::Kind::close:
        for (auto& [fd, c] : connections_) {
          if (c->ticket().id() != p.ticket) continue;
          spdlog::debug("tcp: closing the connection from {} ({})", c->peer().describe(), p.why);
          close_connection(fd);
          break;
        }
        break;
      case Posted::Kind::resume: {
        auto it = connections_.find(p.fd);
        if (it == connections_.end() || server_.intake_stopped_) break;
        it->second->refresh_events();  // EPOLLIN again, if it was off for the budget
        on_readable(std::shared_ptr(it->second));
        break;
      }
    }
  }
}

void TcpLoop::on_readable(const std::shared_ptr<TcpConnection>& c) {
  RecordReader& reader = c->reader();
  // Bounded per wakeup so one busy client cannot starve the others.
  struct StepEnd {
    TcpConnection& c;
    ~StepEnd() { c.end_step(); }
  };
  struct Cork {
    TcpConnection& c;
    explicit Cork(TcpConnection& conn) : c(conn) { c.cork(); }
    ~Cork() { c.uncork(); }
  } cork{*c};
  // A recv that filled less than its buffer emptied the socket: what comes
  // later raises EPOLLIN again (level-triggered), so the loop goes back to
  // epoll_wait instead of a recv that would find nothing.
  bool drained = false;
  for (int round = 0; round < 64; ++round) {
    if (server_.intake_stopped_) return;  // read as intake stopped: nothing more is handed out
    // Resumed or not, nothing is handed out past a limit: the calls' count,
    // the connection's bytes, the memory budget (which wakes it later).
    if (!c->begin_step()) return;
    StepEnd step{*c};
    auto parsed = reader.parse();
    c->sync_record_charge();
    if (!parsed) {
      NFSRDMA_LOG_LIMITED(warn, "tcp: closing connection from {}: {}", c->peer().describe(), parsed.error().describe());
      close_connection(c->fd());
      return;
    }
    if (*parsed) {
      std::vector<std::uint8_t> message = reader.take();
      c->sync_record_charge();
      const std::size_t bound = server_.options_.reply_bound ? server_.options_.reply_bound(message) : server_.options_.max_record_bytes;
      const std::size_t charge = message.size() + bound;
      const bool more = c->begin_call(charge, reader.has_unparsed());
      auto channel = std::allocate_shared<TcpCallChannel>(std::pmr::polymorphic_allocator<TcpCallChannel>(&server_.channels_),
                                                          c, charge, std::move(message), server_.shelf_);
      rpc::IncomingCall call;
      // The reply is built in kept room, room for the bound when it is new,
      // so it fits the next such reply when it comes back. A bound of a
      // whole record is the default for calls the server did not size
      // (MOUNT, NLM...), whose replies are small.
      if (bound < server_.options_.max_record_bytes) {
        call.reply_buffer = server_.shelf_.take(bound);
        call.reply_buffer.reserve(bound);
      }
      call.message = xdr::Parts{channel->message()};
      if (c->may_take_pipes()) call.pipes = &server_.pipes_;
      call.channel = std::move(channel);
      call.listener = c->tag();
      call.secure = c->secure();
      server_.handler_(std::move(call));
      if (!more) return;
      continue;
    }
    // The received calls are all handed out. When the last recv emptied the
    // socket, their replies go now (at the cork's end), before a recv that
    // would find nothing: a lone call's reply waits for no syscall. When it
    // filled its buffer, more calls are there, and the replies wait for
    // theirs (up to a send's most): a client sending calls of 4 KiB brings
    // about 4 to a recv, and their replies each took a sendmsg of their own.
    if (drained) return;
    auto buf = reader.buffer();
    ssize_t n = ::recv(c->fd(), buf.data(), buf.size(), 0);
    if (n == 0) {
      spdlog::debug("tcp: {} closed the connection", c->peer().describe());
      close_connection(c->fd());
      return;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      // A reset is how many clients (libnfs among them) hang up.
      if (errno == ECONNRESET) {
        spdlog::debug("tcp: {} reset the connection", c->peer().describe());
      } else {
        NFSRDMA_LOG_LIMITED(info, "tcp: receive from {} failed: {}", c->peer().describe(), std::strerror(errno));
      }
      close_connection(c->fd());
      return;
    }
    c->ticket().touch();
    drained = static_cast<std::size_t>(n) < buf.size();
    reader.commit(static_cast<std::size_t>(n));
    c->sync_record_charge();
  }
  // Out of rounds: records already received will not raise EPOLLIN again,
  // nor will one the last recv finished in place (read straight into it).
  if (reader.has_unparsed() || reader.in_record()) resume(c->fd());
}

void TcpLoop::close_connection(int fd) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  it->second->release();
  server_.admission_.remove(it->second->ticket());
  connections_.erase(it);
  loop_.add_load(-1);
  server_.connection_count_.fetch_sub(1);
  connections_gauge().add(-1);
}

void TcpLoop::drop_all() {
  std::size_t adopted = 0;  // after the loop's end (a stop racing an accept)
  inbox_.take(posted_);
  for (Posted& p : posted_) {
    if (p.kind != Posted::Kind::adopt) continue;
    p.conn->release();
    ++adopted;
  }
  posted_.clear();
  for (auto& [fd, c] : connections_) c->release();
  const auto n = static_cast<std::int64_t>(connections_.size() + adopted);
  connections_.clear();
  loop_.add_load(static_cast<std::ptrdiff_t>(-n));
  server_.connection_count_.fetch_sub(static_cast<std::size_t>(n));
  connections_gauge().add(-n);
}

bool TcpLoop::turn(std::int64_t now) {
  take_posted();
  if (server_.intake_stopped_ && !intake_applied_) {
    intake_applied_ = true;
    if (index_ == 0) server_.drop_listeners(*this);
    for (auto& [fd, c] : connections_) c->refresh_events();
  }
  if (index_ == 0 && now >= next_expiry_) {
    if (next_expiry_ != 0) server_.close_expired();
    next_expiry_ = now + 1'000'000'000;
  }
  return false;  // the rest comes as events
}

bool TcpLoop::finished() {
  if (dropped_) return true;
  if (!server_.stopping_) return false;
  const std::int64_t now = steady_ns();
  if (stop_deadline_ == 0) stop_deadline_ = now + 5'000'000'000;
  bool pending = false;
  for (auto& [fd, c] : connections_) pending |= c->has_pending_output();
  if (pending && now < stop_deadline_) return false;
  drop_all();
  dropped_ = true;
  return true;
}

void TcpLoop::on_event(std::uint64_t key, std::uint32_t events) {
  const int fd = static_cast<int>(key);
  if (index_ == 0 && server_.accept_from(fd)) return;
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  auto c = it->second;
  if (events & (EPOLLHUP | EPOLLERR)) {
    // Reset, or shut in both directions: no reply can reach the client.
    spdlog::debug("tcp: {} hung up", c->peer().describe());
    close_connection(fd);
    return;
  }
  if ((events & EPOLLOUT) && !c->on_writable()) {
    close_connection(fd);
    return;
  }
  if ((events & EPOLLIN) && !server_.intake_stopped_) on_readable(c);
}

}  // namespace nfsrdma::tcp
