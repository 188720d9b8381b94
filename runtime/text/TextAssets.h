// The files that turn a model's token ids into text and back, wherever they
// come from: a Hugging Face model folder, a tokenizer.json file (its folder
// supplies the others), or a q3c artifact that embeds them as data sections
// (docs/artifact.md, "Text sections").
//
//   tokenizer.json          the tokenizer
//   tokenizer_config.json   the chat template (field chat_template) and the eos token
//   chat_template.jinja     the chat template, where a model ships it separately
//   generation_config.json  sampling defaults and eos ids
#pragma once

#include "runtime/Artifact.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace q3::text {

class Tokenizer;

/// One file's bytes and the name errors about it should use ("DIR/tokenizer.json",
/// "model.q3: section 'tokenizer.json'").
struct TextFile {
  std::string name;
  std::string bytes;
};

struct TextAssets {
  std::string source; // the path they were read from
  std::optional<TextFile> tokenizer;
  /// The compiled tokenizer (Tokenizer::compile) an artifact embeds instead
  /// of tokenizer.json, in place in `artifact`; preferred where both are
  /// present.
  struct Section {
    std::string name;
    std::string_view bytes;
  };
  std::optional<Section> compiledTokenizer;
  std::shared_ptr<const runtime::Artifact> artifact; // keeps compiledTokenizer's bytes
  std::optional<TextFile> tokenizerConfig;
  std::optional<TextFile> chatTemplate;
  std::optional<TextFile> generationConfig;
};

/// The file names above, which are also the artifact's section names.
extern const char *const kTextFileNames[4];
/// The artifact section holding the compiled tokenizer.
extern const char *const kCompiledTokenizerSection;

/// Reads what `folder` has of the four files (none is required);
/// tokenizer.json only `withTokenizer`.
TextAssets readTextAssetsFromFolder(const std::string &folder, bool withTokenizer = true);

/// The text sections of `artifact` (none is required); the assets hold on
/// to it.
TextAssets readTextAssetsFromArtifact(std::shared_ptr<const runtime::Artifact> artifact);

/// `path` is a folder, an artifact (recognized by its magic) or a
/// tokenizer.json (whose folder supplies the other files). Throws
/// runtime::LoadError when it cannot be read or holds no tokenizer.
TextAssets readTextAssets(const std::string &path);

/// True when `path` is a file that starts with the artifact magic.
bool isArtifactFile(const std::string &path);

/// The chat template's source: chat_template.jinja, else tokenizer_config.json's
/// "chat_template" (a string, or a list of {name, template} whose "default"
/// is taken). Nothing when neither has one; LoadError when
/// tokenizer_config.json is not a JSON object.
std::optional<std::string> chatTemplateSource(const TextAssets &assets);

/// The tokenizer of `assets`: the compiled one where there is one, else
/// tokenizer.json's. Throws runtime::LoadError when there is neither.
std::unique_ptr<Tokenizer> tokenizerOf(const TextAssets &assets);

/// The files as data sections named after them, in the order of
/// kTextFileNames (what writeTextAssets writes out).
std::vector<runtime::ArtifactSection> textSections(const TextAssets &assets);

} // namespace q3::text
