# err_count_two_errors_maverick: MAVERICK 8 x 16; registers {}
# err_count_two_errors_maverick (a decode refusal and a fetched BAD_REGISTER in one cycle count 2 errors): MAVERICK 8 x 16; registers {}
pe_reg_write src_mem_pattern=(start_addr=sbuf(0,0), step_elem=[0], num_elem=[1])
pe_reg_write reg=7 src=(start_addr=sbuf(0,0), step_elem=[1], num_elem=[1])
pe_reg_write reg=7 src=(start_addr=sbuf(0,0), step_elem=[1], num_elem=[1])
