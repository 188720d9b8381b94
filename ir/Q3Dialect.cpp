//===- Q3Dialect.cpp - dialect registration, types and attributes ---------===//
#include "ir/Q3Dialect.h"
#include "ir/Q3Ops.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace q3::ir;

#include "ir/Q3Dialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "ir/Q3Types.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/Q3Attributes.cpp.inc"

void Q3Dialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/Q3Ops.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "ir/Q3Types.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/Q3Attributes.cpp.inc"
      >();
}

LogicalResult KVCacheType::verify(function_ref<InFlightDiagnostic()> emitError, int64_t layers,
                                  int64_t kvHeads, int64_t headDim, Type element) {
  if (layers <= 0)
    return emitError() << "!q3.kv_cache: layers must be positive, got " << layers;
  if (kvHeads <= 0)
    return emitError() << "!q3.kv_cache: kv_heads must be positive, got " << kvHeads;
  if (headDim <= 0)
    return emitError() << "!q3.kv_cache: head_dim must be positive, got " << headDim;
  if (!element || !(element.isF32() || element.isBF16() || element.isF16()))
    return emitError() << "!q3.kv_cache: element must be f32, bf16 or f16, got " << element;
  return success();
}

bool q3::ir::hasColumnBlocks(Type type) {
  auto tensor = type.dyn_cast<RankedTensorType>();
  return tensor && tensor.getEncoding() && tensor.getEncoding().isa<ColumnBlocksAttr>();
}

//===----------------------------------------------------------------------===//
// LoweringConfigAttr: `#q3.lowering<key = value, ...>`, every key optional.
//===----------------------------------------------------------------------===//

namespace {

constexpr llvm::StringLiteral kGridKinds[] = {"fixed", "per_row"};
constexpr llvm::StringLiteral kMatmuls[] = {"f32", "avx512bf16", "amx"};
constexpr llvm::StringLiteral kWeightPackings[] = {"at_load", "per_call"};
constexpr int64_t kMaxChunksPerThread = 64;

/// The mutable form of the attribute's parameters.
struct LoweringFields {
  std::string gridKind, matmul, weightPacking;
  int64_t gridCount = 0, prefillChunks = 0, decodeChunks = 0, prefetchBytes = 0, decodeStreams = 0,
          decodeAccumulators = 0, workspaceBytes = 0, threadScratchBytes = 0,
          threadScratchRowBytes = 0;
  SmallVector<int64_t> tile, workgroupSize;

  explicit LoweringFields(LoweringConfigAttr attr = {}) {
    if (!attr)
      return;
    gridKind = attr.getGridKind().str();
    gridCount = attr.getGridCount();
    matmul = attr.getMatmul().str();
    tile.assign(attr.getTile().begin(), attr.getTile().end());
    weightPacking = attr.getWeightPacking().str();
    prefillChunks = attr.getPrefillChunks();
    decodeChunks = attr.getDecodeChunks();
    prefetchBytes = attr.getPrefetchBytes();
    decodeStreams = attr.getDecodeStreams();
    decodeAccumulators = attr.getDecodeAccumulators();
    workspaceBytes = attr.getWorkspaceBytes();
    threadScratchBytes = attr.getThreadScratchBytes();
    threadScratchRowBytes = attr.getThreadScratchRowBytes();
    workgroupSize.assign(attr.getWorkgroupSize().begin(), attr.getWorkgroupSize().end());
  }
  LoweringConfigAttr get(MLIRContext *context) const {
    return LoweringConfigAttr::get(context, gridKind, gridCount, matmul, tile, weightPacking,
                                   prefillChunks, decodeChunks, prefetchBytes, decodeStreams,
                                   decodeAccumulators, workspaceBytes, threadScratchBytes,
                                   threadScratchRowBytes, workgroupSize);
  }
};

ParseResult parseIntegerList(AsmParser &parser, SmallVector<int64_t> &values) {
  return parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() -> ParseResult {
    int64_t value;
    if (parser.parseInteger(value))
      return failure();
    values.push_back(value);
    return success();
  });
}

} // namespace

LoweringConfigAttr LoweringConfigAttr::empty(MLIRContext *context) {
  return LoweringFields().get(context);
}

LoweringConfigAttr LoweringConfigAttr::withGrid(StringRef kind, int64_t count) const {
  LoweringFields fields(*this);
  fields.gridKind = kind.str();
  fields.gridCount = count;
  return fields.get(getContext());
}

LoweringConfigAttr LoweringConfigAttr::withMatmul(StringRef matmul) const {
  LoweringFields fields(*this);
  fields.matmul = matmul.str();
  return fields.get(getContext());
}

LoweringConfigAttr LoweringConfigAttr::withTile(ArrayRef<int64_t> tile) const {
  LoweringFields fields(*this);
  fields.tile.assign(tile.begin(), tile.end());
  return fields.get(getContext());
}

LoweringConfigAttr LoweringConfigAttr::withWeightPacking(StringRef packing) const {
  LoweringFields fields(*this);
  fields.weightPacking = packing.str();
  return fields.get(getContext());
}

LoweringConfigAttr LoweringConfigAttr::withChunks(int64_t prefill, int64_t decode) const {
  LoweringFields fields(*this);
  fields.prefillChunks = prefill;
  fields.decodeChunks = decode;
  return fields.get(getContext());
}

LoweringConfigAttr LoweringConfigAttr::withPrefetchBytes(int64_t bytes) const {
  LoweringFields fields(*this);
  fields.prefetchBytes = bytes;
  return fields.get(getContext());
}

LoweringConfigAttr LoweringConfigAttr::withDecodeStreams(int64_t streams) const {
  LoweringFields fields(*this);
  fields.decodeStreams = streams;
  return fields.get(getContext());
}

LoweringConfigAttr LoweringConfigAttr::withDecodeAccumulators(int64_t accumulators) const {
  LoweringFields fields(*this);
  fields.decodeAccumulators = accumulators;
  return fields.get(getContext());
}

LoweringConfigAttr LoweringConfigAttr::withWorkgroupSize(ArrayRef<int64_t> size) const {
  LoweringFields fields(*this);
  fields.workgroupSize.assign(size.begin(), size.end());
  return fields.get(getContext());
}

LoweringConfigAttr LoweringConfigAttr::withWorkspaceBytes(int64_t bytes) const {
  LoweringFields fields(*this);
  fields.workspaceBytes = bytes;
  return fields.get(getContext());
}

LoweringConfigAttr LoweringConfigAttr::withThreadScratch(int64_t bytes, int64_t rowBytes) const {
  LoweringFields fields(*this);
  fields.threadScratchBytes = bytes;
  fields.threadScratchRowBytes = rowBytes;
  return fields.get(getContext());
}

std::string LoweringConfigAttr::threadScratchText(int64_t bytes, int64_t rowBytes) {
  return std::to_string(bytes) + " + " + std::to_string(rowBytes) + " * rows";
}

namespace {
/// `F + R * rows` (thread_scratch).
ParseResult parseThreadScratch(AsmParser &parser, int64_t &bytes, int64_t &rowBytes) {
  if (parser.parseInteger(bytes) || parser.parsePlus() || parser.parseInteger(rowBytes) ||
      parser.parseStar() || parser.parseKeyword("rows"))
    return failure();
  return success();
}
} // namespace

Attribute LoweringConfigAttr::parse(AsmParser &parser, Type) {
  LoweringFields fields;
  auto parseField = [&]() -> ParseResult {
    std::string key;
    if (parser.parseKeywordOrString(&key) || parser.parseEqual())
      return failure();
    if (key == "grid") {
      if (parser.parseKeywordOrString(&fields.gridKind) || parser.parseInteger(fields.gridCount))
        return failure();
      return success();
    }
    if (key == "matmul")
      return parser.parseKeywordOrString(&fields.matmul);
    if (key == "tile")
      return parseIntegerList(parser, fields.tile);
    if (key == "weight_packing")
      return parser.parseKeywordOrString(&fields.weightPacking);
    if (key == "workgroup_size")
      return parseIntegerList(parser, fields.workgroupSize);
    if (key == "prefill_chunks")
      return parser.parseInteger(fields.prefillChunks);
    if (key == "decode_chunks")
      return parser.parseInteger(fields.decodeChunks);
    if (key == "prefetch_bytes") {
      if (succeeded(parser.parseOptionalKeyword("none"))) {
        fields.prefetchBytes = LoweringConfigAttr::kNoPrefetch;
        return success();
      }
      const SMLoc at = parser.getCurrentLocation();
      if (parser.parseInteger(fields.prefetchBytes))
        return failure();
      if (fields.prefetchBytes < 0) // `none` has one spelling
        return parser.emitError(at) << "#q3.lowering: prefetch_bytes must be none or a byte "
                                       "count, got "
                                    << fields.prefetchBytes;
      return success();
    }
    if (key == "decode_streams")
      return parser.parseInteger(fields.decodeStreams);
    if (key == "decode_accumulators")
      return parser.parseInteger(fields.decodeAccumulators);
    if (key == "workspace_bytes")
      return parser.parseInteger(fields.workspaceBytes);
    if (key == "thread_scratch")
      return parseThreadScratch(parser, fields.threadScratchBytes, fields.threadScratchRowBytes);
    return parser.emitError(parser.getCurrentLocation())
           << "#q3.lowering: unknown field '" << key
           << "' (fields: grid, matmul, tile, weight_packing, prefill_chunks, decode_chunks, "
              "prefetch_bytes, decode_streams, decode_accumulators, workspace_bytes, "
              "thread_scratch, "
              "workgroup_size)";
  };
  if (parser.parseLess())
    return {};
  if (failed(parser.parseOptionalGreater())) {
    if (parser.parseCommaSeparatedList(parseField) || parser.parseGreater())
      return {};
  }
  return getChecked([&] { return parser.emitError(parser.getNameLoc()); }, parser.getContext(),
                    fields.gridKind, fields.gridCount, fields.matmul, fields.tile,
                    fields.weightPacking, fields.prefillChunks, fields.decodeChunks,
                    fields.prefetchBytes, fields.decodeStreams, fields.decodeAccumulators,
                    fields.workspaceBytes, fields.threadScratchBytes, fields.threadScratchRowBytes,
                    fields.workgroupSize);
}

void LoweringConfigAttr::print(AsmPrinter &printer) const {
  SmallVector<std::string> fields;
  auto list = [](ArrayRef<int64_t> values) {
    std::string text = "[";
    for (auto [i, v] : llvm::enumerate(values))
      text += (i ? ", " : "") + std::to_string(v);
    return text + "]";
  };
  if (hasGrid())
    fields.push_back("grid = " + getGridKind().str() + " " + std::to_string(getGridCount()));
  if (!getMatmul().empty())
    fields.push_back("matmul = " + getMatmul().str());
  if (!getTile().empty())
    fields.push_back("tile = " + list(getTile()));
  if (!getWeightPacking().empty())
    fields.push_back("weight_packing = " + getWeightPacking().str());
  if (getPrefillChunks())
    fields.push_back("prefill_chunks = " + std::to_string(getPrefillChunks()));
  if (getDecodeChunks())
    fields.push_back("decode_chunks = " + std::to_string(getDecodeChunks()));
  if (getPrefetchBytes() == kNoPrefetch)
    fields.push_back("prefetch_bytes = none");
  else if (getPrefetchBytes())
    fields.push_back("prefetch_bytes = " + std::to_string(getPrefetchBytes()));
  if (getDecodeStreams())
    fields.push_back("decode_streams = " + std::to_string(getDecodeStreams()));
  if (getDecodeAccumulators())
    fields.push_back("decode_accumulators = " + std::to_string(getDecodeAccumulators()));
  if (getWorkspaceBytes())
    fields.push_back("workspace_bytes = " + std::to_string(getWorkspaceBytes()));
  if (getThreadScratchBytes() || getThreadScratchRowBytes())
    fields.push_back("thread_scratch = " +
                     threadScratchText(getThreadScratchBytes(), getThreadScratchRowBytes()));
  if (!getWorkgroupSize().empty())
    fields.push_back("workgroup_size = " + list(getWorkgroupSize()));
  printer << "<";
  for (auto [i, field] : llvm::enumerate(fields))
    printer << (i ? ", " : "") << field;
  printer << ">";
}

LogicalResult LoweringConfigAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                         StringRef gridKind, int64_t gridCount, StringRef matmul,
                                         ArrayRef<int64_t> tile, StringRef weightPacking,
                                         int64_t prefillChunks, int64_t decodeChunks,
                                         int64_t prefetchBytes, int64_t decodeStreams,
                                         int64_t decodeAccumulators, int64_t workspaceBytes,
                                         int64_t threadScratchBytes, int64_t threadScratchRowBytes,
                                         ArrayRef<int64_t> workgroupSize) {
  if (!gridKind.empty() && !llvm::is_contained(kGridKinds, gridKind))
    return emitError() << "#q3.lowering: grid must be 'fixed N' or 'per_row N', got '" << gridKind
                       << "'";
  if (!gridKind.empty() && gridCount <= 0)
    return emitError() << "#q3.lowering: grid count must be positive, got " << gridCount;
  if (!matmul.empty() && !llvm::is_contained(kMatmuls, matmul))
    return emitError() << "#q3.lowering: matmul must be f32, avx512bf16 or amx, got '" << matmul
                       << "'";
  if (!weightPacking.empty() && !llvm::is_contained(kWeightPackings, weightPacking))
    return emitError() << "#q3.lowering: weight_packing must be at_load or per_call, got '"
                       << weightPacking << "'";
  for (int64_t chunks : {prefillChunks, decodeChunks})
    if (chunks < 0 || chunks > kMaxChunksPerThread)
      return emitError() << "#q3.lowering: chunks per thread must be 1 to " << kMaxChunksPerThread
                         << ", got " << chunks;
  if (prefetchBytes != 0 && prefetchBytes != LoweringConfigAttr::kNoPrefetch &&
      (prefetchBytes < LoweringConfigAttr::kMinPrefetchBytes ||
       prefetchBytes > LoweringConfigAttr::kMaxPrefetchBytes))
    return emitError() << "#q3.lowering: prefetch_bytes must be none or "
                       << LoweringConfigAttr::kMinPrefetchBytes << " to "
                       << LoweringConfigAttr::kMaxPrefetchBytes << ", got " << prefetchBytes;
  if (decodeStreams != 0 &&
      !llvm::is_contained(LoweringConfigAttr::kDecodeStreamCounts, decodeStreams))
    return emitError() << "#q3.lowering: decode_streams must be 1, 2 or 4, got " << decodeStreams;
  if (decodeAccumulators < 0 || decodeAccumulators > LoweringConfigAttr::kMaxDecodeAccumulators)
    return emitError() << "#q3.lowering: decode_accumulators must be 1 to "
                       << LoweringConfigAttr::kMaxDecodeAccumulators << ", got "
                       << decodeAccumulators;
  if (workspaceBytes < 0 || workspaceBytes > LoweringConfigAttr::kMaxWorkspaceBytes)
    return emitError() << "#q3.lowering: workspace_bytes must be 0 to "
                       << LoweringConfigAttr::kMaxWorkspaceBytes << ", got " << workspaceBytes;
  if (threadScratchBytes < 0 || threadScratchBytes > LoweringConfigAttr::kMaxThreadScratchBytes ||
      threadScratchRowBytes < 0 ||
      threadScratchRowBytes > LoweringConfigAttr::kMaxThreadScratchRowBytes)
    return emitError() << "#q3.lowering: thread_scratch must be F + R * rows with F 0 to "
                       << LoweringConfigAttr::kMaxThreadScratchBytes << " and R 0 to "
                       << LoweringConfigAttr::kMaxThreadScratchRowBytes << ", got "
                       << threadScratchBytes << " + " << threadScratchRowBytes << " * rows";
  for (ArrayRef<int64_t> sizes : {tile, workgroupSize})
    for (int64_t size : sizes)
      if (size <= 0)
        return emitError() << "#q3.lowering: tile and workgroup sizes must be positive, got "
                           << size;
  return success();
}
