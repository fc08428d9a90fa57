#!/usr/bin/env python3
"""CPU seconds of each `make test` job, its control planes and operators included.

Usage: python3 scripts/cpu-by-test.py OUT & make test; kill %1

Samples /proc every 2 s and counts each process under the job it descends from
(a test binary `<name>-<hash>`, named by its package's directory, the fuzz smoke, `make lint`), as seen when the
process was first sampled. A process that lives less than 2 s may be missed, and
a process already running when sampling starts counts only what it spends after.
OUT is rewritten on each sample: CPU seconds by job, by program, and by both.
Linux only; used to write the table in docs/development.md, not by any test.
"""
import collections
import os
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")
OUT = sys.argv[1]
BOOTED_JIFFIES = int(float(open("/proc/uptime").read().split()[0]) * HZ)

procs = {}  # (pid, start time) -> [program, ppid, first ticks, last ticks]
latest = {}  # pid -> its (pid, start time) key
owner = {}  # (pid, start time) -> job


def program(pid, comm):
    try:
        argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    except OSError:
        return comm
    name = os.path.basename(argv[0].decode(errors="replace")) if argv[0] else comm
    stem, _, suffix = name.rpartition("-")
    if stem and len(suffix) == 16:  # cargo's test binaries: <target>-<16 hex digits>
        try:  # run in their package's directory
            package = os.path.basename(os.readlink(f"/proc/{pid}/cwd"))
        except OSError:
            package = "?"
        return f"test:{package}/{stem}"
    if name == "sh" and len(argv) > 2 and b"fuzz" in argv[2]:
        return "job:fuzz-smoke"
    if name == "make" and b"lint" in b" ".join(argv):
        return "job:lint"
    return name


def job_of(key):
    for _ in range(30):
        name = procs[key][0]
        if name.startswith(("test:", "job:")):
            return name
        parent = latest.get(procs[key][1])
        if parent is None or parent == key:
            break
        key = parent
    return "other"


while True:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            continue
        end = stat.rfind(")")
        fields = stat[end + 2 :].split()
        ticks = int(fields[11]) + int(fields[12])
        key = (pid, fields[19])
        if key in procs:
            procs[key][3] = ticks
            continue
        comm = stat[stat.find("(") + 1 : end]
        # Started before sampling: count only what it spends from now on.
        first = ticks if int(fields[19]) < BOOTED_JIFFIES else 0
        procs[key] = [program(pid, comm), fields[1], first, ticks]
        latest[pid] = key
        owner[key] = job_of(key)
    by_job, by_program, by_both = (collections.Counter() for _ in range(3))
    for key, (name, _, first, last) in procs.items():
        seconds = (last - first) / HZ
        by_job[owner[key]] += seconds
        by_program[name] += seconds
        by_both[(owner[key], name)] += seconds
    with open(OUT + ".tmp", "w") as out:
        out.write("== CPU seconds by job\n")
        out.writelines(f"{v:9.1f} {k}\n" for k, v in by_job.most_common())
        out.write(f"{sum(by_job.values()):9.1f} total\n== by program\n")
        out.writelines(f"{v:9.1f} {k}\n" for k, v in by_program.most_common(25))
        out.write("== by job and program\n")
        out.writelines(f"{v:9.1f} {j} / {p}\n" for (j, p), v in by_both.most_common(60))
    os.replace(OUT + ".tmp", OUT)
    time.sleep(2)
