/* A program that looks like CPython to ddpspy's reader of Python frames (preload/pyframes.c):
 * it exports the symbols the reader looks for and builds, in its own memory, the thread state,
 * frames, code objects and strings of CPython 3.11's layout, then blocks (usleep) with them in
 * place. The ground truth of what the reader must record, or that it must record nothing.
 *
 * usage: fakepy MODE [N]   (built as fakepy, CPython 3.11; fakepy314 says 3.14)
 *   crafted: two frames with known files, functions and lines; prints them as JSON
 *   broken:  N sleeps, each after one field of that state was broken (a wrong type, a length, a
 *            string with a control byte, a pointer to unmapped memory, a frame that is its own
 *            caller, random bytes): prints which sleep had which fault
 *   unmapped: the thread state in a page unmapped before the sleeps
 *   none:    no thread state (before Py_Initialize) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef PY_MINOR
#define PY_MINOR 11
#endif
const unsigned long Py_Version = 0x030000f0ul | (unsigned long)PY_MINOR << 16 | 2ul << 8;
char PyCode_Type[64], PyUnicode_Type[64], PyBytes_Type[64];
static void *tstate;

int Py_IsInitialized(void)
{
	return tstate != NULL;
}

void *PyGILState_GetThisThreadState(void)
{
	return tstate;
}

/* CPython 3.11's offsets, as pyframes.c has them */
enum { TS_CFRAME = 56, CF_CURRENT = 8, FR_CODE = 32, FR_PREV = 48, FR_INSTR = 56, FR_OWNER = 69,
       CO_FIRST = 72, CO_FILE = 112, CO_QUAL = 128, CO_TABLE = 136, CO_TRACEABLE = 168, CO_CODE = 184 };

static void put64(void *base, size_t off, uint64_t v)
{
	memcpy((char *)base + off, &v, 8);
}

static void put32(void *base, size_t off, uint32_t v)
{
	memcpy((char *)base + off, &v, 4);
}

/* an ASCII str object (PyASCIIObject: length at 16, state at 32, text at 48) */
static void *mkstr(const char *text)
{
	size_t n = strlen(text);
	char *o = calloc(1, 48 + n + 1);
	put64(o, 8, (uintptr_t)PyUnicode_Type);
	put64(o, 16, n);
	put32(o, 32, 1u << 2 | 1u << 5 | 1u << 6 | 1u << 7); /* kind 1, compact, ascii, ready */
	memcpy(o + 48, text, n);
	return o;
}

/* a bytes object (size at 16, data at 32) */
static void *mkbytes(const unsigned char *b, size_t n)
{
	char *o = calloc(1, 32 + n + 1);
	put64(o, 8, (uintptr_t)PyBytes_Type);
	put64(o, 16, n);
	memcpy(o + 32, b, n);
	return o;
}

/* A location table (Objects/locations.md) from line 10: units 0-3 line 12 (code 13: no columns,
 * delta +2), units 4-5 line 12 (code 10: one line, delta 0, two column bytes), units 6-7 line 13
 * (code 11, delta +1), unit 8 no line (code 15), units 9-12 line 7 (code 14: long form, delta -6,
 * then end line, column and end column varints), units 13-20 line 70 (code 13, delta +63 as a
 * two-byte varint) */
static const unsigned char TABLE[] = {
	0x80 | 13 << 3 | 3, 4,                 /* +2 (svarint 4) */
	0x80 | 10 << 3 | 1, 1, 2,              /* columns */
	0x80 | 11 << 3 | 1, 3, 4,
	0x80 | 15 << 3 | 0,
	0x80 | 14 << 3 | 3, 13, 0, 1, 5,       /* -6 (svarint 13), end line +0, columns */
	0x80 | 13 << 3 | 7, 0x40 | 62, 1,      /* +63: svarint 126 = 62 | 1 << 6 */
};

struct code {
	char *obj;
	const char *file, *func;
};

static char *mkcode(const char *file, const char *func, int first)
{
	char *co = calloc(1, CO_CODE + 64);
	put64(co, 8, (uintptr_t)PyCode_Type);
	put32(co, CO_FIRST, (uint32_t)first);
	put64(co, CO_FILE, (uintptr_t)mkstr(file));
	put64(co, CO_QUAL, (uintptr_t)mkstr(func));
	put64(co, CO_TABLE, (uintptr_t)mkbytes(TABLE, sizeof TABLE));
	put32(co, CO_TRACEABLE, 0);
	return co;
}

/* a frame of code at code unit `unit` (prev_instr), owned by the thread, then its caller */
static char *mkframe(char *code, int unit, char *prev)
{
	char *f = calloc(1, 80);
	put64(f, FR_CODE, (uintptr_t)code);
	put64(f, FR_PREV, (uintptr_t)prev);
	put64(f, FR_INSTR, (uintptr_t)(code + CO_CODE + 2 * unit));
	f[FR_OWNER] = 0;
	return f;
}

static char *mkstate(char *frame)
{
	char *cf = calloc(1, 32), *ts = calloc(1, 128);
	put64(cf, CF_CURRENT, (uintptr_t)frame);
	put64(ts, TS_CFRAME, (uintptr_t)cf);
	return ts;
}

static void *unmapped(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(p, 4096);
	return p;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "crafted";
	int n = argc > 2 ? atoi(argv[2]) : 40;
	char *outer = mkcode("/fake/train.py", "<module>", 1), *inner = mkcode("/fake/model.py", "Model.forward", 10);
	/* inner at unit 5, its caller at unit 15 (the lines below) */
	char *f_outer = mkframe(outer, 15, NULL), *f_inner = mkframe(inner, 5, f_outer);
	if (!strcmp(mode, "crafted")) {
		/* a frame not started yet (prev_instr before its first traceable unit) between them:
		 * passed over */
		char *pending = mkframe(inner, 0, f_outer);
		put64(pending, FR_INSTR, (uintptr_t)(inner + CO_CODE - 2));
		put64(f_inner, FR_PREV, (uintptr_t)pending);
		tstate = mkstate(f_inner);
		for (int i = 0; i < n; i++)
			usleep(2000);
		/* lines: inner from 10: units 4-5 are line 12; outer from 1: unit 15 is in the last
		 * entry, 1 + 2 + 0 + 1 - 6 + 63 = 61 */
		printf("{\"frames\": [[\"/fake/model.py\", 12, \"Model.forward\"], [\"/fake/train.py\", 61, \"<module>\"]]}\n");
		return 0;
	}
	if (!strcmp(mode, "unmapped")) {
		tstate = unmapped();
	} else if (!strcmp(mode, "none")) {
		tstate = NULL;
	} else if (strcmp(mode, "broken")) {
		fprintf(stderr, "fakepy: unknown mode %s\n", mode);
		return 2;
	}
	if (strcmp(mode, "broken")) {
		for (int i = 0; i < n; i++)
			usleep(2000);
		printf("{\"frames\": []}\n");
		return 0;
	}
	/* broken: each sleep with one fault in a fresh copy of the crafted state; the faults that
	 * break the inner frame leave no frames, those of the outer one the inner frame alone */
	srand(7);
	printf("{\"faults\": [");
	for (int i = 0; i < n; i++) {
		char *co_o = mkcode("/fake/train.py", "<module>", 1), *co_i = mkcode("/fake/model.py", "Model.forward", 10);
		char *fo = mkframe(co_o, 15, NULL), *fi = mkframe(co_i, 5, fo);
		char *target_co = i % 2 ? co_o : co_i, *target_fr = i % 2 ? fo : fi;
		int fault = (i / 2) % 10;
		char *s;
		switch (fault) {
		case 0: /* the code object's type */
			put64(target_co, 8, (uintptr_t)PyBytes_Type);
			break;
		case 1: /* the file name's type */
			s = mkstr("/fake/x.py");
			put64(s, 8, (uintptr_t)PyCode_Type);
			put64(target_co, CO_FILE, (uintptr_t)s);
			break;
		case 2: /* a length past any name */
			s = mkstr("/fake/y.py");
			put64(s, 16, 1ull << 40);
			put64(target_co, CO_FILE, (uintptr_t)s);
			break;
		case 3: /* a control byte in a name */
			put64(target_co, CO_QUAL, (uintptr_t)mkstr("bad\nname"));
			break;
		case 4: /* the code object unmapped */
			put64(target_fr, FR_CODE, (uintptr_t)unmapped());
			break;
		case 5: /* the name unmapped */
			put64(target_co, CO_QUAL, (uintptr_t)unmapped());
			break;
		case 6: /* random bytes for the frame's code object */
			s = malloc(256);
			for (int k = 0; k < 256; k++)
				s[k] = (char)rand();
			put64(target_fr, FR_CODE, (uintptr_t)s);
			break;
		case 7: /* a str of a kind that does not exist */
			s = mkstr("/fake/z.py");
			put32(s, 32, 3u << 2 | 1u << 5 | 1u << 7);
			put64(target_co, CO_FILE, (uintptr_t)s);
			break;
		case 8: /* the frame its own caller: a loop the reader must leave */
			put64(target_fr, FR_PREV, (uintptr_t)target_fr);
			break;
		case 9: /* a location table of random bytes (any line may come of it; never a fault) */
			s = malloc(32 + 64);
			put64(s, 8, (uintptr_t)PyBytes_Type);
			put64(s, 16, 64);
			for (int k = 0; k < 64; k++)
				s[32 + k] = (char)rand();
			put64(target_co, CO_TABLE, (uintptr_t)s);
			break;
		}
		tstate = mkstate(fi);
		usleep(2000);
		printf("%s[%d, \"%s\"]", i ? ", " : "", fault, i % 2 ? "outer" : "inner");
	}
	printf("]}\n");
	return 0;
}
