"""drainTargets resolution across intersecting NodeMaintenances (KEP-4212 "Pod Selection",
"Pod Selection and DrainTargets Example", NodeMaintenanceNodeStatus.DrainTargets).

Pure and deterministic: :func:`~.resolution.resolve` takes views of the maintenances (with the
progress they stored last time) and the pods of their nodes, and returns per maintenance and
node the new drainTargets, drainMessage, counters, the pods to request evictions for, and
fast-forward notes.

Model
-----
*Target sets.* A drainTargets list is a set of tracks ``(podType, podSelector)`` each with a
priority; a pod is targeted when some track of its type, with no selector or a matching one,
reaches its priority (targets accumulate, KEP "PodTypes and Label Selectors Progression").
"A covers B" is judged track by track (:func:`~.tracks.targets_within`): selector implication
is not analysed, which errs on the side of targeting less.

*Position.* Each Drain maintenance is at one entry of its effective plan and *wants* the
targets of the plan up to that entry (:func:`~.tracks.plan_targets`). The position is not part
of the KEP status, so the controller should persist
:attr:`~.results.MaintenanceDrain.entry_index` and pass it back as
:attr:`~.views.MaintenanceView.entry_index`; without it (or if it lags) the position is
recovered from the stored drainTargets, conservatively.

*Per node.* "If there are multiple NodeMaintenances for a node, the least powerful DrainTargets
among them are selected and set for all the NodeMaintenances for that node" and "DrainTargets
cannot backtrack": ``targets(node) = stored progress of every maintenance on the node (the
floor) joined with the meet of their wants``. A younger maintenance whose want is below the
floor is thereby fast-forwarded ("it will be fast-forwarded for node one regardless of its
drainPlan"), which is reported so the controller can emit an Event.

*Advancing.* A maintenance moves to its next entry when its own want is in force on all its
nodes and no targeted pod is left on its nodes or on the nodes of the maintenances it
intersects. The KEP: "The next entry in the plan can be selected once all the nodes of a
NodeMaintenance have finished evacuation and all the NodeMaintenances of intersecting nodes
have finished evacuation for the current drain targets." That is one hop (a maintenance sharing
a node), not the whole connected group; the example cannot tell the two apart (maintenance-b
waits for node two of maintenance-a, which it intersects through node one), so the text
decides. Chains still wait on each other through the per-node meet: a maintenance limited on a
node cannot advance until the limiting one does. Resolution repeats until nothing advances, so
entries that target no pod are passed at once.

If maintenances with incomparable selector entries limit each other and nothing is left to
evacuate around them, none would ever be at its entry; then the one(s) with the lowest current
entry advance (plan order key), which cannot target more than any want allows.

One module per concern, read in this order:

- :mod:`.tracks`: target sets and the targets of a plan position;
- :mod:`.pods`: the pods of a node as the resolution reads them, and those targets cover;
- :mod:`.views`, :mod:`.results`: what a resolution reads of each maintenance and returns;
- :mod:`.resolver`: plan positions and advancing them until nothing moves;
- :mod:`.resolution`: :func:`~.resolution.resolve`, and the drainMessages, counters and
  fast-forwards of the positions reached.
"""
