module attributes {stable_mosaic.version = 11 : i64} {
  func.func @iota_1d(%arg0: memref<256xf32, #tpu.memory_space<vmem>>, %arg1: memref<300xf32, #tpu.memory_space<vmem>>) attributes {dimension_semantics = [], scalar_prefetch = 0 : i64, scratch_operands = 0 : i64, tpu.core_type = #tpu.core_type<tc>} {
    %0 = "tpu.iota"() {dimensions = array<i32: 0>} : () -> vector<2x128xi32>
    %cst = arith.constant dense<128> : vector<2x128xi32>
    %1 = arith.muli %0, %cst : vector<2x128xi32>
    %2 = "tpu.iota"() {dimensions = array<i32: 1>} : () -> vector<2x128xi32>
    %3 = arith.addi %1, %2 : vector<2x128xi32>
    %4 = vector.shape_cast %3 : vector<2x128xi32> to vector<256xi32>
    %5 = arith.sitofp %4 : vector<256xi32> to vector<256xf32>
    %c0 = arith.constant 0 : index
    "tpu.vector_store"(%5, %arg0, %c0) {add = false, operandSegmentSizes = array<i32: 1, 1, 1, 0>, strides = array<i32>} : (vector<256xf32>, memref<256xf32, #tpu.memory_space<vmem>>, index) -> ()
    %6 = "tpu.iota"() {dimensions = array<i32: 1>} : () -> vector<1x300xi32>
    %7 = vector.shape_cast %6 : vector<1x300xi32> to vector<300xi32>
    %8 = arith.sitofp %7 : vector<300xi32> to vector<300xf32>
    %c0_0 = arith.constant 0 : index
    "tpu.vector_store"(%8, %arg1, %c0_0) {add = false, operandSegmentSizes = array<i32: 1, 1, 1, 0>, strides = array<i32>} : (vector<300xf32>, memref<300xf32, #tpu.memory_space<vmem>>, index) -> ()
    return
  }
}
