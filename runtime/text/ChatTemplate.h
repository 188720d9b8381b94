// Qwen3's chat template, natively: renders a conversation to the prompt text
// byte for byte as the Jinja template in Qwen3's tokenizer_config.json does
// under Hugging Face transformers (tests/text/data/chat_expected.json holds
// the real Jinja engine's output for the test conversations).
//
// What it covers: a system prompt; multi-turn; the generation prompt; the
// thinking switch (enable_thinking=false opens the assistant turn with an
// empty <think></think>); earlier assistant turns lose their <think> part
// (and `reasoning_content` is used when given); tools (the "# Tools" system
// block, each tool as JSON); assistant `tool_calls`; `tool` messages grouped
// into one user turn of <tool_response> blocks.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace q3::text {

struct ChatMessage {
  std::string role; // "system", "user", "assistant" or "tool"
  std::string content;
  std::optional<std::string> reasoningContent; // assistant only
  nlohmann::ordered_json toolCalls;            // assistant only: null or an array
};

struct Conversation {
  std::vector<ChatMessage> messages;
  nlohmann::ordered_json tools = nlohmann::ordered_json::array(); // the tools' JSON schemas
};

struct ChatTemplateOptions {
  bool addGenerationPrompt = true;
  bool enableThinking = true;
};

/// The prompt text. Throws TextError for a conversation the template cannot
/// render (no messages).
std::string renderQwen3Chat(const Conversation &conversation, const ChatTemplateOptions &options);

/// Messages in the OpenAI / Hugging Face form: an array of {"role",
/// "content", optional "reasoning_content", optional "tool_calls"}, where a
/// tool call is {"function": {"name", "arguments"}} or {"name", "arguments"}.
/// Throws TextError "<what>[2].content: expected a string, found 42".
std::vector<ChatMessage> parseChatMessages(const nlohmann::ordered_json &messages,
                                           const std::string &what);

/// A tools array (each tool an object); TextError naming `what` otherwise.
nlohmann::ordered_json parseChatTools(const nlohmann::ordered_json &tools, const std::string &what);

/// True when `templateText` is the chat template this file renders (the one
/// Qwen3's tokenizer_config.json ships).
bool isQwen3ChatTemplate(const std::string &templateText);

} // namespace q3::text
