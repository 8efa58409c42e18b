module attributes {stable_mosaic.version = 11 : i64} {
  func.func @add_one_1d(%arg0: i32, %arg1: memref<128xf32, #tpu.memory_space<vmem>>, %arg2: memref<128xf32, #tpu.memory_space<vmem>>) attributes {dimension_semantics = [#tpu.dimension_semantics<parallel>], iteration_bounds = array<i64: 2>, scalar_prefetch = 0 : i64, scratch_operands = 0 : i64, tpu.core_type = #tpu.core_type<tc>, window_params = [{transform_indices = @transform_0, window_bounds = array<i64: 128>}, {transform_indices = @transform_1, window_bounds = array<i64: 128>}]} {
    %c0 = arith.constant 0 : index
    %0 = vector.load %arg1[%c0] : memref<128xf32, #tpu.memory_space<vmem>>, vector<128xf32>
    %c128_i32 = arith.constant 128 : i32
    %1 = arith.muli %arg0, %c128_i32 : i32
    %2 = "tpu.iota"() {dimensions = array<i32: 1>} : () -> vector<1x128xi32>
    %3 = vector.shape_cast %2 : vector<1x128xi32> to vector<128xi32>
    %4 = vector.broadcast %1 : i32 to vector<128xi32>
    %5 = arith.addi %3, %4 : vector<128xi32>
    %cst = arith.constant dense<200> : vector<128xi32>
    %6 = arith.cmpi slt, %5, %cst : vector<128xi32>
    %cst_0 = arith.constant dense<0.000000e+00> : vector<128xf32>
    %7 = arith.select %6, %0, %cst_0 : vector<128xi1>, vector<128xf32>
    %cst_1 = arith.constant dense<1.000000e+00> : vector<128xf32>
    %8 = arith.addf %7, %cst_1 : vector<128xf32>
    %c0_2 = arith.constant 0 : index
    "tpu.vector_store"(%8, %arg2, %c0_2) {add = false, operandSegmentSizes = array<i32: 1, 1, 1, 0>, strides = array<i32>} : (vector<128xf32>, memref<128xf32, #tpu.memory_space<vmem>>, index) -> ()
    return
  }
  func.func @transform_0(%arg0: i32) -> i32 {
    return %arg0 : i32
  }
  func.func @transform_1(%arg0: i32) -> i32 {
    return %arg0 : i32
  }
}
