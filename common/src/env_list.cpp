#include "gpubind/env_list.h"

namespace gpubind {

size_t EnvList::begin_var(std::string_view name, bool only_if_unset) {
  const size_t start = text_.size();
  const uint32_t name_bytes = static_cast<uint32_t>(name.size()), value_bytes = 0;
  char header[kHeader];
  std::memcpy(header, &name_bytes, sizeof name_bytes);
  std::memcpy(header + sizeof name_bytes, &value_bytes, sizeof value_bytes);
  header[2 * sizeof(uint32_t)] = only_if_unset ? 1 : 0;
  text_.append(header, kHeader);
  text_.append(name);
  return start;
}

void EnvList::end_var(size_t start, size_t name_bytes) {
  const uint32_t value_bytes = static_cast<uint32_t>(text_.size() - start - kHeader - name_bytes);
  std::memcpy(text_.data() + start + sizeof(uint32_t), &value_bytes, sizeof value_bytes);
  ++count_;
}

void EnvList::add(std::string_view name, std::string_view value, bool only_if_unset) {
  add_written(name, only_if_unset, [&](std::string& out) {
    out.append(value);
    return true;
  });
}

EnvList::Var EnvList::operator[](size_t i) const {
  if (i >= count_) return {};
  Iterator it = begin();
  for (; i > 0; --i)
    ++it;
  return *it;
}

std::optional<std::string_view> EnvList::value_of(std::string_view name) const {
  for (const Var var : *this) {
    if (var.name == name) return var.value;
  }
  return std::nullopt;
}

}  // namespace gpubind
