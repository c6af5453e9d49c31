#!/usr/bin/env bash
# The project's test command (README "Quick start"; .ci/run calls it). It
# installs what is missing (Debian's Chromium and promtool when run as root;
# the Go tools pinned in tools/go.mod), then checks, in order:
#   generated code is fresh (scripts/generate.sh leaves `git status` clean),
#   buf lint, buf format, buf breaking against the previous commit,
#   gofmt, go vet, go test -race ./... (with the headless-browser test),
#   promtool check/test of the alert rules, the end-to-end script test.
# It ends with one line: "ci: N passed, M failed".
#
# Environment: CI=true makes a missing browser or promtool a failure instead
# of a skip; SKIP_INSTALL=1 installs nothing.
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

install_debian() { # install_debian COMMAND PACKAGE
	command -v "$1" >/dev/null 2>&1 && return 0
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

step "install chromium" install_debian chromium chromium
step "install promtool" install_debian promtool prometheus
step "build pinned tools" go build -modfile=tools/go.mod -o "$BIN/" \
	github.com/bufbuild/buf/cmd/buf github.com/fullstorydev/grpcurl/cmd/grpcurl \
	github.com/grpc-ecosystem/grpc-health-probe gotest.tools/gotestsum

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
step "go vet" go vet ./...
browser_required=0
[ "${CI:-}" = true ] && browser_required=1
step "go test -race" env COMPACTOR_REQUIRE_BROWSER=$browser_required \
	gotestsum --format pkgname-and-test-fails --jsonfile .cache/test.json -- -race -count=1 ./...
promtool_checks() {
	if ! command -v promtool >/dev/null; then
		[ "${CI:-}" = true ] && { echo "promtool is missing"; return 1; }
		echo "note: promtool missing; alert rules not checked"; return 0
	fi
	promtool check rules deploy/prometheus/alerts.yml && promtool test rules deploy/prometheus/alerts_test.yml
}
step "alert rules (promtool)" promtool_checks
step "end-to-end script test" scripts/e2e.sh

tests=$(grep -c '"Action":"pass","Package":"[^"]*","Test"' .cache/test.json 2>/dev/null || echo 0)
echo
echo "go tests passed: $tests"
if [ "$failed" -gt 0 ]; then
	printf 'failed step: %s\n' "${failures[@]}"
fi
echo "ci: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
