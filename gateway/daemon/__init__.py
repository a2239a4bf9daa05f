"""The running daemon: what carries a message from a channel to an agent and back.

    gateway.py     Gateway: channels around one or more agents in one TaskGroup; shutdown order
    unit.py        AgentUnit: one agent's runtime, dispatcher (its own turn limit) and scheduler
    dispatcher.py  per-session queues, turn limit, /stop, the rate limiter's admission
    routing.py     Router: which agent answers a message (the one place), which bot replies
    control.py     the local control socket: `clawgate agent` talks to a running gateway
    ratelimit.py   per-sender flood protection
    lock.py        one process owns a data_dir
    heap.py        glibc's heap set for a process that runs for weeks (large blocks unmapped)

Built by the composition root (gateway/app.py); nothing here imports the dashboard or the CLI.
"""
