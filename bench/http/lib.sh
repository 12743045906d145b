# bench/http/lib.sh: what the bench/http scripts share, sourced after they
# set BENCH_NAME (the log prefix) and before they start anything.
#
#   bench_need PKG:CMD ...  installs each Debian PKG whose CMD is missing
#   bench_workdir PREFIX    makes $work and arms the cleanup that kills every
#                           process `start` started and removes $work, also
#                           on a signal
#   start NAME CMD...       runs CMD in the background (log in $work/NAME.log),
#                           its PID in $started
#   wait_port PORT PID      waits until 127.0.0.1:PORT accepts
#   cpu_ticks PID           user+system CPU of PID, in clock ticks
#   user_ticks PID          user CPU of PID, in clock ticks
#   ctx_switches PID        context switches of PID's threads so far
#   hwm PID                 peak RSS of PID in MiB
#   to_ms LATENCY           wrk's latency (812.00us, 1.23ms, 1.01s) in ms
#   median                  the median of the numbers on stdin
#   run_wrk OUT ARGS...     wrk ARGS > OUT, interruptible
#   build_strait_proxy      sets STRAIT_BIN (built from this tree unless set)
#   mkcerts                 a CA and the client and server certificates of the
#                           mTLS chains in $work (SPIFFE URIs, ECDSA P-256)
#   tls_common ID PEER ALPN...  a common_tls_context as straitd writes it

log() { echo "$BENCH_NAME: $*" >&2; }

bench_need() {
	local need=() spec
	for spec in "$@"; do
		command -v "${spec#*:}" >/dev/null || [ -x "/usr/sbin/${spec#*:}" ] || need+=("${spec%%:*}")
	done
	[ ${#need[@]} -eq 0 ] && return 0
	log "installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q "${need[@]}" >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q "${need[@]}" >/dev/null; }
}

pids=()
bench_cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
		kill -9 "$p" 2>/dev/null || true
	done
	rm -rf "$work"
	exit $rc
}

bench_workdir() {
	work=$(mktemp -d "/tmp/$1.XXXXXX")
	trap bench_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

start() {
	local name=$1; shift
	"$@" >"$work/$name.log" 2>&1 &
	started=$!
	pids+=("$started")
}

wait_port() {
	for _ in $(seq 200); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		kill -0 "$2" 2>/dev/null || { log "process $2 for port $1 died"; cat "$work"/*.log >&2 || true; return 1; }
		sleep 0.05
	done
	log "port $1 did not open"; return 1
}

cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
user_ticks() { awk '{ sub(/.*\) /, ""); print $12 }' "/proc/$1/stat"; }
ctx_switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ { n += $2 } END { print n + 0 }'; }
hwm() { awk '/VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }
to_ms() {
	awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n = n; else if (v ~ /s$/) n *= 1000; printf "%.3f", n }'
}
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print a[(NR + 1) / 2]; else printf "%.4g\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

run_wrk() {
	local out=$1; shift
	wrk "$@" >"$out" 2>&1 &
	local w=$!
	pids+=("$w")
	wait "$w" || true
	unset 'pids[-1]' # finished: don't signal a PID that may be reused
}

build_strait_proxy() {
	[ -n "${STRAIT_BIN:-}" ] && return 0
	# As the Makefile builds it (its GO_TAGS, no cgo): the binary users
	# run, and the one the variants are usually built like.
	local tags
	tags=$(sed -n 's/^GO_TAGS[[:space:]]*?=[[:space:]]*//p' "$root/Makefile")
	log "building strait-proxy (-tags ${tags:-none})"
	(cd "$root" && CGO_ENABLED=0 go build ${tags:+-tags "$tags"} -o "$work/strait-proxy" ./cmd/strait-proxy)
	STRAIT_BIN=$work/strait-proxy
}

# replace_block FILE MARK BLOCKFILE: replaces what stands between
# <!-- MARK:start --> and <!-- MARK:end --> in FILE with BLOCKFILE (which
# carries the markers).
replace_block() {
	awk -v blk="$3" -v s="<!-- $2:start -->" -v e="<!-- $2:end -->" '
		index($0, s) { while ((getline l < blk) > 0) print l; skip = 1; next }
		index($0, e) { skip = 0; next }
		!skip { print }' "$1" >"$work/replace.new"
	cp "$work/replace.new" "$1"
}

# newport VAR: the next port after $next_port (which the script sets) into VAR.
newport() { next_port=$((next_port + 1)); printf -v "$1" %d "$next_port"; }

mkcerts() {
	[ -f "$work/ca.pem" ] && return 0
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /O=bench \
		-keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
	for id in client server; do
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /O=bench -keyout "$work/$id.key" -out "$work/$id.csr" 2>/dev/null
		printf 'subjectAltName=URI:spiffe://cluster.local/ns/bench/sa/%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$id" >"$work/$id.ext"
		openssl x509 -req -in "$work/$id.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial -days 1 \
			-extfile "$work/$id.ext" -out "$work/$id.pem" 2>/dev/null
	done
}

# TLS contexts of the strait-mtls chains (what straitd generates for
# sidecars, with file data sources instead of SDS).
tls_common() { # identity peer alpn... -> common_tls_context (YAML flow style)
	local id=$1 peer=$2; shift 2
	local alpn; alpn=$(printf '"%s",' "$@"); alpn=${alpn%,}
	printf '{tls_params: {tls_minimum_protocol_version: TLSv1_2, tls_maximum_protocol_version: TLSv1_3}, alpn_protocols: [%s], tls_certificates: [{certificate_chain: {filename: %s}, private_key: {filename: %s}}], validation_context: {trusted_ca: {filename: %s}, match_typed_subject_alt_names: [{san_type: URI, matcher: {exact: "spiffe://cluster.local/ns/bench/sa/%s"}}]}}' \
		"$alpn" "$work/$id.pem" "$work/$id.key" "$work/ca.pem" "$peer"
}
