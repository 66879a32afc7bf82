"""The documents say what the tree holds: citations resolve, nothing points
outside the repository, folder READMEs list their folders, tables of contents
match their headings, the measured numbers are generated.

The rules (docs/README.md#citing-the-documents says how to cite):

- A citation is a markdown file's path, `#` and an anchor
  (`RFC.md#per-slice-fills`) anywhere in a tracked text file (code, tests,
  documents; the path from the repository's root, or from the citing file's
  folder), or a markdown link to one (`[text](../../RFC.md#union)`, `(#union)`
  within a file) in a markdown file (from the file's folder). Its anchor must exist in the
  target: an explicit `<a id="anchor"></a>` line, or a heading's GitHub slug.
  Section numbers are not citations: "RFC.md#sparse-at-dense" or "RFC.md#products" fails.
- A document (a tracked `.md` file) cites no issue number ("issue 18") and no
  path outside the repository (a link or a backticked path that climbs out
  of it with `../`).
- A folder README *lists its folder* when it has a table whose first header
  cell is file, path, script, module or folder, or bullet items that start
  with backticked names. The names a listing gives (a table's first column,
  a bullet's leading backticked names; `name/` for a folder, globs allowed)
  must exist in the folder, and every tracked direct child of the folder
  (files and folders, but README.md, `__init__.py` and dotfiles) must be
  named somewhere in the README. The top-level README's layout table is
  checked the other way: every path it names exists.
- README.md, RFC.md and docs/design.md have a table of contents between
  `<!-- BEGIN TOC -->` and `<!-- END TOC -->`: one entry per `##` and `###`
  heading outside code blocks (but "Contents"), in order, indented two spaces
  per level below `##`, `- [heading](#anchor)`. Every such heading of RFC.md
  and docs/design.md has an explicit anchor (stable when sections move or
  are renamed). `python test/crosscutting/test_docs.py --write-toc` rewrites
  the three tables of contents from the headings.
"""
from __future__ import annotations

import fnmatch
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

# Documents do not depend on the device: the CPU pass reads them once.
pytestmark = pytest.mark.cpu_only("documents, not devices")

ROOT = Path(__file__).resolve().parents[2]
TOC_FILES = ("README.md", "RFC.md", "docs/design.md")
STABLE_ANCHOR_FILES = ("RFC.md", "docs/design.md")
TOC_BEGIN, TOC_END = "<!-- BEGIN TOC -->", "<!-- END TOC -->"
TEXT_SUFFIXES = {".py", ".c", ".h", ".cpp", ".cu", ".cuh", ".md", ".yaml", ".yml", ".txt",
                 ".toml", ".ini", ".cfg", ".sh", ".rst", ""}
LISTING_HEADERS = {"file", "path", "script", "module", "folder"}
NOT_LISTED = {"README.md", "__init__.py"}

ANCHOR_LINE = re.compile(r'^<a id="([A-Za-z0-9_-]+)"></a>\s*$')
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
PLAIN_CITATION = re.compile(r"(?<![\w/.\-])((?:[\w.\-]+/)*[\w.\-]+\.md)#([A-Za-z0-9_-]+)")
LINK_CITATION = re.compile(r"\]\(([^)\s#]*)#([A-Za-z0-9_-]+)\)")
# "RFC.md#sparse-at-dense", "RFC.md#products", "RFC.md#batched-compressed", "(RFC.md\n# RFC.md#per-slice-fills)": numbers
# name no stable place. The public proposal's points ("RFC point 9", "the public
# RFC's 10.2 form") are another document's numbering and allowed.
NUMBERED_CITATION = re.compile(
    r"(?<!public )\bRFC(?:\.md)?(?:[ \t]*\n[ \t]*(?:#|//|\*)?)?[ \t]*(?:§|sections?[ \t]+)?\d+(?:\.\d+)*\b")
ISSUE = re.compile(r"\bissues?[ \t]+#?\d+|\bissue[ \t]+\d+'s\b", re.IGNORECASE)


# ---- reading the tree ---------------------------------------------------------------

def tracked_files() -> list[Path]:
    """Every file git tracks (untracked build outputs and caches never count);
    without git, every file under the root but the ignored folders."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True).stdout.decode()
        return sorted(ROOT / p for p in out.split("\0") if p and (ROOT / p).is_file())
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", ".venv-cuda", "build", "__pycache__"}
        return sorted(p for p in ROOT.rglob("*") if p.is_file()
                      and not skip.intersection(p.relative_to(ROOT).parts))


def text_files() -> list[Path]:
    return [p for p in tracked_files() if p.suffix in TEXT_SUFFIXES and _is_text(p)]


def _is_text(path: Path) -> bool:
    try:
        path.read_text(encoding="utf-8")
        return True
    except (UnicodeDecodeError, OSError):
        return False


def markdown_lines(text: str):
    """(line number, line) of the lines outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped,
    spaces to hyphens (duplicates get -1, -2, ... in `anchors`).

    >>> github_slug("Sparse @ dense")
    'sparse--dense'
    """
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(text: str):
    """(level, text, anchor) of every heading outside code blocks; the anchor
    is the explicit `<a id>` on the line above, else the GitHub slug."""
    out, seen, previous = [], {}, None
    for _, line in markdown_lines(text):
        match = HEADING.match(line)
        if match:
            title = match.group(2)
            slug = github_slug(title)
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            explicit = ANCHOR_LINE.match(previous or "")
            anchor = explicit.group(1) if explicit else slug + (f"-{count}" if count else "")
            out.append((len(match.group(1)), title, anchor, bool(explicit)))
        previous = line
    return out


def anchors(path: Path) -> set[str]:
    text = path.read_text()
    found = {m.group(1) for _, line in markdown_lines(text) if (m := ANCHOR_LINE.match(line))}
    found |= {anchor for _, _, anchor, _ in headings(text)}
    # a heading with an explicit anchor keeps its slug too (GitHub makes both)
    found |= {github_slug(title) for _, title, _, _ in headings(text)}
    return found


def resolve(target: str, citing: Path) -> Path | None:
    """The cited file: from the citing file's folder, or from the root."""
    for base in (citing.parent, ROOT):
        candidate = (base / target).resolve() if target else citing
        if candidate.is_file():
            return candidate
    return None


# ---- (a) citations resolve --------------------------------------------------------

def citations():
    """(citing file, line, target, anchor) of every citation in the tree."""
    for path in text_files():
        text = path.read_text()
        for number, line in enumerate(text.splitlines(), 1):
            for match in PLAIN_CITATION.finditer(line):
                yield path, number, match.group(1), match.group(2)
            if path.suffix == ".md":
                for match in LINK_CITATION.finditer(line):
                    yield path, number, match.group(1), match.group(2)


def test_every_citation_resolves():
    cache, bad, count = {}, [], 0
    for path, number, target, anchor in citations():
        count += 1
        cited = resolve(target, path)
        where = f"{path.relative_to(ROOT)}:{number}: {target}#{anchor}"
        if cited is None:
            bad.append(f"{where} (no such file)")
            continue
        if cited not in cache:
            cache[cited] = anchors(cited)
        if anchor not in cache[cited]:
            bad.append(f"{where} (no such anchor)")
    assert count > 0, "no citation found: the scan is broken"
    assert not bad, "citations that resolve to nothing:\n" + "\n".join(bad)


def test_no_citation_by_section_number():
    bad = []
    for path in text_files():
        text = path.read_text()
        for match in NUMBERED_CITATION.finditer(text):
            number = text.count("\n", 0, match.start()) + 1
            bad.append(f"{path.relative_to(ROOT)}:{number}: {match.group(0)!r}")
    assert not bad, ("section numbers are no anchors; cite RFC.md#<name> or "
                     "docs/design.md#<name>:\n" + "\n".join(bad))


# ---- (b) documents stay inside the repository -------------------------------------

def outside_references(path: Path):
    """Issue numbers, and links or backticked paths that leave the repository."""
    for number, line in markdown_lines(path.read_text()):
        for match in ISSUE.finditer(line):
            yield number, match.group(0)
        targets = re.findall(r"\]\(([^)\s]+)\)", line) + re.findall(r"`([^`\s]*\.\./[^`\s]*)`", line)
        for target in targets:
            if re.match(r"[a-z]+://|mailto:|#", target):
                continue
            resolved = (path.parent / target.split("#")[0]).resolve()
            if not resolved.is_relative_to(ROOT):
                yield number, target


def test_documents_cite_no_issue_and_nothing_outside():
    bad = [f"{p.relative_to(ROOT)}:{n}: {what}" for p in tracked_files() if p.suffix == ".md"
           for n, what in outside_references(p)]
    assert not bad, "documents must stand alone:\n" + "\n".join(bad)


# ---- (c) folder READMEs list their folders ----------------------------------------

def file_like(token: str) -> bool:
    return bool(re.fullmatch(r"[\w.*\-]+(/[\w.*\-]+)*/?", token)) and (
        token.endswith("/") or "." in token.strip("."))


def readme_listing(text: str):
    """(listed names, every name mentioned, is a listing). Listed: a file
    table's first column, a bullet's leading backticked names."""
    listed, mentioned, is_listing = set(), set(), False
    lines = [line for _, line in markdown_lines(text)]
    table_header = None
    for line in lines:
        mentioned |= {t for t in re.findall(r"`([^`]+)`", line) if file_like(t)}
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if table_header is None:
                table_header = cells[0].lower()
                continue
            if table_header in LISTING_HEADERS and not set(cells[0]) <= set("-: "):
                is_listing = True
                names = re.findall(r"`([^`]+)`", cells[0]) or [cells[0]]
                names = [n for n in names if file_like(n)]
                listed |= set(names)
                mentioned |= set(names)
            continue
        table_header = None
        bullet = re.match(r"^[-*] ((?:`[^`]+`(?:,? (?:and )?|, )?)+)", line)
        if bullet:
            names = [n for n in re.findall(r"`([^`]+)`", bullet.group(1)) if file_like(n)]
            if names:
                is_listing = True
                listed |= set(names)
    return listed, mentioned, is_listing


def children(folder: Path, tracked: list[Path]) -> set[str]:
    out = set()
    for path in tracked:
        if path.parent == folder:
            out.add(path.name)
        elif folder in path.parents:
            out.add(path.relative_to(folder).parts[0] + "/")
    return {c for c in out if c not in NOT_LISTED and not c.startswith(".")}


def named(child: str, names: set[str]) -> bool:
    bare = child.rstrip("/")
    return any(fnmatch.fnmatch(child, n) or fnmatch.fnmatch(bare, n.rstrip("/")) for n in names)


def listing_readmes() -> list[Path]:
    """The folder READMEs (not the top-level one) that list their folder."""
    return [p for p in tracked_files() if p.name == "README.md" and p.parent != ROOT
            and readme_listing(p.read_text())[2]]


def readme_mismatches(readme: Path, tracked: list[Path]) -> list[str]:
    listed, mentioned, is_listing = readme_listing(readme.read_text())
    if not is_listing:
        return []
    folder = readme.parent
    present = children(folder, tracked)
    problems = []
    for name in sorted(listed):
        exists = (any(fnmatch.fnmatch(c.rstrip("/"), name.rstrip("/")) for c in present)
                  if "*" in name else (folder / name).exists() or (ROOT / name).exists())
        if not exists:
            problems.append(f"lists {name!r}, which is not there")
    for child in sorted(present):
        if not named(child, mentioned):
            problems.append(f"does not name {child!r}")
    return problems


@pytest.mark.parametrize("readme", listing_readmes(), ids=lambda p: str(p.parent.relative_to(ROOT)))
def test_folder_readme_lists_its_folder(readme):
    problems = readme_mismatches(readme, tracked_files())
    assert not problems, f"{readme.relative_to(ROOT)}: " + "; ".join(problems)


def test_file_listings_are_recognised():
    """The parser finds the listings of READMEs known to hold one (a table of
    files, a table of scripts, a bulleted list), so a broken parser cannot
    pass every README by recognising none."""
    found = {str(p.parent.relative_to(ROOT)) for p in listing_readmes()}
    assert {"aten_ext/cpu", "examples", "bench"} <= found, found


def test_top_level_layout_names_existing_paths():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Layout of the repository", 1)[1].split("\n## ", 1)[0]
    missing = []
    for line in section.splitlines():
        if line.startswith("|"):
            first = line.strip("|").split("|")[0]
            missing += [p for p in re.findall(r"`([^`]+)`", first) if not (ROOT / p).exists()]
    assert "|" in section and not missing, f"README's layout names missing paths: {missing}"


# ---- (d) tables of contents and stable anchors ------------------------------------

def expected_toc(text: str) -> str:
    entries = [f"{'  ' * (level - 2)}- [{title}](#{anchor})"
               for level, title, anchor, _ in headings(text)
               if level in (2, 3) and title != "Contents"]
    return "\n".join(entries)


def current_toc(text: str) -> str | None:
    if TOC_BEGIN not in text or TOC_END not in text:
        return None
    return text.split(TOC_BEGIN, 1)[1].split(TOC_END, 1)[0].strip("\n")


@pytest.mark.parametrize("name", TOC_FILES)
def test_table_of_contents_matches_headings(name):
    text = (ROOT / name).read_text()
    want = expected_toc(text)
    assert current_toc(text) == want, (
        f"{name}'s table of contents differs from its headings "
        f"(python test/crosscutting/test_docs.py --write-toc); it should read:\n{want}")


@pytest.mark.parametrize("name", STABLE_ANCHOR_FILES)
def test_every_section_has_a_stable_anchor(name):
    found = headings((ROOT / name).read_text())
    missing = [title for level, title, _, explicit in found
               if level in (2, 3) and title != "Contents" and not explicit]
    ids = re.findall(r'^<a id="([^"]+)"></a>', (ROOT / name).read_text(), re.MULTILINE)
    duplicates = sorted({a for a in ids if ids.count(a) > 1})
    assert not missing and not duplicates, (
        f"{name}: headings without an explicit anchor {missing}; duplicate anchors {duplicates}")


def test_op_table_markers_present_once():
    """The codegen writes the op table between these markers and skips the
    file silently when they are gone."""
    text = (ROOT / "RFC.md").read_text()
    for marker in ("<!-- BEGIN GENERATED OP TABLE -->", "<!-- END GENERATED OP TABLE -->"):
        assert text.count(marker) == 1, marker


# ---- measured numbers are generated, never hand-copied ----------------------------

def test_bench_markdown_is_generated_from_the_json():
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_for_docs", ROOT / "bench" / "bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results = ROOT / "bench" / "results"
    data = json.loads((results / "latest.json").read_text())
    assert (results / "latest.md").read_text() == bench.results_markdown(data), (
        "bench/results/latest.md is not what bench.py writes from latest.json: rerun "
        "`make bench`, never edit it")


def test_generated_readme_names_every_op_with_an_autograd_twin():
    """aten_ext/ops/generated/README.md's op table gives a derivative (the
    inputs of the op's `<op>_autograd` twin) to exactly the ops of the
    registry that have such a twin and an Autograd kernel."""
    import torch
    import torch_sparsefill  # noqa: F401  (loads the registry)
    ops = {name.split("::")[1].split(".")[0] for name in torch._C._dispatch_get_all_op_names()
           if name.startswith("sparsefill::")}
    with_twin = {op for op in ops if f"{op}_autograd" in ops and
                 torch._C._dispatch_has_kernel_for_dispatch_key(f"sparsefill::{op}", "Autograd")}
    text = (ROOT / "aten_ext" / "ops" / "generated" / "README.md").read_text()
    named = set()
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`") and cells[3] and \
                not cells[3].startswith("Python"):
            named.add(cells[0].strip("`"))
    assert with_twin, "the registry scan is broken"
    assert named == with_twin, (f"README gives a twin to {sorted(named - with_twin)}, which have "
                                f"none, and misses {sorted(with_twin - named)}")


def write_tocs() -> None:
    for name in TOC_FILES:
        path = ROOT / name
        text = path.read_text()
        if current_toc(text) is None:
            print(f"{name}: no {TOC_BEGIN} ... {TOC_END} block; add one under '## Contents'")
            continue
        head, rest = text.split(TOC_BEGIN, 1)
        _, tail = rest.split(TOC_END, 1)
        path.write_text(f"{head}{TOC_BEGIN}\n{expected_toc(text)}\n{TOC_END}{tail}")
        print(f"wrote {name}'s table of contents")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-toc"]:
        write_tocs()
    else:
        print("usage: python test/crosscutting/test_docs.py --write-toc")
