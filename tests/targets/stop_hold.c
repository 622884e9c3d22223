// SPDX-License-Identifier: MIT
/*
 * `stop_hold exec|dlopen`: a process tree that meets a memtrack stop when told to. Reports its
 * pid ("pid"), waits for one byte on stdin (the test stops memtrack first), then forks a child
 * that either execs build/targets/exit_code (beside this binary, an executable memtrack has not
 * inspected: an exec stop) or dlopens libz and looks a symbol up (a dlopen stop). Reports the
 * child's pid ("fork", SIZE = child pid), waits for it and reports "reaped" (SIZE = the
 * child's wait status); exits 0 when the child exited 0.
 */
#include <dlfcn.h>
#include <limits.h>
#include <string.h>
#include <sys/wait.h>
#include "expect.h"

int main(int argc, char **argv)
{
	char self[PATH_MAX], *slash;
	ssize_t n;
	pid_t child;
	void *h;
	int status;
	char c;

	if (argc < 2 || (strcmp(argv[1], "exec") && strcmp(argv[1], "dlopen")))
		return 2;
	mt_expect_init();
	mt_say_fact("pid", 0);
	if (read(0, &c, 1) != 1)
		return 3;
	n = readlink("/proc/self/exe", self, sizeof(self) - sizeof("exit_code"));
	if (n <= 0)
		return 4;
	self[n] = 0;
	slash = strrchr(self, '/');
	if (!slash)
		return 4;
	strcpy(slash + 1, "exit_code");
	child = fork();
	if (child < 0)
		return 5;
	if (child == 0) {
		if (!strcmp(argv[1], "exec")) {
			execl(self, "exit_code", "0", (char *)NULL);
			_exit(126);
		}
		/* the uprobe path stops at dlopen's return, the interposer's at the dlsym */
		h = dlopen("libz.so.1", RTLD_NOW);
		_exit(h && dlsym(h, "zlibVersion") ? 0 : 127);
	}
	mt_say_fact("fork", (uint64_t)child);
	if (waitpid(child, &status, 0) != child)
		return 6;
	mt_say_fact("reaped", (uint64_t)status);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 7;
}
