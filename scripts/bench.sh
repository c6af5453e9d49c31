#!/usr/bin/env bash
# Benchmark (not run in CI): the performance goals of docs/performance.md. Compaction of the same
# operation records by `compactor serve` (SQLite + file://) and by DuckDB
# (2 threads, from npm: tools/duckdb), with `dd ... conv=fdatasync` writing the
# same bytes as a disk floor, in interleaved pairs; then the incremental costs,
# a paged read, and the default flags end to end. It ends with a markdown table
# (goal, measured figure, ratio, met or not) for docs/performance.md
#
#
# For each size of BENCH_SIZES (operation records; default 100,000 and
# 1,000,000) it generates the records once (scripts/bench/gen: 70 % ADDs of new
# ids, 20 % UPDATEs and 10 % DELETEs of live ids, 128-dim embeddings rounded to
# 3 decimals, seed 1; about 60 % end as rows) and pushes them once into a
# template data directory (not timed), into two collections: bench-N, created
# with --no-index (what DuckDB is paired with: both materialize, neither
# builds a vector index), and bench-N-indexed, the same records with the
# default vector index. Then, BENCH_ROUNDS times (default 3),
# for each size in turn, product and DuckDB back to back (the order alternates
# between rounds):
#   product  a copy of the template (a fresh data dir holding the pushed log),
#            `compactor serve` on it with --max-compaction-size at least the
#            size (one job) and --schedule-interval 1h (no scheduled job), then
#            `compactor compact ID --wait`: the job's duration is its
#            create_time -> finish_time (from `compactor job ID -o json`:
#            from Compact to the job's end), the wall time is the CLI's; the
#            server's CPU time meanwhile (user + system, from /proc), its
#            peak RSS (VmHWM, reset to the current RSS after start),
#            the job's bytes_written and the blocks on disk. Then, on the
#            compacted collection: 1,000 ADDs of new ids that sort last
#            (append.jsonl) and 1,000 UPDATEs spread over the id order
#            (updates.jsonl), each pushed then compacted (job duration, and
#            as % of the full compaction); then a paged GetRecords read of the
#            whole collection (scripts/bench/read, 1,000 per page), and
#            DuckDB's `SELECT * ... ORDER BY id` over the blocks the current
#            version's manifest lists (its deltas, the last 1,000 updates,
#            left out: DuckDB does less than the read), every result chunk
#            fetched, no value converted (DUCKDB_OUTPUT=count); then
#            (BENCH_INDEXED=1) the full compaction of bench-N-indexed: the
#            same materialization plus the index build, with its CPU time
#            and peak RSS.
#   DuckDB   node tools/duckdb/query.mjs running the materialization below on
#            ops.parquet (the same records with their log offsets) into one
#            Parquet file sorted by id, zstd: the statement's time and the
#            process's CPU time meanwhile (from DUCKDB_TIMING=1; node's and
#            DuckDB's start, seconds on a loaded machine, excluded as the
#            CLI's is from the job's) and the file's size.
#   dd       dd if=/dev/zero bs=1M conv=fdatasync of the product's bytes_written.
# After the pairs, per round and size: a copy of the template served with the
# default compaction flags, a paged read of the uncompacted log (the read
# before compaction); then, for each size above the default
# --max-compaction-size (100,000), the default flags end to end:
# `compact --wait`, which follows the chained continuation jobs: the time from
# the first job's creation to the last one's end, and the records written by
# all jobs / the final rows (write amplification).
#
# The DuckDB materialization (DESIGN.md §6 for the generator's mix: an id is
# added once, and updated or deleted only while live, so per id: absent when
# its last operation record is a DELETE, else its ADD merged with its UPDATEs
# in log order; embedding and document: the last non-null value; metadata:
# RFC 7396 merge patch, where null deletes a key):
#
#   COPY (
#     SELECT id,
#       arg_max(embedding, "offset") FILTER (WHERE embedding IS NOT NULL) AS embedding,
#       arg_max(document, "offset") FILTER (WHERE document IS NOT NULL) AS document,
#       list_reduce(list(metadata ORDER BY "offset") FILTER (WHERE metadata IS NOT NULL),
#                   (a, b) -> json_merge_patch(a, b))::VARCHAR AS metadata
#     FROM read_parquet('ops.parquet')
#     GROUP BY id
#     HAVING arg_max(op, "offset") <> 'delete'
#     ORDER BY id
#   ) TO 'out.parquet' (FORMAT parquet, COMPRESSION zstd);
#
# Its row count is checked against the generator's and the product's.
#
# Usage: scripts/bench.sh
# Environment:
#   BENCH_SIZES     operation records per size (default "100000 1000000")
#   BENCH_ROUNDS    interleaved rounds (default 3)
#   BENCH_DEFAULTS  sizes of the default-flags case (default: the sizes above
#                   100000; "" to skip it)
#   BENCH_READ_MAX  seconds a paged read may take before it stops and its
#                   time is projected from the pages read (default 60)
#   BENCH_WAIT      seconds one `compact --wait` may take before the run fails
#                   (default 3600; it has hung when a job's lease renewal
#                   raced its commit and no continuation was queued)
#   BENCH_MAX_OTHER the most CPU, in cores on average, that work other than
#                   the benchmark may use during a pair (or a read before
#                   compaction) for its figures to get a verdict (default
#                   0.25); a figure measured above it reads "loaded: no
#                   verdict"
#   BENCH_MAX_SKEW  the most the cores' speeds may differ (the slowest core's
#                   time over the fastest's for one pinned loop, measured
#                   before and after each pair) for its figures to get a
#                   verdict (default 1.15)
#   BENCH_DIM, BENCH_SEED  embedding dimension (128), generator seed (1)
#   BENCH_INDEXED   1 (default) also compacts bench-N-indexed in each pair
#                   (at 1,000,000 op records the index build takes minutes);
#                   0 skips it
#   BENCH_VINDEX    1 (default) also runs scripts/bench/vindex.sh at the end: the
#                   vector index against hnswlib (its own BENCH_VINDEX_*
#                   variables); 0 skips it
#   BENCH_DIR       working directory (default a new one under TMPDIR; needs
#                   ~3 GB per million records); KEEP_TMP=1 keeps it
# On a machine shared with other work, wall times stretch with the load, and
# DuckDB's 2 threads suffer more from it than the product's ~1 core. So each
# interleaved pair (product, DuckDB, dd) and each read before compaction
# records the CPU that other work used meanwhile: the busy CPU time of every
# core (/proc/stat) less the benchmark's own, over the pair's wall time, in
# cores. The benchmark's own is that of a cgroup it makes for itself at start
# (cgroup v1 cpuacct or v2 cpu.stat, where this user may make one), which
# holds every process it starts, in subshells too; elsewhere, bash's `times`
# of this shell: its reaped children (the server, DuckDB, the CLI), not what
# runs inside $(...), which then counts as other work. The 1-minute load average
# is no such measure: the benchmark's own two busy threads raise it to about
# 2 on the 2-core machine. The table shows the other work beside every
# figure, and a figure during which it passed BENCH_MAX_OTHER gets no
# verdict ("loaded: no verdict"), only its value.
# A virtual machine's cores can also run at different speeds while no other
# work shows in /proc/stat (its host's contention; on the 2-core machine one
# core was seen 1.75× slower than the other): DuckDB's two threads then wait
# for the slow one more than the product's one busy thread does, and the
# ratios flatter the product. So each pair also records the cores' speed
# skew (core_skew), and a figure measured with a skew above BENCH_MAX_SKEW
# gets no verdict either.

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
SIZES=${BENCH_SIZES:-100000 1000000}
ROUNDS=${BENCH_ROUNDS:-3}
READ_MAX=${BENCH_READ_MAX:-60}
WAIT=${BENCH_WAIT:-3600}
DIM=${BENCH_DIM:-128}
SEED=${BENCH_SEED:-1}
MAX_OTHER=${BENCH_MAX_OTHER:-0.25}
MAX_SKEW=${BENCH_MAX_SKEW:-1.15}
INDEXED=${BENCH_INDEXED:-1}
[[ $INDEXED == 0 || $INDEXED == 1 ]] || { echo "bench: BENCH_INDEXED takes 0 or 1, got '$INDEXED'" >&2; exit 1; }
if [[ -z ${BENCH_DEFAULTS+x} ]]; then
	BENCH_DEFAULTS=
	for n in $SIZES; do ((n > 100000)) && BENCH_DEFAULTS+="$n "; done
fi
DEFAULTS=$BENCH_DEFAULTS

die() { echo "bench: $*" >&2; exit 1; }
note() { echo "bench: $*" >&2; }
source scripts/lib/bench-common.sh
for n in $SIZES $DEFAULTS $ROUNDS $READ_MAX $WAIT $DIM $SEED; do
	[[ $n =~ ^[1-9][0-9]*$ ]] || die "BENCH_SIZES, BENCH_DEFAULTS, BENCH_ROUNDS, BENCH_READ_MAX, BENCH_WAIT, BENCH_DIM and BENCH_SEED take positive integers, got '$n'"
done
[[ $MAX_OTHER =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "BENCH_MAX_OTHER takes a number of cores, got '$MAX_OTHER'"
[[ $MAX_SKEW =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "BENCH_MAX_SKEW takes a ratio (1.15), got '$MAX_SKEW'"
for n in $DEFAULTS; do [[ " $SIZES " == *" $n "* ]] || die "BENCH_DEFAULTS: $n is not one of BENCH_SIZES ($SIZES)"; done
for tool in go node npm python3 dd; do command -v "$tool" >/dev/null || die "$tool is not on PATH"; done

if [[ -n ${BENCH_DIR:-} ]]; then
	mkdir -p "$BENCH_DIR"
	TMP=$(cd "$BENCH_DIR" && pwd)
else
	TMP=$(mktemp -d "${TMPDIR:-/tmp}/compactor-bench.XXXXXX")
fi
RESULTS=$TMP/results.jsonl
: >"$RESULTS"
server_pid=
cleanup() {
	local rc=$?
	stop_server
	own_cgroup_leave
	end_tmp "$rc" "$TMP"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# own_cgroup_enter: moves this shell (and so everything it starts) into a
# cgroup of its own, whose CPU usage own_s reads; OWN_CGROUP stays empty
# where no cgroup can be made (not root, no cpuacct or cgroup v2 mount).
OWN_CGROUP=
own_cgroup_enter() {
	local base dir
	for base in /sys/fs/cgroup/cpuacct /sys/fs/cgroup/unified /sys/fs/cgroup; do
		dir=$base/compactor-bench-$$
		mkdir "$dir" 2>/dev/null || continue
		# A real cgroup directory comes with its control files.
		if [[ -f $dir/cgroup.procs && ( -f $dir/cpuacct.usage || -f $dir/cpu.stat ) ]] &&
			echo $$ >"$dir/cgroup.procs" 2>/dev/null; then
			OWN_CGROUP=$dir
			return
		fi
		rmdir "$dir" 2>/dev/null || true
	done
	note "no cgroup of its own: what the benchmark runs inside \$(...) counts as other work"
}
own_cgroup_leave() {
	[[ -n $OWN_CGROUP ]] || return 0
	echo $$ >"$(dirname "$OWN_CGROUP")/cgroup.procs" 2>/dev/null || true
	rmdir "$OWN_CGROUP" 2>/dev/null || true
	OWN_CGROUP=
}
own_cgroup_enter
trap 'echo "bench: unexpected failure (status $?) at line $LINENO: $BASH_COMMAND" >&2' ERR

# --- tools ---------------------------------------------------------------------
note "building compactor and the benchmark's tools into $TMP/bin"
go build -o "$TMP/bin/" ./cmd/compactor ./scripts/bench/gen ./scripts/bench/read
C=$TMP/bin/compactor
duck=tools/duckdb
if [[ ! -f $duck/node_modules/.package-lock.json || $duck/package-lock.json -nt $duck/node_modules/.package-lock.json ]]; then
	note "installing DuckDB from npm into $duck/node_modules"
	npm ci --prefix "$duck" --no-audit --no-fund --loglevel=error >/dev/null
fi
duck_version=$(node $duck/query.mjs "SELECT version() AS v" | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["v"])')

now() { date +%s.%N; }
since() { python3 -c 'import sys; print("%.3f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$1" "$(now)"; }
json_get() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
for k in sys.argv[2:]: d=d[k]
print(d)' "$@"; }

# --- the server ------------------------------------------------------------------
addr=
# start_server DATA_DIR LOG [SERVE FLAGS...]: serve on a free loopback port,
# with the scheduler idle, and wait until it is healthy (start_serve);
# stop_server stops it.
start_server() {
	local dir=$1 log=$2
	shift 2
	start_serve "$C" "$log" 120 --data-dir "$dir" --schedule-interval 1h --max-backlog 100000000 "$@"
	addr=$server_url
}
cc() { "$C" --addr "$addr" --timeout 10m "$@"; }
# fresh_copy SIZE DIR: DIR becomes a copy of SIZE's template data dir.
fresh_copy() {
	rm -rf "$2"
	cp -a "$TMP/template-$1" "$2"
	rm -f "$2"/*.lock
}
# compact_jobs OUT: compact the collection and wait for it and its
# continuations; OUT gets one line per job as `compactor job ID -o json`
# shows it once finished, then a line {"wall_s": ...}.
compact_jobs() {
	local out=$1 t0 wall ids id
	t0=$(now)
	local rc=0
	timeout "$WAIT" "$C" --addr "$addr" --timeout 10m -o json compact "$cid" --wait --reason bench >"$out.compact" 2>"$out.err" || rc=$?
	((rc != 124)) || die "compact --wait did not return within BENCH_WAIT=$WAIT s (server log: $TMP/server.log; jobs: $C --addr $addr jobs)"
	((rc == 0)) || die "compact --wait failed: $(tail -5 "$out.err") (server log: $TMP/server.log)"
	wall=$(since "$t0")
	ids=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
print(" ".join([j["job"]["id"] for j in d["jobs"]] + [j["id"] for j in d.get("continuations", [])]))' "$out.compact")
	: >"$out"
	for id in $ids; do cc -o json job "$id" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)))' >>"$out"; done
	echo "{\"wall_s\": $wall}" >>"$out"
}
# jobs_summary FILE: one JSON object over the jobs of compact_jobs: jobs,
# span_s (first create_time -> last finish_time), sum_s, records_written,
# bytes_written, wall_s; fails unless every job SUCCEEDED.
jobs_summary() {
	python3 - "$1" <<'EOF'
import json, sys
from datetime import datetime
def t(s): return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
jobs, wall = [], None
for line in open(sys.argv[1]):
    d = json.loads(line)
    if "wall_s" in d: wall = d["wall_s"]
    else: jobs.append(d)
bad = [j for j in jobs if j.get("state") != "JOB_STATE_SUCCEEDED"]
if bad or not jobs:
    sys.exit("bench: jobs did not all succeed: %s" % json.dumps(bad or jobs)[:500])
print(json.dumps({
    "jobs": len(jobs),
    "span_s": max(t(j["finish_time"]) for j in jobs) - min(t(j["create_time"]) for j in jobs),
    "sum_s": sum(t(j["finish_time"]) - t(j["create_time"]) for j in jobs),
    "records_written": sum(int(j.get("records_written", 0)) for j in jobs),
    "bytes_written": sum(int(j.get("bytes_written", 0)) for j in jobs),
    "wall_s": wall,
}))
EOF
}
record() { echo "$1" >>"$RESULTS"; }
# with KEY=VALUE... added to a JSON object on stdin
with() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read())
for kv in sys.argv[1:]:
    k, v = kv.split("=", 1)
    d[k] = json.loads(v)
print(json.dumps(d))' "$@"; }
# cpu_s: CPU seconds (user + system, every thread) the server has used.
cpu_s() {
	python3 -c 'import os,sys
f = open("/proc/%s/stat" % sys.argv[1]).read().rsplit(")", 1)[1].split()
print("%.3f" % ((int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")))' "$server_pid"
}
load1() { cut -d' ' -f1 /proc/loadavg; }
rss_kb() { sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$server_pid/status"; }
read_all() { "$TMP/bin/read" -addr "$addr" -collection "$cid" -max-time "${READ_MAX}s"; }

# --- data and templates -------------------------------------------------------------
cid=
for n in $SIZES; do
	d=$TMP/data-$n
	note "$n operation records: generating into $d"
	"$TMP/bin/gen" -n "$n" -dim "$DIM" -seed "$SEED" -out "$d"
	note "$n operation records: pushing into the template data dir (not timed)"
	start_server "$TMP/template-$n" "$TMP/server.log"
	# bench-N has no vector index: the materialization DuckDB is paired
	# with. bench-N-indexed holds the same records with the default index.
	for c in collection collection-indexed; do
		flags=(--no-index) name=bench-$n
		[[ $c == collection ]] || flags=() name=bench-$n-indexed
		id=$(cc -o json collections create "$name" --dimension "$DIM" "${flags[@]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
		t0=$(now)
		cc push --collection "$id" "$d/ops.jsonl" >"$TMP/push.log" 2>&1 || die "push of $d/ops.jsonl failed: $(tail -5 "$TMP/push.log")"
		note "$n operation records: pushed into $name in $(since "$t0") s"
		echo "$id" >"$d/$c"
	done
	stop_server
done

# --- one pair --------------------------------------------------------------------------
product() { # product SIZE ROUND
	local n=$1 r=$2 d=$TMP/data-$1 run=$TMP/run rss blocks full load cpu0 cpu
	cid=$(cat "$d/collection")
	fresh_copy "$n" "$run"
	start_server "$run" "$TMP/server.log" --max-compaction-size "$((n > 100000 ? n : 100000))"
	echo 5 >"/proc/$server_pid/clear_refs" || note "cannot reset the peak RSS of the server; it includes its start"
	note "round $r, $n: product: full compaction"
	load=$(load1)
	cpu0=$(cpu_s)
	compact_jobs "$TMP/full.jobs"
	cpu=$(python3 -c 'import sys; print("%.3f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$cpu0" "$(cpu_s)")
	rss=$(rss_kb)
	blocks=$(du -sb "$run/blobs/collections/$cid/blocks" | cut -f1)
	full=$(jobs_summary "$TMP/full.jobs")
	[[ $(echo "$full" | json_get /dev/stdin jobs) == 1 ]] || die "the full compaction took several jobs: $full"
	record "$(echo "$full" | with kind='"full"' size="$n" round="$r" cpu_s="$cpu" load="$load" rss_kb="$rss" blocks_bytes="$blocks" \
		rows="$(cc -o json collections get "$cid" | json_get /dev/stdin record_count)")"
	bytes_written=$(echo "$full" | json_get /dev/stdin bytes_written)
	for inc in append updates; do
		note "round $r, $n: product: 1,000 records ($inc.jsonl) pushed and compacted"
		cc push --collection "$cid" "$d/$inc.jsonl" >"$TMP/push.log" 2>&1 || die "push of $inc.jsonl failed: $(tail -5 "$TMP/push.log")"
		compact_jobs "$TMP/$inc.jobs"
		record "$(jobs_summary "$TMP/$inc.jobs" | with kind="\"$inc\"" size="$n" round="$r")"
	done
	note "round $r, $n: product: paged read of the compacted collection"
	record "$(read_all | with kind='"read_after"' size="$n" round="$r")"
	duckdb_read "$n" "$r" "$run"
	if [[ $INDEXED == 1 ]]; then
		cid=$(cat "$d/collection-indexed")
		echo 5 >"/proc/$server_pid/clear_refs" || true
		note "round $r, $n: product: full compaction of the same records with the vector index"
		load=$(load1)
		cpu0=$(cpu_s)
		compact_jobs "$TMP/indexed.jobs"
		cpu=$(python3 -c 'import sys; print("%.3f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$cpu0" "$(cpu_s)")
		record "$(jobs_summary "$TMP/indexed.jobs" | with kind='"full_indexed"' size="$n" round="$r" cpu_s="$cpu" load="$load" rss_kb="$(rss_kb)")"
		cid=$(cat "$d/collection")
	fi
	stop_server
	rm -rf "$run"
}
duckdb() { # duckdb SIZE ROUND
	local n=$1 r=$2 d=$TMP/data-$1 out=$TMP/duckdb.parquet t0 wall rows stmt cpu load
	rm -f "$out"
	note "round $r, $n: DuckDB"
	load=$(load1)
	t0=$(now)
	DUCKDB_TIMING=1 node $duck/query.mjs "COPY (
  SELECT id,
    arg_max(embedding, \"offset\") FILTER (WHERE embedding IS NOT NULL) AS embedding,
    arg_max(document, \"offset\") FILTER (WHERE document IS NOT NULL) AS document,
    list_reduce(list(metadata ORDER BY \"offset\") FILTER (WHERE metadata IS NOT NULL),
                (a, b) -> json_merge_patch(a, b))::VARCHAR AS metadata
  FROM read_parquet('$d/ops.parquet')
  GROUP BY id
  HAVING arg_max(op, \"offset\") <> 'delete'
  ORDER BY id
) TO '$out' (FORMAT parquet, COMPRESSION zstd)" >/dev/null 2>"$TMP/duckdb.err" ||
		die "the DuckDB materialization failed: $(cat "$TMP/duckdb.err")"
	wall=$(since "$t0")
	stmt=$(sed -n 's/^duckdb: statement 1 of 1: \([0-9.]*\) s, cpu [0-9.]* s$/\1/p' "$TMP/duckdb.err")
	cpu=$(sed -n 's/^duckdb: statement 1 of 1: [0-9.]* s, cpu \([0-9.]*\) s$/\1/p' "$TMP/duckdb.err")
	[[ -n $stmt && -n $cpu ]] || die "query.mjs printed no statement time: $(cat "$TMP/duckdb.err")"
	rows=$(node $duck/query.mjs "SELECT count(*) AS n FROM read_parquet('$out')" | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["n"])')
	record "{\"kind\": \"duckdb\", \"size\": $n, \"round\": $r, \"s\": $stmt, \"cpu_s\": $cpu, \"load\": $load, \"wall_s\": $wall, \"bytes\": $(stat -c %s "$out"), \"rows\": $rows}"
	rm -f "$out"
}
duckdb_read() { # duckdb_read SIZE ROUND DATA_DIR: DuckDB's full read of the current version's blocks
	local n=$1 r=$2 blobs=$3/blobs v manifest stmt out
	v=$(cc -o json collections get "$cid" | json_get /dev/stdin segment_version)
	manifest=$(ls "$blobs/collections/$cid/manifests/$(printf %020d "$v")"-*.json) || die "no manifest of version $v"
	note "round $r, $n: DuckDB: SELECT * ORDER BY id over the blocks of version $v"
	out=$(DUCKDB_OUTPUT=count DUCKDB_TIMING=1 node $duck/query.mjs "SET VARIABLE blocks = (
  SELECT list('$blobs/' || b.key) FROM (SELECT unnest(blocks) AS b FROM read_json('$manifest')));
SELECT * FROM read_parquet(getvariable('blocks')) ORDER BY id" 2>"$TMP/duckdb.err") ||
		die "the DuckDB read failed: $(cat "$TMP/duckdb.err")"
	stmt=$(sed -n 's/^duckdb: statement 2 of 2: \([0-9.]*\) s, cpu [0-9.]* s$/\1/p' "$TMP/duckdb.err")
	[[ -n $stmt ]] || die "query.mjs printed no statement time: $(cat "$TMP/duckdb.err")"
	record "{\"kind\": \"duckdb_read\", \"size\": $n, \"round\": $r, \"s\": $stmt, \"rows\": $(echo "$out" | json_get /dev/stdin rows)}"
}
disk_floor() { # disk_floor SIZE ROUND BYTES
	local t0 wall
	t0=$(now)
	dd if=/dev/zero of="$TMP/dd.bin" bs=1M count="$3" iflag=count_bytes conv=fdatasync status=none
	wall=$(since "$t0")
	rm -f "$TMP/dd.bin"
	record "{\"kind\": \"dd\", \"size\": $1, \"round\": $2, \"wall_s\": $wall, \"bytes\": $3}"
}
uncompacted() { # uncompacted SIZE ROUND: the read before compaction, then the default flags end to end
	local n=$1 r=$2 run=$TMP/run load cpu0 cpu
	cid=$(cat "$TMP/data-$n/collection")
	fresh_copy "$n" "$run"
	start_server "$run" "$TMP/server.log"
	note "round $r, $n: paged read of the uncompacted log"
	record "$(read_all | with kind='"read_before"' size="$n" round="$r")"
	if [[ " $DEFAULTS " != *" $n "* ]]; then
		stop_server
		rm -rf "$run"
		return
	fi
	note "round $r, $n: default flags: compact --wait with its continuations"
	load=$(load1)
	cpu0=$(cpu_s)
	compact_jobs "$TMP/defaults.jobs"
	cpu=$(python3 -c 'import sys; print("%.3f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$cpu0" "$(cpu_s)")
	record "$(jobs_summary "$TMP/defaults.jobs" | with kind='"defaults"' size="$n" round="$r" cpu_s="$cpu" load="$load" \
		rows="$(cc -o json collections get "$cid" | json_get /dev/stdin record_count)")"
	stop_server
	rm -rf "$run"
}

# busy_s: CPU seconds all cores have been busy since boot (/proc/stat:
# user, nice, system, irq, softirq, steal).
busy_s() { awk -v hz="$(getconf CLK_TCK)" '/^cpu /{printf "%.2f\n", ($2+$3+$4+$7+$8+$9)/hz}' /proc/stat; }
# own_s: CPU seconds of the benchmark: its cgroup's usage where it has one
# (own_cgroup_enter), else this shell's and its reaped children's (bash's
# times, which must run in this shell: a subshell, as in $(...), starts with
# no children's times).
own_s() {
	if [[ -n $OWN_CGROUP && -f $OWN_CGROUP/cpuacct.usage ]]; then
		awk '{printf "%.2f\n", $1 / 1e9}' "$OWN_CGROUP/cpuacct.usage"
	elif [[ -n $OWN_CGROUP ]]; then
		awk '$1 == "usage_usec" {printf "%.2f\n", $2 / 1e6}' "$OWN_CGROUP/cpu.stat"
	else
		awk '{for (i = 1; i <= 2; i++) { split($i, a, "m"); s += a[1] * 60 + substr(a[2], 1, length(a[2]) - 1) }} END {printf "%.2f\n", s}' "$TMP/times"
	fi
}
# core_skew: the slowest core's time over the fastest's for the same
# single-threaded loop (about 0.2 s), pinned to each core this process may
# run on (its affinity, not 0..nproc-1) in turn with taskset, best of two
# per core; 1.00 on an even machine; "null" without taskset, with a single
# core, or when a pinned run fails (its time would be no measure).
# It also rises when other work keeps one core busy, which the other work
# column then shows too.
core_skew() {
	command -v taskset >/dev/null || { echo null; return; }
	local c k t0 times=() cpus
	cpus=$(python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)))') || { echo null; return; }
	for c in $cpus; do
		local best=
		for k in 1 2; do
			t0=$(now)
			taskset -c "$c" awk 'BEGIN { for (i = 0; i < 5e6; i++) s += i }' 2>/dev/null || { echo null; return; }
			best=$(python3 -c 'import sys; t = float(sys.argv[2]) - float(sys.argv[1]); b = sys.argv[3]; print(t if not b else min(t, float(b)))' "$t0" "$(now)" "$best")
		done
		times+=("$best")
	done
	((${#times[@]} > 1)) || { echo null; return; }
	python3 -c 'import sys; t = [float(x) for x in sys.argv[1:]]; print("%.2f" % (max(t) / min(t)))' "${times[@]}"
}
# mark VAR: sets VAR to "wall busy own" now, for record_load (times runs
# here, in this shell, for own_s's fallback), and skew_before to the cores'
# speed skew (core_skew), measured first.
mark() {
	skew_before=$(core_skew)
	times >"$TMP/times"
	printf -v "$1" '%s %s %s' "$(now)" "$(busy_s)" "$(own_s)"
}
# record_load PHASE SIZE ROUND MARK: the 1-minute load average now, the CPU
# other work used since MARK (busy CPU less this script's own, over the wall
# time, in cores), and the larger of the cores' speed skews measured at MARK
# and now, for the measurements of PHASE ("pair": product, DuckDB and dd;
# "uncompacted": the read before compaction and the default flags).
record_load() {
	local m1 other skew0=$skew_before
	times >"$TMP/times"
	printf -v m1 '%s %s %s' "$(now)" "$(busy_s)" "$(own_s)"
	other=$(python3 -c 'import sys
w0, b0, o0 = map(float, sys.argv[1].split()); w1, b1, o1 = map(float, sys.argv[2].split())
print("%.3f" % max(0.0, ((b1 - b0) - (o1 - o0)) / max(w1 - w0, 1e-3)))' "$4" "$m1")
	local skew
	skew=$(python3 -c 'import sys; v = [float(x) for x in sys.argv[1:] if x != "null"]; print("%.2f" % max(v) if v else "null")' "$skew0" "$(core_skew)")
	record "{\"kind\": \"load\", \"phase\": \"$1\", \"size\": $2, \"round\": $3, \"after\": $(load1), \"other_cores\": $other, \"core_skew\": $skew}"
}

for r in $(seq "$ROUNDS"); do
	for n in $SIZES; do
		mark before
		if ((r % 2 == 1)); then
			product "$n" "$r"
			duckdb "$n" "$r"
		else
			duckdb "$n" "$r"
			product "$n" "$r"
		fi
		disk_floor "$n" "$r" "$bytes_written"
		record_load pair "$n" "$r" "$before"
	done
	for n in $SIZES; do
		mark before
		uncompacted "$n" "$r"
		record_load uncompacted "$n" "$r" "$before"
	done
done

# --- the table -------------------------------------------------------------------------
echo
python3 "$ROOT/scripts/bench/report.py" "$RESULTS" "$TMP" "$duck_version" "$(nproc 2>/dev/null || echo '?')" "$ROUNDS" "$READ_MAX" "$MAX_OTHER" "$MAX_SKEW"

# --- the vector index against hnswlib: a script of its own -----------------------------
if [[ ${BENCH_VINDEX:-1} == 1 ]]; then
	echo
	"$ROOT/scripts/bench/vindex.sh"
fi
