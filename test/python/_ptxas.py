"""ptxas -v on a kernel's PTX, for the tests that pin registers and spills
(sm_90a). Each returns None where ptxas is not installed."""

import os
import re
import shutil
import subprocess
import tempfile


def report(ptx, arch="sm_90a"):
    """ptxas -v's report (its stderr) for ``ptx``."""
    if not shutil.which("ptxas"):
        return None
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        return subprocess.run(["ptxas", f"-arch={arch}", "-v", src, "-o", os.path.join(d, "k.o")],
                              capture_output=True, text=True, check=True).stderr


def spill_bytes(ptx):
    """Bytes of spill stores ptxas -v reports, over every function."""
    text = report(ptx)
    return None if text is None else sum(int(x) for x in
                                         re.findall(r"(\d+) bytes spill stores", text))


def registers(ptx):
    """Registers per thread ptxas -v reports (the first function's)."""
    text = report(ptx)
    return None if text is None else int(re.search(r"Used (\d+) registers", text).group(1))


def registers_and_spills(ptx):
    """(registers, spill store bytes), one ptxas run."""
    text = report(ptx)
    if text is None:
        return None
    return (int(re.search(r"Used (\d+) registers", text).group(1)),
            sum(int(x) for x in re.findall(r"(\d+) bytes spill stores", text)))
