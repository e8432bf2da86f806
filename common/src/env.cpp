#include "gpubind/env.h"

#include <algorithm>
#include <array>

namespace gpubind {
namespace {

// The names as views, measured once rather than at every comparison.
constexpr auto kNameViews = [] {
  std::array<std::string_view, kPlaceholderNames.size()> views{};
  for (size_t i = 0; i < views.size(); ++i)
    views[i] = kPlaceholderNames[i];
  return views;
}();

int placeholder_index(std::string_view name) {
  for (size_t i = 0; i < kNameViews.size(); ++i) {
    if (name == kNameViews[i]) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

Status validate_template(std::string_view value) {
  size_t pos = 0;
  while ((pos = value.find_first_of("{}", pos)) != std::string_view::npos) {
    if (value[pos] == '}') {
      return make_error("template '" + std::string(value) + "': '}' without '{'");
    }
    const size_t close = value.find('}', pos);
    if (close == std::string_view::npos) {
      return make_error("template '" + std::string(value) + "': '{' without '}'");
    }
    const std::string_view name = value.substr(pos + 1, close - pos - 1);
    if (placeholder_index(name) < 0) {
      std::string known;
      for (const char* n : kPlaceholderNames)
        known += std::string(known.empty() ? "" : ", ") + n;
      return make_error("template '" + std::string(value) + "': unknown placeholder {" +
                        std::string(name) + "} (known: " + known + ")");
    }
    pos = close + 1;
  }
  return Ok{};
}

CompiledTemplate::CompiledTemplate(std::string_view value) {
  parts_.reserve(std::count(value.begin(), value.end(), '{') + 1);
  size_t pos = 0;
  while (pos <= value.size()) {
    const size_t open = value.find('{', pos);
    if (open == std::string_view::npos) {
      parts_.push_back({value.substr(pos), -1, false});
      return;
    }
    const size_t close = value.find('}', open);
    if (close == std::string_view::npos) {
      malformed_ = true;
      return;
    }
    const int index = placeholder_index(value.substr(open + 1, close - open - 1));
    parts_.push_back({value.substr(pos, open - pos), index, index < 0});
    pos = close + 1;
  }
}

bool CompiledTemplate::uses(Placeholder placeholder) const {
  return std::any_of(parts_.begin(), parts_.end(), [&](const Part& part) {
    return part.placeholder == static_cast<int>(placeholder);
  });
}

std::optional<std::string> CompiledTemplate::render(PlaceholderSource& source) const {
  std::string out;
  if (!render_to(source, out)) return std::nullopt;
  return out;
}

std::optional<std::string> render_template(std::string_view value, PlaceholderSource& source) {
  return CompiledTemplate(value).render(source);
}

std::optional<std::string> render_template(std::string_view value,
                                           const PlaceholderValues& values) {
  FixedPlaceholders source(values);
  return render_template(value, source);
}

}  // namespace gpubind
