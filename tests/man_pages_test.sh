#!/usr/bin/env bash
# The man pages (man/) against the programs they describe: the option names
# each --help lists and the ones its page describes must be the same, and every
# page must render without a warning.
#
#   nfsrdma-server(8)  OPTIONS against --help; EXPORTS "Export options" against
#                      the keys server/exports.cpp accepts
#   nfsrdma-fuse(8)    OPTIONS against --help; MOUNT OPTIONS against the mount
#                      options in --help's footer ("a, b, c" lines split,
#                      name=VALUE reduced to name)
#   nfsrdma-stat(1)    OPTIONS and ARGUMENTS against argparse's --help
#   nfsrdma-fio(7)     OPTIONS against the options[] table of
#                      fio-engine/nfsrdma_engine.c and, when fio and the built
#                      engine are here, against `fio --enghelp=ENGINE.so`
#
# On the man side the names are the tags of .TP/.TQ items in those sections,
# fonts and escapes removed, split at commas, each reduced to its first word
# and to what comes before '='.
#
# Env: NFSRDMA_SERVER, NFSRDMA_FUSE (binaries), FIO_ENGINE (optional, the built
# nfsrdma.so), MAN_DIR (optional: check the pages in another directory).
# Exit 0 (pass) or 1 (fail, listing every difference).
set -euo pipefail
export LC_ALL=C

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MAN=${MAN_DIR:-$SRC/man}
: "${NFSRDMA_SERVER:?set NFSRDMA_SERVER to the nfsrdma-server binary}"
: "${NFSRDMA_FUSE:?set NFSRDMA_FUSE to the nfsrdma-fuse binary}"
[ -n "${FIO_ENGINE:-}" ] && FIO_ENGINE=$(realpath -m "$FIO_ENGINE")
WORK=$(mktemp -d /tmp/nfsrdma-man-XXXXXX)
trap 'rm -rf "$WORK"' EXIT

failures=0
bad() { echo "FAIL: $*"; failures=$((failures + 1)); }

# --- names from --help texts (stdin) ---

# CLI11's "Options:", argparse's "options:" (or "optional arguments:"): every
# -x and --xx in the left column.
help_flags() {
  awk '
    /^[A-Za-z].*:$/ { in_opts = ($0 ~ /^(Options|options|optional arguments):$/); next }
    in_opts && /^ +-/ {
      spec = $0; sub(/^ +/, "", spec); sub(/  .*/, "", spec)
      n = split(spec, w, /[ ,]+/)
      for (i = 1; i <= n; i++) if (w[i] ~ /^--?[A-Za-z0-9]/) { x = w[i]; sub(/[^A-Za-z0-9-].*/, "", x); print x }
    }'
}

# nfsrdma-fuse's "Mount options:" footer: the left column, split at commas,
# name=VALUE reduced to name.
help_mount_options() {
  awk '
    /^[A-Za-z].*:$/ { in_mo = ($0 == "Mount options:"); next }
    in_mo && /^  [^ ]/ {
      spec = $0; sub(/^  /, "", spec); sub(/  .*/, "", spec)
      n = split(spec, w, /, */)
      for (i = 1; i <= n; i++) { x = w[i]; sub(/=.*/, "", x); if (x != "") print x }
    }'
}

# argparse's "positional arguments:".
help_positionals() {
  awk '
    /^[A-Za-z].*:$/ { in_pos = ($0 == "positional arguments:"); next }
    in_pos && /^  [A-Za-z]/ { print $1 }'
}

# --- names from a man page ---

# man_names PAGE SECTION [SUBSECTION]: the names in the tags of the .TP/.TQ
# items of a .SH section (of one .SS subsection of it, if given).
man_names() {
  awk -v want_sh="$2" -v want_ss="${3:-}" '
    function unquote(s) { gsub(/"/, "", s); return s }
    # Splits macro arguments, "quoted" ones whole, into A[1..n].
    function args(s,   i, c, inq, cur, started, n) {
      n = 0; cur = ""; inq = 0; started = 0
      for (i = 1; i <= length(s); i++) {
        c = substr(s, i, 1)
        if (c == "\"") { inq = !inq; started = 1; continue }
        if ((c == " " || c == "\t") && !inq) { if (started) { A[++n] = cur; cur = ""; started = 0 } continue }
        cur = cur c; started = 1
      }
      if (started) A[++n] = cur
      return n
    }
    # A tag line as plain text: font macros applied, font escapes and \% \& \c
    # dropped, \- as -.
    function plain(s,   m, n, i, t) {
      if (s ~ /^\.[BIR][BIR]?([ \t]|$)/) {
        m = s; sub(/[ \t].*/, "", m)
        sub(/^\.[BIR]+[ \t]*/, "", s)
        n = args(s); t = ""
        for (i = 1; i <= n; i++) t = t (i > 1 && length(m) == 2 ? " " : "") A[i]
        s = t
      }
      gsub(/\\f\[[^]]*\]/, "", s); gsub(/\\f\(../, "", s); gsub(/\\f./, "", s)
      gsub(/\\-/, "-", s); gsub(/\\[%&c]/, "", s)
      return s
    }
    /^\.SH/ { sh = $0; sub(/^\.SH[ \t]*/, "", sh); sh = unquote(sh); ss = ""; next }
    /^\.SS/ { ss = $0; sub(/^\.SS[ \t]*/, "", ss); ss = unquote(ss); next }
    /^\.(TP|TQ)([ \t]|$)/ { tag = 1; next }
    tag {
      tag = 0
      if (sh != want_sh || (want_ss != "" && ss != want_ss)) next
      n = split(plain($0), parts, /,/)
      for (i = 1; i <= n; i++) {
        x = parts[i]; sub(/^[ \t]+/, "", x); sub(/[ \t].*/, "", x); sub(/=.*/, "", x)
        if (x != "") print x
      }
    }' "$1"
}

# compare WHAT LEFT-LABEL LEFT-FILE RIGHT-LABEL RIGHT-FILE
compare() {
  local what=$1 la=$2 a=$3 lb=$4 b=$5 only_a only_b
  sort -u -o "$a" "$a"
  sort -u -o "$b" "$b"
  [ -s "$a" ] || { bad "$what: no names found in $la"; return 0; }
  [ -s "$b" ] || { bad "$what: no names found in $lb"; return 0; }
  only_a=$(comm -23 "$a" "$b" | tr '\n' ' ')
  only_b=$(comm -13 "$a" "$b" | tr '\n' ' ')
  [ -z "$only_a" ] || bad "$what: in $la but not in $lb: $only_a"
  [ -z "$only_b" ] || bad "$what: in $lb but not in $la: $only_b"
  [ -n "$only_a$only_b" ] || echo "ok: $what: the same $(wc -l <"$a") names"
}

# --- nfsrdma-server(8) ---
page=$MAN/nfsrdma-server.8
"$NFSRDMA_SERVER" --help >"$WORK/server.help"
help_flags <"$WORK/server.help" >"$WORK/a"
man_names "$page" OPTIONS >"$WORK/b"
compare "nfsrdma-server options" "--help" "$WORK/a" "nfsrdma-server.8 OPTIONS" "$WORK/b"
grep -oE 'key == "[A-Za-z0-9_]+"' "$SRC/server/exports.cpp" | sed -E 's/.*"(.*)"/\1/' >"$WORK/a"
man_names "$page" EXPORTS "Export options" >"$WORK/b"
compare "export options" "server/exports.cpp" "$WORK/a" "nfsrdma-server.8 EXPORTS" "$WORK/b"

# --- nfsrdma-fuse(8) ---
page=$MAN/nfsrdma-fuse.8
"$NFSRDMA_FUSE" --help >"$WORK/fuse.help"
help_flags <"$WORK/fuse.help" >"$WORK/a"
man_names "$page" OPTIONS >"$WORK/b"
compare "nfsrdma-fuse options" "--help" "$WORK/a" "nfsrdma-fuse.8 OPTIONS" "$WORK/b"
help_mount_options <"$WORK/fuse.help" >"$WORK/a"
man_names "$page" "MOUNT OPTIONS" >"$WORK/b"
compare "mount options" "nfsrdma-fuse --help" "$WORK/a" "nfsrdma-fuse.8 MOUNT OPTIONS" "$WORK/b"

# --- nfsrdma-stat(1) ---
page=$MAN/nfsrdma-stat.1
COLUMNS=200 python3 "$SRC/tools/nfsrdma-stat" --help >"$WORK/stat.help"
help_flags <"$WORK/stat.help" >"$WORK/a"
man_names "$page" OPTIONS >"$WORK/b"
compare "nfsrdma-stat options" "--help" "$WORK/a" "nfsrdma-stat.1 OPTIONS" "$WORK/b"
help_positionals <"$WORK/stat.help" >"$WORK/a"
man_names "$page" ARGUMENTS >"$WORK/b"
compare "nfsrdma-stat arguments" "--help" "$WORK/a" "nfsrdma-stat.1 ARGUMENTS" "$WORK/b"

# --- nfsrdma-fio(7) ---
page=$MAN/nfsrdma-fio.7
awk '/^static struct fio_option options\[\]/ { on = 1 } on && /\.name = NULL/ { on = 0 } on' \
  "$SRC/fio-engine/nfsrdma_engine.c" | grep -oE '\.name = "[^"]+"' | sed -E 's/.*"(.*)"/\1/' >"$WORK/a"
man_names "$page" OPTIONS >"$WORK/b"
cp "$WORK/b" "$WORK/fio.man"
compare "fio engine options" "options[] in nfsrdma_engine.c" "$WORK/a" "nfsrdma-fio.7 OPTIONS" "$WORK/b"
if [ -n "${FIO_ENGINE:-}" ] && [ -f "$FIO_ENGINE" ] && command -v fio >/dev/null; then
  # fio 3.33 lists an external engine's options given its path (not with external:).
  (cd "$WORK" && fio --enghelp="$FIO_ENGINE") >"$WORK/fio.help" 2>&1 ||
    { cat "$WORK/fio.help"; bad "fio --enghelp=$FIO_ENGINE failed"; }
  awk '/^[A-Za-z0-9_]+ +:/ { print $1 }' "$WORK/fio.help" >"$WORK/a"
  compare "fio engine options" "fio --enghelp" "$WORK/a" "nfsrdma-fio.7 OPTIONS" "$WORK/fio.man"
else
  echo "note: fio or the built engine (FIO_ENGINE) is not here; nfsrdma-fio.7 checked against the C table only"
fi

# --- every page renders without a warning ---
shopt -s nullglob
pages=("$MAN"/*.[1-8])
[ ${#pages[@]} -gt 0 ] || bad "no man pages in $MAN"
rendered=0 before=$failures
for page in "${pages[@]}"; do
  if command -v man >/dev/null; then
    out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null) || bad "man -l $page failed: $out"
    [ -z "$out" ] || bad "$(basename "$page"): man --warnings: $out"
    rendered=1
  fi
  if command -v groff >/dev/null; then
    out=$(LC_ALL=C.UTF-8 groff -man -ww -z -Tutf8 "$page" 2>&1) || bad "groff on $page failed: $out"
    [ -z "$out" ] || bad "$(basename "$page"): groff -ww: $out"
    rendered=1
  fi
done
if [ "$rendered" = 0 ]; then
  echo "note: neither man nor groff is installed; rendering not checked"
elif [ "$failures" = "$before" ]; then
  echo "ok: ${#pages[@]} pages render without warnings"
fi

[ "$failures" = 0 ] || { echo "$failures difference(s) between the man pages and the programs"; exit 1; }
echo "ok: the man pages match the programs"
