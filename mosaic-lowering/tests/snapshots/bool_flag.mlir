module attributes {stable_mosaic.version = 11 : i64} {
  func.func @bool_flag(%arg0: i32, %arg1: memref<8x128xf32, #tpu.memory_space<vmem>>, %arg2: memref<8x128xf32, #tpu.memory_space<vmem>>) attributes {dimension_semantics = [#tpu.dimension_semantics<parallel>], iteration_bounds = array<i64: 2>, scalar_prefetch = 0 : i64, scratch_operands = 0 : i64, tpu.core_type = #tpu.core_type<tc>, window_params = [{transform_indices = @transform_0, window_bounds = array<i64: 8, 128>}, {transform_indices = @transform_1, window_bounds = array<i64: 8, 128>}]} {
    %c0 = arith.constant 0 : index
    %c0_0 = arith.constant 0 : index
    %0 = vector.load %arg1[%c0, %c0_0] : memref<8x128xf32, #tpu.memory_space<vmem>>, vector<8x128xf32>
    %true = arith.constant true
    %1 = scf.if %true -> (vector<8x128xf32>) {
      %cst = arith.constant dense<2.000000e+00> : vector<8x128xf32>
      %5 = arith.mulf %0, %cst : vector<8x128xf32>
      scf.yield %5 : vector<8x128xf32>
    } else {
      scf.yield %0 : vector<8x128xf32>
    }
    %true_1 = arith.constant true
    %true_2 = arith.constant true
    %2 = arith.xori %true_1, %true_2 : i1
    %3 = vector.broadcast %2 : i1 to vector<8x128xi1>
    %4 = arith.select %3, %0, %1 : vector<8x128xi1>, vector<8x128xf32>
    %c0_3 = arith.constant 0 : index
    %c0_4 = arith.constant 0 : index
    "tpu.vector_store"(%4, %arg2, %c0_3, %c0_4) {add = false, operandSegmentSizes = array<i32: 1, 1, 2, 0>, strides = array<i32>} : (vector<8x128xf32>, memref<8x128xf32, #tpu.memory_space<vmem>>, index, index) -> ()
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
