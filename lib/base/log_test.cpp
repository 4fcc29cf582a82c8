#include "lib/base/log.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>

namespace nfsrdma {
namespace {

TEST(EscapeLogText, PrintableAsciiAndUtf8PassUnchanged) {
  EXPECT_EQ(escape_log_text("mount: /srv/pool from 10.0.0.5:812"), "mount: /srv/pool from 10.0.0.5:812");
  EXPECT_EQ(escape_log_text("/srv/caf\xc3\xa9/\xe6\x97\xa5\xf0\x9f\x98\x80"), "/srv/caf\xc3\xa9/\xe6\x97\xa5\xf0\x9f\x98\x80");
}

TEST(EscapeLogText, ControlCharactersBecomeEscapes) {
  EXPECT_EQ(escape_log_text("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(escape_log_text(std::string("a\0b\x1b[31m\x7f", 9)), "a\\x00b\\x1b[31m\\x7f");
  EXPECT_EQ(escape_log_text("back\\slash"), "back\\\\slash");
}

TEST(EscapeLogText, InvalidUtf8ShowsItsBytes) {
  EXPECT_EQ(escape_log_text("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(escape_log_text("\xc0\xaf"), "\\xc0\\xaf");               // overlong '/'
  EXPECT_EQ(escape_log_text("\xed\xa0\x80"), "\\xed\\xa0\\x80");      // a surrogate
  EXPECT_EQ(escape_log_text("\xe6\x97"), "\\xe6\\x97");              // truncated sequence
  EXPECT_EQ(escape_log_text("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
}

TEST(EscapeLogText, UnicodeLineBreaksAndC1ControlsBecomeEscapes) {
  EXPECT_EQ(escape_log_text("a\xc2\x85z"), "a\\u{0085}z");
  EXPECT_EQ(escape_log_text("a\xe2\x80\xa8z\xe2\x80\xa9"), "a\\u{2028}z\\u{2029}");
}

TEST(LogLimiter, OneLinePerIntervalTheRestCountedIntoTheNext) {
  LogLimiter limit(std::chrono::seconds(1));
  ASSERT_EQ(limit.allow(), std::optional<std::uint64_t>(0));
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(limit.allow());
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(limit.allow(), std::optional<std::uint64_t>(1000));
  EXPECT_FALSE(limit.allow());
}

// The logger itself: a message with a peer's newline stays one line on stderr.
TEST(Logging, ALoggedNewlineCannotStartALine) {
  char path[] = "/tmp/nfsrdma-log-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  int saved = ::dup(2);
  ::dup2(fd, 2);
  ASSERT_TRUE(init_logging("info"));
  spdlog::info("mount: refused {} to 10.0.0.9", "/srv\n2026-11-23T00:00:00.000 info [1] mount: root mounted /");
  spdlog::default_logger()->flush();
  ::dup2(saved, 2);
  ::close(saved);
  std::FILE* f = std::fopen(path, "r");
  ASSERT_NE(f, nullptr);
  std::string all;
  for (int c; (c = std::fgetc(f)) != EOF;) all += static_cast<char>(c);
  std::fclose(f);
  ::close(fd);
  ::unlink(path);
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.find('\n'), all.size() - 1) << all;
  EXPECT_NE(all.find("/srv\\n2026-11-23"), std::string::npos) << all;
}

}  // namespace
}  // namespace nfsrdma
