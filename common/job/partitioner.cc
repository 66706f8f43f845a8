#include "common/job/partitioner.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/random.h"

namespace ps {
namespace {

constexpr int64_t kBytesPerElement = static_cast<int64_t>(sizeof(float));

// The largest element count whose byte size still fits in an int64_t.
constexpr int64_t kMaxElements = std::numeric_limits<int64_t>::max() / kBytesPerElement;

// Checks `variable` (at `index`) and sets *rows and *row_size from its shape.
absl::Status CheckShape(const VariableDef& variable, int index, int64_t* rows, int64_t* row_size) {
  std::string who = absl::StrCat("variable \"", variable.name(), "\" (index ", index, ")");
  if (variable.shape_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, " has no shape; give it at least one dimension, such as [rows]"));
  }
  int64_t elements = 1;
  for (int d = 0; d < variable.shape_size(); ++d) {
    int64_t dim = variable.shape(d);
    if (dim <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(who, ": dimension ", d, " is ", dim,
                                                     "; every dimension must be at least 1"));
    }
    if (elements > kMaxElements / dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          who, " is too large: its size in bytes overflows a 64-bit integer; shrink its shape"));
    }
    elements *= dim;
    if (d == 0) *rows = dim;
  }
  *row_size = elements / *rows;
  return absl::OkStatus();
}

// The number of slices for a variable of `rows` rows of `row_bytes` bytes each: as many as
// possible, up to `num_ps`, such that even the smallest slice has at least `min_slice_bytes`;
// one when the whole variable is smaller than that.
int64_t NumSlices(int64_t rows, int64_t row_bytes, int64_t min_slice_bytes, int num_ps) {
  // The fewest rows that make a slice of min_slice_bytes. With n = rows / min_rows slices of
  // rows / n or rows / n + 1 rows each, every slice has at least min_rows rows.
  int64_t min_rows = min_slice_bytes / row_bytes + (min_slice_bytes % row_bytes != 0 ? 1 : 0);
  int64_t n = std::max<int64_t>(1, rows / min_rows);
  return std::min<int64_t>(n, num_ps);
}

}  // namespace

std::vector<int> Placement::SlicesOn(int ps_task) const {
  std::vector<int> result;
  for (int i = 0; i < static_cast<int>(slices.size()); ++i) {
    if (slices[i].ps_task == ps_task) result.push_back(i);
  }
  return result;
}

int64_t Placement::BytesOn(int ps_task) const {
  int64_t bytes = 0;
  for (const SlicePlacement& slice : slices) {
    if (slice.ps_task == ps_task) bytes += slice.num_bytes();
  }
  return bytes;
}

absl::StatusOr<Placement> PlaceVariables(const ParameterSpec& spec, int num_ps) {
  if (num_ps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_ps is ", num_ps, "; a job needs at least one ps task"));
  }
  int64_t min_slice_bytes = spec.min_slice_bytes();
  if (min_slice_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_slice_bytes is ", min_slice_bytes,
        "; use a positive byte count, or 0 for the default (", kDefaultMinSliceBytes, ")"));
  }
  if (min_slice_bytes == 0) min_slice_bytes = kDefaultMinSliceBytes;

  Placement placement;
  placement.num_ps = num_ps;
  absl::flat_hash_map<std::string, int> index_of_name;
  int64_t total_bytes = 0;
  for (int v = 0; v < spec.variables_size(); ++v) {
    const VariableDef& variable = spec.variables(v);
    if (variable.name().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable at index ", v, " has an empty name; give every variable a unique name"));
    }
    auto [it, inserted] = index_of_name.emplace(variable.name(), v);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable \"", variable.name(), "\" (index ", v,
                       ") repeats the name of the variable at index ", it->second,
                       "; variable names must be unique"));
    }
    int64_t rows = 0;
    int64_t row_size = 0;
    absl::Status status = CheckShape(variable, v, &rows, &row_size);
    if (!status.ok()) return status;
    int64_t bytes = rows * row_size * kBytesPerElement;
    if (total_bytes > std::numeric_limits<int64_t>::max() - bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable \"", variable.name(), "\" (index ", v,
                       ") brings the total size in bytes past a 64-bit integer; use fewer or "
                       "smaller variables"));
    }
    total_bytes += bytes;

    int64_t n = NumSlices(rows, row_size * kBytesPerElement, min_slice_bytes, num_ps);
    int64_t row_begin = 0;
    for (int64_t s = 0; s < n; ++s) {
      SlicePlacement slice;
      slice.variable_index = v;
      slice.variable = variable.name();
      slice.row_begin = row_begin;
      slice.row_count = rows / n + (s < rows % n ? 1 : 0);
      slice.row_size = row_size;
      placement.slices.push_back(std::move(slice));
      row_begin += placement.slices.back().row_count;
    }
  }

  // Largest slice first; equal sizes in (variable_index, row_begin) order, which is the
  // order of `slices`, so a stable sort by size alone is deterministic.
  std::vector<int> order(placement.slices.size());
  for (int i = 0; i < static_cast<int>(order.size()); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&placement](int a, int b) {
    return placement.slices[a].num_bytes() > placement.slices[b].num_bytes();
  });

  // (bytes so far, ps task): the top is the least loaded task, the lower index on ties.
  using Load = std::pair<int64_t, int>;
  std::priority_queue<Load, std::vector<Load>, std::greater<Load>> loads;
  for (int p = 0; p < num_ps; ++p) loads.push({0, p});
  for (int i : order) {
    Load least = loads.top();
    loads.pop();
    SlicePlacement& slice = placement.slices[i];
    slice.ps_task = least.second;
    loads.push({least.first + slice.num_bytes(), least.second});
  }
  return placement;
}

int SparseShardOf(uint64_t key, int num_ps) {
  return static_cast<int>(Mix64(key) % static_cast<uint64_t>(num_ps));
}

}  // namespace ps
