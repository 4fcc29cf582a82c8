#include "client/fuse/mount_options.hpp"

#include <gtest/gtest.h>

namespace nfsrdma::fuse {
namespace {

TEST(MountOptions, DefaultsAreMountNfsDefaults) {
  auto o = parse_mount("server:/srv/pool", "");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->nfs.host, "server");
  EXPECT_EQ(o->nfs.export_path, "/srv/pool");
  EXPECT_EQ(o->nfs.proto, client::Proto::rdma);
  EXPECT_TRUE(o->nfs.hard);
  EXPECT_EQ(o->nfs.timeo_ds, 600);
  EXPECT_EQ(o->nfs.retrans, 2);
  EXPECT_EQ(o->acregmin_s, 3);
  EXPECT_EQ(o->acdirmax_s, 60);
  EXPECT_EQ(o->nfs.nconnect, 1);
}

TEST(MountOptions, ParsesNfsOptions) {
  auto o = parse_mount("10.0.0.1:/x",
                       "proto=tcp,port=2050,mountport=20050,rsize=65536,wsize=131072,soft,timeo=10,retrans=3,"
                       "ro,actimeo=7,nconnect=4,provider=verbs,allow_other");
  ASSERT_TRUE(o.ok()) << o.error().describe();
  EXPECT_EQ(o->nfs.proto, client::Proto::tcp);
  EXPECT_EQ(o->nfs.port, 2050);
  EXPECT_EQ(o->nfs.mount_port, 20050);
  EXPECT_EQ(o->rsize, 65536u);
  EXPECT_EQ(o->wsize, 131072u);
  EXPECT_FALSE(o->nfs.hard);
  EXPECT_EQ(o->nfs.timeo_ds, 10);
  EXPECT_EQ(o->nfs.retrans, 3);
  EXPECT_TRUE(o->read_only);
  EXPECT_EQ(o->acregmin_s, 7);
  EXPECT_EQ(o->acregmax_s, 7);
  EXPECT_EQ(o->acdirmin_s, 7);
  EXPECT_EQ(o->acdirmax_s, 7);
  EXPECT_EQ(o->nfs.nconnect, 4);
  EXPECT_EQ(o->nfs.provider, "verbs");
  EXPECT_EQ(o->fuse_args, std::vector<std::string>{"allow_other"});
}

TEST(MountOptions, AcceptsWhatMountAdds) {
  EXPECT_TRUE(parse_mount("h:/e", "rw,dev,suid,exec,_netdev,defaults,nofail,noatime,relatime").ok());
}

TEST(MountOptions, Ipv6Source) {
  auto o = parse_mount("[fe80::1]:/pool", "");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->nfs.host, "fe80::1");
  EXPECT_EQ(o->nfs.export_path, "/pool");
}

TEST(MountOptions, RejectsBadInputByName) {
  struct Case { const char* source; const char* opts; const char* says; };
  for (const Case& c : {Case{"nocolon", "", "host:/export"}, Case{"h:relative", "", "must start with /"},
                        Case{"h:/e", "proto=udp", "proto=udp"}, Case{"h:/e", "rsize=12", "rsize"},
                        Case{"h:/e", "rsize=abc", "rsize"}, Case{"h:/e", "timeo", "timeo"},
                        Case{"h:/e", "frobnicate", "frobnicate"}, Case{"h:/e", "nconnect=99", "nconnect"},
                        Case{"[::1/e", "", "[address]"}}) {
    auto o = parse_mount(c.source, c.opts);
    ASSERT_FALSE(o.ok()) << c.source << " " << c.opts;
    EXPECT_NE(o.error().message.find(c.says), std::string::npos) << o.error().message;
  }
}

TEST(MountOptions, NoacAndDescribe) {
  auto o = parse_mount("h:/e", "noac,proto=rdma");
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->noac);
  auto d = describe(*o);
  EXPECT_NE(d.find("proto=rdma"), std::string::npos);
  EXPECT_NE(d.find("noac"), std::string::npos);
  EXPECT_NE(d.find("hard"), std::string::npos);
}

}  // namespace
}  // namespace nfsrdma::fuse
