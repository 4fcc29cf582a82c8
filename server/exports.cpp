#include "server/exports.hpp"

#include <arpa/inet.h>
#include <netdb.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "server/rpc_callback.hpp"

namespace nfsrdma::server {
namespace {

Error config_error(std::string what) { return Error{ErrorDomain::config, 0, Action::fail, std::move(what)}; }

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

Result<std::uint32_t> parse_u32(const std::string& opt, const std::string& v) {
  try {
    std::size_t used = 0;
    unsigned long n = std::stoul(v, &used, 10);
    if (used != v.size() || n > 0xffffffffUL) throw std::out_of_range(v);
    return static_cast<std::uint32_t>(n);
  } catch (const std::exception&) {
    return config_error("bad value '" + v + "' for export option " + opt);
  }
}

// Applies a comma-separated option list on top of `o`.
Result<void> apply_options(const std::string& list, ExportOptions& o, std::optional<std::uint32_t>& fsid) {
  std::stringstream ss(list);
  std::string opt;
  while (std::getline(ss, opt, ',')) {
    opt = trim(opt);
    if (opt.empty()) continue;
    auto eq = opt.find('=');
    std::string key = opt.substr(0, eq), val = eq == std::string::npos ? "" : opt.substr(eq + 1);
    if (key == "rw") o.rw = true;
    else if (key == "ro") o.rw = false;
    else if (key == "root_squash") o.squash = Squash::root;
    else if (key == "no_root_squash") o.squash = Squash::none;
    else if (key == "all_squash") o.squash = Squash::all;
    else if (key == "no_all_squash") { if (o.squash == Squash::all) o.squash = Squash::root; }
    else if (key == "sync") o.sync = true;
    else if (key == "async") o.sync = false;
    else if (key == "secure") o.secure = true;
    else if (key == "insecure") o.secure = false;
    else if (key == "anonuid" || key == "anongid" || key == "fsid") {
      auto n = parse_u32(key, val);
      if (!n) return n.error();
      if (key == "anonuid") o.anonuid = *n;
      else if (key == "anongid") o.anongid = *n;
      else fsid = *n;
    } else if (key == "no_subtree_check" || key == "subtree_check" || key == "wdelay" || key == "no_wdelay" ||
               key == "hide") {
      // Accepted for existing exports files: we never check subtrees (file
      // handles are the kernel's, valid anywhere in the export), write as the
      // client asks, and never cross mounts (hide is what we do).
    } else if (key == "nohide" || key == "crossmnt") {
      return config_error("export option '" + key +
                          "' is not supported: this server never crosses into a filesystem mounted below an "
                          "export; export that filesystem on its own line");
    } else {
      return config_error("unknown export option '" + opt + "'");
    }
  }
  return {};
}

Result<ClientSpec> parse_client(const std::string& who) {
  ClientSpec c;
  c.text = who.empty() ? "*" : who;
  if (who == "*" || who.empty()) {
    c.kind = ClientSpec::Kind::any;
    return c;
  }
  if (who[0] == '@') {
    return config_error("netgroup '" + who + "' is not supported (no NIS lookups here): list its hosts or networks");
  }
  if (who.find_first_of("*?[") != std::string::npos) {
    return config_error("wildcard client '" + who + "' is not supported: use *, a host name, an address or a network");
  }
  c.kind = who.find('/') == std::string::npos ? ClientSpec::Kind::host : ClientSpec::Kind::network;
  std::string host = who;
  int prefix = -1;
  if (auto slash = who.find('/'); slash != std::string::npos) {
    host = who.substr(0, slash);
    const std::string mask = who.substr(slash + 1);
    in_addr m{};
    if (mask.find('.') != std::string::npos && inet_pton(AF_INET, mask.c_str(), &m) == 1) {
      // A dotted netmask (exports(5) allows both): contiguous ones only.
      std::uint32_t bits = ntohl(m.s_addr);
      prefix = __builtin_popcount(bits);
      if (bits != (prefix == 0 ? 0u : ~0u << (32 - prefix))) return config_error("non-contiguous netmask in '" + who + "'");
    } else {
      auto p = parse_u32("prefix", mask);
      if (!p) return config_error("bad network '" + who + "'");
      prefix = static_cast<int>(*p);
    }
  }
  in_addr a4{};
  in6_addr a6{};
  std::array<std::uint8_t, 16> bytes{};
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) {
    if (prefix > 32) return config_error("bad prefix length in '" + who + "'");
    bytes[10] = bytes[11] = 0xff;
    std::memcpy(bytes.data() + 12, &a4, 4);
    c.networks.push_back({bytes, static_cast<unsigned>(prefix < 0 ? 128 : 96 + prefix)});
    return c;
  }
  if (inet_pton(AF_INET6, host.c_str(), &a6) == 1) {
    if (prefix > 128) return config_error("bad prefix length in '" + who + "'");
    std::memcpy(bytes.data(), &a6, 16);
    c.networks.push_back({bytes, static_cast<unsigned>(prefix < 0 ? 128 : prefix)});
    return c;
  }
  if (prefix >= 0) return config_error("bad network '" + who + "' (a network is ADDRESS/PREFIX)");
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0) {
    return config_error("cannot resolve export client '" + host + "': " + gai_strerror(rc));
  }
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    sockaddr_storage ss{};
    std::memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
    c.networks.push_back({to_v6(ss), 128});
  }
  freeaddrinfo(res);
  return c;
}

}  // namespace

std::string describe(const ExportOptions& o) {
  std::string s = o.rw ? "rw" : "ro";
  s += o.squash == Squash::none ? ",no_root_squash" : o.squash == Squash::all ? ",all_squash" : ",root_squash";
  s += o.sync ? ",sync" : ",async";
  s += o.secure ? ",secure" : ",insecure";
  if (o.squash != Squash::none) s += ",anonuid=" + std::to_string(o.anonuid) + ",anongid=" + std::to_string(o.anongid);
  return s;
}

std::string describe_networks(const ClientSpec& c) {
  if (c.kind == ClientSpec::Kind::any) return "*";
  std::string out;
  for (const auto& [net, prefix] : c.networks) {
    const sockaddr_storage a = rpc::from_v6(net);  // IPv4-mapped ones as IPv4
    const bool v4 = a.ss_family == AF_INET && prefix >= 96;
    const unsigned bits = v4 ? prefix - 96 : prefix;
    if (!out.empty()) out += " ";
    out += address_text(a);
    if (c.kind == ClientSpec::Kind::network || bits != (v4 ? 32u : 128u)) out += "/" + std::to_string(bits);
  }
  return out.empty() ? "(no address)" : out;
}

bool ClientSpec::matches(const sockaddr_storage& addr) const {
  if (kind == Kind::any) return true;
  auto a = to_v6(addr);
  for (const auto& [net, prefix] : networks) {
    unsigned full = prefix / 8, rest = prefix % 8;
    if (std::memcmp(a.data(), net.data(), full) != 0) continue;
    if (rest != 0) {
      auto mask = static_cast<std::uint8_t>(0xff << (8 - rest));
      if ((a[full] & mask) != (net[full] & mask)) continue;
    }
    return true;
  }
  return false;
}

const ExportOptions* ExportEntry::options_for(const sockaddr_storage& addr) const {
  const ClientSpec* best = nullptr;
  for (const auto& c : clients) {
    if ((!best || c.kind < best->kind) && c.matches(addr)) best = &c;
  }
  return best ? &best->options : nullptr;
}

Result<ExportEntry> parse_export_line(const std::string& raw) {
  std::stringstream ss(trim(raw));
  std::vector<std::string> tokens;
  for (std::string t; ss >> t;) tokens.push_back(t);
  if (tokens.empty()) return config_error("empty export line");
  ExportEntry e;
  e.path = tokens[0];
  if (e.path.empty() || e.path[0] != '/') return config_error("export path must be absolute: '" + e.path + "'");
  ExportOptions defaults;
  std::size_t i = 1;
  bool given_defaults = i < tokens.size() && tokens[i][0] == '-';
  if (given_defaults) {
    if (auto r = apply_options(tokens[i].substr(1), defaults, e.fsid); !r) return r.error();
    ++i;
  }
  if (i == tokens.size()) {
    // No client: everyone, with the -options given (exportfs's reading),
    // or read-write for a path alone (the command-line shorthand).
    ClientSpec any;
    any.text = "*";
    any.options = defaults;
    if (!given_defaults) any.options.rw = true;
    e.clients.push_back(any);
    return e;
  }
  for (; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    auto open = t.find('(');
    std::string who = t.substr(0, open);
    if (open == 0) {
      e.warnings.push_back("no client before '" + t + "' in export " + e.path +
                           ": these options apply to everyone (*); write 'client" + t +
                           "' without a space to give them to one client");
    }
    auto client = parse_client(who);
    if (!client) return client.error();
    client->options = defaults;
    if (open != std::string::npos) {
      if (t.back() != ')') return config_error("unbalanced parentheses in '" + t + "'");
      if (auto r = apply_options(t.substr(open + 1, t.size() - open - 2), client->options, e.fsid); !r) {
        return r.error();
      }
    }
    e.clients.push_back(std::move(*client));
  }
  return e;
}

Result<std::vector<ExportEntry>> parse_exports_file(const std::string& file) {
  std::ifstream in(file);
  if (!in) return sys_error(errno, "cannot read exports file " + file);
  std::vector<ExportEntry> out;
  std::string line, pending;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    if (!line.empty() && line.back() == '\\') {
      pending += line.substr(0, line.size() - 1) + " ";
      continue;
    }
    line = trim(pending + line);
    pending.clear();
    if (line.empty()) continue;
    auto e = parse_export_line(line);
    if (!e) {
      Error err = e.error();
      err.message = file + ":" + std::to_string(lineno) + ": " + err.message;
      return err;
    }
    out.push_back(std::move(*e));
  }
  return out;
}

}  // namespace nfsrdma::server
