#!/usr/bin/env bash
# The project's test command (README, Quick start; .ci/run calls it). It
# installs what is missing (Debian's Chromium and promtool when run as root;
# the Go tools pinned in tools/go.mod; DuckDB and axe-core from npm into
# tools/duckdb and tools/axe when node is present), then checks, in order:
#   generated code is fresh (scripts/generate.sh leaves `git status` clean),
#   buf lint, buf format, buf breaking against the previous commit,
#   gofmt, go vet (run in the background from the start, checked before
#   the regeneration), go test -race
#   -vet=off ./... (with the headless-browser test, and
#   the catalog suite against a local PostgreSQL when one answers), every
#   Fuzz target for FUZZ_TIME (default 10s) on top of its seed corpus,
#   promtool check/test of the alert rules, the end-to-end script test on
#   SQLite + files and on PostgreSQL + S3 (VersityGW), the deploy manifests
#   (kubeconform).
# It ends with one line: "ci: N passed, M failed, K skipped" (tests and
# end-to-end checks; a failed non-test step counts as a failure).
#
# Environment: FUZZ_TIME (a go test -fuzztime value, default 10s) is how long
# each fuzz target runs, FUZZ_MINIMIZE_TIME (default 5s) how long one new
# input may be minimized; GO_TEST_TIMEOUT (default 30m) is the -timeout of
# each package's tests; CI=true makes a missing browser or promtool a failure instead
# of a skip; SKIP_INSTALL=1 installs nothing.
#
# What the machine needs (a fresh clone, the Go toolchain of go.mod):
#   - root, for apt-get (chromium, promtool from prometheus, python3-yaml);
#     as another user these are used when present and skipped otherwise
#     (failures under CI=true);
#   - the Go module proxy (the pinned tools, built once into .cache/bin);
#   - node and npm for DuckDB (tools/duckdb; its tests skip without);
#   - python3, curl and psql (the end-to-end script);
#   - PostgreSQL 13 or later on 127.0.0.1:5432 accepting the role postgres
#     with trust authentication, with a database "test"
#     (COMPACTOR_TEST_POSTGRES_DSN and E2E_POSTGRES_URL name another). The
#     run creates a random schema per catalog test in it, and databases
#     compactor_e2e_<time>_<random> (scripts/e2e.sh) and
#     compactor_replicas_<random> (internal/e2e), each dropped WITH (FORCE)
#     at its end; random names, so two runs on one server never collide.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
export BIN="$root/.cache/bin"
mkdir -p "$BIN" .cache
export PATH="$BIN:$PATH"

passed=0 failed=0 failures=()
step() { # step NAME COMMAND...: runs one check and counts it
	local name=$1; shift
	local t0=$SECONDS
	echo "==> $name"
	if "$@"; then
		passed=$((passed + 1))
		echo "--- ok: $name ($((SECONDS - t0)) s)"
	else
		failed=$((failed + 1))
		failures+=("$name")
		echo "--- FAILED: $name ($((SECONDS - t0)) s)"
	fi
}
tool() { go tool -modfile=tools/go.mod "$@"; }

install_debian() { # install_debian COMMAND PACKAGE: installs PACKAGE unless COMMAND is there
	command -v "$1" >/dev/null 2>&1 && return 0
	apt_install "$1" "$2"
}
install_python() { # install_python MODULE PACKAGE: installs PACKAGE unless python3 imports MODULE
	python3 -c "import $1" 2>/dev/null && return 0
	apt_install "python3 module $1" "$2"
}
apt_install() { # apt_install WHAT PACKAGE
	if [ "${SKIP_INSTALL:-}" = 1 ] || [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
		echo "note: $1 is missing and cannot be installed here (apt-get $2 as root)"
		return 0
	fi
	echo "installing $2 from Debian's packages"
	[ -n "$(find /var/lib/apt/lists -name '*Packages*' -mmin -1440 2>/dev/null | head -1)" ] || apt-get update -qq
	# Packages that ship a service must not try to start it here.
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$2" >/dev/null
	local rc=$?
	rm -f /usr/sbin/policy-rc.d
	return $rc
}

# go vet runs in the background from here, beside the installs and the tool
# builds (which wait on the network and the linker), and is collected as its
# own step before the generated code is regenerated. go test then runs
# with -vet=off: the full go vet has already checked every package, test
# files included.
vet_log=.cache/vet.log
go vet ./... >"$vet_log" 2>&1 &
vet_pid=$!

step "install chromium" install_debian chromium chromium
step "install promtool" install_debian promtool prometheus
step "install PyYAML" install_python yaml python3-yaml
# versitygw: the S3 server of the blob store tests and the PostgreSQL + S3
# end-to-end run (its first build takes several minutes); kubeconform: the
# Kubernetes manifests. Built once into .cache/bin: the build is skipped
# while tools/go.mod, tools/go.sum, the Go toolchain and the list are those
# of the last build (.cache/bin/.tools-stamp) and every binary is there.
tools=(github.com/bufbuild/buf/cmd/buf github.com/fullstorydev/grpcurl/cmd/grpcurl
	github.com/grpc-ecosystem/grpc-health-probe gotest.tools/gotestsum
	github.com/versity/versitygw/cmd/versitygw github.com/yannh/kubeconform/cmd/kubeconform)
build_tools() {
	local stamp want bin
	want=$( { cat tools/go.mod tools/go.sum; go version; printf '%s\n' "${tools[@]}"; } | sha256sum | cut -d' ' -f1)
	stamp=$BIN/.tools-stamp
	if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
		local missing=0
		for bin in buf grpcurl grpc-health-probe gotestsum versitygw kubeconform; do
			[ -x "$BIN/$bin" ] || missing=1
		done
		[ $missing = 0 ] && { echo "pinned tools in $BIN are up to date"; return 0; }
	fi
	go build -modfile=tools/go.mod -o "$BIN/" "${tools[@]}" && echo "$want" >"$stamp"
}
step "build pinned tools" build_tools

# npm packages pinned by their package-lock.json, each in a folder of its
# own under tools/: DuckDB (tools/duckdb) for the tests that read blocks with
# it through tools/duckdb/query.mjs, and axe-core (tools/axe) for the
# accessibility checks of the browser tests; the tests that use them skip
# when they are missing (fail under CI=true for axe-core, as for the
# browser). Installed only when node and npm are present, and only when
# node_modules is older than the lock file.
install_npm() { # install_npm DIR WHAT
	local dir=$1 what=$2
	if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		echo "note: node or npm is missing; $what ($dir) not installed, the tests that use it skip"
		return 0
	fi
	if [ -f "$dir/node_modules/.package-lock.json" ] && [ "$dir/node_modules/.package-lock.json" -nt "$dir/package-lock.json" ]; then
		echo "$what ($dir/node_modules) is up to date"
		return 0
	fi
	[ "${SKIP_INSTALL:-}" = 1 ] && { echo "note: SKIP_INSTALL=1: $what ($dir) not installed"; return 0; }
	npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >/dev/null
}
step "install DuckDB (npm)" install_npm tools/duckdb DuckDB
step "install axe-core (npm)" install_npm tools/axe axe-core

# go vet, started at the top, ends before scripts/generate.sh rewrites
# gen/ and web/ (vet must not read a file while it is rewritten).
collect_vet() {
	wait "$vet_pid"; local rc=$?
	cat "$vet_log"
	return $rc
}
step "go vet" collect_vet
fresh() {
	scripts/generate.sh || return 1
	local diff; diff=$(git status --porcelain -- gen proto web)
	[ -z "$diff" ] && return 0
	echo "generated files differ from the committed ones (run scripts/generate.sh and commit):"
	echo "$diff"; git --no-pager diff --stat -- gen proto web
	return 1
}
step "generated code is fresh" fresh
step "buf lint" buf lint
step "buf format" buf format -d --exit-code
breaking() {
	if ! git cat-file -e HEAD~1:buf.yaml 2>/dev/null; then
		echo "no previous commit with a buf module: nothing to compare"
		return 0
	fi
	buf breaking --against ".git#ref=HEAD~1"
}
step "buf breaking" breaking
gofmt_clean() {
	local out; out=$(git ls-files '*.go' | xargs gofmt -l)
	[ -z "$out" ] || { echo "gofmt would change:"; echo "$out"; return 1; }
}
step "gofmt" gofmt_clean
browser_required=0
[ "${CI:-}" = true ] && browser_required=1
# The catalog suite also runs against PostgreSQL when one answers locally
# (each test in a schema of its own); otherwise on SQLite alone.
if [ -z "${COMPACTOR_TEST_POSTGRES_DSN:-}" ]; then
	pg='postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
	if command -v psql >/dev/null && psql "$pg" -qtAc 'select 1' >/dev/null 2>&1; then
		export COMPACTOR_TEST_POSTGRES_DSN=$pg
		echo "note: the catalog tests run against PostgreSQL too ($pg)"
	fi
fi
# go test's default -timeout (10m per package binary) is a fixed deadline
# that a package's whole run exceeds on a busy 2-core machine under -race
# (internal/compaction took over 10 min in one such run): GO_TEST_TIMEOUT
# (default 30m) replaces it. Tests wait for events; this bound only turns a
# hang into a failure with every goroutine's stack.
step "go test -race" env COMPACTOR_REQUIRE_BROWSER=$browser_required \
	gotestsum --format pkgname-and-test-fails --jsonfile .cache/test.json -- -race -vet=off -count=1 -timeout="${GO_TEST_TIMEOUT:-30m}" ./...
# Fuzzing: every Fuzz target of the module runs for FUZZ_TIME (default 10s)
# on top of its seed corpus (f.Add and testdata/fuzz/<Name>/), one target at
# a time (-fuzz takes one package and one target). Targets are discovered,
# not listed here: the Fuzz functions that test files declare (read from the
# source: `go test -list` would build every such package's test binary once
# more just to list them). A failure names the target; the failing input is
# written under the package's testdata/fuzz/<Name>/ (commit it as a
# regression seed once fixed).
# fuzz_one DIR NAME FUZZTIME LOG: one target. Go 1.26's fuzzing coordinator
# can report a bare "context deadline exceeded" as the -fuzztime deadline
# passes while a worker is still running an input (golang/go#75804, fixed in
# Go 1.27): no input failed and none is written. Such a run is tried once
# more and said so; a failure that wrote an input, or any other failure, is
# final.
fuzz_one() {
	local dir=$1 name=$2 fuzztime=$3 log=$4 try
	for try in 1 2; do
		if go test -vet=off -run='^$' -fuzz="^$name\$" -fuzztime="$fuzztime" -fuzzminimizetime="${FUZZ_MINIMIZE_TIME:-5s}" "./$dir" >"$log" 2>&1; then
			return 0
		fi
		if [ "$try" -eq 1 ] && grep -qx '    context deadline exceeded' "$log" && ! grep -q 'Failing input written to' "$log"; then
			echo "fuzz: $name stopped with the coordinator's deadline race and no failing input (golang/go#75804): once more"
			continue
		fi
		return 1
	done
}
fuzz_all() {
	local fuzztime=${FUZZ_TIME:-10s} ran=0 bad=() dirs dir name log=.cache/fuzz.log
	dirs=$(git ls-files -co --exclude-standard -- '*_test.go' | xargs -r grep -l '^func Fuzz' | xargs -r -n1 dirname | sort -u)
	for dir in $dirs; do
		for name in $(sed -En 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/p' "$dir"/*_test.go | sort -u); do
			ran=$((ran + 1))
			echo "fuzz ./$dir $name for $fuzztime"
			if ! fuzz_one "$dir" "$name" "$fuzztime" "$log"; then
				cat "$log"
				echo "FAILED: fuzz target $name in ./$dir"
				bad+=("$name (./$dir)")
			fi
		done
	done
	echo "fuzz: $ran targets ran for $fuzztime each, ${#bad[@]} failed${bad:+: ${bad[*]}}"
	[ "${#bad[@]}" -eq 0 ]
}
step "fuzz targets" fuzz_all
promtool_checks() {
	if ! command -v promtool >/dev/null; then
		[ "${CI:-}" = true ] && { echo "promtool is missing"; return 1; }
		echo "note: promtool missing; alert rules not checked"; return 0
	fi
	promtool check rules deploy/prometheus/alerts.yml && promtool test rules deploy/prometheus/alerts_test.yml
}
step "alert rules (promtool)" promtool_checks
e2e() { scripts/e2e.sh 2>&1 | tee .cache/e2e.log; return "${PIPESTATUS[0]}"; }
rm -f .cache/e2e.log .cache/e2e-postgres-s3.log
step "end-to-end script test" e2e
# The same checks on the shared setup: a fresh PostgreSQL database (dropped at
# the end) and a VersityGW bucket. Required under CI=true.
e2e_postgres_s3() {
	local pg=${E2E_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
	if ! command -v psql >/dev/null || ! psql "$pg" -qtAc 'select 1' >/dev/null 2>&1; then
		[ "${CI:-}" = true ] && { echo "PostgreSQL does not answer at $pg"; return 1; }
		echo "note: PostgreSQL does not answer at $pg; end-to-end run on PostgreSQL + S3 skipped"; return 0
	fi
	E2E_STORAGE=postgres-s3 scripts/e2e.sh 2>&1 | tee .cache/e2e-postgres-s3.log; return "${PIPESTATUS[0]}"
}
step "end-to-end script test (PostgreSQL + S3)" e2e_postgres_s3
# Kubernetes manifests against offline schemas (see the script), and the
# compose deployment's Prometheus configuration.
deploy_checks() {
	scripts/kubeconform.sh || return 1
	if command -v promtool >/dev/null; then
		local dir; dir=$(mktemp -d)
		cp deploy/compose/prometheus.yml deploy/prometheus/alerts.yml "$dir/"
		promtool check config "$dir/prometheus.yml"; local rc=$?
		rm -rf "$dir"; return $rc
	fi
}
step "deploy manifests (kubeconform)" deploy_checks

# The closing line counts tests: go tests (subtests included) and end-to-end
# checks; a failed step that is not a test (gofmt, lint...) counts as one
# failure too.
count() { grep -c "\"Action\":\"$1\",\"Package\":\"[^\"]*\",\"Test\"" .cache/test.json 2>/dev/null; }
go_pass=$(count pass) go_fail=$(count fail) go_skip=$(count skip)
# Each end-to-end run (SQLite, PostgreSQL + S3) closes with
# "e2e (STORAGE): N passed, M failed".
e2e_pass=0 e2e_fail=0
for log in .cache/e2e.log .cache/e2e-postgres-s3.log; do
	line=$(grep -Eo 'e2e \([a-z0-9-]+\): [0-9]+ passed, [0-9]+ failed' "$log" 2>/dev/null | tail -1)
	[ -n "$line" ] || continue
	e2e_pass=$((e2e_pass + $(echo "$line" | sed -En 's/.*: ([0-9]+) passed.*/\1/p')))
	e2e_fail=$((e2e_fail + $(echo "$line" | sed -En 's/.* ([0-9]+) failed/\1/p')))
done
other_fail=0
for f in "${failures[@]}"; do
	case $f in
	"go test -race") [ "${go_fail:-0}" -gt 0 ] || other_fail=$((other_fail + 1)) ;; # e.g. a build failure
	"end-to-end script test"*) [ "${e2e_fail:-0}" -gt 0 ] || other_fail=$((other_fail + 1)) ;;
	*) other_fail=$((other_fail + 1)) ;;
	esac
done
echo
echo "go tests: ${go_pass:-0} passed, ${go_fail:-0} failed, ${go_skip:-0} skipped; end-to-end checks: ${e2e_pass:-0} passed, ${e2e_fail:-0} failed"
echo "steps: $passed passed, $failed failed${failures:+ (${failures[*]})}"
echo "ci: $(( ${go_pass:-0} + ${e2e_pass:-0} )) passed, $(( ${go_fail:-0} + ${e2e_fail:-0} + other_fail )) failed, ${go_skip:-0} skipped"
[ "$failed" -eq 0 ]
