# Per-target link flags for tests/targets, included by the Makefile (TARGET_LDLIBS_<name>).
TARGET_LDLIBS_alloc_jemalloc := -ljemalloc
TARGET_LDLIBS_alloc_mimalloc := -lmimalloc
TARGET_LDLIBS_alloc_tcmalloc := -ltcmalloc
TARGET_LDLIBS_alloc_static   := -static
# expect.h is included by every target; the Makefile's pattern rules do not know that.
$(patsubst tests/targets/%.c,$(BUILD)/targets/%,$(wildcard tests/targets/*.c)) \
$(patsubst tests/targets/%.cc,$(BUILD)/targets/%,$(wildcard tests/targets/*.cc)): \
	tests/targets/expect.h
# The windowed target includes the installed header from the tree.
TARGET_LDLIBS_windowed := -Iinclude
$(BUILD)/targets/windowed: include/memtrack.h
TARGET_LDLIBS_window_cost := -Iinclude -O2
$(BUILD)/targets/window_cost: include/memtrack.h
