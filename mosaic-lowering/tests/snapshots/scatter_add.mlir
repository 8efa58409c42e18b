module attributes {stable_mosaic.version = 11 : i64} {
  func.func @scatter_add(%arg0: i32, %arg1: i32, %arg2: memref<40xi32, #tpu.memory_space<smem>>, %arg3: memref<1x1x128xf32, #tpu.memory_space<vmem>>, %arg4: memref<1x1x128xf32, #tpu.memory_space<vmem>>, %arg5: memref<1x1x128xf32, #tpu.memory_space<vmem>>) attributes {dimension_semantics = [#tpu.dimension_semantics<parallel>, #tpu.dimension_semantics<arbitrary>], iteration_bounds = array<i64: 2, 40>, scalar_prefetch = 1 : i64, scratch_operands = 0 : i64, tpu.core_type = #tpu.core_type<tc>, window_params = [{transform_indices = @transform_0, window_bounds = array<i64: 1, 1, 128>}, {transform_indices = @transform_1, window_bounds = array<i64: 1, 1, 128>}, {transform_indices = @transform_2, window_bounds = array<i64: 1, 1, 128>}]} {
    %c0_i32 = arith.constant 0 : i32
    %c1_i32 = arith.constant 1 : i32
    %0 = arith.cmpi eq, %arg1, %c0_i32 : i32
    %c39_i32 = arith.constant 39 : i32
    %1 = arith.subi %arg1, %c1_i32 : i32
    %2 = arith.select %0, %c39_i32, %1 : i32
    %3 = arith.cmpi eq, %arg0, %c0_i32 : i32
    %c1_i32_0 = arith.constant 1 : i32
    %4 = arith.subi %arg0, %c1_i32 : i32
    %5 = arith.select %3, %c1_i32_0, %4 : i32
    %6 = arith.select %0, %5, %arg0 : i32
    %7 = arith.andi %0, %3 : i1
    %8 = arith.index_cast %arg1 : i32 to index
    %9 = memref.load %arg2[%8] : memref<40xi32, #tpu.memory_space<smem>>
    %c0_i32_1 = arith.constant 0 : i32
    %10 = arith.index_cast %2 : i32 to index
    %11 = memref.load %arg2[%10] : memref<40xi32, #tpu.memory_space<smem>>
    %c0_i32_2 = arith.constant 0 : i32
    %12 = arith.cmpi ne, %9, %11 : i32
    %13 = arith.ori %7, %12 : i1
    %14 = arith.cmpi ne, %c0_i32_1, %c0_i32_2 : i32
    %15 = arith.ori %13, %14 : i1
    %16 = arith.cmpi ne, %arg0, %6 : i32
    %17 = arith.ori %15, %16 : i1
    scf.if %17 {
      %c0_11 = arith.constant 0 : index
      %c0_12 = arith.constant 0 : index
      %c0_13 = arith.constant 0 : index
      %24 = vector.load %arg4[%c0_11, %c0_12, %c0_13] : memref<1x1x128xf32, #tpu.memory_space<vmem>>, vector<1x1x128xf32>
      "tpu.vector_store"(%24, %arg5, %c0_11, %c0_12, %c0_13) {add = false, operandSegmentSizes = array<i32: 1, 1, 3, 0>, strides = array<i32>} : (vector<1x1x128xf32>, memref<1x1x128xf32, #tpu.memory_space<vmem>>, index, index, index) -> ()
    } else {
    }
    %c0 = arith.constant 0 : index
    %c0_3 = arith.constant 0 : index
    %c0_4 = arith.constant 0 : index
    %18 = vector.load %arg5[%c0, %c0_3, %c0_4] : memref<1x1x128xf32, #tpu.memory_space<vmem>>, vector<1x1x128xf32>
    %19 = vector.shape_cast %18 : vector<1x1x128xf32> to vector<128xf32>
    %c0_5 = arith.constant 0 : index
    %c0_6 = arith.constant 0 : index
    %c0_7 = arith.constant 0 : index
    %20 = vector.load %arg3[%c0_5, %c0_6, %c0_7] : memref<1x1x128xf32, #tpu.memory_space<vmem>>, vector<1x1x128xf32>
    %21 = vector.shape_cast %20 : vector<1x1x128xf32> to vector<128xf32>
    %22 = arith.addf %19, %21 : vector<128xf32>
    %c0_8 = arith.constant 0 : index
    %c0_9 = arith.constant 0 : index
    %c0_10 = arith.constant 0 : index
    %23 = vector.shape_cast %22 : vector<128xf32> to vector<1x1x128xf32>
    "tpu.vector_store"(%23, %arg5, %c0_8, %c0_9, %c0_10) {add = false, operandSegmentSizes = array<i32: 1, 1, 3, 0>, strides = array<i32>} : (vector<1x1x128xf32>, memref<1x1x128xf32, #tpu.memory_space<vmem>>, index, index, index) -> ()
    return
  }
  func.func @transform_0(%arg0: i32, %arg1: i32, %arg2: memref<40xi32, #tpu.memory_space<smem>>) -> (i32, i32, i32) {
    %c0_i32 = arith.constant 0 : i32
    return %arg1, %c0_i32, %arg0 : i32, i32, i32
  }
  func.func @transform_1(%arg0: i32, %arg1: i32, %arg2: memref<40xi32, #tpu.memory_space<smem>>) -> (i32, i32, i32) {
    %0 = arith.index_cast %arg1 : i32 to index
    %1 = memref.load %arg2[%0] : memref<40xi32, #tpu.memory_space<smem>>
    %c0_i32 = arith.constant 0 : i32
    return %1, %c0_i32, %arg0 : i32, i32, i32
  }
  func.func @transform_2(%arg0: i32, %arg1: i32, %arg2: memref<40xi32, #tpu.memory_space<smem>>) -> (i32, i32, i32) {
    %0 = arith.index_cast %arg1 : i32 to index
    %1 = memref.load %arg2[%0] : memref<40xi32, #tpu.memory_space<smem>>
    %c0_i32 = arith.constant 0 : i32
    return %1, %c0_i32, %arg0 : i32, i32, i32
  }
}
