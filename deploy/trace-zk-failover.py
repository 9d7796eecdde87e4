#!/usr/bin/env python3
"""Traces ZooKeeper crash failovers end to end: elect's, and a bare session's.

Starts a 3-server ZooKeeper through `elect lab` (local processes). Each
trial kills a holder with SIGKILL and times, from the kill:

- elect: a leading `elect campaign` (--ttl, debug logging) is killed;
  its successor's `elected` line is read from its stdout, and its debug
  lines say when it saw its predecessor's znode go;
- floor: a bare kazoo session that holds an ephemeral znode, pinging as
  ZooKeeper's clients do, is killed; a kazoo watcher on that znode sees
  its deletion (no recipe, no safety rule: the server's floor);
- floor-synced: the same bare session, syncing every TTL/20 as elect's
  session keeper does to keep its lease proven (see `zk/lease.rs`). Its
  deletion comes later than the idle session's: the server expires a
  session a timeout after it last heard from it, and a session that
  speaks often was heard from just before the kill.

elect's time splits at the moment its successor saw the deletion: what
comes before is the server's (how recently the killed session was last
touched, plus the expiry tick), what comes after is elect's own. Prints
each trial and the medians. (The servers' own expiry lines are not
logged at the level the lab runs them with.)

Needs Debian's python3-kazoo (under /usr/bin/python3). Usage:

  /usr/bin/python3 deploy/trace-zk-failover.py [--elect target/release/elect] [--trials 10] [--ttl 2s] [--seed 1]
"""

import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from tracelab import lab_down, line_with, logged_at, zk_lab_up

HOLDER = r"""
import sys, time
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1], timeout=float(sys.argv[2]))
zk.start()
zk.ensure_path(sys.argv[3].rsplit("/", 1)[0] or "/")
zk.create(sys.argv[3], b"", ephemeral=True)
print("session 0x%x" % zk.client_id[0], flush=True)
every = float(sys.argv[4])
if every > 0:
    # Touch the session as often as elect's session keeper does.
    while True:
        zk.sync("/")
        time.sleep(every)
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
    settle(args)
    killed = time.time()
    leader.send_signal(signal.SIGKILL)
    _, elected = line_with(successor, r'"event":"elected"', 60)
    successor.send_signal(signal.SIGTERM)
    successor.wait()
    leader.wait()
    log.seek(0)
    # The successor's view of its predecessor's deletion, from its debug lines.
    woke = logged_at(log, r"predecessor|deleted|woke", killed)
    return {"kill_to_woken": woke and woke - killed,
            "kill_to_elected": elected - killed}


def floor_trial(args, endpoints, lab, n, sync_every=0.0):
    path = f"/trace-floor-{os.getpid()}-{n}-{int(sync_every * 1000)}"
    ttl = parse_seconds(args.ttl)
    holder = subprocess.Popen([args.python, "-c", HOLDER, endpoints, str(ttl), path,
                               str(sync_every)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line_with(holder, r"^session", 30)
    watcher = subprocess.Popen([args.python, "-c", WATCHER, endpoints, path],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line_with(watcher, r"^watching", 30)
    settle(args)
    killed = time.time()
    holder.send_signal(signal.SIGKILL)
    line, _ = line_with(watcher, r"^deleted", 60)
    deleted = float(line.split()[1])
    watcher.wait()
    holder.wait()
    return {"kill_to_deleted": deleted - killed}


def settle(args):
    """Waits `--settle`, then a random instant within a TTL: killed at a
    fixed time after the start, every holder would die at the same point
    of its renewal cycle and of the servers' expiry ticks, and the trials
    would measure that one point (as `elect compare`'s failover did until
    it drew its kills the same way)."""
    time.sleep(args.settle + args.random.uniform(0, parse_seconds(args.ttl)))


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
                   help="seconds between the successor's start and the kill, "
                        "before a random instant within a TTL")
    p.add_argument("--seed", type=int, default=1, help="seeds the kills' random instants")
    args = p.parse_args()
    args.random = random.Random(args.seed)
    lab = tempfile.mkdtemp(prefix="trace-zk-")
    endpoints = zk_lab_up(args.elect, lab)
    rows = {"elect": [], "floor": [], "floor-synced": []}
    synced = lambda a, e, l, n: floor_trial(a, e, l, n, parse_seconds(a.ttl) / 20)
    try:
        for n in range(args.trials):
            for name, trial in (("elect", elect_trial), ("floor", floor_trial),
                                ("floor-synced", synced)):
                row = trial(args, endpoints, lab, n)
                rows[name].append(row)
                print(name, json.dumps({k: v and round(v * 1000, 1) for k, v in row.items()}), flush=True)
    finally:
        lab_down(args.elect, lab)
    for name, trials in rows.items():
        for key in trials[0]:
            values = [t[key] * 1000 for t in trials if t[key] is not None]
            if values:
                print(f"{name} {key}: median {statistics.median(values):.0f} ms "
                      f"(min {min(values):.0f}, max {max(values):.0f}, n {len(values)})")


if __name__ == "__main__":
    sys.exit(main())
