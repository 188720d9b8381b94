// Fuzzes parseModelConfig: any input must either parse or raise ConfigError (never
// crash, hang, or throw anything else), and whatever parses must survive a round trip
// through toHuggingFaceJson unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/ConfigJson.h"
#include "frontend/ModelConfig.h"

using q3::frontend::ConfigError;
using q3::frontend::ModelConfig;

static void checkRoundTrip(const ModelConfig &config) {
  std::vector<std::string> warnings;
  ModelConfig back =
      q3::frontend::parseModelConfig(q3::frontend::toHuggingFaceJson(config), "fuzz-export", &warnings);
  if (!q3::frontend::equivalent(back, config)) {
    std::fprintf(stderr, "round trip changed the config:\n%s\n",
                 q3::frontend::toHuggingFaceJson(config).c_str());
    std::abort();
  }
}

static void checkOneLine(const ConfigError &error) {
  if (std::string_view(error.what()).find('\n') != std::string_view::npos) {
    std::fprintf(stderr, "multi-line error message: %s\n", error.what());
    std::abort();
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  std::vector<std::string> warnings;
  try {
    checkRoundTrip(q3::frontend::parseModelConfig(text, "fuzz", &warnings));
  } catch (const ConfigError &error) {
    checkOneLine(error);
  }
  return 0;
}
