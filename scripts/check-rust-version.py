#!/usr/bin/env python3
"""Checks each workspace crate's declared rust-version against its locked
dependencies (CI: .ci/run). No older toolchain can be installed here to try
the claim, so it is computed: the highest `rust-version` among the packages a
crate builds (`cargo metadata --locked`, this platform; normal and build
dependencies, transitively) must equal the crate's `rust-version`, and the
highest among what its tests build (its dev-dependencies too) must equal
`[package.metadata.runwire] test-rust-version` when the dev-dependencies need
more. The README must name both versions of the main crate as it states them.

Usage: python3 scripts/check-rust-version.py [--print]
Exit: 0 every claim holds; 1 a claim is false (each one printed); 2 usage or
cargo failed.
"""

import json
import os
import re
import subprocess
import sys


def version_key(v):
    """1.89 and 1.89.0 are the same version."""
    k = [int(x) for x in re.findall(r"\d+", v or "0")]
    while len(k) > 1 and k[-1] == 0:
        k.pop()
    return tuple(k)


def main():
    show = "--print" in sys.argv[1:]
    if any(a != "--print" for a in sys.argv[1:]):
        print("usage: check-rust-version.py [--print]", file=sys.stderr)
        return 2
    host = subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True).stdout
    triple = re.search(r"^host: (\S+)", host, re.M).group(1)
    out = subprocess.run(
        [os.environ.get("CARGO", "cargo"), "metadata", "--format-version", "1", "--locked", "--filter-platform", triple],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        print(f"check-rust-version: cargo metadata: {out.stderr.strip()}", file=sys.stderr)
        return 2
    meta = json.loads(out.stdout)
    pkgs = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}

    def deps(pid, kinds):
        for d in nodes[pid]["deps"]:
            if any(k["kind"] in kinds for k in d["dep_kinds"]):
                yield d["pkg"]

    def highest(root, root_kinds):
        """The package with the highest rust-version that `root` builds."""
        seen, todo = set(), list(deps(root, root_kinds))
        best = (None, None)
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            rv = pkgs[pid].get("rust_version")
            if rv and version_key(rv) > version_key(best[0]):
                best = (rv, pkgs[pid]["name"] + " " + pkgs[pid]["version"])
            # A dependency's own dev-dependencies are never built.
            todo.extend(deps(pid, (None, "build")))
        return best

    false = []
    for pid in meta["workspace_members"]:
        p = pkgs[pid]
        name, declared = p["name"], p.get("rust_version")
        need, why = highest(pid, (None, "build"))
        tneed, twhy = highest(pid, (None, "build", "dev"))
        tdeclared = ((p.get("metadata") or {}).get("runwire") or {}).get("test-rust-version")
        if show:
            print(f"{name}: declared {declared}, needs {need} ({why}); tests need {tneed} ({twhy}), declared {tdeclared}")
        if version_key(declared) != version_key(need):
            false.append(f"{name}: rust-version is {declared}, its locked dependencies need {need} ({why})")
        if version_key(tneed) > version_key(need):
            if version_key(tdeclared) != version_key(tneed):
                false.append(
                    f"{name}: its tests need {tneed} ({twhy}); "
                    f"[package.metadata.runwire] test-rust-version says {tdeclared}"
                )
        elif tdeclared is not None and version_key(tdeclared) != version_key(need):
            false.append(f"{name}: test-rust-version {tdeclared}, but the tests need {need} like the crate")
        if name == "runwire":
            readme = open("README.md", encoding="utf-8").read()
            for v, what in ((declared, "rust-version"), (tdeclared, "test-rust-version")):
                if v and not re.search(rf"\b{re.escape(v)}\s+or\s+newer\b", readme):
                    false.append(f"README.md does not say \"{v} or newer\" (the main crate's {what})")
            for stated in sorted(set(re.findall(r"\b(1\.\d+)\s+or\s+newer\b", readme))):
                if stated not in (declared, tdeclared):
                    false.append(f"README.md says \"{stated} or newer\"; the main crate needs {declared}, its tests {tdeclared}")
    for f in false:
        print(f"check-rust-version: {f}", file=sys.stderr)
    return 1 if false else 0


if __name__ == "__main__":
    sys.exit(main())
