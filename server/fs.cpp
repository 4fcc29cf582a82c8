#include "server/fs.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "lib/base/log.hpp"

namespace nfsrdma::server {

using namespace nfs3;

namespace {

// struct file_handle ends in a flexible array; this gives it room.
struct RawHandle {
  alignas(struct file_handle) unsigned char storage[sizeof(struct file_handle) + kMaxKernelHandle];
  struct file_handle* get() { return reinterpret_cast<struct file_handle*>(storage); }
};

}  // namespace

nfsstat3 kernel_handle(int dirfd, const char* name, int flags, KernelHandle& kh, int& mount_id) {
  RawHandle raw{};
  struct file_handle* h = raw.get();
  h->handle_bytes = kMaxKernelHandle;
  if (::name_to_handle_at(dirfd, name, h, &mount_id, flags) != 0) {
    return errno == EOVERFLOW ? NFS3ERR_NOTSUPP : errno_to_nfsstat3(errno);
  }
  kh.type = h->handle_type;
  kh.len = h->handle_bytes;
  std::memcpy(kh.bytes.data(), h->f_handle, kh.len);
  return NFS3_OK;
}

ProcPath::ProcPath(int fd) { std::snprintf(buf_, sizeof buf_, "/proc/self/fd/%d", fd); }

// Deliberate for every errno a file system call here can return, after
// nfsd's nfserrno: what a later try may cure is JUKEBOX (the client waits and
// retries), an object gone is STALE. The rest is IO, logged through the rate
// limiter: a client chooses the calls that meet it.
nfsstat3 errno_to_nfsstat3(int err) {
  switch (err) {
    case 0: return NFS3_OK;
    case EPERM: return NFS3ERR_PERM;
    case ENOENT: return NFS3ERR_NOENT;
    case EIO: return NFS3ERR_IO;
    case ENXIO: return NFS3ERR_NXIO;
    case EACCES: return NFS3ERR_ACCES;
    case EEXIST: return NFS3ERR_EXIST;
    case EXDEV: return NFS3ERR_XDEV;
    case ENODEV: return NFS3ERR_NODEV;
    case ENOTDIR: return NFS3ERR_NOTDIR;
    case EISDIR: return NFS3ERR_ISDIR;
    case EINVAL: return NFS3ERR_INVAL;
    case EFBIG: return NFS3ERR_FBIG;
    case ENOSPC: return NFS3ERR_NOSPC;
    case EROFS: return NFS3ERR_ROFS;
    case EMLINK: return NFS3ERR_MLINK;
    case ENAMETOOLONG: return NFS3ERR_NAMETOOLONG;
    case ENOTEMPTY: return NFS3ERR_NOTEMPTY;
    case EDQUOT: return NFS3ERR_DQUOT;
    case ESTALE: return NFS3ERR_STALE;
    case EOPNOTSUPP: return NFS3ERR_NOTSUPP;
    case ENOSYS: return NFS3ERR_NOTSUPP;
    case ENOTTY: return NFS3ERR_NOTSUPP;  // an ioctl-backed operation the file system lacks
    case ELOOP: return NFS3ERR_INVAL;  // an operation that needs a non-symlink met one
    case EOVERFLOW: return NFS3ERR_INVAL;
    case ERANGE: return NFS3ERR_INVAL;
    case ESPIPE: return NFS3ERR_INVAL;
    case EBUSY: return NFS3ERR_ACCES;    // a mount point or a file in use, as a local caller sees it
    case ETXTBSY: return NFS3ERR_IO;  // as nfsd
    case E2BIG: return NFS3ERR_FBIG;
    case ENODATA: return NFS3ERR_NOENT;
    case EAGAIN: return NFS3ERR_JUKEBOX;
    case EINTR: return NFS3ERR_JUKEBOX;
    case ETIMEDOUT: return NFS3ERR_JUKEBOX;
    case ENOMEM: return NFS3ERR_JUKEBOX;  // the server is short of memory now, or a lookup raced a rename
    case ENFILE: return NFS3ERR_JUKEBOX;
    case EMFILE: return NFS3ERR_JUKEBOX;
    case ENOLCK: return NFS3ERR_JUKEBOX;
    case EUCLEAN: return NFS3ERR_IO;
    case EBADMSG: return NFS3ERR_IO;
    case EREMOTEIO: return NFS3ERR_IO;
    case EBADF: return NFS3ERR_SERVERFAULT;  // our bug, not the client's
    case EFAULT: return NFS3ERR_SERVERFAULT;
    default:
      NFSRDMA_LOG_LIMITED(warn, "nfs: unexpected error {} ({}) answered as NFS3ERR_IO", err, std::strerror(err));
      return NFS3ERR_IO;
  }
}

fattr3 to_fattr3(const struct stat& st, const Export& ex) {
  fattr3 a;
  switch (st.st_mode & S_IFMT) {
    case S_IFDIR: a.type = NF3DIR; break;
    case S_IFBLK: a.type = NF3BLK; break;
    case S_IFCHR: a.type = NF3CHR; break;
    case S_IFLNK: a.type = NF3LNK; break;
    case S_IFSOCK: a.type = NF3SOCK; break;
    case S_IFIFO: a.type = NF3FIFO; break;
    default: a.type = NF3REG; break;
  }
  a.mode = st.st_mode & 07777;
  a.nlink = static_cast<std::uint32_t>(st.st_nlink);
  a.uid = st.st_uid;
  a.gid = st.st_gid;
  a.size = static_cast<std::uint64_t>(st.st_size);
  a.used = static_cast<std::uint64_t>(st.st_blocks) * 512;
  a.rdev = {major(st.st_rdev), minor(st.st_rdev)};
  a.fsid = ex.id;
  a.fileid = st.st_ino;
  a.atime = {static_cast<std::uint32_t>(st.st_atim.tv_sec), static_cast<std::uint32_t>(st.st_atim.tv_nsec)};
  a.mtime = {static_cast<std::uint32_t>(st.st_mtim.tv_sec), static_cast<std::uint32_t>(st.st_mtim.tv_nsec)};
  a.ctime = {static_cast<std::uint32_t>(st.st_ctim.tv_sec), static_cast<std::uint32_t>(st.st_ctim.tv_nsec)};
  return a;
}

wcc_attr to_wcc_attr(const struct stat& st) {
  wcc_attr w;
  w.size = static_cast<std::uint64_t>(st.st_size);
  w.mtime = {static_cast<std::uint32_t>(st.st_mtim.tv_sec), static_cast<std::uint32_t>(st.st_mtim.tv_nsec)};
  w.ctime = {static_cast<std::uint32_t>(st.st_ctim.tv_sec), static_cast<std::uint32_t>(st.st_ctim.tv_nsec)};
  return w;
}

nfsstat3 open_handle(const ExportTable& table, const nfs_fh3& fh, Object& out) {
  std::uint32_t export_id = 0;
  KernelHandle kh;
  if (auto s = table.codec().decode(fh, export_id, kh); s != NFS3_OK) return s;
  const Export* ex = table.by_id(export_id);
  if (!ex) return NFS3ERR_STALE;
  RawHandle raw{};
  struct file_handle* h = raw.get();
  h->handle_bytes = kh.len;
  h->handle_type = kh.type;
  std::memcpy(h->f_handle, kh.bytes.data(), kh.len);
  // open_by_handle_at needs CAP_DAC_READ_SEARCH: see identity.hpp.
  // WARNING: while another caller removes or renames over the object, the
  // kernel may answer ENOMEM (its reconnect of the dentry lost the race): tried
  // again, that becomes the object (renamed) or ESTALE (gone).
  int fd = -1;
  for (int attempt = 0; attempt < 3 && fd < 0; ++attempt) {
    fd = ::open_by_handle_at(ex->mount_fd.get(), h, O_PATH | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno != ENOMEM) break;
  }
  if (fd < 0) {
    return (errno == ESTALE || errno == ENOENT || errno == EINVAL) ? NFS3ERR_STALE : errno_to_nfsstat3(errno);
  }
  out.ex = ex;
  out.fd = Fd(fd);
  return NFS3_OK;
}

nfsstat3 handle_of(const ExportTable& table, const Export& ex, int fd, nfs_fh3& out) {
  return handle_of_child(table, ex, fd, "", out);
}

nfsstat3 handle_of_child(const ExportTable& table, const Export& ex, int dirfd, const char* name, nfs_fh3& out) {
  KernelHandle kh;
  int mount_id = 0;
  int flags = name[0] == '\0' ? AT_EMPTY_PATH : 0;
  if (auto s = kernel_handle(dirfd, name, flags, kh, mount_id); s != NFS3_OK) return s;
  if (mount_id != ex.mount_id) return NFS3ERR_ACCES;
  out = table.codec().encode(ex.id, kh);
  return NFS3_OK;
}

nfsstat3 check_name(const std::string& name) {
  if (name.empty()) return NFS3ERR_ACCES;
  if (name.size() > 255) return NFS3ERR_NAMETOOLONG;
  if (name.find('/') != std::string::npos || name.find('\0') != std::string::npos) return NFS3ERR_ACCES;
  return NFS3_OK;
}

bool is_export_root(const Export& ex, const struct stat& st) {
  return st.st_dev == ex.root_dev && st.st_ino == ex.root_ino;
}

nfsstat3 lookup_child(const Object& dir, const std::string& name, Fd& out) {
  struct stat st {};
  if (stat_fd(dir.fd.get(), st) != 0) return errno_to_nfsstat3(errno);
  return lookup_child(*dir.ex, dir.fd.get(), st, name, out);
}

nfsstat3 lookup_child(const Export& ex, int dirfd, const struct stat& dir_st, const std::string& name, Fd& out,
                      Resolve how) {
  if (auto s = check_name(name); s != NFS3_OK) return s;
  if (!S_ISDIR(dir_st.st_mode)) return NFS3ERR_NOTDIR;
  const char* component = name.c_str();
  if (name == ".." && is_export_root(ex, dir_st)) component = ".";
  constexpr int kFlags = O_PATH | O_NOFOLLOW | O_CLOEXEC;
  int fd = -1;
  if (how != Resolve::any) {
    open_how oh{};
    oh.flags = kFlags;
    oh.resolve = how == Resolve::cached ? RESOLVE_CACHED : RESOLVE_NO_XDEV;
    fd = static_cast<int>(::syscall(SYS_openat2, dirfd, component, &oh, sizeof oh));
    // EAGAIN: it would take the disk; EXDEV: a mount point; ENOSYS, EINVAL:
    // no openat2 or no RESOLVE_CACHED here.
    if (fd < 0 && (errno == EAGAIN || errno == EXDEV || errno == ENOSYS || errno == EINVAL)) return NFS3ERR_JUKEBOX;
  } else {
    fd = ::openat(dirfd, component, kFlags);
  }
  if (fd < 0) return errno_to_nfsstat3(errno);
  out = Fd(fd);
  return NFS3_OK;
}

int stat_fd(int fd, struct stat& st) { return ::fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW); }

int stat_io(int fd, struct stat& st, bool& may_be_immutable) {
  struct statx sx {};
  if (::statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &sx) != 0) {
    // A sandbox whose filter predates statx: fstat, which cannot tell.
    may_be_immutable = true;
    return errno == ENOSYS || errno == EPERM ? stat_fd(fd, st) : -1;
  }
  auto ts = [](const statx_timestamp& t) {
    return timespec{static_cast<time_t>(t.tv_sec), static_cast<long>(t.tv_nsec)};
  };
  st = {};
  st.st_dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
  st.st_ino = static_cast<ino_t>(sx.stx_ino);
  st.st_mode = sx.stx_mode;
  st.st_nlink = static_cast<nlink_t>(sx.stx_nlink);
  st.st_uid = sx.stx_uid;
  st.st_gid = sx.stx_gid;
  st.st_rdev = makedev(sx.stx_rdev_major, sx.stx_rdev_minor);
  st.st_size = static_cast<off_t>(sx.stx_size);
  st.st_blksize = static_cast<blksize_t>(sx.stx_blksize);
  st.st_blocks = static_cast<blkcnt_t>(sx.stx_blocks);
  st.st_atim = ts(sx.stx_atime);
  st.st_mtim = ts(sx.stx_mtime);
  st.st_ctim = ts(sx.stx_ctime);
  may_be_immutable = (sx.stx_attributes & STATX_ATTR_IMMUTABLE) || !(sx.stx_attributes_mask & STATX_ATTR_IMMUTABLE);
  return 0;
}

post_op_attr post_op(const Object& o) {
  struct stat st {};
  if (!o.ex || stat_fd(o.fd.get(), st) != 0) return std::nullopt;
  return to_fattr3(st, *o.ex);
}

pre_op_attr pre_op(const Object& o) {
  if (o.ex && o.reached) return to_wcc_attr(*o.reached);
  struct stat st {};
  if (!o.ex || stat_fd(o.fd.get(), st) != 0) return std::nullopt;
  return to_wcc_attr(st);
}

}  // namespace nfsrdma::server
