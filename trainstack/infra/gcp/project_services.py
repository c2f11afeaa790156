"""The Google APIs the stack uses, enabled on the project and never disabled by `pulumi destroy`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp


@dataclass(frozen=True, kw_only=True)
class ProjectServicesArgs:
    project: str
    services: Sequence[str]


class ProjectServices(pulumi.ComponentResource):
    enabled: list[gcp.projects.Service]  # what every other GCP resource depends on

    def __init__(self, name: str, args: ProjectServicesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:gcp:ProjectServices", name, None, opts)
        self.enabled = [
            gcp.projects.Service(
                f"{name}-{service.split('.', 1)[0]}",
                project=args.project,
                service=service,
                # Other workloads in the project may use the same API: destroy leaves it on.
                disable_on_destroy=False,
                disable_dependent_services=False,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for service in args.services
        ]
        self.register_outputs({"services": [service.service for service in self.enabled]})
