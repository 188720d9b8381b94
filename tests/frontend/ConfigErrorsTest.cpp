// Every way a config.json can be rejected, and the exact one-line message for it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ConfigTestUtil.h"
#include "frontend/ModelConfig.h"

namespace q3::frontend::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using ::testing::StrEq;

// --- JSON syntax and shape -------------------------------------------------

TEST(ConfigErrors, MalformedJsonReportsLineAndColumn) {
  // Line 3, column 8 is the '}' where a ':' was expected.
  std::string text = "{\n  \"hidden_size\": 64,\n  \"abc\"}\n";
  EXPECT_THAT(errorOfText(text), StrEq("config.json:3:8: malformed JSON: syntax error while parsing object separator - "
                    "unexpected '}'; expected ':'"));
}

TEST(ConfigErrors, MalformedJsonOnTheFirstLine) {
  // nlohmann stops at the first character that cannot continue the literal.
  EXPECT_THAT(errorOfText("{\"a\": tru}"), StartsWith("config.json:1:10: malformed JSON: "));
}

TEST(ConfigErrors, TruncatedJsonPointsPastTheEnd) {
  EXPECT_THAT(errorOfText("{\n  \"a\": 1,\n"), StartsWith("config.json:3:1: malformed JSON: "));
}

TEST(ConfigErrors, EmptyInput) {
  EXPECT_THAT(errorOfText(""), StartsWith("config.json:1:1: malformed JSON: "));
}

TEST(ConfigErrors, MalformedJsonReasonIsOneLineWithoutNlohmannPrefix) {
  std::string message = errorOfText("{\n\"a\": \"x\ny\"}");
  EXPECT_THAT(message, StartsWith("config.json:2:"));
  EXPECT_THAT(message, Not(HasSubstr("json.exception")));
  EXPECT_THAT(message, Not(HasSubstr("\n")));
}

TEST(ConfigErrors, TopLevelMustBeAnObject) {
  EXPECT_EQ(errorOfText("[1, 2]"),
            "config.json: expected a JSON object at the top level, found an array of 2 elements");
  EXPECT_EQ(errorOfText("\"x\""), "config.json: expected a JSON object at the top level, found string \"x\"");
}

// --- required fields and types ---------------------------------------------

class RequiredField : public ::testing::TestWithParam<const char *> {};

TEST_P(RequiredField, IsReportedWhenMissing) {
  EXPECT_EQ(errorOf(withoutField(GetParam())),
            std::string("config.json: missing required field '") + GetParam() + "'");
}

INSTANTIATE_TEST_SUITE_P(ConfigErrors, RequiredField,
                         ::testing::Values("hidden_size", "intermediate_size", "num_hidden_layers",
                                           "num_attention_heads", "vocab_size",
                                           "max_position_embeddings"));

TEST(ConfigErrors, IntegerGivenAsString) {
  EXPECT_EQ(errorOf(withField("hidden_size", "1024")),
            "config.json: field 'hidden_size': expected an integer, found string \"1024\"");
}

TEST(ConfigErrors, IntegerGivenAsFloat) {
  EXPECT_EQ(errorOf(withField("hidden_size", 1024.0)),
            "config.json: field 'hidden_size': expected an integer, found 1024.0");
}

TEST(ConfigErrors, IntegerGivenAsBoolNullArrayObject) {
  EXPECT_EQ(errorOf(withField("vocab_size", true)),
            "config.json: field 'vocab_size': expected an integer, found true");
  EXPECT_EQ(errorOf(withField("vocab_size", nullptr)),
            "config.json: field 'vocab_size': expected an integer, found null");
  EXPECT_EQ(errorOf(withField("vocab_size", {1, 2})),
            "config.json: field 'vocab_size': expected an integer, found an array of 2 elements");
  EXPECT_EQ(errorOf(withField("num_hidden_layers", json::object())),
            "config.json: field 'num_hidden_layers': expected an integer, found an object");
}

TEST(ConfigErrors, IntegerBeyond64Bits) {
  EXPECT_EQ(errorOfText(R"({"hidden_size": 18446744073709551615})"),
            "config.json: field 'hidden_size': expected an integer that fits in 64 bits, found "
            "18446744073709551615");
}

TEST(ConfigErrors, LongStringsAreShortenedInMessages) {
  std::string message = errorOf(withField("hidden_size", std::string(1000, 'x')));
  EXPECT_THAT(message, HasSubstr("found string \"xxxx"));
  EXPECT_THAT(message, HasSubstr("...\""));
  EXPECT_LT(message.size(), 200u);
}

class PositiveField : public ::testing::TestWithParam<const char *> {};

TEST_P(PositiveField, RejectsZeroAndNegative) {
  std::string prefix = std::string("config.json: field '") + GetParam() + "': ";
  EXPECT_EQ(errorOf(withField(GetParam(), 0)), prefix + "expected a positive integer, found 0");
  EXPECT_EQ(errorOf(withField(GetParam(), -4)), prefix + "expected a positive integer, found -4");
}

INSTANTIATE_TEST_SUITE_P(ConfigErrors, PositiveField,
                         ::testing::Values("hidden_size", "intermediate_size", "num_hidden_layers",
                                           "num_attention_heads", "num_key_value_heads",
                                           "head_dim", "vocab_size", "max_position_embeddings"));

TEST(ConfigErrors, RealFieldsMustBePositiveFiniteNumbers) {
  EXPECT_EQ(errorOf(withField("rms_norm_eps", 0)),
            "config.json: field 'rms_norm_eps': expected a positive finite number, found 0");
  EXPECT_EQ(errorOf(withField("rope_theta", -1.5)),
            "config.json: field 'rope_theta': expected a positive finite number, found -1.5");
  EXPECT_EQ(errorOf(withField("rope_theta", "1e6")),
            "config.json: field 'rope_theta': expected a number, found string \"1e6\"");
}

TEST(ConfigErrors, NumberOverflowIsMalformedJsonWithAPosition) {
  // nlohmann reports this one without a position; we still find it.
  EXPECT_EQ(errorOfText("{\n  \"rms_norm_eps\": 1e999}"),
            "config.json:2:23: malformed JSON: number overflow parsing '1e999'");
}

TEST(ConfigErrors, BooleanFieldsMustBeBooleans) {
  EXPECT_EQ(errorOf(withField("tie_word_embeddings", 1)),
            "config.json: field 'tie_word_embeddings': expected true or false, found 1");
  EXPECT_EQ(errorOf(withField("attention_bias", "false")),
            "config.json: field 'attention_bias': expected true or false, found string \"false\"");
}

TEST(ConfigErrors, TokenIdsMustBeIntegers) {
  EXPECT_EQ(errorOf(withField("bos_token_id", "1")),
            "config.json: field 'bos_token_id': expected an integer, found string \"1\"");
  EXPECT_EQ(errorOf(withField("eos_token_id", {1, 2.5})),
            "config.json: field 'eos_token_id': expected an integer, found 2.5");
}

// --- shapes ----------------------------------------------------------------

TEST(ConfigErrors, HeadsMustBeDivisibleByKvHeads) {
  EXPECT_EQ(errorOf(withField("num_key_value_heads", 3)),
            "config.json: field 'num_key_value_heads': num_attention_heads (4) must be divisible "
            "by num_key_value_heads (3)");
  EXPECT_EQ(errorOf(withField("num_key_value_heads", 8)),
            "config.json: field 'num_key_value_heads': num_attention_heads (4) must be divisible "
            "by num_key_value_heads (8)");
}

TEST(ConfigErrors, DefaultHeadDimNeedsDivisibleHiddenSize) {
  json config = withoutField("head_dim");
  config["num_attention_heads"] = 3;
  config["num_key_value_heads"] = 3;
  EXPECT_EQ(errorOf(config),
            "config.json: field 'head_dim': head_dim is absent and hidden_size (64) is not "
            "divisible by num_attention_heads (3)");
}

TEST(ConfigErrors, HeadDimMustBeEven) {
  EXPECT_EQ(errorOf(withField("head_dim", 33)),
            "config.json: field 'head_dim': expected an even number (RoPE rotates pairs), found 33");
  json derived = withoutField("head_dim");
  derived["hidden_size"] = 60; // 60 / 4 = 15
  EXPECT_THAT(errorOf(derived), StartsWith("config.json: field 'head_dim': expected an even number"));
}

TEST(ConfigErrors, OversizedEmbeddingIsRejected) {
  json config = withField("vocab_size", int64_t(1) << 40);
  EXPECT_EQ(errorOf(config),
            "config.json: field 'vocab_size': vocab_size * hidden_size (1099511627776 * 64) "
            "exceeds the limit of 2^40 elements for one weight tensor");
}

TEST(ConfigErrors, ProductsThatWouldOverflowInt64AreRejected) {
  json config = withField("hidden_size", int64_t(1) << 62);
  config["intermediate_size"] = int64_t(1) << 62;
  EXPECT_THAT(errorOf(config), StartsWith("config.json: field 'vocab_size': vocab_size * hidden_size"));
  json heads = withField("num_attention_heads", int64_t(1) << 40);
  heads["num_key_value_heads"] = 1;
  heads["head_dim"] = int64_t(1) << 40;
  EXPECT_THAT(errorOf(heads), StartsWith("config.json: field 'num_attention_heads': "
                                         "num_attention_heads * head_dim * hidden_size ("));
  EXPECT_THAT(errorOf(withField("intermediate_size", int64_t(1) << 40)),
              StartsWith("config.json: field 'intermediate_size': intermediate_size * hidden_size"));
  EXPECT_THAT(errorOf(withField("max_position_embeddings", int64_t(1) << 40)),
              StartsWith("config.json: field 'max_position_embeddings': "));
}

TEST(ConfigErrors, TooManyParametersInTotalIsRejected) {
  // Each tensor fits, but 2^30 layers of them do not.
  EXPECT_THAT(errorOf(withField("num_hidden_layers", int64_t(1) << 30)),
              StartsWith("config.json: field 'num_hidden_layers': num_hidden_layers * "
                         "parameters per layer ("));
}

// --- unsupported features --------------------------------------------------

TEST(ConfigErrors, OtherModelTypes) {
  EXPECT_EQ(errorOf(withField("model_type", "llama")),
            "config.json: field 'model_type': expected \"qwen3\", found \"llama\"");
  EXPECT_EQ(errorOf(withField("model_type", 3)),
            "config.json: field 'model_type': expected a string, found 3");
}

TEST(ConfigErrors, ArchitecturesWithoutQwen3ForCausalLM) {
  EXPECT_EQ(errorOf(withField("architectures", {"LlamaForCausalLM", "X"})),
            "config.json: field 'architectures': expected a list containing \"Qwen3ForCausalLM\", "
            "found [\"LlamaForCausalLM\", \"X\"]");
  EXPECT_EQ(errorOf(withField("architectures", json::array())),
            "config.json: field 'architectures': expected a list containing \"Qwen3ForCausalLM\", "
            "found []");
  EXPECT_EQ(errorOf(withField("architectures", "Qwen3ForCausalLM")),
            "config.json: field 'architectures': expected a list of strings, found string "
            "\"Qwen3ForCausalLM\"");
  EXPECT_EQ(errorOf(withField("architectures", {1})),
            "config.json: field 'architectures': expected a list of strings, found an element 1");
}

TEST(ConfigErrors, AttentionBias) {
  EXPECT_EQ(errorOf(withField("attention_bias", true)),
            "config.json: field 'attention_bias': attention_bias true is not supported (Qwen3 has "
            "no q/k/v/o biases)");
}

TEST(ConfigErrors, HiddenActivation) {
  EXPECT_EQ(errorOf(withField("hidden_act", "gelu")),
            "config.json: field 'hidden_act': activation \"gelu\" is not supported (expected \"silu\")");
}

TEST(ConfigErrors, RopeScalingOfAnyKind) {
  EXPECT_EQ(errorOf(withField("rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}})),
            "config.json: field 'rope_scaling': rope_scaling type 'yarn' is not supported (expected null)");
  EXPECT_EQ(errorOf(withField("rope_scaling", {{"type", "linear"}})),
            "config.json: field 'rope_scaling': rope_scaling type 'linear' is not supported (expected null)");
  EXPECT_EQ(errorOf(withField("rope_scaling", json::object())),
            "config.json: field 'rope_scaling': rope_scaling type 'unspecified' is not supported "
            "(expected null)");
  EXPECT_EQ(errorOf(withField("rope_scaling", 2)),
            "config.json: field 'rope_scaling': rope scaling is not supported (expected null, found 2)");
}

TEST(ConfigErrors, SlidingWindow) {
  EXPECT_EQ(errorOf(withField("use_sliding_window", true)),
            "config.json: field 'use_sliding_window': sliding-window attention is not supported "
            "(expected false)");
  EXPECT_EQ(errorOf(withField("sliding_window", "big")),
            "config.json: field 'sliding_window': expected an integer, found string \"big\"");
}

TEST(ConfigErrors, UnsupportedDType) {
  EXPECT_EQ(errorOf(withField("torch_dtype", "int8")),
            "config.json: field 'torch_dtype': dtype \"int8\" is not supported (expected "
            "\"bfloat16\", \"float16\" or \"float32\")");
  EXPECT_EQ(errorOf(withField("torch_dtype", 16)),
            "config.json: field 'torch_dtype': expected a string, found 16");
}

TEST(ConfigErrors, MessagesAreSingleLineEvenForHostileStrings) {
  std::string message = errorOf(withField("model_type", "a\nb\x01"));
  EXPECT_THAT(message, Not(HasSubstr("\n")));
  EXPECT_THAT(message, StartsWith("config.json: field 'model_type': "));
}

} // namespace
} // namespace q3::frontend::test
