//===- TemplateCommand.cpp - q3run template --------------------------------===//
//
// The chat template on its own: a messages file in, the exact prompt text
// out (nothing added), or its token ids with --ids.
//
//===----------------------------------------------------------------------===//
#include "tools/q3run/TextCommands.h"

#include "tools/q3run/TextInput.h"
#include "tools/q3run/TextSession.h"

#include <cstdio>

namespace q3::q3run {

int templateCommand(const std::vector<std::string> &args) {
  std::string model, messagesFile, toolsFile;
  bool noThink = false, noGenerationPrompt = false, ids = false;
  ArgParser parser(
      "q3run template",
      "q3run template --messages FILE [--model PATH] [--tools FILE] [--no-think] "
      "[--no-generation-prompt] [--ids]",
      "Prints the prompt text Qwen3's chat template makes of a conversation, exactly (no\n"
      "newline is added). FILE is a JSON array of messages ({\"role\": system|user|assistant|\n"
      "tool, \"content\": ..., optional \"reasoning_content\" and \"tool_calls\"}), or an object\n"
      "with \"messages\" and optional \"tools\".");
  parser.addString({"--model"}, &model, "PATH",
                   "a model folder, tokenizer.json or artifact: its chat template is checked to be "
                   "Qwen3's, and --ids uses its tokenizer");
  parser.addString({"--messages"}, &messagesFile, "FILE", "the conversation ('-': stdin)",
                   /*required=*/true);
  parser.addString({"--tools"}, &toolsFile, "FILE", "a JSON array of tool schemas");
  parser.addFlag({"--no-think"}, &noThink, "enable_thinking=false");
  parser.addFlag({"--no-generation-prompt"}, &noGenerationPrompt,
                 "do not open an assistant turn at the end (add_generation_prompt=false)");
  parser.addFlag({"--ids"}, &ids, "print the token ids (\"ids: ...\") instead of the text");
  if (!parser.parse(args))
    return 0;
  if (ids && model.empty())
    throw UsageError("--ids needs --model (the tokenizer)");
  const nlohmann::ordered_json file = readJsonArgument(messagesFile, "--messages");
  const std::string name = runtime::printable(messagesFile == "-" ? "stdin" : messagesFile);
  text::Conversation conversation;
  if (file.is_object()) {
    if (!file.contains("messages"))
      throw UsageError(name + ": expected an array of messages or an object with \"messages\"");
    conversation.messages = text::parseChatMessages(file["messages"], name + ": messages");
    if (file.contains("tools") && !file["tools"].is_null())
      conversation.tools = text::parseChatTools(file["tools"], name + ": tools");
  } else {
    conversation.messages = text::parseChatMessages(file, name);
  }
  if (!toolsFile.empty())
    conversation.tools =
        text::parseChatTools(readJsonArgument(toolsFile, "--tools"), runtime::printable(toolsFile));
  text::ChatTemplateOptions options;
  options.addGenerationPrompt = !noGenerationPrompt;
  options.enableThinking = !noThink;
  const std::string text = text::renderQwen3Chat(conversation, options);
  if (!model.empty()) {
    TextSession session;
    session.assets = text::readTextAssets(model);
    warnAboutChatTemplate(session);
    if (ids) {
      std::string line = "ids:";
      for (int32_t id : text::tokenizerOf(session.assets)->encode(text))
        line += " " + std::to_string(id);
      std::puts(line.c_str());
      return 0;
    }
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

} // namespace q3::q3run
