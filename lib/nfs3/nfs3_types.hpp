// NFSv3 basic data types (RFC 1813 §2.5-2.6) and their XDR descriptions.
// Names are the RFC's, so a grep against the RFC finds the code.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "lib/xdr/xdr.hpp"

namespace nfsrdma::nfs3 {

constexpr std::uint32_t kProgram = 100003;
constexpr std::uint32_t kVersion = 3;
constexpr std::uint32_t kFhSize = 64;       // NFS3_FHSIZE
constexpr std::uint32_t kVerifierSize = 8;  // NFS3_COOKIEVERFSIZE etc.
// Caps on wire lengths the RFC leaves unbounded. Names longer than the
// server's name_max decode fine and get NFS3ERR_NAMETOOLONG from the server.
constexpr std::uint32_t kMaxNameWire = 1024;
constexpr std::uint32_t kMaxPath = 4096;
constexpr std::uint32_t kMaxData = 1u << 24;  // above any rtmax/wtmax we offer

enum class nfsstat3 : std::uint32_t {
  NFS3_OK = 0, NFS3ERR_PERM = 1, NFS3ERR_NOENT = 2, NFS3ERR_IO = 5, NFS3ERR_NXIO = 6,
  NFS3ERR_ACCES = 13, NFS3ERR_EXIST = 17, NFS3ERR_XDEV = 18, NFS3ERR_NODEV = 19,
  NFS3ERR_NOTDIR = 20, NFS3ERR_ISDIR = 21, NFS3ERR_INVAL = 22, NFS3ERR_FBIG = 27,
  NFS3ERR_NOSPC = 28, NFS3ERR_ROFS = 30, NFS3ERR_MLINK = 31, NFS3ERR_NAMETOOLONG = 63,
  NFS3ERR_NOTEMPTY = 66, NFS3ERR_DQUOT = 69, NFS3ERR_STALE = 70, NFS3ERR_REMOTE = 71,
  NFS3ERR_BADHANDLE = 10001, NFS3ERR_NOT_SYNC = 10002, NFS3ERR_BAD_COOKIE = 10003,
  NFS3ERR_NOTSUPP = 10004, NFS3ERR_TOOSMALL = 10005, NFS3ERR_SERVERFAULT = 10006,
  NFS3ERR_BADTYPE = 10007, NFS3ERR_JUKEBOX = 10008,
};
using enum nfsstat3;

enum class ftype3 : std::uint32_t {
  NF3REG = 1, NF3DIR = 2, NF3BLK = 3, NF3CHR = 4, NF3LNK = 5, NF3SOCK = 6, NF3FIFO = 7,
};
using enum ftype3;

enum class stable_how : std::uint32_t { UNSTABLE = 0, DATA_SYNC = 1, FILE_SYNC = 2 };
enum class time_how : std::uint32_t { DONT_CHANGE = 0, SET_TO_SERVER_TIME = 1, SET_TO_CLIENT_TIME = 2 };
enum class createmode3 : std::uint32_t { UNCHECKED = 0, GUARDED = 1, EXCLUSIVE = 2 };

// ACCESS3 bits (RFC 1813 §3.3.4)
constexpr std::uint32_t ACCESS3_READ = 0x01, ACCESS3_LOOKUP = 0x02, ACCESS3_MODIFY = 0x04,
                        ACCESS3_EXTEND = 0x08, ACCESS3_DELETE = 0x10, ACCESS3_EXECUTE = 0x20;
// FSINFO properties
constexpr std::uint32_t FSF3_LINK = 0x1, FSF3_SYMLINK = 0x2, FSF3_HOMOGENEOUS = 0x8, FSF3_CANSETTIME = 0x10;

using verf8 = std::array<std::uint8_t, kVerifierSize>;  // cookieverf3, createverf3, writeverf3

struct nfs_fh3 {
  std::uint32_t len = 0;
  std::array<std::uint8_t, kFhSize> data{};
  std::span<const std::uint8_t> bytes() const { return {data.data(), len}; }
  bool operator==(const nfs_fh3& o) const { return len == o.len && bytes().size() == o.bytes().size() &&
                                                   std::equal(data.begin(), data.begin() + len, o.data.begin()); }
};

struct specdata3 {
  std::uint32_t specdata1 = 0, specdata2 = 0;
};
struct nfstime3 {
  std::uint32_t seconds = 0, nseconds = 0;
  bool operator==(const nfstime3&) const = default;
};

struct fattr3 {
  ftype3 type = NF3REG;
  std::uint32_t mode = 0, nlink = 0, uid = 0, gid = 0;
  std::uint64_t size = 0, used = 0;
  specdata3 rdev;
  std::uint64_t fsid = 0, fileid = 0;
  nfstime3 atime, mtime, ctime;
};
using post_op_attr = std::optional<fattr3>;

struct wcc_attr {
  std::uint64_t size = 0;
  nfstime3 mtime, ctime;
};
using pre_op_attr = std::optional<wcc_attr>;

struct wcc_data {
  pre_op_attr before;
  post_op_attr after;
};
using post_op_fh3 = std::optional<nfs_fh3>;

struct set_time {
  time_how how = time_how::DONT_CHANGE;
  nfstime3 time;  // SET_TO_CLIENT_TIME only
};

struct sattr3 {
  std::optional<std::uint32_t> mode, uid, gid;
  std::optional<std::uint64_t> size;
  set_time atime, mtime;
};

struct diropargs3 {
  nfs_fh3 dir;
  std::string name;
};

template <class X>
void codec(X& x, nfs_fh3& v) {
  if constexpr (std::is_same_v<X, xdr::Decoder>) {
    std::span<const std::uint8_t> b;
    x.opaque_view(b, kFhSize);
    v.len = static_cast<std::uint32_t>(b.size());
    std::copy(b.begin(), b.end(), v.data.begin());
  } else {
    x.opaque_view(v.bytes(), kFhSize);
  }
}

template <class X>
void codec(X& x, verf8& v) {
  x.fixed(v);
}

template <class X>
void codec(X& x, specdata3& v) {
  x.u32(v.specdata1);
  x.u32(v.specdata2);
}

template <class X>
void codec(X& x, nfstime3& v) {
  x.u32(v.seconds);
  x.u32(v.nseconds);
}

template <class X>
void codec(X& x, fattr3& v) {
  x.enumeration(v.type);
  x.u32(v.mode);
  x.u32(v.nlink);
  x.u32(v.uid);
  x.u32(v.gid);
  x.u64(v.size);
  x.u64(v.used);
  codec(x, v.rdev);
  x.u64(v.fsid);
  x.u64(v.fileid);
  codec(x, v.atime);
  codec(x, v.mtime);
  codec(x, v.ctime);
}

template <class X>
void codec(X& x, wcc_attr& v) {
  x.u64(v.size);
  codec(x, v.mtime);
  codec(x, v.ctime);
}

template <class X>
void codec(X& x, wcc_data& v) {
  xdr::xdr_optional(x, v.before);
  xdr::xdr_optional(x, v.after);
}

template <class X>
void codec(X& x, set_time& v) {
  x.enumeration(v.how);
  if (v.how == time_how::SET_TO_CLIENT_TIME) {
    codec(x, v.time);
  } else if (static_cast<std::uint32_t>(v.how) > 2) {
    x.fail(xdr::Fault::bad_value);
  }
}

template <class X>
void codec(X& x, sattr3& v) {
  xdr::xdr_optional(x, v.mode);
  xdr::xdr_optional(x, v.uid);
  xdr::xdr_optional(x, v.gid);
  xdr::xdr_optional(x, v.size);
  codec(x, v.atime);
  codec(x, v.mtime);
}

template <class X>
void codec(X& x, diropargs3& v) {
  codec(x, v.dir);
  x.string(v.name, kMaxNameWire);
}

const char* nfsstat3_name(nfsstat3 s);

}  // namespace nfsrdma::nfs3
