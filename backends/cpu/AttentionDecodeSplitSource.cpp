//===- AttentionDecodeSplitSource.cpp - decode split over positions -------===//
//
// With decodeSplits S > 1, a head group's decode runs in up to S workgroups,
// each over its own run of positions (at least splitPositions of them), so
// a machine with more threads than head groups streams the cache on all of
// them. A split writes its heads' running maxima m, sums l and value sums o
// (unnormalized) to the workspace, then counts its arrival on the head
// group's counter (an atomic add; acq_rel, so its records are visible to
// whoever counts after it); the workgroup that arrives last merges the
// records one after another with the shared mergeSoftmax (the Vulkan kernel
// merges its subgroups with it), out = sum_s exp(m_s - M) o_s / sum_s
// exp(m_s - M) l_s with M the largest m_s, and puts the counter back to 0
// for the next dispatch. No workgroup waits for another, so any order of
// the workgroups over any number of threads is correct.
//
//===----------------------------------------------------------------------===//
#include "backends/common/KernelMathFunctions.h"
#include "backends/cpu/AttentionTemplates.h"
#include "backends/cpu/KernelSourceUtil.h"

#include <fmt/format.h>

#include <algorithm>

namespace q3::cpu {

using namespace detail;

namespace {
// Bytes between two head groups' counters: one cache line each, so the
// splits of different head groups do not contend for a line.
constexpr int64_t kCounterStrideBytes = 64;
constexpr int64_t kCounterStride = kCounterStrideBytes / 4; // i32 counters
} // namespace

int64_t AttentionKernel::workspaceBytes() const {
  if (decodeSplits <= 1)
    return 0;
  const int64_t records = headGroups() * decodeSplits * headsPerWorkgroup();
  return headGroups() * kCounterStrideBytes + records * (kSplitRecordHeader + headDim) * 4;
}

int64_t AttentionKernel::coveringDecodeSplits(int64_t threads) const {
  const int64_t groups = headGroups();
  return std::clamp<int64_t>((threads + groups - 1) / groups, 1, kMaxDecodeSplits);
}

namespace attention {

std::string partialsType(const AttentionKernel &kernel) {
  return fmt::format("memref<?x{}xf32>", AttentionKernel::kSplitRecordHeader + kernel.headDim);
}

std::string splitWorkspaceViews(const AttentionKernel &kernel) {
  const int64_t groups = kernel.headGroups();
  return fmt::format(
      R"mlir(  %cCounterSlots = arith.constant {counterSlots} : index
  %counters = memref.view %wb[%c0][%cCounterSlots] : memref<?xi8> to memref<?xi32>
  %cPartialsAt = arith.constant {partialsAt} : index
  %cRecords = arith.constant {records} : index
  %partials = memref.view %wb[%cPartialsAt][%cRecords] : memref<?xi8> to {partialsType}
)mlir",
      fmt::arg("counterSlots", groups * kCounterStride),
      fmt::arg("partialsAt", groups * kCounterStrideBytes),
      fmt::arg("records", groups * kernel.decodeSplits * kernel.headsPerWorkgroup()),
      fmt::arg("partialsType", partialsType(kernel)));
}

std::string splitDecode(const AttentionKernel &kernel, const std::string &decodeCall) {
  return fmt::format(
      R"mlir(      %cSplits = arith.constant {splits} : index
      %run:2 = func.call @{name}_decode_split(%count0) : (index) -> (index, index)
      %participates = arith.cmpi ult, %split, %run#1 : index
      scf.if %participates {{
        %from = arith.muli %split, %run#0 : index
        %fromSpan = arith.addi %from, %run#0 : index
        %to = arith.minui %fromSpan, %count0 : index
        %direct = arith.cmpi eq, %run#1, %c1 : index
        %groupSplits = arith.muli %headGroup, %cSplits : index
        %splitIndex = arith.addi %groupSplits, %split : index
        %record = arith.muli %splitIndex, %cHeads : index
        {decodeCall}
        %merged = arith.cmpi ugt, %run#1, %c1 : index
        scf.if %merged {{
          %cCounterStride = arith.constant {counterStride} : index
          %counterAt = arith.muli %headGroup, %cCounterStride : index
          %oneI = arith.constant 1 : i32
          %arrivedBefore = memref.atomic_rmw addi %oneI, %counters[%counterAt] : (i32, memref<?xi32>) -> i32
          %arrived = arith.addi %arrivedBefore, %oneI : i32
          %activeI = arith.index_cast %run#1 : index to i32
          %last = arith.cmpi eq, %arrived, %activeI : i32
          scf.if %last {{
            %firstRecord = arith.muli %groupSplits, %cHeads : index
            func.call @{name}_merge(%out, %partials, %t, %h0, %firstRecord, %run#1) : ({queryType}, {partialsType}, index, index, index, index) -> ()
            %zeroI = arith.constant 0 : i32
            memref.store %zeroI, %counters[%counterAt] : memref<?xi32>
          }}
        }}
      }}
)mlir",
      fmt::arg("splits", kernel.decodeSplits), fmt::arg("decodeCall", decodeCall),
      fmt::arg("counterStride", kCounterStride), fmt::arg("name", kernel.name),
      fmt::arg("queryType", typesOf(kernel).query), fmt::arg("partialsType", partialsType(kernel)));
}

/// The merge of head `p`'s `active` records (the first at %own<p>, one every
/// %cHeads) into its output row: split 0's state, then each next split's
/// merged in (the shared mergeSoftmax), the value sums rescaled by both sides'
/// factors.
static std::string mergeHead(const AttentionKernel &kernel, int64_t p) {
  const int64_t columns = kernel.headDim / kLanes;
  const std::string partials = partialsType(kernel);
  std::string firstSums, sumArgs, sumTypes, loads, yields, stores;
  for (int64_t c = 0; c < columns; ++c) {
    const int64_t offset = AttentionKernel::kSplitRecordHeader + c * kLanes;
    firstSums += fmt::format(
        "  %off{0}_{1} = arith.constant {2} : index\n"
        "  %first{0}_{1} = vector.load %partials[%own{0}, %off{0}_{1}] : {3}, vector<16xf32>\n",
        p, c, offset, partials);
    sumArgs += fmt::format(", %a{0}_{1} = %first{0}_{1}", p, c);
    sumTypes += ", vector<16xf32>";
    loads += fmt::format(
        "    %v{0}_{1} = vector.load %partials[%r{0}, %off{0}_{1}] : {2}, vector<16xf32>\n"
        "    %kept{0}_{1} = arith.mulf %a{0}_{1}, %scaleAV{0} : vector<16xf32>\n"
        "    %n{0}_{1} = vector.fma %scaleBV{0}, %v{0}_{1}, %kept{0}_{1} : vector<16xf32>\n",
        p, c, partials);
    yields += fmt::format(", %n{}_{}", p, c);
    stores += fmt::format(
        "  %o{0}_{1} = arith.mulf %merged{0}#{2}, %inverseV{0} : vector<16xf32>\n"
        "  %oOff{0}_{1} = arith.constant {3} : index\n"
        "  vector.store %o{0}_{1}, %out[%t0, %head{0}, %oOff{0}_{1}] : {4}, vector<16xf32>\n",
        p, c, c + 2, c * kLanes, typesOf(kernel).query);
  }
  return fmt::format(
      R"mlir(  %cSlot{p} = arith.constant {p} : index
  %head{p} = arith.addi %h0, %cSlot{p} : index
  %own{p} = arith.addi %first, %cSlot{p} : index
  %firstMax{p} = memref.load %partials[%own{p}, %c0] : {partials}
  %firstSum{p} = memref.load %partials[%own{p}, %c1] : {partials}
{firstSums}  %merged{p}:{results} = scf.for %s = %c1 to %active step %c1 iter_args(%mx = %firstMax{p}, %l = %firstSum{p}{sumArgs}) -> (f32, f32{sumTypes}) {{
    %sp{p} = arith.muli %s, %cHeads : index
    %r{p} = arith.addi %own{p}, %sp{p} : index
    %m{p} = memref.load %partials[%r{p}, %c0] : {partials}
    %ls{p} = memref.load %partials[%r{p}, %c1] : {partials}
    %mg{p}:4 = func.call @{name}_merge_softmax(%mx, %l, %m{p}, %ls{p}) : (f32, f32, f32, f32) -> (f32, f32, f32, f32)
    %scaleAV{p} = vector.broadcast %mg{p}#2 : f32 to vector<16xf32>
    %scaleBV{p} = vector.broadcast %mg{p}#3 : f32 to vector<16xf32>
{loads}    scf.yield %mg{p}#0, %mg{p}#1{yields} : f32, f32{sumTypes}
  }}
  %inverse{p} = arith.divf %one, %merged{p}#1 : f32
  %inverseV{p} = vector.broadcast %inverse{p} : f32 to vector<16xf32>
{stores})mlir",
      fmt::arg("p", p), fmt::arg("results", columns + 2), fmt::arg("firstSums", firstSums),
      fmt::arg("sumArgs", sumArgs), fmt::arg("sumTypes", sumTypes), fmt::arg("loads", loads),
      fmt::arg("yields", yields), fmt::arg("stores", stores), fmt::arg("partials", partials),
      fmt::arg("name", kernel.name));
}

std::string splitMergeFunction(const AttentionKernel &kernel) {
  std::string heads;
  for (int64_t p = 0; p < kernel.headsPerWorkgroup(); ++p)
    heads += mergeHead(kernel, p);
  return kernels::mergeSoftmaxFunctionText(kernel.name + "_merge_softmax") +
         kernels::decodeSplitFunctionText(kernel.name + "_decode_split", kernel.decodeSplits,
                                          kernel.splitPositions) +
         fmt::format(
             R"mlir(
func.func private @{name}_merge(%out: {queryType}, %partials: {partialsType}, %t0: index, %h0: index, %first: index, %active: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cHeads = arith.constant {heads} : index
  %one = arith.constant 1.0 : f32
{body}  return
}}
)mlir",
             fmt::arg("name", kernel.name), fmt::arg("queryType", typesOf(kernel).query),
             fmt::arg("partialsType", partialsType(kernel)),
             fmt::arg("heads", kernel.headsPerWorkgroup()), fmt::arg("body", heads));
}

} // namespace attention
} // namespace q3::cpu
