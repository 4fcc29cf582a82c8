#include "server/exports.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <fstream>

#include "server/identity.hpp"

namespace nfsrdma::server {
namespace {

sockaddr_storage v4(const char* ip, std::uint16_t port = 800) {
  sockaddr_storage ss{};
  auto* a = reinterpret_cast<sockaddr_in*>(&ss);
  a->sin_family = AF_INET;
  a->sin_port = htons(port);
  inet_pton(AF_INET, ip, &a->sin_addr);
  return ss;
}

TEST(Exports, BarePathIsEveryoneReadWrite) {
  auto e = parse_export_line("/srv/pool");
  ASSERT_TRUE(e.ok());
  const ExportOptions* o = e->options_for(v4("192.0.2.1"));
  ASSERT_NE(o, nullptr);
  EXPECT_TRUE(o->rw);
  EXPECT_EQ(o->squash, Squash::root);
  EXPECT_TRUE(o->sync);
}

TEST(Exports, EachClientGetsItsOwnEntry) {
  auto e = parse_export_line("/srv/pool 10.1.0.0/16(rw,no_root_squash) 127.0.0.1(ro,all_squash,anonuid=7)");
  ASSERT_TRUE(e.ok()) << e.error().describe();
  const ExportOptions* a = e->options_for(v4("10.1.200.3"));
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->rw);
  EXPECT_EQ(a->squash, Squash::none);
  const ExportOptions* b = e->options_for(v4("127.0.0.1"));
  ASSERT_NE(b, nullptr);
  EXPECT_FALSE(b->rw);
  EXPECT_EQ(b->squash, Squash::all);
  EXPECT_EQ(b->anonuid, 7u);
  EXPECT_EQ(e->options_for(v4("10.2.0.1")), nullptr);
}

TEST(Exports, DefaultOptionsApplyToEveryClient) {
  auto e = parse_export_line("/x -rw,insecure 127.0.0.0/8 *(ro)");
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->options_for(v4("127.3.3.3"))->rw);
  EXPECT_FALSE(e->options_for(v4("127.3.3.3"))->secure);
  EXPECT_FALSE(e->options_for(v4("192.0.2.9"))->rw);
  EXPECT_FALSE(e->options_for(v4("192.0.2.9"))->secure);
}

TEST(Exports, ASpaceBeforeOptionsGivesThemToEveryoneAndWarns) {
  // As exportfs reads it: 127.0.0.1 with the defaults (ro), everyone rw.
  auto e = parse_export_line("/x 127.0.0.1 (rw)");
  ASSERT_TRUE(e.ok()) << e.error().describe();
  EXPECT_FALSE(e->options_for(v4("127.0.0.1"))->rw);
  EXPECT_TRUE(e->options_for(v4("192.0.2.9"))->rw);
  ASSERT_EQ(e->warnings.size(), 1u);
  EXPECT_NE(e->warnings[0].find("apply to everyone"), std::string::npos) << e->warnings[0];
  EXPECT_TRUE(parse_export_line("/x 127.0.0.1(rw)")->warnings.empty());
}

TEST(Exports, ResolvedClientsAndOptionsAreDescribed) {
  auto e = parse_export_line("/x 10.1.0.0/16(rw,no_root_squash,async) ::1(insecure) localhost *");
  ASSERT_TRUE(e.ok()) << e.error().describe();
  EXPECT_EQ(describe_networks(e->clients[0]), "10.1.0.0/16");
  EXPECT_EQ(describe(e->clients[0].options), "rw,no_root_squash,async,secure");
  EXPECT_EQ(describe_networks(e->clients[1]), "::1");
  EXPECT_EQ(describe(e->clients[1].options), "ro,root_squash,sync,insecure,anonuid=65534,anongid=65534");
  EXPECT_NE(describe_networks(e->clients[2]).find("127.0.0.1"), std::string::npos);
  EXPECT_EQ(describe_networks(e->clients[3]), "*");
}

TEST(Exports, BadConfigurationIsExplained) {
  EXPECT_FALSE(parse_export_line("relative/path").ok());
  EXPECT_FALSE(parse_export_line("/x 10.0.0.0/33(rw)").ok());
  EXPECT_FALSE(parse_export_line("/x *(rw,frobnicate)").ok());
  EXPECT_FALSE(parse_export_line("/x *(anonuid=abc)").ok());
  EXPECT_FALSE(parse_export_line("/x *(rw").ok());
}

// Linux's mountd: a single host outranks a network, which outranks `*`,
// wherever each stands on the line; within a rank the first written wins.
TEST(ExportsPrecedence, AHostOutranksANetworkWrittenBeforeIt) {
  auto e = parse_export_line("/srv 10.0.0.0/8(rw) 10.0.0.5(ro)");
  ASSERT_TRUE(e.ok()) << e.error().describe();
  EXPECT_FALSE(e->options_for(v4("10.0.0.5"))->rw);
  EXPECT_TRUE(e->options_for(v4("10.0.0.6"))->rw);
}

TEST(ExportsPrecedence, ANetworkOutranksEveryoneWrittenBeforeIt) {
  auto e = parse_export_line("/srv *(rw,no_root_squash) 192.0.2.0/24(ro)");
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->options_for(v4("192.0.2.77"))->rw);
  EXPECT_TRUE(e->options_for(v4("198.51.100.1"))->rw);
}

TEST(ExportsPrecedence, AHostOutranksEveryone) {
  auto e = parse_export_line("/srv *(ro) 127.0.0.1(rw)");
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->options_for(v4("127.0.0.1"))->rw);
  EXPECT_FALSE(e->options_for(v4("127.0.0.2"))->rw);
}

TEST(ExportsPrecedence, ASlash32IsANetworkNotAHost) {
  auto e = parse_export_line("/srv 10.0.0.5/32(rw) 10.0.0.5(ro)");
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->options_for(v4("10.0.0.5"))->rw);
}

TEST(ExportsPrecedence, WithinARankTheFirstWritten) {
  auto nets = parse_export_line("/srv 10.0.0.0/8(ro) 10.1.0.0/16(rw)");
  ASSERT_TRUE(nets.ok());
  EXPECT_FALSE(nets->options_for(v4("10.1.2.3"))->rw);
  auto hosts = parse_export_line("/srv 127.0.0.1(rw) localhost(ro)");
  ASSERT_TRUE(hosts.ok());
  EXPECT_TRUE(hosts->options_for(v4("127.0.0.1"))->rw);
}

TEST(ExportsPrecedence, DottedNetmasksAreNetworks) {
  auto e = parse_export_line("/srv 10.0.0.0/255.255.0.0(rw) *(ro)");
  ASSERT_TRUE(e.ok()) << e.error().describe();
  EXPECT_TRUE(e->options_for(v4("10.0.200.1"))->rw);
  EXPECT_FALSE(e->options_for(v4("10.1.0.1"))->rw);
  EXPECT_FALSE(parse_export_line("/srv 10.0.0.0/255.0.255.0(rw)").ok());
}

TEST(Exports, WhatWeDoNotDoIsRefusedNotIgnored) {
  for (const char* line : {"/x *.example.com(rw)", "/x host?(rw)", "/x @trusted(rw)", "/x *(rw,nohide)",
                           "/x *(rw,crossmnt)", "/x -crossmnt *(rw)"}) {
    auto e = parse_export_line(line);
    ASSERT_FALSE(e.ok()) << line;
    EXPECT_NE(e.error().message.find("not supported"), std::string::npos) << e.error().message;
  }
  EXPECT_TRUE(parse_export_line("/x *(rw,hide,no_subtree_check)").ok());
}

TEST(Exports, FileWithCommentsAndContinuations) {
  std::string path = ::testing::TempDir() + "/exports";
  {
    std::ofstream f(path);
    f << "# comment\n\n/a *(rw)  # trailing\n/b \\\n  127.0.0.1(ro)\n";
  }
  auto list = parse_exports_file(path);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[1].path, "/b");
  EXPECT_EQ((*list)[1].clients[0].text, "127.0.0.1");
  std::ofstream(path) << "/a *(rw)\n/b *(bogus)\n";
  auto bad = parse_exports_file(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find(":2:"), std::string::npos);
}

TEST(Squash, RootSquashMapsRootOnly) {
  ExportOptions o;
  Credentials root{0, 0, 2, {0, 5}};
  Credentials c = squash(root, false, o);
  EXPECT_EQ(c.uid, 65534u);
  EXPECT_EQ(c.gid, 65534u);
  EXPECT_EQ(c.groups[0], 65534u);
  EXPECT_EQ(c.groups[1], 5u);
  Credentials user{1000, 100, 0, {}};
  EXPECT_EQ(squash(user, false, o), user);
  o.squash = Squash::none;
  EXPECT_EQ(squash(root, false, o), root);
  o.squash = Squash::all;
  o.anonuid = 9;
  EXPECT_EQ(squash(user, false, o).uid, 9u);
  o.squash = Squash::none;
  EXPECT_EQ(squash(root, true, o).uid, 9u);  // AUTH_NONE is always anonymous
}

TEST(Exports, DefaultsWithoutClientsApplyToEveryoneAsGiven) {
  auto ro = parse_export_line("/srv/pub -ro");
  ASSERT_TRUE(ro.ok());
  ASSERT_TRUE(ro->options_for(v4("192.0.2.1")));
  EXPECT_FALSE(ro->options_for(v4("192.0.2.1"))->rw);
  auto bare = parse_export_line("/srv/pub");
  ASSERT_TRUE(bare.ok());
  EXPECT_TRUE(bare->options_for(v4("192.0.2.1"))->rw);
}

}  // namespace
}  // namespace nfsrdma::server
