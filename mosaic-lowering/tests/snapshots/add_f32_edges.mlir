module attributes {stable_mosaic.version = 11 : i64} {
  func.func @add(%arg0: i32, %arg1: i32, %arg2: memref<8x128xf32, #tpu.memory_space<vmem>>, %arg3: memref<8x128xf32, #tpu.memory_space<vmem>>, %arg4: memref<8x128xf32, #tpu.memory_space<vmem>>) attributes {dimension_semantics = [#tpu.dimension_semantics<parallel>, #tpu.dimension_semantics<parallel>], iteration_bounds = array<i64: 4, 2>, scalar_prefetch = 0 : i64, scratch_operands = 0 : i64, tpu.core_type = #tpu.core_type<tc>, window_params = [{transform_indices = @transform_0, window_bounds = array<i64: 8, 128>}, {transform_indices = @transform_1, window_bounds = array<i64: 8, 128>}, {transform_indices = @transform_2, window_bounds = array<i64: 8, 128>}]} {
    %c0 = arith.constant 0 : index
    %c0_0 = arith.constant 0 : index
    %0 = vector.load %arg2[%c0, %c0_0] : memref<8x128xf32, #tpu.memory_space<vmem>>, vector<8x128xf32>
    %c8_i32 = arith.constant 8 : i32
    %1 = arith.muli %arg0, %c8_i32 : i32
    %2 = "tpu.iota"() {dimensions = array<i32: 0>} : () -> vector<8x128xi32>
    %3 = vector.broadcast %1 : i32 to vector<8x128xi32>
    %4 = arith.addi %2, %3 : vector<8x128xi32>
    %cst = arith.constant dense<30> : vector<8x128xi32>
    %5 = arith.cmpi slt, %4, %cst : vector<8x128xi32>
    %c128_i32 = arith.constant 128 : i32
    %6 = arith.muli %arg1, %c128_i32 : i32
    %7 = "tpu.iota"() {dimensions = array<i32: 1>} : () -> vector<8x128xi32>
    %8 = vector.broadcast %6 : i32 to vector<8x128xi32>
    %9 = arith.addi %7, %8 : vector<8x128xi32>
    %cst_1 = arith.constant dense<200> : vector<8x128xi32>
    %10 = arith.cmpi slt, %9, %cst_1 : vector<8x128xi32>
    %11 = arith.andi %5, %10 : vector<8x128xi1>
    %cst_2 = arith.constant dense<0.000000e+00> : vector<8x128xf32>
    %12 = arith.select %11, %0, %cst_2 : vector<8x128xi1>, vector<8x128xf32>
    %c0_3 = arith.constant 0 : index
    %c0_4 = arith.constant 0 : index
    %13 = vector.load %arg3[%c0_3, %c0_4] : memref<8x128xf32, #tpu.memory_space<vmem>>, vector<8x128xf32>
    %c8_i32_5 = arith.constant 8 : i32
    %14 = arith.muli %arg0, %c8_i32_5 : i32
    %15 = "tpu.iota"() {dimensions = array<i32: 0>} : () -> vector<8x128xi32>
    %16 = vector.broadcast %14 : i32 to vector<8x128xi32>
    %17 = arith.addi %15, %16 : vector<8x128xi32>
    %cst_6 = arith.constant dense<30> : vector<8x128xi32>
    %18 = arith.cmpi slt, %17, %cst_6 : vector<8x128xi32>
    %c128_i32_7 = arith.constant 128 : i32
    %19 = arith.muli %arg1, %c128_i32_7 : i32
    %20 = "tpu.iota"() {dimensions = array<i32: 1>} : () -> vector<8x128xi32>
    %21 = vector.broadcast %19 : i32 to vector<8x128xi32>
    %22 = arith.addi %20, %21 : vector<8x128xi32>
    %cst_8 = arith.constant dense<200> : vector<8x128xi32>
    %23 = arith.cmpi slt, %22, %cst_8 : vector<8x128xi32>
    %24 = arith.andi %18, %23 : vector<8x128xi1>
    %cst_9 = arith.constant dense<0.000000e+00> : vector<8x128xf32>
    %25 = arith.select %24, %13, %cst_9 : vector<8x128xi1>, vector<8x128xf32>
    %26 = arith.addf %12, %25 : vector<8x128xf32>
    %c0_10 = arith.constant 0 : index
    %c0_11 = arith.constant 0 : index
    "tpu.vector_store"(%26, %arg4, %c0_10, %c0_11) {add = false, operandSegmentSizes = array<i32: 1, 1, 2, 0>, strides = array<i32>} : (vector<8x128xf32>, memref<8x128xf32, #tpu.memory_space<vmem>>, index, index) -> ()
    return
  }
  func.func @transform_0(%arg0: i32, %arg1: i32) -> (i32, i32) {
    return %arg0, %arg1 : i32, i32
  }
  func.func @transform_1(%arg0: i32, %arg1: i32) -> (i32, i32) {
    return %arg0, %arg1 : i32, i32
  }
  func.func @transform_2(%arg0: i32, %arg1: i32) -> (i32, i32) {
    return %arg0, %arg1 : i32, i32
  }
}
