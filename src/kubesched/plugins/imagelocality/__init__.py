from kubesched.plugins.imagelocality.plugin import ImageLocality, normalized_image_name

__all__ = ["ImageLocality", "normalized_image_name"]
