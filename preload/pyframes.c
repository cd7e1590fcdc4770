/* Python frames: where in the program's Python code a thread was when it blocked. Read on the
 * blocked thread itself (record.c, beside the native stack), from the interpreter's own frame
 * state: no GIL, no call into the interpreter but PyGILState_GetThisThreadState (a thread-local
 * lookup: no allocation, no lock), and every read of its memory through dsp_peek
 * (process_vm_readv of this process), so that a torn or freed object fails the read instead of
 * faulting. Each object read is checked for its type (code objects, str, bytes) and sizes before
 * it is used; a frame that does not check out ends the stack. The layouts are CPython's own:
 * 3.11's and 3.12's written here, 3.13's read from the interpreter's own table of them (_Py_DebugOffsets),
 * each checked on that interpreter (docs/design.md, "Python frames"); any other version gets no
 * frames and the file says why (the "python" record). */
#include "internal.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/uio.h>
#include <unistd.h>

/* Where CPython keeps what is read, for one version (64-bit builds). */
#define DIRECT 0xffffffffu
#define LAYOUT_MAX 512 /* the frame and code object fields read lie in their first bytes */
#define CODE_HEAD 256  /* a code object's bytes read: L->co_code at most (3.13.0's 200) */
struct py_layout {
	unsigned ts_cframe, cframe_current;          /* tstate->cframe->current_frame; cframe_current
						      * DIRECT: tstate->current_frame at ts_cframe */
	unsigned fr_code, fr_previous, fr_prev_instr, fr_owner; /* _PyInterpreterFrame */
	unsigned co_firstlineno, co_filename, co_qualname, co_linetable, co_firsttraceable, co_code;
	unsigned str_state, str_ascii_data, str_compact_data; /* PyASCIIObject's, PyCompactUnicodeObject's */
	unsigned bytes_size, bytes_data;             /* PyBytesObject */
	unsigned char owner_generator, owner_cstack; /* frame owners: a generator's; a C stack's (none: 255) */
	unsigned interp_threads, ts_next, ts_native_id; /* the interpreter's threads: head, next, thread id */
};

/* CPython 3.11 (Include/internal/pycore_frame.h, Include/cpython/code.h, pystate.h,
 * unicodeobject.h, bytesobject.h of v3.11.2), checked against Debian's python3.11: each field read
 * back with ctypes, and tests/e2e/test_pyframes.py compares what is read with sys._getframe's */
static const struct py_layout PY311 = {
	.ts_cframe = 56, .cframe_current = 8,
	.fr_code = 32, .fr_previous = 48, .fr_prev_instr = 56, .fr_owner = 69,
	.co_firstlineno = 72, .co_filename = 112, .co_qualname = 128, .co_linetable = 136,
	.co_firsttraceable = 168, .co_code = 184,
	.str_state = 32, .str_ascii_data = 48, .str_compact_data = 72,
	.bytes_size = 16, .bytes_data = 32,
	.owner_generator = 1, .owner_cstack = 255,
	.interp_threads = 16, .ts_next = 8, .ts_native_id = 160,
};

/* CPython 3.12 (the same headers of v3.12.1, read with Py_BUILD_CORE: each offset is offsetof the
 * field, as 3.11's above also come out): a frame's code at 0, previous 8, prev_instr 56, owner 70
 * (FRAME_OWNED_BY_CSTACK 3: where C called into Python), PyASCIIObject 40 bytes (wstr gone), the
 * cframe still between thread state and frame; checked against pyenv's CPython 3.12.1 by
 * tests/e2e/test_pyframes.py, as 3.11 is against Debian's */
static const struct py_layout PY312 = {
	.ts_cframe = 56, .cframe_current = 0,
	.fr_code = 0, .fr_previous = 8, .fr_prev_instr = 56, .fr_owner = 70,
	.co_firstlineno = 68, .co_filename = 112, .co_qualname = 128, .co_linetable = 136,
	.co_firsttraceable = 176, .co_code = 192,
	.str_state = 32, .str_ascii_data = 40, .str_compact_data = 56,
	.bytes_size = 16, .bytes_data = 32,
	.owner_generator = 1, .owner_cstack = 3,
	.interp_threads = 72, .ts_next = 8, .ts_native_id = 144,
};

/* CPython 3.13's table of its own offsets, first in _PyRuntime (Include/internal/pycore_runtime.h
 * of v3.13.5, lines 62-188: _Py_DebugOffsets up to its unicode_object part; cookie "xdebugpy") */
struct debug_offsets_313 {
	char cookie[8];
	uint64_t version, free_threaded;
	struct { uint64_t size, finalizing, interpreters_head; } runtime_state;
	struct { uint64_t size, id, next, threads_head, gc, imports_modules, sysdict, builtins, ceval_gil,
		 gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked,
		 gil_runtime_state_holder; } interpreter_state;
	struct { uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id, datastack_chunk,
		 status; } thread_state;
	struct { uint64_t size, previous, executable, instr_ptr, localsplus, owner; } interpreter_frame;
	struct { uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
		 localspluskinds, co_code_adaptive; } code_object;
	struct { uint64_t size, ob_type; } pyobject;
	struct { uint64_t size, tp_name, tp_repr, tp_flags; } type_object;
	struct { uint64_t size, ob_item, ob_size; } tuple_object, list_object;
	struct { uint64_t size, ma_keys, ma_values; } dict_object;
	struct { uint64_t size, ob_fval; } float_object;
	struct { uint64_t size, lv_tag, ob_digit; } long_object;
	struct { uint64_t size, ob_size, ob_sval; } bytes_object;
	struct { uint64_t size, state, length, asciiobject_size; } unicode_object;
};

/* 3.13's layout from its table; what the table does not give is from v3.13.5's headers:
 * _co_firsttraceable the int 16 bytes before co_code_adaptive (code.h: then co_extra), compact
 * text 16 bytes after PyASCIIObject (utf8_length, utf8), a str's length at 16, frames owned by a
 * generator 1 and by a C stack 3 (pycore_frame.h); checked against that interpreter with ctypes */
static int layout_313(const struct debug_offsets_313 *d, struct py_layout *L)
{
	if (memcmp(d->cookie, "xdebugpy", 8) || d->free_threaded || d->code_object.co_code_adaptive < 16 ||
	    d->code_object.co_code_adaptive > CODE_HEAD || d->interpreter_frame.owner >= LAYOUT_MAX)
		return -1;
	*L = (struct py_layout){
		.ts_cframe = (unsigned)d->thread_state.current_frame, .cframe_current = DIRECT,
		.fr_code = (unsigned)d->interpreter_frame.executable, .fr_previous = (unsigned)d->interpreter_frame.previous,
		.fr_prev_instr = (unsigned)d->interpreter_frame.instr_ptr, .fr_owner = (unsigned)d->interpreter_frame.owner,
		.co_firstlineno = (unsigned)d->code_object.firstlineno, .co_filename = (unsigned)d->code_object.filename,
		.co_qualname = (unsigned)d->code_object.qualname, .co_linetable = (unsigned)d->code_object.linetable,
		.co_firsttraceable = (unsigned)d->code_object.co_code_adaptive - 16,
		.co_code = (unsigned)d->code_object.co_code_adaptive,
		.str_state = (unsigned)d->unicode_object.state, .str_ascii_data = (unsigned)d->unicode_object.asciiobject_size,
		.str_compact_data = (unsigned)d->unicode_object.asciiobject_size + 16,
		.bytes_size = (unsigned)d->bytes_object.ob_size, .bytes_data = (unsigned)d->bytes_object.ob_sval,
		.owner_generator = 1, .owner_cstack = 3,
		.interp_threads = (unsigned)d->interpreter_state.threads_head, .ts_next = (unsigned)d->thread_state.next,
		.ts_native_id = (unsigned)d->thread_state.native_thread_id,
	};
	/* (everything read must lie inside the objects the table sizes) */
	return L->fr_owner < d->interpreter_frame.size && L->ts_cframe < d->thread_state.size &&
			       L->ts_native_id < d->thread_state.size && L->co_qualname < d->code_object.size &&
			       L->bytes_data <= d->bytes_object.size && L->str_state < d->unicode_object.size ? 0 : -1;
}

static struct py_layout layout; /* the one in use */

static struct {
	int looked;                 /* what was found is settled */
	char version[32], why[160]; /* for the "python" record */
	unsigned changes;           /* (dsp_py_state) */
	const struct py_layout *L;
	uintptr_t code_type, str_type, bytes_type;
	void *(*this_ts)(void);
	void *(*interp_main)(void); /* PyInterpreterState_Main: the field it returns, no lock */
	int on;                     /* published last: frames are read */
} P;

#define FILE_MAX 200 /* a file name's last bytes kept */
#define FUNC_MAX 100

#define PEEKV 4 /* ranges read in one system call at most */

/* Reads of the program's memory through the kernel: each of k ranges (remote a[i], n[i] bytes,
 * k at most PEEKV) into its buffer, in one system call; how many of them, from the first, were
 * read whole (the kernel stops at the first it cannot read) */
static int peekv(const uintptr_t *a, void *const *buf, const size_t *n, int k)
{
	struct iovec l[PEEKV], r[PEEKV];
	int m = 0;
	for (; m < k && m < PEEKV && a[m] >= 4096; m++) {
		l[m] = (struct iovec){buf[m], n[m]};
		r[m] = (struct iovec){(void *)a[m], n[m]};
	}
	ssize_t got = m ? process_vm_readv(dsp_pid ? dsp_pid : getpid(), l, (unsigned long)m, r, (unsigned long)m, 0)
			: 0;
	int whole = 0;
	for (size_t sum = 0; whole < m && got >= 0 && sum + n[whole] <= (size_t)got; whole++)
		sum += n[whole];
	return whole;
}

static int peek(uintptr_t a, void *buf, size_t n)
{
	return a >= 4096 && dsp_peek(a, buf, n) == (ssize_t)n ? 0 : -1;
}

static uint64_t u64_at(const uint8_t *b, unsigned off)
{
	uint64_t v;
	memcpy(&v, b + off, 8);
	return v;
}

static uint32_t u32_at(const uint8_t *b, unsigned off)
{
	uint32_t v;
	memcpy(&v, b + off, 4);
	return v;
}

/* code points as UTF-8 into out (max bytes at most: the last ones when keep_tail, cut at a
 * character's first byte); its length, -1 for a control character or no code point */
static int utf8_of(const uint8_t *raw, unsigned kind, int count, char *out, int max, int keep_tail)
{
	char tmp[FILE_MAX * 4];
	int n = 0;
	for (int i = 0; i < count; i++) {
		uint32_t c = kind == 1 ? raw[i]
			     : kind == 2 ? (uint32_t)raw[2 * i] | (uint32_t)raw[2 * i + 1] << 8
					 : (uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 | (uint32_t)raw[4 * i + 2] << 16 |
						   (uint32_t)raw[4 * i + 3] << 24;
		if (c < 32 || c == 127 || c > 0x10ffff || (c >= 0xd800 && c < 0xe000))
			return -1;
		if (c < 0x80) {
			tmp[n++] = (char)c;
		} else if (c < 0x800) {
			tmp[n++] = (char)(0xc0 | c >> 6);
			tmp[n++] = (char)(0x80 | (c & 63));
		} else if (c < 0x10000) {
			tmp[n++] = (char)(0xe0 | c >> 12);
			tmp[n++] = (char)(0x80 | (c >> 6 & 63));
			tmp[n++] = (char)(0x80 | (c & 63));
		} else {
			tmp[n++] = (char)(0xf0 | c >> 18);
			tmp[n++] = (char)(0x80 | (c >> 12 & 63));
			tmp[n++] = (char)(0x80 | (c >> 6 & 63));
			tmp[n++] = (char)(0x80 | (c & 63));
		}
	}
	int from = 0, to = n;
	if (n > max) {
		from = keep_tail ? n - max : 0;
		to = keep_tail ? n : max;
		while (from < to && ((unsigned char)tmp[from] & 0xc0) == 0x80)
			from++;
		while (!keep_tail && to > 0 && ((unsigned char)tmp[to] & 0xc0) == 0x80)
			to--;
	}
	memcpy(out, tmp + from, (size_t)(to - from));
	return to - from;
}

/* A str object's text as UTF-8 into buf (at most max bytes: the last ones when keep_tail); its
 * length, -1 when it is not a compact str or does not read as one. head: its first hn bytes,
 * read already (the object's header and, for ASCII, text that follows it), or NULL. */
static int read_str(uintptr_t s, const uint8_t *head, size_t hn, char *buf, int max, int keep_tail)
{
	const struct py_layout *L = P.L;
	uint8_t h[80];
	if (!head || hn < L->str_compact_data) {
		if (peek(s, h, L->str_compact_data))
			return -1;
		head = h;
		hn = L->str_compact_data;
	}
	int64_t len = (int64_t)u64_at(head, 16);
	uint32_t state = u32_at(head, L->str_state);
	unsigned kind = state >> 2 & 7, compact = state >> 5 & 1, ascii = state >> 6 & 1;
	if (u64_at(head, 8) != P.str_type || !compact || len <= 0 || len > 1 << 20 || (kind != 1 && kind != 2 && kind != 4) ||
	    (ascii && kind != 1))
		return -1;
	int count = len > max ? max : (int)len;
	uintptr_t first = keep_tail ? (uintptr_t)(len - count) : 0;
	uint8_t raw[FILE_MAX * 4];
	unsigned data = ascii ? L->str_ascii_data : L->str_compact_data;
	size_t at = data + first * kind, need = (size_t)count * kind;
	if (at + need <= hn)
		memcpy(raw, head + at, need);
	else if (count > FILE_MAX || peek(s + at, raw, need))
		return -1;
	return utf8_of(raw, kind, count, buf, max, keep_tail);
}

/* the location table (PEP 657's, Objects/locations.md) read a byte at a time through a window */
struct lt {
	uintptr_t at, end;
	unsigned char b[256];
	unsigned pos, len;
};

static int lt_byte(struct lt *r, unsigned *v)
{
	if (r->pos == r->len) {
		size_t n = r->end - r->at < sizeof r->b ? r->end - r->at : sizeof r->b;
		if (!n || peek(r->at, r->b, n))
			return -1;
		r->at += n;
		r->pos = 0;
		r->len = (unsigned)n;
	}
	*v = r->b[r->pos++];
	return 0;
}

static int lt_varint(struct lt *r, unsigned first, uint32_t *v)
{
	unsigned b = first, shift = 0;
	*v = b & 63;
	while (b & 64) {
		if (lt_byte(r, &b) || (shift += 6) > 30)
			return -1;
		*v |= (uint32_t)(b & 63) << shift;
	}
	return 0;
}

/* the line of the code unit at unit (co_firstlineno first), as PyCode_Addr2Line gives it: -1
 * where the table says no line or cannot be read. The table's first bytes are in r already. */
static int line_of(struct lt *r, int first, uint32_t unit)
{
	uint32_t start = 0;
	int computed = first;
	unsigned b;
	if (lt_byte(r, &b))
		return -1;
	for (;;) {
		if (!(b & 128))
			return -1;
		unsigned code = b >> 3 & 15;
		uint32_t end = start + (b & 7) + 1;
		int delta = 0;
		if (code == 13 || code == 14) { /* (no columns; long form): a signed varint */
			uint32_t u;
			if (lt_byte(r, &b) || lt_varint(r, b, &u))
				return -1;
			delta = u & 1 ? -(int)(u >> 1) : (int)(u >> 1);
		} else if (code == 11 || code == 12) {
			delta = (int)code - 10;
		}
		int line = code == 15 ? -1 : computed + delta;
		computed += delta;
		if (unit < end)
			return line;
		start = end;
		do /* (the entry's other bytes, up to the next entry's first) */
			if (lt_byte(r, &b))
				return -1;
		while (!(b & 128));
	}
}

/* What is read of a code object: its header's fields that a frame's record needs */
struct code {
	uintptr_t file, func, table; /* co_filename, co_qualname, co_linetable */
	int32_t first;               /* co_firstlineno */
	uint32_t traceable;          /* _co_firsttraceable */
};

/* What the sampler keeps of a code object it has read, so that the next samples of the same code
 * read only its header: the header's fields (all the same: the same object, whose names and
 * table, held by it, are as they were), the names, and the lines of the last code units asked
 * for. The sampler's thread's alone (no lock); direct-mapped by the code object's address. */
#define MEMO 256
#define MEMO_LINES 4
struct memo {
	uintptr_t at;
	struct code c;
	int fl, nl;
	char file[FILE_MAX], func[FUNC_MAX];
	unsigned next;
	struct {
		int64_t unit;
		int32_t line;
	} lines[MEMO_LINES];
};
static struct memo memos[MEMO];

/* the line of code unit unit from a location table (the bytes object at table, its first bytes
 * already in tb when have: up to 128 of them), first: co_firstlineno; first where the table does
 * not check out */
static int32_t table_line(uintptr_t table, const uint8_t *tb, int have, int32_t first, int64_t unit)
{
	const struct py_layout *L = P.L;
	int64_t tsize = (int64_t)u64_at(tb, L->bytes_size);
	if (unit < 0 || u64_at(tb, 8) != P.bytes_type || tsize <= 0 || tsize >= 1 << 24)
		return first;
	unsigned n = have ? (unsigned)(tsize < 128 ? tsize : 128) : 0;
	uintptr_t data = table + L->bytes_data;
	struct lt r = {.at = data + n, .end = data + (uintptr_t)tsize, .pos = 0, .len = n};
	memcpy(r.b, tb + L->bytes_data, n);
	return line_of(&r, first, (uint32_t)unit);
}

/* One frame appended to out at *at (cap bytes): u32 line, u16 file length, u16 name length, the
 * file, the name. 0, or -1 when it does not fit or does not check out. Its file name, name and
 * location table are read in one system call, each with what follows its header (an ASCII name's
 * text, the table's first bytes); one that the memory after it keeps from reading whole is read
 * again by parts. With m (the sampler's), what m holds of the same code object is not read again,
 * and what is read is kept there. */
static int put_frame(uint8_t *out, int cap, int *at, uintptr_t code, const struct code *c, uintptr_t prev_instr,
		     struct memo *m)
{
	const struct py_layout *L = P.L;
	char file[FILE_MAX], func[FUNC_MAX];
	uint8_t fh[48 + FILE_MAX], qh[48 + FUNC_MAX], tb[32 + 128];
	int64_t unit = prev_instr >= code + L->co_code ? (int64_t)(prev_instr - code - L->co_code) / 2 : -1;
	int32_t line;
	int fl, nl, k = 0;
	if (m && m->at == code && !memcmp(&m->c, c, sizeof *c)) {
		fl = m->fl;
		nl = m->nl;
		memcpy(file, m->file, (size_t)fl);
		memcpy(func, m->func, (size_t)nl);
		while (k < MEMO_LINES && m->lines[k].unit != unit)
			k++;
		if (k < MEMO_LINES)
			line = m->lines[k].line;
		else if (!peek(c->table, tb, L->bytes_data + 128u)) /* (a shorter table: the heap's bytes after it) */
			line = table_line(c->table, tb, 1, c->first, unit);
		else
			line = peek(c->table, tb, L->bytes_data) ? c->first : table_line(c->table, tb, 0, c->first, unit);
	} else {
		const uintptr_t a[3] = {c->file, c->func, c->table};
		void *const bufs[3] = {fh, qh, tb};
		const size_t lens[3] = {sizeof fh, sizeof qh, L->bytes_data + 128};
		int whole = peekv(a, bufs, lens, 3) == 3;
		fl = read_str(a[0], whole ? fh : NULL, sizeof fh, file, FILE_MAX, 1);
		nl = read_str(a[1], whole ? qh : NULL, sizeof qh, func, FUNC_MAX, 0);
		if (fl <= 0 || nl <= 0)
			return -1;
		line = whole || !peek(a[2], tb, L->bytes_data) ? table_line(a[2], tb, whole, c->first, unit) : c->first;
		if (m) {
			*m = (struct memo){.at = code, .c = *c, .fl = fl, .nl = nl};
			memcpy(m->file, file, (size_t)fl);
			memcpy(m->func, func, (size_t)nl);
			for (int i = 0; i < MEMO_LINES; i++)
				m->lines[i].unit = -2; /* (no unit is) */
		}
		k = m ? MEMO_LINES : 0;
	}
	if (k == MEMO_LINES) {
		m->lines[m->next % MEMO_LINES].unit = unit;
		m->lines[m->next++ % MEMO_LINES].line = line;
	}
	if (*at + 8 + fl + nl > cap)
		return -1;
	uint16_t lens16[2] = {(uint16_t)fl, (uint16_t)nl};
	memcpy(out + *at, &line, 4);
	memcpy(out + *at + 4, lens16, 4);
	memcpy(out + *at + 8, file, (size_t)fl);
	memcpy(out + *at + 8 + fl, func, (size_t)nl);
	*at += 8 + fl + nl;
	return 0;
}

/* the innermost frame of thread state ts */
static int current_frame(uintptr_t ts, uintptr_t *fr)
{
	const struct py_layout *L = P.L;
	uintptr_t cf;
	if (L->cframe_current == DIRECT) /* (3.13 and later: the thread state holds it) */
		return peek(ts + L->ts_cframe, fr, 8);
	return peek(ts + L->ts_cframe, &cf, 8) || peek(cf + L->cframe_current, fr, 8) ? -1 : 0;
}

/* A thread's frames as read, innermost first: each frame's code object (its address and fields),
 * the code unit it is at and its owner; the innermost frame and its code, frames of C calls too */
#define CHAIN_MAX (DSP_PY_FRAMES + 4) /* (frames not started yet are passed over when put) */
struct chain {
	int n;
	uintptr_t top, top_code;
	struct {
		uintptr_t code, instr;
		unsigned char owner;
		struct code c;
	} f[CHAIN_MAX];
};

/* thread state ts's frames into ch: the frames first, a read each (each gives the next one's
 * address), then their code objects PEEKV to a system call. The chain ends at the first frame or
 * code object that does not read or check out; ch->n 0 for none, or for a chain that comes back
 * on itself. Reading the frames before the names keeps short what a sampler checks did not move
 * under it. */
static void chain(uintptr_t ts, struct chain *ch)
{
	const struct py_layout *L = P.L;
	uintptr_t fr, seen[4 * DSP_PY_FRAMES];
	int n = 0;
	ch->n = 0;
	ch->top = 0;
	if (!ts || current_frame(ts, &fr) || !fr)
		return;
	ch->top = fr;
	for (int hops = 0; fr && n < CHAIN_MAX && hops < 4 * DSP_PY_FRAMES; hops++) {
		for (int k = 0; k < hops; k++)
			if (seen[k] == fr) /* (a loop: not a thread's frames, however they read) */
				return;
		seen[hops] = fr;
		uint8_t fb[LAYOUT_MAX];
		if (peek(fr, fb, L->fr_owner + 1u))
			break;
		uintptr_t code = u64_at(fb, L->fr_code);
		if (!hops)
			ch->top_code = code;
		ch->f[n].code = code;
		ch->f[n].instr = u64_at(fb, L->fr_prev_instr);
		ch->f[n].owner = fb[L->fr_owner];
		fr = u64_at(fb, L->fr_previous);
		if (ch->f[n].owner != L->owner_cstack) /* (3.12 and later: where C called into Python; no code) */
			n++;
	}
	for (int i = 0; i < n; i += PEEKV) {
		uint8_t co[PEEKV][CODE_HEAD];
		uintptr_t a[PEEKV];
		void *bufs[PEEKV];
		size_t lens[PEEKV];
		int k = n - i < PEEKV ? n - i : PEEKV;
		for (int j = 0; j < k; j++) {
			a[j] = ch->f[i + j].code;
			bufs[j] = co[j];
			lens[j] = L->co_code;
		}
		int got = peekv(a, bufs, lens, k);
		for (int j = 0; j < k; j++) {
			if ((j >= got && peek(a[j], co[j], L->co_code)) || u64_at(co[j], 8) != P.code_type) {
				ch->n = i + j;
				return;
			}
			ch->f[i + j].c = (struct code){
				.file = u64_at(co[j], L->co_filename), .func = u64_at(co[j], L->co_qualname),
				.table = u64_at(co[j], L->co_linetable), .first = (int32_t)u32_at(co[j], L->co_firstlineno),
				.traceable = u32_at(co[j], L->co_firsttraceable),
			};
		}
	}
	ch->n = n;
}

/* a chain's frames into out (dsp_py_capture's form): the bytes, 0 for none. memo: the sampler's
 * memos, or NULL. */
static int render(const struct chain *ch, uint8_t *out, int cap, struct memo *memo)
{
	const struct py_layout *L = P.L;
	uint32_t n = 0;
	int at = 8;
	for (int i = 0; i < ch->n && n < DSP_PY_FRAMES; i++) {
		uintptr_t code = ch->f[i].code;
		/* a frame not started yet (_PyFrame_IsIncomplete) is not the program's: passed over,
		 * as tracebacks do */
		if (ch->f[i].owner != L->owner_generator &&
		    ch->f[i].instr < code + L->co_code + 2 * (uintptr_t)ch->f[i].c.traceable)
			continue;
		if (put_frame(out, cap, &at, code, &ch->f[i].c, ch->f[i].instr,
			      memo ? &memo[(code >> 4 ^ code >> 12) % MEMO] : NULL) < 0)
			break;
		n++;
	}
	if (!n)
		return 0;
	uint32_t head[2] = {n, (uint32_t)at};
	memcpy(out, head, sizeof head);
	return (at + 7) & ~7;
}

int dsp_py_capture(uint8_t *out, int cap)
{
	if (!__atomic_load_n(&P.on, __ATOMIC_ACQUIRE))
		return 0;
	struct chain ch;
	if (cap < 16)
		return 0;
	chain((uintptr_t)P.this_ts(), &ch);
	return render(&ch, out, cap, NULL);
}

/* ---- the sampler: the main thread's Python frames DDPSPY_SAMPLE_HZ times a second, read from a
 * thread of ddpspy's own while the main thread runs: no signal, nothing it can see. The frames
 * move under the reader, so every read is checked as on the thread itself, and a sample is kept
 * only if the innermost frame is the same frame of the same code after the walk as before (the
 * frames below cannot change while it runs; its own line may have moved on: it is the line read
 * during the walk). A walk spoilt so is tried again, three times in all. What it has read of a code
 * object (names, the lines of its last code units) it keeps (struct memo), so that the walk of
 * frames it has seen reads the frames and their code objects' headers alone: N + N/4 reads for N
 * frames instead of 3N. Samples wait in a queue of their own for the writer (dsp_py_sample_take);
 * a full queue drops and counts. ---- */
#define QUEUE 64 /* samples; the writer takes them every flush (100 ms: 10 at 100 Hz) */
static struct {
	int started;
	uint64_t dropped, torn; /* (torn: samples given up, the thread moving on under three walks) */
	unsigned head, tail; /* (head: the sampler's, tail: the writer's) */
	struct sample {
		uint64_t t;
		int tid, bytes;
		uint8_t blob[DSP_PY_BYTES] __attribute__((aligned(8)));
	} q[QUEUE];
} Q;

/* the main thread's thread state in the main interpreter's list (tstate->native_thread_id) */
static uintptr_t find_ts(int tid)
{
	const struct py_layout *L = P.L;
	uintptr_t interp = P.interp_main ? (uintptr_t)P.interp_main() : 0, ts;
	if (!interp || peek(interp + L->interp_threads, &ts, 8))
		return 0;
	for (int i = 0; ts && i < 1024; i++) {
		uint64_t id;
		if (peek(ts + L->ts_native_id, &id, 8))
			return 0;
		if (id == (uint64_t)tid)
			return ts;
		if (peek(ts + L->ts_next, &ts, 8))
			return 0;
	}
	return 0;
}

/* the thread's innermost frame and its code object now; 0 none */
static int frame_now(uintptr_t ts, uintptr_t v[2])
{
	return !current_frame(ts, &v[0]) && v[0] && !peek(v[0] + P.L->fr_code, &v[1], 8);
}

static void *sampler(void *arg)
{
	(void)arg;
	dsp_tls.state = TS_OFF; /* (nothing of it recorded: a thread of ddpspy's) */
	dsp_tls.guard = 1;
	pthread_setname_np(pthread_self(), "ddpspy-pysample");
	long period = 1000000000L / dsp_cfg.sample_hz;
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	uintptr_t ts = 0;
	int tid = dsp_pid;
	for (;;) {
		next.tv_nsec += period;
		while (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - next.tv_sec) * 1000000000L + now.tv_nsec - next.tv_nsec > period)
			next = now; /* (behind by more than a period, stopped or starved: no burst to catch up) */
		if (!__atomic_load_n(&dsp_on, __ATOMIC_RELAXED))
			continue;
		uint64_t id = 0;
		if (!ts || peek(ts + P.L->ts_native_id, &id, 8) || id != (uint64_t)tid)
			ts = find_ts(tid);
		unsigned h = Q.head;
		if (!ts)
			continue;
		if (h - __atomic_load_n(&Q.tail, __ATOMIC_ACQUIRE) >= QUEUE) {
			__atomic_fetch_add(&Q.dropped, 1, __ATOMIC_RELAXED);
			continue;
		}
		struct sample *sm = &Q.q[h % QUEUE];
		int try = 0;
		for (; try < 3; try++) { /* (the thread moved on meanwhile: not one moment's frames) */
			uintptr_t after[2];
			struct chain ch;
			sm->t = dsp_now();
			chain(ts, &ch);
			if (!ch.top) /* (no frame: the thread runs no Python now) */
				break;
			sm->bytes = ch.n ? render(&ch, sm->blob, sizeof sm->blob, memos) : 0;
			if (sm->bytes && frame_now(ts, after) && after[0] == ch.top && after[1] == ch.top_code) {
				sm->tid = tid;
				__atomic_store_n(&Q.head, h + 1, __ATOMIC_RELEASE);
				break;
			}
		}
		if (try == 3)
			__atomic_fetch_add(&Q.torn, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

void dsp_py_sampler_start(void)
{
	if (Q.started || !__atomic_load_n(&P.on, __ATOMIC_ACQUIRE) || dsp_cfg.sample_hz <= 0 || !P.interp_main ||
	    dsp_id.role == DDPSPY_ROLE_LAUNCHER || dsp_id.role == DDPSPY_ROLE_WORKER)
		return;
	Q.started = 1;
	pthread_attr_t a;
	pthread_t th;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 128 * 1024);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &a, sampler, NULL) != 0)
		dsp_log("Python sampler: not started");
	pthread_attr_destroy(&a);
}

int dsp_py_sample_take(uint64_t *t, int *tid, uint8_t *out, int cap)
{
	unsigned tl = Q.tail;
	if (tl == __atomic_load_n(&Q.head, __ATOMIC_ACQUIRE))
		return -1;
	struct sample *sm = &Q.q[tl % QUEUE];
	int n = sm->bytes <= cap ? sm->bytes : 0;
	memcpy(out, sm->blob, (size_t)n);
	*t = sm->t;
	*tid = sm->tid;
	__atomic_store_n(&Q.tail, tl + 1, __ATOMIC_RELEASE);
	return n;
}

void dsp_py_samples(uint64_t *dropped, uint64_t *torn)
{
	*dropped = __atomic_load_n(&Q.dropped, __ATOMIC_RELAXED);
	*torn = __atomic_load_n(&Q.torn, __ATOMIC_RELAXED);
}

void dsp_py_atfork_child(void)
{
	memset(&Q, 0, sizeof Q); /* (the sampler is not in the child: the child's writer starts its own) */
}

/* ---- finding the interpreter (writer thread) ---- */

struct find {
	char path[512];
};

static int find_libpython(struct dl_phdr_info *info, size_t size, void *ctx)
{
	struct find *f = ctx;
	const char *base = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
	(void)size;
	if (base && !strncmp(base + 1, "libpython3", 10)) {
		snprintf(f->path, sizeof f->path, "%s", info->dlpi_name);
		return 1;
	}
	return 0;
}

/* a symbol of the program's CPython: in the global scope (an interpreter's executable, or a
 * libpython linked in), else in a libpython loaded RTLD_LOCAL */
static void *py_sym(void *h, const char *name)
{
	void *s = dlsym(RTLD_DEFAULT, name);
	return s ? s : h ? dlsym(h, name) : NULL;
}

int dsp_py_modules_changed(void)
{
	if (P.looked || !dsp_cfg.pyframes)
		return 0;
	struct find f = {{0}};
	void *h = NULL;
	if (!dlsym(RTLD_DEFAULT, "Py_IsInitialized")) {
		dl_iterate_phdr(find_libpython, &f);
		if (!f.path[0] || !(h = dlopen(f.path, RTLD_LAZY | RTLD_NOLOAD)))
			return 0; /* (no CPython, yet) */
	}
	P.looked = 1;
	const unsigned long *ver = py_sym(h, "Py_Version");
	if (!ver) {
		snprintf(P.version, sizeof P.version, "3.10 or older");
		snprintf(P.why, sizeof P.why, "CPython before 3.11 (no Py_Version): no Python frames");
		goto out;
	}
	unsigned major = (unsigned)(*ver >> 24 & 0xff), minor = (unsigned)(*ver >> 16 & 0xff);
	snprintf(P.version, sizeof P.version, "%u.%u.%lu", major, minor, *ver >> 8 & 0xff);
	struct debug_offsets_313 d;
	void *runtime = py_sym(h, "_PyRuntime");
	int known = major == 3 && (minor == 11 || minor == 12) && sizeof(void *) == 8;
	if (known) /* (3.13: its own table, for the version it says it is) */
		layout = minor == 11 ? PY311 : PY312;
	else if (major == 3 && minor == 13 && sizeof(void *) == 8 && runtime && !peek((uintptr_t)runtime, &d, sizeof d))
		known = (d.version >> 16) == (*ver >> 16) && !layout_313(&d, &layout);
	if (!known) {
		snprintf(P.why, sizeof P.why, "CPython %u.%u: its frame layout is not known to this ddpspy (3.11 to "
			 "3.13 are): no Python frames", major, minor);
		goto out;
	}
	P.code_type = (uintptr_t)py_sym(h, "PyCode_Type");
	P.str_type = (uintptr_t)py_sym(h, "PyUnicode_Type");
	P.bytes_type = (uintptr_t)py_sym(h, "PyBytes_Type");
	P.this_ts = (void *(*)(void))py_sym(h, "PyGILState_GetThisThreadState");
	P.interp_main = (void *(*)(void))py_sym(h, "PyInterpreterState_Main");
	if (!P.code_type || !P.str_type || !P.bytes_type || !P.this_ts) {
		snprintf(P.why, sizeof P.why, "CPython %u.%u lacks a symbol ddpspy reads: no Python frames", major, minor);
		goto out;
	}
	P.L = &layout;
	__atomic_store_n(&P.on, 1, __ATOMIC_RELEASE);
	P.why[0] = 0;
out: /* (a libpython's handle is kept: it stays loaded while its functions may be called) */
	__atomic_store_n(&P.changes, 1, __ATOMIC_RELEASE);
	dsp_log("Python frames: CPython %s%s%s", P.version, P.why[0] ? ": " : ", read", P.why);
	return 1;
}

unsigned dsp_py_state(const char **version, const char **why)
{
	unsigned c = __atomic_load_n(&P.changes, __ATOMIC_ACQUIRE);
	*version = P.version;
	*why = P.why[0] ? P.why : NULL;
	return c;
}
