# The full-size form of gemm.s (docs/first_program.md): K = M = 128, N = 512 on a 128 x 128 MARIANA
# engine; SBUF from `make_sbuf.py --k 128 --m 128 --n 512`.  512 fp32 results fill PSUM bank 0.
ldweights in_dtype=bf16 rows=128 cols=128 flags=(load_order=first_col_first) src=(start_addr=sbuf(0,0x000), step_elem=[1,0,0], num_elem=[128,1,1])
matmul in_dtype=bf16 out_dtype=fp32 rows=128 cols=128 acc=single src=(start_addr=sbuf(0,0x400), step_elem=[1,0,0], num_elem=[512,1,1]) dst=(start_addr=psum(0,0,0), step_elem=[1,0,0], num_elem=[512,1,1])
