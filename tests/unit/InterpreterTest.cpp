//===- InterpreterTest.cpp - interpreter limits and errors ----------------===//
#include "tests/unit/GoldenCase.h"

#include <gtest/gtest.h>

namespace q3::testing {
namespace {

GoldenCase smallCase() { return loadGoldenCase("gqa2_untied_f32"); }

TEST(Interpreter, RejectsTokensOutsideTheVocabulary) {
  GoldenCase golden = smallCase();
  GoldenRunner runner(golden);
  const int32_t vocab = int32_t(golden.logitsShape[1]);
  try {
    runner.interpreter().run({1, vocab});
    FAIL() << "expected an error";
  } catch (const reference::InterpreterError &e) {
    EXPECT_NE(std::string(e.what()).find("token id " + std::to_string(vocab) +
                                         " is outside the vocabulary"),
              std::string::npos)
        << e.what();
  }
}

TEST(Interpreter, RejectsPositionsBeyondTheContext) {
  GoldenCase golden = smallCase();
  GoldenRunner runner(golden); // context of 64 positions
  std::vector<int32_t> longPrompt(60, 1);
  runner.interpreter().run(longPrompt);
  EXPECT_THROW(runner.interpreter().run(std::vector<int32_t>(5, 1)), reference::InterpreterError);
  EXPECT_EQ(runner.interpreter().position(), 60);
}

TEST(Interpreter, ResetForgetsTheCache) {
  GoldenCase golden = smallCase();
  GoldenRunner runner(golden);
  reference::Tensor first = runner.interpreter().run(golden.prompt);
  reference::Tensor continued = runner.interpreter().run(golden.prompt);
  runner.interpreter().reset();
  reference::Tensor again = runner.interpreter().run(golden.prompt);
  EXPECT_EQ(maxAbsDiff(first.data, again.data), 0.0);
  // The same tokens at later positions see a longer context: different logits.
  EXPECT_GT(maxAbsDiff(first.data, continued.data), 1e-3);
}

TEST(Interpreter, IsDeterministic) {
  GoldenCase golden = smallCase();
  GoldenRunner a(golden), b(golden);
  EXPECT_EQ(
      maxAbsDiff(a.interpreter().run(golden.prompt).data, b.interpreter().run(golden.prompt).data),
      0.0);
}

} // namespace
} // namespace q3::testing
