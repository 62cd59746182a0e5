# fp32_4pass_then_xpose_mariana (found by make regress as random_mariana_0): MARIANA 8 x 8; registers {}
matmul in_dtype=fp32 fp32_mode=low_high rows=1 cols=1 src=(start_addr=sbuf(0,0), step_elem=[0,0,0], num_elem=[1,1,1]) dst=(start_addr=psum(0,0,0), step_elem=[0,0,0], num_elem=[1,1,1])
matmul in_dtype=fp8_e4m3 rows=1 cols=1 flags=(xpose_mode=enabled) src=(start_addr=sbuf(0,0), step_elem=[0,0,0], num_elem=[1,1,1]) dst=(start_addr=psum(0,0,0), step_elem=[0,0,0], num_elem=[1,1,1])
