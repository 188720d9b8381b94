#include "runtime/text/TokenizerJson.h"

#include "runtime/LoadError.h"

#include <fmt/format.h>

namespace q3::text {
namespace {

using json = nlohmann::json;


/// Builds a JSON tree like nlohmann's own DOM parser, except that the arrays
/// model.vocab and model.merges go to TokenizerJson's vectors.
class Handler : public nlohmann::json_sax<json> {
public:
  explicit Handler(TokenizerJson &out) : out_(out) {}

  std::string error;

  bool null() override { return value(json(nullptr), "null"); }
  bool boolean(bool v) override { return value(json(v), "a boolean"); }
  bool number_integer(number_integer_t v) override {
    if (mode_ == Mode::Vocab)
      return vocabId(v);
    return value(json(v), "a number");
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == Mode::Vocab)
      return vocabId(v > uint64_t(INT64_MAX) ? -1 : int64_t(v));
    return value(json(v), "a number");
  }
  bool number_float(number_float_t v, const string_t &) override {
    return value(json(v), "a number");
  }
  bool string(string_t &v) override {
    if (mode_ == Mode::Merges)
      return mergeString(v);
    return value(json(std::move(v)), "a string");
  }
  bool binary(binary_t &) override { return fail("unexpected binary value"); }

  bool start_object(std::size_t) override {
    if (mode_ == Mode::Vocab)
      return fail(fmt::format("model.vocab: token '{}': expected an integer id, found an object",
                              printableKey()));
    if (mode_ == Mode::Merges)
      return fail(fmt::format("model.merges[{}]: expected \"a b\" or [\"a\", \"b\"], found an object",
                              out_.merges.size()));
    if (isModelField("vocab")) {
      mode_ = Mode::Vocab;
      return true;
    }
    return open(json::object());
  }
  bool end_object() override {
    if (mode_ == Mode::Vocab) {
      mode_ = Mode::Tree;
      return true;
    }
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    if (mode_ == Mode::Vocab)
      return fail(fmt::format("model.vocab: token '{}': expected an integer id, found an array",
                              printableKey()));
    if (mode_ == Mode::Merges) {
      if (pair_)
        return fail(fmt::format("model.merges[{}]: expected two strings, found a nested array",
                                out_.merges.size()));
      pair_ = true;
      pairParts_.clear();
      return true;
    }
    if (isModelField("merges")) {
      mode_ = Mode::Merges;
      return true;
    }
    if (isModelField("vocab"))
      return fail("model.vocab: expected an object of token -> id, found an array");
    return open(json::array());
  }
  bool end_array() override {
    if (mode_ == Mode::Merges) {
      if (!pair_) {
        mode_ = Mode::Tree;
        return true;
      }
      pair_ = false;
      if (pairParts_.size() != 2)
        return fail(fmt::format("model.merges[{}]: expected two strings, found {}",
                                out_.merges.size(), pairParts_.size()));
      out_.merges.emplace_back(std::move(pairParts_[0]), std::move(pairParts_[1]));
      return true;
    }
    stack_.pop_back();
    return true;
  }
  bool key(string_t &k) override {
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string &, const nlohmann::detail::exception &e) override {
    error = "invalid JSON: " + runtime::describeJsonError(e);
    return false;
  }

private:
  enum class Mode { Tree, Vocab, Merges };

  bool fail(std::string message) {
    error = std::move(message);
    return false;
  }
  std::string printableKey() const { return runtime::printable(key_); }

  /// True when the value about to start is the field `name` of the
  /// top-level "model" object.
  bool isModelField(const char *name) const {
    return stack_.size() == 2 && stack_[1]->is_object() && key_ == name && modelDepth_;
  }

  bool vocabId(int64_t id) {
    out_.vocab.emplace_back(std::move(key_), id);
    return true;
  }
  bool mergeString(std::string &v) {
    if (pair_) {
      pairParts_.push_back(std::move(v));
      return true;
    }
    const size_t space = v.find(' ');
    if (space == std::string::npos || v.find(' ', space + 1) != std::string::npos)
      return fail(fmt::format("model.merges[{}]: expected two tokens separated by one space, "
                              "found '{}'",
                              out_.merges.size(), runtime::printable(v)));
    out_.merges.emplace_back(v.substr(0, space), v.substr(space + 1));
    return true;
  }

  /// Puts a value where the tree expects the next one; returns it.
  json *place(json &&v) {
    if (stack_.empty()) {
      out_.rest = std::move(v);
      return &out_.rest;
    }
    json &parent = *stack_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    json &slot = parent[key_];
    slot = std::move(v);
    return &slot;
  }
  bool value(json &&v, const char *what) {
    if (mode_ == Mode::Vocab)
      return fail(fmt::format("model.vocab: token '{}': expected an integer id, found {}",
                              printableKey(), what));
    if (mode_ == Mode::Merges)
      return fail(fmt::format("model.merges[{}]: expected \"a b\" or [\"a\", \"b\"], found {}",
                              out_.merges.size(), what));
    place(std::move(v));
    return true;
  }
  bool open(json &&container) {
    // The "model" object at the top level is where vocab and merges live.
    const bool isModel = stack_.size() == 1 && stack_[0]->is_object() && key_ == "model";
    json *placed = place(std::move(container));
    stack_.push_back(placed);
    if (stack_.size() == 2)
      modelDepth_ = isModel;
    return true;
  }

  TokenizerJson &out_;
  std::vector<json *> stack_;
  std::string key_;
  Mode mode_ = Mode::Tree;
  bool modelDepth_ = false;
  bool pair_ = false;
  std::vector<std::string> pairParts_;
};

} // namespace

TokenizerJson parseTokenizerJson(std::string_view text, const std::string &displayName) {
  TokenizerJson out;
  // Qwen3's vocab entries and merges take ~35 bytes of JSON each: reserving
  // one per 16 bytes spares the copies (and page faults) of growing
  // 150k-entry arrays; reserved memory nothing fills is never touched.
  out.vocab.reserve(text.size() / 16);
  out.merges.reserve(text.size() / 16);
  Handler handler(out);
  const bool ok = json::sax_parse(text.begin(), text.end(), &handler);
  if (!ok || !handler.error.empty())
    throw runtime::LoadError(displayName + ": " +
                             (handler.error.empty() ? "invalid JSON" : handler.error));
  if (!out.rest.is_object())
    throw runtime::LoadError(displayName + ": expected a JSON object, found " +
                             std::string(out.rest.type_name()));
  return out;
}

} // namespace q3::text
