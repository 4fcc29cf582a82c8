#include "lib/base/log.hpp"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/syslog_sink.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <mutex>

namespace nfsrdma {
namespace {

// Length of the valid UTF-8 sequence at the start of `s` (0: not valid), and
// its code point. Overlong forms, surrogates and values past U+10FFFF are invalid.
std::size_t utf8_sequence(std::string_view s, char32_t& cp) {
  const auto b0 = static_cast<unsigned char>(s[0]);
  std::size_t n = b0 >= 0xf0 && b0 <= 0xf4 ? 4 : b0 >= 0xe0 ? 3 : b0 >= 0xc2 && b0 <= 0xdf ? 2 : 0;
  if (n == 0 || s.size() < n) return 0;
  cp = b0 & (0x7f >> n);
  for (std::size_t i = 1; i < n; ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if ((b & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3f);
  }
  static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

// Forwards every message to `inner` with its text escaped.
class EscapingSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit EscapingSink(spdlog::sink_ptr inner) : inner_(std::move(inner)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::string_view text(msg.payload.data(), msg.payload.size());
    std::string escaped = escape_log_text(text);
    if (escaped.size() == text.size()) return inner_->log(msg);  // nothing to escape: same length
    spdlog::details::log_msg copy(msg);
    copy.payload = escaped;
    inner_->log(copy);
  }
  void flush_() override { inner_->flush(); }
  void set_pattern_(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter_(std::unique_ptr<spdlog::formatter> f) override { inner_->set_formatter(std::move(f)); }

 private:
  spdlog::sink_ptr inner_;
};

}  // namespace

std::string escape_log_text(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      if (c == '\\') out += '\\';
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    if (c == '\n' || c == '\r' || c == '\t') {
      out += c == '\n' ? "\\n" : c == '\r' ? "\\r" : "\\t";
      ++i;
      continue;
    }
    char32_t cp = 0;
    std::size_t n = c >= 0x80 ? utf8_sequence(text.substr(i), cp) : 0;
    if (n == 0) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
      ++i;
    } else if ((cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029) {
      out += fmt::format("\\u{{{:04x}}}", static_cast<std::uint32_t>(cp));
      i += n;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::optional<std::uint64_t> LogLimiter::allow() {
  const std::int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  std::int64_t next = next_.load(std::memory_order_relaxed);
  if (now < next || !next_.compare_exchange_strong(next, now + interval_.count())) {
    held_.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  return held_.exchange(0, std::memory_order_relaxed);
}

namespace {
std::string logging_to_;  // set once, by init_logging, before any thread starts
}  // namespace

const std::string& logging_to() { return logging_to_; }

bool init_logging(std::string_view level, std::string_view syslog_ident) {
  auto lvl = spdlog::level::from_str(std::string(level));
  // from_str maps unknown names to "off"; only accept "off" when asked for.
  if (lvl == spdlog::level::off && level != "off") return false;
  spdlog::sink_ptr inner;
  std::string pattern = "%v";
  if (syslog_ident.empty()) {
    inner = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    pattern = "%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%t] %v";
  } else if (struct stat st {}; ::stat("/dev/log", &st) == 0 && S_ISSOCK(st.st_mode)) {
    inner = std::make_shared<spdlog::sinks::syslog_sink_mt>(std::string(syslog_ident), LOG_PID, LOG_DAEMON, false);
  } else {
    // No syslog daemon here (a container, a minimal system): a file, which
    // the caller names (logging_to) once its terminal has room for it.
    const std::string file = ::geteuid() == 0
                                 ? "/var/log/" + std::string(syslog_ident) + ".log"
                                 : "/tmp/" + std::string(syslog_ident) + "-" + std::to_string(::geteuid()) + ".log";
    try {
      inner = std::make_shared<spdlog::sinks::rotating_file_sink_mt>(file, 16 << 20, 1);  // 32 MiB at most
      logging_to_ = file;
    } catch (const spdlog::spdlog_ex&) {
      inner = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
      logging_to_ = "standard error (" + file + " cannot be written)";
    }
    pattern = "%Y-%m-%dT%H:%M:%S.%e %l [%P/%t] %v";
  }
  auto logger = std::make_shared<spdlog::logger>("nfsrdma", std::make_shared<EscapingSink>(inner));
  logger->set_pattern(pattern);
  spdlog::set_default_logger(logger);
  spdlog::set_level(lvl);
  // A file is read while it is written (tail -f): every line, at once.
  spdlog::flush_on(logging_to_.empty() ? spdlog::level::warn : spdlog::level::trace);
  return true;
}

}  // namespace nfsrdma
