// Logging setup shared by every program: spdlog to stderr (or syslog), one format, a level by name.
//
// Every line passes through one escaping sink (escape_log_text) before it is
// written: control characters, C1 controls, Unicode line separators, bytes
// that are not UTF-8 and backslashes show as visible escapes. Log messages
// carry text peers sent (MOUNT paths, file names); no peer can end a line or
// forge one, whichever call site logged it.
#pragma once

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace nfsrdma {

// Accepts spdlog's level names (trace, debug, info, warn, error, critical, off).
// Returns false for an unknown name. With a `syslog_ident` (daemons that have
// left their terminal) lines go to syslog instead of stderr, or where no syslog
// daemon listens on /dev/log, to /var/log/IDENT.log (/tmp/IDENT-UID.log when
// not root; 16 MiB, and one older file).
bool init_logging(std::string_view level, std::string_view syslog_ident = {});
// Where lines go when syslog was asked for but no syslog daemon listens: the
// file, or "standard error (...)"; empty otherwise.
const std::string& logging_to();

// `text` with \\ for a backslash, \n \r \t, \xNN for every other byte below
// 0x20, 0x7f and every byte that is not part of valid UTF-8, and \u{NNNN} for
// C1 controls and U+2028/U+2029. Valid printable UTF-8 passes unchanged.
std::string escape_log_text(std::string_view text);

// One line per interval from a call site that peers can trigger at will (a
// refused mount, a bad header): the rest are counted into the next line that
// is logged, so no peer decides how much the log grows. Thread-safe. Used
// through NFSRDMA_LOG_LIMITED below, one limiter per call site.
class LogLimiter {
 public:
  explicit LogLimiter(std::chrono::seconds interval = std::chrono::seconds(10)) : interval_(interval) {}
  // A value (the lines held back since the last one) when a line may be logged now.
  std::optional<std::uint64_t> allow();

 private:
  std::chrono::steady_clock::duration interval_;
  std::atomic<std::int64_t> next_{0};  // steady_clock ticks when the next line may go
  std::atomic<std::uint64_t> held_{0};
};

// Logs through `limiter`, adding how many lines like it were held back.
template <class... Args>
void log_limited(LogLimiter& limiter, spdlog::level::level_enum level, fmt::format_string<Args...> format,
                 Args&&... args) {
  auto held = limiter.allow();
  if (!held) return;
  std::string line = fmt::format(format, std::forward<Args>(args)...);
  if (*held > 0) line += fmt::format(" ({} more like this in the last 10 s, not logged)", *held);
  spdlog::log(level, "{}", line);
}

}  // namespace nfsrdma

// A log line a peer can cause: at most one per 10 s from this call site.
#define NFSRDMA_LOG_LIMITED(lvl, ...)                                    \
  do {                                                                   \
    static ::nfsrdma::LogLimiter nfsrdma_limiter_;                       \
    ::nfsrdma::log_limited(nfsrdma_limiter_, spdlog::level::lvl, __VA_ARGS__); \
  } while (0)

namespace nfsrdma {

}  // namespace nfsrdma
