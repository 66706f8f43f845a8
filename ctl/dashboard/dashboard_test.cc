#include "ctl/dashboard/dashboard.h"

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <httplib.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "common/file_system.h"
#include "ctl/dashboard/page.h"
#include "ctl/dashboard/page_bundle.h"

namespace ps {
namespace {

std::string ReadRunfile(const std::string& path) {
  absl::StatusOr<std::string> text = FileSystem::Default()->ReadFile(path);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.value_or("");
}

TEST(DashboardServerTest, ServesThePageTheSnapshotAndNothingElse) {
  const std::string json = ReadRunfile("ctl/dashboard/testdata/snapshot.json");
  std::atomic<int> snapshots{0};
  absl::StatusOr<std::unique_ptr<DashboardServer>> server =
      DashboardServer::Start(
          "127.0.0.1", 0,
          [&] {
            ++snapshots;
            return json;
          },
          [] { return std::string(R"({"j": {"times": [1.0], "workers": {}}})"); });
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client client("127.0.0.1", (*server)->bound_port());

  httplib::Result page = client.Get("/");
  ASSERT_TRUE(page) << httplib::to_string(page.error());
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(page->body, DashboardPage());
  EXPECT_EQ(snapshots, 0);

  for (int i = 1; i <= 2; ++i) {  // The function is called for each request.
    httplib::Result snapshot = client.Get("/api/snapshot");
    ASSERT_TRUE(snapshot) << httplib::to_string(snapshot.error());
    EXPECT_EQ(snapshot->status, 200);
    EXPECT_EQ(snapshot->get_header_value("Content-Type"), "application/json");
    EXPECT_EQ(snapshot->body, json);
    EXPECT_EQ(snapshots, i);
  }

  httplib::Result history = client.Get("/api/history");
  ASSERT_TRUE(history) << httplib::to_string(history.error());
  EXPECT_EQ(history->status, 200);
  EXPECT_EQ(history->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(history->body, R"({"j": {"times": [1.0], "workers": {}}})");

  for (const char* path : {"/index.html", "/api", "/api/snapshot/", "/metrics", "/favicon.ico"}) {
    httplib::Result other = client.Get(path);
    ASSERT_TRUE(other) << path;
    EXPECT_EQ(other->status, 404) << path;
  }
  (*server)->Stop();
  EXPECT_FALSE(httplib::Client("127.0.0.1", (*server)->bound_port()).Get("/"));
}

TEST(DashboardServerTest, SaysWhenItsPortIsTaken) {
  auto snapshot = [] { return std::string("{}"); };
  absl::StatusOr<std::unique_ptr<DashboardServer>> first =
      DashboardServer::Start("127.0.0.1", 0, snapshot, snapshot);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<DashboardServer>> second =
      DashboardServer::Start("127.0.0.1", (*first)->bound_port(), snapshot, snapshot);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StartsWith(second.status().message(), "dashboard: cannot listen on 127.0.0.1:"))
      << second.status();
}

// The compiled-in page is the template with its files inlined, byte for byte (the generated
// source round-trips), and nothing is left to fetch.
TEST(DashboardPageTest, IsTheTemplateWithTheChartLibraryAndItsOwnCodeInlined) {
  std::map<std::string, std::string> files;
  for (const char* path :
       {"ctl/dashboard/dashboard.css", "ctl/dashboard/dashboard.js", "ctl/dashboard/timeline.js",
        "third_party/uplot/uPlot.iife.min.js", "third_party/uplot/uPlot.min.css"}) {
    const std::string name(path);
    files[name.substr(name.find_last_of('/') + 1)] = ReadRunfile(path);
  }
  absl::StatusOr<std::string> bundled = BundlePage(ReadRunfile("ctl/dashboard/index.html"), files);
  ASSERT_TRUE(bundled.ok()) << bundled.status();
  EXPECT_EQ(DashboardPage(), *bundled);
  for (const auto& [name, text] : files) {
    EXPECT_TRUE(absl::StrContains(DashboardPage(), text)) << name;
  }
  EXPECT_FALSE(absl::StrContains(DashboardPage(), "/*@bundle"));
}

// Where `position` lies inside a /* */ comment (the chart library's banner names its home).
bool InsideComment(const std::string& text, size_t position) {
  const size_t open = text.rfind("/*", position);
  if (open == std::string::npos) return false;
  const size_t close = text.rfind("*/", position);
  return close == std::string::npos || close < open;
}

TEST(DashboardPageTest, RequestsNothingFromElsewhere) {
  const std::string page(DashboardPage());
  const std::string lower = absl::AsciiStrToLower(page);
  // No address of another host, but in a comment.
  for (size_t at = lower.find("://"); at != std::string::npos; at = lower.find("://", at + 1)) {
    EXPECT_TRUE(InsideComment(lower, at)) << "at " << at << ": " << page.substr(at - 40, 80);
  }
  // Nothing that loads a resource: no src attribute, import or CSS url() but a data: one.
  for (const char* loader : {"src=", "@import", "import(", "<iframe", "<object", "<embed"}) {
    EXPECT_FALSE(absl::StrContains(lower, loader)) << loader;
  }
  for (const char* reference : {"href=", "url("}) {
    for (size_t at = lower.find(reference); at != std::string::npos;
         at = lower.find(reference, at + 1)) {
      const std::string value = lower.substr(at + std::string(reference).size(), 6);
      EXPECT_TRUE(absl::StartsWith(value, "\"data:") || absl::StartsWith(value, "data:"))
          << reference << " at " << at << ": " << page.substr(at, 60);
    }
  }
  // The requests it makes: its own snapshot and history, relative to the page.
  EXPECT_TRUE(absl::StrContains(page, "['api/snapshot', 'api/history']"));
  EXPECT_TRUE(absl::StrContains(page, "fetch(path, {cache: 'no-store'})"));
}

}  // namespace
}  // namespace ps
