#include "flux_job_reader.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string>
#include <vector>

#include "gpubind/parse.h"

extern char** environ;

namespace gpubind::run {
namespace {

constexpr size_t kMaxOutput = 1 << 20;  // R of a large job's every node stays far below

// `command`'s standard output, run under timeout(1) without a shell; nullopt with `why` set
// when it cannot be run, fails or says too much.
std::optional<std::string> output_of(std::vector<std::string> command, std::string& why) {
  command.insert(command.begin(), {"timeout", "5"});
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    why = "no pipe";
    return std::nullopt;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<char*> argv;
  for (std::string& word : command)
    argv.push_back(word.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  std::string text;
  char buffer[4096];
  while (spawned == 0 && text.size() < kMaxOutput) {
    const ssize_t n = read(out[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;  // a signal is no end of R
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  close(out[0]);
  int status = 0;
  if (spawned != 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0 || text.size() >= kMaxOutput) {
    std::string run;  // the command as given, without timeout(1)
    for (size_t i = 2; i < command.size(); ++i)
      run += (i > 2 ? " " : "") + command[i];
    why = "`" + run + "` failed" +
          (spawned == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 124 ? " (timed out)" : "");
    return std::nullopt;
  }
  return text;
}

}  // namespace

client::FluxJob read_flux_job(const client::EnvLookup& env) {
  client::FluxJob job;
  job.constrained = client::flux_constrained(env);
  if (!job.constrained) return job;
  const std::string id = env("FLUX_JOB_ID").value_or("");
  // F58 ids carry a non-ASCII first character; anything else is refused before it is run (a
  // leading '-' would read as an option of flux's).
  const bool id_ok = !id.empty() && id.size() <= 64 && id[0] != '-' &&
                     id.find_first_of(" \t\n'\"\\$`;|&<>()*?[]{}") == std::string::npos;
  if (!id_ok) {
    job.error = "FLUX_JOB_ID is not a job id";
    return job;
  }
  std::string why;
  const auto rank_text = output_of({"flux", "getattr", "rank"}, why);
  const auto rank =
      rank_text ? parse_whole_number(rank_text->substr(0, rank_text->find('\n')), 0, 1 << 24)
                : std::nullopt;
  if (!rank) {
    job.error = rank_text ? "`flux getattr rank` gave no broker rank" : why;
    return job;
  }
  const auto r = output_of({"flux", "job", "info", id, "R"}, why);
  if (!r) {
    job.error = why;
    return job;
  }
  auto gpus = client::flux_rank_gpus(*r, static_cast<int>(*rank));
  if (gpus)
    job.gpus = std::move(*gpus);
  else
    job.error = gpus.error().message;
  return job;
}

}  // namespace gpubind::run
