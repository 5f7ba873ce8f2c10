"""The incremental paths: how a derivative's result is brought up to date from its inputs' new records.

Which path runs is the query's mode (:mod:`odfproj.transform.modes`); :mod:`odfproj.transform.coordinator`
dispatches to one of these, and falls back to the full path (recompute and diff) when an update's own
records rule the incremental one out:

- :mod:`.stateless`: the query over the new records only (it is linear in its inputs);
- :mod:`.grouped` with :mod:`.aggregation` (a ``GROUP BY`` split into partial aggregates that merge):
  the new records' partials merged into the groups the derivative keeps;
- :mod:`.joins` with :mod:`.join_keys` (which input columns a join's equalities read) and
  :mod:`.join_sides` (the other inputs' rows read by key through the join index): each changed input's
  new records joined with what they meet.

Every path ends in the same ``net_changes``/``write_changes``, so each writes the block the full path
would (docs/design/transforms.md).
"""
