// Errors as values at module boundaries: a Result<T> holds either a T or an Error message.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace gpubind {

struct Error {
  std::string message;
  // The request itself is at fault (as opposed to a failure in serving it).
  bool invalid_input = false;
  // The request names CPUs or GPUs that this view of the node lacks (a topology that is stale,
  // from another node, or read before a driver came up): another view, such as the live node's,
  // may plan it. Never set together with invalid_input.
  bool node_mismatch = false;
  // Whoever answered failed a trust check (who serves the socket, or what it answered): not the
  // request's fault, and worth an administrator's attention.
  bool untrusted = false;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : state_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { return std::get<Error>(state_); }

 private:
  std::variant<T, Error> state_;
};

// For operations that return nothing on success.
struct Ok {};
using Status = Result<Ok>;

inline Error make_error(std::string message) {
  return Error{std::move(message)};
}

}  // namespace gpubind
