#!/usr/bin/env python3
"""Splits elect's ZooKeeper handovers into their steps, from the leader's
log and its successor's.

Starts a 3-server ZooKeeper through `elect lab` (local processes) and
keeps three `elect campaign` processes queued. Each trial sends SIGTERM
to the leader, waits for its successor's `elected` line on stdout, and
starts a candidate to keep three. The leader's and the successor's log
lines (only those the split needs are at debug level, so logging costs
little) give, from the signal:

- signal -> resigning: the leader's signal handling;
- resigning -> deleted: the leader's delete, sent and answered (a
  quorum write);
- deleted -> woke: when its successor saw the deletion, against the
  delete's answer (negative: the notification came first);
- woke -> elected: the successor's own step (no request);
- elected -> line: the successor's line, from its log to this script
  reading it on stdout.

Beside them, the floor of the middle step: a bare kazoo client's delete
of its own ephemeral znode, sent and answered, with the same gap before
each. The first ten trials warm up and are left out. Prints the medians
and means of each step.

Usage:

  python3 deploy/trace-zk-handover.py [--elect target/release/elect] [--trials 60] [--gap 0.3]

The floor needs Debian's python3-kazoo (`--python`, /usr/bin/python3 by
default).
"""

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from tracelab import lab_down, line_with, logged_at, zk_lab_up

WARM_UP = 10

# Info everywhere; debug only where the split's lines are.
LOG = "elect=info,elect::backend::zk::campaign=debug,elect::backend::zk::turn=debug"

STEPS = ("signal -> resigning", "resigning -> deleted", "deleted -> woke",
         "woke -> elected", "elected -> line", "total")


BARE_DELETES = r"""
import sys, time
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1])
zk.start()
trials, gap = int(sys.argv[2]), float(sys.argv[3])
zk.ensure_path("/trace-handover-floor")
for _ in range(trials):
    path = zk.create("/trace-handover-floor/n", ephemeral=True, sequence=True)
    time.sleep(gap)
    sent = time.time()
    zk.delete(path)
    print(1000 * (time.time() - sent), flush=True)
zk.stop()
"""


def logged(log, pattern, after):
    """When `log` said `pattern`, at or after `after` (a millisecond's
    slack for the two clocks' readings)."""
    with open(log) as lines:
        at = logged_at(lines, pattern, after, slack=0.001)
    if at is None:
        raise LookupError(f"{pattern} in {log}")
    return at


class Candidates:
    def __init__(self, args, endpoints, logs):
        self.args, self.endpoints, self.logs = args, endpoints, logs
        self.election = f"/trace-handover-{os.getpid()}"
        self.started = 0

    def start(self):
        """A new candidate, returned once it is queued: its first line
        names the leader, and it follows the election only once its znode
        exists."""
        name = f"c{self.started}"
        self.started += 1
        log = os.path.join(self.logs, f"{name}.log")
        with open(log, "w") as stderr:
            proc = subprocess.Popen(
                [self.args.elect, "campaign", "--backend", "zk", "--endpoints", self.endpoints,
                 "--election", self.election, "--ttl", "2s", "--format", "json", "--id", name],
                stdout=subprocess.PIPE, stderr=stderr, text=True,
                env=dict(os.environ, RUST_LOG=LOG))
        proc.log = log
        line_with(proc, r'"leader":"c')
        return proc


def trial(queue, candidates, gap):
    """One handover: its steps in milliseconds."""
    time.sleep(gap)
    leader, successor = queue.pop(0), queue[0]
    signalled = time.time()
    leader.send_signal(signal.SIGTERM)
    _, read = line_with(successor, r'"event":"elected"')
    leader.wait()
    resigning = logged(leader.log, "SIGTERM: resigning", signalled)
    deleted = logged(leader.log, "deleted ", signalled)
    woke = logged(successor.log, "woke: predecessor", signalled)
    elected = logged(successor.log, "elected token", signalled)
    queue.append(candidates.start())
    return [1000 * d for d in (resigning - signalled, deleted - resigning, woke - deleted,
                               elected - woke, read - elected, read - signalled)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--elect", default="target/release/elect")
    p.add_argument("--trials", type=int, default=60)
    p.add_argument("--gap", type=float, default=0.3,
                   help="seconds between a candidate's joining and the next handover")
    p.add_argument("--python", default="/usr/bin/python3", help="a python3 with kazoo")
    args = p.parse_args()
    lab = tempfile.mkdtemp(prefix="trace-zk-handover-")
    logs = tempfile.mkdtemp(prefix="trace-zk-handover-logs-")
    endpoints = zk_lab_up(args.elect, lab)
    candidates = Candidates(args, endpoints, logs)
    queue = []
    try:
        for _ in range(3):
            queue.append(candidates.start())
        rows = [trial(queue, candidates, args.gap) for _ in range(args.trials)][WARM_UP:]
        bare = subprocess.run([args.python, "-c", BARE_DELETES, endpoints, str(args.trials),
                               str(args.gap)], check=True, capture_output=True, text=True)
        deletes = [float(line) for line in bare.stdout.split()][WARM_UP:]
    finally:
        for proc in queue:
            proc.send_signal(signal.SIGTERM)
        for proc in queue:
            proc.wait()
        lab_down(args.elect, lab)
        shutil.rmtree(logs, ignore_errors=True)
    for i, step in enumerate(STEPS):
        values = [row[i] for row in rows]
        print(f"{step:22} median {statistics.median(values):6.3f} ms   "
              f"mean {statistics.mean(values):6.3f} ms")
    print(f"{'floor: a bare delete':22} median {statistics.median(deletes):6.3f} ms   "
          f"mean {statistics.mean(deletes):6.3f} ms")


if __name__ == "__main__":
    sys.exit(main())
