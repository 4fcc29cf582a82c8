// /proc/PID/stat (proc_pid_stat(5)) split into its fields, read for the
// process's own metrics and for a FUSE caller's state.
#pragma once

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace nfsrdma {

// field[n] is stat field n as proc_pid_stat(5) numbers them (field[1] the
// pid, field[2] the command, whatever it contains); empty when `path`
// cannot be read.
inline std::vector<std::string> proc_stat_fields(const std::string& path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  auto open = text.find('('), close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return {};
  std::vector<std::string> field = {"", text.substr(0, open > 0 ? open - 1 : 0), text.substr(open + 1, close - open - 1)};
  std::istringstream rest(text.substr(close + 1));
  for (std::string f; rest >> f;) field.push_back(f);
  return field;
}

}  // namespace nfsrdma
