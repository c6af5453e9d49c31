#!/usr/bin/python3
"""The hnswlib side of scripts/bench/vindex.sh, and the exact ground truth.

Run with Debian's python (/usr/bin/python3, packages python3-hnswlib and
python3-numpy). Reads DIR/KIND.{json,base.f32,query.f32} (scripts/bench/vecgen),
writes the ground truth the Go side reads (DIR/KIND.gt.i32: queries x K record
indexes, DIR/KIND.gt.f32: their exact distances, float64 computed, stored as
float32), builds hnswlib with the given M, ef_construction and threads,
searches on one thread at each ef, and updates UPSERTS records (record
j * (n // UPSERTS) takes the vector of record (that + n // 2) % n, the rule the
Go side uses). Prints one JSON object.

Times are wall seconds and, beside them, the process's CPU seconds (all
threads), which a loaded machine stretches less.

Recall@K: a returned record counts when its exact distance (recomputed in
float64) is at most the K-th exact distance, plus 1e-6 relative.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import hnswlib


def exact_distances(dist, q, x):
    """Exact distances (float64) between one query q and rows x."""
    q = q.astype(np.float64)
    x = x.astype(np.float64)
    if dist == "l2":
        d = x - q
        return np.einsum("ij,ij->i", d, d)
    if dist == "ip":
        return 1.0 - x @ q
    qn = np.linalg.norm(q)
    xn = np.linalg.norm(x, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        c = (x @ q) / (xn * qn)
    c[(xn == 0) | (qn == 0)] = 0.0
    return 1.0 - c


def ground_truth(dist, base, query, k, block=65536):
    """The exact k nearest of each query: float32 BLAS to shortlist 4k, float64 to rank."""
    nq = len(query)
    short = max(4 * k, 64)
    cand_i = np.zeros((nq, 0), dtype=np.int64)
    cand_d = np.zeros((nq, 0), dtype=np.float32)
    qf = query.astype(np.float32)
    if dist == "cosine":
        qf = qf / np.maximum(np.linalg.norm(qf, axis=1, keepdims=True), 1e-30)
    qq = (qf * qf).sum(axis=1)[:, None]
    for s in range(0, len(base), block):
        xb = base[s:s + block].astype(np.float32)
        if dist == "cosine":
            xb = xb / np.maximum(np.linalg.norm(xb, axis=1, keepdims=True), 1e-30)
        dots = qf @ xb.T
        if dist == "l2":
            d = qq + (xb * xb).sum(axis=1)[None, :] - 2 * dots
        else:
            d = 1 - dots
        m = min(short, d.shape[1])
        part = np.argpartition(d, m - 1, axis=1)[:, :m]
        cand_i = np.concatenate([cand_i, part + s], axis=1)
        cand_d = np.concatenate([cand_d, np.take_along_axis(d, part, axis=1)], axis=1)
        if cand_i.shape[1] > short:
            keep = np.argpartition(cand_d, short - 1, axis=1)[:, :short]
            cand_i = np.take_along_axis(cand_i, keep, axis=1)
            cand_d = np.take_along_axis(cand_d, keep, axis=1)
    ids = np.zeros((nq, k), dtype=np.int32)
    ds = np.zeros((nq, k), dtype=np.float64)
    for i in range(nq):
        ex = exact_distances(dist, query[i], base[cand_i[i]])
        order = np.lexsort((cand_i[i], ex))[:k]
        ids[i] = cand_i[i][order]
        ds[i] = ex[order]
    return ids, ds


def recall(dist, base, query, labels, gt_d, k):
    right = 0
    for i in range(len(query)):
        ex = exact_distances(dist, query[i], base[labels[i].astype(np.int64)])
        bound = gt_d[i, k - 1]
        right += int((ex <= bound + 1e-6 * max(1.0, abs(bound))).sum())
    return right / (len(query) * k)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--kind", required=True)
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--efc", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--efs", default="10,20,40,60,100,200")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--upserts", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=100)
    ap.add_argument("--save", default="", help="save the built index (hnswlib's format) to this file")
    a = ap.parse_args()
    meta = json.load(open(os.path.join(a.dir, a.kind + ".json")))
    dim, dist = meta["dim"], meta["distance"]
    base = np.fromfile(os.path.join(a.dir, a.kind + ".base.f32"), dtype="<f4").reshape(-1, dim)
    query = np.fromfile(os.path.join(a.dir, a.kind + ".query.f32"), dtype="<f4").reshape(-1, dim)
    n = len(base)
    out = {"side": "hnswlib", "version": getattr(hnswlib, "__version__", "0.6.2"), "kind": a.kind, "n": n,
           "queries": len(query), "dim": dim, "distance": dist, "m": a.m, "ef_construction": a.efc,
           "threads": a.threads, "seed": a.seed, "load": os.getloadavg()[0]}

    gi, gd = os.path.join(a.dir, a.kind + ".gt.i32"), os.path.join(a.dir, a.kind + ".gt.f32")
    t0 = time.perf_counter()
    if os.path.exists(gi) and os.path.getsize(gi) == len(query) * a.k * 4:
        gt_i = np.fromfile(gi, dtype="<i4").reshape(-1, a.k)
        gt_d = np.fromfile(gd, dtype="<f4").reshape(-1, a.k).astype(np.float64)
    else:
        gt_i, gt_d = ground_truth(dist, base, query, a.k)
        gt_i.astype("<i4").tofile(gi)
        gt_d.astype("<f4").tofile(gd)
        gt_d = gt_d.astype(np.float32).astype(np.float64)
    out["ground_truth_s"] = time.perf_counter() - t0

    space = {"l2": "l2", "cosine": "cosine", "ip": "ip"}[dist]
    idx = hnswlib.Index(space=space, dim=dim)
    idx.init_index(max_elements=n, M=a.m, ef_construction=a.efc, random_seed=a.seed)
    load0 = os.getloadavg()[0]
    c0, t0 = time.process_time(), time.perf_counter()
    idx.add_items(base, np.arange(n), num_threads=a.threads)
    out["build_s"] = time.perf_counter() - t0
    out["build_cpu_s"] = time.process_time() - c0
    out["build_load"] = load0
    if a.save:
        idx.save_index(a.save)

    idx.set_num_threads(1)
    out["search"] = []
    for ef in [int(x) for x in a.efs.split(",")]:
        idx.set_ef(ef)
        c0, t0 = time.process_time(), time.perf_counter()
        labels, _ = idx.knn_query(query, k=a.k, num_threads=1)
        el, cpu = time.perf_counter() - t0, time.process_time() - c0
        out["search"].append({"ef": ef, "recall": recall(dist, base, query, labels, gt_d, a.k),
                              "qps": len(query) / el, "cpu_qps": len(query) / max(cpu, 1e-9),
                              "load": os.getloadavg()[0]})

    if a.upserts > 0:
        u = min(a.upserts, n)
        step = n // u
        labels = np.arange(u, dtype=np.int64) * step
        vecs = base[(labels + n // 2) % n]
        load0 = os.getloadavg()[0]
        c0, t0 = time.process_time(), time.perf_counter()
        idx.add_items(vecs, labels, num_threads=a.threads)
        out["upsert_s"] = time.perf_counter() - t0
        out["upsert_cpu_s"] = time.process_time() - c0
        out["upserts"] = u
        out["upsert_load"] = load0
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
