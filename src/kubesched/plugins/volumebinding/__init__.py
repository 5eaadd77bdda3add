"""VolumeBinding (upstream pkg/scheduler/framework/plugins/volumebinding)."""

from kubesched.plugins.volumebinding.plugin import VolumeBinding

__all__ = ["VolumeBinding"]
