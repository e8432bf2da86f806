// Files gpubindctl writes: an SVG drawing where its user says, and the metrics textfile that root
// writes every minute into a folder node_exporter reads. Neither is ever written through a link
// or into a FIFO, and neither is left half written.
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ctl.h"
#include "gpubind/printable.h"

namespace gpubind::ctl {
namespace {

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Fd& operator=(Fd&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string shown(const std::string& path) {
  return "'" + printable(path) + "'";
}

Error failure(const std::string& path, const std::string& why) {
  return make_error("cannot write " + shown(path) + ": " + why);
}

// Who may own a folder on the way to a trusted file: root, and whoever runs gpubindctl (the
// daemon's user, where it writes the file itself).
bool trusted_owner(uid_t owner) {
  return owner == 0 || owner == geteuid();
}

// `folder`'s components from the root, "." and ".." refused (a path that names the folder it
// means).
Result<std::vector<std::string>> components_of(const std::filesystem::path& folder) {
  std::vector<std::string> parts;
  for (const auto& part : folder.relative_path()) {
    const std::string name = part.string();
    if (name.empty()) continue;
    if (name == "." || name == "..") return make_error("the path holds '" + name + "'");
    parts.push_back(name);
  }
  return parts;
}

// Opens the absolute `folder` one component at a time, never following a link. With `trusted`,
// each folder on the way must belong to root (or this user) and be writable by nobody else, as the
// last must; one above may be writable by all if sticky (/tmp), as others cannot rename what root
// owns there. So nobody else can swap the folder, or one above it, for one of their own.
Result<Fd> open_folder(const std::string& path, const std::filesystem::path& folder, bool trusted) {
  auto parts = components_of(folder);
  if (!parts) return failure(path, parts.error().message);
  Fd at(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  std::string where = "/";
  for (size_t i = 0;; ++i) {
    if (at.get() < 0) return failure(path, where + ": " + std::strerror(errno));
    struct stat st {};
    if (fstat(at.get(), &st) != 0) return failure(path, where + ": " + std::strerror(errno));
    const bool last = i == parts->size();
    if (trusted) {
      if (!trusted_owner(st.st_uid)) {
        return failure(path, "folder " + shown(where) + " belongs to uid " +
                                 std::to_string(st.st_uid) +
                                 ", who could replace the file's folder: every folder on the way "
                                 "must belong to root");
      }
      const bool others_write = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
      if (others_write && (last || (st.st_mode & S_ISVTX) == 0)) {
        return failure(path, "folder " + shown(where) +
                                 " is writable by others than its owner, who could replace the "
                                 "file or its folder");
      }
    }
    if (last) return at;
    where = (where == "/" ? "" : where) + "/" + (*parts)[i];
    const int next =
        openat(at.get(), (*parts)[i].c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0 && errno == ENOTDIR) {
      struct stat link {};
      const bool is_link =
          fstatat(at.get(), (*parts)[i].c_str(), &link, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISLNK(link.st_mode);
      return failure(path, shown(where) + (is_link ? " is a symbolic link" : " is not a folder") +
                               ": give the folder's real path");
    }
    at = Fd(next);
  }
}

std::string random_suffix() {
  uint64_t value = 0;
  if (getrandom(&value, sizeof value, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof value))
    value = static_cast<uint64_t>(getpid()) * 0x9e3779b97f4a7c15ull ^
            static_cast<uint64_t>(time(nullptr));
  char text[17];
  snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

bool write_all(int fd, const std::string& content) {
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Writes a new file of a name nobody can guess beside `name` in `folder` (created, never opened:
// no link is followed and no FIFO is ever opened), then renames it over `name`.
Status write_beside(const std::string& path, int folder, const std::string& name,
                    const std::string& content) {
  std::string temporary;
  Fd out;
  for (int attempt = 0; attempt < 8 && out.get() < 0; ++attempt) {
    temporary = "." + name + "." + random_suffix() + ".tmp";  // node_exporter skips it
    out = Fd(openat(folder, temporary.c_str(),
                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644));
    if (out.get() < 0 && errno != EEXIST) return failure(path, std::strerror(errno));
  }
  if (out.get() < 0) return failure(path, "no temporary name was free");
  struct stat st {};
  bool written = fstat(out.get(), &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1;
  // Whatever the umask, node_exporter (another user) must read it.
  written = written && fchmod(out.get(), 0644) == 0 && write_all(out.get(), content) &&
            fsync(out.get()) == 0;
  const int saved = errno;
  out = Fd();
  if (!written || renameat(folder, temporary.c_str(), folder, name.c_str()) != 0) {
    const int why = written ? errno : saved;
    unlinkat(folder, temporary.c_str(), 0);
    return failure(path, std::strerror(why));
  }
  return Ok{};
}

Status write_file(const std::string& path, const std::string& content, bool trusted) {
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  if (ec || path.empty()) return failure(path, "not a file's path");
  const std::string name = absolute.filename().string();
  if (name.empty() || name == "." || name == "..") return failure(path, "not a file's path");
  auto folder = open_folder(path, absolute.parent_path(), trusted);
  if (!folder) return folder.error();
  return write_beside(path, folder->get(), name, content);
}

}  // namespace

Status write_file_atomically(const std::string& path, const std::string& content) {
  return write_file(path, content, false);
}

Status write_trusted_file(const std::string& path, const std::string& content) {
  return write_file(path, content, true);
}

}  // namespace gpubind::ctl
