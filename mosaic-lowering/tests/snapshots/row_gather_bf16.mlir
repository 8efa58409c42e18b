module attributes {stable_mosaic.version = 11 : i64} {
  func.func @row_gather(%arg0: i32, %arg1: i32, %arg2: memref<64xi32, #tpu.memory_space<smem>>, %arg3: memref<1x1x128xbf16, #tpu.memory_space<vmem>>, %arg4: memref<1x1x128xbf16, #tpu.memory_space<vmem>>) attributes {dimension_semantics = [#tpu.dimension_semantics<parallel>, #tpu.dimension_semantics<parallel>], iteration_bounds = array<i64: 64, 2>, scalar_prefetch = 1 : i64, scratch_operands = 0 : i64, tpu.core_type = #tpu.core_type<tc>, window_params = [{transform_indices = @transform_0, window_bounds = array<i64: 1, 1, 128>}, {transform_indices = @transform_1, window_bounds = array<i64: 1, 1, 128>}]} {
    %c0 = arith.constant 0 : index
    %c0_0 = arith.constant 0 : index
    %c0_1 = arith.constant 0 : index
    %0 = vector.load %arg3[%c0, %c0_0, %c0_1] : memref<1x1x128xbf16, #tpu.memory_space<vmem>>, vector<1x1x128xbf16>
    %1 = vector.shape_cast %0 : vector<1x1x128xbf16> to vector<128xbf16>
    %c0_2 = arith.constant 0 : index
    %c0_3 = arith.constant 0 : index
    %c0_4 = arith.constant 0 : index
    %2 = vector.shape_cast %1 : vector<128xbf16> to vector<1x1x128xbf16>
    "tpu.vector_store"(%2, %arg4, %c0_2, %c0_3, %c0_4) {add = false, operandSegmentSizes = array<i32: 1, 1, 3, 0>, strides = array<i32>} : (vector<1x1x128xbf16>, memref<1x1x128xbf16, #tpu.memory_space<vmem>>, index, index, index) -> ()
    return
  }
  func.func @transform_0(%arg0: i32, %arg1: i32, %arg2: memref<64xi32, #tpu.memory_space<smem>>) -> (i32, i32, i32) {
    %0 = arith.index_cast %arg0 : i32 to index
    %1 = memref.load %arg2[%0] : memref<64xi32, #tpu.memory_space<smem>>
    %c0_i32 = arith.constant 0 : i32
    return %1, %c0_i32, %arg1 : i32, i32, i32
  }
  func.func @transform_1(%arg0: i32, %arg1: i32, %arg2: memref<64xi32, #tpu.memory_space<smem>>) -> (i32, i32, i32) {
    %c0_i32 = arith.constant 0 : i32
    return %arg0, %c0_i32, %arg1 : i32, i32, i32
  }
}
