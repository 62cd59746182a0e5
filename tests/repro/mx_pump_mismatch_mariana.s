# repro_mx_pump_mismatch: MARIANA 8 x 4; registers {}
ldweights_mx in_dtype=fp8_exp4 rows=8 cols=4 perf_mode=quad_row flags=(load_order=first_col_first) src=(data_addr=sbuf(0,0x100), scale_addr=sbuf(0,0x200), step_elem=1, num_elem=16)
matmul_mx in_dtype=fp8_exp4 out_dtype=fp32 rows=8 cols=4 perf_mode=oct_row acc=single src=(data_addr=sbuf(0,0x300), scale_addr=sbuf(0,0x400), step_elem=1, num_elem=32) dst=(start_addr=psum(0,2,0), step_elem=[1,0,0], num_elem=[4,1,1])
