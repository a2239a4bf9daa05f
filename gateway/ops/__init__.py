"""Operating a gateway: checks, retention, logs, the service unit, the status file.

doctor.py        `clawgate doctor`: findings (problem / note / ok) before they bite
online.py        `doctor --online`: one model call and each bot's identity call
housekeeping.py  retention of downloads, archives and MEMORY.md versions
logs.py          stderr and the rotated private log file, redacted
service.py       `clawgate service install`: the systemd unit
status_file.py   <data_dir>/status.json, written by the daemon, read by `clawgate status`
"""
