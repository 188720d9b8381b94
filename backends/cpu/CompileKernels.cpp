//===- CompileKernels.cpp - kernel MLIR -> LLVM -> object code ------------===//
//
// The kernel functions take memref<?xi8> buffers and index scalars. After
// lowering, each memref is an exploded descriptor (allocated and aligned
// pointer, offset, size, stride), an ABI no runtime should know. So for every
// kernel an entry with the fixed signature of runtime/KernelABI.h is built in
// LLVM IR: it loads buffer pointers, sizes and scalars from its arrays and
// calls the kernel, which LLVM then inlines.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/CompileKernels.h"

#include "runtime/ResourceLimits.h"
#include "runtime/ThreadPool.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

#include <stdexcept>

namespace q3::cpu {
namespace {

/// What the entry of one kernel must pass: its buffers, then its scalars
/// (the last two index arguments are the workgroup range).
struct KernelSignature {
  std::string name; // without the q3k_ prefix
  unsigned buffers = 0;
  unsigned scalars = 0;
};

std::vector<KernelSignature> kernelSignatures(mlir::ModuleOp module) {
  std::vector<KernelSignature> kernels;
  module.walk([&](mlir::func::FuncOp func) {
    llvm::StringRef name = func.getSymName();
    if (func.isPrivate() || !name.consume_front("q3k_"))
      return;
    KernelSignature signature{name.str()};
    for (mlir::Type type : func.getFunctionType().getInputs())
      ++(type.isa<mlir::MemRefType>() ? signature.buffers : signature.scalars);
    signature.scalars -= 2;
    kernels.push_back(signature);
  });
  return kernels;
}

/// math.exp (the SwiGLU epilogue and the softmax) as MLIR's f32 polynomial
/// instead of a libm call per element: vector code, ~1 ulp (the parity tests
/// bound the effect).
void approximateMath(mlir::ModuleOp module) {
  mlir::RewritePatternSet patterns(module.getContext());
  mlir::populateMathPolynomialApproximationPatterns(patterns);
  if (mlir::failed(mlir::applyPatternsAndFoldGreedily(module, std::move(patterns))))
    throw std::runtime_error("approximating math functions in the CPU kernels failed");
}

/// The kernels' memory is planned (q3.lowering's thread_scratch and
/// workspace_bytes, the stack): a kernel that calls the allocator is a
/// template bug, caught here rather than as page faults at run time.
void requireNoAllocation(mlir::ModuleOp module) {
  for (const char *allocator : {"malloc", "aligned_alloc", "free"})
    if (module.lookupSymbol(allocator))
      throw std::runtime_error(std::string("a generated CPU kernel calls ") + allocator +
                               ": kernels take their scratch from the runtime "
                               "(q3.lowering thread_scratch), never the heap");
}

void lowerToLLVMDialect(mlir::ModuleOp module, const std::string &diagnostics) {
  approximateMath(module);
  mlir::PassManager pm(module.getContext());
  pm.addPass(mlir::createConvertSCFToCFPass());
  // Subviews (the attention's key blocks read in place) as plain offsets.
  pm.addPass(mlir::memref::createExpandStridedMetadataPass());
  pm.addPass(mlir::createLowerAffinePass());
  // Horizontal sums as a tree, not 16 dependent adds: they end every dot product.
  pm.addPass(mlir::createConvertVectorToLLVMPass(
      mlir::LowerVectorToLLVMOptions().enableReassociateFPReductions()));
  pm.addPass(mlir::createMemRefToLLVMConversionPass());
  pm.addPass(mlir::createConvertMathToLLVMPass());
  pm.addPass(mlir::createArithToLLVMConversionPass());
  pm.addPass(mlir::cf::createConvertControlFlowToLLVMPass());
  pm.addPass(mlir::createConvertFuncToLLVMPass());
  pm.addPass(mlir::createReconcileUnrealizedCastsPass());
  if (mlir::failed(pm.run(module)))
    throw std::runtime_error("lowering the CPU kernels to the LLVM dialect failed: " + diagnostics);
  requireNoAllocation(module);
}

/// void q3_kernel_<name>(void *const *buffers, const int64_t *bytes,
///                       const int64_t *scalars, int64_t wgBegin, int64_t wgEnd)
void addEntry(llvm::Module &module, const KernelSignature &signature) {
  llvm::LLVMContext &context = module.getContext();
  llvm::Function *kernel = module.getFunction("q3k_" + signature.name);
  llvm::IRBuilder<> b(context);
  llvm::Type *i64 = b.getInt64Ty(), *ptr = b.getPtrTy();
  auto *type = llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, ptr, i64, i64}, false);
  auto *entry = llvm::Function::Create(type, llvm::Function::ExternalLinkage,
                                       "q3_kernel_" + signature.name, module);
  b.SetInsertPoint(llvm::BasicBlock::Create(context, "entry", entry));
  llvm::Value *buffers = entry->getArg(0), *bytes = entry->getArg(1), *scalars = entry->getArg(2);
  std::vector<llvm::Value *> args;
  for (unsigned i = 0; i < signature.buffers; ++i) {
    llvm::Value *base = b.CreateLoad(ptr, b.CreateConstGEP1_64(ptr, buffers, i));
    llvm::Value *size = b.CreateLoad(i64, b.CreateConstGEP1_64(i64, bytes, i));
    // memref<?xi8> descriptor: allocated, aligned, offset, size, stride.
    args.insert(args.end(), {base, base, b.getInt64(0), size, b.getInt64(1)});
  }
  for (unsigned i = 0; i < signature.scalars; ++i)
    args.push_back(b.CreateLoad(i64, b.CreateConstGEP1_64(i64, scalars, i)));
  args.push_back(entry->getArg(3));
  args.push_back(entry->getArg(4));
  b.CreateCall(kernel, args);
  b.CreateRetVoid();
}

std::unique_ptr<llvm::TargetMachine> createTargetMachine(const CpuTarget &target) {
  static const bool initialized = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser(); // the inline assembly of the bf16 tiles
    return true;
  }();
  (void)initialized;
  std::string triple = llvm::sys::getDefaultTargetTriple(), error;
  const llvm::Target *llvmTarget = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!llvmTarget)
    throw std::runtime_error("no LLVM target for " + triple + ": " + error);
  return std::unique_ptr<llvm::TargetMachine>(llvmTarget->createTargetMachine(
      triple, target.llvmCpu, target.features, llvm::TargetOptions(), llvm::Reloc::PIC_,
      std::nullopt, llvm::CodeGenOpt::Aggressive));
}

/// Every frame and dynamic alloca touches its pages in order as it takes
/// them: a kernel whose scratch outgrows its stack (runtime/KernelABI.h)
/// faults at the guard page instead of writing into what lies below it.
void probeStackPages(llvm::Module &module) {
  for (llvm::Function &function : module)
    if (!function.isDeclaration())
      function.addFnAttr("probe-stack", "inline-asm");
}

void optimize(llvm::Module &module, llvm::TargetMachine &machine) {
  llvm::PassBuilder builder(&machine);
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager sccs;
  llvm::ModuleAnalysisManager modules;
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(sccs);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, sccs, modules);
  builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(module, modules);
}

std::vector<uint8_t> emitObject(llvm::Module &module, llvm::TargetMachine &machine) {
  llvm::SmallVector<char, 0> object;
  llvm::raw_svector_ostream stream(object);
  llvm::legacy::PassManager codegen;
  if (machine.addPassesToEmitFile(codegen, stream, nullptr, llvm::CGFT_ObjectFile))
    throw std::runtime_error("LLVM cannot emit object code for this target");
  codegen.run(module);
  return std::vector<uint8_t>(object.begin(), object.end());
}

} // namespace

std::vector<uint8_t> compileKernelsToObject(const std::string &mlirSource,
                                            const CpuTarget &target) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::func::FuncDialect, mlir::arith::ArithDialect, mlir::memref::MemRefDialect,
                  mlir::scf::SCFDialect, mlir::vector::VectorDialect, mlir::math::MathDialect,
                  mlir::LLVM::LLVMDialect>();
  mlir::registerLLVMDialectTranslation(registry);
  mlir::MLIRContext context(registry);
  std::string diagnostics;
  llvm::raw_string_ostream diagnosticStream(diagnostics);
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context, diagnosticStream);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(mlirSource, &context);
  if (!module)
    throw std::runtime_error("generated kernel source does not parse: " + diagnostics);
  std::vector<KernelSignature> kernels = kernelSignatures(*module);
  lowerToLLVMDialect(*module, diagnostics);

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule = mlir::translateModuleToLLVMIR(*module, llvmContext);
  if (!llvmModule)
    throw std::runtime_error("translating the CPU kernels to LLVM IR failed: " + diagnostics);
  std::unique_ptr<llvm::TargetMachine> machine = createTargetMachine(target);
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(machine->getTargetTriple().str());
  for (const KernelSignature &kernel : kernels)
    addEntry(*llvmModule, kernel);
  probeStackPages(*llvmModule);
  optimize(*llvmModule, *machine);
  return emitObject(*llvmModule, *machine);
}

std::vector<std::vector<uint8_t>> compileKernelsToObjects(const std::vector<std::string> &sources,
                                                          const CpuTarget &target) {
  std::vector<std::vector<uint8_t>> objects(sources.size());
  runtime::ThreadPool pool(std::max(1, std::min(runtime::availableCpus(), int(sources.size()))));
  // One chunk per source, so a thread that finishes early takes another.
  pool.parallelFor(
      int64_t(sources.size()),
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          objects[size_t(i)] = compileKernelsToObject(sources[size_t(i)], target);
      },
      int(sources.size()));
  return objects;
}

/// Writes `bytes` to `path`; a failed write is this line, not LLVM's "IO
/// failure on output stream" fatal error when the stream is destroyed.
static void writeFile(const llvm::SmallString<128> &path, const std::vector<uint8_t> &bytes) {
  std::error_code error;
  llvm::raw_fd_ostream out(path, error);
  if (error)
    throw std::runtime_error(path.str().str() + ": " + error.message());
  out.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  out.close();
  if (out.has_error()) {
    const std::string reason = out.error().message();
    out.clear_error();
    throw std::runtime_error(path.str().str() + ": cannot write: " + reason);
  }
}

std::vector<uint8_t> linkSharedObject(const std::vector<std::vector<uint8_t>> &objects) {
  std::vector<llvm::SmallString<128>> objectPaths(objects.size());
  llvm::SmallString<128> libraryPath;
  auto cleanup = llvm::make_scope_exit([&] {
    for (const llvm::SmallString<128> &path : objectPaths)
      if (!path.empty())
        llvm::sys::fs::remove(path);
    if (!libraryPath.empty())
      llvm::sys::fs::remove(libraryPath);
  });
  for (size_t i = 0; i < objects.size(); ++i) {
    if (llvm::sys::fs::createTemporaryFile("q3-kernels", "o", objectPaths[i]))
      throw std::runtime_error("cannot create temporary files to link the kernels");
    writeFile(objectPaths[i], objects[i]);
  }
  if (llvm::sys::fs::createTemporaryFile("q3-kernels", "so", libraryPath))
    throw std::runtime_error("cannot create temporary files to link the kernels");
  llvm::ErrorOr<std::string> driver = llvm::sys::findProgramByName("cc");
  if (!driver)
    throw std::runtime_error("linking the kernels needs a C compiler driver 'cc' on PATH");
  llvm::SmallVector<llvm::StringRef> args = {*driver, "-shared", "-o", libraryPath};
  for (const llvm::SmallString<128> &path : objectPaths)
    args.push_back(path);
  args.push_back("-lm");
  std::string message;
  if (llvm::sys::ExecuteAndWait(*driver, args, std::nullopt, {}, 0, 0, &message) != 0)
    throw std::runtime_error("'" + *driver + " -shared' failed to link the kernels " + message);
  auto library = llvm::MemoryBuffer::getFile(libraryPath);
  if (!library)
    throw std::runtime_error(libraryPath.str().str() + ": " + library.getError().message());
  const auto *begin = reinterpret_cast<const uint8_t *>((*library)->getBufferStart());
  return std::vector<uint8_t>(begin, begin + (*library)->getBufferSize());
}

} // namespace q3::cpu
