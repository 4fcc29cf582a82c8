#include "lib/base/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/syslog_sink.h>
#include <syslog.h>

namespace nfsrdma {

bool init_logging(std::string_view level, std::string_view syslog_ident) {
  auto lvl = spdlog::level::from_str(std::string(level));
  // from_str maps unknown names to "off"; only accept "off" when asked for.
  if (lvl == spdlog::level::off && level != "off") return false;
  std::shared_ptr<spdlog::logger> logger;
  if (syslog_ident.empty()) {
    logger = spdlog::stderr_color_mt("nfsrdma");
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%t] %v");
  } else {
    logger = spdlog::syslog_logger_mt("nfsrdma", std::string(syslog_ident), LOG_PID, LOG_DAEMON);
    logger->set_pattern("%v");
  }
  spdlog::set_default_logger(logger);
  spdlog::set_level(lvl);
  spdlog::flush_on(spdlog::level::warn);
  return true;
}

}  // namespace nfsrdma
