// Text from outside gpubind (a client's request, a job's environment, a report file) made safe to
// show, by one rule wherever it is shown: a log line, a journal record, slurmd's log, a message a
// client gets back. Nothing it returns can end a line, start a journal record ("\n<0>...") or
// drive a terminal.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpubind {

// How much of one outside string a message quotes: enough to find it, never a hostile 64 KiB.
inline constexpr size_t kMaxQuotedBytes = 64;

// `text` with \n, \r and \t written as those escapes and every other control byte (C0, DEL, the
// C1 range) and every byte that is not part of valid UTF-8 as \xNN. Idempotent: what it returns
// holds no byte it would escape.
std::string printable(std::string_view text);

// What a message quotes of outside text: printable, and cut after `max` bytes of the original
// with its whole size said ("... (4096 bytes)").
std::string excerpt(std::string_view text, size_t max = kMaxQuotedBytes);

}  // namespace gpubind
