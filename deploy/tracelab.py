"""What the trace scripts share: a ZooKeeper lab of local processes, and
when a process said a line (on its stdout as this script reads it, or in
its log by the log's own timestamp).
"""

import re
import select
import subprocess
import time
from datetime import datetime


def zk_lab_up(elect, lab):
    """Starts 3 ZooKeeper servers (no etcd) in `lab`; their endpoints."""
    out = subprocess.run(
        [elect, "lab", "up", "--etcd", "0", "--zk", "3", "--dir", lab, "--format", "env"],
        check=True, capture_output=True, text=True,
    ).stdout
    return re.search(r"ELECT_ZK_ENDPOINTS='?([^'\n]+)", out).group(1)


def lab_down(elect, lab):
    subprocess.run([elect, "lab", "down", "--dir", lab], capture_output=True)


def line_with(proc, pattern, within=30):
    """The first stdout line of `proc` matching `pattern`, and when it came."""
    until = time.time() + within
    while time.time() < until:
        ready, _, _ = select.select([proc.stdout], [], [], 0.05)
        if ready:
            line = proc.stdout.readline()
            if re.search(pattern, line):
                return line, time.time()
    raise TimeoutError(pattern)


def logged_at(lines, pattern, after, slack=0.0):
    """When the first of `lines` (elect's log lines, each opening with its
    RFC 3339 timestamp) matching `pattern` was logged, at or after `after`
    less `slack` seconds; None if none was."""
    for line in lines:
        if re.search(pattern, line) and (m := re.match(r"(\S+Z)", line)):
            at = datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp()
            if at >= after - slack:
                return at
    return None
