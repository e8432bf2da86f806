#include "gpubind/bench/load.h"

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gpubind/api/convert.h"
#include "gpubind/protocol/client.h"
#include "gpubind/protocol/io.h"
#include "gpubind/v1/binder.grpc.pb.h"

namespace gpubind::bench {
namespace {

using Clock = std::chrono::steady_clock;

// A channel of its own, never sharing a connection with another client's: each client thread
// loads the daemon through its own connection.
std::shared_ptr<grpc::Channel> make_channel(const std::string& socket_path) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(64 << 20);
  return grpc::CreateCustomChannel("unix:" + socket_path, grpc::InsecureChannelCredentials(), args);
}

std::string call_error(const std::string& socket_path, const grpc::Status& status) {
  return "gpubindd at " + socket_path + ": call failed (gRPC code " +
         std::to_string(status.error_code()) + "): " + status.error_message();
}

double percentile(std::vector<double>& values, double p) {
  if (values.empty()) return 0;
  const size_t rank = std::min(values.size() - 1, static_cast<size_t>(p / 100.0 * values.size()));
  std::nth_element(values.begin(), values.begin() + rank, values.end());
  return values[rank];
}

LoadResult summarize(std::vector<std::vector<double>>& per_client, double seconds, uint64_t errors,
                     std::string first_error) {
  std::vector<double> all;
  for (auto& v : per_client)
    all.insert(all.end(), v.begin(), v.end());
  LoadResult result;
  result.calls = all.size() + errors;
  result.errors = errors;
  result.first_error = std::move(first_error);
  result.plans_per_s = seconds > 0 ? all.size() / seconds : 0;
  result.p50_us = percentile(all, 50);
  result.p99_us = percentile(all, 99);
  result.p999_us = percentile(all, 99.9);
  return result;
}

// Runs `clients` threads, client c doing `share(c)` calls of `call`, which returns an error text
// or empty; returns per-client latencies in microseconds.
template <class MakeCall>
LoadResult run_clients(int clients, int requests, MakeCall make_call) {
  std::vector<std::vector<double>> latencies(clients);
  std::atomic<uint64_t> errors{0};
  std::mutex error_mutex;
  std::string first_error;
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int c = 0; c < clients; ++c) {
    const int share = requests / clients + (c < requests % clients ? 1 : 0);
    threads.emplace_back([&, c, share] {
      auto call = make_call();
      latencies[c].reserve(share);
      for (int i = 0; i < share; ++i) {
        const auto t0 = Clock::now();
        const std::string error = call();
        const auto t1 = Clock::now();
        if (error.empty()) {
          latencies[c].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        } else {
          ++errors;
          std::lock_guard<std::mutex> lock(error_mutex);
          if (first_error.empty()) first_error = error;
        }
      }
    });
  }
  for (auto& t : threads)
    t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return summarize(latencies, seconds, errors, first_error);
}

// The floor's exchanges, bounded as every exchange on gpubind's socket is.
bool write_all(int fd, const char* data, size_t size) {
  return protocol::send_all(fd, data, size, Clock::now() + std::chrono::seconds(10)).ok();
}

bool read_all(int fd, char* data, size_t size) {
  return protocol::receive_all(fd, data, size, Clock::now() + std::chrono::seconds(10)).ok();
}

}  // namespace

LoadResult plan_over_grpc(const std::string& socket_path, const PlanRequest& request, int clients,
                          int requests, bool bypass_cache) {
  v1::PlanRequest proto = api::request_to_proto(request);
  proto.set_bypass_cache(bypass_cache);
  return run_clients(clients, requests, [&] {
    auto stub = v1::Binder::NewStub(make_channel(socket_path));
    return [stub = std::shared_ptr<v1::Binder::Stub>(std::move(stub)), &proto,
            &socket_path]() -> std::string {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      v1::PlanResponse response;
      const grpc::Status status = stub->Plan(&context, proto, &response);
      return status.ok() ? std::string() : call_error(socket_path, status);
    };
  });
}

LoadResult plan_over_compact(const std::string& socket_path, const PlanRequest& request,
                             int clients, int requests) {
  // The bytes the plugin sends, and its own decoder on the answer.
  const std::string bytes = api::request_to_proto(request).SerializeAsString();
  return run_clients(clients, requests, [&] {
    return [&]() -> std::string {
      // A measurement, applied to no task: any server is measured.
      auto answer = protocol::exchange(socket_path, bytes, 10000, {std::nullopt, false});
      if (!answer) return answer.error().message;
      return protocol::decode_plan(*answer) ? std::string() : "undecodable compact answer";
    };
  });
}

LoadResult empty_grpc_calls(const std::string& socket_path, int clients, int requests) {
  return run_clients(clients, requests, [&] {
    std::shared_ptr<v1::Binder::Stub> stub = v1::Binder::NewStub(make_channel(socket_path));
    return [stub, &socket_path]() -> std::string {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      v1::GetStatusResponse response;
      const grpc::Status status = stub->GetStatus(&context, {}, &response);
      return status.ok() ? std::string() : call_error(socket_path, status);
    };
  });
}

Result<LoadResult> raw_socket_floor(const PlanRequest& request, size_t response_bytes, int clients,
                                    int requests) {
  const std::string request_bytes = api::request_to_proto(request).SerializeAsString();
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("gpubind-floor-" + std::to_string(getpid()) + ".sock"))
                               .string();
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  unlink(path.c_str());
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(listener, clients) != 0) {
    if (listener >= 0) close(listener);
    return make_error(std::string("floor socket: ") + std::strerror(errno));
  }
  // The echo server: per connection, read a length-prefixed request, answer `response_bytes`.
  const std::string reply(response_bytes, 'x');
  std::vector<std::thread> servers;
  for (int c = 0; c < clients; ++c) {
    servers.emplace_back([&] {
      const int conn = accept(listener, nullptr, nullptr);
      if (conn < 0) return;
      std::string buffer;
      uint32_t size = 0;
      while (read_all(conn, reinterpret_cast<char*>(&size), sizeof size)) {
        buffer.resize(size);
        if (!read_all(conn, buffer.data(), size)) break;
        const uint32_t out = static_cast<uint32_t>(reply.size());
        if (!write_all(conn, reinterpret_cast<const char*>(&out), sizeof out) ||
            !write_all(conn, reply.data(), reply.size())) {
          break;
        }
      }
      close(conn);
    });
  }
  struct Connection {
    int fd = -1;
    ~Connection() {
      if (fd >= 0) close(fd);
    }
  };
  LoadResult result = run_clients(clients, requests, [&] {
    auto conn = std::make_shared<Connection>();
    conn->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool connected = connect(conn->fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    return [conn, connected, &request_bytes, buffer = std::string()]() mutable -> std::string {
      if (!connected) return "cannot connect to the floor socket";
      const int fd = conn->fd;
      const uint32_t size = static_cast<uint32_t>(request_bytes.size());
      uint32_t answer = 0;
      if (!write_all(fd, reinterpret_cast<const char*>(&size), sizeof size) ||
          !write_all(fd, request_bytes.data(), request_bytes.size()) ||
          !read_all(fd, reinterpret_cast<char*>(&answer), sizeof answer)) {
        return "floor exchange failed";
      }
      buffer.resize(answer);
      if (!read_all(fd, buffer.data(), answer)) return "floor exchange failed";
      return "";
    };
  });
  // The client connections are closed now, which ends the echo threads; wake any still waiting
  // in accept for a client that never connected.
  shutdown(listener, SHUT_RDWR);
  for (auto& t : servers)
    t.join();
  close(listener);
  unlink(path.c_str());
  return result;
}

}  // namespace gpubind::bench
