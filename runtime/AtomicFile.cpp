#include "runtime/AtomicFile.h"

#include "runtime/LoadError.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace q3::runtime {
namespace {

// Bytes reach the file in whole 2 MB chunks at 2 MB-aligned offsets (the
// last one excepted), so the page cache can hold what was written in huge
// folios, which a mapped checkpoint's readers need (docs/cpu-backend.md,
// "Where the checkpoint's bytes live"): a large write at an unaligned offset
// leaves small folios at both of its ends.
constexpr size_t kChunkBytes = size_t(2) << 20;

// ---------------------------------------------------------------------------
// The temporary files not yet committed, for removeTemporaryOutputs(), which
// runs in signal handlers: fixed storage, no locks, no allocation.

constexpr int kSlots = 16;
enum SlotState : int { kFree = 0, kFilling = 1, kLive = 2 };
std::array<std::atomic<int>, kSlots> slotState{};
char slotPath[kSlots][PATH_MAX];

int registerTemporary(const std::string &path) {
  if (path.size() >= PATH_MAX)
    return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (slotState[i].compare_exchange_strong(expected, kFilling)) {
      std::memcpy(slotPath[i], path.c_str(), path.size() + 1);
      slotState[i].store(kLive);
      return i;
    }
  }
  return -1; // more than kSlots outputs at once: only the handlers' cleanup is lost
}

void unregisterTemporary(int slot) {
  if (slot >= 0)
    slotState[slot].store(kFree);
}

// ---------------------------------------------------------------------------

std::string parentFolder(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string baseName(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

unsigned currentUmask() {
  static const unsigned mask = [] {
    mode_t old = ::umask(0);
    ::umask(old);
    return unsigned(old);
  }();
  return mask;
}


/// Writes all of [data, data + size) to `fd`; returns 0 or the errno.
int writeAll(int fd, const uint8_t *data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return n < 0 ? errno : EIO;
    data += n;
    size -= size_t(n);
  }
  return 0;
}

bool isCheckpointFileName(const std::string &name) {
  auto endsWith = [&](std::string_view suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return name == "config.json" || name == "generation_config.json" || name == "vocab.json" ||
         name == "merges.txt" || name.rfind("tokenizer", 0) == 0 || endsWith(".safetensors") ||
         endsWith(".index.json");
}

bool sameFile(const struct stat &a, const struct stat &b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/// Whether `output` is (a hard link to) a checkpoint file directly in `folder`.
bool linksToCheckpointFileOf(const std::string &folder, const struct stat &output) {
  DIR *dir = ::opendir(folder.c_str());
  if (!dir)
    return false;
  bool found = false;
  while (const struct dirent *entry = ::readdir(dir)) {
    struct stat info;
    if (isCheckpointFileName(entry->d_name) &&
        ::stat((folder + "/" + entry->d_name).c_str(), &info) == 0 && sameFile(info, output)) {
      found = true;
      break;
    }
  }
  ::closedir(dir);
  return found;
}

} // namespace

AtomicFile::AtomicFile(std::string path, unsigned createMode, Dash dash)
    : path_(std::move(path)) {
  if (path_.empty())
    throw OutputError("an empty output path");
  if (dash == Dash::IsStandardOutput && path_ == kStandardOutputPath) {
    fd_ = STDOUT_FILENO;
    stdout_ = true;
    return;
  }
  target_ = path_;
  struct stat info;
  if (::lstat(path_.c_str(), &info) == 0 && S_ISLNK(info.st_mode)) {
    // Replace the file the link points to and keep the link.
    if (char *real = ::realpath(path_.c_str(), nullptr)) {
      target_ = real;
      std::free(real);
    }
  }
  if (::stat(target_.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode))
      throw OutputError(fmt::format("{}: is a folder, expected a file name", printable(path_)));
    if (!S_ISREG(info.st_mode)) {
      // A device, pipe, socket or terminal: written as it is, never replaced.
      fd_ = ::open(target_.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
      if (fd_ < 0)
        fail("open", errno);
      ownsFd_ = true;
      return;
    }
    mode_ = unsigned(info.st_mode) & 07777;
  } else if (errno == ENOENT) {
    mode_ = createMode & ~currentUmask();
  } else {
    fail("open", errno);
  }
  // Hidden, next to the target (rename is atomic only within a file system),
  // and short enough for NAME_MAX.
  std::string name = baseName(target_).substr(0, 200);
  temporary_ = parentFolder(target_) + "/." + name + ".tmp-XXXXXX";
  fd_ = ::mkostemp(temporary_.data(), O_CLOEXEC);
  if (fd_ < 0) {
    int error = errno;
    temporary_.clear();
    throw OutputError(fmt::format("{}: cannot create a temporary file in {}: {}",
                                  printable(path_), printable(parentFolder(target_)),
                                  std::strerror(error)));
  }
  ownsFd_ = true;
  slot_ = registerTemporary(temporary_);
}

AtomicFile::~AtomicFile() {
  if (!committed_)
    discardTemporary();
  else if (ownsFd_ && fd_ >= 0)
    ::close(fd_);
}

void AtomicFile::discardTemporary() {
  if (ownsFd_ && fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
  if (!temporary_.empty()) {
    ::unlink(temporary_.c_str());
    unregisterTemporary(slot_);
    slot_ = -1;
    temporary_.clear();
  }
}

void AtomicFile::fail(const char *action, int error) {
  discardTemporary();
  throw OutputError(fmt::format("{}: cannot {}: {}", stdout_ ? "standard output" : printable(path_),
                                action, std::strerror(error)));
}

void AtomicFile::flushBuffer() {
  if (buffer_.empty())
    return;
  int error = writeAll(fd_, buffer_.data(), buffer_.size());
  buffer_.clear();
  if (error != 0)
    fail("write", error);
}

void AtomicFile::write(const void *data, size_t size) {
  if (committed_ || fd_ < 0)
    throw std::logic_error("AtomicFile::write after commit or failure");
  const auto *bytes = static_cast<const uint8_t *>(data);
  // The buffer holds what follows the last whole chunk written.
  if (!buffer_.empty() || size < kChunkBytes) {
    const size_t taken = std::min(size, kChunkBytes - buffer_.size());
    buffer_.insert(buffer_.end(), bytes, bytes + taken);
    bytes += taken;
    size -= taken;
    if (buffer_.size() < kChunkBytes)
      return;
    flushBuffer();
  }
  const size_t whole = size / kChunkBytes * kChunkBytes;
  if (whole > 0)
    if (int error = writeAll(fd_, bytes, whole))
      fail("write", error);
  buffer_.assign(bytes + whole, bytes + size);
}

void AtomicFile::commit() {
  if (committed_ || fd_ < 0)
    throw std::logic_error("AtomicFile::commit twice or after a failure");
  flushBuffer();
  if (temporary_.empty()) { // written directly
    if (ownsFd_ && ::close(fd_) != 0) {
      int error = errno;
      fd_ = -1;
      fail("write", error);
    }
    if (ownsFd_)
      fd_ = -1;
    committed_ = true;
    return;
  }
  if (::fsync(fd_) != 0)
    fail("write", errno);
  if (::fchmod(fd_, mode_t(mode_)) != 0)
    fail("set the mode of", errno);
  int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0)
    fail("write", errno);
  if (::rename(temporary_.c_str(), target_.c_str()) != 0)
    fail("replace", errno);
  unregisterTemporary(slot_);
  slot_ = -1;
  temporary_.clear();
  committed_ = true;
  // The rename is durable once the folder is; a folder that cannot be synced
  // (some file systems refuse) still holds the complete file.
  int folder = ::open(parentFolder(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (folder >= 0) {
    (void)::fsync(folder);
    ::close(folder);
  }
}

void writeFileAtomically(const std::string &path, std::string_view bytes, Dash dash) {
  AtomicFile file(path, 0666, dash);
  file.write(bytes);
  file.commit();
}

void refuseOutputThatIsInput(const std::string &what, const std::string &output,
                             const std::vector<std::string> &inputs) {
  struct stat out;
  if (output.empty() || output == kStandardOutputPath || ::stat(output.c_str(), &out) != 0)
    return; // nothing there yet, so it is not an input
  struct stat folder;
  std::string outputFolder;
  if (char *real = ::realpath(output.c_str(), nullptr)) {
    outputFolder = parentFolder(real);
    std::free(real);
  }
  const bool haveFolder =
      !outputFolder.empty() && ::stat(outputFolder.c_str(), &folder) == 0;
  const std::string outputName = baseName(output);
  for (const std::string &input : inputs) {
    struct stat in;
    if (input.empty() || ::stat(input.c_str(), &in) != 0)
      continue;
    const bool same = sameFile(out, in);
    const bool insideCheckpointFolder = S_ISDIR(in.st_mode) && S_ISREG(out.st_mode) &&
                                        ((haveFolder && sameFile(folder, in) &&
                                          isCheckpointFileName(outputName)) ||
                                         linksToCheckpointFileOf(input, out));
    if (same || insideCheckpointFolder)
      throw OutputError(fmt::format("{}: {} would overwrite {} of this run; choose another path",
                                    printable(output), what,
                                    same ? fmt::format("the input {}", printable(input))
                                         : fmt::format("a file of the input folder {}",
                                                       printable(input))));
  }
}

void flushStandardOutput() {
  errno = 0;
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout);
  if (!failed)
    return;
  const int error = errno != 0 ? errno : EIO;
  std::clearerr(stdout);
  throw OutputError(fmt::format("standard output: cannot write: {}", std::strerror(error)));
}

void removeTemporaryOutputs() {
  for (int i = 0; i < kSlots; ++i)
    if (slotState[i].load() == kLive)
      ::unlink(slotPath[i]);
}

} // namespace q3::runtime
