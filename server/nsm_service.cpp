#include "server/nsm_service.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "lib/base/log.hpp"
#include "server/identity.hpp"

namespace nfsrdma::server {

namespace {

bool write_synced(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  return ok && ::rename(tmp.c_str(), path.c_str()) == 0;
}

std::string read_all(const std::string& path) {
  std::string out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[1100];
  ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n > 0) out.assign(buf, static_cast<std::size_t>(n));
  return out;
}

std::string hex(const Address& a) {
  std::string s;
  char b[3];
  for (auto c : a) {
    std::snprintf(b, sizeof b, "%02x", c);
    s += b;
  }
  return s;
}

bool unhex(const std::string& s, Address& a) {
  if (s.size() != 32) return false;
  for (std::size_t i = 0; i < 16; ++i) {
    unsigned v = 0;
    if (std::sscanf(s.c_str() + 2 * i, "%2x", &v) != 1) return false;
    a[i] = static_cast<std::uint8_t>(v);
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<StatusMonitor>> StatusMonitor::open(const std::string& state_dir) {
  std::unique_ptr<StatusMonitor> m(new StatusMonitor(state_dir + "/nsm"));
  for (const std::string& d : {state_dir, m->dir_, m->dir_ + "/sm"}) {
    if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) return sys_error(errno, "cannot create " + d);
  }
  const std::string text = read_all(m->dir_ + "/state");
  m->state_ = text.empty() ? 0 : std::atoi(text.c_str());
  std::lock_guard lk(m->mu_);
  if (!m->bump_state_locked()) return sys_error(errno, "cannot write " + m->dir_ + "/state");
  if (DIR* d = ::opendir((m->dir_ + "/sm").c_str())) {
    while (dirent* e = ::readdir(d)) {
      Client c;
      if (!unhex(e->d_name, c.addr) || m->previous_.size() == kMaxClients) continue;
      c.name = read_all(m->dir_ + "/sm/" + e->d_name);
      m->previous_.push_back(c);
      m->monitored_.push_back(c.addr);
    }
    ::closedir(d);
  }
  return m;
}

bool StatusMonitor::bump_state_locked() {
  // Odd while up (XNFS 11.1); never below what a client saw before.
  state_ = state_ < 1 ? 1 : state_ + (state_ % 2 ? 2 : 1);
  return write_synced(dir_ + "/state", std::to_string(state_) + "\n");
}

std::int32_t StatusMonitor::state() const {
  std::lock_guard lk(mu_);
  return state_;
}

std::string StatusMonitor::record_path(const Address& addr) const { return dir_ + "/sm/" + hex(addr); }

bool StatusMonitor::monitor(const Address& addr, const std::string& name) {
  std::lock_guard lk(mu_);
  if (std::find(monitored_.begin(), monitored_.end(), addr) != monitored_.end()) return true;
  if (monitored_.size() >= kMaxClients) {
    NFSRDMA_LOG_LIMITED(warn, "nsm: {} client hosts hold locks, the most this server records", monitored_.size());
    return false;
  }
  // As root, whatever the worker ran as last: the state directory is root's
  // (a squashed client's call would otherwise leave nothing recorded).
  if (!become_root() || !write_synced(record_path(addr), name)) {
    NFSRDMA_LOG_LIMITED(err, "nsm: cannot record a client holding locks in {}: {}", dir_, std::strerror(errno));
    return false;
  }
  monitored_.push_back(addr);
  return true;
}

void StatusMonitor::unmonitor(const Address& addr) {
  std::lock_guard lk(mu_);
  if (std::erase(monitored_, addr) > 0 && become_root()) ::unlink(record_path(addr).c_str());
}

void StatusMonitor::set_handlers(std::function<void(const std::string&, const Address&)> on_reboot,
                                 std::function<void(const Watcher&, const nsm1::status&)> call_watcher) {
  std::lock_guard lk(mu_);
  on_reboot_ = std::move(on_reboot);
  call_watcher_ = std::move(call_watcher);
}

rpc::AcceptStat StatusMonitor::handle(const CallContext& ctx, std::uint32_t proc, xdr::Decoder& in,
                                      xdr::Encoder& out) {
  using P = nsm1::Proc;
  // MON, UNMON and SIMU_CRASH change what this host does: only its own
  // processes may ask, as rpc.statd allows only loopback callers.
  const bool local = rpc::is_loopback(ctx.peer.addr);
  switch (static_cast<P>(proc)) {
    case P::NULL_: return rpc::AcceptStat::success;
    case P::STAT: {
      nsm1::sm_name a;
      if (!xdr::decode(in, a).ok()) return rpc::AcceptStat::garbage_args;
      nsm1::sm_stat_res r{nsm1::res::stat_succ, state()};
      codec(out, r);
      return rpc::AcceptStat::success;
    }
    case P::MON: {
      nsm1::mon a;
      if (!xdr::decode(in, a).ok()) return rpc::AcceptStat::garbage_args;
      nsm1::sm_stat_res r{nsm1::res::stat_fail, 0};
      std::lock_guard lk(mu_);
      r.state = state_;
      auto same = [&](const Watcher& w) { return w.id.mon_name == a.id.mon_name && w.id.id.my_name == a.id.id.my_name; };
      if (local && (std::any_of(watchers_.begin(), watchers_.end(), same) || watchers_.size() < kMaxWatchers)) {
        std::erase_if(watchers_, same);
        watchers_.push_back({a.id, a.priv});
        r.res_stat = nsm1::res::stat_succ;
      }
      codec(out, r);
      return rpc::AcceptStat::success;
    }
    case P::UNMON:
    case P::UNMON_ALL: {
      nsm1::mon_id a;
      bool ok = static_cast<P>(proc) == P::UNMON ? xdr::decode(in, a).ok() : xdr::decode(in, a.id).ok();
      if (!ok) return rpc::AcceptStat::garbage_args;
      std::lock_guard lk(mu_);
      if (local) {
        std::erase_if(watchers_, [&](const Watcher& w) {
          return w.id.id.my_name == a.id.my_name && (static_cast<P>(proc) == P::UNMON_ALL || w.id.mon_name == a.mon_name);
        });
      }
      nsm1::sm_stat r{state_};
      codec(out, r);
      return rpc::AcceptStat::success;
    }
    case P::SIMU_CRASH: {
      std::lock_guard lk(mu_);
      if (local && !bump_state_locked()) spdlog::error("nsm: cannot write {}/state", dir_);
      return rpc::AcceptStat::success;
    }
    case P::NOTIFY: {
      nsm1::stat_chge a;
      if (!xdr::decode(in, a).ok()) return rpc::AcceptStat::garbage_args;
      spdlog::info("nsm: {} ({}) restarted, state {}", a.mon_name, ctx.peer.describe(), a.state);
      std::function<void(const std::string&, const Address&)> on_reboot;
      std::function<void(const Watcher&, const nsm1::status&)> call_watcher;
      std::vector<std::pair<Watcher, nsm1::status>> calls;
      {
        std::lock_guard lk(mu_);
        on_reboot = on_reboot_;
        call_watcher = call_watcher_;
        for (const auto& w : watchers_) {
          if (w.id.mon_name == a.mon_name) calls.push_back({w, nsm1::status{a.mon_name, a.state, w.priv}});
        }
      }
      if (on_reboot) on_reboot(a.mon_name, rpc::to_v6(ctx.peer.addr));
      for (const auto& [w, s] : calls) {
        if (call_watcher) call_watcher(w, s);
      }
      return rpc::AcceptStat::success;
    }
  }
  return rpc::AcceptStat::proc_unavail;
}

}  // namespace nfsrdma::server
