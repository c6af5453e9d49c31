"""The table of scripts/bench.sh: reads its results.jsonl and prints a markdown
table of the performance goals with the measured figures, ratios, the load
they ran under and verdicts.

usage: report.py RESULTS.jsonl WORKDIR DUCKDB_VERSION CORES ROUNDS READ_MAX [MAX_OTHER [MAX_SKEW]]

Ranges are min-max over the rounds; a ratio is the median of the per-round
ratios (product / DuckDB of the same round). The "other work" column is the
range of the CPU, in cores, that work other than the benchmark used during
the rounds' pairs (or reads before compaction); a row gets a verdict only
when every one of them is at most MAX_OTHER (default 0.25) and the cores'
speed skew measured around them (the slowest core's time over the
fastest's for one pinned loop) at most MAX_SKEW (default 1.15), else
"loaded: no verdict". (Results of an older bench.sh carry 1-minute load averages
instead; they are shown as such and never get a verdict.) CPU-time rows are
CPU-time ratios and never get a verdict: the goals are wall times with the
same cores. Exit status 1 when the row counts of the generator, the product
and DuckDB disagree.
"""
import json
import os
import statistics
import subprocess
import sys
from datetime import datetime, timezone

results, workdir, duck_version, cores, rounds, read_max = sys.argv[1:7]
max_other = float(sys.argv[7]) if len(sys.argv) > 7 else 0.25
max_skew = float(sys.argv[8]) if len(sys.argv) > 8 else 1.15
rows = [json.loads(l) for l in open(results) if l.strip()]
LOADED = "loaded: no verdict"


def of(kind, size):
    return sorted((r for r in rows if r["kind"] == kind and r["size"] == size), key=lambda r: r["round"])


def secs(v):
    if v < 1:
        return "%.2f s" % v
    if v < 100:
        return "%.1f s" % v
    return "{:,.0f} s".format(v)


def span(vals, fmt=secs):
    lo, hi = min(vals), max(vals)
    a, b = fmt(lo), fmt(hi)
    if a == b:
        return a
    unit = a.split(" ")[-1]
    if " " in a and unit == b.split(" ")[-1]:
        return "%s–%s" % (a[: -len(unit) - 1], b)
    return "%s–%s" % (a, b)


def mb(v):
    return "%.0f MB" % (v / 1e6) if v >= 10e6 else "%.1f MB" % (v / 1e6)


def ratio(vals):
    med = statistics.median(vals)
    s = "%.2f×" % med
    if len(vals) > 1 and "%.2f" % min(vals) != "%.2f" % max(vals):
        s += " (%.2f–%.2f)" % (min(vals), max(vals))
    return s


def met(ok):
    return "met" if ok else "**not met**"


def loads(size, recs, phases):
    """the other work (cores) recorded during the rounds of recs in the given
    phases ("pair", "uncompacted"); None for a round without a record or with
    a load average only (an older bench.sh)."""
    out = []
    rounds = {r["round"] for r in recs}
    for phase in phases:
        for rnd in sorted(rounds):
            got = [r for r in rows if r["kind"] == "load" and r["phase"] == phase and r["size"] == size and r["round"] == rnd]
            if not got:
                out.append(None)
            for r in got:
                out.append(r.get("other_cores"))
    return out


def load_cell(size, recs, phases=("pair",)):
    ls = [l for l in loads(size, recs, phases) if l is not None]
    return span(ls, lambda v: "%.2f" % v) if ls else "?"


def skews(size, recs, phases):
    """the cores' speed skews recorded around the rounds of recs in the
    given phases (none from a bench.sh that did not record them)."""
    rounds = {r["round"] for r in recs}
    return [r["core_skew"] for r in rows if r["kind"] == "load" and r["phase"] in phases and r["size"] == size
            and r["round"] in rounds and r.get("core_skew") is not None]


def verdict(ok, size, recs, phases=("pair",)):
    """met / not met when the other work during every round of recs was at
    most max_other cores and the cores' speed skew at most max_skew, else
    LOADED (naming the skew when it was the cause)."""
    ls = loads(size, recs, phases)
    if not ls or any(l is None or l > max_other for l in ls):
        return LOADED
    sk = skews(size, recs, phases)
    if sk and max(sk) > max_skew:
        return "%s (cores' speeds %.2f× apart)" % (LOADED, max(sk))
    return met(ok)


def pairs(a, b, fa, fb):
    """per-round ratios fa(a[r]) / fb(b[r]) over the rounds both have."""
    bb = {r["round"]: r for r in b}
    return [fa(x) / fb(bb[x["round"]]) for x in a if x["round"] in bb]


def summary(size):
    with open(os.path.join(workdir, "data-%d" % size, "summary.json")) as f:
        return json.load(f)


def read_cell(reads, total):
    out = []
    for r in reads:
        if r["complete"]:
            out.append(r["seconds"])
        else:
            out.append(r["seconds"] * total / max(r["records"], 1))
    s = span(out)
    if not all(r["complete"] for r in reads):
        part = min((r for r in reads if not r["complete"]), key=lambda r: r["records"])
        s = "~%s projected (read %s of %s records in %s, then stopped)" % (
            s, format(part["records"], ","), format(total, ","), secs(part["seconds"]))
    return s, max(out)


commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
sizes = sorted({r["size"] for r in rows})
bad = []
lines = []
add = lines.append
add("| goal | product | DuckDB / floor | ratio | other work (cores) | verdict |")
add("|---|---|---|---|---|---|")
for n in sizes:
    s = summary(n)
    full, duck, dd = of("full", n), of("duckdb", n), of("dd", n)
    if not full:
        continue
    for r in full:
        if r["rows"] != s["rows"]:
            bad.append("size %d round %d: the product has %d rows, the generator %d" % (n, r["round"], r["rows"], s["rows"]))
    for r in duck:
        if r["rows"] != s["rows"]:
            bad.append("size %d round %d: DuckDB wrote %d rows, the generator %d" % (n, r["round"], r["rows"], s["rows"]))
    job = lambda r: r["span_s"]
    wall = lambda r: r["wall_s"]
    dt = lambda r: r["s"]
    rt = pairs(full, duck, job, dt)
    what = "%s op records → %s rows" % (format(n, ","), format(s["rows"], ","))
    add("| 1. full compaction ≤ 1.0× DuckDB (wall): %s | %s (job), %s (CLI wall) | %s | %s | %s | %s |" % (
        what, span([job(r) for r in full]), span([wall(r) for r in full]), "%s (process wall %s)" % (span([dt(r) for r in duck]), span([wall(r) for r in duck])),
        ratio(rt), load_cell(n, full), verdict(statistics.median(rt) <= 1.0, n, full)))
    if all("cpu_s" in r for r in full + duck):
        ct = pairs(full, duck, lambda r: r["cpu_s"], lambda r: r["cpu_s"])
        add("| CPU time of the same (user + system, every thread): a CPU-time ratio, not the goal (wall time with the same cores) | %s | %s | %s (CPU time) | %s | |" % (
            span([r["cpu_s"] for r in full]), span([r["cpu_s"] for r in duck]), ratio(ct), load_cell(n, full)))
    rss = [r["rss_kb"] * 1024 for r in full]
    add("| 1. peak RSS ≤ 512 MB (%s op records) | %s | | %.1f× the goal | %s | %s |" % (
        format(n, ","), span(rss, mb), max(rss) / 512e6, load_cell(n, full), verdict(max(rss) <= 512e6, n, full)))
    ix = of("full_indexed", n)
    if ix:
        share = pairs(ix, full, job, job)
        add("| the same records with the vector index (the default): full compaction, no goal against DuckDB (it builds no index; the index is measured against hnswlib by scripts/bench/vindex.sh) | %s (job), CPU %s, peak RSS %s | | %s of the compaction without the index | %s | |" % (
            span([job(r) for r in ix]), span([r["cpu_s"] for r in ix]), span([r["rss_kb"] * 1024 for r in ix], mb),
            ratio(share), load_cell(n, ix)))
    bw = [r["bytes_written"] for r in full]
    blk = [r["blocks_bytes"] for r in full]
    br = pairs(full, duck, lambda r: r["bytes_written"], lambda r: r["bytes"])
    add("| 1. output ≤ DuckDB's (%s rows) | %s written (%s of blocks on disk) | %s | %s | %s | %s |" % (
        format(s["rows"], ","), span(bw, mb), span(blk, mb), span([r["bytes"] for r in duck], mb),
        ratio(br), load_cell(n, full), verdict(statistics.median(br) <= 1.0, n, full)))
    if dd:
        dr = pairs(full, dd, job, wall)
        add("| disk floor: `dd conv=fdatasync` of the same bytes | %s | %s | %s | %s | |" % (
            span([job(r) for r in full]), span([wall(r) for r in dd]), ratio(dr), load_cell(n, full)))
    for kind, label, goal in (("append", "2. 1,000 new ids appended (sorting last)", 0.05),
                              ("updates", "2. 1,000 updates spread over the ids", 0.05)):
        inc = of(kind, n)
        if not inc:
            continue
        pct = pairs(inc, full, job, job)
        cell = "%s = %s of the full compaction" % (
            span([job(r) for r in inc]), span([p * 100 for p in pct], lambda v: "%.1f %%" % v))
        add("| %s ≤ 5 %% of full (wall) into %s rows | %s | | %.1f %% of full | %s | %s |" % (
            label, format(s["rows"], ","), cell, statistics.median(pct) * 100, load_cell(n, inc),
            verdict(statistics.median(pct) <= goal, n, inc)))
    ra = of("read_after", n)
    if ra:
        cell, worst = read_cell(ra, s["rows"] + s["incremental"])
        judged = s["rows"] <= 100000
        add("| 3. paged read after compaction ≤ 2 s (goal at ~63k records): %s records | %s | | | %s | %s |" % (
            format(s["rows"] + s["incremental"], ","), cell, load_cell(n, ra), verdict(worst <= 2, n, ra) if judged else "n/a (size)"))
    dr = of("duckdb_read", n)
    if ra and dr:
        rr = pairs(ra, dr, lambda r: r["seconds"] if r["complete"] else float("inf"), lambda r: r["s"])
        judged = n == 1000000
        add("| 3. paged read after compaction ≤ 2× DuckDB's `SELECT * … ORDER BY id` over the version's blocks (goal at 1M; DuckDB: result chunks fetched, none converted, deltas left out): %s records | %s | %s (%s rows) | %s | %s | %s |" % (
            format(s["rows"] + s["incremental"], ","), read_cell(ra, s["rows"] + s["incremental"])[0],
            span([r["s"] for r in dr]), "/".join(sorted({format(r["rows"], ",") for r in dr})),
            ratio(rr), load_cell(n, ra), verdict(statistics.median(rr) <= 2, n, ra) if judged else "n/a (size)"))
    rb = of("read_before", n)
    if rb:
        cell, worst = read_cell(rb, s["rows"])
        judged = s["rows"] <= 100000
        add("| 3. paged read before compaction ≤ 2 s (goal at ~63k records): %s op records → %s records | %s | | | %s | %s |" % (
            format(n, ","), format(s["rows"], ","), cell, load_cell(n, rb, ("uncompacted",)),
            verdict(worst <= 2, n, rb, ("uncompacted",)) if judged else "n/a (size)"))
    dfl = of("defaults", n)
    if dfl:
        for r in dfl:
            if r["rows"] != s["rows"]:
                bad.append("size %d round %d: default flags: %d rows, the generator %d" % (n, r["round"], r["rows"], s["rows"]))
        dr = pairs(dfl, duck, job, lambda r: r["s"])
        jobs = sorted({r["jobs"] for r in dfl})
        both = ("pair", "uncompacted")
        add("| 1. default flags end to end ≤ 1.0× DuckDB (wall): %s (%s jobs, first created → last finished) | %s (sum of job durations %s) | %s | %s | %s | %s |" % (
            what, "/".join(map(str, jobs)), span([job(r) for r in dfl]), span([r["sum_s"] for r in dfl]),
            span([r["s"] for r in duck]), ratio(dr), load_cell(n, dfl, both), verdict(statistics.median(dr) <= 1.0, n, dfl, both)))
        if all("cpu_s" in r for r in dfl + duck):
            ct = pairs(dfl, duck, lambda r: r["cpu_s"], lambda r: r["cpu_s"])
            add("| CPU time of the same (user + system, every thread): a CPU-time ratio, not the goal (wall time with the same cores) | %s | %s | %s (CPU time) | %s | |" % (
                span([r["cpu_s"] for r in dfl]), span([r["cpu_s"] for r in duck]), ratio(ct), load_cell(n, dfl, both)))
        wa = [r["records_written"] / s["rows"] for r in dfl]
        add("| 1. write amplification ≤ 1.5× with the default flags (records written / final rows) | %s records written | | %s | %s | %s |" % (
            span([r["records_written"] for r in dfl], lambda v: format(v, ",")), span(wa, lambda v: "%.2f×" % v),
            load_cell(n, dfl, ("uncompacted",)), verdict(max(wa) <= 1.5, n, dfl, ("uncompacted",))))

others = [r["other_cores"] for r in rows if r["kind"] == "load" and "other_cores" in r]
averages = [r["after"] for r in rows if r["kind"] == "load" and "after" in r]
all_skews = [r["core_skew"] for r in rows if r["kind"] == "load" and r.get("core_skew") is not None]
print("scripts/bench.sh at %s, %s UTC: DuckDB %s (2 threads), %s cores%s%s, %s interleaved round(s); "
      "ranges are min–max over rounds, ratios the median (and range) of the per-round ratios; "
      "product time is the job's create_time → finish_time; DuckDB's the COPY statement's time; "
      "a row during whose pairs other work used more than %.2f cores, or whose cores' speeds were more than "
      "%.2f× apart (%s), gets no verdict" % (
          commit, datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M"), duck_version, cores,
          " (other work %s cores during the pairs" % span(others, lambda v: "%.2f" % v) if others else " (other work not recorded",
          "; 1-minute load average %s after them, the benchmark's own included)" % span(averages, lambda v: "%.1f" % v) if averages else ")",
          rounds, max_other, max_skew,
          "measured %s" % span(all_skews, lambda v: "%.2f×" % v) if all_skews else "not measured"))
print()
print("\n".join(lines))
if bad:
    print()
    for b in bad:
        print("MISMATCH: " + b)
    sys.exit(1)
