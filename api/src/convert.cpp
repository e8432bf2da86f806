#include "gpubind/api/convert.h"

#include <algorithm>
#include <cctype>

#include "gpubind/gpu_tokens.h"
#include "gpubind/gpu_vendors.h"
#include "gpubind/printable.h"

namespace gpubind::api {
namespace {

// A request's text as its refusal quotes it: cut, control bytes escaped.
std::string quoted(std::string_view text) {
  return "'" + excerpt(text) + "'";
}

bool is_word(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '_' || c == '-' || c == '.';
  });
}

// A GPU token is checked where a request is read: its size and what it is made of
// (gpu_tokens.h), so no later message or log line quotes anything else.
Status check_token(const std::string& token, const char* what) {
  if (token.size() > kMaxTokenBytes)
    return make_error(std::string(what) + " longer than " + std::to_string(kMaxTokenBytes) +
                      " bytes");
  if (!gpu_tokens::is_token_text(token))
    return make_error(std::string(what) + " " + quoted(token) +
                      " names no GPU (letters, digits and '.:/,-' only)");
  return Ok{};
}

Vendor vendor_from(const std::string& name) {
  const GpuVendorRow* row = gpu_vendor(name);
  return row ? row->vendor : Vendor::kUnknown;
}

NicKind nic_kind_from(const std::string& name) {
  for (NicKind k : {NicKind::kSlingshot, NicKind::kInfiniband, NicKind::kEfa}) {
    if (name == nic_kind_name(k)) return k;
  }
  return NicKind::kEthernet;
}

LocalityKind locality_kind_from(const std::string& name) {
  for (LocalityKind k :
       {LocalityKind::kL3, LocalityKind::kNuma, LocalityKind::kPackage, LocalityKind::kUnknown}) {
    if (name == locality_kind_name(k)) return k;
  }
  return LocalityKind::kMachine;
}

void locality_to_proto(const Locality& loc, v1::Locality& proto) {
  proto.set_kind(locality_kind_name(loc.kind));
  proto.set_cpus(loc.cpus.to_list());
  proto.set_l3_index(loc.l3_index);
  proto.set_numa_index(loc.numa_index);
  proto.set_package_index(loc.package_index);
  for (int bridge : loc.pci_path)
    proto.add_pci_path(bridge);
  proto.set_basis(loc.basis);
}

Locality locality_from_proto(const v1::Locality& proto) {
  Locality loc;
  loc.kind = locality_kind_from(proto.kind());
  if (auto cpus = CpuSet::parse_list(proto.cpus())) loc.cpus = *cpus;
  loc.l3_index = proto.l3_index();
  loc.numa_index = proto.numa_index();
  loc.package_index = proto.package_index();
  loc.pci_path.assign(proto.pci_path().begin(), proto.pci_path().end());
  loc.basis = proto.basis();
  return loc;
}

// oneCCL's counts as the tasks' environment gave them; bounded like the step's own counts.
Result<PlanRequest::Ccl> ccl_from_proto(const v1::PlanRequest& proto) {
  // Past these, {ccl_worker_affinity} is left unset (a count no node runs), not refused.
  constexpr uint32_t kMaxCount = 1 << 20;
  if (proto.ccl_process_launcher().size() > kMaxTokenBytes)
    return make_error("ccl_process_launcher longer than " + std::to_string(kMaxTokenBytes) +
                      " bytes");
  if (!proto.ccl_process_launcher().empty() && !is_word(proto.ccl_process_launcher()))
    return make_error("ccl_process_launcher " + quoted(proto.ccl_process_launcher()) +
                      " is not a launcher's name (letters, digits, '_', '-', '.')");
  PlanRequest::Ccl ccl;
  if (proto.ccl_worker_count() > 0)
    ccl.worker_count = static_cast<int>(std::min(proto.ccl_worker_count(), kMaxCount));
  ccl.launcher = proto.ccl_process_launcher();
  ccl.local_size = static_cast<int>(std::min(proto.ccl_local_size(), kMaxCount));
  return ccl;
}

// The fixed tasks: at most one per task, GPU positions within the request's GPU count (the
// planner checks them against the step), CPU lists parsed.
Result<std::vector<FixedTask>> fixed_from_proto(const v1::PlanRequest& proto) {
  std::vector<FixedTask> fixed;
  if (proto.fixed_tasks_size() > static_cast<int>(proto.ntasks()))
    return make_error("fixed_tasks has " + std::to_string(proto.fixed_tasks_size()) +
                      " entries for " + std::to_string(proto.ntasks()) + " tasks");
  fixed.reserve(proto.fixed_tasks_size());
  for (const v1::FixedTask& in : proto.fixed_tasks()) {
    FixedTask& task = fixed.emplace_back();
    if (in.gpus_size() > kMaxGpus)
      return make_error("a fixed task lists more than " + std::to_string(kMaxGpus) + " GPUs");
    for (uint32_t g : in.gpus()) {
      if (g >= static_cast<uint32_t>(kMaxGpus))
        return make_error("fixed GPU " + std::to_string(g) + " is out of range");
      task.gpus.push_back(static_cast<int>(g));
    }
    if (in.cpus().size() > kMaxCpuListBytes)
      return make_error("a fixed task's cpus exceed " + std::to_string(kMaxCpuListBytes) +
                        " bytes");
    if (!in.cpus().empty()) {
      auto cpus = CpuSet::parse_list(in.cpus());
      if (!cpus) return make_error("fixed task cpus: " + cpus.error().message);
      task.cpus = std::move(*cpus);
    }
  }
  return fixed;
}

}  // namespace

Result<PlanRequest> request_from_proto(const v1::PlanRequest& proto) {
  const size_t bytes = proto.ByteSizeLong();
  if (bytes > kMaxRequestBytes) {
    return make_error("request of " + std::to_string(bytes) + " bytes exceeds the limit of " +
                      std::to_string(kMaxRequestBytes));
  }
  if (proto.ntasks() < 1 || proto.ntasks() > static_cast<uint32_t>(kMaxTasks)) {
    return make_error("ntasks must be from 1 to " + std::to_string(kMaxTasks) + " (got " +
                      std::to_string(proto.ntasks()) + ")");
  }
  if (proto.gpus_size() > kMaxGpus) {
    return make_error(std::to_string(proto.gpus_size()) + " GPUs exceed the limit of " +
                      std::to_string(kMaxGpus));
  }
  if (proto.allowed_cpus().size() > kMaxCpuListBytes) {
    return make_error("allowed_cpus exceeds " + std::to_string(kMaxCpuListBytes) + " bytes");
  }
  PlanRequest request;
  request.ntasks = static_cast<int>(proto.ntasks());
  if (!proto.allowed_cpus().empty()) {
    auto cpus = CpuSet::parse_list(proto.allowed_cpus());
    if (!cpus) return make_error("allowed_cpus: " + cpus.error().message);
    request.allowed_cpus = std::move(*cpus);
  }
  if (proto.allowed_cores().size() > kMaxCpuListBytes) {
    return make_error("allowed_cores exceeds " + std::to_string(kMaxCpuListBytes) + " bytes");
  }
  if (!proto.allowed_cores().empty()) {
    auto cores = CpuSet::parse_list(proto.allowed_cores());
    if (!cores) return make_error("allowed_cores: " + cores.error().message);
    request.allowed_cores = std::move(*cores);
  }
  if (proto.gpus_given()) {
    std::vector<StepGpu> gpus;
    gpus.reserve(proto.gpus_size());
    for (const v1::StepGpu& gpu : proto.gpus()) {
      if (auto bad = check_token(gpu.token(), "GPU token"); !bad) return bad.error();
      if (!gpu.pci().empty() && !gpu_tokens::is_pci_bus_id(gpu.pci())) {
        return make_error("GPU bus id " + quoted(gpu.pci()) +
                          " is not a PCI bus id (DDDD:BB:DD.F, e.g. 0000:c1:00.0)");
      }
      if (gpu.node_index() > static_cast<uint32_t>(kMaxGpus)) {
        return make_error("GPU " + std::to_string(gpu.node_index()) + " does not exist");
      }
      gpus.push_back({static_cast<int>(gpu.node_index()), gpu.token(), gpu.pci()});
    }
    request.gpus = std::move(gpus);
  } else if (proto.gpus_size() > 0) {
    return make_error("gpus listed but gpus_given is false");
  }
  auto count = [](uint32_t value, const char* name) -> Result<int> {
    if (value > static_cast<uint32_t>(CpuSet::kMaxCpu)) {
      return make_error(std::string(name) + " " + std::to_string(value) + " is out of range");
    }
    return static_cast<int>(value);
  };
  auto cpt = count(proto.cpus_per_task(), "cpus_per_task");
  auto gpt = count(proto.gpus_per_task(), "gpus_per_task");
  auto tpg = count(proto.tasks_per_gpu(), "tasks_per_gpu");
  for (const auto* r : {&cpt, &gpt, &tpg}) {
    if (!*r) return r->error();
  }
  request.cpus_per_task = *cpt;
  request.gpus_per_task = *gpt;
  request.tasks_per_gpu = *tpg;
  // Values of a later release are refused by name, not planned as the default.
  if (!v1::Order_IsValid(proto.order()))
    return make_error("order " + std::to_string(proto.order()) + " is not one this daemon knows");
  if (!v1::ZeHierarchy_IsValid(proto.ze_hierarchy()))
    return make_error("ze_hierarchy " + std::to_string(proto.ze_hierarchy()) +
                      " is not one this daemon knows");
  if (proto.order() == v1::ORDER_GPU) request.order = Order::kGpu;
  if (proto.order() == v1::ORDER_CPU) request.order = Order::kCpu;
  if (proto.has_smt()) {
    if (proto.smt() > static_cast<uint32_t>(protocol::kMaxSmt))
      return make_error("smt " + std::to_string(proto.smt()) + " is out of range (0-" +
                        std::to_string(protocol::kMaxSmt) + ")");
    request.smt = static_cast<int>(proto.smt());
  }
  request.gpu_env = !proto.no_gpu_env();
  request.nic_env = !proto.no_nic_env();
  if (proto.has_omp_places()) request.omp_places = proto.omp_places();
  if (proto.unplaced_gpus_size() > kMaxGpus)
    return make_error(std::to_string(proto.unplaced_gpus_size()) +
                      " unplaced GPUs exceed the limit of " + std::to_string(kMaxGpus));
  for (const std::string& token : proto.unplaced_gpus()) {
    if (auto bad = check_token(token, "unplaced GPU token"); !bad) return bad.error();
    request.unplaced_gpus.push_back(token);
  }
  if (proto.unplaced_slurm_indices_size() > 0 &&
      proto.unplaced_slurm_indices_size() != proto.unplaced_gpus_size())
    return make_error("unplaced_slurm_indices has " +
                      std::to_string(proto.unplaced_slurm_indices_size()) + " entries for " +
                      std::to_string(proto.unplaced_gpus_size()) + " unplaced GPUs");
  for (uint32_t index : proto.unplaced_slurm_indices()) {
    if (index > static_cast<uint32_t>(kMaxGpus))
      return make_error("Slurm GPU index " + std::to_string(index) + " is out of range");
    request.unplaced_slurm_indices.push_back(static_cast<int>(index));
  }
  auto ccl = ccl_from_proto(proto);
  if (!ccl) return ccl.error();
  request.ccl = std::move(*ccl);
  request.ze_hierarchy = proto.ze_hierarchy() == v1::ZE_HIERARCHY_COMPOSITE
                             ? ZeHierarchy::kComposite
                             : ZeHierarchy::kFlat;
  auto fixed = fixed_from_proto(proto);
  if (!fixed) return fixed.error();
  request.fixed = std::move(*fixed);
  request.cpus_bound_at_launch = proto.cpus_bound_at_launch();
  request.gpus_named_by_slurm = proto.gpus_named_by_slurm();
  if (!v1::SlurmGpuRule_IsValid(proto.slurm_gpu_rule()))
    return make_error("slurm_gpu_rule " + std::to_string(proto.slurm_gpu_rule()) +
                      " is not one this daemon knows");
  request.slurm_gpu_rule =
      proto.slurm_gpu_rule() == v1::SLURM_GPU_RULE_CLOSEST  ? SlurmGpuRule::kClosest
      : proto.slurm_gpu_rule() == v1::SLURM_GPU_RULE_SINGLE ? SlurmGpuRule::kSingle
                                                            : SlurmGpuRule::kNone;
  if (proto.task_command().size() > kMaxTokenBytes)
    return make_error("task_command longer than " + std::to_string(kMaxTokenBytes) + " bytes");
  if (!proto.task_command().empty() && !is_word(proto.task_command()))
    return make_error("task_command " + quoted(proto.task_command()) + " is not a program name");
  request.task_command = proto.task_command();
  if (proto.has_inherited_hip_visible_devices()) {
    if (proto.inherited_hip_visible_devices().size() > kMaxCpuListBytes)
      return make_error("inherited_hip_visible_devices exceeds " +
                        std::to_string(kMaxCpuListBytes) + " bytes");
    const std::string& hip = proto.inherited_hip_visible_devices();
    if (!hip.empty() && !gpu_tokens::is_token_text(hip))
      return make_error("inherited_hip_visible_devices " + quoted(hip) +
                        " is not a list of GPU tokens");
    request.inherited_hip_visible_devices = hip;
  }
  return request;
}

v1::PlanRequest request_to_proto(const PlanRequest& request) {
  v1::PlanRequest proto;
  proto.set_ntasks(static_cast<uint32_t>(std::max(request.ntasks, 0)));
  if (request.allowed_cpus) proto.set_allowed_cpus(request.allowed_cpus->to_list());
  if (request.allowed_cores) proto.set_allowed_cores(request.allowed_cores->to_list());
  if (request.gpus) {
    proto.set_gpus_given(true);
    for (const StepGpu& gpu : *request.gpus) {
      v1::StepGpu* out = proto.add_gpus();
      out->set_node_index(static_cast<uint32_t>(std::max(gpu.node_index, 0)));
      out->set_token(gpu.token);
      out->set_pci(gpu.pci);
    }
  }
  proto.set_cpus_per_task(static_cast<uint32_t>(std::max(request.cpus_per_task, 0)));
  proto.set_gpus_per_task(static_cast<uint32_t>(std::max(request.gpus_per_task, 0)));
  proto.set_tasks_per_gpu(static_cast<uint32_t>(std::max(request.tasks_per_gpu, 0)));
  if (request.order) proto.set_order(*request.order == Order::kGpu ? v1::ORDER_GPU : v1::ORDER_CPU);
  if (request.smt) proto.set_smt(static_cast<uint32_t>(std::max(*request.smt, 0)));
  proto.set_no_gpu_env(!request.gpu_env);
  proto.set_no_nic_env(!request.nic_env);
  if (request.omp_places) proto.set_omp_places(*request.omp_places);
  for (const std::string& token : request.unplaced_gpus)
    proto.add_unplaced_gpus(token);
  for (int index : request.unplaced_slurm_indices)
    proto.add_unplaced_slurm_indices(static_cast<uint32_t>(std::max(index, 0)));
  proto.set_ccl_worker_count(static_cast<uint32_t>(std::max(request.ccl.worker_count, 0)));
  proto.set_ccl_process_launcher(request.ccl.launcher);
  proto.set_ccl_local_size(static_cast<uint32_t>(std::max(request.ccl.local_size, 0)));
  proto.set_ze_hierarchy(request.ze_hierarchy == ZeHierarchy::kComposite
                             ? v1::ZE_HIERARCHY_COMPOSITE
                             : v1::ZE_HIERARCHY_FLAT);
  for (const FixedTask& task : request.fixed) {
    v1::FixedTask* out = proto.add_fixed_tasks();
    for (int g : task.gpus)
      out->add_gpus(static_cast<uint32_t>(std::max(g, 0)));
    if (task.cpus) out->set_cpus(task.cpus->to_list());
  }
  if (request.inherited_hip_visible_devices)
    proto.set_inherited_hip_visible_devices(*request.inherited_hip_visible_devices);
  proto.set_cpus_bound_at_launch(request.cpus_bound_at_launch);
  proto.set_gpus_named_by_slurm(request.gpus_named_by_slurm);
  proto.set_task_command(request.task_command);
  proto.set_slurm_gpu_rule(
      request.slurm_gpu_rule == SlurmGpuRule::kClosest  ? v1::SLURM_GPU_RULE_CLOSEST
      : request.slurm_gpu_rule == SlurmGpuRule::kSingle ? v1::SLURM_GPU_RULE_SINGLE
                                                        : v1::SLURM_GPU_RULE_NONE);
  return proto;
}

Plan plan_from_proto(const v1::PlanResponse& proto) {
  Plan plan;
  plan.tasks.reserve(proto.tasks_size());
  for (const v1::TaskPlan& in : proto.tasks()) {
    TaskPlan task;
    task.rank = static_cast<int>(in.rank());
    if (auto cpus = CpuSet::parse_list(in.cpus())) task.cpus = *cpus;
    task.ncores = static_cast<int>(in.ncores());
    for (const v1::TaskGpu& g : in.gpus()) {
      task.gpus.push_back({static_cast<int>(g.step_index()), g.node_index(), g.tile_index(),
                           g.token(), g.pci(), vendor_from(g.vendor())});
    }
    task.nic_index = in.nic_index();
    task.nic_indices.assign(in.nic_indices().begin(), in.nic_indices().end());
    task.nic_names = in.nic_names();
    task.numa_node = in.numa_node();
    task.l3_index = in.l3_index();
    for (const v1::EnvVar& e : in.env())
      task.env.add(e.name(), e.value(), e.only_if_unset());
    plan.tasks.push_back(std::move(task));
  }
  plan.warnings.assign(proto.warnings().begin(), proto.warnings().end());
  for (const v1::GpuPlace& in : proto.gpu_places()) {
    GpuPlace& place = plan.gpu_places.emplace_back();
    place.node_index = static_cast<int>(in.node_index());
    if (auto cpus = CpuSet::parse_list(in.cpus())) place.cpus = *cpus;
  }
  plan.facts_kept = proto.facts_kept();
  return plan;
}

void topology_to_proto(const Topology& topology, v1::GetTopologyResponse& proto) {
  proto.set_source(topology.source);
  proto.set_hostname(topology.hostname);
  proto.set_l3_count(static_cast<uint32_t>(topology.l3_count));
  proto.set_numa_count(static_cast<uint32_t>(topology.numa_count));
  proto.set_package_count(static_cast<uint32_t>(topology.package_count));
  for (int number : topology.numa_os_numbers)
    proto.add_numa_os_numbers(number);
  for (const std::string& warning : topology.warnings)
    proto.add_warnings(warning);
  for (const Core& core : topology.cores) {
    v1::Core* out = proto.add_cores();
    for (int pu : core.pus)
      out->add_pus(static_cast<uint32_t>(pu));
    out->set_l3_index(core.l3_index);
    out->set_numa_index(core.numa_index);
    out->set_package_index(core.package_index);
  }
  for (const Gpu& gpu : topology.gpus) {
    v1::Gpu* out = proto.add_gpus();
    out->set_index(static_cast<uint32_t>(gpu.index));
    out->set_pci(gpu.pci_bus_id);
    out->set_vendor(vendor_name(gpu.vendor));
    out->set_model(gpu.model);
    out->set_os_name(gpu.os_name);
    out->set_partition(static_cast<uint32_t>(gpu.partition));
    out->set_partitions(static_cast<uint32_t>(gpu.partitions));
    out->set_tiles(static_cast<uint32_t>(gpu.tiles));
    out->set_uuid(gpu.uuid);
    out->set_mig_instances(static_cast<uint32_t>(gpu.mig_instances));
    out->set_found_by(gpu.found_by);
    locality_to_proto(gpu.locality, *out->mutable_locality());
  }
  for (const Nic& nic : topology.nics) {
    v1::Nic* out = proto.add_nics();
    out->set_index(static_cast<uint32_t>(nic.index));
    out->set_name(nic.name);
    out->set_netdev(nic.netdev);
    out->set_rdma(nic.rdma);
    out->set_rdma_port(static_cast<uint32_t>(nic.rdma_port));
    out->set_pci(nic.pci_bus_id);
    out->set_kind(nic_kind_name(nic.kind));
    locality_to_proto(nic.locality, *out->mutable_locality());
  }
}

Topology topology_from_proto(const v1::GetTopologyResponse& proto) {
  Topology t;
  t.source = proto.source();
  t.hostname = proto.hostname();
  t.l3_count = static_cast<int>(proto.l3_count());
  t.numa_count = static_cast<int>(proto.numa_count());
  t.package_count = static_cast<int>(proto.package_count());
  t.numa_os_numbers.assign(proto.numa_os_numbers().begin(), proto.numa_os_numbers().end());
  t.warnings.assign(proto.warnings().begin(), proto.warnings().end());
  for (const v1::Core& in : proto.cores()) {
    Core core;
    core.index = static_cast<int>(t.cores.size());
    for (uint32_t pu : in.pus())
      core.pus.push_back(static_cast<int>(pu));
    core.l3_index = in.l3_index();
    core.numa_index = in.numa_index();
    core.package_index = in.package_index();
    t.cores.push_back(std::move(core));
  }
  for (const v1::Gpu& in : proto.gpus()) {
    Gpu gpu;
    gpu.index = static_cast<int>(in.index());
    gpu.pci_bus_id = in.pci();
    gpu.vendor = vendor_from(in.vendor());
    gpu.model = in.model();
    gpu.os_name = in.os_name();
    gpu.partition = static_cast<int>(in.partition());
    gpu.partitions = static_cast<int>(in.partitions());
    gpu.tiles = static_cast<int>(in.tiles());
    gpu.uuid = in.uuid();
    gpu.mig_instances = static_cast<int>(in.mig_instances());
    gpu.found_by = in.found_by();
    gpu.locality = locality_from_proto(in.locality());
    t.gpus.push_back(std::move(gpu));
  }
  for (const v1::Nic& in : proto.nics()) {
    Nic nic;
    nic.index = static_cast<int>(in.index());
    nic.name = in.name();
    nic.netdev = in.netdev();
    nic.rdma = in.rdma();
    // A daemon from before the field sends 0: port 1, which it used.
    nic.rdma_port = in.rdma_port() > 0 ? static_cast<int>(in.rdma_port()) : 1;
    nic.pci_bus_id = in.pci();
    nic.kind = nic_kind_from(in.kind());
    nic.locality = locality_from_proto(in.locality());
    t.nics.push_back(std::move(nic));
  }
  return t;
}

}  // namespace gpubind::api
