//===- PAttnToGPU.cpp - Lower pattn ops to GPU kernels ----------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements --convert-pattn-to-gpu: the host side. Each pattn op
// of a function becomes kernel launches ordered on a caller-provided stream
// (a trailing !llvm.ptr argument, seen by the GPU dialect as an async token
// so that upstream gpu-to-llvm passes it to every launch and allocation),
// and the function returns the runtime's status. The kernels themselves are
// built by the kernel families under Kernels/ (docs/Architecture.md).
//
//===----------------------------------------------------------------------===//

#include "pattn/Conversion/PAttnToGPU.h"
#include "Host/HostChecks.h"
#include "Kernels/Common/KernelBuilder.h"
#include "Kernels/Kernels.h"
#include "Host/OpOrder.h"
#include "pattn/Dialect/PAttn/IR/PAttnOps.h"
#include "pattn/Dialect/PAttn/Transforms/ConstantTables.h"
#include "pattn/Dialect/PAttn/Transforms/DecodePlan.h"
#include "pattn/Target/TargetDescription.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

#define DEBUG_TYPE "convert-pattn-to-gpu"

namespace pattn {
#define GEN_PASS_DEF_CONVERTPATTNTOGPU
#include "pattn/Conversion/Passes.h.inc"
} // namespace pattn

using namespace mlir;
using namespace pattn;

/// The runtime entries that hand a compiled function its status, the
/// device's compute capability and the device error word.
static constexpr llvm::StringLiteral kTakeStatus = "pattnRuntimeTakeStatus";
static constexpr llvm::StringLiteral kDeviceArch = "pattnRuntimeDeviceArch";
static constexpr llvm::StringLiteral kDeviceErrorWord =
    "pattnRuntimeDeviceErrorWord";
static constexpr llvm::StringLiteral kDeviceMultiprocessors =
    "pattnRuntimeDeviceMultiprocessors";

/// The most keys of one XQA split when the op carries no plan (the
/// planner's default).
static constexpr int64_t kDefaultXqaKeysPerSplit = 4096;

/// XQA splits: at most this many per (sequence, KV head), each of at least
/// this many tiles (a split's fixed cost, the pipeline's start and the
/// merge, is about one tile).
static constexpr int64_t kXqaMostSplits = 64;
static constexpr int64_t kXqaLeastTilesPerSplit = 4;
static constexpr int64_t kXqaMlaMostSplits = 128;
static constexpr int64_t kXqaMlaLeastTilesPerSplit = 2;

/// Declares the runtime function `name` taking nothing and returning
/// `result`; one returning a memref goes through MLIR's C interface.
static void declareRuntimeFunction(ModuleOp module, StringRef name,
                                   Type result) {
  if (module.lookupSymbol<func::FuncOp>(name))
    return;
  OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
  auto declaration = func::FuncOp::create(
      builder, module.getLoc(), name, builder.getFunctionType({}, {result}));
  declaration.setPrivate();
  if (isa<MemRefType>(result))
    declaration->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(),
                         builder.getUnitAttr());
}

/// The chip_plans an MLA decode's kernels obey when built for `chips`:
/// those --pattn-plan-decode recorded, or, on an op it did not plan whose
/// backend is xqa, those it would record.
static DictionaryAttr mlaChipPlans(MlaDecodeOp op, ArrayRef<Chip> chips) {
  if (op.getPlanAttr() || op.getBackend() != Backend::xqa)
    return op.getChipPlansAttr();
  return planXqaMlaDecode(op, chips).chipPlans;
}

namespace {

/// Rewrites one host function.
class HostRewriter {
public:
  HostRewriter(func::FuncOp function, ArrayRef<KernelModule *> modules,
               ArrayRef<Chip> chips, int64_t keysPerSplit)
      : function(function), modules(modules), chips(chips),
        keysPerSplit(keysPerSplit), builder(function.getContext()) {}

  LogicalResult run();

private:
  func::FuncOp function;
  ArrayRef<KernelModule *> modules;
  ArrayRef<Chip> chips;
  int64_t keysPerSplit;
  OpBuilder builder;
  Value stream; ///< the async token standing for the caller's stream
  Value arch;   ///< the device's compute capability (several modules only)

  /// Emits `body` once per kernel module, each under a test of the device's
  /// compute capability, so that launches use the module built for it.
  void dispatch(Location loc, function_ref<void(KernelModule &)> body);

  FailureOr<CacheBuffers> resolveCache(Operation *user, Value cache);
  FailureOr<RecordBuffers> resolveRecords(Operation *user, Value cache);

  /// Launches `kernel` on the stream with 128 threads per block and
  /// `sharedBytes` of dynamic shared memory.
  void launch(Location loc, gpu::GPUFuncOp kernel, gpu::KernelDim3 grid,
              ValueRange operands, int64_t sharedBytes = 0,
              int64_t threads = kBlockThreads);
  void launch(Location loc, const Kernel &kernel, gpu::KernelDim3 grid) {
    launch(loc, kernel.func, grid, kernel.operands);
  }
  /// Runs `body` only when `count` (index) is positive: CUDA rejects empty
  /// grids, and a batch with no tokens is a valid call.
  void ifPositive(Location loc, Value count, function_ref<void()> body);
  Value dim(Location loc, Value memref, int64_t index) {
    return memref::DimOp::create(builder, loc, memref, index);
  }

  LogicalResult lower(WriteCacheOp op);
  LogicalResult lower(WriteRecordOp op);
  LogicalResult lower(RotaryOp op);
  LogicalResult lower(ScaleNormalizerOp op);
  LogicalResult lower(FoldQueryOp op);
  LogicalResult lower(PagedAttentionOp op);
  LogicalResult lower(MlaDecodeOp op);
  /// How a decode's blocks cover the work, per split.
  struct DecodeGrid {
    /// Portable: a fixed number of keys per split, and a block per (token,
    /// head group); 0 for the tensor-core kernels.
    int64_t splitKeys = 0;
    /// Tensor-core kernels: as many splits of whole tiles of `tileKeys`
    /// keys as fill the device, given `sharedBytes` per block; a block per
    /// (sequence, KV head) when `blocksPerSequence` is set (paged XQA),
    /// else per (token, head group) like the portable kernel (MLA);
    /// `residentBlocks` of them fit on an SM.
    int64_t tileKeys = 0, sharedBytes = 0, residentBlocks = 1;
    int64_t blocksPerSequence = 0, blocksPerToken = 0;
    /// The split search's bounds: at least this many tiles per split, at
    /// most this many splits.
    int64_t leastTilesPerSplit = kXqaLeastTilesPerSplit;
    int64_t mostSplits = kXqaMostSplits;
  };
  /// The workspace, then per kernel module the decode and merge launches of
  /// the kernels `build` makes in that module.
  void lowerDecode(Location loc, Value query, Value blockTable,
                   int64_t blockSize, int64_t valueDim, int64_t numHeads,
                   const DecodeGrid &grid,
                   function_ref<DecodeKernels(KernelModule &)> build);
  /// The same where each kernel module has its own grid, `gridOf(module)`:
  /// the split count and the workspace are computed under the module's
  /// dispatch branch.
  void lowerDecodePerModule(Location loc, Value query, Value blockTable,
                            int64_t blockSize, int64_t valueDim,
                            int64_t numHeads,
                            function_ref<DecodeGrid(KernelModule &)> gridOf,
                            function_ref<DecodeKernels(KernelModule &)> build);
  /// A decode's split-KV workspace for `tokens` query tokens (`rows` =
  /// tokens x heads): the split count, the decode blocks per split of the
  /// tensor-core kernels (null for the portable one), and the partial
  /// outputs and statistics, allocated on the stream.
  struct DecodeWorkspace {
    Value tokens, rows, splits, blocksPerSplit, partialOut, partialStats;
  };
  DecodeWorkspace allocateWorkspace(Location loc, Value tokens,
                                    Value blockTable, int64_t blockSize,
                                    int64_t valueDim, int64_t numHeads,
                                    const DecodeGrid &grid);
  /// The decode and merge launches of `decode` into `workspace`.
  void launchDecode(Location loc, int64_t valueDim,
                    const DecodeWorkspace &workspace,
                    const DecodeKernels &decode);
  void freeWorkspace(Location loc, const DecodeWorkspace &workspace);
  /// Launches the slot check (and the positions of a fused `rotary`),
  /// then `kernel` gated by its flag.
  void launchCheckedWrite(Location loc, KernelModule &module,
                          const Kernel &kernel, gpu::KernelDim3 grid,
                          Value slots, Value storage, int64_t blockSize,
                          RotaryOp rotary = nullptr);
  /// The rotary ops fused into the cache write of their output (keyed by
  /// the write), and the ops that fusion leaves without work: the rotary
  /// op, its output's allocation and deallocation.
  DenseMap<Operation *, RotaryOp> fusedRotaries;
  llvm::SmallPtrSet<Operation *, 8> fusedAway;
  void findFusedRotaries();
  /// Launches `check` (one block; its operands get a flag and the device
  /// error word appended), then `kernel` (its operands get the flag), which
  /// does nothing when the check raised the flag.
  void launchGated(Location loc, Kernel check, const Kernel &kernel,
                   gpu::KernelDim3 grid);
};

} // namespace

FailureOr<CacheBuffers> HostRewriter::resolveCache(Operation *user,
                                                   Value cache) {
  Value source = cache;
  while (auto view = source.getDefiningOp<RescaleViewOp>())
    source = view.getSource();
  auto bind = source.getDefiningOp<BindCacheOp>();
  if (!bind)
    return user->emitOpError()
           << "reads a cache that is not bound with pattn.bind_cache in the "
              "same function; a compiled function takes its caches as "
              "storage buffers";
  return CacheBuffers{cast<CacheType>(cache.getType()), bind.getStorage(),
                      bind.getGroupScales(), bind.getTokenScales()};
}

FailureOr<RecordBuffers> HostRewriter::resolveRecords(Operation *user,
                                                      Value cache) {
  auto bind = cache.getDefiningOp<BindCacheOp>();
  if (!bind)
    return user->emitOpError()
           << "reads a record cache that is not bound with pattn.bind_cache "
              "in the same function";
  return RecordBuffers{cast<RecordCacheType>(cache.getType()),
                       bind.getStorage()};
}

void HostRewriter::dispatch(Location loc,
                            function_ref<void(KernelModule &)> body) {
  // A device runs the module holding a chip of exactly its compute
  // capability (an arch-specific one first); failing that, the module of the
  // highest generic chip below it (whose PTX the driver compiles forward);
  // failing that, the first module, whose load then reports "no kernel binary
  // for this GPU". The routes are tried in order (pattn::chipForDevice is the
  // same rule).
  if (modules.size() == 1)
    return body(*modules.front());
  struct Route {
    bool exact;
    unsigned capability;
    KernelModule *module;
  };
  SmallVector<Route> routes;
  SmallVector<std::pair<unsigned, KernelModule *>> generic;
  // Of two chips of one capability (sm_90a and sm_90), the arch-specific
  // one's module: its kernels may use what the generic chip lacks (wgmma).
  for (bool archSpecific : {true, false})
    for (KernelModule *module : modules)
      for (Chip chip : module->chips) {
        if (getTargetDescription(chip).archSpecific != archSpecific)
          continue;
        unsigned capability = computeCapability(chip);
        if (llvm::none_of(routes, [&](const Route &route) {
              return route.capability == capability;
            }))
          routes.push_back({true, capability, module});
        if (!archSpecific)
          generic.push_back({capability, module});
      }
  llvm::sort(routes, [](const Route &a, const Route &b) {
    return a.capability > b.capability;
  });
  llvm::stable_sort(
      generic, [](const auto &a, const auto &b) { return a.first > b.first; });
  for (auto [capability, module] : generic)
    routes.push_back({false, capability, module});

  // The module's position, chosen by the routes (the first that matches
  // wins), then each module's launches emitted once under its position.
  KernelBuilder kb(builder, loc);
  auto position = [&](KernelModule *module) {
    return int32_t(llvm::find(modules, module) - modules.begin());
  };
  Value choice = kb.i32(0);
  for (const Route &route : llvm::reverse(routes)) {
    Value matches = kb.cmpi(route.exact ? arith::CmpIPredicate::eq
                                        : arith::CmpIPredicate::uge,
                            arch, kb.i32(route.capability));
    Value chosen = kb.i32(position(route.module));
    choice = kb.select(matches, chosen, choice);
  }
  std::function<void(size_t)> emitFrom = [&](size_t index) {
    if (index + 1 == modules.size())
      return body(*modules[index]);
    Value isThis =
        kb.cmpi(arith::CmpIPredicate::eq, choice, kb.i32(int32_t(index)));
    kb.ifElse(
        isThis, {},
        [&]() -> SmallVector<Value> {
          body(*modules[index]);
          return {};
        },
        [&]() -> SmallVector<Value> {
          emitFrom(index + 1);
          return {};
        });
  };
  emitFrom(0);
}

/// Constant tables (memref.get_global, e.g. the fold's folded scales) live in
/// host memory: the kernel reads a copy of the global placed in the kernel
/// module instead of the host pointer it is passed.
static void readGlobalsOnDevice(gpu::GPUFuncOp kernel, ValueRange operands) {
  auto kernelModule = kernel->getParentOfType<gpu::GPUModuleOp>();
  auto hostModule = kernelModule->getParentOfType<ModuleOp>();
  for (auto [operand, argument] : llvm::zip(operands, kernel.getArguments())) {
    auto getGlobal = operand.getDefiningOp<memref::GetGlobalOp>();
    if (!getGlobal)
      continue;
    StringRef name = getGlobal.getName();
    if (!kernelModule.lookupSymbol(name)) {
      auto global = hostModule.lookupSymbol<memref::GlobalOp>(name);
      OpBuilder builder = OpBuilder::atBlockBegin(kernelModule.getBody());
      builder.clone(*global);
    }
    OpBuilder builder = OpBuilder::atBlockBegin(&kernel.front());
    Value onDevice = memref::GetGlobalOp::create(builder, getGlobal.getLoc(),
                                                 getGlobal.getType(), name);
    argument.replaceAllUsesWith(onDevice);
  }
}

void HostRewriter::launch(Location loc, gpu::GPUFuncOp kernel,
                          gpu::KernelDim3 grid, ValueRange operands,
                          int64_t sharedBytes, int64_t blockThreads) {
  readGlobalsOnDevice(kernel, operands);
  Value one = arith::ConstantIndexOp::create(builder, loc, 1);
  Value threads = arith::ConstantIndexOp::create(builder, loc, blockThreads);
  Value shared;
  if (sharedBytes > 0)
    shared = arith::ConstantIntOp::create(builder, loc, builder.getI32Type(),
                                          sharedBytes);
  gpu::LaunchFuncOp::create(
      builder, loc, kernel, grid, {threads, one, one}, shared, operands,
      gpu::AsyncTokenType::get(builder.getContext()), ValueRange{stream});
}

void HostRewriter::ifPositive(Location loc, Value count,
                              function_ref<void()> body) {
  KernelBuilder kb(builder, loc);
  kb.ifThen(kb.cmpi(arith::CmpIPredicate::sgt, count, kb.index(0)), body);
}

void HostRewriter::launchCheckedWrite(Location loc, KernelModule &module,
                                      const Kernel &kernel,
                                      gpu::KernelDim3 grid, Value slots,
                                      Value storage, int64_t blockSize,
                                      RotaryOp rotary) {
  launchGated(
      loc, buildSlotCheckKernel(module, loc, slots, storage, blockSize, rotary),
      kernel, grid);
}

// A rotary op whose output is a temporary that only one cache write reads
// is fused into that write: the write kernel rotates the row itself (one
// launch and one pass over memory less), and the rotary op, the temporary
// and its deallocation are left without work. Nothing between the two may
// write what the rotary op reads.
void HostRewriter::findFusedRotaries() {
  function.walk([&](RotaryOp rotary) {
    Value out = rotary.getOut();
    auto alloc = out.getDefiningOp<memref::AllocOp>();
    if (!alloc || alloc->getBlock() != rotary->getBlock())
      return;
    WriteCacheOp write;
    memref::DeallocOp dealloc;
    for (Operation *user : out.getUsers()) {
      if (user == rotary.getOperation())
        continue;
      if (auto w = dyn_cast<WriteCacheOp>(user);
          w && !write && w.getValues() == out && w.getFirstHead() == 0)
        write = w;
      else if (auto d = dyn_cast<memref::DeallocOp>(user); d && !dealloc)
        dealloc = d;
      else
        return;
    }
    if (!write || write->getBlock() != rotary->getBlock() ||
        !rotary->isBeforeInBlock(write))
      return;
    SmallVector<Value> reads = rotaryReads(rotary);
    for (Operation *between = rotary->getNextNode(); between != write;
         between = between->getNextNode()) {
      auto effects = dyn_cast<MemoryEffectOpInterface>(between);
      if (!effects) {
        if (!isMemoryEffectFree(between))
          return;
        continue;
      }
      SmallVector<MemoryEffects::EffectInstance> list;
      effects.getEffects(list);
      for (const MemoryEffects::EffectInstance &effect : list)
        if (isa<MemoryEffects::Write>(effect.getEffect()) &&
            (!effect.getValue() ||
             llvm::is_contained(reads, effect.getValue())))
          return;
    }
    fusedRotaries[write] = rotary;
    fusedAway.insert(rotary);
    fusedAway.insert(alloc);
    if (dealloc)
      fusedAway.insert(dealloc);
  });
}

void HostRewriter::launchGated(Location loc, Kernel check, const Kernel &kernel,
                               gpu::KernelDim3 grid) {
  Type tokenType = gpu::AsyncTokenType::get(builder.getContext());
  auto flag = gpu::AllocOp::create(
      builder, loc, MemRefType::get({1}, builder.getI32Type()), tokenType,
      ValueRange{stream}, ValueRange{}, ValueRange{}, /*hostShared=*/false);
  // Rejected slots also raise a bit in the runtime's device error word,
  // which the caller reads after synchronizing (no sync here).
  auto wordType = MemRefType::get({1}, builder.getI32Type());
  declareRuntimeFunction(function->getParentOfType<ModuleOp>(),
                         kDeviceErrorWord, wordType);
  Value errorWord = func::CallOp::create(builder, loc, kDeviceErrorWord,
                                         TypeRange{wordType}, ValueRange{})
                        .getResult(0);
  check.operands.push_back(flag.getMemref());
  check.operands.push_back(errorWord);
  Value one = arith::ConstantIndexOp::create(builder, loc, 1);
  launch(loc, check, {one, one, one});
  SmallVector<Value> operands(kernel.operands);
  operands.push_back(flag.getMemref());
  launch(loc, kernel.func, grid, operands);
  gpu::DeallocOp::create(builder, loc, tokenType, ValueRange{stream},
                         flag.getMemref());
}

LogicalResult HostRewriter::lower(WriteCacheOp op) {
  FailureOr<CacheBuffers> cache = resolveCache(op, op.getCache());
  if (failed(cache))
    return failure();
  Location loc = op.getLoc();
  RotaryOp rotary = fusedRotaries.lookup(op);
  Value tokens = dim(loc, rotary ? rotary.getInput() : op.getValues(), 0);
  ifPositive(loc, tokens, [&] {
    Value kvHeads =
        arith::ConstantIndexOp::create(builder, loc, cache->type.getKvHeads());
    Value one = arith::ConstantIndexOp::create(builder, loc, 1);
    dispatch(loc, [&](KernelModule &module) {
      Kernel kernel = buildWriteCacheKernel(module, op, *cache, rotary);
      launchCheckedWrite(loc, module, kernel, {tokens, kvHeads, one},
                         op.getSlots(), cache->storage,
                         cache->type.getBlockSize(), rotary);
    });
  });
  return success();
}

LogicalResult HostRewriter::lower(RotaryOp op) {
  Location loc = op.getLoc();
  Value tokens = dim(loc, op.getInput(), 0);
  ifPositive(loc, tokens, [&] {
    Value blocks =
        arith::ConstantIndexOp::create(builder, loc, rotaryBlocksPerToken(op));
    Value one = arith::ConstantIndexOp::create(builder, loc, 1);
    dispatch(loc, [&](KernelModule &module) {
      Kernel kernel = buildRotaryKernel(module, op);
      launchGated(loc, buildPositionCheckKernel(module, op), kernel,
                  {tokens, blocks, one});
    });
  });
  return success();
}

LogicalResult HostRewriter::lower(WriteRecordOp op) {
  FailureOr<RecordBuffers> cache = resolveRecords(op, op.getCache());
  if (failed(cache))
    return failure();
  RecordType record = cache->type.getRecord();
  LaneAttr latent = record.getLane("latent"), rope = record.getLane("rope");
  LaneAttr latentScale = record.getLane(latent.getScaleLane());
  Type latentType = latent.getElementType(), ropeType = rope.getElementType();
  bool latentOk = latentScale && ((isa<Float8E4M3FNType>(latentType) &&
                                   latentScale.getElementType().isF32()) ||
                                  isa<Float4E2M1FNType>(latentType));
  bool ropeOk = (!rope.isScaled() && (ropeType.isBF16() || ropeType.isF16())) ||
                (rope.isScaled() && isa<Float8E4M3FNType>(ropeType) &&
                 record.getLane(rope.getScaleLane()).getCount() == 1 &&
                 record.getLane(rope.getScaleLane()).getElementType().isF32());
  if (!latentOk || !ropeOk)
    return op.emitOpError()
           << "can be compiled for latent lanes of e4m3 with f32 scales or "
              "e2m1 with e4m3 group scales, and rope lanes of bf16/f16 or e4m3 "
              "with one f32 scale; got "
           << record;
  Location loc = op.getLoc();
  Value tokens = dim(loc, op.getLatent(), 0);
  ifPositive(loc, tokens, [&] {
    Value one = arith::ConstantIndexOp::create(builder, loc, 1);
    dispatch(loc, [&](KernelModule &module) {
      Kernel kernel = buildWriteRecordKernel(module, op, *cache);
      launchCheckedWrite(loc, module, kernel, {tokens, one, one}, op.getSlots(),
                         cache->storage, cache->type.getBlockSize());
    });
  });
  return success();
}

LogicalResult HostRewriter::lower(ScaleNormalizerOp op) {
  Location loc = op.getLoc();
  Value one = arith::ConstantIndexOp::create(builder, loc, 1);
  dispatch(loc, [&](KernelModule &module) {
    launch(loc, buildScaleNormalizerKernel(module, op), {one, one, one});
  });
  return success();
}

LogicalResult HostRewriter::lower(FoldQueryOp op) {
  Location loc = op.getLoc();
  Value tokens = dim(loc, op.getQuery(), 0);
  ifPositive(loc, tokens, [&] {
    Value heads = arith::ConstantIndexOp::create(
        builder, loc, static_cast<int64_t>(op.getNumHeads()));
    Value one = arith::ConstantIndexOp::create(builder, loc, 1);
    dispatch(loc, [&](KernelModule &module) {
      launch(loc, buildFoldQueryKernel(module, op), {tokens, heads, one});
    });
  });
  return success();
}

HostRewriter::DecodeWorkspace
HostRewriter::allocateWorkspace(Location loc, Value tokens, Value blockTable,
                                int64_t blockSize, int64_t valueDim,
                                int64_t numHeads, const DecodeGrid &grid) {
  KernelBuilder kb(builder, loc);
  // Splits depend on the block table's shape (a host-known bound on the
  // kv length) and, for XQA, on the device's SM count, never on device
  // data: the call stays graph-capturable.
  Value maxKeys = kb.mul(dim(loc, blockTable, 1), kb.index(blockSize));
  Value splits;
  // Decode blocks per split of the tensor-core kernels.
  Value blocksPerSplit;
  if (grid.blocksPerSequence)
    blocksPerSplit =
        kb.mul(dim(loc, blockTable, 0), kb.index(grid.blocksPerSequence));
  else if (grid.blocksPerToken)
    blocksPerSplit = kb.mul(tokens, kb.index(grid.blocksPerToken));
  if (grid.tileKeys) {
    // The split count s minimizes the decode's time in tile-times:
    // waves(s) x (tiles per split(s) + 1), where a wave is the blocks
    // that every SM holds at once (SMs x resident blocks per SM, the
    // latter from the plan's shared memory on the chips built for).
    // Ties keep the smaller s (less merge work). A loop over at most
    // kXqaMostSplits candidates on the host, on host-known sizes only.
    int64_t tile = grid.tileKeys;
    Value sequences = kb.maxs(blocksPerSplit, kb.index(1));
    auto ceilDiv = [&](Value a, Value b) {
      return arith::CeilDivSIOp::create(builder, loc, a, b).getResult();
    };
    declareRuntimeFunction(function->getParentOfType<ModuleOp>(),
                           kDeviceMultiprocessors, builder.getI32Type());
    Value multiprocessors =
        func::CallOp::create(builder, loc, kDeviceMultiprocessors,
                             TypeRange{builder.getI32Type()}, ValueRange{})
            .getResult(0);
    multiprocessors = kb.toIndex(kb.maxs(multiprocessors, kb.i32(1)));
    int64_t resident = grid.residentBlocks;
    Value wave = kb.mul(multiprocessors, kb.index(resident));
    Value one = kb.index(1);
    Value tiles = ceilDiv(maxKeys, kb.index(tile));
    tiles = kb.maxs(tiles, one);
    Value most = kb.divs(tiles, kb.index(grid.leastTilesPerSplit));
    most = kb.mins(most, kb.index(grid.mostSplits));
    most = kb.maxs(most, one);
    auto cost = [&](Value candidate) {
      Value waves = ceilDiv(kb.mul(candidate, sequences), wave);
      Value perSplit = kb.add(ceilDiv(tiles, candidate), one);
      return kb.mul(waves, perSplit);
    };
    Value firstCost = cost(one);
    Value upper = kb.add(most, one);
    SmallVector<Value> best = kb.forLoop(
        kb.index(2), upper, one, {one, firstCost},
        [&](Value candidate, ValueRange carried) -> SmallVector<Value> {
          Value candidateCost = cost(candidate);
          Value better =
              kb.cmpi(arith::CmpIPredicate::slt, candidateCost, carried[1]);
          Value bestSplits = kb.select(better, candidate, carried[0]);
          Value bestCost = kb.select(better, candidateCost, carried[1]);
          return {bestSplits, bestCost};
        });
    splits = best[0];
  } else {
    Value perSplit = kb.index(grid.splitKeys);
    Value bySize = arith::CeilDivSIOp::create(builder, loc, maxKeys, perSplit);
    Value one = kb.index(1);
    splits = kb.maxs(bySize, one);
  }
  Value rows = kb.mul(tokens, kb.index(numHeads));
  MLIRContext *context = builder.getContext();
  auto outputType =
      MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic, valueDim},
                      builder.getF32Type());
  auto statsType = MemRefType::get(
      {ShapedType::kDynamic, ShapedType::kDynamic, 2}, builder.getF32Type());
  Type tokenType = gpu::AsyncTokenType::get(context);
  // Stream-ordered workspace: allocated and freed on the caller's stream.
  auto partialOut = gpu::AllocOp::create(
      builder, loc, outputType, tokenType, ValueRange{stream},
      ValueRange{splits, rows}, ValueRange{}, /*hostShared=*/false);
  auto partialStats = gpu::AllocOp::create(
      builder, loc, statsType, tokenType, ValueRange{stream},
      ValueRange{splits, rows}, ValueRange{}, /*hostShared=*/false);
  return {tokens,
          rows,
          splits,
          blocksPerSplit,
          partialOut.getMemref(),
          partialStats.getMemref()};
}

void HostRewriter::launchDecode(Location loc, int64_t valueDim,
                                const DecodeWorkspace &workspace,
                                const DecodeKernels &decode) {
  KernelBuilder kb(builder, loc);
  SmallVector<Value> decodeOperands(decode.decodeOperands);
  decodeOperands.append({workspace.partialOut, workspace.partialStats});
  Value decodeRows =
      workspace.blocksPerSplit
          ? workspace.blocksPerSplit
          : kb.mul(workspace.tokens, kb.index(decode.decodeBlocksPerToken));
  launch(loc, decode.decode, {workspace.splits, decodeRows, kb.index(1)},
         decodeOperands, decode.sharedBytes, decode.blockThreads);
  SmallVector<Value> mergeOperands(decode.mergeOperands);
  mergeOperands.append({workspace.partialOut, workspace.partialStats});
  // A merge block per (row, kBlockThreads channels).
  Value channelBlocks = kb.index(llvm::divideCeil(valueDim, kBlockThreads));
  launch(loc, decode.merge, {workspace.rows, channelBlocks, kb.index(1)},
         mergeOperands);
}

void HostRewriter::freeWorkspace(Location loc,
                                 const DecodeWorkspace &workspace) {
  Type tokenType = gpu::AsyncTokenType::get(builder.getContext());
  gpu::DeallocOp::create(builder, loc, tokenType, ValueRange{stream},
                         workspace.partialOut);
  gpu::DeallocOp::create(builder, loc, tokenType, ValueRange{stream},
                         workspace.partialStats);
}

void HostRewriter::lowerDecode(
    Location loc, Value query, Value blockTable, int64_t blockSize,
    int64_t valueDim, int64_t numHeads, const DecodeGrid &grid,
    function_ref<DecodeKernels(KernelModule &)> build) {
  Value tokens = dim(loc, query, 0);
  ifPositive(loc, tokens, [&] {
    DecodeWorkspace workspace = allocateWorkspace(
        loc, tokens, blockTable, blockSize, valueDim, numHeads, grid);
    dispatch(loc, [&](KernelModule &module) {
      launchDecode(loc, valueDim, workspace, build(module));
    });
    freeWorkspace(loc, workspace);
  });
}

void HostRewriter::lowerDecodePerModule(
    Location loc, Value query, Value blockTable, int64_t blockSize,
    int64_t valueDim, int64_t numHeads,
    function_ref<DecodeGrid(KernelModule &)> gridOf,
    function_ref<DecodeKernels(KernelModule &)> build) {
  Value tokens = dim(loc, query, 0);
  ifPositive(loc, tokens, [&] {
    dispatch(loc, [&](KernelModule &module) {
      DecodeWorkspace workspace =
          allocateWorkspace(loc, tokens, blockTable, blockSize, valueDim,
                            numHeads, gridOf(module));
      launchDecode(loc, valueDim, workspace, build(module));
      freeWorkspace(loc, workspace);
    });
  });
}

LogicalResult HostRewriter::lower(PagedAttentionOp op) {
  FailureOr<CacheBuffers> key = resolveCache(op, op.getKey());
  FailureOr<CacheBuffers> value = resolveCache(op, op.getValue());
  if (failed(key) || failed(value))
    return failure();
  // The recorded backend decides; an op without a plan gets the default
  // plan of its backend (portable when none was chosen).
  Attribute plan = op.getPlanAttr();
  if (!plan)
    plan = op.getBackend() == Backend::xqa
               ? Attribute(planXqaDecode(op, chips, kDefaultXqaKeysPerSplit))
               : Attribute(planPortableDecode(op, keysPerSplit));
  if (auto xqa = dyn_cast<XqaPlanAttr>(plan)) {
    DecodeGrid grid;
    grid.tileKeys = xqa.getKeysPerTile();
    grid.sharedBytes = xqa.getSharedBytes();
    grid.residentBlocks = xqaResidentBlocks(grid.sharedBytes, chips);
    grid.blocksPerSequence = key->type.getKvHeads();
    lowerDecode(op.getLoc(), op.getQuery(), op.getBlockTable(),
                key->type.getBlockSize(), value->type.getHeadDim(),
                static_cast<int64_t>(op.getNumHeads()), grid,
                [&](KernelModule &module) {
                  return buildXqaDecodeKernels(module, op, xqa, *key, *value);
                });
    return success();
  }
  auto portable = cast<PortablePlanAttr>(plan);
  DecodeGrid grid;
  grid.splitKeys = portable.getKeysPerSplit();
  lowerDecode(
      op.getLoc(), op.getQuery(), op.getBlockTable(), key->type.getBlockSize(),
      value->type.getHeadDim(), static_cast<int64_t>(op.getNumHeads()), grid,
      [&](KernelModule &module) {
        return buildPagedDecodeKernels(module, op, *key, *value, portable);
      });
  return success();
}

LogicalResult HostRewriter::lower(MlaDecodeOp op) {
  FailureOr<RecordBuffers> cache = resolveRecords(op, op.getCache());
  if (failed(cache))
    return failure();
  // As for paged attention: the recorded backend decides, and an op
  // without a plan gets its backend's default plans.
  Attribute plan = op.getPlanAttr();
  DictionaryAttr chipPlans = op.getChipPlansAttr();
  if (!plan && op.getBackend() == Backend::xqa) {
    XqaMlaPlans plans = planXqaMlaDecode(op, chips);
    plan = plans.plan;
    chipPlans = plans.chipPlans;
  } else if (!plan) {
    plan = planPortableDecode(op, keysPerSplit);
  }
  RecordType record = cache->type.getRecord();
  int64_t latent = record.getLane("latent").getCount();
  int64_t numHeads = static_cast<int64_t>(op.getNumHeads());
  if (auto xqa = dyn_cast<XqaMlaPlanAttr>(plan)) {
    auto gridOf = [&](XqaMlaPlanAttr xqa, ArrayRef<Chip> chips) {
      DecodeGrid grid;
      grid.tileKeys = xqa.getKeysPerTile();
      grid.sharedBytes = xqa.getSharedBytes();
      grid.residentBlocks = xqaMlaResidentBlocks(xqa, chips);
      grid.blocksPerToken = numHeads / xqa.getHeadsPerBlock();
      // An MLA tile is 32 keys, and a block's tile costs more than a paged
      // one: a short sequence spreads over more splits.
      grid.leastTilesPerSplit = kXqaMlaLeastTilesPerSplit;
      grid.mostSplits = kXqaMlaMostSplits;
      return grid;
    };
    if (!chipPlans) {
      lowerDecode(op.getLoc(), op.getQuery(), op.getBlockTable(),
                  cache->type.getBlockSize(), latent, numHeads,
                  gridOf(xqa, chips), [&](KernelModule &module) {
                    return buildXqaMlaDecodeKernels(module, op, xqa, *cache);
                  });
      return success();
    }
    // Chips with a plan of their own have a module of their own, so each
    // module has one plan: its chips' own, else the op's.
    auto planOf = [&](KernelModule &module) {
      auto own =
          chipPlans.getAs<XqaMlaPlanAttr>(stringifyChip(module.chips.front()));
      return own ? own : xqa;
    };
    lowerDecodePerModule(
        op.getLoc(), op.getQuery(), op.getBlockTable(),
        cache->type.getBlockSize(), latent, numHeads,
        [&](KernelModule &module) {
          return gridOf(planOf(module), module.chips);
        },
        [&](KernelModule &module) {
          return buildXqaMlaDecodeKernels(module, op, planOf(module), *cache);
        });
    return success();
  }
  auto portable = cast<PortablePlanAttr>(plan);
  DecodeGrid grid;
  grid.splitKeys = portable.getKeysPerSplit();
  lowerDecode(op.getLoc(), op.getQuery(), op.getBlockTable(),
              cache->type.getBlockSize(), latent, numHeads, grid,
              [&](KernelModule &module) {
                return buildMlaDecodeKernels(module, op, *cache, portable);
              });
  return success();
}

LogicalResult HostRewriter::run() {
  MLIRContext *context = function.getContext();
  if (function.isExternal())
    return success();
  if (function.getNumResults() != 0)
    return function.emitOpError()
           << "uses pattn ops and returns values; compiled functions write "
              "their results into destination buffers and return a status";
  auto module = function->getParentOfType<ModuleOp>();
  if (!SymbolTable::symbolKnownUseEmpty(function, module))
    return function.emitOpError()
           << "uses pattn ops and is called from the module; compiled pattn "
              "functions are entry points";

  // The caller's stream: a trailing pointer argument, seen as an async
  // token so that every launch and allocation is ordered on it.
  Block &entry = function.front();
  Type streamType = LLVM::LLVMPointerType::get(context);
  (void)function.insertArgument(function.getNumArguments(), streamType,
                                DictionaryAttr(), function.getLoc());
  builder.setInsertionPointToStart(&entry);
  // Before anything launches: the sizes the verifiers could not compare.
  emitHostSizeChecks(builder, function);
  stream = UnrealizedConversionCastOp::create(builder, function.getLoc(),
                                              gpu::AsyncTokenType::get(context),
                                              entry.getArguments().back())
               .getResult(0);
  if (modules.size() > 1) {
    declareRuntimeFunction(module, kDeviceArch, builder.getI32Type());
    arch = func::CallOp::create(builder, function.getLoc(), kDeviceArch,
                                TypeRange{builder.getI32Type()}, ValueRange{})
               .getResult(0);
  }

  SmallVector<Operation *> work;
  function.walk([&](Operation *op) {
    if (isa<PAttnDialect>(op->getDialect()) ||
        isa<memref::AllocOp, memref::DeallocOp>(op))
      work.push_back(op);
  });
  SmallVector<Operation *> bindings;
  findFusedRotaries();
  SmallVector<Operation *> fused;
  for (Operation *op : work) {
    if (isa<BindCacheOp, RescaleViewOp>(op)) {
      bindings.push_back(op);
      continue;
    }
    if (fusedAway.contains(op)) {
      fused.push_back(op);
      continue;
    }
    // Also when the fold (which checks first) did not run.
    if (failed(::pattn::verifyStaticScalesAreFinite(op)))
      return failure();
    builder.setInsertionPoint(op);
    Location loc = op->getLoc();
    LogicalResult result =
        llvm::TypeSwitch<Operation *, LogicalResult>(op)
            .Case<WriteCacheOp, WriteRecordOp, RotaryOp, ScaleNormalizerOp,
                  FoldQueryOp, PagedAttentionOp, MlaDecodeOp>(
                [&](auto typed) { return lower(typed); })
            .Case([&](memref::AllocOp alloc) {
              // Temporaries of the fold live on the device, stream-ordered.
              auto device = gpu::AllocOp::create(
                  builder, loc, alloc.getType(),
                  gpu::AsyncTokenType::get(context), ValueRange{stream},
                  alloc.getDynamicSizes(), ValueRange{}, false);
              alloc.replaceAllUsesWith(device.getMemref());
              return success();
            })
            .Case([&](memref::DeallocOp dealloc) {
              gpu::DeallocOp::create(builder, loc,
                                     gpu::AsyncTokenType::get(context),
                                     ValueRange{stream}, dealloc.getMemref());
              return success();
            })
            .Default([](Operation *) { return success(); });
    if (failed(result))
      return failure();
    op->erase();
  }
  // Views and bindings have no users left; erase uses before definitions.
  for (Operation *op : llvm::reverse(bindings))
    op->erase();
  for (Operation *op : llvm::reverse(fused))
    op->erase();

  // Return the runtime's status of this call.
  declareRuntimeFunction(module, kTakeStatus, builder.getI32Type());
  function.walk([&](func::ReturnOp ret) {
    builder.setInsertionPoint(ret);
    Value status =
        func::CallOp::create(builder, ret.getLoc(), kTakeStatus,
                             TypeRange{builder.getI32Type()}, ValueRange{})
            .getResult(0);
    func::ReturnOp::create(builder, ret.getLoc(), ValueRange{status});
    ret.erase();
  });
  function.setType(FunctionType::get(context, function.getArgumentTypes(),
                                     {builder.getI32Type()}));
  return success();
}

namespace {
struct ConvertPAttnToGPUPass
    : public ::pattn::impl::ConvertPAttnToGPUBase<ConvertPAttnToGPUPass> {
  using Base::Base;

  /// The chips, checked by initialize.
  SmallVector<::pattn::Chip> targetChips;

  LogicalResult initialize(MLIRContext *context) override {
    // Options are not ops: their errors carry no location and dump no IR.
    targetChips.clear();
    std::string error = ::pattn::parseChipList(chips, targetChips);
    if (!error.empty())
      return emitError(UnknownLoc::get(context))
             << "convert-pattn-to-gpu: chips: " << error;
    if (keysPerSplit <= 0 || keysPerSplit % kBlockThreads != 0)
      return emitError(UnknownLoc::get(context))
             << "convert-pattn-to-gpu: keys-per-split=" << int64_t(keysPerSplit)
             << " must be a positive multiple of " << kBlockThreads;
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> functions;
    for (auto function : module.getOps<func::FuncOp>()) {
      bool usesPAttn = function
                           .walk([](Operation *op) {
                             return isa<PAttnDialect>(op->getDialect())
                                        ? WalkResult::interrupt()
                                        : WalkResult::advance();
                           })
                           .wasInterrupted();
      if (usesPAttn)
        functions.push_back(function);
    }
    if (functions.empty())
      return;

    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(&getContext()));
    // One kernel module per conversion class of the target table, carrying
    // the #nvvm.target of each of its chips; a chip whose MLA decodes have
    // a plan of their own (chip_plans) gets its own module, since its
    // kernels differ from the class's other chips'.
    auto classOf = [&](const ::pattn::TargetDescription &target) {
      if (!hardwareConversions || !target.hasFp8Conversion)
        return ConversionClass::none;
      return target.hasFp4Conversion ? ConversionClass::fp8AndFp4
                                     : ConversionClass::fp8;
    };
    llvm::SmallSetVector<::pattn::Chip, 4> ownModule;
    for (func::FuncOp function : functions)
      function.walk([&](MlaDecodeOp op) {
        if (DictionaryAttr chipPlans = mlaChipPlans(op, targetChips))
          for (::pattn::Chip chip : targetChips)
            if (chipPlans.get(::pattn::stringifyChip(chip)))
              ownModule.insert(chip);
      });
    std::vector<std::unique_ptr<KernelModule>> owned;
    auto createModule = [&](StringRef name, ConversionClass conversions,
                            ArrayRef<::pattn::Chip> members) {
      SmallVector<Attribute> targets;
      for (::pattn::Chip chip : members)
        targets.push_back(NVVM::NVVMTargetAttr::get(
            &getContext(), /*optLevel=*/3, "nvptx64-nvidia-cuda",
            ::pattn::stringifyChip(chip),
            ::pattn::getTargetDescription(chip).ptxFeatures));
      // Created detached, then inserted: the symbol table renames it on a
      // clash with a module the user already has.
      OpBuilder builder(&getContext());
      auto gpuModule = gpu::GPUModuleOp::create(builder, module.getLoc(), name);
      gpuModule.setTargetsAttr(ArrayAttr::get(&getContext(), targets));
      SymbolTable(module).insert(gpuModule);
      owned.push_back(
          std::make_unique<KernelModule>(gpuModule, conversions, members));
    };
    for (ConversionClass conversions :
         {ConversionClass::none, ConversionClass::fp8,
          ConversionClass::fp8AndFp4}) {
      SmallVector<::pattn::Chip> members, apart;
      for (::pattn::Chip chip : targetChips) {
        if (classOf(::pattn::getTargetDescription(chip)) != conversions)
          continue;
        (ownModule.contains(chip) ? apart : members).push_back(chip);
      }
      // A chip alone in its class already has a module of its own.
      if (members.empty() && apart.size() == 1)
        std::swap(members, apart);
      static constexpr const char *kNames[] = {
          "pattn_kernels", "pattn_kernels_fp8", "pattn_kernels_fp4"};
      if (!members.empty())
        createModule(kNames[int(conversions)], conversions, members);
      for (::pattn::Chip chip : apart)
        createModule(
            (Twine("pattn_kernels_") + ::pattn::stringifyChip(chip)).str(),
            conversions, chip);
    }
    SmallVector<KernelModule *> modules;
    for (auto &kernelModule : owned)
      modules.push_back(kernelModule.get());
    for (func::FuncOp function : functions) {
      HostRewriter rewriter(function, modules, targetChips, keysPerSplit);
      if (failed(rewriter.run()))
        return signalPassFailure();
    }
    // A kernel module stands at the ops its kernels came from, so that a
    // failure while serializing it (ptxas) points at them, not at file:0:0.
    for (KernelModule *kernelModule : modules) {
      SmallVector<Location> origins;
      for (auto kernel : kernelModule->module.getOps<gpu::GPUFuncOp>())
        origins.push_back(kernel.getLoc());
      if (!origins.empty())
        kernelModule->module->setLoc(FusedLoc::get(&getContext(), origins));
    }
    // The same IR whichever compiler built pattn (OpOrder.h).
    for (func::FuncOp function : functions)
      orderOpsDeterministically(function);
    for (KernelModule *kernelModule : modules)
      for (auto kernel : kernelModule->module.getOps<gpu::GPUFuncOp>())
        orderOpsDeterministically(kernel);
  }
};
} // namespace
