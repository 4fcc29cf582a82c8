// NFSv3 procedure arguments and results (RFC 1813 §3.3). A result struct holds
// the status, the fields common to success and failure, and the success-only
// fields; its codec writes only what the status selects.
//
// WRITE3args::data and READ3res::data borrow the message buffer (zero copy).
#pragma once

#include <vector>

#include "lib/nfs3/nfs3_types.hpp"

namespace nfsrdma::nfs3 {

enum class Proc : std::uint32_t {
  NULL_ = 0, GETATTR = 1, SETATTR = 2, LOOKUP = 3, ACCESS = 4, READLINK = 5, READ = 6,
  WRITE = 7, CREATE = 8, MKDIR = 9, SYMLINK = 10, MKNOD = 11, REMOVE = 12, RMDIR = 13,
  RENAME = 14, LINK = 15, READDIR = 16, READDIRPLUS = 17, FSSTAT = 18, FSINFO = 19,
  PATHCONF = 20, COMMIT = 21,
};
constexpr std::uint32_t kProcCount = 22;
const char* proc_name(std::uint32_t proc);

// Procedures that change state: their replies go in the duplicate request cache.
bool is_non_idempotent(Proc p);

// Whether a result with this status counts as an error in the metrics: any
// non-OK status, but NOENT from LOOKUP, which is an answer (the name is not
// there, as every negative dentry and every create's first look gets).
bool counts_as_error(Proc p, std::uint32_t status);

// ---- arguments ----
struct FhArgs { nfs_fh3 object; };  // GETATTR, READLINK, FSSTAT, FSINFO, PATHCONF
struct SETATTR3args { nfs_fh3 object; sattr3 new_attributes; std::optional<nfstime3> guard; };
struct ACCESS3args { nfs_fh3 object; std::uint32_t access = 0; };
struct READ3args { nfs_fh3 file; std::uint64_t offset = 0; std::uint32_t count = 0; };
struct WRITE3args {
  nfs_fh3 file;
  std::uint64_t offset = 0;
  std::uint32_t count = 0;
  stable_how stable = stable_how::UNSTABLE;
  std::span<const std::uint8_t> data;  // borrowed
};
struct CREATE3args {
  diropargs3 where;
  createmode3 mode = createmode3::UNCHECKED;
  sattr3 obj_attributes;  // UNCHECKED, GUARDED
  verf8 verf{};           // EXCLUSIVE
};
struct MKDIR3args { diropargs3 where; sattr3 attributes; };
struct SYMLINK3args { diropargs3 where; sattr3 symlink_attributes; std::string symlink_data; };
struct MKNOD3args { diropargs3 where; ftype3 type = NF3FIFO; sattr3 attributes; specdata3 spec; };
struct RENAME3args { diropargs3 from, to; };
struct LINK3args { nfs_fh3 file; diropargs3 link; };
struct READDIR3args { nfs_fh3 dir; std::uint64_t cookie = 0; verf8 cookieverf{}; std::uint32_t count = 0; };
struct READDIRPLUS3args {
  nfs_fh3 dir;
  std::uint64_t cookie = 0;
  verf8 cookieverf{};
  std::uint32_t dircount = 0, maxcount = 0;
};
struct COMMIT3args { nfs_fh3 file; std::uint64_t offset = 0; std::uint32_t count = 0; };

// ---- results ----
struct GETATTR3res { nfsstat3 status = NFS3_OK; fattr3 obj_attributes; };
struct WccRes { nfsstat3 status = NFS3_OK; wcc_data wcc; };  // SETATTR, REMOVE, RMDIR
struct LOOKUP3res { nfsstat3 status = NFS3_OK; nfs_fh3 object; post_op_attr obj_attributes, dir_attributes; };
struct ACCESS3res { nfsstat3 status = NFS3_OK; post_op_attr obj_attributes; std::uint32_t access = 0; };
struct READLINK3res { nfsstat3 status = NFS3_OK; post_op_attr symlink_attributes; std::string data; };
struct READ3res {
  nfsstat3 status = NFS3_OK;
  post_op_attr file_attributes;
  std::uint32_t count = 0;
  bool eof = false;
  std::span<const std::uint8_t> data;  // borrowed
};
struct WRITE3res {
  nfsstat3 status = NFS3_OK;
  wcc_data file_wcc;
  std::uint32_t count = 0;
  stable_how committed = stable_how::UNSTABLE;
  verf8 verf{};
};
struct CreateRes {  // CREATE, MKDIR, SYMLINK, MKNOD
  nfsstat3 status = NFS3_OK;
  post_op_fh3 obj;
  post_op_attr obj_attributes;
  wcc_data dir_wcc;
};
struct RENAME3res { nfsstat3 status = NFS3_OK; wcc_data fromdir_wcc, todir_wcc; };
struct LINK3res { nfsstat3 status = NFS3_OK; post_op_attr file_attributes; wcc_data linkdir_wcc; };
struct entry3 { std::uint64_t fileid = 0; std::string name; std::uint64_t cookie = 0; };
struct READDIR3res {
  nfsstat3 status = NFS3_OK;
  post_op_attr dir_attributes;
  verf8 cookieverf{};
  std::vector<entry3> entries;
  bool eof = false;
};
struct entryplus3 {
  std::uint64_t fileid = 0;
  std::string name;
  std::uint64_t cookie = 0;
  post_op_attr name_attributes;
  post_op_fh3 name_handle;
};
struct READDIRPLUS3res {
  nfsstat3 status = NFS3_OK;
  post_op_attr dir_attributes;
  verf8 cookieverf{};
  std::vector<entryplus3> entries;
  bool eof = false;
};
struct FSSTAT3res {
  nfsstat3 status = NFS3_OK;
  post_op_attr obj_attributes;
  std::uint64_t tbytes = 0, fbytes = 0, abytes = 0, tfiles = 0, ffiles = 0, afiles = 0;
  std::uint32_t invarsec = 0;
};
struct FSINFO3res {
  nfsstat3 status = NFS3_OK;
  post_op_attr obj_attributes;
  std::uint32_t rtmax = 0, rtpref = 0, rtmult = 0, wtmax = 0, wtpref = 0, wtmult = 0, dtpref = 0;
  std::uint64_t maxfilesize = 0;
  nfstime3 time_delta;
  std::uint32_t properties = 0;
};
struct PATHCONF3res {
  nfsstat3 status = NFS3_OK;
  post_op_attr obj_attributes;
  std::uint32_t linkmax = 0, name_max = 0;
  bool no_trunc = true, chown_restricted = true, case_insensitive = false, case_preserving = true;
};
struct COMMIT3res { nfsstat3 status = NFS3_OK; wcc_data file_wcc; verf8 verf{}; };

// Upper bound on entries one READDIR reply can hold, for the decoder's cap.
constexpr std::size_t kMaxDirEntries = 1u << 20;

// ---- codecs: arguments ----
template <class X> void codec(X& x, FhArgs& v) { codec(x, v.object); }
template <class X> void codec(X& x, SETATTR3args& v) {
  codec(x, v.object);
  codec(x, v.new_attributes);
  xdr::xdr_optional(x, v.guard);
}
template <class X> void codec(X& x, ACCESS3args& v) { codec(x, v.object); x.u32(v.access); }
template <class X> void codec(X& x, READ3args& v) { codec(x, v.file); x.u64(v.offset); x.u32(v.count); }
template <class X> void codec(X& x, WRITE3args& v) {
  codec(x, v.file);
  x.u64(v.offset);
  x.u32(v.count);
  x.enumeration(v.stable);
  if (static_cast<std::uint32_t>(v.stable) > 2) x.fail(xdr::Fault::bad_value);
  x.opaque_view(v.data, kMaxData);
}
template <class X> void codec(X& x, CREATE3args& v) {
  codec(x, v.where);
  x.enumeration(v.mode);
  switch (v.mode) {
    case createmode3::UNCHECKED:
    case createmode3::GUARDED: codec(x, v.obj_attributes); break;
    case createmode3::EXCLUSIVE: codec(x, v.verf); break;
    default: x.fail(xdr::Fault::bad_value);
  }
}
template <class X> void codec(X& x, MKDIR3args& v) { codec(x, v.where); codec(x, v.attributes); }
template <class X> void codec(X& x, SYMLINK3args& v) {
  codec(x, v.where);
  codec(x, v.symlink_attributes);
  x.string(v.symlink_data, kMaxPath);
}
template <class X> void codec(X& x, MKNOD3args& v) {
  codec(x, v.where);
  x.enumeration(v.type);
  switch (v.type) {
    case NF3CHR:
    case NF3BLK: codec(x, v.attributes); codec(x, v.spec); break;
    case NF3SOCK:
    case NF3FIFO: codec(x, v.attributes); break;
    case NF3REG: case NF3DIR: case NF3LNK: break;  // the server answers BADTYPE
    default: x.fail(xdr::Fault::bad_value);
  }
}
template <class X> void codec(X& x, RENAME3args& v) { codec(x, v.from); codec(x, v.to); }
template <class X> void codec(X& x, LINK3args& v) { codec(x, v.file); codec(x, v.link); }
template <class X> void codec(X& x, READDIR3args& v) {
  codec(x, v.dir);
  x.u64(v.cookie);
  codec(x, v.cookieverf);
  x.u32(v.count);
}
template <class X> void codec(X& x, READDIRPLUS3args& v) {
  codec(x, v.dir);
  x.u64(v.cookie);
  codec(x, v.cookieverf);
  x.u32(v.dircount);
  x.u32(v.maxcount);
}
template <class X> void codec(X& x, COMMIT3args& v) { codec(x, v.file); x.u64(v.offset); x.u32(v.count); }

// ---- codecs: results ----
template <class X> bool status_ok(X& x, nfsstat3& s) {
  x.enumeration(s);
  return x.ok() && s == NFS3_OK;
}
template <class X> void codec(X& x, GETATTR3res& v) {
  if (status_ok(x, v.status)) codec(x, v.obj_attributes);
}
template <class X> void codec(X& x, WccRes& v) { x.enumeration(v.status); codec(x, v.wcc); }
template <class X> void codec(X& x, LOOKUP3res& v) {
  if (status_ok(x, v.status)) {
    codec(x, v.object);
    xdr::xdr_optional(x, v.obj_attributes);
  }
  xdr::xdr_optional(x, v.dir_attributes);
}
template <class X> void codec(X& x, ACCESS3res& v) {
  bool ok = status_ok(x, v.status);
  xdr::xdr_optional(x, v.obj_attributes);
  if (ok) x.u32(v.access);
}
template <class X> void codec(X& x, READLINK3res& v) {
  bool ok = status_ok(x, v.status);
  xdr::xdr_optional(x, v.symlink_attributes);
  if (ok) x.string(v.data, kMaxPath);
}
template <class X> void codec(X& x, READ3res& v) {
  bool ok = status_ok(x, v.status);
  xdr::xdr_optional(x, v.file_attributes);
  if (!ok) return;
  x.u32(v.count);
  x.boolean(v.eof);
  x.opaque_view(v.data, kMaxData);
}
template <class X> void codec(X& x, WRITE3res& v) {
  bool ok = status_ok(x, v.status);
  codec(x, v.file_wcc);
  if (!ok) return;
  x.u32(v.count);
  x.enumeration(v.committed);
  codec(x, v.verf);
}
template <class X> void codec(X& x, CreateRes& v) {
  if (status_ok(x, v.status)) {
    xdr::xdr_optional(x, v.obj);
    xdr::xdr_optional(x, v.obj_attributes);
  }
  codec(x, v.dir_wcc);
}
template <class X> void codec(X& x, RENAME3res& v) {
  x.enumeration(v.status);
  codec(x, v.fromdir_wcc);
  codec(x, v.todir_wcc);
}
template <class X> void codec(X& x, LINK3res& v) {
  x.enumeration(v.status);
  xdr::xdr_optional(x, v.file_attributes);
  codec(x, v.linkdir_wcc);
}
template <class X> void codec(X& x, entry3& v) {
  x.u64(v.fileid);
  x.string(v.name, kMaxNameWire);
  x.u64(v.cookie);
}
template <class X> void codec(X& x, entryplus3& v) {
  x.u64(v.fileid);
  x.string(v.name, kMaxNameWire);
  x.u64(v.cookie);
  xdr::xdr_optional(x, v.name_attributes);
  xdr::xdr_optional(x, v.name_handle);
}
// READDIR3res and READDIRPLUS3res differ only in their entries' type.
template <class X, class Res>
  requires std::is_same_v<Res, READDIR3res> || std::is_same_v<Res, READDIRPLUS3res>
void codec(X& x, Res& v) {
  bool ok = status_ok(x, v.status);
  xdr::xdr_optional(x, v.dir_attributes);
  if (!ok) return;
  codec(x, v.cookieverf);
  xdr::xdr_list(x, v.entries, kMaxDirEntries);
  x.boolean(v.eof);
}
template <class X> void codec(X& x, FSSTAT3res& v) {
  bool ok = status_ok(x, v.status);
  xdr::xdr_optional(x, v.obj_attributes);
  if (!ok) return;
  x.u64(v.tbytes); x.u64(v.fbytes); x.u64(v.abytes);
  x.u64(v.tfiles); x.u64(v.ffiles); x.u64(v.afiles);
  x.u32(v.invarsec);
}
template <class X> void codec(X& x, FSINFO3res& v) {
  bool ok = status_ok(x, v.status);
  xdr::xdr_optional(x, v.obj_attributes);
  if (!ok) return;
  x.u32(v.rtmax); x.u32(v.rtpref); x.u32(v.rtmult);
  x.u32(v.wtmax); x.u32(v.wtpref); x.u32(v.wtmult);
  x.u32(v.dtpref);
  x.u64(v.maxfilesize);
  codec(x, v.time_delta);
  x.u32(v.properties);
}
template <class X> void codec(X& x, PATHCONF3res& v) {
  bool ok = status_ok(x, v.status);
  xdr::xdr_optional(x, v.obj_attributes);
  if (!ok) return;
  x.u32(v.linkmax);
  x.u32(v.name_max);
  x.boolean(v.no_trunc);
  x.boolean(v.chown_restricted);
  x.boolean(v.case_insensitive);
  x.boolean(v.case_preserving);
}
template <class X> void codec(X& x, COMMIT3res& v) {
  bool ok = status_ok(x, v.status);
  codec(x, v.file_wcc);
  if (ok) codec(x, v.verf);
}

// Encoded sizes the server needs when filling READDIR replies up to `count`.
std::size_t encoded_size(const entry3& e);
std::size_t encoded_size(const entryplus3& e);
// The part of an entryplus3 that READDIRPLUS's dircount counts (RFC 1813 §3.3.17).
std::size_t dircount_size(const entryplus3& e);

}  // namespace nfsrdma::nfs3
