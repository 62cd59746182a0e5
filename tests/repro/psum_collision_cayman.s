# psum_collision_cayman (found by make regress as random_cayman_13): CAYMAN 8 x 8; registers {}
matmul in_dtype=bf16 rows=1 cols=1 col_grp=1 src=(start_addr=sbuf(0,0), step_elem=[0,0,0], num_elem=[1,1,1]) dst=(start_addr=psum(0,0,0), step_elem=[0,0,0], num_elem=[1,1,1])
matmul in_dtype=bf16 rows=1 cols=1 src=(start_addr=sbuf(0,0), step_elem=[0,0,0], num_elem=[1,1,1]) dst=(start_addr=psum(0,1,0), step_elem=[0,0,0], num_elem=[1,1,1])
