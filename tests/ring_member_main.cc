// ring_member: one ring member process for tests/ring_process_test.cc. All-reduces (the mean)
// data whose mean it knows exactly, checks every result, and prints "call C ok" after each:
//
//   ring_member --ports=P0,P1,P2 --rank=1 [--calls=5 (0: until a call fails)] [--length=N]
//       [--tls_cert=F --tls_key=F --tls_ca=F]
//
// Exits 0 once its calls are done; 1, printing the error, when a call fails or a result is
// wrong.
#include <cstdio>
#include <vector>

#include <gflags/gflags.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/security/security_flags.h"
#include "tests/ring_member.h"
#include "worker/allreduce/ring_allreduce.h"

DEFINE_string(ports, "", "every member's port on 127.0.0.1, comma-separated");
DEFINE_int32(rank, 0, "this member's index");
DEFINE_int32(calls, 5, "all-reduces to make; 0: until one fails");
DEFINE_int64(length, 100003, "floats all-reduced");
DEFINE_int64(piece_bytes, 64 << 10, "RingOptions.piece_bytes");
DEFINE_int32(deadline_ms, 10000, "how long a send or receive waits at most");
DEFINE_int32(linger_ms, 2000,
             "how long a member whose call failed keeps serving before it exits, as a worker "
             "daemon outlives its failed job: the others' messages of the run are refused saying "
             "why it gave up, instead of finding no one listening");

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  std::vector<int> ports;
  for (absl::string_view port : absl::StrSplit(FLAGS_ports, ',')) {
    int value = 0;
    if (!absl::SimpleAtoi(port, &value)) {
      std::fprintf(stderr, "ring_member: bad --ports=%s\n", FLAGS_ports.c_str());
      return 2;
    }
    ports.push_back(value);
  }
  absl::StatusOr<std::unique_ptr<ps::GrpcRingMember>> member = ps::GrpcRingMember::Start(
      ports, FLAGS_rank, absl::Milliseconds(FLAGS_deadline_ms), ps::TransportSecurityFromFlags());
  if (!member.ok()) {
    std::printf("ring_member: %s\n", member.status().ToString().c_str());
    return 1;
  }
  // Member r holds (r + 1) k + c at element i (k = i mod 97) in call c, so the mean is
  // (n + 1) / 2 k + c: small integers and halves, exact in float whatever the order of the sum.
  const int n = static_cast<int>(ports.size());
  ps::RingOptions options;
  options.piece_bytes = FLAGS_piece_bytes;
  std::vector<float> data(FLAGS_length);
  for (int call = 0; FLAGS_calls == 0 || call < FLAGS_calls; ++call) {
    for (int64_t i = 0; i < FLAGS_length; ++i) data[i] = (FLAGS_rank + 1) * (i % 97) + call;
    absl::Status status =
        ps::RingAllReduceMean((*member)->link(), call, absl::MakeSpan(data), options);
    if (!status.ok()) {
      std::printf("ring_member %d: call %d: %s\n", FLAGS_rank, call, status.ToString().c_str());
      std::fflush(stdout);
      absl::SleepFor(absl::Milliseconds(FLAGS_linger_ms));
      return 1;
    }
    for (int64_t i = 0; i < FLAGS_length; ++i) {
      const float expected = (n + 1) / 2.0f * (i % 97) + call;
      if (data[i] != expected) {
        std::printf("ring_member %d: call %d: element %lld is %g, not %g\n", FLAGS_rank, call,
                    static_cast<long long>(i), data[i], expected);
        return 1;
      }
    }
    std::printf("call %d ok\n", call);
    std::fflush(stdout);
  }
  return 0;
}
