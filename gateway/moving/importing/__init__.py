"""Importers: another assistant's workspace, transcripts and jobs mapped into a clawgate
agent. `openclaw.py` and `nanobot.py` each read their own layout into a `Haul` (plan.py);
`plan.py` compares it with the agent's workspace (new, already there, conflict), reports, and
with `--apply` writes; `transcripts.py` turns a conversation into an archived clawgate
transcript marked imported."""
