"""VolumeZone (upstream pkg/scheduler/framework/plugins/volumezone)."""

from kubesched.plugins.volumezone.plugin import VolumeZone

__all__ = ["VolumeZone"]
