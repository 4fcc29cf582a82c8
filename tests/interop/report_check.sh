# Sourced by the tests of bench/compare: check_report HTML MIN_CHARTS opens the
# report in headless Chromium and fails (fail from common.sh) unless it renders
# with no script or console error, at least MIN_CHARTS charts, ink on every one,
# and a full-page screenshot that is not blank. Leaves the DOM in $WORK/dom.
check_report() {
  local report=$1 body total drawn errors
  [ -s "$report" ] || fail "no report.html"
  timeout 120 chromium --headless=new --no-sandbox --disable-gpu --enable-logging=stderr --v=0 \
    --virtual-time-budget=10000 --dump-dom "file://$report" >"$WORK/dom" 2>"$WORK/chromium.log" ||
    fail "chromium could not load the report"
  body=$(grep -o '<body[^>]*>' "$WORK/dom")
  total=$(sed -n 's/.*data-charts-total="\([0-9]*\)".*/\1/p' <<<"$body")
  drawn=$(sed -n 's/.*data-charts-drawn="\([0-9]*\)".*/\1/p' <<<"$body")
  errors=$(sed -n 's/.*data-errors="\([0-9]*\)".*/\1/p' <<<"$body")
  [ "${total:-0}" -ge "$2" ] && [ "$drawn" = "$total" ] || fail "charts drawn: ${drawn:-?} of ${total:-?}"
  [ "$errors" = 0 ] || fail "the report raised $errors script errors"
  if grep -E 'CONSOLE.*(Uncaught|Error)' "$WORK/chromium.log"; then fail "console errors while rendering"; fi
  echo "ok: report renders, $drawn of $total charts drawn, no console errors"
  timeout 120 chromium --headless=new --no-sandbox --disable-gpu --window-size=1400,3000 \
    --screenshot="$WORK/shot.png" "file://$report" >/dev/null 2>&1 || fail "no screenshot"
  python3 - "$WORK/shot.png" <<'PY' || fail "the screenshot is blank"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n"
w, h = struct.unpack(">II", data[16:24])
# Inflate the image data and count distinct byte values: a blank page has a handful.
idat, i = b"", 8
while i < len(data):
    n, kind = struct.unpack(">I4s", data[i:i + 8])
    if kind == b"IDAT":
        idat += data[i + 8:i + 8 + n]
    i += 12 + n
raw = zlib.decompress(idat)
assert w >= 1000 and h >= 2000 and len(set(raw[::7])) > 64, (w, h, len(set(raw[::7])))
print(f"ok: screenshot {w}x{h} with varied pixels")
PY
}
