// Exports: which directories are served, to whom, and how (exports(5) syntax).
//
//   /srv/pool  192.168.1.0/24(rw,no_root_squash) host1(ro) *(ro,all_squash,anonuid=1000)
//   /srv/pub   -ro,insecure *
//
// A line is a path, optional default options ("-opts"), then clients each with
// their own options. Which entry decides for an address is ranked as Linux's
// mountd ranks them, whatever their order on the line: a single host (a name
// or an address) over a network (address/prefix, even /32) over `*`; within a
// rank, the first on the line. Wildcard names and @netgroups (ranked between
// networks and `*` on Linux) are refused at start-up, as are `nohide` and
// `crossmnt`: this server never crosses into a filesystem mounted below an
// export (a LOOKUP of such a mount point answers NFS3ERR_ACCES).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/base/result.hpp"
#include "lib/rpc/transport.hpp"

namespace nfsrdma::server {

enum class Squash : std::uint8_t { none, root, all };

struct ExportOptions {
  bool rw = false;  // exports(5) default: ro
  Squash squash = Squash::root;
  std::uint32_t anonuid = 65534;
  std::uint32_t anongid = 65534;
  bool sync = true;
  bool secure = true;  // require a source port below 1024, as nfsd does
};

struct ClientSpec {
  // In rank order: the first kind that matches decides.
  enum class Kind : std::uint8_t { host, network, any };
  Kind kind = Kind::any;
  std::string text;  // as written, for EXPORT and logs
  // host, network: IPv6 form (IPv4 mapped), with a prefix length over 128
  // bits; a host name resolves to one such entry per address.
  std::vector<std::pair<std::array<std::uint8_t, 16>, unsigned>> networks;
  ExportOptions options;

  bool matches(const sockaddr_storage& addr) const;
};

struct ExportEntry {
  std::string path;  // canonical, absolute
  std::optional<std::uint32_t> fsid;  // fsid= option
  std::vector<ClientSpec> clients;
  // What the line probably does not mean, as exportfs warns about it (an
  // option list after a space applies to everyone): logged at every load.
  std::vector<std::string> warnings;

  // The options for a client at `addr`, or nothing if it is not allowed.
  const ExportOptions* options_for(const sockaddr_storage& addr) const;
};

// Parses one exports(5) line; a bare path means "PATH *(rw)".
Result<ExportEntry> parse_export_line(const std::string& line);
// Parses an exports file: blank lines and '#' comments ignored, '\' continues a line.
Result<std::vector<ExportEntry>> parse_exports_file(const std::string& file);

// "rw,root_squash,sync,secure" and the like: the options as exportfs -v shows them.
std::string describe(const ExportOptions& o);
// The addresses and networks a client entry resolved to: "*", "192.0.2.1",
// "10.0.0.0/8", "::1", one per name's address.
std::string describe_networks(const ClientSpec& c);

using rpc::to_v6;  // addresses as 16 bytes, IPv4 mapped

}  // namespace nfsrdma::server
