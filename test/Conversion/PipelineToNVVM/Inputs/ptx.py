"""Print the PTX that gpu-module-to-binary{format=isa} embeds in gpu.binary ops.

The assembly is an escaped MLIR string attribute on one line; FileCheck is
easier to use on the real PTX lines. Each object is preceded by a
`// gpu.binary @<name> <chip>` line so that tests can CHECK-LABEL on it.
"""
import re
import sys

BINARY = re.compile(r'gpu\.binary @(\w+)')
OBJECT = re.compile(r'#nvvm\.target<chip = "(\w+)"[^>]*>.*?assembly = "((?:[^"\\]|\\.)*)"')


def unescape(s):
    # MLIR prints non-printable bytes as \XX (two hex digits) and \\ / \".
    return re.sub(r'\\([0-9A-Fa-f]{2}|\\|")',
                  lambda m: m.group(1) if m.group(1) in ('\\', '"')
                  else chr(int(m.group(1), 16)), s)


def main():
    text = sys.stdin.read()
    found = False
    for line in text.splitlines():
        b = BINARY.search(line)
        if not b:
            continue
        for chip, asm in OBJECT.findall(line):
            found = True
            print(f"// gpu.binary @{b.group(1)} {chip}")
            print(unescape(asm))
    if not found:
        sys.exit("ptx.py: no gpu.binary with assembly in the input")


if __name__ == "__main__":
    main()
