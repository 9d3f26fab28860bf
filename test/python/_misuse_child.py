"""Child of test_misuse_random.py: random misuse of the Python builders.

    python _misuse_child.py SEED CASES

Each case builds a kernel with one randomly chosen builder call whose
arguments are drawn from good and bad values (huge ints, wrong types, enum
integers out of range), then verifies the kernel and, for a sample, lowers it
to PTX. Allowed outcomes: success, PipelineError/ScopeError, or
TypeError/ValueError whose message names what was wrong (not nanobind's
"incompatible function arguments"). Anything else prints UNEXPECTED; an
abort kills this process, which the parent sees as its return code.
"""

import random
import sys

from pipeline_mlir.dialects import pipeline as pl
from pipeline_mlir.kernel import Kernel
from pipeline_mlir.pipeline import (
    Agent, CooperativeGroup, PipelineAsync, PipelineError, PipelineOrder,
    PipelineTmaAsync, PipelineTmaStore, PipelineTmaUmma, PipelineUserType,
    ScopeError, make_pipeline_state)

INTS = [0, 1, 2, 3, 4, 7, 8, 9, 32, 128, 1024, 14528, 14529, (1 << 20) - 1, 1 << 20,
        (1 << 31) - 1, 1 << 31, -1, -(1 << 31), (1 << 63) - 1, 1 << 63, -(1 << 63),
        10 ** 20, 10 ** 30]
OTHERS = [None, True, 2.0, "2", b"2", [2], (2,), object(), Agent.Thread,
          PipelineUserType.Consumer]


def value(rng, good):
    r = rng.random()
    if r < 0.35:
        return good
    if r < 0.85:
        return rng.choice(INTS)
    return rng.choice(OTHERS)


def group(rng):
    if rng.random() < 0.8:
        return CooperativeGroup(Agent.Thread, 32 if rng.random() < 0.5 else 1)
    return CooperativeGroup(rng.choice(list(Agent)), value(rng, 1))


def case(rng):
    """One builder call (may raise) and whether to lower the kernel."""
    which = rng.randrange(9)
    chip = "sm_100a" if which == 4 else "sm_90a"
    k = Kernel("k", chip=chip, block_dim=value(rng, 128) if rng.random() < 0.2 else 128)
    with k:
        if which == 0:
            PipelineAsync.create(num_stages=value(rng, 2), producer_group=group(rng),
                                 consumer_group=group(rng), name=value(rng, "ab"))
        elif which == 1:
            p = PipelineTmaAsync.create(
                num_stages=value(rng, 2), producer_group=CooperativeGroup(Agent.Thread),
                consumer_group=group(rng), tx_count=value(rng, 64),
                cta_layout_vmnk=rng.choice([None, (1, 2, 1, 1), (value(rng, 1), 1, 1, 1)]))
            s = make_pipeline_state(PipelineUserType.Producer, p.num_stages)
            p.producer_acquire(s, extra_tx_count=value(rng, None))
            s.advance(value(rng, None))
        elif which == 2:
            PipelineOrder.create(None, value(rng, 2), value(rng, 2), value(rng, 0),
                                 group(rng), name=value(rng, None))
        elif which == 3:
            make_pipeline_state(rng.choice([PipelineUserType.Producer, value(rng, 0)]),
                                value(rng, 4), simple=value(rng, False))
        elif which == 4:
            PipelineTmaUmma.create(num_stages=value(rng, 2),
                                   producer_group=CooperativeGroup(Agent.Thread),
                                   consumer_group=CooperativeGroup(Agent.Thread),
                                   tx_count=value(rng, 64))
        elif which == 5:
            PipelineTmaStore.create(num_stages=value(rng, 2),
                                    producer_group=group(rng), name=value(rng, None))
        elif which == 6:
            pl.PipelineType.get(value(rng, 0), value(rng, 2),
                                producer=pl.CooperativeGroupAttr.get(0, 1),
                                consumer=pl.CooperativeGroupAttr.get(0, 1),
                                multicast=value(rng, 0), cta_group=value(rng, 1))
        elif which == 7:
            pl.CooperativeGroupAttr.get(value(rng, 0), value(rng, 32))
            pl.ClusterLayoutAttr.get(value(rng, 1), value(rng, 2), 1, 1)
        else:
            pl.StateType.get(value(rng, 2), value(rng, 1), simple=value(rng, False))
    return k


def main():
    seed, cases = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    for n in range(cases):
        try:
            k = case(rng)
            k.verify()
            if rng.random() < 0.1:
                k.to_ptx()
            print(f"case {n}: ok")
        except (PipelineError, ScopeError) as e:
            print(f"case {n}: {type(e).__name__}")
        except (TypeError, ValueError) as e:
            msg = str(e)
            if not msg or "incompatible function arguments" in msg:
                print(f"case {n}: UNEXPECTED {type(e).__name__}: {msg[:300]}")
            else:
                print(f"case {n}: {type(e).__name__}")
        except Exception as e:  # noqa: BLE001 - any other error is the bug
            print(f"case {n}: UNEXPECTED {type(e).__name__}: {str(e)[:300]}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
