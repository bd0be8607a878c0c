#!/usr/bin/python3
"""Checks that setup.sh's package list covers what the build and the plots use.

Every find_package / find_program / find_path (a header) in CMake and every third-party import in plots/ (and in the
Python tests) must be claimed by a package in setup.sh's PACKAGES list ("pkg  # kind:name").
Where dpkg is available, each claim is also verified on this machine: the file that satisfies
it must belong to the claimed package or to one of its dependencies.
"""
import ast
import glob
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Used when present, never installed (docs/architecture.md): not Debian packages on this machine.
NEVER_INSTALLED = {"cmake:CUDAToolkit", "cmake:NCCL", "cmake:CUDA", "header:nccl.h"}


def package_claims():
    text = open(os.path.join(ROOT, "setup.sh")).read()
    blocks = re.findall(r"^(?:TEST_)?PACKAGES=\((.*?)\n\)", text, re.S | re.M)
    assert blocks, "setup.sh has no PACKAGES=( ... ) list"
    claims = {}
    for line in "\n".join(blocks).splitlines():
        m = re.match(r"\s*([a-z0-9.+-]+)\s*#\s*(\S+)", line)
        if m:
            claims[m.group(2)] = m.group(1)
        elif line.strip():
            raise AssertionError(f"setup.sh PACKAGES line without a '# kind:name' claim: {line!r}")
    return claims


def cmake_needs():
    needs = set()
    files = glob.glob(os.path.join(ROOT, "**", "CMakeLists.txt"), recursive=True)
    files += glob.glob(os.path.join(ROOT, "**", "*.cmake"), recursive=True)
    for path in files:
        if "/build" in path[len(ROOT):]:
            continue
        text = re.sub(r"#[^\n]*", "", open(path).read())
        for name in re.findall(r"find_package\(\s*([A-Za-z0-9_.-]+)", text):
            needs.add(f"cmake:{name}")
        for args in re.findall(r"find_program\(\s*\w+\s+(?:NAMES\s+)?([A-Za-z0-9_.+-]+)", text):
            needs.add(f"program:{args}")
        for header in re.findall(r"find_path\(\s*\w+\s+(?:NAMES\s+)?([A-Za-z0-9_.+/-]+)", text):
            needs.add(f"header:{header}")
    return needs


def python_needs():
    needs = set()
    local = {os.path.splitext(os.path.basename(p))[0]
             for p in glob.glob(os.path.join(ROOT, "plots", "*.py"))}
    for path in glob.glob(os.path.join(ROOT, "plots", "*.py")) + glob.glob(
            os.path.join(ROOT, "tests", "**", "*.py"), recursive=True):
        tree = ast.parse(open(path).read(), path)
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in local:
                    needs.add(f"python:{top}")
    return needs


def dependencies(package, depth=3, seen=None):
    seen = set() if seen is None else seen
    if package in seen or depth < 0:
        return seen
    seen.add(package)
    out = subprocess.run(["dpkg-query", "-W", "-f=${Depends},${Pre-Depends}", package],
                         capture_output=True, text=True).stdout
    for dep in re.split(r"[,|]", out):
        name = dep.strip().split(" ")[0].split(":")[0]
        if name:
            dependencies(name, depth - 1, seen)
    return seen


def owner(path):
    out = subprocess.run(["dpkg", "-S", os.path.realpath(path)], capture_output=True, text=True)
    if out.returncode != 0:
        out = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True)
    return out.stdout.split(":")[0] if out.returncode == 0 else None


def provider_file(claim):
    kind, name = claim.split(":", 1)
    if kind == "program":
        return shutil.which(name, path="/usr/bin:/bin")
    if kind == "python":
        out = subprocess.run(["/usr/bin/python3", "-c", f"import {name}; print({name}.__file__)"],
                             capture_output=True, text=True)
        return out.stdout.strip() or None
    if kind == "header":
        path = os.path.join("/usr/include", name)
        return path if os.path.exists(path) else None
    if kind == "file":  # a glob: a file the build uses without finding it (a sanitizer runtime)
        hits = sorted(glob.glob(name))
        return hits[0] if hits else None
    if kind == "cmake":
        patterns = [f"{name}Config.cmake", f"{name.lower()}-config.cmake", f"Find{name}.cmake"]
        roots = glob.glob("/usr/lib/*/cmake") + ["/usr/lib/cmake", "/usr/share/cmake"] + glob.glob(
            "/usr/share/*/cmake")
        for root in roots:
            for pattern in patterns:
                hits = glob.glob(os.path.join(root, "**", pattern), recursive=True)
                if hits:
                    return hits[0]
    return None


def main():
    claims = package_claims()
    needs = (cmake_needs() | python_needs()) - NEVER_INSTALLED
    failures = [f"{need} is used but no package in setup.sh claims it"
                for need in sorted(needs) if need not in claims]
    if shutil.which("dpkg"):
        for claim, package in sorted(claims.items()):
            path = provider_file(claim)
            if path is None:
                failures.append(f"{claim}: nothing on this machine provides it (is {package} installed?)")
                continue
            found = owner(path)
            if found not in dependencies(package):
                failures.append(f"{claim}: {path} belongs to {found}, not to {package} or its dependencies")
    for failure in failures:
        print("FAIL:", failure)
    print(f"checked {len(needs)} uses against {len(claims)} packages")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
