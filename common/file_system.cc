#include "common/file_system.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <random>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

absl::Status ErrnoError(int error_number, absl::string_view action, const std::string& path) {
  return absl::ErrnoToStatus(error_number, absl::StrCat("cannot ", action, " ", path));
}

// Writes all of `contents` to `fd`, retrying short writes and interruptions.
absl::Status WriteAll(int fd, absl::string_view contents, const std::string& path) {
  while (!contents.empty()) {
    ssize_t written = ::write(fd, contents.data(), contents.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, "write", path);
    }
    contents.remove_prefix(static_cast<size_t>(written));
  }
  return absl::OkStatus();
}

// Makes a rename into the directory holding `path` survive a crash.
absl::Status SyncDirectoryOf(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "sync the directory of", path);
  absl::Status status;
  if (::fsync(fd) != 0) status = ErrnoError(errno, "sync the directory of", path);
  ::close(fd);
  return status;
}

class PosixAppendableFile : public AppendableFile {
 public:
  PosixAppendableFile(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}
  ~PosixAppendableFile() override { std::fclose(file_); }

  absl::Status Append(absl::string_view data) override {
    if (std::fwrite(data.data(), 1, data.size(), file_) != data.size()) {
      return ErrnoError(errno, "write", path_);
    }
    return absl::OkStatus();
  }
  absl::Status Flush() override {
    if (std::fflush(file_) != 0) return ErrnoError(errno, "write", path_);
    return absl::OkStatus();
  }

 private:
  const std::string path_;
  std::FILE* const file_;
};

class PosixAtomicFile : public AtomicFile {
 public:
  PosixAtomicFile(std::string path, std::string temporary, int fd)
      : path_(std::move(path)), temporary_(std::move(temporary)), fd_(fd) {}
  ~PosixAtomicFile() override {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) std::remove(temporary_.c_str());
  }

  // Writes in pieces, starting the disk's writeback of each as the next is written (as
  // RocksDB's bytes_per_sync), so that Commit's fsync finds little left to write.
  absl::Status Append(absl::string_view data) override {
    constexpr size_t kPiece = 8 << 20;
    while (!data.empty()) {
      const absl::string_view piece = data.substr(0, kPiece);
      absl::Status status = WriteAll(fd_, piece, path_);
      if (!status.ok()) return status;
      data.remove_prefix(piece.size());
      written_ += static_cast<off_t>(piece.size());
      if (written_ - started_ >= static_cast<off_t>(kPiece)) {
        // A hint: its failure shows in fsync, which Commit checks.
        ::sync_file_range(fd_, started_, written_ - started_, SYNC_FILE_RANGE_WRITE);
        started_ = written_;
      }
    }
    return absl::OkStatus();
  }

  absl::Status Commit() override {
    absl::Status status;
    if (::fsync(fd_) != 0) status = ErrnoError(errno, "write", path_);
    if (::close(fd_) != 0 && status.ok()) status = ErrnoError(errno, "write", path_);
    fd_ = -1;
    if (status.ok() && std::rename(temporary_.c_str(), path_.c_str()) != 0) {
      status = ErrnoError(errno, "write", path_);
    }
    if (!status.ok()) return status;
    committed_ = true;
    return SyncDirectoryOf(path_);
  }

 private:
  const std::string path_;
  const std::string temporary_;
  int fd_;
  bool committed_ = false;
  off_t written_ = 0;  // Bytes written so far.
  off_t started_ = 0;  // Writeback has been started for the bytes before this offset.
};

class PosixFileSystem : public FileSystem {
 public:
  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoError(errno, "read", path);
    std::string contents;
    char buffer[1 << 16];
    while (true) {
      ssize_t got = ::read(fd, buffer, sizeof(buffer));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        absl::Status status = ErrnoError(errno, "read", path);
        ::close(fd);
        return status;
      }
      if (got == 0) break;
      contents.append(buffer, static_cast<size_t>(got));
    }
    ::close(fd);
    return contents;
  }

  absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) override {
    absl::StatusOr<std::unique_ptr<AtomicFile>> file = NewAtomicFile(path);
    if (!file.ok()) return file.status();
    absl::Status status = (*file)->Append(contents);
    return status.ok() ? (*file)->Commit() : status;
  }

  absl::StatusOr<std::unique_ptr<AtomicFile>> NewAtomicFile(const std::string& path) override {
    // Of this writer alone: another thread, process or host writing `path` (daemons sharing a
    // directory on a file system they all mount; two containers may both be pid 1) has its
    // own, and O_EXCL refuses to open one that somehow exists rather than write into it.
    static const uint64_t process = std::random_device()() * 0x100000000ull ^
                                    std::random_device()() ^ static_cast<uint64_t>(::getpid());
    static std::atomic<uint64_t> written{0};
    char host[64] = {0};
    if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
    const std::string temporary =
        absl::StrCat(path, ".tmp.", host, ".", absl::Hex(process), ".", written++);
    int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoError(errno, "write", path);
    return std::make_unique<PosixAtomicFile>(path, temporary, fd);
  }

  absl::StatusOr<std::unique_ptr<AppendableFile>> NewAppendableFile(
      const std::string& path) override {
    std::FILE* file = std::fopen(path.c_str(), "we");
    if (file == nullptr) return ErrnoError(errno, "write", path);
    return std::make_unique<PosixAppendableFile>(path, file);
  }

  absl::Status CreateDirectories(const std::string& path) override {
    std::error_code error;
    std::filesystem::create_directories(path, error);
    if (error) return ErrnoError(error.value(), "create the directory", path);
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<std::string>> ListDirectory(const std::string& path) override {
    std::error_code error;
    std::vector<std::string> names;
    for (std::filesystem::directory_iterator it(path, error), end; !error && it != end;
         it.increment(error)) {
      names.push_back(it->path().filename().string());
    }
    if (error) return ErrnoError(error.value(), "list the directory", path);
    std::sort(names.begin(), names.end());
    return names;
  }

  absl::Status DeleteRecursively(const std::string& path) override {
    std::error_code error;
    std::filesystem::remove_all(path, error);
    if (error) return ErrnoError(error.value(), "delete", path);
    return absl::OkStatus();
  }
};

}  // namespace

FileSystem* FileSystem::Default() {
  static FileSystem* const file_system = new PosixFileSystem();
  return file_system;
}

}  // namespace ps
