# Per-target link flags for tests/targets, included by the Makefile (TARGET_LDLIBS_<name>).
TARGET_LDLIBS_alloc_jemalloc := -ljemalloc
TARGET_LDLIBS_alloc_mimalloc := -lmimalloc
TARGET_LDLIBS_alloc_tcmalloc := -ltcmalloc
TARGET_LDLIBS_alloc_static   := -static
TARGET_LDLIBS_preload_edges := -Isrc # the shared memory's layout (ring_pages)
TARGET_LDLIBS_alloc_jemalloc_exe := -Wl,-Bstatic -ljemalloc -Wl,-Bdynamic -lstdc++ -lm -ldl
TARGET_LDLIBS_dlopen_mimalloc_exe := -Wl,-Bstatic -ljemalloc -Wl,-Bdynamic -lstdc++ -lm -ldl
# --stacks (stacks.c): no frame pointers, a linked and a dlopen'ed library caller beside it
STACKS_CFLAGS := -O2 -g -fomit-frame-pointer
TARGET_CFLAGS_stacks := $(STACKS_CFLAGS)
TARGET_CFLAGS_stacks_short := $(STACKS_CFLAGS)
TARGET_LDLIBS_stacks := -L$(BUILD)/targets -lstacks_lib -Wl,-rpath,'$$ORIGIN' -ldl
$(BUILD)/targets/stacks: $(BUILD)/targets/libstacks_lib.so $(BUILD)/targets/libstacks_dl.so
$(BUILD)/targets/libstacks_lib.so: tests/targets/lib/stacks_lib.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -std=gnu11 $(STACKS_CFLAGS) -Wall -Wextra -Werror -fno-builtin -fPIC -shared $< -o $@
$(BUILD)/targets/libstacks_dl.so: tests/targets/lib/stacks_lib.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -std=gnu11 $(STACKS_CFLAGS) -DDL -Wall -Wextra -Werror -fno-builtin -fPIC -shared $< -o $@
# allocations inside dlopen: a constructor's (test_stacks_through_dlopen)
TARGET_CFLAGS_dlopen_ctor := $(STACKS_CFLAGS)
TARGET_LDLIBS_dlopen_ctor := -ldl -Wl,-rpath,'$$ORIGIN'
$(BUILD)/targets/dlopen_ctor: $(BUILD)/targets/libctor_alloc.so
$(BUILD)/targets/libctor_alloc.so: tests/targets/lib/ctor_alloc.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -std=gnu11 $(STACKS_CFLAGS) -Wall -Wextra -Werror -fno-builtin -fPIC -shared $< -o $@
# expect.h is included by every target; the Makefile's pattern rules do not know that.
$(patsubst tests/targets/%.c,$(BUILD)/targets/%,$(wildcard tests/targets/*.c)) \
$(patsubst tests/targets/%.cc,$(BUILD)/targets/%,$(wildcard tests/targets/*.cc)): \
	tests/targets/expect.h
$(BUILD)/targets/alloc_jemalloc_exe: tests/targets/alloc_jemalloc.c
# The windowed target includes the installed header from the tree.
TARGET_LDLIBS_windowed := -Iinclude
$(BUILD)/targets/windowed: include/memtrack.h
TARGET_LDLIBS_window_cost := -Iinclude -O2
$(BUILD)/targets/window_cost: include/memtrack.h
# Symbolisation test inputs (tests/unit/test_symbols.c): one -O2 program in four forms:
#   sym_target          symbols and DWARF (build-id)
#   sym_target.stripped no symbols, a .gnu_debuglink to sym_target.debug (DWARF + symbols)
#   sym_target.symtab   ELF symbols only (no DWARF)
#   sym_target.bare     nothing (module+0x... frames)
SYM_DIR := $(BUILD)/tests/symbols
SYM_TARGETS := $(SYM_DIR)/sym_target $(addprefix $(SYM_DIR)/sym_target,.stripped .debug .symtab .bare)
$(SYM_DIR)/sym_target: tests/symbols/sym_target.cc | $(BUILD)
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) -std=gnu++17 -O2 -g -fomit-frame-pointer -Wall -Wextra -Werror \
		-Wl,--build-id=sha1 $< -o $@
$(SYM_DIR)/sym_target.debug: $(SYM_DIR)/sym_target
	$(Q)objcopy --only-keep-debug $< $@
# debuglink names the file; libdwfl looks for it beside the binary
$(SYM_DIR)/sym_target.stripped: $(SYM_DIR)/sym_target $(SYM_DIR)/sym_target.debug
	$(Q)cd $(SYM_DIR) && objcopy --strip-all --add-gnu-debuglink=sym_target.debug \
		sym_target sym_target.stripped
$(SYM_DIR)/sym_target.symtab: $(SYM_DIR)/sym_target
	$(Q)objcopy --strip-debug $< $@
$(SYM_DIR)/sym_target.bare: $(SYM_DIR)/sym_target
	$(Q)objcopy --strip-all $< $@
$(BUILD)/tests/test_symbols: | $(SYM_TARGETS)
# libstdc++ linked in: operator new in the executable, malloc glibc's (cxx_static.cc)
TARGET_LDLIBS_cxx_static := -static-libstdc++
$(BUILD)/targets/cxx_static: tests/targets/nested_cxx.cc
$(BUILD)/targets/stall_consumer: tests/lib/mt_proc_state.h
# a C program that dlopens a C++ library with RTLD_LOCAL (libstdc++ outside the global scope)
TARGET_LDLIBS_cxx_dlopen := -ldl -Wl,-rpath,'$$ORIGIN'
$(BUILD)/targets/cxx_dlopen: $(BUILD)/targets/libcxx_local.so
$(BUILD)/targets/libcxx_local.so: tests/targets/lib/cxx_local.cc tests/targets/cxx_ops.h \
		tests/targets/expect.h | $(BUILD)
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) -std=gnu++17 -O1 -g -Wall -Wextra -Werror -fno-builtin -fPIC -shared $< -o $@
$(BUILD)/targets/nested_cxx $(BUILD)/targets/cxx_static: tests/targets/cxx_ops.h
TARGET_LDLIBS_dlmopen_alloc := -ldl
# a library with its own operator new/delete, -Bsymbolic-functions (as libLLVM): own calls direct
TARGET_LDLIBS_cxx_own_ops := -L$(BUILD)/targets -lown_ops -Wl,-rpath,'$$ORIGIN'
$(BUILD)/targets/cxx_own_ops: $(BUILD)/targets/libown_ops.so
$(BUILD)/targets/libown_ops.so: tests/targets/lib/own_ops.cc tests/targets/expect.h | $(BUILD)
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) -std=gnu++17 -O2 -g -Wall -Wextra -Werror -fPIC -shared \
		-Wl,-Bsymbolic-functions $< -o $@
# 32-bit builds of alloc_fixed (test_abi32_*: the i386 interposer records the dynamic one;
# memtrack counts what it cannot record),
# where the compiler can link one (gcc-multilib, scripts/deps.sh); the test skips without it.
# (M32_LINKS: the Makefile, where the i386 interposer is built)
ifeq ($(M32_LINKS),1)
all: $(BUILD)/targets/alloc_fixed32 $(BUILD)/targets/alloc_fixed32s
$(BUILD)/targets/alloc_fixed32: tests/targets/alloc_fixed.c tests/targets/expect.h | $(BUILD)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -m32 -std=gnu11 -O1 -g -Wall -Wextra -Werror -fno-builtin $< -o $@
# static: no loader, so no interposer can serve it (counted in drops.abi in every mode)
$(BUILD)/targets/alloc_fixed32s: tests/targets/alloc_fixed.c tests/targets/expect.h | $(BUILD)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -m32 -static -std=gnu11 -O1 -g -Wall -Wextra -Werror -fno-builtin $< -o $@
endif
# the handoff's requests made with the interposer's own code (tests/bpf/test_track_preload.c)
TARGET_LDLIBS_handoff_ask := -Isrc src/preload/preload_handoff.c
$(BUILD)/targets/handoff_ask: src/preload/preload_handoff.c src/preload/shm_abi.h
