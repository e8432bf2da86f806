#include "gpubind/client/srun_options.h"

#include <algorithm>

#include "gpubind/parse.h"
#include "gpubind/slurm_words.h"

namespace gpubind::client {

using slurm::without_verbosity;

ExplicitBinding explicit_binding(const std::vector<std::string>& launcher_options) {
  ExplicitBinding found;
  for (size_t i = 0; i < launcher_options.size(); ++i) {
    const std::string& arg = launcher_options[i];
    for (const auto& [name, target] : {std::pair<const char*, std::string*>{"cpu", &found.cpu},
                                       {"gpu", &found.gpu},
                                       {"mem", &found.mem}}) {
      for (const std::string& spelling :
           {std::string("--") + name + "-bind", std::string("--") + name + "_bind"}) {
        if (arg == spelling && i + 1 < launcher_options.size())
          *target = without_verbosity(launcher_options[i + 1]);
        else if (arg.rfind(spelling + "=", 0) == 0)
          *target = without_verbosity(arg.substr(spelling.size() + 1));
      }
    }
  }
  if (found.mem == "none") found.mem.clear();  // Slurm leaves memory alone: nothing to keep
  return found;
}

std::string encode_explicit(const ExplicitBinding& binding) {
  std::string text;
  if (!binding.cpu.empty()) text += "cpu-bind=" + binding.cpu;
  if (!binding.gpu.empty()) text += (text.empty() ? "" : ";") + ("gpu-bind=" + binding.gpu);
  if (!binding.mem.empty()) text += (text.empty() ? "" : ";") + ("mem-bind=" + binding.mem);
  return text;
}

ExplicitBinding decode_explicit(const std::string& text) {
  ExplicitBinding binding;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find(';', start), text.size());
    const std::string part = text.substr(start, end - start);
    if (part.rfind("cpu-bind=", 0) == 0) binding.cpu = part.substr(9);
    if (part.rfind("gpu-bind=", 0) == 0) binding.gpu = part.substr(9);
    if (part.rfind("mem-bind=", 0) == 0) binding.mem = part.substr(9);
    start = end + 1;
  }
  return binding;
}

bool cpu_bind_type_is_explicit(const std::string& type) {
  return type == "none" || type == "rank" || type.rfind("map_cpu:", 0) == 0 ||
         type.rfind("map_ldom:", 0) == 0 || type.rfind("mask_ldom:", 0) == 0;
}

bool mem_bind_type_is_explicit(const std::string& type) {
  return type == "local" || type == "rank" || type.rfind("map_mem:", 0) == 0 ||
         type.rfind("mask_mem:", 0) == 0;
}

// "--gpu-bind-auto", or an abbreviation srun's getopt_long takes for it: any longer than
// "--gpu-bind" (srun's own option), which only --gpu-bind-auto begins with.
bool names_gpu_bind_auto(const std::string& name) {
  const std::string option = "--gpu-bind-auto";
  return name.size() > std::string("--gpu-bind").size() && option.rfind(name, 0) == 0;
}

std::vector<LauncherComponent> launcher_components(const std::vector<std::string>& args,
                                                   int first_command_argc) {
  std::vector<std::vector<std::string>> parts(1);
  for (const std::string& arg : args) {
    if (arg == ":")
      parts.emplace_back();
    else
      parts.back().push_back(arg);
  }
  // The first component's command is the last first_command_argc of its arguments.
  std::vector<std::string>& first = parts.front();
  if (first_command_argc > 0 && static_cast<size_t>(first_command_argc) <= first.size())
    first.resize(first.size() - static_cast<size_t>(first_command_argc));
  std::vector<LauncherComponent> components;
  for (const std::vector<std::string>& options : parts) {
    LauncherComponent component;
    component.binding = explicit_binding(options);
    for (const std::string& arg : options) {
      const size_t eq = arg.find('=');
      if (!names_gpu_bind_auto(arg.substr(0, eq))) continue;
      component.flags = eq == std::string::npos ? "" : arg.substr(eq + 1);
    }
    components.push_back(std::move(component));
  }
  return components;
}

std::string het_flags_var(int component) {
  return kHetFlagsEnv + std::to_string(component);
}

std::string het_explicit_var(int component) {
  return std::string(kExplicitEnv) + "_" + std::to_string(component);
}

std::vector<std::string> passed_vars(const char* het_components) {
  std::vector<std::string> names = {kExplicitEnv, kSrunFlagsEnv};
  if (!het_components) return names;
  // An unreadable count passes no component variables (they are cleared by name only).
  const auto count = parse_whole_number(het_components, 0, slurm::kMaxHetComponents);
  for (int k = 0; count && k < static_cast<int>(*count); ++k) {
    names.push_back(het_flags_var(k));
    names.push_back(het_explicit_var(k));
  }
  names.push_back(kHetEnv);
  return names;
}

}  // namespace gpubind::client
