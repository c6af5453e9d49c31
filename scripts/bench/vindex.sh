#!/usr/bin/env bash
# Benchmark of the vector index (internal/vindex) against hnswlib, the
# library Chroma's local index uses (not run in CI). For each vector set of
# BENCH_VINDEX_KINDS it generates the vectors once (scripts/bench/vecgen),
# then runs scripts/bench/vindex/hnswlib_bench.py (Debian's python3 with
# python3-hnswlib and python3-numpy: the exact ground truth, then hnswlib)
# and scripts/bench/vindex (the product's graph) with the same M,
# ef_construction, ef values and build threads, and ends with a markdown
# table (scripts/bench/vindex/report.py): recall@10 at each ef, build time
# at the same thread count, single-thread search throughput at equal
# recall, the incremental cost of upserting 1 % of the vectors against the
# full build, filtered-search recall and latency, the encoded sizes and the
# peak RSS. Every figure carries the load average it ran under: on a
# shared machine they are not verdicts. Its sibling
# scripts/bench/vindex-server.sh measures the index through the real
# server (compaction with indexing, QueryRecords over Connect).
# GOFLAGS=-tags=purego runs the product's side on the pure-Go kernels.
#
# Vector sets: debian (the shared Debian sample: 5,000 × 64, cosine, its
# updates as queries), mixture (a seeded Gaussian mixture of 1,000
# standard-normal centres with unit variance around each, 128-dim, l2),
# uniform (uniform in [-1, 1)^128, l2: the hard case).
#
# Environment:
#   BENCH_VINDEX_KINDS      vector sets (default "debian mixture uniform")
#   BENCH_VINDEX_MIXTURE_N  mixture size (default 1000000)
#   BENCH_VINDEX_UNIFORM_N  uniform size (default 100000)
#   BENCH_VINDEX_QUERIES    queries of mixture and uniform (default 1000)
#   BENCH_VINDEX_M, BENCH_VINDEX_EFC   M (16), ef_construction (200)
#   BENCH_VINDEX_EFS        ef values (default 10,20,40,60,100,200)
#   BENCH_VINDEX_THREADS    build threads of both sides (default nproc)
#   BENCH_VINDEX_SEED       seed of both sides' level generators (default:
#                           hnswlib's 100, the graph's 1). One build is one
#                           draw: at low ef, recall@10 moves by ±0.01-0.02
#                           from seed to seed on either side, more than the
#                           gap between the two (docs/performance.md)
#   BENCH_VINDEX_UPSERTS    upserts of the incremental step (default 1 % of n)
#   BENCH_VINDEX_DIR        working directory (default .cache/bench-vindex;
#                           the 1M mixture takes ~600 MB)
# Needs: go, /usr/bin/python3 with hnswlib and numpy (installed with apt-get
# when missing and running as root).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
KINDS=${BENCH_VINDEX_KINDS:-debian mixture uniform}
MIX_N=${BENCH_VINDEX_MIXTURE_N:-1000000}
UNI_N=${BENCH_VINDEX_UNIFORM_N:-100000}
QUERIES=${BENCH_VINDEX_QUERIES:-1000}
M=${BENCH_VINDEX_M:-16}
EFC=${BENCH_VINDEX_EFC:-200}
EFS=${BENCH_VINDEX_EFS:-10,20,40,60,100,200}
THREADS=${BENCH_VINDEX_THREADS:-$(nproc)}
SEED=${BENCH_VINDEX_SEED:-}
DIR=${BENCH_VINDEX_DIR:-.cache/bench-vindex}
PY=/usr/bin/python3

note() { echo "bench vindex: $*" >&2; }
die() { note "$*"; exit 1; }
for v in "$MIX_N" "$UNI_N" "$QUERIES" "$M" "$EFC" "$THREADS"; do
	[[ $v =~ ^[1-9][0-9]*$ ]] || die "sizes, M, ef_construction and threads take positive integers, got '$v'"
done
[[ -z $SEED || $SEED =~ ^[0-9]+$ ]] || die "BENCH_VINDEX_SEED takes a non-negative integer, got '$SEED'"
[[ $EFS =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "BENCH_VINDEX_EFS takes a comma-separated list of positive integers, got '$EFS'"
if ! "$PY" -c 'import hnswlib, numpy' 2>/dev/null; then
	[[ $(id -u) == 0 ]] || die "$PY lacks hnswlib or numpy: apt-get install python3-hnswlib python3-numpy"
	note "installing python3-hnswlib python3-numpy"
	apt-get install -y -qq python3-hnswlib python3-numpy >/dev/null || { apt-get update -qq && apt-get install -y -qq python3-hnswlib python3-numpy >/dev/null; }
fi
mkdir -p "$DIR"
go build -o "$DIR/vindex-bench" ./scripts/bench/vindex
go build -o "$DIR/vecgen" ./scripts/bench/vecgen

for kind in $KINDS; do
	case $kind in
	debian) args=(-debian ../shared/data/debian-base.jsonl.gz -debian-queries ../shared/data/debian-updates.jsonl.gz)
		[[ -f ../shared/data/debian-base.jsonl.gz ]] || args=(-debian /work/shared/data/debian-base.jsonl.gz -debian-queries /work/shared/data/debian-updates.jsonl.gz) ;;
	mixture) args=(-n "$MIX_N" -queries "$QUERIES" -dim 128 -centres 1000) ;;
	uniform) args=(-n "$UNI_N" -queries "$QUERIES" -dim 128) ;;
	*) die "unknown vector set '$kind' (want debian, mixture or uniform)" ;;
	esac
	want=$(printf '%s ' "${args[@]}")
	if [[ ! -f $DIR/$kind.json || $(cat "$DIR/$kind.args" 2>/dev/null) != "$want" ]]; then
		note "$kind: generating"
		rm -f "$DIR/$kind".gt.*
		"$DIR/vecgen" -kind "$kind" "${args[@]}" -out "$DIR"
		echo "$want" >"$DIR/$kind.args"
	fi
	n=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["n"])' "$DIR/$kind.json")
	upserts=${BENCH_VINDEX_UPSERTS:-$(( n / 100 > 0 ? n / 100 : 1 ))}
	note "$kind: hnswlib (n $n, M $M, ef_construction $EFC, $THREADS threads, load $(cut -d' ' -f1 /proc/loadavg))"
	"$PY" scripts/bench/vindex/hnswlib_bench.py --dir "$DIR" --kind "$kind" --m "$M" --efc "$EFC" \
		--threads "$THREADS" --efs "$EFS" --upserts "$upserts" ${SEED:+--seed "$SEED"} >"$DIR/$kind.hnswlib.json"
	note "$kind: vindex (load $(cut -d' ' -f1 /proc/loadavg))"
	"$DIR/vindex-bench" -dir "$DIR" -kind "$kind" -m "$M" -efc "$EFC" -threads "$THREADS" -efs "$EFS" \
		-upserts "$upserts" ${SEED:+-seed "$SEED"} >"$DIR/$kind.vindex.json"
done
echo
"$PY" scripts/bench/vindex/report.py "$DIR" $KINDS
