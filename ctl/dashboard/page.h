// psctl dashboard's page: one self-contained HTML document (ctl/dashboard/index.html with its
// JS, its CSS and the vendored uPlot inlined at build time by bundle_page; see page_bundle.h).
#ifndef PS_CTL_DASHBOARD_PAGE_H_
#define PS_CTL_DASHBOARD_PAGE_H_

#include "absl/strings/string_view.h"

namespace ps {

// The page, UTF-8; lives as long as the program.
absl::string_view DashboardPage();

}  // namespace ps

#endif  // PS_CTL_DASHBOARD_PAGE_H_
