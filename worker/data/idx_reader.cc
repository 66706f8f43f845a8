// MNIST's IDX files (http://yann.lecun.com/exdb/mnist/): a big-endian magic number whose low
// byte is the number of dimensions, one big-endian int32 per dimension, then the values. Only
// unsigned-byte data (type code 0x08) is read: images of magic 2051, labels of magic 2049.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "worker/data/dataset.h"
#include "worker/data/file_contents.h"

namespace ps {
namespace {

using data_internal::DescribeFile;
using data_internal::FileContents;
using data_internal::ReadFileContents;

// An IDX file's layout: what it holds and the names of its dimensions.
struct IdxFormat {
  uint32_t magic;
  absl::string_view what;
  std::vector<absl::string_view> dimension_names;
};

const IdxFormat kImages = {2051, "IDX images", {"image count", "rows", "columns"}};
const IdxFormat kLabels = {2049, "IDX labels", {"label count"}};

// Far more than any data set that fits in memory; keeps the size arithmetic from overflowing.
constexpr int64_t kMaxValues = int64_t{1} << 40;

struct IdxArray {
  std::vector<int64_t> dims;
  const unsigned char* values = nullptr;  // Points into the FileContents it was parsed from.
};

uint32_t BigEndian32(const std::string& bytes, size_t offset) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + offset);
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
}

absl::StatusOr<IdxArray> ParseIdx(const std::string& path, const FileContents& contents,
                                  const IdxFormat& format) {
  const std::string file = DescribeFile(path, contents);
  const std::string& bytes = contents.bytes;
  const size_t header_bytes = 4 * (1 + format.dimension_names.size());
  if (bytes.size() < 4) {
    return absl::DataLossError(absl::StrCat(file, ": ends at byte ", bytes.size(), " but the ",
                                            format.what, " header is ", header_bytes, " bytes"));
  }
  const uint32_t magic = BigEndian32(bytes, 0);
  if (magic != format.magic) {
    std::string hint;
    if (magic == kImages.magic || magic == kLabels.magic) {
      hint = absl::StrCat(" (this is ", magic == kImages.magic ? "an images" : "a labels",
                          " file; are the images and labels paths swapped?)");
    }
    return absl::InvalidArgumentError(absl::StrCat(file, ": at byte 0: magic ", magic,
                                                   ", expected ", format.magic, " (", format.what,
                                                   ")", hint));
  }
  if (bytes.size() < header_bytes) {
    return absl::DataLossError(absl::StrCat(file, ": ends at byte ", bytes.size(), " but the ",
                                            format.what, " header is ", header_bytes, " bytes"));
  }
  IdxArray array;
  int64_t values = 1;
  for (size_t d = 0; d < format.dimension_names.size(); ++d) {
    const size_t offset = 4 * (d + 1);
    const int64_t dim = static_cast<int32_t>(BigEndian32(bytes, offset));
    if (dim < 1) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": at byte ", offset, ": ",
                                                     format.dimension_names[d], " is ", dim,
                                                     ", must be at least 1"));
    }
    if (values > kMaxValues / dim) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": at byte ", offset, ": ", format.dimension_names[d], " ", dim,
                       " makes the data larger than ", kMaxValues, " bytes"));
    }
    values *= dim;
    array.dims.push_back(dim);
  }
  const int64_t promised = static_cast<int64_t>(header_bytes) + values;
  const int64_t size = static_cast<int64_t>(bytes.size());
  if (size < promised) {
    return absl::DataLossError(absl::StrCat(file, ": ends at byte ", size,
                                            " but the header promises ", promised, " bytes"));
  }
  if (size > promised) {
    return absl::DataLossError(absl::StrCat(file, ": has ", size - promised, " bytes after byte ",
                                            promised, ", where the header says the data ends"));
  }
  array.values = reinterpret_cast<const unsigned char*>(bytes.data()) + header_bytes;
  return array;
}

}  // namespace

absl::StatusOr<Dataset> ReadMnist(const std::string& images_path, const std::string& labels_path) {
  absl::StatusOr<FileContents> image_file = ReadFileContents(images_path);
  if (!image_file.ok()) return image_file.status();
  absl::StatusOr<IdxArray> images = ParseIdx(images_path, *image_file, kImages);
  if (!images.ok()) return images.status();
  absl::StatusOr<FileContents> label_file = ReadFileContents(labels_path);
  if (!label_file.ok()) return label_file.status();
  absl::StatusOr<IdxArray> labels = ParseIdx(labels_path, *label_file, kLabels);
  if (!labels.ok()) return labels.status();

  const int64_t count = images->dims[0];
  if (labels->dims[0] != count) {
    return absl::InvalidArgumentError(absl::StrCat(images_path, " holds ", count, " images but ",
                                                   labels_path, " holds ", labels->dims[0],
                                                   " labels; they must match one to one"));
  }
  const int64_t pixels = images->dims[1] * images->dims[2];
  if (pixels > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(images_path, ": images of ", images->dims[1],
                                                   " x ", images->dims[2],
                                                   " pixels are too large"));
  }
  Dataset data;
  data.num_examples = count;
  data.feature_dim = static_cast<int>(pixels);
  data.features.assign(images->values, images->values + count * pixels);
  data.labels.assign(labels->values, labels->values + count);
  int max_label = 0;
  for (int64_t i = 0; i < count; ++i) max_label = std::max<int>(max_label, labels->values[i]);
  data.num_classes = max_label + 1;
  return data;
}

}  // namespace ps
