// NLM version 4 (the Open Group's XNFS, chapter 10; RFC 1813 names it as the
// lock protocol beside NFSv3): network byte-range locks and DOS shares.
// Program 100021; a server answers the plain procedures, and the `_MSG` forms
// by calling the client's matching `_RES` procedure back. GRANTED goes the
// other way: the server tells a client that a blocked LOCK now holds.
#pragma once

#include <string>
#include <vector>

#include "lib/xdr/xdr.hpp"

namespace nfsrdma::nlm4 {

constexpr std::uint32_t kProgram = 100021;
constexpr std::uint32_t kVersion = 4;
constexpr std::uint32_t kMaxStrLen = 1024;   // LM_MAXSTRLEN
constexpr std::uint32_t kMaxNetobj = 1024;   // MAXNETOBJ_SZ

enum class Proc : std::uint32_t {
  NULL_ = 0, TEST = 1, LOCK = 2, CANCEL = 3, UNLOCK = 4, GRANTED = 5,
  TEST_MSG = 6, LOCK_MSG = 7, CANCEL_MSG = 8, UNLOCK_MSG = 9, GRANTED_MSG = 10,
  TEST_RES = 11, LOCK_RES = 12, CANCEL_RES = 13, UNLOCK_RES = 14, GRANTED_RES = 15,
  SHARE = 20, UNSHARE = 21, NM_LOCK = 22, FREE_ALL = 23,
};
constexpr std::uint32_t kProcCount = 24;
const char* proc_name(std::uint32_t proc);

enum class nlm4_stats : std::uint32_t {
  NLM4_GRANTED = 0, NLM4_DENIED = 1, NLM4_DENIED_NOLOCKS = 2, NLM4_BLOCKED = 3,
  NLM4_DENIED_GRACE_PERIOD = 4, NLM4_DEADLCK = 5, NLM4_ROFS = 6, NLM4_STALE_FH = 7,
  NLM4_FBIG = 8, NLM4_FAILED = 9,
};
using enum nlm4_stats;
const char* stat_name(nlm4_stats s);

using netobj = std::vector<std::uint8_t>;

struct nlm4_lock {
  std::string caller_name;
  netobj fh;
  netobj oh;  // the owner handle: opaque, chosen by the client
  std::int32_t svid = 0;  // the owner's id on the client, usually its pid
  std::uint64_t l_offset = 0;
  std::uint64_t l_len = 0;  // 0: to the end of the file and beyond
};

struct nlm4_holder {
  bool exclusive = false;
  std::int32_t svid = 0;
  netobj oh;
  std::uint64_t l_offset = 0;
  std::uint64_t l_len = 0;
};

struct nlm4_lockargs {
  netobj cookie;
  bool block = false;
  bool exclusive = false;
  nlm4_lock alock;
  bool reclaim = false;
  std::int32_t state = 0;  // the client's NSM state
};
struct nlm4_cancargs {
  netobj cookie;
  bool block = false;
  bool exclusive = false;
  nlm4_lock alock;
};
struct nlm4_testargs {  // TEST, and GRANTED sent to a client
  netobj cookie;
  bool exclusive = false;
  nlm4_lock alock;
};
struct nlm4_unlockargs {
  netobj cookie;
  nlm4_lock alock;
};

struct nlm4_res {  // LOCK, CANCEL, UNLOCK, GRANTED and their _RES
  netobj cookie;
  nlm4_stats stat = NLM4_GRANTED;
};
struct nlm4_testres {
  netobj cookie;
  nlm4_stats stat = NLM4_GRANTED;
  nlm4_holder holder;  // stat == NLM4_DENIED
};

enum class fsh4_mode : std::uint32_t { fsm_DN = 0, fsm_DR = 1, fsm_DW = 2, fsm_DRW = 3 };
enum class fsh4_access : std::uint32_t { fsa_NONE = 0, fsa_R = 1, fsa_W = 2, fsa_RW = 3 };

struct nlm4_share {
  std::string caller_name;
  netobj fh;
  netobj oh;
  fsh4_mode mode = fsh4_mode::fsm_DN;  // what others are denied
  fsh4_access access = fsh4_access::fsa_NONE;
};
struct nlm4_shareargs {
  netobj cookie;
  nlm4_share share;
  bool reclaim = false;
};
struct nlm4_shareres {
  netobj cookie;
  nlm4_stats stat = NLM4_GRANTED;
  std::int32_t sequence = 0;
};
struct nlm4_notify {  // FREE_ALL
  std::string name;
  std::int32_t state = 0;
};

template <class X> void codec(X& x, nlm4_lock& v) {
  x.string(v.caller_name, kMaxStrLen);
  x.opaque(v.fh, kMaxNetobj);
  x.opaque(v.oh, kMaxNetobj);
  x.i32(v.svid);
  x.u64(v.l_offset);
  x.u64(v.l_len);
}
template <class X> void codec(X& x, nlm4_holder& v) {
  x.boolean(v.exclusive);
  x.i32(v.svid);
  x.opaque(v.oh, kMaxNetobj);
  x.u64(v.l_offset);
  x.u64(v.l_len);
}
template <class X> void codec(X& x, nlm4_lockargs& v) {
  x.opaque(v.cookie, kMaxNetobj);
  x.boolean(v.block);
  x.boolean(v.exclusive);
  codec(x, v.alock);
  x.boolean(v.reclaim);
  x.i32(v.state);
}
template <class X> void codec(X& x, nlm4_cancargs& v) {
  x.opaque(v.cookie, kMaxNetobj);
  x.boolean(v.block);
  x.boolean(v.exclusive);
  codec(x, v.alock);
}
template <class X> void codec(X& x, nlm4_testargs& v) {
  x.opaque(v.cookie, kMaxNetobj);
  x.boolean(v.exclusive);
  codec(x, v.alock);
}
template <class X> void codec(X& x, nlm4_unlockargs& v) {
  x.opaque(v.cookie, kMaxNetobj);
  codec(x, v.alock);
}
// Statuses and share modes past the protocol's are refused, not carried on.
template <class X> void stat_codec(X& x, nlm4_stats& v) {
  x.enumeration(v);
  if (static_cast<std::uint32_t>(v) > 9) x.fail(xdr::Fault::bad_value);
}
template <class X> void codec(X& x, nlm4_res& v) {
  x.opaque(v.cookie, kMaxNetobj);
  stat_codec(x, v.stat);
}
template <class X> void codec(X& x, nlm4_testres& v) {
  x.opaque(v.cookie, kMaxNetobj);
  stat_codec(x, v.stat);
  if (x.ok() && v.stat == NLM4_DENIED) codec(x, v.holder);
}
template <class X> void codec(X& x, nlm4_share& v) {
  x.string(v.caller_name, kMaxStrLen);
  x.opaque(v.fh, kMaxNetobj);
  x.opaque(v.oh, kMaxNetobj);
  x.enumeration(v.mode);
  x.enumeration(v.access);
  if (static_cast<std::uint32_t>(v.mode) > 3 || static_cast<std::uint32_t>(v.access) > 3) x.fail(xdr::Fault::bad_value);
}
template <class X> void codec(X& x, nlm4_shareargs& v) {
  x.opaque(v.cookie, kMaxNetobj);
  codec(x, v.share);
  x.boolean(v.reclaim);
}
template <class X> void codec(X& x, nlm4_shareres& v) {
  x.opaque(v.cookie, kMaxNetobj);
  stat_codec(x, v.stat);
  x.i32(v.sequence);
}
template <class X> void codec(X& x, nlm4_notify& v) {
  x.string(v.name, kMaxStrLen);
  x.i32(v.state);
}

}  // namespace nfsrdma::nlm4
