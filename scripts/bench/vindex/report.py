#!/usr/bin/python3
"""The table of scripts/bench/vindex.sh: vindex beside hnswlib, per vector set.

Usage: report.py DIR KIND... (reads DIR/KIND.hnswlib.json and DIR/KIND.vindex.json)

Search throughput "at equal recall" interpolates each side's CPU queries per
second (one thread) along its recall curve at the recall levels both reach.
"""
import json
import os
import sys


def interp(points, r):
    """QPS at recall r along points [(recall, qps)] sorted by recall; None when out of range."""
    pts = sorted(points)
    for (r0, q0), (r1, q1) in zip(pts, pts[1:]):
        if r0 <= r <= r1:
            if r1 == r0:
                return max(q0, q1)
            return q0 + (q1 - q0) * (r - r0) / (r1 - r0)
    for rr, q in pts:
        if rr == r:
            return q
    return None


def main():
    d, kinds = sys.argv[1], sys.argv[2:]
    for kind in kinds:
        h = json.load(open(os.path.join(d, kind + ".hnswlib.json")))
        v = json.load(open(os.path.join(d, kind + ".vindex.json")))
        print(f"### {kind}: {v['n']:,} × {v['dim']}, {v['distance']}, {v['queries']:,} queries, "
              f"M {v['m']}, ef_construction {v['ef_construction']}, {v['threads']} build threads, "
              f"seeds {v.get('seed', 1)} / {h.get('seed', 100)} (hnswlib {h['version']})")
        print()
        print("| figure | vindex | hnswlib | ratio | load (1 min) |")
        print("|---|---|---|---|---|")
        print(f"| build, wall s | {v['build_s']:.1f} | {h['build_s']:.1f} | {v['build_s'] / h['build_s']:.2f}× | "
              f"{v['build_load']:.1f} / {h['build_load']:.1f} |")
        print(f"| build, CPU s | {v['build_cpu_s']:.1f} | {h['build_cpu_s']:.1f} | {v['build_cpu_s'] / h['build_cpu_s']:.2f}× | |")
        # The searches of an ef both sides ran: (vindex's, hnswlib's).
        hs = {s["ef"]: s for s in h["search"]}
        same_ef = [(s, hs[s["ef"]]) for s in v["search"] if s["ef"] in hs]
        for s, o in same_ef:
            print(f"| recall@10, ef {s['ef']} | {s['recall']:.4f} | {o['recall']:.4f} | {s['recall'] - o['recall']:+.4f} | "
                  f"{s['load']:.1f} / {o['load']:.1f} |")
        for s, o in same_ef:
            print(f"| queries/s (1 thread, CPU), ef {s['ef']} | {s['cpu_qps']:,.0f} | {o['cpu_qps']:,.0f} | "
                  f"{s['cpu_qps'] / o['cpu_qps']:.2f}× | |")
        vp = [(s["recall"], s["cpu_qps"]) for s in v["search"]]
        hp = [(s["recall"], s["cpu_qps"]) for s in h["search"]]
        for r in (0.90, 0.95, 0.99):
            a, b = interp(vp, r), interp(hp, r)
            if a and b:
                print(f"| queries/s at recall {r:.2f} (CPU) | {a:,.0f} | {b:,.0f} | {a / b:.2f}× | |")
        if "upsert_s" in v and "upsert_s" in h:
            print(f"| {v['upserts']:,} upserts, wall s | {v['upsert_s']:.2f} | {h['upsert_s']:.2f} | "
                  f"{v['upsert_s'] / h['upsert_s']:.2f}× | {v['upsert_load']:.1f} / {h['upsert_load']:.1f} |")
            print(f"| upserts ÷ full build (wall) | {100 * v['upsert_s'] / v['build_s']:.1f} % | "
                  f"{100 * h['upsert_s'] / h['build_s']:.1f} % | | |")
            print(f"| upserts ÷ full build (CPU) | {100 * v['upsert_cpu_s'] / v['build_cpu_s']:.1f} % | "
                  f"{100 * h['upsert_cpu_s'] / h['build_cpu_s']:.1f} % | | |")
        for f in v.get("filtered", []):
            print(f"| filtered {100 * f['selectivity']:.0f} % ({f['allowed']:,} allowed), ef {v['filtered_ef']}: "
                  f"plan {f['plan']} | recall {f['recall']:.4f}, {f['latency_ms']:.2f} ms | | | {v['filtered_load']:.1f} |")
            if f["plan"] == "scan":
                print(f"| … the graph walk instead | recall {f['graph_recall']:.4f}, {f['graph_latency_ms']:.2f} ms | | | |")
        if "graph_blob_bytes" in v:
            print(f"| encoded: graph blob / vector chunks | {v['graph_blob_bytes'] / 2**20:.1f} MiB / "
                  f"{v['vector_chunk_bytes'] / 2**20:.1f} MiB | | | |")
            print(f"| after the upserts: graph blob / new chunk | {v['successor_graph_blob_bytes'] / 2**20:.1f} MiB / "
                  f"{v['successor_new_chunk_bytes'] / 2**20:.1f} MiB | | | |")
            print(f"| encode / decode / successor, s | {v['encode_s']:.2f} / {v['decode_s']:.2f} / {v['successor_s']:.3f} | | | |")
        print(f"| peak RSS of the Go process | {v['peak_rss_bytes'] / 2**20:,.0f} MiB | | | |")
        print()


if __name__ == "__main__":
    main()
