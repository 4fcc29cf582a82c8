// Error formatting and the abort path for broken invariants.
#include "lib/base/result.hpp"

#include <cstdio>
#include <cstring>

namespace nfsrdma {

std::string Error::describe() const {
  std::string s = message;
  if (domain == ErrorDomain::sys && code != 0) {
    s += ": ";
    s += std::strerror(code);
  }
  return s;
}

Error sys_error(int errnum, std::string what) {
  Action a = (errnum == EAGAIN || errnum == EINTR) ? Action::retry_now : Action::fail;
  return Error{ErrorDomain::sys, errnum, a, std::move(what)};
}

void panic(const char* what, const char* file, int line) {
  std::fprintf(stderr, "nfsrdma: invariant broken: %s at %s:%d\n", what, file, line);
  std::abort();
}

}  // namespace nfsrdma
