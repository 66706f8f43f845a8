// WorkerSession's pulls and pushes without the worker's copies through shared memory
// (docs/shared_memory.md step 4): values left in the pull region (PullInPlace), gradients
// computed in the push region (PushRegions).
#include <algorithm>
#include <string>
#include <vector>

#include "common/client/worker_session.h"

namespace ps {

absl::StatusOr<WorkerSession::PullResult> WorkerSession::PullInPlace(const PullOptions& options,
                                                                     const MutableVariables& out,
                                                                     ConstVariables* views) {
  absl::Status status = CheckVariables(out);
  if (!status.ok()) return status;
  PullState state(connections_->num_ps());
  std::vector<PsConnections::Call> calls;
  AddPullCalls(options, out, {}, {}, &state, &calls, /*in_place=*/true);
  status = RunCounted(std::move(calls));
  if (!status.ok()) return status;
  status = ViewsAfterPull(state, out, views);
  if (!status.ok()) return status;
  PullResult result = state.Finish();
  read_versions_ = result.versions;
  return result;
}

absl::flat_hash_map<std::string, std::vector<WorkerSession::RegionPiece>> WorkerSession::PiecesIn(
    const std::vector<const SharedMemoryLinks::Link*>& links, bool push) const {
  absl::flat_hash_map<std::string, std::vector<RegionPiece>> pieces;
  for (int ps = 0; ps < static_cast<int>(links.size()); ++ps) {
    if (links[ps] == nullptr) continue;
    const absl::Span<float> region = push ? links[ps]->push : links[ps]->pull;
    int64_t offset = 0;  // A region holds the shard's slices one after another.
    for (const SliceRef& ref : ShardSlices(ps)) {
      const int64_t floats = ref.row_count() * variable_row_size_.at(ref.variable());
      pieces[ref.variable()].push_back({ref.row_begin(), region.subspan(offset, floats)});
      offset += floats;
    }
  }
  for (auto& [name, parts] : pieces) {
    std::sort(parts.begin(), parts.end(),
              [](const RegionPiece& a, const RegionPiece& b) { return a.row_begin < b.row_begin; });
  }
  return pieces;
}

absl::Span<float> WorkerSession::OnePiece(const std::string& variable,
                                          const std::vector<RegionPiece>& parts) const {
  // Each part right after the one before, in the region and in the rows.
  const int64_t row_size = variable_row_size_.at(variable);
  int64_t floats = 0;
  for (const RegionPiece& part : parts) {
    if (part.row_begin * row_size != floats ||
        part.values.data() != parts.front().values.data() + floats) {
      return {};
    }
    floats += static_cast<int64_t>(part.values.size());
  }
  if (floats != variable_elements_.at(variable)) return {};
  return absl::MakeSpan(parts.front().values.data(), floats);
}

absl::Status WorkerSession::ViewsAfterPull(const PullState& state, const MutableVariables& out,
                                           ConstVariables* views) const {
  const absl::flat_hash_map<std::string, std::vector<RegionPiece>> pieces =
      PiecesIn(state.left_in_memory, /*push=*/false);
  views->clear();
  for (const auto& [name, destination] : out) {
    auto it = pieces.find(name);
    if (it == pieces.end()) {  // Came in the requests: in `out` already.
      (*views)[name] = destination;
      continue;
    }
    if (absl::Span<float> whole = OnePiece(name, it->second); !whole.empty()) {
      (*views)[name] = whole;
      continue;
    }
    // Split over shards (or over the region and the requests): its pieces are copied into
    // `out`, where the others are.
    const int64_t row_size = variable_row_size_.at(name);
    for (const RegionPiece& part : it->second) {
      absl::StatusOr<absl::Span<float>> to = SliceOf(
          out, name, part.row_begin, static_cast<int64_t>(part.values.size()) / row_size);
      if (!to.ok()) return to.status();
      std::copy(part.values.begin(), part.values.end(), to->begin());
    }
    (*views)[name] = destination;
  }
  return absl::OkStatus();
}

MutableVariables WorkerSession::PushRegions() {
  std::vector<const SharedMemoryLinks::Link*> links(connections_->num_ps(), nullptr);
  if (links_ == nullptr || !table_width_.empty() || spec_.compression().topk_fraction() > 0) {
    return {};  // Sparse rows and top-k pushes go in the requests.
  }
  links_->KeepDroppedMappings();  // Spans handed out before stay readable until now.
  for (int ps = 0; ps < connections_->num_ps(); ++ps) links[ps] = LinkFor(ps);
  MutableVariables regions;
  for (const auto& [name, parts] : PiecesIn(links, /*push=*/true)) {
    if (absl::Span<float> whole = OnePiece(name, parts); !whole.empty()) regions[name] = whole;
  }
  return regions;
}

}  // namespace ps
