#include "common/client/worker_session.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/tensor/finite.h"
#include "common/job/partitioner.h"
#include "common/net/proto_byte_buffer.h"
#include "common/job/shared_memory_rule.h"
#include "common/tensor/tensor_coding.h"

namespace ps {

std::vector<absl::Span<const float>> WorkerSession::Subspans(
    const std::vector<absl::Span<const float>>& spans, int64_t offset, int64_t size) {
  std::vector<absl::Span<const float>> pieces;
  for (absl::Span<const float> span : spans) {
    const int64_t length = static_cast<int64_t>(span.size());
    if (size > 0 && offset < length) {
      const int64_t take = std::min(size, length - offset);
      pieces.push_back(span.subspan(offset, take));
      size -= take;
      offset = 0;
    } else {
      offset -= std::min(offset, length);
    }
  }
  return pieces;
}

absl::StatusOr<std::unique_ptr<WorkerSession>> WorkerSession::Create(PsClient* client,
                                                                     const ParameterSpec& spec,
                                                                     int worker, int incarnation) {
  if (worker < 0 || worker >= spec.num_workers()) {
    return absl::InvalidArgumentError(absl::StrCat("worker ", worker, " is out of range: job \"",
                                                   spec.job_id(), "\" has ", spec.num_workers(),
                                                   " workers"));
  }
  absl::StatusOr<Placement> placement = PlaceVariables(spec, client->num_ps());
  if (!placement.ok()) return placement.status();
  auto session = std::unique_ptr<WorkerSession>(
      new WorkerSession(client->connections(), spec, worker, *std::move(placement)));
  session->incarnation_ = incarnation;
  if (client->options().shared_memory && incarnation != OBSERVER_INCARNATION &&
      WhyNoSharedMemory(spec).empty()) {
    OpenSharedMemoryRequest identity;
    identity.set_job_id(spec.job_id());
    identity.set_worker(worker);
    identity.set_run_id(spec.run_id());
    std::vector<int64_t> shard_floats(client->num_ps());
    for (int ps = 0; ps < client->num_ps(); ++ps) shard_floats[ps] = session->ShardFloats(ps);
    session->links_ = std::make_unique<SharedMemoryLinks>(client->connections(),
                                                          std::move(identity), shard_floats);
  }
  if (client->options().bulk_streams && incarnation != OBSERVER_INCARNATION &&
      spec.replicas() <= 1 && session->MakePullRequest(0, {}).encoding() == FLOAT32) {
    OpenBulkStreamRequest identity;
    identity.set_job_id(spec.job_id());
    identity.set_worker(worker);
    identity.set_run_id(spec.run_id());
    std::vector<int64_t> shard_floats(client->num_ps());
    for (int ps = 0; ps < client->num_ps(); ++ps) shard_floats[ps] = session->ShardFloats(ps);
    session->bulk_ = std::make_unique<BulkLinks>(
        client->connections(), std::move(identity), shard_floats,
        client->options().bulk_min_bytes / static_cast<int64_t>(sizeof(float)),
        client->options().connections_per_ps);
  }
  return session;
}

WorkerSession::WorkerSession(PsConnections* connections, const ParameterSpec& spec, int worker,
                             Placement placement)
    : connections_(connections),
      spec_(spec),
      worker_(worker),
      placement_(std::move(placement)),
      read_versions_(connections->num_ps(), 0) {
  for (const VariableDef& variable : spec_.variables()) {
    int64_t row_size = 1;
    for (int i = 1; i < variable.shape_size(); ++i) row_size *= variable.shape(i);
    variable_row_size_[variable.name()] = row_size;
    variable_elements_[variable.name()] = row_size * variable.shape(0);
  }
  for (const SparseTableDef& table : spec_.sparse_tables()) {
    table_width_[table.name()] = table.width();
  }
  const CompressionSpec& compression = spec_.compression();
  if (compression.topk_fraction() > 0) {
    for (int ps = 0; ps < connections->num_ps(); ++ps) {
      topk_.push_back(std::make_unique<TopKCompressor>(
          ShardFloats(ps), compression.topk_fraction(), compression.encoding()));
    }
  }
}

template <typename Sparse>
absl::StatusOr<std::vector<WorkerSession::ShardSparse>> WorkerSession::SplitSparse(
    const std::vector<Sparse>& tables) const {
  const int num_ps = connections_->num_ps();
  std::vector<ShardSparse> shards(num_ps);
  for (const Sparse& table : tables) {
    auto width = table_width_.find(table.table);
    if (width == table_width_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("no sparse table \"", table.table,
                                                     "\" in job \"", spec_.job_id(), "\""));
    }
    if (table.rows.size() != table.keys.size() * static_cast<size_t>(width->second)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sparse table \"", table.table, "\": ", table.keys.size(), " keys of width ",
          width->second, " need ", table.keys.size() * width->second, " floats, not ",
          table.rows.size()));
    }
    for (ShardSparse& shard : shards) {
      shard.entries.emplace_back();
      shard.entries.back().set_table(table.table);
      shard.positions.emplace_back();
    }
    for (size_t k = 0; k < table.keys.size(); ++k) {
      ShardSparse& shard = shards[SparseShardOf(table.keys[k], num_ps)];
      shard.entries.back().add_keys(table.keys[k]);
      shard.positions.back().push_back(k);
      shard.floats += width->second;
    }
  }
  // Tables with no key on a shard are left out of its request.
  for (ShardSparse& shard : shards) {
    ShardSparse kept;
    kept.floats = shard.floats;
    for (size_t e = 0; e < shard.entries.size(); ++e) {
      if (shard.entries[e].keys().empty()) continue;
      kept.entries.push_back(std::move(shard.entries[e]));
      kept.positions.push_back(std::move(shard.positions[e]));
    }
    shard = std::move(kept);
  }
  return shards;
}

void WorkerSession::ScatterRows(const ShardSparse& shard, absl::Span<const float> staging,
                                const std::vector<SparsePull>& sparse,
                                const absl::flat_hash_map<std::string, int64_t>& widths) {
  size_t at = 0;
  for (size_t e = 0; e < shard.entries.size(); ++e) {
    const std::string& name = shard.entries[e].table();
    const int64_t width = widths.at(name);
    // The caller's table of this name (the first: a table named twice is pulled twice).
    for (const SparsePull& table : sparse) {
      if (table.table != name) continue;
      for (size_t position : shard.positions[e]) {
        std::copy(staging.begin() + at, staging.begin() + at + width,
                  table.rows.begin() + position * width);
        at += width;
      }
      break;
    }
  }
}

template <typename T>
absl::StatusOr<absl::Span<T>> WorkerSession::SliceOf(
    const absl::flat_hash_map<std::string, absl::Span<T>>& variables, const std::string& variable,
    int64_t row_begin, int64_t row_count) const {
  auto it = variables.find(variable);
  if (it == variables.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("variable \"", variable, "\" of job \"", spec_.job_id(), "\" is missing"));
  }
  int64_t expected = variable_elements_.at(variable);
  if (static_cast<int64_t>(it->second.size()) != expected) {
    return absl::InvalidArgumentError(absl::StrCat("variable \"", variable, "\" has ",
                                                   it->second.size(), " values; its shape has ",
                                                   expected));
  }
  int64_t row_size = variable_row_size_.at(variable);
  return it->second.subspan(row_begin * row_size, row_count * row_size);
}

absl::StatusOr<std::vector<absl::Span<float>>> WorkerSession::Destinations(
    const MutableVariables& out, const std::vector<SliceRef>& slices) const {
  std::vector<absl::Span<float>> destinations;
  for (const SliceRef& ref : slices) {
    absl::StatusOr<absl::Span<float>> span =
        SliceOf(out, ref.variable(), ref.row_begin(), ref.row_count());
    if (!span.ok()) return span.status();
    destinations.push_back(*span);
  }
  return destinations;
}

absl::Status WorkerSession::CheckVariables(const MutableVariables& out) const {
  for (const auto& [name, elements] : variable_elements_) {
    absl::StatusOr<absl::Span<float>> whole = SliceOf(out, name, 0, 0);
    if (!whole.ok()) return whole.status();
  }
  return absl::OkStatus();
}

PullRequest WorkerSession::MakePullRequest(int ps, const PullOptions& options) const {
  PullRequest request;
  NameShard(ps, &request);
  request.set_job_id(spec_.job_id());
  request.set_run_id(spec_.run_id());
  request.set_incarnation(incarnation_);
  request.set_worker(worker_);
  request.set_step(options.step);
  request.set_clock(options.clock);
  request.set_wait_timeout_ms(absl::ToInt64Milliseconds(connections_->options().wait_timeout));
  request.set_encoding(spec_.compression().encoding());
  return request;
}

std::vector<SliceRef> WorkerSession::ShardSlices(int ps) const {
  std::vector<SliceRef> refs;
  for (int index : placement_.SlicesOn(ps)) {
    const SlicePlacement& slice = placement_.slices[index];
    SliceRef ref;
    ref.set_variable(slice.variable);
    ref.set_row_begin(slice.row_begin);
    ref.set_row_count(slice.row_count);
    refs.push_back(std::move(ref));
  }
  return refs;
}

bool WorkerSession::TakesPushes(int ps) const {
  return !placement_.SlicesOn(ps).empty() || !spec_.sparse_tables().empty();
}

int64_t WorkerSession::ChunkFloats() const {
  return std::max<int64_t>(1,
                           connections_->options().chunk_bytes / static_cast<int64_t>(sizeof(float)));
}

int64_t WorkerSession::PushChunks(int ps) const {
  if (!topk_.empty()) return 1;  // A top-k push is small, and comes whole.
  const int64_t total = ShardFloats(ps);
  const int64_t chunk_floats = ChunkFloats();
  return total > chunk_floats ? (total + chunk_floats - 1) / chunk_floats : 1;
}

int64_t WorkerSession::ShardFloats(int ps) const {
  int64_t floats = 0;
  for (int index : placement_.SlicesOn(ps)) floats += placement_.slices[index].num_elements();
  return floats;
}

absl::Status WorkerSession::DecodeValues(const grpc::ByteBuffer& bytes,
                                         const std::vector<SliceRef>& expected,
                                         const MutableVariables& out,
                                         PullResponseHeader* header,
                                         absl::Span<float> sparse_staging,
                                         const SharedMemoryLinks::Link* link,
                                         bool in_place, uint64_t bulk_frame) const {
  return DecodeTensorMessage(
      bytes, header,
      [&](const google::protobuf::MessageLite&) -> absl::StatusOr<std::vector<absl::Span<float>>> {
        // The row ranges asked for: chunks decode in parallel into disjoint parts of `out`.
        bool same = header->slices_size() == static_cast<int>(expected.size());
        for (int i = 0; same && i < header->slices_size(); ++i) {
          const SliceRef& got = header->slices(i);
          same = got.variable() == expected[i].variable() &&
                 got.row_begin() == expected[i].row_begin() &&
                 got.row_count() == expected[i].row_count();
        }
        if (!same) return absl::InternalError("the response's slices differ from the request's");
        absl::StatusOr<std::vector<absl::Span<float>>> found = Destinations(out, expected);
        if (!found.ok()) return found.status();
        std::vector<absl::Span<float>> destinations = *std::move(found);
        if (header->in_shared_memory()) {
          if (link == nullptr || !sparse_staging.empty()) {
            return absl::InternalError(
                "the ps answered through shared memory where the pull did not ask it to");
          }
          if (!in_place) SharedMemoryLinks::Scatter(link->pull, destinations);
          return std::vector<absl::Span<float>>();  // The data carries nothing.
        }
        if (header->on_bulk_stream()) {
          if (bulk_frame == 0 || !sparse_staging.empty()) {
            return absl::InternalError(
                "the ps answered on a bulk stream where the pull did not ask it to");
          }
          return std::vector<absl::Span<float>>();  // On the stream, awaited by the caller.
        }
        if (!sparse_staging.empty()) destinations.push_back(sparse_staging);
        return destinations;
      },
      nullptr,
      [](const google::protobuf::MessageLite& decoded) {
        return static_cast<const PullResponseHeader&>(decoded).encoding();
      });
}

void WorkerSession::PullState::LeftInMemory(int ps, const SharedMemoryLinks::Link* link) {
  absl::MutexLock lock(&mu);
  left_in_memory[ps] = link;
}

void WorkerSession::PullState::Record(int ps, const PullResponseHeader& header) {
  absl::MutexLock lock(&mu);
  result.versions[ps] = std::min(result.versions[ps], header.version());
  result.step = std::min(result.step, header.step());
  result.parked = std::max(result.parked, absl::Microseconds(header.parked_us()));
}

WorkerSession::PullState::PullState(int num_ps) : left_in_memory(num_ps, nullptr) {
  result.versions.assign(num_ps, std::numeric_limits<int64_t>::max());
  result.step = std::numeric_limits<int64_t>::max();
}

WorkerSession::PullResult WorkerSession::PullState::Finish() {
  for (int64_t& version : result.versions) {
    if (version == std::numeric_limits<int64_t>::max()) version = 0;  // A shard holding nothing.
  }
  if (result.step == std::numeric_limits<int64_t>::max()) result.step = 0;
  return result;
}

void WorkerSession::AddPullCalls(const PullOptions& options, const MutableVariables& out,
                                 const std::vector<SparsePull>& sparse,
                                 const std::vector<ShardSparse>& shard_sparse, PullState* state,
                                 std::vector<PsConnections::Call>* calls, bool in_place) {
  const PsClientOptions& client_options = connections_->options();
  for (int ps = 0; ps < connections_->num_ps(); ++ps) {
    // Row ranges of at most chunk_bytes (at least one row), packed into requests of up to
    // chunk_bytes each.
    std::vector<PullRequest> requests(1);
    std::vector<int64_t> response_bytes(1, 0);
    const ShardSparse* rows = shard_sparse.empty() ? nullptr : &shard_sparse[ps];
    SharedMemoryLinks::Link* link =
        rows == nullptr || rows->entries.empty() ? LinkFor(ps) : nullptr;
    if (link != nullptr) {
      // One request for the whole shard, answered into the link's pull region.
      PullRequest request = MakePullRequest(ps, options);
      for (const SliceRef& ref : ShardSlices(ps)) *request.add_slices() = ref;
      std::vector<SliceRef> expected(request.slices().begin(), request.slices().end());
      PullRequest through_memory = request;
      through_memory.set_shared_memory(link->segment);
      calls->push_back(PsConnections::Call{
          ps, "Pull",
          links_->FirstThroughMemory(ps, SerializeToByteBuffer(through_memory),
                                     [request] { return SerializeToByteBuffer(request); }),
          [this, expected, ps, &out, state, link, in_place](const grpc::ByteBuffer& bytes) {
            PullResponseHeader header;
            absl::Status status =
                DecodeValues(bytes, expected, out, &header, {}, link, in_place);
            if (!status.ok()) return status;
            if (header.in_shared_memory()) {
              CountPulledThroughMemory(ps);
              if (in_place) state->LeftInMemory(ps, link);
            }
            state->Record(ps, header);
            return status;
          },
          client_options.wait_timeout + client_options.call_timeout, 0});
      continue;
    }
    if (bulk_ != nullptr && (rows == nullptr || rows->entries.empty()) &&
        AddBulkPullCalls(ps, options, out, state, calls).ok()) {
      continue;
    }
    for (int index : placement_.SlicesOn(ps)) {
      const SlicePlacement& slice = placement_.slices[index];
      int64_t row_bytes = slice.row_size * static_cast<int64_t>(sizeof(float));
      int64_t rows_per_chunk = std::max<int64_t>(1, client_options.chunk_bytes / row_bytes);
      for (int64_t row = slice.row_begin; row < slice.row_begin + slice.row_count;
           row += rows_per_chunk) {
        int64_t rows = std::min(rows_per_chunk, slice.row_begin + slice.row_count - row);
        if (response_bytes.back() > 0 &&
            response_bytes.back() + rows * row_bytes > client_options.chunk_bytes) {
          requests.emplace_back();
          response_bytes.push_back(0);
        }
        SliceRef* ref = requests.back().add_slices();
        ref->set_variable(slice.variable);
        ref->set_row_begin(row);
        ref->set_row_count(rows);
        response_bytes.back() += rows * row_bytes;
      }
    }
    // The shard's sparse rows go with its first request.
    for (size_t chunk = 0; chunk < requests.size(); ++chunk) {
      const bool with_rows = chunk == 0 && rows != nullptr && !rows->entries.empty();
      // A shard holding no slice of the job and asked no row (a request without slices
      // reads every slice the shard holds: here none).
      if (requests[chunk].slices().empty() && !with_rows) continue;
      PullRequest request = MakePullRequest(ps, options);
      request.mutable_slices()->Swap(requests[chunk].mutable_slices());
      std::shared_ptr<std::vector<float>> staging;
      if (with_rows) {
        for (const SparseRows& entry : rows->entries) *request.add_sparse() = entry;
        staging = std::make_shared<std::vector<float>>(rows->floats);
      }
      std::vector<SliceRef> expected(request.slices().begin(), request.slices().end());
      calls->push_back(PsConnections::Call{
          ps, "Pull", [request] { return SerializeToByteBuffer(request); },
          [this, expected, ps, &out, state, staging, rows, &sparse](const grpc::ByteBuffer& bytes) {
            PullResponseHeader header;
            absl::Status status =
                DecodeValues(bytes, expected, out, &header,
                             staging ? absl::MakeSpan(*staging) : absl::Span<float>());
            if (!status.ok()) return status;
            if (staging) ScatterRows(*rows, *staging, sparse, table_width_);
            state->Record(ps, header);
            return status;
          },
          client_options.wait_timeout + client_options.call_timeout, static_cast<int>(chunk),
          response_bytes[chunk] + (staging ? static_cast<int64_t>(staging->size() * 4) : 0)});
    }
  }
}

absl::Status WorkerSession::RunCounted(std::vector<PsConnections::Call> calls) {
  for (PsConnections::Call& call : calls) {
    call.replicated = replicated();
    call.routed = true;
    call.job_id = spec_.job_id();
    call.make_request = [this, make = std::move(call.make_request)] {
      grpc::ByteBuffer request = make();
      bytes_sent_.fetch_add(static_cast<int64_t>(request.Length()), std::memory_order_relaxed);
      return request;
    };
    call.on_response = [this, handle = std::move(call.on_response)](
                           const grpc::ByteBuffer& response) {
      bytes_received_.fetch_add(static_cast<int64_t>(response.Length()),
                                std::memory_order_relaxed);
      return handle(response);
    };
  }
  absl::Status status = connections_->RunCalls(std::move(calls));
  if (links_ != nullptr) status.ok() ? links_->DropStale() : links_->DropAll();
  // After a failure a frame may still be expected into `out`: its stream goes. And no push's
  // frame is written from the gradients once this returns.
  if (bulk_ != nullptr) {
    bulk_->FinishSends();
    status.ok() ? bulk_->DropStale() : bulk_->DropExpecting();
  }
  return status;
}

absl::StatusOr<WorkerSession::PullResult> WorkerSession::Pull(
    const PullOptions& options, const MutableVariables& out,
    const std::vector<SparsePull>& sparse) {
  absl::Status status = CheckVariables(out);
  if (!status.ok()) return status;
  absl::StatusOr<std::vector<ShardSparse>> shard_sparse = SplitSparse(sparse);
  if (!shard_sparse.ok()) return shard_sparse.status();
  PullState state(connections_->num_ps());
  std::vector<PsConnections::Call> calls;
  AddPullCalls(options, out, sparse, *shard_sparse, &state, &calls);
  status = RunCounted(std::move(calls));
  if (!status.ok()) return status;
  PullResult result = state.Finish();
  read_versions_ = result.versions;
  return result;
}

void WorkerSession::PushState::Record(int ps, PushResponse response) {
  if (response.outcome() == PushResponse::RECEIVED) return;  // Not the push's outcome.
  absl::MutexLock lock(&mu);
  // A push sent again to a shard's other copy (a failover) is a DUPLICATE there if the first
  // copy's answer had come: the first answer says what happened.
  if (response.outcome() == PushResponse::DUPLICATE && responses[ps].has_value()) return;
  responses[ps] = std::move(response);
}

absl::StatusOr<std::vector<PushResponse>> WorkerSession::PushState::Finish(int64_t push_id) {
  std::vector<PushResponse> result(responses.size());
  for (size_t ps = 0; ps < responses.size(); ++ps) {
    if (!sent[ps]) continue;
    if (!responses[ps].has_value()) {
      return absl::InternalError(absl::StrCat(
          "ps:", ps, ": Push: every chunk of push ", push_id,
          " was answered RECEIVED, none with the push's outcome (a chunk was lost on a retry?)"));
    }
    result[ps] = *std::move(responses[ps]);
  }
  return result;
}

absl::StatusOr<WorkerSession::ShardPush> WorkerSession::MakeShardPush(
    int ps, const PushOptions& options, const ConstVariables& gradients, int64_t push_id,
    const std::vector<SparsePush>& sparse, const ShardSparse& shard_sparse) {
  if (!options.read_versions.empty() &&
      options.read_versions.size() != read_versions_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PushOptions.read_versions has ", options.read_versions.size(),
        " versions but the job is on ", read_versions_.size(),
        " ps shards: give one per shard, or none for the last pull's"));
  }
  ShardPush push;
  push.header.set_job_id(spec_.job_id());
  push.header.set_run_id(spec_.run_id());
  push.header.set_incarnation(incarnation_);
  push.header.set_worker(worker_);
  push.header.set_push_id(push_id);
  NameShard(ps, &push.header);
  push.header.set_read_version(options.read_versions.empty() ? read_versions_[ps]
                                                             : options.read_versions[ps]);
  push.header.set_step(options.step);
  push.header.set_clock(options.clock);
  if (ps == 0) push.header.mutable_batches()->Add(options.batches.begin(), options.batches.end());
  push.header.set_encoding(spec_.compression().encoding());
  for (const SliceRef& ref : ShardSlices(ps)) {
    *push.header.add_slices() = ref;
    absl::StatusOr<absl::Span<const float>> span =
        SliceOf(gradients, ref.variable(), ref.row_begin(), ref.row_count());
    if (!span.ok()) return span.status();
    push.tensors.push_back(*span);
  }
  if (!topk_.empty() && ShardFloats(ps) > 0) {
    absl::StatusOr<TopKCompressor::Compressed> compressed = topk_[ps]->Compress(push.tensors);
    if (!compressed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("top-k compression of the push to ps:", ps, ": ",
                       compressed.status().message()));
    }
    push.header.mutable_topk_index_gaps()->Add(compressed->index_gaps.begin(),
                                               compressed->index_gaps.end());
    push.topk_values = std::make_shared<std::vector<float>>(std::move(compressed->values));
    push.tensors = {*push.topk_values};
  }
  if (!shard_sparse.entries.empty()) {
    push.sparse_rows = std::make_shared<std::vector<float>>();
    push.sparse_rows->reserve(shard_sparse.floats);
    for (size_t e = 0; e < shard_sparse.entries.size(); ++e) {
      const SparseRows& entry = shard_sparse.entries[e];
      *push.header.add_sparse() = entry;
      const int64_t width = table_width_.at(entry.table());
      for (const SparsePush& table : sparse) {
        if (table.table != entry.table()) continue;
        for (size_t position : shard_sparse.positions[e]) {
          const absl::Span<const float> row = table.rows.subspan(position * width, width);
          push.sparse_rows->insert(push.sparse_rows->end(), row.begin(), row.end());
        }
        break;
      }
    }
    push.tensors.push_back(*push.sparse_rows);
  }
  return push;
}

absl::Status WorkerSession::AddPushCalls(const PushOptions& options,
                                         const ConstVariables& gradients, int64_t push_id,
                                         const std::vector<SparsePush>& sparse,
                                         PushState* state,
                                         std::vector<PsConnections::Call>* calls) {
  const int64_t chunk_floats = ChunkFloats();
  absl::StatusOr<std::vector<ShardSparse>> shard_sparse = SplitSparse(sparse);
  if (!shard_sparse.ok()) return shard_sparse.status();
  for (int ps = 0; ps < connections_->num_ps(); ++ps) {
    const ShardSparse& rows = (*shard_sparse)[ps];
    if (!TakesPushes(ps)) continue;
    if (!rows.entries.empty() && PushChunks(ps) > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ps:", ps, "'s dense gradient needs chunks, which carry no sparse rows: push the "
          "sparse rows of a model whose dense part on a shard is over chunk_bytes separately"));
    }
    absl::StatusOr<ShardPush> push =
        MakeShardPush(ps, options, gradients, push_id, sparse, rows);
    if (!push.ok()) return push.status();
    state->sent[ps] = true;
    if (SharedMemoryLinks::Link* link = rows.entries.empty() ? LinkFor(ps) : nullptr) {
      PushThrough(link, &*push);
      auto in_requests = std::make_shared<ShardPush>(*std::move(push));
      grpc::ByteBuffer through_memory = EncodeTensorMessage(in_requests->header, {}, nullptr);
      in_requests->header.clear_shared_memory();
      calls->push_back(PsConnections::Call{
          ps, "Push",
          links_->FirstThroughMemory(ps, std::move(through_memory),
                                     [in_requests] {
                                       // The gradients stay unchanged until Push returns.
                                       return EncodeTensorMessage(in_requests->header,
                                                                  in_requests->tensors, nullptr);
                                     }),
          [state, ps](const grpc::ByteBuffer& bytes) {
            PushResponse response;
            absl::Status status = ParseFromByteBuffer(bytes, &response);
            if (status.ok()) state->Record(ps, std::move(response));
            return status;
          },
          connections_->options().call_timeout, 0});
      continue;
    }
    // A large dense gradient goes on the shard's bulk streams, a chunk on each.
    if (bulk_ != nullptr && rows.entries.empty() && push->topk_values == nullptr &&
        push->header.encoding() == FLOAT32 && AddBulkPushCalls(ps, *push, state, calls)) {
      continue;
    }
    std::shared_ptr<std::vector<float>> sparse_rows = push->sparse_rows;
    std::shared_ptr<std::vector<float>> topk_values = push->topk_values;
    // Large gradients go in chunks over the shard's connections, so that the server decodes
    // one while the next is in transit (see PushRequestHeader.total_chunks).
    const int64_t total = ShardFloats(ps);
    const int64_t num_chunks = PushChunks(ps);
    for (int64_t chunk = 0; chunk < num_chunks; ++chunk) {
      auto header = std::make_shared<PushRequestHeader>(push->header);
      auto pieces = std::make_shared<std::vector<absl::Span<const float>>>(push->tensors);
      if (num_chunks > 1) {
        const int64_t offset = chunk * chunk_floats;
        const int64_t size = std::min(chunk_floats, total - offset);
        header->set_total_chunks(static_cast<int32_t>(num_chunks));
        header->set_chunk_offset(offset);
        header->set_chunk_size(size);
        *pieces = Subspans(push->tensors, offset, size);
      }
      calls->push_back(PsConnections::Call{
          ps, "Push",
          // The gradients stay alive and unchanged until the call returns (Push's contract);
          // the copies (sparse rows, top-k values) live with the call.
          [header, pieces, sparse_rows, topk_values] {
            return EncodeTensorMessage(*header, *pieces, nullptr, header->encoding());
          },
          [state, ps](const grpc::ByteBuffer& bytes) {
            PushResponse response;
            absl::Status status = ParseFromByteBuffer(bytes, &response);
            if (status.ok()) state->Record(ps, std::move(response));
            return status;
          },
          connections_->options().call_timeout, static_cast<int>(chunk)});
    }
  }
  return absl::OkStatus();
}

absl::Status WorkerSession::CheckFinite(const ConstVariables& gradients,
                                        const std::vector<SparsePush>& sparse) const {
  if (spec_.allow_non_finite()) return absl::OkStatus();
  auto check = [](const std::string& what, absl::Span<const float> values) {
    const int64_t at = FirstNonFinite(values);
    if (at < 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        std::isnan(values[at]) ? "NaN" : "Inf", " in the gradient of ", what, " at element ", at,
        "; nothing was sent (the job refuses non-finite gradients; JobSpec.allow_non_finite "
        "accepts them)"));
  };
  for (const VariableDef& def : spec_.variables()) {
    auto gradient = gradients.find(def.name());
    if (gradient == gradients.end()) continue;
    absl::Status status = check(absl::StrCat("variable ", def.name()), gradient->second);
    if (!status.ok()) return status;
  }
  for (const SparsePush& rows : sparse) {
    absl::Status status = check(absl::StrCat("sparse table ", rows.table), rows.rows);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

void WorkerSession::PushThrough(SharedMemoryLinks::Link* link, ShardPush* push) {
  int64_t bytes = 0;
  for (absl::Span<const float> tensor : push->tensors) bytes += tensor.size() * sizeof(float);
  bytes_sent_.fetch_add(bytes, std::memory_order_relaxed);
  shared_memory_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  SharedMemoryLinks::Gather(push->tensors, link->push);
  push->header.set_shared_memory(link->segment);
}

void WorkerSession::CountPulledThroughMemory(int ps) {
  const int64_t bytes = ShardFloats(ps) * static_cast<int64_t>(sizeof(float));
  bytes_received_.fetch_add(bytes, std::memory_order_relaxed);
  shared_memory_bytes_.fetch_add(bytes, std::memory_order_relaxed);
}

absl::StatusOr<std::vector<PushResponse>> WorkerSession::Push(
    const PushOptions& options, const ConstVariables& gradients,
    const std::vector<SparsePush>& sparse) {
  const int64_t push_id = next_push_id_++;
  PushState state(connections_->num_ps());
  std::vector<PsConnections::Call> calls;
  absl::Status status = AddPushCalls(options, gradients, push_id, sparse, &state, &calls);
  if (!status.ok()) return status;
  status = RunCounted(std::move(calls));
  if (!status.ok()) return status;
  return state.Finish(push_id);
}

absl::StatusOr<WorkerSession::PushPullResult> WorkerSession::PushPull(
    const PushOptions& push_options, const ConstVariables& gradients,
    const PullOptions& pull_options, const MutableVariables& out,
    const std::vector<SparsePush>& push_sparse, const std::vector<SparsePull>& pull_sparse) {
  absl::Status status = CheckVariables(out);
  if (!status.ok()) return status;
  bool small = true;
  for (int ps = 0; ps < connections_->num_ps(); ++ps) small = small && PushChunks(ps) == 1;
  PushPullResult result;
  // Chunks, which PushPull does not take, or sparse rows (whose keys need not fall on the same
  // shards for the push and the pull): two round trips.
  if (!small || !push_sparse.empty() || !pull_sparse.empty()) {
    absl::StatusOr<std::vector<PushResponse>> pushed = Push(push_options, gradients, push_sparse);
    if (!pushed.ok()) return pushed.status();
    absl::StatusOr<PullResult> pulled = Pull(pull_options, out, pull_sparse);
    if (!pulled.ok()) return pulled.status();
    result.pushed = *std::move(pushed);
    result.pulled = *std::move(pulled);
    return result;
  }
  const int64_t push_id = next_push_id_++;
  PushState push_state(connections_->num_ps());
  PullState pull_state(connections_->num_ps());
  std::vector<PsConnections::Call> calls;
  for (int ps = 0; ps < connections_->num_ps(); ++ps) {
    if (!TakesPushes(ps)) continue;
    absl::StatusOr<ShardPush> push =
        MakeShardPush(ps, push_options, gradients, push_id, {}, ShardSparse());
    if (!push.ok()) return push.status();
    push_state.sent[ps] = true;
    *push->header.mutable_then_pull() = MakePullRequest(ps, pull_options);
    SharedMemoryLinks::Link* link = LinkFor(ps);
    grpc::ByteBuffer through_memory;
    if (link != nullptr) {
      PushThrough(link, &*push);
      push->header.mutable_then_pull()->set_shared_memory(link->segment);
      through_memory = EncodeTensorMessage(push->header, {}, nullptr);
      push->header.clear_shared_memory();
      push->header.mutable_then_pull()->clear_shared_memory();
    }
    auto shared = std::make_shared<ShardPush>(*std::move(push));
    std::vector<SliceRef> expected = ShardSlices(ps);
    std::function<grpc::ByteBuffer()> in_requests = [shared] {
      return EncodeTensorMessage(shared->header, shared->tensors, nullptr,
                                 shared->header.encoding());
    };
    // Where no shared memory serves, the pull's values may come on the shard's first bulk
    // stream (a PushPull is one call: one stream).
    BulkLink* bulk = link == nullptr && bulk_ != nullptr ? BulkFor(ps, 0) : nullptr;
    auto frame = std::make_shared<uint64_t>(0);  // The attempt's, set by its request.
    const int64_t pulled_bytes = ShardFloats(ps) * static_cast<int64_t>(sizeof(float));
    std::function<grpc::ByteBuffer()> make_request;
    if (link != nullptr) {
      make_request =
          links_->FirstThroughMemory(ps, std::move(through_memory), std::move(in_requests));
    } else if (bulk != nullptr) {
      absl::StatusOr<std::vector<absl::Span<float>>> destinations = Destinations(out, expected);
      if (!destinations.ok()) return destinations.status();
      make_request = bulk_->FirstOnStream(
          ps, 0, bulk,
          [shared](uint64_t stream, uint64_t frame) {
            PushRequestHeader header = shared->header;
            header.mutable_then_pull()->set_bulk_stream(stream);
            header.mutable_then_pull()->set_bulk_frame(frame);
            return EncodeTensorMessage(header, shared->tensors, nullptr, header.encoding());
          },
          *std::move(destinations), frame);
    } else {
      make_request = std::move(in_requests);
    }
    calls.push_back(PsConnections::Call{
        ps, "PushPull", std::move(make_request),
        [this, expected, ps, &out, &push_state, &pull_state, link, bulk, frame,
         pulled_bytes](const grpc::ByteBuffer& bytes) {
          PullResponseHeader header;
          absl::Status status =
              DecodeValues(bytes, expected, out, &header, {}, link, false, *frame);
          if (!status.ok()) return status;
          // The push's outcome is this first answer's, whatever becomes of the values: made
          // again, the push is a DUPLICATE.
          push_state.Record(ps, header.push());
          if (bulk != nullptr) {
            status = TakeBulkValues(bulk, *frame, header, pulled_bytes);
            if (!status.ok()) return status;  // UNAVAILABLE: made again, in the answer.
          }
          if (header.in_shared_memory()) CountPulledThroughMemory(ps);
          pull_state.Record(ps, header);
          return absl::OkStatus();
        },
        connections_->options().wait_timeout + connections_->options().call_timeout, 0});
  }
  status = RunCounted(std::move(calls));
  if (!status.ok()) return status;
  absl::StatusOr<std::vector<PushResponse>> pushed = push_state.Finish(push_id);
  if (!pushed.ok()) return pushed.status();
  result.pushed = *std::move(pushed);
  result.pulled = pull_state.Finish();
  read_versions_ = result.pulled.versions;
  return result;
}

absl::Status PullCurrentValues(PsClient* client, const ParameterSpec& spec,
                               const MutableVariables& values) {
  absl::StatusOr<std::unique_ptr<WorkerSession>> session =
      WorkerSession::Create(client, spec, 0, OBSERVER_INCARNATION);
  if (!session.ok()) return session.status();
  WorkerSession::PullOptions pull;
  pull.step = 0;  // Never waits: every mode answers at once for step and clock 0.
  return (*session)->Pull(pull, values).status();
}

}  // namespace ps
