# repro_dtype_mix: MARIANA 8 x 4; registers {}
ldweights in_dtype=fp32 fp32_mode=low_high rows=1 cols=1 src=(start_addr=sbuf(0,0x100), step_elem=[1,0,0], num_elem=[1,1,1])
matmul in_dtype=fp16 out_dtype=fp32 rows=1 cols=1 src=(start_addr=sbuf(0,0x200), step_elem=[1,0,0], num_elem=[1,1,1]) dst=(start_addr=psum(0,0,0), step_elem=[1,0,0], num_elem=[1,1,1])
