"""`[cluster]`: several gateway workers sharing one PostgreSQL (gateway/cluster/). Absent, the
gateway runs alone on one machine and needs no database."""

from __future__ import annotations

import re

from pydantic import Field, SecretStr, field_validator, model_validator

from clawgate.kernel.config_sections import Section

# A worker's name is shown by `clawgate cluster status` and typed to `drain`: keep it plain.
_WORKER_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"


class ClusterConfig(Section):
    # postgresql://user:password@host:port/database (a secret: it may carry the password).
    database_url: SecretStr
    worker_name: str = Field(pattern=_WORKER_NAME)
    # A worker that has not renewed its leases for this long loses its agents and accounts.
    lease_seconds: float = Field(15.0, ge=2, le=600)
    # How many connections this worker keeps open to the database.
    pool_size: int = Field(4, ge=2, le=50)

    @field_validator("database_url")
    @classmethod
    def _postgres_url(cls, value: SecretStr) -> SecretStr:
        if not re.match(r"^postgres(ql)?://", value.get_secret_value()):
            raise ValueError("database_url must start with postgresql://")
        return value

    @model_validator(mode="after")
    def _renewals_fit(self) -> ClusterConfig:
        if self.renew_seconds < 0.5:
            raise ValueError("lease_seconds is too short to renew in time")
        return self

    @property
    def renew_seconds(self) -> float:
        """How often leases are renewed: three tries fit in one lease."""
        return self.lease_seconds / 4
