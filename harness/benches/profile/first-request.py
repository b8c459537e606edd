#!/usr/bin/env python3
"""Starts two workerd configs (directories of configs.sh, written with
LIFTOFF=1) in turn, ROUNDS times each, alternating which goes first, and
times each start as the harness's `starts` bench does: spawn until workerd
reports `listen` on its control fd, spawn until the first GET /api/items is
answered 200, that first request alone, and the median of the next 20. For comparing two builds of one Worker side by side (the
harness's `starts` bench compares the three Workers and a bare one, each
from the current tree).

  harness/benches/profile/first-request.py 30 A=/tmp/a/on B=/tmp/b/on
"""
import http.client
import json
import os
import statistics as st
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERD = os.environ.get("WORKERD") or os.path.join(
    HERE, "../../../tools/fixtures/workers/node_modules/@cloudflare/workerd-linux-64/bin/workerd")


def get(port, n):
    """GET /api/items from its own address; its time in ms."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    t = time.perf_counter()
    c.request("GET", "/api/items", headers={"CF-Connecting-IP": f"192.0.2.{n}"})
    r = c.getresponse()
    r.read()
    c.close()
    if r.status != 200:
        raise SystemExit(f"status {r.status}")
    return (time.perf_counter() - t) * 1000


def start(directory):
    """One start: workerd's own `listen` report on its control fd (as the
    harness waits for it), then the first request and 20 warm ones."""
    read, write = os.pipe()
    t0 = time.perf_counter()
    p = subprocess.Popen([WORKERD, "serve", "config.capnp", f"--control-fd={write}",
                          "--socket-addr", "http=127.0.0.1:0"],
                         cwd=directory, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         pass_fds=(write,))
    os.close(write)
    try:
        with os.fdopen(read) as control:
            for line in control:
                event = json.loads(line)
                if event.get("event") == "listen":
                    port = event["port"]
                    break
            else:
                raise SystemExit("workerd never listened")
            listen = (time.perf_counter() - t0) * 1000
            first = get(port, 1)
            total = (time.perf_counter() - t0) * 1000
            warm = st.median(get(port, 2 + i) for i in range(20))
            return listen, total, first, warm
    finally:
        p.kill()
        p.wait()


def main():
    rounds = int(sys.argv[1])
    configs = [a.split("=", 1) for a in sys.argv[2:4]]
    runs = {name: [] for name, _ in configs}
    for r in range(rounds):
        for name, directory in configs if r % 2 == 0 else configs[::-1]:
            runs[name].append(start(directory))
    m = lambda xs: f"{st.median(xs):.1f} ({min(xs):.1f}-{max(xs):.1f})"
    print(f"{rounds} rounds, median (min-max)\n")
    print("| config | spawn to listen, ms | spawn to first 200, ms | first request, ms | warm, ms | first - warm, ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, v in runs.items():
        print(f"| {name} | {m([x[0] for x in v])} | {m([x[1] for x in v])} | {m([x[2] for x in v])} "
              f"| {st.median(x[3] for x in v):.2f} | **{st.median(x[2] - x[3] for x in v):.2f}** |")
    (a, _), (b, _) = configs
    ratio = st.median(x[1] / y[1] for x, y in zip(runs[a], runs[b]))
    print(f"\nspawn to first 200, {a} / {b}, median of rounds: **{ratio:.3f}**")


main()
