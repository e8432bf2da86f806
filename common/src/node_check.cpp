#include "gpubind/node_check.h"

#include <fnmatch.h>

#include <algorithm>

#include "gpubind/parse.h"

namespace gpubind {
namespace {

constexpr size_t kMaxExpandedNames = 1024;

std::string describe_gpu(const Gpu& gpu) {
  std::string text = "GPU " + std::to_string(gpu.index);
  if (!gpu.pci_bus_id.empty()) text += " (" + gpu.pci_bus_id + ")";
  return text;
}

std::string describe_nic(const Nic& nic) {
  std::string text = "NIC " + nic.name;
  if (!nic.pci_bus_id.empty()) text += " (" + nic.pci_bus_id + ")";
  return text;
}

std::string plural(size_t count, const char* noun) {
  return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

bool is_glob(const std::string& name) {
  return name.find_first_of("*?") != std::string::npos;
}

bool nic_matches(const Nic& nic, const std::string& name) {
  for (const std::string* candidate : {&nic.name, &nic.netdev, &nic.rdma}) {
    if (candidate->empty()) continue;
    if (glob_match(name, *candidate)) return true;  // nic_patterns' globs: a name matches itself
  }
  return false;
}

// "0-3,6" into its numbers, each written as the range's lower bound is (width kept for "00-07").
Result<std::vector<std::string>> expand_range(const std::string& ranges) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= ranges.size()) {
    const size_t comma = std::min(ranges.find(',', start), ranges.size());
    const std::string part = ranges.substr(start, comma - start);
    const size_t dash = part.find('-');
    const std::string low = part.substr(0, dash);
    const std::string high = dash == std::string::npos ? low : part.substr(dash + 1);
    auto from = parse_whole_number(low, 0, 1 << 20);
    auto to = parse_whole_number(high, 0, 1 << 20);
    if (!from || !to || *to < *from) {
      return make_error("'[" + ranges + "]': '" + part + "' is not a number or a range N-M");
    }
    const size_t width = low.size() > 1 && low[0] == '0' ? low.size() : 0;
    for (auto n = *from; n <= *to; ++n) {
      if (out.size() >= kMaxExpandedNames) {
        return make_error("'[" + ranges + "]' names more than " +
                          std::to_string(kMaxExpandedNames) + " NICs");
      }
      std::string digits = std::to_string(n);
      if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
      out.push_back(std::move(digits));
    }
    start = comma + 1;
  }
  return out;
}

}  // namespace

Result<std::vector<std::string>> expand_nic_names(const std::string& entry) {
  if (entry.empty()) return make_error("empty name");
  const size_t open = entry.find('[');
  if (open == std::string::npos) {
    if (entry.find(']') != std::string::npos) return make_error("'" + entry + "': ']' without '['");
    return std::vector<std::string>{entry};
  }
  const size_t close = entry.find(']', open);
  if (close == std::string::npos) return make_error("'" + entry + "': '[' without ']'");
  auto numbers = expand_range(entry.substr(open + 1, close - open - 1));
  if (!numbers) return make_error("'" + entry + "': " + numbers.error().message);
  auto rest = expand_nic_names(entry.substr(close + 1));
  if (close + 1 == entry.size()) rest = std::vector<std::string>{""};
  if (!rest) return make_error("'" + entry + "': " + rest.error().message);
  if (numbers->size() * rest->size() > kMaxExpandedNames) {
    return make_error("'" + entry + "' names more than " + std::to_string(kMaxExpandedNames) +
                      " NICs");
  }
  std::vector<std::string> out;
  for (const std::string& number : *numbers) {
    for (const std::string& tail : *rest)
      out.push_back(entry.substr(0, open) + number + tail);
  }
  return out;
}

std::vector<NodeFault> check_node(const Topology& topology, const SitePolicy& policy,
                                  const LiveFacts& facts) {
  std::vector<NodeFault> faults;
  auto fault = [&](const char* code, std::string message) {
    faults.push_back({code, std::move(message), NodeFault::Severity::kFault});
  };
  const ExpectedNode& expect = policy.expect;

  // GPUs: how many, which model, and where binding can put their tasks.
  if (expect.gpu_count > 0 && topology.gpus.size() != static_cast<size_t>(expect.gpu_count)) {
    fault("gpu-count", "expected " + plural(static_cast<size_t>(expect.gpu_count), "GPU") +
                           ", found " + std::to_string(topology.gpus.size()));
  }
  if (!expect.gpu_model.empty()) {
    for (const Gpu& gpu : topology.gpus) {
      if (gpu.model.empty()) {
        // Without a PCI name database a GPU has no model: that says nothing of the GPU.
        faults.push_back({"gpu-model", describe_gpu(gpu) + ": model unknown, not checked",
                          NodeFault::Severity::kWarning});
      } else if (fnmatch(expect.gpu_model.c_str(), gpu.model.c_str(), FNM_CASEFOLD) != 0) {
        fault("gpu-model", describe_gpu(gpu) + ": model '" + gpu.model + "' does not match '" +
                               expect.gpu_model + "'");
      }
    }
  }
  const CpuSet node_cpus = topology.all_pus();
  const bool several_domains = topology.numa_count > 1 || topology.package_count > 1;
  // Devices whose locality the node does not report: binding cannot place tasks near them.
  std::vector<std::string> unlocated;
  for (const Gpu& gpu : topology.gpus)
    if (!locality_known(gpu.locality)) unlocated.push_back(describe_gpu(gpu));
  for (const Nic& nic : topology.nics)
    if (!locality_known(nic.locality)) unlocated.push_back("NIC " + nic.name);
  if (!unlocated.empty() && !expect.io_locality_unknown) {
    std::string which;
    for (size_t i = 0; i < unlocated.size() && i < 3; ++i)
      which += (i ? ", " : "") + unlocated[i];
    if (unlocated.size() > 3) which += " and " + std::to_string(unlocated.size() - 3) + " more";
    fault("io-locality-unknown",
          "the node reports no CPU locality for " + which +
              " (firmware without PCI proximity, or a VM): tasks are not placed near them; where "
              "that is expected, say io_locality_unknown: true in the policy's expect block");
  }
  for (const Gpu& gpu : topology.gpus) {
    if (!locality_known(gpu.locality)) continue;
    if ((gpu.locality.cpus & node_cpus).empty()) {
      // The planner would have no core near it: every task of it would be bound elsewhere.
      fault("gpu-no-cpus", describe_gpu(gpu) + ": its locality (" +
                               describe_locality(gpu.locality) + ") has no CPUs of this node");
    } else if (gpu.locality.kind == LocalityKind::kMachine && several_domains) {
      // Plans still work, but its tasks' cores are not chosen by nearness.
      faults.push_back({"gpu-locality",
                        describe_gpu(gpu) +
                            ": no CPU locality known (the whole machine): its tasks' cores "
                            "are not chosen by nearness",
                        NodeFault::Severity::kWarning});
    }
  }

  // NICs: how many, which, their links, and their place beside the GPUs.
  if (expect.nic_count > 0 && topology.nics.size() != static_cast<size_t>(expect.nic_count)) {
    fault("nic-count", "expected " + plural(static_cast<size_t>(expect.nic_count), "NIC") +
                           " matching nic_patterns, found " + std::to_string(topology.nics.size()));
  }
  for (const std::string& entry : expect.nics) {
    auto names = expand_nic_names(entry);
    if (!names) continue;  // the policy loader refused it already
    for (const std::string& name : *names) {
      const bool found = std::any_of(topology.nics.begin(), topology.nics.end(),
                                     [&](const Nic& nic) { return nic_matches(nic, name); });
      if (!found) {
        fault("nic-missing",
              is_glob(name) ? "no NIC matches '" + name + "'" : "NIC " + name + " is missing");
      }
    }
  }
  for (size_t n = 0; n < topology.nics.size() && n < facts.nic_links.size(); ++n) {
    const std::vector<NicLink>& links = facts.nic_links[n];
    if (links.empty()) continue;
    // The network interface must be up; of an RDMA device's ports one ACTIVE is enough (a
    // dual-port HCA with one port cabled is whole).
    auto is_port = [](const NicLink& link) { return link.device.find(':') != std::string::npos; };
    const bool port_up = std::any_of(links.begin(), links.end(),
                                     [&](const NicLink& link) { return is_port(link) && link.up; });
    std::vector<const NicLink*> down;
    for (const NicLink& link : links) {
      if (!link.up && !(is_port(link) && port_up)) down.push_back(&link);
    }
    if (down.empty()) continue;
    std::string what;
    for (const NicLink* link : down)
      what += (what.empty() ? "" : ", ") + link->device + " " + link->state;
    fault("nic-down", describe_nic(topology.nics[n]) + ": link not up (" + what + ")");
  }
  if (expect.gpu_nic_pairing != ExpectedNode::Pairing::kUnchecked) {
    const bool by_package = expect.gpu_nic_pairing == ExpectedNode::Pairing::kPackage;
    const char* domain = by_package ? "package" : "NUMA node";
    for (const Gpu& gpu : topology.gpus) {
      const int home = by_package ? gpu.locality.package_index : gpu.locality.numa_index;
      if (home < 0) {
        fault("gpu-nic-pairing", describe_gpu(gpu) + ": its locality (" +
                                     describe_locality(gpu.locality) + ") lies on no single " +
                                     domain);
        continue;
      }
      const bool paired =
          std::any_of(topology.nics.begin(), topology.nics.end(), [&](const Nic& n) {
            return (by_package ? n.locality.package_index : n.locality.numa_index) == home;
          });
      if (!paired) {
        const int shown = by_package ? home : topology.numa_os_number(home);
        fault("gpu-nic-pairing", describe_gpu(gpu) + ": no NIC on its " + domain + " (" + domain +
                                     " " + std::to_string(shown) + ")");
      }
    }
  }

  // The kernel: a missing sysctl is a kernel built without NUMA balancing, which is off.
  if (expect.numa_balancing != ExpectedNode::NumaBalancing::kUnchecked &&
      facts.numa_balancing_read) {
    const int value = facts.numa_balancing.value_or(0);
    const bool want_on = expect.numa_balancing == ExpectedNode::NumaBalancing::kOn;
    if ((value != 0) != want_on) {
      fault("numa-balancing",
            "kernel.numa_balancing is " +
                (facts.numa_balancing ? std::to_string(value) : std::string("absent (off)")) +
                ", the policy wants it " + (want_on ? "on" : "off (0)"));
    }
  }

  // Slurm's node line against the node: Slurm numbers the step's cores and CPUs by it, and a
  // node that changed (SMT switched in the BIOS, a socket's cores disabled) gets steps whose
  // cores and CPUs do not meet as this node has them.
  if (facts.slurm_node) {
    const SlurmNodeLine& slurm = *facts.slurm_node;
    size_t threads = 0;
    for (const Core& core : topology.cores)
      threads = std::max(threads, core.pus.size());
    const int cores = slurm.sockets * slurm.cores_per_socket;
    if (slurm.cpus != node_cpus.count() || cores != static_cast<int>(topology.cores.size()) ||
        slurm.threads_per_core != static_cast<int>(threads)) {
      fault("slurm-node",
            "Slurm's node line (" + slurm.source + ": " + std::to_string(slurm.sockets) + " x " +
                std::to_string(slurm.cores_per_socket) + " cores x " +
                std::to_string(slurm.threads_per_core) + " threads, " + std::to_string(slurm.cpus) +
                " CPUs) is not this node's (" + std::to_string(topology.cores.size()) +
                " cores x " + std::to_string(threads) + " threads, " +
                std::to_string(node_cpus.count()) +
                " CPUs): steps get cores and CPUs that do not meet here; fix the "
                "node line (`slurmd -C` prints this node's) and restart slurmd");
    }
  }

  // A node whose slurmd loads no gpubind binds nothing, silently: under configless Slurm an
  // include with a path separator is not shipped, and a glob matching nothing is skipped.
  if (facts.plugstack && !facts.plugstack->missing.empty()) {
    fault("plugin-not-loaded", "slurmd's plugstack (" + facts.plugstack->path +
                                   ") loads no spank_gpubind.so: " + facts.plugstack->missing +
                                   "; no step on this node is bound (see docs/admin.md, "
                                   "\"Configless Slurm\")");
  }

  if (facts.daemon_error && !facts.daemon_error->empty()) {
    fault("daemon", "gpubindd does not answer: " + *facts.daemon_error);
  }
  return faults;
}

std::optional<SlurmNodeLine> parse_slurm_node_line(const std::string& text,
                                                   const std::string& source) {
  SlurmNodeLine line;
  line.source = source;
  int found = 0;
  for (const std::string& word : split_words(text)) {
    const size_t equals = word.find('=');
    if (equals == std::string::npos) continue;
    const std::string key = word.substr(0, equals);
    const auto value = parse_whole_number(std::string_view(word).substr(equals + 1), 1, 1 << 20);
    int* field = key == "CPUTot"           ? &line.cpus
                 : key == "Sockets"        ? &line.sockets
                 : key == "CoresPerSocket" ? &line.cores_per_socket
                 : key == "ThreadsPerCore" ? &line.threads_per_core
                                           : nullptr;
    if (!field || !value) continue;
    if (*field == 0) ++found;
    *field = static_cast<int>(*value);
  }
  if (found < 4) return std::nullopt;
  return line;
}

bool has_faults(const std::vector<NodeFault>& faults) {
  return std::any_of(faults.begin(), faults.end(),
                     [](const NodeFault& f) { return f.severity == NodeFault::Severity::kFault; });
}

}  // namespace gpubind
