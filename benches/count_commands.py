#!/usr/bin/env python3
"""Commands each lock library sends to Redis per lock operation: the table in
docs/performance.md ("Commands per operation, against the peers").

Starts a throwaway redis-server, keeps a MONITOR connection on it, and runs
every scenario for redhold, rslock 0.10, rlock 0.2 and redis-lock 0.5 (the
peers binary's count mode, benches/peers/src/count.rs) and for Redisson's
RLock (the compat suite's Java driver, compat/redisson, one JVM per client).
Each measured part is bracketed by `ECHO count:begin:...` / `ECHO count:end`
on a control connection, with `CONFIG RESETSTAT` / `INFO commandstats`
inside the brackets. A command is "sent" when MONITOR shows it coming from a
client connection; commands a script runs (MONITOR's `[0 lua]` lines) are
left out, as are the control connection's own. commandstats (which counts
both) is printed beside as a cross-check.

Usage (from the repository root):  python3 benches/count_commands.py
  [--no-redisson]  skip Redisson (no java/mvn needed)
  [--details]      also print every scenario's commands by name
  [--log FILE]     write the whole MONITOR log to FILE
Needs redis-server and cargo on PATH; java 17+ and mvn for Redisson.
Takes about two minutes.
"""

import json
import os
import queue
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The same figures as count.rs, for Redisson's side.
PAIRS, ROUNDS, HERD_CLIENTS, HERD_ROUNDS = 100, 20, 8, 10
HOLD_FOR_WAITER, HERD_HOLD_MS, IDLE_SETTLE, IDLE_WINDOW = 0.05, 1, 2, 10
LIBRARIES = ["redhold", "redisson", "rlock", "rslock", "redis_lock"]
TITLES = {
    "redhold": "redhold",
    "redisson": "Redisson 4.7 (RLock)",
    "rlock": "rlock 0.2",
    "rslock": "rslock 0.10",
    "redis_lock": "redis-lock 0.5",
}


class Resp:
    """A minimal RESP2 connection: enough for ECHO, CONFIG, INFO, MONITOR."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.file = self.sock.makefile("rb")

    def send(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)

    def reply(self):
        line = self.file.readline().rstrip(b"\r\n")
        kind, rest = line[:1], line[1:]
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.file.read(n + 2)[:-2]
            return data.decode(errors="replace")
        if kind == b"-":
            raise RuntimeError(rest.decode())
        return rest.decode(errors="replace")

    def call(self, *args):
        self.send(*args)
        return self.reply()


class Server:
    """redis-server on a free port in a temporary directory."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="redhold-count-")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL)
        for _ in range(100):
            try:
                Resp(self.port).call("PING")
                break
            except OSError:
                time.sleep(0.05)
        self.url = "redis://127.0.0.1:%d/" % self.port
        info = Resp(self.port).call("INFO", "server")
        self.version = re.search(r"redis_version:(\S+)", info).group(1)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class Monitor:
    """A MONITOR connection; `lines` fills in a thread of its own."""

    def __init__(self, port):
        self.conn = Resp(port)
        self.conn.call("MONITOR")
        self.lines = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        while True:
            line = self.conn.file.readline()
            if not line:
                return
            self.lines.append(line.decode(errors="replace").rstrip("\r\n"))


MONITOR_LINE = re.compile(r'^\+?\S+ \[\d+ ([^\]]+)\] "((?:[^"\\]|\\.)*)"(?: "((?:[^"\\]|\\.)*)")?')


def segments(lines):
    """(tag, sent, inner) for every ECHO-bracketed part: command -> count."""
    out, current, control = [], None, None
    for line in lines:
        m = MONITOR_LINE.match(line)
        if not m:
            continue
        source, cmd, first = m.group(1), m.group(2).upper(), m.group(3) or ""
        if cmd == "ECHO" and first.startswith("count:begin:"):
            current, control = (first, {}, {}), source
            continue
        if current is None:
            continue
        if source == control:
            if cmd == "ECHO" and first == "count:end":
                out.append(current)
                current = None
            continue
        counts = current[2] if source == "lua" else current[1]
        counts[cmd] = counts.get(cmd, 0) + 1
    return out


def executed(info):
    calls = {}
    for m in re.finditer(r"cmdstat_([^:]+):calls=(\d+)", info):
        if not m.group(1).startswith("config") and m.group(1) != "info":
            calls[m.group(1)] = int(m.group(2))
    return calls


# ---------------------------------------------------------------- Redisson


class Driver:
    """One Redisson client: the compat suite's Java driver (Driver.java)."""

    def __init__(self, jar, url, log):
        self.proc = subprocess.Popen(
            ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
             "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-jar", jar,
             "--single", url, "--watchdog", "60000"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)
        self.next, self.waiting, self.lock = 0, {}, threading.Lock()
        first = self.proc.stdout.readline()
        if not first.startswith("ready "):
            raise RuntimeError("the Java driver did not start: %r" % first)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            words = line.split(" ", 2)
            with self.lock:
                q = self.waiting.pop(words[0], None)
            if q:
                q.put(words[1:])

    def send(self, slot, *op):
        with self.lock:
            self.next += 1
            ident, q = str(self.next), queue.Queue()
            self.waiting[ident] = q
        self.proc.stdin.write("%s %s %s\n" % (ident, slot, " ".join(map(str, op))))
        self.proc.stdin.flush()
        return q

    @staticmethod
    def wait(q):
        answer = q.get(timeout=120)
        if answer[0] != "ok":
            raise RuntimeError("Redisson: %s" % " ".join(answer))

    def call(self, slot, *op):
        Driver.wait(self.send(slot, *op))

    def close(self):
        self.proc.kill()
        self.proc.wait()


def redisson(server, control, jar):
    """Redisson's scenarios, as count.rs runs the Rust libraries'; one
    commandstats dict per scenario."""
    stats = {}

    def measure(scenario, ops, part):
        control.call("ECHO", "count:begin:redisson:%s:%d" % (scenario, ops))
        control.call("CONFIG", "RESETSTAT")
        part()
        stats[scenario] = executed(control.call("INFO", "commandstats"))
        control.call("ECHO", "count:end")

    log = tempfile.TemporaryFile()
    a, b = Driver(jar, server.url, log), Driver(jar, server.url, log)
    drivers = [a, b]
    try:
        a.call("p", "loop", "plain", "count:redisson:pair", 5, 1, 0)
        measure("uncontended", PAIRS,
                lambda: a.call("p", "loop", "plain", "count:redisson:pair", PAIRS, 1, 0))
        a.call("p", "loop", "plain", "count:redisson:reentrant", 2, 2, 0)
        measure("reentrant", PAIRS,
                lambda: a.call("p", "loop", "plain", "count:redisson:reentrant", PAIRS, 2, 0))

        def hand_over(holder, waiter, name, rounds):
            for _ in range(rounds):
                holder.call("h", "lock", "plain", name)
                waiting = waiter.send("w", "lock", "plain", name)
                time.sleep(HOLD_FOR_WAITER)
                holder.call("h", "unlock", "plain", name)
                Driver.wait(waiting)
                waiter.call("w", "unlock", "plain", name)

        for scenario, holder, waiter in [("clients", a, b), ("threads", a, a)]:
            name = "count:redisson:" + scenario
            hand_over(holder, waiter, name, 2)
            measure(scenario, ROUNDS, lambda: hand_over(holder, waiter, name, ROUNDS))

        name = "count:redisson:idle"
        b.call("w", "lock", "plain", name)
        b.call("w", "unlock", "plain", name)
        a.call("h", "lock", "plain", name)
        waiting = b.send("w", "lock", "plain", name)
        time.sleep(IDLE_SETTLE)
        measure("idle", IDLE_WINDOW, lambda: time.sleep(IDLE_WINDOW))
        a.call("h", "unlock", "plain", name)
        Driver.wait(waiting)
        b.call("w", "unlock", "plain", name)

        drivers += [Driver(jar, server.url, log) for _ in range(HERD_CLIENTS - 2)]
        name = "count:redisson:herd"
        for d in drivers:
            d.call("p", "loop", "plain", name, 1, 1, 0)

        def herd():
            pending = [d.send("p", "loop", "plain", name, HERD_ROUNDS, 1, HERD_HOLD_MS)
                       for d in drivers]
            for q in pending:
                Driver.wait(q)

        measure("herd", HERD_CLIENTS * HERD_ROUNDS, herd)
    except Exception:
        log.seek(0)
        sys.stderr.write(log.read().decode(errors="replace")[-4000:])
        raise
    finally:
        for d in drivers:
            d.close()
    return stats


def build(with_redisson):
    subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "redhold-peers"],
                   cwd=ROOT, check=True)
    if not with_redisson:
        return None
    driver_dir = os.path.join(ROOT, "compat", "redisson")
    jar = os.path.join(driver_dir, "target", "redhold-compat-driver.jar")
    sources = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(driver_dir, "src"))
               for f in fs] + [os.path.join(driver_dir, "pom.xml")]
    # As compat/redisson/run.sh: Maven only when the driver changed.
    if not os.path.exists(jar) or any(os.path.getmtime(f) > os.path.getmtime(jar)
                                      for f in sources):
        done = subprocess.run(["mvn", "-B", "-q", "-f", os.path.join(driver_dir, "pom.xml"),
                               "-DskipTests", "package"], capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit("building the Redisson driver failed:\n" + done.stdout + done.stderr)
    return jar


# ------------------------------------------------------------------- table


def fmt(x):
    return "%.2f" % x if abs(x - round(x)) > 0.005 else "%d" % round(x)


def table(results):
    """results[lib][scenario] = (ops, sent, inner, executed)."""
    def per(lib, scenario, skip=()):
        ops, sent, _, _ = results[lib][scenario]
        return sum(n for c, n in sent.items() if c not in skip) / ops

    rows = []
    libs = [l for l in LIBRARIES if l in results]
    rows.append("| commands sent per … | " + " | ".join(TITLES[l] for l in libs) + " |")
    rows.append("|---" * (len(libs) + 1) + "|")

    def row(label, cell):
        cells = []
        for lib in libs:
            try:
                cells.append(cell(lib))
            except KeyError:
                cells.append("–")
        rows.append("| %s | %s |" % (label, " | ".join(cells)))

    row("uncontended acquire + release", lambda l: fmt(per(l, "uncontended")))
    row("reentrant pair (acquire ×2, release ×2)", lambda l: fmt(per(l, "reentrant")))
    row("hand-over between two clients",
        lambda l: fmt(per(l, "clients") - per(l, "uncontended")))
    row("hand-over between two threads of one client",
        lambda l: fmt(per(l, "threads") - per(l, "uncontended")))
    row("hand-over with 8 clients waiting (per critical section)",
        lambda l: fmt(per(l, "herd")))

    def idle(l):
        lock = per(l, "idle", skip=("PING",))
        ping = results[l]["idle"][1].get("PING", 0) / results[l]["idle"][0]
        return fmt(lock) + (" (+%s PING)" % fmt(ping) if ping else "")

    row("idle waiter, per second", idle)
    return "\n".join(rows)


def details(results):
    out = []
    for lib in [l for l in LIBRARIES if l in results]:
        for scenario, (ops, sent, inner, execd) in results[lib].items():
            by = lambda d: ", ".join("%s %s" % (c, fmt(n / ops)) for c, n in sorted(d.items()))
            out.append("%-10s %-11s ops %3d | sent: %s | scripts ran: %s | commandstats: %s"
                       % (lib, scenario, ops, by(sent) or "-", by(inner) or "-",
                          fmt(sum(execd.values()) / ops)))
    return "\n".join(out)


def main():
    with_redisson = "--no-redisson" not in sys.argv
    jar = build(with_redisson)
    server = Server()
    try:
        monitor = Monitor(server.port)
        control = Resp(server.port)
        stats = {}
        out = subprocess.run([os.path.join(ROOT, "target", "release", "peers"), "--count",
                              server.url], check=True, stdout=subprocess.PIPE, text=True).stdout
        for line in out.splitlines():
            j = json.loads(line)
            stats[(j["library"], j["scenario"])] = j["executed"]
        if with_redisson:
            for scenario, calls in redisson(server, control, jar).items():
                stats[("redisson", scenario)] = calls
        time.sleep(0.5)  # the last MONITOR lines
        if "--log" in sys.argv:
            with open(sys.argv[sys.argv.index("--log") + 1], "w") as f:
                f.write("\n".join(monitor.lines) + "\n")
        results = {}
        for tag, sent, inner in segments(list(monitor.lines)):
            _, _, lib, scenario, ops = tag.split(":")
            results.setdefault(lib, {})[scenario] = (
                int(ops), sent, inner, stats.get((lib, scenario), {}))
        print("Redis %s, %s UTC\n" % (server.version,
                                      time.strftime("%Y-%m-%d %H:%M", time.gmtime())))
        print(table(results))
        if "--details" in sys.argv:
            print()
            print(details(results))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
