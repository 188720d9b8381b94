#include "runtime/text/TextAssets.h"

#include "runtime/LoadError.h"
#include "runtime/MappedFile.h"
#include "runtime/text/Tokenizer.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include <sys/stat.h>

namespace q3::text {

const char *const kTextFileNames[4] = {"tokenizer.json", "tokenizer_config.json",
                                       "chat_template.jinja", "generation_config.json"};
const char *const kCompiledTokenizerSection = "tokenizer.compiled";

namespace {

namespace fs = std::filesystem;

std::optional<TextFile> &slot(TextAssets &assets, size_t index) {
  switch (index) {
  case 0:
    return assets.tokenizer;
  case 1:
    return assets.tokenizerConfig;
  case 2:
    return assets.chatTemplate;
  default:
    return assets.generationConfig;
  }
}

const std::optional<TextFile> &slot(const TextAssets &assets, size_t index) {
  return slot(const_cast<TextAssets &>(assets), index);
}

std::string readWholeFile(const std::string &path) {
  std::unique_ptr<runtime::MappedFile> file = runtime::MappedFile::open(path);
  return std::string(reinterpret_cast<const char *>(file->data()), file->size());
}

bool isDirectory(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

bool isRegularFile(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

} // namespace

TextAssets readTextAssetsFromFolder(const std::string &folder, bool withTokenizer) {
  TextAssets assets;
  assets.source = folder;
  for (size_t i = withTokenizer ? 0 : 1; i < 4; ++i) {
    const std::string path = (fs::path(folder) / kTextFileNames[i]).string();
    if (isRegularFile(path))
      slot(assets, i) = TextFile{path, readWholeFile(path)};
  }
  return assets;
}

TextAssets readTextAssetsFromArtifact(std::shared_ptr<const runtime::Artifact> artifact) {
  TextAssets assets;
  assets.source = artifact->displayName();
  auto nameOf = [&](const char *section) {
    return artifact->displayName() + ": section '" + section + "'";
  };
  for (size_t i = 0; i < 4; ++i)
    if (const runtime::Artifact::Section *section = artifact->find(kTextFileNames[i]))
      slot(assets, i) =
          TextFile{nameOf(kTextFileNames[i]),
                   std::string(reinterpret_cast<const char *>(section->data), section->size)};
  if (const runtime::Artifact::Section *section = artifact->find(kCompiledTokenizerSection))
    assets.compiledTokenizer = TextAssets::Section{
        nameOf(kCompiledTokenizerSection),
        std::string_view(reinterpret_cast<const char *>(section->data), section->size)};
  assets.artifact = std::move(artifact);
  return assets;
}

bool isArtifactFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  char magic[sizeof(runtime::kArtifactMagic)] = {};
  return file.read(magic, sizeof(magic)) &&
         std::memcmp(magic, runtime::kArtifactMagic, sizeof(magic)) == 0;
}

TextAssets readTextAssets(const std::string &path) {
  TextAssets assets;
  if (isDirectory(path)) {
    assets = readTextAssetsFromFolder(path);
    if (!assets.tokenizer)
      throw runtime::LoadError(runtime::printable(path) +
                               ": no tokenizer.json in this folder");
    return assets;
  }
  if (isArtifactFile(path)) {
    assets = readTextAssetsFromArtifact(runtime::Artifact::open(path));
    if (!assets.tokenizer && !assets.compiledTokenizer)
      throw runtime::LoadError(runtime::printable(path) +
                               ": this artifact embeds no tokenizer (compiled with --no-tokenizer "
                               "or from a folder without tokenizer.json): pass --tokenizer "
                               "MODEL_DIR/tokenizer.json");
    return assets;
  }
  // A tokenizer.json (any name); its folder may hold the other files.
  TextFile tokenizer{path, readWholeFile(path)};
  const std::string folder = fs::path(path).parent_path().string();
  assets = readTextAssetsFromFolder(folder.empty() ? "." : folder, /*withTokenizer=*/false);
  assets.source = path;
  assets.tokenizer = std::move(tokenizer);
  return assets;
}

std::optional<std::string> chatTemplateSource(const TextAssets &assets) {
  if (assets.chatTemplate)
    return assets.chatTemplate->bytes;
  if (!assets.tokenizerConfig)
    return std::nullopt;
  nlohmann::json config =
      nlohmann::json::parse(assets.tokenizerConfig->bytes, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object())
    throw runtime::LoadError(runtime::printable(assets.tokenizerConfig->name) +
                             ": expected a JSON object");
  auto it = config.find("chat_template");
  if (it == config.end())
    return std::nullopt;
  if (it->is_string())
    return it->get<std::string>();
  if (it->is_array())
    for (const auto &entry : *it)
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string())
        return entry["template"].get<std::string>();
  throw runtime::LoadError(runtime::printable(assets.tokenizerConfig->name) +
                           ": chat_template: expected a string or a list with a \"default\" "
                           "template");
}

std::unique_ptr<Tokenizer> tokenizerOf(const TextAssets &assets) {
  if (assets.compiledTokenizer)
    return Tokenizer::fromCompiled(assets.compiledTokenizer->bytes, assets.compiledTokenizer->name);
  if (assets.tokenizer)
    return Tokenizer::fromJson(assets.tokenizer->bytes, assets.tokenizer->name);
  throw runtime::LoadError(runtime::printable(assets.source) + ": no tokenizer.json");
}

std::vector<runtime::ArtifactSection> textSections(const TextAssets &assets) {
  std::vector<runtime::ArtifactSection> sections;
  for (size_t i = 0; i < 4; ++i)
    if (const std::optional<TextFile> &file = slot(assets, i))
      sections.push_back({kTextFileNames[i], runtime::SectionKind::Data,
                          std::vector<uint8_t>(file->bytes.begin(), file->bytes.end())});
  return sections;
}

} // namespace q3::text
