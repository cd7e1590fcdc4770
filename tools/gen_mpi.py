#!/usr/bin/env python3
"""Generates preload/mpi_wrappers.inc, the MPI wrappers, from the table below.

Each MPI_X is defined by ddpspy and forwards to PMPI_X (the MPI profiling interface). What differs
between wrappers is data, so it lives here; the recording logic lives in preload/mpi.c. Run
`make gen` after editing; `make test` checks the checked-in output is current.
"""
import re
import sys

C, I, P, W, A = "coll", "icoll", "p2p", "wait", "any"

# name, parameters, kind, op, bytes expression, root / peer expression, extra
# (extra: tag expression for p2p; the request argument for nonblocking calls; for waits and tests,
# whether they completed something; for the "any" and "some" calls, the array's index they
# completed, -1 none)
TABLE = [
    ("Barrier", "MPI_Comm comm", C, "BARRIER", "0", "-1"),
    ("Bcast", "void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm",
     C, "BCAST", "count * tsize(datatype)", "root"),
    ("Reduce", "const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm",
     C, "REDUCE", "count * tsize(datatype)", "root"),
    ("Allreduce", "const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm",
     C, "ALLREDUCE", "count * tsize(datatype)", "-1"),
    ("Allgather", "const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm",
     C, "ALLGATHER", "recvcount * tsize(recvtype) * csize(comm)", "-1"),
    ("Allgatherv", "const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm",
     C, "ALLGATHERV", "vsum(recvcounts, comm) * tsize(recvtype)", "-1"),
    ("Gather", "const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm",
     C, "GATHER", "(sendbuf == MPI_IN_PLACE ? recvcount * tsize(recvtype) : sendcount * tsize(sendtype)) * csize(comm)", "root"),
    ("Gatherv", "const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm",
     C, "GATHERV", "crank(comm) == root ? vsum(recvcounts, comm) * tsize(recvtype) : sendcount * tsize(sendtype)", "root"),
    ("Scatter", "const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm",
     C, "SCATTER", "(recvbuf == MPI_IN_PLACE ? sendcount * tsize(sendtype) : recvcount * tsize(recvtype)) * csize(comm)", "root"),
    ("Scatterv", "const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm",
     C, "SCATTERV", "crank(comm) == root ? vsum(sendcounts, comm) * tsize(sendtype) : recvcount * tsize(recvtype)", "root"),
    ("Alltoall", "const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm",
     C, "ALLTOALL", "(sendbuf == MPI_IN_PLACE ? recvcount * tsize(recvtype) : sendcount * tsize(sendtype)) * csize(comm)", "-1"),
    ("Alltoallv", "const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm",
     C, "ALLTOALLV", "sendbuf == MPI_IN_PLACE ? vsum(recvcounts, comm) * tsize(recvtype) : vsum(sendcounts, comm) * tsize(sendtype)", "-1"),
    ("Reduce_scatter", "const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op, MPI_Comm comm",
     C, "REDUCE_SCATTER", "vsum(recvcounts, comm) * tsize(datatype)", "-1"),
    ("Reduce_scatter_block", "const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm",
     C, "REDUCE_SCATTER_BLOCK", "recvcount * tsize(datatype) * csize(comm)", "-1"),
    ("Alltoallw", "const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm",
     C, "ALLTOALLW", "sendbuf == MPI_IN_PLACE ? wsum(recvcounts, recvtypes, comm) : wsum(sendcounts, sendtypes, comm)", "-1"),
    ("Scan", "const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm",
     C, "SCAN", "count * tsize(datatype)", "-1"),
    ("Exscan", "const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm",
     C, "EXSCAN", "count * tsize(datatype)", "-1"),
]
# nonblocking collectives: the blocking entry's parameters plus MPI_Request *request
for name, params, _, op, nbytes, root in list(TABLE):
    TABLE.append(("I" + name.lower(), params + ", MPI_Request *request", I, op, nbytes, root))
TABLE += [
    ("Send", "const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm",
     P, "SEND", "count * tsize(datatype)", "dest", "tag", "0"),
    ("Isend", "const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request",
     P, "SEND", "count * tsize(datatype)", "dest", "tag", "request"),
    # synchronous, buffered and ready sends: sends like any other (matched the same way)
    ("Ssend", "const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm",
     P, "SEND", "count * tsize(datatype)", "dest", "tag", "0"),
    ("Bsend", "const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm",
     P, "SEND", "count * tsize(datatype)", "dest", "tag", "0"),
    ("Rsend", "const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm",
     P, "SEND", "count * tsize(datatype)", "dest", "tag", "0"),
    ("Issend", "const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request",
     P, "SEND", "count * tsize(datatype)", "dest", "tag", "request"),
    ("Ibsend", "const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request",
     P, "SEND", "count * tsize(datatype)", "dest", "tag", "request"),
    ("Irsend", "const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request",
     P, "SEND", "count * tsize(datatype)", "dest", "tag", "request"),
    ("Irecv", "void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Request *request",
     P, "RECV", "count * tsize(datatype)", "source", "tag", "request"),
    ("Wait", "MPI_Request *request, MPI_Status *status", W, "WAIT", "1", "request", "1"),
    ("Waitall", "int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[]",
     W, "WAITALL", "count", "array_of_requests", "1"),
    ("Test", "MPI_Request *request, int *flag, MPI_Status *status", W, "TEST", "1", "request", "*flag"),
    ("Testall", "int count, MPI_Request array_of_requests[], int *flag, MPI_Status array_of_statuses[]",
     W, "TESTALL", "count", "array_of_requests", "*flag"),
    ("Waitany", "int count, MPI_Request reqs[], int *index, MPI_Status *status",
     A, "WAITANY", "count", "reqs", "index ? *index : -1"),
    ("Waitsome", "int incount, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[]",
     A, "WAITSOME", "incount", "reqs", "outcount && *outcount > 0 && indices ? indices[0] : -1"),
    ("Testany", "int count, MPI_Request reqs[], int *index, int *flag, MPI_Status *status",
     A, "TESTANY", "count", "reqs", "flag && *flag && index ? *index : -1"),
    ("Testsome", "int incount, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[]",
     A, "TESTSOME", "incount", "reqs", "outcount && *outcount > 0 && indices ? indices[0] : -1"),
]

# Waits and tests: the status argument (the call gets ours in its place when the program ignores
# it and a wildcard receive may be among the requests, mpi.c's wild_before), whether it is one
# status or one per request, how many requests the call completed (once it succeeded), and the
# index array naming them (NULL: the first so many)
WILD = {
    "Wait": ("status", 1, "1", "NULL"),
    "Waitall": ("array_of_statuses", 0, "count", "NULL"),
    "Test": ("status", 1, "*flag ? 1 : 0", "NULL"),
    "Testall": ("array_of_statuses", 0, "*flag ? count : 0", "NULL"),
    "Waitany": ("status", 1, "index && *index >= 0 ? 1 : 0", "index"),
    "Testany": ("status", 1, "flag && *flag && index && *index >= 0 ? 1 : 0", "index"),
    "Waitsome": ("statuses", 0, "outcount && *outcount > 0 ? *outcount : 0", "indices"),
    "Testsome": ("statuses", 0, "outcount && *outcount > 0 ? *outcount : 0", "indices"),
}

NAME_RE = re.compile(r"(\w+)(\[\])?$")


def argnames(params):
    return ", ".join(NAME_RE.search(p.strip()).group(1) for p in params.split(","))


def wrapper(e):
    name, params, kind, op = e[0], e[1], e[2], e[3]
    args = argnames(params)
    pname = "PMPI_" + name
    out = [f"DSP_REAL(int, {pname}, ({params}), \"libmpi\")",
           f"int MPI_{name}({params})",
           "{",
           f"\tif (!get_{pname}())",
           "\t\treturn MPI_ERR_OTHER;",
           "\tstruct dsp_tls *t = &dsp_tls;",
           "\tif (!dsp_enter(t))",
           f"\t\treturn real_{pname}({args});"]
    call = args
    if kind == W:
        # the request handles are read before the call, which frees them
        out.append(f"\tint64_t req = first_request({e[5]}, {e[4]});")
    elif kind == A:
        out += ["\tMPI_Request saved[REQ_COPY];", f"\tint n = copy_requests(saved, {e[5]}, {e[4]});"]
    if name in WILD:
        st = WILD[name][0]
        out += ["\tstruct wildcap cap;",
                f"\tMPI_Status *sts = wild_before(&cap, {e[5]}, {e[4]}, {st});"]
        call = ", ".join("sts" if a == st else a for a in args.split(", "))
    o = "DDPSPY_OP_" + op
    nbytes = e[4]
    # calls that can block are published as in flight (internal.h, DSP_CALL), with their event's
    # arguments as known on entry: a collective's sequence number is the one it will get
    if kind == C:
        nbytes = "nb"
        out += [f"\tint64_t nb = {e[4]};",
                "\tstruct comm_ent *ce = comm_get(t, comm);",
                f"\tuint64_t t0 = DSP_CALL(t, DDPSPY_EV_MPI_COLL, -1, 6, {o}, ce ? ce->id : -1, seq_now(ce), nb, "
                f"{e[5]}, -1);"]
    elif kind == P and e[7] == "0":
        nbytes = "nb"
        out += [f"\tint64_t nb = {e[4]};",
                "\tstruct comm_ent *ce = comm_get(t, comm);",
                f"\tuint64_t t0 = DSP_CALL(t, DDPSPY_EV_MPI_P2P, -1, 6, {o}, ce ? ce->id : -1, {e[5]}, {e[6]}, nb, 0);"]
    elif (kind == W or kind == A) and name.startswith("Wait"):
        out.append(f"\tuint64_t t0 = DSP_CALL(t, DDPSPY_EV_MPI_WAIT, -1, 4, {o}, {e[4]}, "
                   f"{'req' if kind == W else 'request_at(saved, n, 0)'}, -1);")
    else:
        out.append("\tuint64_t t0 = dsp_now();")
    out += [f"\tint rc = real_{pname}({call});",
            "\tuint64_t t1 = dsp_now();"]
    if name in WILD:
        _, single, ndone, idx = WILD[name]
        out.append(f"\twild_after(t, t1, &cap, sts, rc == MPI_SUCCESS ? ({ndone}) : 0, {idx}, {single});")
    if name == "Irecv":
        out.append("\tif (rc == MPI_SUCCESS && request && wild(source, tag))\n\t\twild_put(*request);")
    if kind == C:
        out.append(f"\trec_coll(t, t0, t1, {o}, comm, {nbytes}, {e[5]}, -1, rc);")
    elif kind == I:
        out.append(f"\trec_coll(t, t0, t1, {o}, comm, {e[4]}, {e[5]}, request_id(request), rc);")
    elif kind == P:
        req = "request_id(request)" if e[7] == "request" else "0"
        out.append(f"\trec_p2p(t, t0, t1, {o}, comm, {e[5]}, {e[6]}, {nbytes}, {req}, rc);")
    elif kind == W:
        out.append(f"\trec_wait(t, t0, t1, {o}, {e[4]}, req, rc, rc == MPI_SUCCESS && ({e[6]}));")
    else:
        out += [f"\tint i = rc == MPI_SUCCESS ? ({e[6]}) : -1; /* (MPI_UNDEFINED: negative) */",
                f"\trec_wait(t, t0, t1, {o}, 1, request_at(saved, n, i), rc, i >= 0);"]
    out += ["\treturn rc;", "}", ""]
    return "\n".join(out)


def main():
    text = ["/* generated by tools/gen_mpi.py, do not edit: change the table there and run make gen */",
            ""]
    text += [wrapper(e) for e in TABLE]
    sys.stdout.write("\n".join(text))


main()
