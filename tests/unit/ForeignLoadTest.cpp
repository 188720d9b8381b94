//===- ForeignLoadTest.cpp - how busy the rest of the machine was ---------===//
//
// The tuners cache a measurement only when other processes left the machine
// alone: the share is read from /proc/stat's aggregate line, less this
// process's own time.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/ForeignLoad.h"

#include <gtest/gtest.h>

namespace q3::testing {
namespace {

TEST(ForeignLoad, ParsesTheAggregateCpuLine) {
  // user nice system idle iowait irq softirq steal guest guest_nice
  auto time = cpu::parseMachineCpuTime("cpu  100 5 20 800 10 1 2 7 0 0");
  ASSERT_TRUE(time);
  EXPECT_EQ(time->busy, 100u + 5 + 20 + 1 + 2 + 7);
  EXPECT_EQ(time->total, time->busy + 800 + 10);
  // Kernels before 2.6.11 have no steal column.
  auto old = cpu::parseMachineCpuTime("cpu 1 2 3 4 5 6 7");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->busy, 1u + 2 + 3 + 6 + 7);
}

TEST(ForeignLoad, RefusesOtherLines) {
  EXPECT_FALSE(cpu::parseMachineCpuTime("cpu0 1 2 3 4 5 6 7 8"));
  EXPECT_FALSE(cpu::parseMachineCpuTime("intr 12 3"));
  EXPECT_FALSE(cpu::parseMachineCpuTime("cpu 1 2 three"));
  EXPECT_FALSE(cpu::parseMachineCpuTime(""));
}

TEST(ForeignLoad, OthersShareIsTheBusyTimeThatWasNotOurs) {
  const cpu::MachineCpuTime before{1000, 5000}, after{1150, 5200};
  // 150 busy ticks of 200, 50 of them ours: others took half the machine.
  EXPECT_DOUBLE_EQ(cpu::foreignShare(before, after, 50), 0.5);
  // All of it ours (or more, by rounding): nobody else.
  EXPECT_DOUBLE_EQ(cpu::foreignShare(before, after, 160), 0.0);
  // No time passed, or the counters went backwards: nothing to say.
  EXPECT_DOUBLE_EQ(cpu::foreignShare(before, before, 0), 0.0);
  EXPECT_DOUBLE_EQ(cpu::foreignShare(after, before, 0), 0.0);
}

} // namespace
} // namespace q3::testing
