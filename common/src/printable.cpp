#include "gpubind/printable.h"

#include <cstdint>

namespace gpubind {
namespace {

void escape_byte(std::string& out, uint8_t byte) {
  static constexpr char kHex[] = "0123456789abcdef";
  switch (byte) {
    case '\n':
      out += "\\n";
      return;
    case '\r':
      out += "\\r";
      return;
    case '\t':
      out += "\\t";
      return;
    default:
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
  }
}

// The length of the valid UTF-8 sequence at `at` (2 to 4 bytes, no overlong form, no surrogate,
// nothing past U+10FFFF, no C1 control), or 0.
size_t utf8_sequence(std::string_view text, size_t at) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[at + i]); };
  const uint8_t lead = byte(0);
  size_t length = 0;
  uint32_t code = 0;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
    code = lead & 0x1f;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    code = lead & 0x0f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    code = lead & 0x07;
  } else {
    return 0;
  }
  if (at + length > text.size()) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xc0) != 0x80) return 0;
    code = (code << 6) | (byte(i) & 0x3f);
  }
  const uint32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < smallest[length] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return 0;
  if (code >= 0x80 && code <= 0x9f) return 0;  // C1 controls (CSI 0x9b among them)
  return length;
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const auto byte = static_cast<uint8_t>(text[at]);
    if (byte >= 0x20 && byte < 0x7f) {
      out += static_cast<char>(byte);
      ++at;
    } else if (const size_t length = byte >= 0x80 ? utf8_sequence(text, at) : 0; length > 0) {
      out.append(text.substr(at, length));
      at += length;
    } else {
      escape_byte(out, byte);
      ++at;
    }
  }
  return out;
}

std::string excerpt(std::string_view text, size_t max) {
  if (text.size() <= max) return printable(text);
  // Cut on a character boundary, so the cut never shows as a broken sequence.
  size_t end = max;
  while (end > 0 && (static_cast<uint8_t>(text[end]) & 0xc0) == 0x80)
    --end;
  return printable(text.substr(0, end)) + "... (" + std::to_string(text.size()) + " bytes)";
}

}  // namespace gpubind
