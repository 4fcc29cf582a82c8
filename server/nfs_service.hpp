// The NFSv3 program (RFC 1813): all 22 procedures over the export table.
//
// Each procedure is a `do_*` helper that fills a result struct and returns its
// nfsstat3 (as libfuse's passthrough_hp separates work from reply); handle()
// decodes the arguments, runs it and encodes the result. Every procedure first
// calls access(), which opens the handle as root, checks that the caller's
// address may use the export (NFS3ERR_ACCES), its source port if the export is
// `secure` (NFS3ERR_PERM) and read-only exports (NFS3ERR_ROFS), then switches the
// thread to the caller's squashed identity for the rest of the call. READ,
// WRITE and COMMIT find their file in an open-file cache instead when it is
// there (io_file), and make the same checks without opening the handle; so
// does a LOOKUP run on a transport's thread, for its directory (do_lookup).
#pragma once

#include <atomic>
#include <optional>

#include "lib/nfs3/nfs3_procs.hpp"
#include "lib/rpc/rpc.hpp"
#include "server/call_context.hpp"
#include "server/fs.hpp"
#include "server/open_files.hpp"

namespace nfsrdma::server {

struct NfsLimits {
  std::uint32_t rtmax = 1u << 20;
  std::uint32_t wtmax = 1u << 20;
};

class NfsService {
 public:
  NfsService(const ExportTable& exports, NfsLimits limits, const nfs3::verf8& write_verifier)
      : exports_(exports), limits_(limits), write_verf_(write_verifier) {}

  rpc::AcceptStat handle(const CallContext& ctx, std::uint32_t proc, xdr::Decoder& args, xdr::Encoder& out,
                         rpc::ReplyMessage& reply);
  const nfs3::verf8& write_verifier() const { return write_verf_; }
  // The most the result of `proc` with these arguments can take, in bytes:
  // READ, READDIR and READDIRPLUS by their count (capped at rtmax), READLINK
  // by PATH_MAX, every other procedure a few hundred bytes.
  std::size_t result_bound(std::uint32_t proc, xdr::Decoder& args) const;

 private:
  enum class Need : std::uint8_t { read, modify };
  nfs3::nfsstat3 access(const CallContext& ctx, const nfs3::nfs_fh3& fh, Need need, Object& out) const;
  // The export checks of access() for `o.ex`, which it fills `o.opts` from,
  // then the caller's identity.
  nfs3::nfsstat3 admit(const CallContext& ctx, Need need, Object& o) const;
  Credentials identity(const CallContext& ctx, const Object& o) const;
  // A call on a transport's thread (CallContext::may_block false) reaches a
  // file or directory only if it is held open in files_ (its inode is in
  // memory, so nothing waits for the disk; resolving a handle could): that
  // object, its export admitted and its attributes in `st`. Anything else
  // (not open, export gone, no links left) is a worker's: NFS3ERR_JUKEBOX
  // with ctx.would_block set. Its O_PATH descriptor is f->path. With `use`,
  // only the entry kept for it, which this keeps open longer; without, any
  // entry, kept open longer only for a change (Need::modify).
  nfs3::nfsstat3 held_open(const CallContext& ctx, const nfs3::nfs_fh3& fh, Object& o,
                           std::shared_ptr<const OpenFiles::File>& f, struct stat& st,
                           std::optional<OpenFiles::Use> use = std::nullopt, Need need = Need::read);
  // The object a change (SETATTR, CREATE, MKDIR, SYMLINK, MKNOD, REMOVE,
  // RMDIR, RENAME, LINK) names, as access() gives it, or its error. On a
  // transport's thread only if it is held open (held_open), its export is
  // not `sync` or is in memory (nothing to commit) and no slow call paused
  // inline ones (inline_paused); else JUKEBOX with ctx.would_block set,
  // before anything is changed. On a worker a
  // directory is kept open, as a LOOKUP keeps one, so the changes that
  // follow in it can run inline.
  nfs3::nfsstat3 reach(const CallContext& ctx, const nfs3::nfs_fh3& fh, Need need, Object& out);
  // Keeps `o`'s O_PATH descriptor in files_ (OpenFiles::Use::path) unless
  // something holds `fh` open already: the descriptor moves there, and `o`
  // borrows it back.
  void keep_open(const nfs3::nfs_fh3& fh, Object& o);
  // On a `sync` export not in memory (tmpfs's fsync writes
  // nothing, as nfsd's commit_metadata does there), `o` as a change left it
  // on stable storage before the reply (RFC 1813 §3.3's rule for every change but an UNSTABLE WRITE, as
  // nfsd's commit_metadata keeps it): a directory or regular file fsynced,
  // reopened as root; NFS3ERR_IO if that fails (the change stands). A
  // symlink, device node, FIFO or socket cannot be opened to fsync without
  // opening the device, and Linux gives userspace no other way to commit
  // one inode (nfsd's sync_inode_metadata) short of syncfs, which would
  // write every dirty page of the filesystem: a new one is committed with
  // its directory (one journal transaction on ext4 and XFS), a SETATTR of
  // one is not.
  nfs3::nfsstat3 commit_change(const CallContext& ctx, const Object& o) const;
  // Calls that may sleep (a WRITE, a change, a file's open) run inline only
  // while this is false; one that slept and took long makes it true for a
  // while.
  bool inline_paused() const;
  struct InlineStart {
    std::int64_t ns = 0;
    long slept = 0;  // voluntary context switches so far
  };
  InlineStart inline_start() const;
  void inline_end(const InlineStart& start, const char* what);

  // nfs_service.cpp
  nfs3::nfsstat3 do_getattr(const CallContext&, const nfs3::FhArgs&, nfs3::GETATTR3res&);
  nfs3::nfsstat3 do_setattr(const CallContext&, const nfs3::SETATTR3args&, nfs3::WccRes&);
  nfs3::nfsstat3 do_lookup(const CallContext&, const nfs3::diropargs3&, nfs3::LOOKUP3res&);
  nfs3::nfsstat3 do_access(const CallContext&, const nfs3::ACCESS3args&, nfs3::ACCESS3res&);
  nfs3::nfsstat3 do_readlink(const CallContext&, const nfs3::FhArgs&, nfs3::READLINK3res&);
  nfs3::nfsstat3 do_fsstat(const CallContext&, const nfs3::FhArgs&, nfs3::FSSTAT3res&);
  nfs3::nfsstat3 do_fsinfo(const CallContext&, const nfs3::FhArgs&, nfs3::FSINFO3res&);
  nfs3::nfsstat3 do_pathconf(const CallContext&, const nfs3::FhArgs&, nfs3::PATHCONF3res&);
  // nfs_namespace.cpp
  nfs3::nfsstat3 do_create(const CallContext&, const nfs3::CREATE3args&, nfs3::CreateRes&);
  nfs3::nfsstat3 do_mkdir(const CallContext&, const nfs3::MKDIR3args&, nfs3::CreateRes&);
  nfs3::nfsstat3 do_symlink(const CallContext&, const nfs3::SYMLINK3args&, nfs3::CreateRes&);
  nfs3::nfsstat3 do_mknod(const CallContext&, const nfs3::MKNOD3args&, nfs3::CreateRes&);
  nfs3::nfsstat3 do_remove(const CallContext&, const nfs3::diropargs3&, nfs3::WccRes&, bool dir);
  nfs3::nfsstat3 do_rename(const CallContext&, const nfs3::RENAME3args&, nfs3::RENAME3res&);
  nfs3::nfsstat3 do_link(const CallContext&, const nfs3::LINK3args&, nfs3::LINK3res&);
  // Makes a new directory entry with `make` (an errno-returning callable), then
  // applies `attrs` (minus what `make` set) and fills `res`.
  template <class Make>
  nfs3::nfsstat3 make_entry(const CallContext& ctx, const nfs3::diropargs3& where, const nfs3::sattr3& attrs,
                            Make make, nfs3::CreateRes& res);
  nfs3::nfsstat3 finish_create(const CallContext& ctx, Object& dir, const std::string& name,
                               const nfs3::sattr3& attrs, nfs3::CreateRes& res);
  // nfs_io.cpp
  void do_read(const CallContext&, const nfs3::READ3args&, xdr::Encoder& out, rpc::ReplyMessage& reply);
  nfs3::nfsstat3 do_write(const CallContext&, const nfs3::WRITE3args&, nfs3::WRITE3res&);
  // Whether a WRITE may run on a transport's own thread (CallContext::may_block
  // false): nothing it does waits for the disk. See nfs_io.cpp.
  bool may_write_inline(const nfs3::WRITE3args& a, const Object& o, const OpenFiles::File& f,
                        const struct stat& st) const;
  nfs3::nfsstat3 do_commit(const CallContext&, const nfs3::COMMIT3args&, nfs3::COMMIT3res&);
  // The regular file `fh` names, open for reading or writing, from files_ or
  // opened and kept there, and `st`, its attributes now. The caller's
  // permission is checked on every call; the owner may always read and write
  // their own file (nfsd's owner override: a file created 0444 over NFS must
  // still take the writes that follow). `o` gets the export and its options
  // (not a descriptor). On a transport's thread a file not open for that is
  // opened only if files_ holds it otherwise (Use::path: what a CREATE just
  // made; or open for the other use); else it is a worker's.
  nfs3::nfsstat3 io_file(const CallContext& ctx, const nfs3::nfs_fh3& fh, bool write, Object& o,
                         std::shared_ptr<const OpenFiles::File>& f, struct stat& st);
  // nfs_readdir.cpp
  // Opens a directory for listing as the caller; fills its attributes and cookie verifier.
  nfs3::nfsstat3 open_listing(const CallContext& ctx, const nfs3::nfs_fh3& fh, Object& dir, Fd& f, struct stat& st,
                              nfs3::post_op_attr& attrs, nfs3::verf8& verifier);
  nfs3::nfsstat3 do_readdir(const CallContext&, const nfs3::READDIR3args&, nfs3::READDIR3res&);
  nfs3::nfsstat3 do_readdirplus(const CallContext&, const nfs3::READDIRPLUS3args&, nfs3::READDIRPLUS3res&);

  const ExportTable& exports_;
  NfsLimits limits_;
  nfs3::verf8 write_verf_;
  OpenFiles files_{256, std::chrono::seconds(2)};
  // Until then (steady clock, ns), WRITEs, changes, opens and LOOKUPs past
  // the dentry cache go to workers:
  // an inline one was slow (inline_end).
  std::atomic<std::int64_t> inline_from_ns_{0};
};

// Applies the settable attributes to an object as the current identity.
// Shared by SETATTR and the create procedures.
nfs3::nfsstat3 apply_sattr(const Object& o, const nfs3::sattr3& attrs, const Credentials& who);

}  // namespace nfsrdma::server
