#include "gpubind/policy_loader.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "gpubind/env.h"
#include "gpubind/env_names.h"
#include "gpubind/model_limits.h"
#include "gpubind/node_check.h"
#include "gpubind/policy.pb.h"

namespace gpubind {
namespace {

namespace pb = google::protobuf;

class CollectFirstError : public pb::io::ErrorCollector {
 public:
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (!message_.empty()) return;
    line_ = line + 1;
    column_ = column + 1;
    message_ = message;
  }
  bool has_error() const { return !message_.empty(); }
  std::string describe(const std::string& source) const {
    return source + ":" + std::to_string(line_) + ":" + std::to_string(column_) + ": " + message_;
  }

 private:
  int line_ = 0;
  int column_ = 0;
  std::string message_;
};

// Builds "file:line: field: problem" for semantic errors found after parsing.
class Locator {
 public:
  Locator(const std::string& source, const pb::TextFormat::ParseInfoTree& tree)
      : source_(source), tree_(tree) {}

  Error at(const pb::TextFormat::ParseInfoTree& tree, const pb::Message& message,
           const std::string& field, int index, const std::string& what,
           const std::string& path) const {
    const pb::FieldDescriptor* fd = message.GetDescriptor()->FindFieldByName(field);
    const int line = fd ? tree.GetLocation(fd, fd->is_repeated() ? index : -1).line : -1;
    const std::string where = line >= 0 ? source_ + ":" + std::to_string(line + 1) : source_;
    return make_error(where + ": " + path + ": " + what);
  }
  Error at(const pb::Message& message, const std::string& field, int index,
           const std::string& what) const {
    std::string path = field;
    if (index >= 0) path += "[" + std::to_string(index) + "]";
    return at(tree_, message, field, index, what, path);
  }
  const pb::TextFormat::ParseInfoTree& root() const { return tree_; }

 private:
  const std::string& source_;
  const pb::TextFormat::ParseInfoTree& tree_;
};

// [A-Za-z_][A-Za-z0-9_]*, what shells accept as a variable name.
bool valid_variable_name(const std::string& name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name) {
    const bool ok =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

Result<std::vector<EnvTemplate>> convert_env(const Locator& loc, const gpubind::Policy& proto,
                                             const std::string& group,
                                             const pb::RepeatedPtrField<gpubind::EnvSetting>& list,
                                             const std::vector<std::string>& selectors) {
  const pb::FieldDescriptor* fd = proto.GetDescriptor()->FindFieldByName(group);
  std::vector<EnvTemplate> out;
  for (int i = 0; i < list.size(); ++i) {
    const gpubind::EnvSetting& t = list.Get(i);
    const pb::TextFormat::ParseInfoTree* nested = loc.root().GetTreeForNested(fd, i);
    const std::string path = group + "[" + std::to_string(i) + "]";
    auto fail = [&](const std::string& field, const std::string& what) {
      if (nested) return loc.at(*nested, t, field, -1, what, path + "." + field);
      return loc.at(proto, group, i, field + ": " + what);
    };
    if (!valid_variable_name(t.name())) {
      return fail("name", "'" + t.name() + "' is not a valid environment variable name");
    }
    if (changes_what_runs(t.name())) {
      return fail("name", "'" + t.name() +
                              "' changes what a task runs (its loader, interpreter, shell or "
                              "identity): gpubind never sets it");
    }
    if (auto status = validate_template(t.value()); !status) {
      return fail("value", status.error().message);
    }
    if (std::find(selectors.begin(), selectors.end(), t.when()) == selectors.end()) {
      std::string allowed;
      for (const std::string& s : selectors)
        allowed += (allowed.empty() ? "'" : ", '") + s + "'";
      return fail("when", "'" + t.when() + "' is not one of " + allowed);
    }
    out.push_back({t.name(), t.value(), t.when(), t.only_if_unset()});
  }
  return out;
}

// A glob fnmatch would take: brackets closed, something to match.
Status check_glob(const std::string& glob) {
  if (glob.empty()) return make_error("empty pattern");
  int depth = 0;
  for (size_t i = 0; i < glob.size(); ++i) {
    if (glob[i] == '\\') {
      ++i;
    } else if (glob[i] == '[' && depth == 0) {
      depth = 1;
      if (i + 1 < glob.size() && (glob[i + 1] == '!' || glob[i + 1] == '^')) ++i;
      if (i + 1 < glob.size() && glob[i + 1] == ']') ++i;  // "[]...]" holds a ']'
    } else if (glob[i] == ']' && depth == 1) {
      depth = 0;
    }
  }
  if (depth != 0) return make_error("pattern '" + glob + "' has an unclosed '['");
  return Ok{};
}

Result<ExpectedNode> convert_expect(const Locator& loc, const gpubind::Policy& proto) {
  const gpubind::NodeExpectation& e = proto.expect();
  const pb::FieldDescriptor* fd = proto.GetDescriptor()->FindFieldByName("expect");
  const pb::TextFormat::ParseInfoTree* nested = loc.root().GetTreeForNested(fd, -1);
  auto fail = [&](const std::string& field, int index, const std::string& what) {
    std::string path = "expect." + field;
    if (index >= 0) path += "[" + std::to_string(index) + "]";
    if (nested) return loc.at(*nested, e, field, index, what, path);
    return loc.at(proto, "expect", -1, path.substr(7) + ": " + what);
  };
  ExpectedNode out;
  // A count beyond what a node can hold is a typo, not an expectation.
  constexpr uint32_t kMaxDevices = 1024;
  if (e.gpu_count() > kMaxDevices) {
    return fail("gpu_count", -1,
                std::to_string(e.gpu_count()) + " GPUs is not plausible (0-" +
                    std::to_string(kMaxDevices) + ")");
  }
  if (e.nic_count() > kMaxDevices) {
    return fail("nic_count", -1,
                std::to_string(e.nic_count()) + " NICs is not plausible (0-" +
                    std::to_string(kMaxDevices) + ")");
  }
  out.gpu_count = static_cast<int>(e.gpu_count());
  out.io_locality_unknown = e.io_locality_unknown();
  out.nic_count = static_cast<int>(e.nic_count());
  if (!e.gpu_model().empty()) {
    if (auto ok = check_glob(e.gpu_model()); !ok) return fail("gpu_model", -1, ok.error().message);
    out.gpu_model = e.gpu_model();
  }
  for (int i = 0; i < e.nics_size(); ++i) {
    if (auto names = expand_nic_names(e.nics(i)); !names)
      return fail("nics", i, names.error().message);
    out.nics.push_back(e.nics(i));
  }
  switch (e.gpu_nic_pairing()) {
    case gpubind::NodeExpectation::PACKAGE:
      out.gpu_nic_pairing = ExpectedNode::Pairing::kPackage;
      break;
    case gpubind::NodeExpectation::NUMA:
      out.gpu_nic_pairing = ExpectedNode::Pairing::kNuma;
      break;
    case gpubind::NodeExpectation::PAIRING_UNCHECKED:
      break;
    default:  // a number the text parser let through
      return fail("gpu_nic_pairing", -1,
                  std::to_string(e.gpu_nic_pairing()) + " is not one of PACKAGE, NUMA");
  }
  switch (e.numa_balancing()) {
    case gpubind::NodeExpectation::OFF:
      out.numa_balancing = ExpectedNode::NumaBalancing::kOff;
      break;
    case gpubind::NodeExpectation::ON:
      out.numa_balancing = ExpectedNode::NumaBalancing::kOn;
      break;
    case gpubind::NodeExpectation::NUMA_BALANCING_UNCHECKED:
      break;
    default:
      return fail("numa_balancing", -1,
                  std::to_string(e.numa_balancing()) + " is not one of OFF, ON");
  }
  return out;
}

Result<SitePolicy> convert(const gpubind::Policy& proto, const Locator& loc,
                           const std::string& source) {
  SitePolicy policy;
  policy.source = source;
  if (!proto.reserved_cpus().empty()) {
    auto reserved = CpuSet::parse_list(proto.reserved_cpus());
    if (!reserved) return loc.at(proto, "reserved_cpus", -1, reserved.error().message);
    policy.reserved_cpus = *reserved;
  }
  policy.reserve_first_core_per_l3 = proto.reserve_first_core_per_l3();
  if (proto.nic_patterns_size() > 0) {
    policy.nic_patterns.clear();
    for (int i = 0; i < proto.nic_patterns_size(); ++i) {
      if (proto.nic_patterns(i).empty()) return loc.at(proto, "nic_patterns", i, "empty pattern");
      policy.nic_patterns.push_back(proto.nic_patterns(i));
    }
  }
  if (proto.smt() > static_cast<uint32_t>(kMaxSmt)) {
    return loc.at(proto, "smt", -1,
                  std::to_string(proto.smt()) + " threads per core is not plausible (0-" +
                      std::to_string(kMaxSmt) + ")");
  }
  policy.smt = static_cast<int>(proto.smt());
  policy.order = proto.order() == gpubind::Policy::CPU ? Order::kCpu : Order::kGpu;
  for (int i = 0; i < proto.gpu_order_size(); ++i) {
    if (proto.gpu_order(i).empty()) return loc.at(proto, "gpu_order", i, "empty entry");
    policy.gpu_order.push_back(proto.gpu_order(i));
  }
  struct Group {
    const char* field;
    const pb::RepeatedPtrField<gpubind::EnvSetting>& list;
    std::vector<std::string> selectors;
    std::vector<EnvTemplate>& target;
  };
  const Group groups[] = {
      {"gpu_env", proto.gpu_env(), {"", "nvidia", "amd", "intel"}, policy.gpu_env},
      {"nic_env",
       proto.nic_env(),
       {"", "slingshot", "infiniband", "ethernet", "efa"},
       policy.nic_env},
      {"omp_env", proto.omp_env(), {""}, policy.omp_env},
  };
  for (const Group& group : groups) {
    if (group.list.empty()) continue;  // keep the defaults
    auto converted = convert_env(loc, proto, group.field, group.list, group.selectors);
    if (!converted) return converted.error();
    group.target = std::move(*converted);
  }
  policy.omp_places = proto.omp_places();
  policy.topology_file = proto.topology_file();
  policy.gpu_domain_only = proto.gpu_domain_only();
  policy.gpu_runtime_discovery = proto.gpu_runtime_discovery();
  if (proto.has_expect()) {
    auto expect = convert_expect(loc, proto);
    if (!expect) return expect.error();
    policy.expect = std::move(*expect);
  }
  return policy;
}

}  // namespace

Result<SitePolicy> parse_policy(std::string_view text, const std::string& source_name) {
  if (text.size() > kMaxPolicyBytes) {
    return make_error(source_name + ": policy is larger than " + std::to_string(kMaxPolicyBytes) +
                      " bytes");
  }
  gpubind::Policy proto;
  pb::TextFormat::Parser parser;
  CollectFirstError errors;
  pb::TextFormat::ParseInfoTree tree;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&tree);
  if (!parser.ParseFromString(std::string(text), &proto)) {
    if (errors.has_error()) return make_error(errors.describe(source_name));
    return make_error(source_name + ": not a valid policy");
  }
  return convert(proto, Locator(source_name, tree), source_name);
}

Result<SitePolicy> load_policy_file(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    return make_error("policy file '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return make_error("policy file '" + path + "': not a regular file");
  // At most the limit and one byte are read: parse_policy refuses a larger file without it being
  // loaded whole (a 100 MB file would otherwise sit in the daemon's memory).
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("policy file '" + path + "': " + std::strerror(errno));
  std::string text(kMaxPolicyBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return make_error("policy file '" + path + "': read error");
  text.resize(static_cast<size_t>(in.gcount()));
  return parse_policy(text, path);
}

}  // namespace gpubind
