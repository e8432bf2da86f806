// What outside text becomes wherever gpubind shows it (printable.h), and the daemon's log lines
// with such text in them.
#include "gpubind/printable.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "gpubind/daemon/log.h"

namespace gpubind {
namespace {

TEST(Printable, EscapesWhatCouldEndALineOrDriveATerminal) {
  EXPECT_EQ(printable("0000:c1:00.0"), "0000:c1:00.0");
  EXPECT_EQ(printable("x\n<0>gpubindd: forged"), "x\\n<0>gpubindd: forged");
  EXPECT_EQ(printable("a\rb\tc"), "a\\rb\\tc");
  EXPECT_EQ(printable(std::string("nul\0end", 7)), "nul\\x00end");
  EXPECT_EQ(printable("\x1b[2J\x7f"), "\\x1b[2J\\x7f");
}

TEST(Printable, KeepsUtf8AndEscapesWhatIsNot) {
  EXPECT_EQ(printable("µs Grüße ✓ 😀"), "µs Grüße ✓ 😀");
  EXPECT_EQ(printable("\xc2\x9b"), "\\xc2\\x9b");  // C1 CSI, as UTF-8
  EXPECT_EQ(printable("\x9b"
                      "1m"),
            "\\x9b1m");                                     // a lone continuation byte
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");           // overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(printable("\xe2\x9c"), "\\xe2\\x9c");           // cut short
}

TEST(Printable, IsIdempotent) {
  const std::string hostile = "a\nb\x01\xff\\x0a";
  EXPECT_EQ(printable(printable(hostile)), printable(hostile));
}

TEST(Excerpt, CutsLongTextOnACharacterAndSaysItsSize) {
  EXPECT_EQ(excerpt("short"), "short");
  const std::string long_text(100, 'x');
  EXPECT_EQ(excerpt(long_text), std::string(kMaxQuotedBytes, 'x') + "... (100 bytes)");
  // A two-byte character across the cut is left out whole.
  const std::string across = std::string(kMaxQuotedBytes - 1, 'a') + "é" + "tail";
  EXPECT_EQ(excerpt(across), std::string(kMaxQuotedBytes - 1, 'a') + "... (" +
                                 std::to_string(across.size()) + " bytes)");
  EXPECT_EQ(excerpt("\n\n", 1), "\\n... (2 bytes)");
}

// What log::write puts on stderr, through a pipe as under a service manager.
std::string logged(const std::string& message) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const int saved = dup(STDERR_FILENO);
  dup2(fds[1], STDERR_FILENO);
  log::warning(message);
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(fds[1]);
  std::string out;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fds[0], buffer, sizeof buffer)) > 0)
    out.append(buffer, static_cast<size_t>(n));
  close(fds[0]);
  return out;
}

TEST(DaemonLog, AMessageQuotingAClientIsOneLineWhateverItHolds) {
  const std::string forged =
      "x\n<0>gpubindd: FORGED\n2026-11-28T00:00:00 gpubindd error: FORGED\r\x1b[1A";
  log::set_level(log::Level::kInfo);  // whatever an earlier test left
  const std::string line = logged("refused: GPU bus id '" + forged + "'");
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.find('\n'), line.size() - 1) << line;  // one line, ended once
  EXPECT_EQ(line.find('\r'), std::string::npos);
  EXPECT_EQ(line.find('\x1b'), std::string::npos);
  EXPECT_NE(line.find("x\\n<0>gpubindd: FORGED\\n2026-11-28T00:00:00"), std::string::npos) << line;
}

}  // namespace
}  // namespace gpubind
