"""The `registry` section: how many trainer images the ECR repository keeps."""

from __future__ import annotations

from dataclasses import dataclass

from components.config.reader import Section


@dataclass(frozen=True)
class RegistryConfig:
    # The newest N images stay; older ones expire. Tags are immutable (one per commit), so N
    # is the rollback depth: running workloads pin digests, so keep more than you run at once.
    keep_images: int


def parse_registry(section: Section) -> RegistryConfig:
    keep = section.integer("keepImages", fix="keep at least the images running workloads pin, e.g. 30")
    section.finish()
    return RegistryConfig(keep_images=keep)
