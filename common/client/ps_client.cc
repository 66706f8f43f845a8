#include "common/client/ps_client.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include <google/protobuf/message.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "common/net/proto_byte_buffer.h"
#include "common/tensor/finite.h"

namespace ps {
namespace {

absl::Status IgnoreResponse(const grpc::ByteBuffer&) { return absl::OkStatus(); }

// A job-management call of `method` to shard `ps`, sending `request` (copied).
PsConnections::Call AdminCall(
    const PsConnections& connections, int ps, const std::string& method,
    const google::protobuf::Message& request,
    std::function<absl::Status(const grpc::ByteBuffer&)> on_response = IgnoreResponse) {
  std::shared_ptr<google::protobuf::Message> copy(request.New());
  copy->CopyFrom(request);
  return PsConnections::Call{ps, method, [copy] { return SerializeToByteBuffer(*copy); },
                             std::move(on_response), connections.options().call_timeout, 0};
}

// How long a ps is given to say where a moved shard is, once the ps a call of it went to could
// not be reached (PsConnections::MovedShardFinder).
constexpr absl::Duration kFindMovedShardTimeout = absl::Seconds(2);

// ListJobs of every ps but those in `skip` at once, each within `timeout` (and only once where
// `once`: no retry).
struct EveryPsListed {
  std::vector<ListJobsResponse> answers;  // By ps.
  std::vector<char> answered;             // By ps: answers[ps] came.
  absl::Status failed;                    // The first ps's that did not answer, if any.

  // Per ps, its answer or null.
  std::vector<const ListJobsResponse*> Answers() const {
    std::vector<const ListJobsResponse*> listed;
    for (size_t ps = 0; ps < answers.size(); ++ps) {
      listed.push_back(answered[ps] ? &answers[ps] : nullptr);
    }
    return listed;
  }
};
EveryPsListed ListEveryPs(PsConnections& connections, const std::set<int>& skip,
                          absl::Duration timeout, bool once) {
  static const ListJobsRequest kList;
  EveryPsListed listed;
  listed.answers.resize(connections.num_ps());
  listed.answered.assign(connections.num_ps(), 0);
  std::vector<PsConnections::Call> calls;
  for (int ps = 0; ps < connections.num_ps(); ++ps) {
    if (skip.count(ps) > 0) continue;
    calls.push_back(AdminCall(connections, ps, "ListJobs", kList,
                              [&listed, ps](const grpc::ByteBuffer& bytes) {
                                absl::Status parsed = ParseFromByteBuffer(bytes, &listed.answers[ps]);
                                if (parsed.ok()) listed.answered[ps] = 1;
                                return parsed;
                              }));
    calls.back().timeout = timeout;
    calls.back().once = once;
  }
  // The answers that came are kept whatever the others do.
  listed.failed = connections.RunCalls(std::move(calls));
  return listed;
}

// `method` on every shard at once, shard `ps` asked `request_for(ps)` (copied before the next
// call to it); `replicated`: as PsConnections::Call's. The answers in shard order, or the first
// failure.
template <typename Response>
absl::StatusOr<std::vector<Response>> AskEveryShard(
    PsConnections& connections, int num_ps, const std::string& method, bool replicated,
    const std::function<const google::protobuf::Message&(int ps)>& request_for,
    const std::string& routed_job = "") {
  std::vector<Response> responses(num_ps);
  std::vector<PsConnections::Call> calls;
  for (int ps = 0; ps < num_ps; ++ps) {
    calls.push_back(AdminCall(connections, ps, method, request_for(ps),
                              [&responses, ps](const grpc::ByteBuffer& bytes) {
                                return ParseFromByteBuffer(bytes, &responses[ps]);
                              }));
    calls.back().replicated = replicated;
    calls.back().routed = !routed_job.empty();
    calls.back().job_id = routed_job;
  }
  absl::Status status = connections.RunCalls(std::move(calls));
  if (!status.ok()) return status;
  return responses;
}

// `method` on every shard at once with `request` (a LeaveJobRequest, GrowJobRequest), which
// names each shard (its `shard` field set per call, and `unreplicated` unless `replicated`), each
// call routed to where its shard of the job moved (MoveShard); the answers are not read. OK, or
// the first failure.
template <typename Request>
absl::Status TellEveryShard(PsConnections& connections, int num_ps, const std::string& method,
                            Request* request, bool replicated) {
  std::vector<PsConnections::Call> calls;
  for (int ps = 0; ps < num_ps; ++ps) {
    request->set_shard(ps);
    request->set_unreplicated(!replicated);
    calls.push_back(AdminCall(connections, ps, method, *request));
    calls.back().replicated = replicated;
    calls.back().routed = true;
    calls.back().job_id = request->job_id();
  }
  return connections.RunCalls(std::move(calls));
}

// Shard `ps`'s slices of `values` (every variable of `spec`, by name) into `request`.
absl::Status AddInitialValues(const ParameterSpec& spec, const Placement& placement, int ps,
                              const PsClient::InitialValues& values, CreateJobRequest* request) {
  for (int index : placement.SlicesOn(ps)) {
    const SlicePlacement& slice = placement.slices[index];
    const VariableDef& def = spec.variables(slice.variable_index);
    int64_t size = 1;
    for (int64_t dim : def.shape()) size *= dim;
    auto it = values.find(def.name());
    if (it == values.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job \"", spec.job_id(), "\": no initial values for variable ", def.name(),
          "; the chief sends every variable's (ParameterSpec.chief_initializes)"));
    }
    if (static_cast<int64_t>(it->second.size()) != size) {
      return absl::InvalidArgumentError(absl::StrCat("job \"", spec.job_id(), "\": variable ",
                                                     def.name(), "'s initial values are ",
                                                     it->second.size(), " floats, not ", size));
    }
    const int64_t row_size = slice.row_size;
    SliceValues* sent = request->add_initial_values();
    sent->mutable_slice()->set_variable(def.name());
    sent->mutable_slice()->set_row_begin(slice.row_begin);
    sent->mutable_slice()->set_row_count(slice.row_count);
    const float* begin = it->second.data() + slice.row_begin * row_size;
    const int64_t bad = FirstNonFinite(absl::MakeConstSpan(begin, slice.num_elements()));
    if (bad >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job \"", spec.job_id(), "\": variable ", def.name(), "'s initial value at element ",
          slice.row_begin * row_size + bad, " is ", begin[bad], "; a model starts finite"));
    }
    sent->mutable_values()->Add(begin, begin + slice.row_count * row_size);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Create(const PsClientOptions& options) {
  absl::StatusOr<std::unique_ptr<PsConnections>> connections = PsConnections::Create(options);
  if (!connections.ok()) return connections.status();
  PsConnections* raw = connections->get();
  (*connections)->SetMovedShardFinder(
      [raw](const std::vector<PsConnections::JobShard>& shards, const std::set<int>& unreached) {
        const EveryPsListed listed =
            ListEveryPs(*raw, unreached, kFindMovedShardTimeout, /*once=*/true);
        std::map<PsConnections::JobShard, int> found;
        for (const PsConnections::JobShard& shard : shards) {
          const std::map<int, int> moved = MovedShardsIn(shard.first, listed.Answers());
          auto serving = moved.find(shard.second);
          if (serving != moved.end()) found[shard] = serving->second;
        }
        return found;
      });
  return std::unique_ptr<PsClient>(new PsClient(*std::move(connections)));
}

absl::Status PsClient::AwaitChiefsJob(const std::string& job_id) {
  const absl::Time start = absl::Now();
  absl::Time next_log = start + absl::Seconds(10);
  absl::Duration backoff = absl::Milliseconds(20);
  while (true) {
    absl::StatusOr<std::vector<JobStats>> stats = GetJobStats(job_id);
    if (stats.ok()) return absl::OkStatus();
    if (!absl::IsNotFound(stats.status())) return stats.status();
    const absl::Time now = absl::Now();
    if (now - start >= options().wait_timeout) {
      return absl::DeadlineExceededError(absl::StrCat(
          "waited ", absl::FormatDuration(now - start), " for the chief (worker 0) of job \"",
          job_id, "\" to create it with its initial values, and it has not (",
          stats.status().message(), "); is worker 0 running? Its log says why not"));
    }
    if (now >= next_log) {
      LOG(INFO) << "waiting for the chief (worker 0) of job " << job_id
                << " to create it with its initial values";
      next_log = now + absl::Seconds(10);
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Milliseconds(500));
  }
}

absl::StatusOr<Placement> PsClient::CreateJob(const ParameterSpec& spec,
                                              const std::vector<ApplyLog>* replay,
                                              const InitialValues* initial_values) {
  absl::StatusOr<Placement> placement = PlaceVariables(spec, num_ps());
  if (!placement.ok()) return placement.status();
  if (replay != nullptr && static_cast<int>(replay->size()) != num_ps()) {
    return absl::InvalidArgumentError(absl::StrCat("a replay needs one apply log per ps: ",
                                                   replay->size(), " for ", num_ps(), " ps"));
  }
  if (initial_values != nullptr && !spec.chief_initializes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job \"", spec.job_id(), "\": initial values for a job whose variables start at their "
        "initializers; set ParameterSpec.chief_initializes"));
  }
  if (spec.chief_initializes() && initial_values == nullptr && replay == nullptr) {
    absl::Status created = AwaitChiefsJob(spec.job_id());
    if (!created.ok()) return created;
  }
  // A shard moved to another ps (MoveShard) is not made anew at its own ps (one started again
  // empty while the shard was away, or gone): this client's calls go where it is served. A ps
  // that cannot be asked fails the creation before anything is made, unless its own shard is
  // so served (a ps removed from the job): it may be the one that serves a moved shard, whose
  // own ps would make it anew.
  absl::StatusOr<std::map<int, int>> moved_shards =
      spec.replicas() < 2 && replay == nullptr ? MovedShards(spec.job_id()) : std::map<int, int>();
  if (!moved_shards.ok()) return moved_shards.status();
  const std::map<int, int>& moved = *moved_shards;
  std::vector<PsConnections::Call> calls;
  for (int ps = 0; ps < num_ps(); ++ps) {
    if (moved.count(ps) > 0) continue;
    CreateJobRequest request;
    *request.mutable_spec() = spec;
    request.set_num_ps(num_ps());
    request.set_ps_index(ps);
    if (replay != nullptr) {
      *request.mutable_replay() = (*replay)[ps];
      request.set_replaying(true);
    }
    if (initial_values != nullptr) {
      request.set_from_chief(true);
      absl::Status added = AddInitialValues(spec, *placement, ps, *initial_values, &request);
      if (!added.ok()) return added;
    }
    calls.push_back(AdminCall(*connections_, ps, "CreateJob", request));
  }
  absl::Status status = connections_->RunCalls(std::move(calls));
  if (!status.ok()) return status;
  RouteMovedShards(spec.job_id(), moved);
  return placement;
}

void PsClient::RouteMovedShards(const std::string& job_id, const std::map<int, int>& moved) {
  for (const auto& [shard, ps] : moved) {
    connections_->MoveRoute(job_id, shard, shard, ps,
                            absl::StrCat("ps:", ps, " serves it, moved there"));
  }
}

absl::StatusOr<std::map<int, int>> PsClient::MovedShards(const std::string& job_id) {
  const EveryPsListed listed = ListEveryPs(*connections_, {}, options().call_timeout,
                                           /*once=*/false);
  std::map<int, int> moved = MovedShardsIn(job_id, listed.Answers());
  for (int ps = 0; ps < num_ps(); ++ps) {
    if (!listed.answered[ps] && moved.count(ps) == 0) return listed.failed;
  }
  return moved;
}

std::map<int, int> MovedShardsIn(const std::string& job_id,
                                 const std::vector<const ListJobsResponse*>& listed) {
  const int num_ps = static_cast<int>(listed.size());
  std::map<int, int> moved;
  for (int ps = 0; ps < num_ps; ++ps) {
    if (listed[ps] == nullptr) continue;
    for (const ListJobsResponse::ShardCopy& copy : listed[ps]->copies()) {
      if (copy.job_id() == job_id && copy.moved() && copy.serving() && copy.shard() != ps &&
          copy.shard() >= 0 && copy.shard() < num_ps) {
        moved[copy.shard()] = ps;
      }
    }
  }
  return moved;
}

absl::Status PsClient::DeleteJob(const std::string& job_id) {
  DeleteJobRequest request;
  request.set_job_id(job_id);
  int not_found = 0;
  absl::Status first_error;
  for (int ps = 0; ps < num_ps(); ++ps) {
    absl::Status status =
        connections_->RunCalls({AdminCall(*connections_, ps, "DeleteJob", request)});
    if (absl::IsNotFound(status)) {
      ++not_found;
    } else if (!status.ok() && first_error.ok()) {
      first_error = status;
    }
  }
  if (!first_error.ok()) return first_error;
  if (not_found == num_ps()) {
    return absl::NotFoundError(absl::StrCat("unknown job \"", job_id, "\": no ps task has it"));
  }
  return absl::OkStatus();
}

absl::Status PsClient::LeaveJob(const std::string& job_id, const std::string& run_id,
                                int worker, bool replicated, std::optional<int> incarnation) {
  LeaveJobRequest request;
  request.set_job_id(job_id);
  request.set_run_id(run_id);
  request.set_worker(worker);
  if (incarnation.has_value()) request.set_incarnation(*incarnation);
  return TellEveryShard(*connections_, num_ps(), "LeaveJob", &request, replicated);
}

absl::Status PsClient::GrowJob(GrowJobRequest request, bool replicated) {
  return TellEveryShard(*connections_, num_ps(), "GrowJob", &request, replicated);
}

absl::StatusOr<NextBatchesResponse> PsClient::NextBatches(NextBatchesRequest request,
                                                          bool replicated) {
  NextBatchesResponse response;
  request.set_shard(0);  // The first shard hands out, wherever it is (MoveShard).
  request.set_unreplicated(!replicated);
  std::vector<PsConnections::Call> calls;
  calls.push_back(AdminCall(*connections_, /*ps=*/0, "NextBatches", request,
                            [&response](const grpc::ByteBuffer& bytes) {
                              return ParseFromByteBuffer(bytes, &response);
                            }));
  calls.back().replicated = replicated;
  calls.back().routed = true;
  calls.back().job_id = request.job_id();
  absl::Status status = connections_->RunCalls(std::move(calls));
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<std::vector<ApplyLog>> PsClient::GetApplyLogs(const std::string& job_id) {
  ApplyLogRequest request;
  request.set_job_id(job_id);
  return AskEveryShard<ApplyLog>(*connections_, num_ps(), "GetApplyLog", /*replicated=*/false,
                                 [&request](int) -> const google::protobuf::Message& {
                                   return request;
                                 });
}

absl::StatusOr<std::vector<Trace>> PsClient::GetTraces(const std::string& job_id,
                                                       bool replicated) {
  TraceRequest request;
  request.set_job_id(job_id);
  // Every shard named, and asked where it moved (MoveShard).
  return AskEveryShard<Trace>(
      *connections_, num_ps(), "GetTrace", replicated,
      [&request, replicated](int ps) -> const google::protobuf::Message& {
        request.set_shard(ps);
        request.set_unreplicated(!replicated);
        return request;
      },
      /*routed_job=*/job_id);
}

absl::StatusOr<std::vector<JobStats>> PsClient::GetJobStats(const std::string& job_id,
                                                            bool replicated) {
  JobStatsRequest request;
  request.set_job_id(job_id);
  // Every shard named, and asked where it moved (MoveShard).
  return AskEveryShard<JobStats>(
      *connections_, num_ps(), "GetJobStats", replicated,
      [&request, replicated](int ps) -> const google::protobuf::Message& {
        request.set_shard(ps);
        request.set_unreplicated(!replicated);
        return request;
      },
      /*routed_job=*/job_id);
}

}  // namespace ps
