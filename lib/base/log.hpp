// Logging setup shared by every program: spdlog to stderr, one format, a level by name.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

namespace nfsrdma {

// Accepts spdlog's level names (trace, debug, info, warn, error, critical, off).
// Returns false for an unknown name.
bool init_logging(std::string_view level);

}  // namespace nfsrdma
