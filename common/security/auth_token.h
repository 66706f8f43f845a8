// Bearer tokens (docs/ARCHITECTURE.md section 7), with or without TLS:
//   --auth_token_file   the cluster's token. Tasks present it; servers require it (or the
//                       admin token) on every call.
//   --admin_token_file  the users' token. psctl presents it; servers take it as a user's
//                       identity ("admin token"), allowed to start, stop and delete jobs.
// PS_AUTH_TOKEN and PS_ADMIN_TOKEN in the environment stand for the files. A token is never
// taken from the command line, never logged, and compared in constant time. A call without
// the right token is refused with UNAUTHENTICATED saying what to set.
#ifndef PS_COMMON_SECURITY_AUTH_TOKEN_H_
#define PS_COMMON_SECURITY_AUTH_TOKEN_H_

#include <grpcpp/support/client_interceptor.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ps {

struct AuthTokens {
  std::string task;   // The cluster's token.
  std::string admin;  // The users' token.
  bool any() const { return !task.empty() || !admin.empty(); }
};

// The tokens from the files (or, when a file is not given, the environment variables). A token
// is the file's text without surrounding whitespace, at least 16 characters.
// INVALID_ARGUMENT naming the flag (never the content) when a file cannot be read or its token
// is too short.
absl::StatusOr<AuthTokens> ReadAuthTokens(const std::string& task_file,
                                          const std::string& admin_file);

// The files a cluster directory keeps its tokens in (psctl local's `<results>.cluster/`, and
// `psctl certs`'s directory): readable by their owner only.
inline constexpr char kClusterTokenFile[] = "cluster.token";
inline constexpr char kAdminTokenFile[] = "admin.token";

// Writes `token` (and a newline) to `path`, readable and writable by this user only, from its
// creation on.
absl::Status WriteTokenFile(const std::string& path, const std::string& token);

// Makes a new cluster token and admin token (32 random bytes each, hex) and writes them to
// `dir`/kClusterTokenFile and `dir`/kAdminTokenFile, mode 0600, replacing older ones.
absl::StatusOr<AuthTokens> WriteNewAuthTokens(const std::string& dir);

// The admin token file in the directory of `cluster_spec_path` (a ClusterSpec file), when there
// is one; else "".
std::string AdminTokenBeside(const std::string& cluster_spec_path);

// What this process checks as a server and presents as a client, set once from its flags.
void SetProcessAuthTokens(const AuthTokens& tokens);
const AuthTokens& ProcessAuthTokens();

// Whether `a` equals `b`, in time that depends only on their lengths.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// Interceptors that add "authorization: Bearer <token>" to every call of a channel; none when
// `token` is empty.
std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
BearerTokenInterceptors(const std::string& token);

// The token a client of this process presents: the admin token when it has one (psctl), else
// the cluster's (a task).
std::string PresentedToken(const AuthTokens& tokens);

}  // namespace ps

#endif  // PS_COMMON_SECURITY_AUTH_TOKEN_H_
