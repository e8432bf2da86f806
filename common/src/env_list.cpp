#include "gpubind/env_list.h"

namespace gpubind {

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
