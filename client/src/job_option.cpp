#include "gpubind/client/job_option.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpubind::client {
namespace {

constexpr const char* kHeader = "gpubind-job-option 1\n";
// Far more than any flags text parse_user_flags accepts: a longer value is not recorded.
constexpr size_t kMaxRecordBytes = 4096;

std::string errno_text(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

// The folder holds records only where `owner` alone may write it: anyone else could plant a
// record for another user's job.
Status check_folder(const std::string& dir, uid_t owner) {
  struct stat info {};
  if (lstat(dir.c_str(), &info) != 0) return make_error(errno_text("cannot read", dir));
  if (!S_ISDIR(info.st_mode)) return make_error(dir + " is not a folder");
  if (info.st_uid != owner || (info.st_mode & (S_IWGRP | S_IWOTH)))
    return make_error(dir + " may be written by another user than uid " + std::to_string(owner) +
                      ": job records there are not used");
  return Ok{};
}

Status write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t wrote = write(fd, text.data() + done, text.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return make_error(std::string("write failed: ") + std::strerror(errno));
    done += static_cast<size_t>(wrote);
  }
  return Ok{};
}

}  // namespace

std::optional<JobOption> job_option_to_record(const std::optional<std::string>& component_mark,
                                              const std::optional<std::string>& option) {
  // A component submitted without the option says so even where it has none: salloc's shell
  // holds the last component's option, and its steps in this component would replay it.
  if (component_mark == "no") return JobOption{false, ""};
  if (!option || component_mark == "step") return std::nullopt;
  // Without a mark (a client that does not set one) the option counts as the job's own.
  return JobOption{true, *option};
}

std::string encode_job_option(const JobOption& option) {
  return std::string(kHeader) + (option.given ? "given\n" + option.flags + "\n" : "not-given\n");
}

Result<JobOption> decode_job_option(const std::string& text) {
  if (text.rfind(kHeader, 0) != 0) return make_error("not a gpubind job record");
  const std::string rest = text.substr(std::strlen(kHeader));
  if (rest == "not-given\n") return JobOption{false, ""};
  const std::string given = "given\n";
  if (rest.rfind(given, 0) != 0 || rest.back() != '\n')
    return make_error("a gpubind job record says neither given nor not-given");
  return JobOption{true, rest.substr(given.size(), rest.size() - given.size() - 1)};
}

std::string job_record_path(const std::string& dir, unsigned long job_id) {
  return dir + "/" + std::to_string(job_id);
}

Status write_job_record(const std::string& dir, unsigned long job_id, const JobOption& option) {
  const std::string text = encode_job_option(option);
  if (text.size() > kMaxRecordBytes)
    return make_error("--gpu-bind-auto's value is " + std::to_string(option.flags.size()) +
                      " bytes: not recorded");
  if (mkdir(dir.c_str(), 0755) == 0) {
    // Steps read records as the job's user: the folder must be searchable whatever the umask.
    if (chmod(dir.c_str(), 0755) != 0) return make_error(errno_text("cannot set the mode of", dir));
  } else if (errno != EEXIST) {
    return make_error(errno_text("cannot make", dir));
  }
  if (auto folder = check_folder(dir, geteuid()); !folder) return folder;
  // Written whole under another name, then renamed: a step never reads half a record.
  const std::string path = job_record_path(dir, job_id);
  const std::string partial = dir + "/." + std::to_string(job_id) + "." + std::to_string(getpid());
  const int fd = open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return make_error(errno_text("cannot write", partial));
  Status wrote = write_all(fd, text);
  if (wrote && fchmod(fd, 0644) != 0)
    wrote = make_error(errno_text("cannot set the mode of", partial));
  if (close(fd) != 0 && wrote) wrote = make_error(errno_text("cannot write", partial));
  if (wrote && rename(partial.c_str(), path.c_str()) != 0)
    wrote = make_error(errno_text("cannot rename to", path));
  if (!wrote) unlink(partial.c_str());
  return wrote;
}

Result<std::optional<JobOption>> read_job_record(const std::string& dir, unsigned long job_id,
                                                 uid_t trusted_uid) {
  const std::string path = job_record_path(dir, job_id);
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<JobOption>{};
    return make_error(errno_text("cannot read", path));
  }
  struct stat info {};
  std::string text;
  Status read_whole = Ok{};
  if (fstat(fd, &info) != 0) {
    read_whole = make_error(errno_text("cannot read", path));
  } else if (!S_ISREG(info.st_mode) || info.st_uid != trusted_uid ||
             (info.st_mode & (S_IWGRP | S_IWOTH)) ||
             info.st_size > static_cast<off_t>(kMaxRecordBytes)) {
    read_whole = make_error(path + " is not a job record gpubind's prolog wrote: not used");
  } else {
    char buffer[kMaxRecordBytes + 1];
    ssize_t got = 0;
    while ((got = read(fd, buffer, sizeof buffer)) > 0 && text.size() <= kMaxRecordBytes)
      text.append(buffer, static_cast<size_t>(got));
    if (got < 0) read_whole = make_error(errno_text("cannot read", path));
  }
  close(fd);
  if (!read_whole) return read_whole.error();
  if (auto folder = check_folder(dir, trusted_uid); !folder) return folder.error();
  auto option = decode_job_option(text);
  if (!option) return make_error(path + ": " + option.error().message);
  return std::optional<JobOption>(*option);
}

Status remove_job_record(const std::string& dir, unsigned long job_id) {
  const std::string path = job_record_path(dir, job_id);
  if (unlink(path.c_str()) != 0 && errno != ENOENT)
    return make_error(errno_text("cannot remove", path));
  return Ok{};
}

}  // namespace gpubind::client
