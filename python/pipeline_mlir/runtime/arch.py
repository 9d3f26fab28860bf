"""Which GPU a code object is for, and whether a device can run it.

cubin: a 64-bit ELF with ``e_machine == EM_CUDA (190)``. The SM number sits
in ``e_flags``: bits 0..7 for ELF ABI version < 8 (CUDA <= 12.x ptxas),
bits 8..15 for ABI version >= 8 (CUDA 12.8+/13.x ptxas; e.g. 0x6005a04 is
sm_90, 0x6006402 sm_100). The ``a``/``f`` suffix is not in ``e_flags`` for
ABI 8; ptxas records its command line (``-arch sm_90a``) in the
``.note.nv.tkinfo`` note, and ``.nv.compat`` attribute 0x09 is 1 for the
arch-specific (``a``) targets. We read the note first, then the attribute.

PTX: the ``.target sm_XX[a|f]`` directive.

Compatibility (what the driver would do, but with a message that says
which chip to rebuild for):
  * ``sm_XYa`` runs only on compute capability X.Y exactly;
  * ``sm_XYf`` and plain ``sm_XY`` cubins run on X.Z with Z >= Y (same major);
  * plain/``f`` PTX is JIT-compiled for any device >= X.Y (same family for ``f``).
"""

import re
import struct
from dataclasses import dataclass

from .errors import ArchMismatchError

EM_CUDA = 190
_CHIP_NAMES = {9: "Hopper", 10: "Blackwell (datacenter)", 11: "Blackwell (Thor)",
               12: "Blackwell (consumer)", 8: "Ampere/Ada"}


@dataclass(frozen=True)
class Target:
    """An SM target: major, minor and suffix ('' , 'a' or 'f')."""

    major: int
    minor: int
    suffix: str = ""
    kind: str = "cubin"  # or "ptx"

    @property
    def sm(self):
        return f"sm_{self.major}{self.minor}{self.suffix}"

    @property
    def cc(self):
        return (self.major, self.minor)

    def __str__(self):
        return self.sm


def parse_sm(text):
    """'sm_90a' -> Target(9, 0, 'a')."""
    m = re.fullmatch(r"(?:sm_|compute_)?(\d+)(\d)([af]?)", text.strip())
    if not m:
        raise ValueError(f"not an SM name: {text!r}")
    return Target(int(m.group(1)), int(m.group(2)), m.group(3))


def _sections(data):
    """{name: bytes} of a 64-bit little-endian ELF."""
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff == 0 or shnum == 0 or shoff + shnum * shentsize > len(data):
        return {}
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
            for i in range(shnum)]
    stroff = hdrs[shstrndx][4]
    out = {}
    for h in hdrs:
        end = data.find(b"\0", stroff + h[0])
        name = data[stroff + h[0]:end].decode(errors="replace")
        if h[1] != 8:  # not SHT_NOBITS
            out[name] = data[h[4]:h[4] + h[5]]
    return out


def cubin_target(data):
    """The Target of a cubin (bytes). Raises ValueError if it is not one."""
    data = bytes(data)
    if len(data) < 64 or data[:4] != b"\x7fELF":
        raise ValueError("not a cubin: missing the ELF magic")
    if data[4] != 2 or data[5] != 1:
        raise ValueError("not a cubin: expected a 64-bit little-endian ELF")
    machine = struct.unpack_from("<H", data, 18)[0]
    if machine != EM_CUDA:
        raise ValueError(f"not a cubin: e_machine is {machine}, expected EM_CUDA ({EM_CUDA})")
    abi = data[8]
    flags = struct.unpack_from("<I", data, 48)[0]
    sm = (flags >> 8) & 0xFF if abi >= 8 else flags & 0xFF
    if sm < 10:
        raise ValueError(f"cubin e_flags {flags:#x} (ABI {abi}) hold no SM number")
    major, minor = divmod(sm, 10)
    suffix = ""
    secs = _sections(data)
    note = secs.get(".note.nv.tkinfo", b"")
    m = re.search(rb"-arch[ =]+sm_(\d+)([af]?)", note)
    if m and int(m.group(1)) == sm:
        suffix = m.group(2).decode()
    elif abi < 8 and flags & 0x8 and sm >= 90:  # EF_CUDA_ACCELERATORS (older ABI)
        suffix = "a"
    else:
        compat = secs.get(".nv.compat", b"")
        for off in range(0, len(compat) - 3, 4):
            fmt, attr, val = compat[off], compat[off + 1], struct.unpack_from("<H", compat, off + 2)[0]
            if fmt == 2 and attr == 0x09 and val == 1:
                suffix = "a"
    return Target(major, minor, suffix, "cubin")


def ptx_target(text):
    """The Target of PTX source (str or bytes)."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode(errors="replace")
    m = re.search(r"^\s*\.target\s+sm_(\d+)(\d)([af]?)\b", text, re.M)
    if not m:
        raise ValueError("PTX has no `.target sm_XX` directive")
    return Target(int(m.group(1)), int(m.group(2)), m.group(3), "ptx")


def image_target(image):
    """Target of a cubin (bytes starting with the ELF magic) or PTX text."""
    if isinstance(image, str):
        return ptx_target(image)
    if bytes(image[:4]) == b"\x7fELF":
        return cubin_target(image)
    return ptx_target(image)


def can_run(target, cc):
    """True if a device of compute capability `cc` can run `target`."""
    major, minor = cc
    if target.suffix == "a":
        return (major, minor) == (target.major, target.minor)
    if target.kind == "cubin" or target.suffix == "f":
        return major == target.major and minor >= target.minor
    return (major, minor) >= (target.major, target.minor)


def check_compatible(target, cc, device_name="the device", what="code object"):
    """Raise ArchMismatchError with a rebuild hint if `cc` cannot run `target`."""
    if can_run(target, cc):
        return
    chip = _CHIP_NAMES.get(target.major, "another architecture")
    dev_chip = _CHIP_NAMES.get(cc[0], "another architecture")
    hint = f"sm_{cc[0]}{cc[1]}a" if cc[0] >= 9 else f"sm_{cc[0]}{cc[1]}"
    raise ArchMismatchError(
        f"{what} was built for {target.sm} ({chip}, compute capability "
        f"{target.major}.{target.minor}) but {device_name} has compute "
        f"capability {cc[0]}.{cc[1]} ({dev_chip}); rebuild it with "
        f"chip=\"{hint}\" (compiler.to_cubin(module, chip=\"{hint}\"))")
