# mx_scale_partition_mariana (found by make regress as fuzz_30000_mariana_90): MARIANA 8 x 8; registers {}
ldweights_mx src_mem_pattern=(data_addr=sbuf(0,0), scale_addr=sbuf(0,0), step_elem=0, num_elem=32) in_dtype=fp8_exp5 perf_mode=quad_row_interleave num_active_rows=1 num_active_cols=8
matmul_mx src_mem_pattern=(data_addr=sbuf(0,0), scale_addr=sbuf(1,0), step_elem=0, num_elem=32) in_dtype=fp8_exp4 perf_mode=quad_row num_active_rows=1 num_active_cols=1 dst_mem_pattern=tensor3d(start_addr=psum(0,0,0x0), step_elem=[0,0,0], num_elem=[8,1,1])
