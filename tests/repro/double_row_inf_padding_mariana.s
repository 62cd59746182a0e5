# double_row_inf_padding_mariana (found by make regress as random_mariana_23): MARIANA 8 x 8; registers {}
ldweights in_dtype=fp8_exp3 perf_opt=double_row rows=2 cols=3 flags=(load_order=last_col_first) src=(start_addr=sbuf(0,256), step_elem=[0,0,0], num_elem=[6,1,1])
matmul in_dtype=fp8_exp3 perf_opt=double_row out_dtype=fp32 rows=2 cols=1 acc=multi_end src=(start_addr=sbuf(0,1278), step_elem=[1,0,0], num_elem=[28,1,1]) dst=(start_addr=psum(0,0,0), step_elem=[1,0,0], num_elem=[14,1,1])
