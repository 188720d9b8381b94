// Each branch below is one branch of the Jinja template, in its order; the
// string helpers are the Python str methods the template calls.
#include "runtime/text/ChatTemplate.h"

#include "runtime/Checksum.h"
#include "runtime/LoadError.h"
#include "runtime/text/PythonJson.h"
#include "runtime/text/TextError.h"

#include <fmt/format.h>

namespace q3::text {
namespace {

using json = nlohmann::ordered_json;

bool startsWith(const std::string &text, std::string_view prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

bool endsWith(const std::string &text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// str.lstrip('\n'), str.rstrip('\n'), str.strip('\n')
std::string lstripNewlines(const std::string &text) {
  const size_t start = text.find_first_not_of('\n');
  return start == std::string::npos ? std::string() : text.substr(start);
}
std::string rstripNewlines(const std::string &text) {
  const size_t end = text.find_last_not_of('\n');
  return end == std::string::npos ? std::string() : text.substr(0, end + 1);
}
std::string stripNewlines(const std::string &text) { return lstripNewlines(rstripNewlines(text)); }

/// str.split(separator)[0] and str.split(separator)[-1]
std::string firstPart(const std::string &text, std::string_view separator) {
  const size_t at = text.find(separator);
  return at == std::string::npos ? text : text.substr(0, at);
}
std::string lastPart(const std::string &text, std::string_view separator) {
  const size_t at = text.rfind(separator);
  return at == std::string::npos ? text : text.substr(at + separator.size());
}

/// Jinja's truthiness of a JSON value (Python's bool()).
bool truthy(const json &value) {
  if (value.is_null())
    return false;
  if (value.is_boolean())
    return value.get<bool>();
  if (value.is_number())
    return value.get<double>() != 0.0;
  return !value.empty(); // strings, arrays, objects
}

constexpr std::string_view kToolsHeader =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are "
    "provided with function signatures within <tools></tools> XML tags:\n<tools>";
constexpr std::string_view kToolsFooter =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
    "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";

void renderSystemAndTools(const Conversation &c, std::string &out) {
  const ChatMessage &first = c.messages.front();
  if (truthy(c.tools)) {
    out += "<|im_start|>system\n";
    if (first.role == "system")
      out += first.content + "\n\n";
    out += kToolsHeader;
    for (const json &tool : c.tools)
      out += "\n" + pythonJsonDumps(tool);
    out += kToolsFooter;
  } else if (first.role == "system") {
    out += "<|im_start|>system\n" + first.content + "<|im_end|>\n";
  }
}

/// The index of the last user message that is a real query (not tool output
/// wrapped in <tool_response>); the last index when there is none.
size_t lastQueryIndex(const std::vector<ChatMessage> &messages) {
  for (size_t i = messages.size(); i-- > 0;) {
    const ChatMessage &m = messages[i];
    if (m.role == "user" &&
        !(startsWith(m.content, "<tool_response>") && endsWith(m.content, "</tool_response>")))
      return i;
  }
  return messages.size() - 1;
}

void renderToolCalls(const ChatMessage &m, const std::string &content, std::string &out) {
  if (!truthy(m.toolCalls))
    return;
  bool first = true;
  for (const json &entry : m.toolCalls) {
    if ((first && !content.empty()) || !first)
      out += "\n";
    first = false;
    const json &call = entry.contains("function") && truthy(entry["function"]) ? entry["function"]
                                                                                  : entry;
    out += "<tool_call>\n{\"name\": \"";
    out += call["name"].get<std::string>();
    out += "\", \"arguments\": ";
    const json &arguments = call["arguments"];
    out += arguments.is_string() ? arguments.get<std::string>() : pythonJsonDumps(arguments);
    out += "}\n</tool_call>";
  }
}

void renderAssistant(const ChatMessage &m, bool afterLastQuery, bool isLast, std::string &out) {
  std::string content = m.content;
  std::string reasoning;
  if (m.reasoningContent) {
    reasoning = *m.reasoningContent;
  } else if (m.content.find("</think>") != std::string::npos) {
    content = lstripNewlines(lastPart(m.content, "</think>"));
    reasoning = lstripNewlines(lastPart(rstripNewlines(firstPart(m.content, "</think>")), "<think>"));
  }
  if (afterLastQuery && (isLast || !reasoning.empty()))
    out += "<|im_start|>assistant\n<think>\n" + stripNewlines(reasoning) + "\n</think>\n\n" +
           lstripNewlines(content);
  else
    out += "<|im_start|>assistant\n" + content;
  renderToolCalls(m, content, out);
  out += "<|im_end|>\n";
}

[[noreturn]] void fail(const std::string &where, const std::string &message) {
  throw TextError(where + ": " + message);
}

std::string shortJson(const json &value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 60)
    text = text.substr(0, 57) + "...";
  return runtime::printable(text);
}

void checkToolCall(const json &call, const std::string &where) {
  if (!call.is_object())
    fail(where, "expected an object, found " + shortJson(call));
  const json &body = call.contains("function") && truthy(call["function"]) ? call["function"] : call;
  const std::string bodyWhere = &body == &call ? where : where + ".function";
  if (!body.is_object())
    fail(bodyWhere, "expected an object, found " + shortJson(body));
  if (!body.contains("name") || !body["name"].is_string())
    fail(bodyWhere + ".name", "expected a string, found " +
                                  (body.contains("name") ? shortJson(body["name"]) : "none"));
  if (!body.contains("arguments"))
    fail(bodyWhere + ".arguments", "expected a JSON string or object, found none");
}

} // namespace

std::string renderQwen3Chat(const Conversation &conversation, const ChatTemplateOptions &options) {
  const std::vector<ChatMessage> &messages = conversation.messages;
  if (messages.empty())
    throw TextError("the conversation has no messages");
  std::string out;
  renderSystemAndTools(conversation, out);
  const size_t lastQuery = lastQueryIndex(messages);
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage &m = messages[i];
    const bool isLast = i + 1 == messages.size();
    if (m.role == "user" || (m.role == "system" && i != 0)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      renderAssistant(m, i > lastQuery, isLast, out);
    } else if (m.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool")
        out += "<|im_start|>user";
      out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (isLast || messages[i + 1].role != "tool")
        out += "<|im_end|>\n";
    }
  }
  if (options.addGenerationPrompt) {
    out += "<|im_start|>assistant\n";
    if (!options.enableThinking)
      out += "<think>\n\n</think>\n\n";
  }
  return out;
}

std::vector<ChatMessage> parseChatMessages(const json &list, const std::string &what) {
  if (!list.is_array())
    fail(what, "expected an array of messages, found " + shortJson(list));
  if (list.empty())
    fail(what, "expected at least one message, found none");
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = fmt::format("{}[{}]", what, i);
    const json &entry = list[i];
    if (!entry.is_object())
      fail(where, "expected an object with \"role\" and \"content\", found " + shortJson(entry));
    ChatMessage message;
    if (!entry.contains("role") || !entry["role"].is_string())
      fail(where + ".role", "expected a string, found " +
                                (entry.contains("role") ? shortJson(entry["role"]) : "none"));
    message.role = entry["role"].get<std::string>();
    if (message.role != "system" && message.role != "user" && message.role != "assistant" &&
        message.role != "tool")
      fail(where + ".role", "expected system, user, assistant or tool, found '" +
                                runtime::printable(message.role) + "'");
    if (!entry.contains("content") || !entry["content"].is_string())
      fail(where + ".content", "expected a string, found " +
                                   (entry.contains("content") ? shortJson(entry["content"]) : "none"));
    message.content = entry["content"].get<std::string>();
    if (entry.contains("reasoning_content") && !entry["reasoning_content"].is_null()) {
      if (!entry["reasoning_content"].is_string())
        fail(where + ".reasoning_content",
             "expected a string or null, found " + shortJson(entry["reasoning_content"]));
      message.reasoningContent = entry["reasoning_content"].get<std::string>();
    }
    if (entry.contains("tool_calls") && !entry["tool_calls"].is_null()) {
      const json &calls = entry["tool_calls"];
      if (!calls.is_array())
        fail(where + ".tool_calls", "expected an array, found " + shortJson(calls));
      for (size_t j = 0; j < calls.size(); ++j)
        checkToolCall(calls[j], fmt::format("{}.tool_calls[{}]", where, j));
      message.toolCalls = calls;
    }
    messages.push_back(std::move(message));
  }
  return messages;
}

json parseChatTools(const json &tools, const std::string &what) {
  if (!tools.is_array())
    fail(what, "expected an array of tools, found " + shortJson(tools));
  for (size_t i = 0; i < tools.size(); ++i)
    if (!tools[i].is_object())
      fail(fmt::format("{}[{}]", what, i), "expected an object (a tool's JSON schema), found " +
                                               shortJson(tools[i]));
  return tools;
}

bool isQwen3ChatTemplate(const std::string &templateText) {
  // FNV-1a 64 of the chat_template string of Qwen3's tokenizer_config.json
  // (4116 bytes); a chat_template.jinja file may end with a newline more.
  constexpr uint64_t kQwen3TemplateHash = 0x2bfdb7aa9754484eull;
  const std::string text = rstripNewlines(templateText);
  return runtime::fnv1a64(text.data(), text.size()) == kQwen3TemplateHash;
}

} // namespace q3::text
