#!/usr/bin/env python3
"""mcpg_whsig against Python's hmac module: random keys (16..64 bytes,
secrets padded and not), ids, timestamps and bodies (empty to 64 KiB and
past it, any byte), each signed by test_whsig and by hmac here, then the
signature verified by test_whsig, and refused once altered.

    whsig_vectors.py PATH/TO/test_whsig
"""
import base64
import hashlib
import hmac
import random
import subprocess
import sys


def run(exe, args, body):
    p = subprocess.run([exe, *args], input=body, capture_output=True, timeout=30)
    if p.returncode:
        sys.exit(f"{args[0]}: exit {p.returncode}: {p.stderr.decode(errors='replace')}")
    return p.stdout.decode().rstrip("\n")


def main():
    exe = sys.argv[1]
    rng = random.Random(20261202)  # fixed: a failure is reproducible
    sizes = [0, 1, 2, 3, 63, 64, 65, 1000, 65535, 65536, 70000]
    for i in range(40):
        key = rng.randbytes(rng.randint(16, 64))
        b64 = base64.b64encode(key).decode()
        whsec = "whsec_" + (b64 if i % 2 else b64.rstrip("="))
        msg_id = "msg_" + "".join(rng.choice("abcdefXYZ0123456789_-") for _ in range(rng.randint(1, 40)))
        ts = str(rng.randint(0, 4_000_000_000))
        body = rng.randbytes(sizes[i] if i < len(sizes) else rng.randint(0, 4096))
        want = "v1," + base64.b64encode(
            hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()).decode()
        got = run(exe, ["sign", whsec, msg_id, ts], body)
        if got != want:
            sys.exit(f"case {i}: key {len(key)} bytes, body {len(body)} bytes:\n got  {got}\n want {want}")
        ok = run(exe, ["verify", whsec, msg_id, ts, "v1,x " + want, ts, "300"], body)
        if ok != "ok":
            sys.exit(f"case {i}: its own signature refused: {ok}")
        flipped = want[:-2] + ("B" if want[-2] != "B" else "C") + want[-1]
        no = run(exe, ["verify", whsec, msg_id, ts, flipped, ts, "300"], body)
        if no != "webhook-signature: no v1 signature matches":
            sys.exit(f"case {i}: an altered signature: {no}")
    # A key outside 16..64 bytes is refused as the library says.
    for n, rc in ((15, "decode -13"), (65, "decode -13")):
        got = run(exe, ["sign", "whsec_" + base64.b64encode(bytes(n)).decode(), "a", "1"], b"")
        if got != rc:
            sys.exit(f"a {n}-byte key: {got}, want {rc}")
    print("whsig: 40 random cases agree with Python's hmac")


if __name__ == "__main__":
    main()
