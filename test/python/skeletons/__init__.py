"""Synchronization skeletons (no math) of public kernels, built with the
builders as a user porting them would write them: the protocol checker and
the simulator must find nothing in them (test_skeletons.py).

Each module mirrors the *synchronization* of one kernel from its documented
design -- which warps produce and consume which pipeline, how states are
threaded through tile and k loops, where tails and epilogue barriers go --
with the math left out. None of the kernels' code is copied.
"""
