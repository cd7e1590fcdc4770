/* The few msgpack forms the trace format uses, read in place from a record's bytes without
 * building msgpack-c objects (trace.c's events records are nearly all of a file; msgpack-c's object
 * API allocates a tree per record, which costs more than the analysis itself). Inline, so that the
 * events' decoder keeps them in its loop. */
#ifndef DDPSPY_MPREAD_H
#define DDPSPY_MPREAD_H

#include <stdint.h>
#include <string.h>

struct mp {
	const unsigned char *p, *end;
};

static inline uint64_t be(const unsigned char *p, int n)
{
	switch (n) {
	case 1: return p[0];
	case 2: return (uint64_t)p[0] << 8 | p[1];
	case 4: {
		uint32_t v; /* memcpy: an unaligned load, one instruction */
		memcpy(&v, p, 4);
		return __builtin_bswap32(v);
	}
	default: {
		uint64_t v;
		memcpy(&v, p, 8);
		return __builtin_bswap64(v);
	}
	}
}

static inline __attribute__((always_inline)) int mp_int(struct mp *m, int64_t *v)
{
	if (__builtin_expect(m->p >= m->end, 0))
		return 0;
	unsigned c = *m->p;
	if (c <= 0x7f || c >= 0xe0) { /* fixints: most of every event */
		*v = (int8_t)c;
		m->p++;
		return 1;
	}
	if (c >= 0xcc && c <= 0xd3) {
		int n = 1 << ((c - 0xcc) & 3);
		if (m->end - m->p < 1 + n)
			return 0;
		uint64_t u = be(m->p + 1, n);
		if (c >= 0xd0) /* signed: sign-extend */
			*v = n == 8 ? (int64_t)u : (int64_t)(u << (64 - 8 * n)) >> (64 - 8 * n);
		else
			*v = (int64_t)u;
		m->p += 1 + n;
		return 1;
	}
	return 0;
}

/* array or map header: returns the element (pair) count, -1 when it is not one */
static inline __attribute__((always_inline)) int64_t mp_container(struct mp *m, int map)
{
	if (m->p >= m->end)
		return -1;
	unsigned c = *m->p, fix = map ? 0x80 : 0x90, w16 = map ? 0xde : 0xdc;
	if (c >= fix && c <= fix + 15) {
		m->p++;
		return c - fix;
	}
	int n = c == w16 ? 2 : c == w16 + 1 ? 4 : 0;
	if (!n || m->end - m->p < 1 + n)
		return -1;
	int64_t v = (int64_t)be(m->p + 1, n);
	m->p += 1 + n;
	return v;
}

static inline int mp_str(struct mp *m, const char **s, uint32_t *len)
{
	if (m->p >= m->end)
		return 0;
	unsigned c = *m->p;
	int n = c >= 0xa0 && c <= 0xbf ? 0 : c == 0xd9 ? 1 : c == 0xda ? 2 : c == 0xdb ? 4 : -1;
	if (n < 0 || m->end - m->p < 1 + n)
		return 0;
	uint64_t l = n ? be(m->p + 1, n) : (c & 0x1f);
	if ((uint64_t)(m->end - m->p - 1 - n) < l)
		return 0;
	*s = (const char *)m->p + 1 + n;
	*len = (uint32_t)l;
	m->p += 1 + n + l;
	return 1;
}

/* A msgpack bin at m: its bytes and length; 0 when it is not one or does not fit. */
static inline int mp_bin(struct mp *m, const unsigned char **b, uint32_t *len)
{
	if (m->p >= m->end || *m->p < 0xc4 || *m->p > 0xc6)
		return 0;
	int n = 1 << (*m->p - 0xc4);
	if (m->end - m->p < 1 + n)
		return 0;
	uint64_t l = be(m->p + 1, n);
	if ((uint64_t)(m->end - m->p - 1 - n) < l)
		return 0;
	*b = m->p + 1 + n;
	*len = (uint32_t)l;
	m->p += 1 + n + l;
	return 1;
}

static inline int mp_skip(struct mp *m, int depth)
{
	if (m->p >= m->end || depth > 16)
		return 0;
	unsigned c = *m->p;
	int64_t v;
	const char *s;
	uint32_t l;
	if (mp_int(m, &v) || mp_str(m, &s, &l))
		return 1;
	if (c == 0xc0 || c == 0xc2 || c == 0xc3) {
		m->p++;
		return 1;
	}
	if (c == 0xca || c == 0xcb) {
		int n = c == 0xca ? 4 : 8;
		if (m->end - m->p < 1 + n)
			return 0;
		m->p += 1 + n;
		return 1;
	}
	if (c >= 0xc4 && c <= 0xc6) { /* bin */
		const unsigned char *b;
		uint32_t bl;
		return mp_bin(m, &b, &bl);
	}
	int map = (c >= 0x80 && c <= 0x8f) || c == 0xde || c == 0xdf;
	int64_t n = mp_container(m, map);
	if (n < 0)
		return 0; /* ext types are not used by the format */
	for (int64_t i = 0; i < n * (map ? 2 : 1); i++)
		if (!mp_skip(m, depth + 1))
			return 0;
	return 1;
}

/* The payload is one msgpack value that fits its frame, walked without allocating: msgpack-c's
 * unpacker allocates a container's elements from its header's count before it reads them, so a
 * hostile count in a small frame would ask for gigabytes. Every element takes at least a byte, so
 * a value that fits has every allocation bounded by the frame's size. */
static inline int mp_bounded(const unsigned char *body, size_t len)
{
	struct mp m = {body, body + len};
	return mp_skip(&m, 0) && m.p == m.end;
}

static inline int mp_key_is(const char *s, uint32_t l, const char *want)
{
	return strlen(want) == l && !memcmp(s, want, l);
}

#endif
