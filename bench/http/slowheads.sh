#!/usr/bin/env bash
# bench/http/slowheads.sh: memory held by slow request heads (a slowloris).
#
# idle.sh's set-up in its slowheads mode: CONNS connections each trickle a
# HEAD_BYTES request head over TRICKLE and never end it; the table has the
# proxy's RSS while it holds them and its peak, next to nginx's.
#
# Environment: as idle.sh; defaults RUNS=1 CONNS=1000 HEAD_BYTES=59000
# TRICKLE=20s.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
RUNS=${RUNS:-1} CONNS=${CONNS:-1000} MODE=slowheads exec "$here/idle.sh" "$@"
