// The native Qwen3 chat template against the real Jinja template's output
// (scripts/render_chat_template.py with Debian's python3-jinja2 on
// models/qwen3-tokenizer/tokenizer_config.json), byte for byte, on the
// conversations of tests/text/data/chat_cases.json: system prompts,
// multi-turn, generation prompt, thinking on and off, earlier thinking
// stripped, reasoning_content, tools, tool calls, tool responses.
#include "tests/text/TextTestData.h"

#include "runtime/text/ChatTemplate.h"
#include "runtime/text/PythonJson.h"
#include "runtime/text/TextError.h"

#include <gtest/gtest.h>

namespace q3::text {
namespace {

using json = nlohmann::ordered_json;
using testing::readFile;
using testing::readJson;
using testing::sourcePath;

TEST(ChatTemplate, MatchesJinjaByteForByte) {
  const json cases = readJson(sourcePath("tests/text/data/chat_cases.json"));
  const json expected = readJson(sourcePath("tests/text/data/chat_expected.json"));
  ASSERT_EQ(cases.size(), expected.size());
  EXPECT_GE(cases.size(), 12u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const json &c = cases[i];
    ASSERT_EQ(c["name"], expected[i]["name"]);
    Conversation conversation;
    conversation.messages = parseChatMessages(c["messages"], "messages");
    if (c.contains("tools"))
      conversation.tools = parseChatTools(c["tools"], "tools");
    ChatTemplateOptions options;
    options.addGenerationPrompt = c.value("add_generation_prompt", false);
    options.enableThinking = c.value("enable_thinking", true);
    EXPECT_EQ(renderQwen3Chat(conversation, options), expected[i]["text"].get<std::string>())
        << c["name"];
  }
}

TEST(ChatTemplate, RecognizesQwen3sTemplate) {
  const json config = readJson(sourcePath("models/qwen3-tokenizer/tokenizer_config.json"));
  const std::string source = config["chat_template"].get<std::string>();
  EXPECT_TRUE(isQwen3ChatTemplate(source));
  EXPECT_TRUE(isQwen3ChatTemplate(source + "\n"));
  EXPECT_FALSE(isQwen3ChatTemplate(source.substr(1)));
}

std::string messagesError(const std::string &text) {
  try {
    parseChatMessages(json::parse(text), "chat.json");
  } catch (const TextError &error) {
    return error.what();
  }
  return "(no error)";
}

TEST(ChatTemplate, BadMessagesNameTheField) {
  EXPECT_EQ(messagesError(R"([{"role": "robot", "content": "x"}])"),
            "chat.json[0].role: expected system, user, assistant or tool, found 'robot'");
  EXPECT_EQ(messagesError(R"([{"role": "user", "content": "a"}, {"role": "user", "content": 42}])"),
            "chat.json[1].content: expected a string, found 42");
  EXPECT_EQ(messagesError(R"([{"role": "user"}])"),
            "chat.json[0].content: expected a string, found none");
  EXPECT_EQ(messagesError(R"([])"), "chat.json: expected at least one message, found none");
  EXPECT_EQ(messagesError(R"({"role": "user"})"),
            "chat.json: expected an array of messages, found {\"role\":\"user\"}");
  EXPECT_EQ(messagesError(
                R"([{"role": "assistant", "content": "", "tool_calls": [{"function": {"arguments": {}}}]}])"),
            "chat.json[0].tool_calls[0].function.name: expected a string, found none");
  EXPECT_EQ(messagesError(R"([{"role": "assistant", "content": "", "reasoning_content": 1}])"),
            "chat.json[0].reasoning_content: expected a string or null, found 1");
}

TEST(PythonJson, WritesWhatJsonDumpsWrites) {
  EXPECT_EQ(pythonJsonDumps(json::parse(R"({"b": [1, 2.5, -0.0], "a": {"x": null, "y": true}})")),
            R"({"b": [1, 2.5, -0.0], "a": {"x": null, "y": true}})");
  EXPECT_EQ(pythonJsonDumps(json(1e16)), "1e+16");
  EXPECT_EQ(pythonJsonDumps(json(1e15)), "1000000000000000.0");
  EXPECT_EQ(pythonJsonDumps(json(0.0001)), "0.0001");
  EXPECT_EQ(pythonJsonDumps(json(0.00001)), "1e-05");
  EXPECT_EQ(pythonJsonDumps(json(100.0)), "100.0");
  EXPECT_EQ(pythonJsonDumps(json(1.0 / 3)), "0.3333333333333333");
  EXPECT_EQ(pythonJsonDumps(json("tab\t, quote \", ctrl \x01, z\xC3\xBC")),
            "\"tab\\t, quote \\\", ctrl \\u0001, z\xC3\xBC\"");
}

} // namespace
} // namespace q3::text
