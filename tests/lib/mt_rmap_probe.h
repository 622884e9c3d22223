/* SPDX-License-Identifier: MIT */
/*
 * Which rmap backend memtrack must pick on this kernel, found independently of its selection
 * code: "fentry" when vmlinux BTF has the folio rmap functions (6.8+) and the kernel loads an
 * fentry program on folio_add_new_anon_rmap, "tracepoint" otherwise. Header-only.
 */
#ifndef MT_TEST_RMAP_PROBE_H
#define MT_TEST_RMAP_PROBE_H

#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

static inline const char *mt_expected_rmap_backend(void)
{
	static const char *const needed[] = {"folio_add_new_anon_rmap", "folio_add_anon_rmap_ptes",
					     "folio_add_file_rmap_ptes", "folio_remove_rmap_ptes"};
	struct bpf_insn prog[] = {
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0},
	    {.code = BPF_JMP | BPF_EXIT},
	};
	struct btf *btf = btf__load_vmlinux_btf();
	int id = -1, fd;

	if (!btf)
		return "tracepoint";
	for (size_t i = 0; i < sizeof(needed) / sizeof(needed[0]); i++) {
		int k = btf__find_by_name_kind(btf, needed[i], BTF_KIND_FUNC);

		if (k <= 0) {
			id = -1;
			break;
		}
		if (i == 0)
			id = k;
	}
	btf__free(btf);
	if (id <= 0)
		return "tracepoint";
	{
		LIBBPF_OPTS(bpf_prog_load_opts, o, .expected_attach_type = BPF_TRACE_FENTRY,
			    .attach_btf_id = id);

		fd = bpf_prog_load(BPF_PROG_TYPE_TRACING, "mt_test", "GPL", prog, 2, &o);
	}
	if (fd < 0)
		return "tracepoint";
	close(fd);
	return "fentry";
}

#endif
