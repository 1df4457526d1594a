//===- HostRewriter.cpp - Launches, dispatch and the cache writes ---------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the host rewriting of an entry function: the
// caller's stream and status, the dispatch between kernel modules by the
// device's compute capability, launches, and the lowering of the cache
// writes, rotary and fold ops (the decodes are in LowerDecode.cpp).
//
//===----------------------------------------------------------------------===//

#include "Host/HostRewriter.h"
#include "Host/HostChecks.h"
#include "Kernels/Common/ScalarBuilder.h"
#include "pattn/Dialect/PAttn/Transforms/ConstantTables.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace pattn;

/// Declares the runtime function `name` taking nothing and returning
/// `result`; one returning a memref goes through MLIR's C interface.
void pattn::declareRuntimeFunction(ModuleOp module, StringRef name,
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
  ScalarBuilder kb(builder, loc);
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
  ScalarBuilder kb(builder, loc);
  kb.ifThen(kb.cmpi(arith::CmpIPredicate::sgt, count, kb.index(0)), body);
}

void HostRewriter::launchCheckedWrite(Location loc, KernelModule &module,
                                      const Kernel &kernel,
                                      gpu::KernelDim3 grid, Value slots,
                                      Value storage, int64_t blockSize,
                                      RotaryOp rotary) {
  launchGated(
      loc, buildSlotCheckKernel(module, loc, slots, storage, blockSize, rotary),
      kernel, grid, dim(loc, slots, 0));
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
                               gpu::KernelDim3 grid, Value checkItems) {
  // One check block per kBlockThreads x kCheckItemsPerThread items, at
  // most kMostCheckBlocks, each with its own verdict.
  ScalarBuilder kb(builder, loc);
  int64_t perBlock = kBlockThreads * kCheckItemsPerThread;
  Value rounded = kb.add(checkItems, kb.index(perBlock - 1));
  Value checkBlocks = kb.divs(rounded, kb.index(perBlock));
  checkBlocks =
      kb.maxs(kb.mins(checkBlocks, kb.index(kMostCheckBlocks)), kb.index(1));
  Type tokenType = gpu::AsyncTokenType::get(builder.getContext());
  auto flags = gpu::AllocOp::create(
      builder, loc,
      MemRefType::get({ShapedType::kDynamic}, builder.getI32Type()), tokenType,
      ValueRange{stream}, ValueRange{checkBlocks}, ValueRange{},
      /*hostShared=*/false);
  // Rejected slots also raise a bit in the runtime's device error word,
  // which the caller reads after synchronizing (no sync here).
  auto wordType = MemRefType::get({1}, builder.getI32Type());
  declareRuntimeFunction(function->getParentOfType<ModuleOp>(),
                         kDeviceErrorWord, wordType);
  Value errorWord = func::CallOp::create(builder, loc, kDeviceErrorWord,
                                         TypeRange{wordType}, ValueRange{})
                        .getResult(0);
  check.operands.push_back(flags.getMemref());
  check.operands.push_back(errorWord);
  Value one = kb.index(1);
  launch(loc, check, {checkBlocks, one, one});
  SmallVector<Value> operands(kernel.operands);
  operands.push_back(flags.getMemref());
  launch(loc, kernel.func, grid, operands);
  gpu::DeallocOp::create(builder, loc, tokenType, ValueRange{stream},
                         flags.getMemref());
}

LogicalResult HostRewriter::lower(WriteCacheOp op) {
  FailureOr<CacheBuffers> cache = resolveCache(op, op.getCache());
  if (failed(cache))
    return failure();
  Location loc = op.getLoc();
  RotaryOp rotary = fusedRotaries.lookup(op);
  Value tokens = dim(loc, rotary ? rotary.getInput() : op.getValues(), 0);
  ifPositive(loc, tokens, [&] {
    // writeCacheRowsPerWarp (token, kv head) rows per warp,
    // kWriteWarpsPerBlock warps a block.
    ScalarBuilder kb(builder, loc);
    Value rows = kb.mul(tokens, kb.index(cache->type.getKvHeads()));
    int64_t perBlock =
        kWriteWarpsPerBlock * writeCacheRowsPerWarp(cache->type, rotary);
    Value rounded = kb.add(rows, kb.index(perBlock - 1));
    Value blocks = kb.divs(rounded, kb.index(perBlock));
    Value one = kb.index(1);
    dispatch(loc, [&](KernelModule &module) {
      Kernel kernel = buildWriteCacheKernel(module, op, *cache, rotary);
      launchCheckedWrite(loc, module, kernel, {blocks, one, one}, op.getSlots(),
                         cache->storage, cache->type.getBlockSize(), rotary);
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
                  {tokens, blocks, one}, tokens);
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

/// Tables a fold block reduces itself (4 rows of 512 channels, 8 of 256,
/// 16 of 128): 8 KiB that every block reads from L2, against a launch.
static constexpr int64_t kFusedNormalizerEntries = 2048;

/// Whether `op` is lowered by a prompt kernel (a prefill plan, or the
/// portable kernel's prompt form): a fold for it has many rows.
static bool servesPrompt(PagedAttentionOp op) {
  Attribute plan = op.getPlanAttr();
  if (isa_and_nonnull<PrefillPlanAttr>(plan))
    return true;
  auto portable = dyn_cast_or_null<PortablePlanAttr>(plan);
  return portable && portable.getPrompt();
}

// A dynamic table's scale_normalizer followed by the fold_query that reads
// its N is computed inside the fold kernel (one launch less; every fold
// block reduces the table, block 0 writes N and the flag), when the table
// is small and N and the flag are read only by the fold and the guarded
// attention ops of the same query (folded or not): those run only when the
// fold does (no tokens, no launches). Not for a prompt's fold: its
// thousands of blocks would each reduce the table, where one normalizer
// block does it once.
void HostRewriter::findFusedNormalizers() {
  function.walk([&](ScaleNormalizerOp normalizer) {
    auto fold = dyn_cast_or_null<FoldQueryOp>(normalizer->getNextNode());
    if (!fold || fold.getNormalizer() != normalizer.getOut() ||
        fold.getScales() != normalizer.getScales())
      return;
    auto table = cast<MemRefType>(normalizer.getScales().getType());
    if (!table.hasStaticShape() ||
        table.getNumElements() > kFusedNormalizerEntries)
      return;
    auto readsWithTheFold = [&](Operation *user) {
      if (auto attention = dyn_cast<PagedAttentionOp>(user))
        return (attention.getQuery() == fold.getOut() ||
                attention.getQuery() == fold.getQuery()) &&
               !servesPrompt(attention);
      return isa<ScaleNormalizerOp, FoldQueryOp, memref::DeallocOp>(user);
    };
    for (Value result : {normalizer.getOut(), normalizer.getFlag()})
      if (!llvm::all_of(result.getUsers(), readsWithTheFold))
        return;
    fusedNormalizers[fold] = normalizer;
    fusedAway.insert(normalizer);
  });
}

/// A temporary of the fold (the folded query or its exponents): its
/// allocation and deallocation in `fold`'s block, when its only other
/// users are `fold` and `attention`.
static std::optional<std::pair<Operation *, Operation *>>
foldTemporary(Value buffer, FoldQueryOp fold, PagedAttentionOp attention) {
  auto alloc = buffer.getDefiningOp<memref::AllocOp>();
  if (!alloc || alloc->getBlock() != fold->getBlock())
    return std::nullopt;
  Operation *dealloc = nullptr;
  for (Operation *user : buffer.getUsers()) {
    if (user == fold.getOperation() || user == attention.getOperation())
      continue;
    if (!isa<memref::DeallocOp>(user) || dealloc)
      return std::nullopt;
    dealloc = user;
  }
  return std::make_pair(alloc.getOperation(), dealloc);
}

// A fold_query right before the XQA decode of the op it folds for (the
// folded query, its exponents and N read by that op alone, and
// temporaries) is computed by that decode: each block folds its own query
// rows, and with a fused normalizer reduces the table too (docs/Lowering.md,
// "The fold inside the decode"). The fold's launch, and its temporaries,
// are saved.
void HostRewriter::findFusedFolds() {
  function.walk([&](FoldQueryOp fold) {
    auto attention = dyn_cast_or_null<PagedAttentionOp>(fold->getNextNode());
    if (!attention || attention.getQuery() != fold.getOut() ||
        attention.getQueryExponents() != fold.getExponents() ||
        attention.getKScale() != fold.getNormalizer())
      return;
    // (A split op's plan is a prefill plan: its decode side is not fused.)
    if (!isa_and_nonnull<XqaPlanAttr>(attention.getPlanAttr()))
      return;
    ScaleNormalizerOp normalizer = fusedNormalizers.lookup(fold);
    if (normalizer && attention.getGuard() != normalizer.getFlag())
      return;
    auto query = foldTemporary(fold.getOut(), fold, attention);
    auto exponents = foldTemporary(fold.getExponents(), fold, attention);
    if (!query || !exponents)
      return;
    fusedFolds[attention] = FusedFold{fold, normalizer};
    fusedAway.insert(fold);
    for (auto [alloc, dealloc] : {*query, *exponents}) {
      fusedAway.insert(alloc);
      if (dealloc)
        fusedAway.insert(dealloc);
    }
  });
}

Value HostRewriter::queryRead(PagedAttentionOp op) {
  auto fused = fusedFolds.find(op);
  return fused == fusedFolds.end() ? op.getQuery()
                                   : fused->second.fold.getQuery();
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
    // A warp per (token, head) row: ceil(rows / rows per block) blocks.
    Value heads = arith::ConstantIndexOp::create(
        builder, loc, static_cast<int64_t>(op.getNumHeads()));
    Value rows = arith::MulIOp::create(builder, loc, tokens, heads);
    Value perBlock =
        arith::ConstantIndexOp::create(builder, loc, kFoldRowsPerBlock);
    Value blocks = arith::CeilDivSIOp::create(builder, loc, rows, perBlock);
    Value one = arith::ConstantIndexOp::create(builder, loc, 1);
    dispatch(loc, [&](KernelModule &module) {
      launch(loc, buildFoldQueryKernel(module, op, fusedNormalizers.lookup(op)),
             {blocks, one, one});
    });
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
  findFusedNormalizers();
  findFusedFolds();
  findGuardedPairs();
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
  // Views and bindings have no users left but the fused-away ops (a
  // guarded pair's second op reads a cache); erase uses before definitions.
  for (Operation *op : fused)
    op->dropAllReferences();
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
