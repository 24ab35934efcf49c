#!/usr/bin/env python3
"""Checks what the docs claim that a command can check, with no internet (CI: .ci/run):

- every link inside the repository in README.md, docs/*.md and spec/*.md
  resolves: the file exists, and an anchor (#...) names a heading of the
  target (GitHub's slugs) or an explicit <a id>/<a name>;
- every ```sh block of README.md parses (`bash -n`).

Usage: python3 scripts/check-docs.py [FILE.md...]   (default: the files above)
Exit: 0 all good; 1 a broken link or a block that does not parse (each printed).
"""

import glob
import os
import re
import subprocess
import sys
import unicodedata

FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"(?<!\!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(\s|$)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ID = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def strip_code(lines):
    """The lines outside fenced blocks (None for a line inside one), and the blocks."""
    out, blocks, fence, info, body = [], [], None, "", []
    for i, line in enumerate(lines):
        m = FENCE.match(line.lstrip())
        if fence is None and m:
            fence, info, body = m.group(1), line.lstrip()[3:].strip(), []
            out.append(None)
            start = i + 1
        elif fence is not None and line.lstrip().startswith(fence):
            blocks.append((info, start + 1, "\n".join(body) + "\n"))
            fence = None
            out.append(None)
        elif fence is not None:
            body.append(line)
            out.append(None)
        else:
            out.append(line)
    return out, blocks


def slug(text):
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to '-'."""
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.lower()
    kept = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in "-_ " or cat[0] in "LN" or cat == "Mn":
            kept.append("-" if ch == " " else ch)
    return "".join(kept)


_anchors = {}


def anchors(path):
    if path not in _anchors:
        found, counts = set(), {}
        with open(path, encoding="utf-8") as f:
            lines, _ = strip_code(f.read().split("\n"))
        for line in lines:
            if line is None:
                continue
            found.update(HTML_ID.findall(line))
            m = HEADING.match(line)
            if m:
                s = slug(m.group(2))
                n = counts.get(s, 0)
                counts[s] = n + 1
                found.add(s if n == 0 else f"{s}-{n}")
        _anchors[path] = found
    return _anchors[path]


def check_file(path, root):
    bad = []
    with open(path, encoding="utf-8") as f:
        text = f.read()
    lines, blocks = strip_code(text.split("\n"))
    for no, line in enumerate(lines, 1):
        if line is None:
            continue
        # Inline code is not a link.
        plain = re.sub(r"`[^`]*`", "", line)
        targets = LINK.findall(plain) + IMAGE.findall(plain)
        m = REFDEF.match(plain)
        if m:
            targets.append(m.group(1))
        for t in targets:
            if re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I):
                continue  # http:, https:, mailto:: outside the repository
            file_part, _, anchor = t.partition("#")
            target = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            where = f"{os.path.relpath(path, root)}:{no}"
            if not os.path.exists(target):
                bad.append(f"{where}: {t}: no such file")
                continue
            if anchor:
                if not target.endswith(".md"):
                    bad.append(f"{where}: {t}: an anchor into a file that is not markdown")
                elif anchor not in anchors(target):
                    bad.append(f"{where}: {t}: no heading or anchor #{anchor} in {os.path.relpath(target, root)}")
    return bad, blocks


def main():
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    files = sys.argv[1:] or (
        [os.path.join(root, "README.md")]
        + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
        + sorted(glob.glob(os.path.join(root, "spec", "*.md")))
    )
    bad, parsed = [], 0
    for path in files:
        b, blocks = check_file(path, root)
        bad += b
        if os.path.basename(path) != "README.md":
            continue
        for info, line, body in blocks:
            if info.split()[:1] != ["sh"]:
                continue
            r = subprocess.run(["bash", "-n"], input=body, capture_output=True, text=True)
            parsed += 1
            if r.returncode != 0:
                bad.append(f"{os.path.relpath(path, root)}:{line}: the sh block does not parse: {r.stderr.strip()}")
    for b in bad:
        print(f"check-docs: {b}", file=sys.stderr)
    print(f"check-docs: {len(files)} files' links, {parsed} README sh blocks: {len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
