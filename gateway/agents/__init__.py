"""Several agents in one gateway.

    unit.py     AgentUnit: one agent's runtime, dispatcher (its own turn limit) and scheduler
    build.py    the daemon's agents and channel accounts, built from the config and a Router

Which agent answers a message is decided in one place: gateway/routing.py.
"""
