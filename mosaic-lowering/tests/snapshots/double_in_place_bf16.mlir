module attributes {stable_mosaic.version = 11 : i64} {
  func.func @double_in_place(%arg0: memref<16x256xbf16, #tpu.memory_space<vmem>>, %arg1: memref<16x256xbf16, #tpu.memory_space<vmem>>) attributes {dimension_semantics = [], scalar_prefetch = 0 : i64, scratch_operands = 0 : i64, tpu.core_type = #tpu.core_type<tc>} {
    %c0 = arith.constant 0 : index
    %c0_0 = arith.constant 0 : index
    %0 = vector.load %arg0[%c0, %c0_0] : memref<16x256xbf16, #tpu.memory_space<vmem>>, vector<16x256xbf16>
    "tpu.vector_store"(%0, %arg1, %c0, %c0_0) {add = false, operandSegmentSizes = array<i32: 1, 1, 2, 0>, strides = array<i32>} : (vector<16x256xbf16>, memref<16x256xbf16, #tpu.memory_space<vmem>>, index, index) -> ()
    %c0_1 = arith.constant 0 : index
    %c0_2 = arith.constant 0 : index
    %1 = vector.load %arg1[%c0_1, %c0_2] : memref<16x256xbf16, #tpu.memory_space<vmem>>, vector<16x256xbf16>
    %cst = arith.constant dense<2.000000e+00> : vector<16x256xbf16>
    %2 = arith.mulf %1, %cst : vector<16x256xbf16>
    %c0_3 = arith.constant 0 : index
    %c0_4 = arith.constant 0 : index
    "tpu.vector_store"(%2, %arg1, %c0_3, %c0_4) {add = false, operandSegmentSizes = array<i32: 1, 1, 2, 0>, strides = array<i32>} : (vector<16x256xbf16>, memref<16x256xbf16, #tpu.memory_space<vmem>>, index, index) -> ()
    return
  }
}
