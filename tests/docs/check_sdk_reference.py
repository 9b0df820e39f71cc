#!/usr/bin/env python3
"""The SDK reference leaves nothing out: doxygen, run with docs/sdk/Doxyfile
on the installed public headers, warns about no undocumented slot, struct
member, enum value, macro or function (and no malformed comment).

Enum values are read from doxygen's XML, since it does not warn about them.
The check proves itself live too: on a temp copy of the headers with one
struct member's and one enum value's comment removed, the same run must fail
and name both."""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

# The man pages add no warning the HTML would not give. The XML is read for
# enum values, which doxygen does not warn about when undocumented.
CHECK_OVERRIDES = "\nGENERATE_MAN = NO\nGENERATE_XML = YES\n"

# A struct member documented by a one-line trailing comment: `type name; /**< ... */`,
# and an enum value: `NAME = 1, /**< ... */`.
TRAILING_MEMBER_DOC = re.compile(r"^(\s+[A-Za-z_][^/=]*?\b([A-Za-z_]\w*);)\s*/\*\*<.*\*/\s*$")
TRAILING_ENUM_DOC = re.compile(r"^(\s+([A-Z][A-Z0-9_]*) = -?\w+,?)\s*/\*\*<.*\*/\s*$")


def run_doxygen(doxygen, doxyfile, abi_dir, include_dir, out_dir):
    """Runs doxygen on the two header folders into out_dir (HTML and XML);
    returns (its exit status, its warning lines)."""
    with open(doxyfile, encoding="utf-8") as f:
        config = f.read() + CHECK_OVERRIDES
    env = dict(os.environ, MCPG_SDK_ABI_DIR=abi_dir, MCPG_SDK_INCLUDE_DIR=include_dir,
               MCPG_SDK_REF_OUT=out_dir, MCPG_SDK_REF_VERSION="check")
    proc = subprocess.run([doxygen, "-"], input=config, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    warnings = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    return proc.returncode, warnings


def text_of(element):
    return "".join(element.itertext()).strip() if element is not None else ""


def header_line(header_dirs, header, name, from_line):
    """file:line of the first mention of name in header at or after from_line."""
    for folder in header_dirs:
        path = os.path.join(folder, os.path.basename(header))
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if number >= from_line and re.search(rf"\b{re.escape(name)}\b", line):
                    return f"{path}:{number}"
        return f"{path}:{from_line}"
    return f"{header}:{from_line}"


def undocumented_enum_values(xml_dir, header_dirs):
    """One warning line per enum value with neither a brief nor a detailed description."""
    found = []
    for xml_file in sorted(glob.glob(os.path.join(xml_dir, "*.xml"))):
        for enum in ET.parse(xml_file).getroot().iter("memberdef"):
            if enum.get("kind") != "enum" or enum.find("location") is None:
                continue
            location = enum.find("location")
            for value in enum.findall("enumvalue"):
                if text_of(value.find("briefdescription")) or text_of(value.find("detaileddescription")):
                    continue
                name = value.findtext("name")
                where = header_line(header_dirs, location.get("file"), name,
                                    int(location.get("line", "1")))
                found.append(f"{where}: enum value {name} is not documented.")
    return sorted(set(found))


def find_problems(args, abi_dir, include_dir, out):
    """Doxygen's warnings and the undocumented enum values of the headers in
    abi_dir and include_dir; returns (doxygen's exit status, problem lines)."""
    status, warnings = run_doxygen(args.doxygen, args.doxyfile, abi_dir, include_dir, out)
    return status, warnings + undocumented_enum_values(os.path.join(out, "xml"),
                                                       [abi_dir, include_dir])


def check_headers(args, tmp):
    status, warnings = find_problems(args, args.abi_dir, args.include_dir,
                                     os.path.join(tmp, "out"))
    for line in warnings:
        print(line)
    if status != 0 or warnings:
        print(f"FAIL: {len(warnings)} undocumented or malformed declaration(s) in the SDK "
              f"headers (doxygen exit status {status}); document each file:line above "
              f"(docs/sdk/Doxyfile)")
        return False
    print("ok: every public declaration of the SDK headers is documented")
    return True


def strip_first_trailing_doc(path, pattern):
    """Removes the first one-line trailing comment pattern matches in the
    header at path; returns (the name it documented, line number) or None."""
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    for index, line in enumerate(lines):
        match = pattern.match(line)
        if match:
            lines[index] = match.group(1) + "\n"
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(lines)
            return match.group(2), index + 1
    return None


def check_is_live(args, tmp):
    """On a copy of the headers with one struct member's and one enum value's
    comment removed, the check must fail and name both, at their lines."""
    abi_copy = os.path.join(tmp, "abi", "mcpg")
    include_copy = os.path.join(tmp, "include", "mcpg")
    shutil.copytree(args.abi_dir, abi_copy)
    shutil.copytree(args.include_dir, include_copy)
    victim = os.path.join(abi_copy, args.live_header)
    stripped = [strip_first_trailing_doc(victim, pattern)
                for pattern in (TRAILING_MEMBER_DOC, TRAILING_ENUM_DOC)]
    if None in stripped:
        print(f"FAIL: {args.live_header} needs a struct member and an enum value with a "
              f"one-line /**< */ comment for the check to remove")
        return False
    _, warnings = find_problems(args, abi_copy, include_copy, os.path.join(tmp, "live-out"))
    for name, line in stripped:
        named = [w for w in warnings if f"{args.live_header}:{line}:" in w and name in w]
        if not named:
            print(f"FAIL: with the comment of {name} ({args.live_header}:{line}) removed, "
                  f"the check did not name it; it said:")
            for w in warnings:
                print("  " + w)
            return False
        print(f"ok: removing the comment of {name} fails the check: {named[0]}")
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--doxygen", required=True)
    parser.add_argument("--doxyfile", required=True)
    parser.add_argument("--abi-dir", required=True)
    parser.add_argument("--include-dir", required=True)
    parser.add_argument("--live-header", default="json.h",
                        help="ABI header the liveness check removes two comments from")
    args = parser.parse_args()
    if not shutil.which(args.doxygen):
        print(f"FAIL: doxygen not found ({args.doxygen}); scripts/install-deps.sh installs it")
        return 1
    with tempfile.TemporaryDirectory(prefix="mcpg-sdkref-") as tmp:
        documented = check_headers(args, tmp)
        live = check_is_live(args, tmp)
    return 0 if documented and live else 1


if __name__ == "__main__":
    sys.exit(main())
