"""The in-place update extension: a Runtime SDK extension (Cluster API's `InPlaceUpdates`)
run beside the management cluster, with this agent on the nodes as the executor.

`decide.py` answers CanUpdateMachineSet and CanUpdateMachine with JSON patches for the
changes the agent makes in place (pure); `update.py` carries an UpdateMachine out through
the Machine's AgentConfig object, which the node's daemon applies with its trial and
rollback (agent.daemon.reconfigure); `server.py` serves the hooks over HTTPS.
"""
