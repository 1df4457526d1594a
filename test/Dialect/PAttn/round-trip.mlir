// RUN: pattn-opt %s --split-input-file | pattn-opt --split-input-file | FileCheck %s
// RUN: pattn-opt %s --split-input-file --mlir-print-op-generic | pattn-opt --split-input-file | FileCheck %s

// Every attribute, type and op of the dialect, printed and parsed back.

// CHECK-LABEL: func.func private @attributes()
// CHECK-SAME: e0 = #pattn.encoding<f16>, e1 = #pattn.encoding<bf16>, e2 = #pattn.encoding<i8>
// CHECK-SAME: e3 = #pattn.encoding<f8e4m3>, e4 = #pattn.encoding<f8e5m2>, e5 = #pattn.encoding<i4>
// CHECK-SAME: e6 = #pattn.encoding<nvfp4>
// CHECK-SAME: g0 = #pattn.scale_granularity<none>, g1 = #pattn.scale_granularity<tensor>
// CHECK-SAME: g2 = #pattn.scale_granularity<channel>, g3 = #pattn.scale_granularity<token>
// CHECK-SAME: l0 = #pattn.layout<nhd>, l1 = #pattn.layout<hnd>
// CHECK-SAME: lane0 = #pattn.lane<latent: 512 x f8E4M3FN at 0 scaled_by latent_scale>
// CHECK-SAME: lane1 = #pattn.lane<"odd name": 2 x f4E2M1FN at 7>
func.func private @attributes() attributes {
  e0 = #pattn.encoding<f16>, e1 = #pattn.encoding<bf16>, e2 = #pattn.encoding<i8>,
  e3 = #pattn.encoding<f8e4m3>, e4 = #pattn.encoding<f8e5m2>, e5 = #pattn.encoding<i4>,
  e6 = #pattn.encoding<nvfp4>,
  g0 = #pattn.scale_granularity<none>, g1 = #pattn.scale_granularity<tensor>,
  g2 = #pattn.scale_granularity<channel>, g3 = #pattn.scale_granularity<token>,
  l0 = #pattn.layout<nhd>, l1 = #pattn.layout<hnd>,
  lane0 = #pattn.lane<latent: 512 x f8E4M3FN at 0 scaled_by latent_scale>,
  lane1 = #pattn.lane<"odd name": 2 x f4E2M1FN at 7>
}

// -----

// CHECK-LABEL: func.func private @cache_types
// CHECK-SAME: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
// CHECK-SAME: !pattn.cache<block_size = 32, kv_heads = 1, head_dim = 64, encoding = bf16, scale = none, layout = hnd>
// CHECK-SAME: !pattn.cache<block_size = 128, kv_heads = 4, head_dim = 256, encoding = i8, scale = tensor>
// CHECK-SAME: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f8e4m3, scale = token>
// CHECK-SAME: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 96, encoding = f8e5m2, scale = none>
// CHECK-SAME: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 8, encoding = i4, scale = channel>
// CHECK-SAME: !pattn.cache<block_size = 64, kv_heads = 2, head_dim = 16, encoding = nvfp4, scale = tensor, layout = hnd>
func.func private @cache_types(
  !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>,
  !pattn.cache<block_size = 32, kv_heads = 1, head_dim = 64, encoding = bf16, scale = none, layout = hnd>,
  !pattn.cache<block_size = 128, kv_heads = 4, head_dim = 256, encoding = i8, scale = tensor, layout = nhd>,
  !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f8e4m3, scale = token>,
  !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 96, encoding = f8e5m2, scale = none>,
  !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 8, encoding = i4, scale = channel>,
  !pattn.cache<block_size = 64, kv_heads = 2, head_dim = 16, encoding = nvfp4, scale = tensor, layout = hnd>)

// -----

// Presets print by name; a layout written out lane by lane that equals a
// preset prints as the preset too.
// CHECK-LABEL: func.func private @record_types
// CHECK-SAME: !pattn.record<fp8_ds_mla>
// CHECK-SAME: !pattn.record<nvfp4_ds_mla>
// CHECK-SAME: !pattn.record<nvfp4_ds_mla_fp8_rope>
// CHECK-SAME: !pattn.record<nvfp4_ds_mla_fp8_rope, token>
// CHECK-SAME: !pattn.record<fp8_ds_mla>
// CHECK-SAME: !pattn.record<32 bytes, none, {vals: 16 x f8E4M3FN at 0 scaled_by s, s: 1 x f32 at 16}>
// CHECK-SAME: !pattn.record<48 bytes, tensor, {q: 32 x f4E2M1FN at 0 scaled_by sf, sf: 2 x f8E4M3FN at 16, "raw bits": 8 x i8 at 18, h: 4 x f16 at 26}>
// CHECK-SAME: !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
// CHECK-SAME: !pattn.record_cache<block_size = 16, record = !pattn.record<nvfp4_ds_mla_fp8_rope, token>>
func.func private @record_types(
  !pattn.record<fp8_ds_mla>,
  !pattn.record<nvfp4_ds_mla, tensor>,
  !pattn.record<nvfp4_ds_mla_fp8_rope>,
  !pattn.record<nvfp4_ds_mla_fp8_rope, token>,
  !pattn.record<656 bytes, none, {latent: 512 x f8E4M3FN at 0 scaled_by latent_scale,
                                  latent_scale: 4 x f32 at 512, rope: 64 x bf16 at 528}>,
  !pattn.record<32 bytes, none, {vals: 16 x f8E4M3FN at 0 scaled_by s, s: 1 x f32 at 16}>,
  !pattn.record<48 bytes, tensor, {q: 32 x f4E2M1FN at 0 scaled_by sf, sf: 2 x f8E4M3FN at 16,
                                   "raw bits": 8 x i8 at 18, h: 4 x f16 at 26}>,
  !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>,
  !pattn.record_cache<block_size = 16, record = !pattn.record<nvfp4_ds_mla_fp8_rope, token>>)

// -----

!i4c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = channel>
!nvt = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = nvfp4, scale = token, layout = hnd>
!f16c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
!rec = !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla>>

// CHECK-LABEL: func.func @bind_and_write
func.func @bind_and_write(%s4: memref<?x16x8x64xi8>, %snv: memref<7x8x16x64xi8>,
                          %gnv: memref<7x8x16x8xf8E4M3FN>, %tnv: memref<7x16x8xf32>,
                          %s16: memref<?x16x8x256xi8>, %srec: memref<?x64x432xi8>,
                          %vals: memref<?x8x128xbf16>, %slots: memref<?xi32>,
                          %cs: memref<8x128xf32>, %ts: memref<1xf32>,
                          %lat: memref<3x512xf32>, %rope: memref<3x64xf32>,
                          %rslots: memref<3xi64>) {
  // CHECK: %[[I4:.*]] = pattn.bind_cache storage(%{{.*}} : memref<?x16x8x64xi8>) : !pattn.cache<{{.*}}encoding = i4, scale = channel>
  %k = pattn.bind_cache storage(%s4 : memref<?x16x8x64xi8>) : !i4c
  // CHECK: pattn.bind_cache storage(%{{.*}} : memref<7x8x16x64xi8>) group_scales(%{{.*}} : memref<7x8x16x8xf8E4M3FN>) token_scales(%{{.*}} : memref<7x16x8xf32>)
  %v = pattn.bind_cache storage(%snv : memref<7x8x16x64xi8>)
         group_scales(%gnv : memref<7x8x16x8xf8E4M3FN>)
         token_scales(%tnv : memref<7x16x8xf32>) : !nvt
  // CHECK: pattn.bind_cache storage(%{{.*}} : memref<?x16x8x256xi8>) : !pattn.cache<{{.*}}encoding = f16, scale = none>
  %f = pattn.bind_cache storage(%s16 : memref<?x16x8x256xi8>) : !f16c
  // CHECK: %[[REC:.*]] = pattn.bind_cache storage(%{{.*}} : memref<?x64x432xi8>) : !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla>>
  %r = pattn.bind_cache storage(%srec : memref<?x64x432xi8>) : !rec
  // CHECK: pattn.write_cache values(%{{.*}} : memref<?x8x128xbf16>) into(%[[I4]] : {{.*}}) slots(%{{.*}} : memref<?xi32>) scale(%{{.*}} : memref<8x128xf32>)
  pattn.write_cache values(%vals : memref<?x8x128xbf16>) into(%k : !i4c)
      slots(%slots : memref<?xi32>) scale(%cs : memref<8x128xf32>)
  // CHECK: pattn.write_cache values(%{{.*}} : memref<?x8x128xbf16>) into(%{{.*}} : {{.*}}nvfp4{{.*}}) slots(%{{.*}} : memref<?xi32>){{$}}
  pattn.write_cache values(%vals : memref<?x8x128xbf16>) into(%v : !nvt)
      slots(%slots : memref<?xi32>)
  // CHECK: pattn.write_cache values(%{{.*}} : memref<?x8x128xbf16>) into(%{{.*}} : {{.*}}f16{{.*}}) slots(%{{.*}} : memref<?xi32>){{$}}
  pattn.write_cache values(%vals : memref<?x8x128xbf16>) into(%f : !f16c)
      slots(%slots : memref<?xi32>)
  // CHECK: pattn.write_record latent(%{{.*}} : memref<3x512xf32>) rope(%{{.*}} : memref<3x64xf32>) into(%[[REC]] : {{.*}}) slots(%{{.*}} : memref<3xi64>) outer_scale(%{{.*}} : memref<1xf32>)
  pattn.write_record latent(%lat : memref<3x512xf32>) rope(%rope : memref<3x64xf32>)
      into(%r : !rec) slots(%rslots : memref<3xi64>) outer_scale(%ts : memref<1xf32>)
  return
}

// -----

!k8 = !pattn.cache<block_size = 16, kv_heads = 4, head_dim = 64, encoding = f8e5m2, scale = tensor>
!v4 = !pattn.cache<block_size = 16, kv_heads = 4, head_dim = 64, encoding = i4, scale = channel, layout = hnd>
!kvb = !pattn.cache<block_size = 16, kv_heads = 4, head_dim = 64, encoding = bf16, scale = none>

// CHECK-LABEL: func.func @attention
func.func @attention(%k: !k8, %v: !v4, %kv: !kvb,
                     %q: memref<2x24x64xf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>,
                     %ks: memref<1xf32>, %vs: memref<4x64xf32>, %o: memref<2x24x64xf16>,
                     %qs: memref<3xi32>, %q6: memref<6x24x64xbf16>,
                     %sinks: memref<24xf32>, %o6: memref<6x24x64xbf16>) {
  // CHECK: pattn.paged_attention query(%{{.*}} : memref<2x24x64xf16>) key(%{{.*}} : {{.*}}) value(%{{.*}} : {{.*}}) block_table(%{{.*}} : memref<2x8xi32>) seq_lens(%{{.*}} : memref<2xi32>) k_scale(%{{.*}} : memref<1xf32>) v_scale(%{{.*}} : memref<4x64xf32>) outs(%{{.*}} : memref<2x24x64xf16>) {num_heads = 24 : i64}
  pattn.paged_attention query(%q : memref<2x24x64xf16>) key(%k : !k8) value(%v : !v4)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>)
      k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<4x64xf32>)
      outs(%o : memref<2x24x64xf16>) {num_heads = 24 : i64}
  // CHECK: pattn.paged_attention {{.*}} query_start(%{{.*}} : memref<3xi32>) sinks(%{{.*}} : memref<24xf32>) outs(%{{.*}} : memref<6x24x64xbf16>)
  // CHECK-SAME: max_query_len = 3 : i64, num_heads = 24 : i64, softcap = 5.000000e+01 : f32, softmax_scale = 1.250000e-01 : f32, window = 128 : i64
  pattn.paged_attention query(%q6 : memref<6x24x64xbf16>) key(%kv : !kvb) value(%kv : !kvb)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>)
      query_start(%qs : memref<3xi32>) sinks(%sinks : memref<24xf32>)
      outs(%o6 : memref<6x24x64xbf16>)
      {num_heads = 24 : i64, softmax_scale = 0.125 : f32, softcap = 50.0 : f32,
       window = 128 : i64, max_query_len = 3 : i64}
  return
}

// -----

!fp8rec = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
!nvrec = !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla>>

// CHECK-LABEL: func.func @mla
func.func @mla(%c: !fp8rec, %n: !nvrec, %q: memref<4x128x576xbf16>, %bt: memref<4x16xi32>,
               %sl: memref<4xi32>, %o: memref<4x128x512xbf16>, %s: memref<1xf32>,
               %qh: memref<?x16x576xf16>, %qs: memref<?xi32>, %oh: memref<?x16x512xf16>) {
  // CHECK: pattn.mla_decode query(%{{.*}} : memref<4x128x576xbf16>) cache(%{{.*}} : !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>) block_table(%{{.*}} : memref<4x16xi32>) seq_lens(%{{.*}} : memref<4xi32>) outs(%{{.*}} : memref<4x128x512xbf16>) {num_heads = 128 : i64}
  pattn.mla_decode query(%q : memref<4x128x576xbf16>) cache(%c : !fp8rec)
      block_table(%bt : memref<4x16xi32>) seq_lens(%sl : memref<4xi32>)
      outs(%o : memref<4x128x512xbf16>) {num_heads = 128 : i64}
  // CHECK: pattn.mla_decode {{.*}} query_start(%{{.*}} : memref<?xi32>) outer_scale(%{{.*}} : memref<1xf32>) outs(%{{.*}} : memref<?x16x512xf16>) {max_query_len = 8 : i64, num_heads = 16 : i64, softmax_scale = 4.166{{.*}} : f32}
  pattn.mla_decode query(%qh : memref<?x16x576xf16>) cache(%n : !nvrec)
      block_table(%bt : memref<4x16xi32>) seq_lens(%sl : memref<4xi32>)
      query_start(%qs : memref<?xi32>) outer_scale(%s : memref<1xf32>)
      outs(%oh : memref<?x16x512xf16>)
      {num_heads = 16 : i64, max_query_len = 8 : i64, softmax_scale = 0.041666 : f32}
  return
}

// -----

// The internal forms of the fold and the backend choice.
!i4c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = channel>
!i4t = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = tensor>
!i8c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = channel>
!i8u = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = none>

// CHECK-LABEL: func.func @fold_forms
func.func @fold_forms(%k: !i4c, %v: !i8c, %q: memref<4x32x128xf16>, %ks: memref<8x128xf32>,
                      %vs: memref<8x128xf32>, %n: memref<1xf32>, %flag: memref<1xi32>,
                      %qf: memref<4x32x128xf16>, %e: memref<4x32xi32>, %bt: memref<4x8xi32>, %sl: memref<4xi32>,
                      %o: memref<4x32x128xf16>, %r: !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>,
                      %mq: memref<4x16x576xbf16>, %mo: memref<4x16x512xbf16>,
                      %wq: memref<4x64x576xbf16>, %wo: memref<4x64x512xbf16>) {
  // CHECK: %[[KT:.*]] = pattn.rescale_view %{{.*}} : !pattn.cache<{{.*}}scale = channel> to !pattn.cache<{{.*}}scale = tensor>
  %kt = pattn.rescale_view %k : !i4c to !i4t
  // CHECK: pattn.rescale_view %{{.*}} : !pattn.cache<{{.*}}encoding = i8, scale = channel> to !pattn.cache<{{.*}}encoding = i8, scale = none>
  %vu = pattn.rescale_view %v : !i8c to !i8u
  // CHECK: pattn.scale_normalizer scales(%{{.*}} : memref<8x128xf32>) outs(%{{.*}} : memref<1xf32>) flag(%{{.*}} : memref<1xi32>) {softmax_scale = 0.0883789062 : f32}
  pattn.scale_normalizer scales(%ks : memref<8x128xf32>) outs(%n : memref<1xf32>) flag(%flag : memref<1xi32>) {softmax_scale = 0.08837890625 : f32}
  // CHECK: pattn.fold_query query(%{{.*}} : memref<4x32x128xf16>) scales(%{{.*}} : memref<8x128xf32>) normalizer(%{{.*}} : memref<1xf32>) outs(%{{.*}} : memref<4x32x128xf16>) exponents(%{{.*}} : memref<4x32xi32>) {num_heads = 32 : i64}
  pattn.fold_query query(%q : memref<4x32x128xf16>) scales(%ks : memref<8x128xf32>) normalizer(%n : memref<1xf32>) outs(%qf : memref<4x32x128xf16>) exponents(%e : memref<4x32xi32>) {num_heads = 32 : i64}
  // CHECK: pattn.paged_attention query(%{{.*}}) key(%[[KT]] : {{.*}}) value({{.*}}) block_table({{.*}}) seq_lens({{.*}}) k_scale(%{{.*}} : memref<1xf32>) out_scale(%{{.*}} : memref<8x128xf32>) guard(%{{.*}} : memref<1xi32>) query_exponents(%{{.*}} : memref<4x32xi32>) outs(%{{.*}}) {backend = #pattn.backend<xqa>, guard_value = 1 : i32, num_heads = 32 : i64}
  pattn.paged_attention query(%qf : memref<4x32x128xf16>) key(%kt : !i4t) value(%vu : !i8u)
      block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>)
      k_scale(%n : memref<1xf32>) out_scale(%vs : memref<8x128xf32>) guard(%flag : memref<1xi32>)
      query_exponents(%e : memref<4x32xi32>)
      outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64, guard_value = 1 : i32, backend = #pattn.backend<xqa>}
  // CHECK: pattn.mla_decode {{.*}} {backend = #pattn.backend<portable>, num_heads = 16 : i64}
  pattn.mla_decode query(%mq : memref<4x16x576xbf16>) cache(%r : !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>)
      block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%mo : memref<4x16x512xbf16>)
      {num_heads = 16 : i64, backend = #pattn.backend<portable>}
  // A build for sm_80 and sm_90a: the warpgroup plan on sm_90a.
  // CHECK: pattn.mla_decode {{.*}} {backend = #pattn.backend<xqa>, chip_plans = {sm_90a = #pattn.xqa_mla_plan<kernel = wgmma, heads_per_block = 64, keys_per_tile = 32, shared_bytes = 226944, resident_blocks = [1], threads = 256, targets = [sm_90a]>}, num_heads = 64 : i64, plan = #pattn.xqa_mla_plan<heads_per_block = 16, keys_per_tile = 32, shared_bytes = 63680, resident_blocks = [3], targets = [sm_90a]>}
  pattn.mla_decode query(%wq : memref<4x64x576xbf16>) cache(%r : !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>)
      block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%wo : memref<4x64x512xbf16>)
      {num_heads = 64 : i64, backend = #pattn.backend<xqa>,
       plan = #pattn.xqa_mla_plan<heads_per_block = 16, keys_per_tile = 32, shared_bytes = 63680, resident_blocks = [3], targets = [sm_90a]>,
       chip_plans = {sm_90a = #pattn.xqa_mla_plan<kernel = wgmma, heads_per_block = 64, keys_per_tile = 32, shared_bytes = 226944, resident_blocks = [1], threads = 256, targets = [sm_90a]>}}
  return
}

// CHECK-LABEL: func.func private @backend_attrs()
// CHECK-SAME: a = #pattn.backend<xqa>, b = #pattn.backend<portable>
func.func private @backend_attrs() attributes {a = #pattn.backend<xqa>, b = #pattn.backend<portable>}

// -----

// Distinct page pools carved from one allocation (memref.view at byte
// offsets, subviews of disjoint pages, reinterpret_casts at disjoint
// offsets) may hold different cache types: only overlapping bytes must keep
// one type.
// CHECK-LABEL: func.func @pools_in_one_allocation
// CHECK-COUNT-2: pattn.bind_cache
func.func @pools_in_one_allocation(%all: memref<16384xi8>) {
  %c0 = arith.constant 0 : index
  %c8192 = arith.constant 8192 : index
  %lo = memref.view %all[%c0][] : memref<16384xi8> to memref<4x16x2x64xi8>
  %hi = memref.view %all[%c8192][] : memref<16384xi8> to memref<4x16x2x64xi8>
  %k = pattn.bind_cache storage(%lo : memref<4x16x2x64xi8>) : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
  %v = pattn.bind_cache storage(%hi : memref<4x16x2x64xi8>) : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f8e4m3, scale = tensor>
  return
}

// CHECK-LABEL: func.func @disjoint_views_of_one_pool
// CHECK-COUNT-5: pattn.bind_cache
!i8_cache = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
!e4_cache = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f8e4m3, scale = tensor>
func.func @disjoint_views_of_one_pool(%pages: memref<8x16x2x64xi8>, %dynamic: index) {
  // Pages 0-3 as i8.
  %lo = memref.subview %pages[0, 0, 0, 0] [4, 16, 2, 64] [1, 1, 1, 1] : memref<8x16x2x64xi8> to memref<4x16x2x64xi8, strided<[2048, 128, 64, 1]>>
  %lo_pages = memref.cast %lo : memref<4x16x2x64xi8, strided<[2048, 128, 64, 1]>> to memref<4x16x2x64xi8>
  %a = pattn.bind_cache storage(%lo_pages : memref<4x16x2x64xi8>) : !i8_cache
  // Pages 4-7 as e4m3, through a subview and through a reinterpret_cast.
  %hi = memref.subview %pages[4, 0, 0, 0] [4, 16, 2, 64] [1, 1, 1, 1] : memref<8x16x2x64xi8> to memref<4x16x2x64xi8, strided<[2048, 128, 64, 1], offset: 8192>>
  %hi_any = memref.cast %hi : memref<4x16x2x64xi8, strided<[2048, 128, 64, 1], offset: 8192>> to memref<4x16x2x64xi8, strided<[2048, 128, 64, 1], offset: ?>>
  %hi_pages = memref.cast %hi_any : memref<4x16x2x64xi8, strided<[2048, 128, 64, 1], offset: ?>> to memref<4x16x2x64xi8>
  %b = pattn.bind_cache storage(%hi_pages : memref<4x16x2x64xi8>) : !e4_cache
  %re = memref.reinterpret_cast %pages to offset: [8192], sizes: [4, 16, 2, 64], strides: [2048, 128, 64, 1] : memref<8x16x2x64xi8> to memref<4x16x2x64xi8, strided<[2048, 128, 64, 1], offset: 8192>>
  %re_any = memref.cast %re : memref<4x16x2x64xi8, strided<[2048, 128, 64, 1], offset: 8192>> to memref<4x16x2x64xi8, strided<[2048, 128, 64, 1], offset: ?>>
  %re_pages = memref.cast %re_any : memref<4x16x2x64xi8, strided<[2048, 128, 64, 1], offset: ?>> to memref<4x16x2x64xi8>
  %c = pattn.bind_cache storage(%re_pages : memref<4x16x2x64xi8>) : !e4_cache
  // Back at offset 0 (reinterpret_cast offsets are absolute): %a's bytes, as i8.
  %base = memref.reinterpret_cast %re to offset: [0], sizes: [4, 16, 2, 64], strides: [2048, 128, 64, 1] : memref<4x16x2x64xi8, strided<[2048, 128, 64, 1], offset: 8192>> to memref<4x16x2x64xi8>
  %d = pattn.bind_cache storage(%base : memref<4x16x2x64xi8>) : !i8_cache
  // A dynamic offset proves nothing: the caller's contract.
  %dyn = memref.subview %pages[%dynamic, 0, 0, 0] [4, 16, 2, 64] [1, 1, 1, 1] : memref<8x16x2x64xi8> to memref<4x16x2x64xi8, strided<[2048, 128, 64, 1], offset: ?>>
  %dyn_pages = memref.cast %dyn : memref<4x16x2x64xi8, strided<[2048, 128, 64, 1], offset: ?>> to memref<4x16x2x64xi8>
  %e = pattn.bind_cache storage(%dyn_pages : memref<4x16x2x64xi8>) : !e4_cache
  return
}

// -----

// CHECK-LABEL: func.func @rotary
// CHECK: pattn.rotary input(%{{.*}} : memref<?x48x128xf16>) cos(%{{.*}} : memref<4096x64xf16>) sin(%{{.*}} : memref<4096x64xf16>) seq_lens(%{{.*}} : memref<?xi32>) query_start(%{{.*}} : memref<?xi32>) norm_weight(%{{.*}} : memref<128xbf16>) outs(%{{.*}} : memref<?x8x128xf16>) {first_head = 32 : i64, norm_epsilon = 9.99999974E-6 : f32}
// CHECK: pattn.rotary input(%{{.*}} : memref<?x32x96xbf16>) cos(%{{.*}} : memref<?x16xf32>) sin(%{{.*}} : memref<?x16xf32>) positions(%{{.*}} : memref<?xi64>) outs(%{{.*}} : memref<?x32x96xbf16>) {interleaved = true, position_offset = 3 : i64}
func.func @rotary(%qkv: memref<?x48x128xf16>, %cos: memref<4096x64xf16>, %sin: memref<4096x64xf16>, %sl: memref<?xi32>, %qs: memref<?xi32>, %w: memref<128xbf16>, %k: memref<?x8x128xf16>,
                  %q: memref<?x32x96xbf16>, %c2: memref<?x16xf32>, %s2: memref<?x16xf32>, %pos: memref<?xi64>) {
  pattn.rotary input(%qkv : memref<?x48x128xf16>) cos(%cos : memref<4096x64xf16>) sin(%sin : memref<4096x64xf16>)
      seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>) norm_weight(%w : memref<128xbf16>)
      outs(%k : memref<?x8x128xf16>) {first_head = 32 : i64, norm_epsilon = 1.0e-05 : f32}
  pattn.rotary input(%q : memref<?x32x96xbf16>) cos(%c2 : memref<?x16xf32>) sin(%s2 : memref<?x16xf32>) positions(%pos : memref<?xi64>)
      outs(%q : memref<?x32x96xbf16>) {interleaved = true, position_offset = 3 : i64}
  return
}
