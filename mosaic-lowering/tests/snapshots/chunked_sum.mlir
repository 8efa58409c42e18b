module attributes {stable_mosaic.version = 11 : i64} {
  func.func @chunked_sum(%arg0: i32, %arg1: memref<8x512xbf16, #tpu.memory_space<vmem>>, %arg2: memref<8x128xf32, #tpu.memory_space<vmem>>) attributes {dimension_semantics = [#tpu.dimension_semantics<arbitrary>], iteration_bounds = array<i64: 4>, scalar_prefetch = 0 : i64, scratch_operands = 0 : i64, tpu.core_type = #tpu.core_type<tc>, window_params = [{transform_indices = @transform_0, window_bounds = array<i64: 8, 512>}, {transform_indices = @transform_1, window_bounds = array<i64: 8, 128>}]} {
    %cst = arith.constant dense<0.000000e+00> : vector<8x128xf32>
    %c0_i32 = arith.constant 0 : i32
    %c4_i32 = arith.constant 4 : i32
    %c1_i32 = arith.constant 1 : i32
    %0 = scf.for %arg3 = %c0_i32 to %c4_i32 step %c1_i32 iter_args(%arg4 = %cst) -> (vector<8x128xf32>)  : i32 {
      %c128_i32 = arith.constant 128 : i32
      %3 = arith.muli %arg3, %c128_i32 : i32
      %c0_2 = arith.constant 0 : index
      %4 = arith.index_cast %3 : i32 to index
      %5 = vector.load %arg1[%c0_2, %4] : memref<8x512xbf16, #tpu.memory_space<vmem>>, vector<8x128xbf16>
      %6 = arith.extf %5 : vector<8x128xbf16> to vector<8x128xf32>
      %7 = arith.addf %arg4, %6 : vector<8x128xf32>
      scf.yield %7 : vector<8x128xf32>
    }
    %c0_i32_0 = arith.constant 0 : i32
    %1 = arith.cmpi eq, %arg0, %c0_i32_0 : i32
    %2 = scf.if %1 -> (vector<8x128xf32>) {
      %cst_2 = arith.constant dense<2.000000e+00> : vector<8x128xf32>
      %3 = arith.mulf %0, %cst_2 : vector<8x128xf32>
      scf.yield %3 : vector<8x128xf32>
    } else {
      scf.yield %0 : vector<8x128xf32>
    }
    %c0 = arith.constant 0 : index
    %c0_1 = arith.constant 0 : index
    "tpu.vector_store"(%2, %arg2, %c0, %c0_1) {add = false, operandSegmentSizes = array<i32: 1, 1, 2, 0>, strides = array<i32>} : (vector<8x128xf32>, memref<8x128xf32, #tpu.memory_space<vmem>>, index, index) -> ()
    return
  }
  func.func @transform_0(%arg0: i32) -> (i32, i32) {
    %c0_i32 = arith.constant 0 : i32
    return %arg0, %c0_i32 : i32, i32
  }
  func.func @transform_1(%arg0: i32) -> (i32, i32) {
    %c0_i32 = arith.constant 0 : i32
    return %arg0, %c0_i32 : i32, i32
  }
}
