#include "common/did_you_mean.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace ps {
namespace {

// Optimal string alignment distance (Damerau-Levenshtein without edits of a swapped pair).
int EditDistance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

}  // namespace

std::string ClosestName(absl::string_view word, const std::vector<std::string>& names) {
  const std::string typed = absl::AsciiStrToLower(word);
  const int allowed = typed.size() <= 4 ? 1 : typed.size() <= 8 ? 2 : 3;
  std::string best;
  int best_distance = allowed + 1;
  for (const std::string& name : names) {
    const int distance = EditDistance(typed, absl::AsciiStrToLower(name));
    if (distance < best_distance) {
      best = name;
      best_distance = distance;
    }
  }
  return best;
}

std::string DidYouMean(absl::string_view word, const std::vector<std::string>& names,
                       absl::string_view prefix) {
  const std::string closest = ClosestName(word, names);
  return closest.empty() ? "" : absl::StrCat(" (did you mean \"", prefix, closest, "\"?)");
}

}  // namespace ps
