#!/usr/bin/env python3
"""Comments that name the project's own files or functions must name ones that exist.

A comment cites `client/src/launch.cpp`, `plan/plan_state.h`, `plan_source.h` or
`slurm_gpu_choice.h's slurm_gpu_map`: the file must be in the checkout (any file whose path ends
so), and a name cited as "FILE's NAME" must appear in that file. Paths under folders this project
does not have (Slurm's `src/plugins/...`, another project's `rocclr/...`) and bare C file names
(`gres_common.c`, the kernel's `nv-procfs.c`) are other projects' and not checked.
Usage: comment_refs_test.py [ROOT]; exit 1 naming every stale reference.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
SOURCES = (".cpp", ".h", ".c", ".proto", ".sh", ".py", ".cmake", "CMakeLists.txt")
REF = re.compile(
    r"(?<![\w./-])((?:[\w-]+/)*[\w-]+\.(?:cmake|cpp|proto|md|sh|py|h|c))(?![\w-])(?:'s (\w+))?")
# Other projects' files that comments cite by bare name (Slurm's, the kernel's drivers' are .c and
# not checked); a bare name of any other kind must be a file of this checkout.
OTHERS = {"CPackSourceConfig.cmake", "copy.proto"}  # CMake's generated file; a usage example


def tracked_files():
    out = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True)
    if out.returncode == 0 and out.stdout:
        return [f for f in out.stdout.splitlines() if os.path.exists(os.path.join(ROOT, f))]
    files = []
    for folder, _, names in os.walk(ROOT):
        if "/.git" in folder or "/build" in folder:
            continue
        files += [os.path.relpath(os.path.join(folder, n), ROOT) for n in names]
    return files


def comment_text(path, line):
    if path.endswith((".sh", ".py", ".cmake", "CMakeLists.txt")):
        at = line.find("#")
    else:
        at = line.find("//")
    return line[at:] if at >= 0 else ""


def main():
    files = tracked_files()
    tops = {f.split("/", 1)[0] for f in files if "/" in f}
    ours = tuple(t + "/" for t in tops) + ("include/gpubind/", "src/plan/", "plan/", "gpubind/")
    basenames = {}
    for f in files:
        basenames.setdefault(os.path.basename(f), []).append(f)
    stale = []
    for path in files:
        if not path.endswith(SOURCES) or path.startswith(("tests/fuzz/corpus", "tests/golden")):
            continue
        try:
            text = open(os.path.join(ROOT, path), encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for ref, name in REF.findall(comment_text(path, line)):
                if name and not re.search(r"[_A-Z]", name):
                    name = ""  # an English word ("binder.proto's messages"), not a symbol
                if "/" in ref:
                    if not ref.startswith(ours):
                        continue  # another project's file
                    found = [f for f in files if f == ref or f.endswith("/" + ref)]
                else:
                    found = basenames.get(ref, [])
                    if not found and (ref.endswith(".c") or ref in OTHERS):
                        continue  # another project's file
                if not found:
                    stale.append(f"{path}:{number}: names {ref}, which is not in the checkout")
                    continue
                if name and not any(name in open(os.path.join(ROOT, f), encoding="utf-8",
                                                 errors="replace").read() for f in found):
                    stale.append(f"{path}:{number}: names {ref}'s {name}, which it does not have")
    for line in stale:
        print(line)
    print(f"{0 if stale else 1} passed, {1 if stale else 0} failed: "
          f"{len(stale)} stale reference(s) in comments")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
