# zero_beside_other_group_mariana (found by make regress as random_mariana_39): MARIANA 8 x 8; registers {}
ldweights in_dtype=fp32 fp32_mode=low_high rows=1 cols=3 flags=(load_order=first_col_first) src=(start_addr=sbuf(0,1790), step_elem=[0,0,0], num_elem=[3,1,1])
matmul in_dtype=fp32 fp32_mode=low_high out_dtype=fp32 rows=1 cols=1 acc=multi_start set=0 src=(start_addr=sbuf(0,1279), step_elem=[0,0,0], num_elem=[1,1,1]) dst=(start_addr=psum(0,1,291), step_elem=[0,0,0], num_elem=[1,1,1])
ldweights in_dtype=bf16 rows=1 cols=1 row_grp=0 col_grp=1 flags=(load_order=first_col_first) src=(start_addr=sbuf(0,0), step_elem=[0,0,0], num_elem=[1,1,1])
matmul in_dtype=bf16 out_dtype=fp32 rows=1 cols=1 row_grp=0 col_grp=1 acc=multi_start zero=banks_1 src=(start_addr=sbuf(0,0), step_elem=[0,0,0], num_elem=[1,1,1]) dst=(start_addr=psum(0,1,0), step_elem=[0,0,0], num_elem=[1,1,1])
matmul in_dtype=bf16 out_dtype=fp32 rows=1 cols=1 row_grp=1 col_grp=0 acc=multi_end src=(start_addr=sbuf(0,0), step_elem=[1,0,0], num_elem=[3,1,1]) dst=(start_addr=psum(0,0,0), step_elem=[0,0,0], num_elem=[3,1,1])
