// Test harness: runs the real nfsrdma-server binary on a temporary export and
// talks to it with a typed, synchronous NFSv3/MOUNT client over lib/transport/tcp.
#pragma once

#include <sys/types.h>

#include <memory>
#include <set>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lib/nfs3/mount3.hpp"
#include "lib/nfs3/nfs3_procs.hpp"
#include "lib/rpc/sync_call.hpp"
#include "lib/transport/tcp/tcp_client.hpp"

namespace nfsrdma::test {

// A fresh directory under the test temp dir, removed at destruction.
class TempDir {
 public:
  TempDir();
  explicit TempDir(const std::string& under);  // a filesystem of the test's choosing
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::uint16_t free_port();

// Built with AddressSanitizer (make build-san): resident memory then counts
// its quarantine of freed blocks and its shadow, and CPU its checks, so the
// tests that bound them only report their figures there.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// A process's resident memory (KiB) and CPU time used so far (user + system, seconds).
long rss_kib(pid_t pid);
double cpu_seconds(pid_t pid);
// The names of a process's threads (/proc/PID/task/*/comm), once `count` of
// them begin with `prefix` or after 10 s: a server answers its readiness
// probe before its loops have started (the kernel completes a connection to
// a listening socket), and each loop names its thread as it starts.
std::multiset<std::string> thread_names(pid_t pid, const std::string& prefix = "", std::size_t count = 0);

// Where the RDMA tests run: libfabric's tcp provider on loopback, unless the
// soft-RoCE guest says otherwise (tests/guest/): NFSRDMA_TEST_PROVIDER
// (verbs), NFSRDMA_TEST_SERVER (the address the server listens on, on an RDMA
// device) and NFSRDMA_TEST_CLIENT (the address its clients come from).
const std::string& test_provider();
const std::string& test_server_host();
const std::string& test_client_host();

// GET `path` from a metrics endpoint on 127.0.0.1 (the whole response).
std::string scrape(std::uint16_t port, const std::string& path = "/metrics");
// The value of the series `name` (with its labels, as printed) in a scrape; 0 if absent.
double metric(const std::string& scraped, const std::string& name);

class ServerProcess {
 public:
  // `exports` are exports(5) lines; `extra` more arguments.
  ServerProcess(std::vector<std::string> exports, std::vector<std::string> extra = {});
  ~ServerProcess();

  void start();
  void stop();        // SIGTERM, and waits; returns the exit status via last_status()
  void kill_hard();   // SIGKILL
  // SIGSTOP, returning once every thread has stopped (kill() returns before
  // a thread busy on another core has). The server runs again at the
  // guard's resume() or when it goes, however a test ends.
  class Paused {
   public:
    explicit Paused(pid_t pid, bool stopped) : pid_(pid), stopped_(stopped) {}
    Paused(Paused&& o) noexcept : pid_(std::exchange(o.pid_, -1)), stopped_(o.stopped_) {}
    Paused& operator=(Paused&&) = delete;
    ~Paused() { resume(); }
    explicit operator bool() const { return stopped_; }  // every thread stopped within a second
    void resume();

   private:
    pid_t pid_;
    bool stopped_;
  };
  [[nodiscard]] Paused pause();
  int last_status() const { return status_; }
  std::uint16_t nfs_port() const { return nfs_port_; }
  std::uint16_t mount_port() const { return mount_port_; }
  std::uint16_t rdma_port() const { return rdma_port_; }
  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_; }
  std::string log() const;

 private:
  std::vector<std::string> exports_, extra_;
  TempDir state_;
  std::string log_;
  std::uint16_t nfs_port_, mount_port_, rdma_port_;
  pid_t pid_ = -1;
  int status_ = -1;
};

struct Caller {
  std::uint32_t uid = 0, gid = 0;
  std::vector<std::uint32_t> groups;
};

// A plain TCP connection for hand-made bytes, bound to `source` (no reserved
// port); invalid if it could not connect.
struct RawOptions {
  std::string source = "127.0.0.1";
  int rcvbuf = 0;          // bytes, set before connecting (a small window); 0: the default
  int timeout_s = 3;       // for send and recv
  bool reset_on_close = false;  // close with RST, leaving no TIME_WAIT behind
};
Fd connect_raw(const std::string& host, std::uint16_t port, const RawOptions& o = {});
// One record-marked fragment holding `call`.
std::vector<std::uint8_t> record(const std::vector<std::uint8_t>& call);

// Sends an already encoded call and returns the whole reply message.
Result<std::vector<std::uint8_t>> raw_call(rpc::ClientTransport& t, std::uint32_t xid,
                                           const std::vector<std::uint8_t>& message);
// Encodes a call with the given header fields and AUTH_SYS root credentials.
std::vector<std::uint8_t> make_call(std::uint32_t xid, std::uint32_t prog, std::uint32_t vers, std::uint32_t proc,
                                    const std::vector<std::uint8_t>& args);

class Client {
 public:
  Client(const ServerProcess& server, std::string source_address = "", bool reserved_port = true);

  // The raw transports, for hand-made calls.
  rpc::ClientTransport& nfs() { return *nfs_; }
  rpc::ClientTransport& mount() { return *mount_; }

  Caller as;  // identity sent with every call
  std::optional<rpc::AuthSys> auth() const;

  nfs3::nfs_fh3 mount_root(const std::string& path);
  Result<mount3::MNT3res> mnt(const std::string& path);

  template <class Res, class Args>
  Res call(nfs3::Proc proc, const Args& args) {
    auto r = try_call<Res>(proc, args);
    if (!r) throw std::runtime_error(r.error().describe());
    return std::move(*r);
  }

  template <class Res, class Args>
  Result<Res> try_call(nfs3::Proc proc, const Args& args) {
    std::vector<std::uint8_t> a;
    xdr::encode(a, args);
    auto bytes = rpc::call_sync(*nfs_, nfs3::kProgram, nfs3::kVersion, static_cast<std::uint32_t>(proc), a, auth(),
                                5000);
    if (!bytes) return bytes.error();
    Res res;
    if (auto d = xdr::decode(*bytes, res); !d) return d.error();
    replies_.push_back(std::move(*bytes));  // keeps borrowed spans (READ data) alive
    return res;
  }

  // Conveniences for tests that need an object to work on.
  nfs3::nfs_fh3 lookup(const nfs3::nfs_fh3& dir, const std::string& name);
  nfs3::nfs_fh3 create(const nfs3::nfs_fh3& dir, const std::string& name, std::uint32_t mode = 0644);
  nfs3::nfs_fh3 mkdir(const nfs3::nfs_fh3& dir, const std::string& name, std::uint32_t mode = 0755);
  void write(const nfs3::nfs_fh3& file, std::uint64_t offset, const std::string& data,
             nfs3::stable_how how = nfs3::stable_how::FILE_SYNC);
  std::string read(const nfs3::nfs_fh3& file, std::uint64_t offset, std::uint32_t count);
  nfs3::fattr3 getattr(const nfs3::nfs_fh3& fh);

 private:
  std::unique_ptr<tcp::TcpClient> nfs_, mount_;
  std::vector<std::vector<std::uint8_t>> replies_;
};

}  // namespace nfsrdma::test
