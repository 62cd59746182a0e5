// The compiled testbench of the exported engine (cosim/harness.py, D-T61): the stimulus of
// cosim/lockstep.py's `bench`, in C++.  It reads jobs (register setup, descriptors, an SBUF image,
// the cycles to run) from a binary file, drives the descriptor stream, serves the stationary, scale
// and moving SBUF ports from the image with the engine's latency, and records every PSUM write
// (cycle, port, partition, offset, bits, bf16), the error and unsupported outputs of every cycle, the
// registers read at the end and the PSUM words read back after them (every partition's word through
// the host port's lanes).  The comparison with the golden engine runs in Python over those arrays.
// Port widths and names come from harness_ports.h, generated per engine configuration.  A traced
// build (verilator --trace / --trace-fst) writes the waveform to the third argument, VCD or FST.
// With TENSORE_HARNESS_PROGRESS set it writes "progress JOB CYCLES" lines to stderr, about four a
// second, for cosim/progress.py's display (D-T89).
#include "Vtop.h"
#include "verilated.h"
#include "harness_ports.h"
#if VM_TRACE_FST
#include "verilated_fst_c.h"
typedef VerilatedFstC Tracer;
#elif VM_TRACE
#include "verilated_vcd_c.h"
typedef VerilatedVcdC Tracer;
#endif
#include <chrono>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

template <class T> static inline uint64_t getf(const T& v, int lo, int w) {
    uint64_t x = (uint64_t)v >> lo;
    return w >= 64 ? x : x & ((1ULL << w) - 1);
}
template <std::size_t N> static inline uint64_t getf(const VlWide<N>& v, int lo, int w) {
    uint64_t x = 0;
    for (int i = 0; i < w; i += 32 - ((lo + i) & 31)) {
        int b = lo + i, n = 32 - (b & 31);
        if (n > w - i) n = w - i;
        uint64_t chunk = (v[b >> 5] >> (b & 31)) & (n == 32 ? 0xFFFFFFFFULL : ((1ULL << n) - 1));
        x |= chunk << i;
    }
    return x;
}
template <class T> static inline void setf(T& v, int lo, int w, uint64_t x) {
    uint64_t m = (w >= 64 ? ~0ULL : ((1ULL << w) - 1)) << lo;
    v = (T)(((uint64_t)v & ~m) | ((x << lo) & m));
}
template <std::size_t N> static inline void setf(VlWide<N>& v, int lo, int w, uint64_t x) {
    for (int i = 0; i < w; i += 32 - ((lo + i) & 31)) {
        int b = lo + i, n = 32 - (b & 31);
        if (n > w - i) n = w - i;
        uint32_t m = (n == 32 ? 0xFFFFFFFFu : ((1u << n) - 1)) << (b & 31);
        v[b >> 5] = (v[b >> 5] & ~m) | ((uint32_t)((x >> i) << (b & 31)) & m);
    }
}
template <class T> static inline void clear(T& v) { v = 0; }
template <std::size_t N> static inline void clear(VlWide<N>& v) { for (std::size_t i = 0; i < N; i++) v[i] = 0; }
static inline int64_t sext(uint64_t x, int w) { return (int64_t)(x << (64 - w)) >> (64 - w); }

struct Sbuf {
    int64_t parts = 0, bytes = 0;
    std::vector<uint8_t> mem;
    uint8_t byte(int64_t p, int64_t o) const {
        return (p < 0 || p >= parts || o < 0 || o >= bytes) ? 0 : mem[p * bytes + o];
    }
    uint64_t read(int64_t p, int64_t o, int n) const {
        uint64_t x = 0;
        for (int i = 0; i < n && i < 8; i++) x |= (uint64_t)byte(p, o + i) << (8 * i);
        return x;
    }
    uint64_t nibble(int64_t p, int64_t a) const { return (byte(p, a >> 1) >> (4 * (a & 1))) & 0xF; }
};
// an SBUF port's element map (rtl/mx.py MAP_FIELDS): index e at (e mod n0) * s0 + (e div n0) * s1
static inline int64_t mapped(int64_t e, int64_t n0, int64_t s0, int64_t s1) {
    if (n0 < 1) n0 = 1;
    return (e % n0) * s0 + (e / n0) * s1;
}
// field `port` of a request (FIELD_W bits each; row or element i), unsigned and sign-extended
#define FIELD(port, w, i) getf(top.port, (w) * (i), (w))
#define SFIELD(port, w, i) sext(FIELD(port, w, i), (w))

struct Pending {
    bool st = false, sc = false;
    std::vector<uint32_t> st_vals;
    std::vector<uint8_t> sc_bytes;
    std::vector<int> mv_rows;
    std::vector<uint32_t> mv_words;   // MV_WORDS per entry of mv_rows
    std::vector<int64_t> cl_words;    // column-serial answers: (word of st_resp_data, value) pairs
};

static std::vector<int64_t> read_words(FILE* f, size_t n) {
    std::vector<int64_t> v(n);
    if (n && fread(v.data(), 8, n, f) != n) { fprintf(stderr, "harness: short job file\n"); exit(2); }
    return v;
}
static int64_t read1(FILE* f) { return read_words(f, 1)[0]; }

struct Run {
    Vtop* top;
    VerilatedContext* ctx;
#if VM_TRACE
    Tracer* tfp = nullptr;
#endif
    uint64_t time = 0;
    void eval() {
        top->eval();
#if VM_TRACE
        if (tfp) tfp->dump(time);
#endif
        time += 5;
    }
    void tick() { top->clk = 0; eval(); top->clk = 1; eval(); }
};

int main(int argc, char** argv) {
    if (argc < 3) { fprintf(stderr, "usage: harness JOB RESULT [WAVES]\n"); return 2; }
    FILE* in = fopen(argv[1], "rb");
    FILE* out = fopen(argv[2], "wb");
    if (!in || !out) { fprintf(stderr, "harness: cannot open job or result file\n"); return 2; }
    VerilatedContext ctx;
    ctx.commandArgs(argc, argv);
    Vtop top(&ctx);
    Run run{&top, &ctx};
#if VM_TRACE
    if (argc > 3) {
        ctx.traceEverOn(true);
        run.tfp = new Tracer;
        top.trace(run.tfp, 99);
        run.tfp->open(argv[3]);
    }
#endif
    const bool progress = getenv("TENSORE_HARNESS_PROGRESS") != nullptr;
    const int64_t jobs = read1(in);
    for (int64_t job = 0; job < jobs; job++) {
        const int64_t Lm = read1(in), end = read1(in), parts = read1(in), rows = read1(in);
        const int64_t nsetup = read1(in);
        std::vector<int64_t> setup = read_words(in, 2 * nsetup);
        const int64_t ndesc = read1(in);
        std::vector<int64_t> descs = read_words(in, 8 * ndesc);
        const int64_t nregs = read1(in);
        std::vector<int64_t> regs = read_words(in, nregs);
        const int64_t nwords = read1(in);
        std::vector<int64_t> words = read_words(in, nwords);
        Sbuf sb;
        sb.parts = read1(in);
        sb.bytes = read1(in);
        sb.mem.resize(sb.parts * sb.bytes + 8);
        if (fread(sb.mem.data(), 1, (sb.parts * sb.bytes + 7) / 8 * 8, in) != (size_t)((sb.parts * sb.bytes + 7) / 8 * 8)) {
            fprintf(stderr, "harness: short SBUF image\n");
            return 2;
        }
        // reset (cocotb_bench.py's sequence)
        top.desc_valid = 0; top.bus_we = 0; clear(top.bus_addr); clear(top.bus_wdata); clear(top.event_set);
        clear(top.host_part); clear(top.host_word); top.host_we = 0; clear(top.host_wdata);
        clear(top.st_resp_data); clear(top.sc_resp_data); clear(top.mv_resp_data); clear(top.desc_data);
        top.rst = 1; run.tick(); run.tick(); top.rst = 0; run.tick();
        for (int64_t i = 0; i < nsetup; i++) {
            setf(top.bus_addr, 0, BUS_ADDR_W, setup[2 * i]);
            setf(top.bus_wdata, 0, 32, setup[2 * i + 1]);
            top.bus_we = 1;
            run.tick();
        }
        top.bus_we = 0;
        std::vector<Pending> ring(Lm + 1);
        std::vector<int64_t> writes;                 // (cycle, port, partition, offset, bits, bf16)
        std::vector<uint8_t> err(end), unsup(end);
        int64_t done = 0;                            // the engine's done output in the last cycle
        int64_t nxt = 0;
        auto t0 = std::chrono::steady_clock::now(), shown = t0;
        for (int64_t cycle = 0; cycle < end; cycle++) {
            top.desc_valid = nxt < ndesc;
            if (nxt < ndesc)
                for (int i = 0; i < 16; i++) top.desc_data[i] = (uint32_t)((uint64_t)descs[8 * nxt + i / 2] >> (32 * (i % 2)));
            Pending& due = ring[cycle % (Lm + 1)];
            if (due.st) {
                for (size_t i = 0; i < due.st_vals.size(); i++) setf(top.st_resp_data, 32 * i, 32, due.st_vals[i]);
                due.st = false;
            }
            for (size_t k = 0; k + 1 < due.cl_words.size(); k += 2)
                setf(top.st_resp_data, 32 * due.cl_words[k], 32, (uint32_t)due.cl_words[k + 1]);
            due.cl_words.clear();
            if (due.sc) {
                clear(top.sc_resp_data);
                for (size_t i = 0; i < due.sc_bytes.size() && 8 * i < SC_RESP_W; i++) setf(top.sc_resp_data, 8 * i, 8, due.sc_bytes[i]);
                due.sc = false;
            }
            for (size_t k = 0; k < due.mv_rows.size(); k++)
                for (int j = 0; j < MV_WORDS; j++)
                    setf(top.mv_resp_data, MV_BITS * due.mv_rows[k] + 32 * j, 32, due.mv_words[MV_WORDS * k + j]);
            due.mv_rows.clear();
            due.mv_words.clear();
            top.clk = 0;
            run.eval();
            Pending& later = ring[(cycle + Lm) % (Lm + 1)];
            if (top.st_req_valid) {
                int64_t part = FIELD(st_req_part, ST_W_PART, 0), off = FIELD(st_req_off, ST_W_OFF, 0);
                int es = FIELD(st_req_esize, ST_W_ESIZE, 0), count = FIELD(st_req_count, ST_W_COUNT, 0);
                later.st = true;
                later.st_vals.assign(count, 0);
                int64_t st[3], nm[3];
                for (int d = 0; d < 3; d++) {
                    st[d] = SFIELD(st_req_step, ST_W_STEP, d);
                    nm[d] = FIELD(st_req_num, ST_W_NUM, d);
                }
                bool nib = FIELD(st_req_nib, ST_W_NIB, 0);
                if (FIELD(st_req_xpose, ST_W_XPOSE, 0)) {
                    // `xpack` elements of each partition: element e at position first + e mod xpack
                    int64_t first = FIELD(st_req_first, ST_W_FIRST, 0), xpack = FIELD(st_req_xpack, ST_W_XPACK, 0);
                    int64_t n0 = nm[0] < 1 ? 1 : nm[0], n1 = nm[1] < 1 ? 1 : nm[1];
                    if (xpack < 1) xpack = 1;
                    for (int e = 0; e < count; e++) {
                        int64_t q = first + e % xpack, pp = part + e / xpack;
                        int64_t rel = (q % n0) * st[0] + (q / n0 % n1) * st[1] + (q / (n0 * n1)) * st[2];
                        later.st_vals[e] = nib ? sb.nibble(pp, 2 * off + rel) : sb.read(pp, off + es * rel, es);
                    }
                } else {
                    int64_t n0 = FIELD(st_req_map_n0, ST_W_MAP_N0, 0), s0 = SFIELD(st_req_map_s0, ST_W_MAP_S0, 0),
                            s1 = SFIELD(st_req_map_s1, ST_W_MAP_S1, 0);
                    int e = 0;
                    for (int64_t i2 = 0; i2 < nm[2] && e < count; i2++)
                        for (int64_t i1 = 0; i1 < nm[1] && e < count; i1++)
                            for (int64_t i0 = 0; i0 < nm[0] && e < count; i0++, e++) {
                                int64_t rel = mapped(i0 * st[0] + i1 * st[1] + i2 * st[2], n0, s0, s1);
                                later.st_vals[e] = nib ? sb.nibble(part, 2 * off + rel) : sb.read(part, off + es * rel, es);
                            }
                    later.st_vals.resize(e);
                }
            }
            if (top.sc_req_valid) {
                int64_t p = getf(top.sc_req_part, 0, 7), o = getf(top.sc_req_off, 0, 18), n = getf(top.sc_req_count, 0, 16);
                later.sc = true;
                later.sc_bytes.assign(n, 0);
                for (int64_t i = 0; i < n; i++) later.sc_bytes[i] = sb.byte(p, o + i);
            }
            for (int r = 0; r < rows; r++) {
                if (!getf(top.mv_req_valid, r, 1)) continue;
                int64_t p = FIELD(mv_req_part, MV_W_PART, r);
                int es = FIELD(mv_req_esize, MV_W_ESIZE, r);
                uint32_t w[MV_WORDS] = {0};
                if (FIELD(mv_req_mx, MV_W_MX, r)) {
                    // `count` codes: indices elem + j * stride, each at addr + its mapped address
                    int64_t addr = FIELD(mv_req_addr, MV_W_ADDR, r), elem = FIELD(mv_req_elem, MV_W_ELEM, r);
                    int64_t stride = SFIELD(mv_req_stride, MV_W_STRIDE, r);
                    int64_t n0 = FIELD(mv_req_map_n0, MV_W_MAP_N0, r), s0 = SFIELD(mv_req_map_s0, MV_W_MAP_S0, r),
                            s1 = SFIELD(mv_req_map_s1, MV_W_MAP_S1, r);
                    int cnt = FIELD(mv_req_count, MV_W_COUNT, r);
                    bool nib = FIELD(mv_req_nib, MV_W_NIB, r);
                    uint64_t codes = 0;
                    for (int j = 0; j < cnt && j < 8; j++) {
                        int64_t a = addr + mapped(elem + j * stride, n0, s0, s1);
                        codes |= (nib ? sb.nibble(p, a) : sb.byte(p, a)) << (8 * j);
                    }
                    w[0] = (uint32_t)codes; w[1] = (uint32_t)(codes >> 32);
                    w[2] = sb.byte(FIELD(mv_req_spart, MV_W_SPART, r), FIELD(mv_req_soff, MV_W_SOFF, r));
                } else {
                    for (int j = 0; j < MV_ELEMS; j++) w[j] = sb.read(p, getf(MV_OFF(j), MV_W_OFF0 * r, MV_W_OFF0), es);
                }
                later.mv_rows.push_back(r);
                later.mv_words.insert(later.mv_words.end(), w, w + MV_WORDS);
            }
#if COLUMN_ROWS
            // the column-serial requests: row k's elements into words MV_ELEMS k .. of the stationary
            // answer (rtl/column_load.py, D-T102)
            for (int k = 0; k < COLUMN_ROWS; k++) {
                if (!getf(top.cl_req_valid, k, 1)) continue;
                int64_t p = FIELD(cl_req_part, MV_W_PART, k);
                int es = FIELD(cl_req_esize, MV_W_ESIZE, k);
                for (int j = 0; j < MV_ELEMS; j++)
                    later.cl_words.insert(later.cl_words.end(),
                                          {(int64_t)(MV_ELEMS * k + j), (int64_t)sb.read(p, getf(CL_OFF(j), MV_W_OFF0 * k, MV_W_OFF0), es)});
            }
#endif
            for (int p = 0; p < parts; p++) {
#define RECORD(mon, k)                                                                                      \
                if (getf(top.mon##_valid, p, 1))                                                            \
                    writes.insert(writes.end(), {cycle, k, p, (int64_t)getf(top.mon##_offset, 14 * p, 14),   \
                                                 (int64_t)getf(top.mon##_bits, 32 * p, 32),                 \
                                                 (int64_t)getf(top.mon##_bf16, p, 1)});
                MONITORS(RECORD)
#undef RECORD
            }
            err[cycle] = top.error;
            unsup[cycle] = top.unsupported;
            done = top.done;
            bool accepted = top.desc_ready;
            top.clk = 1;
            run.eval();
            if (nxt < ndesc && accepted) nxt++;
            if (progress && (cycle & 63) == 63) {
                auto now = std::chrono::steady_clock::now();
                if (now - shown >= std::chrono::milliseconds(250)) {
                    fprintf(stderr, "progress %lld %lld %.6f\n", (long long)job, (long long)cycle + 1,
                            std::chrono::duration<double>(now - t0).count());   // this job's loop seconds
                    fflush(stderr);
                    shown = now;
                }
            }
        }
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        top.desc_valid = 0;
        std::vector<int64_t> got(nregs);
        for (int64_t i = 0; i < nregs; i++) {
            setf(top.bus_addr, 0, BUS_ADDR_W, regs[i]);
            top.clk = 0;
            run.eval();
            got[i] = (int64_t)getf(top.bus_rdata, 0, 32);
            top.clk = 1;
            run.eval();
        }
        std::vector<uint32_t> psum(nwords * parts);
        for (int64_t i = 0; i < nwords; i++) {
            setf(top.host_word, 0, 16, words[i]);
            run.tick();                              // the read port's data, one cycle later
            for (int64_t p = 0; p < parts; p++) psum[i * parts + p] = (uint32_t)getf(top.host_lanes, 32 * p, 32);
        }
        int64_t nw = writes.size() / 6;
        fwrite(&nw, 8, 1, out);
        fwrite(writes.data(), 8, writes.size(), out);
        fwrite(err.data(), 1, end, out);
        fwrite(unsup.data(), 1, end, out);
        fwrite(got.data(), 8, nregs, out);
        fwrite(&done, 8, 1, out);
        fwrite(psum.data(), 4, psum.size(), out);
        fwrite(&seconds, 8, 1, out);
        fflush(out);
    }
#if VM_TRACE
    if (run.tfp) run.tfp->close();
#endif
    top.final();
    fclose(out);
    return 0;
}
