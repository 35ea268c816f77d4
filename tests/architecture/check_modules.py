#!/usr/bin/env python3
"""Checks the module rules of docs/architecture.md against the code, include by include and link by link.

The table of libraries in docs/architecture.md (between the module-table markers) is the one place the rules
are written: which folder each library is in, whether it may use LibTorch (and c10d), and which libraries it
may use. This script reads every source under runtime/ and entrypoint/ and every CMakeLists.txt there, and
fails, naming file:line, on
  - an #include "module/..." of a library the table does not allow,
  - a <torch/...>, <c10/...>, <ATen/...> include in a library the table declares torch-free,
  - a <torch/csrc/distributed/...> (c10d) include outside the library the table allows c10d,
  - an #include of a library that the including library does not link (directly or through PUBLIC links),
    which compiles today only because runtime/ is one include root,
  - a target_link_libraries arrow, or a LibTorch link, the table does not allow,
and checks that the table itself is sound (no cycle, no torch-free library that may use a torch one, every
library in CMake is in it) and that the Mermaid picture draws exactly the table's arrows.

Usage: check_modules.py [PROJECT_ROOT] [--diagram]   (--diagram prints the Mermaid block the table implies)
Only the Python 3 standard library; runs in well under a second.
"""
import pathlib
import re
import sys

DOC = "docs/architecture.md"
SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cc")
TORCH_PREFIXES = ("torch/", "c10/", "ATen/", "caffe2/")
C10D_PREFIX = "torch/csrc/distributed/"
ANY = "*"
UNDRAWN = "tp_common"

errors = []


def error(where, message):
    errors.append(f"{where}: {message}")


class Library:
    def __init__(self, name, folder, torch, c10d, may_use, doc_line):
        self.name, self.folder, self.torch, self.c10d = name, folder, torch, c10d
        self.may_use, self.doc_line = may_use, doc_line
        self.sources = []  # relative paths of the .cpp files CMake compiles into it
        self.links = {}  # linked name -> (visibility, "CMakeLists.txt:line")
        self.cmake = None  # where add_library/add_executable names it


def read_table(root):
    """The libraries of the module table in docs/architecture.md, by name."""
    text = (root / DOC).read_text()
    lines = text.splitlines()
    try:
        begin = lines.index("<!-- module-table -->")
        end = lines.index("<!-- /module-table -->")
    except ValueError:
        sys.exit(f"{DOC}: no <!-- module-table --> ... <!-- /module-table --> block")
    libraries = {}
    for number in range(begin + 1, end):
        cells = [cell.strip().replace("`", "") for cell in lines[number].strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("Library", "") or set(cells[0]) <= set("-: "):
            continue
        name, folder, torch, may_use = cells
        if torch not in ("no", "yes", "yes, c10d"):
            error(f"{DOC}:{number + 1}", f"LibTorch column of {name} is '{torch}', not one of: no, yes, yes, c10d")
        uses = {ANY} if may_use.strip() == "any" else set(re.findall(r"\b(?:tp_\w+|trainpoint)\b", may_use))
        libraries[name] = Library(name, folder, torch != "no", torch == "yes, c10d", uses, number + 1)
    if not libraries:
        sys.exit(f"{DOC}: the module table is empty")
    return libraries


def allowed(library, other):
    return ANY in library.may_use or other in library.may_use


def check_table(libraries):
    for library in libraries.values():
        where = f"{DOC}:{library.doc_line}"
        for used in sorted(library.may_use - {ANY}):
            if used not in libraries:
                error(where, f"{library.name} may use {used}, which is not in the table")
            elif not library.torch and libraries[used].torch:
                error(where, f"{library.name} is torch-free but may use {used}, which uses LibTorch")
    # The arrows must point one way: a cycle would make the layering meaningless.
    state = {}

    def visit(name, path):
        state[name] = "visiting"
        for used in sorted(libraries[name].may_use & libraries.keys()):
            if state.get(used) == "visiting":
                cycle = path[path.index(used):] + [used]
                error(f"{DOC}:{libraries[name].doc_line}", "the table has a cycle: " + " -> ".join(cycle))
            elif used not in state:
                visit(used, path + [used])
        state[name] = "done"

    for name in sorted(libraries):
        if name not in state:
            visit(name, [name])


def strip_cmake_comments(text):
    return "\n".join(re.sub(r"#.*", "", line) for line in text.splitlines())


def read_cmake(root, libraries):
    """Fills each library's sources and links from runtime/*/CMakeLists.txt and entrypoint/CMakeLists.txt."""
    files = sorted(root.glob("runtime/*/CMakeLists.txt")) + [root / "entrypoint/CMakeLists.txt"]
    for path in files:
        relative = path.relative_to(root)
        text = strip_cmake_comments(path.read_text())

        def line_of(match):
            return f"{relative}:{text.count(chr(10), 0, match.start()) + 1}"

        for match in re.finditer(r"\badd_(library|executable)\(\s*([\w-]+)([^)]*)\)", text):
            name = match.group(2)
            if name not in libraries:
                error(line_of(match), f"library {name} is not in the module table of {DOC}")
                continue
            library = libraries[name]
            library.cmake = line_of(match)
            for token in match.group(3).split():
                if token.endswith(SOURCE_SUFFIXES):
                    library.sources.append(str(relative.parent / token))
        for match in re.finditer(r"\btarget_link_libraries\(\s*([\w-]+)([^)]*)\)", text):
            name = match.group(1)
            if name not in libraries:
                continue  # named above, at its add_library
            visibility = "PUBLIC"  # the plain signature is transitive too
            for token in match.group(2).split():
                if token in ("PUBLIC", "PRIVATE", "INTERFACE"):
                    visibility = token
                else:
                    libraries[name].links[token] = (visibility, line_of(match))
        for match in re.finditer(r"\btrainpoint_use_torch\(\s*([\w-]+)\s*\)", text):
            if match.group(1) in libraries:
                libraries[match.group(1)].links["trainpoint_torch"] = ("PUBLIC", line_of(match))
    for library in libraries.values():
        if library.cmake is None:
            error(f"{DOC}:{library.doc_line}", f"{library.name} is in the table but no CMakeLists.txt defines it")


def check_links(libraries):
    for library in libraries.values():
        for linked, (_, where) in sorted(library.links.items()):
            if linked in ("trainpoint_torch", "trainpoint_torch_pch"):
                if not library.torch:
                    error(where, f"module {library.name} links LibTorch, but the design declares it torch-free ({DOC})")
            elif linked in libraries and not allowed(library, linked):
                error(where, f"module {library.name} links {linked}, which the design does not allow ({DOC})")


def reachable_includes(libraries, name):
    """The libraries whose headers `name` can include: its links, and their PUBLIC links, transitively."""
    seen, stack = set(), [name]
    while stack:
        current = libraries[stack.pop()]
        for linked, (visibility, _) in current.links.items():
            if linked in libraries and linked not in seen and (current.name == name or visibility != "PRIVATE"):
                seen.add(linked)
                stack.append(linked)
    return seen


def owners(root, libraries):
    """Which library each source file under runtime/ and entrypoint/ belongs to.

    A .cpp belongs to the library CMake compiles it into; a header to the library of the .cpp of the same name
    beside it, or, with none, to the folder's main library (tp_<folder>; the entrypoint's is trainpoint)."""
    owner = {}
    for library in libraries.values():
        for source in library.sources:
            owner[source] = library.name
    main = {library.folder: library.name for library in libraries.values()
            if library.name in (f"tp_{library.folder}", "trainpoint")}
    paths = sorted(p for folder in ("runtime", "entrypoint") for p in (root / folder).rglob("*")
                   if p.suffix in SOURCE_SUFFIXES)
    for path in paths:
        relative = str(path.relative_to(root))
        if relative in owner:
            continue
        if path.suffix in (".cpp", ".cc"):
            error(relative, "this source is in no library of runtime/*/CMakeLists.txt or entrypoint/CMakeLists.txt")
            continue
        twin = str(path.with_suffix(".cpp").relative_to(root))
        folder = path.parent.name
        if twin in owner:
            owner[relative] = owner[twin]
        elif folder in main:
            owner[relative] = main[folder]
        else:
            error(relative, f"no library owns this header: folder {folder} has no library tp_{folder} in {DOC}")
    return owner


INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def check_includes(root, libraries, owner):
    """Checks every include; returns the arrows (library, library) that includes draw."""
    used = set()
    runtime_folders = {p.name for p in (root / "runtime").iterdir() if p.is_dir()}
    reach = {name: reachable_includes(libraries, name) for name in libraries}
    for relative, name in sorted(owner.items()):
        library = libraries[name]
        for number, line in enumerate((root / relative).read_text().splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            where, (delimiter, header) = f"{relative}:{number}", match.groups()
            if delimiter == "<":
                if header.startswith(C10D_PREFIX) and not library.c10d:
                    error(where, f"module {name} includes <{header}> (c10d), which the design allows only in "
                                 f"{', '.join(n for n, l in sorted(libraries.items()) if l.c10d)}; "
                                 f"reach c10d through dist/c10d_compat.h and the Communicator ({DOC})")
                elif header.startswith(TORCH_PREFIXES) and not library.torch:
                    error(where, f"module {name} includes <{header}>, but the design declares {name} "
                                 f"torch-free ({DOC})")
                continue
            folder = header.split("/", 1)[0]
            if "/" not in header or folder not in runtime_folders:
                continue  # a header beside the file (entrypoint's own) or not ours
            target = owner.get(f"runtime/{header}")
            if target is None:
                error(where, f"module {name} includes {header}, which is no file of runtime/")
                continue
            if target == name:
                continue
            used.add((name, target))
            if not allowed(library, target):
                error(where, f"module {name} includes {header} ({target}), which the design does not allow "
                             f"({DOC}: {name} may use {', '.join(sorted(library.may_use)) or 'nothing'})")
            elif target not in reach[name]:
                error(where, f"module {name} includes {header} ({target}) but does not link {target} "
                             f"({library.cmake}); it compiles only because runtime/ is one include root")
    return used


def drawn_arrows(libraries):
    """The table's arrows the picture draws: all but those into tp_common, which every library may use."""
    return {(library.name, used) for library in libraries.values()
            for used in library.may_use - {ANY, UNDRAWN}}


def diagram(libraries):
    """The Mermaid block the table implies: every library (a folder of two as a box) and the drawn arrows."""
    out = ["```mermaid", "flowchart TD"]
    folders = {}
    for library in libraries.values():
        folders.setdefault(library.folder, []).append(library.name)
    for folder, names in folders.items():
        if len(names) > 1:
            out += [f'  subgraph {folder} ["{folder}/"]'] + [f"    {name}" for name in names] + ["  end"]
        else:
            out.append(f"  {names[0]}")
    out += [f"  {source} --> {target}" for source, target in sorted(drawn_arrows(libraries))]
    out.append("```")
    return "\n".join(out)


def check_diagram(root, libraries):
    """The picture in the doc must be the one the table implies, so the two cannot drift apart."""
    blocks = re.findall(r"^```mermaid\n.*?^```$", (root / DOC).read_text(), re.S | re.M)
    expected = diagram(libraries)
    if blocks == [expected]:
        return
    arrow = re.compile(r"^\s*(\w+)\s*-->\s*(\w+)\s*$", re.M)
    drawn = {edge for block in blocks for edge in arrow.findall(block)}
    table = drawn_arrows(libraries)
    for source, target in sorted(drawn - table):
        error(DOC, f"the picture draws {source} --> {target}, which the module table does not allow")
    for source, target in sorted(table - drawn):
        error(DOC, f"the picture lacks {source} --> {target}, which the module table allows")
    error(DOC, "the picture is not the one the module table implies: paste the block that "
               "`python3 tests/architecture/check_modules.py --diagram` prints over it")


def unused_arrows(libraries, included):
    """Arrows the table allows that no link or include draws today: printed as notes, not failures."""
    used = included | {(library.name, linked) for library in libraries.values()
                       for linked in library.links if linked in libraries}
    return sorted((library.name, other) for library in libraries.values()
                  for other in library.may_use - {ANY} if (library.name, other) not in used)


def main():
    arguments = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = pathlib.Path(arguments[0] if arguments else pathlib.Path(__file__).resolve().parents[2])
    libraries = read_table(root)
    if "--diagram" in sys.argv:
        print(diagram(libraries))
        return 0
    check_table(libraries)
    read_cmake(root, libraries)
    check_links(libraries)
    owner = owners(root, libraries)
    included = check_includes(root, libraries, owner)
    check_diagram(root, libraries)
    for source, target in unused_arrows(libraries, included):
        print(f"note: {DOC} allows {source} --> {target}, which nothing uses today")
    if errors:
        print("\n".join(errors))
        print(f"{len(errors)} module rule(s) broken; the rules and the picture are in {DOC}")
        return 1
    print(f"{len(owner)} files and {len(libraries)} libraries keep the module rules of {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
