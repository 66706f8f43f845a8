#include "common/cluster/environment.h"

extern char** environ;  // POSIX: the process's environment.

namespace ps {

Environment ProcessEnvironment() {
  Environment environment;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    absl::string_view text = *entry;
    size_t equals = text.find('=');
    if (equals == absl::string_view::npos) continue;
    environment.emplace(text.substr(0, equals), text.substr(equals + 1));
  }
  return environment;
}

const std::string* FindVariable(const Environment& environment, absl::string_view name) {
  auto it = environment.find(name);
  return it == environment.end() ? nullptr : &it->second;
}

}  // namespace ps
