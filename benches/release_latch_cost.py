#!/usr/bin/env python3
"""Server time per EVALSHA of the plain release script, two versions side by
side (issue 21, defect 4: latching every release's reply).

Starts its own redis-server on a free port, loads both scripts, and runs
interleaved rounds (A B A B ...): each round takes the lock with a plain
HSET + PEXPIRE (not a script, so `cmdstat_evalsha` counts releases only)
and frees it with one EVALSHA of the version under test, with a fresh
request id and the default latch TTL (33,150 ms). Prints each round's
`usec_per_call` and the medians, and the memory one latch key costs.

    python3 benches/release_latch_cost.py BEFORE.lua AFTER.lua [rounds] [releases]
"""
import os, socket, statistics, subprocess, sys, tempfile, time, uuid


class Conn:
    """A minimal RESP2 client: enough for pipelined commands."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb")

    def send(self, *cmds):
        out = []
        for args in cmds:
            out.append(b"*%d\r\n" % len(args))
            for a in args:
                a = a if isinstance(a, bytes) else str(a).encode()
                out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.s.sendall(b"".join(out))
        return [self.read() for _ in cmds]

    def read(self):
        line = self.f.readline()[:-2]
        t, rest = line[:1], line[1:]
        if t in (b"+", b"-"):
            return rest.decode()
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)[:-2]
            return data.decode()
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError(line)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def evalsha_usec_per_call(c):
    info = c.send(["INFO", "commandstats"])[0]
    for line in info.splitlines():
        if line.startswith("cmdstat_evalsha:"):
            return float(line.split("usec_per_call=")[1].split(",")[0])
    return float("nan")


def round_(c, sha, releases, name="bench-lock", field="uuid-1:1", batch=200, one_latch=False):
    c.send(["CONFIG", "RESETSTAT"])
    prefix = str(uuid.uuid4())
    for start in range(0, releases, batch):
        cmds = []
        for i in range(start, min(start + batch, releases)):
            cmds.append(["HSET", name, field, 1])
            cmds.append(["PEXPIRE", name, 30000])
            cmds.append(["EVALSHA", sha, 3, name, "redisson_lock__channel:{%s}" % name,
                         "redisson_unlock_latch:{%s}:%s:%d" % (name, prefix, 0 if one_latch else i),
                         "0", field, 33150, "publish", "first"])
        for reply in c.send(*cmds):
            if isinstance(reply, str) and reply.startswith("ERR"):
                raise RuntimeError(reply)
    return evalsha_usec_per_call(c)


def main():
    before, after = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 21
    releases = int(sys.argv[4]) if len(sys.argv) > 4 else 5000
    port = free_port()
    d = tempfile.mkdtemp()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--save", "",
                               "--appendonly", "no", "--dir", d],
                              stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                c = Conn(port)
                break
            except OSError:
                time.sleep(0.05)
        shas = {label: c.send(["SCRIPT", "LOAD", open(path).read()])[0]
                for label, path in (("before", before), ("after", after))}
        # Warm-up of both.
        for label in shas:
            round_(c, shas[label], 1000)
        results = {"before": [], "after": []}
        for r in range(rounds):
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            for label in order:
                c.send(["FLUSHALL"])
                results[label].append(round_(c, shas[label], releases))
        for label in ("before", "after"):
            xs = results[label]
            print("%-6s usec_per_call per round: %s" % (label, " ".join("%.2f" % x for x in xs)))
        mb, ma = statistics.median(results["before"]), statistics.median(results["after"])
        print("median usec_per_call: before %.2f, after %.2f, difference %+.2f (%+.0f%%)"
              % (mb, ma, ma - mb, 100 * (ma - mb) / mb))
        # The same, but every release overwrites one latch key (what a latch
        # keyed by holder field instead of request id would cost).
        one = []
        for r in range(rounds):
            c.send(["FLUSHALL"])
            one.append(round_(c, shas["after"], releases, one_latch=True))
        print("after, one latch key overwritten: median usec_per_call %.2f" % statistics.median(one))
        # Memory per latch key left by the after version.
        c.send(["FLUSHALL"])
        def used():
            info = c.send(["INFO", "memory"])[0]
            return int(info.split("used_memory:")[1].split("\r")[0])
        m0 = used()
        round_(c, shas["after"], releases)
        m1 = used()
        keys = c.send(["DBSIZE"])[0]
        print("after: %d releases leave %d keys, used_memory +%d bytes (%.0f bytes per latch)"
              % (releases, keys, m1 - m0, (m1 - m0) / max(keys, 1)))
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
