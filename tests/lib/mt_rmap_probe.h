/* SPDX-License-Identifier: MIT */
/*
 * Which rmap backend memtrack must pick on this kernel, found independently of its selection
 * code: "fentry" when vmlinux BTF has the folio rmap functions (6.8+) or the page ones (6.1) and
 * the kernel loads an fentry program on the new-anon one, "tracepoint" otherwise. Header-only.
 */
#ifndef MT_TEST_RMAP_PROBE_H
#define MT_TEST_RMAP_PROBE_H

#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

static inline int mt_btf_all_funcs(const struct btf *btf, const char *const *names, size_t n)
{
	int first = 0;

	for (size_t i = 0; i < n; i++) {
		int k = btf__find_by_name_kind(btf, names[i], BTF_KIND_FUNC);

		if (k <= 0)
			return 0;
		if (i == 0)
			first = k;
	}
	return first;
}

static inline const char *mt_expected_rmap_backend(void)
{
	/* the folio API (6.8+), or the page API (6.1), whole */
	static const char *const folio[] = {"folio_add_new_anon_rmap", "folio_add_anon_rmap_ptes",
					    "folio_add_file_rmap_ptes", "folio_remove_rmap_ptes"};
	static const char *const page[] = {"page_add_new_anon_rmap", "page_add_anon_rmap",
					   "page_add_file_rmap", "page_remove_rmap"};
	struct bpf_insn prog[] = {
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0},
	    {.code = BPF_JMP | BPF_EXIT},
	};
	struct btf *btf = btf__load_vmlinux_btf();
	int id, fd;

	if (!btf)
		return "tracepoint";
	id = mt_btf_all_funcs(btf, folio, 4);
	if (!id)
		id = mt_btf_all_funcs(btf, page, 4);
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
