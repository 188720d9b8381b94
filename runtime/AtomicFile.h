// Output files that never destroy what was at their path. Every file the
// tools write (artifacts, checkpoints, .npy, IR dumps, keys) goes through
// AtomicFile: the bytes go to a temporary file in the destination folder,
// which is flushed to disk and renamed over the path only once complete, so a
// failed or interrupted run leaves the old file (or nothing) in place.
// Special files (/dev/null, pipes, terminals, devices) are written directly
// and never removed. Every failure is one OutputError line naming the path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace q3::runtime {

/// An output could not be created, written or put in place. One line that
/// starts with the path.
class OutputError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// The path "-" names standard output where a caller allows it (text that is
/// the command's whole output, like an IR dump); elsewhere it is a file name.
inline constexpr const char *kStandardOutputPath = "-";

enum class Dash { IsAFile, IsStandardOutput };

class AtomicFile {
public:
  /// Prepares to write `path` (with Dash::IsStandardOutput, "-" is standard
  /// output). A regular file, or
  /// nothing, at `path`: a temporary file is created next to it (the target
  /// of a symbolic link is the one replaced, the link stays). A special file:
  /// opened for writing as it is. A folder: OutputError. A new file gets
  /// `createMode` less the umask; a replaced one keeps its mode.
  explicit AtomicFile(std::string path, unsigned createMode = 0666, Dash dash = Dash::IsAFile);
  /// Removes the temporary file unless commit() succeeded.
  ~AtomicFile();
  AtomicFile(const AtomicFile &) = delete;
  AtomicFile &operator=(const AtomicFile &) = delete;

  void write(const void *data, size_t size);
  void write(std::string_view text) { write(text.data(), text.size()); }
  /// Writes what is buffered, fsyncs, gives the file the mode a plain
  /// creation would (or the replaced file's), renames it over the path and
  /// fsyncs the folder. Special files: writes what is buffered.
  void commit();

  const std::string &path() const { return path_; }

private:
  void flushBuffer();
  [[noreturn]] void fail(const char *action, int error);
  void discardTemporary();

  std::string path_;        // as the user gave it, for messages
  std::string target_;      // the file that is replaced (a symlink's target)
  std::string temporary_;   // empty when writing directly
  int fd_ = -1;
  bool ownsFd_ = false;     // false for standard output
  bool stdout_ = false;
  bool committed_ = false;
  int slot_ = -1;           // in the registry removeTemporaryOutputs() reads
  unsigned mode_ = 0;       // of the file once in place
  std::vector<uint8_t> buffer_;
};

/// Writes `bytes` to `path` through an AtomicFile.
void writeFileAtomically(const std::string &path, std::string_view bytes,
                         Dash dash = Dash::IsAFile);

/// Throws OutputError when `output` (an existing file) is one of `inputs`,
/// which name files, or folders whose checkpoint files (config.json,
/// *.safetensors, *.index.json, tokenizer files) the run reads. Compares
/// device and inode, so links and other spellings of a path are caught.
/// `what` names the option in the message ("-o", "--logits").
void refuseOutputThatIsInput(const std::string &what, const std::string &output,
                             const std::vector<std::string> &inputs);

/// Flushes stdout (C stdio). Throws OutputError "standard output: cannot
/// write: <reason>" if it or an earlier write to it failed.
void flushStandardOutput();

/// Removes every temporary file an AtomicFile of this process has not yet
/// committed. Async-signal-safe: fatal-error and signal handlers call it.
void removeTemporaryOutputs();

} // namespace q3::runtime
