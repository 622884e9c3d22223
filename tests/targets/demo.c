// SPDX-License-Identifier: MIT
/* The `make demo` workload: a little of everything memtrack records.
 *   - 1000 small allocations, half freed (a leak of 500 for the summary to find)
 *   - a thread that allocates and frees a 1 MiB buffer
 *   - a forked child that allocates 256 KiB, touches it and exits
 *   - an RSS ramp: 32 MiB touched page by page, held 50 ms, then released */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void *worker(void *arg)
{
	char *p = malloc(1 << 20);

	(void)arg;
	memset(p, 1, 1 << 20);
	free(p);
	return NULL;
}

int main(void)
{
	static void *small[1000];
	struct timespec hold = {0, 50 * 1000 * 1000};
	size_t ramp = 32u << 20;
	pthread_t th;
	char *big;
	pid_t pid;

	for (int i = 0; i < 1000; i++)
		small[i] = malloc(16 + i);
	for (int i = 0; i < 1000; i += 2)
		free(small[i]);

	pthread_create(&th, NULL, worker, NULL);
	pthread_join(th, NULL);

	pid = fork();
	if (pid == 0) {
		char *c = malloc(256 << 10);

		memset(c, 2, 256 << 10);
		free(c);
		_exit(0);
	}
	waitpid(pid, NULL, 0);

	big = mmap(NULL, ramp, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (big == MAP_FAILED)
		return 1;
	for (size_t off = 0; off < ramp; off += 4096)
		big[off] = 1;
	nanosleep(&hold, NULL);
	munmap(big, ramp);
	return 0;
}
