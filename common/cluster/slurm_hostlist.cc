#include "common/cluster/slurm_hostlist.h"

#include <cstdint>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace ps {
namespace {

// Numbers longer than this are refused (they would not fit in 64 bits).
constexpr size_t kMaxDigits = 18;

struct Range {
  uint64_t low = 0;
  uint64_t high = 0;
  size_t width = 0;  // Zero-padded to the first number's digits, as Slurm does.
};

// One bracket group of a name, with the literal text before it.
struct Group {
  std::string prefix;
  std::vector<Range> ranges;
};

absl::Status ListError(absl::string_view what, absl::string_view list, size_t position,
                       absl::string_view fix = "") {
  return absl::InvalidArgumentError(absl::StrCat("\"", list, "\": ", what, " at character ",
                                                 position + 1, fix.empty() ? "" : "; ", fix));
}

bool AllDigits(absl::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  return true;
}

// The value of `digits`, which AllDigits accepted and has at most kMaxDigits digits.
uint64_t DigitsValue(absl::string_view digits) {
  uint64_t value = 0;
  for (char c : digits) value = value * 10 + static_cast<uint64_t>(c - '0');
  return value;
}

// The value of the decimal `field`, which starts at `position` in `list`; `what` names it.
absl::StatusOr<uint64_t> ParseNumber(absl::string_view field, absl::string_view list,
                                     size_t position, absl::string_view what) {
  if (!AllDigits(field)) {
    return ListError(absl::StrCat(what, " \"", field, "\" is not a number"), list, position);
  }
  if (field.size() > kMaxDigits) {
    return ListError(absl::StrCat("number \"", field, "\" has more than ", kMaxDigits, " digits"),
                     list, position);
  }
  return DigitsValue(field);
}

// Parses a bracket group's contents, `body`, which starts at `position` in `list`.
absl::StatusOr<std::vector<Range>> ParseRanges(absl::string_view body, absl::string_view list,
                                               size_t position) {
  std::vector<Range> ranges;
  size_t start = 0;
  while (true) {
    size_t end = body.find(',', start);
    if (end == absl::string_view::npos) end = body.size();
    absl::string_view range_text = body.substr(start, end - start);
    size_t range_position = position + start;
    if (range_text.empty()) {
      return ListError("empty range", list, range_position,
                       "a bracket holds numbers and ranges such as [1-4,7]");
    }
    size_t dash = range_text.find('-');
    absl::string_view low_text = range_text.substr(0, dash);
    absl::string_view high_text =
        dash == absl::string_view::npos ? low_text : range_text.substr(dash + 1);
    if (!AllDigits(low_text) || !AllDigits(high_text)) {
      return ListError(absl::StrCat("range \"", range_text, "\" is not N or N-M"), list,
                       range_position, "write decimal numbers such as [1-4] or [07]");
    }
    absl::StatusOr<uint64_t> low = ParseNumber(low_text, list, range_position, "range");
    if (!low.ok()) return low.status();
    absl::StatusOr<uint64_t> high = ParseNumber(high_text, list, range_position, "range");
    if (!high.ok()) return high.status();
    if (*low > *high) {
      return ListError(absl::StrCat("reversed range \"", range_text, "\""), list, range_position,
                       "write the smaller number first");
    }
    ranges.push_back(Range{*low, *high, low_text.size()});
    if (end == body.size()) return ranges;
    start = end + 1;
  }
}

// How many hosts `groups` expand to, or nullopt when more than kMaxSlurmHosts.
std::optional<uint64_t> CountHosts(const std::vector<Group>& groups) {
  uint64_t product = 1;
  for (const Group& group : groups) {
    uint64_t size = 0;
    for (const Range& range : group.ranges) {
      size += range.high - range.low + 1;  // At most 10^18 each: checked before the next add.
      if (size > kMaxSlurmHosts) return std::nullopt;
    }
    product *= size;  // Both factors are at most kMaxSlurmHosts.
    if (product > kMaxSlurmHosts) return std::nullopt;
  }
  return product;
}

std::string Padded(uint64_t value, size_t width) {
  std::string digits = absl::StrCat(value);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

// Slurm's order of a name's groups, slowest first: it peels groups off from the right, so the
// last group varies fastest, and before it the first, the second, ..., the one before the last
// slowest. For one or two groups this is plain left-to-right order.
std::vector<size_t> ExpansionOrder(size_t num_groups) {
  std::vector<size_t> order;
  for (size_t g = num_groups - 1; g-- > 0;) order.push_back(g);
  order.push_back(num_groups - 1);
  return order;
}

// Appends every name of `groups` to `hosts`, choosing the value of groups[order[depth]] and
// those after it; `values` holds each group's chosen value, zero-padded.
void Expand(const std::vector<Group>& groups, const std::vector<size_t>& order, size_t depth,
            std::vector<std::string>& values, std::vector<std::string>& hosts) {
  if (depth == order.size()) {
    std::string host;
    for (size_t g = 0; g < groups.size(); ++g) absl::StrAppend(&host, groups[g].prefix, values[g]);
    hosts.push_back(std::move(host));
    return;
  }
  const size_t g = order[depth];
  for (const Range& range : groups[g].ranges) {
    for (uint64_t value = range.low;; ++value) {
      values[g] = Padded(value, range.width);
      Expand(groups, order, depth + 1, values, hosts);
      if (value == range.high) break;
    }
  }
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandSlurmHostlist(absl::string_view hostlist) {
  if (hostlist.empty()) {
    return absl::InvalidArgumentError(
        "the host list is empty; Slurm writes names such as \"n[01-04],gpu7\"");
  }
  for (size_t i = 0; i < hostlist.size(); ++i) {
    if (absl::ascii_isspace(hostlist[i])) {
      return ListError("whitespace", hostlist, i, "separate names with commas only");
    }
  }
  std::vector<std::string> hosts;
  uint64_t total = 0;
  size_t i = 0;
  while (true) {
    const size_t name_start = i;
    std::vector<Group> groups;
    std::string literal;
    size_t literal_start = i;
    while (i < hostlist.size() && hostlist[i] != ',') {
      const char c = hostlist[i];
      if (c == ']') return ListError("']' without a '['", hostlist, i);
      if (c != '[') {
        if (literal.empty()) literal_start = i;
        literal += c;
        ++i;
        continue;
      }
      size_t close = hostlist.find_first_of("[]", i + 1);
      if (close == absl::string_view::npos) {
        return ListError("'[' is never closed", hostlist, i, "add the ']'");
      }
      if (hostlist[close] == '[') {
        return ListError("'[' inside brackets", hostlist, close, "brackets do not nest");
      }
      absl::StatusOr<std::vector<Range>> ranges =
          ParseRanges(hostlist.substr(i + 1, close - i - 1), hostlist, i + 1);
      if (!ranges.ok()) return ranges.status();
      groups.push_back(Group{std::move(literal), *std::move(ranges)});
      literal.clear();
      i = close + 1;
    }
    if (i == name_start) {
      return ListError("empty host name", hostlist,
                       name_start < hostlist.size() ? name_start : name_start - 1,
                       "remove the extra comma");
    }
    if (!groups.empty() && !literal.empty()) {
      return ListError(absl::StrCat("text \"", literal, "\" after the last bracket group"),
                       hostlist, literal_start, "Slurm's host lists end a name with its last ']'");
    }
    // Counted before anything is allocated.
    std::optional<uint64_t> count = groups.empty() ? 1 : CountHosts(groups);
    if (!count.has_value() || total + *count > kMaxSlurmHosts) {
      return ListError(absl::StrCat("more than ", kMaxSlurmHosts, " hosts"), hostlist, name_start);
    }
    total += *count;
    if (groups.empty()) {
      hosts.push_back(std::move(literal));
    } else {
      std::vector<std::string> values(groups.size());
      Expand(groups, ExpansionOrder(groups.size()), 0, values, hosts);
    }
    if (i == hostlist.size()) return hosts;
    ++i;  // The comma.
    if (i == hostlist.size()) {
      return ListError("empty host name", hostlist, i - 1, "remove the extra comma");
    }
  }
}

absl::StatusOr<std::vector<int>> ExpandSlurmTasksPerNode(absl::string_view tasks_per_node) {
  if (tasks_per_node.empty()) {
    return absl::InvalidArgumentError(
        "the task counts are empty; Slurm writes counts such as \"2(x3),1\"");
  }
  std::vector<int> counts;
  uint64_t total_tasks = 0;
  size_t start = 0;
  while (true) {
    size_t end = tasks_per_node.find(',', start);
    if (end == absl::string_view::npos) end = tasks_per_node.size();
    absl::string_view item = tasks_per_node.substr(start, end - start);
    if (item.empty()) {
      return ListError("empty task count", tasks_per_node,
                       start < tasks_per_node.size() ? start : start - 1, "remove the extra comma");
    }
    absl::string_view count_text = item;
    absl::string_view repeat_text = "1";
    size_t open = item.find('(');
    if (open != absl::string_view::npos) {
      if (item.size() < open + 4 || item.substr(open, 2) != "(x" || item.back() != ')') {
        return ListError(absl::StrCat("task count \"", item, "\" is not N or N(xR)"),
                         tasks_per_node, start, "for example 2(x3) for three nodes of 2 tasks");
      }
      count_text = item.substr(0, open);
      repeat_text = item.substr(open + 2, item.size() - open - 3);
    }
    absl::StatusOr<uint64_t> count = ParseNumber(count_text, tasks_per_node, start, "task count");
    if (!count.ok()) return count.status();
    absl::StatusOr<uint64_t> repeat =
        ParseNumber(repeat_text, tasks_per_node,
                    open == absl::string_view::npos ? start : start + open + 2, "repetition");
    if (!repeat.ok()) return repeat.status();
    if (*count == 0 || *repeat == 0) {
      return ListError(
          absl::StrCat("\"", item, "\" has zero ", *count == 0 ? "tasks" : "repetitions"),
          tasks_per_node, start, "every node runs at least one task");
    }
    // In this order, no product overflows: both factors are at most kMaxSlurmHosts.
    if (*count > kMaxSlurmHosts || *repeat > kMaxSlurmHosts - counts.size() ||
        *count * *repeat > kMaxSlurmHosts - total_tasks) {
      return ListError(absl::StrCat("more than ", kMaxSlurmHosts, " nodes or tasks"),
                       tasks_per_node, start);
    }
    total_tasks += *count * *repeat;
    counts.insert(counts.end(), *repeat, static_cast<int>(*count));
    if (end == tasks_per_node.size()) return counts;
    start = end + 1;
  }
}

}  // namespace ps
