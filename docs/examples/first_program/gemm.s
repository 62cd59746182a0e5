# Your first program (docs/first_program.md): C[M, N] = A[K, M].T @ B[K, N], bf16 in, fp32 out,
# K = M = 8, N = 16, on an 8 x 8 MARIANA engine.  SBUF (make_sbuf.py): A at byte 0x000 and B at
# byte 0x400 of partitions 0..7 (partition k holds row k of A and of B).
# The weights: row k of A -> array row k, A[k, m] -> column m (first_col_first).
ldweights in_dtype=bf16 rows=8 cols=8 flags=(load_order=first_col_first) src=(start_addr=sbuf(0,0x000), step_elem=[1,0,0], num_elem=[8,1,1])
# 16 moving vectors: vector n is column n of B; C[m, n] lands in PSUM partition m, bank 0, fp32 cell n.
matmul in_dtype=bf16 out_dtype=fp32 rows=8 cols=8 acc=single src=(start_addr=sbuf(0,0x400), step_elem=[1,0,0], num_elem=[16,1,1]) dst=(start_addr=psum(0,0,0), step_elem=[1,0,0], num_elem=[16,1,1])
