#include "step_text.h"

#include <charconv>
#include <sstream>

namespace gpubind::spank {
namespace {

// Values are single lines: anything else would break the format, and no valid value needs one.
std::string one_line(std::string value) {
  for (char& c : value) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return value;
}

template <class T>
bool to_number(const std::string& text, T& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size();
}

// Calls fn(key, value) for each line; stops at the first error.
template <class Fn>
Status for_each_line(const std::string& text, Fn fn) {
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) return make_error("line " + std::to_string(number) + ": no '='");
    if (auto status = fn(line.substr(0, eq), line.substr(eq + 1)); !status) {
      return make_error("line " + std::to_string(number) + ": " + status.error().message);
    }
  }
  return Ok{};
}

}  // namespace

std::string encode(const StepRequest& r) {
  std::ostringstream out;
  out << "job_id=" << r.job_id << "\nstep_id=" << r.step_id << "\nntasks=" << r.ntasks
      << "\nallowed_cpus=" << one_line(r.allowed_cpus)
      << "\nallowed_cores=" << one_line(r.allowed_cores) << "\ngpus_given=" << r.gpus_given << "\n";
  for (const auto& [index, token] : r.gpus)
    out << "gpu=" << index << ":" << one_line(token) << "\n";
  for (const std::string& token : r.unplaced_gpus)
    out << "unplaced_gpu=" << one_line(token) << "\n";
  out << "cpus_per_task=" << r.cpus_per_task << "\ngpus_per_task=" << r.gpus_per_task
      << "\ntasks_per_gpu=" << r.tasks_per_gpu << "\norder=" << r.order << "\nsmt=" << r.smt
      << "\nno_gpu_env=" << r.no_gpu_env << "\nno_nic_env=" << r.no_nic_env << "\nomp=" << r.omp
      << (r.ze_hierarchy.empty() ? "" : "\nze_hierarchy=" + one_line(r.ze_hierarchy))
      << "\nsocket=" << one_line(r.socket) << "\ntimeout_ms=" << r.timeout_ms
      << "\nfallback=" << r.fallback << "\npolicy=" << one_line(r.policy) << "\n";
  return out.str();
}

Result<StepRequest> decode_request(const std::string& text) {
  StepRequest r;
  auto status =
      for_each_line(text, [&](const std::string& key, const std::string& value) -> Status {
        auto number = [&](auto& field) -> Status {
          if (!to_number(value, field))
            return make_error(key + ": '" + value + "' is not a number");
          return Ok{};
        };
        auto text_field = [&](std::string& field) -> Status {
          field = value;
          return Ok{};
        };
        auto flag = [&](bool& field) -> Status {
          if (value != "0" && value != "1") return make_error(key + ": expected 0 or 1");
          field = value == "1";
          return Ok{};
        };
        if (key == "job_id") return number(r.job_id);
        if (key == "step_id") return number(r.step_id);
        if (key == "ntasks") return number(r.ntasks);
        if (key == "allowed_cpus") return text_field(r.allowed_cpus);
        if (key == "allowed_cores") return text_field(r.allowed_cores);
        if (key == "gpus_given") return flag(r.gpus_given);
        if (key == "gpu") {
          const size_t colon = value.find(':');
          int index = 0;
          if (colon == std::string::npos || !to_number(value.substr(0, colon), index)) {
            return make_error("gpu: expected INDEX:TOKEN, got '" + value + "'");
          }
          r.gpus.emplace_back(index, value.substr(colon + 1));
          return Ok{};
        }
        if (key == "unplaced_gpu") {
          if (value.empty()) return make_error("unplaced_gpu: empty token");
          r.unplaced_gpus.push_back(value);
          return Ok{};
        }
        if (key == "cpus_per_task") return number(r.cpus_per_task);
        if (key == "gpus_per_task") return number(r.gpus_per_task);
        if (key == "tasks_per_gpu") return number(r.tasks_per_gpu);
        if (key == "order") return text_field(r.order);
        if (key == "smt") return number(r.smt);
        if (key == "no_gpu_env") return flag(r.no_gpu_env);
        if (key == "no_nic_env") return flag(r.no_nic_env);
        if (key == "omp") return flag(r.omp);
        if (key == "ze_hierarchy") {
          if (!value.empty() && value != "flat" && value != "composite")
            return make_error("ze_hierarchy: expected flat or composite, got '" + value + "'");
          return text_field(r.ze_hierarchy);
        }
        if (key == "socket") return text_field(r.socket);
        if (key == "timeout_ms") return number(r.timeout_ms);
        if (key == "fallback") return flag(r.fallback);
        if (key == "policy") return text_field(r.policy);
        return make_error("unknown key '" + key + "'");
      });
  if (!status) return make_error("step request: " + status.error().message);
  return r;
}

std::string encode(const StepPlan& plan) {
  std::ostringstream out;
  out << "source=" << plan.source << "\n";
  for (const std::string& w : plan.warnings)
    out << "warning=" << one_line(w) << "\n";
  for (const TaskBinding& t : plan.tasks) {
    out << "task=" << t.rank << "\ncpus=" << t.cpus << "\nnuma=" << t.numa << "\nl3=" << t.l3
        << "\ngpus=" << one_line(t.gpus) << "\nngpus=" << t.ngpus
        << "\ntokens=" << one_line(t.tokens) << "\nvendor=" << t.vendor
        << "\nnic=" << one_line(t.nic) << "\n";
    for (const TaskEnv& e : t.env) {
      out << (e.only_if_unset ? "env_if_unset=" : "env=") << e.name << "=" << one_line(e.value)
          << "\n";
    }
  }
  return out.str();
}

Result<StepPlan> decode_plan(const std::string& text) {
  StepPlan plan;
  auto status =
      for_each_line(text, [&](const std::string& key, const std::string& value) -> Status {
        auto text_field = [&](std::string& field) -> Status {
          field = value;
          return Ok{};
        };
        auto number = [&](int& field) -> Status {
          if (!to_number(value, field))
            return make_error(key + ": '" + value + "' is not a number");
          return Ok{};
        };
        if (key == "source") return text_field(plan.source);
        if (key == "warning") {
          plan.warnings.push_back(value);
          return Ok{};
        }
        if (key == "task") {
          plan.tasks.emplace_back();
          if (!to_number(value, plan.tasks.back().rank)) return make_error("task: bad rank");
          return Ok{};
        }
        if (plan.tasks.empty()) return make_error("'" + key + "' before the first task");
        TaskBinding& t = plan.tasks.back();
        if (key == "cpus") return text_field(t.cpus);
        if (key == "numa") return number(t.numa);
        if (key == "l3") return number(t.l3);
        if (key == "gpus") return text_field(t.gpus);
        if (key == "ngpus") return number(t.ngpus);
        if (key == "tokens") return text_field(t.tokens);
        if (key == "vendor") return text_field(t.vendor);
        if (key == "nic") return text_field(t.nic);
        if (key == "env" || key == "env_if_unset") {
          const size_t eq = value.find('=');
          if (eq == std::string::npos || eq == 0) return make_error(key + ": expected NAME=VALUE");
          t.env.push_back({value.substr(0, eq), value.substr(eq + 1), key == "env_if_unset"});
          return Ok{};
        }
        return make_error("unknown key '" + key + "'");
      });
  if (!status) return make_error("step plan: " + status.error().message);
  return plan;
}

}  // namespace gpubind::spank
