// The server's view of the exported filesystems: the export table, turning
// file handles into open O_PATH descriptors and back, attributes in NFS form,
// and errno to nfsstat3. All path walking is one component at a time with
// O_NOFOLLOW relative to a directory we hold, so symlinks are never followed on
// the server and ".." never climbs above an export root.
#pragma once

#include <sys/stat.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lib/base/fd.hpp"
#include "lib/nfs3/nfs3_types.hpp"
#include "server/export_table.hpp"
#include "server/exports.hpp"
#include "server/file_handle.hpp"
#include "server/identity.hpp"

namespace nfsrdma::server {

// An object's O_PATH descriptor for one call: opened for it, or borrowed
// from an open-file cache entry (OpenFiles), which `pin` keeps open for as
// long as the call holds it, so a call on a held object neither duplicates
// nor closes a descriptor.
class ObjectFd {
 public:
  ObjectFd() = default;
  explicit ObjectFd(Fd own) { *this = std::move(own); }
  ObjectFd(ObjectFd&& o) noexcept
      : own_(std::move(o.own_)), pin_(std::move(o.pin_)), fd_(std::exchange(o.fd_, -1)) {}
  ObjectFd& operator=(ObjectFd&& o) noexcept {
    own_ = std::move(o.own_);
    pin_ = std::move(o.pin_);
    fd_ = std::exchange(o.fd_, -1);
    return *this;
  }
  ObjectFd& operator=(Fd own) {
    pin_.reset();
    own_ = std::move(own);
    fd_ = own_.get();
    return *this;
  }
  void borrow(std::shared_ptr<const void> pin, int fd) {
    own_.reset();
    pin_ = std::move(pin);
    fd_ = fd;
  }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  bool owned() const { return own_.valid(); }
  // The descriptor opened for the call, which the call no longer holds.
  Fd release() {
    fd_ = -1;
    return std::move(own_);
  }

 private:
  Fd own_;
  std::shared_ptr<const void> pin_;
  int fd_ = -1;
};

// An object a request works on: its export, the options that apply to the
// caller, its O_PATH descriptor, and the attributes NfsService::reach found
// it with (what a change's wcc data reports as before, with no second stat).
struct Object {
  const Export* ex = nullptr;
  const ExportOptions* opts = nullptr;
  ObjectFd fd;
  std::optional<struct stat> reached;
};

// "/proc/self/fd/N": reopens an O_PATH descriptor with real access modes under
// the caller's identity, with the kernel's permission checks.
class ProcPath {
 public:
  explicit ProcPath(int fd);
  const char* c_str() const { return buf_; }

 private:
  char buf_[32];
};

nfs3::nfsstat3 errno_to_nfsstat3(int err);
nfs3::fattr3 to_fattr3(const struct stat& st, const Export& ex);
nfs3::wcc_attr to_wcc_attr(const struct stat& st);

// name_to_handle_at: the kernel's handle of `name` in `dirfd` and its mount id.
nfs3::nfsstat3 kernel_handle(int dirfd, const char* name, int flags, KernelHandle& kh, int& mount_id);

// Opens the object a handle names (as root, then back to `as`). STALE when the
// object is gone or its export no longer exists; BADHANDLE when malformed.
nfs3::nfsstat3 open_handle(const ExportTable& table, const nfs3::nfs_fh3& fh, Object& out);

// The NFS handle of an object we hold open; NFS3ERR_ACCES if it lives on another
// mount than its export (we do not cross mounts).
nfs3::nfsstat3 handle_of(const ExportTable& table, const Export& ex, int fd, nfs3::nfs_fh3& out);
nfs3::nfsstat3 handle_of_child(const ExportTable& table, const Export& ex, int dirfd, const char* name,
                               nfs3::nfs_fh3& out);

// NFS3ERR_NAMETOOLONG / NFS3ERR_ACCES for names no directory entry can have.
nfs3::nfsstat3 check_name(const std::string& name);

// Looks `name` up in directory `dir` without following symlinks; "." and ".."
// resolve inside the export (".." of the root is the root).
nfs3::nfsstat3 lookup_child(const Object& dir, const std::string& name, Fd& out);
// How far a lookup on a transport's thread may go (openat2's RESOLVE_*):
// `cached`, the kernel's dentry cache alone, so nothing waits for the disk;
// `same_mount`, any name that crosses no mount (an export in memory, where
// a name the kernel has not seen is a negative entry made in memory; a
// mount point, which may wait on its filesystem, is a worker's). Either
// answers NFS3ERR_JUKEBOX for what it may not resolve (also where the
// kernel is older than 5.12). `any`: a worker's plain lookup.
enum class Resolve : std::uint8_t { any, cached, same_mount };
// The same in the directory `dirfd` of `ex`, whose attributes are `dir_st`.
nfs3::nfsstat3 lookup_child(const Export& ex, int dirfd, const struct stat& dir_st, const std::string& name,
                            Fd& out, Resolve how = Resolve::any);

bool is_export_root(const Export& ex, const struct stat& st);

// fstat of an O_PATH descriptor.
int stat_fd(int fd, struct stat& st);
// The same by statx, which also says whether the file may be immutable: it
// is, or its filesystem does not say.
int stat_io(int fd, struct stat& st, bool& may_be_immutable);
nfs3::post_op_attr post_op(const Object& o);
// The attributes reach() found `o` with, else what a stat finds now.
nfs3::pre_op_attr pre_op(const Object& o);

}  // namespace nfsrdma::server
