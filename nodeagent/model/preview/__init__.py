"""The drain plan a NodeMaintenance would follow, computed without changing anything
(``nodeagent plan``).

Pure: the maintenance, the nodes, the pods of the selected nodes and the PodDisruptionBudgets
come in as plain JSON-shaped dicts; a :class:`~.results.Preview` comes out. Every decision is the
controller's own: :func:`~nodeagent.model.maintenance.validate` for the spec and its effective
plan, :func:`~nodeagent.model.maintenance.selects` for the nodes,
:meth:`~nodeagent.model.draintargets.pods.PodInfo.from_pod` for what a pod is (its type, priority,
whether it is skipped or terminal) and :func:`~nodeagent.model.draintargets.tracks.plan_targets` for
the drainTargets in force at each entry. A pod goes in the first entry whose drainTargets
target it: the entry at which the controller asks for its eviction.

The order is that of this maintenance alone: another maintenance sharing a node can hold it back
or fast-forward it (KEP-4212 "DrainTargets"), which the controller reports on the node's
drainMessage once it drains.

Modules: :mod:`.compute` makes the :class:`~.results.Preview` (:mod:`.results`), with the
budgets that would refuse each pod (:mod:`.refusals`); :mod:`.text` renders it as a table.
"""
