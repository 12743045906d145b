#!/usr/bin/env bash
# Mutation testing with gremlins (github.com/go-gremlins/gremlins), one Go
# package directory at a time, and a summary table of killed / survived /
# score per package.
#
#   hack/mutate.sh [./internal/pkg ...]     (make mutate PKG=./internal/pkg)
#
# Each mutant (a flipped comparison, a negated condition, && <-> ||, + <-> -,
# break <-> continue ...) is applied to a copy of the module and the package's
# own tests run against it: a failing test kills the mutant, passing tests let
# it live (survive). A mutant on a line no test executes is "not covered"; it
# counts as a survivor here, since no test would notice it either.
#
#   score = (killed + equivalent) / (killed + survived + not covered)
#
# Mutants that do not compile (not viable) and mutants whose tests ran past the
# timeout (timed out: usually an endless loop) are left out of the score.
# An equivalent mutant is one that cannot change behaviour; each is listed
# with its justification in <pkg>/testdata/mutants-equivalent.txt, one per line:
#
#   check.go:118:20 CONDITIONALS_BOUNDARY  len(x) > 0 and len(x) >= 1 differ only at 0, where ...
#
# A listed mutant that a test kills anyway is reported as a stale entry.
#
# Gremlins 0.6.0 quirks this script works around or avoids:
#   - it walks subdirectories: -E '/' keeps it to the package's own files;
#   - it takes the timeout from one timed unmutated run: -count=1 below;
#   - --test-cpu N reaches `go test` as the single argument "-cpu N", which
#     go test rejects, so every mutant would count as killed: not used;
#   - the operators in a tagless switch's case expressions lie outside the
#     coverage blocks, so such mutants show as not covered even when tests
#     run them (the efficacy column leaves not-covered mutants out).
#
# Faster, for one package's survivors: hack/mutoverlay runs the mutants of a
# gremlins --dry-run report through `go test -overlay` (no module copy, the
# tree untouched), NOT COVERED ones included, and -only reruns a list of
# them after new tests (see its package comment).
#
# Knobs (environment):
#   GREMLINS             the gremlins binary (default: bin/tools/gremlins)
#   MUTATE_WORKERS       parallel mutants (default 1: the machine is shared)
#   MUTATE_TIMEOUT_COEFF a mutant's tests may take this many times as long as
#                        the unmutated coverage run (default 5)
#   MUTATE_OUT           where the JSON results go (default out/mutate)
#   MUTATE_LIST=1        also list every survivor (file:line:col mutator)
#   MUTATE_GOCACHE       the Go build cache the mutants build in (default: a
#                        fresh one per package under $TMPDIR, removed when the
#                        package is done or the script exits)
#
# The build cache: every mutant compiles its package and the test binary
# anew, and each build's outputs go into GOCACHE, which Go trims only of
# entries unused for five days: hundreds of mutants a package left the
# shared cache (~/.cache/go-build) at 72 GB once, and the disk full. A
# throw-away cache per package bounds that to one package's run; it is not
# seeded (copying a large cache costs more than building the package's
# dependencies once: two to three minutes on a loaded machine, against a
# run of 20-45).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
GREMLINS="${GREMLINS:-$ROOT/bin/tools/gremlins}"
WORKERS="${MUTATE_WORKERS:-1}"
COEFF="${MUTATE_TIMEOUT_COEFF:-5}"
OUT="${MUTATE_OUT:-$ROOT/out/mutate}"
LIST="${MUTATE_LIST:-0}"

if [[ $# -eq 0 ]]; then
	set -- ./internal/iptables ./internal/inject ./internal/xds/gen ./internal/istioconfig ./internal/istioconfig/validate ./internal/istioconfig/support ./internal/proxy/http1 ./internal/proxy/pgv
fi

GOCACHE_KEEP="${MUTATE_GOCACHE:-}"
gocache=""
drop_gocache() {
	if [[ -n "$gocache" ]]; then
		rm -rf "$gocache"
		gocache=""
	fi
}
trap drop_gocache EXIT
trap 'exit 130' INT TERM

[[ -x "$GREMLINS" ]] || { echo "mutate: $GREMLINS missing; run 'make mutate' (it installs it)" >&2; exit 1; }
command -v jq >/dev/null || { echo "mutate: needs jq (apt-get install -y jq)" >&2; exit 1; }
mkdir -p "$OUT"

# -vet=off: `make lint` vets; here it would only double each mutant's build;
# -ldflags=-w: no DWARF in the test binaries, a shorter link per mutant.
# -count=1: gremlins times the unmutated test run to set each mutant's timeout;
# a cached result would make that timeout near zero.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-count=1 -vet=off -ldflags=-w"

# The mutators: gremlins' defaults plus && <-> || and break <-> continue.
MUTATORS=(--invert-logical --invert-loopctrl)

summary=()
status=0
for pkg in "$@"; do
	dir="${pkg#./}"
	dir="${dir%/}"
	dir="${dir%/...}"
	[[ -d "$ROOT/$dir" ]] || { echo "mutate: no package directory $dir" >&2; exit 1; }
	json="$OUT/$(echo "$dir" | tr / _).json"
	echo "== $dir" >&2
	if [[ -n "$GOCACHE_KEEP" ]]; then
		export GOCACHE="$GOCACHE_KEEP"
	else
		gocache="$(mktemp -d "${TMPDIR:-/tmp}/mutate-gocache.XXXXXX")"
		export GOCACHE="$gocache"
	fi
	# -E '/': gremlins walks subdirectories too; mutate only this package's
	# own files (paths are relative to the package directory).
	if ! (cd "$ROOT" && "$GREMLINS" unleash --silent "${MUTATORS[@]}" \
		--workers "$WORKERS" --timeout-coefficient "$COEFF" \
		-E '/' -o "$json" "./$dir"); then
		echo "mutate: gremlins failed on $dir (do the package's tests pass?)" >&2
		status=1
		drop_gocache
		continue
	fi
	[[ -z "$gocache" ]] || echo "mutate: $dir: build cache $(du -sh "$gocache" | cut -f1), removed" >&2
	drop_gocache

	eqfile="$ROOT/$dir/testdata/mutants-equivalent.txt"
	eqkeys="[]"
	if [[ -f "$eqfile" ]]; then
		# "file:line:col MUTATOR ..." -> ["file:line:col MUTATOR", ...]
		eqkeys=$(grep -v '^[[:space:]]*\(#\|$\)' "$eqfile" | awk '{print $1 " " $2}' | jq -R . | jq -s .)
	fi

	read -r killed lived notcov timedout notviable equiv stale < <(jq -r --argjson eq "$eqkeys" '
		[.files[] as $f | $f.mutations[] | . + {key: "\($f.file_name):\(.line):\(.column) \(.type)"}] as $m |
		def n(s): [$m[] | select(.status == s)] | length;
		[n("KILLED"), n("LIVED"), n("NOT COVERED"), n("TIMED OUT"), n("NOT VIABLE"),
		 ([$m[] | select((.status == "LIVED" or .status == "NOT COVERED") and (.key as $k | $eq | index($k)))] | length),
		 ([$m[] | select(.status == "KILLED" and (.key as $k | $eq | index($k)))] | length)] | @tsv' "$json")

	if [[ "$LIST" == 1 || "$stale" -gt 0 ]]; then
		jq -r --argjson eq "$eqkeys" --arg list "$LIST" '
			.files[] as $f | $f.mutations[] | {key: "\($f.file_name):\(.line):\(.column) \(.type)", status} |
			if (.status == "LIVED" or .status == "NOT COVERED") and ($list == "1") and (.key as $k | $eq | index($k) | not) then "  survived: \(.key) (\(.status))"
			elif .status == "KILLED" and (.key as $k | $eq | index($k)) then "  stale equivalent entry (killed): \(.key)"
			else empty end' "$json" | sort -t: -k1,1 -k2,2n >&2
	fi

	total=$((killed + lived + notcov))
	pct() { awk -v n="$1" -v d="$2" 'BEGIN { if (d > 0) printf "%.1f%%", 100 * n / d; else printf "n/a" }'; }
	# Equivalent mutants that gremlins ran (LIVED) count in efficacy too.
	eqlived=$(jq -r --argjson eq "$eqkeys" '[.files[] as $f | $f.mutations[] | select(.status == "LIVED") |
		select("\($f.file_name):\(.line):\(.column) \(.type)" as $k | $eq | index($k))] | length' "$json")
	summary+=("$(printf '%-28s %6s %8s %11s %10s %9s %10s %8s %9s %8s' "$dir" "$killed" "$lived" "$notcov" "$equiv" "$timedout" "$notviable" \
		"$(pct "$killed" "$total")" "$(pct $((killed + eqlived)) $((killed + lived)))" "$(pct $((killed + equiv)) "$total")")")
done

printf '\n%-28s %6s %8s %11s %10s %9s %10s %8s %9s %8s\n' package killed survived "not-covered" equivalent "timed-out" "not-viable" raw efficacy score
for line in "${summary[@]}"; do echo "$line"; done
echo "score = (killed + equivalent) / (killed + survived + not-covered); raw: the same without the equivalent list;"
echo "efficacy (gremlins' figure): (killed + equivalent survivors) / (killed + survived), the mutants some test executes."
echo "JSON results in ${OUT#"$ROOT"/}"
exit $status
