#!/usr/bin/python3
"""Copy the ABI headers and grow the copy the way a later minor would: one
slot appended at the end of the descriptor, of the lifecycle table, of the
backend ops table and of a config schema entry, and MCPG_ABI_MINOR one higher.

usage: grow_abi.py SRC DST    (SRC is abi/mcpg; DST receives the grown *.h)

Fails, naming the header, when a struct's end is not found exactly once: the
growth test must fail loudly rather than prove nothing."""
import os
import re
import sys

# header -> [(the line that ends a struct, the slot appended before it)]
GROWTH = {
    "module.h": [
        ("} mcpg_module;", "    const char *grown_field;\n"),
        ("} mcpg_lifecycle_ops;", "    void (*grown_slot)(void *instance);\n"),
        ("} mcpg_config_field;", "    double grown_step;\n"),
    ],
    "kinds.h": [
        ("} mcpg_backend_ops;", "    void (*grown_slot)(void *instance, mcpg_call *call);\n"),
    ],
}


def grow(text, name):
    for end, slot in GROWTH.get(name, []):
        if text.count("\n" + end) != 1:
            sys.exit("grow_abi: %s: \"%s\" found %d times, want 1"
                     % (name, end, text.count("\n" + end)))
        text = text.replace("\n" + end, "\n" + slot + end)
    if name == "module.h":
        text, n = re.subn(r"(?m)^#define MCPG_ABI_MINOR (\d+)$",
                          lambda m: "#define MCPG_ABI_MINOR %d" % (int(m.group(1)) + 1), text)
        if n != 1:
            sys.exit("grow_abi: module.h: MCPG_ABI_MINOR found %d times, want 1" % n)
    return text


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    os.makedirs(dst, exist_ok=True)
    for name in sorted(os.listdir(src)):
        if not name.endswith(".h"):
            continue
        with open(os.path.join(src, name)) as f:
            text = grow(f.read(), name)
        tmp = os.path.join(dst, "." + name + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(dst, name))
    missing = [h for h in GROWTH if not os.path.exists(os.path.join(src, h))]
    if missing:
        sys.exit("grow_abi: no %s in %s" % (", ".join(missing), src))
    return 0


if __name__ == "__main__":
    sys.exit(main())
