#include "tools/q3c/EmbedWeights.h"

#include "runtime/Checkpoint.h"
#include "runtime/ResourceLimits.h"
#include "runtime/ThreadPool.h"
#include "runtime/WeightPlan.h"

namespace q3::tools {

namespace {
constexpr const char *kWeightsSection = "weights";
// Each weight starts on a page, so a kernel's first load never straddles
// one it shares with another weight.
constexpr int64_t kWeightAlignment = 4096;
} // namespace

EmbeddedWeightsPayload embedWeights(const manifest::Manifest &m, const std::string &modelFolder,
                                    std::vector<std::string> *warnings) {
  const runtime::Checkpoint checkpoint = runtime::Checkpoint::open(modelFolder);
  runtime::ThreadPool pool(runtime::availableCpus());
  const std::vector<runtime::WeightData> weights =
      runtime::evaluateWeightPlan(m, checkpoint, pool, warnings);
  EmbeddedWeightsPayload payload;
  payload.index.section = kWeightsSection;
  int64_t cursor = 0;
  for (size_t id = 0; id < weights.size(); ++id) {
    if (!weights[id].data) // an intermediate no kernel reads
      continue;
    const int64_t offset = (cursor + kWeightAlignment - 1) / kWeightAlignment * kWeightAlignment;
    payload.index.entries.push_back({int64_t(id), offset, weights[id].bytes()});
    cursor = offset + weights[id].bytes();
  }
  // Each weight after zero padding to its offset: every byte written once.
  payload.bytes.reserve(size_t(cursor));
  for (const manifest::EmbeddedWeight &e : payload.index.entries) {
    payload.bytes.resize(size_t(e.offset), 0);
    const uint8_t *data = weights[size_t(e.id)].data;
    payload.bytes.insert(payload.bytes.end(), data, data + e.bytes);
  }
  return payload;
}

void addEmbeddedWeights(manifest::Manifest &m, const std::string &modelFolder,
                        std::vector<runtime::ArtifactSection> &sections,
                        EmbeddedWeightsPayload &storage, std::vector<std::string> *warnings) {
  storage = embedWeights(m, modelFolder, warnings);
  m.embedded = storage.index;
  runtime::ArtifactSection section{kWeightsSection, runtime::SectionKind::Mapped, {}};
  section.external = storage.bytes.data();
  section.externalSize = storage.bytes.size();
  sections.push_back(std::move(section));
}

} // namespace q3::tools
