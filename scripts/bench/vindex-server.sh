#!/usr/bin/env bash
# Benchmark of the vector index through the real server (not run in CI): a
# BENCH_VSERVE_N × 128 Gaussian mixture (scripts/bench/vecgen, the l2 set of
# scripts/bench/vindex.sh) pushed into `compactor serve` (SQLite + file://,
# default index settings: M 16, ef_construction 200, ef_search 100) and
# measured by scripts/bench/vserve over the Connect API:
#   - one full compaction with indexing: the job's time, its index phase
#     (the server's compactor_index_build_seconds), and the server's peak
#     RSS (VmHWM, reset just before the job) against the 1.5 GB goal;
#   - QueryRecords, k = 10, from BENCH_VSERVE_CLIENTS concurrent clients,
#     once the full compaction's log purge has ended (its wait is reported):
#     p50 / p99 latency, queries/s and recall@10 against an exact scan, in
#     two runs: with the caches the compaction left (cold), then again
#     (warm);
#   - filtered queries at 1 %, 10 % and 50 % selectivity: recall@10 and
#     latency;
#   - BENCH_VSERVE_UPSERTS updates pushed and compacted: the index phase as a
#     percentage of the full build's, the peak RSS, and recall after it.
# It ends with a markdown table with the 1-minute load average beside each
# figure: on a shared machine the times are loaded figures, not verdicts.
#
# Environment:
#   BENCH_VSERVE_N        vectors (default 1000000; 200000 on a busy machine)
#   BENCH_VSERVE_QUERIES  query vectors (default 1000)
#   BENCH_VSERVE_CLIENTS  concurrent query clients (default 8)
#   BENCH_VSERVE_REQUESTS queries per client (default 250)
#   BENCH_VSERVE_UPSERTS  updates of the incremental step (default 10000)
#   BENCH_VSERVE_FILTER_QUERIES  queries per filtered selectivity (default 100;
#                         a selective filter is planned as a scan of the version,
#                         seconds per query at 1M)
#   BENCH_VSERVE_PPROF    host:port for the server's --debug-listen: when set,
#                         a CPU profile of the server is taken from the start
#                         of the warm run (BENCH_VSERVE_DIR/query.pprof,
#                         BENCH_VSERVE_PPROF_SECONDS long, default 10)
#   BENCH_VSERVE_REUSE    1: query the collection of an earlier run whose data
#                         dir was kept (KEEP_DATA=1) instead of loading one:
#                         the concurrent queries and their recall only, the
#                         data dir kept again
#   BENCH_VSERVE_DIR      working directory (default .cache/bench-vserve; the
#                         1M set takes ~600 MB, the server's data dir ~1.5 GB;
#                         the data dir is removed at the end unless KEEP_DATA=1)
# Needs: go.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
N=${BENCH_VSERVE_N:-1000000}
QUERIES=${BENCH_VSERVE_QUERIES:-1000}
CLIENTS=${BENCH_VSERVE_CLIENTS:-8}
REQUESTS=${BENCH_VSERVE_REQUESTS:-250}
UPSERTS=${BENCH_VSERVE_UPSERTS:-10000}
FILTER_QUERIES=${BENCH_VSERVE_FILTER_QUERIES:-100}
DIR=${BENCH_VSERVE_DIR:-.cache/bench-vserve}
PPROF=${BENCH_VSERVE_PPROF:-}
PPROF_SECONDS=${BENCH_VSERVE_PPROF_SECONDS:-10}
REUSE=${BENCH_VSERVE_REUSE:-}

note() { echo "bench vserve: $*" >&2; }
die() { note "$*"; exit 1; }
source scripts/lib/bench-common.sh
for v in "$N" "$QUERIES" "$CLIENTS" "$REQUESTS" "$UPSERTS" "$FILTER_QUERIES"; do
	[[ $v =~ ^[1-9][0-9]*$ ]] || die "BENCH_VSERVE_N, _QUERIES, _CLIENTS, _REQUESTS, _UPSERTS and _FILTER_QUERIES take positive integers, got '$v'"
done
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
go build -o "$DIR/bin/" ./cmd/compactor ./scripts/bench/vecgen ./scripts/bench/vserve

args="-n $N -queries $QUERIES -dim 128 -centres 1000"
if [[ ! -f $DIR/mixture.json || $(cat "$DIR/mixture.args" 2>/dev/null) != "$args" ]]; then
	note "generating the mixture ($args)"
	# shellcheck disable=SC2086
	"$DIR/bin/vecgen" -kind mixture $args -out "$DIR"
	echo "$args" >"$DIR/mixture.args"
fi

data=$DIR/data
log=$DIR/server.log
reuse=()
if [[ $REUSE == 1 ]]; then
	[[ -d $data ]] || die "BENCH_VSERVE_REUSE=1 needs the data dir of an earlier run kept with KEEP_DATA=1: $data is missing"
	KEEP_DATA=1
	reuse=(-reuse)
else
	rm -rf "$data"
fi
server_pid=
cleanup() {
	local rc=$?
	stop_server
	[[ ${KEEP_DATA:-} == 1 ]] || rm -rf "$data"
	[[ $rc -eq 0 ]] || note "failed (status $rc); the server's log is $log"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

debug=()
profile=()
if [[ -n $PPROF ]]; then
	[[ $PPROF_SECONDS =~ ^[1-9][0-9]*$ ]] || die "BENCH_VSERVE_PPROF_SECONDS takes a positive integer, got '$PPROF_SECONDS'"
	debug=(--debug-listen "$PPROF")
	profile=(-pprof "$PPROF" -pprof-seconds "$PPROF_SECONDS")
fi

# One job for the whole collection, no scheduled compaction, no backpressure.
start_serve "$DIR/bin/compactor" "$log" 120 --data-dir "$data" --schedule-interval 1h \
	--max-backlog $((4 * N)) --max-compaction-size $((2 * N)) "${debug[@]}"
addr=$serving_addr
note "server at http://$addr (pid $server_pid, load $(cut -d' ' -f1 /proc/loadavg))"

"$DIR/bin/vserve" -addr "http://$addr" -server-pid "$server_pid" -dir "$DIR" -kind mixture \
	-clients "$CLIENTS" -requests "$REQUESTS" -upserts "$UPSERTS" -filter-queries "$FILTER_QUERIES" -json "$DIR/vserve.json" \
	"${profile[@]}" "${reuse[@]}"
