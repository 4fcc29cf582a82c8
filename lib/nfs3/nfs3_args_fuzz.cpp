// Fuzzes every NFSv3, MOUNTv3, PORTMAPv2, NLMv4 and NSMv1 argument decoder a client can reach,
// plus the result decoders a server can reach in our client. The first byte picks
// the decoder; a successful decode is re-encoded and must decode to the same bytes.
#include <cstdlib>

#include "lib/nfs3/mount3.hpp"
#include "lib/nfs3/nfs3_procs.hpp"
#include "lib/nfs3/nlm4.hpp"
#include "lib/nfs3/nsm1.hpp"
#include "lib/nfs3/portmap2.hpp"

namespace {

using namespace nfsrdma;

template <class T>
void run(std::span<const std::uint8_t> in) {
  T v;
  xdr::Decoder d(in);
  codec(d, v);  // found by argument-dependent lookup
  if (!d.ok()) return;
  std::vector<std::uint8_t> out;
  xdr::encode(out, v);
  T again;
  if (!xdr::decode(out, again).ok()) std::abort();
  std::vector<std::uint8_t> out2;
  xdr::encode(out2, again);
  if (out != out2) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::span<const std::uint8_t> in(data + 1, size - 1);
  using namespace nfsrdma::nfs3;
  switch (data[0] % 48) {
    case 0: run<FhArgs>(in); break;
    case 1: run<SETATTR3args>(in); break;
    case 2: run<diropargs3>(in); break;
    case 3: run<ACCESS3args>(in); break;
    case 4: run<READ3args>(in); break;
    case 5: run<WRITE3args>(in); break;
    case 6: run<CREATE3args>(in); break;
    case 7: run<MKDIR3args>(in); break;
    case 8: run<SYMLINK3args>(in); break;
    case 9: run<MKNOD3args>(in); break;
    case 10: run<RENAME3args>(in); break;
    case 11: run<LINK3args>(in); break;
    case 12: run<READDIR3args>(in); break;
    case 13: run<READDIRPLUS3args>(in); break;
    case 14: run<COMMIT3args>(in); break;
    case 15: run<mount3::DirPath>(in); break;
    case 16: run<portmap2::mapping>(in); break;
    case 17: run<GETATTR3res>(in); break;
    case 18: run<WccRes>(in); break;
    case 19: run<LOOKUP3res>(in); break;
    case 20: run<ACCESS3res>(in); break;
    case 21: run<READLINK3res>(in); break;
    case 22: run<READ3res>(in); break;
    case 23: run<WRITE3res>(in); break;
    case 24: run<CreateRes>(in); break;
    case 25: run<RENAME3res>(in); break;
    case 26: run<LINK3res>(in); break;
    case 27: run<READDIR3res>(in); break;
    case 28: run<READDIRPLUS3res>(in); break;
    case 29: run<FSSTAT3res>(in); break;
    case 30: run<FSINFO3res>(in); break;
    case 31: run<PATHCONF3res>(in); break;
    case 32: run<COMMIT3res>(in); break;
    case 33: run<mount3::MNT3res>(in); break;
    case 34: run<nlm4::nlm4_testargs>(in); break;
    case 35: run<nlm4::nlm4_lockargs>(in); break;
    case 36: run<nlm4::nlm4_cancargs>(in); break;
    case 37: run<nlm4::nlm4_unlockargs>(in); break;
    case 38: run<nlm4::nlm4_shareargs>(in); break;
    case 39: run<nlm4::nlm4_notify>(in); break;
    case 40: run<nlm4::nlm4_res>(in); break;
    case 41: run<nlm4::nlm4_testres>(in); break;
    case 42: run<nlm4::nlm4_shareres>(in); break;
    case 43: run<nsm1::sm_name>(in); break;
    case 44: run<nsm1::mon>(in); break;
    case 45: run<nsm1::mon_id>(in); break;
    case 46: run<nsm1::stat_chge>(in); break;
    case 47: run<nsm1::sm_stat_res>(in); break;
  }
  return 0;
}
