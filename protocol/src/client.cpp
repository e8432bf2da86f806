#include "gpubind/protocol/client.h"

#include "gpubind/protocol/compact.h"
#include "gpubind/protocol/io.h"

namespace gpubind::protocol {

Result<std::string> exchange(const std::string& socket_path, const std::string& request,
                             int timeout_ms) {
  const std::string where = "gpubindd at " + socket_path;
  if (request.size() > compact::kMaxRequestBytes) return make_error(where + ": request too large");
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  auto fd = connect_unix(socket_path, deadline);
  if (!fd) {
    if (Clock::now() >= deadline) return make_error(where + ": daemon did not answer in time");
    return make_error(where + ": daemon unavailable: " + fd.error().message);
  }
  const UniqueFd conn(*fd);

  std::string frame(compact::kMagic, sizeof compact::kMagic);
  frame += static_cast<char>(compact::kVersion);
  char length[4];
  compact::put_length(length, static_cast<uint32_t>(request.size()));
  frame.append(length, 4);
  frame += request;
  // A failure past the deadline is the daemon's slowness, whatever call saw it.
  const auto failed = [&](const char* doing, const Error& error) {
    if (Clock::now() >= deadline) return make_error(where + ": daemon did not answer in time");
    return make_error(where + ": " + doing + ": " + error.message);
  };
  if (auto sent = send_all(conn.get(), frame.data(), frame.size(), deadline); !sent)
    return failed("sending the request", sent.error());

  char header[compact::kAnswerHeaderBytes];
  if (auto got = receive_all(conn.get(), header, sizeof header, deadline); !got)
    return failed("reading the answer", got.error());
  const uint32_t size = compact::get_length(header + 1);
  if (size > compact::kMaxAnswerBytes) return make_error(where + ": answer too large");
  std::string answer(size, '\0');
  if (auto got = receive_all(conn.get(), answer.data(), size, deadline); !got)
    return failed("reading the answer", got.error());

  switch (static_cast<uint8_t>(header[0])) {
    case compact::kStatusPlan:
      return answer;
    case compact::kStatusRefused: {
      Error refused = make_error(where + ": request refused: " + answer);
      refused.invalid_input = true;
      return refused;
    }
    case compact::kStatusUnsupportedVersion:
      return make_error(where + ": speaks another protocol version (" + answer + ")");
    default:
      return make_error(where + ": unknown answer status " +
                        std::to_string(static_cast<uint8_t>(header[0])));
  }
}

Result<StepPlan> ask_daemon(const std::string& socket_path, const StepRequest& request,
                            int timeout_ms) {
  auto bytes = encode_request(request);
  if (!bytes) {
    Error error = bytes.error();
    error.invalid_input = true;
    return error;
  }
  auto answer = exchange(socket_path, *bytes, timeout_ms);
  if (!answer) return answer.error();
  return decode_plan(*answer);
}

}  // namespace gpubind::protocol
