# repro_fp32_4pass_then_matmul: MARIANA 8 x 4; registers {}
matmul in_dtype=fp32 fp32_mode=high out_dtype=fp32 rows=1 cols=1 acc=single src=(start_addr=sbuf(0,0x300), step_elem=[1,0,0], num_elem=[1,1,1]) dst=(start_addr=psum(0,5,0), step_elem=[1,0,0], num_elem=[1,1,1])
matmul in_dtype=fp16 out_dtype=fp32 rows=1 cols=1 acc=single src=(start_addr=sbuf(0,0x200), step_elem=[1,0,0], num_elem=[1,1,1]) dst=(start_addr=psum(0,2,0), step_elem=[1,0,0], num_elem=[1,1,1])
