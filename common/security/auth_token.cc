#include "common/security/auth_token.h"

#include <fcntl.h>
#include <grpcpp/support/interceptor.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ps {
namespace {

constexpr size_t kMinTokenLength = 16;

absl::StatusOr<std::string> ReadToken(const std::string& file, const char* flag,
                                      const char* variable) {
  std::string text;
  std::string source;
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) {
      return absl::InvalidArgumentError(absl::StrCat(flag, "=", file, ": cannot read it"));
    }
    std::stringstream buffer;
    buffer << in.rdbuf();
    text = buffer.str();
    source = absl::StrCat(flag, "=", file);
  } else if (const char* value = std::getenv(variable)) {
    text = value;
    source = variable;
  }
  std::string token(absl::StripAsciiWhitespace(text));
  if (!source.empty() && token.size() < kMinTokenLength) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": the token is shorter than ", kMinTokenLength,
                     " characters; make one with `head -c 32 /dev/urandom | base64`"));
  }
  return token;
}

// 32 random bytes from the kernel, as 64 hex digits.
std::string NewToken() {
  std::random_device random;  // /dev/urandom.
  std::string token;
  for (int i = 0; i < 8; ++i) {
    absl::StrAppend(&token, absl::Hex(static_cast<uint32_t>(random()), absl::kZeroPad8));
  }
  return token;
}

}  // namespace

absl::Status WriteTokenFile(const std::string& path, const std::string& token) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  const std::string text = token + "\n";
  const bool written = fchmod(fd, 0600) == 0 &&
                       write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const bool closed = close(fd) == 0;
  if (!written || !closed) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

namespace {

class BearerToken : public grpc::experimental::Interceptor {
 public:
  explicit BearerToken(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* const header_;
};

class BearerTokenFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenFactory(const std::string& token) : header_("Bearer " + token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new BearerToken(&header_);
  }

 private:
  const std::string header_;
};

AuthTokens& Tokens() {
  static auto* tokens = new AuthTokens;
  return *tokens;
}

}  // namespace

absl::StatusOr<AuthTokens> ReadAuthTokens(const std::string& task_file,
                                          const std::string& admin_file) {
  AuthTokens tokens;
  absl::StatusOr<std::string> task = ReadToken(task_file, "--auth_token_file", "PS_AUTH_TOKEN");
  if (!task.ok()) return task.status();
  absl::StatusOr<std::string> admin = ReadToken(admin_file, "--admin_token_file", "PS_ADMIN_TOKEN");
  if (!admin.ok()) return admin.status();
  tokens.task = *std::move(task);
  tokens.admin = *std::move(admin);
  return tokens;
}

void SetProcessAuthTokens(const AuthTokens& tokens) { Tokens() = tokens; }
const AuthTokens& ProcessAuthTokens() { return Tokens(); }

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  volatile unsigned char difference = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    difference = difference | (static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]));
  }
  return difference == 0;
}

std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
BearerTokenInterceptors(const std::string& token) {
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> factories;
  if (!token.empty()) factories.push_back(std::make_unique<BearerTokenFactory>(token));
  return factories;
}

absl::StatusOr<AuthTokens> WriteNewAuthTokens(const std::string& dir) {
  AuthTokens tokens{NewToken(), NewToken()};
  absl::Status status = WriteTokenFile(absl::StrCat(dir, "/", kClusterTokenFile), tokens.task);
  if (status.ok()) status = WriteTokenFile(absl::StrCat(dir, "/", kAdminTokenFile), tokens.admin);
  if (!status.ok()) return status;
  return tokens;
}

std::string AdminTokenBeside(const std::string& cluster_spec_path) {
  if (cluster_spec_path.empty()) return "";
  const size_t slash = cluster_spec_path.rfind('/');
  const std::string path =
      absl::StrCat(slash == std::string::npos ? "." : cluster_spec_path.substr(0, slash), "/",
                   kAdminTokenFile);
  return access(path.c_str(), R_OK) == 0 ? path : "";
}

std::string PresentedToken(const AuthTokens& tokens) {
  return tokens.admin.empty() ? tokens.task : tokens.admin;
}

}  // namespace ps
