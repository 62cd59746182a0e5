# gemm.s on MAVERICK (docs/first_program.md): the tile must be named (tile_size has no valid zero,
# D-T64) and the matmul overwrites PSUM with flags.accumulate_flag.  r128 / c128: all rows, the left
# half of the columns (8 of an 8 x 16 array, 128 of 128 x 256).
ldweights in_dtype=bf16 rows=8 cols=8 tile_size=(row_size_log2=r128, col_size_log2=c128) flags=(load_order=first_col_first) src=(start_addr=sbuf(0,0x000), step_elem=[1,0,0], num_elem=[8,1,1])
matmul in_dtype=bf16 out_dtype=fp32 rows=8 cols=8 tile_size=(row_size_log2=r128, col_size_log2=c128) flags=(accumulate_flag=overwrite) src=(start_addr=sbuf(0,0x400), step_elem=[1,0,0], num_elem=[16,1,1]) dst=(start_addr=psum(0,0,0), step_elem=[1,0,0], num_elem=[16,1,1])
