// Bundles psctl dashboard's page at build time (bundle_page_main.cc, run by a genrule): inlines
// the page's own JS and CSS and the vendored chart library into its HTML template, and writes
// the result as C++ source (ctl/dashboard/page.h), so that psctl serves one self-contained
// document and opening it requests nothing from anywhere else.
#ifndef PS_CTL_DASHBOARD_PAGE_BUNDLE_H_
#define PS_CTL_DASHBOARD_PAGE_BUNDLE_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ps {

// `html_template` with each marker "/*@bundle NAME*/" replaced by files.at(NAME), the text of a
// file by its base name. INVALID_ARGUMENT naming the marker or the file when a marker names no
// file, a file has no marker, or a file holds "</script", "</style" or "<!--" (in any case),
// which would end, or change how a browser reads, the element it is inlined into.
absl::StatusOr<std::string> BundlePage(absl::string_view html_template,
                                       const std::map<std::string, std::string>& files);

// C++ source that defines ps::DashboardPage() (ctl/dashboard/page.h) to return `page`, byte for
// byte.
std::string PageSource(absl::string_view page);

}  // namespace ps

#endif  // PS_CTL_DASHBOARD_PAGE_BUNDLE_H_
