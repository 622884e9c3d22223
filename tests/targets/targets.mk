# Per-target link flags for tests/targets, included by the Makefile (TARGET_LDLIBS_<name>).
TARGET_LDLIBS_alloc_jemalloc := -ljemalloc
TARGET_LDLIBS_alloc_mimalloc := -lmimalloc
TARGET_LDLIBS_alloc_tcmalloc := -ltcmalloc
TARGET_LDLIBS_alloc_static   := -static
TARGET_LDLIBS_alloc_jemalloc_exe := -Wl,-Bstatic -ljemalloc -Wl,-Bdynamic -lstdc++ -lm -ldl
# expect.h is included by every target; the Makefile's pattern rules do not know that.
$(patsubst tests/targets/%.c,$(BUILD)/targets/%,$(wildcard tests/targets/*.c)) \
$(patsubst tests/targets/%.cc,$(BUILD)/targets/%,$(wildcard tests/targets/*.cc)): \
	tests/targets/expect.h
$(BUILD)/targets/alloc_jemalloc_exe: tests/targets/alloc_jemalloc.c
