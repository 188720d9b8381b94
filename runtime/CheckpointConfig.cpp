#include "runtime/CheckpointConfig.h"

#include "runtime/LoadError.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include <sys/stat.h>

namespace q3::runtime {
namespace {

using Json = nlohmann::json;

// A config.json is a few kilobytes; the bound keeps a hostile file from
// exhausting memory before parsing.
constexpr uint64_t kMaxConfigBytes = 16u << 20;

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

LoadError configError(const std::string &file, const std::string &what) {
  return LoadError(fmt::format("{}: {}", printable(file), what));
}

Json readConfig(const std::string &file) {
  struct stat info;
  if (::stat(file.c_str(), &info) != 0)
    throw configError(file, fmt::format("cannot open the checkpoint's config: {} (q3run "
                                        "compares it with the artifact's)",
                                        std::strerror(errno)));
  if (S_ISDIR(info.st_mode))
    throw configError(file, "is a folder, expected the checkpoint's config.json file");
  if (!S_ISREG(info.st_mode) || uint64_t(info.st_size) > kMaxConfigBytes)
    throw configError(file, fmt::format("expected a config.json file of at most {} bytes",
                                        kMaxConfigBytes));
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in)
    throw configError(file, fmt::format("cannot read: {}", std::strerror(errno)));
  Json config;
  try {
    config = Json::parse(text.str());
  } catch (const Json::exception &error) {
    throw configError(file, "invalid JSON: " + describeJsonError(error));
  }
  if (!config.is_object())
    throw configError(file, fmt::format("expected a JSON object, found {}", config.type_name()));
  return config;
}

/// One value as a message shows it: JSON, shortened and one line.
std::string shown(const Json &value) {
  return printable(value.dump(-1, ' ', false, Json::error_handler_t::replace)).substr(0, 80);
}

class Comparison {
public:
  Comparison(std::string file, const Json &checkpoint, const Json &artifact,
             std::string artifactPath)
      : file_(std::move(file)), checkpoint_(checkpoint), artifact_(artifact),
        artifactPath_(std::move(artifactPath)) {}

  /// A field whose value (or default) must equal the artifact's.
  void same(const char *field, const std::optional<Json> &fallback = std::nullopt) {
    auto compiled = artifact_.find(field);
    if (compiled == artifact_.end())
      throw LoadError(fmt::format("{}: manifest: config has no '{}'", printable(artifactPath_),
                                  field));
    Json value;
    if (auto it = checkpoint_.find(field); it != checkpoint_.end() && !it->is_null())
      value = *it;
    else if (fallback)
      value = *fallback;
    else
      throw mismatch(field, "is missing", *compiled);
    if (!equal(value, *compiled))
      throw mismatch(field, "is " + shown(value), *compiled);
  }

  /// A field the artifact's kernels do not implement: absent, or `neutral`.
  void unsupported(const char *field, const Json &neutral, const std::string &artifactDoes) {
    auto it = checkpoint_.find(field);
    if (it == checkpoint_.end() || *it == neutral || (neutral.is_null() && it->is_null()))
      return;
    throw configError(file_, fmt::format("{} is {}, but {} was compiled for {}: recompile it "
                                         "from this checkpoint",
                                         field, shown(*it), printable(artifactPath_),
                                         artifactDoes));
  }

  const Json &checkpoint() const { return checkpoint_; }

private:
  static bool equal(const Json &a, const Json &b) {
    if (a.is_number() && b.is_number()) {
      if (a.is_number_float() || b.is_number_float())
        return a.get<double>() == b.get<double>();
      return a == b;
    }
    return a == b;
  }

  LoadError mismatch(const char *field, const std::string &found, const Json &compiled) const {
    return configError(file_, fmt::format("{} {}, but {} was compiled for {}: recompile it "
                                          "from this checkpoint (q3c compile)",
                                          field, found, printable(artifactPath_),
                                          shown(compiled)));
  }

  std::string file_;
  const Json &checkpoint_;
  const Json &artifact_;
  std::string artifactPath_;
};

std::optional<Json> integerOf(const Json &config, const char *field) {
  auto it = config.find(field);
  if (it == config.end() || !it->is_number_integer())
    return std::nullopt;
  return *it;
}

} // namespace

std::string checkpointConfigPath(const std::string &weightsPath) {
  struct stat info;
  if (::stat(weightsPath.c_str(), &info) == 0 && S_ISDIR(info.st_mode))
    return weightsPath + (endsWith(weightsPath, "/") ? "" : "/") + "config.json";
  size_t slash = weightsPath.rfind('/');
  return slash == std::string::npos ? "config.json"
                                    : weightsPath.substr(0, slash + 1) + "config.json";
}

void checkCheckpointConfig(const std::string &weightsPath, const Json &artifactConfig,
                           const std::string &artifactPath) {
  if (!artifactConfig.is_object())
    throw LoadError(fmt::format("{}: manifest: config: expected an object",
                                printable(artifactPath)));
  const std::string file = checkpointConfigPath(weightsPath);
  const Json config = readConfig(file);
  Comparison compare(file, config, artifactConfig, artifactPath);
  // The shapes, then the constants of the computation, with the defaults
  // q3c's frontend (frontend/ModelConfig.cpp) takes when a field is absent.
  compare.same("hidden_size");
  compare.same("intermediate_size");
  compare.same("num_hidden_layers");
  compare.same("num_attention_heads");
  compare.same("num_key_value_heads", integerOf(config, "num_attention_heads"));
  std::optional<Json> headDim;
  auto hidden = integerOf(config, "hidden_size"), heads = integerOf(config, "num_attention_heads");
  if (hidden && heads && heads->get<int64_t>() > 0)
    headDim = Json(hidden->get<int64_t>() / heads->get<int64_t>());
  compare.same("head_dim", headDim);
  compare.same("vocab_size");
  compare.same("rope_theta", Json(10000.0));
  compare.same("rms_norm_eps", Json(1e-6));
  compare.same("tie_word_embeddings", Json(false));
  // What the compiled kernels do not do at all.
  compare.unsupported("model_type", "qwen3", "\"qwen3\"");
  compare.unsupported("hidden_act", "silu", "\"silu\"");
  compare.unsupported("attention_bias", false, "no attention biases");
  compare.unsupported("rope_scaling", nullptr, "no RoPE scaling (null)");
  compare.unsupported("use_sliding_window", false, "full attention (use_sliding_window false)");
}

} // namespace q3::runtime
