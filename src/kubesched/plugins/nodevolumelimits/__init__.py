"""NodeVolumeLimits (upstream pkg/scheduler/framework/plugins/nodevolumelimits)."""

from kubesched.plugins.nodevolumelimits.plugin import NodeVolumeLimits

__all__ = ["NodeVolumeLimits"]
