module attributes {stable_mosaic.version = 11 : i64} {
  func.func @matmul(%arg0: i32, %arg1: i32, %arg2: i32, %arg3: memref<128x128xbf16, #tpu.memory_space<vmem>>, %arg4: memref<128x128xbf16, #tpu.memory_space<vmem>>, %arg5: memref<128x128xbf16, #tpu.memory_space<vmem>>, %arg6: memref<128x128xf32, #tpu.memory_space<vmem>>) attributes {dimension_semantics = [#tpu.dimension_semantics<parallel>, #tpu.dimension_semantics<parallel>, #tpu.dimension_semantics<arbitrary>], iteration_bounds = array<i64: 2, 3, 4>, scalar_prefetch = 0 : i64, scratch_operands = 1 : i64, tpu.core_type = #tpu.core_type<tc>, window_params = [{transform_indices = @transform_0, window_bounds = array<i64: 128, 128>}, {transform_indices = @transform_1, window_bounds = array<i64: 128, 128>}, {transform_indices = @transform_2, window_bounds = array<i64: 128, 128>}]} {
    %c0_i32 = arith.constant 0 : i32
    %0 = arith.cmpi eq, %arg2, %c0_i32 : i32
    scf.if %0 {
      %cst_7 = arith.constant dense<0.000000e+00> : vector<128x128xf32>
      %c0_8 = arith.constant 0 : index
      %c0_9 = arith.constant 0 : index
      "tpu.vector_store"(%cst_7, %arg6, %c0_8, %c0_9) {add = false, operandSegmentSizes = array<i32: 1, 1, 2, 0>, strides = array<i32>} : (vector<128x128xf32>, memref<128x128xf32, #tpu.memory_space<vmem>>, index, index) -> ()
    } else {
    }
    %c0 = arith.constant 0 : index
    %c0_0 = arith.constant 0 : index
    %1 = vector.load %arg3[%c0, %c0_0] : memref<128x128xbf16, #tpu.memory_space<vmem>>, vector<128x128xbf16>
    %c0_1 = arith.constant 0 : index
    %c0_2 = arith.constant 0 : index
    %2 = vector.load %arg4[%c0_1, %c0_2] : memref<128x128xbf16, #tpu.memory_space<vmem>>, vector<128x128xbf16>
    %cst = arith.constant dense<0.000000e+00> : vector<128x128xf32>
    %3 = "tpu.matmul"(%1, %2, %cst) {dimension_numbers = #tpu.dot_dimension_numbers<[1], [0], [0], [1], [0, 0, 1, 1], [], []>, transpose_lhs_hint = false} : (vector<128x128xbf16>, vector<128x128xbf16>, vector<128x128xf32>) -> vector<128x128xf32>
    %c0_3 = arith.constant 0 : index
    %c0_4 = arith.constant 0 : index
    %4 = vector.load %arg6[%c0_3, %c0_4] : memref<128x128xf32, #tpu.memory_space<vmem>>, vector<128x128xf32>
    %5 = arith.addf %4, %3 : vector<128x128xf32>
    %c0_5 = arith.constant 0 : index
    %c0_6 = arith.constant 0 : index
    "tpu.vector_store"(%5, %arg6, %c0_5, %c0_6) {add = false, operandSegmentSizes = array<i32: 1, 1, 2, 0>, strides = array<i32>} : (vector<128x128xf32>, memref<128x128xf32, #tpu.memory_space<vmem>>, index, index) -> ()
    %c4_i32 = arith.constant 4 : i32
    %c1_i32 = arith.constant 1 : i32
    %6 = arith.subi %c4_i32, %c1_i32 : i32
    %7 = arith.cmpi eq, %arg2, %6 : i32
    scf.if %7 {
      %c0_7 = arith.constant 0 : index
      %c0_8 = arith.constant 0 : index
      %8 = vector.load %arg6[%c0_7, %c0_8] : memref<128x128xf32, #tpu.memory_space<vmem>>, vector<128x128xf32>
      %9 = arith.truncf %8 : vector<128x128xf32> to vector<128x128xbf16>
      %c0_9 = arith.constant 0 : index
      %c0_10 = arith.constant 0 : index
      "tpu.vector_store"(%9, %arg5, %c0_9, %c0_10) {add = false, operandSegmentSizes = array<i32: 1, 1, 2, 0>, strides = array<i32>} : (vector<128x128xbf16>, memref<128x128xbf16, #tpu.memory_space<vmem>>, index, index) -> ()
    } else {
    }
    return
  }
  func.func @transform_0(%arg0: i32, %arg1: i32, %arg2: i32) -> (i32, i32) {
    return %arg0, %arg2 : i32, i32
  }
  func.func @transform_1(%arg0: i32, %arg1: i32, %arg2: i32) -> (i32, i32) {
    return %arg2, %arg1 : i32, i32
  }
  func.func @transform_2(%arg0: i32, %arg1: i32, %arg2: i32) -> (i32, i32) {
    return %arg0, %arg1 : i32, i32
  }
}
