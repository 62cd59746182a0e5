# zero_two_groups_one_cycle_cayman (found by make regress as fuzz_0_cayman_28): CAYMAN 8 x 8; registers {}
ldweights src_mem_pattern=(start_addr=sbuf(0,0), step_elem=[0,0,0], num_elem=[1,1,1]) in_dtype=fp8_exp5 num_active_rows=1 num_active_cols=1
matmul_sparse src_mem_pattern=(start_addr=sbuf(0,0), step_elem=[0,0,0,0], num_elem=[1,1,1,2]) in_dtype=bfloat16 num_active_rows=1 num_active_cols=1 dst_mem_pattern=(start_addr=psum(0,1,0), step_elem=[0,0,0], num_elem=[1,1,1])
matmul src_mem_pattern=(start_addr=sbuf(0,0), step_elem=[0,0,0], num_elem=[2,1,1]) in_dtype=bfloat16 num_active_rows=1 num_active_cols=1 psum_accumulate_flags=single col_grp=2 psum_zero_region=banks_8 dst_mem_pattern=(start_addr=psum(0,0,0), step_elem=[0,0,0], num_elem=[2,1,1])
ldweights src_mem_pattern=(start_addr=sbuf(0,0), step_elem=[0,0,0], num_elem=[0,0,0])
.raw 0xbb619b9f70ab71cee306779afdeb193c21c0a14449b0a679013f9d5e285da0a69a1c2678f372ed8c47e13ec440104ff0d3dc309e8f003288c0f03546c8d436ed
matmul src_mem_pattern=(start_addr=sbuf(0,0), step_elem=[0,0,0], num_elem=[1,1,1]) in_dtype=bfloat16 num_active_rows=1 num_active_cols=1 psum_accumulate_flags=single dst_mem_pattern=(start_addr=psum(0,0,0), step_elem=[0,0,0], num_elem=[1,1,1])
