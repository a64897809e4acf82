"""The NodeMaintenance decision (KEP-4212 "NodeMaintenance Controller", DESIGN 2.1): state in,
intended actions out. Pure: no I/O and no clock. The shell
(:mod:`nodeagent.controllers.nodemaintenance.controller`) gathers :class:`~.inputs.Inputs` from
its informers, calls :func:`~.decide.decide` and applies the :class:`~.actions.Actions` in this
order:

1. add the finalizer;
2. cordon nodes (``cordon``);
3. write the status (compare-and-swap on the maintenance's resourceVersion) - progress is
   recorded before anything acts on it, so drainTargets never run ahead of what is stored;
4. write the drain status of the other maintenances of the same drainTargets resolution
   (``neighbours``; the resolution is one computation, stored for all of them at once);
5. emit the events;
6. EvictionRequests: delete, create, add the requester, remove the requester; delete the pods
   of an escalated drain deadline (``delete_pods``);
7. uncordon nodes (``uncordon``);
8. remove the finalizer.

One module per concern, read in this order:

- :mod:`.inputs`, :mod:`.actions`: what a decision reads and what it returns;
- :mod:`.selection`: which nodes a maintenance has to do with, which maintenances intersect;
- :mod:`.pods`, :mod:`.requests`: the pods and EvictionRequests of each node as the decision
  reads them, derived once and kept in ``Inputs.recall``;
- :mod:`.context`: every maintenance of the inputs as the decision needs it, built once before
  the steps below;
- :mod:`.limits`: drain slots under ``nodeMaintenance.maxDrainingNodes``;
- :mod:`.targets`: the drainTargets resolution across intersecting maintenances;
- :mod:`.cordon`: cordon and uncordon;
- :mod:`.status`, :mod:`.summary`, :mod:`.deadline`: status, nodeStatuses and drainMessage,
  ``status.summary``, conditions, the drain deadline;
- :mod:`.evictions`: EvictionRequests to create, withdraw or delete, and the DeletePods
  escalation;
- :mod:`.decide`: the steps put together.

Validation. The CRD's CEL rules (stage transitions, immutable drainPlan) are not evaluated by
every API server (the simulated one skips CEL), so the same checks are made here
(:func:`nodeagent.model.maintenance.validate`): a stage that moved backwards (judged against
``status.stageStatuses``), a drainPlan that differs from the one recorded in
``status.drainPlanHash``, an invalid nodeSelector or drain plan make the maintenance
``Valid=False`` with a message naming the problem, and nothing else is touched (except on
deletion, which always runs Complete so the finalizer can go).
"""
