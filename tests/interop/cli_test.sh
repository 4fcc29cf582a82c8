#!/usr/bin/env bash
# The command line: --help, and configuration errors that exit non-zero with a
# one-line reason before anything is served.
. "$(dirname "$0")/common.sh"

grep -q -- "--export" <<<"$("$NFSRDMA_SERVER" --help)" || fail "--help does not describe --export"

expect_error() {  # expected-text args...
  local want=$1; shift
  local out rc=0
  out=$("$NFSRDMA_SERVER" --state-dir "$WORK/state" --bind 127.0.0.1 --no-register --no-rdma "$@" 2>&1 >/dev/null) || rc=$?
  [ "$rc" != 0 ] || fail "exit status 0 for: $*"
  [ "$(wc -l <<<"$out")" = 1 ] || fail "more than one line for '$*': $out"
  grep -qi -- "$want" <<<"$out" || fail "'$want' not in: $out"
  echo "ok: $* -> $out"
}
mkdir -p "$WORK/dir"
expect_error "nothing to export"
expect_error "No such file" --export /does/not/exist
expect_error "prefix length" --export "$WORK/dir 10.0.0.0/40(rw)"
expect_error "unknown export option" --export "$WORK/dir *(rw,frobnicate)"
expect_error "cannot read exports file" --exports "$WORK/missing-exports"
PORT=$(free_port)
python3 -c "import socket,time; s=socket.socket(); s.bind(('127.0.0.1',$PORT)); s.listen(); time.sleep(5)" &
sleep 0.3
expect_error "in use" --export "$WORK/dir" --port "$PORT" --mount-port "$(free_port)"
kill %1 2>/dev/null || true
out=$("$NFSRDMA_SERVER" --log-level loud --export "$WORK/dir" 2>&1) && fail "bad log level accepted"
grep -q "unknown log level" <<<"$out" || fail "bad log level message: $out"
echo "ok: unknown log level refused"

# The tests' own exit hooks (common.sh on_exit): every one registered runs,
# the latest first, and the test keeps its status. One used to replace the
# other, so a test that mounted in a namespace left the namespace behind.
rc=0
hooks=$(bash -c ". '$TESTS_DIR/interop/common.sh'; on_exit 'echo first'; on_exit 'echo second'; exit 3") || rc=$?
[ "$rc" = 3 ] || fail "exit status through on_exit: $rc"
[ "$hooks" = $'second\nfirst' ] || fail "on_exit hooks ran as: $hooks"
echo "ok: on_exit runs every hook, the latest first"
