"""The Verilator build's progress (cosim/progress.py VerilatorMeter, D-T67): a recorded build log
replayed through the meter shows "Verilating", then "compiling C++" with one total from its first
count to the end, then "linking"."""
from pathlib import Path

from tensore.cosim.progress import Progress, VerilatorMeter

MARK = "# Verilated -*- Makefile -*-"

# A real build's log (the compiled harness of CAYMAN 4 x 4, pack 2: two hierarchical blocks and the
# top, make -j 2), its flags and paths shortened; "@@ touch F" / "@@ write F" mark where the build
# created a file the meter reads (the blocks' argument files at the start, each model's makefiles
# when its Verilation ends).
LOG = r'''
@@ touch Vtensore_psum_partition_2w__hierMkArgs.f
@@ touch Vtensore_rowport_cayman_p2_l2__hierMkArgs.f
@@ touch Vtop__hierMkArgs.f
make: Entering directory '$BUILD/obj'
make[1]: Entering directory '$REPO'
$VERILATOR_ROOT/bin/verilator -f $BUILD/obj/Vtensore_psum_partition_2w__hierMkArgs.f
make[1]: Entering directory '$REPO'
$VERILATOR_ROOT/bin/verilator -f $BUILD/obj/Vtensore_rowport_cayman_p2_l2__hierMkArgs.f
- V e r i l a t i o n R e p o r t: rev vUNKNOWN-built20260516-4e853d8
- Verilator: Built from 10.300 MB sources in 39 modules, into 0.251 MB in 6 C++ files needing 0.000 MB
@@ write Vtensore_rowport_cayman_p2_l2/Vtensore_rowport_cayman_p2_l2_classes.mk
- Verilator: Walltime 0.989 s (elab=0.532, cvt=0.053, bld=0.000); cpu 0.814 s on 1 threads; allocated 113.238 MB
make[1]: Leaving directory '$REPO'
make[1]: Entering directory '$REPO'
$VERILATOR_ROOT/bin/verilator -f $BUILD/obj/Vtensore_rowport_cayman_p2_l2__hierMkArgs.f
- V e r i l a t i o n R e p o r t: rev vUNKNOWN-built20260516-4e853d8
- Verilator: Built from 0.000 MB sources in 0 modules, into 0.000 MB in 0 C++ files needing 0.000 MB
- Verilator: Walltime 0.001 s (elab=0.000, cvt=0.000, bld=0.000); cpu 0.001 s on 1 threads; allocated 18.848 MB
make[1]: Leaving directory '$REPO'
make[1]: Entering directory '$REPO'
$VERILATOR_ROOT/bin/verilator -f $BUILD/obj/Vtensore_psum_partition_2w__hierMkArgs.f
- V e r i l a t i o n R e p o r t: rev vUNKNOWN-built20260516-4e853d8
- Verilator: Built from 10.300 MB sources in 39 modules, into 0.962 MB in 6 C++ files needing 0.002 MB
@@ write Vtensore_psum_partition_2w/Vtensore_psum_partition_2w_classes.mk
- Verilator: Walltime 1.666 s (elab=0.658, cvt=0.592, bld=0.000); cpu 1.427 s on 1 threads; allocated 113.238 MB
make[1]: Leaving directory '$REPO'
make -f Vtensore_rowport_cayman_p2_l2.mk -C Vtensore_rowport_cayman_p2_l2 VM_PREFIX=Vtensore_rowport_cayman_p2_l2
make[1]: Entering directory '$BUILD/obj/Vtensore_rowport_cayman_p2_l2'
python $VERILATOR_ROOT/bin/verilator_includer Vtensore_rowport_cayman_p2_l2.cpp Vtensore_rowport_cayman_p2_l2___024root__0.cpp Vtensore_rowport_cayman_p2_l2__ConstPool__0__Slow.cpp Vtensore_rowport_cayman_p2_l2___024root__Slow.cpp Vtensore_rowport_cayman_p2_l2___024root__0__Slow.cpp Vtensore_rowport_cayman_p2_l2__Syms__Slow.cpp > Vtensore_rowport_cayman_p2_l2__ALL.cpp
ccache c++ -O0 -MMD -fPIC -std=c++20 -c -o tensore_rowport_cayman_p2_l2.o tensore_rowport_cayman_p2_l2.cpp
- V e r i l a t i o n R e p o r t: rev vUNKNOWN-built20260516-4e853d8
- Verilator: Built from 10.300 MB sources in 39 modules, into 0.962 MB in 6 C++ files needing 0.002 MB
- Verilator: Walltime 1.421 s (elab=0.424, cvt=0.608, bld=0.000); cpu 1.407 s on 1 threads; allocated 113.234 MB
make[1]: Leaving directory '$REPO'
ccache c++ -O0 -MMD -fPIC -std=c++20 -c -o Vtensore_rowport_cayman_p2_l2__ALL.o Vtensore_rowport_cayman_p2_l2__ALL.cpp
make -f Vtensore_psum_partition_2w.mk -C Vtensore_psum_partition_2w VM_PREFIX=Vtensore_psum_partition_2w
make[1]: Entering directory '$BUILD/obj/Vtensore_psum_partition_2w'
ccache c++ -O0 -MMD -fPIC -std=c++20 -x c++-header Vtensore_psum_partition_2w__pch.h -o Vtensore_psum_partition_2w__pch.h.fast.gch
rm libtensore_rowport_cayman_p2_l2.verilator_deplist.tmp
make[1]: Leaving directory '$BUILD/obj/Vtensore_rowport_cayman_p2_l2'
make[1]: Entering directory '$REPO'
$VERILATOR_ROOT/bin/verilator -f $BUILD/obj/Vtop__hierMkArgs.f
ccache c++ -O0 -MMD -fPIC -std=c++20 -x c++-header Vtensore_psum_partition_2w__pch.h -o Vtensore_psum_partition_2w__pch.h.slow.gch
ccache c++ -O0 -MMD -fPIC -std=c++20 -c -o tensore_psum_partition_2w.o tensore_psum_partition_2w.cpp
ccache c++ -O0 -MMD -fPIC -std=c++20 -include Vtensore_psum_partition_2w__pch.h.fast -c Vtensore_psum_partition_2w.cpp
ccache c++ -O0 -MMD -fPIC -std=c++20 -include Vtensore_psum_partition_2w__pch.h.fast -c Vtensore_psum_partition_2w___024root__0.cpp
ccache c++ -O0 -MMD -fPIC -std=c++20 -include Vtensore_psum_partition_2w__pch.h.fast -c Vtensore_psum_partition_2w___024root__1.cpp
ccache c++ -O0 -MMD -fPIC -std=c++20 -include Vtensore_psum_partition_2w__pch.h.slow -c Vtensore_psum_partition_2w___024root__Slow.cpp
ccache c++ -O0 -MMD -fPIC -std=c++20 -include Vtensore_psum_partition_2w__pch.h.slow -c Vtensore_psum_partition_2w___024root__0__Slow.cpp
ccache c++ -O0 -MMD -fPIC -std=c++20 -include Vtensore_psum_partition_2w__pch.h.slow -c Vtensore_psum_partition_2w__Syms__Slow.cpp
rm libtensore_psum_partition_2w.verilator_deplist.tmp
make[1]: Leaving directory '$BUILD/obj/Vtensore_psum_partition_2w'
- V e r i l a t i o n R e p o r t: rev vUNKNOWN-built20260516-4e853d8
- Verilator: Built from 10.537 MB sources in 39 modules, into 11.936 MB in 17 C++ files needing 0.064 MB
@@ write Vtop_classes.mk
- Verilator: Walltime 12.373 s (elab=0.660, cvt=10.931, bld=0.000); cpu 12.134 s on 1 threads; allocated 152.664 MB
make[1]: Leaving directory '$REPO'
make -f Vtop.mk
make[1]: Entering directory '$BUILD/obj'
ccache c++ -MMD -std=c++20 -O0 -c -o harness.o $REPO/cosim/harness.cpp
ccache c++ -O0 -MMD -std=c++20 -c -o verilated.o $VERILATOR_ROOT/include/verilated.cpp
ccache c++ -O0 -MMD -std=c++20 -c -o verilated_dpi.o $VERILATOR_ROOT/include/verilated_dpi.cpp
ccache c++ -O0 -MMD -std=c++20 -c -o verilated_threads.o $VERILATOR_ROOT/include/verilated_threads.cpp
ccache c++ -O0 -MMD -std=c++20 -x c++-header Vtop__pch.h -o Vtop__pch.h.fast.gch
ccache c++ -O0 -MMD -std=c++20 -x c++-header Vtop__pch.h -o Vtop__pch.h.slow.gch
ccache c++ -O0 -MMD -std=c++20 -include Vtop__pch.h.fast -c Vtop.cpp
ccache c++ -O0 -MMD -std=c++20 -include Vtop__pch.h.fast -c Vtop___024root__0.cpp
ccache c++ -O0 -MMD -std=c++20 -include Vtop__pch.h.fast -c Vtop___024root__1.cpp
ccache c++ -O0 -MMD -std=c++20 -include Vtop__pch.h.fast -c Vtop___024root__2.cpp
ccache c++ -O0 -MMD -std=c++20 -include Vtop__pch.h.fast -c Vtop___024root__3.cpp
ccache c++ -O0 -MMD -std=c++20 -include Vtop__pch.h.fast -c Vtop___024root__4.cpp
ccache c++ -O0 -MMD -std=c++20 -include Vtop__pch.h.fast -c Vtop___024root__5.cpp
ccache c++ -O0 -MMD -std=c++20 -include Vtop__pch.h.fast -c Vtop___024root__6.cpp
ccache c++ -O0 -MMD -std=c++20 -include Vtop__pch.h.fast -c Vtop___024root__7.cpp
ccache c++ -O0 -MMD -std=c++20 -include Vtop__pch.h.fast -c Vtop___024root__8.cpp
ccache c++ -O0 -MMD -std=c++20 -include Vtop__pch.h.fast -c Vtop__Dpi.cpp
ccache c++ -O0 -MMD -std=c++20 -include Vtop__pch.h.slow -c Vtop__ConstPool__0__Slow.cpp
ccache c++ -O0 -MMD -std=c++20 -include Vtop__pch.h.slow -c Vtop___024root__Slow.cpp
ccache c++ -O0 -MMD -std=c++20 -include Vtop__pch.h.slow -c Vtop___024root__0__Slow.cpp
ccache c++ -O0 -MMD -std=c++20 -include Vtop__pch.h.slow -c Vtop___024root__1__Slow.cpp
ccache c++ -O0 -MMD -std=c++20 -include Vtop__pch.h.slow -c Vtop___024root__2__Slow.cpp
ccache c++ -O0 -MMD -std=c++20 -include Vtop__pch.h.slow -c Vtop__Syms__Slow.cpp
c++ harness.o verilated.o verilated_dpi.o verilated_threads.o Vtop__ALL.a -o harness
rm Vtop__ALL.verilator_deplist.tmp
make[1]: Leaving directory '$BUILD/obj'
make: Leaving directory '$BUILD/obj'
- V e r i l a t i o n R e p o r t: rev vUNKNOWN-built20260516-4e853d8
- Verilator: Built from 10.300 MB sources in 39 modules, into 0.000 MB in 0 C++ files needing 0.000 MB
- Verilator: Walltime 36.996 s (elab=0.000, cvt=0.000, bld=0.000); cpu 1.066 s on 2 threads; allocated 259.703 MB
'''

# The makefiles of that build (Verilator writes X_classes.mk and X.mk together), trimmed to what the meter reads.
MAKEFILES = {
    'Vtensore_psum_partition_2w/Vtensore_psum_partition_2w_classes.mk': r'''
VM_PARALLEL_BUILDS = 1

VM_CLASSES_FAST += \
  Vtensore_psum_partition_2w \
  Vtensore_psum_partition_2w___024root__0 \
  Vtensore_psum_partition_2w___024root__1 \

VM_CLASSES_SLOW += \
  Vtensore_psum_partition_2w___024root__Slow \
  Vtensore_psum_partition_2w___024root__0__Slow \

VM_SUPPORT_FAST += \

VM_SUPPORT_SLOW += \
  Vtensore_psum_partition_2w__Syms__Slow \

VM_GLOBAL_FAST += \

VM_GLOBAL_SLOW += \
''',
    'Vtensore_psum_partition_2w/Vtensore_psum_partition_2w.mk': r'''
  -fPIC \
  -I$BUILD \

VM_USER_CLASSES = \

  ../../../../../../..$REPO \

libtensore_psum_partition_2w.a: $(VK_OBJS) $(VK_USER_OBJS) $(VK_GLOBAL_OBJS) tensore_psum_partition_2w.o $(VM_HIER_LIBS)

libtensore_psum_partition_2w: libtensore_psum_partition_2w.a
''',
    'Vtensore_rowport_cayman_p2_l2/Vtensore_rowport_cayman_p2_l2_classes.mk': r'''
VM_PARALLEL_BUILDS = 0

VM_CLASSES_FAST += \
  Vtensore_rowport_cayman_p2_l2 \
  Vtensore_rowport_cayman_p2_l2___024root__0 \

VM_CLASSES_SLOW += \
  Vtensore_rowport_cayman_p2_l2__ConstPool__0__Slow \
  Vtensore_rowport_cayman_p2_l2___024root__Slow \
  Vtensore_rowport_cayman_p2_l2___024root__0__Slow \

VM_SUPPORT_FAST += \

VM_SUPPORT_SLOW += \
  Vtensore_rowport_cayman_p2_l2__Syms__Slow \

VM_GLOBAL_FAST += \

VM_GLOBAL_SLOW += \
''',
    'Vtensore_rowport_cayman_p2_l2/Vtensore_rowport_cayman_p2_l2.mk': r'''
  -fPIC \
  -I$BUILD \

VM_USER_CLASSES = \

  ../../../../../../..$REPO \

libtensore_rowport_cayman_p2_l2.a: $(VK_OBJS) $(VK_USER_OBJS) $(VK_GLOBAL_OBJS) tensore_rowport_cayman_p2_l2.o $(VM_HIER_LIBS)

libtensore_rowport_cayman_p2_l2: libtensore_rowport_cayman_p2_l2.a
''',
    'Vtop_classes.mk': r'''
VM_PARALLEL_BUILDS = 1

VM_CLASSES_FAST += \
  Vtop \
  Vtop___024root__0 \
  Vtop___024root__1 \
  Vtop___024root__2 \
  Vtop___024root__3 \
  Vtop___024root__4 \
  Vtop___024root__5 \
  Vtop___024root__6 \
  Vtop___024root__7 \
  Vtop___024root__8 \

VM_CLASSES_SLOW += \
  Vtop__ConstPool__0__Slow \
  Vtop___024root__Slow \
  Vtop___024root__0__Slow \
  Vtop___024root__1__Slow \
  Vtop___024root__2__Slow \

VM_SUPPORT_FAST += \
  Vtop__Dpi \

VM_SUPPORT_SLOW += \
  Vtop__Syms__Slow \

VM_GLOBAL_FAST += \
  verilated \
  verilated_dpi \
  verilated_threads \

VM_GLOBAL_SLOW += \
''',
    'Vtop.mk': r'''
  -I$BUILD \

VM_USER_CLASSES = \
  harness \

  ../../../../../..$REPO \
  ../../../../../..$REPO/cosim \

  $(OBJCACHE) $(CXX) $(CXXFLAGS) $(CPPFLAGS) $(OPT_FAST)  -c -o $@ $<

  $(LINK) $(LDFLAGS) $^ $(LOADLIBES) $(LDLIBS) $(LIBS) $(SC_LIBS) -o $@
''',
}


def _replay(obj: Path) -> list:
    """(stage, done, total) after each line of LOG through a VerilatorMeter on `obj`."""
    progress = Progress("build")                     # silent: the state only
    meter = VerilatorMeter(progress, obj)
    seen = []
    for line in LOG.strip("\n").splitlines():
        if line.startswith("@@ touch "):
            (obj / line.split()[-1]).touch()
        elif line.startswith("@@ write "):
            classes = line.split()[-1]
            for name in (classes, classes.replace("_classes.mk", ".mk")):
                (obj / name).parent.mkdir(parents=True, exist_ok=True)
                (obj / name).write_text(f"{MARK}\n{MAKEFILES[name]}\n{MARK}\n")      # Verilator's first and last line
        else:
            meter(line + "\n")
        seen.append((progress.stage, progress.done, progress.total))
    return seen


def test_build_totals_stay_fixed_within_a_phase(tmp_path):
    """The hierarchical blocks compile while the top is still being Verilated; the meter shows
    "Verilating" until every model's makefiles exist, then counts every compiler run (34: the
    blocks' that ran meanwhile too) of one total planned from them, which the build meets."""
    seen = _replay(tmp_path)
    stages = [s for i, (s, _, _) in enumerate(seen) if i == 0 or s != seen[i - 1][0]]
    assert stages == ["Verilating", "compiling C++", "linking"], stages
    totals = {t for s, _, t in seen if s != "Verilating"}
    assert totals == {34}, sorted(totals)
    assert all(t == 0 for s, _, t in seen if s == "Verilating")
    assert seen[-1][1:] == (34, 34)
    compiling = [d for s, d, _ in seen if s == "compiling C++"]
    assert compiling[0] > 1 and compiling == sorted(compiling)    # the blocks' compiles count as done


def test_a_makefile_being_written_fixes_no_total(tmp_path):
    """A top makefile Verilator has not finished writing (no closing mark yet) plans nothing; the
    next line after it is complete fixes the total."""
    progress = Progress("build")
    meter = VerilatorMeter(progress, tmp_path)
    mk = tmp_path / "Vtop_classes.mk"
    text = MAKEFILES["Vtop_classes.mk"]
    mk.write_text(f"{MARK}\n{text[:len(text) // 2]}")
    meter("- Verilator: Built from 10.5 MB sources in 39 modules, into 11.9 MB in 17 C++ files\n")
    assert (progress.stage, progress.total) == ("Verilating", 0)
    mk.write_text(f"{MARK}\n{text}\n{MARK}\n")
    meter("ccache c++ -O0 -MMD -std=c++20 -c -o verilated.o verilated.cpp\n")
    assert (progress.stage, progress.done, progress.total) == ("compiling C++", 1, 22)


def test_simulation_progress_and_summary_share_one_measure():
    """A simulation's progress shows cycles/s over the simulator's own loop seconds (the harness's
    `progress JOB CYCLE SECONDS` reports), the measure of the run's `simulation loop` summary."""
    from tensore.cosim.harness import progress_line
    assert progress_line("progress 0 6400 2.5\n") == (0, 6400, 2.5)
    assert progress_line("progress 1 64\n") == (1, 64, None)               # a build before the seconds
    assert progress_line("%Warning: progress 1 x\n") is None and progress_line("progress a 1 2\n") is None
    p = Progress("simulation", stage="gemm on Verilator", total=3648, unit="cycles")
    p.update(done=3648, seconds=2.97)
    cycles, seconds = 3648, 2.97
    assert f"{cycles / seconds:,.0f} cycles/s, {seconds:.2f} s of simulation loop" in p._text()
