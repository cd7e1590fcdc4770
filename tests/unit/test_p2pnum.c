/* The numbering of point-to-point receives (collector/p2p.c, an_p2p_number) when some were posted
 * with MPI_ANY_SOURCE or MPI_ANY_TAG and nonblocking: resolved by their status (an_p2p_resolve) with
 * the number they would have had when posted; not resolved, with the receives they could affect,
 * where a receive they could have taken a message of came first, or an earlier wildcard that could
 * take from the same sender is still pending; and a second reading, given the first's
 * resolutions, numbering them alike at their posting. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../collector/analysis_int.h"
#include "tap.h"

/* a nonblocking receive on communicator 5 from peer (-1: any) with tag (-1: any), request req */
static struct ev recv(int32_t peer, int32_t tag, uint32_t req)
{
	struct ev v;
	memset(&v, 0, sizeof v);
	v.kind = DDPSPY_EV_MPI_P2P;
	v.op = DDPSPY_OP_RECV;
	v.comm = 5;
	v.peer = peer;
	v.tag = tag;
	v.rseq = -1;
	v.req = req;
	v.count = 1;
	return v;
}

static int32_t num(struct p2pnum **t, struct ev v)
{
	an_p2p_number(t, &v);
	return v.seq;
}

int main(void)
{
	struct p2pnum *t = NULL;
	/* post, then its status: the number it would have had (one from peer 1, tag 0, before it) */
	int32_t a = num(&t, recv(1, 0, 0)), w = num(&t, recv(-1, 0, 11)), r = an_p2p_resolve(t, 11, 1, 0);
	int32_t b = num(&t, recv(1, 0, 12));
	ok(a == 0 && w == -1 && r == 1 && b == 2, "a wildcard receive resolved by its status takes the number it had "
	   "when posted, and the next from that sender the one after (%d %d %d %d)", a, w, r, b);
	/* a receive with another tag between: no matter */
	w = num(&t, recv(-1, 0, 13));
	int32_t o = num(&t, recv(1, 7, 14));
	r = an_p2p_resolve(t, 13, 1, 0);
	ok(o == 0 && r == 3, "a receive it could not have taken a message of (another tag) between: resolved (%d %d)", o, r);
	uint64_t wilds = 0, after = 0;
	an_p2p_num_wild(t, &wilds, &after);
	ok(wilds == 0 && after == 0, "nothing unresolved so far (%llu, %llu)", (unsigned long long)wilds,
	   (unsigned long long)after);
	/* a receive naming the sender and tag it could have taken between: not resolved, nor that one */
	w = num(&t, recv(-1, 0, 15));
	b = num(&t, recv(1, 0, 16));
	r = an_p2p_resolve(t, 15, 1, 0);
	int32_t c = num(&t, recv(1, 0, 17));
	an_p2p_num_wild(t, &wilds, &after);
	ok(b == -1 && r == -1 && c == -1 && wilds == 1 && after == 2, "a receive that the wildcard could have taken the "
	   "message of, posted before its status: neither matched, nor the ones after (%d %d %d; %llu, %llu)", b, r, c,
	   (unsigned long long)wilds, (unsigned long long)after);
	struct an_wres *res;
	size_t nres;
	an_p2p_num_res(t, &res, &nres);
	an_p2p_num_free(t);
	ok(nres == 3 && res[0].src == 1 && res[0].tag == 0 && res[1].src == 1 && res[2].src == -1,
	   "the resolutions by order: two resolved, one not (%zu)", nres);
	/* the second reading: the same calls, no status, the same numbers */
	struct p2pnum *u = NULL;
	an_p2p_num_replay(&u, res, nres);
	int32_t s[8] = { num(&u, recv(1, 0, 0)), num(&u, recv(-1, 0, 11)), num(&u, recv(1, 0, 12)), num(&u, recv(-1, 0, 13)),
			 num(&u, recv(1, 7, 14)), num(&u, recv(-1, 0, 15)), num(&u, recv(1, 0, 16)), num(&u, recv(1, 0, 17)) };
	ok(s[0] == 0 && s[1] == 1 && s[2] == 2 && s[3] == 3 && s[4] == 0 && s[5] == -1 && s[6] == -1 && s[7] == -1,
	   "a second reading numbers them as the first resolved them, at their posting: %d %d %d %d %d %d %d %d", s[0], s[1],
	   s[2], s[3], s[4], s[5], s[6], s[7]);
	an_p2p_num_free(u);
	free(res);
	/* two wildcards on one tag, the later one's status first: the earlier could have taken from that
	 * sender, so the later is not resolved; the earlier then is */
	t = NULL;
	int32_t w1 = num(&t, recv(-1, 3, 21)), w2 = num(&t, recv(-1, 3, 22));
	int32_t r2 = an_p2p_resolve(t, 22, 2, 3), r1 = an_p2p_resolve(t, 21, 2, 3);
	ok(w1 == -1 && w2 == -1 && r2 == -1 && r1 == 0, "the later of two wildcards resolved first: not numbered (an "
	   "earlier one could take from its sender), the earlier one then numbered first (%d %d)", r2, r1);
	/* a status that names what the receive did not ask for, or none at all */
	int32_t x = num(&t, recv(4, -1, 23));
	int32_t bad = an_p2p_resolve(t, 23, 5, 1), none = an_p2p_resolve(t, 99, 1, 1);
	ok(x == -1 && bad == -1 && none == -1, "a status naming another source than the receive's, or no pending "
	   "receive: nothing resolved (%d %d)", bad, none);
	an_p2p_num_free(t);
	ok(an_p2p_resolve(NULL, 1, 1, 1) == -1, "no numbering yet: nothing to resolve");
	return done_testing();
}
