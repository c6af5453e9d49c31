#!/usr/bin/env bash
# Benchmarks (not run in CI) of the shared deployment: `compactor serve`
# replicas on one PostgreSQL catalog and one VersityGW bucket on this machine.
#
# Usage:
#   scripts/bench-replicas.sh [throughput]   compact-all throughput of 1, 2, 3 replicas
#   scripts/bench-replicas.sh goals          the shared-catalog goals of docs/performance.md
#
# throughput (the default): compact-all throughput, in records/s, of 1, 2 and
# 3 replicas. For each replica count it creates a fresh PostgreSQL database
# (dropped at the end) and a fresh bucket, starts the replicas on loopback
# ports (default flags except --schedule-interval 1h, so the only jobs are the
# ones asked for, and --status-poll-interval 200ms, so a replica picks up jobs
# queued through another one quickly), pushes the same data through replica 1
# (COLLECTIONS collections of the first RECORDS records of
# testdata/debian-base.jsonl.gz, all ADDs), then times `compactor compact
# --all --wait` through replica 1: from the request until every job has
# finished. It prints a table: replicas, records, seconds, records/s, and the
# jobs each node ran.
#
# goals: the two goals of docs/performance.md for PostgreSQL + S3.
#   1. One full compaction of GOAL_RECORDS operation records (default
#      1,000,000; scripts/bench/gen -n N -dim 128 -seed 1, the mix of
#      scripts/bench.sh) into a collection created --no-index, by one
#      `compactor serve` on PostgreSQL + VersityGW against one on SQLite +
#      file:// (goal: ≤ 1.5×). The records are pushed once per backend into
#      a template (`compactor push`, its default batches of 1,000 keyed
#      records; the push's wall time and records/s are printed too); each run
#      compacts a fresh copy (`cp -a` of the SQLite data dir; CREATE DATABASE
#      ... TEMPLATE and an empty bucket for PostgreSQL) with
#      --max-compaction-size GOAL_RECORDS (one job) and --schedule-interval
#      1h. GOAL_ROUNDS pairs (default 2), the order alternating between
#      pairs. Per run: the job's create_time -> finish_time, the CLI's wall
#      time, the server's CPU time (user + system, /proc/PID/stat), on
#      PostgreSQL also the CPU of the database's backends (those connected
#      to the run's database at the end, from their start) and of VersityGW
#      meanwhile, and the 1-minute load average before and after. On a
#      machine other work loads, the CPU ratio is the figure to judge by
#      (wall times stretch with the load); both are printed, per pair and
#      as the median over pairs.
#   2. PushLogs against a raw COPY (goal: ≥ 0.5×): BenchmarkPushLogsCopy in
#      internal/catalog, GOAL_PUSH_BATCHES batches of 1,000 records (default
#      300), appended and COPYed in turn (see its docstring).
# GOAL=1 or GOAL=2 runs one of them alone.
#
# Environment:
#   COLLECTIONS  throughput: collections per run (default 30)
#   RECORDS      throughput: records per collection, at most 5000 (default 2000)
#   REPLICAS     throughput: the replica counts to run (default "1 2 3")
#   SERVE_FLAGS  more serve flags for every server, e.g. "--workers 6"
#                (default none: 2 workers per replica)
#   GOAL_RECORDS, GOAL_ROUNDS, GOAL_PUSH_BATCHES, GOAL  goals: see above
#   BENCH_POSTGRES_URL  server to create the databases on (default
#                postgres://postgres@127.0.0.1:5432/test?sslmode=disable)
#   BIN          directory of versitygw (default .cache/bin; built from
#                tools/go.mod when missing)
#   KEEP_TMP=1   keep the working directory (logs, generated records)
# Needs: go, psql, python3, curl; goals needs ~4 GB of disk per million
# records (the generated records, two templates and a run's copy).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
MODE=${1:-throughput}
case $MODE in
throughput | goals) ;;
*) echo "usage: scripts/bench-replicas.sh [throughput|goals]" >&2; exit 2 ;;
esac
BIN=${BIN:-.cache/bin}
case $BIN in /*) ;; *) BIN=$ROOT/$BIN ;; esac
COLLECTIONS=${COLLECTIONS:-30}
RECORDS=${RECORDS:-2000}
REPLICAS=${REPLICAS:-1 2 3}
GOAL_RECORDS=${GOAL_RECORDS:-1000000}
GOAL_ROUNDS=${GOAL_ROUNDS:-2}
GOAL_PUSH_BATCHES=${GOAL_PUSH_BATCHES:-300}
GOAL=${GOAL:-}
read -r -a serve_flags <<<"${SERVE_FLAGS:-}"
PG_ADMIN=${BENCH_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}

die() { echo "bench: $*" >&2; exit 1; }
note() { echo "bench: $*" >&2; }
source scripts/lib/bench-common.sh
for v in GOAL_RECORDS GOAL_ROUNDS GOAL_PUSH_BATCHES; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v takes a positive integer, got '${!v}'"
done
[[ -z $GOAL || $GOAL == 1 || $GOAL == 2 ]] || die "GOAL takes 1 or 2, got '$GOAL'"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/compactor-bench.XXXXXX")
pids=()
dbs=()
cleanup() {
	local rc=$?
	stop_server
	for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	for db in "${dbs[@]}"; do
		psql "$PG_ADMIN" -qtAc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null || echo "bench: could not drop database $db" >&2
	done
	end_tmp "$rc" "$TMP"
	exit "$rc"
}
trap cleanup EXIT
export PGOPTIONS='-c client_min_messages=warning' # no NOTICE of DROP ... IF EXISTS
trap 'exit 130' INT TERM

psql "$PG_ADMIN" -qtAc 'SELECT 1' >/dev/null 2>&1 || die "PostgreSQL does not answer at $PG_ADMIN"
if [[ ! -x $BIN/versitygw ]]; then
	echo "bench: building versitygw into $BIN"
	mkdir -p "$BIN"
	go build -modfile=tools/go.mod -o "$BIN/" github.com/versity/versitygw/cmd/versitygw
fi
go build -o "$TMP/" ./cmd/compactor ./scripts/bench/gen
C=$TMP/compactor

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
load1() { cut -d' ' -f1 /proc/loadavg; }
now() { date +%s.%N; }
# cpu_of PID...: CPU seconds (user + system, every thread) the processes
# have used since they started; a process gone meanwhile counts 0.
cpu_of() {
	python3 -c 'import os, sys
t = 0
for pid in sys.argv[1:]:
    try:
        f = open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()
    except OSError:
        continue
    t += int(f[11]) + int(f[12])
print("%.2f" % (t / os.sysconf("SC_CLK_TCK")))' "$@"
}
# db_url NAME: PG_ADMIN with the database NAME.
db_url() {
	python3 -c '
import sys, urllib.parse as u
p = u.urlsplit(sys.argv[1])
print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$PG_ADMIN" "$1"
}

# One VersityGW (posix backend) for every run; the credentials go to the
# child processes only.
mkdir -p "$TMP/s3"
vgw_port=$(free_port)
AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench-secret \
	"$BIN/versitygw" --port "127.0.0.1:$vgw_port" --access bench --secret bench-secret posix "$TMP/s3" >"$TMP/versitygw.log" 2>&1 &
vgw_pid=$!
pids+=("$vgw_pid")
for _ in $(seq 600); do
	curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$vgw_port/" && break
	sleep 0.1
done
curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$vgw_port/" || die "versitygw does not answer: $(cat "$TMP/versitygw.log")"
s3_url() { echo "s3://$1?endpoint=http://127.0.0.1:$vgw_port&use_path_style=true&region=us-east-1"; }

# serve LOG FLAGS...: starts `compactor serve` on a free loopback port with
# FLAGS and SERVE_FLAGS (start_serve); sets server_pid and server_url once
# it is healthy. stop_server stops it.
serve() {
	local log=$1
	shift
	AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench-secret AWS_EC2_METADATA_DISABLED=true \
		start_serve "$C" "$log" 60 "$@" "${serve_flags[@]}"
}

throughput() {
	python3 - "$RECORDS" testdata/debian-base.jsonl.gz "$TMP/data.jsonl" <<'PY'
import gzip, itertools, sys
n, src, dst = int(sys.argv[1]), sys.argv[2], sys.argv[3]
with gzip.open(src, "rt") as f, open(dst, "w") as out:
    out.writelines(itertools.islice(f, n))
PY
	RECORDS=$(wc -l <"$TMP/data.jsonl")
	local total=$((COLLECTIONS * RECORDS)) results=() n db catalog bucket run_pids addrs i log url c id t0 t1 spread pid
	for n in $REPLICAS; do
		db=compactor_bench_$(date +%s)_${n}_$$
		psql "$PG_ADMIN" -qtAc "CREATE DATABASE $db" >/dev/null
		dbs+=("$db")
		catalog=$(db_url "$db")
		bucket=bench-$n
		mkdir -p "$TMP/s3/$bucket"
		run_pids=()
		addrs=()
		for i in $(seq "$n"); do
			log=$TMP/run$n-replica$i.log
			AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench-secret AWS_EC2_METADATA_DISABLED=true \
				"$C" serve --listen 127.0.0.1:0 --data-dir "$TMP/data-$n-$i" --catalog "$catalog" \
				--blob-url "$(s3_url "$bucket")" \
				--log-format text --node "bench-$i" --schedule-interval 1h --status-poll-interval 200ms "${serve_flags[@]}" >"$log" 2>&1 &
			run_pids+=($!)
			pids+=($!)
			wait_serving "$log" "$!"
			addrs+=("$serving_addr")
		done
		url=http://${addrs[0]}
		for i in $(seq "$n"); do
			wait_healthy "$C" "http://${addrs[i - 1]}" "$TMP/run$n-replica$i.log" 60
		done

		note "$n replica(s): pushing $COLLECTIONS x $RECORDS records through replica 1"
		for c in $(seq -w "$COLLECTIONS"); do
			id=$("$C" --addr "$url" -o json collections create "bench-$c" --dimension 64 |
				python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
			"$C" --addr "$url" push --collection "$id" --op add "$TMP/data.jsonl" >/dev/null 2>&1 ||
				die "push into bench-$c failed"
		done

		note "$n replica(s): compact --all --wait"
		t0=$(now)
		"$C" --addr "$url" -o json compact --all --wait --reason bench >"$TMP/run$n-compact.json" 2>"$TMP/run$n-compact.err" ||
			die "compact --all --wait failed: $(tail -5 "$TMP/run$n-compact.err")"
		t1=$(now)
		spread=$("$C" --addr "$url" -o json jobs --limit 0 2>/dev/null | python3 -c '
import collections, json, sys
jobs = json.load(sys.stdin)
bad = [j for j in jobs if j.get("state") != "JOB_STATE_SUCCEEDED"]
if bad:
    sys.exit("jobs not SUCCEEDED: %r" % bad[:3])
c = collections.Counter(j.get("node", "?") for j in jobs)
print(" ".join("%s:%d" % kv for kv in sorted(c.items())))') || die "the jobs of the $n-replica run did not all succeed"
		results+=("$(python3 -c '
import sys
n, total, t0, t1, spread = sys.argv[1:]
s = float(t1) - float(t0)
print("%-8s  %7d  %7.2f  %9.0f  %s" % (n, int(total), s, int(total) / s, spread))' "$n" "$total" "$t0" "$t1" "$spread")")

		for pid in "${run_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
		for pid in "${run_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	done

	echo
	echo "compact --all throughput: $COLLECTIONS collections x $RECORDS records, PostgreSQL + VersityGW, $(nproc 2>/dev/null || echo "?") cores shared by everything${SERVE_FLAGS:+, serve $SERVE_FLAGS}"
	printf '%-8s  %7s  %7s  %9s  %s\n' replicas records seconds records/s "jobs per node"
	for r in "${results[@]}"; do echo "$r"; done
}

# --- goals -------------------------------------------------------------------
GOAL_RESULTS=$TMP/goals.jsonl
goal_flags() { echo --schedule-interval 1h --max-backlog 1000000000 --max-compaction-size "$GOAL_RECORDS"; }
# pg_backends DB: the pids of the PostgreSQL backends connected to DB.
pg_backends() { psql "$PG_ADMIN" -qtAc "SELECT pid FROM pg_stat_activity WHERE datname = '$1'"; }
# push_template BACKEND: serves BACKEND's template, creates the collection
# (--no-index) and pushes the generated records into it, timed.
push_template() {
	local backend=$1 id t0 cpu0 wall cpu pg=0
	local -a flags
	read -r -a flags <<<"$(goal_flags)"
	if [[ $backend == sqlite ]]; then
		serve "$TMP/push-sqlite.log" --data-dir "$TMP/tmpl-sqlite" "${flags[@]}"
	else
		psql "$PG_ADMIN" -qtAc "CREATE DATABASE $tmpl_db" >/dev/null
		dbs+=("$tmpl_db")
		mkdir -p "$TMP/s3/goal-tmpl"
		serve "$TMP/push-postgres.log" --data-dir "$TMP/tmpl-postgres-dir" --catalog "$(db_url "$tmpl_db")" \
			--blob-url "$(s3_url goal-tmpl)" "${flags[@]}"
	fi
	id=$("$C" --addr "$server_url" -o json collections create bench --dimension 128 --no-index |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
	echo "$id" >"$TMP/collection-$backend"
	note "$backend: pushing $GOAL_RECORDS operation records into the template (compactor push, batches of 1,000)"
	t0=$(now)
	cpu0=$(cpu_of "$server_pid")
	"$C" --addr "$server_url" --timeout 10m push --collection "$id" "$TMP/data/ops.jsonl" >"$TMP/push-$backend.out" 2>&1 ||
		die "push into the $backend template failed: $(tail -5 "$TMP/push-$backend.out")"
	wall=$(python3 -c 'import sys; print("%.2f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$t0" "$(now)")
	cpu=$(python3 -c 'import sys; print("%.2f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$cpu0" "$(cpu_of "$server_pid")")
	[[ $backend == sqlite ]] || pg=$(cpu_of $(pg_backends "$tmpl_db"))
	echo "{\"kind\": \"push\", \"backend\": \"$backend\", \"wall_s\": $wall, \"cpu_s\": $cpu, \"pg_cpu_s\": $pg, \"load\": $(load1)}" >>"$GOAL_RESULTS"
	stop_server
}
# compact_run BACKEND ROUND: one full compaction of a fresh copy of BACKEND's
# template.
compact_run() {
	local backend=$1 r=$2 id dir db= bucket= load0 cpu0 vgw0 t0 wall cpu vgw pg=0 job rows
	local -a flags
	read -r -a flags <<<"$(goal_flags)"
	id=$(cat "$TMP/collection-$backend")
	dir=$TMP/run-$backend
	rm -rf "$dir"
	if [[ $backend == sqlite ]]; then
		cp -a "$TMP/tmpl-sqlite" "$dir"
		rm -f "$dir"/*.lock
		serve "$TMP/run-$backend-$r.log" --data-dir "$dir" "${flags[@]}"
	else
		db=${tmpl_db}_run$r
		psql "$PG_ADMIN" -qtAc "CREATE DATABASE $db TEMPLATE $tmpl_db" >/dev/null
		dbs+=("$db")
		bucket=goal-run$r
		rm -rf "$TMP/s3/$bucket"
		mkdir -p "$TMP/s3/$bucket"
		serve "$TMP/run-$backend-$r.log" --data-dir "$dir" --catalog "$(db_url "$db")" --blob-url "$(s3_url "$bucket")" "${flags[@]}"
	fi
	note "round $r: $backend: full compaction of $GOAL_RECORDS operation records"
	load0=$(load1)
	cpu0=$(cpu_of "$server_pid")
	vgw0=$(cpu_of "$vgw_pid")
	t0=$(now)
	"$C" --addr "$server_url" --timeout 30m -o json compact "$id" --wait --reason bench >"$TMP/compact.json" 2>"$TMP/compact.err" ||
		die "compact --wait on $backend failed: $(tail -5 "$TMP/compact.err")"
	wall=$(python3 -c 'import sys; print("%.2f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$t0" "$(now)")
	cpu=$(python3 -c 'import sys; print("%.2f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$cpu0" "$(cpu_of "$server_pid")")
	vgw=$(python3 -c 'import sys; print("%.2f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$vgw0" "$(cpu_of "$vgw_pid")")
	[[ -z $db ]] || pg=$(cpu_of $(pg_backends "$db"))
	job=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
j = d["jobs"]
if len(j) != 1 or d.get("continuations"):
    sys.exit("bench: the full compaction took several jobs: %s" % json.dumps(d)[:300])
print(j[0]["job"]["id"])' "$TMP/compact.json")
	"$C" --addr "$server_url" -o json job "$job" >"$TMP/job.json"
	rows=$("$C" --addr "$server_url" -o json collections get "$id" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("record_count", 0))')
	python3 - "$TMP/job.json" "$backend" "$r" "$wall" "$cpu" "$pg" "$vgw" "$load0" "$(load1)" "$rows" >>"$GOAL_RESULTS" <<'PY'
import json, sys
from datetime import datetime
def t(s): return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
j = json.load(open(sys.argv[1]))
if j.get("state") != "JOB_STATE_SUCCEEDED":
    sys.exit("bench: the job did not succeed: %s" % json.dumps(j)[:500])
backend, r, wall, cpu, pg, vgw, l0, l1, rows = sys.argv[2:]
print(json.dumps({"kind": "compact", "backend": backend, "round": int(r), "job_s": t(j["finish_time"]) - t(j["create_time"]),
    "wall_s": float(wall), "cpu_s": float(cpu), "pg_cpu_s": float(pg), "vgw_cpu_s": float(vgw),
    "load_before": float(l0), "load_after": float(l1), "rows": int(rows), "bytes_written": int(j.get("bytes_written", 0))}))
PY
	stop_server
	rm -rf "$dir"
	[[ -z $bucket ]] || rm -rf "$TMP/s3/$bucket"
	[[ -z $db ]] || psql "$PG_ADMIN" -qtAc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
}
goal_report() {
	python3 - "$GOAL_RESULTS" "$GOAL_RECORDS" "$(nproc 2>/dev/null || echo "?")" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
n, cores = int(sys.argv[2]), sys.argv[3]
push = {r["backend"]: r for r in rows if r["kind"] == "push"}
runs = [r for r in rows if r["kind"] == "compact"]
print()
print("full compaction of %d operation records (--no-index, one job), %s cores shared with other work" % (n, cores))
print("| round | backend | job s | CLI wall s | server CPU s | PostgreSQL CPU s | VersityGW CPU s | load before / after | rows |")
print("|---|---|---|---|---|---|---|---|---|")
for r in runs:
    print("| %d | %s | %.1f | %.1f | %.1f | %s | %s | %.1f / %.1f | %d |" % (r["round"], r["backend"], r["job_s"], r["wall_s"], r["cpu_s"],
        "%.1f" % r["pg_cpu_s"] if r["backend"] == "postgres" else "", "%.1f" % r["vgw_cpu_s"] if r["backend"] == "postgres" else "",
        r["load_before"], r["load_after"], r["rows"]))
if len({r["rows"] for r in runs}) > 1:
    sys.exit("bench: the backends disagree on the rows after compaction: %s" % sorted({r["rows"] for r in runs}))
pairs = []
for rd in sorted({r["round"] for r in runs}):
    by = {r["backend"]: r for r in runs if r["round"] == rd}
    if "sqlite" in by and "postgres" in by:
        s, p = by["sqlite"], by["postgres"]
        pairs.append((rd, p["job_s"] / s["job_s"], p["cpu_s"] / s["cpu_s"], (p["cpu_s"] + p["pg_cpu_s"] + p["vgw_cpu_s"]) / s["cpu_s"]))
print()
print("| pair | job time PostgreSQL+S3 / SQLite+file | server CPU ratio | CPU ratio with PostgreSQL's and VersityGW's |")
print("|---|---|---|---|")
for rd, w, c, a in pairs:
    print("| %d | %.2f× | %.2f× | %.2f× |" % (rd, w, c, a))
if pairs:
    med = lambda i: statistics.median(p[i] for p in pairs)
    print("| median | %.2f× | %.2f× | %.2f× |" % (med(1), med(2), med(3)))
    print()
    print("goal ≤ 1.5×: %s on the CPU ratio with PostgreSQL's and VersityGW's (the figure to judge by on a loaded machine:"
          " the server's own CPU leaves out the work it hands to them), %s on the job time" % (
        "met" if med(3) <= 1.5 else "missed", "met" if med(1) <= 1.5 else "missed"))
print()
for b in ("sqlite", "postgres"):
    if b in push:
        p = push[b]
        print("push of the template, %s: %.1f s wall (%.0f records/s), server CPU %.1f s%s, load %.1f after" % (b, p["wall_s"], n / p["wall_s"], p["cpu_s"],
            ", PostgreSQL CPU %.1f s" % p["pg_cpu_s"] if b == "postgres" else "", p["load"]))
PY
}
goals() {
	if [[ -z $GOAL || $GOAL == 1 ]]; then
		tmpl_db=compactor_goal_$(date +%s)_$$
		note "generating $GOAL_RECORDS operation records (scripts/bench/gen -dim 128 -seed 1)"
		"$TMP/gen" -n "$GOAL_RECORDS" -dim 128 -seed 1 -out "$TMP/data"
		push_template sqlite
		push_template postgres
		local r
		for r in $(seq "$GOAL_ROUNDS"); do
			if ((r % 2)); then
				compact_run sqlite "$r"
				compact_run postgres "$r"
			else
				compact_run postgres "$r"
				compact_run sqlite "$r"
			fi
		done
		goal_report
	fi
	if [[ -z $GOAL || $GOAL == 2 ]]; then
		note "PushLogs against COPY: BenchmarkPushLogsCopy, $GOAL_PUSH_BATCHES batches of 1,000 records"
		echo
		echo "BenchmarkPushLogsCopy, load before $(load1):"
		COMPACTOR_TEST_POSTGRES_DSN=$PG_ADMIN go test -run '^$' -bench '^BenchmarkPushLogsCopy$' -benchtime "${GOAL_PUSH_BATCHES}x" ./internal/catalog/ |
			grep -E '^(Benchmark|ok|FAIL)'
		echo "load after $(load1)"
	fi
}

"$MODE"
