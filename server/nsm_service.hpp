// NSM version 1 (nsm1.hpp) as the server's own status monitor, in place of
// rpc.statd: the state number, kept in STATE_DIR/nsm/state and made the next
// odd number on every start; a record per client address that holds locks
// (STATE_DIR/nsm/sm/<address>, written and synced before its first lock is
// granted), so that after a restart those clients are sent SM_NOTIFY and get
// a grace period to reclaim; and the protocol: a peer's NOTIFY (it restarted)
// frees what it held here, and local processes may MON/UNMON hosts and are
// called back when one restarts, as rpc.statd does for the kernel's lockd.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lib/nfs3/nsm1.hpp"
#include "lib/rpc/rpc.hpp"
#include "server/call_context.hpp"
#include "server/lock_manager.hpp"

namespace nfsrdma::server {

class StatusMonitor {
 public:
  struct Client {
    Address addr{};
    std::string name;  // its caller_name
  };
  static constexpr std::size_t kMaxClients = 4096;
  static constexpr std::size_t kMaxWatchers = 1024;

  // Reads STATE_DIR/nsm, moves the state number on and keeps it; the clients
  // recorded there held locks before this start.
  static Result<std::unique_ptr<StatusMonitor>> open(const std::string& state_dir);

  std::int32_t state() const;
  std::vector<Client> restarted_clients() const { return previous_; }
  // Records that `addr` holds locks, on disk; false when it cannot be (too
  // many clients, a write that failed): the lock must then not be granted.
  bool monitor(const Address& addr, const std::string& name);
  void unmonitor(const Address& addr);

  // A peer restarted (its NOTIFY): `on_reboot` frees what it held; local
  // watchers of that name are handed to `call_watcher`.
  struct Watcher {
    nsm1::mon_id id;
    std::array<std::uint8_t, 16> priv{};
  };
  void set_handlers(std::function<void(const std::string& name, const Address& addr)> on_reboot,
                    std::function<void(const Watcher&, const nsm1::status&)> call_watcher);
  rpc::AcceptStat handle(const CallContext& ctx, std::uint32_t proc, xdr::Decoder& in, xdr::Encoder& out);

 private:
  explicit StatusMonitor(std::string dir) : dir_(std::move(dir)) {}
  std::string record_path(const Address& addr) const;
  bool bump_state_locked();

  const std::string dir_;  // STATE_DIR/nsm
  mutable std::mutex mu_;  // guards everything below
  std::int32_t state_ = 1;
  std::vector<Client> previous_;
  std::vector<Address> monitored_;  // recorded on disk now
  std::vector<Watcher> watchers_;
  std::function<void(const std::string&, const Address&)> on_reboot_;
  std::function<void(const Watcher&, const nsm1::status&)> call_watcher_;
};

}  // namespace nfsrdma::server
