"""VolumeRestrictions (upstream pkg/scheduler/framework/plugins/volumerestrictions)."""

from kubesched.plugins.volumerestrictions.plugin import VolumeRestrictions

__all__ = ["VolumeRestrictions"]
