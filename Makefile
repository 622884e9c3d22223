# memtrack: bootstrap-style build. Intermediates in .output/, binaries in build/. `make V=1` shows commands.
OUTPUT   ?= .output
BUILD    ?= build
PREFIX   ?= /usr/local
VERSION  := 0.1.0

CC       ?= gcc
CXX      ?= g++
CLANG    ?= clang
BPFTOOL  ?= bpftool
ARCH     := $(shell uname -m | sed 's/x86_64/x86/;s/aarch64/arm64/')

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -DMEMTRACK_VERSION='"$(VERSION)"' \
	    -Isrc -I$(OUTPUT) -MMD -MP
LDLIBS   := -lbpf -ldw -lelf -liberty -lcapstone -lz -lzstd -lmsgpackc -ljansson -lpthread -lm
# memtrack itself takes these libraries from their static archives (the -dev packages ship them),
# libc stays shared: mapping and binding ten shared libraries cost ~1 ms of every run's start-up
# (`memtrack --version` 2.7 -> 1.8 ms; `track -- /bin/true` 0.90-0.95x the wall time, 40
# interleaved pairs). DYNAMIC_DEPS=1 links them shared. Tests and tools link them shared.
# memtrack is linked as a position-dependent executable: as PIE its ~3,800 relative relocations
# were applied at every start, writing ~15 pages of data (each a trapped page fault on this VM)
# before main; `track -- /bin/true` -1.8 ms wall, -1.4 ms CPU (back-to-back series, 12 blocks).
# The price: memtrack's own code at a fixed address (libraries, heap and stacks still move).
MEMTRACK_LDFLAGS := -no-pie
ifeq ($(DYNAMIC_DEPS),1)
MEMTRACK_LDLIBS := $(LDLIBS)
else
MEMTRACK_LDLIBS := -Wl,-Bstatic -lbpf -ldw -lelf -liberty -lcapstone -lz -lzstd -lmsgpackc -ljansson \
		   -llzma -lbz2 -Wl,-Bdynamic -lpthread -lm
endif
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -I$(OUTPUT) -Isrc -Wall -Werror

# --- sources -------------------------------------------------------------------------------------
# process.bpf.c defines the shared maps; libbpf 1.1's linker wants the definitions first.
BPF_SRCS  := src/bpf/process.bpf.c $(filter-out src/bpf/process.bpf.c,$(sort $(wildcard src/bpf/*.bpf.c)))
BPF_OBJS  := $(patsubst src/bpf/%.bpf.c,$(OUTPUT)/bpf/%.bpf.o,$(BPF_SRCS))
SKEL      := $(OUTPUT)/memtrack.skel.h
OBJ_ID    := $(OUTPUT)/memtrack.obj_id.h
# Everything but the entry points goes into one archive, so unit tests link what they use.
LIB_SRCS  := $(sort $(wildcard src/acct/*.c src/artifact/*.c src/report/*.c src/track/*.c src/common/*.c src/stacks/*.c src/symbols/*.c) \
	       $(filter-out src/cli/main.c,$(wildcard src/cli/*.c)))
LIB_OBJS  := $(patsubst %.c,$(OUTPUT)/%.o,$(LIB_SRCS))
LIB       := $(OUTPUT)/libmemtrack.a
BENCH_SRCS := $(sort $(filter-out bench/main.c,$(wildcard bench/*.c)))
BENCH_OBJS := $(patsubst %.c,$(OUTPUT)/%.o,$(BENCH_SRCS))
BENCH_LIB := $(OUTPUT)/libbench.a
# memtrack-floor: its own BPF object and skeleton (bench/floor/), memtrack's attach code.
FLOOR_SKEL := $(OUTPUT)/floor.skel.h
# memtrack-bench-consumer: the consumer and sinks fed from memory (no BPF); not installed.
BCONS_SRCS := $(sort $(wildcard bench/consumer/*.c))
BCONS_OBJS := $(patsubst %.c,$(OUTPUT)/%.o,$(BCONS_SRCS))
UNIT_SRCS := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
ROOT_SRCS := $(sort $(wildcard tests/bpf/test_*.c))
ROOT_BINS := $(patsubst tests/bpf/%.c,$(BUILD)/tests/%,$(ROOT_SRCS))
TESTLIB_SRCS := $(sort $(wildcard tests/lib/*.c))
TESTLIB_OBJS := $(patsubst %.c,$(OUTPUT)/%.o,$(TESTLIB_SRCS))
TARGET_C  := $(sort $(wildcard tests/targets/*.c))
TARGET_CC := $(sort $(wildcard tests/targets/*.cc))
# The interposer (LD_PRELOAD): position-independent, no allocation through libc builtins
# (-fno-builtin: gcc would turn malloc+memset into calloc, i.e. into us), initial-exec TLS,
# unwind tables so that operator new can throw through it (no -fexceptions: no libgcc_s, whose
# presence would change what pthread_exit loads).
PRELOAD_SRCS := $(sort $(wildcard src/preload/*.c))
PRELOAD_OBJS := $(patsubst %.c,$(OUTPUT)/pic/%.o,$(PRELOAD_SRCS))
PRELOAD      := $(BUILD)/libmemtrack-preload.so
PRELOAD_CFLAGS := -O2 -g -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -Isrc -MMD -MP -fPIC \
	    -fvisibility=hidden -fno-builtin -fasynchronous-unwind-tables -ftls-model=initial-exec \
	    -fno-stack-protector
TARGETS   := $(patsubst tests/targets/%.c,$(BUILD)/targets/%,$(TARGET_C)) \
	     $(patsubst tests/targets/%.cc,$(BUILD)/targets/%,$(TARGET_CC))

.PHONY: all clean deps demo check check-unit check-root check-repeat check-vm bench bench-consumer install \
	format
all: $(BUILD)/memtrack $(PRELOAD) $(BUILD)/memtrack-bench $(BUILD)/memtrack-floor \
	$(BUILD)/memtrack-bench-consumer $(TARGETS) $(BUILD)/tests/libmt_count.so

deps:
	$(Q)scripts/deps.sh

# --- BPF -------------------------------------------------------------------------------------------
$(OUTPUT)/vmlinux.h: | $(OUTPUT)
	$(call msg,GEN,$@)
	$(Q)$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

$(OUTPUT)/bpf/%.bpf.o: src/bpf/%.bpf.c src/bpf/events.h $(wildcard src/bpf/*.h) $(OUTPUT)/vmlinux.h
	$(call msg,BPF,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

# One linked object: the files share maps through `extern` declarations (see src/bpf/maps.bpf.h).
$(OUTPUT)/memtrack.bpf.o: $(BPF_OBJS)
	$(call msg,BPFLINK,$@)
	$(Q)$(BPFTOOL) gen object $@ $^

$(SKEL): $(OUTPUT)/memtrack.bpf.o
	$(call msg,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name memtrack_bpf > $@.tmp && mv $@.tmp $@

# The object's identity for the kept programs' key (src/track/tracker_kept.c): the skeleton
# embeds these very bytes, and a run that takes a kept load then never reads them (~60 pages).
$(OBJ_ID): $(OUTPUT)/memtrack.bpf.o
	$(call msg,GEN,$@)
	$(Q)printf '#define MEMTRACK_OBJ_ID 0x%sull\n' "$$(sha256sum $< | cut -c1-16)" > $@.tmp && \
	    mv $@.tmp $@

$(OUTPUT)/bench/floor/floor.bpf.o: bench/floor/floor.bpf.c $(OUTPUT)/vmlinux.h
	$(call msg,BPF,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(FLOOR_SKEL): $(OUTPUT)/bench/floor/floor.bpf.o
	$(call msg,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name floor_bpf > $@.tmp && mv $@.tmp $@

# --- user space ------------------------------------------------------------------------------------
$(OUTPUT)/%.o: %.c | $(OUTPUT)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

# Files under src/track include the skeleton, and so do some tests (test_btf, test_btf_core): without
# this, `make -j2 check` in a fresh clone could compile them before the skeleton exists.
$(patsubst %.c,$(OUTPUT)/%.o,$(wildcard src/track/*.c src/cli/*.c) $(UNIT_SRCS) $(ROOT_SRCS) \
	$(TESTLIB_SRCS)): $(SKEL) $(OBJ_ID)

# test_usdt has probes of the header users include (<memtrack.h>, installed from include/).
$(OUTPUT)/tests/unit/test_usdt.o: CFLAGS += -Iinclude
$(OUTPUT)/tests/unit/test_usdt.o: include/memtrack.h

$(OUTPUT)/pic/%.o: %.c | $(OUTPUT)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(PRELOAD_CFLAGS) -c $< -o $@

$(PRELOAD): $(PRELOAD_OBJS) src/preload/preload.map | $(BUILD)
	$(call msg,LINK,$@)
	$(Q)$(CC) -shared -Wl,-z,now -Wl,-z,relro -Wl,--no-undefined \
		-Wl,--version-script=src/preload/preload.map $(PRELOAD_OBJS) -o $@ -ldl -lpthread

# The i386 interposer, for 32-bit programs (memtrack puts its name in their LD_PRELOAD at their
# exec stop: src/track/abi32.c), where the compiler can link 32-bit code (gcc-multilib,
# scripts/deps.sh). Its name has the 64-bit one's length (the environment is rewritten in
# place) and is found beside it.
M32_LINKS := $(shell echo 'int main(void){return 0;}' | $(CC) -m32 -x c - -o /dev/null 2>/dev/null && echo 1)
PRELOAD32 := $(BUILD)/libmemtrack-preld32.so
PRELOAD32_OBJS := $(patsubst %.c,$(OUTPUT)/pic32/%.o,$(PRELOAD_SRCS))
ifeq ($(M32_LINKS),1)
all: $(PRELOAD32)
endif

$(OUTPUT)/pic32/%.o: %.c | $(OUTPUT)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -m32 $(PRELOAD_CFLAGS) -c $< -o $@

$(PRELOAD32): $(PRELOAD32_OBJS) src/preload/preload.map | $(BUILD)
	$(call msg,LINK,$@)
	$(Q)$(CC) -m32 -shared -Wl,-z,now -Wl,-z,relro -Wl,--no-undefined \
		-Wl,--version-script=src/preload/preload.map $(PRELOAD32_OBJS) -o $@ -ldl -lpthread

$(LIB): $(LIB_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BENCH_LIB): $(BENCH_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/memtrack: $(OUTPUT)/src/cli/main.o $(LIB) | $(BUILD)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) $(MEMTRACK_LDFLAGS) $^ $(MEMTRACK_LDLIBS) -o $@

$(BUILD)/memtrack-bench: $(OUTPUT)/bench/main.o $(BENCH_LIB) $(LIB) | $(BUILD)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) $^ $(LDLIBS) -lyaml -o $@

$(BUILD)/memtrack-bench-consumer: $(BCONS_OBJS) $(LIB) | $(BUILD)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(OUTPUT)/bench/floor/main.o: $(FLOOR_SKEL)

$(BUILD)/memtrack-floor: $(OUTPUT)/bench/floor/main.o $(LIB) | $(BUILD)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/tests/%: $(OUTPUT)/tests/unit/%.o $(TESTLIB_OBJS) $(BENCH_LIB) $(LIB)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(LDFLAGS) $^ $(LDLIBS) -lyaml -lcmocka -o $@

$(ROOT_BINS): $(BUILD)/tests/%: $(OUTPUT)/tests/bpf/%.o $(TESTLIB_OBJS) $(LIB)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(LDFLAGS) $^ $(LDLIBS) -lcmocka -o $@

# Test workloads: small, unoptimised enough that the compiler keeps every allocation.
$(BUILD)/targets/%: tests/targets/%.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -std=gnu11 -O1 -g -Wall -Wextra -Werror -fno-builtin -pthread $(TARGET_CFLAGS_$*) $< -o $@ \
		$(TARGET_LDLIBS_$*)

$(BUILD)/targets/%: tests/targets/%.cc | $(BUILD)
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) -std=gnu++17 -O1 -g -Wall -Wextra -Werror -fno-builtin -pthread $< -o $@ $(TARGET_LDLIBS_$*)

# An independent LD_PRELOAD counter of allocator calls (tests/preload/mt_count.c), to check
# memtrack against on real programs.
$(BUILD)/tests/libmt_count.so: tests/preload/mt_count.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Werror -fPIC -shared -pthread $< -o $@ -ldl

# Per-target link flags (allocator libraries, static builds).
-include tests/targets/targets.mk

$(OUTPUT) $(BUILD):
	$(Q)mkdir -p $@

# --- user-facing jobs -------------------------------------------------------------------------------
DEMO_OUT ?= $(BUILD)/demo
demo: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)scripts/demo.sh $(BUILD) $(DEMO_OUT)

check: deps
	$(Q)$(MAKE) --no-print-directory all $(UNIT_BINS) $(ROOT_BINS)
	$(Q)scripts/run-tests.sh $(BUILD) $(UNIT_BINS) -- $(ROOT_BINS)

check-unit: deps
	$(Q)$(MAKE) --no-print-directory all $(UNIT_BINS)
	$(Q)scripts/run-tests.sh $(BUILD) $(UNIT_BINS) --

check-root: deps
	$(Q)$(MAKE) --no-print-directory all $(ROOT_BINS)
	$(Q)scripts/run-tests.sh $(BUILD) -- $(ROOT_BINS)

# The unit and root tests N times in a row (default 20), stopping at the first failure: a test that
# fails one run in ten is a defect (DEVGUIDE). Prints a line per round and the usual closing line.
N ?= 20
check-repeat: deps
	$(Q)$(MAKE) --no-print-directory all $(UNIT_BINS) $(ROOT_BINS)
	$(Q)scripts/run-tests.sh --repeat $(N) $(BUILD) $(UNIT_BINS) -- $(ROOT_BINS)

# --- root tests in other kernels (scripts/vm): Debian cloud kernels under qemu ---------------------
VM_KERNELS ?= 6.12 6.1
check-vm:
	$(Q)scripts/deps.sh vm
	$(Q)$(MAKE) --no-print-directory all $(ROOT_BINS)
	$(Q)BUILD=$(BUILD) VM_KERNELS="$(VM_KERNELS)" scripts/vm/check.sh

bench: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)scripts/bench.sh $(BUILD)

bench-consumer: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)BENCH_CONFIG=benchmarks/consumer.yml scripts/bench.sh $(BUILD)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0755 $(BUILD)/memtrack $(BUILD)/memtrack-bench $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(PREFIX)/lib/memtrack
	install -m 0644 $(PRELOAD) $(DESTDIR)$(PREFIX)/lib/memtrack/
	if [ -f $(PRELOAD32) ]; then install -m 0644 $(PRELOAD32) $(DESTDIR)$(PREFIX)/lib/memtrack/; fi
	install -m 0644 docs/memtrack.1 docs/memtrack-bench.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -d $(DESTDIR)$(PREFIX)/include
	install -m 0644 include/memtrack.h $(DESTDIR)$(PREFIX)/include/

format:
	clang-format -i $(shell find src bench tests -name '*.[ch]' -o -name '*.cc')

clean:
	rm -rf $(OUTPUT) $(BUILD)

-include $(shell find $(OUTPUT) -name '*.d' 2>/dev/null)
