#include "gpubind/client/options.h"

#include <pwd.h>

#include <algorithm>
#include <utility>

#include "gpubind/client/step_env.h"
#include "gpubind/env_names.h"
#include "gpubind/parse.h"

namespace gpubind::client {
namespace {

Result<int> parse_number(const std::string& text, int min, int max, const std::string& what) {
  const auto value = parse_whole_number(text, min, max);
  if (!value) {
    return make_error(what + ": expected a whole number from " + std::to_string(min) + " to " +
                      std::to_string(max) + ", got '" + text + "'");
  }
  return static_cast<int>(*value);
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t at = text.find(separator, start);
    parts.push_back(text.substr(start, at - start));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

}  // namespace

const char* on_error_name(OnError on_error) {
  switch (on_error) {
    case OnError::kSkip:
      return "skip";
    case OnError::kFail:
      return "fail";
    case OnError::kFallback:
      break;
  }
  return "fallback";
}

const char* user_flags_help() {
  return "--gpu-bind-auto[=FLAGS]: bind each task to the cores, GPU(s) and NIC nearest each\n"
         "other on its node (gpubind). FLAGS, comma-separated:\n"
         "  verbose      print each task's binding on stderr\n"
         "  dry-run      print the binding, apply nothing\n"
         "  off          no binding for this job or step\n"
         "  order=gpu    rank r gets the r-th GPU and cores next to it (default)\n"
         "  order=cpu    ranks follow core order, each takes the GPU nearest its cores\n"
         "  smt=N        use N hardware threads per core (0 = all the step has)\n"
         "  no-gpu-env   leave GPU visibility variables (CUDA/ROCR_VISIBLE_DEVICES...) alone\n"
         "  no-nic-env   leave NIC variables (NCCL_SOCKET_IFNAME, MPICH_OFI_NIC_*...) alone\n"
         "  omp          also set OMP_PLACES=cores and OMP_PROC_BIND=close\n"
         "  help         this text\n"
         "Flags follow '=' with no space: --gpu-bind-auto=verbose,order=cpu (a space makes\n"
         "srun read them as the command). On sbatch/salloc they apply to every step of the\n"
         "job; srun's own flags win over the job's, and SLURM_GPU_BIND_AUTO=FLAGS applies\n"
         "where neither is given. Where the site binds by default, --gpu-bind-auto=off opts out.\n"
         "An explicit --cpu-bind keeps Slurm's CPU binding, --gpu-bind=none Slurm's GPU\n"
         "variables, and GPUs Slurm gives each task (--gpu-bind=map_gpu..., --gpus-per-task)\n"
         "are kept: gpubind binds the rest next to them. Check a binding with gpubind-check.\n";
}

Result<UserFlags> parse_user_flags(const std::string& raw) {
  UserFlags flags;
  const std::string text = raw == "(null)" ? "" : raw;
  if (text.empty()) return flags;
  if (text.size() > kMaxFlagsBytes) {
    return make_error("the flags are " + std::to_string(text.size()) + " bytes long; at most " +
                      std::to_string(kMaxFlagsBytes) + " are read");
  }
  struct Switch {
    const char* name;
    bool UserFlags::*field;
    bool counts_as_other;  // contradicts 'off'
  };
  static const Switch kSwitches[] = {
      {"off", &UserFlags::off, false},
      {"help", &UserFlags::help, false},
      {"verbose", &UserFlags::verbose, true},
      {"dry-run", &UserFlags::dry_run, true},
      {"no-gpu-env", &UserFlags::no_gpu_env, true},
      {"no-nic-env", &UserFlags::no_nic_env, true},
      {"omp", &UserFlags::omp, true},
  };
  bool other = false;
  for (const std::string& flag : split(text, ',')) {
    const size_t eq = flag.find('=');
    const std::string name = flag.substr(0, eq);
    const bool has_value = eq != std::string::npos;
    const std::string value = has_value ? flag.substr(eq + 1) : "";
    const Switch* matched = nullptr;
    for (const Switch& s : kSwitches) {
      if (name == s.name) matched = &s;
    }
    if (matched) {
      if (has_value) return make_error("flag '" + name + "' takes no value (got '" + flag + "')");
      flags.*(matched->field) = true;
      other = other || matched->counts_as_other;
    } else if (name == "order") {
      other = true;
      if (value != "gpu" && value != "cpu") {
        return make_error("flag 'order' takes gpu or cpu (got '" + flag + "')");
      }
      if (flags.order && *flags.order != value) {
        return make_error("flags 'order=" + *flags.order + "' and '" + flag + "' contradict");
      }
      flags.order = value;
    } else if (name == "smt") {
      other = true;
      if (!has_value) return make_error("flag 'smt' needs a value, e.g. smt=1");
      auto smt = parse_number(value, 0, protocol::kMaxSmt, "flag 'smt'");
      if (!smt) return smt.error();
      if (flags.smt && *flags.smt != *smt) {
        return make_error("flags 'smt=" + std::to_string(*flags.smt) + "' and '" + flag +
                          "' contradict");
      }
      flags.smt = *smt;
    } else if (name.empty()) {
      return make_error("empty flag in '" + text + "'");
    } else {
      return make_error("unknown flag '" + name +
                        "' (known: verbose, dry-run, off, order=gpu|cpu, smt=N, no-gpu-env, "
                        "no-nic-env, omp, help)");
    }
  }
  if (flags.off && other) {
    return make_error("flag 'off' contradicts the other flags in '" + text + "'");
  }
  return flags;
}

namespace {

// A name or a prefix ("FOO_*") the site lets answers set; never one that changes what runs.
Status check_allowed_name(const std::string& name) {
  const std::string bare = name.back() == '*' ? name.substr(0, name.size() - 1) : name;
  const bool valid = !bare.empty() && std::all_of(bare.begin(), bare.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
  if (!valid) return make_error("plugstack argument 'env_allow': '" + name + "' is not a name");
  // (Each name an answer sets is checked again: a prefix never lets one of those through.)
  if (changes_what_runs(bare))
    return make_error("plugstack argument 'env_allow': '" + name +
                      "' changes what a task runs; gpubind never sets it");
  return Ok{};
}

}  // namespace

Result<SiteArgs> parse_site_args(const std::vector<std::string>& args) {
  SiteArgs site;
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) {
      return make_error("plugstack argument '" + arg + "' is not key=value");
    }
    const std::string key = arg.substr(0, eq), value = arg.substr(eq + 1);
    if (key == "default") {
      if (value != "on" && value != "off") {
        return make_error("plugstack argument 'default' takes on or off (got '" + value + "')");
      }
      site.default_on = value == "on";
    } else if (key == "socket") {
      if (value.empty() || value[0] != '/') {
        return make_error("plugstack argument 'socket' needs an absolute path (got '" + value +
                          "')");
      }
      site.socket = value;
    } else if (key == "timeout_ms") {
      auto timeout = parse_number(value, 1, 600000, "plugstack argument 'timeout_ms'");
      if (!timeout) return timeout.error();
      site.timeout_ms = *timeout;
    } else if (key == "on_error") {
      if (value == "fallback")
        site.on_error = OnError::kFallback;
      else if (value == "skip")
        site.on_error = OnError::kSkip;
      else if (value == "fail")
        site.on_error = OnError::kFail;
      else
        return make_error("plugstack argument 'on_error' takes fallback, skip or fail (got '" +
                          value + "')");
    } else if (key == "policy") {
      site.policy = value;
    } else if (key == "stepd_lib") {
      site.stepd_lib = value;
    } else if (key == "job_records") {
      if (value.empty() || value[0] != '/' || value == "/") {
        return make_error(
            "plugstack argument 'job_records' needs an absolute path of a folder (got '" + value +
            "')");
      }
      site.job_records = value;
    } else if (key == "override_explicit") {
      if (value != "yes" && value != "no") {
        return make_error("plugstack argument 'override_explicit' takes yes or no (got '" + value +
                          "')");
      }
      site.override_explicit = value == "yes";
    } else if (key == "gpus_without_gres") {
      if (value != "none" && value != "node") {
        return make_error("plugstack argument 'gpus_without_gres' takes none or node (got '" +
                          value + "')");
      }
      site.gpus_without_gres_node = value == "node";
    } else if (key == "daemon_user") {
      if (value.empty()) return make_error("plugstack argument 'daemon_user' needs a user name");
      site.daemon_user = value;
    } else if (key == "env_allow") {
      for (const std::string& name : split_list(value)) {
        if (auto refused = check_allowed_name(name); !refused) return refused.error();
        site.env_allow.push_back(name);
      }
    } else {
      return make_error(
          "unknown plugstack argument '" + key +
          "' (known: default, socket, timeout_ms, on_error, policy, stepd_lib, "
          "override_explicit, gpus_without_gres, daemon_user, env_allow, job_records)");
    }
  }
  return site;
}

protocol::TrustedServer trusted_server_of(const SiteArgs& site) {
  protocol::TrustedServer trust;
  passwd entry{}, *found = nullptr;
  std::vector<char> buffer(16384);
  if (getpwnam_r(site.daemon_user.c_str(), &entry, buffer.data(), buffer.size(), &found) == 0 &&
      found)
    trust.daemon_uid = found->pw_uid;
  return trust;
}

}  // namespace gpubind::client
