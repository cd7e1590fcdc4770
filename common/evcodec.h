/* The packed event encoding of format 2.x "events" records, shared by the writer (preload/writer.c)
 * and the reader (collector/trace.c). docs/format.md describes it; keep the two in step.
 *
 * One event:
 *   u8      kind (bits 0-5; DDPSPY_EVC_ESCAPE: the kind and the argument count follow as varints)
 *           | DDPSPY_EVC_STACK (bit 6) | DDPSPY_EVC_STR (bit 7)
 *   varint  (escape only) kind, then nargs
 *   zigzag  gap: raw start minus the previous event's raw end (the record's t0 for the first)
 *   varint  dur: raw ticks
 *   varint  (DDPSPY_EVC_STACK) stack id
 *   bytes   ceil(nargs / 8) bytes, bit i set: argument i differs from the same argument of the
 *           previous event of this kind in this record (0 before the first)
 *   zigzag  for each set bit: the argument minus that previous value (wrapping 64-bit)
 *   varint  (DDPSPY_EVC_STR) string length, then its bytes
 * nargs of a kind below DDPSPY_EVC_ESCAPE comes from the record's "na" table (byte k = nargs of
 * kind k). Every record is decoded on its own: the previous values start at 0 in each. */
#ifndef DDPSPY_EVCODEC_H
#define DDPSPY_EVCODEC_H

#include <stdint.h>
#include <stddef.h>

#define DDPSPY_EVC_ESCAPE 63
#define DDPSPY_EVC_KINDS 63     /* kinds with a short form and delta state */
#define DDPSPY_EVC_STACK 0x40
#define DDPSPY_EVC_STR 0x80
#define DDPSPY_EVC_DELTA_ARGS 16 /* arguments with delta state; later ones are relative to 0 */
#define DDPSPY_EVC_MAX_ARGS 64   /* arguments an event may have */
#define DDPSPY_EVC_NA_NONE 0xff  /* "na" entry of a kind absent from the record */

static inline uint64_t ddpspy_zz(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t ddpspy_unzz(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Writes v as LEB128 (at most 10 bytes); returns the end. */
static inline unsigned char *ddpspy_put_varint(unsigned char *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	*p++ = (unsigned char)v;
	return p;
}

/* Reads a varint at p (before end) into v; returns the end, NULL when truncated or too long. */
static inline const unsigned char *ddpspy_get_varint(const unsigned char *p, const unsigned char *end,
						     uint64_t *v)
{
	if (__builtin_expect(p < end && *p < 0x80, 1)) {
		*v = *p;
		return p + 1;
	}
	uint64_t r = 0;
	for (int s = 0; s < 64 && p < end; s += 7) {
		unsigned char c = *p++;
		r |= (uint64_t)(c & 0x7f) << s;
		if (c < 0x80) {
			*v = r;
			return p;
		}
	}
	return NULL;
}

#endif
