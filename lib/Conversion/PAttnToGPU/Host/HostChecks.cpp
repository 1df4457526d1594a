//===- HostChecks.cpp - Dynamic sizes checked before any launch ----------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//

#include "Host/HostChecks.h"

#include "pattn/Dialect/PAttn/IR/PAttnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace pattn;

namespace {

/// A size the call must have: dimension `dim` of `value` equals dimension
/// `otherDim` of `other` plus `plus`, or the constant `plus` when `other`
/// is null.
struct SizeCheck {
  Value value;
  int64_t dim;
  Value other;
  int64_t otherDim;
  int64_t plus;
  std::string what; ///< "outs dim 0 (tokens) = query dim 0"
  Operation *op;
};

/// Collects the checks of one function's ops.
class CheckCollector {
public:
  explicit CheckCollector(func::FuncOp function) : entry(function.front()) {}

  void collect(Operation *op) {
    current = op;
    llvm::TypeSwitch<Operation *>(op)
        .Case([&](BindCacheOp bind) { collectBinding(bind); })
        .Case([&](WriteCacheOp write) {
          auto cache = cast<CacheType>(write.getCache().getType());
          if (write.getFirstHead() == 0)
            fixed(write.getValues(), "values", 1, cache.getKvHeads(),
                  "kv_heads");
          fixed(write.getValues(), "values", 2, cache.getHeadDim(), "head_dim");
          same(write.getSlots(), "slots", 0, write.getValues(), "values", 0, 0,
               "tokens");
          channelTable(write.getScale(), "scale", cache);
        })
        .Case([&](WriteRecordOp write) {
          same(write.getRope(), "rope", 0, write.getLatent(), "latent", 0, 0,
               "tokens");
          same(write.getSlots(), "slots", 0, write.getLatent(), "latent", 0, 0,
               "tokens");
        })
        .Case([&](RotaryOp rotary) {
          Value input = rotary.getInput();
          same(rotary.getOut(), "outs", 0, input, "input", 0, 0, "tokens");
          same(rotary.getSin(), "sin", 0, rotary.getCos(), "cos", 0, 0,
               "max_position");
          if (Value positions = rotary.getPositions())
            same(positions, "positions", 0, input, "input", 0, 0, "tokens");
          Value seqLens = rotary.getSeqLens();
          if (Value queryStart = rotary.getQueryStart())
            same(queryStart, "query_start", 0, seqLens, "seq_lens", 0, 1,
                 "sequences + 1");
          else if (seqLens)
            same(input, "input", 0, seqLens, "seq_lens", 0, 0,
                 "one token per sequence");
        })
        .Case([&](PagedAttentionOp attention) {
          auto key = cast<CacheType>(attention.getKey().getType());
          auto value = cast<CacheType>(attention.getValue().getType());
          int64_t heads = static_cast<int64_t>(attention.getNumHeads());
          Value query = attention.getQuery(), out = attention.getOut();
          fixed(query, "query", 1, heads, "num_heads");
          fixed(query, "query", 2, key.getHeadDim(), "head_dim");
          for (int64_t d = 0; d < 3; ++d)
            same(out, "outs", d, query, "query", d, 0, "");
          sequences(query, attention.getBlockTable(), attention.getSeqLens(),
                    attention.getQueryStart());
          channelTable(attention.getKScale(), "k_scale", key);
          channelTable(attention.getVScale(), "v_scale", value);
          channelTable(attention.getOutScale(), "out_scale", value);
          if (Value sinks = attention.getSinks())
            fixed(sinks, "sinks", 0, heads, "num_heads");
          if (Value exponents = attention.getQueryExponents()) {
            same(exponents, "query_exponents", 0, query, "query", 0, 0,
                 "tokens");
            fixed(exponents, "query_exponents", 1, heads, "num_heads");
          }
        })
        .Case([&](FoldQueryOp fold) {
          Value query = fold.getQuery();
          for (int64_t d = 0; d < 3; ++d)
            same(fold.getOut(), "outs", d, query, "query", d, 0, "");
          same(fold.getExponents(), "exponents", 0, query, "query", 0, 0,
               "tokens");
        })
        .Case([&](MlaDecodeOp mla) {
          Value query = mla.getQuery(), out = mla.getOut();
          int64_t heads = static_cast<int64_t>(mla.getNumHeads());
          fixed(query, "query", 1, heads, "num_heads");
          same(out, "outs", 0, query, "query", 0, 0, "tokens");
          fixed(out, "outs", 1, heads, "num_heads");
          sequences(query, mla.getBlockTable(), mla.getSeqLens(),
                    mla.getQueryStart());
        });
  }

  SmallVector<SizeCheck> checks;

private:
  /// `value` as an argument of the function (through casts), or null: a
  /// buffer the function makes itself is consistent by construction.
  Value argument(Value value) {
    while (value) {
      if (auto arg = dyn_cast<BlockArgument>(value))
        return arg.getOwner() == &entry ? value : Value();
      auto cast = value.getDefiningOp<memref::CastOp>();
      if (!cast)
        return Value();
      value = cast.getSource();
    }
    return Value();
  }

  static bool isDynamicDim(Value value, int64_t dim) {
    auto type = cast<MemRefType>(value.getType());
    return dim < type.getRank() && type.isDynamicDim(dim);
  }

  /// Dimension `dim` of `value` must be `size` (when the type left it `?`).
  void fixed(Value value, StringRef name, int64_t dim, int64_t size,
             StringRef meaning) {
    Value arg = value ? argument(value) : Value();
    if (!arg || !isDynamicDim(arg, dim) || ShapedType::isDynamic(size))
      return;
    std::string what;
    llvm::raw_string_ostream(what)
        << name << " dim " << dim << " must be " << size
        << (meaning.empty() ? "" : " (" + meaning.str() + ")");
    checks.push_back({arg, dim, Value(), 0, size, what, current});
  }

  /// Dimension `dim` of `value` must equal dimension `otherDim` of `other`
  /// plus `plus` (when either is `?`).
  void same(Value value, StringRef name, int64_t dim, Value other,
            StringRef otherName, int64_t otherDim, int64_t plus,
            StringRef meaning) {
    Value arg = value ? argument(value) : Value();
    Value otherArg = other ? argument(other) : Value();
    if (!arg || !otherArg ||
        (!isDynamicDim(arg, dim) && !isDynamicDim(otherArg, otherDim)))
      return;
    std::string what;
    llvm::raw_string_ostream os(what);
    os << name << " dim " << dim << " must equal " << otherName << " dim "
       << otherDim;
    if (plus)
      os << " + " << plus;
    if (!meaning.empty())
      os << " (" << meaning << ")";
    checks.push_back({arg, dim, otherArg, otherDim, plus, what, current});
  }

  /// The block table, lengths, query starts and query tokens of a decode.
  void sequences(Value query, Value blockTable, Value seqLens,
                 Value queryStart) {
    same(seqLens, "seq_lens", 0, blockTable, "block_table", 0, 0, "sequences");
    if (queryStart)
      same(queryStart, "query_start", 0, blockTable, "block_table", 0, 1,
           "sequences + 1");
    else
      same(query, "query", 0, blockTable, "block_table", 0, 0,
           "one query token per sequence");
  }

  /// A [kv_heads, head_dim] channel table of `cache`, if `table` is one.
  void channelTable(Value table, StringRef name, CacheType cache) {
    if (!table || cast<MemRefType>(table.getType()).getRank() != 2)
      return;
    fixed(table, name, 0, cache.getKvHeads(), "kv_heads");
    fixed(table, name, 1, cache.getHeadDim(), "head_dim");
  }

  /// The page buffers of a binding: their shapes follow the cache type,
  /// and every one has the storage's number of pages.
  void collectBinding(BindCacheOp bind) {
    struct Buffer {
      Value value;
      StringRef name;
      SmallVector<int64_t> shape;
    };
    Value storage = bind.getStorage();
    SmallVector<Buffer> buffers;
    if (auto records = dyn_cast<RecordCacheType>(bind.getType())) {
      buffers.push_back(
          {storage, "storage", records.getStorageShape(ShapedType::kDynamic)});
    } else {
      auto cache = cast<CacheType>(bind.getType());
      buffers.push_back(
          {storage, "storage", cache.getStorageShape(ShapedType::kDynamic)});
      if (Value groups = bind.getGroupScales())
        buffers.push_back({groups, "group_scales",
                           cache.getGroupScaleShape(ShapedType::kDynamic)});
      if (Value tokens = bind.getTokenScales())
        buffers.push_back({tokens, "token_scales",
                           cache.getTokenScaleShape(ShapedType::kDynamic)});
    }
    for (const Buffer &buffer : buffers) {
      for (int64_t d = 1; d < int64_t(buffer.shape.size()); ++d)
        fixed(buffer.value, buffer.name, d, buffer.shape[d], "");
      if (buffer.value != storage)
        same(buffer.value, buffer.name, 0, storage, "storage", 0, 0, "pages");
    }
  }

  Block &entry;
  Operation *current = nullptr;
};

} // namespace

/// "decode_step: 'pattn.paged_attention' at decode.mlir:25:3: "
static std::string describe(func::FuncOp function, Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << function.getSymName() << ": '" << op->getName() << "' at ";
  if (auto file = op->getLoc()->findInstanceOf<FileLineColLoc>())
    os << file.getFilename().getValue() << ":" << file.getLine() << ":"
       << file.getColumn();
  else
    op->getLoc().print(os);
  os << ": ";
  return text;
}

void ::pattn::emitHostSizeChecks(OpBuilder &builder, func::FuncOp function) {
  CheckCollector collector(function);
  function.walk([&](Operation *op) {
    if (isa<PAttnDialect>(op->getDialect()))
      collector.collect(op);
  });
  if (collector.checks.empty())
    return;

  auto module = function->getParentOfType<ModuleOp>();
  MLIRContext *context = builder.getContext();
  Type i8 = builder.getI8Type(), i64 = builder.getI64Type();
  auto messageType = MemRefType::get({ShapedType::kDynamic}, i8);
  if (!module.lookupSymbol<func::FuncOp>(kRejectSizes)) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(module.getBody());
    auto declaration = func::FuncOp::create(
        builder, module.getLoc(), kRejectSizes,
        builder.getFunctionType({messageType, i64, i64}, {}));
    declaration.setPrivate();
    declaration->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(),
                         UnitAttr::get(context));
  }

  SymbolTable symbols(module);
  for (const SizeCheck &check : collector.checks) {
    Location loc = check.op->getLoc();
    // The message, as a private constant of the module.
    std::string message = describe(function, check.op) + check.what;
    auto bytesType = MemRefType::get({int64_t(message.size())}, i8);
    auto tensorType = RankedTensorType::get({int64_t(message.size())}, i8);
    auto data = DenseElementsAttr::get(
        tensorType, ArrayRef<char>(message.data(), message.size()));
    memref::GlobalOp global;
    {
      OpBuilder::InsertionGuard guard(builder);
      builder.setInsertionPointToStart(module.getBody());
      global = memref::GlobalOp::create(builder, loc, "__pattn_size_check",
                                        builder.getStringAttr("private"),
                                        bytesType, data,
                                        /*constant=*/true, IntegerAttr());
      symbols.insert(global);
    }

    Value got = memref::DimOp::create(builder, loc, check.value, check.dim);
    Value expected;
    if (check.other) {
      expected =
          memref::DimOp::create(builder, loc, check.other, check.otherDim);
      if (check.plus) {
        Value plus = arith::ConstantIndexOp::create(builder, loc, check.plus);
        expected = arith::AddIOp::create(builder, loc, expected, plus);
      }
    } else {
      expected = arith::ConstantIndexOp::create(builder, loc, check.plus);
    }
    Value bad = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::ne,
                                      got, expected);
    scf::IfOp::create(builder, loc, bad, [&](OpBuilder &then, Location at) {
      Value bytes =
          memref::GetGlobalOp::create(then, at, bytesType, global.getSymName());
      Value text = memref::CastOp::create(then, at, messageType, bytes);
      Value got64 = arith::IndexCastOp::create(then, at, i64, got);
      Value expected64 = arith::IndexCastOp::create(then, at, i64, expected);
      func::CallOp::create(then, at, kRejectSizes, TypeRange{},
                           ValueRange{text, got64, expected64});
      scf::YieldOp::create(then, at);
    });
  }
}
