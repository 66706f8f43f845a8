// What the ps_server and ps_worker daemons share around their main loop.
#ifndef PS_COMMON_DAEMON_H_
#define PS_COMMON_DAEMON_H_

#include <string>

#include "absl/status/status.h"

namespace ps {

// Blocks SIGTERM and SIGINT in this thread and every thread started after it, so that
// WaitForStopSignal receives them. Call first in main, before any thread starts.
void BlockStopSignals();
// Waits for SIGTERM or SIGINT and returns which.
int WaitForStopSignal();

// Writes `port` to `path` atomically (a temporary file, then rename), for scripts and tests
// that start a daemon on port 0.
absl::Status WritePortFile(const std::string& path, int port);

}  // namespace ps

#endif  // PS_COMMON_DAEMON_H_
