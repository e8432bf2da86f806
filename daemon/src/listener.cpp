#include "gpubind/daemon/listener.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <filesystem>

#include "gpubind/daemon/log.h"

namespace gpubind::daemon {
namespace {

std::string errno_text() {
  return std::strerror(errno);
}

Result<sockaddr_un> unix_address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    return make_error("socket path '" + path + "' is empty or longer than " +
                      std::to_string(sizeof addr.sun_path - 1) + " bytes");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

// True if some process accepts connections on `path`.
bool someone_listens(const sockaddr_un& addr) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool alive = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return alive;
}

// Whether another user could change what `folder` holds: it, or a folder above it, belongs to
// someone other than root and this daemon's user, or is writable by group or others without the
// sticky bit. Then a symlink swapped in between bind() and chmod() would make this daemon (root,
// when started by hand) change the mode of any file: such a folder is refused.
Status check_socket_folder(const std::filesystem::path& folder) {
  std::error_code ec;
  const std::filesystem::path resolved = std::filesystem::canonical(folder, ec);
  if (ec) return make_error("socket directory '" + folder.string() + "': " + ec.message());
  const uid_t self = geteuid();
  for (std::filesystem::path at = resolved;; at = at.parent_path()) {
    struct stat st {};
    if (lstat(at.c_str(), &st) != 0)
      return make_error("socket directory '" + at.string() + "': " + errno_text());
    if (st.st_uid != 0 && st.st_uid != self) {
      return make_error("socket directory '" + at.string() + "' belongs to uid " +
                        std::to_string(st.st_uid) +
                        ": another user could swap the socket for a link; use a directory of "
                        "root's or the daemon's own user, such as /run/gpubind");
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
      return make_error("socket directory '" + at.string() +
                        "' is writable by its group or by others: another user could swap the "
                        "socket for a link; use a directory only root or the daemon's own user "
                        "may write, such as /run/gpubind");
    }
    if (at == at.parent_path()) return Ok{};
  }
}

}  // namespace

Result<int> open_listener(const SocketOptions& options) {
  auto addr = unix_address(options.path);
  if (!addr) return addr.error();
  const std::filesystem::path parent = std::filesystem::path(options.path).parent_path();
  std::error_code ec;
  if (!parent.empty() && !std::filesystem::exists(parent, ec)) {
    std::filesystem::create_directories(parent, ec);
    if (ec) return make_error("socket directory '" + parent.string() + "': " + ec.message());
    chmod(parent.c_str(), 0755);
  }
  if (auto safe = check_socket_folder(parent.empty() ? "." : parent); !safe) return safe.error();
  // Where every user may write, anyone can replace the socket with their own: say so at once.
  struct stat folder {};
  if (stat(parent.empty() ? "." : parent.c_str(), &folder) == 0 && (folder.st_mode & S_IWOTH)) {
    log::warning("socket directory '" + parent.string() +
                 "' is writable by every user: anyone could put their own socket in its place, "
                 "and the SPANK plugin does not trust a socket there (use a directory only root "
                 "or the daemon's user may write, such as /run/gpubind)");
  }
  struct stat st {};
  if (lstat(options.path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return make_error("socket path '" + options.path + "' exists and is not a socket");
    }
    if (someone_listens(*addr)) {
      return make_error("socket '" + options.path + "' is served by another process");
    }
    unlink(options.path.c_str());
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error("socket: " + errno_text());
  // Bind with no permissions, then open up: no window where the socket has the wrong mode.
  const mode_t old_mask = umask(0777);
  const int bound = bind(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr);
  const int bind_errno = errno;
  umask(old_mask);
  if (bound != 0) {
    close(fd);
    return make_error("bind '" + options.path + "': " + std::strerror(bind_errno));
  }
  mode_t mode = options.mode;
  if (options.group) {
    if (chown(options.path.c_str(), static_cast<uid_t>(-1), *options.group) != 0) {
      const std::string why = errno_text();
      close(fd);
      unlink(options.path.c_str());
      return make_error("chown socket '" + options.path + "' to group " +
                        std::to_string(*options.group) + ": " + why);
    }
  }
  if (chmod(options.path.c_str(), mode) != 0 || listen(fd, SOMAXCONN) != 0) {
    const std::string why = errno_text();
    close(fd);
    unlink(options.path.c_str());
    return make_error("socket '" + options.path + "': " + why);
  }
  return fd;
}

std::string socket_path_of(int fd) {
  sockaddr_un addr{};
  socklen_t len = sizeof addr;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 || addr.sun_family != AF_UNIX)
    return "";
  const size_t size =
      len > offsetof(sockaddr_un, sun_path) ? len - offsetof(sockaddr_un, sun_path) : 0;
  return std::string(addr.sun_path, strnlen(addr.sun_path, size));
}

Status check_inherited_listener(int fd) {
  int type = 0, listening = 0;
  socklen_t len = sizeof type;
  sockaddr_storage addr{};
  socklen_t addr_len = sizeof addr;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &addr_len) != 0) {
    return make_error("inherited fd " + std::to_string(fd) + " is not a socket: " + errno_text());
  }
  len = sizeof listening;
  getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len);
  if (addr.ss_family != AF_UNIX || type != SOCK_STREAM || !listening) {
    return make_error(
        "inherited fd " + std::to_string(fd) +
        " is not a listening Unix stream socket (check ListenStream= in the .socket unit)");
  }
  return Ok{};
}

}  // namespace gpubind::daemon
