module attributes {stable_mosaic.version = 11 : i64} {
  func.func @add_vectors(%arg0: i32, %arg1: memref<1024xf32, #tpu.memory_space<vmem>>, %arg2: memref<1024xf32, #tpu.memory_space<vmem>>, %arg3: memref<1024xf32, #tpu.memory_space<vmem>>) attributes {dimension_semantics = [#tpu.dimension_semantics<parallel>], iteration_bounds = array<i64: 4>, scalar_prefetch = 0 : i64, scratch_operands = 0 : i64, tpu.core_type = #tpu.core_type<tc>, window_params = [{transform_indices = @transform_0, window_bounds = array<i64: 1024>}, {transform_indices = @transform_1, window_bounds = array<i64: 1024>}, {transform_indices = @transform_2, window_bounds = array<i64: 1024>}]} {
    %c0 = arith.constant 0 : index
    %0 = vector.load %arg1[%c0] : memref<1024xf32, #tpu.memory_space<vmem>>, vector<1024xf32>
    %c0_0 = arith.constant 0 : index
    %1 = vector.load %arg2[%c0_0] : memref<1024xf32, #tpu.memory_space<vmem>>, vector<1024xf32>
    %2 = arith.addf %0, %1 : vector<1024xf32>
    %c0_1 = arith.constant 0 : index
    "tpu.vector_store"(%2, %arg3, %c0_1) {add = false, operandSegmentSizes = array<i32: 1, 1, 1, 0>, strides = array<i32>} : (vector<1024xf32>, memref<1024xf32, #tpu.memory_space<vmem>>, index) -> ()
    return
  }
  func.func @transform_0(%arg0: i32) -> i32 {
    return %arg0 : i32
  }
  func.func @transform_1(%arg0: i32) -> i32 {
    return %arg0 : i32
  }
  func.func @transform_2(%arg0: i32) -> i32 {
    return %arg0 : i32
  }
}
