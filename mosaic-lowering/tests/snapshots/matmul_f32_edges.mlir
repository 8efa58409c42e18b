module attributes {stable_mosaic.version = 11 : i64} {
  func.func @matmul(%arg0: i32, %arg1: i32, %arg2: i32, %arg3: memref<128x128xf32, #tpu.memory_space<vmem>>, %arg4: memref<128x128xf32, #tpu.memory_space<vmem>>, %arg5: memref<128x128xf32, #tpu.memory_space<vmem>>, %arg6: memref<128x128xf32, #tpu.memory_space<vmem>>) attributes {dimension_semantics = [#tpu.dimension_semantics<parallel>, #tpu.dimension_semantics<parallel>, #tpu.dimension_semantics<arbitrary>], iteration_bounds = array<i64: 3, 3, 2>, scalar_prefetch = 0 : i64, scratch_operands = 1 : i64, tpu.core_type = #tpu.core_type<tc>, window_params = [{transform_indices = @transform_0, window_bounds = array<i64: 128, 128>}, {transform_indices = @transform_1, window_bounds = array<i64: 128, 128>}, {transform_indices = @transform_2, window_bounds = array<i64: 128, 128>}]} {
    %c0_i32 = arith.constant 0 : i32
    %0 = arith.cmpi eq, %arg2, %c0_i32 : i32
    scf.if %0 {
      %cst_16 = arith.constant dense<0.000000e+00> : vector<128x128xf32>
      %c0_17 = arith.constant 0 : index
      %c0_18 = arith.constant 0 : index
      "tpu.vector_store"(%cst_16, %arg6, %c0_17, %c0_18) {add = false, operandSegmentSizes = array<i32: 1, 1, 2, 0>, strides = array<i32>} : (vector<128x128xf32>, memref<128x128xf32, #tpu.memory_space<vmem>>, index, index) -> ()
    } else {
    }
    %c0 = arith.constant 0 : index
    %c0_0 = arith.constant 0 : index
    %1 = vector.load %arg3[%c0, %c0_0] : memref<128x128xf32, #tpu.memory_space<vmem>>, vector<128x128xf32>
    %c128_i32 = arith.constant 128 : i32
    %2 = arith.muli %arg0, %c128_i32 : i32
    %3 = "tpu.iota"() {dimensions = array<i32: 0>} : () -> vector<128x128xi32>
    %4 = vector.broadcast %2 : i32 to vector<128x128xi32>
    %5 = arith.addi %3, %4 : vector<128x128xi32>
    %cst = arith.constant dense<300> : vector<128x128xi32>
    %6 = arith.cmpi slt, %5, %cst : vector<128x128xi32>
    %c128_i32_1 = arith.constant 128 : i32
    %7 = arith.muli %arg2, %c128_i32_1 : i32
    %8 = "tpu.iota"() {dimensions = array<i32: 1>} : () -> vector<128x128xi32>
    %9 = vector.broadcast %7 : i32 to vector<128x128xi32>
    %10 = arith.addi %8, %9 : vector<128x128xi32>
    %cst_2 = arith.constant dense<200> : vector<128x128xi32>
    %11 = arith.cmpi slt, %10, %cst_2 : vector<128x128xi32>
    %12 = arith.andi %6, %11 : vector<128x128xi1>
    %cst_3 = arith.constant dense<0.000000e+00> : vector<128x128xf32>
    %13 = arith.select %12, %1, %cst_3 : vector<128x128xi1>, vector<128x128xf32>
    %c0_4 = arith.constant 0 : index
    %c0_5 = arith.constant 0 : index
    %14 = vector.load %arg4[%c0_4, %c0_5] : memref<128x128xf32, #tpu.memory_space<vmem>>, vector<128x128xf32>
    %c128_i32_6 = arith.constant 128 : i32
    %15 = arith.muli %arg2, %c128_i32_6 : i32
    %16 = "tpu.iota"() {dimensions = array<i32: 0>} : () -> vector<128x128xi32>
    %17 = vector.broadcast %15 : i32 to vector<128x128xi32>
    %18 = arith.addi %16, %17 : vector<128x128xi32>
    %cst_7 = arith.constant dense<200> : vector<128x128xi32>
    %19 = arith.cmpi slt, %18, %cst_7 : vector<128x128xi32>
    %c128_i32_8 = arith.constant 128 : i32
    %20 = arith.muli %arg1, %c128_i32_8 : i32
    %21 = "tpu.iota"() {dimensions = array<i32: 1>} : () -> vector<128x128xi32>
    %22 = vector.broadcast %20 : i32 to vector<128x128xi32>
    %23 = arith.addi %21, %22 : vector<128x128xi32>
    %cst_9 = arith.constant dense<260> : vector<128x128xi32>
    %24 = arith.cmpi slt, %23, %cst_9 : vector<128x128xi32>
    %25 = arith.andi %19, %24 : vector<128x128xi1>
    %cst_10 = arith.constant dense<0.000000e+00> : vector<128x128xf32>
    %26 = arith.select %25, %14, %cst_10 : vector<128x128xi1>, vector<128x128xf32>
    %cst_11 = arith.constant dense<0.000000e+00> : vector<128x128xf32>
    %27 = "tpu.matmul"(%13, %26, %cst_11) {dimension_numbers = #tpu.dot_dimension_numbers<[1], [0], [0], [1], [0, 0, 1, 1], [], []>, transpose_lhs_hint = false} : (vector<128x128xf32>, vector<128x128xf32>, vector<128x128xf32>) -> vector<128x128xf32>
    %c0_12 = arith.constant 0 : index
    %c0_13 = arith.constant 0 : index
    %28 = vector.load %arg6[%c0_12, %c0_13] : memref<128x128xf32, #tpu.memory_space<vmem>>, vector<128x128xf32>
    %29 = arith.addf %28, %27 : vector<128x128xf32>
    %c0_14 = arith.constant 0 : index
    %c0_15 = arith.constant 0 : index
    "tpu.vector_store"(%29, %arg6, %c0_14, %c0_15) {add = false, operandSegmentSizes = array<i32: 1, 1, 2, 0>, strides = array<i32>} : (vector<128x128xf32>, memref<128x128xf32, #tpu.memory_space<vmem>>, index, index) -> ()
    %c2_i32 = arith.constant 2 : i32
    %c1_i32 = arith.constant 1 : i32
    %30 = arith.subi %c2_i32, %c1_i32 : i32
    %31 = arith.cmpi eq, %arg2, %30 : i32
    scf.if %31 {
      %c0_16 = arith.constant 0 : index
      %c0_17 = arith.constant 0 : index
      %32 = vector.load %arg6[%c0_16, %c0_17] : memref<128x128xf32, #tpu.memory_space<vmem>>, vector<128x128xf32>
      %c0_18 = arith.constant 0 : index
      %c0_19 = arith.constant 0 : index
      "tpu.vector_store"(%32, %arg5, %c0_18, %c0_19) {add = false, operandSegmentSizes = array<i32: 1, 1, 2, 0>, strides = array<i32>} : (vector<128x128xf32>, memref<128x128xf32, #tpu.memory_space<vmem>>, index, index) -> ()
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
