#include "tests/server_harness.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "lib/transport/tcp/record.hpp"
#include "lib/transport/tcp/socket.hpp"

namespace nfsrdma::test {

using namespace nfs3;

TempDir::TempDir() : TempDir(std::filesystem::temp_directory_path().string()) {}

TempDir::TempDir(const std::string& under) {
  std::string tmpl = under + "/nfsrdma-test-XXXXXX";
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

namespace {
std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}
}  // namespace

const std::string& test_provider() {
  static const std::string v = env_or("NFSRDMA_TEST_PROVIDER", "tcp");
  return v;
}
const std::string& test_server_host() {
  static const std::string v = env_or("NFSRDMA_TEST_SERVER", "127.0.0.1");
  return v;
}
const std::string& test_client_host() {
  static const std::string v = env_or("NFSRDMA_TEST_CLIENT", "127.0.0.1");
  return v;
}

long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  long v = 0;
  while (in >> key) {
    if (key == "VmRSS:") return (in >> v, v);
  }
  return 0;
}

double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // After the command name in parentheses: state is field 3, utime 14, stime 15.
  std::istringstream rest(all.substr(all.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i >= 14) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

std::multiset<std::string> thread_names(pid_t pid, const std::string& prefix, std::size_t count) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    std::multiset<std::string> names;
    std::size_t matching = 0;
    std::error_code ec;
    for (const auto& t : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
      std::string name;
      std::getline(std::ifstream(t.path() / "comm"), name);
      if (name.starts_with(prefix)) ++matching;
      names.insert(std::move(name));
    }
    if (matching >= count || std::chrono::steady_clock::now() > deadline) return names;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Fd connect_raw(const std::string& host, std::uint16_t port, const RawOptions& o) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (o.rcvbuf) ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &o.rcvbuf, sizeof o.rcvbuf);
  timeval tv{o.timeout_s, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (o.reset_on_close) {
    linger hard{1, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (inet_pton(AF_INET, o.source.c_str(), &a.sin_addr) != 1 ||
      ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    return {};
  }
  a.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1 ||
      ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    return {};
  }
  return fd;
}

std::vector<std::uint8_t> record(const std::vector<std::uint8_t>& call) {
  auto mark = tcp::record_mark(static_cast<std::uint32_t>(call.size()));
  std::vector<std::uint8_t> b(mark.begin(), mark.end());
  b.insert(b.end(), call.begin(), call.end());
  return b;
}

// A port nothing holds. Bound without SO_REUSEADDR, so the kernel skips ports
// that a recent connection still holds in TIME_WAIT: the server's listeners
// (libfabric's among them) would be refused those.
std::string scrape(std::uint16_t port, const std::string& path) {
  Fd fd = connect_raw("127.0.0.1", port);
  std::string out;
  if (!fd.valid()) return out;
  const std::string req = "GET " + path + " HTTP/1.0\r\nHost: x\r\n\r\n";
  if (::write(fd.get(), req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
    char buf[4096];
    for (ssize_t n; (n = ::read(fd.get(), buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

double metric(const std::string& scraped, const std::string& name) {
  const std::string key = "\n" + name + " ";
  auto at = scraped.find(key);
  return at == std::string::npos ? 0 : std::stod(scraped.substr(at + key.size()));
}

std::uint16_t free_port() {
  // The kernel may give a port closed here again: never the same one twice
  // in a process (a test's --metrics port that was also its server's NFS
  // port made the server exit just after it answered the first connection).
  static std::mutex mu;
  static std::set<std::uint16_t> given;
  for (;;) {
    socklen_t len = 0;
    auto addr = tcp::resolve(test_server_host(), 0, len);
    if (!addr) throw std::runtime_error(addr.error().describe());
    Fd fd(::socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid() || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&*addr), len) != 0 || ::listen(fd.get(), 1) != 0) {
      throw std::runtime_error(std::string("free_port: ") + std::strerror(errno));
    }
    const std::uint16_t port = tcp::local_port(fd.get());
    std::lock_guard lk(mu);
    if (given.insert(port).second) return port;
  }
}

ServerProcess::ServerProcess(std::vector<std::string> exports, std::vector<std::string> extra)
    : exports_(std::move(exports)), extra_(std::move(extra)), log_(state_.path() + "/server.log"),
      nfs_port_(free_port()), mount_port_(free_port()), rdma_port_(free_port()) {
  // Another process may still take a port between free_port() and the
  // server's bind: new ports then, twice at most.
  for (int attempt = 1;; ++attempt) {
    try {
      start();
      return;
    } catch (const std::runtime_error& e) {
      if (attempt == 3 || std::string(e.what()).find("Address already in use") == std::string::npos) throw;
      nfs_port_ = free_port();
      mount_port_ = free_port();
      rdma_port_ = free_port();
    }
  }
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) stop();
}

void ServerProcess::start() {
  const char* bin = std::getenv("NFSRDMA_SERVER");
  if (!bin) throw std::runtime_error("NFSRDMA_SERVER is not set (run through meson test)");
  std::vector<std::string> args = {bin, "--port", std::to_string(nfs_port_), "--mount-port",
                                   std::to_string(mount_port_), "--state-dir", state_.path() + "/state",
                                   "--bind", test_server_host(), "--no-register", "--log-level", "debug",
                                   "--rdma-port", std::to_string(rdma_port_), "--provider", test_provider()};
  for (const auto& e : exports_) {
    args.push_back("--export");
    args.push_back(e);
  }
  args.insert(args.end(), extra_.begin(), extra_.end());
  pid_ = ::fork();
  if (pid_ == 0) {
    int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin, argv.data());
    ::_exit(127);
  }
  for (int i = 0; i < 200; ++i) {
    // While nothing listens there, a connect may pick that very port as its
    // own source and connect to itself (TCP simultaneous open): that is not
    // the server, which may not have bound its ports yet.
    if (auto fd = tcp::connect_tcp(test_server_host(), nfs_port_, false);
        fd && tcp::local_port(fd->get()) != nfs_port_) {
      return;
    }
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("nfsrdma-server exited at start:\n" + log());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  throw std::runtime_error("nfsrdma-server did not start listening:\n" + log());
}

ServerProcess::Paused ServerProcess::pause() {
  if (pid_ <= 0 || ::kill(pid_, SIGSTOP) != 0) return Paused(-1, false);
  auto stopped = [&] {
    for (const auto& t : std::filesystem::directory_iterator("/proc/" + std::to_string(pid_) + "/task")) {
      std::ifstream in(t.path() / "stat");
      std::string line;
      std::getline(in, line);
      const auto close = line.rfind(')');
      if (close == std::string::npos || close + 2 >= line.size() || line[close + 2] != 'T') return false;
    }
    return true;
  };
  for (int i = 0; i < 1000; ++i) {
    if (stopped()) return Paused(pid_, true);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Paused(pid_, false);
}

void ServerProcess::Paused::resume() {
  if (pid_ > 0) ::kill(std::exchange(pid_, -1), SIGCONT);
}

void ServerProcess::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  ::waitpid(pid_, &status_, 0);
  pid_ = -1;
}

void ServerProcess::kill_hard() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &status_, 0);
  pid_ = -1;
}

std::string ServerProcess::log() const {
  std::ifstream in(log_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<std::vector<std::uint8_t>> raw_call(rpc::ClientTransport& t, std::uint32_t xid,
                                           const std::vector<std::uint8_t>& message) {
  using Outcome = Result<std::vector<std::uint8_t>>;
  auto promise = std::make_shared<std::promise<Outcome>>();
  auto future = promise->get_future();
  // A copy the handler keeps: the transport may send it after a timeout here.
  auto held = std::make_shared<std::vector<std::uint8_t>>(message);
  rpc::OutgoingCall call;
  call.xid = xid;
  call.message = xdr::Parts{*held};
  t.call(call, [promise, held](Result<xdr::Parts> reply) {
    if (!reply) return promise->set_value(reply.error());
    promise->set_value(reply->joined());
  });
  if (future.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    return Error{ErrorDomain::rpc, ETIMEDOUT, Action::fail, "no reply within 5 s"};
  }
  return future.get();
}

std::vector<std::uint8_t> make_call(std::uint32_t xid, std::uint32_t prog, std::uint32_t vers, std::uint32_t proc,
                                    const std::vector<std::uint8_t>& args) {
  std::vector<std::uint8_t> msg;
  xdr::Encoder e(msg);
  rpc::AuthSys root;
  root.machinename = "test";
  rpc::encode_call_header(e, xid, prog, vers, proc, root);
  msg.insert(msg.end(), args.begin(), args.end());
  return msg;
}

Client::Client(const ServerProcess& server, std::string source_address, bool reserved_port) {
  tcp::TcpClientOptions o;
  o.source_address = std::move(source_address);
  o.reserved_port = reserved_port;
  auto n = tcp::TcpClient::connect(test_server_host(), server.nfs_port(), o);
  if (!n) throw std::runtime_error(n.error().describe());
  nfs_ = std::move(*n);
  auto m = tcp::TcpClient::connect(test_server_host(), server.mount_port(), o);
  if (!m) throw std::runtime_error(m.error().describe());
  mount_ = std::move(*m);
}

std::optional<rpc::AuthSys> Client::auth() const {
  rpc::AuthSys a;
  a.machinename = "test";
  a.uid = as.uid;
  a.gid = as.gid;
  a.ngids = static_cast<std::uint32_t>(as.groups.size());
  for (std::size_t i = 0; i < as.groups.size(); ++i) a.gids[i] = as.groups[i];
  return a;
}

Result<mount3::MNT3res> Client::mnt(const std::string& path) {
  std::vector<std::uint8_t> a;
  xdr::encode(a, mount3::DirPath{path});
  auto bytes = rpc::call_sync(*mount_, mount3::kProgram, mount3::kVersion,
                              static_cast<std::uint32_t>(mount3::Proc::MNT), a, auth(), 5000);
  if (!bytes) return bytes.error();
  mount3::MNT3res r;
  if (auto d = xdr::decode(*bytes, r); !d) return d.error();
  return r;
}

nfs_fh3 Client::mount_root(const std::string& path) {
  auto r = mnt(path);
  if (!r) throw std::runtime_error(r.error().describe());
  if (r->status != mount3::MNT3_OK) {
    throw std::runtime_error("MNT " + path + " failed: " + std::to_string(static_cast<int>(r->status)));
  }
  return r->fhandle;
}

namespace {
void expect_ok(nfsstat3 s, const std::string& what) {
  if (s != NFS3_OK) throw std::runtime_error(what + ": " + nfsstat3_name(s));
}
}  // namespace

nfs_fh3 Client::lookup(const nfs_fh3& dir, const std::string& name) {
  auto r = call<LOOKUP3res>(Proc::LOOKUP, diropargs3{dir, name});
  expect_ok(r.status, "LOOKUP " + name);
  return r.object;
}

nfs_fh3 Client::create(const nfs_fh3& dir, const std::string& name, std::uint32_t mode) {
  CREATE3args a;
  a.where = {dir, name};
  a.mode = createmode3::GUARDED;
  a.obj_attributes.mode = mode;
  auto r = call<CreateRes>(Proc::CREATE, a);
  expect_ok(r.status, "CREATE " + name);
  return *r.obj;
}

nfs_fh3 Client::mkdir(const nfs_fh3& dir, const std::string& name, std::uint32_t mode) {
  MKDIR3args a;
  a.where = {dir, name};
  a.attributes.mode = mode;
  auto r = call<CreateRes>(Proc::MKDIR, a);
  expect_ok(r.status, "MKDIR " + name);
  return *r.obj;
}

void Client::write(const nfs_fh3& file, std::uint64_t offset, const std::string& data, stable_how how) {
  WRITE3args a{file, offset, static_cast<std::uint32_t>(data.size()), how,
               {reinterpret_cast<const std::uint8_t*>(data.data()), data.size()}};
  auto r = call<WRITE3res>(Proc::WRITE, a);
  expect_ok(r.status, "WRITE");
}

std::string Client::read(const nfs_fh3& file, std::uint64_t offset, std::uint32_t count) {
  auto r = call<READ3res>(Proc::READ, READ3args{file, offset, count});
  expect_ok(r.status, "READ");
  return {reinterpret_cast<const char*>(r.data.data()), r.data.size()};
}

fattr3 Client::getattr(const nfs_fh3& fh) {
  auto r = call<GETATTR3res>(Proc::GETATTR, FhArgs{fh});
  expect_ok(r.status, "GETATTR");
  return r.obj_attributes;
}

}  // namespace nfsrdma::test
