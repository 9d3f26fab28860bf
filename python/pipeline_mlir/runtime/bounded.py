"""Bounded memo tables: every cache on a call path has a limit.

A serving loop sees new shapes, new tensors and new streams for as long as
it runs, so a dict that remembers each of them grows without end.
``put_bounded`` keeps insertion order and drops the oldest entry when the
table is full: a dropped entry is only recomputed (a shape checked again, a
module object made again), never wrong.
"""


def put_bounded(table, key, value, limit):
    """``table[key] = value``, first dropping the oldest entry when
    ``table`` already holds ``limit`` entries; returns ``value``."""
    if key not in table and len(table) >= limit:
        table.pop(next(iter(table)))
    table[key] = value
    return value
