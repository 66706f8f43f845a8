#include "ctl/dashboard/page_bundle.h"

#include <map>
#include <string>

#include <gtest/gtest.h>

namespace ps {
namespace {

using Files = std::map<std::string, std::string>;

TEST(BundlePageTest, InlinesEachFileAtItsMarker) {
  absl::StatusOr<std::string> page = BundlePage(
      "<style>/*@bundle a.css*/</style><script>/*@bundle lib.js*/</script>"
      "<script>/*@bundle a.js*/</script>",
      Files{{"a.css", "p{}"}, {"lib.js", "var lib=1;"}, {"a.js", "lib+1;"}});
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(*page, "<style>p{}</style><script>var lib=1;</script><script>lib+1;</script>");
}

TEST(BundlePageTest, RefusesAMarkerWithoutAFileAndAFileWithoutAMarker) {
  EXPECT_EQ(BundlePage("<script>/*@bundle b.js*/</script>", Files{{"a.js", ""}}).status().message(),
            "the template's marker /*@bundle b.js*/ names no file given");
  EXPECT_EQ(BundlePage("<script>/*@bundle a.js*/</script>", Files{{"a.js", ""}, {"b.js", ""}})
                .status()
                .message(),
            "b.js was given, but the template has no /*@bundle b.js*/");
  EXPECT_EQ(BundlePage("<script>/*@bundle a.js</script>", Files{{"a.js", ""}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BundlePageTest, RefusesAFileThatWouldEndItsElement) {
  for (const char* text : {"x='</SCRIPT>'", "/* </style> */", "a<!--b"}) {
    absl::StatusOr<std::string> page =
        BundlePage("<script>/*@bundle a.js*/</script>", Files{{"a.js", text}});
    EXPECT_EQ(page.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(page.status().message().find("a.js holds"), std::string::npos) << page.status();
  }
}

TEST(PageSourceTest, ChoosesARawStringDelimiterThePageDoesNotHold) {
  const std::string source = PageSource("a)page\"b");
  EXPECT_NE(source.find("R\"page0(a)page\"b)page0\""), std::string::npos) << source;
  EXPECT_NE(PageSource("plain").find("R\"page(plain)page\""), std::string::npos);
}

}  // namespace
}  // namespace ps
