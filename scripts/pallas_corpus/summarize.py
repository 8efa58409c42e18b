"""Groups the corpus run's failures by their first error line: `summarize.py OUTDIR files…`."""

import collections
import re
import sys
import xml.etree.ElementTree as ET


def main(out: str, files: list[str]) -> None:
    for name in files:
        try:
            tree = ET.parse(f"{out}/{name}.xml")
        except (OSError, ET.ParseError) as e:
            print(f"== {name}: no results ({e})")
            continue
        counts = collections.Counter()
        outcome = collections.Counter()
        for case in tree.iter("testcase"):
            failed = [case.find(t) for t in ("failure", "error") if case.find(t) is not None]
            if case.find("skipped") is not None:
                outcome["skipped"] += 1
            elif failed:
                outcome["failed"] += 1
                message = (failed[0].get("message") or "").replace("\n", " ")
                message = re.sub(r"\(at [^)]*\)|kernel `[^`]*`", "", message)
                counts[message[:160]] += 1
            else:
                outcome["passed"] += 1
        print(f"== {name}: {dict(outcome)}")
        for message, n in counts.most_common():
            print(f"  {n:3d} {message}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
