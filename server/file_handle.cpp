#include "server/file_handle.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "lib/xdr/xdr.hpp"

namespace nfsrdma::server {
namespace {

constexpr std::uint8_t kVersion = 1;
constexpr std::size_t kHeader = 12;
constexpr std::size_t kMac = 8;

}  // namespace

nfs3::nfs_fh3 HandleCodec::encode(std::uint32_t export_id, const KernelHandle& kh) const {
  NFSRDMA_CHECK(kh.len <= kMaxKernelHandle);
  nfs3::nfs_fh3 fh;
  std::uint8_t* p = fh.data.data();
  p[0] = kVersion;
  p[1] = static_cast<std::uint8_t>(kh.len);
  xdr::store_be32(p + 4, export_id);
  xdr::store_be32(p + 8, static_cast<std::uint32_t>(kh.type));
  std::memcpy(p + kHeader, kh.bytes.data(), kh.len);
  std::uint64_t mac = siphash24(key_, {p, kHeader + kh.len});
  for (std::size_t i = 0; i < kMac; ++i) p[kHeader + kh.len + i] = static_cast<std::uint8_t>(mac >> (8 * i));
  fh.len = static_cast<std::uint32_t>(kHeader + kh.len + kMac);
  return fh;
}

nfs3::nfsstat3 HandleCodec::decode(const nfs3::nfs_fh3& fh, std::uint32_t& export_id, KernelHandle& kh) const {
  const std::uint8_t* p = fh.data.data();
  if (fh.len < kHeader + kMac || p[0] != kVersion || p[2] != 0 || p[3] != 0) return nfs3::NFS3ERR_BADHANDLE;
  std::size_t n = p[1];
  if (n > kMaxKernelHandle || fh.len != kHeader + n + kMac) return nfs3::NFS3ERR_BADHANDLE;
  std::uint64_t mac = siphash24(key_, {p, kHeader + n});
  std::uint64_t got = 0;
  for (std::size_t i = 0; i < kMac; ++i) got |= std::uint64_t{p[kHeader + n + i]} << (8 * i);
  if (mac != got) return nfs3::NFS3ERR_BADHANDLE;
  export_id = xdr::load_be32(p + 4);
  kh.type = static_cast<std::int32_t>(xdr::load_be32(p + 8));
  kh.len = static_cast<std::uint32_t>(n);
  std::memcpy(kh.bytes.data(), p + kHeader, n);
  return nfs3::NFS3_OK;
}

Result<SipKey> load_or_create_key(const std::string& state_dir) {
  if (::mkdir(state_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return sys_error(errno, "cannot create state directory " + state_dir);
  }
  std::string path = state_dir + "/fh.key";
  SipKey key{};
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = ::read(fd, key.data(), key.size());
    ::close(fd);
    if (n != static_cast<ssize_t>(key.size())) {
      return Error{ErrorDomain::config, 0, Action::fail, "file handle key " + path + " is damaged; remove it "
                   "(clients will then need to remount)"};
    }
    return key;
  }
  if (errno != ENOENT) return sys_error(errno, "cannot read " + path);
  if (::getrandom(key.data(), key.size(), 0) != static_cast<ssize_t>(key.size())) {
    return sys_error(errno, "getrandom");
  }
  std::string tmp = path + ".tmp";
  fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return sys_error(errno, "cannot create " + tmp);
  bool ok = ::write(fd, key.data(), key.size()) == static_cast<ssize_t>(key.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) return sys_error(errno, "cannot write " + path);
  return key;
}

}  // namespace nfsrdma::server
