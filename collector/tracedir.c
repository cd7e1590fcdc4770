/* The trace files of a directory, as the commands name them. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "trace.h"

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int trace_list(const char *path, char ***out)
{
	struct stat st;
	*out = NULL;
	if (stat(path, &st) < 0)
		return -1;
	if (!S_ISDIR(st.st_mode)) {
		*out = malloc(sizeof(char *));
		if (!*out)
			return -1;
		(*out)[0] = strdup(path);
		return 1;
	}
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int n = 0;
	size_t cap = 0;
	char **list = NULL;
	struct dirent *de;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		if (l < 8 || strcmp(de->d_name + l - 7, ".ddpspy"))
			continue;
		char **nl = room_for(list, (size_t)n, &cap, sizeof *nl, 16);
		if (!nl)
			break;
		list = nl;
		size_t pl = strlen(path) + l + 2;
		list[n] = malloc(pl);
		if (!list[n])
			break;
		snprintf(list[n++], pl, "%s/%s", path, de->d_name);
	}
	closedir(d);
	sort_n(list, (size_t)n, sizeof *list, cmp_str);
	*out = list;
	return n;
}

void trace_free_list(char **list, int n)
{
	for (int i = 0; i < n; i++)
		free(list[i]);
	free(list);
}
