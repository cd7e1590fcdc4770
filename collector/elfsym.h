/* Native frames by name (elfsym.c): the function an object's offset falls in, from a file of the
 * same build id. */
#ifndef DDPSPY_ELFSYM_H
#define DDPSPY_ELFSYM_H

#include <stddef.h>
#include <stdint.h>

#define ELFSYM_BID_MAX 32 /* bytes of a build id kept (GNU's are 20: SHA-1) */
#define ELFSYM_PLT "@plt" /* the name of an address in a procedure linkage table's stub */

struct trace_file;

/* The function holding offset off (an address less the object's load bias) of the object at
 * path whose build id is bid (nbid bytes), and its start in *start; NULL when no file of that
 * build id can be read or no function holds off. Thread-safe; the name lives as long as the
 * process. */
const char *elfsym_find(const char *path, const uint8_t *bid, int nbid, uint64_t off, uint64_t *start);

struct trace_module;

/* The function holding offset off of module m, demangled (C++), into buf (cut short with "..."
 * to fit n bytes), and off's offset in it in *foff: the name's length, 0 when unknown. ret: off
 * is a return address (a caller's frame), so the call it returns from is looked up. */
int elfsym_function(const struct trace_module *m, uint64_t off, int ret, char *buf, size_t n, uint64_t *foff);

/* A frame as text into buf: "module+0xoffset", with " (function+0xoffset)" where the function is
 * known, or "0xaddress" outside every object; ret as above. snprintf's result. */
int trace_frame_text(const struct trace_file *f, uint64_t ip, int ret, char *buf, size_t n);

/* The function holding ip as text, "module+0xstart (function)" (start: the function's first
 * byte), so that every address in one function reads the same; trace_frame_text's where the
 * function is not known. */
int trace_function_text(const struct trace_file *f, uint64_t ip, int ret, char *buf, size_t n);

/* A CPU sample's site (stack s, its first frame the sampled instruction): the index of its
 * innermost frame in the program's own code, past the system's libraries (the C library, the
 * loader, libm, the vDSO; not an installed package's), ddpspy's own (its recording of a call,
 * which is that call's cost) and linkage stubs (@plt): memcpy's caller; the outermost when every
 * frame is theirs. */
struct trace_stack;
uint32_t trace_sample_site(const struct trace_file *f, const struct trace_stack *s);

#endif
