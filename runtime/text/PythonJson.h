// JSON text exactly as Python's json.dumps(value, ensure_ascii=False) writes
// it (", " and ": " separators, keys in their order, non-ASCII kept, floats as
// repr() writes them): what Qwen3's chat template emits for `x | tojson` when
// rendered by Hugging Face transformers.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace q3::text {

std::string pythonJsonDumps(const nlohmann::ordered_json &value);

} // namespace q3::text
