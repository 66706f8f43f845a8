// A terminal taken over by a view that redraws itself (psctl top): the alternate screen without
// a cursor, and keys read one at a time, without echo and without waiting for Enter. Ctrl-C
// still sends SIGINT. The destructor gives the terminal back as it found it.
#ifndef PS_CTL_DASHBOARD_FULL_SCREEN_H_
#define PS_CTL_DASHBOARD_FULL_SCREEN_H_

#include <termios.h>

#include <memory>
#include <string>

#include "absl/time/time.h"

namespace ps {

// Not thread-safe.
class FullScreen {
 public:
  // Null when stdout is not a terminal. Keys are read from stdin when it is a terminal too.
  static std::unique_ptr<FullScreen> Open();
  ~FullScreen();

  // The window's size now (80 by 24 when the terminal does not say).
  int columns() const;
  int rows() const;

  // Clears the screen and writes `text`'s lines from the top left, as many as fit.
  void Draw(const std::string& text);

  // The next key pressed, waiting until `deadline` at most: -1 when none was (or there is no
  // terminal to read from).
  int ReadKey(absl::Time deadline);

 private:
  FullScreen() = default;

  bool keys_ = false;  // stdin is a terminal whose settings saved_ holds.
  struct termios saved_ = {};
};

}  // namespace ps

#endif  // PS_CTL_DASHBOARD_FULL_SCREEN_H_
