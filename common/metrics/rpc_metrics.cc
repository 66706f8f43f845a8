#include "common/metrics/rpc_metrics.h"

#include <chrono>
#include <utility>

#include <google/protobuf/descriptor.h>
#include <grpcpp/support/interceptor.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ps {

class RpcMetrics::Interceptor : public grpc::experimental::Interceptor {
 public:
  explicit Interceptor(Method* method)
      : method_(method), start_(std::chrono::steady_clock::now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      int code = methods->GetSendStatus().error_code();
      if (code < 0 || code >= kNumCodes) code = grpc::StatusCode::UNKNOWN;
      method_->calls[code].Increment();
      method_->latency.Observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
    }
    methods->Proceed();
  }

 private:
  Method* const method_;
  const std::chrono::steady_clock::time_point start_;
};

class RpcMetrics::Factory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(RpcMetrics* metrics) : metrics_(metrics) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new Interceptor(metrics_->Find(info->method()));
  }

 private:
  RpcMetrics* const metrics_;
};

RpcMetrics::RpcMetrics(std::string prefix, const std::vector<std::string>& services)
    : prefix_(std::move(prefix)) {
  for (const std::string& service : services) {
    const google::protobuf::ServiceDescriptor* descriptor =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
    if (descriptor == nullptr) continue;  // Its calls count as "other".
    for (int i = 0; i < descriptor->method_count(); ++i) {
      const std::string& name = descriptor->method(i)->name();
      by_path_.emplace(absl::StrCat("/", service, "/", name), std::make_unique<Method>(name));
    }
  }
}

const std::vector<double>& RpcMetrics::LatencyBounds() {
  // From 100 us (a small push on loopback) to a minute (a pull waiting at a barrier).
  static const std::vector<double>* const bounds =
      new std::vector<double>{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                              0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};
  return *bounds;
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
RpcMetrics::InterceptorFactory() {
  return std::make_unique<Factory>(this);
}

RpcMetrics::Method* RpcMetrics::Find(const char* path) {
  auto it = path == nullptr ? by_path_.end() : by_path_.find(path);
  return it == by_path_.end() ? &other_ : it->second.get();
}

void RpcMetrics::WriteMetrics(MetricsWriter* writer) const {
  std::vector<const Method*> methods;
  for (const auto& [path, method] : by_path_) methods.push_back(method.get());
  methods.push_back(&other_);
  const std::string calls = absl::StrCat(prefix_, "_rpcs_total");
  writer->Family(calls, "Calls answered, by method and status code.", MetricType::kCounter);
  for (const Method* method : methods) {
    for (int code = 0; code < kNumCodes; ++code) {
      const int64_t count = method->calls[code].value();
      if (count == 0) continue;
      writer->Sample(calls,
                     {{"method", method->name},
                      {"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(code))}},
                     static_cast<double>(count));
    }
  }
  const std::string latency = absl::StrCat(prefix_, "_rpc_duration_seconds");
  writer->Family(latency, "Time from a call's start to its status being sent, by method.",
                 MetricType::kHistogram);
  for (const Method* method : methods) {
    int64_t answered = 0;
    for (const Counter& count : method->calls) answered += count.value();
    if (answered > 0) method->latency.Write(latency, {{"method", method->name}}, writer);
  }
}

}  // namespace ps
