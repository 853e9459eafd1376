#!/usr/bin/env python3
"""License policy check: every dependency must be usable under a permissive license.

Equivalent to `cargo deny check licenses` with deny.toml's allow list, without needing
cargo-deny installed. Reads `cargo metadata` and evaluates each crate's SPDX expression:
an `OR` needs one allowed side, an `AND` needs both. Exits 1 and names the offenders.
"""
import json
import re
import subprocess
import sys

ALLOWED = {
    "Apache-2.0", "Apache-2.0 WITH LLVM-exception", "MIT", "BSD-2-Clause", "BSD-3-Clause",
    "ISC", "Zlib", "Unicode-3.0", "Unicode-DFS-2016", "0BSD", "BSL-1.0", "CC0-1.0",
    "Unlicense", "MIT-0",
}


def tokens(expr):
    return re.findall(r"\(|\)|[A-Za-z0-9.\-+]+(?: WITH [A-Za-z0-9.\-+]+)?", expr)


def evaluate(toks, pos=0):
    """Recursive descent over OR (lowest), AND, atoms and parentheses."""
    def atom(i):
        if toks[i] == "(":
            v, i = expr(i + 1)
            return v, i + 1  # skip ')'
        return toks[i] in ALLOWED, i + 1

    def conj(i):
        v, i = atom(i)
        while i < len(toks) and toks[i] == "AND":
            w, i = atom(i + 1)
            v = v and w
        return v, i

    def expr(i):
        v, i = conj(i)
        while i < len(toks) and toks[i] == "OR":
            w, i = conj(i + 1)
            v = v or w
        return v, i

    return expr(pos)[0]


def main():
    meta = json.loads(subprocess.check_output(
        ["cargo", "metadata", "--format-version", "1"]))
    bad = []
    for pkg in meta["packages"]:
        lic = pkg.get("license")
        if pkg.get("source") is None:  # our own workspace crates
            if lic != "Apache-2.0":
                bad.append(f"{pkg['name']}: workspace crate must be Apache-2.0, is {lic}")
            continue
        if not lic:
            bad.append(f"{pkg['name']} {pkg['version']}: no SPDX license field")
            continue
        if not evaluate(tokens(lic.replace("/", " OR "))):
            bad.append(f"{pkg['name']} {pkg['version']}: {lic}")
    n = len(meta["packages"])
    if bad:
        print("license check: not permissive:\n  " + "\n  ".join(bad))
        sys.exit(1)
    print(f"license check: {n} crates, all permissive (Apache-2.0 project)")


if __name__ == "__main__":
    main()
