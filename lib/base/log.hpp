// Logging setup shared by every program: spdlog to stderr (or syslog), one format, a level by name.
//
// Every line passes through one escaping sink (escape_log_text) before it is
// written: control characters, C1 controls, Unicode line separators, bytes
// that are not UTF-8 and backslashes show as visible escapes. Log messages
// carry text peers sent (MOUNT paths, file names); no peer can end a line or
// forge one, whichever call site logged it.
#pragma once

#include <spdlog/spdlog.h>

#include <string>
#include <string_view>

namespace nfsrdma {

// Accepts spdlog's level names (trace, debug, info, warn, error, critical, off).
// Returns false for an unknown name. With a `syslog_ident` (daemons that have
// left their terminal) lines go to syslog instead of stderr.
bool init_logging(std::string_view level, std::string_view syslog_ident = {});

// `text` with \\ for a backslash, \n \r \t, \xNN for every other byte below
// 0x20, 0x7f and every byte that is not part of valid UTF-8, and \u{NNNN} for
// C1 controls and U+2028/U+2029. Valid printable UTF-8 passes unchanged.
std::string escape_log_text(std::string_view text);

}  // namespace nfsrdma
