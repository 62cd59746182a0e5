"""The GTKWave save file of a `--waves` waveform (cosim/savefile.py): groups of the key signals, every
name one the waveform holds, for the structural PE scopes (Icarus, Amaranth) and the loop form's
state arrays (Verilator); tests/test_cosim_waves.py checks it on the simulators' own waveforms."""
import re

from tensore.cosim import savefile
from tensore.cosim.wave_request import convert_vcd, signals, typed_variables

_PORTS = [("clk", 1), ("rst", 1), ("desc_valid", 1), ("desc_ready", 1), ("desc_data [7:0]", 8), ("mv_req_valid", 1),
          ("mv_resp_data [7:0]", 8), ("mon_valid [1:0]", 2), ("mon_offset [3:0]", 4), ("mon_bits [7:0]", 8),
          ("mon_bf16 [1:0]", 2), ("mon2_valid [1:0]", 2), ("done", 1)]


def _vcd(path, array: list):
    """A tiny engine waveform in Icarus's layout: the wrapper's ports, the sequencer, and `array`
    (VCD header lines) in the array's scope."""
    ids = iter(chr(c) for c in range(33, 127))
    out = ["$timescale 1 ns $end", "$scope module tensore_engine_cosim $end"]
    first = None
    for name, width in _PORTS:
        ident = next(ids)
        first = first or ident
        out.append(f"$var wire {width} {ident} {name} $end")
    out += ["$scope module dut $end", "$scope module seq $end", f"$var wire 1 {next(ids)} issue $end",
            f"$var wire 1 {next(ids)} busy $end", "$scope module inst $end", f"$var wire 1 {next(ids)} held $end",
            "$upscope $end", "$upscope $end", "$scope module array $end", "$scope module inst $end"]
    for line in array:
        out.append(line.replace("ID", next(ids)) if "ID" in line else line)
    out += ["$upscope $end"] * 4 + ["$enddefinitions $end", "#0", f"0{first}", "#5", f"1{first}", "#10", f"0{first}"]
    path.write_text("\n".join(out) + "\n")
    return path


STRUCTURAL = ["$scope module row[0] $end", "$scope module u $end", "$scope module pe[0] $end", "$scope module u $end",
              "$var reg 8 ID active [7:0] $end", "$var reg 1 ID pending $end", "$var reg 8 ID \\$signal [7:0] $end",
              "$var reg 8 ID psum_out [7:0] $end", "$upscope $end", "$upscope $end", "$upscope $end", "$upscope $end"]
LOOP = ["$scope module pe_acc $end", "$scope module [0] $end", "$var reg 8 ID pe_acc[0][0] [7:0] $end",
        "$var reg 8 ID pe_acc[0][1] [7:0] $end", "$upscope $end", "$upscope $end",
        "$scope module pe_pending $end", "$scope module [0] $end", "$var reg 1 ID pe_pending[0][0] [0:0] $end",
        "$upscope $end", "$upscope $end", "$var reg 8 ID act_k [7:0] $end"]


def saved(gtkw: str) -> list:
    """The signal names a save file lists (its lines that are not flags, groups or comments)."""
    return [ln for ln in gtkw.splitlines() if ln and ln[0] not in "@-[" and not ln.startswith("[*]")]


def assert_named_signals_exist(gtkw: str, waves) -> None:
    """Every signal a save file names is one the waveform holds: GTKWave's name less its bit range
    (`[msb:lsb]`, or `[k]` of a one-bit signal stored with a range) is the stored name less its own."""
    held = {re.sub(r" \[\d+:\d+\]$", "", s) for s in signals(waves)}
    names = saved(gtkw)
    assert names
    for name in names:
        assert re.sub(r"\[\d+(:\d+)?\]$", "", name) in held or name in held, name


def test_structural_waveform(tmp_path):
    """Icarus's layout: the groups of the ports, the sequencer and PE (0, 0)'s scope; buses in hex,
    single bits in binary; the file beside the waveform names it."""
    waves = _vcd(tmp_path / "w.vcd", STRUCTURAL)
    path = savefile.write(waves)
    assert path == tmp_path / "w.gtkw"
    text = path.read_text()
    assert f'[dumpfile] "{waves.resolve()}"' in text
    assert_named_signals_exist(text, waves)
    titles = [title for title, _ in savefile.groups(waves)]
    assert titles == ["descriptors", "SBUF requests and responses", "PSUM writes", "sequencer", "PE (0, 0)"]
    assert text.count("@800200") == text.count("@1000200") == len(titles)
    lines = text.splitlines()
    assert lines[lines.index("tensore_engine_cosim.desc_data[7:0]") - 1] == "@22"
    assert lines[lines.index("tensore_engine_cosim.desc_valid") - 1] == "@28"
    pe = "tensore_engine_cosim.dut.array.inst.row[0].u.pe[0].u."
    assert [n for n in saved(text) if n.startswith(pe)] == [pe + "active[7:0]", pe + "pending", pe + "psum_out[7:0]"]
    assert "tensore_engine_cosim.dut.seq.inst.held" in saved(text) and "$signal" not in text
    assert "tensore_engine_cosim.mon2_valid[1:0]" in saved(text)


def test_loop_form_waveform_as_fst(tmp_path):
    """Verilator's loop form, through FST: PE (0, 0) is element [0][0] of each state array."""
    waves = convert_vcd(_vcd(tmp_path / "loop.vcd", LOOP), tmp_path / "loop.fst")
    text = savefile.write(waves).read_text()
    assert_named_signals_exist(text, waves)
    arr = "tensore_engine_cosim.dut.array.inst."
    assert [n for n in saved(text) if n.startswith(arr)] == [arr + "pe_acc.[0].pe_acc[0][0][7:0]",
                                                              arr + "pe_pending.[0].pe_pending[0][0][0]"]


def test_not_an_engine_waveform(tmp_path):
    """A waveform without the engine's descriptor stream: a save file with no groups."""
    other = tmp_path / "other.vcd"
    other.write_text("$timescale 1ns $end\n$scope module top $end\n$var wire 1 ! clk $end\n$upscope $end\n"
                     "$enddefinitions $end\n#0\n0!\n#5\n1!\n")
    text = savefile.write(other, tmp_path / "x.gtkw").read_text()
    assert saved(text) == [] and "[dumpfile]" in text


def test_cosim_cli_writes_the_save_file_on_every_simulator(tmp_path, capsys):
    """`tensore cosim --waves` (here the Amaranth simulator, 4 x 4): the save file beside the waveform,
    printed with it, naming only signals the waveform holds."""
    from tensore.cli import main
    from tensore.cosim import programs as P
    src = tmp_path / "prog.s"
    src.write_text(P.accumulate_group("cayman", rows=4, cols=4, n=4).text)
    waves = tmp_path / "am.fst"
    assert main(["cosim", str(src), "--gen", "cayman", "--rows", "4", "--cols", "4", "--sim", "amaranth",
                 "--waves", str(waves)]) == 0
    gtkw = waves.with_suffix(".gtkw")
    assert f"gtkwave {gtkw}" in capsys.readouterr().out
    text = gtkw.read_text()
    assert_named_signals_exist(text, waves)
    assert [t for t, _ in savefile.groups(waves)][-1] == "PE (0, 0)"


def test_gtkwave_names_numbers_without_a_range(tmp_path):
    """GTKWave lists an integer or a parameter (Icarus's loop variables, Verilator's generate indices)
    without a bit range, the stored one dropped; a bus of bits keeps its `[msb:lsb]`, a bit stored
    with one `[k]`: the names GTKWave's own list holds (tests/test_docs_waves.py compares them)."""
    vcd = tmp_path / "kinds.vcd"
    vcd.write_text("$timescale 1 ns $end\n$scope module top $end\n$var integer 32 ! c [31:0] $end\n"
                   "$var parameter 7 \" INDEX [6:0] $end\n$var wire 8 # bus $end\n$var reg 1 $ bit [0:0] $end\n"
                   "$var integer 32 % n $end\n$upscope $end\n$enddefinitions $end\n#0\n0$\n#5\n1$\n")
    want = ["top.c", "top.INDEX", "top.bus[7:0]", "top.bit[0]", "top.n"]
    for waves in (vcd, convert_vcd(vcd, tmp_path / "kinds.fst")):
        assert [savefile.gtkwave_name(*v) for v in typed_variables(waves)] == want
