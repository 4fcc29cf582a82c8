// MOUNT version 3 (RFC 1813 Appendix I): how a client gets the root file handle.
#pragma once

#include <string>
#include <vector>

#include "lib/nfs3/nfs3_types.hpp"

namespace nfsrdma::mount3 {

constexpr std::uint32_t kProgram = 100005;
constexpr std::uint32_t kVersion = 3;
constexpr std::uint32_t kMntPathLen = 1024;  // MNTPATHLEN
constexpr std::uint32_t kMntNameLen = 255;   // MNTNAMLEN
constexpr std::size_t kMaxListEntries = 1u << 16;

enum class Proc : std::uint32_t { NULL_ = 0, MNT = 1, DUMP = 2, UMNT = 3, UMNTALL = 4, EXPORT = 5 };
const char* proc_name(std::uint32_t proc);

enum class mountstat3 : std::uint32_t {
  MNT3_OK = 0, MNT3ERR_PERM = 1, MNT3ERR_NOENT = 2, MNT3ERR_IO = 5, MNT3ERR_ACCES = 13,
  MNT3ERR_NOTDIR = 20, MNT3ERR_INVAL = 22, MNT3ERR_NAMETOOLONG = 63, MNT3ERR_NOTSUPP = 10004,
  MNT3ERR_SERVERFAULT = 10006,
};
using enum mountstat3;

struct DirPath { std::string path; };  // MNT and UMNT arguments

struct MNT3res {
  mountstat3 status = MNT3_OK;
  nfs3::nfs_fh3 fhandle;
  std::vector<std::uint32_t> auth_flavors;
};

struct mountbody { std::string ml_hostname, ml_directory; };
struct MountList { std::vector<mountbody> entries; };  // DUMP result

struct exportnode {
  std::string ex_dir;
  std::vector<std::string> ex_groups;
};
struct Exports { std::vector<exportnode> entries; };  // EXPORT result

template <class X> void codec(X& x, DirPath& v) { x.string(v.path, kMntPathLen); }
template <class X> void codec(X& x, MNT3res& v) {
  x.enumeration(v.status);
  if (!x.ok() || v.status != MNT3_OK) return;
  codec(x, v.fhandle);
  xdr::xdr_array(x, v.auth_flavors, 16, 4);
}
template <class X> void codec(X& x, mountbody& v) {
  x.string(v.ml_hostname, kMntNameLen);
  x.string(v.ml_directory, kMntPathLen);
}
template <class X> void codec(X& x, MountList& v) { xdr::xdr_list(x, v.entries, kMaxListEntries); }

struct GroupName { std::string name; };
template <class X> void codec(X& x, GroupName& v) { x.string(v.name, kMntNameLen); }
template <class X> void codec(X& x, exportnode& v) {
  x.string(v.ex_dir, kMntPathLen);
  std::vector<GroupName> groups;
  for (auto& g : v.ex_groups) groups.push_back({g});
  xdr::xdr_list(x, groups, kMaxListEntries);
  v.ex_groups.clear();
  for (auto& g : groups) v.ex_groups.push_back(std::move(g.name));
}
template <class X> void codec(X& x, Exports& v) { xdr::xdr_list(x, v.entries, kMaxListEntries); }

}  // namespace nfsrdma::mount3
