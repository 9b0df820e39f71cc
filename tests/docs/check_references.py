#!/usr/bin/python3
"""The docs and comments point only at what a reader of the tree can open.

Fails on:
- a relative Markdown link in a page (README.md, CHANGES.md, docs/, each
  folder's README.md) whose target is not in the tree;
- a backquoted path in such a page that names a file or folder not in the tree
  (a path under one of the tree's top folders, or a bare `name.md`);
- a page named in a source file's comment (`name.md`) that the tree does not hold;
- "issue N" or "issue #N" in a page or a source file: a reader has no tracker
  to look the number up in;
- a climb out of the repository into the shared folder beside it.
Run by ctest as docs_references."""
import argparse
import os
import re
import subprocess
import sys

SOURCE_SUFFIXES = (".c", ".h", ".py", ".sh", ".js", ".mjs", ".cmake", ".txt", ".md")
SOURCE_NAMES = ("CMakeLists.txt", "Makefile", "run", "report")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
BACKQUOTED = re.compile(r"`([^`\s]+)`")
ISSUE = re.compile(r"\bissues? #?\d+\b", re.IGNORECASE)
OUTSIDE = "../" + "shared"  # spelt in two so that this file does not name it
GENERATED = ("build/", "build-asan/", "build-fuzz/", "node_modules/")
NOT_A_PATH = re.compile(r"[*<>{}$|]|\.\.\.|…")


def tree_files(root):
    """Every file a checkout has (tracked, or new and not ignored)."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                             cwd=root, capture_output=True, text=True, check=True).stdout
        return [p for p in out.split("\n") if p and os.path.exists(os.path.join(root, p))]
    except (OSError, subprocess.CalledProcessError):
        found = []
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if x != ".git" and not (d == root and x.startswith("build"))
                       and x != "node_modules"]
            found += [os.path.relpath(os.path.join(d, f), root) for f in files]
        return found


def is_page(path):
    return path.endswith(".md") and (path.startswith("docs/") or "/" not in path
                                     or os.path.basename(path) == "README.md")


def is_source(path):
    return path.endswith(SOURCE_SUFFIXES) or os.path.basename(path) in SOURCE_NAMES


class Tree:
    def __init__(self, files):
        self.files = set(files)
        self.dirs = {os.path.dirname(p) for p in files}
        for d in list(self.dirs):
            while d:
                d = os.path.dirname(d)
                self.dirs.add(d)
        self.top = {p.split("/")[0] for p in files if "/" in p}
        self.basenames = {os.path.basename(p) for p in files}

    def has(self, path):
        path = os.path.normpath(path)
        return path in self.files or path in self.dirs


def link_problem(tree, page, target):
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
        return None  # a URL or an anchor on the same page
    path = target.split("#")[0]
    if tree.has(os.path.join(os.path.dirname(page), path)):
        return None
    return "link to %s: not in the tree" % target


def backquote_problem(tree, page, text):
    if NOT_A_PATH.search(text) or text.startswith(GENERATED):
        return None
    path = text.rstrip("/").split(":")[0]
    if "/" in path and path.split("/")[0] in tree.top:
        if tree.has(path) or tree.has(os.path.join(os.path.dirname(page), path)):
            return None
        return "`%s`: not in the tree" % text
    if "/" not in path and path.endswith(".md") and path not in tree.basenames:
        return "`%s`: no such page in the tree" % text
    return None


def page_problems(tree, page, lines):
    problems = []
    for n, line in enumerate(lines, 1):
        for target in LINK.findall(line):
            p = link_problem(tree, page, target)
            if p:
                problems.append("%s:%d: %s" % (page, n, p))
        for text in BACKQUOTED.findall(line):
            p = backquote_problem(tree, page, text)
            if p:
                problems.append("%s:%d: %s" % (page, n, p))
    return problems


SELF = "tests/docs/check_references.py"  # its own examples are no references
PAGE_NAME = re.compile(r"(?<![\w/.-])([\w-]+\.md)\b")


def page_name_problems(tree, path, n, line):
    """A source file naming a page (foo.md) that the tree does not hold."""
    return ["%s:%d: %s: no such page in the tree" % (path, n, name)
            for name in PAGE_NAME.findall(line) if name not in tree.basenames]


def text_problems(tree, path, lines):
    problems = []
    for n, line in enumerate(lines, 1):
        if not is_page(path) and path != SELF:
            problems += page_name_problems(tree, path, n, line)
        m = ISSUE.search(line)
        if m:
            problems.append("%s:%d: \"%s\": say what it is, not its number" % (path, n, m.group(0)))
        if OUTSIDE in line:
            problems.append("%s:%d: %s is outside the repository" % (path, n, OUTSIDE))
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    root = ap.parse_args().root
    files = tree_files(root)
    tree = Tree(files)
    problems = []
    for path in sorted(files):
        if not (is_page(path) or is_source(path)) or path.startswith(GENERATED):
            continue
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
        if is_page(path):
            problems += page_problems(tree, path, lines)
        problems += text_problems(tree, path, lines)
    for p in problems:
        print(p)
    print("docs_references: %d problem(s) in %d files" % (len(problems), len(files)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
