/* The arr_seq registers from C through the generated header rtl/regs/arr_seq.h (docs/engine_interface.md).
 *
 * The header gives the address map as a struct (arr_seq_t: a register's byte address is its offsetof)
 * and every field's bit mask, position, width and reset value (ARR_SEQ__<REG>__<FIELD>_bm / _bp / _bw /
 * _reset).  Here a small register file stands in for the engine's register bus (bus_addr / bus_wdata /
 * bus_we / bus_rdata): host_write and host_read are where a driver would access the hardware.
 *
 *     gcc -std=c11 -Wall -Werror -I rtl/regs docs/examples/regs_c/regs_example.c -o build/regs_example
 *
 * Output, one line each: "offset REG 0x..", "write REG 0x..", "read REG 0x..", "field REG.FIELD VALUE". */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "arr_seq.h"

#define REG_ADDR(reg) ((uint32_t)offsetof(arr_seq_t, reg))
#define FIELD(REG, F, v) (((uint32_t)(v) << ARR_SEQ__##REG##__##F##_bp) & ARR_SEQ__##REG##__##F##_bm)
#define GET(REG, F, x) (((x) & ARR_SEQ__##REG##__##F##_bm) >> ARR_SEQ__##REG##__##F##_bp)
#define RESET(REG, F) FIELD(REG, F, ARR_SEQ__##REG##__##F##_reset)

static uint32_t regfile[sizeof(arr_seq_t) / 4];     /* the register bus, simulated: one word per address */

static void host_write(uint32_t addr, uint32_t value) { regfile[addr / 4] = value; }
static uint32_t host_read(uint32_t addr) { return regfile[addr / 4]; }

#define SHOW_ADDR(reg) printf("offset %s 0x%03x\n", #reg, (unsigned)REG_ADDR(reg))
#define SHOW_FIELD(reg, REG, F, f, x) printf("field %s.%s %u\n", #reg, #f, (unsigned)GET(REG, F, x))

int main(void) {
    SHOW_ADDR(arr_cluster_cfg);
    SHOW_ADDR(queue_cfg);
    SHOW_ADDR(perf_cntr_cfg);
    SHOW_ADDR(err_status);
    SHOW_ADDR(err_count);
    SHOW_ADDR(status);
    SHOW_ADDR(done_count);
    SHOW_ADDR(matmul_done_count);
    SHOW_ADDR(weight_load[0].instr_cnt_lsb);
    SHOW_ADDR(matmul[1].instr_cnt_msb);
    SHOW_ADDR(pe_regwrite[48].instr_cnt_msb);

    /* arr_cluster_cfg after reset, from the fields' reset values */
    uint32_t cluster = RESET(ARR_CLUSTER_CFG, P2FIFO_AF) | RESET(ARR_CLUSTER_CFG, MATMUL_DONE_LAST) |
                       RESET(ARR_CLUSTER_CFG, INTER_INSTR_DLY_CNT);
    printf("reset arr_cluster_cfg 0x%08x\n", (unsigned)cluster);

    /* a configuration: a one-entry instruction FIFO and 3 idle cycles between micro-ops
       (the library's backpressure program, cosim/programs.py) */
    cluster = (cluster & ~(ARR_SEQ__ARR_CLUSTER_CFG__EN_INTER_INSTR_DLY_bm | ARR_SEQ__ARR_CLUSTER_CFG__INTER_INSTR_DLY_CNT_bm)) |
              FIELD(ARR_CLUSTER_CFG, EN_INTER_INSTR_DLY, 1) | FIELD(ARR_CLUSTER_CFG, INTER_INSTR_DLY_CNT, 3);
    uint32_t queue = FIELD(QUEUE_CFG, FIFO_SIZE_SEL, 1);
    host_write(REG_ADDR(arr_cluster_cfg), cluster);
    host_write(REG_ADDR(queue_cfg), queue);
    printf("write arr_cluster_cfg 0x%08x\n", (unsigned)cluster);
    printf("write queue_cfg 0x%08x\n", (unsigned)queue);

    uint32_t x = host_read(REG_ADDR(arr_cluster_cfg));
    printf("read arr_cluster_cfg 0x%08x\n", (unsigned)x);
    SHOW_FIELD(arr_cluster_cfg, ARR_CLUSTER_CFG, P2FIFO_AF, p2fifo_af, x);
    SHOW_FIELD(arr_cluster_cfg, ARR_CLUSTER_CFG, MATMUL_DONE_LAST, matmul_done_last, x);
    SHOW_FIELD(arr_cluster_cfg, ARR_CLUSTER_CFG, EN_INTER_INSTR_DLY, en_inter_instr_dly, x);
    SHOW_FIELD(arr_cluster_cfg, ARR_CLUSTER_CFG, INTER_INSTR_DLY_CNT, inter_instr_dly_cnt, x);
    x = host_read(REG_ADDR(queue_cfg));
    printf("read queue_cfg 0x%08x\n", (unsigned)x);
    SHOW_FIELD(queue_cfg, QUEUE_CFG, FIFO_SIZE_SEL, fifo_size_sel, x);

    /* decoding a status word as the engine reports it: a refused descriptor */
    uint32_t err = FIELD(ERR_STATUS, ERR, 1) | FIELD(ERR_STATUS, ERR_CODE, 0x05) | FIELD(ERR_STATUS, ERR_OPCODE, 0x02);
    printf("value err_status 0x%08x\n", (unsigned)err);
    SHOW_FIELD(err_status, ERR_STATUS, ERR, err, err);
    SHOW_FIELD(err_status, ERR_STATUS, ERR_CODE, err_code, err);
    SHOW_FIELD(err_status, ERR_STATUS, ERR_OPCODE, err_opcode, err);
    return 0;
}
