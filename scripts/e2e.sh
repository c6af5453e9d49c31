#!/usr/bin/env bash
# End-to-end test of the real binary with real clients.
#
# Builds bin/compactor, starts `compactor serve` on a free loopback port with a
# temporary data directory, and drives it over every protocol it serves:
# grpc.health.v1 (grpc-health-probe), gRPC reflection (grpcurl, buf curl),
# gRPC and gRPC-Web (buf curl), Connect JSON (curl). It loads the Debian sample
# (testdata/debian-*.jsonl.gz), compacts it, checks what reads return before
# and after, an error case, the metrics, and a clean SIGTERM shutdown.
#
# It runs on one of two storage setups, chosen by E2E_STORAGE:
#   sqlite       (default) the embedded catalog and blob store in the data dir;
#   postgres-s3  the shared setup: a fresh PostgreSQL database (created on the
#                server of E2E_POSTGRES_URL, dropped at the end) as --catalog
#                and a bucket on a VersityGW S3 server started by the script
#                (posix backend in the temporary directory) as --blob-url.
# On SQLite it also checks that a second serve on the same catalog is
# refused; on PostgreSQL, that a second replica serves beside the first.
#
# Usage (from anywhere; it runs from the repository root):
#   scripts/e2e.sh
#   E2E_STORAGE=postgres-s3 scripts/e2e.sh
# Environment:
#   BIN        directory of buf, grpcurl, grpc-health-probe and versitygw
#              (default .cache/bin); missing ones are built from tools/go.mod.
#   E2E_POSTGRES_URL  PostgreSQL server to create the database on (default
#              postgres://postgres@127.0.0.1:5432/test?sslmode=disable).
#   KEEP_TMP=1 keep the temporary directory (data, log, responses).
#   E2E_WAIT   seconds each wait for an event (server address, readiness,
#              jobs finished, exit after SIGTERM) may take before it fails
#              (default 300: a busy CI machine is slow, not broken).
# Needs: go, curl, python3; psql for postgres-s3. Uses promtool when it is on
# PATH.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
BIN=${BIN:-.cache/bin}
case $BIN in /*) ;; *) BIN=$ROOT/$BIN ;; esac

STORAGE=${E2E_STORAGE:-sqlite}
case $STORAGE in sqlite | postgres-s3) ;; *)
	echo "e2e: E2E_STORAGE=$STORAGE: want sqlite or postgres-s3" >&2
	exit 2
	;;
esac
PG_ADMIN=${E2E_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}

passed=0
failed=0
server_pid=
vgw_pid=
pg_db=
TMP=$(mktemp -d "${TMPDIR:-/tmp}/compactor-e2e.XXXXXX")
LOG=$TMP/server.log
started=$SECONDS
WAIT=${E2E_WAIT:-300}

pass() {
	passed=$((passed + 1))
	printf 'ok   %2d  %s\n' "$passed" "$1"
}

# fail prints what was checked and why it failed, then exits; the EXIT trap
# shows the server log and the summary.
fail() {
	failed=$((failed + 1))
	printf 'FAIL     %s\n' "$1" >&2
	shift
	for detail in "$@"; do
		printf '         %s\n' "$detail" >&2
	done
	exit 1
}

cleanup() {
	local rc=$?
	if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
		kill -TERM "$server_pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$server_pid" 2>/dev/null || true
	fi
	if [[ -n $vgw_pid ]]; then
		kill -TERM "$vgw_pid" 2>/dev/null || true
		wait "$vgw_pid" 2>/dev/null || true
	fi
	if [[ -n $pg_db ]]; then
		psql "$PG_ADMIN" -qtAc "DROP DATABASE IF EXISTS $pg_db WITH (FORCE)" >/dev/null ||
			echo "e2e: could not drop database $pg_db" >&2
	fi
	if [[ $rc -ne 0 ]]; then
		[[ $failed -eq 0 ]] && failed=1 # an unexpected command failure (set -e)
		if [[ -s $LOG ]]; then
			echo "--- server log ($LOG), last 60 lines:" >&2
			tail -n 60 "$LOG" >&2
			echo "---" >&2
		fi
	fi
	if [[ ${KEEP_TMP:-} == 1 || $rc -ne 0 ]]; then
		echo "e2e: files kept in $TMP" >&2
	else
		rm -rf "$TMP"
	fi
	echo "e2e ($STORAGE): $passed passed, $failed failed ($((SECONDS - started)) s)"
	exit "$rc"
}
trap cleanup EXIT
trap 'echo "e2e: unexpected failure (status $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
trap 'exit 130' INT TERM

need() {
	command -v "$1" >/dev/null || fail "tool $1 is on PATH" "install it: $2"
}
need go "https://go.dev/dl/"
need curl "apt-get install curl"
need python3 "apt-get install python3"
[[ $STORAGE == postgres-s3 ]] && need psql "apt-get install postgresql-client"

# --- tools and binary ---------------------------------------------------------

declare -A tool_pkg=(
	[buf]=github.com/bufbuild/buf/cmd/buf
	[grpcurl]=github.com/fullstorydev/grpcurl/cmd/grpcurl
	[grpc-health-probe]=github.com/grpc-ecosystem/grpc-health-probe
	[versitygw]=github.com/versity/versitygw/cmd/versitygw
)
tools=(buf grpcurl grpc-health-probe)
[[ $STORAGE == postgres-s3 ]] && tools+=(versitygw)
missing=()
for t in "${tools[@]}"; do
	[[ -x $BIN/$t ]] || missing+=("${tool_pkg[$t]}")
done
if ((${#missing[@]})); then
	echo "e2e: building ${missing[*]} into $BIN (the first builds of buf and versitygw take minutes)"
	mkdir -p "$BIN"
	go build -modfile=tools/go.mod -o "$BIN/" "${missing[@]}"
fi
BUF=$BIN/buf
GRPCURL=$BIN/grpcurl
PROBE=$BIN/grpc-health-probe

go build -o bin/compactor ./cmd/compactor
pass "go build -o bin/compactor ./cmd/compactor"

# --- storage ------------------------------------------------------------------

# storage_args are the serve flags of the setup; blob_dir is the directory
# where the blobs land on disk (the data dir, or VersityGW's bucket dir).
storage_args=(--data-dir "$TMP/data")
blob_dir=$TMP/data/blobs
catalog_desc="SQLite $TMP/data/catalog.db"
if [[ $STORAGE == postgres-s3 ]]; then
	psql "$PG_ADMIN" -qtAc 'SELECT 1' >/dev/null 2>&1 ||
		fail "PostgreSQL answers at $PG_ADMIN" "start it, or set E2E_POSTGRES_URL"
	# Unique per run, also across machines and containers sharing one
	# PostgreSQL (a PID and a second can repeat): 64 random bits.
	pg_db=compactor_e2e_$(date +%s)_$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
	psql "$PG_ADMIN" -qtAc "CREATE DATABASE $pg_db" >/dev/null || fail "CREATE DATABASE $pg_db"
	catalog_url=$(python3 -c '
import sys, urllib.parse as u
p = u.urlsplit(sys.argv[1])
print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$PG_ADMIN" "$pg_db")

	# VersityGW, posix backend: a bucket is a directory under its root.
	mkdir -p "$TMP/s3/compactor-e2e"
	export AWS_ACCESS_KEY_ID=compactor-e2e AWS_SECRET_ACCESS_KEY=compactor-e2e-secret AWS_EC2_METADATA_DISABLED=true
	vgw_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	"$BIN/versitygw" --port "127.0.0.1:$vgw_port" --access "$AWS_ACCESS_KEY_ID" --secret "$AWS_SECRET_ACCESS_KEY" \
		posix "$TMP/s3" >"$TMP/versitygw.log" 2>&1 &
	vgw_pid=$!
	for _ in $(seq 300); do
		kill -0 "$vgw_pid" 2>/dev/null || fail "versitygw starts" "$(cat "$TMP/versitygw.log")"
		curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$vgw_port/" && break
		sleep 0.1
	done
	curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$vgw_port/" || fail "versitygw answers within 30 s"

	storage_args+=(--catalog "$catalog_url"
		--blob-url "s3://compactor-e2e?endpoint=http://127.0.0.1:$vgw_port&use_path_style=true&region=us-east-1")
	blob_dir=$TMP/s3/compactor-e2e
	catalog_desc="PostgreSQL database $pg_db"
	pass "storage: PostgreSQL database $pg_db, VersityGW bucket compactor-e2e on 127.0.0.1:$vgw_port"
fi

# --- start the server ---------------------------------------------------------

# Port 0: the kernel picks a free port, the server logs the one it bound.
# A long scheduler interval keeps the scheduler out of the way: the only
# compactions are the ones this script asks for.
: >"$LOG"
bin/compactor serve \
	--listen 127.0.0.1:0 \
	"${storage_args[@]}" \
	--log-format text \
	--schedule-interval 1h \
	--node e2e-first \
	>"$LOG" 2>&1 &
server_pid=$!

addr=
deadline=$((SECONDS + WAIT))
while ((SECONDS < deadline)); do
	kill -0 "$server_pid" 2>/dev/null || fail "server starts" "the process exited; see the log below"
	addr=$(sed -n 's/.*msg=serving addr=\([0-9.]*:[0-9]*\).*/\1/p' "$LOG" | head -n 1) || true
	[[ -n $addr ]] && break
	sleep 0.1
done
[[ -n $addr ]] || fail "server logs its address within $WAIT s (E2E_WAIT)"
URL=http://$addr

ready=
deadline=$((SECONDS + WAIT))
while ((SECONDS < deadline)); do
	if [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$URL/readyz") == 200 ]]; then
		ready=1
		break
	fi
	kill -0 "$server_pid" 2>/dev/null || fail "server becomes ready" "the process exited"
	sleep 0.1
done
[[ -n $ready ]] || fail "GET /readyz answers 200 within $WAIT s (E2E_WAIT)"
pass "server on $addr is ready (GET /readyz 200)"

body=$(curl -sS --max-time 5 "$URL/healthz")
[[ $body == ok ]] || fail "GET /healthz says ok" "got: $body"
pass "GET /healthz: ok"

if [[ $STORAGE == sqlite ]]; then
	# A second serve on the same SQLite file (another port) must be refused
	# at start, naming the first, and leave the first serving.
	second_rc=0
	second_out=$(bin/compactor serve --listen 127.0.0.1:0 "${storage_args[@]}" --log-format text \
		--node e2e-second 2>&1) || second_rc=$?
	[[ $second_rc != 0 && $second_out == *"is in use by another compactor serve"* && $second_out == *"node e2e-first"* ]] ||
		fail "a second serve on the same catalog exits non-zero naming the first" "exit $second_rc: $second_out"
	[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$URL/readyz") == 200 ]] ||
		fail "the first serve is still ready after the refusal"
	pass "a second serve on the same catalog ($catalog_desc) is refused (exit $second_rc), naming node e2e-first"
else
	# Replicas share a PostgreSQL catalog: a second serve starts, and the
	# first lists it among the nodes; then it stops cleanly.
	bin/compactor serve --listen 127.0.0.1:0 "${storage_args[@]}" --log-format text \
		--schedule-interval 1h --node e2e-second >"$TMP/second.log" 2>&1 &
	second_pid=$!
	seen=
	deadline=$((SECONDS + WAIT))
	while ((SECONDS < deadline)); do
		kill -0 "$second_pid" 2>/dev/null || fail "a second replica on $catalog_desc starts" "$(cat "$TMP/second.log")"
		if bin/compactor --addr "$URL" -o json nodes 2>/dev/null | python3 -c '
import json, sys
nodes = {n["name"]: n for n in json.load(sys.stdin)}
sys.exit(0 if nodes.get("e2e-second", {}).get("alive") and nodes.get("e2e-first", {}).get("self") else 1)'; then
			seen=1
			break
		fi
		sleep 0.2
	done
	[[ -n $seen ]] || fail "the first replica lists e2e-second as alive within $WAIT s (E2E_WAIT)" "$(cat "$TMP/second.log")"
	kill -TERM "$second_pid"
	second_rc=0
	wait "$second_pid" || second_rc=$?
	[[ $second_rc == 0 ]] || fail "the second replica stops cleanly on SIGTERM" "exit $second_rc: $(tail -20 "$TMP/second.log")"
	pass "a second replica on $catalog_desc serves beside the first, which lists it in compactor nodes; it stops cleanly"
fi

# --- grpc.health.v1 and reflection --------------------------------------------

out=$("$PROBE" -addr "$addr" 2>&1) || fail "grpc-health-probe -addr $addr" "$out"
[[ $out == *SERVING* ]] || fail "grpc-health-probe reports SERVING" "got: $out"
pass "grpc-health-probe: $out"

out=$("$GRPCURL" -plaintext "$addr" list 2>&1) || fail "grpcurl -plaintext $addr list" "$out"
for svc in compactor.v1.CompactionService compactor.v1.CollectionService compactor.v1.LogService grpc.health.v1.Health; do
	grep -qx "$svc" <<<"$out" || fail "grpcurl list shows $svc" "got:" "$out"
done
pass "grpcurl list (reflection): the three compactor.v1 services and grpc.health.v1.Health"

# The health service's schema comes from reflection too.
out=$("$GRPCURL" -plaintext -d '{}' "$addr" grpc.health.v1.Health/Check 2>&1) ||
	fail "grpcurl grpc.health.v1.Health/Check" "$out"
[[ $out == *'"status": "SERVING"'* ]] || fail "grpcurl Health/Check says SERVING" "got: $out"
pass "grpcurl grpc.health.v1.Health/Check (schema by reflection): SERVING"

out=$("$GRPCURL" -plaintext "$addr" describe compactor.v1.CompactionService.Compact 2>&1) ||
	fail "grpcurl describe compactor.v1.CompactionService.Compact" "$out"
[[ $out == *"CompactRequest"* && $out == *"CompactResponse"* ]] ||
	fail "grpcurl describe shows Compact's request and response" "got: $out"
pass "grpcurl describe compactor.v1.CompactionService.Compact"

# --- buf curl over gRPC and gRPC-Web (schema from reflection) -----------------

out=$("$BUF" curl --protocol grpc --http2-prior-knowledge --reflect \
	--data '{"name": "debian-bookworm", "dimension": 64}' \
	"$URL/compactor.v1.CollectionService/CreateCollection" 2>&1) ||
	fail "buf curl --protocol grpc CreateCollection" "$out"
coll=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["collection"]["id"])' <<<"$out" 2>/dev/null) ||
	fail "CreateCollection returns the collection's id" "got: $out"
[[ $coll =~ ^[0-9a-f-]{36}$ ]] || fail "CreateCollection returns a UUID" "got: $coll"
pass "buf curl --protocol grpc: CreateCollection debian-bookworm -> $coll"

out=$("$BUF" curl --protocol grpcweb --reflect --data '{}' \
	"$URL/compactor.v1.CollectionService/ListCollections" 2>&1) ||
	fail "buf curl --protocol grpcweb ListCollections" "$out"
python3 -c '
import json, sys
colls = json.load(sys.stdin)["collections"]
assert [(c["id"], c["name"]) for c in colls] == [(sys.argv[1], "debian-bookworm")], colls
' "$coll" <<<"$out" || fail "ListCollections (gRPC-Web) lists exactly the new collection" "got: $out"
pass "buf curl --protocol grpcweb: ListCollections lists debian-bookworm"

# --- push the Debian sample over Connect JSON ---------------------------------

# connect_call PROCEDURE JSON_FILE OUT_FILE: a Connect unary call with a JSON
# body; prints the HTTP status (000 when there was no answer at all).
connect_call() {
	curl -sS --max-time 60 -o "$3" -w '%{http_code}' \
		-H 'Content-Type: application/json' --data-binary "@$2" \
		"$URL/$1" || true
}

# Convert JSONL to PushLogs requests of 1,000 records: op "add" -> OPERATION_ADD.
python3 - "$coll" "$TMP" testdata/debian-base.jsonl.gz testdata/debian-updates.jsonl.gz <<'EOF'
import gzip, json, sys
coll, tmp, files = sys.argv[1], sys.argv[2], sys.argv[3:]
for name in files:
    stem = name.split("/")[-1].split(".")[0]
    with gzip.open(name, "rt") as f:
        lines = [json.loads(l) for l in f if l.strip()]
    for n, i in enumerate(range(0, len(lines), 1000)):
        records = []
        for r in lines[i:i + 1000]:
            rec = {"op": "OPERATION_" + r["op"].upper(), "id": r["id"], "embedding": r["embedding"]}
            if "document" in r:
                rec["document"] = r["document"]
            if "metadata" in r:
                rec["metadata"] = r["metadata"]
            records.append(rec)
        with open(f"{tmp}/push-{stem}-{n:02d}.json", "w") as out:
            json.dump({"collectionId": coll, "records": records}, out)
EOF

# push_file FILE: one PushLogs call; adds the records appended to $total.
push_file() {
	local code n
	code=$(connect_call compactor.v1.LogService/PushLogs "$1" "$TMP/push.out")
	[[ $code == 200 ]] || fail "PushLogs $(basename "$1") answers 200" "got HTTP $code: $(head -c 500 "$TMP/push.out")"
	n=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["count"])' "$TMP/push.out") ||
		fail "PushLogs answers a count" "got: $(head -c 500 "$TMP/push.out")"
	total=$((total + n))
}

# push_batches STEM WANT WHAT: PushLogs of every batch file of the sample
# STEM, in order; fails unless they append WANT records in all (WHAT names
# them).
push_batches() {
	local f
	total=0
	for f in "$TMP"/push-"$1"-*.json; do
		push_file "$f"
	done
	[[ $total == "$2" ]] || fail "PushLogs appends the $3" "appended: $total"
}

push_batches debian-base 5000 "5,000 base records"
pass "curl Connect JSON: PushLogs 5,000 ADD records in batches of 1,000"

push_batches debian-updates 217 "217 update records"
pass "curl Connect JSON: PushLogs 217 UPSERT records"

# --- reads: page through GetRecords -------------------------------------------

# read_all OUT: every record, paged 1,000 at a time, as one JSON list in OUT;
# prints the number of pages.
read_all() {
	python3 - "$URL" "$coll" "$1" <<'EOF'
import json, sys, urllib.request
url, coll, out = sys.argv[1:]
records, token, pages = [], "", 0
while True:
    body = json.dumps({"collectionId": coll, "pageSize": 1000, "pageToken": token}).encode()
    req = urllib.request.Request(url + "/compactor.v1.CollectionService/GetRecords", body,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        page = json.load(r)
    pages += 1
    records += page.get("records", [])
    token = page.get("nextPageToken", "")
    if not token:
        break
    if pages > 100:
        sys.exit("more than 100 pages: the page token does not advance")
json.dump({"records": records, "segmentVersion": page.get("segmentVersion", "0")}, open(out, "w"))
print(pages)
EOF
}

pages=$(read_all "$TMP/before.json") || fail "GetRecords pages through the collection before compaction"
count=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["records"]))' "$TMP/before.json")
[[ $count == 5000 ]] || fail "GetRecords returns 5,000 records before compaction" "got $count"
pass "GetRecords before compaction: 5,000 records in $pages pages (log tail applied on read)"

# --- compaction ---------------------------------------------------------------

echo '{}' >"$TMP/compact-none.json"
code=$(connect_call compactor.v1.CompactionService/Compact "$TMP/compact-none.json" "$TMP/compact-none.out")
errcode=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("code",""))' "$TMP/compact-none.out" 2>/dev/null || true)
[[ $code == 400 && $errcode == invalid_argument ]] ||
	fail "Compact with neither ids nor all: HTTP 400, code invalid_argument" "got HTTP $code: $(cat "$TMP/compact-none.out")"
pass "curl Compact {} -> HTTP 400 invalid_argument"

echo '{"all": true, "reason": "e2e"}' >"$TMP/compact.json"
code=$(connect_call compactor.v1.CompactionService/Compact "$TMP/compact.json" "$TMP/compact.out")
[[ $code == 200 ]] || fail "Compact all=true answers 200" "got HTTP $code: $(cat "$TMP/compact.out")"
job=$(python3 - "$coll" "$TMP/compact.out" <<'EOF'
import json, sys
res = json.load(open(sys.argv[2]))["jobs"]
assert len(res) == 1 and res[0]["job"]["collectionId"] == sys.argv[1], res
assert res[0]["job"]["trigger"] == "TRIGGER_ONE_OFF" and res[0]["created"], res
print(res[0]["job"]["id"])
EOF
) || fail "Compact all=true returns one new one-off job for the collection" "got: $(cat "$TMP/compact.out")"
pass "curl Compact all=true -> job $job"

# Wait (bounded) until no job is QUEUED or RUNNING, then every job of the
# collection (the one asked for and any continuation) must be SUCCEEDED.
echo "{\"jobId\": \"$job\"}" >"$TMP/get-job.json"
echo "{\"collectionId\": \"$coll\", \"pageSize\": 100}" >"$TMP/list-jobs.json"
state=
deadline=$((SECONDS + WAIT))
while ((SECONDS < deadline)); do
	code=$(connect_call compactor.v1.CompactionService/ListCompactions "$TMP/list-jobs.json" "$TMP/jobs.out")
	[[ $code == 200 ]] || fail "ListCompactions answers 200" "got HTTP $code: $(cat "$TMP/jobs.out")"
	state=$(python3 -c '
import json, sys
jobs = json.load(open(sys.argv[1])).get("jobs", [])
states = sorted({j["state"] for j in jobs})
print("active" if {"JOB_STATE_QUEUED", "JOB_STATE_RUNNING"} & set(states) else ",".join(states))
' "$TMP/jobs.out")
	[[ $state != active ]] && break
	sleep 0.1
done
[[ $state == JOB_STATE_SUCCEEDED ]] || fail "every compaction job ends SUCCEEDED within $WAIT s (E2E_WAIT)" "states: $state" "$(cat "$TMP/jobs.out")"
code=$(connect_call compactor.v1.CompactionService/GetCompaction "$TMP/get-job.json" "$TMP/job.out")
python3 - "$TMP/job.out" <<'EOF' || fail "GetCompaction shows the job SUCCEEDED with the whole log read" "got HTTP $code: $(cat "$TMP/job.out")"
import json, sys
j = json.load(open(sys.argv[1]))["job"]
assert j["state"] == "JOB_STATE_SUCCEEDED", j
assert int(j.get("recordsRead", 0)) == 5217, j
assert j.get("reason") == "e2e", j
EOF
pass "ListCompactions / GetCompaction: job SUCCEEDED, 5,217 log records read"

out=$("$BUF" curl --protocol grpc --http2-prior-knowledge --reflect --data "{\"id\": \"$coll\"}" \
	"$URL/compactor.v1.CollectionService/GetCollection" 2>&1) ||
	fail "buf curl --protocol grpc GetCollection" "$out"
python3 <<<"$out" -c '
import json, sys
c = json.load(sys.stdin)["collection"]
assert int(c.get("segmentVersion", 0)) >= 1, c
assert int(c.get("backlog", 0)) == 0, c
assert int(c.get("recordCount", 0)) == 5000, c
' || fail "GetCollection after compaction: a segment version, no backlog, 5,000 records" "got: $out"
pass "buf curl --protocol grpc: GetCollection shows version >= 1, backlog 0, 5,000 records"

pages=$(read_all "$TMP/after.json") || fail "GetRecords pages through the collection after compaction"
python3 - "$TMP/before.json" "$TMP/after.json" <<'EOF' || fail "GetRecords after compaction: 5,000 records, the same as before"
import json, sys
before, after = (json.load(open(p)) for p in sys.argv[1:])
ids = [r["id"] for r in after["records"]]
assert len(ids) == 5000, len(ids)
assert len(set(ids)) == 5000, "duplicate ids across pages"
assert ids == sorted(ids), "records are not in id order"
assert int(after["segmentVersion"]) >= 1, after["segmentVersion"]
assert before["records"] == after["records"], "a read changed with compaction"
EOF
pass "GetRecords after compaction: 5,000 distinct records in id order over $pages pages, identical to before"

# The updated packages: each carries the metadata of its last update line
# (README of the data: 216 ids, 104 with a version different from the base),
# the others keep the base version. Reported: the first package in id order
# whose version changed, and ca-certificates, updated twice, whose last update
# went back to the base version.
out=$(python3 - testdata/debian-base.jsonl.gz testdata/debian-updates.jsonl.gz "$TMP/after.json" <<'EOF'
import gzip, json, sys
def load(p):
    with gzip.open(p, "rt") as f:
        return [json.loads(l) for l in f if l.strip()]
base = {r["id"]: r["metadata"] for r in load(sys.argv[1])}
last = {}
for r in load(sys.argv[2]):
    last[r["id"]] = r["metadata"]  # the last line of an id wins
got = {r["id"]: r.get("metadata", {}) for r in json.load(open(sys.argv[3]))["records"]}
assert len(last) == 216, len(last)
changed = sorted(i for i in last if last[i]["version"] != base[i]["version"])
assert len(changed) == 104, f"{len(changed)} updated packages change version, README says 104"
for i, meta in last.items():
    for k, v in meta.items():
        assert got[i].get(k) == v, f"{i}: metadata {k} = {got[i].get(k)!r}, last update says {v!r}"
for i in base.keys() - last.keys():
    assert got[i]["version"] == base[i]["version"], f"{i}: version {got[i]['version']}, base {base[i]['version']}"
pick = changed[0]
print(f"{pick} {base[pick]['version']} -> {got[pick]['version']}; "
      f"ca-certificates {got['ca-certificates']['version']}")
EOF
) || fail "the 216 updated packages carry the metadata of their last update, the others the base version" "$out"
pass "216 updated packages carry their last update's metadata (e.g. $out), 4,784 keep the base version"

# Where the data went: the blocks and manifest in the blob store's directory
# (VersityGW's bucket for postgres-s3), the collection in the catalog.
nblocks=$(find "$blob_dir/collections/$coll/blocks" -name '*.parquet' 2>/dev/null | wc -l)
nmanifests=$(find "$blob_dir/collections/$coll/manifests" -name '*.json' 2>/dev/null | wc -l)
((nblocks > 0 && nmanifests > 0)) ||
	fail "the segment's blocks and manifest are in $blob_dir" "blocks: $nblocks, manifests: $nmanifests"
if [[ $STORAGE == postgres-s3 ]]; then
	row=$(psql "$catalog_url" -qtAc "SELECT name, segment_version > 0 FROM collections WHERE id = '$coll'") ||
		fail "read the collection from PostgreSQL"
	[[ $row == "debian-bookworm|t" ]] || fail "PostgreSQL holds the compacted collection" "got: $row"
fi
pass "storage: $nblocks Parquet blocks and $nmanifests manifest(s) in the blob store, the collection in $catalog_desc"

# --- metrics ------------------------------------------------------------------

curl -sS --max-time 10 "$URL/metrics" >"$TMP/metrics.txt" || fail "GET /metrics"
metric() { # SERIES (exact text up to the value) -> value
	awk -v s="$1" 'index($0, s" ") == 1 { print $NF }' "$TMP/metrics.txt"
}
for want in \
	'compactor_jobs_total{outcome="succeeded",trigger="one_off"} 1' \
	'compactor_jobs_total{outcome="failed",trigger="scheduled"} 0' \
	'compactor_records_compacted_total 5217' \
	'compactor_log_records_read_total 5217' \
	'compactor_scheduler_interval_seconds 3600' \
	'compactor_rpc_requests_total{code="invalid_argument",procedure="/compactor.v1.CompactionService/Compact"} 1' \
	'compactor_rpc_requests_total{code="ok",procedure="/compactor.v1.LogService/PushLogs"} 6'; do
	series=${want% *}
	got=$(metric "$series")
	[[ $got == "${want##* }" ]] || fail "/metrics has $want" "got: ${got:-<absent>}"
done
ts=$(metric compactor_last_successful_compaction_timestamp_seconds)
python3 -c 'import sys,time; t=float(sys.argv[1]); sys.exit(0 if time.time()-300 < t <= time.time()+1 else 1)' "$ts" ||
	fail "compactor_last_successful_compaction_timestamp_seconds is a recent time" "got: $ts"
pass "/metrics: jobs, records compacted, last success, scheduler interval and RPC codes match what was done"

if command -v promtool >/dev/null; then
	out=$(promtool check metrics <"$TMP/metrics.txt" 2>&1) || fail "promtool check metrics on /metrics" "$out"
	pass "promtool check metrics: no problems"
else
	echo "e2e: promtool not on PATH: skipping promtool check metrics"
fi

# --- versions and rollback -----------------------------------------------------

# A second compaction (three deletes), then a rollback to the version before
# it: the view keeps the deletes (read from the log again), the rollback's
# version reads as the old one, and the next compaction makes the deletes a
# version again.
cli() { bin/compactor --addr "$URL" "$@"; }
out=$(printf '%s\n' '{"op": "delete", "id": "0ad"}' '{"op": "delete", "id": "aide"}' '{"op": "delete", "id": "ziptime"}' |
	cli push --collection "$coll" - 2>&1) || fail "compactor push of 3 deletes" "$out"
out=$(cli compact "$coll" --wait 2>&1) || fail "compactor compact --wait after the deletes" "$out"
read_all "$TMP/v2.json" >/dev/null || fail "GetRecords after the second compaction"
v2=$(cli -o json versions "$coll" | python3 -c 'import json,sys; print(json.load(sys.stdin)["current_version"])') ||
	fail "compactor versions -o json"
v1=$((v2 - 1))
out=$(cli rollback "$coll" --to-version "$v1" --reason e2e --yes 2>&1) || fail "compactor rollback --to-version $v1" "$out"
[[ $out == *"backlog 3 records"* ]] || fail "the rollback leaves the 3 deletes to compact again" "$out"
read_all "$TMP/rolled.json" >/dev/null || fail "GetRecords after the rollback"
# The rollback's version is version v1's segment: it holds 0ad, which the
# view (with the deletes in its tail) does not.
rb=$((v2 + 1))
out=$(cli -o json get --collection "$coll" --version "$rb" 0ad 2>&1) || fail "compactor get --version $rb 0ad" "$out"
[[ $out == *'"id": "0ad"'* ]] || fail "version $rb (the rollback's) holds 0ad" "$out"
out=$(cli compact "$coll" --wait 2>&1) || fail "compactor compact --wait after the rollback" "$out"
read_all "$TMP/recompacted.json" >/dev/null || fail "GetRecords after the compaction that follows the rollback"
# GC after that compaction keeps 2 versions: the new one and the rollback's.
out=$(cli get --collection "$coll" --version "$v1" 0ad 2>&1) && fail "get --version $v1 after GC retired it" "$out"
[[ $out == *"no longer keeps version $v1: the oldest kept version is $rb"* ]] ||
	fail "get of a retired version names the oldest kept one" "$out"
python3 - "$TMP/v2.json" "$TMP/rolled.json" "$TMP/recompacted.json" <<'PYEOF' || fail "reads after a rollback equal the reads before it"
import json, sys
v2, rolled, again = ([r["id"] for r in json.load(open(p))["records"]] for p in sys.argv[1:])
assert len(v2) == 4997 and "0ad" not in v2, len(v2)
assert rolled == v2 and again == v2
PYEOF
pass "versions and rollback: after a rollback to version $v1 the view keeps the 3 deletes, get --version $rb reads version $v1's records, the next compaction makes the deletes a version again"

# --- shutdown -----------------------------------------------------------------

kill -TERM "$server_pid"
rc=0
deadline=$((SECONDS + WAIT))
while ((SECONDS < deadline)); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$server_pid" 2>/dev/null && fail "server exits within $WAIT s of SIGTERM (E2E_WAIT)"
wait "$server_pid" || rc=$?
server_pid=
[[ $rc == 0 ]] || fail "server exits 0 on SIGTERM" "exit status $rc"
pass "SIGTERM: server shuts down cleanly (exit 0)"
