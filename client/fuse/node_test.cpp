// Node's rules for the attributes and listings it keeps (node_table.hpp),
// without a mount: which replies are kept, what an entry sent to the kernel
// changes, and what a listing knows of its names.
#include "client/fuse/node_table.hpp"

#include <gtest/gtest.h>

namespace nfsrdma::fuse {
namespace {

using namespace std::chrono_literals;

nfs3::fattr3 attrs(std::uint64_t size, std::uint32_t ctime, nfs3::ftype3 type = nfs3::NF3REG) {
  nfs3::fattr3 a;
  a.type = type;
  a.mode = 0755;
  a.size = size;
  a.mtime = a.ctime = {ctime, 0};
  return a;
}

nfs3::wcc_data change(const nfs3::fattr3& before, const nfs3::fattr3& after) {
  return {nfs3::wcc_attr{before.size, before.mtime, before.ctime}, after};
}

TEST(NodeAttrs, AReplyToACallSentBeforeAChangeOfOursIsNotKept) {
  Node n;
  const auto before_write = n.attrs_as_of(0);  // a GETATTR goes out
  n.forget_attrs();                            // then a WRITE
  n.remember_attrs(attrs(100, 1), before_write);
  EXPECT_FALSE(n.known_attrs()) << "its size is from before the WRITE";
  const auto after_write = n.attrs_as_of(0);
  n.remember_attrs(attrs(200, 2), after_write);
  ASSERT_TRUE(n.recent_attrs(0, 3s, 30s));
  EXPECT_EQ(n.recent_attrs(0, 3s, 30s)->size, 200u);
  EXPECT_FALSE(n.recent_attrs(1, 3s, 30s)) << "another epoch";
}

TEST(NodeAttrs, AChangeSentAfterAListingWasAskedForIsSeen) {
  Node a, b;
  const std::uint64_t asked = Node::changes();
  EXPECT_FALSE(a.changed_since(asked));
  a.forget_attrs();  // a WRITE after the READDIRPLUS went out
  EXPECT_TRUE(a.changed_since(asked));
  EXPECT_FALSE(b.changed_since(asked));
  EXPECT_FALSE(a.changed_since(Node::changes())) << "a listing asked for after it";
  // Sent before the listing was asked for, answered after: the server may
  // have read the listing first.
  a.changing(0);
  const std::uint64_t asked2 = Node::changes();
  EXPECT_FALSE(a.changed_since(asked2));
  a.change_answered();
  EXPECT_TRUE(a.changed_since(asked2));
}

TEST(NodeAttrs, ANodeTheKernelLetGoStillCountsItsChanges) {
  Node n;
  n.changing(0);
  const std::uint64_t asked = Node::changes();
  n.dropped();
  EXPECT_FALSE(Node::dropped_changed_since(asked)) << "its change was sent before";
  n.change_answered();  // its WRITE's reply, after the kernel forgot it
  EXPECT_TRUE(Node::dropped_changed_since(asked)) << "a listing asked for before cannot say which node";
}

TEST(NodeAttrs, AnEntrysAttributesAreKnownButNotRecentAndNeverReplaceNewerOnes) {
  Node n;
  n.attrs_shown(attrs(10, 5));
  ASSERT_TRUE(n.known_attrs());
  EXPECT_EQ(n.known_attrs()->size, 10u);
  EXPECT_FALSE(n.recent_attrs(0, 3s, 30s)) << "a listing read long ago may have brought them";
  n.remember_attrs(attrs(20, 6), n.attrs_as_of(0));
  n.attrs_shown(attrs(10, 5));  // an older entry
  EXPECT_EQ(n.known_attrs()->size, 20u);
  EXPECT_TRUE(n.recent_attrs(0, 3s, 30s));
  n.attrs_shown(attrs(30, 7));  // a newer one, as recent as the kept were
  EXPECT_EQ(n.recent_attrs(0, 3s, 30s)->size, 30u);
}

TEST(NodeListing, NamesKeepTheirNodesThroughOurChanges) {
  Node dir;
  const auto empty = attrs(0, 1, nfs3::NF3DIR);
  dir.listing_start(empty);
  const auto one = attrs(1, 2, nfs3::NF3DIR);
  const std::string a = "a", b = "b";
  dir.listing_apply(change(empty, one), nullptr, &a);
  auto l = dir.listing_find("a", 30s);
  ASSERT_TRUE(l);
  EXPECT_TRUE(l->held);
  EXPECT_EQ(l->ino, 0u) << "made, its node not known yet";
  dir.listing_learn("a", 7, attrs(1, 1, nfs3::NF3DIR));
  EXPECT_EQ(dir.listing_find("a", 30s)->ino, 0u) << "a reply that saw the directory otherwise teaches nothing";
  dir.listing_learn("a", 7, one);
  EXPECT_EQ(dir.listing_find("a", 30s)->ino, 7u);
  dir.listing_learn("zz", 8, one);
  EXPECT_FALSE(dir.listing_find("zz", 30s)->held) << "a name the listing lacks stays out";
  const auto renamed = attrs(1, 3, nfs3::NF3DIR);
  EXPECT_EQ(dir.listing_apply(change(one, renamed), &a, &b), 7u);
  EXPECT_FALSE(dir.listing_find("a", 30s)->held);
  EXPECT_EQ(dir.listing_find("b", 30s)->ino, 7u) << "a rename within it moves the node";
  EXPECT_EQ(dir.listing_apply(change(one, attrs(0, 4, nfs3::NF3DIR)), &b, nullptr), 0u)
      << "not as our last change left it";
  EXPECT_FALSE(dir.listing_find("b", 30s)) << "dropped";
}

TEST(NodeListing, AnEntryShowingTheDirectoryChangedElsewhereDropsIt) {
  Node dir;
  const auto made = attrs(0, 5, nfs3::NF3DIR);
  dir.listing_start(made);
  dir.attrs_shown(attrs(0, 4, nfs3::NF3DIR));  // from before our MKDIR: says nothing
  EXPECT_TRUE(dir.listing_find("x", 30s));
  dir.attrs_shown(made);
  EXPECT_TRUE(dir.listing_find("x", 30s));
  dir.attrs_shown(attrs(1, 6, nfs3::NF3DIR));
  EXPECT_FALSE(dir.listing_find("x", 30s));
}

}  // namespace
}  // namespace nfsrdma::fuse
