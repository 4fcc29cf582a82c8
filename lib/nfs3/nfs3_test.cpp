#include <gtest/gtest.h>

#include "lib/nfs3/mount3.hpp"
#include "lib/nfs3/nfs3_procs.hpp"
#include "lib/nfs3/portmap2.hpp"
#include "lib/xdr/xdr_testing.hpp"

namespace nfsrdma::nfs3 {
namespace {

using xdr::testing::Bytes;
using xdr::testing::enc;
using xdr::testing::expect_truncations_fail;

nfs_fh3 fh(std::initializer_list<std::uint8_t> b) {
  nfs_fh3 f;
  f.len = static_cast<std::uint32_t>(b.size());
  std::copy(b.begin(), b.end(), f.data.begin());
  return f;
}

// LOOKUP3args: a 5-byte handle and the name "file" (RFC 1813 §3.3.3, §2.3.3).
const Bytes kLookup = {0, 0, 0, 5, 1, 2, 3, 4, 5, 0, 0, 0, 0, 0, 0, 4, 'f', 'i', 'l', 'e'};

TEST(Nfs3, LookupArgsGolden) {
  diropargs3 a{fh({1, 2, 3, 4, 5}), "file"};
  EXPECT_EQ(enc(a), kLookup);
  diropargs3 d;
  ASSERT_TRUE(xdr::decode(kLookup, d).ok());
  EXPECT_EQ(d.dir, a.dir);
  EXPECT_EQ(d.name, "file");
  expect_truncations_fail<diropargs3>(kLookup);
}

// WRITE3args: handle {9}, offset 2^32+1, count 3, FILE_SYNC, data "abc".
const Bytes kWrite = {0, 0, 0, 1, 9, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 3,
                      0, 0, 0, 2, 0, 0, 0, 3, 'a', 'b', 'c', 0};

TEST(Nfs3, WriteArgsGolden) {
  const std::uint8_t data[] = {'a', 'b', 'c'};
  WRITE3args a{fh({9}), (1ull << 32) + 1, 3, stable_how::FILE_SYNC, data};
  EXPECT_EQ(enc(a), kWrite);
  WRITE3args d;
  ASSERT_TRUE(xdr::decode(kWrite, d).ok());
  EXPECT_EQ(d.offset, (1ull << 32) + 1);
  EXPECT_EQ(d.stable, stable_how::FILE_SYNC);
  ASSERT_EQ(d.data.size(), 3u);
  EXPECT_EQ(d.data[2], 'c');
  expect_truncations_fail<WRITE3args>(kWrite);
}

// CREATE3args EXCLUSIVE: where {handle {7}, "x"}, mode 2, verifier 1..8.
const Bytes kCreateExcl = {0, 0, 0, 1, 7, 0, 0, 0, 0, 0, 0, 1, 'x', 0, 0, 0,
                           0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8};

TEST(Nfs3, CreateExclusiveGolden) {
  CREATE3args a;
  a.where = {fh({7}), "x"};
  a.mode = createmode3::EXCLUSIVE;
  a.verf = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(enc(a), kCreateExcl);
  expect_truncations_fail<CREATE3args>(kCreateExcl);
}

// SETATTR3args: mode 0644 set, uid/gid/size unset, atime to server time, mtime to
// client time {5, 6}, guard ctime {1, 2}.
const Bytes kSetattr = {0, 0, 0, 1, 3, 0, 0, 0,                  // object
                        0, 0, 0, 1, 0, 0, 0x01, 0xa4,            // mode
                        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,      // uid, gid, size unset
                        0, 0, 0, 1,                              // atime SET_TO_SERVER_TIME
                        0, 0, 0, 2, 0, 0, 0, 5, 0, 0, 0, 6,      // mtime client time
                        0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2};     // guard

TEST(Nfs3, SetattrArgsGolden) {
  SETATTR3args a;
  a.object = fh({3});
  a.new_attributes.mode = 0644;
  a.new_attributes.atime.how = time_how::SET_TO_SERVER_TIME;
  a.new_attributes.mtime = {time_how::SET_TO_CLIENT_TIME, {5, 6}};
  a.guard = nfstime3{1, 2};
  EXPECT_EQ(enc(a), kSetattr);
  SETATTR3args d;
  ASSERT_TRUE(xdr::decode(kSetattr, d).ok());
  EXPECT_EQ(d.new_attributes.mode, 0644u);
  EXPECT_FALSE(d.new_attributes.uid);
  EXPECT_EQ(d.new_attributes.mtime.time, (nfstime3{5, 6}));
  expect_truncations_fail<SETATTR3args>(kSetattr);
}

TEST(Nfs3, BadEnumsRefused) {
  Bytes bad_stable = kWrite;
  bad_stable[23] = 3;
  WRITE3args w;
  EXPECT_FALSE(xdr::decode(bad_stable, w).ok());
  Bytes bad_mode = kCreateExcl;
  bad_mode[19] = 3;
  CREATE3args c;
  EXPECT_FALSE(xdr::decode(bad_mode, c).ok());
}

TEST(Nfs3, HandleOver64BytesRefused) {
  Bytes b = {0, 0, 0, 65};
  b.resize(4 + 68);
  FhArgs a;
  EXPECT_FALSE(xdr::decode(b, a).ok());
}

// READDIR3res with no dir attributes, verifier 0, entries {fileid 2 "." cookie 1},
// then eof.
const Bytes kReaddirRes = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                           0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, '.', 0, 0, 0,
                           0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1};

TEST(Nfs3, ReaddirResultGolden) {
  READDIR3res r;
  r.entries.push_back({2, ".", 1});
  r.eof = true;
  EXPECT_EQ(enc(r), kReaddirRes);
  READDIR3res d;
  ASSERT_TRUE(xdr::decode(kReaddirRes, d).ok());
  ASSERT_EQ(d.entries.size(), 1u);
  EXPECT_EQ(d.entries[0].name, ".");
  EXPECT_TRUE(d.eof);
  expect_truncations_fail<READDIR3res>(kReaddirRes);
  EXPECT_EQ(encoded_size(r.entries[0]), 28u);  // marker 4 + fileid 8 + name 4+4 + cookie 8
}

TEST(Nfs3, ErrorResultsCarryOnlyTheirFields) {
  LOOKUP3res r;
  r.status = NFS3ERR_NOENT;
  EXPECT_EQ(enc(r), (Bytes{0, 0, 0, 2, 0, 0, 0, 0}));
  WRITE3res w;
  w.status = NFS3ERR_ROFS;
  EXPECT_EQ(enc(w), (Bytes{0, 0, 0, 30, 0, 0, 0, 0, 0, 0, 0, 0}));
}

TEST(Nfs3, FattrRoundTrip) {
  GETATTR3res r;
  r.obj_attributes.type = NF3DIR;
  r.obj_attributes.mode = 01777;
  r.obj_attributes.size = 1ull << 40;
  r.obj_attributes.mtime = {100, 200};
  Bytes b = enc(r);
  EXPECT_EQ(b.size(), 4u + 84u);
  GETATTR3res d;
  ASSERT_TRUE(xdr::decode(b, d).ok());
  EXPECT_EQ(d.obj_attributes.type, NF3DIR);
  EXPECT_EQ(d.obj_attributes.size, 1ull << 40);
  EXPECT_EQ(d.obj_attributes.mtime, (nfstime3{100, 200}));
}

TEST(Mount3, MntResultGolden) {
  mount3::MNT3res r;
  r.fhandle = fh({0xaa, 0xbb});
  r.auth_flavors = {1};
  const Bytes golden = {0, 0, 0, 0, 0, 0, 0, 2, 0xaa, 0xbb, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1};
  EXPECT_EQ(enc(r), golden);
  expect_truncations_fail<mount3::MNT3res>(golden);
  mount3::MNT3res denied;
  denied.status = mount3::MNT3ERR_ACCES;
  EXPECT_EQ(enc(denied), (Bytes{0, 0, 0, 13}));
}

TEST(Mount3, ExportListRoundTrip) {
  mount3::Exports e;
  e.entries.push_back({"/srv/a", {"*"}});
  e.entries.push_back({"/srv/b", {"10.0.0.0/8", "host1"}});
  Bytes b = enc(e);
  mount3::Exports d;
  ASSERT_TRUE(xdr::decode(b, d).ok());
  ASSERT_EQ(d.entries.size(), 2u);
  EXPECT_EQ(d.entries[1].ex_groups[1], "host1");
  expect_truncations_fail<mount3::Exports>(b);
}

TEST(Portmap2, MappingGolden) {
  portmap2::mapping m{100003, 3, portmap2::IPPROTO_TCP_, 2049};
  const Bytes golden = {0, 1, 0x86, 0xa3, 0, 0, 0, 3, 0, 0, 0, 6, 0, 0, 0x08, 0x01};
  EXPECT_EQ(enc(m), golden);
  expect_truncations_fail<portmap2::mapping>(golden);
}

}  // namespace
}  // namespace nfsrdma::nfs3
