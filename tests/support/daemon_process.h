// Test helpers that run the real gpubindd: a child process with its stderr in a file, optional
// inherited listening socket (systemd socket activation) and a NOTIFY_SOCKET the test owns.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace gpubind::testing {

inline std::string make_temp_dir() {
  std::string pattern = "/tmp/gpubind-test-XXXXXX";
  if (!mkdtemp(pattern.data())) return "/tmp";
  return pattern;
}

// A datagram socket standing in for systemd's notification socket.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    unlink(path.c_str());
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  }
  ~NotifySocket() {
    close(fd_);
    unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }

  // Waits for a message containing `needle` after the one the previous wait matched; every
  // message received is kept in messages().
  bool wait_for(const std::string& needle, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      for (; next_ < messages_.size(); ++next_) {
        if (messages_[next_].find(needle) != std::string::npos) {
          ++next_;
          return true;
        }
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd pfd{fd_, POLLIN, 0};
      if (poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
      char buffer[4096];
      const ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
      if (n > 0) messages_.emplace_back(buffer, static_cast<size_t>(n));
    }
  }
  const std::vector<std::string>& messages() const { return messages_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::vector<std::string> messages_;
  size_t next_ = 0;
};

class DaemonProcess {
 public:
  ~DaemonProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // Starts `binary args...` with `extra_env` added. With `listen_fd` >= 0 the child gets it as
  // fd 3 with LISTEN_FDS=1 and LISTEN_PID set to itself.
  void start(const std::string& binary, const std::vector<std::string>& args,
             const std::vector<std::string>& extra_env, const std::string& log_path,
             int listen_fd = -1) {
    log_path_ = log_path;
    // Everything the child needs is built before fork: the parent may have gRPC threads.
    std::vector<std::string> argv_store = {binary};
    argv_store.insert(argv_store.end(), args.begin(), args.end());
    std::vector<std::string> env_store;
    for (char** e = environ; *e; ++e) {
      const std::string entry = *e;
      if (entry.rfind("LISTEN_", 0) == 0 || entry.rfind("NOTIFY_SOCKET=", 0) == 0 ||
          entry.rfind("WATCHDOG_", 0) == 0) {
        continue;
      }
      env_store.push_back(entry);
    }
    env_store.insert(env_store.end(), extra_env.begin(), extra_env.end());
    if (listen_fd >= 0) env_store.push_back("LISTEN_FDS=1");
    std::vector<char*> argv, envp;
    for (std::string& s : argv_store)
      argv.push_back(s.data());
    argv.push_back(nullptr);
    for (std::string& s : env_store)
      envp.push_back(s.data());
    char listen_pid[32] = "LISTEN_PID=";
    if (listen_fd >= 0) envp.push_back(listen_pid);
    envp.push_back(nullptr);
    const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(log_fd, 2);
      if (listen_fd >= 0) {
        // LISTEN_PID must be this process: write getpid() without allocating.
        char digits[16];
        int n = 0;
        for (pid_t p = getpid(); p > 0; p /= 10)
          digits[n++] = static_cast<char>('0' + p % 10);
        int at = 11;
        while (n > 0)
          listen_pid[at++] = digits[--n];
        listen_pid[at] = '\0';
        if (listen_fd != 3) {
          dup2(listen_fd, 3);
        } else {
          fcntl(3, F_SETFD, 0);
        }
      }
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    close(log_fd);
  }

  pid_t pid() const { return pid_; }

  // Sends `sig` and waits up to `timeout` for the exit; returns the exit code, 128+signal when
  // killed by a signal, or -1 if it did not exit in time (then it is killed).
  int stop(int sig, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    return wait_exit(timeout);
  }

  int wait_exit(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      const pid_t done = waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return -1;
  }

  std::string log() const {
    std::ifstream in(log_path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  pid_t pid_ = -1;
  std::string log_path_;
};

// A client connection to a Unix socket, or -1.
inline int connect_unix(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A listening Unix socket as systemd's .socket unit would create it.
inline int make_listening_socket(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  unlink(path.c_str());
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 16) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace gpubind::testing
