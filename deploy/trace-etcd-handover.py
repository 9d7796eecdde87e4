#!/usr/bin/env python3
"""Traces etcd handovers end to end: elect's and `etcdctl elect`'s.

Starts a 3-member etcd through `elect lab` (local processes), then for
each implementation runs a leader and a waiting candidate, sends SIGTERM
to the leader and times the successor's announcement. For elect it
prints one handover's timeline from both processes' debug logs (each
request of the resignation and of the successor, with microsecond
timestamps); for both it prints the requests etcd's members handled
during the handover (grpc_server_handled_total by method) and the
median of --trials handovers.

Usage: deploy/trace-etcd-handover.py [--elect target/release/elect] [--trials 20]
"""

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime, timezone


def lab_up(elect, lab_dir):
    out = subprocess.run(
        [elect, "lab", "up", "--etcd", "3", "--zk", "0", "--format", "env", "--dir", lab_dir],
        check=True, capture_output=True, text=True).stdout
    m = re.search(r"ELECT_ETCD_ENDPOINTS='([^']+)'", out)
    return m.group(1)


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
        [elect, "campaign", "--backend", "etcd", "--endpoints", endpoints,
         "--election", election, "--id", cid, "--ttl", "5", "--format", "json"],
        stdout=subprocess.PIPE, stderr=log, text=True, env=env)


def etcdctl_candidate(endpoints, election, cid):
    env = dict(os.environ, ETCDCTL_API="3")
    return subprocess.Popen(
        ["etcdctl", "--endpoints", endpoints, "elect", election, cid],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)


def one_handover(kind, elect, endpoints, election, logs):
    if kind == "elect":
        a = elect_candidate(elect, endpoints, election, "a", logs[0])
        read_until(a, lambda l: '"event":"elected"' in l)
        b = elect_candidate(elect, endpoints, election, "b", logs[1])
        read_until(b, lambda l: '"leader":"a"' in l)
        elected = lambda l: '"event":"elected"' in l
    else:
        a = etcdctl_candidate(endpoints, election, "a")
        read_until(a, lambda l: l.strip() == "a")
        b = etcdctl_candidate(endpoints, election, "b")
        elected = lambda l: l.strip() == "b"
    time.sleep(1.0)  # b waits on a; renewals settle
    before = handled(endpoints)
    sent = time.time()
    a.send_signal(signal.SIGTERM)
    got = read_until(b, elected)
    a.wait(timeout=10)
    time.sleep(0.2)
    requests = delta(before, handled(endpoints))
    b.send_signal(signal.SIGTERM)
    b.wait(timeout=10)
    return sent, got, requests


def timeline(paths, sent, until):
    stamp = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z\s+(\w+)\s+(\S+): (.*)$")
    rows = []
    for who, path in paths:
        for line in open(path):
            m = stamp.match(re.sub(r"\x1b\[[0-9;]*m", "", line))
            if not m:
                continue
            at = datetime.fromisoformat(m.group(1)).replace(tzinfo=timezone.utc).timestamp()
            if sent - 0.001 <= at <= until + 0.002:
                rows.append((at, who, m.group(3).split("::")[-1], m.group(4)))
    for at, who, target, text in sorted(rows):
        print(f"  {1e3 * (at - sent):8.3f} ms  {who}  {target}: {text}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--elect", default="target/release/elect")
    p.add_argument("--trials", type=int, default=20)
    args = p.parse_args()
    lab_dir = tempfile.mkdtemp(prefix="elect-trace-")
    endpoints = lab_up(args.elect, lab_dir)
    try:
        for kind in ["elect", "etcdctl elect"]:
            times = []
            for trial in range(args.trials):
                logs = [tempfile.NamedTemporaryFile("w+", suffix=f"-{c}.log", delete=False) for c in "ab"]
                sent, got, requests = one_handover(kind, args.elect, endpoints, f"trace-{kind[0]}{trial}", logs)
                times.append(1e3 * (got - sent))
                if trial == 0:
                    print(f"{kind}: one handover, SIGTERM to the leader at 0 ms, "
                          f"the successor's announcement read at {1e3 * (got - sent):.3f} ms")
                    if kind == "elect":
                        timeline([("leader   ", logs[0].name), ("successor", logs[1].name)], sent, got)
                    print(f"  requests etcd handled meanwhile: {json.dumps(requests, sort_keys=True)}")
                for log in logs:
                    os.unlink(log.name)
            times.sort()
            print(f"{kind}: {len(times)} handovers: p50 {statistics.median(times):.2f} ms, "
                  f"min {times[0]:.2f} ms, max {times[-1]:.2f} ms\n")
    finally:
        subprocess.run([args.elect, "lab", "down", "--dir", lab_dir], capture_output=True)


if __name__ == "__main__":
    sys.exit(main())
