# Sourced by the benchmark scripts (scripts/bench.sh, scripts/bench-replicas.sh,
# scripts/bench/vindex-server.sh): starting `compactor serve` and waiting
# until it serves, stopping it, and the end of a run's working directory. The sourcing script
# defines note (print a message with its prefix to stderr) and die (note, then
# exit 1), and sources this file from the repository root:
#
#	source scripts/lib/bench-common.sh

# wait_serving LOG PID: waits, up to 120 s, until the server PID (started with
# --listen 127.0.0.1:0 --log-format text, logging to LOG) logs the address it
# serves at, and sets serving_addr to it (host:port). Dies when the server
# exits first or the time runs out, with the end of LOG.
serving_addr=
wait_serving() {
	local log=$1 pid=$2
	serving_addr=
	for _ in $(seq 1200); do
		kill -0 "$pid" 2>/dev/null || die "compactor serve exited at start: $(tail -5 "$log")"
		serving_addr=$(sed -n 's/.*msg=serving addr=\([0-9.]*:[0-9]*\).*/\1/p' "$log" | head -n 1)
		[[ -n $serving_addr ]] && return
		sleep 0.1
	done
	die "compactor serve did not log its address in 120 s: $(tail -5 "$log")"
}

# wait_healthy COMPACTOR URL LOG SECONDS: waits, up to SECONDS, until
# `COMPACTOR --addr URL healthcheck` passes. Dies after that, with the end of
# the server's LOG.
wait_healthy() {
	local c=$1 url=$2 log=$3 seconds=$4
	for _ in $(seq $((seconds * 10))); do
		"$c" --addr "$url" healthcheck >/dev/null 2>&1 && return
		sleep 0.1
	done
	die "compactor serve at $url is not healthy after $seconds s: $(tail -5 "$log")"
}

# start_serve COMPACTOR LOG SECONDS [SERVE FLAGS...]: starts `COMPACTOR serve
# --listen 127.0.0.1:0 --log-format text FLAGS` in the background, logging to
# LOG; sets server_pid to its process id at once and server_url to its
# http:// URL once it logs its address, then waits up to SECONDS until it is
# healthy. Dies as wait_serving and wait_healthy do; stop_server stops it.
server_pid=
server_url=
start_serve() {
	local c=$1 log=$2 seconds=$3
	shift 3
	"$c" serve --listen 127.0.0.1:0 --log-format text "$@" >"$log" 2>&1 &
	server_pid=$!
	wait_serving "$log" "$server_pid"
	server_url=http://$serving_addr
	wait_healthy "$c" "$server_url" "$log" "$seconds"
}

# stop_server: stops the server start_serve started last (stop_pid), if it
# still runs. Never fails.
stop_server() {
	[[ -n $server_pid ]] || return 0
	stop_pid "$server_pid"
	server_pid=
}

# stop_pid PID: sends the process SIGTERM, waits up to 60 s for it to exit,
# then sends SIGKILL, and reaps it. Never fails.
stop_pid() {
	kill -TERM "$1" 2>/dev/null || true
	for _ in $(seq 600); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

# end_tmp RC DIR: the end of a run that exits with status RC: keeps its
# working directory DIR (and says so) when the run failed or KEEP_TMP=1,
# else removes it.
end_tmp() {
	if [[ $1 -ne 0 ]]; then
		note "failed (status $1); files kept in $2"
	elif [[ ${KEEP_TMP:-} == 1 ]]; then
		note "files kept in $2"
	else
		rm -rf "$2"
	fi
}
