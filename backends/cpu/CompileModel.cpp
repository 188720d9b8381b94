//===- CompileModel.cpp - a dispatch-stage module -> a CPU artifact -------===//
//
// Three things come out of the dispatch stage:
//  - kernels: each q3.kernel function becomes the CPU kernel of its compute
//    op (KernelSource.h), all compiled into one shared object;
//  - the weight plan: every q3.param (a checkpoint tensor) and every weight
//    transform (fold_gain, concat_rows), each with an id, shape and dtype;
//  - the schedule: the dispatches of @forward in order, each operand named
//    by what the runtime binds to it (a buffer of the plan, a weight, the
//    tokens, the cache or one layer's cached keys/values, a constant, the
//    start position).
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/CompileModel.h"
#include "backends/cpu/CompileKernels.h"
#include "backends/cpu/KernelSource.h"
#include "ir/BuildGraph.h"
#include "ir/Q3Ops.h"
#include "passes/Statistics.h"
#include "runtime/Artifact.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

using namespace mlir;
using namespace q3::ir;
using nlohmann::json;

namespace q3::cpu {
namespace {

std::string dtypeName(Type element) {
  if (element.isBF16())
    return "bf16";
  if (element.isF16())
    return "f16";
  if (element.isF32())
    return "f32";
  throw std::runtime_error("unsupported weight element type");
}

WeightStorage storageOf(Value weight) {
  Type element = weight.getType().cast<RankedTensorType>().getElementType();
  if (element.isBF16())
    return WeightStorage::BF16;
  if (element.isF16())
    return WeightStorage::F16;
  return WeightStorage::F32;
}

/// Bytes of one row (one position) of an activation [T, ...] of f32.
int64_t rowBytesOf(Value activation) {
  int64_t bytes = 4;
  for (int64_t extent : activation.getType().cast<RankedTensorType>().getShape().drop_front())
    bytes *= extent;
  return bytes;
}

std::vector<int64_t> shapeOf(Value v) {
  auto shape = v.getType().cast<RankedTensorType>().getShape();
  return std::vector<int64_t>(shape.begin(), shape.end());
}

/// The compute op of a kernel (views are no-ops on the CPU's row-major buffers).
Operation *anchorOf(func::FuncOp kernel) {
  Operation *anchor = nullptr;
  for (Operation &op : kernel.getBody().front().without_terminator())
    if (!isa<MergeHeadsOp, ReshapeHeadsOp>(op))
      anchor = &op;
  if (!anchor)
    throw std::runtime_error("kernel @" + kernel.getSymName().str() + " computes nothing");
  return anchor;
}

/// A norm-fed product's weight, seen through the recorded transforms: either
/// fold_gain(W, g) or concat_rows(fold_gain(W1, g), fold_gain(W2, g), ...)
/// with one gain g and checkpoint weights Wi of one dtype. The CPU kernel then
/// reads the Wi as stored and applies g to its input instead: exact, and half
/// the bytes of an f32 folded weight for a bf16 checkpoint.
struct UnfoldedWeight {
  std::vector<Value> parts; // the Wi, in row order
  Value gain;
};

std::optional<UnfoldedWeight> unfold(Value weight) {
  auto foldOf = [](Value v) -> std::optional<std::pair<Value, Value>> {
    auto fold = v.getDefiningOp<FoldGainOp>();
    if (!fold || !fold.getWeight().getDefiningOp<ParamOp>() ||
        !fold.getGamma().getDefiningOp<ParamOp>())
      return std::nullopt;
    return std::make_pair(fold.getWeight(), fold.getGamma());
  };
  SmallVector<Value> pieces{weight};
  if (auto concat = weight.getDefiningOp<ConcatRowsOp>())
    pieces.assign(concat.getInputs().begin(), concat.getInputs().end());
  UnfoldedWeight unfolded;
  for (Value piece : pieces) {
    auto fold = foldOf(piece);
    if (!fold || (unfolded.gain && fold->second != unfolded.gain) ||
        (!unfolded.parts.empty() && storageOf(fold->first) != storageOf(unfolded.parts[0])))
      return std::nullopt;
    unfolded.parts.push_back(fold->first);
    unfolded.gain = fold->second;
  }
  return unfolded;
}

/// Kernels whose every dispatch reads an unfoldable weight (operand 1).
std::set<std::string> kernelsWithPrologueGain(func::FuncOp forward) {
  std::map<std::string, bool> allUnfoldable;
  for (DispatchOp dispatch : forward.getBody().front().getOps<DispatchOp>()) {
    bool ok = dispatch.getNumOperands() > 1 && unfold(dispatch.getOperand(1)).has_value();
    auto [it, inserted] = allUnfoldable.try_emplace(dispatch.getKernel().str(), ok);
    if (!inserted)
      it->second = it->second && ok;
  }
  std::set<std::string> kernels;
  for (auto [name, ok] : allUnfoldable)
    if (ok)
      kernels.insert(name);
  return kernels;
}

/// The CPU source and grid of one kernel.
struct CpuKernel {
  std::string source;
  json grid;
  bool columnBlocks = false; // reads its weight (operand 1) as column blocks
  PrefillMatmul prefillMatmul = PrefillMatmul::F32;
  int chunksPerThread = 1;       // the runtime's split of a prefill dispatch (docs/artifact.md)
  int decodeChunksPerThread = 1; // and of a one-row dispatch
};

FusedLinearKernel describeFusedLinear(const std::string &name, Value weight, bool residual,
                                      std::optional<double> eps, bool swiglu, Value result,
                                      const std::optional<UnfoldedWeight> &unfolded) {
  FusedLinearKernel kernel;
  kernel.name = name;
  kernel.inFeatures = shapeOf(weight)[1];
  kernel.outFeatures = shapeOf(result)[1];
  kernel.weight = storageOf(weight);
  if (unfolded) {
    kernel.weight = storageOf(unfolded->parts[0]);
    kernel.prologueGain = storageOf(unfolded->gain);
  }
  kernel.normEps = eps;
  kernel.swiglu = swiglu;
  kernel.residual = residual;
  kernel.columnBlocks = kernel.columnBlocksFit();
  return kernel;
}

CpuKernel fusedLinearKernel(FusedLinearKernel kernel, PrefillMatmul prefillMatmul) {
  if (kernel.columnBlocks)
    kernel.prefillMatmul = prefillMatmul;
  if (kernel.prefillMatmul == PrefillMatmul::Amx && !kernel.amxFits())
    kernel.prefillMatmul = PrefillMatmul::F32;
  // Decode splits each thread's contiguous share of the weight into 16
  // chunks, so a thread that falls behind (a shared vCPU) hands its last ones
  // to the others. Measured on 0.6B over 128 tokens: threads idle 2.8-3.7% of
  // the time instead of 3.1-6.5%; the decode rate moved less than the noise.
  constexpr int kDecodeChunksPerThread = 16;
  return {fusedLinearSource(kernel),
          {{"kind", "fixed"}, {"count", kernel.workgroups()}},
          kernel.columnBlocks,
          kernel.prefillMatmul,
          1,
          kDecodeChunksPerThread};
}

/// `unfolded` describes the kernel's weight when it reads it unfolded.
CpuKernel cpuKernelFor(func::FuncOp kernel, std::optional<UnfoldedWeight> unfolded,
                       PrefillMatmul prefillMatmul, WeightStorage kvCache) {
  const std::string name = kernel.getSymName().str();
  Operation *anchor = anchorOf(kernel);
  if (auto fused = dyn_cast<FusedLinearOp>(anchor)) {
    std::optional<double> eps;
    if (auto attr = fused.getRmsNormEps())
      eps = attr->convertToDouble();
    return fusedLinearKernel(describeFusedLinear(name, fused.getWeight(), bool(fused.getResidual()),
                                                 eps, fused.getSwiglu(), fused.getResult(),
                                                 unfolded),
                             prefillMatmul);
  }
  if (auto linear = dyn_cast<LinearOp>(anchor); linear && !linear.getBias())
    return fusedLinearKernel(describeFusedLinear(name, linear.getWeight(), false, std::nullopt,
                                                 false, linear.getResult(), std::nullopt),
                             prefillMatmul);
  if (auto embedding = dyn_cast<EmbeddingOp>(anchor)) {
    auto table = shapeOf(embedding.getTable());
    EmbeddingKernel cpu{name, table[0], table[1], storageOf(embedding.getTable())};
    return {embeddingSource(cpu), {{"kind", "rows"}}};
  }
  if (auto fused = dyn_cast<QKNormRopeCacheOp>(anchor)) {
    auto cache = fused.getCache().getType().cast<KVCacheType>();
    QKNormRopeCacheKernel cpu{name,
                              shapeOf(fused.getQuery())[1],
                              cache.getKvHeads(),
                              cache.getHeadDim(),
                              storageOf(fused.getQGain()),
                              fused.getEps().convertToDouble(),
                              fused.getTheta().convertToDouble(),
                              kvCache};
    return {qkNormRopeCacheSource(cpu), {{"kind", "rows_times"}, {"factor", cpu.queryHeads}}};
  }
  if (auto attention = dyn_cast<AttentionOp>(anchor)) {
    auto query = shapeOf(attention.getQuery());
    AttentionKernel cpu{name,     query[1], shapeOf(attention.getKeys())[1],
                        query[2], {},       attention.getScale().convertToDouble(),
                        kvCache};
    for (int64_t h = 0; h < cpu.queryHeads; ++h)
      cpu.kvHeadMap.push_back(attention.kvHeadFor(h));
    // Row t of a causal prefill reads t + 1 positions, so equal halves of the
    // rows are unequal work: chunks claimed as threads come free even it out
    // (pp128 on 0.6B: attention 58-62 -> 44-50 ms on two threads).
    constexpr int kCausalChunksPerThread = 8;
    return {attentionSource(cpu),
            {{"kind", "rows_times"}, {"factor", cpu.workgroupsPerRow()}},
            false,
            PrefillMatmul::F32,
            kCausalChunksPerThread};
  }
  throw std::runtime_error("no CPU kernel for '" + anchor->getName().getStringRef().str() +
                           "' (kernel @" + name +
                           "); the CPU backend needs the default fusion pipeline");
}

json configJson(ModuleOp module) {
  json config = json::object();
  auto dict = module->getAttrOfType<DictionaryAttr>("q3.config");
  if (!dict)
    throw std::runtime_error("module has no q3.config: build it with q3c from a config");
  for (NamedAttribute entry : dict) {
    std::string key = entry.getName().str();
    // BoolAttr first: it is also an IntegerAttr (of i1).
    if (auto b = entry.getValue().dyn_cast<BoolAttr>())
      config[key] = b.getValue();
    else if (auto i = entry.getValue().dyn_cast<IntegerAttr>())
      config[key] = i.getInt();
    else if (auto f = entry.getValue().dyn_cast<FloatAttr>())
      config[key] = f.getValueAsDouble();
    else if (auto s = entry.getValue().dyn_cast<StringAttr>())
      config[key] = s.str();
  }
  return config;
}

class ManifestBuilder {
public:
  ManifestBuilder(ModuleOp module, std::set<std::string> prologueGainKernels,
                  std::set<std::string> columnBlockKernels)
      : module(module), prologueGainKernels(std::move(prologueGainKernels)),
        columnBlockKernels(std::move(columnBlockKernels)) {}

  json takeWeights() { return std::move(weightList); }

  void collectWeights(func::FuncOp forward) {
    json &list = weightList;
    list = json::array();
    forward.walk([&](Operation *op) {
      if (!isa<ParamOp, FoldGainOp, ConcatRowsOp>(op))
        return;
      Value result = op->getResult(0);
      int64_t id = int64_t(weightIds.size());
      weightIds[result] = id;
      json entry = {
          {"id", id},
          {"shape", shapeOf(result)},
          {"dtype", dtypeName(result.getType().cast<RankedTensorType>().getElementType())}};
      if (auto param = dyn_cast<ParamOp>(op)) {
        entry["kind"] = "param";
        entry["name"] = param.getName().str();
      } else {
        entry["kind"] = isa<FoldGainOp>(op) ? "fold_gain" : "concat_rows";
        json inputs = json::array();
        for (Value input : op->getOperands())
          inputs.push_back(weightIds.lookup(input));
        entry["inputs"] = inputs;
      }
      list.push_back(entry);
    });
  }

  json schedule(func::FuncOp forward) {
    json steps = json::array();
    for (DispatchOp dispatch : forward.getBody().front().getOps<DispatchOp>()) {
      json operands = json::array();
      const std::string kernel = dispatch.getKernel().str();
      const bool unfoldWeight = prologueGainKernels.count(kernel) > 0;
      const bool blocks = columnBlockKernels.count(kernel) > 0;
      for (auto [i, operand] : llvm::enumerate(dispatch.getOperands())) {
        if (i != 1) {
          operands.push_back(describe(operand));
          continue;
        }
        json weight = describe(operand);
        std::optional<json> gain;
        if (unfoldWeight) {
          UnfoldedWeight unfolded = *unfold(operand);
          weight = {{"kind", "weight"}, {"id", stackedWeight(unfolded.parts)}};
          gain = describe(unfolded.gain);
        }
        if (blocks)
          weight["id"] = columnBlocksOf(weight.at("id").get<int64_t>());
        operands.push_back(weight);
        if (gain)
          operands.push_back(*gain);
      }
      auto buffers = dispatch->getAttrOfType<DenseI64ArrayAttr>("q3.buffers");
      if (!buffers)
        throw std::runtime_error("dispatch without q3.buffers: run plan-buffers");
      json results = json::array();
      for (auto [i, result] : llvm::enumerate(dispatch.getResults())) {
        if (std::optional<json> view = cacheView(dispatch, i)) {
          values[result] = *view;
          results.push_back(*view);
        } else {
          // A planned buffer is shared by values of different widths; a binding
          // carries the row size of its own value.
          json buffer = {{"kind", "buffer"}, {"id", buffers[i]}, {"row_bytes", rowBytesOf(result)}};
          values[result] = buffer;
          results.push_back(buffer);
        }
      }
      steps.push_back(
          {{"kernel", dispatch.getKernel().str()}, {"operands", operands}, {"results", results}});
    }
    return steps;
  }

  json describe(Value value) {
    if (auto arg = value.dyn_cast<BlockArgument>()) {
      static const char *kinds[] = {"tokens", "start_pos", "cache"};
      return {{"kind", kinds[arg.getArgNumber()]}};
    }
    if (auto it = weightIds.find(value); it != weightIds.end())
      return {{"kind", "weight"}, {"id", it->second}};
    if (auto constant = value.getDefiningOp<arith::ConstantIndexOp>())
      return {{"kind", "constant"}, {"value", constant.value()}};
    if (auto it = values.find(value); it != values.end())
      return it->second;
    throw std::runtime_error("the CPU backend cannot bind a value defined by '" +
                             value.getDefiningOp()->getName().getStringRef().str() +
                             "' outside a kernel");
  }

private:
  /// The checkpoint weights `parts` stacked by rows, as stored: the param
  /// itself for one part, else a concat_rows entry added to the weight plan.
  int64_t stackedWeight(const std::vector<Value> &parts) {
    if (parts.size() == 1)
      return weightIds.lookup(parts[0]);
    json inputs = json::array();
    int64_t rows = 0;
    for (Value part : parts) {
      inputs.push_back(weightIds.lookup(part));
      rows += shapeOf(part)[0];
    }
    int64_t id = int64_t(weightList.size());
    weightList.push_back(
        {{"id", id},
         {"kind", "concat_rows"},
         {"inputs", inputs},
         {"shape", {rows, shapeOf(parts[0])[1]}},
         {"dtype", dtypeName(parts[0].getType().cast<RankedTensorType>().getElementType())}});
    return id;
  }

  /// A column_blocks entry (runtime/WeightLayout.h) for weight `id`, one per id.
  int64_t columnBlocksOf(int64_t id) {
    auto [it, inserted] = columnBlockIds.try_emplace(id, int64_t(weightList.size()));
    if (inserted) {
      const json &source = weightList.at(size_t(id));
      weightList.push_back({{"id", it->second},
                            {"kind", "column_blocks"},
                            {"inputs", {id}},
                            {"shape", source.at("shape")},
                            {"dtype", source.at("dtype")}});
    }
    return it->second;
  }

  /// Keys/values returned by a cache op are views of one layer of the cache.
  std::optional<json> cacheView(DispatchOp dispatch, unsigned index) {
    auto kernel = module.lookupSymbol<func::FuncOp>(dispatch.getKernel());
    Value returned = kernel.getBody().front().getTerminator()->getOperand(index);
    auto fused = returned.getDefiningOp<QKNormRopeCacheOp>();
    if (!fused || returned == fused.getQuery())
      return std::nullopt;
    auto layerArg = fused.getLayer().cast<BlockArgument>();
    json layer = describe(dispatch.getOperand(layerArg.getArgNumber()));
    if (layer["kind"] != "constant")
      throw std::runtime_error("the cache layer of a dispatch must be a constant");
    return json{{"kind", returned == fused.getKeys() ? "cache_keys" : "cache_values"},
                {"layer", layer["value"]}};
  }

  ModuleOp module;
  std::set<std::string> prologueGainKernels, columnBlockKernels;
  std::map<int64_t, int64_t> columnBlockIds;
  json weightList;
  llvm::DenseMap<Value, int64_t> weightIds;
  llvm::DenseMap<Value, json> values;
};

/// Weight bytes one decode step reads, as the schedule binds them (the
/// embedding table: one row).
int64_t decodeWeightBytes(const json &weights, const json &schedule, ModuleOp module) {
  int64_t total = 0;
  for (const json &step : schedule) {
    auto kernel = module.lookupSymbol<func::FuncOp>(step.at("kernel").get<std::string>());
    const bool embedding = isa<EmbeddingOp>(anchorOf(kernel));
    for (const json &operand : step.at("operands")) {
      if (operand.at("kind") != "weight")
        continue;
      const json &weight = weights.at(operand.at("id").get<size_t>());
      auto shape = weight.at("shape").get<std::vector<int64_t>>();
      const std::string dtype = weight.at("dtype").get<std::string>();
      int64_t elements = embedding ? shape.back() : 1;
      if (!embedding)
        for (int64_t extent : shape)
          elements *= extent;
      total += elements * (dtype == "f32" ? 4 : 2);
    }
  }
  return total;
}

json bufferPlanJson(ModuleOp module) {
  auto plan = module->getAttrOfType<DictionaryAttr>("q3.buffer_plan");
  if (!plan)
    throw std::runtime_error("module has no q3.buffer_plan: run plan-buffers");
  int64_t rows = plan.getAs<IntegerAttr>("max_seq_len").getInt();
  json rowBytes = json::array();
  for (int64_t bytes : plan.getAs<DenseI64ArrayAttr>("buffer_bytes").asArrayRef())
    rowBytes.push_back(bytes / rows);
  return {{"row_bytes", rowBytes}};
}

} // namespace

const char *kvCacheName(WeightStorage cache) {
  return cache == WeightStorage::BF16 ? "bf16" : "f32";
}

std::optional<WeightStorage> parseKvCache(const std::string &name) {
  for (WeightStorage cache : {WeightStorage::F32, WeightStorage::BF16})
    if (name == kvCacheName(cache))
      return cache;
  return std::nullopt;
}

const char *prefillMatmulName(PrefillMatmul matmul) {
  switch (matmul) {
  case PrefillMatmul::F32:
    return "f32";
  case PrefillMatmul::Avx512Bf16:
    return "avx512bf16";
  case PrefillMatmul::Amx:
    return "amx";
  }
  return "?";
}

std::optional<PrefillMatmul> parsePrefillMatmul(const std::string &name) {
  for (PrefillMatmul matmul : {PrefillMatmul::F32, PrefillMatmul::Avx512Bf16, PrefillMatmul::Amx})
    if (name == prefillMatmulName(matmul))
      return matmul;
  return std::nullopt;
}

PrefillMatmul resolvePrefillMatmul(const CpuTarget &target,
                                   std::optional<PrefillMatmul> requested) {
  auto has = [&](const char *feature) {
    return std::find(target.requiredFeatures.begin(), target.requiredFeatures.end(), feature) !=
           target.requiredFeatures.end();
  };
  const bool amx = has("amx-tile") && has("amx-bf16");
  if (!requested) {
    if (amx)
      return PrefillMatmul::Amx;
    // AMD Zen 4 splits a 512-bit FMA into two 256-bit halves but issues
    // vdpbf16ps, twice the multiply-adds, as fast (AMD's and uops.info's
    // tables; llama.cpp's BF16 path uses it there). Not measured by us.
    if (has("avx512bf16") && llvm::StringRef(target.llvmCpu).startswith("znver"))
      return PrefillMatmul::Avx512Bf16;
    return PrefillMatmul::F32;
  }
  auto refuse = [&](const char *what) {
    return std::invalid_argument(std::string("--prefill-matmul=") + prefillMatmulName(*requested) +
                                 " needs " + what + ", which --cpu=" + target.name +
                                 " does not have (use --cpu=host on a CPU that has it)");
  };
  if (*requested == PrefillMatmul::Avx512Bf16 && !has("avx512bf16"))
    throw refuse("AVX512-BF16");
  if (*requested == PrefillMatmul::Amx && !amx)
    throw refuse("AMX-BF16");
  return *requested;
}

CompiledModel compileForCpu(ModuleOp module, const CpuTarget &target,
                            const CpuCompileOptions &options) {
  const PrefillMatmul prefillMatmul = resolvePrefillMatmul(target, options.prefillMatmul);
  auto forward = module.lookupSymbol<func::FuncOp>(kEntryPoint);
  if (!forward || forward.getBody().front().getOps<DispatchOp>().empty())
    throw std::runtime_error("compiling for the CPU needs the dispatch stage (--emit=dispatch)");
  CompiledModel compiled;
  std::set<std::string> prologueGain = kernelsWithPrologueGain(forward);
  std::map<std::string, DispatchOp> exampleDispatch;
  for (DispatchOp dispatch : forward.getBody().front().getOps<DispatchOp>())
    exampleDispatch.try_emplace(dispatch.getKernel().str(), dispatch);
  json kernels = json::array();
  std::set<std::string> columnBlocks;
  module.walk([&](func::FuncOp kernel) {
    if (!kernel->hasAttr(kKernelAttrName))
      return;
    const std::string name = kernel.getSymName().str();
    std::optional<UnfoldedWeight> unfolded;
    if (prologueGain.count(name))
      unfolded = unfold(exampleDispatch.at(name).getOperand(1));
    CpuKernel cpu = cpuKernelFor(kernel, unfolded, prefillMatmul, options.kvCache);
    compiled.kernelSource += cpu.source;
    json entry = {{"name", name}, {"grid", cpu.grid}};
    if (cpu.columnBlocks) {
      entry["weight_layout"] = "column_blocks";
      columnBlocks.insert(name);
    }
    if (cpu.chunksPerThread != 1)
      entry["chunks_per_thread"] = cpu.chunksPerThread;
    if (cpu.decodeChunksPerThread != 1)
      entry["decode_chunks_per_thread"] = cpu.decodeChunksPerThread;
    if (cpu.prefillMatmul != PrefillMatmul::F32) {
      entry["prefill_activations"] = "bf16";
      entry["prefill_matmul"] = prefillMatmulName(cpu.prefillMatmul);
    }
    kernels.push_back(entry);
  });
  compiled.sharedObject = linkSharedObject(compileKernelsToObject(compiled.kernelSource, target));

  ManifestBuilder builder(module, prologueGain, columnBlocks);
  builder.collectWeights(forward);
  json schedule = builder.schedule(forward);
  json output = builder.describe(forward.getBody().front().getTerminator()->getOperand(0));
  json weights = builder.takeWeights();
  passes::PipelineStatistics stats = passes::collectStatistics(module, module);
  compiled.manifest = {
      {"format", "q3c-cpu"},
      {"format_version", 1},
      {"target",
       {{"cpu", target.name},
        {"llvm_cpu", target.llvmCpu},
        {"required_features", target.requiredFeatures},
        {"prefill_matmul", prefillMatmulName(prefillMatmul)}}},
      {"config", configJson(module)},
      {"kv_cache_dtype", kvCacheName(options.kvCache)},
      {"kernels", kernels},
      {"weights", weights},
      {"buffers", bufferPlanJson(module)},
      {"schedule", schedule},
      {"output", output},
      {"decode_bytes_per_token",
       stats.decodeActivationBytes.value_or(0) + decodeWeightBytes(weights, schedule, module)},
  };
  return compiled;
}

void writeCpuArtifact(const std::string &path, const CompiledModel &model,
                      const std::vector<runtime::ArtifactSection> &extraSections) {
  std::vector<runtime::ArtifactSection> sections;
  sections.push_back({"kernels.so", runtime::SectionKind::Executable, model.sharedObject});
  sections.push_back({"kernels.mlir", runtime::SectionKind::Data,
                      std::vector<uint8_t>(model.kernelSource.begin(), model.kernelSource.end())});
  sections.insert(sections.end(), extraSections.begin(), extraSections.end());
  runtime::writeArtifact(path, model.manifest, sections);
}

} // namespace q3::cpu
