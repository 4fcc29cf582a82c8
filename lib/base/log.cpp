#include "lib/base/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace nfsrdma {

bool init_logging(std::string_view level) {
  auto lvl = spdlog::level::from_str(std::string(level));
  // from_str maps unknown names to "off"; only accept "off" when asked for.
  if (lvl == spdlog::level::off && level != "off") return false;
  auto logger = spdlog::stderr_color_mt("nfsrdma");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%t] %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(lvl);
  spdlog::flush_on(spdlog::level::warn);
  return true;
}

}  // namespace nfsrdma
