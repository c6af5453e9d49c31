#!/usr/bin/env bash
# Benchmark (not run in CI): compact-all throughput, in records/s, of 1, 2 and
# 3 `compactor serve` replicas sharing one PostgreSQL catalog and one
# VersityGW bucket on this machine.
#
# For each replica count it creates a fresh PostgreSQL database (dropped at the
# end) and a fresh bucket, starts the replicas on loopback ports (default flags
# except --schedule-interval 1h, so the only jobs are the ones asked for, and
# --status-poll-interval 200ms, so a replica picks up jobs queued through
# another one quickly), pushes the same data through replica 1 (COLLECTIONS
# collections of the first RECORDS records of testdata/debian-base.jsonl.gz,
# all ADDs), then times `compactor compact --all --wait` through replica 1:
# from the request until every job has finished. It prints a table: replicas,
# records, seconds, records/s, and the jobs each node ran.
#
# Usage: scripts/bench-replicas.sh
# Environment:
#   COLLECTIONS  collections per run (default 30)
#   RECORDS      records per collection, at most 5000 (default 2000)
#   REPLICAS     the replica counts to run (default "1 2 3")
#   SERVE_FLAGS  more serve flags for every replica, e.g. "--workers 6"
#                (default none: 2 workers per replica)
#   BENCH_POSTGRES_URL  server to create the databases on (default
#                postgres://postgres@127.0.0.1:5432/test?sslmode=disable)
#   BIN          directory of versitygw (default .cache/bin; built from
#                tools/go.mod when missing)
# Needs: go, psql, python3, curl.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
BIN=${BIN:-.cache/bin}
case $BIN in /*) ;; *) BIN=$ROOT/$BIN ;; esac
COLLECTIONS=${COLLECTIONS:-30}
RECORDS=${RECORDS:-2000}
REPLICAS=${REPLICAS:-1 2 3}
read -r -a serve_flags <<<"${SERVE_FLAGS:-}"
PG_ADMIN=${BENCH_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/compactor-bench.XXXXXX")
pids=()
dbs=()
cleanup() {
	local rc=$?
	for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	for db in "${dbs[@]}"; do
		psql "$PG_ADMIN" -qtAc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null || echo "bench: could not drop database $db" >&2
	done
	if [[ $rc -ne 0 ]]; then
		echo "bench: failed; logs kept in $TMP" >&2
	else
		rm -rf "$TMP"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() { echo "bench: $*" >&2; exit 1; }

psql "$PG_ADMIN" -qtAc 'SELECT 1' >/dev/null 2>&1 || die "PostgreSQL does not answer at $PG_ADMIN"
if [[ ! -x $BIN/versitygw ]]; then
	echo "bench: building versitygw into $BIN"
	mkdir -p "$BIN"
	go build -modfile=tools/go.mod -o "$BIN/" github.com/versity/versitygw/cmd/versitygw
fi
go build -o "$TMP/compactor" ./cmd/compactor
C=$TMP/compactor

python3 - "$RECORDS" testdata/debian-base.jsonl.gz "$TMP/data.jsonl" <<'EOF'
import gzip, itertools, sys
n, src, dst = int(sys.argv[1]), sys.argv[2], sys.argv[3]
with gzip.open(src, "rt") as f, open(dst, "w") as out:
    out.writelines(itertools.islice(f, n))
EOF
RECORDS=$(wc -l <"$TMP/data.jsonl")
total=$((COLLECTIONS * RECORDS))

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# One VersityGW (posix backend) for every run; the credentials go to the
# child processes only.
mkdir -p "$TMP/s3"
vgw_port=$(free_port)
AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench-secret \
	"$BIN/versitygw" --port "127.0.0.1:$vgw_port" --access bench --secret bench-secret posix "$TMP/s3" >"$TMP/versitygw.log" 2>&1 &
pids+=($!)
for _ in $(seq 600); do
	curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$vgw_port/" && break
	sleep 0.1
done
curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$vgw_port/" || die "versitygw does not answer: $(cat "$TMP/versitygw.log")"

# wait_addr LOG PID: prints the address the replica logs once it serves.
wait_addr() {
	local addr=
	for _ in $(seq 1200); do
		kill -0 "$2" 2>/dev/null || die "a replica exited at start: $(tail -5 "$1")"
		addr=$(sed -n 's/.*msg=serving addr=\([0-9.]*:[0-9]*\).*/\1/p' "$1" | head -n 1)
		[[ -n $addr ]] && { echo "$addr"; return; }
		sleep 0.1
	done
	die "a replica did not log its address in 120 s: $(tail -5 "$1")"
}

results=()
for n in $REPLICAS; do
	db=compactor_bench_$(date +%s)_${n}_$$
	psql "$PG_ADMIN" -qtAc "CREATE DATABASE $db" >/dev/null
	dbs+=("$db")
	catalog=$(python3 -c '
import sys, urllib.parse as u
p = u.urlsplit(sys.argv[1])
print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$PG_ADMIN" "$db")
	bucket=bench-$n
	mkdir -p "$TMP/s3/$bucket"
	run_pids=()
	addrs=()
	for i in $(seq "$n"); do
		log=$TMP/run$n-replica$i.log
		AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench-secret AWS_EC2_METADATA_DISABLED=true \
			"$C" serve --listen 127.0.0.1:0 --data-dir "$TMP/data-$n-$i" --catalog "$catalog" \
			--blob-url "s3://$bucket?endpoint=http://127.0.0.1:$vgw_port&use_path_style=true&region=us-east-1" \
			--log-format text --node "bench-$i" --schedule-interval 1h --status-poll-interval 200ms "${serve_flags[@]}" >"$log" 2>&1 &
		run_pids+=($!)
		pids+=($!)
		addrs+=("$(wait_addr "$log" "$!")")
	done
	url=http://${addrs[0]}
	for a in "${addrs[@]}"; do
		for _ in $(seq 600); do "$C" --addr "http://$a" healthcheck >/dev/null 2>&1 && break; sleep 0.1; done
	done

	echo "bench: $n replica(s): pushing $COLLECTIONS x $RECORDS records through replica 1" >&2
	for c in $(seq -w "$COLLECTIONS"); do
		id=$("$C" --addr "$url" -o json collections create "bench-$c" --dimension 64 |
			python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
		"$C" --addr "$url" push --collection "$id" --op add "$TMP/data.jsonl" >/dev/null 2>&1 ||
			die "push into bench-$c failed"
	done

	echo "bench: $n replica(s): compact --all --wait" >&2
	t0=$(date +%s.%N)
	"$C" --addr "$url" -o json compact --all --wait --reason bench >"$TMP/run$n-compact.json" 2>"$TMP/run$n-compact.err" ||
		die "compact --all --wait failed: $(tail -5 "$TMP/run$n-compact.err")"
	t1=$(date +%s.%N)
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

nproc=$(nproc 2>/dev/null || echo "?")
echo
echo "compact --all throughput: $COLLECTIONS collections x $RECORDS records, PostgreSQL + VersityGW, $nproc cores shared by everything${SERVE_FLAGS:+, serve $SERVE_FLAGS}"
printf '%-8s  %7s  %7s  %9s  %s\n' replicas records seconds records/s "jobs per node"
for r in "${results[@]}"; do echo "$r"; done
