#include "client/fuse/mount_options.hpp"

#include <gtest/gtest.h>

#include "lib/fabric/fabric.hpp"

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

TEST(MountOptions, MultiRailAddressListsAreTildeSeparated) {
  auto o = parse_mount("h:/e", "remoteaddrs=10.0.0.1~10.0.1.1,localaddrs=10.0.0.2~10.0.1.2,nconnect=4");
  ASSERT_TRUE(o.ok()) << o.error().describe();
  EXPECT_EQ(o->nfs.remote_addrs, (std::vector<std::string>{"10.0.0.1", "10.0.1.1"}));
  EXPECT_EQ(o->nfs.local_addrs, (std::vector<std::string>{"10.0.0.2", "10.0.1.2"}));
  EXPECT_NE(describe(*o).find(",nconnect=4,remoteaddrs=10.0.0.1~10.0.1.1,localaddrs=10.0.0.2~10.0.1.2"),
            std::string::npos)
      << describe(*o);
  std::string seventeen = "remoteaddrs=1";
  for (int i = 0; i < 16; ++i) seventeen += "~1";
  for (const auto& [opts, says] : {std::pair{"remoteaddrs=a~~b", "empty address"}, std::pair{"localaddrs=a~", "empty"},
                                   std::pair{seventeen.c_str(), "at most 16"}}) {
    auto bad = parse_mount("h:/e", opts);
    ASSERT_FALSE(bad.ok()) << opts;
    EXPECT_NE(bad.error().message.find(says), std::string::npos) << bad.error().message;
  }
}

TEST(MountOptions, AcceptsWhatMountAdds) {
  EXPECT_TRUE(parse_mount("h:/e", "rw,dev,suid,exec,_netdev,defaults,nofail,noatime,x-systemd.automount").ok());
}

// Every option --help and the man page list parses, with a value where it takes one.
TEST(MountOptions, EveryDocumentedOptionParses) {
  for (const auto& d : mount_option_docs()) {
    std::string item(d.spelling);
    auto eq = item.find('=');
    if (eq != std::string::npos) {
      std::string v = item.substr(eq + 1);
      if (v.find('|') != std::string::npos) v = v.substr(0, v.find('|'));
      if (v == "N") v = item.starts_with("rsize") || item.starts_with("wsize") ? "65536" : "1";
      if (v == "NAME") v = "tcp";
      if (v == "HOST:PORT") v = "127.0.0.1:9100";
      item = item.substr(0, eq + 1) + v;
    }
    if (d.help.starts_with("refused")) {
      EXPECT_FALSE(parse_mount("h:/e", item).ok()) << item;
    } else {
      auto o = parse_mount("h:/e", item);
      EXPECT_TRUE(o.ok()) << item << ": " << o.error().describe();
    }
  }
}

TEST(MountOptions, Nfs5OptionsSetWhatTheyName) {
  auto o = parse_mount("h:/e", "sync,nocto,nordirplus,lookupcache=pos,local_lock=flock,bg,retry=5,noresvport,strictatime");
  ASSERT_TRUE(o.ok()) << o.error().describe();
  EXPECT_TRUE(o->writes_sync());
  EXPECT_FALSE(o->cto);
  EXPECT_FALSE(o->rdirplus);
  EXPECT_EQ(o->lookupcache, LookupCache::positive);
  EXPECT_TRUE(o->local_flock_locks);
  EXPECT_FALSE(o->local_posix_locks);
  EXPECT_TRUE(o->background);
  EXPECT_EQ(o->retry_minutes(), 5);
  EXPECT_FALSE(o->nfs.resvport);
  EXPECT_EQ(describe(*o).find("rw,sync,vers=3,proto=rdma"), 0u) << describe(*o);
  EXPECT_NE(describe(*o).find(",nocto,nordirplus,lookupcache=pos,local_lock=flock,noresvport"), std::string::npos);

  auto d = parse_mount("h:/e", "");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->writes_sync());
  EXPECT_FALSE(d->local_posix_locks || d->local_flock_locks);  // nfs(5): lock
  EXPECT_EQ(d->retry_minutes(), 2);                            // fg: 2 minutes
  EXPECT_TRUE(d->nfs.resvport);
  EXPECT_EQ(parse_mount("h:/e", "bg")->retry_minutes(), 10000);
  EXPECT_TRUE(parse_mount("h:/e", "noac")->writes_sync());
  auto nolock = parse_mount("h:/e", "nolock");
  EXPECT_TRUE(nolock->local_posix_locks && nolock->local_flock_locks);
}

TEST(MountOptions, TransfersUpTo4MiB) {
  auto o = parse_mount("h:/e", "rsize=4194304,wsize=4194304");
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->rsize, 4u << 20);
  EXPECT_EQ(o->wsize, 4u << 20);
  EXPECT_EQ(parse_mount("h:/e", "")->rsize, 1u << 20) << "1 MiB stays the default";
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
                        Case{"h:/e", "rsize=abc", "rsize"}, Case{"h:/e", "wsize=4194305", "4194304"},
                        Case{"h:/e", "timeo", "timeo"},
                        Case{"h:/e", "frobnicate", "frobnicate"}, Case{"h:/e", "nconnect=99", "nconnect"},
                        Case{"h:/e", "vers=4", "only NFS version 3"}, Case{"h:/e", "nfsvers=2", "only NFS version 3"},
                        Case{"h:/e", "sec=krb5p", "Kerberos"}, Case{"h:/e", "udp", "UDP"},
                        Case{"h:/e", "mountproto=udp", "TCP only"}, Case{"h:/e", "lookupcache=some", "lookupcache"},
                        Case{"h:/e", "local_lock=x", "local_lock"}, Case{"h:/e", "retry=-1", "retry"},
                        Case{"h:/e", "nolock=1", "takes no value"}, Case{"h:/e", "rsize", "needs a value"},
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

TEST(MountOptions, TheTransportIsWhatWasGivenElseRdmaOnlyWhereAnRdmaDeviceIs) {
  auto provider = fabric::choose_provider("");
  const bool device = provider.ok() && *provider == "verbs";
  auto o = parse_mount("h:/e", "");
  std::string why = o->choose_transport();
  EXPECT_EQ(o->nfs.proto, device ? client::Proto::rdma : client::Proto::tcp) << why;
  EXPECT_NE(why.find(device ? "RDMA device is present" : "no RDMA device"), std::string::npos) << why;

  o = parse_mount("h:/e", "proto=rdma");
  why = o->choose_transport();
  EXPECT_EQ(o->nfs.proto, client::Proto::rdma);
  EXPECT_EQ(o->nfs.provider, device ? "verbs" : "tcp") << "named, for the mount's log line";
  EXPECT_NE(why.find("RPC-over-RDMA on libfabric's " + o->nfs.provider), std::string::npos) << why;

  o = parse_mount("h:/e", "provider=tcp");
  why = o->choose_transport();
  EXPECT_EQ(o->nfs.proto, client::Proto::rdma) << "a provider is for RPC-over-RDMA";
  EXPECT_NE(why.find("provider= given"), std::string::npos) << why;

  o = parse_mount("h:/e", "tcp");
  EXPECT_EQ(o->choose_transport(), "NFS over TCP (proto=tcp)");
  EXPECT_EQ(o->nfs.proto, client::Proto::tcp);
}

}  // namespace
}  // namespace nfsrdma::fuse
