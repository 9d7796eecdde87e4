#!/usr/bin/env python3
"""Traces ZooKeeper crash failovers end to end: elect's, and a bare session's.

Starts a 3-server ZooKeeper through `elect lab` (local processes). Each
trial kills a holder with SIGKILL and times, from the kill:

- elect: a leading `elect campaign` (--ttl, debug logging) is killed;
  its successor's `elected` line is read from its stdout, and its debug
  lines say when it saw its predecessor's znode go;
- floor: a bare kazoo session that holds an ephemeral znode, pinging as
  ZooKeeper's clients do, is killed; a kazoo watcher on that znode sees
  its deletion (no recipe, no safety rule: the server's floor).

Both sides read the servers' logs for the moment the killed session was
expired ("Expiring session 0x..."), so each failover splits into the
server's part (kill to expiry: how recently the session was last touched,
plus the expiry tick) and the client's part (expiry to the successor's
decision). Prints each trial and the medians.

Needs Debian's python3-kazoo (under /usr/bin/python3). Usage:

  /usr/bin/python3 deploy/trace-zk-failover.py [--elect target/release/elect] [--trials 10] [--ttl 2s]
"""

import argparse
import glob
import json
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime

HOLDER = r"""
import sys, time
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1], timeout=float(sys.argv[2]))
zk.start()
zk.ensure_path(sys.argv[3].rsplit("/", 1)[0] or "/")
zk.create(sys.argv[3], b"", ephemeral=True)
print("session 0x%x" % zk.client_id[0], flush=True)
time.sleep(3600)
"""

WATCHER = r"""
import sys, threading, time
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1], timeout=10.0)
zk.start()
gone = threading.Event()
def watch(event):
    if event.type == "DELETED":
        print("deleted %.6f" % time.time(), flush=True)
        gone.set()
while zk.exists(sys.argv[2]) is None:
    time.sleep(0.01)
if zk.exists(sys.argv[2], watch=watch) is None:
    print("deleted %.6f" % time.time(), flush=True)
    gone.set()
print("watching", flush=True)
gone.wait()
"""


def lab_up(elect, lab):
    out = subprocess.run(
        [elect, "lab", "up", "--zk", "3", "--dir", lab, "--format", "env"],
        check=True, capture_output=True, text=True,
    ).stdout
    match = re.search(r"ELECT_ZK_ENDPOINTS='?([^'\n]+)", out)
    return match.group(1)


def line_with(proc, pattern, within):
    """The first stdout line of `proc` matching `pattern`, and when it came."""
    until = time.time() + within
    while time.time() < until:
        ready, _, _ = select.select([proc.stdout], [], [], 0.05)
        if ready:
            line = proc.stdout.readline()
            if re.search(pattern, line):
                return line, time.time()
    raise TimeoutError(pattern)


def expiries(lab):
    """Every `Expiring session 0x...` the servers logged: (session, unix time)."""
    found = {}
    for log in glob.glob(os.path.join(lab, "*", "member.log")):
        for line in open(log, errors="replace"):
            m = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}).*Expiring session (0x[0-9a-f]+)", line)
            if m:
                at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                found.setdefault(m.group(2), at)
    return found


def expiry_after(lab, killed, session=None):
    """The killed session's expiry: by id when known, else the first after the kill."""
    deadline = time.time() + 5
    while time.time() < deadline:
        found = expiries(lab)
        if session and session in found:
            return found[session]
        later = sorted(at for at in found.values() if at >= killed)
        if not session and later:
            return later[0]
        time.sleep(0.1)
    return None


def elect_trial(args, endpoints, lab, n):
    env = dict(os.environ, RUST_LOG="elect=debug")
    election = f"/trace-{os.getpid()}-{n}"
    common = ["campaign", "--backend", "zk", "--endpoints", endpoints,
              "--election", election, "--ttl", args.ttl, "--format", "json"]
    leader = subprocess.Popen([args.elect, *common, "--id", "a"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, env=env)
    line_with(leader, r'"event":"elected"', 30)
    log = tempfile.NamedTemporaryFile("w+", suffix=".log")
    successor = subprocess.Popen([args.elect, *common, "--id", "b"], stdout=subprocess.PIPE,
                                 stderr=log, text=True, env=env)
    line_with(successor, r'"leader":"a"', 30)
    time.sleep(args.settle)
    killed = time.time()
    leader.send_signal(signal.SIGKILL)
    _, elected = line_with(successor, r'"event":"elected"', 60)
    expired = expiry_after(lab, killed - 0.05)
    successor.send_signal(signal.SIGTERM)
    successor.wait()
    leader.wait()
    log.seek(0)
    # The successor's view of its predecessor's deletion, from its debug lines.
    woke = None
    for line in log:
        if re.search(r"predecessor|deleted|woke", line) and (m := re.match(r"(\S+Z)", line)):
            at = datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp()
            if at >= killed:
                woke = at
                break
    return {"kill_to_expiry": expired and expired - killed,
            "kill_to_woken": woke and woke - killed,
            "kill_to_elected": elected - killed}


def floor_trial(args, endpoints, lab, n):
    path = f"/trace-floor-{os.getpid()}-{n}"
    ttl = parse_seconds(args.ttl)
    holder = subprocess.Popen([args.python, "-c", HOLDER, endpoints, str(ttl), path],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    session_line, _ = line_with(holder, r"^session", 30)
    session = session_line.split()[1]
    watcher = subprocess.Popen([args.python, "-c", WATCHER, endpoints, path],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line_with(watcher, r"^watching", 30)
    time.sleep(args.settle)
    killed = time.time()
    holder.send_signal(signal.SIGKILL)
    line, _ = line_with(watcher, r"^deleted", 60)
    deleted = float(line.split()[1])
    expired = expiry_after(lab, killed - 0.05, session)
    watcher.wait()
    holder.wait()
    return {"kill_to_expiry": expired and expired - killed,
            "kill_to_deleted": deleted - killed}


def parse_seconds(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s)", text)
    return float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--elect", default="target/release/elect")
    p.add_argument("--python", default="/usr/bin/python3", help="a python3 with kazoo")
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--ttl", default="2s")
    p.add_argument("--settle", type=float, default=1.0,
                   help="seconds between the successor's start and the kill")
    args = p.parse_args()
    lab = tempfile.mkdtemp(prefix="trace-zk-")
    endpoints = lab_up(args.elect, lab)
    rows = {"elect": [], "floor": []}
    try:
        for n in range(args.trials):
            for name, trial in (("elect", elect_trial), ("floor", floor_trial)):
                row = trial(args, endpoints, lab, n)
                rows[name].append(row)
                print(name, json.dumps({k: v and round(v * 1000, 1) for k, v in row.items()}), flush=True)
    finally:
        subprocess.run([args.elect, "lab", "down", "--dir", lab], capture_output=True)
    for name, trials in rows.items():
        for key in trials[0]:
            values = [t[key] * 1000 for t in trials if t[key] is not None]
            if values:
                print(f"{name} {key}: median {statistics.median(values):.0f} ms "
                      f"(min {min(values):.0f}, max {max(values):.0f}, n {len(values)})")


if __name__ == "__main__":
    sys.exit(main())
