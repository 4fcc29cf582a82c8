// Logging setup shared by every program: spdlog to stderr (or syslog), one format, a level by name.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

namespace nfsrdma {

// Accepts spdlog's level names (trace, debug, info, warn, error, critical, off).
// Returns false for an unknown name. With a `syslog_ident` (daemons that have
// left their terminal) lines go to syslog instead of stderr.
bool init_logging(std::string_view level, std::string_view syslog_ident = {});

}  // namespace nfsrdma
