#!/usr/bin/env python3
"""Fails when a relative link in the README or docs/ names a file or a #heading that does not exist.

Usage: scripts/check-doc-links.py [FILE.md ...]   (default: README.md and docs/*.md)
Headings become anchors as GitHub makes them: lower case, punctuation dropped, spaces to hyphens,
and -1, -2 … after repeats.
"""
import glob
import os
import re
import sys

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def slug(text):
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def prose(path):
    """The lines of a Markdown file outside code fences, with their numbers."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
            elif not fenced:
                yield number, line


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen, found = {}, set()
        for _, line in prose(path):
            m = HEADING.match(line)
            if m:
                s = slug(m.group(2))
                found.add(f"{s}-{seen[s]}" if s in seen else s)
                seen[s] = seen.get(s, 0) + 1
        _anchors[path] = found
    return _anchors[path]


def main(files):
    broken = 0
    for path in files:
        for number, line in prose(path):
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue  # http:, https:, mailto: and the like are not checked
                file, _, fragment = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
                if not os.path.exists(dest):
                    print(f"{path}:{number}: {target}: no such file")
                    broken += 1
                elif fragment and dest.endswith(".md") and fragment not in anchors(dest):
                    print(f"{path}:{number}: {target}: no such heading in {dest}")
                    broken += 1
    print(f"doc links: {len(files)} files, {broken} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    if len(sys.argv) > 1:
        sys.exit(main(sys.argv[1:]))
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    sys.exit(main(["README.md"] + sorted(glob.glob("docs/*.md"))))
