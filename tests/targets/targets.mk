# Per-target link flags for tests/targets, included by the Makefile (TARGET_LDLIBS_<name>).
TARGET_LDLIBS_alloc_jemalloc := -ljemalloc
TARGET_LDLIBS_alloc_mimalloc := -lmimalloc
TARGET_LDLIBS_alloc_tcmalloc := -ltcmalloc
TARGET_LDLIBS_alloc_static   := -static
# --stacks (stacks.c): no frame pointers, a linked and a dlopen'ed library caller beside it
STACKS_CFLAGS := -O2 -g -fomit-frame-pointer
TARGET_CFLAGS_stacks := $(STACKS_CFLAGS)
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
# expect.h is included by every target; the Makefile's pattern rules do not know that.
$(patsubst tests/targets/%.c,$(BUILD)/targets/%,$(wildcard tests/targets/*.c)) \
$(patsubst tests/targets/%.cc,$(BUILD)/targets/%,$(wildcard tests/targets/*.cc)): \
	tests/targets/expect.h
