//===- BufferRules.cpp - Rules every pattn buffer operand keeps -*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the op-independent buffer rules of BufferRules.h:
// static sizes within the int64 byte range, and one cache type per byte of
// storage, followed through the views that keep the bytes where they are
// (casts, reshapes) and those at static offsets (subview, reinterpret_cast).
//
//===----------------------------------------------------------------------===//

#include "pattn/Dialect/PAttn/IR/BufferRules.h"
#include "pattn/Dialect/PAttn/IR/PAttnOps.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/Support/MathExtras.h"

#include <optional>

using namespace mlir;
using namespace pattn;

//===----------------------------------------------------------------------===//
// Sizes
//===----------------------------------------------------------------------===//

/// Bytes of one element, rounded up; 1 for element types without a width
/// (the op verifiers reject those on their own).
static int64_t elementBytes(Type element) {
  if (element.isIntOrFloat())
    return std::max<int64_t>(1, (element.getIntOrFloatBitWidth() + 7) / 8);
  return 1;
}

bool pattn::exceedsInt64Bytes(MemRefType type) {
  if (llvm::is_contained(type.getShape(), 0))
    return false; // an empty buffer, whatever its other dimensions
  int64_t bytes = elementBytes(type.getElementType());
  // A page-strided buffer spans its pages' stride per page.
  if (isPageStrided(type)) {
    int64_t pages = type.getDimSize(0);
    return llvm::MulOverflow(bytes, pageStrideElements(type), bytes) ||
           (!ShapedType::isDynamic(pages) &&
            llvm::MulOverflow(bytes, pages, bytes));
  }
  for (int64_t dim : type.getShape()) {
    if (ShapedType::isDynamic(dim))
      continue;
    if (llvm::MulOverflow(bytes, dim, bytes))
      return true;
  }
  return false;
}

/// The elements of one page: the product of the inner sizes, or nullopt
/// when one is dynamic (or the product overflows).
static std::optional<int64_t> pageElements(MemRefType type) {
  int64_t elements = 1;
  for (int64_t dim : type.getShape().drop_front()) {
    if (ShapedType::isDynamic(dim) ||
        llvm::MulOverflow(elements, dim, elements))
      return std::nullopt;
  }
  return elements;
}

bool pattn::isPageStrided(MemRefType type) {
  auto layout = dyn_cast<StridedLayoutAttr>(type.getLayout());
  if (!layout || type.getRank() < 2 ||
      ShapedType::isDynamic(layout.getOffset()))
    return false;
  std::optional<int64_t> page = pageElements(type);
  ArrayRef<int64_t> strides = layout.getStrides();
  if (!page || ShapedType::isDynamic(strides.front()) ||
      strides.front() < *page)
    return false;
  // Every page starts 16-byte aligned, as the buffer does (whole rows move
  // in 16-byte copies).
  int64_t element = elementBytes(type.getElementType());
  int64_t strideBytes = 0, offsetBytes = 0;
  if (llvm::MulOverflow(strides.front(), element, strideBytes) ||
      llvm::MulOverflow(layout.getOffset(), element, offsetBytes) ||
      strideBytes % 16 != 0 || offsetBytes % 16 != 0)
    return false;
  // Row-major inside a page.
  int64_t expected = 1;
  for (int64_t i = type.getRank() - 1; i >= 1; --i) {
    if (strides[i] != expected)
      return false;
    expected *= type.getDimSize(i);
  }
  return true;
}

bool pattn::hasPagedLayout(MemRefType type) {
  return type.getLayout().isIdentity() || isPageStrided(type);
}

int64_t pattn::pageStrideElements(MemRefType type) {
  if (isPageStrided(type))
    return cast<StridedLayoutAttr>(type.getLayout()).getStrides().front();
  std::optional<int64_t> page = pageElements(type);
  assert(page && "a contiguous page of static sizes");
  return *page;
}

LogicalResult pattn::verifyBuffersFitInt64(Operation *op) {
  for (OpOperand &operand : op->getOpOperands()) {
    auto type = dyn_cast<MemRefType>(operand.get().getType());
    if (type && exceedsInt64Bytes(type))
      return op->emitOpError()
             << "operand #" << operand.getOperandNumber() << " of type " << type
             << " spans more than 2^63 - 1 bytes; pattn addresses buffers "
                "with 64-bit byte offsets";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Overlapping bindings
//===----------------------------------------------------------------------===//

namespace {

/// A view of a root buffer and where it starts, in elements from the
/// root's start (unknown behind a dynamic offset).
struct View {
  Value value;
  std::optional<int64_t> begin;
};

/// A binding of a view: where its bytes start and how many elements its
/// static shape and strides reach (unknown when any is dynamic).
struct Binding {
  Operation *op;
  Value storage;
  Type type;
  std::optional<int64_t> begin;
  std::optional<int64_t> extent;
  /// For a page-strided view: its page stride and page size, in elements.
  std::optional<int64_t> pageStride, pageSize;
};

} // namespace

/// The layout offset of `type`, when static.
static std::optional<int64_t> layoutOffset(MemRefType type) {
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) ||
      ShapedType::isDynamic(offset))
    return std::nullopt;
  return offset;
}

/// Elements from a view's first to one past its last: 1 + the sum of
/// (size - 1) * stride; unknown when a size or stride is dynamic.
static std::optional<int64_t> extentOf(MemRefType type) {
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)))
    return std::nullopt;
  int64_t last = 0;
  for (auto [size, stride] : llvm::zip(type.getShape(), strides)) {
    if (size == 0)
      return 0;
    if (ShapedType::isDynamic(size) || ShapedType::isDynamic(stride))
      return std::nullopt;
    int64_t step;
    if (llvm::MulOverflow(size - 1, stride, step) ||
        llvm::AddOverflow(last, step, last))
      return std::nullopt;
  }
  return last + 1;
}

/// The buffer `value` views, through every view this rule follows.
static Value rootBuffer(Value value) {
  while (Operation *op = value.getDefiningOp()) {
    if (!isa<memref::CastOp, memref::ExpandShapeOp, memref::CollapseShapeOp,
             memref::SubViewOp, memref::ReinterpretCastOp>(op))
      break;
    value = op->getOperand(0);
  }
  return value;
}

/// Where `user`'s result starts given where its source `view` starts; the
/// root's layout offset places reinterpret_casts, whose offset is absolute.
static std::optional<int64_t> beginOf(Operation *user, const View &view,
                                      std::optional<int64_t> rootOffset) {
  if (auto reinterpret = dyn_cast<memref::ReinterpretCastOp>(user)) {
    ArrayRef<int64_t> offsets = reinterpret.getStaticOffsets();
    if (!rootOffset || offsets.size() != 1 || ShapedType::isDynamic(offsets[0]))
      return std::nullopt;
    return offsets[0] - *rootOffset;
  }
  if (auto subview = dyn_cast<memref::SubViewOp>(user)) {
    SmallVector<int64_t> strides;
    int64_t offset;
    if (!view.begin ||
        failed(subview.getSourceType().getStridesAndOffset(strides, offset)))
      return std::nullopt;
    int64_t begin = *view.begin;
    for (auto [start, stride] :
         llvm::zip(subview.getStaticOffsets(), strides)) {
      int64_t step;
      if (ShapedType::isDynamic(start) || ShapedType::isDynamic(stride) ||
          llvm::MulOverflow(start, stride, step) ||
          llvm::AddOverflow(begin, step, begin))
        return std::nullopt;
    }
    return begin;
  }
  return view.begin; // a cast or reshape keeps the bytes where they are
}

/// Every binding of `root` and of the views made from it.
static SmallVector<Binding> bindingsOf(Value root) {
  std::optional<int64_t> rootOffset =
      layoutOffset(cast<MemRefType>(root.getType()));
  SmallVector<View> views = {{root, 0}};
  SmallVector<Binding> bindings;
  for (size_t i = 0; i < views.size(); ++i) {
    View view = views[i];
    for (Operation *user : view.value.getUsers()) {
      if (auto bind = dyn_cast<BindCacheOp>(user)) {
        if (bind.getStorage() != view.value)
          continue;
        auto type = cast<MemRefType>(view.value.getType());
        Binding binding{bind, view.value, bind.getType(), view.begin,
                        extentOf(type)};
        if (isPageStrided(type)) {
          binding.pageStride = pageStrideElements(type);
          binding.pageSize = pageElements(type);
        }
        bindings.push_back(binding);
        continue;
      }
      if (isa<memref::CastOp, memref::ExpandShapeOp, memref::CollapseShapeOp,
              memref::SubViewOp, memref::ReinterpretCastOp>(user) &&
          user->getOperand(0) == view.value)
        views.push_back({user->getResult(0), beginOf(user, view, rootOffset)});
    }
  }
  return bindings;
}

/// Whether two bindings provably share a byte.
static bool overlap(const Binding &a, const Binding &b) {
  if (a.storage == b.storage)
    return true;
  if (!a.begin || !b.begin || a.extent == 0 || b.extent == 0)
    return false;
  if (*a.begin == *b.begin)
    return true;
  // Pages of the same stride interleave (K and V of an engine's
  // [blocks, 2, ...] buffer): they share bytes when, within one stride,
  // the page that starts later begins before the other's ends.
  if (a.pageStride && a.pageStride == b.pageStride) {
    int64_t stride = *a.pageStride;
    int64_t shift = ((*b.begin - *a.begin) % stride + stride) % stride;
    return shift < *a.pageSize || stride - shift < *b.pageSize;
  }
  const Binding &low = *a.begin < *b.begin ? a : b;
  const Binding &high = *a.begin < *b.begin ? b : a;
  return low.extent && *high.begin - *low.begin < *low.extent;
}

Operation *pattn::findBindingOfOverlappingBytes(Operation *bindCache) {
  auto self = cast<BindCacheOp>(bindCache);
  SmallVector<Binding> bindings = bindingsOf(rootBuffer(self.getStorage()));
  const Binding *mine = llvm::find_if(bindings, [&](const Binding &binding) {
    return binding.op == bindCache;
  });
  if (mine == bindings.end())
    return nullptr;
  for (const Binding &other : bindings)
    if (other.op != bindCache && other.type != mine->type &&
        overlap(*mine, other))
      return other.op;
  return nullptr;
}
