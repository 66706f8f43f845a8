#include "ctl/cluster/certs.h"

#include <arpa/inet.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/security/auth_token.h"
#include "common/cluster/host_port.h"
#include "common/process/subprocess.h"

namespace ps {
namespace {

// Runs openssl with `args`; its output goes to `log`.
absl::Status OpenSsl(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv = {"/usr/bin/openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  if (access(argv[0].c_str(), X_OK) != 0) {
    return absl::UnavailableError(
        "psctl certs needs OpenSSL's command line tool: apt-get install openssl (tools/setup.sh "
        "installs it)");
  }
  absl::StatusOr<Subprocess> process = Subprocess::Start(argv, log);
  if (!process.ok()) return process.status();
  std::optional<int> code = process->Wait(absl::Minutes(1));
  if (code != std::optional<int>(0)) {
    return absl::InternalError(absl::StrCat("openssl ", args[0], " failed: ", process->Output()));
  }
  return absl::OkStatus();
}

bool IsIpAddress(const std::string& host) {
  unsigned char buffer[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buffer) == 1 ||
         inet_pton(AF_INET6, host.c_str(), buffer) == 1;
}

// A key and a certificate signed by the CA in `dir`: `name`.key and `name`.crt.
absl::Status Issue(const std::string& dir, const std::string& name, const std::string& subject,
                   const std::string& extensions, int days) {
  // Written beside, then renamed into place: a daemon watching the files (a renewal) never
  // reads half a file.
  const std::string base = dir + "/" + name, fresh = base + ".new", log = dir + "/openssl.log";
  absl::Status status =
      OpenSsl({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
               "-keyout", fresh + ".key", "-out", fresh + ".csr", "-subj", subject},
              log);
  if (status.ok()) {
    chmod((fresh + ".key").c_str(), 0600);
    std::ofstream(fresh + ".ext") << extensions;
    status = OpenSsl({"x509", "-req", "-in", fresh + ".csr", "-CA", dir + "/ca.crt", "-CAkey",
                      dir + "/ca.key", "-CAcreateserial", "-out", fresh + ".crt", "-days",
                      absl::StrCat(days), "-sha256", "-extfile", fresh + ".ext"},
                     log);
  }
  std::error_code ignored;
  if (status.ok()) {
    std::filesystem::rename(fresh + ".key", base + ".key", ignored);
    std::filesystem::rename(fresh + ".crt", base + ".crt", ignored);
  }
  for (const char* leftover : {".csr", ".ext", ".key", ".crt"}) {
    std::filesystem::remove(fresh + leftover, ignored);
  }
  return status;
}

// A task's certificate `name`.crt (organization "task", `common_name`) for serving and calling
// as `host` (its subjectAltName: an IP address or a DNS name).
absl::Status IssueTaskCertificate(const std::string& dir, const std::string& name,
                                  const std::string& common_name, const std::string& host,
                                  int days) {
  const std::string san = IsIpAddress(host) ? "IP:" + host : "DNS:" + host;
  return Issue(dir, name, "/O=task/CN=" + common_name,
               absl::StrCat("basicConstraints=CA:FALSE\n"
                            "keyUsage=critical,digitalSignature,keyEncipherment\n"
                            "extendedKeyUsage=serverAuth,clientAuth\n"
                            "subjectAltName=",
                            san, "\n"),
               days);
}

}  // namespace

std::vector<std::string> ClusterHosts(const ClusterSpec& cluster) {
  std::vector<std::string> hosts;
  for (absl::string_view job : {kPsJob, kWorkerJob}) {
    for (const std::string& address : cluster.Tasks(job)) {
      absl::StatusOr<HostPort> parsed = ParseHostPort(address);
      if (!parsed.ok()) continue;  // ClusterSpec::Parse refuses those.
      if (std::find(hosts.begin(), hosts.end(), parsed->host) == hosts.end()) {
        hosts.push_back(parsed->host);
      }
    }
  }
  return hosts;
}

absl::Status MakeClusterCertificates(const ClusterSpec& cluster, const std::string& dir, int days,
                                     std::ostream& out, const std::vector<std::string>& users) {
  for (const std::string& user : users) {
    if (user.empty() ||
        user.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                               "0123456789._-") != std::string::npos ||
        user == "ca" || user[0] == '.') {
      return absl::InvalidArgumentError(absl::StrCat(
          "--users: \"", user, "\" is not a user name (letters, digits, '.', '_', '-')"));
    }
  }
  if (days <= 0) return absl::InvalidArgumentError("--days must be at least 1");
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create ", dir, ": ", error.message()));
  }
  const std::string log = dir + "/openssl.log";
  absl::Status status;
  const bool has_ca = std::filesystem::exists(dir + "/ca.key");
  if (has_ca != std::filesystem::exists(dir + "/ca.crt")) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir,
        " holds one of ca.crt and ca.key without the other; restore the missing one, or "
        "choose another --out for a new CA"));
  }
  if (has_ca) {
    out << "renewing the certificates with the CA already in " << dir
        << " (a daemon picks up its new files within seconds, without a restart)\n";
  } else {
    status = OpenSsl({"req",
                      "-x509",
                      "-newkey",
                      "ec",
                      "-pkeyopt",
                      "ec_paramgen_curve:prime256v1",
                      "-nodes",
                      "-keyout",
                      dir + "/ca.key",
                      "-out",
                      dir + "/ca.crt",
                      "-days",
                      absl::StrCat(days),
                      "-sha256",
                      "-subj",
                      "/O=ps cluster/CN=ps cluster CA",
                      "-addext",
                      "basicConstraints=critical,CA:TRUE",
                      "-addext",
                      "keyUsage=critical,keyCertSign,cRLSign"},
                     log);
    if (!status.ok()) return status;
    chmod((dir + "/ca.key").c_str(), 0600);
  }
  for (const std::string& host : ClusterHosts(cluster)) {
    status = IssueTaskCertificate(dir, host, host, host, days);
    if (!status.ok()) return status;
    out << "  " << host << ": --tls_cert=" << dir << "/" << host << ".crt --tls_key=" << dir << "/"
        << host << ".key --tls_ca=" << dir << "/ca.crt\n";
  }
  // A certificate per task too, naming the task (CN=worker:1) for the host's name: a worker
  // presenting it may push and pull only as itself, also where a host runs several workers.
  for (absl::string_view job : {kPsJob, kWorkerJob}) {
    for (int index = 0; index < cluster.NumTasks(job); ++index) {
      status = IssueTaskCertificate(dir, TaskCertificateName(job, index),
                                    absl::StrCat(job, ":", index),
                                    ParseHostPort(cluster.Tasks(job)[index])->host, days);
      if (!status.ok()) return status;
    }
  }
  out << "  each task: --certs=" << dir << " (its own " << dir << "/<job>-<index>.crt: a worker "
      << "may then act only as itself)\n";
  std::vector<std::string> all_users = {"psctl"};
  all_users.insert(all_users.end(), users.begin(), users.end());
  for (const std::string& user : all_users) {
    status = Issue(dir, user, "/O=admin/CN=" + user,
                   "basicConstraints=CA:FALSE\n"
                   "keyUsage=critical,digitalSignature,keyEncipherment\n"
                   "extendedKeyUsage=clientAuth\n",
                   days);
    if (!status.ok()) return status;
    if (user != "psctl") {
      out << "  user " << user << ": --tls_cert=" << dir << "/" << user << ".crt --tls_key=" << dir
          << "/" << user << ".key --tls_ca=" << dir << "/ca.crt\n";
    }
  }
  std::filesystem::remove(dir + "/ca.srl");
  std::filesystem::remove(log);
  // The tokens, made once (renewing the certificates keeps them).
  if (!std::filesystem::exists(absl::StrCat(dir, "/", kClusterTokenFile)) ||
      !std::filesystem::exists(absl::StrCat(dir, "/", kAdminTokenFile))) {
    absl::StatusOr<AuthTokens> tokens = WriteNewAuthTokens(dir);
    if (!tokens.ok()) return tokens.status();
  }
  out << "  tokens: " << dir << "/" << kClusterTokenFile << " (every task), " << dir << "/"
      << kAdminTokenFile << " (psctl)\n"
      << "or give every daemon and psctl --certs=" << dir << " in place of these flags\n";
  out << "  psctl: --tls_cert=" << dir << "/psctl.crt --tls_key=" << dir
      << "/psctl.key --tls_ca=" << dir << "/ca.crt\n"
      << "keep " << dir << "/ca.key off the task hosts: whoever holds it can make identities\n";
  return absl::OkStatus();
}

}  // namespace ps
