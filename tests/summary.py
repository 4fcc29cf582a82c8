#!/usr/bin/env python3
"""Prints one line over every suite run: 'N passed, N failed, N skipped'.

Reads meson's JUnit logs; GoogleTest binaries report each test case, scripts
and fuzzers count as one test each. Each failure is named on a line of its own
just above the summary, so the tail of a CI log says what failed. Exits 1 when
anything failed or a log is missing (a suite that did not run is a failure,
not a pass)."""
import sys
import xml.etree.ElementTree as ET

passed = failed = skipped = 0
names = []
for path in sys.argv[1:]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"summary: cannot read {path}: {e}", file=sys.stderr)
        failed += 1
        names.append(f"{path} (no log)")
        continue
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
            build = path.split("/meson-logs/")[0]
            cls, name = case.get("classname", ""), case.get("name", "")
            names.append(f"{build}: {name if name.startswith(cls) else f'{cls} {name}'.strip()}")
        elif case.find("skipped") is not None:
            skipped += 1
        else:
            passed += 1
for name in names:
    print(f"FAILED {name}")
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
