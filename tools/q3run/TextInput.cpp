#include "tools/q3run/TextInput.h"

#include "tools/q3run/ArgParser.h"

#include "runtime/LoadError.h"
#include "runtime/ReadStream.h"
#include "runtime/text/Utf8.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

namespace q3::q3run {

void checkUtf8(const std::string &text, const std::string &what) {
  const size_t bad = text::findInvalidUtf8(text);
  if (bad != std::string::npos)
    throw UsageError(fmt::format("{}: invalid UTF-8 at byte {} (0x{:02X}): expected UTF-8 text",
                                 what, bad, static_cast<unsigned char>(text[bad])));
}

std::string readStdin() {
  std::string text = runtime::readToEnd(stdin);
  if (std::ferror(stdin))
    throw UsageError(std::string("cannot read stdin: ") + std::strerror(errno));
  return text;
}

std::string readTextArgument(const ArgParser &parser, const std::string &text,
                             const std::string &file, const std::string &textName,
                             const std::string &fileName) {
  const bool haveText = parser.given(textName), haveFile = parser.given(fileName);
  if (haveText == haveFile)
    throw UsageError("give " + textName + " TEXT or " + fileName + " FILE" +
                     (haveText ? ", not both" : ""));
  if (haveText) {
    checkUtf8(text, textName);
    return text;
  }
  std::string contents;
  if (file == "-") {
    contents = readStdin();
    checkUtf8(contents, fileName + " - (stdin)");
    return contents;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw UsageError(fmt::format("{} {}: cannot open: {}", fileName, runtime::printable(file),
                                 std::strerror(errno)));
  contents.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  checkUtf8(contents, runtime::printable(file));
  return contents;
}

std::unique_ptr<text::Tokenizer> loadTokenizer(const std::string &path) {
  return text::tokenizerOf(text::readTextAssets(path));
}

std::string jsonString(const std::string &text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace q3::q3run
