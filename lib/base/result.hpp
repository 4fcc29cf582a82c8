// Result<T> and Error: the error currency of every layer (STYLE.md "Errors").
// Shaped like std::expected, which neither C++20 nor Debian 12's toolchain has.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace nfsrdma {

enum class ErrorDomain : std::uint8_t { sys, xdr, rpc, fabric, config };

// What the caller should do about the error.
enum class Action : std::uint8_t { fail, retry_now, retry_later, reconnect };

struct Error {
  ErrorDomain domain = ErrorDomain::sys;
  int code = 0;  // errno for sys; a domain-specific code otherwise
  Action action = Action::fail;
  std::string message;

  std::string describe() const;
};

Error sys_error(int errnum, std::string what);

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : e_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return !e_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return *e_; }

 private:
  std::optional<Error> e_;
};

// Broken invariants abort with a message (STYLE.md).
[[noreturn]] void panic(const char* what, const char* file, int line);
#define NFSRDMA_CHECK(cond) \
  ((cond) ? (void)0 : ::nfsrdma::panic(#cond, __FILE__, __LINE__))

}  // namespace nfsrdma
