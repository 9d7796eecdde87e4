#!/usr/bin/env python3
"""Traces etcd handovers end to end, on the wire: elect's and `etcdctl elect`'s.

Starts a 3-member etcd through `elect lab` (local processes) and, for each
implementation, a leader and one waiting candidate. It captures the
clients' traffic to the members on loopback with tshark and signals the
leader. The timeline of one handover, in milliseconds from the signal,
merges:

- every gRPC request and answer of both candidates (which member, the
  keys, the revisions, the watch events), decoded from the capture;
- for elect, both processes' debug lines, and the moment the leader's
  command (`elect run -- sleep`) died, seen through a pidfd;
- the moment the successor's announcement was read from its stdout.

Then it times --trials handovers of fresh pairs without a capture and
prints their median, and the requests etcd's members counted per
handover (grpc_server_handled_total, by method).

Needs tshark (Debian's `tshark`) and etcdctl; run as root or with the
capture capability. Usage:

  deploy/trace-etcd-handover.py [--elect target/release/elect] [--trials 40]
"""

import argparse
import json
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import datetime, timezone

# --- a minimal protobuf reader: enough of etcd's messages to name keys,
# revisions and watch events.


def fields(buf):
    """(field number, wire type, value) of a protobuf message."""
    i, out = 0, []
    while i < len(buf):
        key, i = varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(buf, i)
        elif wire == 2:
            length, i = varint(buf, i)
            value, i = buf[i:i + length], i + length
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        out.append((number, wire, value))
    return out


def varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7


def first(msg, number, default=None):
    return next((v for n, _, v in fields(msg) if n == number), default)


def every(msg, number):
    return [v for n, _, v in fields(msg) if n == number]


def key_text(raw):
    return raw.decode("utf-8", "replace").replace("\0", "\\0")


def revision(header):
    return first(header, 3, 0) if header else 0


def describe_ops(ops):
    """RequestOps of a Txn, as put(k) delete(k) range(k) txn(...)."""
    parts = []
    for op in ops:
        for number, _, body in fields(op):
            if number == 1:
                parts.append(f"range({key_text(first(body, 1, b''))})")
            elif number == 2:
                ignore = first(body, 5, 0) or first(body, 6, 0)
                parts.append(f"put({key_text(first(body, 1, b''))}{', unchanged' if ignore else ''})")
            elif number == 3:
                parts.append(f"delete({key_text(first(body, 1, b''))})")
            elif number == 4:
                parts.append(f"txn(if {describe_compares(every(body, 1))} then "
                             f"{describe_ops(every(body, 2))})")
    return ", ".join(parts)


def describe_compares(compares):
    targets = {0: "version", 1: "create", 2: "mod", 3: "value", 4: "lease"}
    parts = []
    for c in compares:
        target = targets.get(first(c, 2, 0), "?")
        parts.append(f"{target}({key_text(first(c, 3, b''))})")
    return " and ".join(parts) or "true"


def describe_request(path, msg):
    method = path.rsplit("/", 1)[-1]
    if method == "Range":
        flags = []
        if first(msg, 7, 0):
            flags.append("serializable")
        if first(msg, 9, 0):
            flags.append("count")
        extra = f" ({', '.join(flags)})" if flags else ""
        return f"Range {key_text(first(msg, 1, b''))}{extra}"
    if method == "Txn":
        return (f"Txn if {describe_compares(every(msg, 1))} then "
                f"{describe_ops(every(msg, 2))}")
    if method == "DeleteRange":
        return f"DeleteRange {key_text(first(msg, 1, b''))}"
    if method == "Watch":
        create = first(msg, 1)
        if create is not None:
            return f"Watch {key_text(first(create, 1, b''))} from {first(create, 3, 0)}"
        return "Watch (other)"
    if method in ("LeaseRevoke", "LeaseKeepAlive", "LeaseGrant", "LeaseTimeToLive"):
        return f"{method} {first(msg, 1, 0) or first(msg, 2, 0):x}"
    return method


def describe_answer(path, msg):
    method = path.rsplit("/", 1)[-1]
    header = first(msg, 1)
    if method == "Watch":
        events = every(msg, 11)
        if first(msg, 3, 0):
            return "watch created"
        if not events:
            return f"watch progress at {revision(header)}"
        parts = []
        for ev in events:
            kind = "DELETE" if first(ev, 1, 0) == 1 else "PUT"
            kv = first(ev, 2, b"")
            parts.append(f"{kind} {key_text(first(kv, 1, b''))} at {first(kv, 3, 0)}"
                         + (f" (version {first(kv, 4, 0)})" if kind == "PUT" else ""))
        return "event: " + "; ".join(parts)
    if method == "Txn":
        return f"Txn answered at {revision(header)}, {'then' if first(msg, 2, 0) else 'else'}"
    if method == "Range":
        return f"Range answered at {revision(header)}, {first(msg, 4, 0)} keys"
    return f"{method} answered at {revision(header)}"


# --- the capture


class Capture:
    """tshark on loopback, writing the members' client traffic to a file."""

    def __init__(self, ports):
        self.file = tempfile.NamedTemporaryFile(suffix=".pcapng", delete=False).name
        self.ports = sorted(set(ports))
        flt = " or ".join(f"tcp port {p}" for p in self.ports)
        self.proc = subprocess.Popen(
            ["tshark", "-q", "-i", "lo", "-f", flt, "-w", self.file],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # tshark says "Capturing on" as its capture starts; a connection
        # whose first frames were missed cannot be decoded (HPACK), so
        # give it a moment more.
        while "Capturing on" not in self.proc.stderr.readline():
            if self.proc.poll() is not None:
                raise RuntimeError("tshark did not start")
        time.sleep(0.5)

    def stop(self):
        time.sleep(0.2)
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=10)

    def calls(self):
        """[(time, client port, member, 'request'|'answer', text)]."""
        decode = [a for p in self.ports for a in ("-d", f"tcp.port=={p},http2")]
        out = subprocess.run(
            ["tshark", "-r", self.file, *decode, "-T", "fields",
             "-e", "frame.time_epoch", "-e", "ip.src", "-e", "tcp.srcport",
             "-e", "ip.dst", "-e", "tcp.dstport", "-e", "http2.streamid",
             "-e", "http2.type", "-e", "http2.length", "-e", "http2.header.count",
             "-e", "http2.header.name", "-e", "http2.header.value",
             "-e", "grpc.message_data",
             "-E", "occurrence=a", "-E", "aggregator=|", "-E", "separator=\t"],
            capture_output=True, text=True).stdout
        os.unlink(self.file)
        paths, rows = {}, []
        for line in out.splitlines():
            cols = line.split("\t") + [""] * 12
            at = float(cols[0])
            to_member = int(cols[4]) in self.ports
            client = int(cols[2]) if to_member else int(cols[4])
            member = f"{cols[3]}:{cols[4]}" if to_member else f"{cols[1]}:{cols[2]}"
            split = lambda s: s.split("|") if s else []
            streams, types, lengths = split(cols[5]), split(cols[6]), split(cols[7])
            counts = [int(c) for c in split(cols[8])]
            names, values = split(cols[9]), split(cols[10])
            messages = [bytes.fromhex(m) for m in split(cols[11])]
            headers = iter(zip(names, values))
            for stream, kind, length in zip(streams, types, lengths):
                conn = (client, stream)
                if kind == "1":  # HEADERS
                    block = [next(headers, ("", "")) for _ in range(counts.pop(0) if counts else 0)]
                    for name, value in block:
                        if name == ":path":
                            paths[conn] = value
                elif kind == "0" and int(length) > 0 and messages and conn in paths:
                    # The messages this DATA frame completes, in order.
                    room = int(length)
                    while messages and (room > 0):
                        msg = messages.pop(0)
                        room -= len(msg) + 5
                        try:
                            text = (describe_request if to_member else describe_answer)(paths[conn], msg)
                        except (ValueError, IndexError):
                            text = paths[conn].rsplit("/", 1)[-1]
                        rows.append((at, client, member, "request" if to_member else "answer", text))
        return rows


def client_ports(pids):
    """Local TCP ports of each pid's connections: {port: pid}."""
    out = subprocess.run(["ss", "-tnpH"], capture_output=True, text=True).stdout
    ports = {}
    for line in out.splitlines():
        m = re.search(r"pid=(\d+)", line)
        if m and int(m.group(1)) in pids:
            local = line.split()[3]
            ports[int(local.rsplit(":", 1)[1])] = int(m.group(1))
    return ports


def descendants(pid):
    children = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            children += open(f"/proc/{pid}/task/{task}/children").read().split()
        except OSError:
            pass
    out = []
    for child in map(int, children):
        out.append(child)
        out += descendants(child)
    return out


def watch_death(pid, box):
    """Records in box[0] when `pid` exits (a pidfd becomes readable)."""
    fd = os.pidfd_open(pid)

    def wait():
        select.select([fd], [], [])
        box.append(time.time())
        os.close(fd)
    threading.Thread(target=wait, daemon=True).start()


# --- candidates


def lab_up(elect, lab_dir):
    out = subprocess.run(
        [elect, "lab", "up", "--etcd", "3", "--zk", "0", "--format", "env", "--dir", lab_dir],
        check=True, capture_output=True, text=True).stdout
    return re.search(r"ELECT_ETCD_ENDPOINTS='([^']+)'", out).group(1)


def handled(endpoints):
    """grpc_server_handled_total summed over members, by method."""
    counts = {}
    for member in endpoints.split(","):
        text = urllib.request.urlopen(f"http://{member}/metrics", timeout=5).read().decode()
        for line in text.splitlines():
            if line.startswith("grpc_server_handled_total{"):
                method = re.search(r'grpc_method="([^"]+)"', line).group(1)
                counts[method] = counts.get(method, 0) + float(line.rsplit(" ", 1)[1])
    return counts


def delta(before, after):
    return {m: int(after[m] - before.get(m, 0)) for m in after if after[m] - before.get(m, 0) >= 1}


def read_until(proc, predicate, within=15):
    deadline = time.time() + within
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("the candidate exited")
        if predicate(line):
            return time.time()
    raise RuntimeError("timed out")


def elect_candidate(elect, endpoints, election, cid, log):
    env = dict(os.environ, RUST_LOG="warn,elect=debug")
    return subprocess.Popen(
        [elect, "run", "--backend", "etcd", "--endpoints", endpoints,
         "--election", election, "--id", cid, "--ttl", "5", "--format", "json",
         "--", "sleep", "1000000"],
        stdout=subprocess.PIPE, stderr=log, text=True, env=env)


def etcdctl_candidate(endpoints, election, cid):
    env = dict(os.environ, ETCDCTL_API="3")
    return subprocess.Popen(
        ["etcdctl", "--endpoints", endpoints, "elect", election, cid],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)


def one_handover(kind, elect, endpoints, election, logs, capture=None):
    """Signals the leader; returns (signal time, announcement read, requests
    etcd counted, capture rows, command death, {port: who})."""
    if kind == "elect":
        a = elect_candidate(elect, endpoints, election, "a", logs[0])
        read_until(a, lambda l: '"event":"elected"' in l)
        b = elect_candidate(elect, endpoints, election, "b", logs[1])
        read_until(b, lambda l: '"leader":"a"' in l)
        elected = lambda l: '"event":"elected"' in l
        sig = signal.SIGTERM
    else:
        a = etcdctl_candidate(endpoints, election, "a")
        read_until(a, lambda l: l.strip() == "a")
        b = etcdctl_candidate(endpoints, election, "b")
        elected = lambda l: l.strip() == "b"
        # etcdctl elect resigns on an interrupt; SIGTERM would kill it
        # with its key left to its lease (a minute).
        sig = signal.SIGINT
    time.sleep(1.0)  # b waits on a; renewals settle
    who = {port: ("leader   " if pid == a.pid else "successor")
           for port, pid in client_ports({a.pid, b.pid}).items()}
    died = []
    if kind == "elect":
        sleeper = [p for p in descendants(a.pid)
                   if open(f"/proc/{p}/comm").read().strip() == "sleep"]
        watch_death(sleeper[-1], died)
    before = handled(endpoints)
    sent = time.time()
    a.send_signal(sig)
    got = read_until(b, elected)
    a.wait(timeout=10)
    time.sleep(0.3)
    requests = delta(before, handled(endpoints))
    b.send_signal(sig)
    b.wait(timeout=10)
    return sent, got, requests, died[0] if died else None, who


def log_rows(paths, sent, until):
    stamp = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z\s+(\w+)\s+(\S+): (.*)$")
    rows = []
    for who, path in paths:
        for line in open(path):
            m = stamp.match(re.sub(r"\x1b\[[0-9;]*m", "", line))
            if not m:
                continue
            at = datetime.fromisoformat(m.group(1)).replace(tzinfo=timezone.utc).timestamp()
            if sent - 0.001 <= at <= until:
                rows.append((at, who, "log", f"{m.group(3).split('::')[-1]}: {m.group(4)}"))
    return rows


def print_timeline(rows, sent):
    for at, who, what, text in sorted(rows):
        print(f"  {1e3 * (at - sent):8.3f} ms  {who}  {what:>8}  {text}")


def trace_one(kind, elect, endpoints, ports):
    logs = [tempfile.NamedTemporaryFile("w+", suffix=f"-{c}.log", delete=False) for c in "ab"]
    capture = Capture(ports)
    try:
        sent, got, requests, died, who = one_handover(kind, elect, endpoints, f"trace-{kind[0]}", logs)
    finally:
        capture.stop()
    until = got + 0.004
    rows = [(at, who.get(port, "(other)  "), f"{'->' if d == 'request' else '<-'} {member.rsplit('.', 1)[-1]}", text)
            for at, port, member, d, text in capture.calls()
            if sent - 0.0005 <= at <= until and port in who]
    if kind == "elect":
        rows += log_rows([("leader   ", logs[0].name), ("successor", logs[1].name)], sent, until)
    if died is not None:
        rows.append((died, "leader   ", "", "the command (sleep) is dead"))
    rows.append((sent, "leader   ", "", f"{'SIGTERM' if kind == 'elect' else 'SIGINT'} sent"))
    rows.append((got, "successor", "", "its announcement read from stdout"))
    print(f"{kind}: one handover on the wire, in ms from the signal to the leader "
          f"(-> a request to member .N, <- its answer or watch event; log: the process's debug line)")
    print_timeline(rows, sent)
    print(f"  requests etcd handled meanwhile (its metrics): {json.dumps(requests, sort_keys=True)}\n")
    for log in logs:
        os.unlink(log.name)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--elect", default="target/release/elect")
    p.add_argument("--trials", type=int, default=40)
    args = p.parse_args()
    lab_dir = tempfile.mkdtemp(prefix="elect-trace-")
    endpoints = lab_up(args.elect, lab_dir)
    ports = [int(e.rsplit(":", 1)[1]) for e in endpoints.split(",")]
    try:
        for kind in ["elect", "etcdctl elect"]:
            trace_one(kind, args.elect, endpoints, ports)
        for kind in ["elect", "etcdctl elect"]:
            times = []
            for trial in range(args.trials):
                logs = [open(os.devnull, "w") for _ in "ab"]
                sent, got, _, _, _ = one_handover(kind, args.elect, endpoints, f"time-{kind[0]}{trial}", logs)
                times.append(1e3 * (got - sent))
            times.sort()
            print(f"{kind}: {len(times)} handovers of fresh pairs, signal to announcement: "
                  f"p50 {statistics.median(times):.2f} ms, min {times[0]:.2f} ms, max {times[-1]:.2f} ms")
    finally:
        subprocess.run([args.elect, "lab", "down", "--dir", lab_dir], capture_output=True)


if __name__ == "__main__":
    sys.exit(main())
