"""The passes' diagnostics as a user of the Python API reads them.

Running a pass pipeline from Python raises ``mlir.ir.MLIRError``, whose text
starts with the pipeline's name and carries a "see current operation:" dump
of generic IR under every error; warnings (a producer without
``producer_tail`` where nothing can arrive late, a copy under a run-time
condition) go to stderr, where a notebook or a test runner loses them.
:func:`run` runs a pass manager and turns that into:

- a :class:`CompileError` whose first line is the first error at the user's
  ``file:line:col`` with the rule and the fix, then its notes (each at its
  own location), then any further errors; the IR dump only when verbose
  (``verbose=True`` or ``PIPELINE_MLIR_VERBOSE=1``);
- one :class:`CheckerWarning` per warning, through ``warnings.warn_explicit``
  at the user's line (so ``-W error`` and ``pytest.warns`` see them).

Diagnostics at a line of a Python file come from a module built with the
Python API, so their IR spellings (``#pipeline.group<thread, 4>``,
``pipeline.producer.tail``) are rewritten in that API's words
(``CooperativeGroup(Agent.Thread, 4)``, ``producer_tail(state)``) by the
table :data:`PYTHON_TERMS`; diagnostics of hand-written ``.mlir`` keep the
IR's words.
"""

import os
import re
import warnings

import mlir.ir as ir

ENV_VERBOSE = "PIPELINE_MLIR_VERBOSE"
_OP_DUMP = "see current operation:"


class CompileError(RuntimeError):
    """A pass failed; the message carries the diagnostics (see the module
    docstring)."""


class CheckerWarning(UserWarning):
    """A warning of the protocol checker or the lowering: code that may be
    intended but often is a bug (see its message)."""


def is_verbose(verbose=None):
    """``verbose`` if given, else whether ``$PIPELINE_MLIR_VERBOSE`` is set
    to something other than ``0``."""
    if verbose is not None:
        return bool(verbose)
    return os.environ.get(ENV_VERBOSE, "") not in ("", "0")


def _file_location(loc):
    """(file, line, col) of the first file location inside ``loc``, or None."""
    if loc.is_a_file():
        return loc.filename, loc.start_line, loc.start_col
    if loc.is_a_name():
        return _file_location(loc.child_loc)
    if loc.is_a_callsite():
        return _file_location(loc.callee)
    if loc.is_a_fused():
        for inner in loc.locations:
            found = _file_location(inner)
            if found:
                return found
    return None


def _agent(name):
    return {"thread": "Thread", "warp": "Warp", "threadblock": "ThreadBlock",
            "cluster": "ThreadBlockCluster"}.get(name, name)


def _role(name):
    return {"producer": "Producer", "consumer": "Consumer"}.get(name, name)


#: IR spelling -> Python API spelling, applied in order to diagnostics of
#: modules built from Python (longest forms first).
PYTHON_TERMS = [
    (re.compile(r"#pipeline\.group<(\w+), ([^>]+)>"),
     lambda m: f"CooperativeGroup(Agent.{_agent(m.group(1))}, {m.group(2)})"),
    (re.compile(r"pipeline\.state\.make : !pipeline\.state<(\d+), (\w+)>"),
     lambda m: f"make_pipeline_state(PipelineUserType.{_role(m.group(2))}, {m.group(1)})"),
    (re.compile(r"pipeline\.state\.make without operands"),
     "make_pipeline_state(PipelineUserType..., stages)"),
    (re.compile(r"yield `?pipeline\.state\.advance`? of the state once per stage used"),
     "call state.advance() once per stage used in the loop body"),
    (re.compile(r"`?pipeline\.state\.advance`?"), "state.advance()"),
    (re.compile(r"nvvm\.wgmma\.wait\.group\.sync\.aligned N with N <= 0\b"),
     "wgmma.wait_group(0)"),
    (re.compile(r"nvvm\.wgmma\.wait\.group\.sync\.aligned N with N <= (\d+)"),
     r"wgmma.wait_group(N) with N <= \1"),
    (re.compile(r"\(nvvm\.wgmma\.commit\.group\.sync\.aligned\)"), "(wgmma.commit_group())"),
    (re.compile(r"\(nvvm\.wgmma\.wait\.group\.sync\.aligned\)"), "(wgmma.wait_group(N))"),
    (re.compile(r"\bnvvm\.wgmma\.mma_async\b"), "WarpgroupMma.mma"),
    (re.compile(r"\bwgmma\.mma_async with A in registers \(llvm\.inline_asm\)"),
     "WarpgroupMma.mma_rs"),
    (re.compile(r"\b(?:pipeline\.)?producer\.barrier\b"), "producer_get_barrier(state)"),
    (re.compile(r"\bpipeline\.init_(arrive|wait)\b"), r"pipeline_init_\1()"),
    (re.compile(r"`?\b(?:pipeline\.)?producer\.tail`?"), "producer_tail(state)"),
    (re.compile(r"\b(?:pipeline\.)?producer\.(acquire|commit|try_acquire)\b"), r"producer_\1"),
    (re.compile(r"\b(?:pipeline\.)?consumer\.(wait|release|try_wait)\b"), r"consumer_\1"),
    (re.compile(r"\bpipeline\.copy\.tma_load\b"), "tma_load"),
    (re.compile(r"\bpipeline\.copy\.bulk\b"), "bulk_copy"),
    (re.compile(r"\bpipeline\.create\b"), "create"),
    (re.compile(r"\bextra_tx\b(?!_count)"), "extra_tx_count"),
    # the register budget (RegisterBudgetChecks.cpp)
    (re.compile(r"\bsetmaxnreg\.(inc|dec) (\d+) runs in\b"),
     lambda m: f"set_max_registers({m.group(2)}, increase={m.group(1) == 'inc'}) runs in"),
    (re.compile(r"\bthe setmaxnreg\.inc of\b"), "the set_max_registers of"),
    (re.compile(r"\ba setmaxnreg\.dec to at most\b"), "a set_max_registers(N, increase=False) with N at most"),
]


def python_terms(text):
    """``text`` with the IR spellings of :data:`PYTHON_TERMS` replaced."""
    for pattern, repl in PYTHON_TERMS:
        text = pattern.sub(repl, text)
    return text


def _where(loc):
    found = _file_location(loc)
    return f"{found[0]}:{found[1]}:{found[2]}" if found else None


def _from_python(loc):
    found = _file_location(loc)
    return bool(found) and found[0].endswith(".py")


def format_diagnostic(diag, verbose=None):
    """``file:line:col: error: message`` and its notes, one per line (IR
    dumps only when verbose); in the Python API's words when ``diag`` is at
    a line of a Python file."""
    verbose = is_verbose(verbose)
    severity = str(diag.severity).rsplit(".", 1)[-1].lower()
    where = _where(diag.location)
    lines = [f"{where}: {severity}: {diag.message}" if where
             else f"{severity}: {diag.message}"]
    for note in diag.notes:
        if note.message.startswith(_OP_DUMP) and not verbose:
            continue
        at = _where(note.location)
        lines.append(f"  {at}: note: {note.message}" if at
                     else f"  note: {note.message}")
    text = "\n".join(lines)
    return python_terms(text) if _from_python(diag.location) else text


def run(passes, op, what, verbose=None):
    """Run the pass manager ``passes`` on ``op``. Warnings become
    :class:`CheckerWarning` (at the diagnostic's line); a failure raises
    :class:`CompileError` (see the module docstring). ``what`` names the
    pass pipeline in verbose messages."""
    found = []

    def collect(diag):
        if diag.severity == ir.DiagnosticSeverity.WARNING:
            found.append((format_diagnostic(diag, verbose), _file_location(diag.location)))
            return True  # handled: not printed to stderr
        return False

    handler = op.context.attach_diagnostic_handler(collect)
    try:
        passes.run(op)
    except ir.MLIRError as err:
        raise CompileError(_error_text(err, what, verbose)) from None
    finally:
        handler.detach()
        for text, at in found:
            file, line = (at[0], at[1]) if at else ("<pipeline-mlir>", 0)
            warnings.warn_explicit(text, CheckerWarning, file, line)


def _error_text(err, what, verbose):
    diags = list(err.error_diagnostics)
    if not diags:
        return f"{what}: {err}"
    text = "\n".join(format_diagnostic(d, verbose) for d in diags)
    if is_verbose(verbose):
        text += f"\n(pass pipeline: {what})"
    return text


__all__ = ["CheckerWarning", "CompileError", "ENV_VERBOSE", "PYTHON_TERMS",
           "format_diagnostic", "is_verbose", "python_terms", "run"]
