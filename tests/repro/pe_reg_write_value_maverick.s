# pe_reg_write_value_maverick (found by make regress as fuzz_0_maverick_7): MAVERICK 8 x 16; registers {}
pe_reg_write src_mem_pattern=(start_addr=sbuf(0,0), step_elem=[0], num_elem=[1])
