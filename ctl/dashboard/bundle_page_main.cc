// bundle_page OUT.cc TEMPLATE FILE...: writes to OUT.cc the C++ source of ps::DashboardPage(),
// the TEMPLATE (an HTML file) with each FILE inlined at its marker (see page_bundle.h). Run by
// a genrule in ctl/BUILD.
#include <iostream>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "common/file_system.h"
#include "ctl/dashboard/page_bundle.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: bundle_page OUT.cc TEMPLATE FILE...\n";
    return 2;
  }
  ps::FileSystem* fs = ps::FileSystem::Default();
  absl::StatusOr<std::string> html_template = fs->ReadFile(argv[2]);
  if (!html_template.ok()) {
    std::cerr << "bundle_page: " << html_template.status().message() << "\n";
    return 1;
  }
  std::map<std::string, std::string> files;
  for (int i = 3; i < argc; ++i) {
    const std::string path = argv[i];
    absl::StatusOr<std::string> text = fs->ReadFile(path);
    if (!text.ok()) {
      std::cerr << "bundle_page: " << text.status().message() << "\n";
      return 1;
    }
    files[path.substr(path.find_last_of('/') + 1)] = *std::move(text);
  }
  absl::StatusOr<std::string> page = ps::BundlePage(*html_template, files);
  if (!page.ok()) {
    std::cerr << "bundle_page: " << argv[2] << ": " << page.status().message() << "\n";
    return 1;
  }
  absl::Status written = fs->WriteFileAtomically(argv[1], ps::PageSource(*page));
  if (!written.ok()) {
    std::cerr << "bundle_page: " << written.message() << "\n";
    return 1;
  }
  return 0;
}
