// "Did you mean": the name a mistyped word was most likely meant to be, for the messages that
// refuse a job field, an enum value, a flag or a command.
#ifndef PS_COMMON_DID_YOU_MEAN_H_
#define PS_COMMON_DID_YOU_MEAN_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace ps {

// The name among `names` closest to `word` by edit distance (letters inserted, deleted or
// replaced, or two neighbours swapped, each one edit; case ignored), when it is close enough to
// be a typo of it: at most 1 edit for a word of up to 4 letters, 2 up to 8, 3 beyond. Ties go to
// the earlier name. "" when none is that close.
std::string ClosestName(absl::string_view word, const std::vector<std::string>& names);

// ` (did you mean "steps"?)`, with `prefix` before the name (`--` for a flag), for ClosestName's
// name; "" when none is close.
std::string DidYouMean(absl::string_view word, const std::vector<std::string>& names,
                       absl::string_view prefix = "");

}  // namespace ps

#endif  // PS_COMMON_DID_YOU_MEAN_H_
