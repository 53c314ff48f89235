#!/usr/bin/env python3
"""Checks that the README and docs/ say only what the repository holds:

  1. every relative link in README.md and docs/*.md points to a file or directory that exists,
     and a link with #anchor to a heading of that Markdown file;
  2. every repository path they name (in text or code: `scripts/test.sh`, `csrc/kernels/tuning.h`,
     `tests/python/test_serving*.py`) exists; a path counts as one when its first part is an entry
     of the repository's top level;
  3. the README's quick start runs the test suite with the command .ci/run runs, and every other
     dev-root command of the quick start is a line of .ci/run as well;
  4. docs/transformers.md's table is the one tests/data/transformers_models.json gives
     (--write rewrites it).

    python3 scripts/check_docs.py            # exit status 1 and one line per problem on failure
    python3 scripts/check_docs.py --write    # regenerate the transformers table, then check

Plain Python 3, no packages: CI runs it before anything is built.
"""

import argparse
import glob
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEST_COMMAND = "scripts/devroot.sh scripts/test.sh"
TRANSFORMERS_DATA = "tests/data/transformers_models.json"
TRANSFORMERS_DOC = "docs/transformers.md"
TABLE_BEGIN = re.compile(r"^<!-- transformers-table: .*-->$", re.M)
TABLE_END = "<!-- end transformers-table -->"

# Paths the docs name that are not ours to hold: upstream causal-conv1d's test file (named
# where its conformance run is described).
EXTERNAL_PATHS = {"tests/test_causal_conv1d.py"}


def doc_files(root=ROOT):
    return ["README.md"] + sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))


def read(path, root=ROOT):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(markdown):
    found, in_code = set(), False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and re.match(r"#{1,6} ", line):
            base = slug(line.lstrip("#").strip())
            name, n = base, 1
            while name in found:  # GitHub numbers repeated headings
                name, n = f"{base}-{n}", n + 1
            found.add(name)
    return found


LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
LINK_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?", re.M)  # [name]: target


def check_links(path, text, root=ROOT):
    problems = []
    for target in LINK.findall(text) + LINK_DEFINITION.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
            continue
        file_part, _, anchor = target.partition("#")
        where = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        if where.startswith(".."):
            problems.append(f"{path}: link {target} leaves the repository")
            continue
        if not os.path.exists(os.path.join(root, where)):
            problems.append(f"{path}: link {target}: {where} does not exist")
            continue
        if anchor and where.endswith(".md") and anchor not in anchors(read(where, root)):
            problems.append(f"{path}: link {target}: {where} has no heading #{anchor}")
    return problems


def top_level(root=ROOT):
    return {e for e in os.listdir(root) if e not in (".git", "build")}


PATH = re.compile(r"(?<![\w./<-])((?:\.?[\w-]+/)+[\w.*-]*[\w*])")


def check_paths(path, text, root=ROOT):
    text = re.sub(r"https?://\S+", "", text)
    text = LINK.sub(lambda m: m.group(0).split("](", 1)[0], text)  # link targets: check_links
    text = LINK_DEFINITION.sub("", text)
    tops = top_level(root)
    problems = []
    for name in sorted(set(PATH.findall(text))):
        if name.split("/", 1)[0] not in tops or name in EXTERNAL_PATHS:
            continue
        if "*" in name:
            if not glob.glob(os.path.join(root, name)):
                problems.append(f"{path}: names {name}, which matches no file")
        elif not os.path.exists(os.path.join(root, name)):
            problems.append(f"{path}: names {name}, which does not exist")
    return problems


def section(markdown, title):
    """The text under the first `## title` heading, up to the next heading of level 1 or 2."""
    match = re.search(rf"^## {re.escape(title)}\s*$(.*?)(?=^#{{1,2}} |\Z)", markdown, re.M | re.S)
    return match.group(1) if match else None


def shell_lines(markdown):
    """Commands of the ```bash blocks: comments and a leading `sudo ` removed, continuations joined."""
    lines = []
    for block in re.findall(r"^```(?:bash|sh|shell)\n(.*?)^```", markdown, re.M | re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            line = re.sub(r"^sudo\s+", "", line)
            if line and not line.startswith("#"):
                lines.append(re.sub(r"\s+", " ", line))
    return lines


def ci_lines(ci_text):
    return [re.sub(r"\s+", " ", line).strip() for line in ci_text.splitlines()
            if line.strip() and not line.lstrip().startswith(("#", "echo "))]


def check_quick_start(readme, ci_text):
    quick = section(readme, "Quick start")
    if quick is None:
        return ["README.md: no \"## Quick start\" section"]
    commands = shell_lines(quick)
    ci = ci_lines(ci_text)
    problems = []
    if TEST_COMMAND not in commands:
        problems.append(f"README.md: the quick start does not run the test suite with `{TEST_COMMAND}`")
    if TEST_COMMAND not in ci:
        problems.append(f".ci/run: does not run `{TEST_COMMAND}`")
    for command in commands:
        if command.startswith("scripts/devroot.sh") and command not in ci:
            problems.append(f"README.md: quick-start command `{command}` is not a line of .ci/run")
    return problems


def render_transformers_table(data):
    header = ["model type", "class"] + [
        f"transformers {c['transformers']}, {c['device']}" + (f" ({c['where']})" if c.get("where") else "")
        for c in data["columns"]
    ]
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for model in data["models"]:
        name = f"`{model['model_type']}`" + (f" ({model['name']})" if model.get("name") else "")
        cells = [name, f"`{model['class']}`"]
        if len(model["results"]) != len(data["columns"]):
            raise ValueError(f"{model['model_type']}: {len(model['results'])} results for {len(data['columns'])} columns")
        for result in model["results"]:
            if "max_diff" in result:
                cells.append(f"{result['max_diff']} ({result['logit_scale']})")
            else:
                cells.append(result["not_run"])
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def table_span(doc):
    begin = TABLE_BEGIN.search(doc)
    end = doc.find(TABLE_END)
    if not begin or end < begin.end():
        return None
    return begin.end() + 1, end


def check_transformers_table(root=ROOT, write=False):
    doc = read(TRANSFORMERS_DOC, root)
    span = table_span(doc)
    if span is None:
        return [f"{TRANSFORMERS_DOC}: no table markers ({TABLE_BEGIN.pattern} ... {TABLE_END})"]
    table = render_transformers_table(json.loads(read(TRANSFORMERS_DATA, root))) + "\n"
    if doc[span[0]:span[1]] == table:
        return []
    if write:
        with open(os.path.join(root, TRANSFORMERS_DOC), "w", encoding="utf-8") as f:
            f.write(doc[:span[0]] + table + doc[span[1]:])
        print(f"rewrote the table in {TRANSFORMERS_DOC}")
        return []
    return [f"{TRANSFORMERS_DOC}: the table differs from {TRANSFORMERS_DATA} (scripts/check_docs.py --write rewrites it)"]


def problems(root=ROOT, write=False):
    found = check_transformers_table(root, write)
    for path in doc_files(root):
        text = read(path, root)
        found += check_links(path, text, root) + check_paths(path, text, root)
    found += check_quick_start(read("README.md", root), read(".ci/run", root))
    return found


def main(argv=None, root=ROOT):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite the table in {TRANSFORMERS_DOC} from its data")
    args = parser.parse_args(argv)
    found = problems(root, write=args.write)
    for problem in found:
        print(problem)
    if found:
        print(f"check_docs: {len(found)} problem(s)")
        return 1
    print(f"check_docs: {len(doc_files(root))} files, links, paths, quick start and transformers table ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
