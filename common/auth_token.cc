#include "common/auth_token.h"

#include <grpcpp/support/interceptor.h>

#include <cstdlib>
#include <fstream>
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

std::string PresentedToken(const AuthTokens& tokens) {
  return tokens.admin.empty() ? tokens.task : tokens.admin;
}

}  // namespace ps
