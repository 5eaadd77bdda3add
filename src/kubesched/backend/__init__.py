"""The scheduler's backend, as upstream's ``pkg/scheduler/backend``: the cache of nodes and assumed
pods, and the scheduling queue. Plugins and the framework never import it."""
