"""`clawgate service install`: a systemd unit that keeps the gateway running.

Two flavours. A **system** unit (`/etc/systemd/system`, `User=` the installing user) gets
the full sandbox: a read-only OS and home, writable only the workspace and data_dir, private
/tmp and /dev, kernel knobs locked. A **user** unit (`~/.config/systemd/user`) gets only the
options that need no namespaces (no new privileges, seccomp-based restrictions, umask): in a
user manager the mount-namespace options (ProtectSystem=, PrivateTmp=, ...) make systemd set
up an unprivileged user namespace, and where distributions restrict those (Ubuntu's
AppArmor policy, `kernel.unprivileged_userns_clone=0`) the unit would not start at all. They
are in the unit, commented out, for machines that allow them.
"""

from __future__ import annotations

import os
import pwd
import sys
from dataclasses import dataclass
from pathlib import Path

UNIT_NAME = "clawgate.service"
SYSTEM_UNIT_DIR = Path("/etc/systemd/system")
USER_UNIT_DIR = Path("~/.config/systemd/user")
ENV_FILE = "service.env"  # optional, under data_dir: CLAWGATE_* secrets kept out of the config
STOP_TIMEOUT_SECONDS = 45  # the gateway's 20 s turn grace, the reply flush, and room to spare

# Namespace-free hardening: valid in a user manager as well as the system one.
_COMMON_HARDENING = (
    "NoNewPrivileges=yes",
    "UMask=0077",
    "LockPersonality=yes",
    "RestrictRealtime=yes",
    "RestrictSUIDSGID=yes",
    "SystemCallArchitectures=native",
    "RestrictNamespaces=yes",
    "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6",
)
_SYSTEM_HARDENING = (
    "PrivateTmp=yes",
    "PrivateDevices=yes",
    "ProtectSystem=strict",
    "ProtectHome=read-only",
    "ProtectKernelTunables=yes",
    "ProtectKernelModules=yes",
    "ProtectKernelLogs=yes",
    "ProtectControlGroups=yes",
    "ProtectClock=yes",
    "ProtectHostname=yes",
    "CapabilityBoundingSet=",
)


@dataclass(frozen=True)
class UnitSpec:
    command: tuple[str, ...]  # the clawgate executable (absolute), without arguments
    config_path: Path | None  # pinned with --config and CLAWGATE_CONFIG when set
    workspace: Path
    data_dir: Path
    user_mode: bool
    user: str  # User= of a system unit


def clawgate_command() -> tuple[str, ...]:
    """How to start the running clawgate again: its console script, absolute."""
    invoked = Path(sys.argv[0])
    if invoked.name == "clawgate" and invoked.is_file():
        return (str(invoked.absolute()),)
    # `python -m clawgate.gateway`, or a test runner: the script next to this interpreter.
    sibling = Path(sys.executable).with_name("clawgate")
    if sibling.is_file():
        return (str(sibling),)
    return (sys.executable, "-m", "clawgate.gateway")


def invoking_user() -> str:
    """The user who ran the command; under sudo, the one who typed sudo."""
    sudo_user = os.environ.get("SUDO_USER")
    if os.geteuid() == 0 and sudo_user and sudo_user != "root":
        return sudo_user
    return pwd.getpwuid(os.geteuid()).pw_name


def default_unit_dir(user_mode: bool) -> Path:
    return USER_UNIT_DIR.expanduser() if user_mode else SYSTEM_UNIT_DIR


def quote(value: str) -> str:
    """One word for a unit file: `%` escaped (specifiers), quoted when it holds spaces."""
    escaped = value.replace("%", "%%")
    if any(ch.isspace() or ch in "\"'\\" for ch in value):
        return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return escaped


def render_unit(spec: UnitSpec) -> str:
    args = list(spec.command)
    if spec.config_path is not None:
        args += ["--config", str(spec.config_path)]
    args.append("gateway")
    service = [
        "Type=simple",
        f"ExecStart={' '.join(quote(a) for a in args)}",
        "Restart=on-failure",
        "RestartSec=5",
        # Exit 2 is a configuration error: restarting cannot fix it.
        "RestartPreventExitStatus=2",
        f"TimeoutStopSec={STOP_TIMEOUT_SECONDS}",
    ]
    if spec.config_path is not None:
        service.append(f"Environment={quote(f'CLAWGATE_CONFIG={spec.config_path}')}")
    # One path, taken whole (no quoting): only `%` needs escaping.
    env_file = str(spec.data_dir.absolute() / ENV_FILE).replace("%", "%%")
    service.append(f"EnvironmentFile=-{env_file}")
    if not spec.user_mode:
        service.append(f"User={spec.user}")
    service += ["", "# Hardening", *_COMMON_HARDENING]
    writable = " ".join(f"-{quote(str(p))}" for p in _writable(spec))
    if spec.user_mode:
        service += [
            "# Where unprivileged user namespaces are allowed, these work in a user unit too",
            "# (elsewhere they stop the unit from starting):",
            *(f"#{line}" for line in _SYSTEM_HARDENING if not line.startswith("Capability")),
            f"#ReadWritePaths={writable}",
        ]
    else:
        service += [*_SYSTEM_HARDENING, f"ReadWritePaths={writable}"]
    unit = [
        "[Unit]",
        "Description=clawgate AI assistant gateway",
    ]
    if not spec.user_mode:
        unit += ["After=network-online.target", "Wants=network-online.target"]
    target = "default.target" if spec.user_mode else "multi-user.target"
    sections = [*unit, "", "[Service]", *service, "", "[Install]", f"WantedBy={target}"]
    return "# Written by `clawgate service install`.\n" + "\n".join(sections) + "\n"


def _writable(spec: UnitSpec) -> list[Path]:
    """workspace and data_dir, without one that lies inside the other."""
    paths = sorted(
        {spec.workspace.absolute(), spec.data_dir.absolute()}, key=lambda p: (len(p.parts), str(p))
    )
    kept: list[Path] = []
    for path in paths:
        if not any(path.is_relative_to(parent) for parent in kept):
            kept.append(path)
    return kept


def enable_commands(user_mode: bool) -> list[str]:
    if user_mode:
        return [
            "systemctl --user daemon-reload && systemctl --user enable --now clawgate",
            # Without lingering the user manager, and the gateway, stop at logout.
            "loginctl enable-linger $USER",
            "journalctl --user -u clawgate -f",
        ]
    return [
        "sudo systemctl daemon-reload && sudo systemctl enable --now clawgate",
        "journalctl -u clawgate -f",
    ]
