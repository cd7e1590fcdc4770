/* Loads a plugin that uses gloo the way PyTorch does (dlopen RTLD_LOCAL) and runs N collectives
 * through it. Prints {"calls": C}: the real library's count, proving the calls reached it.
 * Usage: gloo_host PLUGIN.so N */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "gloo_host: %s\n", dlerror());
		return 1;
	}
	int (*run)(int) = (int (*)(int))dlsym(h, "plugin_run");
	if (!run)
		return 1;
	int calls = run(atoi(argv[2]));
	printf("{\"calls\": %d}\n", calls);
	return calls < 0;
}
