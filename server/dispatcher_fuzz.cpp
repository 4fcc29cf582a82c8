// Fuzzes the whole server below the transport: raw RPC messages through the
// dispatcher, the NFS/MOUNT/PORTMAP services and the DRC, against a real export
// in a scratch directory. The first input byte picks the listener; with its
// 0x80 bit set, the next four bytes give the position and length of an
// opaque's body placed outside the message (as an RPC-over-RDMA Read chunk
// carries WRITE data: IncomingCall::placed), cut from the input's end. Any 28-byte
// run of 0xAA in the input is replaced by the export's root file handle, and of
// 0xBB by the handle of a file in it, so seeds (and their mutations) reach past
// handle checks into every procedure. Each call is tried on the "transport's
// thread" first (handle_inline), as RPC-over-RDMA does, and passed to
// handle() only if it did not run there, which must leave it unanswered.
// Needs root (file handles, identities); otherwise it does nothing.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "lib/base/log.hpp"
#include "server/dispatcher.hpp"
#include "server/fs.hpp"

namespace {

using namespace nfsrdma;
using namespace nfsrdma::server;

constexpr const char* kExport = "/tmp/nfsrdma-dispatcher-fuzz";

class NullChannel final : public rpc::ReplyChannel {
 public:
  NullChannel() {
    auto* a = reinterpret_cast<sockaddr_in*>(&peer_.addr);
    a->sin_family = AF_INET;
    a->sin_port = htons(800);
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    peer_.len = sizeof *a;
  }
  void send(rpc::ReplyMessage&& reply) override { bytes += reply.bytes.size(); }
  void drop() override { ++dropped; }
  void close() override {}
  const rpc::Peer& peer() const override { return peer_; }
  std::size_t bytes = 0, dropped = 0;

 private:
  rpc::Peer peer_;
};

struct World {
  ExportTable table{SipKey{}};
  std::unique_ptr<NfsService> nfs;
  std::unique_ptr<MountService> mount;
  PortmapService portmap;
  DuplicateRequestCache drc{256};
  std::unique_ptr<Dispatcher> dispatcher;
  nfs3::nfs_fh3 file;
};

World* world = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (::geteuid() != 0) {
    std::fprintf(stderr, "dispatcher_fuzz: not root, nothing to fuzz\n");
    return 0;
  }
  spdlog::set_level(spdlog::level::off);
  ::umask(0);
  std::filesystem::remove_all(kExport);
  std::filesystem::create_directories(std::string(kExport) + "/dir");
  std::FILE* f = std::fopen((std::string(kExport) + "/file").c_str(), "w");
  std::fputs("contents", f);
  std::fclose(f);
  world = new World;
  auto e = parse_export_line(std::string(kExport) + " 127.0.0.1(rw,insecure,async)");
  if (!e || !world->table.replace({*e})) std::abort();
  world->nfs = std::make_unique<NfsService>(world->table, NfsLimits{65536, 65536}, nfs3::verf8{});
  world->mount = std::make_unique<MountService>(world->table);
  world->dispatcher = std::make_unique<Dispatcher>(*world->nfs, *world->mount, &world->portmap, world->drc);
  int dir = ::open(kExport, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0 || handle_of_child(world->table, *world->table.all()[0], dir, "file", world->file) != nfs3::NFS3_OK) {
    std::abort();
  }
  ::close(dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!world || size < 1) return 0;
  rpc::IncomingCall call;
  call.listener = 1 + (data[0] & 0x7f) % 3;
  std::size_t from = 1, to = size, position = 0;
  std::span<const std::uint8_t> placed;  // a Read chunk's data, apart from the inline part
  if ((data[0] & 0x80) && size >= 5) {
    const std::size_t length = std::min((std::size_t{data[3]} << 8) | data[4], size - 5);
    from = 5;
    to = size - length;
    placed = {data + to, length};
    position = std::min((std::size_t{data[1]} << 8) | data[2], to - from);
  }
  std::vector<std::uint8_t> m(data + from, data + to);
  using Marker = std::pair<std::uint8_t, const nfs3::nfs_fh3*>;
  for (auto [byte, fh] : {Marker{0xaa, &world->table.all()[0]->root_fh}, Marker{0xbb, &world->file}}) {
    std::uint8_t marker[28];
    std::fill_n(marker, 28, byte);
    for (auto it = m.begin(); (it = std::search(it, m.end(), marker, marker + 28)) != m.end(); it += 28) {
      std::copy_n(fh->data.begin(), std::min<std::size_t>(fh->len, 28), it);
    }
  }
  auto channel = std::make_shared<NullChannel>();
  std::span<const std::uint8_t> inline_part(m);
  call.message = placed.data() ? xdr::Parts{inline_part.first(position), placed, inline_part.subspan(position)}
                               : xdr::Parts{inline_part};
  call.channel = channel;
  if (!world->dispatcher->handle_inline(call)) {
    NFSRDMA_CHECK(channel->bytes == 0 && channel->dropped == 0);
    world->dispatcher->handle(std::move(call));
  }
  // The call ran as its (squashed) caller on this thread; libFuzzer writes its
  // corpus from this same thread, as root.
  NFSRDMA_CHECK(become_root());
  return 0;
}
