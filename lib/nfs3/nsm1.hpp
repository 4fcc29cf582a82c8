// NSM version 1, the status monitor (XNFS chapter 11): how hosts holding
// locks learn that a peer restarted. Program 100024. A host's state number
// is odd while it runs and grows on every start; NOTIFY carries the new one.
// MON and UNMON come only from the local lock manager; NOTIFY from peers.
#pragma once

#include <array>
#include <string>

#include "lib/xdr/xdr.hpp"

namespace nfsrdma::nsm1 {

constexpr std::uint32_t kProgram = 100024;
constexpr std::uint32_t kVersion = 1;
constexpr std::uint32_t kMaxStrLen = 1024;  // SM_MAXSTRLEN

enum class Proc : std::uint32_t { NULL_ = 0, STAT = 1, MON = 2, UNMON = 3, UNMON_ALL = 4, SIMU_CRASH = 5, NOTIFY = 6 };
constexpr std::uint32_t kProcCount = 7;
const char* proc_name(std::uint32_t proc);

enum class res : std::uint32_t { stat_succ = 0, stat_fail = 1 };

struct sm_name { std::string mon_name; };
struct my_id {
  std::string my_name;
  std::int32_t my_prog = 0, my_vers = 0, my_proc = 0;
};
struct mon_id {
  std::string mon_name;
  my_id id;
};
struct mon {
  mon_id id;
  std::array<std::uint8_t, 16> priv{};
};
struct sm_stat_res {
  res res_stat = res::stat_succ;
  std::int32_t state = 0;
};
struct sm_stat { std::int32_t state = 0; };
struct stat_chge {  // NOTIFY
  std::string mon_name;
  std::int32_t state = 0;
};
// What the monitor calls back (my_id's procedure) when a monitored host restarted.
struct status {
  std::string mon_name;
  std::int32_t state = 0;
  std::array<std::uint8_t, 16> priv{};
};

template <class X> void codec(X& x, sm_name& v) { x.string(v.mon_name, kMaxStrLen); }
template <class X> void codec(X& x, my_id& v) {
  x.string(v.my_name, kMaxStrLen);
  x.i32(v.my_prog);
  x.i32(v.my_vers);
  x.i32(v.my_proc);
}
template <class X> void codec(X& x, mon_id& v) {
  x.string(v.mon_name, kMaxStrLen);
  codec(x, v.id);
}
template <class X> void codec(X& x, mon& v) {
  codec(x, v.id);
  x.fixed(v.priv);
}
template <class X> void codec(X& x, sm_stat_res& v) {
  x.enumeration(v.res_stat);
  if (static_cast<std::uint32_t>(v.res_stat) > 1) x.fail(xdr::Fault::bad_value);
  x.i32(v.state);
}
template <class X> void codec(X& x, sm_stat& v) { x.i32(v.state); }
template <class X> void codec(X& x, stat_chge& v) {
  x.string(v.mon_name, kMaxStrLen);
  x.i32(v.state);
}
template <class X> void codec(X& x, status& v) {
  x.string(v.mon_name, kMaxStrLen);
  x.i32(v.state);
  x.fixed(v.priv);
}

}  // namespace nfsrdma::nsm1
