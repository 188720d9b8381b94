//===- ScheduleWriter.cpp - the weight plan and schedule of a Vulkan artifact ===//
#include "backends/vulkan/ScheduleWriter.h"
#include "backends/vulkan/LoweringConfig.h"
#include "backends/vulkan/PrologueGain.h"

#include "ir/BuildGraph.h"
#include "ir/Q3Ops.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/DenseMap.h"

#include <stdexcept>

using namespace mlir;
using nlohmann::json;

namespace q3::vulkan {
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

std::vector<int64_t> shapeOf(Value v) {
  auto shape = v.getType().cast<RankedTensorType>().getShape();
  return std::vector<int64_t>(shape.begin(), shape.end());
}

std::string dtypeOf(Value v) {
  return dtypeName(v.getType().cast<RankedTensorType>().getElementType());
}

/// Bytes of one row (one position) of an activation [T, ...] of f32.
int64_t rowBytesOf(Value activation) {
  int64_t bytes = 4;
  for (int64_t extent : activation.getType().cast<RankedTensorType>().getShape().drop_front())
    bytes *= extent;
  return bytes;
}

json configJson(ModuleOp module) {
  json config = json::object();
  auto dict = module->getAttrOfType<DictionaryAttr>("q3.config");
  if (!dict)
    throw std::runtime_error("module has no q3.config: build it with q3c from a config");
  for (NamedAttribute entry : dict) {
    std::string key = entry.getName().str();
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

class Writer {
public:
  explicit Writer(ModuleOp module) : module(module) {}

  void collectWeights(func::FuncOp forward) {
    weights = json::array();
    forward.walk([&](Operation *op) {
      if (!isa<ir::ParamOp, ir::FoldGainOp, ir::ConcatRowsOp>(op))
        return;
      Value result = op->getResult(0);
      int64_t id = int64_t(weights.size());
      weightIds[result] = id;
      json entry = {{"id", id}, {"shape", shapeOf(result)}, {"dtype", dtypeOf(result)}};
      if (auto param = dyn_cast<ir::ParamOp>(op)) {
        entry["kind"] = "param";
        entry["name"] = param.getName().str();
      } else {
        entry["kind"] = isa<ir::FoldGainOp>(op) ? "fold_gain" : "concat_rows";
        json inputs = json::array();
        for (Value input : op->getOperands())
          inputs.push_back(weightIds.lookup(input));
        entry["inputs"] = inputs;
      }
      weights.push_back(entry);
    });
  }

  json schedule(func::FuncOp forward) {
    json steps = json::array();
    for (ir::DispatchOp dispatch : forward.getBody().front().getOps<ir::DispatchOp>()) {
      auto kernel = module.lookupSymbol<func::FuncOp>(dispatch.getKernel());
      const bool prologueGain = bool(loweringConfig(kernel, "prologue_gain"));
      const bool layerCache =
          loweringConfig(kernel, "cache_binding") == StringAttr::get(module.getContext(), "layer");
      json operands = json::array();
      for (auto [i, operand] : llvm::enumerate(dispatch.getOperands())) {
        if (i == 1 && prologueGain) {
          std::optional<UnfoldedWeight> unfolded = unfoldGain(operand);
          if (!unfolded)
            throw std::runtime_error("@" + dispatch.getKernel().str() +
                                     ": prologue_gain on a dispatch whose weight is not folded");
          operands.push_back({{"kind", "weight"}, {"id", stacked(unfolded->parts)}});
          operands.push_back(describe(unfolded->gain));
          continue;
        }
        if (layerCache && operand.getType().isa<ir::KVCacheType>()) {
          json layer = describe(dispatch.getOperand(layerOperand(kernel)));
          if (layer["kind"] != "constant")
            throw std::runtime_error("the cache layer of a dispatch must be a constant");
          operands.push_back({{"kind", "cache_keys"}, {"layer", layer["value"]}});
          operands.push_back({{"kind", "cache_values"}, {"layer", layer["value"]}});
          continue;
        }
        operands.push_back(describe(operand));
      }
      auto buffers = dispatch->getAttrOfType<DenseI64ArrayAttr>("q3.buffers");
      if (!buffers)
        throw std::runtime_error("dispatch without q3.buffers: run plan-buffers");
      json results = json::array();
      for (auto [i, result] : llvm::enumerate(dispatch.getResults())) {
        json bound = cacheView(kernel, dispatch, unsigned(i))
                         .value_or(json{{"kind", "buffer"},
                                        {"id", buffers[i]},
                                        {"row_bytes", rowBytesOf(result)}});
        values[result] = bound;
        results.push_back(bound);
      }
      steps.push_back({{"kernel", dispatch.getKernel().str()},
                       {"operands", operands},
                       {"results", results}});
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
    throw std::runtime_error("the Vulkan backend cannot bind a value defined by '" +
                             value.getDefiningOp()->getName().getStringRef().str() +
                             "' outside a kernel");
  }

  json weights;

private:
  /// The checkpoint weights `parts` stacked by rows, as stored.
  int64_t stacked(const std::vector<Value> &parts) {
    if (parts.size() == 1)
      return weightIds.lookup(parts[0]);
    json inputs = json::array();
    int64_t rows = 0;
    for (Value part : parts) {
      inputs.push_back(weightIds.lookup(part));
      rows += shapeOf(part)[0];
    }
    int64_t id = int64_t(weights.size());
    weights.push_back({{"id", id},
                       {"kind", "concat_rows"},
                       {"inputs", inputs},
                       {"shape", {rows, shapeOf(parts[0])[1]}},
                       {"dtype", dtypeOf(parts[0])}});
    return id;
  }

  /// Which operand of a q/k-norm + RoPE + cache kernel's dispatch is its layer.
  unsigned layerOperand(func::FuncOp kernel) {
    auto fused = dyn_cast_or_null<ir::QKNormRopeCacheOp>(kernelAnchor(kernel));
    if (!fused)
      throw std::runtime_error("cache_binding on a kernel that does not write the cache");
    return fused.getLayer().cast<BlockArgument>().getArgNumber();
  }

  /// The keys and values a cache op returns are views of one layer's cache.
  std::optional<json> cacheView(func::FuncOp kernel, ir::DispatchOp dispatch, unsigned index) {
    Value returned = kernel.getBody().front().getTerminator()->getOperand(index);
    auto fused = returned.getDefiningOp<ir::QKNormRopeCacheOp>();
    if (!fused || returned == fused.getQuery())
      return std::nullopt;
    json layer = describe(dispatch.getOperand(layerOperand(kernel)));
    return json{{"kind", returned == fused.getKeys() ? "cache_keys" : "cache_values"},
                {"layer", layer["value"]}};
  }

  ModuleOp module;
  llvm::DenseMap<Value, int64_t> weightIds;
  llvm::DenseMap<Value, json> values;
};

/// Weight bytes one decode step reads as the schedule binds them (the
/// embedding table: one row).
int64_t decodeWeightBytes(const json &weights, const json &schedule, ModuleOp module) {
  int64_t total = 0;
  for (const json &step : schedule) {
    auto kernel = module.lookupSymbol<func::FuncOp>(step.at("kernel").get<std::string>());
    const bool embedding = isa_and_nonnull<ir::EmbeddingOp>(kernelAnchor(kernel));
    for (const json &operand : step.at("operands")) {
      if (operand.at("kind") != "weight")
        continue;
      const json &weight = weights.at(operand.at("id").get<size_t>());
      auto shape = weight.at("shape").get<std::vector<int64_t>>();
      int64_t elements = embedding ? shape.back() : 1;
      if (!embedding)
        for (int64_t extent : shape)
          elements *= extent;
      total += elements * (weight.at("dtype") == "f32" ? 4 : 2);
    }
  }
  return total;
}

} // namespace

SchedulePlan writeSchedule(ModuleOp module) {
  auto forward = module.lookupSymbol<func::FuncOp>(ir::kEntryPoint);
  if (!forward || forward.getBody().front().getOps<ir::DispatchOp>().empty())
    throw std::runtime_error("compiling for Vulkan needs the dispatch stage (--emit=dispatch)");
  Writer writer(module);
  writer.collectWeights(forward);
  SchedulePlan plan;
  plan.schedule = writer.schedule(forward);
  plan.output = writer.describe(forward.getBody().front().getTerminator()->getOperand(0));
  plan.weights = writer.weights;
  plan.config = configJson(module);
  plan.buffers = bufferPlanJson(module);
  plan.decodeWeightBytes = decodeWeightBytes(plan.weights, plan.schedule, module);
  return plan;
}

} // namespace q3::vulkan
