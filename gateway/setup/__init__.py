"""Setting clawgate up: what the owner decides, written to the config and the workspace.

onboard.py   `clawgate onboard`: a starter config and the workspace template, never
             overwriting a file
wizard.py    onboard's questions and live checks (model, key, bots) and the config editor
             (tomlkit: comments kept, validated, atomic 0600 write)
approvals.py the owner's decisions on pairing requests and groups, shared by the CLI and
             the dashboard
"""
