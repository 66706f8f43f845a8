// What the ps_server and ps_worker daemons share around their main loop.
#ifndef PS_COMMON_PROCESS_DAEMON_H_
#define PS_COMMON_PROCESS_DAEMON_H_

#include <string>

#include "absl/status/status.h"
#include "common/file_system.h"

namespace ps {

// Routes SIGTERM and SIGINT to WaitForStopSignal: blocks them in this thread and every thread
// started after it, and catches them in threads started before (a library's, like OpenBLAS's
// pool, started as it loads), where they would otherwise end the process. Call first in main.
void BlockStopSignals();
// Waits for SIGTERM or SIGINT and returns which. REQUIRES: BlockStopSignals was called; one
// thread waits.
int WaitForStopSignal();

// Tunes the process for a hot path of large tensor messages; call first in main (ps_server,
// ps_worker, the benchmarks). Two settings of Debian's libraries cost throughput there:
//  - glibc's allocator hands freed memory at the heap's top back to the kernel once 128 KiB
//    is free, and maps large blocks afresh, so every message gRPC received faulted its pages
//    in again (about 10 times as many page faults in ps_bench). Freed memory is kept instead:
//    the process keeps its peak heap.
//  - Abseil is built with mutex deadlock detection on, a lock-graph update on every lock.
//    It is turned off, as in Abseil's release builds (tests keep it).
void TuneForTensorTraffic();

// The host a daemon listens on: `bind_host` (its --bind_host) when set; else the loopback
// interface when the ClusterSpec puts the task on a loopback host (`own_host`: 127.0.0.1,
// localhost, ::1), so that a one-machine cluster serves nothing to the network; else every
// interface ("0.0.0.0"), where plaintext then needs --insecure (common/net/grpc_server.h).
std::string ListenHost(const std::string& bind_host, const std::string& own_host);

// Writes `port` to `path` atomically (a temporary file, then rename), for scripts and tests
// that start a daemon on port 0.
absl::Status WritePortFile(const std::string& path, int port,
                          FileSystem* fs = FileSystem::Default());

}  // namespace ps

#endif  // PS_COMMON_PROCESS_DAEMON_H_
