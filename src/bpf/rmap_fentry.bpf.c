// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * rmap mode, fentry backend (Linux 6.8+ kernels that load BPF tracing programs): an Rmap record
 * for every call of the kernel's folio reverse-map functions on a tracked mm, with the exact
 * page count and address. Every program here is autoload=false unless user space selected this
 * backend (src/track/rmap_backend.c), and each one only when its function is in vmlinux BTF.
 *
 * Ownership comes from the mm (vma->vm_mm -> mm_owner -> procs, checked against the mm the
 * process holds now), never from the current task: kswapd, a process_madvise() caller or a
 * parent at fork act on other processes' memory.
 *
 * Member, as the kernel's mm_counter() picks the rss counter the caller changes with the same
 * call: anon when folio->mapping has PAGE_MAPPING_ANON (bit 0; KSM folios too), else shmem when
 * the folio is swap-backed (mm_counter_file()), else file. Per process and member, the sum of
 * the deltas then moves with rss_stat. The anon-add functions are anon by definition: a new
 * folio only becomes anon inside them, after fentry.
 *
 * Address: the anon adds pass it; elsewhere it is the kernel's own vma_address(): vm_start +
 * ((folio->index + page's offset in the folio - vm_pgoff) << PAGE_SHIFT), valid for file and
 * anon folios alike (an anon folio's index is its linear index in the vma, kept across mremap),
 * and 0 when it falls outside the vma (KSM pages).
 */
#include "bpf/maps.bpf.h"
#include "bpf/rss.bpf.h" /* mt_ptr_value */

#define MT_PF_EXITING 0x00000004 /* task_struct.flags: in do_exit() (include/linux/sched.h) */

/* Linux < 6.3 kept a large folio's order in a byte of its own. */
struct folio___order_byte {
	unsigned char _folio_order;
} __attribute__((preserve_access_index));

/* The first word of struct page (and so of a folio) is its flags on every kernel; 6.18 wraps it
 * in memdesc_flags_t, so read the word rather than a typed field. */
static __always_inline __u64 mt_folio_flags(struct folio *folio)
{
	__u64 flags = 0;

	bpf_probe_read_kernel(&flags, sizeof(flags), folio);
	return flags;
}

/* folio_nr_pages(): 1, or 1 << order for a large folio (PG_head set on its first page). */
static __always_inline __s64 mt_folio_nr_pages(struct folio *folio)
{
	__u64 flags = mt_folio_flags(folio), flags1 = 0;
	__u32 order;

	if (!(flags & (1ull << bpf_core_enum_value(enum pageflags, PG_head))))
		return 1;
	if (bpf_core_field_exists(struct folio___order_byte, _folio_order)) {
		order = BPF_CORE_READ((struct folio___order_byte *)folio, _folio_order);
	} else {
		/* 6.3+: folio_order() is the low byte of the second page's flags */
		bpf_core_read(&flags1, sizeof(flags1), &folio->_flags_1);
		order = flags1 & 0xff;
	}
	return order < 31 ? 1ll << order : 1;
}

static __always_inline __u32 mt_folio_member(struct folio *folio)
{
	__u64 mapping = (__u64)BPF_CORE_READ(folio, mapping);

	if (mapping & 1) /* PAGE_MAPPING_ANON */
		return MT_RSS_ANON;
	if (mt_folio_flags(folio) & (1ull << bpf_core_enum_value(enum pageflags, PG_swapbacked)))
		return MT_RSS_SHMEM;
	return MT_RSS_FILE;
}

/* vma_address() of `page` (a page of `folio`), or 0 when it is not inside the vma. */
static __always_inline __u64 mt_page_addr(struct folio *folio, struct page *page,
					  struct vm_area_struct *vma)
{
	__u64 index = BPF_CORE_READ(folio, index), pgoff = BPF_CORE_READ(vma, vm_pgoff);
	__u64 start = BPF_CORE_READ(vma, vm_start), end = BPF_CORE_READ(vma, vm_end), addr;
	__u64 page_size = bpf_core_type_size(struct page);

	if (page && page_size)
		/* as numbers: the verifier refuses arithmetic between a BTF pointer and a computed
		 * one (6.1's compound head) */
		index += (mt_ptr_value(page) - mt_ptr_value(folio)) / page_size;
	if (index < pgoff)
		return 0;
	addr = start + ((index - pgoff) << mt_page_shift);
	return addr >= start && addr < end ? addr : 0;
}

/*
 * One Rmap record: `nr` pages (negative: removed) of `folio` from `page` on, mapped into `vma`
 * at `addr` (0: computed from the page). The owner lookup comes first: it is the only cost paid
 * for the machine's other processes.
 */
static __always_inline void mt_rmap_fentry(struct folio *folio, struct page *page,
					   struct vm_area_struct *vma, __u64 addr, __s64 nr,
					   bool anon)
{
	__u64 mm = (__u64)BPF_CORE_READ(vma, vm_mm), id = mt_current_ids();
	__u32 *owner = bpf_map_lookup_elem(&mm_owner, &mm);
	struct task_struct *cur;
	struct mt_event *e;
	struct mt_proc *p;
	bool locked = false;
	__u32 tgid, m;

	if (!owner)
		return;
	tgid = *owner;
	p = bpf_map_lookup_elem(&procs, &tgid);
	if (!p || p->mm != mm || !nr)
		return;
	/* Another task acting on this mm (kswapd reclaiming, process_madvise) races with the
	 * owner's exit: its check above may pass just before the Exit is written, its record
	 * land after it. The Exit is written, and the mm let go, under the process's lock: take
	 * it and check again, so a record is before the Exit or not at all. So does an exiting
	 * thread of the owner: the Exit is written by the last thread to leave, which is not
	 * always the one that tears the mm down (a thread that left earlier may still be in
	 * exit_mmap). The owner's running threads need not: their records all precede it. */
	cur = (struct task_struct *)bpf_get_current_task();
	if (id >> 32 != tgid || (BPF_CORE_READ(cur, flags) & MT_PF_EXITING)) {
		locked = mt_proc_lock(tgid);
		/* Checked again even when the lock was not had: the Exit deletes the process
		 * after letting go of the mm (then the lock is never had again), and a holder
		 * may stall past the wait. Without the lock the check narrows the race to
		 * itself; without the check, a record came after the Exit ("Rmap ... after its
		 * Exit", 1 run in 25 of test_track_rss_folds in the 6.1 guest). A plain read:
		 * an exiting process's teardown passes here once per record. */
		if (*(volatile __u64 *)&p->mm != mm) {
			if (locked)
				mt_proc_unlock(p);
			return;
		}
	}
	e = mt_reserve(MT_EV_RMAP, tgid, (__u32)id);
	if (e) {
		/* the anon-add functions change MM_ANONPAGES; a new anon folio (or a swap-cache
		 * page mapped the first time) only becomes anon inside them, after fentry */
		m = anon ? MT_RSS_ANON : mt_folio_member(folio);
		e->aux = m;
		e->addr =
		    addr ? addr & ~((1ull << mt_page_shift) - 1) : mt_page_addr(folio, page, vma);
		e->size = (__u64)nr;
		mt_submit(e, false);
		if (m < MT_RSS_NR) /* the exit's close-out (mt_rss_set) */
			__sync_fetch_and_add(&p->rmap_sum[m], nr);
	}
	if (locked)
		mt_proc_unlock(p);
}

/* folio_add_new_anon_rmap(folio, vma, address[, flags]): a new anon folio, all of it mapped
 * (a pmd-mapped THP included); address is where its first page goes. */
SEC("fentry/folio_add_new_anon_rmap")
int BPF_PROG(mt_fentry_add_new_anon, struct folio *folio, struct vm_area_struct *vma,
	     unsigned long address)
{
	mt_rmap_fentry(folio, NULL, vma, address, mt_folio_nr_pages(folio), true);
	return 0;
}

/* folio_add_anon_rmap_ptes(folio, page, nr_pages, vma, address, flags): swap-in, migration */
SEC("fentry/folio_add_anon_rmap_ptes")
int BPF_PROG(mt_fentry_add_anon_ptes, struct folio *folio, struct page *page, int nr_pages,
	     struct vm_area_struct *vma, unsigned long address)
{
	mt_rmap_fentry(folio, page, vma, address, nr_pages, true);
	return 0;
}

/* folio_add_anon_rmap_pmd(folio, page, vma, address, flags): the whole folio, one pmd */
SEC("fentry/folio_add_anon_rmap_pmd")
int BPF_PROG(mt_fentry_add_anon_pmd, struct folio *folio, struct page *page,
	     struct vm_area_struct *vma, unsigned long address)
{
	mt_rmap_fentry(folio, page, vma, address, mt_folio_nr_pages(folio), true);
	return 0;
}

/* folio_add_file_rmap_ptes(folio, page, nr_pages, vma): file and shmem faults, fault-around */
SEC("fentry/folio_add_file_rmap_ptes")
int BPF_PROG(mt_fentry_add_file_ptes, struct folio *folio, struct page *page, int nr_pages,
	     struct vm_area_struct *vma)
{
	mt_rmap_fentry(folio, page, vma, 0, nr_pages, false);
	return 0;
}

SEC("fentry/folio_add_file_rmap_pmd")
int BPF_PROG(mt_fentry_add_file_pmd, struct folio *folio, struct page *page,
	     struct vm_area_struct *vma)
{
	mt_rmap_fentry(folio, page, vma, 0, mt_folio_nr_pages(folio), false);
	return 0;
}

SEC("fentry/folio_add_file_rmap_pud")
int BPF_PROG(mt_fentry_add_file_pud, struct folio *folio, struct page *page,
	     struct vm_area_struct *vma)
{
	mt_rmap_fentry(folio, page, vma, 0, mt_folio_nr_pages(folio), false);
	return 0;
}

/* folio_remove_rmap_ptes(folio, page, nr_pages, vma): zap (munmap, MADV_DONTNEED, exit),
 * reclaim, migration, COW of the old page */
SEC("fentry/folio_remove_rmap_ptes")
int BPF_PROG(mt_fentry_remove_ptes, struct folio *folio, struct page *page, int nr_pages,
	     struct vm_area_struct *vma)
{
	mt_rmap_fentry(folio, page, vma, 0, -(__s64)nr_pages, false);
	return 0;
}

SEC("fentry/folio_remove_rmap_pmd")
int BPF_PROG(mt_fentry_remove_pmd, struct folio *folio, struct page *page,
	     struct vm_area_struct *vma)
{
	mt_rmap_fentry(folio, page, vma, 0, -mt_folio_nr_pages(folio), false);
	return 0;
}

SEC("fentry/folio_remove_rmap_pud")
int BPF_PROG(mt_fentry_remove_pud, struct folio *folio, struct page *page,
	     struct vm_area_struct *vma)
{
	mt_rmap_fentry(folio, page, vma, 0, -mt_folio_nr_pages(folio), false);
	return 0;
}

/*
 * Linux < 6.8 (6.1): the page_* API, one page or one compound page (a THP) per call. A page's
 * folio is its compound head (compound_head's bit 0 marks a tail page). hugetlb pages go
 * through page_remove_rmap() too but are added elsewhere and counted outside rss_stat: skipped.
 */
#define MT_RMAP_COMPOUND (1u << 1) /* rmap_t, 6.1 */
#define MT_VM_HUGETLB	 0x00400000ul

static __always_inline struct folio *mt_page_folio(struct page *page)
{
	__u64 head = BPF_CORE_READ(page, compound_head);

	return (struct folio *)(head & 1 ? head - 1 : (__u64)page);
}

/* nr pages of a call on `page`: the compound page's when `compound`, else one */
static __always_inline __s64 mt_page_nr(struct folio *folio, bool compound)
{
	return compound ? mt_folio_nr_pages(folio) : 1;
}

/* page_add_new_anon_rmap(page, vma, address): a new anon page, a THP's head included */
SEC("fentry/page_add_new_anon_rmap")
int BPF_PROG(mt_fentry_page_add_new_anon, struct page *page, struct vm_area_struct *vma,
	     unsigned long address)
{
	struct folio *folio = mt_page_folio(page);

	mt_rmap_fentry(folio, page, vma, address, mt_folio_nr_pages(folio), true);
	return 0;
}

/* page_add_anon_rmap(page, vma, address, flags): swap-in, migration, THP split */
SEC("fentry/page_add_anon_rmap")
int BPF_PROG(mt_fentry_page_add_anon, struct page *page, struct vm_area_struct *vma,
	     unsigned long address, unsigned int flags)
{
	struct folio *folio = mt_page_folio(page);

	mt_rmap_fentry(folio, page, vma, address, mt_page_nr(folio, flags & MT_RMAP_COMPOUND),
		       true);
	return 0;
}

/* page_add_file_rmap(page, vma, compound) */
SEC("fentry/page_add_file_rmap")
int BPF_PROG(mt_fentry_page_add_file, struct page *page, struct vm_area_struct *vma, bool compound)
{
	struct folio *folio = mt_page_folio(page);

	mt_rmap_fentry(folio, page, vma, 0, mt_page_nr(folio, compound), false);
	return 0;
}

/* page_remove_rmap(page, vma, compound) */
SEC("fentry/page_remove_rmap")
int BPF_PROG(mt_fentry_page_remove, struct page *page, struct vm_area_struct *vma, bool compound)
{
	struct folio *folio = mt_page_folio(page);

	if (BPF_CORE_READ(vma, vm_flags) & MT_VM_HUGETLB)
		return 0;
	mt_rmap_fentry(folio, page, vma, 0, -mt_page_nr(folio, compound), false);
	return 0;
}

/*
 * Linux < 6.2 (SPLIT_RSS_COUNTING): a task keeps up to 64 counter changes of its own mm in
 * task->rss_stat before folding them into the mm. At exec, the pages the new image mapped
 * after the switch to the new mm are still there, so the exec seed (read from the mm) misses
 * them: carry them as one more addr-0 record per member. Out of line: the field's relocation
 * fails on later kernels, and the verifier must not see it inlined (see rss.bpf.h).
 */
struct task_rss_stat___old {
	int events;
	int count[MT_RSS_NR];
} __attribute__((preserve_access_index));

struct task_struct___rss_cache {
	struct task_rss_stat___old rss_stat;
} __attribute__((preserve_access_index));

static __noinline int mt_task_rss_cached(struct task_struct *task, __u32 member)
{
	struct task_struct___rss_cache *t = (void *)task;
	int v = 0;

	if (member < MT_RSS_NR)
		bpf_core_read(&v, sizeof(v), &t->rss_stat.count[member]);
	return v;
}

/* sched_process_exec(task, old_pid, bprm): only with the page_* programs (6.1) */
SEC("raw_tp/sched_process_exec")
int BPF_PROG(mt_fentry_exec_cached, struct task_struct *task)
{
	__u32 tgid = (__u32)(mt_current_ids() >> 32);

	struct mt_proc *p;

	if (!bpf_core_field_exists(struct task_struct___rss_cache, rss_stat))
		return 0;
	p = bpf_map_lookup_elem(&procs, &tgid);
	if (!p)
		return 0;
	for (__u32 m = 0; m < MT_RSS_NR; m++) {
		int n = mt_task_rss_cached(task, m);
		struct mt_event *e;

		if (!n || m == MT_RSS_SWAP)
			continue;
		e = mt_reserve(MT_EV_RMAP, tgid, (__u32)mt_current_ids());
		if (!e)
			return 0;
		e->aux = m;
		e->size = (__u64)(__s64)n;
		mt_submit(e, false);
		__sync_fetch_and_add(&p->rmap_sum[m], n);
	}
	return 0;
}
