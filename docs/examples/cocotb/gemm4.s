# C[4, 4] = A.T @ B on a 4 x 4 MARIANA engine: A[4, 4] at byte 0x000, B[4, 4] at byte 0x400 of
# partitions 0..3 (docs/examples/first_program/make_sbuf.py --k 4 --m 4 --n 4)
ldweights in_dtype=bf16 rows=4 cols=4 flags=(load_order=first_col_first) src=(start_addr=sbuf(0,0x000), step_elem=[1,0,0], num_elem=[4,1,1])
matmul in_dtype=bf16 out_dtype=fp32 rows=4 cols=4 acc=single src=(start_addr=sbuf(0,0x400), step_elem=[1,0,0], num_elem=[4,1,1]) dst=(start_addr=psum(0,0,0), step_elem=[1,0,0], num_elem=[4,1,1])
