"""Planning: everything decided before a row moves (seed 000, DataX's job planning, and better).

- :mod:`wormhole.planning.channels`: the channel count from the speed settings (adjustChannelNumber);
- :mod:`wormhole.planning.assign`: splits to task groups over resource marks (assignFairly/doAssign)
  and channels to groups (adjustChannelNumPerTaskGroup);
- :mod:`wormhole.planning.plan`: the :class:`Plan` a run follows, shown by ``wormhole plan``.
"""
