// "12 MiB": a byte count for messages, rounded up to whole MiB.
#ifndef PS_SERVER_MIB_TEXT_H_
#define PS_SERVER_MIB_TEXT_H_

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace ps {

inline std::string MibText(int64_t bytes) {
  return absl::StrCat((bytes + (1 << 20) - 1) >> 20, " MiB");
}

}  // namespace ps

#endif  // PS_SERVER_MIB_TEXT_H_
