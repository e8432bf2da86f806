#include "gpubind/gpu_tokens.h"

#include <algorithm>
#include <cctype>

namespace gpubind::gpu_tokens {
namespace {

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

}  // namespace

bool is_number(std::string_view token) {
  return !token.empty() && std::all_of(token.begin(), token.end(),
                                       [](unsigned char c) { return std::isdigit(c) != 0; });
}

bool is_token_text(std::string_view token) {
  return !token.empty() && std::all_of(token.begin(), token.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '.' || c == ':' || c == '/' || c == ',' || c == '-';
  });
}

bool is_pci_bus_id(std::string_view text) {
  const size_t domain = text.find(':');
  if (domain == std::string_view::npos || domain < 4 || domain > 8) return false;
  // After the domain: "bb:dd.f", exactly.
  const std::string_view rest = text.substr(domain);
  if (rest.size() != 8 || rest[0] != ':' || rest[3] != ':' || rest[6] != '.') return false;
  const auto hex = [](unsigned char c) { return std::isxdigit(c) != 0; };
  return std::all_of(text.begin(), text.begin() + static_cast<long>(domain), hex) && hex(rest[1]) &&
         hex(rest[2]) && hex(rest[4]) && hex(rest[5]) && rest[7] >= '0' && rest[7] <= '7';
}

bool is_gpu_uuid(std::string_view token) {
  return starts_with(token, "GPU-");
}

bool is_mig(std::string_view token) {
  return starts_with(token, "MIG-");
}

std::string_view legacy_mig_parent_uuid(std::string_view token) {
  if (!starts_with(token, "MIG-GPU-")) return {};
  const std::string_view uuid = token.substr(4);
  return uuid.substr(0, uuid.find('/'));
}

std::string composite_tile(std::string_view card, int tile) {
  return std::string(card) + "." + std::to_string(tile);
}

bool is_composite_tile_of(std::string_view token, std::string_view card) {
  const auto found = composite_card(token);
  return found && *found == card;
}

std::optional<std::string_view> composite_card(std::string_view token) {
  const size_t dot = token.find('.');
  if (dot == std::string_view::npos || dot == 0 || !is_number(token.substr(dot + 1)))
    return std::nullopt;
  return token.substr(0, dot);
}

std::string flat_devices(int first, int count) {
  std::string all;
  for (int t = 0; t < count; ++t)
    all += (t ? "," : "") + std::to_string(first + t);
  return all;
}

bool is_flat_devices(std::string_view token) {
  if (token.empty()) return false;
  for (size_t begin = 0; begin <= token.size();) {
    const size_t comma = std::min(token.find(',', begin), token.size());
    if (!is_number(token.substr(begin, comma - begin))) return false;
    begin = comma + 1;
  }
  return true;
}

}  // namespace gpubind::gpu_tokens
