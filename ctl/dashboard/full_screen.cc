#include "ctl/dashboard/full_screen.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"

namespace ps {
namespace {

// The alternate screen (the shell's screen comes back as it was) and no cursor, and back.
constexpr char kEnter[] = "\x1b[?1049h\x1b[?25l";
constexpr char kLeave[] = "\x1b[?25h\x1b[?1049l";
constexpr char kClear[] = "\x1b[H\x1b[2J";  // Cursor to the top left, screen cleared.

winsize WindowSize() {
  winsize size = {};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) != 0 || size.ws_col == 0 || size.ws_row == 0) {
    size.ws_col = 80;
    size.ws_row = 24;
  }
  return size;
}

}  // namespace

std::unique_ptr<FullScreen> FullScreen::Open() {
  if (!isatty(STDOUT_FILENO)) return nullptr;
  std::unique_ptr<FullScreen> screen(new FullScreen());
  if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &screen->saved_) == 0) {
    struct termios raw = screen->saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);  // ISIG stays: Ctrl-C is SIGINT.
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    screen->keys_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  std::cout << kEnter << std::flush;
  return screen;
}

FullScreen::~FullScreen() {
  std::cout << kLeave << std::flush;
  if (keys_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
}

int FullScreen::columns() const { return WindowSize().ws_col; }
int FullScreen::rows() const { return WindowSize().ws_row; }

void FullScreen::Draw(const std::string& text) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  // No newline after the last row: it would scroll the first out of sight.
  lines.resize(std::min(lines.size(), static_cast<size_t>(rows())));
  std::cout << kClear << absl::StrJoin(lines, "\n") << std::flush;
}

int FullScreen::ReadKey(absl::Time deadline) {
  // A terminal's keys come in real time: so does the deadline.
  Clock* const clock = Clock::Real();
  const absl::Duration wait = std::max(deadline - clock->Now(), absl::ZeroDuration());
  if (!keys_) {
    clock->SleepFor(wait);
    return -1;
  }
  pollfd in = {STDIN_FILENO, POLLIN, 0};
  if (poll(&in, 1, static_cast<int>(absl::ToInt64Milliseconds(wait))) <= 0) return -1;
  unsigned char key = 0;
  if (read(STDIN_FILENO, &key, 1) == 1) return key;
  keys_ = false;  // The end of input (the terminal hung up): only wait from now on.
  return -1;
}

}  // namespace ps
