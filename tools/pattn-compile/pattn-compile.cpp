//===- pattn-compile.cpp - Compile pattn IR to a loadable library ---------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// pattn-compile turns a .mlir file of pattn ops into a shared library: one
// C-callable entry point per function that uses pattn ops, with the kernels
// for every requested chip embedded as one fatbin, so the CUDA driver picks
// the cubin matching the device's compute capability at load time. It also
// emits the intermediate forms (--emit=mlir|llvm|ptx|cubin) for inspection.
// Every form comes from pattn::buildCompilePipeline (--emit=mlir stops after
// its pattn part), so --backend, --fold and the other options mean the same
// for each.
//
// An entry point `f(memref args...)` becomes
//   int32_t f(<expanded memrefs>..., void *stream)
// where a rank-R memref expands to (allocated, aligned, offset, sizes[R],
// strides[R]); it returns the runtime's status. `pattn_manifest()` returns
// a JSON description of the entry points for loaders.
//
//===----------------------------------------------------------------------===//

#include "pattn/Dialect/PAttn/IR/PAttnDialect.h"
#include "pattn/Dialect/PAttn/IR/PAttnOps.h"
#include "pattn/InitAll.h"
#include "pattn/Pipelines/Pipelines.h"
#include "pattn/Target/TargetDescription.h"
#include "pattn/Version.inc"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/AsmParser/AsmParserState.h"
#include "mlir/Bytecode/BytecodeReader.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

using namespace mlir;
namespace cl = llvm::cl;

// --help lists these; LLVM's own options stay usable but hidden.
static cl::OptionCategory toolCategory("pattn-compile options");

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input.mlir>"),
                                      cl::init("-"), cl::cat(toolCategory));
static cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                       cl::value_desc("path"), cl::init("-"),
                                       cl::cat(toolCategory));
static cl::list<std::string>
    chips("chips", cl::CommaSeparated, cl::cat(toolCategory),
          cl::desc("Chips to build for (default: sm_80,sm_86,sm_89,sm_90a,"
                   "sm_100a,sm_120a)"));
static cl::opt<std::string>
    emit("emit", cl::init("so"), cl::cat(toolCategory),
         cl::desc("What to produce: so (shared library, the default), mlir "
                  "(after the fold, the backend choice and "
                  "convert-pattn-to-gpu), llvm (LLVM IR of the host code "
                  "with the embedded fatbin), ptx, cubin (one file per "
                  "chip: <output>.<chip>.cubin; -o - writes a one-chip "
                  "build's cubin to stdout)"));
static cl::opt<std::string>
    runtimeDir("runtime-dir", cl::cat(toolCategory),
               cl::desc("Directory of libpattn_runtime.so (default: ../lib "
                        "next to this executable)"));
static cl::opt<bool> showRemarks("remarks", cl::cat(toolCategory),
                                 cl::desc("Print the backend remarks"));
static cl::opt<int64_t> keysPerSplit("keys-per-split", cl::init(512),
                                     cl::cat(toolCategory),
                                     cl::desc("Keys one decode block reads"));
static cl::opt<int64_t> xqaKeysPerTile(
    "xqa-keys-per-tile", cl::init(0), cl::cat(toolCategory),
    cl::desc("Keys per tile of the XQA decode plans: 16, 32, 64 or 128 "
             "(0, the default: the planner's choice)"));
static cl::opt<int64_t> xqaStages(
    "xqa-stages", cl::init(0), cl::cat(toolCategory),
    cl::desc("Ring stages of the XQA decode plans: 2 to 8 (0, the default: "
             "the planner's choice)"));
static cl::opt<bool> xqaCopyWarp(
    "xqa-copy-warp", cl::init(false), cl::cat(toolCategory),
    cl::desc("XQA decode plans with a copy warp: 160 threads a block, the "
             "fifth warp copies the tiles (default: off)"));
static cl::opt<bool> xqaScoresAhead(
    "xqa-scores-ahead", cl::init(false), cl::cat(toolCategory),
    cl::desc("XQA decode plans of at most 8 rows that compute each tile's "
             "scores one iteration ahead, under the previous tile's softmax "
             "and P V (default: off)"));
static cl::opt<int64_t> xqaClusterHeads(
    "xqa-cluster-heads", cl::init(0), cl::cat(toolCategory),
    cl::desc("XQA decode plans whose blocks of this many consecutive KV "
             "heads (2, 4 or 8) form one thread-block cluster, where every "
             "chip is sm_90 or later (0, the default: none)"));
static cl::opt<int64_t> xqaClusterSplits(
    "xqa-cluster-splits", cl::init(0), cl::cat(toolCategory),
    cl::desc("XQA decode plans of this many splits (2, 4 or 8) that form "
             "one thread-block cluster and merge themselves, with no merge "
             "launch, where every chip is sm_90 or later and the op has no "
             "guard (0, the default: none)"));
static cl::opt<bool> xqaMergeUnsplit(
    "xqa-merge-unsplit", cl::init(false), cl::cat(toolCategory),
    cl::desc("XQA decode plans whose block merges its own rows where the "
             "host picks one split, with no merge launch, for ops without a "
             "guard (default: off)"));
static cl::opt<bool> hardwareConversions(
    "hardware-conversions", cl::init(true), cl::cat(toolCategory),
    cl::desc("Use the chips' conversion instructions where the target table "
             "allows; =false decodes with bit tricks on every chip (for "
             "comparing the two)"));
static cl::opt<std::string>
    backend("backend", cl::init("auto"), cl::value_desc("auto|xqa|portable"),
            cl::cat(toolCategory),
            cl::desc("Backend of every attention op: auto (the default; by "
                     "the eligibility table), xqa (an ineligible op is an "
                     "error) or portable"));
static cl::opt<std::string> promptKernel(
    "prompt-kernel", cl::init("prefill"),
    cl::value_desc("prefill|prefill-mma-sync|prefill-wgmma|xqa"),
    cl::cat(toolCategory),
    cl::desc("Tensor-core kernel of a prompt (more than 8 query tokens per "
             "sequence): prefill (the default: the prefill family, on wgmma "
             "where every chip built for has it and the caches are "
             "quantized; --remarks names its plan), prefill-mma-sync (the "
             "prefill family on mma.sync), prefill-wgmma (on wgmma wherever "
             "it serves) or xqa (the decode kernel in query tiles)"));
static cl::opt<bool>
    fold("fold", cl::init(true), cl::cat(toolCategory),
         cl::desc("Fold channel scales (pattn-fold-channel-scales); =false "
                  "leaves them unfolded, so ops with K channel scales go "
                  "portable (for testing)"));

/// Prints a message prefixed with the tool's name; returns 1.
static int fail(const llvm::Twine &message) {
  llvm::errs() << "pattn-compile: " << message << "\n";
  return 1;
}

//===----------------------------------------------------------------------===//
// Manifest
//===----------------------------------------------------------------------===//

static std::string elementName(Type type) {
  std::string name;
  llvm::raw_string_ostream os(name);
  os << type;
  return name;
}

static bool usesPAttn(func::FuncOp function) {
  return function
      .walk([](Operation *op) {
        return isa<pattn::PAttnDialect>(op->getDialect())
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

/// Whether `name` can be a keyword argument in Python and a C identifier.
static bool isIdentifier(StringRef name) {
  if (name.empty() || !(llvm::isAlpha(name.front()) || name.front() == '_'))
    return false;
  return llvm::all_of(name,
                      [](char c) { return llvm::isAlnum(c) || c == '_'; });
}

/// The name loaders give argument `index` of `function`: its `pattn.name`
/// attribute, else a name location on the argument, else the SSA name the
/// source wrote (`%k_pages` is `k_pages`), else `arg<index>`. SSA names that
/// are not identifiers (`%0`) are skipped; a `pattn.name` that is not one is
/// an error.
static FailureOr<std::string> argumentName(func::FuncOp function,
                                           unsigned index,
                                           const AsmParserState *asmState) {
  if (Attribute attr = function.getArgAttr(index, "pattn.name")) {
    auto name = dyn_cast<StringAttr>(attr);
    if (!name || !isIdentifier(name.getValue()))
      return function.emitError()
             << "argument #" << index << " has pattn.name " << attr
             << "; expected a string that is an identifier ([A-Za-z_]"
                "[A-Za-z0-9_]*)";
    return name.getValue().str();
  }
  BlockArgument arg = function.getArgument(index);
  if (auto named = dyn_cast<NameLoc>(arg.getLoc()))
    if (isIdentifier(named.getName().getValue()))
      return named.getName().getValue().str();
  if (asmState)
    if (const AsmParserState::BlockDefinition *block =
            asmState->getBlockDef(&function.getBody().front()))
      if (index < block->arguments.size()) {
        llvm::SMRange range = block->arguments[index].loc;
        StringRef text(range.Start.getPointer(),
                       range.End.getPointer() - range.Start.getPointer());
        text.consume_front("%");
        if (isIdentifier(text))
          return text.str();
      }
  return ("arg" + llvm::Twine(index)).str();
}

/// The buffers `value` may reach: itself, and through views and cache
/// bindings the buffers they were made from.
static void collectBufferRoots(Value value, SmallVectorImpl<Value> &roots) {
  Operation *op = value.getDefiningOp();
  if (auto bind = dyn_cast_or_null<::pattn::BindCacheOp>(op)) {
    for (Value operand : bind->getOperands())
      collectBufferRoots(operand, roots);
    return;
  }
  if (auto view = dyn_cast_or_null<ViewLikeOpInterface>(op)) {
    collectBufferRoots(view.getViewSource(), roots);
    return;
  }
  roots.push_back(value);
}

/// The arguments of `function` that it may write: the buffers that an op's
/// write effect reaches, and every buffer operand of an op whose effects are
/// unknown (a call, an op without the interface).
static llvm::SmallDenseSet<unsigned> writtenArguments(func::FuncOp function) {
  SmallVector<Value> written;
  function.walk([&](Operation *op) {
    if (isa<::pattn::BindCacheOp, ViewLikeOpInterface>(op) ||
        op->hasTrait<OpTrait::IsTerminator>() ||
        op->hasTrait<OpTrait::HasRecursiveMemoryEffects>())
      return;
    auto effecting = dyn_cast<MemoryEffectOpInterface>(op);
    if (!effecting) {
      for (Value operand : op->getOperands())
        collectBufferRoots(operand, written);
      return;
    }
    SmallVector<MemoryEffects::EffectInstance> effects;
    effecting.getEffects(effects);
    for (const MemoryEffects::EffectInstance &effect : effects)
      if (isa<MemoryEffects::Write, MemoryEffects::Free>(effect.getEffect())) {
        if (Value value = effect.getValue())
          collectBufferRoots(value, written);
        else // a write to no value in particular: any buffer operand
          for (Value operand : op->getOperands())
            collectBufferRoots(operand, written);
      }
  });
  llvm::SmallDenseSet<unsigned> indices;
  for (Value value : written)
    if (auto arg = dyn_cast<BlockArgument>(value))
      if (arg.getOwner() == &function.getBody().front())
        indices.insert(arg.getArgNumber());
  return indices;
}

/// The element types loaders pass (python/pattn/_loader.py's dtypes), as
/// the manifest spells them.
static constexpr llvm::StringLiteral kLoaderElementTypes[] = {
    "f16", "bf16", "f32", "i8", "i32", "i64", "f8E4M3FN", "f8E5M2"};

/// Checks what a loader can pass for entry argument `index`: an element
/// type it has, a contiguous or page-strided layout (loaders pass
/// contiguous tensors with identity strides, and views whose pages lie a
/// static stride apart with the manifest's strides) and a size within
/// 64-bit bytes.
static LogicalResult checkEntryBuffer(func::FuncOp function, unsigned index,
                                      MemRefType type) {
  Location loc = function.getArgument(index).getLoc();
  if (!llvm::is_contained(kLoaderElementTypes,
                          elementName(type.getElementType())))
    return emitError(loc) << "entry point argument #" << index << " has type "
                          << type << "; loaders pass buffers of "
                          << llvm::join(ArrayRef<llvm::StringLiteral>(
                                            kLoaderElementTypes),
                                        ", ")
                          << " elements";
  if (!::pattn::hasPagedLayout(type) ||
      (!type.getLayout().isIdentity() &&
       cast<StridedLayoutAttr>(type.getLayout()).getOffset() != 0))
    return emitError(loc)
           << "entry point argument #" << index << " has type " << type
           << "; loaders pass contiguous buffers, or pages a static stride "
              "apart (strided<[S, ...]> at offset 0, row-major inside a "
              "page, S at least one page and a multiple of 16 bytes): take it "
              "with one of those "
              "layouts and make other views inside the function";
  if (::pattn::exceedsInt64Bytes(type))
    return emitError(loc) << "entry point argument #" << index << " of type "
                          << type
                          << " spans more than 2^63 - 1 bytes; pattn "
                             "addresses buffers with 64-bit byte offsets";
  return success();
}

/// The entry points and their argument buffers, read before lowering: each
/// argument's name (argumentName), element type, shape, and whether the
/// function may write it (loaders declare those buffers mutated).
static FailureOr<llvm::json::Object>
buildManifest(ModuleOp module, ArrayRef<std::string> chipNames,
              const AsmParserState *asmState) {
  llvm::json::Array functions;
  for (auto function : module.getOps<func::FuncOp>()) {
    if (function.isExternal() || !usesPAttn(function))
      continue;
    llvm::SmallDenseSet<unsigned> written = writtenArguments(function);
    llvm::StringMap<unsigned> seen;
    llvm::json::Array args;
    for (auto [index, type] : llvm::enumerate(function.getArgumentTypes())) {
      FailureOr<std::string> name = argumentName(function, index, asmState);
      if (failed(name))
        return failure();
      auto [previous, inserted] = seen.try_emplace(*name, index);
      if (!inserted)
        return function.emitError()
               << "arguments #" << previous->second << " and #" << index
               << " are both named '" << *name
               << "'; loaders call arguments by name, so give one another "
                  "name (pattn.name = \"...\")";
      // The C entry takes a descriptor per buffer; a scalar has none.
      auto memref = dyn_cast<MemRefType>(type);
      if (!memref)
        return function.emitError()
               << "entry point argument #" << index << " has type " << type
               << "; pattn entry points take buffers (memrefs) only: pass "
                  "a scalar as a one-element memref";
      if (failed(checkEntryBuffer(function, index, memref)))
        return failure();
      llvm::json::Array shape;
      for (int64_t dim : memref.getShape())
        shape.push_back(ShapedType::isDynamic(dim) ? -1 : dim);
      llvm::json::Object arg{{"name", *name}};
      arg["dtype"] = elementName(memref.getElementType());
      arg["shape"] = std::move(shape);
      // Contiguous buffers say nothing; page-strided ones give the strides
      // (in elements) that loaders check and pass.
      if (::pattn::isPageStrided(memref)) {
        auto [strides, offset] = memref.getStridesAndOffset();
        (void)offset;
        llvm::json::Array list;
        for (int64_t stride : strides)
          list.push_back(stride);
        arg["strides"] = std::move(list);
      }
      arg["written"] = written.contains(index);
      args.push_back(std::move(arg));
    }
    functions.push_back(llvm::json::Object{{"name", function.getSymName()},
                                           {"symbol", function.getSymName()},
                                           {"args", std::move(args)}});
  }
  llvm::json::Array chipList;
  for (const std::string &chip : chipNames)
    chipList.push_back(chip);
  return llvm::json::Object{{"version", 1},
                            {"chips", std::move(chipList)},
                            {"functions", std::move(functions)}};
}

/// Adds `const char *pattn_manifest(void)` returning `json`.
static void addManifestFunction(ModuleOp module, StringRef json) {
  OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
  Location loc = module.getLoc();
  MLIRContext *context = module.getContext();
  std::string text = json.str();
  text.push_back('\0');
  auto arrayType =
      LLVM::LLVMArrayType::get(IntegerType::get(context, 8), text.size());
  LLVM::GlobalOp::create(builder, loc, arrayType, /*isConstant=*/true,
                         LLVM::Linkage::Private, "__pattn_manifest",
                         builder.getStringAttr(text));
  auto pointer = LLVM::LLVMPointerType::get(context);
  auto function = LLVM::LLVMFuncOp::create(
      builder, loc, "pattn_manifest", LLVM::LLVMFunctionType::get(pointer, {}));
  builder.setInsertionPointToStart(function.addEntryBlock(builder));
  Value address =
      LLVM::AddressOfOp::create(builder, loc, pointer, "__pattn_manifest");
  LLVM::ReturnOp::create(builder, loc, address);
}

//===----------------------------------------------------------------------===//
// Objects
//===----------------------------------------------------------------------===//

static std::string chipOf(gpu::ObjectAttr object) {
  auto target = cast<NVVM::NVVMTargetAttr>(object.getTarget());
  return target.getChip().str();
}

static LogicalResult runTool(StringRef tool, ArrayRef<std::string> args,
                             std::string &error) {
  llvm::ErrorOr<std::string> path = llvm::sys::findProgramByName(tool);
  if (!path) {
    // The CUDA toolkit's default location, for shells without it on PATH.
    std::string fallback = ("/usr/local/cuda/bin/" + tool).str();
    if (!llvm::sys::fs::can_execute(fallback)) {
      error = ("cannot find " + tool + " on PATH").str();
      return failure();
    }
    path = fallback;
  }
  SmallVector<StringRef> argv = {*path};
  for (const std::string &arg : args)
    argv.push_back(arg);
  std::string message;
  int code =
      llvm::sys::ExecuteAndWait(*path, argv, std::nullopt, {}, 0, 0, &message);
  if (code != 0) {
    error =
        (tool + " failed (exit " + llvm::Twine(code) + ") " + message).str();
    return failure();
  }
  return success();
}

/// Replaces the per-chip cubins of every gpu.binary with one fatbin.
static LogicalResult mergeIntoFatbins(ModuleOp module, StringRef tempDir,
                                      std::string &error) {
  LogicalResult result = success();
  module.walk([&](gpu::BinaryOp binary) {
    SmallVector<std::string> args = {"--64", "--create"};
    std::string fatbin =
        (tempDir + "/" + binary.getSymName() + ".fatbin").str();
    args.push_back(fatbin);
    for (Attribute attr : binary.getObjects()) {
      auto object = cast<gpu::ObjectAttr>(attr);
      std::string chip = chipOf(object);
      std::string cubin =
          (tempDir + "/" + binary.getSymName() + "." + chip + ".cubin").str();
      std::error_code ec;
      llvm::raw_fd_ostream os(cubin, ec);
      if (ec) {
        error = "cannot write " + cubin;
        result = failure();
        return;
      }
      os << object.getObject().getValue();
      args.push_back("--image3=kind=elf,sm=" + chip.substr(3) +
                     ",file=" + cubin);
    }
    if (failed(runTool("fatbinary", args, error))) {
      result = failure();
      return;
    }
    auto buffer = llvm::MemoryBuffer::getFile(fatbin);
    if (!buffer) {
      error = "cannot read " + fatbin;
      result = failure();
      return;
    }
    auto first = cast<gpu::ObjectAttr>(binary.getObjects()[0]);
    auto merged = gpu::ObjectAttr::get(
        module.getContext(), first.getTarget(), gpu::CompilationTarget::Fatbin,
        StringAttr::get(module.getContext(), (*buffer)->getBuffer()),
        DictionaryAttr(), gpu::KernelTableAttr());
    binary.setObjectsAttr(ArrayAttr::get(module.getContext(), {merged}));
  });
  return result;
}

/// Writes the kernel objects of --emit=ptx (all of them, to `os`) or
/// --emit=cubin (one file per chip, <output>.<chip>.cubin; with `-o -` the
/// one cubin of a one-chip build, to `os`).
static LogicalResult writeKernelObjects(ModuleOp module, raw_ostream &os,
                                        std::string &error) {
  SmallVector<std::pair<gpu::BinaryOp, gpu::ObjectAttr>> objects;
  module.walk([&](gpu::BinaryOp binary) {
    for (Attribute attr : binary.getObjects())
      objects.emplace_back(binary, cast<gpu::ObjectAttr>(attr));
  });
  if (emit == "ptx") {
    for (auto [binary, object] : objects)
      os << "// pattn-compile: " << binary.getSymName() << " for "
         << chipOf(object) << "\n"
         << object.getObject().getValue() << "\n";
    return success();
  }
  if (outputFile == "-") {
    if (objects.size() != 1) {
      error = "--emit=cubin -o - writes one cubin to stdout, and this build "
              "has " +
              std::to_string(objects.size()) +
              "; give -o <path> (one <path>.<chip>.cubin each)";
      return failure();
    }
    os << objects.front().second.getObject().getValue();
    return success();
  }
  for (auto [binary, object] : objects) {
    std::string path = outputFile + "." + chipOf(object) + ".cubin";
    std::error_code ec;
    llvm::raw_fd_ostream file(path, ec);
    if (ec) {
      error = "cannot write " + path + ": " + ec.message();
      return failure();
    }
    file << object.getObject().getValue();
  }
  return success();
}

/// Whether the module has entry points; a library without any is an error,
/// the inspection forms (--emit=mlir, llvm, ptx, cubin) only warn.
static LogicalResult checkHasEntryPoints(ModuleOp module,
                                         const llvm::json::Object &manifest) {
  const llvm::json::Array *functions = manifest.getArray("functions");
  if (functions && !functions->empty())
    return success();
  StringRef what = "no function in the module uses pattn ops";
  if (emit == "so")
    return emitError(module.getLoc())
           << what << ", so the library would have no entry points";
  emitWarning(module.getLoc()) << what << ": the output has no entry points";
  return success();
}

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

/// Parses the input into a module, recording the parser's state in
/// `asmState` (bytecode carries no SSA names and is parsed without it).
static OwningOpRef<ModuleOp> parseInput(llvm::SourceMgr &sourceMgr,
                                        MLIRContext *context,
                                        AsmParserState &asmState) {
  const llvm::MemoryBuffer *buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  if (isBytecode(*buffer))
    return parseSourceFile<ModuleOp>(sourceMgr, context);
  Block block;
  ParserConfig config(context);
  if (failed(parseAsmSourceFile(sourceMgr, &block, config, &asmState)))
    return nullptr;
  Location fileLoc =
      FileLineColLoc::get(context, buffer->getBufferIdentifier(), 0, 0);
  return detail::constructContainerOpForParserIfNecessary<ModuleOp>(
      &block, context, fileLoc);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::AddExtraVersionPrinter([](raw_ostream &os) {
    os << "pattn " PATTN_VERSION_STRING " (commit " PATTN_COMMIT_STRING ")\n";
  });
  ::pattn::registerAllPasses();
  cl::HideUnrelatedOptions(toolCategory);
  cl::ParseCommandLineOptions(
      argc, argv, "pattn-compile: pattn IR to a loadable library\n");

  DialectRegistry registry;
  ::pattn::registerAllDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();

  llvm::SourceMgr sourceMgr;
  std::string errorMessage;
  auto input = openInputFile(inputFile, &errorMessage);
  if (!input)
    return fail(errorMessage);
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  context.printOpOnDiagnostic(false);
  // Remarks (the backend choice) are shown only on request; errors always.
  // Installed last, this handler sees every diagnostic first.
  ScopedDiagnosticHandler remarkFilter(&context, [](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Remark && !showRemarks)
      return success();
    return failure();
  });
  // The parser's state keeps the SSA names of the entry points' arguments,
  // which the manifest reports.
  AsmParserState asmState;
  OwningOpRef<ModuleOp> module = parseInput(sourceMgr, &context, asmState);
  if (!module)
    return 1;

  std::vector<std::string> chipNames(chips.begin(), chips.end());
  if (chipNames.empty())
    for (::pattn::Chip chip : ::pattn::defaultCompileChips())
      chipNames.push_back(::pattn::stringifyChip(chip).str());
  FailureOr<llvm::json::Object> described =
      buildManifest(*module, chipNames, &asmState);
  if (failed(described))
    return 1;
  llvm::json::Object manifest = std::move(*described);

  if (emit != "so" && emit != "llvm" && emit != "mlir" && emit != "ptx" &&
      emit != "cubin")
    return fail("unknown --emit=" + emit +
                "; expected so, mlir, llvm, ptx or cubin");
  if (emit == "so" && outputFile == "-")
    return fail("a shared library needs -o <path>");
  if (emit == "cubin" && outputFile == "-" && chipNames.size() > 1)
    return fail("--emit=cubin -o - writes one cubin to stdout, and " +
                llvm::Twine(chipNames.size()) +
                " chips are built: give one chip (--chips=sm_90a) or -o "
                "<path> (one <path>.<chip>.cubin each)");

  ::pattn::CompileOptions options;
  options.chips = chipNames;
  options.format = emit == "ptx" ? "isa" : "bin";
  options.keysPerSplit = keysPerSplit;
  options.hardwareConversions = hardwareConversions;
  options.backend = backend;
  options.promptKernel = promptKernel;
  options.xqaKeysPerTile = xqaKeysPerTile;
  options.xqaStages = xqaStages;
  options.xqaCopyWarp = xqaCopyWarp;
  options.xqaScoresAhead = xqaScoresAhead;
  options.xqaClusterHeads = xqaClusterHeads;
  options.xqaClusterSplits = xqaClusterSplits;
  options.xqaMergeUnsplit = xqaMergeUnsplit;
  options.fold = fold;
  PassManager pm(&context);
  if (failed(emit == "mlir"
                 ? ::pattn::buildPAttnToGPUPipeline(pm, options, errorMessage)
                 : ::pattn::buildCompilePipeline(pm, options, errorMessage)))
    return fail(errorMessage);
  if (failed(checkHasEntryPoints(*module, manifest)))
    return 1;
  if (failed(pm.run(*module)))
    return 1;

  // Text outputs go through a ToolOutputFile; the library is written by the
  // linker.
  std::unique_ptr<llvm::ToolOutputFile> output;
  if (emit != "so") {
    output = openOutputFile(outputFile, &errorMessage);
    if (!output)
      return fail(errorMessage);
  }

  if (emit == "mlir") {
    module->print(output->os());
    output->keep();
    return 0;
  }
  if (emit == "ptx" || emit == "cubin") {
    if (failed(writeKernelObjects(*module, output->os(), errorMessage)))
      return fail(errorMessage);
    output->keep();
    return 0;
  }

  SmallString<128> tempDir;
  if (llvm::sys::fs::createUniqueDirectory("pattn-compile", tempDir))
    return fail("cannot create a temporary directory");
  if (failed(mergeIntoFatbins(*module, tempDir, errorMessage)))
    return fail(errorMessage);
  std::string json;
  llvm::raw_string_ostream(json) << llvm::json::Value(std::move(manifest));
  addManifestFunction(*module, json);

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(*module, llvmContext, "pattn");
  if (!llvmModule)
    return fail("translation to LLVM IR failed");
  ::pattn::bindRuntimeSymbols(*llvmModule);
  // The host code runs where this tool runs.
  llvmModule->setTargetTriple(
      llvm::Triple(llvm::sys::getDefaultTargetTriple()));
  if (emit == "llvm") {
    llvmModule->print(output->os(), nullptr);
    output->keep();
    return 0;
  }

  std::string irPath = (tempDir + "/module.ll").str();
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(irPath, ec);
    if (ec)
      return fail("cannot write " + irPath);
    llvmModule->print(os, nullptr);
  }
  std::string libDir = runtimeDir;
  if (libDir.empty()) {
    std::string self = llvm::sys::fs::getMainExecutable(
        argv[0], reinterpret_cast<void *>(&fail));
    libDir = (llvm::sys::path::parent_path(llvm::sys::path::parent_path(self)) +
              "/lib")
                 .str();
  }
  // The runtime is found next to the library first ($ORIGIN), so a library
  // and its runtime can be moved together.
  SmallVector<std::string> linkArgs = {"-shared",
                                       "-fPIC",
                                       "-O2",
                                       "-x",
                                       "ir",
                                       irPath,
                                       "-o",
                                       outputFile,
                                       "-L" + libDir,
                                       "-lpattn_runtime",
                                       "-Wl,-rpath,$ORIGIN",
                                       "-Wl,-rpath," + libDir};
  if (failed(runTool(PATTN_CLANG, linkArgs, errorMessage)))
    return fail(errorMessage);
  llvm::sys::fs::remove_directories(tempDir);
  return 0;
}
