module attributes {stable_mosaic.version = 11 : i64} {
  func.func @accumulate(%arg0: i32, %arg1: i32, %arg2: memref<8x128xf32, #tpu.memory_space<vmem>>, %arg3: memref<8x128xf32, #tpu.memory_space<vmem>>, %arg4: memref<8x128xf32, #tpu.memory_space<vmem>>) attributes {dimension_semantics = [#tpu.dimension_semantics<parallel>, #tpu.dimension_semantics<arbitrary>], iteration_bounds = array<i64: 4, 3>, scalar_prefetch = 0 : i64, scratch_operands = 0 : i64, tpu.core_type = #tpu.core_type<tc>, window_params = [{transform_indices = @transform_0, window_bounds = array<i64: 8, 128>}, {transform_indices = @transform_1, window_bounds = array<i64: 8, 128>}, {transform_indices = @transform_2, window_bounds = array<i64: 8, 128>}]} {
    %c0_i32 = arith.constant 0 : i32
    %c1_i32 = arith.constant 1 : i32
    %0 = arith.cmpi eq, %arg1, %c0_i32 : i32
    %c2_i32 = arith.constant 2 : i32
    %1 = arith.subi %arg1, %c1_i32 : i32
    %2 = arith.select %0, %c2_i32, %1 : i32
    %3 = arith.cmpi eq, %arg0, %c0_i32 : i32
    %c3_i32 = arith.constant 3 : i32
    %4 = arith.subi %arg0, %c1_i32 : i32
    %5 = arith.select %3, %c3_i32, %4 : i32
    %6 = arith.select %0, %5, %arg0 : i32
    %7 = arith.andi %0, %3 : i1
    %c0_i32_0 = arith.constant 0 : i32
    %c0_i32_1 = arith.constant 0 : i32
    %8 = arith.cmpi ne, %arg0, %6 : i32
    %9 = arith.ori %7, %8 : i1
    %10 = arith.cmpi ne, %c0_i32_0, %c0_i32_1 : i32
    %11 = arith.ori %9, %10 : i1
    scf.if %11 {
      %c0_12 = arith.constant 0 : index
      %c0_13 = arith.constant 0 : index
      %27 = vector.load %arg3[%c0_12, %c0_13] : memref<8x128xf32, #tpu.memory_space<vmem>>, vector<8x128xf32>
      "tpu.vector_store"(%27, %arg4, %c0_12, %c0_13) {add = false, operandSegmentSizes = array<i32: 1, 1, 2, 0>, strides = array<i32>} : (vector<8x128xf32>, memref<8x128xf32, #tpu.memory_space<vmem>>, index, index) -> ()
    } else {
    }
    %c0 = arith.constant 0 : index
    %c0_2 = arith.constant 0 : index
    %12 = vector.load %arg4[%c0, %c0_2] : memref<8x128xf32, #tpu.memory_space<vmem>>, vector<8x128xf32>
    %c0_i32_3 = arith.constant 0 : i32
    %c8_i32 = arith.constant 8 : i32
    %13 = arith.muli %arg0, %c8_i32 : i32
    %14 = "tpu.iota"() {dimensions = array<i32: 0>} : () -> vector<8x128xi32>
    %15 = vector.broadcast %13 : i32 to vector<8x128xi32>
    %16 = arith.addi %14, %15 : vector<8x128xi32>
    %cst = arith.constant dense<30> : vector<8x128xi32>
    %17 = arith.cmpi slt, %16, %cst : vector<8x128xi32>
    %cst_4 = arith.constant dense<0.000000e+00> : vector<8x128xf32>
    %18 = arith.select %17, %12, %cst_4 : vector<8x128xi1>, vector<8x128xf32>
    %c0_5 = arith.constant 0 : index
    %c0_6 = arith.constant 0 : index
    %19 = vector.load %arg2[%c0_5, %c0_6] : memref<8x128xf32, #tpu.memory_space<vmem>>, vector<8x128xf32>
    %c8_i32_7 = arith.constant 8 : i32
    %20 = arith.muli %arg0, %c8_i32_7 : i32
    %21 = "tpu.iota"() {dimensions = array<i32: 0>} : () -> vector<8x128xi32>
    %22 = vector.broadcast %20 : i32 to vector<8x128xi32>
    %23 = arith.addi %21, %22 : vector<8x128xi32>
    %cst_8 = arith.constant dense<30> : vector<8x128xi32>
    %24 = arith.cmpi slt, %23, %cst_8 : vector<8x128xi32>
    %cst_9 = arith.constant dense<0.000000e+00> : vector<8x128xf32>
    %25 = arith.select %24, %19, %cst_9 : vector<8x128xi1>, vector<8x128xf32>
    %26 = arith.addf %18, %25 : vector<8x128xf32>
    %c0_10 = arith.constant 0 : index
    %c0_11 = arith.constant 0 : index
    "tpu.vector_store"(%26, %arg4, %c0_10, %c0_11) {add = false, operandSegmentSizes = array<i32: 1, 1, 2, 0>, strides = array<i32>} : (vector<8x128xf32>, memref<8x128xf32, #tpu.memory_space<vmem>>, index, index) -> ()
    return
  }
  func.func @transform_0(%arg0: i32, %arg1: i32) -> (i32, i32) {
    return %arg0, %arg1 : i32, i32
  }
  func.func @transform_1(%arg0: i32, %arg1: i32) -> (i32, i32) {
    %c0_i32 = arith.constant 0 : i32
    return %arg0, %c0_i32 : i32, i32
  }
  func.func @transform_2(%arg0: i32, %arg1: i32) -> (i32, i32) {
    %c0_i32 = arith.constant 0 : i32
    return %arg0, %c0_i32 : i32, i32
  }
}
