// ps_bench: push/pull throughput and small round-trip latency of the ps service on loopback.
//
//   bazel run -c opt //bench:ps_bench -- --ps=1 --clients=1 --size_mb=1,16,64
//
// Starts --ps PsServer instances in this process on 127.0.0.1 (so servers and clients share the
// machine's cores, as a one-host cluster does), or uses running ps_server processes given by
// --ps_addresses, and --clients threads, each with its own PsClient
// and WorkerSession. For each size it creates an ASYNC SGD job with one float32 variable of that
// many MiB and measures, after a warm-up, pushes of the whole variable by every client at once
// for --seconds, then pulls likewise. Throughput is the bytes of the variable times the
// operations completed by all clients, divided by the wall time, in GB/s (GB = 1e9 bytes).
// Then it times --latency_iterations push+pull round trips of a 4 KB variable from one client:
// a Push call then a Pull call, and the two as one PushPull call.
//
// For scale, each row also shows raw TCP on loopback: the same bytes sent from buffer to buffer
// over one connection, each message answered by one byte, with no gRPC or ps work: the kernel's
// copying alone, a rough ceiling for a push (one message per shard). On a shared or virtual
// machine it also shows how fast the machine was when the row was measured.
//
// Two sides can be compared in one run, alternating measurement by measurement (--rounds of
// each, the order of the sides swapped every round), each side with its own in-process ps:
// --tls_dir compares plaintext with mutual TLS, --metrics_compare the ps without /metrics with
// the ps serving /metrics (its RPC interceptor counting every call) and a scraper thread getting
// every ps's /metrics once a second while that side is measured, --compression float32 values
// with compressed pushes and pulls (JobSpec.compression: FLOAT16, BFLOAT16, or top-k),
// --budget_compare the ps without a byte budget with the ps at its default one (server/
// byte_budget.h: every push reserving room, every answer carrying a window),
// --shared_memory_compare tensors in the requests with tensors through shared memory
// (docs/shared_memory.md; the ps shares the host), each row then also showing one thread's
// memcpy of the same bytes, the machine's limit for a copy, --bulk_compare pulls whose values
// come in the answers with pulls whose values come on bulk streams (docs/bulk_streams.md; every
// other side takes them on streams, the default). Without --shared_memory_compare every side
// sends its tensors over TCP, the network path. It prints
// the median ratio of the second side to the first per measurement. With compression, GB/s
// counts the variable's float32 bytes (what the worker pushes or pulls), not the bytes sent.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <httplib.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/process/daemon.h"
#include "common/client/ps_client.h"
#include "common/security/transport_security.h"
#include "common/client/worker_session.h"
#include "proto/ps_service.pb.h"
#include "server/testing/in_process_ps_cluster.h"

DEFINE_int32(ps, 1, "ps servers to start in this process");
DEFINE_int32(clients, 1, "client threads, each with its own PsClient (worker i of the job)");
DEFINE_string(size_mb, "16", "variable sizes in MiB, comma-separated (1,16,64); empty: none");
DEFINE_double(seconds, 3, "wall time of each push or pull measurement, after the warm-up");
DEFINE_int32(warmup_ops, 3, "pushes and pulls per client before each measurement");
DEFINE_int32(chunk_mb, 4, "PsClientOptions.chunk_bytes, in MiB");
DEFINE_int32(connections, 2, "PsClientOptions.connections_per_ps");
DEFINE_int32(max_mb_in_flight, -1,
             "PsClientOptions.max_bytes_in_flight_per_ps, in MiB; 0: no limit, -1: its default");
DEFINE_int32(latency_iterations, 2000, "timed 4 KB push+pull round trips (0: skip)");
DEFINE_bool(tcp_baseline, true, "also measure raw loopback TCP for each size");
DEFINE_string(tls_dir, "",
              "a directory of `psctl certs` files for host 127.0.0.1: measure every size and the "
              "round trip over plaintext and over mutual TLS alternately, and print the ratios");
DEFINE_bool(metrics_compare, false,
            "measure every size and the round trip with the ps's /metrics off and on (scraped "
            "once a second) alternately, and print the ratios");
DEFINE_string(compression, "",
              "compare float32 pushes and pulls with compressed ones: FLOAT16, BFLOAT16, "
              "topk:FRACTION or topk:FRACTION:ENCODING (CompressionSpec)");
DEFINE_bool(budget_compare, false,
            "compare the ps without a byte budget (--max_inflight_mb=0) with the ps at its "
            "default budget, alternately");
DEFINE_bool(replicas_compare, false,
            "compare jobs without replicas with jobs whose every shard has a backup on the next "
            "ps (replicas 2; needs --ps >= 2 in this process)");
DEFINE_bool(shared_memory_compare, false,
            "compare tensors in the requests with tensors through shared memory (a ps on this "
            "host), alternately, with a memcpy column");
DEFINE_bool(in_place, false,
            "with --shared_memory_compare, a third side: shared memory in place (pulls leave "
            "the values in the segment: WorkerSession::PullInPlace; pushes send a gradient "
            "computed in its push region: PushRegions)");
DEFINE_bool(bulk_compare, false,
            "compare pulls whose values come in the answers with pulls whose values come on bulk "
            "streams (docs/bulk_streams.md); the other sides use bulk streams, the default");
DEFINE_int32(rounds, 1, "measurements of each size (and round trip) per side");
DEFINE_string(ps_addresses, "",
              "comma-separated host:port of running ps_server tasks (ps:0 first) to measure "
              "instead of starting --ps servers in this process");

namespace ps {
namespace {

constexpr int64_t kColumns = 1024;  // Every variable is {rows, 1024} float32.
constexpr double kGigabyte = 1e9;

// One client thread's state: its own client (connections), session and buffers.
struct Client {
  std::unique_ptr<PsClient> client;
  std::unique_ptr<WorkerSession> session;
  std::vector<float> values;     // Pull destination.
  std::vector<float> gradient;   // Push source.
  bool in_place = false;          // Pulls leave the values in shared memory (PullInPlace).
};

ParameterSpec BenchSpec(const std::string& job_id, int64_t rows, int num_workers,
                        const CompressionSpec& compression, int replicas) {
  ParameterSpec spec;
  spec.set_replicas(replicas);
  *spec.mutable_compression() = compression;
  spec.set_job_id(job_id);
  VariableDef* variable = spec.add_variables();
  variable->set_name("w");
  variable->add_shape(rows);
  variable->add_shape(kColumns);
  variable->mutable_initializer()->set_kind(InitializerConfig::ZEROS);
  spec.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  // Tiny, so that the values stay finite however many pushes are applied.
  spec.mutable_learning_rate()->set_base(1e-9f);
  spec.mutable_consistency()->set_mode(ConsistencyConfig::ASYNC);
  spec.set_num_workers(num_workers);
  spec.set_allow_non_finite(false);
  return spec;
}

absl::Status PullOnce(Client& c) {
  if (c.in_place) {
    ConstVariables views;
    return c.session->PullInPlace({}, {{"w", absl::MakeSpan(c.values)}}, &views).status();
  }
  return c.session->Pull({}, {{"w", absl::MakeSpan(c.values)}}).status();
}

absl::Status PushOnce(Client& c) {
  absl::Span<const float> gradient = c.gradient;
  if (c.in_place) {
    // Asked each step, as a worker computing in place would (a failed call may move it).
    MutableVariables regions = c.session->PushRegions();
    auto it = regions.find("w");
    if (it == regions.end()) {
      return absl::FailedPreconditionError("--in_place: the gradient has no push region here");
    }
    gradient = it->second;
  }
  return c.session->Push({}, {{"w", gradient}}).status();
}

// Connects `num_clients` clients to the job `spec` (created by the first) with pulled values.
absl::StatusOr<std::vector<Client>> ConnectClients(const PsClientOptions& options,
                                                   const ParameterSpec& spec, int num_clients) {
  const int64_t elements = spec.variables(0).shape(0) * kColumns;
  std::vector<Client> clients(num_clients);
  for (int i = 0; i < num_clients; ++i) {
    Client& c = clients[i];
    absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(options);
    if (!client.ok()) return client.status();
    c.client = *std::move(client);
    if (i == 0) {
      absl::StatusOr<Placement> placement = c.client->CreateJob(spec);
      if (!placement.ok()) return placement.status();
    }
    absl::StatusOr<std::unique_ptr<WorkerSession>> session =
        WorkerSession::Create(c.client.get(), spec, i);
    if (!session.ok()) return session.status();
    c.session = *std::move(session);
    c.values.assign(elements, 0.0f);
    c.gradient.assign(elements, 1e-3f);
    absl::Status status = PullOnce(c);
    if (!status.ok()) return status;
  }
  return clients;
}

// CPU time (user + system) of this whole process so far: the servers', the clients' and any
// scraper's threads. getrusage counts microseconds, where /proc's stat counts 10 ms ticks.
double ProcessCpuSeconds() {
  rusage usage = {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

struct Rate {
  double ops_per_second = 0;      // Over the wall time.
  double cpu_seconds_per_op = 0;  // The process's CPU time over the same time, per operation.
};

// Runs `op` on every client at once: `warmup_ops` times, then as often as it can until
// `duration` has passed.
absl::StatusOr<Rate> OpsPerSecond(std::vector<Client>& clients, absl::Status (*op)(Client&),
                                  absl::Duration duration) {
  const int n = static_cast<int>(clients.size());
  std::vector<absl::Status> errors(n);
  std::vector<int64_t> ops(n, 0);
  std::vector<absl::Time> finished(n);
  absl::BlockingCounter ready(n);
  absl::Notification go;
  absl::Time start;
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      for (int w = 0; w < FLAGS_warmup_ops && errors[i].ok(); ++w) errors[i] = op(clients[i]);
      ready.DecrementCount();
      go.WaitForNotification();
      const absl::Time end = start + duration;
      while (errors[i].ok() && absl::Now() < end) {
        errors[i] = op(clients[i]);
        ++ops[i];
      }
      finished[i] = absl::Now();
    });
  }
  ready.Wait();
  const double cpu_start = ProcessCpuSeconds();
  start = absl::Now();
  go.Notify();
  for (std::thread& thread : threads) thread.join();
  const double cpu_seconds = ProcessCpuSeconds() - cpu_start;
  int64_t total_ops = 0;
  absl::Time last = start;
  for (int i = 0; i < n; ++i) {
    if (!errors[i].ok()) return errors[i];
    total_ops += ops[i];
    last = std::max(last, finished[i]);
  }
  const double done = static_cast<double>(total_ops);
  return Rate{done / absl::ToDoubleSeconds(last - start), cpu_seconds / done};
}

// A connected pair of loopback TCP sockets, closed on destruction.
class SocketPair {
 public:
  static absl::StatusOr<SocketPair> Connect() {
    SocketPair pair;
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    bool ok = listener >= 0 &&
              bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
              listen(listener, 1) == 0 &&
              getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) == 0;
    if (ok) pair.sender_ = socket(AF_INET, SOCK_STREAM, 0);
    ok = ok && pair.sender_ >= 0 &&
         connect(pair.sender_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    if (ok) pair.receiver_ = accept(listener, nullptr, nullptr);
    ok = ok && pair.receiver_ >= 0;
    const int error = errno;
    if (listener >= 0) close(listener);
    if (!ok) return absl::UnavailableError(absl::StrCat("loopback TCP: ", std::strerror(error)));
    const int one = 1;  // As gRPC does.
    setsockopt(pair.sender_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(pair.receiver_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return pair;
  }
  SocketPair(SocketPair&& other) noexcept
      : sender_(std::exchange(other.sender_, -1)), receiver_(std::exchange(other.receiver_, -1)) {}
  SocketPair& operator=(SocketPair&&) = delete;
  ~SocketPair() {
    if (sender_ >= 0) close(sender_);
    if (receiver_ >= 0) close(receiver_);
  }

  int sender() const { return sender_; }
  int receiver() const { return receiver_; }

 private:
  SocketPair() = default;
  int sender_ = -1;
  int receiver_ = -1;
};

bool SendAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t sent = send(fd, data, size, MSG_NOSIGNAL);
    if (sent <= 0) return false;
    data += sent;
    size -= static_cast<size_t>(sent);
  }
  return true;
}

// False on error or at the end of the stream.
bool ReceiveAll(int fd, char* data, size_t size) {
  while (size > 0) {
    ssize_t received = recv(fd, data, size, 0);
    if (received <= 0) return false;
    data += received;
    size -= static_cast<size_t>(received);
  }
  return true;
}

// Messages of `bytes` per second over raw loopback TCP, each answered by one byte.
absl::StatusOr<double> TcpMessagesPerSecond(int64_t bytes, absl::Duration duration) {
  absl::StatusOr<SocketPair> sockets = SocketPair::Connect();
  if (!sockets.ok()) return sockets.status();
  const int receiver = sockets->receiver();
  std::thread echo([receiver, bytes] {
    std::vector<char> buffer(bytes, 0);
    const char reply = 1;
    while (ReceiveAll(receiver, buffer.data(), buffer.size()) && SendAll(receiver, &reply, 1)) {
    }
  });
  const std::vector<char> message(bytes, 1);
  auto round_trip = [&sockets, &message] {
    char reply = 0;
    return SendAll(sockets->sender(), message.data(), message.size()) &&
           ReceiveAll(sockets->sender(), &reply, 1);
  };
  bool ok = true;
  for (int i = 0; ok && i < FLAGS_warmup_ops; ++i) ok = round_trip();
  int64_t messages = 0;
  const absl::Time start = absl::Now();
  const absl::Time end = start + duration;
  while (ok && absl::Now() < end) {
    ok = round_trip();
    ++messages;
  }
  const absl::Time finished = absl::Now();
  shutdown(sockets->sender(), SHUT_WR);  // Ends the echo loop.
  echo.join();
  if (!ok) return absl::UnavailableError("loopback TCP: the connection failed");
  return static_cast<double>(messages) / absl::ToDoubleSeconds(finished - start);
}

struct Throughput {
  double push_gb_per_s = 0;
  double pull_gb_per_s = 0;
  double push_cpu_s_per_gb = 0;  // The process's CPU seconds per GB pushed.
  double pull_cpu_s_per_gb = 0;
  double tcp_gb_per_s = 0;  // Raw loopback TCP; 0 when not measured.
  double memcpy_gb_per_s = 0;  // One thread's memcpy; 0 when not measured.
};

// Copies of `bytes` per second from one buffer to another by one thread (memcpy), over
// `duration`: what one copy of a tensor costs on this machine now.
double MemcpyCopiesPerSecond(int64_t bytes, absl::Duration duration) {
  std::vector<char> from(bytes, 1), to(bytes, 0);
  for (int i = 0; i < FLAGS_warmup_ops; ++i) std::memcpy(to.data(), from.data(), bytes);
  int64_t copies = 0;
  const absl::Time start = absl::Now();
  const absl::Time end = start + duration;
  while (absl::Now() < end) {
    std::memcpy(to.data(), from.data(), bytes);
    from[copies % bytes] = static_cast<char>(copies);  // Not the same copy each time.
    ++copies;
  }
  return static_cast<double>(copies) / absl::ToDoubleSeconds(absl::Now() - start);
}

absl::StatusOr<Throughput> MeasureThroughput(const PsClientOptions& options,
                                             const CompressionSpec& compression, int replicas,
                                             int64_t size_mb, bool in_place) {
  const int64_t rows = (size_mb << 20) / (kColumns * static_cast<int64_t>(sizeof(float)));
  const int64_t bytes = rows * kColumns * static_cast<int64_t>(sizeof(float));
  ParameterSpec spec =
      BenchSpec(absl::StrCat("bench_", size_mb, "mb"), rows, FLAGS_clients, compression, replicas);
  absl::StatusOr<std::vector<Client>> clients = ConnectClients(options, spec, FLAGS_clients);
  if (!clients.ok()) return clients.status();
  for (Client& c : *clients) {
    c.in_place = in_place;
    if (!in_place) continue;
    // The gradient as a worker computing in place would leave it there.
    MutableVariables regions = c.session->PushRegions();
    if (auto it = regions.find("w"); it != regions.end()) {
      std::copy(c.gradient.begin(), c.gradient.end(), it->second.begin());
    }
  }
  const absl::Duration duration = absl::Seconds(FLAGS_seconds);
  Throughput result;
  if (FLAGS_tcp_baseline) {
    absl::StatusOr<double> messages = TcpMessagesPerSecond(bytes, duration);
    if (!messages.ok()) return messages.status();
    result.tcp_gb_per_s = *messages * static_cast<double>(bytes) / kGigabyte;
  }
  if (FLAGS_shared_memory_compare) {
    result.memcpy_gb_per_s = MemcpyCopiesPerSecond(bytes, duration) * bytes / kGigabyte;
  }
  const double gigabytes = static_cast<double>(bytes) / kGigabyte;
  absl::StatusOr<Rate> pushes = OpsPerSecond(*clients, &PushOnce, duration);
  if (!pushes.ok()) return pushes.status();
  result.push_gb_per_s = pushes->ops_per_second * gigabytes;
  result.push_cpu_s_per_gb = pushes->cpu_seconds_per_op / gigabytes;
  absl::StatusOr<Rate> pulls = OpsPerSecond(*clients, &PullOnce, duration);
  if (!pulls.ok()) return pulls.status();
  result.pull_gb_per_s = pulls->ops_per_second * gigabytes;
  result.pull_cpu_s_per_gb = pulls->cpu_seconds_per_op / gigabytes;
  absl::Status deleted = clients->front().client->DeleteJob(spec.job_id());
  if (!deleted.ok()) return deleted;
  return result;
}

struct Latency {
  double p50_us = 0;
  double p99_us = 0;
  double cpu_us = 0;  // The process's CPU time per round trip.
};

// The percentile `p` of `micros`, sorted in place (nearest rank).
double Percentile(std::vector<double>& micros, double p) {
  std::sort(micros.begin(), micros.end());
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(micros.size())));
  return micros[std::min(micros.size(), std::max<size_t>(rank, 1)) - 1];
}

// Round trips of a 1024-float (4 KB) variable from one client, after a warm-up: a push then a
// pull (two calls) if !combined, else one PushPull call.
absl::StatusOr<Latency> MeasureLatency(const PsClientOptions& options,
                                       const CompressionSpec& compression, int replicas,
                                       int iterations, bool combined) {
  ParameterSpec spec =
      BenchSpec(combined ? "bench_pushpull" : "bench_latency", 1, 1, compression, replicas);
  absl::StatusOr<std::vector<Client>> clients = ConnectClients(options, spec, 1);
  if (!clients.ok()) return clients.status();
  Client& c = clients->front();
  auto round_trip = [&c, combined]() -> absl::Status {
    if (combined) {
      return c.session
          ->PushPull({}, {{"w", absl::MakeConstSpan(c.gradient)}}, {},
                     {{"w", absl::MakeSpan(c.values)}})
          .status();
    }
    absl::Status status = PushOnce(c);
    return status.ok() ? PullOnce(c) : status;
  };
  for (int i = 0; i < std::max(100, iterations / 10); ++i) {
    absl::Status status = round_trip();
    if (!status.ok()) return status;
  }
  std::vector<double> micros(iterations);
  const double cpu_start = ProcessCpuSeconds();
  for (int i = 0; i < iterations; ++i) {
    const absl::Time begin = absl::Now();
    absl::Status status = round_trip();
    if (!status.ok()) return status;
    micros[i] = absl::ToDoubleMicroseconds(absl::Now() - begin);
  }
  const double cpu_us = (ProcessCpuSeconds() - cpu_start) * 1e6 / iterations;
  absl::Status deleted = c.client->DeleteJob(spec.job_id());
  if (!deleted.ok()) return deleted;
  return Latency{Percentile(micros, 0.50), Percentile(micros, 0.99), cpu_us};
}

// Scrapes of /metrics, counted over every Scraper.
struct ScrapeCounts {
  int64_t good = 0;        // 200 with a body.
  int64_t bad = 0;         // Anything else.
  int64_t last_bytes = 0;  // The last good body's size.
};

// While it exists, a thread GETs http://127.0.0.1:P/metrics for each of `ports`, as Prometheus
// would: at once, then once a second.
class Scraper {
 public:
  Scraper(std::vector<int> ports, ScrapeCounts* counts)
      : ports_(std::move(ports)), counts_(counts), thread_([this] { Loop(); }) {}
  ~Scraper() {
    stop_.Notify();
    thread_.join();
  }

 private:
  void Loop() {
    do {
      for (int port : ports_) {
        httplib::Result result = httplib::Client("127.0.0.1", port).Get("/metrics");
        if (result && result->status == 200 && !result->body.empty()) {
          ++counts_->good;
          counts_->last_bytes = static_cast<int64_t>(result->body.size());
        } else {
          ++counts_->bad;
          LOG(WARNING) << "scrape of port " << port << ": "
                       << (result ? absl::StrCat("HTTP ", result->status, ", ", result->body.size(),
                                                 " bytes")
                                  : httplib::to_string(result.error()));
        }
      }
    } while (!stop_.WaitForNotificationWithTimeout(absl::Seconds(1)));
  }

  const std::vector<int> ports_;
  ScrapeCounts* const counts_;
  absl::Notification stop_;
  std::thread thread_;  // Last: starts once the rest is set.
};

// --compression: "" (none), an encoding, or topk:FRACTION[:ENCODING].
absl::StatusOr<CompressionSpec> ParseCompression(absl::string_view flag) {
  CompressionSpec compression;
  if (flag.empty()) return compression;
  std::vector<std::string> parts = absl::StrSplit(flag, ':');
  std::string encoding = parts.back();
  if (parts[0] == "topk") {
    float fraction = 0;
    if (parts.size() < 2 || parts.size() > 3 || !absl::SimpleAtof(parts[1], &fraction) ||
        !(fraction > 0 && fraction < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", flag, "\": give topk:FRACTION with FRACTION in (0, 1), e.g. topk:0.01"));
    }
    compression.set_topk_fraction(fraction);
    encoding = parts.size() == 3 ? parts[2] : "FLOAT32";
  } else if (parts.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("\"", flag, "\" is not an encoding or topk"));
  }
  TensorEncoding value;
  if (!TensorEncoding_Parse(encoding, &value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", encoding, "\" is not FLOAT32, FLOAT16 or BFLOAT16"));
  }
  compression.set_encoding(value);
  return compression;
}

int Run() {
  std::vector<int64_t> sizes;
  for (absl::string_view field : absl::StrSplit(FLAGS_size_mb, ',', absl::SkipWhitespace())) {
    int64_t size = 0;
    if (!absl::SimpleAtoi(field, &size) || size < 1) {
      std::fprintf(stderr, "ps_bench: --size_mb: \"%s\" is not a whole number of MiB >= 1\n",
                   std::string(field).c_str());
      return 2;
    }
    sizes.push_back(size);
  }
  if (FLAGS_ps < 1 || FLAGS_clients < 1 || FLAGS_chunk_mb < 1 || FLAGS_connections < 1 ||
      FLAGS_seconds <= 0 || FLAGS_latency_iterations < 0 || FLAGS_rounds < 1 ||
      FLAGS_max_mb_in_flight < -1) {
    std::fprintf(stderr, "ps_bench: --ps, --clients, --chunk_mb, --connections, --seconds and "
                         "--rounds must be positive, --latency_iterations >= 0, "
                         "--max_mb_in_flight >= -1\n");
    return 2;
  }

  PsClientOptions options;
  options.shared_memory = false;  // The network path; --shared_memory_compare's second side not.
  options.chunk_bytes = static_cast<int64_t>(FLAGS_chunk_mb) << 20;
  options.connections_per_ps = FLAGS_connections;
  if (FLAGS_max_mb_in_flight == 0) {
    options.max_bytes_in_flight_per_ps = std::numeric_limits<int64_t>::max();
  } else if (FLAGS_max_mb_in_flight > 0) {
    options.max_bytes_in_flight_per_ps = static_cast<int64_t>(FLAGS_max_mb_in_flight) << 20;
  }
  for (absl::string_view address :
       absl::StrSplit(FLAGS_ps_addresses, ',', absl::SkipWhitespace())) {
    options.ps_addresses.emplace_back(address);
  }
  const int in_process = options.ps_addresses.empty() ? FLAGS_ps : 0;
  if (!options.ps_addresses.empty()) FLAGS_ps = static_cast<int>(options.ps_addresses.size());
  if ((!FLAGS_tls_dir.empty() || FLAGS_metrics_compare || FLAGS_budget_compare) &&
      in_process == 0) {
    std::fprintf(stderr, "ps_bench: --tls_dir, --metrics_compare and --budget_compare need the "
                         "ps in this process (no --ps_addresses)\n");
    return 2;
  }
  if (!FLAGS_tls_dir.empty() + FLAGS_metrics_compare + !FLAGS_compression.empty() +
          FLAGS_replicas_compare + FLAGS_budget_compare + FLAGS_shared_memory_compare +
          FLAGS_bulk_compare >
      1) {
    std::fprintf(stderr, "ps_bench: --tls_dir, --metrics_compare, --compression, "
                         "--replicas_compare, --budget_compare, --shared_memory_compare and "
                         "--bulk_compare compare two sides each; give one of them\n");
    return 2;
  }
  if (FLAGS_replicas_compare && (in_process < 2)) {
    std::fprintf(stderr, "ps_bench: --replicas_compare needs --ps >= 2 in this process (a "
                         "shard's backup is on the next ps)\n");
    return 2;
  }
  absl::StatusOr<CompressionSpec> compression = ParseCompression(FLAGS_compression);
  if (!compression.ok()) {
    std::fprintf(stderr, "ps_bench: --compression: %s\n",
                 std::string(compression.status().message()).c_str());
    return 2;
  }

  // The sides measured alternately: one by default; plaintext and mutual TLS with --tls_dir;
  // /metrics off and on with --metrics_compare.
  struct Side {
    std::string label;
    PsClientOptions options;
    PsServerOptions server;  // Of the in-process ps.
    CompressionSpec compression;
    std::unique_ptr<InProcessPsCluster> servers;
    std::vector<int> metrics_ports;      // Scraped while this side is measured.
    std::vector<Throughput> throughput;  // Per size and round.
    std::vector<Latency> latency[2];     // Per round: Push then Pull; PushPull.
    int replicas = 0;                    // ParameterSpec.replicas of its jobs.
    bool in_place = false;               // --in_place's side.
  };
  std::vector<Side> sides;
  sides.push_back(Side{FLAGS_metrics_compare      ? "metrics off"
                       : FLAGS_budget_compare      ? "budget off"
                       : FLAGS_compression.empty() ? "plaintext"
                                                   : "float32",
                       options, {}, {}, nullptr, {}, {}, {}});
  if (FLAGS_budget_compare) {
    sides.front().server.service.limits.max_inflight_bytes = 0;
    sides.push_back(Side{"budget on", options, {}, {}, nullptr, {}, {}, {}});
  }
  if (!FLAGS_tls_dir.empty()) {
    const TransportSecurity server{FLAGS_tls_dir + "/127.0.0.1.crt",
                                   FLAGS_tls_dir + "/127.0.0.1.key", FLAGS_tls_dir + "/ca.crt"};
    const TransportSecurity client{FLAGS_tls_dir + "/psctl.crt", FLAGS_tls_dir + "/psctl.key",
                                   FLAGS_tls_dir + "/ca.crt"};
    for (const TransportSecurity& security : {server, client}) {
      absl::Status valid = ValidateTransportSecurity(security, /*server=*/true);
      if (!valid.ok()) {
        std::fprintf(stderr, "ps_bench: --tls_dir: %s (psctl certs makes the files)\n",
                     std::string(valid.message()).c_str());
        return 2;
      }
    }
    sides.push_back(Side{"mTLS", options, {}, {}, nullptr, {}, {}, {}});
    sides.back().options.security = client;
    sides.back().server.security = server;
  }
  if (FLAGS_metrics_compare) {
    sides.push_back(Side{"metrics on", options, {}, {}, nullptr, {}, {}, {}});
    sides.back().server.metrics_port = 0;
  }
  if (!FLAGS_compression.empty()) {
    sides.push_back(Side{FLAGS_compression, options, {}, *compression, nullptr, {}, {}, {}});
  }
  if (FLAGS_shared_memory_compare) {
    sides.front().label = "requests";
    sides.push_back(Side{"shared memory", options, {}, {}, nullptr, {}, {}, {}});
    sides.back().options.shared_memory = true;
    if (FLAGS_in_place) {
      sides.push_back(Side{"shm in place", options, {}, {}, nullptr, {}, {}, {}});
      sides.back().options.shared_memory = true;
      sides.back().in_place = true;
    }
  }
  if (FLAGS_bulk_compare) {
    sides.front().label = "answers";
    sides.front().options.bulk_streams = false;
    sides.push_back(Side{"bulk streams", options, {}, {}, nullptr, {}, {}, {}});
  }
  if (FLAGS_replicas_compare) {
    sides.front().label = "replicas 0";
    sides.push_back(Side{"replicas 2", options, {}, {}, nullptr, {}, {}, {}});
    sides.back().replicas = 2;
  }
  for (size_t i = 0; i < sides.size() && in_process > 0; ++i) {
    InProcessPsClusterOptions cluster_options;
    cluster_options.num_ps = in_process;
    cluster_options.server = sides[i].server;
    absl::StatusOr<std::unique_ptr<InProcessPsCluster>> started =
        InProcessPsCluster::Start(cluster_options);
    if (!started.ok()) {
      std::fprintf(stderr, "ps_bench: %s\n", started.status().ToString().c_str());
      return 1;
    }
    sides[i].servers = *std::move(started);
    sides[i].options.ps_addresses = sides[i].servers->addresses();
    for (int ps = 0; ps < in_process; ++ps) {
      const int port = sides[i].servers->server(ps).metrics_port();
      if (port > 0) sides[i].metrics_ports.push_back(port);
    }
  }
  ScrapeCounts scrapes;
  // The scraper of `side`'s /metrics while it is measured; null for a side without.
  auto scraper_for = [&scrapes](const Side& side) {
    return side.metrics_ports.empty() ? nullptr
                                      : std::make_unique<Scraper>(side.metrics_ports, &scrapes);
  };

  const std::string config = absl::StrCat(FLAGS_ps, " ps + ", FLAGS_clients, " client",
                                          FLAGS_clients == 1 ? "" : "s");
  const std::string window =
      FLAGS_max_mb_in_flight == 0
          ? "no limit"
          : absl::StrCat(options.max_bytes_in_flight_per_ps >> 20, " MiB");
  std::printf("ps_bench: %s on loopback (%s), %u cores; chunk %d MiB, %d connection(s) per "
              "ps, %s in flight per ps, %.1f s per measurement; GB = 1e9 bytes, MiB = 2^20 "
              "bytes\n",
              config.c_str(), in_process > 0 ? "ps in this process" : "ps_server processes",
              std::thread::hardware_concurrency(), FLAGS_chunk_mb, FLAGS_connections,
              window.c_str(), FLAGS_seconds);
  // CPU s/GB: the process's CPU seconds (servers and clients) per GB moved.
  std::printf("%-28s %10s %12s %12s %13s %13s %16s %12s\n", "config", "size", "push GB/s",
              "pull GB/s", "push CPU s/GB", "pull CPU s/GB",
              FLAGS_tcp_baseline ? "raw TCP GB/s" : "",
              FLAGS_shared_memory_compare ? "memcpy GB/s" : "");
  for (int64_t size_mb : sizes) {
    for (int round = 0; round < FLAGS_rounds; ++round) {
      for (size_t k = 0; k < sides.size(); ++k) {
        Side& side = sides[(k + round) % sides.size()];  // Each side first every other round.
        std::unique_ptr<Scraper> scraper = scraper_for(side);
        absl::StatusOr<Throughput> throughput =
            MeasureThroughput(side.options, side.compression, side.replicas, size_mb,
                              side.in_place);
        if (!throughput.ok()) {
          std::fprintf(stderr, "ps_bench: %s, %lld MiB: %s\n", side.label.c_str(),
                       static_cast<long long>(size_mb), throughput.status().ToString().c_str());
          return 1;
        }
        side.throughput.push_back(*throughput);
        const std::string label = absl::StrCat(config, ", ", side.label);
        std::printf("%-28s %6lld MiB %12.2f %12.2f %13.3f %13.3f", label.c_str(),
                    static_cast<long long>(size_mb), throughput->push_gb_per_s,
                    throughput->pull_gb_per_s, throughput->push_cpu_s_per_gb,
                    throughput->pull_cpu_s_per_gb);
        if (FLAGS_tcp_baseline) std::printf(" %16.2f", throughput->tcp_gb_per_s);
        if (FLAGS_shared_memory_compare) std::printf(" %12.2f", throughput->memcpy_gb_per_s);
        std::printf("\n");
        std::fflush(stdout);
      }
    }
  }
  if (FLAGS_latency_iterations > 0) {
    for (int round = 0; round < FLAGS_rounds; ++round) {
      for (size_t k = 0; k < sides.size(); ++k) {
        Side& side = sides[(k + round) % sides.size()];
        std::unique_ptr<Scraper> scraper = scraper_for(side);
        for (bool combined : {false, true}) {
          absl::StatusOr<Latency> latency =
              MeasureLatency(side.options, side.compression, side.replicas,
                             FLAGS_latency_iterations, combined);
          if (!latency.ok()) {
            std::fprintf(stderr, "ps_bench: latency: %s\n", latency.status().ToString().c_str());
            return 1;
          }
          side.latency[combined].push_back(*latency);
          std::printf("4 KB push+pull round trip, %-22s (%s, %d ps, 1 client, %d iterations): "
                      "p50 %.1f us, p99 %.1f us, CPU %.1f us\n",
                      combined ? "one PushPull call" : "Push then Pull calls", side.label.c_str(),
                      FLAGS_ps, FLAGS_latency_iterations, latency->p50_us, latency->p99_us,
                      latency->cpu_us);
        }
      }
    }
  }
  if (sides.size() == 2) {
    // Per measurement, the ratios second side / first over the rounds: median (min to max).
    const std::string ratio = absl::StrCat(sides[1].label, " / ", sides[0].label);
    std::printf("%s, median (min to max) of %d rounds:\n", ratio.c_str(), FLAGS_rounds);
    // The largest |median - 1| of the speeds (GB/s, p50), and of the CPU times.
    double largest[2] = {0, 0};
    std::string largest_what[2];
    auto print = [&](const std::string& what, std::vector<double> ratios) {
      const bool cpu = absl::StrContains(what, "CPU");
      std::sort(ratios.begin(), ratios.end());
      const size_t n = ratios.size();
      const double median = (ratios[(n - 1) / 2] + ratios[n / 2]) / 2;
      std::printf("  %-40s %.3f (%.3f to %.3f)\n", what.c_str(), median, ratios.front(),
                  ratios.back());
      if (std::abs(median - 1) >= largest[cpu]) {
        largest[cpu] = std::abs(median - 1);
        largest_what[cpu] = what;
      }
    };
    // The ratios of one figure over the rounds.
    auto ratios = [](const std::vector<double>& first, const std::vector<double>& second) {
      std::vector<double> ratios;
      for (size_t i = 0; i < first.size(); ++i) ratios.push_back(second[i] / first[i]);
      return ratios;
    };
    for (size_t k = 0; k < sizes.size(); ++k) {
      std::vector<double> figures[2][4];  // Per side: push and pull GB/s, CPU s/GB.
      for (int side = 0; side < 2; ++side) {
        for (int round = 0; round < FLAGS_rounds; ++round) {
          const Throughput& t = sides[side].throughput[k * FLAGS_rounds + round];
          figures[side][0].push_back(t.push_gb_per_s);
          figures[side][1].push_back(t.pull_gb_per_s);
          figures[side][2].push_back(t.push_cpu_s_per_gb);
          figures[side][3].push_back(t.pull_cpu_s_per_gb);
        }
      }
      const char* names[4] = {"push GB/s", "pull GB/s", "push CPU s/GB", "pull CPU s/GB"};
      for (int f = 0; f < 4; ++f) {
        print(absl::StrCat(names[f], ", ", sizes[k], " MiB"), ratios(figures[0][f], figures[1][f]));
      }
    }
    for (bool combined : {false, true}) {
      if (FLAGS_latency_iterations == 0) break;
      std::vector<double> p50[2], cpu[2];
      for (int side = 0; side < 2; ++side) {
        for (const Latency& latency : sides[side].latency[combined]) {
          p50[side].push_back(latency.p50_us);
          cpu[side].push_back(latency.cpu_us);
        }
      }
      const std::string what =
          absl::StrCat("4 KB round trip, ", combined ? "PushPull" : "Push then Pull");
      print(absl::StrCat(what, ", p50"), ratios(p50[0], p50[1]));
      print(absl::StrCat(what, ", CPU"), ratios(cpu[0], cpu[1]));
    }
    for (int cpu = 0; cpu < 2; ++cpu) {
      std::printf("largest difference of a median ratio from 1, %s: %.1f%% (%s)\n",
                  cpu ? "CPU time" : "speed", 100 * largest[cpu], largest_what[cpu].c_str());
    }
  }
  if (FLAGS_metrics_compare) {
    std::printf("/metrics scrapes: %lld answered 200 with a body (the last %lld bytes), %lld "
                "failed\n",
                static_cast<long long>(scrapes.good), static_cast<long long>(scrapes.last_bytes),
                static_cast<long long>(scrapes.bad));
    if (scrapes.good == 0 || scrapes.bad > 0) {
      std::fprintf(stderr, "ps_bench: /metrics was not scraped as it should be\n");
      return 1;
    }
  }
  for (Side& side : sides) {
    if (side.servers != nullptr) side.servers->Shutdown();
  }
  return 0;
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  ps::TuneForTensorTraffic();  // As ps_server and ps_worker do.
  gflags::SetUsageMessage("ps_bench --ps=1 --clients=1 --size_mb=1,16,64");
  // Only warnings and errors by default: the servers' INFO lines would break up the table.
  gflags::SetCommandLineOptionWithMode("minloglevel", "1", gflags::SET_FLAGS_DEFAULT);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  return ps::Run();
}
