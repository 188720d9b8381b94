//===- AttentionDecodeSplitSource.cpp - decode split over positions -------===//
//
// With decodeSplits S > 1, a head group's decode runs in up to S workgroups,
// each over its own run of positions (at least splitPositions of them), so
// a machine with more threads than head groups streams the cache on all of
// them. A split writes its heads' running maxima m, sums l and value sums o
// (unnormalized) to the workspace, then counts its arrival on the head
// group's counter (an atomic add; acq_rel, so its records are visible to
// whoever counts after it); the workgroup that arrives last merges the
// records, out = sum_s exp(m_s - M) o_s / sum_s exp(m_s - M) l_s with M the
// largest m_s, and puts the counter back to 0 for the next dispatch. No
// workgroup waits for another, so any order of the workgroups over any
// number of threads is correct.
//
//===----------------------------------------------------------------------===//
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
      %cSplitsLess = arith.constant {splitsLess} : index
      %cSpanMin = arith.constant {spanMin} : index
      %evenUp = arith.addi %count0, %cSplitsLess : index
      %even = arith.divui %evenUp, %cSplits : index
      %span = arith.maxui %even, %cSpanMin : index
      %spanLess = arith.subi %span, %c1 : index
      %activeUp = arith.addi %count0, %spanLess : index
      %active = arith.divui %activeUp, %span : index
      %participates = arith.cmpi ult, %split, %active : index
      scf.if %participates {{
        %from = arith.muli %split, %span : index
        %fromSpan = arith.addi %from, %span : index
        %to = arith.minui %fromSpan, %count0 : index
        %direct = arith.cmpi eq, %active, %c1 : index
        %groupSplits = arith.muli %headGroup, %cSplits : index
        %splitIndex = arith.addi %groupSplits, %split : index
        %record = arith.muli %splitIndex, %cHeads : index
        {decodeCall}
        %merged = arith.cmpi ugt, %active, %c1 : index
        scf.if %merged {{
          %cCounterStride = arith.constant {counterStride} : index
          %counterAt = arith.muli %headGroup, %cCounterStride : index
          %oneI = arith.constant 1 : i32
          %arrivedBefore = memref.atomic_rmw addi %oneI, %counters[%counterAt] : (i32, memref<?xi32>) -> i32
          %arrived = arith.addi %arrivedBefore, %oneI : i32
          %activeI = arith.index_cast %active : index to i32
          %last = arith.cmpi eq, %arrived, %activeI : i32
          scf.if %last {{
            %firstRecord = arith.muli %groupSplits, %cHeads : index
            func.call @{name}_merge(%out, %partials, %t, %h0, %firstRecord, %active) : ({queryType}, {partialsType}, index, index, index, index) -> ()
            %zeroI = arith.constant 0 : i32
            memref.store %zeroI, %counters[%counterAt] : memref<?xi32>
          }}
        }}
      }}
)mlir",
      fmt::arg("splits", kernel.decodeSplits), fmt::arg("splitsLess", kernel.decodeSplits - 1),
      fmt::arg("spanMin", kernel.splitPositions), fmt::arg("decodeCall", decodeCall),
      fmt::arg("counterStride", kCounterStride), fmt::arg("name", kernel.name),
      fmt::arg("queryType", typesOf(kernel).query), fmt::arg("partialsType", partialsType(kernel)));
}

/// The merge of head `p`'s `active` records (the first at %own<p>, one every
/// %cHeads) into its output row.
static std::string mergeHead(const AttentionKernel &kernel, int64_t p) {
  const int64_t columns = kernel.headDim / kLanes;
  std::string sumArgs, sumTypes, loads, yields, stores;
  for (int64_t c = 0; c < columns; ++c) {
    sumArgs += fmt::format(", %a{}_{} = %zeroV", p, c);
    sumTypes += ", vector<16xf32>";
    loads += fmt::format(
        "      %off{0}_{1} = arith.constant {2} : index\n"
        "      %v{0}_{1} = vector.load %partials[%r{0}, %off{0}_{1}] : {3}, vector<16xf32>\n"
        "      %n{0}_{1} = vector.fma %wV{0}, %v{0}_{1}, %a{0}_{1} : vector<16xf32>\n",
        p, c, AttentionKernel::kSplitRecordHeader + c * kLanes, partialsType(kernel));
    yields += fmt::format(", %n{}_{}", p, c);
    stores += fmt::format(
        "  %o{0}_{1} = arith.mulf %sums{0}#{2}, %inverseV{0} : vector<16xf32>\n"
        "  %oOff{0}_{1} = arith.constant {3} : index\n"
        "  vector.store %o{0}_{1}, %out[%t0, %head{0}, %oOff{0}_{1}] : {4}, vector<16xf32>\n",
        p, c, c + 1, c * kLanes, typesOf(kernel).query);
  }
  return fmt::format(
      R"mlir(  %cSlot{p} = arith.constant {p} : index
  %head{p} = arith.addi %h0, %cSlot{p} : index
  %own{p} = arith.addi %first, %cSlot{p} : index
  %max{p} = scf.for %s = %c0 to %active step %c1 iter_args(%mx = %lowest) -> (f32) {{
    %sp{p} = arith.muli %s, %cHeads : index
    %r{p} = arith.addi %own{p}, %sp{p} : index
    %m{p} = memref.load %partials[%r{p}, %c0] : {partialsType}
    %mxNew{p} = arith.maxf %mx, %m{p} : f32
    scf.yield %mxNew{p} : f32
  }}
  %sums{p}:{results} = scf.for %s = %c0 to %active step %c1 iter_args(%l = %zero{sumArgs}) -> (f32{sumTypes}) {{
    %sp{p} = arith.muli %s, %cHeads : index
    %r{p} = arith.addi %own{p}, %sp{p} : index
    %m{p} = memref.load %partials[%r{p}, %c0] : {partialsType}
    %ls{p} = memref.load %partials[%r{p}, %c1] : {partialsType}
    %drop{p} = arith.subf %m{p}, %max{p} : f32
    %w{p} = math.exp %drop{p} : f32
    %wl{p} = arith.mulf %w{p}, %ls{p} : f32
    %lNew{p} = arith.addf %l, %wl{p} : f32
    %wV{p} = vector.broadcast %w{p} : f32 to vector<16xf32>
{loads}    scf.yield %lNew{p}{yields} : f32{sumTypes}
  }}
  %inverse{p} = arith.divf %one, %sums{p}#0 : f32
  %inverseV{p} = vector.broadcast %inverse{p} : f32 to vector<16xf32>
{stores})mlir",
      fmt::arg("p", p), fmt::arg("results", columns + 1), fmt::arg("sumArgs", sumArgs),
      fmt::arg("sumTypes", sumTypes), fmt::arg("loads", indented(loads, "  ")),
      fmt::arg("yields", yields), fmt::arg("stores", stores),
      fmt::arg("partialsType", partialsType(kernel)));
}

std::string splitMergeFunction(const AttentionKernel &kernel) {
  std::string heads;
  for (int64_t p = 0; p < kernel.headsPerWorkgroup(); ++p)
    heads += mergeHead(kernel, p);
  return fmt::format(
      R"mlir(
func.func private @{name}_merge(%out: {queryType}, %partials: {partialsType}, %t0: index, %h0: index, %first: index, %active: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cHeads = arith.constant {heads} : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %lowest = arith.constant 0xFF800000 : f32
  %zeroV = arith.constant dense<0.0> : vector<16xf32>
{body}  return
}}
)mlir",
      fmt::arg("name", kernel.name), fmt::arg("queryType", typesOf(kernel).query),
      fmt::arg("partialsType", partialsType(kernel)), fmt::arg("heads", kernel.headsPerWorkgroup()),
      fmt::arg("body", heads));
}

} // namespace attention
} // namespace q3::cpu
